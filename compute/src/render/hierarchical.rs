//! Hierarchical `min` and `max`.
//!
//! A minimum cannot ride in a difference (retracting the minimum needs the
//! runner-up), but it can be computed in stages: each group's rows are
//! first reduced to one partial row per hash bucket (4096 buckets, then
//! 64), and the group's result is the min/max of its partial rows. A change
//! re-reduces one small bucket and O(fan-in) partial rows per level above
//! it, instead of the whole group. Each stage uses DataFusion's own min/max
//! accumulators, so ordering (NULLs skipped, NaN, strings by bytes) is
//! exactly that of ad hoc queries.

use std::rc::Rc;
use std::sync::Arc;

use arrow::datatypes::{Field, Schema};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use differential_dataflow::AsCollection;
use differential_dataflow::hashable::Hashable;
use timely::dataflow::Scope;
use timely::dataflow::operators::core::OkErr;

use super::arranged::reduce;
use super::compile::{ReduceSpec, encode_values, predicate};
use super::reduce::{Finish, Output, split_output};
use super::{Coll, Diff, Time, eval_op};
use crate::error::{DataflowError, Result};
use crate::row::{Row, RowCodec};

/// Bucket counts of the levels below the final reduction, largest first.
const LEVELS: [u64; 2] = [1 << 12, 1 << 6];

/// An aggregate as compilation describes it: the function, its FILTER and
/// its argument expressions.
pub(crate) type AggParts<'a> = (
    &'a Arc<AggregateFunctionExpr>,
    &'a Option<Arc<dyn PhysicalExpr>>,
    &'a [Arc<dyn PhysicalExpr>],
);

/// One min/max aggregate: the function, its FILTER, its argument.
struct MinMaxAgg {
    agg: Arc<AggregateFunctionExpr>,
    filter: Option<Arc<dyn PhysicalExpr>>,
    arg: Arc<dyn PhysicalExpr>,
}

/// The min/max aggregates of a reduction, when every aggregate is one.
pub(crate) struct MinMax {
    aggs: Vec<MinMaxAgg>,
    /// Rows of the aggregates' argument values (NULL where FILTER rejects).
    values: Arc<RowCodec>,
}

impl MinMax {
    /// The hierarchical form of these aggregates, if all are plain min/max.
    pub fn new(aggs: &[AggParts<'_>], input: &Schema) -> Option<Result<MinMax>> {
        let mut out = Vec::with_capacity(aggs.len());
        let mut fields = Vec::with_capacity(aggs.len());
        for (agg, filter, args) in aggs {
            let name = agg.fun().name();
            if !(name == "min" || name == "max") || agg.is_distinct() || args.len() != 1 {
                return None;
            }
            let ty = args[0].data_type(input).ok()?;
            fields.push(Field::new(format!("v{}", fields.len()), ty, true));
            out.push(MinMaxAgg {
                agg: Arc::clone(agg),
                filter: (*filter).clone(),
                arg: Arc::clone(&args[0]),
            });
        }
        if out.is_empty() {
            return None;
        }
        Some(
            RowCodec::new(Arc::new(Schema::new(fields)))
                .map(|values| MinMax {
                    aggs: out,
                    values: Arc::new(values),
                })
                .map_err(Into::into),
        )
    }

    /// Each input row's argument values, as a row.
    fn arguments(&self, batch: &arrow::array::RecordBatch) -> DfResult<Vec<Row>> {
        let n = batch.num_rows();
        let columns = self
            .aggs
            .iter()
            .map(|MinMaxAgg { filter, arg, .. }| {
                let values = arg.evaluate(batch)?.into_array(n)?;
                Ok(match filter {
                    Some(f) => arrow::compute::nullif(
                        &values,
                        &arrow::compute::not(&predicate(f, batch)?)?,
                    )?,
                    None => values,
                })
            })
            .collect::<DfResult<Vec<_>>>()?;
        Ok(self.values.encode_columns(&columns, n)?)
    }

    /// The min/max of each column over `rows` of argument values.
    fn combine(&self, rows: &[&Row]) -> DfResult<Vec<ScalarValue>> {
        let batch = self.values.decode(rows.iter().copied())?;
        self.aggs
            .iter()
            .enumerate()
            .map(|(i, MinMaxAgg { agg, .. })| {
                let mut acc = agg.create_accumulator()?;
                if batch.num_rows() > 0 {
                    acc.update_batch(&[Arc::clone(batch.column(i))])?;
                }
                acc.evaluate()
            })
            .collect()
    }

    /// Partial values as a row of argument values.
    fn partial(&self, values: Vec<ScalarValue>) -> DfResult<Row> {
        encode_values(&self.values, values)
    }
}

/// The distinct rows of a group (multiplicities do not change a min/max).
fn present<'a>(values: &[(&'a Row, Diff)]) -> Vec<&'a Row> {
    values
        .iter()
        .filter(|(_, d)| *d > 0)
        .map(|(r, _)| *r)
        .collect()
}

/// A reduction whose aggregates (those of `class(spec)`) are all min/max.
pub(crate) fn min_max<'s, O>(
    scope: Scope<'s, Time>,
    input: Coll<'s, Row>,
    spec: Arc<ReduceSpec>,
    class: fn(&ReduceSpec) -> Option<&MinMax>,
    start: Time,
    finish: Finish<O>,
) -> Output<'s, O>
where
    O: differential_dataflow::Data + super::arranged::HeapSize,
{
    let arg_spec = Arc::clone(&spec);
    let (mut keyed, key_errs): (Coll<'s, (Row, Row)>, _) = eval_op(
        input,
        "MinMaxArguments",
        Arc::clone(&spec.input),
        move |batch, _rows: &[Row]| {
            let Some(mm) = class(&arg_spec) else {
                return Ok(vec![]);
            };
            arg_spec.key.pair(batch, mm.arguments(batch)?)
        },
    );
    let mut errs = key_errs;
    for buckets in LEVELS {
        let level_spec = Arc::clone(&spec);
        let reduced = reduce::<_, _, Result<Row, DataflowError>, _, Diff, _>(
            keyed.map(move |(k, v): (Row, Row)| ((k, v.hashed() % buckets), v)),
            "MinMaxBucket",
            move |_key, values: &[(&Row, Diff)], output| {
                let Some(mm) = class(&level_spec) else {
                    return;
                };
                let rows = present(values);
                let result = mm
                    .combine(&rows)
                    .and_then(|v| mm.partial(v))
                    .map_err(|e| DataflowError::from_datafusion(&e));
                output.push((result, 1));
            },
        );
        let (ok, err) =
            reduced
                .inner
                .ok_err::<Vec<_>, _, Vec<_>, _, _>(|(((k, _bucket), result), t, r)| match result {
                    Ok(row) => Ok(((k, row), t, r)),
                    Err(e) => Err((e, t, r)),
                });
        keyed = ok.as_collection();
        errs = errs.concat(err.as_collection());
    }
    let final_spec = Arc::clone(&spec);
    let group_finish = Rc::clone(&finish);
    let reduced = reduce::<_, _, Result<O, DataflowError>, _, Diff, _>(
        keyed,
        "MinMax",
        move |key: &Row, values: &[(&Row, Diff)], output| {
            let Some(mm) = class(&final_spec) else {
                return;
            };
            let rows = present(values);
            let result = mm
                .combine(&rows)
                .and_then(|v| group_finish(key, v))
                .map_err(|e| DataflowError::from_datafusion(&e));
            output.push((result, 1));
        },
    )
    .map(|(_key, result)| result);
    // A global aggregate over no rows has one row of NULLs.
    let empty = spec.global.then(|| match class(&spec) {
        Some(mm) => mm.combine(&[]).and_then(|v| finish(&Row::default(), v)),
        None => Err(datafusion::error::DataFusionError::Internal(
            "not min/max".into(),
        )),
    });
    let (ok, err) = split_output(scope, start, reduced, empty);
    (ok, errs.concat(err))
}

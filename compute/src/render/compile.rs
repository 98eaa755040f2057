//! Compiling a [`RelPlan`] into the evaluators its operators run: row
//! codecs and DataFusion physical expressions, built once per dataflow and
//! shared by every worker.
//!
//! Compiling also validates the plan, so a dataflow that compiles renders.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{Field, FieldRef, Schema};
use datafusion::common::{DFSchemaRef, Result as DfResult, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::physical_expr::aggregate::{AggregateFunctionExpr, LoweredAggregateBuilder};
use datafusion::physical_expr::{PhysicalExpr, create_physical_expr};
use freshet_repr::GlobalId;

use super::accumulable::{AccumAgg, Accumulable};
use super::hierarchical::MinMax;
use super::ordered::{TopKSpec, WindowSpec};
use crate::error::Result;
use crate::row::{Row, RowCodec};
use freshet_compute_types::{DataflowDesc, Export, JoinKind, RelPlan, TimeOp};

/// A plan node with its evaluators.
pub(crate) enum Node {
    Get {
        id: GlobalId,
        codec: Arc<RowCodec>,
    },
    ArrangedGet {
        index: GlobalId,
    },
    Constant {
        rows: Vec<Row>,
    },
    Mfp {
        input: Box<Node>,
        eval: Arc<MfpEval>,
    },
    TemporalFilter {
        input: Box<Node>,
        eval: Arc<TemporalEval>,
    },
    Join {
        left: Box<Node>,
        right: Box<Node>,
        spec: Arc<JoinSpec>,
    },
    Reduce {
        input: Box<Node>,
        spec: Arc<ReduceSpec>,
    },
    Distinct {
        input: Box<Node>,
    },
    Window {
        input: Box<Node>,
        spec: Arc<WindowSpec>,
    },
    TopK {
        input: Box<Node>,
        spec: Arc<TopKSpec>,
    },
    Union {
        inputs: Vec<Node>,
    },
}

impl Node {
    /// How each reduction is maintained, in the order `RelPlan`'s
    /// `Display` prints the reductions (pre-order, children in order).
    pub(crate) fn reduce_strategies(&self, out: &mut Vec<&'static str>) {
        match self {
            Node::Get { .. } | Node::ArrangedGet { .. } | Node::Constant { .. } => {}
            Node::Mfp { input, .. }
            | Node::TemporalFilter { input, .. }
            | Node::Distinct { input }
            | Node::Window { input, .. }
            | Node::TopK { input, .. } => input.reduce_strategies(out),
            Node::Reduce { input, spec } => {
                out.push(if spec.accumulable.is_some() {
                    "accumulable: O(1) per change"
                } else if spec.min_max.is_some() {
                    "hierarchical min/max"
                } else if spec.collation.is_some() {
                    "collated: accumulable + hierarchical, joined on the key"
                } else {
                    "recomputes each changed group"
                });
                input.reduce_strategies(out);
            }
            Node::Join { left, right, .. } => {
                left.reduce_strategies(out);
                right.reduce_strategies(out);
            }
            Node::Union { inputs } => inputs.iter().for_each(|i| i.reduce_strategies(out)),
        }
    }
}

/// Compile `plan`.
pub(crate) fn compile(plan: &RelPlan) -> Result<Node> {
    Ok(match plan {
        RelPlan::Get { id, schema } => Node::Get {
            id: *id,
            codec: codec(schema)?,
        },
        RelPlan::ArrangedGet { index, .. } => Node::ArrangedGet { index: *index },
        RelPlan::Constant { schema, batches } => {
            let codec = codec(schema)?;
            let mut rows = Vec::new();
            for b in batches {
                rows.extend(codec.encode_columns(b.columns(), b.num_rows())?);
            }
            Node::Constant { rows }
        }
        RelPlan::Mfp {
            input,
            input_schema,
            filter,
            projection,
            schema,
        } => Node::Mfp {
            eval: Arc::new(MfpEval {
                input: codec(input.schema().as_ref())?,
                filter: filter
                    .as_ref()
                    .map(|f| physical(f, input_schema))
                    .transpose()?,
                projection: projection
                    .iter()
                    .map(|e| physical(e, input_schema))
                    .collect::<DfResult<_>>()?,
                output: codec(schema)?,
            }),
            input: Box::new(compile(input)?),
        },
        RelPlan::TemporalFilter {
            input,
            input_schema,
            bounds,
        } => Node::TemporalFilter {
            eval: Arc::new(TemporalEval {
                input: codec(input.schema().as_ref())?,
                bounds: bounds
                    .iter()
                    .map(|b| Ok((b.op, physical(&b.expr, input_schema)?, b.units.max(1))))
                    .collect::<DfResult<_>>()?,
            }),
            input: Box::new(compile(input)?),
        },
        RelPlan::Join {
            left,
            right,
            left_schema,
            right_schema,
            left_keys,
            right_keys,
            kind,
            nulls_equal,
            filter,
            pair_schema,
            schema: _,
        } => {
            let left_codec = codec(&left.schema())?;
            let right_codec = codec(&right.schema())?;
            let pair_codec = codec(pair_schema.inner())?;
            Node::Join {
                spec: Arc::new(JoinSpec {
                    left_key: KeyEval::new(
                        Arc::clone(&left_codec),
                        left_keys,
                        left_schema,
                        *nulls_equal,
                    )?,
                    right_key: KeyEval::new(
                        Arc::clone(&right_codec),
                        right_keys,
                        right_schema,
                        *nulls_equal,
                    )?,
                    kind: *kind,
                    filter: filter
                        .as_ref()
                        .map(|f| -> Result<PairFilter> {
                            Ok(PairFilter {
                                codec: Arc::clone(&pair_codec),
                                predicate: physical(f, pair_schema)?,
                            })
                        })
                        .transpose()?,
                    left_null: left_codec.null_row()?,
                    right_null: right_codec.null_row()?,
                }),
                left: Box::new(compile(left)?),
                right: Box::new(compile(right)?),
            }
        }
        RelPlan::Reduce {
            input,
            input_schema,
            group,
            aggregates,
            schema,
        } => {
            let input_codec = codec(&input.schema())?;
            let props = ExecutionProps::new();
            let planning = PhysicalPlanningContext::default();
            let physical_input = input_schema.as_arrow();
            let aggs = aggregates
                .iter()
                .map(|e| -> Result<AggEval> {
                    let lowered = LoweredAggregateBuilder::new(
                        e,
                        input_schema,
                        physical_input,
                        &props,
                        &planning,
                    )
                    .with_name(e.schema_name().to_string())
                    .build()?;
                    let mut args = lowered.aggregate.expressions();
                    args.extend(lowered.order_bys.iter().map(|s| Arc::clone(&s.expr)));
                    Ok(AggEval {
                        agg: lowered.aggregate,
                        filter: lowered.filter,
                        args,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let n_group = group.len();
            let agg_fields: Vec<_> = schema.fields().iter().skip(n_group).cloned().collect();
            let agg_codec = codec(&Schema::new(agg_fields.clone()))?;
            let accumulable = Accumulable::new(
                aggs.iter()
                    .map(|a| AccumAgg::new(&a.agg, &a.filter, &a.args, input_codec.schema()))
                    .collect(),
            );
            let min_max = MinMax::new(
                &aggs
                    .iter()
                    .map(|a| (&a.agg, &a.filter, a.args.as_slice()))
                    .collect::<Vec<_>>(),
                input_codec.schema(),
            )
            .transpose()?;
            let collation = if accumulable.is_none() && min_max.is_none() {
                Collation::new(&aggs, input_codec.schema(), &agg_fields)?
            } else {
                None
            };
            Node::Reduce {
                spec: Arc::new(ReduceSpec {
                    accumulable,
                    min_max,
                    collation,
                    key: KeyEval::new(Arc::clone(&input_codec), group, input_schema, true)?,
                    input: input_codec,
                    aggs,
                    output: agg_codec,
                    global: group.is_empty(),
                }),
                input: Box::new(compile(input)?),
            }
        }
        RelPlan::Distinct { input } => Node::Distinct {
            input: Box::new(compile(input)?),
        },
        RelPlan::Window {
            input,
            input_schema,
            window_exprs,
            schema,
        } => Node::Window {
            spec: Arc::new(WindowSpec::new(
                codec(&input.schema())?,
                input_schema,
                window_exprs,
                codec(schema)?,
            )?),
            input: Box::new(compile(input)?),
        },
        RelPlan::TopK {
            input,
            input_schema,
            group,
            order,
            offset,
            limit,
            number,
            ..
        } => Node::TopK {
            spec: Arc::new(TopKSpec::new(
                codec(&input.schema())?,
                input_schema,
                group,
                order,
                *offset,
                *limit,
                *number,
            )?),
            input: Box::new(compile(input)?),
        },
        RelPlan::Union { inputs, .. } => Node::Union {
            inputs: inputs.iter().map(compile).collect::<Result<_>>()?,
        },
    })
}

/// The key of an index dataflow (`None` for a materialized view).
pub(crate) fn compile_index_key(desc: &DataflowDesc) -> Result<Option<Arc<KeyEval>>> {
    match &desc.export {
        Export::Shard | Export::Subscribe { .. } => Ok(None),
        Export::Index { keys, schema } => {
            let input = codec(&desc.plan.schema())?;
            // NULL keys are kept: a peek of `SELECT *` must see every row.
            Ok(Some(Arc::new(KeyEval::new(input, keys, schema, true)?)))
        }
    }
}

fn codec(schema: &Schema) -> Result<Arc<RowCodec>> {
    Ok(Arc::new(RowCodec::new(freshet_repr::nullable_schema(
        schema,
    ))?))
}

fn physical(e: &Expr, schema: &DFSchemaRef) -> DfResult<Arc<dyn PhysicalExpr>> {
    create_physical_expr(
        e,
        schema,
        &ExecutionProps::new(),
        &PhysicalPlanningContext::default(),
    )
}

fn evaluate(e: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> DfResult<ArrayRef> {
    e.evaluate(batch)?.into_array(batch.num_rows())
}

/// A predicate's verdict per row: true keeps it; false and NULL drop it.
pub(crate) fn predicate(e: &Arc<dyn PhysicalExpr>, batch: &RecordBatch) -> DfResult<BooleanArray> {
    let a = evaluate(e, batch)?;
    let b = a
        .as_any()
        .downcast_ref::<BooleanArray>()
        .ok_or_else(|| DataFusionError::Internal("predicate is not boolean".into()))?;
    // NULL counts as false.
    Ok(match b.nulls() {
        Some(n) => BooleanArray::new(b.values() & n.inner(), None),
        None => b.clone(),
    })
}

/// Something evaluators can decode: a row, or a pair of rows that decodes
/// as their concatenation.
pub(crate) trait AsRow {
    /// The row to decode.
    fn as_row(&self) -> Cow<'_, Row>;
}

impl AsRow for Row {
    fn as_row(&self) -> Cow<'_, Row> {
        Cow::Borrowed(self)
    }
}

impl AsRow for (Row, Row) {
    fn as_row(&self) -> Cow<'_, Row> {
        Cow::Owned(self.0.concat(&self.1))
    }
}

/// Filter, then project.
pub(crate) struct MfpEval {
    pub input: Arc<RowCodec>,
    filter: Option<Arc<dyn PhysicalExpr>>,
    projection: Vec<Arc<dyn PhysicalExpr>>,
    output: Arc<RowCodec>,
}

impl MfpEval {
    /// The output row of each input row, `None` where the filter drops it.
    pub fn apply(&self, batch: &RecordBatch) -> DfResult<Vec<Option<Row>>> {
        let (kept, mask) = match &self.filter {
            Some(f) => {
                let mask = predicate(f, batch)?;
                (filter_record_batch(batch, &mask)?, Some(mask))
            }
            None => (batch.clone(), None),
        };
        let columns = self
            .projection
            .iter()
            .map(|e| evaluate(e, &kept))
            .collect::<DfResult<Vec<_>>>()?;
        let mut rows = self
            .output
            .encode_columns(&columns, kept.num_rows())?
            .into_iter();
        let n = batch.num_rows();
        Ok(match mask {
            None => rows.map(Some).collect(),
            Some(mask) => (0..n)
                .map(|i| if mask.value(i) { rows.next() } else { None })
                .collect(),
        })
    }
}

/// The times each row of a temporal filter's input is in its output.
pub(crate) struct TemporalEval {
    pub input: Arc<RowCodec>,
    bounds: Vec<(TimeOp, Arc<dyn PhysicalExpr>, i64)>,
}

/// The logical times `[from, until)` a row is valid in (`until`: `None`
/// for ever).
pub(crate) type Validity = (u64, Option<u64>);

impl TemporalEval {
    /// Each input row's validity; `None` where a bound is NULL (the
    /// comparison is never true) or the interval is empty.
    pub fn validity(&self, batch: &RecordBatch) -> DfResult<Vec<Option<Validity>>> {
        let n = batch.num_rows();
        let mut from: Vec<Option<i64>> = vec![Some(0); n];
        let mut until: Vec<Option<Option<i64>>> = vec![Some(None); n];
        for (op, expr, units) in &self.bounds {
            let values = evaluate(expr, batch)?;
            let values = arrow::compute::cast(&values, &arrow::datatypes::DataType::Float64)?;
            let values = values
                .as_any()
                .downcast_ref::<arrow::array::Float64Array>()
                .ok_or_else(|| DataFusionError::Internal("a time bound is not numeric".into()))?;
            let units = *units as f64;
            for i in 0..n {
                if values.is_null(i) {
                    from[i] = None;
                    continue;
                }
                // `time · units <op> v`, solved for whole milliseconds.
                let v = values.value(i) / units;
                let clamp = |x: f64| x.clamp(0.0, i64::MAX as f64) as i64;
                let (lower, upper) = match op {
                    TimeOp::GtEq => (Some(clamp(v.ceil())), None),
                    TimeOp::Gt => (Some(clamp(v.floor() + 1.0)), None),
                    TimeOp::LtEq => (None, Some(clamp(v.floor() + 1.0))),
                    TimeOp::Lt => (None, Some(clamp(v.ceil()))),
                    TimeOp::Eq => (Some(clamp(v.ceil())), Some(clamp(v.floor() + 1.0))),
                };
                if let (Some(l), Some(f)) = (lower, from[i].as_mut()) {
                    *f = (*f).max(l);
                }
                if let (Some(u), Some(cur)) = (upper, until[i].as_mut()) {
                    *cur = Some(cur.map_or(u, |c| c.min(u)));
                }
            }
        }
        Ok(from
            .into_iter()
            .zip(until)
            .map(|(f, u)| {
                let f = f? as u64;
                let u = u?.map(|u| u as u64);
                match u {
                    Some(u) if u <= f => None,
                    u => Some((f, u)),
                }
            })
            .collect())
    }
}

/// Key expressions over an input.
pub(crate) struct KeyEval {
    pub input: Arc<RowCodec>,
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    key: Arc<RowCodec>,
    nulls_equal: bool,
}

impl KeyEval {
    /// How keys are encoded.
    pub fn key_codec(&self) -> Arc<RowCodec> {
        Arc::clone(&self.key)
    }

    pub(crate) fn new(
        input: Arc<RowCodec>,
        exprs: &[Expr],
        schema: &DFSchemaRef,
        nulls_equal: bool,
    ) -> Result<Self> {
        let exprs: Vec<_> = exprs
            .iter()
            .map(|e| physical(e, schema))
            .collect::<DfResult<_>>()?;
        let fields: Vec<_> = exprs
            .iter()
            .enumerate()
            .map(|(i, e)| {
                Ok(Field::new(
                    format!("k{i}"),
                    e.data_type(schema.as_arrow())?,
                    true,
                ))
            })
            .collect::<DfResult<_>>()?;
        Ok(KeyEval {
            input,
            exprs,
            key: Arc::new(RowCodec::new(Arc::new(Schema::new(fields)))?),
            nulls_equal,
        })
    }

    /// Each row's key; `None` for keys with a NULL unless NULLs match.
    /// Each row's key paired with its value from `values`; rows whose key
    /// is dropped (a NULL key that must not match) are `None`.
    pub fn pair<V>(
        &self,
        batch: &RecordBatch,
        values: impl IntoIterator<Item = V>,
    ) -> DfResult<Vec<Option<(Row, V)>>> {
        Ok(self
            .keys(batch)?
            .into_iter()
            .zip(values)
            .map(|(k, v)| k.map(|k| (k, v)))
            .collect())
    }

    pub fn keys(&self, batch: &RecordBatch) -> DfResult<Vec<Option<Row>>> {
        let columns = self
            .exprs
            .iter()
            .map(|e| evaluate(e, batch))
            .collect::<DfResult<Vec<_>>>()?;
        let keys = if columns.is_empty() {
            vec![Row::default(); batch.num_rows()]
        } else {
            self.key.encode_columns(&columns, batch.num_rows())?
        };
        Ok(keys
            .into_iter()
            .enumerate()
            .map(|(i, k)| (self.nulls_equal || columns.iter().all(|c| c.is_valid(i))).then_some(k))
            .collect())
    }
}

/// A residual join predicate over concatenated pairs.
pub(crate) struct PairFilter {
    pub codec: Arc<RowCodec>,
    predicate: Arc<dyn PhysicalExpr>,
}

impl PairFilter {
    /// Whether each pair passes.
    pub fn apply(&self, batch: &RecordBatch) -> DfResult<Vec<bool>> {
        let mask = predicate(&self.predicate, batch)?;
        Ok((0..batch.num_rows()).map(|i| mask.value(i)).collect())
    }
}

/// What a join needs.
pub(crate) struct JoinSpec {
    pub left_key: KeyEval,
    pub right_key: KeyEval,
    pub kind: JoinKind,
    pub filter: Option<PairFilter>,
    pub left_null: Row,
    pub right_null: Row,
}

/// One aggregate: the DataFusion aggregate, its FILTER, and the argument
/// (and ORDER BY) expressions its accumulator consumes.
pub(crate) struct AggEval {
    agg: Arc<AggregateFunctionExpr>,
    filter: Option<Arc<dyn PhysicalExpr>>,
    args: Vec<Arc<dyn PhysicalExpr>>,
}

impl AggEval {
    fn evaluate(&self, batch: &RecordBatch) -> DfResult<ScalarValue> {
        let batch = match &self.filter {
            Some(f) => filter_record_batch(batch, &predicate(f, batch)?)?,
            None => batch.clone(),
        };
        let args = self
            .args
            .iter()
            .map(|e| evaluate(e, &batch))
            .collect::<DfResult<Vec<_>>>()?;
        let mut acc = self.agg.create_accumulator()?;
        if batch.num_rows() > 0 {
            acc.update_batch(&args)?;
        }
        acc.evaluate()
    }
}

/// What a reduction needs.
pub(crate) struct ReduceSpec {
    pub input: Arc<RowCodec>,
    pub key: KeyEval,
    aggs: Vec<AggEval>,
    /// Set when every aggregate is accumulable (O(1) per change).
    pub accumulable: Option<Accumulable>,
    /// Set when every aggregate is min/max (hierarchical, O(log group)).
    pub min_max: Option<MinMax>,
    /// Set when the aggregates mix those two classes (and nothing else).
    pub collation: Option<Collation>,
    output: Arc<RowCodec>,
    /// No GROUP BY: one output row even for empty input.
    pub global: bool,
}

impl ReduceSpec {
    /// The aggregates of one group's rows (each repeated by its
    /// multiplicity), as a row.
    pub fn aggregate(&self, rows: &[&Row]) -> DfResult<Row> {
        let batch = self.input.decode(rows.iter().copied())?;
        let values = self
            .aggs
            .iter()
            .map(|a| a.evaluate(&batch))
            .collect::<DfResult<Vec<_>>>()?;
        self.encode_aggregates(values)
    }

    /// Aggregate values as a row of the output's aggregate columns.
    pub fn encode_aggregates(&self, values: Vec<ScalarValue>) -> DfResult<Row> {
        encode_values(&self.output, values)
    }
}

/// Values as one row of `codec`'s columns (cast to its types).
pub(crate) fn encode_values(codec: &RowCodec, values: Vec<ScalarValue>) -> DfResult<Row> {
    let columns = values
        .into_iter()
        .zip(codec.schema().fields())
        .map(|(v, f)| {
            let v = if v.data_type() == *f.data_type() {
                v
            } else {
                v.cast_to(f.data_type())?
            };
            v.to_array()
        })
        .collect::<DfResult<Vec<_>>>()?;
    codec
        .encode_columns(&columns, 1)?
        .pop()
        .ok_or_else(|| DataFusionError::Internal("no row encoded".into()))
}

/// A reduction whose aggregates mix accumulable and min/max ones: each
/// class is reduced separately to partial rows of its own aggregates,
/// which are joined on the key and put back in the query's order.
pub(crate) struct Collation {
    pub accum: Accumulable,
    pub accum_codec: Arc<RowCodec>,
    accum_at: Vec<usize>,
    pub min_max: MinMax,
    pub min_max_codec: Arc<RowCodec>,
    min_max_at: Vec<usize>,
}

impl Collation {
    fn new(aggs: &[AggEval], input: &Schema, fields: &[FieldRef]) -> Result<Option<Collation>> {
        let mut accum = Vec::new();
        let mut accum_at = Vec::new();
        let mut min_max = Vec::new();
        let mut min_max_at = Vec::new();
        for (i, a) in aggs.iter().enumerate() {
            if let Some(acc) = AccumAgg::new(&a.agg, &a.filter, &a.args, input) {
                accum.push(Some(acc));
                accum_at.push(i);
            } else if MinMax::new(&[(&a.agg, &a.filter, a.args.as_slice())], input).is_some() {
                min_max.push((&a.agg, &a.filter, a.args.as_slice()));
                min_max_at.push(i);
            } else {
                return Ok(None);
            }
        }
        let (Some(accum), Some(min_max)) = (Accumulable::new(accum), MinMax::new(&min_max, input))
        else {
            return Ok(None);
        };
        let pick = |at: &[usize]| -> Result<Arc<RowCodec>> {
            codec(&Schema::new(
                at.iter()
                    .map(|i| Arc::clone(&fields[*i]))
                    .collect::<Vec<_>>(),
            ))
        };
        Ok(Some(Collation {
            accum,
            accum_codec: pick(&accum_at)?,
            accum_at,
            min_max: min_max?,
            min_max_codec: pick(&min_max_at)?,
            min_max_at,
        }))
    }

    /// The aggregate values in the query's order from the two partial rows.
    pub fn assemble(&self, accum: &Row, min_max: &Row) -> DfResult<Vec<ScalarValue>> {
        let mut out = vec![ScalarValue::Null; self.accum_at.len() + self.min_max_at.len()];
        for (codec, at, row) in [
            (&self.accum_codec, &self.accum_at, accum),
            (&self.min_max_codec, &self.min_max_at, min_max),
        ] {
            let batch = codec.decode(std::iter::once(row))?;
            for (j, i) in at.iter().enumerate() {
                out[*i] = ScalarValue::try_from_array(batch.column(j), 0)?;
            }
        }
        Ok(out)
    }
}

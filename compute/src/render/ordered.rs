//! Order-dependent operators: window functions and top-k.
//!
//! Both are reductions whose logic sorts a group of rows. Window functions
//! recompute each partition a change touches with DataFusion's own window
//! expressions (O(partition) per change). Top-k is hierarchical: rows are
//! first reduced to their top `offset + limit` within many small hash
//! buckets, then within fewer larger buckets, then overall, so a change
//! re-sorts one small bucket and O(limit × fan-in) rows per level above it
//! instead of the whole input.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, UInt32Array};
use arrow::compute::{SortColumn, lexsort_to_indices, take, take_record_batch};
use datafusion::common::{DFSchemaRef, Result as DfResult};
use datafusion::error::DataFusionError;
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{Expr, SortExpr};
use datafusion::physical_expr::window::WindowExpr;
use datafusion::physical_expr::{PhysicalSortExpr, create_physical_sort_exprs};
use datafusion::physical_planner::create_window_expr;
use differential_dataflow::AsCollection;
use differential_dataflow::hashable::Hashable;
use timely::dataflow::operators::core::OkErr;

use super::arranged::reduce;
use super::compile::KeyEval;
use super::{Coll, Diff, Rendered, eval_op, expand};
use crate::error::{DataflowError, Result};
use crate::row::{Row, RowCodec};

/// Window expressions sharing one PARTITION BY.
pub(crate) struct WindowSpec {
    pub input: Arc<RowCodec>,
    key: KeyEval,
    exprs: Vec<Arc<dyn WindowExpr>>,
    output: Arc<RowCodec>,
}

impl WindowSpec {
    pub fn new(
        input: Arc<RowCodec>,
        input_schema: &DFSchemaRef,
        window_exprs: &[Expr],
        output: Arc<RowCodec>,
    ) -> Result<Self> {
        let props = ExecutionProps::new();
        let planning = PhysicalPlanningContext::default();
        let mut partition: Option<Vec<Expr>> = None;
        let mut exprs = Vec::with_capacity(window_exprs.len());
        for e in window_exprs {
            let Expr::WindowFunction(w) = e.clone().unalias_nested().data else {
                return Err(DataFusionError::Plan(format!("not a window function: {e}")).into());
            };
            match &partition {
                None => partition = Some(w.params.partition_by.clone()),
                Some(p) if *p == w.params.partition_by => {}
                Some(_) => {
                    return Err(DataFusionError::NotImplemented(
                        "window functions with different PARTITION BY in one operator".into(),
                    )
                    .into());
                }
            }
            exprs.push(create_window_expr(e, input_schema, &props, &planning)?);
        }
        let partition = partition.unwrap_or_default();
        Ok(WindowSpec {
            key: KeyEval::new(Arc::clone(&input), &partition, input_schema, true)?,
            input,
            exprs,
            output,
        })
    }

    /// The output rows of one partition.
    fn evaluate(&self, rows: &[&Row]) -> DfResult<Vec<Row>> {
        let batch = self.input.decode(rows.iter().copied())?;
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        for w in &self.exprs {
            let order = w.order_by_columns(&batch)?;
            let value = if order.is_empty() {
                w.evaluate(&batch)?
            } else {
                // Evaluate in the window's order, then put the values back
                // beside the rows they belong to.
                let idx = lexsort_to_indices(&order, None)?;
                let sorted = take_record_batch(&batch, &idx)?;
                let values = w.evaluate(&sorted)?;
                let mut inverse = vec![0u32; idx.len()];
                for (pos, i) in idx.values().iter().enumerate() {
                    inverse[*i as usize] = pos as u32;
                }
                take(&values, &UInt32Array::from(inverse), None)?
            };
            columns.push(value);
        }
        let columns = columns
            .into_iter()
            .zip(self.output.schema().fields())
            .map(|(c, f)| {
                if c.data_type() == f.data_type() {
                    Ok(c)
                } else {
                    arrow::compute::cast(&c, f.data_type())
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.output.encode_columns(&columns, batch.num_rows())?)
    }
}

/// `ORDER BY .. OFFSET .. LIMIT ..`, per group.
pub(crate) struct TopKSpec {
    pub input: Arc<RowCodec>,
    group: KeyEval,
    order: Vec<PhysicalSortExpr>,
    offset: usize,
    limit: Option<usize>,
    /// Append each kept row's 1-based position (`row_number()`).
    numbering: Option<RowCodec>,
}

impl TopKSpec {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        input: Arc<RowCodec>,
        input_schema: &DFSchemaRef,
        group: &[Expr],
        order: &[SortExpr],
        offset: usize,
        limit: Option<usize>,
        number: bool,
    ) -> Result<Self> {
        let numbering = number
            .then(|| {
                RowCodec::new(Arc::new(arrow::datatypes::Schema::new(vec![
                    arrow::datatypes::Field::new(
                        "row_number",
                        arrow::datatypes::DataType::UInt64,
                        true,
                    ),
                ])))
            })
            .transpose()?;
        let group = KeyEval::new(Arc::clone(&input), group, input_schema, true)?;
        let order = create_physical_sort_exprs(
            order,
            input_schema,
            &ExecutionProps::new(),
            &PhysicalPlanningContext::default(),
        )?;
        Ok(TopKSpec {
            input,
            group,
            order,
            offset,
            limit,
            numbering,
        })
    }

    /// A group's result: its rows at the requested positions, numbered if
    /// asked.
    fn finish(&self, rows: &[&Row]) -> DfResult<Vec<Row>> {
        let kept = self.select(rows, self.offset, self.limit)?;
        let Some(codec) = &self.numbering else {
            return Ok(kept);
        };
        let numbers: ArrayRef = Arc::new(arrow::array::UInt64Array::from_iter_values(
            (1..=kept.len() as u64).map(|n| n + self.offset as u64),
        ));
        let numbers = codec.encode_columns(&[numbers], kept.len())?;
        Ok(kept
            .iter()
            .zip(&numbers)
            .map(|(r, n)| r.concat(n))
            .collect())
    }

    /// Rows `skip..skip + keep` of `rows` in the sort order (ties broken by
    /// the rows' encodings, so the choice is deterministic).
    fn select(&self, rows: &[&Row], skip: usize, keep: Option<usize>) -> DfResult<Vec<Row>> {
        let end = keep.map_or(rows.len(), |k| (skip + k).min(rows.len()));
        if skip >= end {
            return Ok(vec![]);
        }
        if self.order.is_empty() {
            return Ok(rows[skip..end].iter().map(|r| (*r).clone()).collect());
        }
        let batch = self.input.decode(rows.iter().copied())?;
        let columns: Vec<SortColumn> = self
            .order
            .iter()
            .map(|s| s.evaluate_to_sort_column(&batch))
            .collect::<DfResult<_>>()?;
        // Rows arrive sorted by encoding, and the sort is stable.
        let idx = lexsort_to_indices(&columns, Some(end))?;
        Ok(idx.values()[skip..end]
            .iter()
            .map(|i| rows[*i as usize].clone())
            .collect())
    }
}

/// Rows grouped by `key`, each group replaced by `logic`'s rows.
fn reduce_groups<'s, K>(
    keyed: Coll<'s, (K, Row)>,
    name: &str,
    logic: impl FnMut(&[&Row]) -> DfResult<Vec<Row>> + 'static,
) -> (Coll<'s, Row>, Coll<'s, DataflowError>)
where
    K: differential_dataflow::ExchangeData + Hashable + super::arranged::HeapSize,
{
    let (ok, err) = reduce_keyed(keyed, name, logic);
    (ok.map(|(_key, row)| row), err)
}

/// [`reduce_groups`], keeping each output row's key.
fn reduce_keyed<'s, K>(
    keyed: Coll<'s, (K, Row)>,
    name: &str,
    mut logic: impl FnMut(&[&Row]) -> DfResult<Vec<Row>> + 'static,
) -> (Coll<'s, (K, Row)>, Coll<'s, DataflowError>)
where
    K: differential_dataflow::ExchangeData + Hashable + super::arranged::HeapSize,
{
    let reduced = reduce::<_, _, Result<Row, DataflowError>, _, Diff, _>(
        keyed,
        name,
        move |_key, values: &[(&Row, Diff)], output| {
            let rows = match expand(values.iter().map(|(r, d)| (*r, *d))) {
                Ok(rows) => rows,
                Err(e) => {
                    output.push((Err(e), 1));
                    return;
                }
            };
            match logic(&rows) {
                Ok(out) => {
                    let mut counts: BTreeMap<Row, Diff> = BTreeMap::new();
                    for r in out {
                        *counts.entry(r).or_default() += 1;
                    }
                    output.extend(counts.into_iter().map(|(r, n)| (Ok(r), n)));
                }
                Err(e) => output.push((Err(DataflowError::from_datafusion(&e)), 1)),
            }
        },
    );
    let (ok, err) = reduced
        .inner
        .ok_err::<Vec<_>, _, Vec<_>, _, _>(|((key, result), t, r)| match result {
            Ok(row) => Ok(((key, row), t, r)),
            Err(e) => Err((e, t, r)),
        });
    (ok.as_collection(), err.as_collection())
}

/// Render window functions over `input`.
pub(crate) fn render_window<'s>(input: Rendered<'s>, spec: Arc<WindowSpec>) -> Rendered<'s> {
    let key_spec = Arc::clone(&spec);
    let (keyed, key_errs) = eval_op(
        input.ok,
        "WindowPartition",
        Arc::clone(&spec.input),
        move |batch, rows: &[Row]| key_spec.key.pair(batch, rows.iter().cloned()),
    );
    let (ok, err) = reduce_groups(keyed, "Window", move |rows| spec.evaluate(rows));
    Rendered {
        ok,
        err: input.err.concat(key_errs).concat(err),
    }
}

/// Bucket counts of the levels of a hierarchical top-k, largest first.
const TOPK_LEVELS: [u64; 2] = [1 << 12, 1 << 6];

/// Render `ORDER BY .. OFFSET .. LIMIT ..` (per group) over `input`.
pub(crate) fn render_topk<'s>(input: Rendered<'s>, spec: Arc<TopKSpec>) -> Rendered<'s> {
    let key_spec = Arc::clone(&spec);
    let (mut keyed, key_errs): (Coll<'s, (Row, Row)>, _) = eval_op(
        input.ok,
        "TopKGroup",
        Arc::clone(&spec.input),
        move |batch, rows: &[Row]| key_spec.group.pair(batch, rows.iter().cloned()),
    );
    let mut err = input.err.concat(key_errs);
    // Lower levels keep every row that can be among the first
    // `offset + limit` of its group; without a limit nothing can be
    // dropped early.
    if let Some(limit) = spec.limit {
        let keep = spec.offset + limit;
        for buckets in TOPK_LEVELS {
            let level_spec = Arc::clone(&spec);
            let bucketed = keyed.map(move |(g, r): (Row, Row)| ((g, r.hashed() % buckets), r));
            let (ok, e) = reduce_keyed(bucketed, "TopKBucket", move |rows| {
                level_spec.select(rows, 0, Some(keep))
            });
            keyed = ok.map(|((g, _bucket), r)| (g, r));
            err = err.concat(e);
        }
    }
    let final_spec = Arc::clone(&spec);
    let (ok, e) = reduce_groups(keyed, "TopK", move |rows| final_spec.finish(rows));
    Rendered {
        ok,
        err: err.concat(e),
    }
}

//! Peeks through joins: a query that joins a keyed peek of one index with
//! other indexed objects, each on equalities that fix the other index's
//! whole key from the rows joined so far, is answered as an index
//! nested-loop join: peek the first index by its key, then for each
//! distinct key those rows give, read the next index by that key, and so
//! on; the query's filters, projection, sort and limit then run on the
//! joined rows as they do for a single peek ([`super::peek`]).
//!
//! This is the shape of a point query over a star schema (`SELECT ...
//! FROM facts JOIN dim ON dim.id = facts.d WHERE facts.k = $1`): a few
//! rows, each needing one more keyed read, where a DataFusion plan's
//! fixed cost (planning, hash tables, repartitioning) is a hundred times
//! the work. Only inner joins qualify, on a join tree that is left-deep
//! (each join's right side is one scan), and the first scan's index key
//! must be fixed by constants: without that the general path's hash join
//! is the better plan. A lookup only narrows: every join condition and
//! filter still runs on the joined rows, so the result is the query's.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions, UInt32Array};
use arrow::compute::{concat_batches, take};
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{DFSchemaRef, ParamValues, Result as DfResult, ScalarValue};
use datafusion::datasource::source_as_provider;
use datafusion::execution::SessionState;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    BinaryExpr, Expr, Join, JoinType, LogicalPlan, Operator, TableScan, Volatility,
};
use datafusion::physical_expr::PhysicalExpr;

use super::peek::{
    choose_index, column_equality, evaluable, index_peek, key_column, key_names, peekable_chain,
    physical, projected, scanned_object, simplified, simplify_steps, steps_of, with_params,
};
use crate::error::Result;
use crate::plan::{PeekFinish, PeekLookup, PeekPlan, PeekStep, QueryPlan};
use crate::statements::context::StatementContext;

/// `q` as a keyed peek joined with index lookups, if it has that shape.
pub(super) fn lookup_join_peek(cx: &StatementContext, q: &QueryPlan) -> Result<Option<PeekPlan>> {
    let Some(JoinChain { chain, base, joins }) = join_chain(&q.logical) else {
        return Ok(None);
    };
    if !bare(base) || joins.iter().any(|(_, right)| !bare(right)) {
        return Ok(None);
    }
    let Some(top) = joins.last().map(|(join, _)| Arc::clone(&join.schema)) else {
        return Ok(None);
    };
    let Some(above) = steps_of(&chain)? else {
        return Ok(None);
    };
    // Every join's condition, as a filter on the last join's rows (a
    // left-deep tree keeps each join's columns, by name, in the next).
    let mut steps = Vec::new();
    for (join, _) in &joins {
        let Some(condition) = condition(join) else {
            return Ok(None);
        };
        if let Some(predicate) = condition {
            if !evaluable(&predicate) {
                return Ok(None);
            }
            steps.push(PeekStep::Filter {
                predicate,
                input: Arc::clone(&top),
            });
        }
    }
    steps.extend(above);
    let parameterized = !q.logical.get_parameter_fields()?.is_empty();
    let steps = simplify_steps(cx.state, steps, parameterized)?;
    // What holds of every result row: the conjuncts of the filters on
    // the last join's rows (before any projection moves columns).
    let mut conjuncts: Vec<(&Expr, &DFSchemaRef)> = Vec::new();
    for step in &steps {
        let PeekStep::Filter { predicate, input } = step else {
            break;
        };
        conjuncts.extend(split_conjunction(predicate).into_iter().map(|c| (c, input)));
    }

    // The first scan: its index, keyed by constants.
    let base_provider = source_as_provider(&base.source)?;
    let Some(base_object) = scanned_object(cx, &base_provider)? else {
        return Ok(None);
    };
    let base_source = base_provider.schema();
    let base_width = projected(&base_source, base.projection.as_ref())?
        .fields()
        .len();
    let equalities: Vec<(String, Expr)> = conjuncts
        .iter()
        .filter_map(|(c, input)| column_equality(c, input))
        .filter(|(i, _)| *i < base_width)
        .map(|(i, value)| {
            let j = base.projection.as_ref().map_or(i, |p| p[i]);
            (base_source.field(j).name().clone(), value)
        })
        .collect();
    let Some((index, Some(key_exprs))) = choose_index(cx, base_object, &base_source, &equalities)?
    else {
        return Ok(None);
    };

    // Each join's right side: an index whose key the rows on its left fix.
    let mut lookups = Vec::with_capacity(joins.len());
    for (join, right) in &joins {
        let provider = source_as_provider(&right.source)?;
        let Some(object) = scanned_object(cx, &provider)? else {
            return Ok(None);
        };
        let source = provider.schema();
        let (left, right_schema) = (join.left.schema(), join.right.schema());
        let equalities: Vec<(String, Expr)> = conjuncts
            .iter()
            .filter_map(|(c, _)| lookup_equality(c, left, right_schema))
            .map(|(i, value)| {
                let j = right.projection.as_ref().map_or(i, |p| p[i]);
                (source.field(j).name().clone(), value)
            })
            .collect();
        let Some((right_index, Some(key))) = choose_index(cx, object, &source, &equalities)? else {
            return Ok(None);
        };
        lookups.push(PeekLookup {
            index: right_index.id,
            explain: format!(
                "Lookup index {} on ({}) = ({})",
                right_index.name,
                key_names(right_index),
                key.iter()
                    .map(|(e, _)| e.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            key,
            input: Arc::clone(left),
            columns: right.projection.clone(),
            output: Arc::new(join.schema.as_arrow().clone()),
        });
    }

    let finish = PeekFinish::new(
        q,
        base.projection.clone(),
        Arc::new(top.as_arrow().clone()),
        steps,
        Some(key_exprs),
        lookups,
    );
    Ok(Some(index_peek(cx, q, index, finish)))
}

/// A scan with nothing pushed into it.
fn bare(scan: &TableScan) -> bool {
    scan.fetch.is_none() && scan.filters.is_empty()
}

/// A plan's nodes above a left-deep tree of joins of scans.
struct JoinChain<'a> {
    /// The nodes above the top join, root first.
    chain: Vec<&'a LogicalPlan>,
    /// The leftmost scan.
    base: &'a TableScan,
    /// The joins from the innermost out, each with its right side's scan.
    joins: Vec<(&'a Join, &'a TableScan)>,
}

/// `plan` as a chain of peek-able nodes over inner joins whose left side
/// is a join or a scan and whose right side is a scan (either perhaps
/// aliased).
fn join_chain(plan: &LogicalPlan) -> Option<JoinChain<'_>> {
    let (chain, mut node) = peekable_chain(plan)?;
    if !matches!(node, LogicalPlan::Join(_)) {
        return None;
    }
    let mut joins = Vec::new();
    let base = loop {
        match unaliased(node) {
            LogicalPlan::Join(join) if join.join_type == JoinType::Inner => {
                joins.push((join, scan_of(&join.right)?));
                node = &join.left;
            }
            LogicalPlan::TableScan(scan) => break scan,
            _ => return None,
        }
    };
    joins.reverse();
    Some(JoinChain { chain, base, joins })
}

/// `plan` without the aliases over it.
fn unaliased(mut plan: &LogicalPlan) -> &LogicalPlan {
    while let LogicalPlan::SubqueryAlias(alias) = plan {
        plan = &alias.input;
    }
    plan
}

/// The scan `plan` is, perhaps aliased.
fn scan_of(plan: &LogicalPlan) -> Option<&TableScan> {
    match unaliased(plan) {
        LogicalPlan::TableScan(scan) => Some(scan),
        _ => None,
    }
}

/// A join's condition as one predicate (its equi-join pairs and its
/// filter); `Some(None)`: none (a cross join); `None`: a join a peek
/// cannot run (NULLs that compare equal).
fn condition(join: &Join) -> Option<Option<Expr>> {
    if join.null_equality != datafusion::common::NullEquality::NullEqualsNothing {
        return None;
    }
    Some(
        join.on
            .iter()
            .map(|(l, r)| l.clone().eq(r.clone()))
            .chain(join.filter.clone())
            .reduce(Expr::and),
    )
}

/// `right_column = expression of the left side's columns` (either way
/// round; the column perhaps widened by a cast that keeps values
/// distinct): the column's position in `right` and the expression. The
/// expression must give one value per left row, so it may not call a
/// volatile function (the lookup and the filter would see different
/// values).
fn lookup_equality(e: &Expr, left: &DFSchemaRef, right: &DFSchemaRef) -> Option<(usize, Expr)> {
    let Expr::BinaryExpr(BinaryExpr {
        left: a,
        op: Operator::Eq,
        right: b,
    }) = e
    else {
        return None;
    };
    [(a, b), (b, a)].into_iter().find_map(|(column, other)| {
        let i = key_column(column, right)?;
        let reads_left_only = other
            .column_refs()
            .iter()
            .all(|c| left.has_column(c) && !right.has_column(c));
        let volatile = other
            .exists(|n| {
                Ok(match n {
                    Expr::ScalarFunction(f) => {
                        f.func.signature().volatility == Volatility::Volatile
                            || f.name() == "mz_now"
                    }
                    _ => false,
                })
            })
            .unwrap_or(true);
        (reads_left_only && !volatile && evaluable(other)).then(|| (i, other.as_ref().clone()))
    })
}

/// The distinct keys a lookup reads for a batch of left rows, and which
/// of them each row joins with.
#[derive(Debug)]
pub struct LookupKeys {
    /// Each distinct key, as values of the index's key column types.
    pub distinct: Vec<Vec<ScalarValue>>,
    /// For each left row, its key's position in `distinct`; `None`: no
    /// row of the index can match it (a NULL, or a value the key
    /// column's type cannot hold).
    of_row: Vec<Option<usize>>,
}

impl PeekLookup {
    /// The key expressions made physical, with `params` in place.
    pub(super) fn physical_key(
        &self,
        state: &SessionState,
        params: Option<&ParamValues>,
    ) -> DfResult<Vec<Arc<dyn PhysicalExpr>>> {
        self.key
            .iter()
            .map(|(e, _)| {
                let bound = simplified(state, with_params(e.clone(), params)?, &self.input)?;
                physical(state, bound, &self.input)
            })
            .collect()
    }

    /// The keys `rows` (of the join's left side) look up, evaluated by
    /// `key` (from [`PeekFinish::lookup_key`]).
    pub fn keys(&self, key: &[Arc<dyn PhysicalExpr>], rows: &RecordBatch) -> DfResult<LookupKeys> {
        let n = rows.num_rows();
        let arrays = key
            .iter()
            .map(|e| e.evaluate(rows)?.into_array(n))
            .collect::<DfResult<Vec<ArrayRef>>>()?;
        let mut positions: HashMap<Vec<ScalarValue>, usize> = HashMap::new();
        let mut distinct = Vec::new();
        let mut of_row = Vec::with_capacity(n);
        for row in 0..n {
            let mut values = Vec::with_capacity(arrays.len());
            for (array, (_, ty)) in arrays.iter().zip(&self.key) {
                let value = ScalarValue::try_from_array(array, row)?;
                let keyed = (!value.is_null())
                    .then(|| value.cast_to(ty).ok())
                    .flatten()
                    .filter(|k| k.cast_to(&value.data_type()).ok().as_ref() == Some(&value));
                match keyed {
                    Some(k) => values.push(k),
                    None => break,
                }
            }
            if values.len() < arrays.len() {
                of_row.push(None);
                continue;
            }
            let next = distinct.len();
            let position = *positions.entry(values.clone()).or_insert(next);
            if position == next {
                distinct.push(values);
            }
            of_row.push(Some(position));
        }
        Ok(LookupKeys { distinct, of_row })
    }

    /// The join of `rows` with what the index held for each distinct key
    /// (`found[i]`: the index's rows for `keys.distinct[i]`).
    pub fn join(
        &self,
        rows: &RecordBatch,
        keys: &LookupKeys,
        found: &[RecordBatch],
    ) -> DfResult<RecordBatch> {
        if found.len() != keys.distinct.len() {
            return Err(datafusion::common::DataFusionError::Internal(format!(
                "a lookup read {} keys but has {} answers",
                keys.distinct.len(),
                found.len()
            )));
        }
        let Some(first) = found.first() else {
            return Ok(RecordBatch::new_empty(Arc::clone(&self.output)));
        };
        let right = concat_batches(&first.schema(), found)?;
        let mut starts = Vec::with_capacity(found.len());
        let mut at = 0u32;
        for batch in found {
            starts.push(at);
            at += u32::try_from(batch.num_rows())
                .map_err(|e| datafusion::common::DataFusionError::External(Box::new(e)))?;
        }
        let (mut left_rows, mut right_rows) = (Vec::new(), Vec::new());
        for (row, key) in keys.of_row.iter().enumerate() {
            let Some(k) = *key else { continue };
            for j in 0..found[k].num_rows() as u32 {
                left_rows.push(row as u32);
                right_rows.push(starts[k] + j);
            }
        }
        let (left_rows, right_rows) = (UInt32Array::from(left_rows), UInt32Array::from(right_rows));
        let right_columns: Vec<ArrayRef> = match &self.columns {
            Some(p) => p.iter().map(|&i| Arc::clone(right.column(i))).collect(),
            None => right.columns().to_vec(),
        };
        let columns = rows
            .columns()
            .iter()
            .map(|c| take(c, &left_rows, None))
            .chain(right_columns.iter().map(|c| take(c, &right_rows, None)))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.output),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(left_rows.len())),
        )?)
    }
}

impl PeekFinish {
    /// The peeked index's rows as the first join's left side (the
    /// columns its scan reads).
    pub fn lookup_base(&self, rows: &RecordBatch) -> DfResult<RecordBatch> {
        let Some(first) = self.lookups.first() else {
            return Ok(rows.clone());
        };
        let columns = match &self.columns {
            Some(p) => p.iter().map(|&i| Arc::clone(rows.column(i))).collect(),
            None => rows.columns().to_vec(),
        };
        Ok(RecordBatch::try_new_with_options(
            Arc::new(first.input.as_arrow().clone()),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows.num_rows())),
        )?)
    }

    /// Lookup `i`'s key expressions for this execution.
    pub fn lookup_key(
        &self,
        state: &SessionState,
        i: usize,
    ) -> DfResult<Vec<Arc<dyn PhysicalExpr>>> {
        if let Some(made) = self.physical_lookups.as_ref().and_then(|m| m.get(i)) {
            return Ok(made.clone());
        }
        match self.lookups.get(i) {
            Some(lookup) => lookup.physical_key(state, None),
            None => Ok(Vec::new()),
        }
    }
}

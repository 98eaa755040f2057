//! Peek planning: a query that only filters, computes expressions over,
//! sorts and limits the rows of one indexed object is answered from the
//! index's arrangement, without a DataFusion physical plan.
//!
//! The query is planned as any other (so its expressions are typed and
//! coerced exactly as the general path would run them); then its analyzed
//! plan is matched: a chain of `Projection`, `Filter`, `Sort`, `Limit`
//! and `SubqueryAlias` nodes over one scan of a table, source,
//! materialized view or indexed view that has an index. Equality
//! conjuncts on every key column of an index (`k = 7`, `(a, b) = (1, 2)`
//! written as `a = 1 AND b = 2`) become a keyed lookup; the whole predicate
//! is still applied to what the lookup returns, so a key only narrows the
//! rows, never decides them. Materialize's peek planning (fast-path peeks
//! over an index's arrangement, with a map/filter/project applied to what
//! it finds) is the model.

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;

use arrow::array::{Array, BooleanArray, RecordBatch, RecordBatchOptions};
use arrow::compute::{SortColumn, filter_record_batch, lexsort_to_indices, take_record_batch};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::tree_node::Transformed;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{
    DFSchema, DFSchemaRef, ParamValues, Result as DfResult, ScalarValue, plan_datafusion_err,
};
use datafusion::datasource::source_as_provider;
use datafusion::execution::SessionState;
use datafusion::logical_expr::expr::Cast;
use datafusion::logical_expr::logical_plan::{FetchType, SkipType};
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    BinaryExpr, Expr, LogicalPlan, Operator, SortExpr, TableScan, TryCast, Volatility,
};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_expr::{PhysicalExpr, create_physical_expr};
use freshet_catalog::{Item, ItemDetails};
use freshet_repr::GlobalId;

use crate::error::Result;
use crate::plan::{
    KeyConstants, KeyedSteps, MadeExpr, PeekFinish, PeekPlan, PeekStep, Plan, QueryPlan,
    RangeConstants,
};
use crate::query::index_scan::{KeyRange, carries_types, choose_seek, keyed_indexes, ordered_key};
use crate::query::provider::BoundTable;
use crate::statements::context::StatementContext;

/// `q` as a peek of an index when its shape allows one, else as a query.
pub fn plan_select(cx: &StatementContext, q: QueryPlan) -> Result<Plan> {
    Ok(match peek_of(cx, &q)? {
        Some(peek) => Plan::Peek(peek),
        None => Plan::Select(q),
    })
}

/// The peek answering `q`, if `q` is a map/filter/sort/limit chain over
/// one indexed object.
fn peek_of(cx: &StatementContext, q: &QueryPlan) -> Result<Option<PeekPlan>> {
    // A prepared statement's peek is decided at Prepare, with its `$n`
    // bound at each Execute; an untyped `$n` leaves the output types open.
    if !parameters_typed(&q.logical)? {
        return Ok(None);
    }
    let Some(ChainOverScan {
        chain,
        scan,
        provider,
    }) = chain_over_bound_scan(&q.logical)?
    else {
        return super::peek_join::lookup_join_peek(cx, q);
    };
    let Some(object) = scanned_object(cx, &provider)? else {
        return Ok(None);
    };
    let source_schema = provider.schema();
    let scan_schema = projected(&source_schema, scan.projection.as_ref())?;
    let Some(steps) = steps_of(&chain)? else {
        return Ok(None);
    };
    // Simplified once here (constants folded, `now()` fixed at this
    // statement's start); in a prepared statement, expressions that read
    // a `$n` or the time are simplified when each Execute binds them.
    let parameterized = !q.logical.get_parameter_fields()?.is_empty();
    let steps = simplify_steps(cx.state, steps, parameterized)?;
    let (equalities, conjuncts) = scan_equalities(&steps, scan, &source_schema);
    let Some((mut index, key_exprs)) = choose_index(cx, object, &source_schema, &equalities)?
    else {
        return Ok(None);
    };
    // `key IN (...)` (or an OR of equalities): the general path seeks each
    // key instead of peeking every row.
    if key_exprs.is_none()
        && choose_seek(
            &keyed_indexes(cx.catalog, object, &source_schema),
            &source_schema,
            &conjuncts,
        )
        .is_some_and(|seek| seek.range.is_none())
    {
        return Ok(None);
    }
    // Without a key: bounds on an index's first key column read a range.
    let mut range = None;
    if key_exprs.is_none()
        && let Some((ranged, constants)) = range_constants(cx, object, &steps, scan, &source_schema)
    {
        index = ranged;
        range = Some(constants);
    }
    let keyed = key_exprs.as_ref().and_then(|key| {
        let ItemDetails::Index { keys, .. } = &index.details else {
            return None;
        };
        let names: Vec<String> = keys
            .iter()
            .map(|k| super::index::key_column_name(k))
            .collect();
        steps_decided_by_key(&steps, scan, &source_schema, &names, key)
    });
    let mut finish = PeekFinish::new(
        q,
        scan.projection.clone(),
        scan_schema,
        steps,
        key_exprs,
        Vec::new(),
    );
    finish.range = range;
    finish.keyed = keyed;
    Ok(Some(index_peek(cx, q, index, finish)))
}

/// The peek of `index` answering `q`, its key computed from `finish`'s
/// constants when they need no parameters.
pub(super) fn index_peek(
    cx: &StatementContext,
    q: &QueryPlan,
    index: &Item,
    mut finish: PeekFinish,
) -> PeekPlan {
    let key = finish
        .key
        .as_ref()
        .and_then(|k| key_values(cx.state, k, None));
    let range = finish
        .range
        .as_ref()
        .and_then(|r| range_values(cx.state, r, None));
    // A key known now: the lookup decides its equalities.
    if key.is_some() {
        finish.take_keyed_steps();
    }
    let keys = key_names(index);
    // The key's values, or the expressions (with `$n`) that give them.
    let explain = match (&finish.key, &key) {
        (None, _) => match (&finish.range, &range) {
            (Some(_), Some(values)) => format!(
                "Peek index {} on ({keys}) where {}",
                index.name,
                values.describe(&first_key_name(index))
            ),
            (Some(constants), None) => format!(
                "Peek index {} on ({keys}) where {}",
                index.name,
                constants.describe(&first_key_name(index))
            ),
            (None, _) => format!("Peek index {} (all rows)", index.name),
        },
        (Some(exprs), values) => format!(
            "Peek index {} on ({keys}) = ({})",
            index.name,
            match values {
                Some(values) => values.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
                None => exprs.iter().map(|(e, _)| e.to_string()).collect(),
            }
            .join(", ")
        ),
    };
    PeekPlan {
        index: index.id,
        key,
        range,
        inputs: q.inputs.clone(),
        desc: q.desc.clone(),
        columns: None,
        explain,
        finish: Some(Box::new(finish)),
    }
}

/// An index's key columns, as `EXPLAIN` lists them.
pub(super) fn key_names(index: &Item) -> String {
    match &index.details {
        ItemDetails::Index { keys, .. } => keys.join(", "),
        _ => String::new(),
    }
}

impl PeekFinish {
    /// What `q` does with the rows of a peek (through `lookups`, if any):
    /// `columns` of the index's rows are the scan's, `scan_schema` the
    /// rows `steps` read; `key` the constants fixing the peeked index's
    /// key. Made physical at the first execution.
    pub(super) fn new(
        q: &QueryPlan,
        columns: Option<Vec<usize>>,
        scan_schema: SchemaRef,
        steps: Vec<PeekStep>,
        key: Option<KeyConstants>,
        lookups: Vec<crate::plan::PeekLookup>,
    ) -> PeekFinish {
        PeekFinish {
            query: Arc::new(q.clone()),
            columns,
            scan_schema,
            steps: Arc::new(steps),
            output: Arc::new(q.logical.schema().as_arrow().clone()),
            key,
            physical: None,
            made: Arc::default(),
            keyed: None,
            range: None,
            lookups: Arc::new(lookups),
            physical_lookups: None,
            params: None,
            source: None,
        }
    }
}

/// The object a scan's provider reads (an index's object for a read of
/// the index), if it is one of the catalog's.
pub(super) fn scanned_object(
    cx: &StatementContext,
    provider: &Arc<dyn datafusion::datasource::TableProvider>,
) -> Result<Option<GlobalId>> {
    let any: &dyn std::any::Any = provider.as_ref();
    let Some(bound) = any.downcast_ref::<BoundTable>() else {
        return Ok(None);
    };
    Ok(match (bound.collection(), bound.index()) {
        (Some(id), _) => Some(id),
        (None, Some((index, _))) => match cx.catalog.get_item(index)?.details {
            ItemDetails::Index { on, .. } => Some(on),
            _ => None,
        },
        (None, None) => None,
    })
}

/// Equalities on columns of the scanned object (by column name, with
/// the constant), from the filters that sit directly on the scan (above
/// a projection, positions change); and every conjunct of those filters.
pub(super) fn scan_equalities(
    steps: &[PeekStep],
    scan: &TableScan,
    source_schema: &SchemaRef,
) -> (Vec<(String, Expr)>, Vec<Expr>) {
    let mut equalities: Vec<(String, Expr)> = Vec::new();
    let mut conjuncts: Vec<Expr> = Vec::new();
    for step in steps {
        let PeekStep::Filter { predicate, input } = step else {
            break;
        };
        for conjunct in split_conjunction(predicate) {
            conjuncts.push(conjunct.clone());
            if let Some((i, value)) = column_equality(conjunct, input) {
                let j = match &scan.projection {
                    Some(p) => p[i],
                    None => i,
                };
                equalities.push((source_schema.field(j).name().clone(), value));
            }
        }
    }
    (equalities, conjuncts)
}

/// A plan's chain of nodes over its one scan, with the scan's provider.
pub(super) struct ChainOverScan<'a> {
    /// The nodes from the root down (see [`chain_over_scan`]).
    pub chain: Vec<&'a LogicalPlan>,
    /// The scan, with no filters or fetch pushed into it.
    pub scan: &'a TableScan,
    /// What the scan reads.
    pub provider: Arc<dyn datafusion::datasource::TableProvider>,
}

/// The chain over `plan`'s one scan, if every node is one a peek can
/// apply and nothing was pushed into the scan itself.
pub(super) fn chain_over_bound_scan(plan: &LogicalPlan) -> DfResult<Option<ChainOverScan<'_>>> {
    let Some((chain, scan)) = chain_over_scan(plan) else {
        return Ok(None);
    };
    if scan.fetch.is_some() || !scan.filters.is_empty() {
        return Ok(None);
    }
    let provider = source_as_provider(&scan.source)?;
    Ok(Some(ChainOverScan {
        chain,
        scan,
        provider,
    }))
}

/// The columns `projection` keeps of `source` (all without one).
pub(super) fn projected(
    source: &SchemaRef,
    projection: Option<&Vec<usize>>,
) -> DfResult<SchemaRef> {
    Ok(match projection {
        Some(p) => Arc::new(source.project(p)?),
        None => Arc::clone(source),
    })
}

/// The nodes from the plan's root down to its one scan (root first), if
/// every node is one a peek can apply.
fn chain_over_scan(plan: &LogicalPlan) -> Option<(Vec<&LogicalPlan>, &TableScan)> {
    match peekable_chain(plan)? {
        (chain, LogicalPlan::TableScan(scan)) => Some((chain, scan)),
        _ => None,
    }
}

/// The nodes a peek can apply (projections, filters, sorts, limits,
/// aliases) from the plan's root down (root first), and the first node
/// below them that is none of those.
pub(super) fn peekable_chain(plan: &LogicalPlan) -> Option<(Vec<&LogicalPlan>, &LogicalPlan)> {
    let mut chain = Vec::new();
    let mut node = plan;
    loop {
        match node {
            LogicalPlan::Projection(_)
            | LogicalPlan::Filter(_)
            | LogicalPlan::Sort(_)
            | LogicalPlan::Limit(_)
            | LogicalPlan::SubqueryAlias(_) => {
                chain.push(node);
                node = node.inputs().first().copied()?;
            }
            other => return Some((chain, other)),
        }
    }
}

/// The chain as steps applied to the scanned rows, scan side first;
/// `None` if an expression needs more than row-at-a-time evaluation.
pub(super) fn steps_of(chain: &[&LogicalPlan]) -> Result<Option<Vec<PeekStep>>> {
    let mut steps = Vec::new();
    for node in chain.iter().rev() {
        if node.expressions().iter().any(|e| !evaluable(e)) {
            return Ok(None);
        }
        let step = match node {
            LogicalPlan::SubqueryAlias(_) => continue,
            LogicalPlan::Filter(f) => PeekStep::Filter {
                predicate: f.predicate.clone(),
                input: Arc::clone(f.input.schema()),
            },
            LogicalPlan::Projection(p) => PeekStep::Project {
                exprs: p.expr.clone(),
                input: Arc::clone(p.input.schema()),
                output: Arc::new(p.schema.as_arrow().clone()),
            },
            LogicalPlan::Sort(s) => PeekStep::Sort {
                exprs: s.expr.clone(),
                input: Arc::clone(s.input.schema()),
                fetch: s.fetch,
            },
            LogicalPlan::Limit(l) => {
                let (SkipType::Literal(skip), FetchType::Literal(fetch)) =
                    (l.get_skip_type()?, l.get_fetch_type()?)
                else {
                    return Ok(None);
                };
                PeekStep::Limit { skip, fetch }
            }
            _ => return Ok(None),
        };
        steps.push(step);
    }
    Ok(Some(steps))
}

/// Whether `e` can be evaluated on a batch of rows by itself (no
/// subquery, aggregate, window, unnest or parameter).
pub(super) fn evaluable(e: &Expr) -> bool {
    !e.exists(|n| {
        Ok(matches!(
            n,
            Expr::ScalarSubquery(_)
                | Expr::Exists(_)
                | Expr::InSubquery(_)
                | Expr::SetComparison(_)
                | Expr::OuterReferenceColumn(..)
                | Expr::AggregateFunction(_)
                | Expr::WindowFunction(_)
                | Expr::Unnest(_)
                | Expr::GroupingSet(_)
                | Expr::ScalarVariable(..)
                | Expr::HigherOrderFunction(_)
                | Expr::Lambda(_)
                | Expr::LambdaVariable(_)
        ))
    })
    .unwrap_or(false)
}

/// `column = constant` (either way round, the column perhaps widened by a
/// cast that keeps every value distinct; the constant a literal or a
/// `$n`, perhaps cast): the column's position in `schema` and the
/// constant.
pub(super) fn column_equality(e: &Expr, schema: &DFSchemaRef) -> Option<(usize, Expr)> {
    let Expr::BinaryExpr(BinaryExpr {
        left,
        op: Operator::Eq,
        right,
    }) = e
    else {
        return None;
    };
    let (column, constant) = if is_constant(right) {
        (left.as_ref(), right.as_ref())
    } else if is_constant(left) {
        (right.as_ref(), left.as_ref())
    } else {
        return None;
    };
    Some((key_column(column, schema)?, constant.clone()))
}

/// The position in `schema` of the column `e` reads, when `e` is the
/// column itself or the column widened by a cast that keeps every value
/// distinct (so `e = v` holds exactly for the column's rows equal to `v`
/// cast back, and an index on the column can look it up).
pub(super) fn key_column(e: &Expr, schema: &DFSchemaRef) -> Option<usize> {
    let (column, widened_to) = match e {
        Expr::Column(c) => (c, None),
        Expr::Cast(Cast { expr, field }) | Expr::TryCast(TryCast { expr, field }) => {
            match expr.as_ref() {
                Expr::Column(c) => (c, Some(field.data_type())),
                _ => return None,
            }
        }
        _ => return None,
    };
    let i = schema.index_of_column(column).ok()?;
    match widened_to {
        Some(target) if !injective_cast(schema.field(i).data_type(), target) => None,
        _ => Some(i),
    }
}

/// Whether every `$n` of `plan` has a type, or (untyped) is used only as
/// the operand of a cast (`CAST($1 AS integer)`, as
/// [`super::templates`] writes them): the cast fixes the type each
/// expression sees, whatever type the bound value has. An untyped `$n`
/// elsewhere leaves the plan's types open, so it cannot be kept.
pub(super) fn parameters_typed(plan: &LogicalPlan) -> DfResult<bool> {
    let params = plan.get_parameter_fields()?;
    let untyped: HashSet<&String> = params
        .iter()
        .filter(|(_, field)| field.is_none())
        .map(|(id, _)| id)
        .collect();
    if untyped.is_empty() {
        return Ok(true);
    }
    let mut ok = true;
    plan.apply(|node| {
        for e in node.expressions() {
            e.apply(|x| {
                Ok(match x {
                    Expr::Cast(Cast { expr, .. })
                        if matches!(expr.as_ref(), Expr::Placeholder(_)) =>
                    {
                        TreeNodeRecursion::Jump
                    }
                    Expr::Placeholder(p) if untyped.contains(&p.id) => {
                        ok = false;
                        TreeNodeRecursion::Stop
                    }
                    _ => TreeNodeRecursion::Continue,
                })
            })?;
        }
        Ok(if ok {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    })?;
    Ok(ok)
}

/// A literal or a `$n` parameter, perhaps cast.
pub(super) fn is_constant(e: &Expr) -> bool {
    match e {
        Expr::Literal(..) | Expr::Placeholder(_) => true,
        Expr::Cast(Cast { expr, .. }) | Expr::TryCast(TryCast { expr, .. }) => is_constant(expr),
        _ => false,
    }
}

/// The key's values: each constant with `params` bound, as a value of its
/// key column's type. `None` when one is NULL or not exactly a value of
/// that type: no row matches it by key, so the peek reads all rows and
/// the query's filter (always applied) decides.
pub(super) fn key_values(
    state: &SessionState,
    key: &[(Expr, DataType)],
    params: Option<&ParamValues>,
) -> Option<Vec<ScalarValue>> {
    let empty: DFSchemaRef = Arc::new(DFSchema::empty());
    key.iter()
        .map(|(constant, ty)| {
            let bound = with_params(constant.clone(), params).ok()?;
            let value = match folded(&bound) {
                Some(value) => value,
                None => {
                    let Expr::Literal(value, _) = simplified(state, bound, &empty).ok()? else {
                        return None;
                    };
                    value
                }
            };
            if value.is_null() {
                return None;
            }
            let keyed = value.cast_to(ty).ok()?;
            (keyed.cast_to(&value.data_type()).ok()? == value).then_some(keyed)
        })
        .collect()
}

/// `steps` without the conjuncts of their leading filters that `index`'s
/// lookup by `key` decides (see [`KeyedSteps`]): for each key column of
/// a type whose encoded equality is SQL equality, the equality
/// [`choose_index`] took its constant from. A filter left with no
/// conjunct is dropped. `None` when nothing can be dropped.
pub(super) fn steps_decided_by_key(
    steps: &[PeekStep],
    scan: &TableScan,
    source_schema: &SchemaRef,
    key_names: &[String],
    key: &KeyConstants,
) -> Option<Arc<KeyedSteps>> {
    // Per key column: its name and the constant the lookup uses, when
    // the lookup decides equality with it.
    let mut decided: Vec<Option<(&str, &Expr)>> = key_names
        .iter()
        .zip(key)
        .map(|(name, (constant, ty))| exact_key_equality(ty).then_some((name.as_str(), constant)))
        .collect();
    let mut out = Vec::with_capacity(steps.len());
    let mut dropped = false;
    let mut leading = true;
    for step in steps {
        let PeekStep::Filter { predicate, input } = step else {
            leading = false;
            out.push(step.clone());
            continue;
        };
        if !leading {
            out.push(step.clone());
            continue;
        }
        let mut kept = Vec::new();
        for conjunct in split_conjunction(predicate) {
            let slot = column_equality(conjunct, input).and_then(|(i, value)| {
                let j = scan.projection.as_ref().map_or(i, |p| p[i]);
                let name = source_schema.field(j).name();
                decided.iter_mut().find(|d| {
                    d.as_ref().is_some_and(|(column, constant)| {
                        *column == name.as_str() && **constant == value
                    })
                })
            });
            match slot {
                // Each key column's equality once (a second `k = ...`
                // stays).
                Some(slot) => {
                    *slot = None;
                    dropped = true;
                }
                None => kept.push(conjunct.clone()),
            }
        }
        if let Some(predicate) = datafusion::logical_expr::utils::conjunction(kept) {
            out.push(PeekStep::Filter {
                predicate,
                input: Arc::clone(input),
            });
        }
    }
    dropped.then(|| {
        Arc::new(KeyedSteps {
            steps: Arc::new(out),
            made: Arc::default(),
        })
    })
}

/// Whether two values of a key column of type `ty` encode equal exactly
/// when SQL's `=` holds for them: the types whose encoding orders them as
/// SQL does, except floats (normalized before encoding, so `-0` and `0`
/// encode alike while the query's `=` may tell them apart).
fn exact_key_equality(ty: &DataType) -> bool {
    ordered_key(ty)
        && !matches!(
            ty,
            DataType::Float16 | DataType::Float32 | DataType::Float64
        )
}

/// The name of `index`'s first key column.
fn first_key_name(index: &Item) -> String {
    match &index.details {
        ItemDetails::Index { keys, .. } => keys
            .first()
            .map(|k| super::index::key_column_name(k))
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// The first index on `object` whose first key column (of an ordered
/// type, plain column key) the leading filters of `steps` bound by
/// constants (`<`, `<=`, `>`, `>=`, `BETWEEN`), with those bounds.
fn range_constants<'a>(
    cx: &'a StatementContext,
    object: GlobalId,
    steps: &[PeekStep],
    scan: &TableScan,
    source_schema: &SchemaRef,
) -> Option<(&'a Item, RangeConstants)> {
    cx.catalog.indexes_on(object).find_map(|index| {
        let ItemDetails::Index { keys, .. } = &index.details else {
            return None;
        };
        let desc = index.desc.as_ref()?;
        if !carries_types(desc, source_schema) {
            return None;
        }
        let name = super::index::key_column_name(keys.first()?);
        let column = desc.columns.iter().find(|c| c.name == name)?;
        let ty = column.ty.arrow_type();
        if !ordered_key(&ty) {
            return None;
        }
        let mut constants = RangeConstants {
            bounds: Vec::new(),
            ty,
        };
        for step in steps {
            let PeekStep::Filter { predicate, input } = step else {
                break;
            };
            for conjunct in split_conjunction(predicate) {
                collect_bounds(conjunct, input, scan, source_schema, &name, &mut constants);
            }
        }
        (!constants.bounds.is_empty()).then_some((index, constants))
    })
}

/// Add the bounds `conjunct` puts on the column named `name` (by a
/// constant, the column perhaps widened by an order-keeping cast).
fn collect_bounds(
    conjunct: &Expr,
    input: &DFSchemaRef,
    scan: &TableScan,
    source_schema: &SchemaRef,
    name: &str,
    out: &mut RangeConstants,
) {
    let is_column = |e: &Expr| {
        key_column(e, input).is_some_and(|i| {
            let j = scan.projection.as_ref().map_or(i, |p| p[i]);
            source_schema.field(j).name() == name
        })
    };
    // A bound may be any expression of constants and `$n` (`$1 + 9`):
    // its value is computed when the peek runs.
    let is_constant = |e: &Expr| is_constant(e) || constant_expression(e);
    match conjunct {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (constant, op) = if is_column(left) && is_constant(right) {
                (right.as_ref(), *op)
            } else if is_column(right) && is_constant(left) {
                match op.swap() {
                    Some(op) => (left.as_ref(), op),
                    None => return,
                }
            } else {
                return;
            };
            out.bounds
                .extend(KeyRange::of_comparison(op, constant.clone()));
        }
        Expr::Between(datafusion::logical_expr::expr::Between {
            expr,
            negated: false,
            low,
            high,
        }) if is_column(expr) && is_constant(low) && is_constant(high) => {
            out.bounds.push(KeyRange {
                lower: Bound::Included(low.as_ref().clone()),
                upper: Bound::Included(high.as_ref().clone()),
            });
        }
        _ => {}
    }
}

/// Whether `e` reads no column and calls only immutable functions
/// (values, `$n`, casts, operators, the checked arithmetic `+` becomes):
/// its value is fixed once its `$n` are bound.
fn constant_expression(e: &Expr) -> bool {
    e.column_refs().is_empty()
        && evaluable(e)
        && !e
            .exists(|n| {
                Ok(match n {
                    Expr::ScalarFunction(f) => {
                        f.func.signature().volatility != Volatility::Immutable
                            || f.name() == "mz_now"
                    }
                    _ => false,
                })
            })
            .unwrap_or(true)
}

/// The range `constants` bound, with `params` bound: each bound that is
/// exactly a non-NULL value of the column's type narrows it (any other
/// is left to the query's filter, which always runs). `None` when no
/// bound narrows it.
pub(super) fn range_values(
    state: &SessionState,
    constants: &RangeConstants,
    params: Option<&ParamValues>,
) -> Option<KeyRange> {
    // A bound without an exact value narrows nothing.
    let value = |bound: &Bound<Expr>| match bound {
        Bound::Included(e) | Bound::Excluded(e) => {
            match key_values(state, &[(e.clone(), constants.ty.clone())], params)
                .and_then(|mut v| v.pop())
            {
                Some(v) if matches!(bound, Bound::Included(_)) => Bound::Included(v),
                Some(v) => Bound::Excluded(v),
                None => Bound::Unbounded,
            }
        }
        Bound::Unbounded => Bound::Unbounded,
    };
    let range = constants
        .bounds
        .iter()
        .fold(KeyRange::all(), |range, bounds| {
            range.intersect(KeyRange {
                lower: value(&bounds.lower),
                upper: value(&bounds.upper),
            })
        });
    range.bounded().then_some(range)
}

impl RangeConstants {
    /// The bounds as conditions on `column`, for `EXPLAIN` before their
    /// values are known.
    fn describe(&self, column: &str) -> String {
        self.bounds
            .iter()
            .map(|b| b.describe(column))
            .collect::<Vec<_>>()
            .join(" and ")
    }
}

/// Whether `e` calls a function (scalar, aggregate or window) anywhere,
/// or holds a form this module does not know to run unsimplified.
fn calls_functions(e: &Expr) -> bool {
    e.exists(|n| {
        Ok(!matches!(
            n,
            Expr::Column(_)
                | Expr::Literal(..)
                | Expr::BinaryExpr(_)
                | Expr::Not(_)
                | Expr::IsNull(_)
                | Expr::IsNotNull(_)
                | Expr::IsTrue(_)
                | Expr::IsFalse(_)
                | Expr::IsNotTrue(_)
                | Expr::IsNotFalse(_)
                | Expr::Negative(_)
                | Expr::Between(_)
                | Expr::InList(_)
                | Expr::Cast(_)
                | Expr::TryCast(_)
                | Expr::Alias(_)
        ))
    })
    .unwrap_or(true)
}

/// A constant key expression's value without the simplifier, when it is a
/// value or a cast of one (what a `$n`, bound, usually is).
fn folded(e: &Expr) -> Option<ScalarValue> {
    match e {
        Expr::Literal(value, _) => Some(value.clone()),
        Expr::Cast(cast) => match cast.expr.as_ref() {
            Expr::Literal(value, _) => value.cast_to(cast.field.data_type()).ok(),
            _ => None,
        },
        _ => None,
    }
}

/// `e` with its `$n` parameters replaced by their values (unchanged
/// without values).
pub(super) fn with_params(e: Expr, params: Option<&ParamValues>) -> DfResult<Expr> {
    let Some(params) = params else {
        return Ok(e);
    };
    Ok(e.transform_up(|e| match e {
        Expr::Placeholder(p) => {
            let (value, metadata) = params.get_placeholders_with_values(&p.id)?.into_inner();
            Ok(Transformed::yes(Expr::Literal(value, metadata)))
        }
        other => Ok(Transformed::no(other)),
    })?
    .data)
}

/// Whether casting `from` to `to` maps distinct values to distinct values,
/// so `CAST(col AS to) = v` holds exactly for `col = v` cast back.
fn injective_cast(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    let rank = |t: &DataType| match t {
        Int8 => Some(1),
        Int16 => Some(2),
        Int32 => Some(3),
        Int64 => Some(4),
        _ => None,
    };
    match (rank(from), rank(to)) {
        (Some(a), Some(b)) => a <= b,
        _ => from == to,
    }
}

/// The index serving a peek of `object`: one whose key columns are all
/// fixed by `equalities` (with the constants, in key order, and each key
/// column's type), else any index (all its rows). Indexes keyed by
/// expressions serve only full reads.
pub(super) fn choose_index<'a>(
    cx: &'a StatementContext,
    object: GlobalId,
    schema: &SchemaRef,
    equalities: &[(String, Expr)],
) -> Result<Option<(&'a Item, Option<KeyConstants>)>> {
    let mut any = None;
    for index in cx.catalog.indexes_on(object) {
        let ItemDetails::Index { keys, .. } = &index.details else {
            continue;
        };
        // The index's rows must carry the scan's column types.
        let Some(desc) = &index.desc else {
            continue;
        };
        if !carries_types(desc, schema) {
            continue;
        }
        any.get_or_insert(index);
        let key: Option<KeyConstants> = keys
            .iter()
            .map(|k| {
                let name = super::index::key_column_name(k);
                let column = desc.columns.iter().find(|c| c.name == name)?;
                let (_, constant) = equalities.iter().find(|(c, _)| *c == name)?;
                Some((constant.clone(), column.ty.arrow_type()))
            })
            .collect();
        if let Some(key) = key
            && !key.is_empty()
        {
            return Ok(Some((index, Some(key))));
        }
    }
    Ok(any.map(|i| (i, None)))
}

/// `expr` simplified as the optimizer would at this statement's start
/// (constants folded, `now()` fixed, casts of literals applied).
pub(super) fn simplified(state: &SessionState, expr: Expr, schema: &DFSchemaRef) -> DfResult<Expr> {
    let context = SimplifyContext::builder()
        .with_schema(Arc::clone(schema))
        .with_config_options(Arc::clone(state.config_options()))
        .with_query_execution_start_time(state.execution_props().query_execution_start_time)
        .build();
    ExprSimplifier::new(context).simplify(expr)
}

/// Each step's expressions simplified (see [`simplified`]); with
/// `prepared`, only those whose value cannot change between executions
/// (the rest are simplified when each execution binds them).
pub(super) fn simplify_steps(
    state: &SessionState,
    steps: Vec<PeekStep>,
    prepared: bool,
) -> DfResult<Vec<PeekStep>> {
    steps
        .into_iter()
        .map(|step| {
            step.map_exprs(|e, schema| {
                if prepared && bound_per_execution(&e) {
                    Ok(e)
                } else {
                    simplified(state, e, schema)
                }
            })
        })
        .collect()
}

/// Whether `e` is simplified at each execution of a prepared statement:
/// it reads a `$n`, or calls a function that is not immutable (`now()`
/// takes the statement's start time when simplified).
pub(super) fn bound_per_execution(e: &Expr) -> bool {
    let (reads, changing) = execution_inputs(e);
    changing || !reads.is_empty()
}

/// What of an execution `e` depends on: the `$n` ids it reads, and
/// whether it calls a function that is not immutable (its value may
/// change between executions with the same parameters).
fn execution_inputs(e: &Expr) -> (Vec<String>, bool) {
    let mut reads = Vec::new();
    let mut changing = false;
    let walked = e.apply(|n| {
        match n {
            Expr::Placeholder(p) if !reads.contains(&p.id) => reads.push(p.id.clone()),
            Expr::ScalarFunction(f) if f.func.signature().volatility != Volatility::Immutable => {
                changing = true
            }
            _ => {}
        }
        Ok(TreeNodeRecursion::Continue)
    });
    (reads, changing || walked.is_err())
}

/// How a kept peek's expression `e` is made physical for an execution:
/// once, once per value of the parameters it reads, or every time.
fn how_made(state: &SessionState, e: &Expr, schema: &DFSchemaRef) -> DfResult<MadeExpr> {
    Ok(match execution_inputs(e) {
        (_, true) => MadeExpr::PerExecution,
        (reads, false) if reads.is_empty() => MadeExpr::Fixed(physical(state, e.clone(), schema)?),
        (reads, false) => MadeExpr::ByParams {
            reads,
            last: parking_lot::Mutex::new(None),
        },
    })
}

/// `expr` (already simplified) as a physical expression over `schema`'s
/// rows.
pub(super) fn physical(
    state: &SessionState,
    expr: Expr,
    schema: &DFSchemaRef,
) -> DfResult<Arc<dyn PhysicalExpr>> {
    create_physical_expr(
        &expr,
        schema,
        state.execution_props(),
        &PhysicalPlanningContext::default(),
    )
}

impl PeekPlan {
    /// Whether this peek can be kept at Prepare and bound at each Execute:
    /// it was planned from a query with `$n` parameters (so its steps are
    /// not yet simplified: `now()` is still to be fixed per execution),
    /// and reads no per-execution state through its binding (`mz_now()`).
    pub fn reusable(&self) -> bool {
        let Some(finish) = &self.finish else {
            return false;
        };
        let parameterized = finish
            .query
            .logical
            .get_parameter_fields()
            .is_ok_and(|p| !p.is_empty());
        parameterized && !finish.reads_binding()
    }

    /// This peek for one execution: `params` in place of its `$n`, and its
    /// key computed from them.
    pub fn bind(&self, state: &SessionState, params: Option<&ParamValues>) -> DfResult<PeekPlan> {
        let Some(finish) = &self.finish else {
            return Ok(self.clone());
        };
        let KeyBinding { finish, key, range } = finish.bind(state, params)?;
        Ok(PeekPlan {
            index: self.index,
            key,
            range,
            desc: self.desc.clone(),
            columns: self.columns.clone(),
            inputs: self.inputs.clone(),
            explain: self.explain.clone(),
            finish: Some(Box::new(finish)),
        })
    }
}

/// A [`PeekFinish`] bound to one execution's parameters, with its key.
pub(super) struct KeyBinding {
    /// The steps with the parameters' values in place, simplified.
    pub finish: PeekFinish,
    /// The key's values (see [`key_values`]); `None`: no key, or one
    /// that no row can match by key.
    pub key: Option<Vec<ScalarValue>>,
    /// The range's values (see [`range_values`]); `None`: all rows.
    pub range: Option<KeyRange>,
}

impl PeekFinish {
    /// Use the steps without the equalities the lookup decides, for a
    /// plan whose key is known when planned.
    pub(super) fn take_keyed_steps(&mut self) {
        if let Some(keyed) = self.keyed.take() {
            self.steps = Arc::clone(&keyed.steps);
            self.made = Arc::clone(&keyed.made);
        }
    }

    /// The steps for one execution, made physical: expressions that read
    /// a `$n` or the time with `params` in place and simplified (so
    /// `now()` is this execution's), the others as made at the plan's
    /// first execution; and the key computed from `params`.
    pub(super) fn bind(
        &self,
        state: &SessionState,
        params: Option<&ParamValues>,
    ) -> DfResult<KeyBinding> {
        let key = self.key.as_ref().and_then(|k| key_values(state, k, params));
        // With the key's value known, the lookup decides its equalities.
        let (steps, made_exprs) = match (&key, &self.keyed) {
            (Some(_), Some(keyed)) => (&keyed.steps, &keyed.made),
            _ => (&self.steps, &self.made),
        };
        let made = match made_exprs.get() {
            Some(v) => v,
            None => {
                let mut made = Vec::new();
                for step in steps.iter() {
                    for (e, schema) in step.expressions_with_schemas() {
                        made.push(how_made(state, e, schema)?);
                    }
                }
                // Another execution may have made them meanwhile: equal.
                let _ = made_exprs.set(made);
                made_exprs
                    .get()
                    .ok_or_else(|| plan_datafusion_err!("step expressions not made"))?
            }
        };
        let bound = |e: &Expr, schema: &DFSchemaRef| -> DfResult<Arc<dyn PhysicalExpr>> {
            let bound = with_params(e.clone(), params)?;
            // Only a function may need simplifying to run (`now()` takes
            // the execution's time there); columns, values, casts and
            // operators run as they are, and the simplifier would cost
            // more than this one execution.
            let bound = if calls_functions(&bound) {
                simplified(state, bound, schema)?
            } else {
                bound
            };
            physical(state, bound, schema)
        };
        let mut made = made.iter();
        let mut next = |e: &Expr, schema: &DFSchemaRef| -> DfResult<Arc<dyn PhysicalExpr>> {
            match made.next() {
                Some(MadeExpr::Fixed(p)) => Ok(Arc::clone(p)),
                Some(MadeExpr::ByParams { reads, last }) => {
                    let Some(params) = params else {
                        return bound(e, schema);
                    };
                    let values = reads
                        .iter()
                        .map(|id| Ok(params.get_placeholders_with_values(id)?.into_inner().0))
                        .collect::<DfResult<Vec<_>>>()?;
                    if let Some((was, p)) = &*last.lock()
                        && *was == values
                    {
                        return Ok(Arc::clone(p));
                    }
                    let p = bound(e, schema)?;
                    *last.lock() = Some((values, Arc::clone(&p)));
                    Ok(p)
                }
                Some(MadeExpr::PerExecution) => bound(e, schema),
                None => Err(plan_datafusion_err!("a step's expressions changed")),
            }
        };
        let physical_steps = steps
            .iter()
            .map(|step| step.to_physical(&mut next))
            .collect::<DfResult<Vec<_>>>()?;
        let physical_lookups = self
            .lookups
            .iter()
            .map(|lookup| lookup.physical_key(state, params))
            .collect::<DfResult<Vec<_>>>()?;
        let range = self
            .range
            .as_ref()
            .and_then(|r| range_values(state, r, params));
        Ok(KeyBinding {
            finish: PeekFinish {
                query: Arc::clone(&self.query),
                columns: self.columns.clone(),
                scan_schema: Arc::clone(&self.scan_schema),
                steps: Arc::clone(steps),
                output: Arc::clone(&self.output),
                key: self.key.clone(),
                physical: Some(Arc::new(physical_steps)),
                made: Arc::clone(made_exprs),
                keyed: None,
                range: self.range.clone(),
                lookups: Arc::clone(&self.lookups),
                physical_lookups: Some(Arc::new(physical_lookups)),
                params: params.map(|p| Arc::new(p.clone())),
                source: self.source.clone(),
            },
            key,
            range,
        })
    }
}

/// A peek step with its expressions made physical, ready to evaluate.
#[derive(Debug, Clone)]
pub enum PhysicalStep {
    /// Keep the rows where the predicate is true.
    Filter(Arc<dyn PhysicalExpr>),
    /// Compute the output columns.
    Project {
        /// One expression per output column.
        exprs: Vec<Arc<dyn PhysicalExpr>>,
        /// The columns they make.
        output: SchemaRef,
    },
    /// Order the rows (the first `fetch` of them, if given).
    Sort {
        /// Sort keys with their directions, most significant first.
        keys: Vec<(Arc<dyn PhysicalExpr>, arrow::compute::SortOptions)>,
        /// How many rows the sort must produce.
        fetch: Option<usize>,
    },
    /// Skip and fetch.
    Limit {
        /// Rows skipped.
        skip: usize,
        /// Rows kept after them (`None`: all).
        fetch: Option<usize>,
    },
}

impl PeekStep {
    /// The step with `f` applied to each of its expressions (given the
    /// schema they read).
    fn map_exprs(
        self,
        mut f: impl FnMut(Expr, &DFSchemaRef) -> DfResult<Expr>,
    ) -> DfResult<PeekStep> {
        Ok(match self {
            PeekStep::Filter { predicate, input } => PeekStep::Filter {
                predicate: f(predicate, &input)?,
                input,
            },
            PeekStep::Project {
                exprs,
                input,
                output,
            } => PeekStep::Project {
                exprs: exprs
                    .into_iter()
                    .map(|e| f(e, &input))
                    .collect::<DfResult<_>>()?,
                input,
                output,
            },
            PeekStep::Sort {
                exprs,
                input,
                fetch,
            } => PeekStep::Sort {
                exprs: exprs
                    .into_iter()
                    .map(|s| {
                        Ok(SortExpr {
                            expr: f(s.expr.clone(), &input)?,
                            ..s
                        })
                    })
                    .collect::<DfResult<_>>()?,
                input,
                fetch,
            },
            limit @ PeekStep::Limit { .. } => limit,
        })
    }

    /// The step's expressions.
    fn expressions(&self) -> Box<dyn Iterator<Item = &Expr> + '_> {
        match self {
            PeekStep::Filter { predicate, .. } => Box::new(std::iter::once(predicate)),
            PeekStep::Project { exprs, .. } => Box::new(exprs.iter()),
            PeekStep::Sort { exprs, .. } => Box::new(exprs.iter().map(|s| &s.expr)),
            PeekStep::Limit { .. } => Box::new(std::iter::empty()),
        }
    }

    /// The step's expressions with the schema each reads, in the order
    /// [`Self::to_physical`] makes them.
    fn expressions_with_schemas(&self) -> Vec<(&Expr, &DFSchemaRef)> {
        let schema = match self {
            PeekStep::Filter { input, .. }
            | PeekStep::Project { input, .. }
            | PeekStep::Sort { input, .. } => input,
            PeekStep::Limit { .. } => return Vec::new(),
        };
        self.expressions().map(|e| (e, schema)).collect()
    }

    /// The step with each expression made physical by `make` (given the
    /// schema it reads), in expression order.
    fn to_physical(
        &self,
        make: &mut impl FnMut(&Expr, &DFSchemaRef) -> DfResult<Arc<dyn PhysicalExpr>>,
    ) -> DfResult<PhysicalStep> {
        Ok(match self {
            PeekStep::Filter { predicate, input } => PhysicalStep::Filter(make(predicate, input)?),
            PeekStep::Project {
                exprs,
                input,
                output,
            } => PhysicalStep::Project {
                exprs: exprs
                    .iter()
                    .map(|e| make(e, input))
                    .collect::<DfResult<_>>()?,
                output: Arc::clone(output),
            },
            PeekStep::Sort {
                exprs,
                input,
                fetch,
            } => PhysicalStep::Sort {
                keys: exprs
                    .iter()
                    .map(|s| {
                        Ok((
                            make(&s.expr, input)?,
                            arrow::compute::SortOptions {
                                descending: !s.asc,
                                nulls_first: s.nulls_first,
                            },
                        ))
                    })
                    .collect::<DfResult<_>>()?,
                fetch: *fetch,
            },
            PeekStep::Limit { skip, fetch } => PhysicalStep::Limit {
                skip: *skip,
                fetch: *fetch,
            },
        })
    }
}

impl PeekFinish {
    /// Whether an expression reads the query's binding (`mz_now()`, the
    /// read time), which must then be bound before [`Self::apply`].
    pub fn reads_binding(&self) -> bool {
        self.steps.iter().any(|step| {
            step.expressions().any(|e| {
                e.exists(|n| Ok(matches!(n, Expr::ScalarFunction(f) if f.name() == "mz_now")))
                    .unwrap_or(true)
            })
        })
    }

    /// Apply the query's steps to the rows a peek returned (the index's
    /// rows: every column of the object), giving the query's result.
    /// Expressions not made physical by [`PeekFinish::bind`] are made
    /// here, with the session's execution properties (so `now()` is the
    /// statement's time, as on the general path).
    pub fn apply(&self, state: &SessionState, rows: RecordBatch) -> DfResult<RecordBatch> {
        let made;
        let steps: &[PhysicalStep] = match &self.physical {
            Some(steps) => steps,
            None => {
                made = self
                    .steps
                    .iter()
                    .map(|step| {
                        step.to_physical(&mut |e, schema| physical(state, e.clone(), schema))
                    })
                    .collect::<DfResult<Vec<_>>>()?;
                &made
            }
        };
        // With lookups, `rows` are already the last join's output.
        let columns = match &self.columns {
            Some(p) if self.lookups.is_empty() => {
                p.iter().map(|&i| Arc::clone(rows.column(i))).collect()
            }
            _ => rows.columns().to_vec(),
        };
        let mut batch = RecordBatch::try_new_with_options(
            Arc::clone(&self.scan_schema),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows.num_rows())),
        )?;
        for step in steps {
            batch = match step {
                PhysicalStep::Filter(predicate) => {
                    let mask = predicate.evaluate(&batch)?.into_array(batch.num_rows())?;
                    let mask = mask
                        .as_any()
                        .downcast_ref::<BooleanArray>()
                        .ok_or_else(|| plan_datafusion_err!("a filter that is not boolean"))?;
                    filter_record_batch(&batch, mask)?
                }
                PhysicalStep::Project { exprs, output } => {
                    let arrays = exprs
                        .iter()
                        .map(|e| e.evaluate(&batch)?.into_array(batch.num_rows()))
                        .collect::<DfResult<Vec<_>>>()?;
                    RecordBatch::try_new_with_options(
                        Arc::clone(output),
                        arrays,
                        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
                    )?
                }
                PhysicalStep::Sort { keys, fetch } => {
                    let keys = keys
                        .iter()
                        .map(|(e, options)| {
                            Ok(SortColumn {
                                values: e.evaluate(&batch)?.into_array(batch.num_rows())?,
                                options: Some(*options),
                            })
                        })
                        .collect::<DfResult<Vec<_>>>()?;
                    if keys.is_empty() {
                        batch
                    } else {
                        let order = lexsort_to_indices(&keys, *fetch)?;
                        take_record_batch(&batch, &order)?
                    }
                }
                PhysicalStep::Limit { skip, fetch } => {
                    let n = batch.num_rows();
                    let start = (*skip).min(n);
                    let len = fetch.unwrap_or(n).min(n - start);
                    batch.slice(start, len)
                }
            };
        }
        // The query's own column names and types.
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.output),
            batch.columns().to_vec(),
            &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )?)
    }

    /// The steps after the lookup, last first (as plans print), for
    /// `EXPLAIN`: expressions simplified as they will run.
    pub fn describe(&self, state: &SessionState) -> Vec<String> {
        let show = |e: &Expr, schema: &DFSchemaRef| {
            simplified(state, e.clone(), schema)
                .unwrap_or_else(|_| e.clone())
                .to_string()
        };
        let lookups = self.lookups.iter().rev().map(|l| l.explain.clone());
        self.steps
            .iter()
            .rev()
            .map(|step| match step {
                PeekStep::Filter { predicate, input } => {
                    format!("Filter: {}", show(predicate, input))
                }
                PeekStep::Project { exprs, input, .. } => format!(
                    "Project: {}",
                    exprs
                        .iter()
                        .map(|e| show(e, input))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                PeekStep::Sort {
                    exprs,
                    fetch,
                    input,
                } => format!(
                    "Sort: {}{}",
                    exprs
                        .iter()
                        .map(|s| format!(
                            "{} {} NULLS {}",
                            show(&s.expr, input),
                            if s.asc { "ASC" } else { "DESC" },
                            if s.nulls_first { "FIRST" } else { "LAST" }
                        ))
                        .collect::<Vec<_>>()
                        .join(", "),
                    fetch.map(|f| format!(", fetch={f}")).unwrap_or_default()
                ),
                PeekStep::Limit { skip, fetch } => format!(
                    "Limit: skip={skip}, fetch={}",
                    fetch.map_or("None".to_string(), |f| f.to_string())
                ),
            })
            .chain(lookups)
            .collect()
    }
}

//! Lowering an optimized DataFusion plan to compute's dataflow IR.
//!
//! DataFusion does the hard parts of planning (name resolution, type
//! coercion, decorrelating subqueries, pushing filters and projections);
//! lowering maps the operators it leaves to the incrementally maintainable
//! operators of [`RelPlan`], and refuses everything else at CREATE with
//! SQLSTATE 0A000 naming the construct, so a view is never silently wrong.

pub mod grouping_sets;
pub mod plan_codec;
pub mod scalar_subquery;
pub mod temporal;

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::default_table_source::source_as_provider;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, DFSchemaRef, NullEquality, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{
    Distinct, Expr, FetchType, JoinType, LogicalPlan, SkipType, Volatility, cast,
};
use datafusion::physical_expr::create_physical_expr;
use freshet_compute_types::{JoinKind, RelPlan};

use crate::error::{PlanError, Result};
use crate::query::provider::BoundTable;

/// Refuse definitions whose value depends on when or where they run.
///
/// Checked on the analyzed plan *before* optimization, because the
/// optimizer folds `now()` into the constant of the planning instant.
pub fn check_deterministic(plan: &LogicalPlan) -> Result<()> {
    let mut found: Option<String> = None;
    plan.apply_with_subqueries(|node| {
        // `mz_now()` may bound a filter's rows in time (a temporal
        // filter); those conjuncts are left out of the check.
        let exprs: Vec<Expr> = match node {
            LogicalPlan::Filter(f) => {
                datafusion::logical_expr::utils::split_conjunction(&f.predicate)
                    .into_iter()
                    .filter(|c| temporal::bound(c).is_none())
                    .cloned()
                    .collect()
            }
            _ => node.expressions(),
        };
        for e in exprs {
            let time_dependent = e.exists(|e| {
                Ok(match e {
                    Expr::ScalarFunction(f)
                        if f.func.signature().volatility != Volatility::Immutable =>
                    {
                        found = Some(f.func.name().to_string());
                        true
                    }
                    _ => false,
                })
            })?;
            if time_dependent {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })?;
    match found {
        Some(name) if name == "mz_now" => Err(temporal::refused()),
        Some(name) => Err(PlanError::Unsupported(format!(
            "function {name}() is not allowed in a materialized view: its value depends on when \
             the view is computed, so it cannot be maintained incrementally"
        ))),
        None => Ok(()),
    }
}

/// Lower an optimized plan to a dataflow plan.
pub fn lower(plan: &LogicalPlan) -> Result<RelPlan> {
    if matches!(plan, LogicalPlan::Projection(_) | LogicalPlan::Filter(_))
        && scalar_subquery::has_scalar_subquery(&plan.expressions())
    {
        return lower(&scalar_subquery::rewrite(plan)?);
    }
    check_expressions(plan)?;
    match plan {
        LogicalPlan::TableScan(scan) => {
            if scan.fetch.is_some() {
                return Err(unsupported("LIMIT pushed into a scan"));
            }
            let provider = source_as_provider(&scan.source)?;
            let any: &dyn std::any::Any = provider.as_ref();
            if let Some(view) = any.downcast_ref::<datafusion::catalog::view::ViewTable>() {
                return lower(view.logical_plan());
            }
            let bound = any
                .downcast_ref::<BoundTable>()
                .ok_or_else(|| unsupported(format!("reading {}", scan.table_name)))?;
            let full = provider.schema();
            let get = match (bound.collection(), bound.index()) {
                (Some(id), _) => RelPlan::Get {
                    id,
                    schema: Arc::clone(&full),
                },
                // An indexed view: reuse the index's arrangement.
                (None, Some((index, inputs))) => RelPlan::ArrangedGet {
                    index,
                    inputs: inputs.to_vec(),
                    schema: Arc::clone(&full),
                },
                (None, None) => {
                    return Err(unsupported(format!(
                        "a materialized view over the built-in relation {}",
                        scan.table_name
                    )));
                }
            };
            // Filters pushed into the scan of a stored collection only let
            // an ad hoc read skip parts: `BoundTable` takes every filter as
            // inexact, so the plan keeps each in a Filter above the scan,
            // lowered there; applying them here as well would filter (and
            // shift a temporal filter's times) twice.
            if scan.projection.is_none() {
                return Ok(get);
            }
            let qualified = Arc::new(DFSchema::try_from_qualified_schema(
                scan.table_name.clone(),
                &full,
            )?);
            let filter = None;
            let projection = match &scan.projection {
                Some(indices) => indices
                    .iter()
                    .map(|i| Expr::Column(Column::from(qualified.qualified_field(*i))))
                    .collect(),
                None => identity(&qualified),
            };
            Ok(RelPlan::Mfp {
                input: Box::new(get),
                input_schema: qualified,
                filter,
                projection,
                schema: arrow_schema(&scan.projected_schema),
            })
        }
        LogicalPlan::Projection(p) => Ok(RelPlan::Mfp {
            input: Box::new(lower(&p.input)?),
            input_schema: Arc::clone(p.input.schema()),
            filter: None,
            projection: p.expr.clone(),
            schema: arrow_schema(&p.schema),
        }),
        LogicalPlan::Filter(f) => {
            if let Some(topk) = per_group_topk(f)? {
                return Ok(topk);
            }
            let input = lower(&f.input)?;
            let schema = f.input.schema();
            let (filter, bounds) = temporal::split(&f.predicate)?;
            let filtered = match filter {
                Some(filter) => RelPlan::Mfp {
                    input: Box::new(input),
                    input_schema: Arc::clone(schema),
                    filter: Some(filter),
                    projection: identity(schema),
                    schema: arrow_schema(schema),
                },
                None => input,
            };
            Ok(temporal::temporal_filter(filtered, schema, bounds))
        }
        LogicalPlan::Join(j) => {
            let (kind, swap) = match j.join_type {
                JoinType::Inner => (JoinKind::Inner, false),
                JoinType::Left => (JoinKind::LeftOuter, false),
                JoinType::Right => (JoinKind::RightOuter, false),
                JoinType::Full => (JoinKind::FullOuter, false),
                JoinType::LeftSemi => (JoinKind::LeftSemi, false),
                JoinType::RightSemi => (JoinKind::LeftSemi, true),
                JoinType::LeftAnti => (JoinKind::LeftAnti, false),
                JoinType::RightAnti => (JoinKind::LeftAnti, true),
                JoinType::LeftMark => return lower(&mark_join(j)?),
                JoinType::RightMark => {
                    return Err(unsupported("EXISTS or IN combined with OR (a mark join)"));
                }
            };
            if j.null_aware {
                return lower(&not_in(j)?);
            }
            let (left, right) = if swap {
                (&j.right, &j.left)
            } else {
                (&j.left, &j.right)
            };
            let (left_keys, right_keys): (Vec<Expr>, Vec<Expr>) =
                j.on.iter()
                    .map(|(l, r)| {
                        if swap {
                            (r.clone(), l.clone())
                        } else {
                            (l.clone(), r.clone())
                        }
                    })
                    .unzip();
            let pair_schema = Arc::new(left.schema().join(right.schema())?);
            Ok(RelPlan::Join {
                left: Box::new(lower(left)?),
                right: Box::new(lower(right)?),
                left_schema: Arc::clone(left.schema()),
                right_schema: Arc::clone(right.schema()),
                left_keys,
                right_keys,
                kind,
                nulls_equal: j.null_equality == NullEquality::NullEqualsNull,
                filter: j.filter.clone(),
                pair_schema,
                schema: arrow_schema(&j.schema),
            })
        }
        LogicalPlan::Aggregate(a) => {
            if a.group_expr
                .iter()
                .any(|e| matches!(e, Expr::GroupingSet(_)))
            {
                return match grouping_sets::expand(a)? {
                    Some(union) => lower(&union),
                    None => Err(unsupported("this form of GROUPING SETS")),
                };
            }
            Ok(RelPlan::Reduce {
                input: Box::new(lower(&a.input)?),
                input_schema: Arc::clone(a.input.schema()),
                group: a.group_expr.clone(),
                aggregates: a.aggr_expr.clone(),
                schema: arrow_schema(&a.schema),
            })
        }
        LogicalPlan::Distinct(Distinct::All(input)) => Ok(RelPlan::Distinct {
            input: Box::new(lower(input)?),
        }),
        LogicalPlan::Distinct(Distinct::On(_)) => Err(unsupported("DISTINCT ON")),
        LogicalPlan::Union(u) => Ok(RelPlan::Union {
            inputs: u
                .inputs
                .iter()
                .map(|i| lower(i))
                .collect::<Result<Vec<_>>>()?,
            schema: arrow_schema(&u.schema),
        }),
        LogicalPlan::SubqueryAlias(a) => lower(&a.input),
        // A view is an unordered multiset: ORDER BY without LIMIT is moot.
        LogicalPlan::Sort(s) if s.fetch.is_none() => lower(&s.input),
        LogicalPlan::Sort(s) => Ok(RelPlan::TopK {
            input: Box::new(lower(&s.input)?),
            input_schema: Arc::clone(s.input.schema()),
            group: vec![],
            number: false,
            schema: arrow_schema(s.input.schema()),
            order: s.expr.clone(),
            offset: 0,
            limit: s.fetch,
        }),
        LogicalPlan::Limit(l) => {
            let offset = match l.get_skip_type()? {
                SkipType::Literal(n) => n,
                SkipType::UnsupportedExpr => return Err(unsupported("a non-constant OFFSET")),
            };
            let limit = match l.get_fetch_type()? {
                FetchType::Literal(n) => n,
                FetchType::UnsupportedExpr => return Err(unsupported("a non-constant LIMIT")),
            };
            // The optimizer leaves a bounded Sort under the Limit; its order
            // is the one the limit applies to.
            let (input, order) = match l.input.as_ref() {
                LogicalPlan::Sort(s) => (&s.input, s.expr.clone()),
                _ => (&l.input, vec![]),
            };
            Ok(RelPlan::TopK {
                input: Box::new(lower(input)?),
                input_schema: Arc::clone(input.schema()),
                group: vec![],
                number: false,
                schema: arrow_schema(input.schema()),
                order,
                offset,
                limit,
            })
        }
        LogicalPlan::Window(w) => Ok(RelPlan::Window {
            input: Box::new(lower(&w.input)?),
            input_schema: Arc::clone(w.input.schema()),
            window_exprs: w.window_expr.clone(),
            schema: arrow_schema(&w.schema),
        }),
        LogicalPlan::Values(v) => {
            let schema = arrow_schema(&v.schema);
            let batch = evaluate_rows(&schema, &v.values)?;
            Ok(RelPlan::Constant {
                schema,
                batches: vec![batch],
            })
        }
        LogicalPlan::EmptyRelation(e) => {
            let schema = arrow_schema(&e.schema);
            // `SELECT` without FROM reads one row of no (or NULL) columns.
            let rows = if e.produce_one_row {
                vec![
                    schema
                        .fields()
                        .iter()
                        .map(|f| Ok(Expr::Literal(ScalarValue::try_from(f.data_type())?, None)))
                        .collect::<Result<Vec<_>>>()?,
                ]
            } else {
                vec![]
            };
            Ok(RelPlan::Constant {
                batches: vec![evaluate_rows(&schema, &rows)?],
                schema,
            })
        }
        other => Err(unsupported(format!(
            "the plan node {} in a materialized view",
            other.display()
        ))),
    }
}

/// `x NOT IN (SELECT y ...)` (a null-aware anti join) with SQL's
/// three-valued answer, from operators the dataflow maintains:
///
/// ```text
/// (left ANTI JOIN right ON x = y)        -- NULL keys never match
///   × (SELECT count(*) AS n, count(y) AS nn FROM right)
///   WHERE n = nn                          -- a NULL y makes every row unknown
///     AND (n = 0 OR x IS NOT NULL)        -- a NULL x is unknown unless right is empty
/// ```
fn not_in(j: &datafusion::logical_expr::Join) -> Result<LogicalPlan> {
    use datafusion::functions_aggregate::expr_fn::count;
    use datafusion::logical_expr::{LogicalPlanBuilder, lit};
    let [(x, y)] = j.on.as_slice() else {
        return Err(unsupported("NOT IN with a row of several columns"));
    };
    if j.join_type != JoinType::LeftAnti {
        return Err(unsupported("this form of NOT IN (subquery)"));
    }
    if let Some(plan) = crate::decorrelate::correlated_not_in(j)? {
        return Ok(plan);
    }
    let anti = LogicalPlan::Join(datafusion::logical_expr::Join {
        null_aware: false,
        ..j.clone()
    });
    let stats = LogicalPlanBuilder::from(j.right.as_ref().clone())
        .aggregate(
            Vec::<Expr>::new(),
            vec![
                count(lit(1)).alias("__rows"),
                count(y.clone()).alias("__non_null"),
            ],
        )?
        .alias("__not_in")?
        .build()?;
    let rows = || Expr::Column(Column::new(Some("__not_in"), "__rows"));
    let non_null = Expr::Column(Column::new(Some("__not_in"), "__non_null"));
    let keep = rows()
        .eq(non_null)
        .and(rows().eq(lit(0i64)).or(x.clone().is_not_null()));
    let columns = left_columns(j);
    Ok(LogicalPlanBuilder::from(anti)
        .cross_join(stats)?
        .filter(keep)?
        .project(columns)?
        .build()?)
}

/// The left input's columns of `j`, as expressions.
fn left_columns(j: &datafusion::logical_expr::Join) -> Vec<Expr> {
    j.left
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect()
}

/// `EXISTS` or `IN` under `OR`, which DataFusion plans as a mark join
/// (every left row, plus whether it has a match): the rows with a match
/// marked true and those without marked false, from the semi and anti
/// joins the dataflow maintains. Each left row is in exactly one of the
/// two, once, so the union keeps the left side's multiplicities.
fn mark_join(j: &datafusion::logical_expr::Join) -> Result<LogicalPlan> {
    use datafusion::logical_expr::{LogicalPlanBuilder, lit};
    let (q, mark) = j.schema.qualified_field(j.schema.fields().len() - 1);
    let side = |join_type: JoinType, value: bool| -> Result<LogicalPlan> {
        let joined = LogicalPlan::Join(datafusion::logical_expr::Join::try_new(
            Arc::clone(&j.left),
            Arc::clone(&j.right),
            j.on.clone(),
            j.filter.clone(),
            join_type,
            j.join_constraint,
            j.null_equality,
            false,
        )?);
        let mut columns = left_columns(j);
        columns.push(lit(value).alias_qualified(q.cloned(), mark.name()));
        Ok(LogicalPlanBuilder::from(joined).project(columns)?.build()?)
    };
    Ok(LogicalPlanBuilder::from(side(JoinType::LeftSemi, true)?)
        .union(side(JoinType::LeftAnti, false)?)?
        .build()?)
}

/// `WHERE row_number() OVER (PARTITION BY g ORDER BY o) <= k` directly
/// over its window: a per-group top-k, maintained hierarchically instead of
/// recomputing the partition.
fn per_group_topk(f: &datafusion::logical_expr::Filter) -> Result<Option<RelPlan>> {
    use datafusion::logical_expr::{BinaryExpr, Operator};
    let LogicalPlan::Window(w) = f.input.as_ref() else {
        return Ok(None);
    };
    let [e] = w.window_expr.as_slice() else {
        return Ok(None);
    };
    let Expr::WindowFunction(wf) = e.clone().unalias_nested().data else {
        return Ok(None);
    };
    if wf.fun.name() != "row_number" || !wf.params.args.is_empty() {
        return Ok(None);
    }
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &f.predicate else {
        return Ok(None);
    };
    let (column, op, bound) = match (left.as_ref(), right.as_ref()) {
        (Expr::Column(c), Expr::Literal(v, _)) => (c, *op, v),
        (Expr::Literal(v, _), Expr::Column(c)) => match op.swap() {
            Some(op) => (c, op, v),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    let last = w.schema.fields().len() - 1;
    if w.schema.index_of_column(column).ok() != Some(last) {
        return Ok(None);
    }
    let Ok(ScalarValue::Int64(Some(bound))) = bound.cast_to(&arrow::datatypes::DataType::Int64)
    else {
        return Ok(None);
    };
    let limit = match op {
        Operator::LtEq => bound,
        Operator::Lt => bound - 1,
        _ => return Ok(None),
    };
    Ok(Some(RelPlan::TopK {
        input: Box::new(lower(&w.input)?),
        input_schema: Arc::clone(w.input.schema()),
        group: wf.params.partition_by.clone(),
        order: wf.params.order_by.clone(),
        offset: 0,
        limit: Some(usize::try_from(limit.max(0)).unwrap_or(0)),
        number: true,
        schema: arrow_schema(&w.schema),
    }))
}

/// Refuse expressions no dataflow operator evaluates: subqueries the
/// optimizer could not decorrelate.
fn check_expressions(plan: &LogicalPlan) -> Result<()> {
    // Filters (and scans' pushed-down filters) lower their `mz_now()`
    // bounds; the optimizer may have moved one anywhere else.
    if !matches!(plan, LogicalPlan::Filter(_) | LogicalPlan::TableScan(_))
        && plan.expressions().iter().any(temporal::calls_mz_now)
    {
        return Err(temporal::refused());
    }
    for e in plan.expressions() {
        let mut what = "";
        let refused = e.exists(|e| {
            what = match e {
                Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_) => {
                    "a subquery that cannot be decorrelated"
                }
                Expr::OuterReferenceColumn(..) => "a correlated reference",
                Expr::Placeholder(_) => "a parameter placeholder",
                _ => return Ok(false),
            };
            Ok(true)
        })?;
        if refused {
            return Err(unsupported(format!("{what} in a materialized view ({e})")));
        }
    }
    Ok(())
}

/// Cast the plan's output to `target`'s column types where they differ,
/// so the rows it emits are encoded as the view's shard stores them.
pub fn cast_to(plan: RelPlan, input: &DFSchemaRef, target: &SchemaRef) -> Result<RelPlan> {
    let current = plan.schema();
    if current.fields().len() != target.fields().len() {
        return Err(PlanError::Internal(format!(
            "view plan has {} columns, its description {}",
            current.fields().len(),
            target.fields().len()
        )));
    }
    let same = current
        .fields()
        .iter()
        .zip(target.fields())
        .all(|(a, b)| a.data_type() == b.data_type());
    if same {
        return Ok(plan);
    }
    let projection = identity(input)
        .into_iter()
        .zip(target.fields())
        .zip(current.fields())
        .map(|((e, want), have)| {
            if want.data_type() == have.data_type() {
                e
            } else {
                cast(e, want.data_type().clone())
            }
        })
        .collect();
    Ok(RelPlan::Mfp {
        input: Box::new(plan),
        input_schema: Arc::clone(input),
        filter: None,
        projection,
        schema: Arc::clone(target),
    })
}

fn identity(schema: &DFSchema) -> Vec<Expr> {
    schema.columns().into_iter().map(Expr::Column).collect()
}

fn arrow_schema(schema: &DFSchema) -> SchemaRef {
    Arc::new(schema.as_arrow().clone())
}

fn unsupported(what: impl std::fmt::Display) -> PlanError {
    PlanError::Unsupported(format!("{what} is not supported"))
}

/// Evaluate rows of constant expressions into one batch of `schema`.
fn evaluate_rows(schema: &SchemaRef, rows: &[Vec<Expr>]) -> Result<RecordBatch> {
    let empty = DFSchema::empty();
    let props = ExecutionProps::new();
    let planning = PhysicalPlanningContext::default();
    let arrow_err = |e: arrow::error::ArrowError| PlanError::from(DataFusionError::from(e));
    let one_row = RecordBatch::try_new_with_options(
        Arc::new(Schema::empty()),
        vec![],
        &RecordBatchOptions::new().with_row_count(Some(1)),
    )
    .map_err(arrow_err)?;
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for (j, field) in schema.fields().iter().enumerate() {
        let mut parts: Vec<ArrayRef> = Vec::with_capacity(rows.len());
        for row in rows {
            let e = row
                .get(j)
                .ok_or_else(|| PlanError::Internal("VALUES row shorter than its schema".into()))?;
            let physical = create_physical_expr(e, &empty, &props, &planning)?;
            let value = physical.evaluate(&one_row)?.into_array(1)?;
            let value = if value.data_type() == field.data_type() {
                value
            } else {
                arrow::compute::cast(&value, field.data_type()).map_err(arrow_err)?
            };
            parts.push(value);
        }
        let refs: Vec<&dyn arrow::array::Array> = parts.iter().map(|a| a.as_ref()).collect();
        columns.push(if refs.is_empty() {
            arrow::array::new_empty_array(field.data_type())
        } else {
            arrow::compute::concat(&refs).map_err(arrow_err)?
        });
    }
    RecordBatch::try_new_with_options(
        freshet_repr::nullable_schema(schema),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows.len())),
    )
    .map_err(arrow_err)
}

#[cfg(test)]
mod golden_tests;

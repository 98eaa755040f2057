//! Correlated scalar subqueries DataFusion cannot decorrelate, evaluated
//! row by row.
//!
//! DataFusion turns most correlated subqueries into joins, but not all: a
//! subquery whose body is a recursive CTE, or whose correlation sits where
//! no join can carry it, survives optimization and fails physical planning
//! ("Physical plan does not support logical expression ScalarSubquery").
//! Catalog readers write exactly such queries (asyncpg's type
//! introspection follows a domain's base types with a `WITH RECURSIVE`
//! inside a `CASE`), so this pass evaluates what is left the way
//! PostgreSQL does: for each row of the projection's input, substitute the
//! row's values for the outer references and run the subquery.
//!
//! The rewritten projection reads an in-memory table holding its input's
//! rows plus one column per subquery. The pass runs only on plans with
//! such a subquery (before the optimizer for a recursive one, which
//! DataFusion's decorrelation breaks; after it for whatever it left), and
//! refuses inputs larger than
//! [`MAX_ROWS`] (0A000): past that, row-by-row evaluation is a query that
//! would not finish, not an answer.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{Field, Schema};
use datafusion::catalog::MemTable;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, Result, ScalarValue};
use datafusion::datasource::provider_as_source;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, Projection, Subquery, lit};
use freshet_planner::error::sqlstate_error;
use freshet_repr::sqlstate;
use futures::future::BoxFuture;

/// The most input rows one projection's subqueries are evaluated for.
pub const MAX_ROWS: usize = 10_000;

/// Runs a logical plan to completion (the query executor, so subqueries
/// share the query's memory budget and stop flag).
pub trait RunPlan: Send + Sync {
    /// Optimize, plan and execute `plan`, returning its batches.
    fn run(&self, plan: LogicalPlan) -> BoxFuture<'_, Result<Vec<RecordBatch>>>;
}

/// Which correlated scalar subqueries a pass evaluates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// Those with a recursive CTE in their body, before the optimizer
    /// runs: its decorrelation rules rewrite a recursive CTE's anchor
    /// without its recursive term and fail ("must have the same number of
    /// columns").
    Recursive,
    /// Every one the optimizer left.
    All,
}

impl Which {
    fn selects(self, s: &Subquery) -> bool {
        if s.outer_ref_columns.is_empty() {
            return false;
        }
        match self {
            Which::All => true,
            Which::Recursive => s
                .subquery
                .exists(|node| Ok(matches!(node, LogicalPlan::RecursiveQuery(_))))
                .unwrap_or(false),
        }
    }
}

/// Whether `plan` holds a correlated scalar subquery `which` selects.
pub fn has_correlated(plan: &LogicalPlan, which: Which) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        for e in node.expressions() {
            let _ = e.apply(|e| {
                if let Expr::ScalarSubquery(s) = e
                    && which.selects(s)
                {
                    found = true;
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            });
        }
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    found
}

/// `plan` with every projection holding a correlated scalar subquery
/// `which` selects replaced by one over its input's evaluated rows.
pub fn evaluate<'a>(
    runner: &'a dyn RunPlan,
    plan: LogicalPlan,
    which: Which,
) -> BoxFuture<'a, Result<LogicalPlan>> {
    Box::pin(async move {
        if !has_correlated(&plan, which) {
            return Ok(plan);
        }
        let mut inputs = Vec::new();
        for input in plan.inputs() {
            inputs.push(evaluate(runner, input.clone(), which).await?);
        }
        let plan = plan.with_new_exprs(plan.expressions(), inputs)?;
        match plan {
            LogicalPlan::Projection(p) if p.expr.iter().any(|e| selected_in(e, which)) => {
                evaluate_projection(runner, p).await
            }
            other => Ok(other),
        }
    })
}

fn selected_in(e: &Expr, which: Which) -> bool {
    e.exists(|e| Ok(matches!(e, Expr::ScalarSubquery(s) if which.selects(s))))
        .unwrap_or(false)
}

async fn evaluate_projection(runner: &dyn RunPlan, p: Projection) -> Result<LogicalPlan> {
    let input_schema = Arc::clone(p.input.schema());
    let batches = runner.run(p.input.as_ref().clone()).await?;
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    if rows > MAX_ROWS {
        return Err(sqlstate_error(
            sqlstate::FEATURE_NOT_SUPPORTED,
            format!(
                "this correlated subquery cannot be decorrelated, and evaluating it for each of \
                 {rows} rows is refused (the limit is {MAX_ROWS})"
            ),
        ));
    }
    let arrow_schema = Arc::new(input_schema.as_arrow().clone());
    let input = arrow::compute::concat_batches(&arrow_schema, &batches)?;

    let mut subqueries: Vec<Subquery> = Vec::new();
    for e in &p.expr {
        e.apply(|e| {
            // Every correlated one, not only those `which` selects: the
            // rewritten projection's input no longer has the columns an
            // outer reference would name.
            if let Expr::ScalarSubquery(s) = e
                && Which::All.selects(s)
                && !subqueries.contains(s)
            {
                subqueries.push(s.clone());
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
    }

    let mut columns: Vec<ArrayRef> = input.columns().to_vec();
    let mut fields: Vec<Field> = input_schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| f.as_ref().clone().with_name(input_name(i)))
        .collect();
    for (j, s) in subqueries.iter().enumerate() {
        let values = subquery_values(runner, s, &input_schema, &input).await?;
        let field = s.subquery.schema().field(0);
        let data_type = field.data_type().clone();
        let array = if values.is_empty() {
            arrow::array::new_empty_array(&data_type)
        } else {
            ScalarValue::iter_to_array(values)?
        };
        fields.push(Field::new(subquery_name(j), data_type, true));
        columns.push(array);
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns)?;
    let table = MemTable::try_new(schema, vec![vec![batch]])?;
    let scan =
        LogicalPlanBuilder::scan(APPLY, provider_as_source(Arc::new(table)), None)?.build()?;

    let mut exprs = Vec::with_capacity(p.expr.len());
    for (k, e) in p.expr.into_iter().enumerate() {
        let rewritten = e
            .transform_down(|e| match e {
                Expr::ScalarSubquery(s) if Which::All.selects(&s) => {
                    let j = subqueries.iter().position(|q| *q == s).unwrap_or(0);
                    Ok(Transformed::new(
                        Expr::Column(Column::new(Some(APPLY), subquery_name(j))),
                        true,
                        TreeNodeRecursion::Jump,
                    ))
                }
                Expr::Column(c) => match input_schema.index_of_column(&c) {
                    Ok(i) => Ok(Transformed::yes(Expr::Column(Column::new(
                        Some(APPLY),
                        input_name(i),
                    )))),
                    Err(_) => Ok(Transformed::no(Expr::Column(c))),
                },
                other => Ok(Transformed::no(other)),
            })?
            .data;
        let (qualifier, field) = p.schema.qualified_field(k);
        exprs.push(rewritten.alias_qualified(qualifier.cloned(), field.name()));
    }
    Ok(LogicalPlan::Projection(Projection::try_new(
        exprs,
        Arc::new(scan),
    )?))
}

/// The value of `s` for each row of `input`, evaluated once per distinct
/// combination of the outer values it reads.
async fn subquery_values(
    runner: &dyn RunPlan,
    s: &Subquery,
    input_schema: &DFSchema,
    input: &RecordBatch,
) -> Result<Vec<ScalarValue>> {
    let mut outer: Vec<(Column, usize)> = Vec::new();
    for e in &s.outer_ref_columns {
        if let Expr::OuterReferenceColumn(_, c) = e
            && let Ok(i) = input_schema.index_of_column(c)
        {
            outer.push((c.clone(), i));
        }
    }
    let null = ScalarValue::try_from(s.subquery.schema().field(0).data_type())?;
    let mut cache: HashMap<Vec<ScalarValue>, ScalarValue> = HashMap::new();
    let mut out = Vec::with_capacity(input.num_rows());
    for row in 0..input.num_rows() {
        let key = outer
            .iter()
            .map(|(_, i)| ScalarValue::try_from_array(input.column(*i), row))
            .collect::<Result<Vec<_>>>()?;
        if let Some(v) = cache.get(&key) {
            out.push(v.clone());
            continue;
        }
        let bound = substitute(&s.subquery, &outer, &key)?;
        let batches = runner.run(bound).await?;
        let mut value = None;
        for b in &batches {
            for r in 0..b.num_rows() {
                if value.is_some() {
                    return Err(sqlstate_error(
                        sqlstate::CARDINALITY_VIOLATION,
                        "more than one row returned by a subquery used as an expression",
                    ));
                }
                value = Some(ScalarValue::try_from_array(b.column(0), r)?);
            }
        }
        let value = value.unwrap_or_else(|| null.clone());
        cache.insert(key, value.clone());
        out.push(value);
    }
    Ok(out)
}

/// `plan` with the outer references to `outer[i]` replaced by `values[i]`.
fn substitute(
    plan: &LogicalPlan,
    outer: &[(Column, usize)],
    values: &[ScalarValue],
) -> Result<LogicalPlan> {
    Ok(plan
        .clone()
        .transform_down_with_subqueries(|node| {
            node.map_expressions(|e| {
                e.transform(|e| match e {
                    Expr::OuterReferenceColumn(field, c) => {
                        match outer.iter().position(|(o, _)| *o == c) {
                            Some(i) => {
                                let v = values[i].cast_to(field.data_type())?;
                                Ok(Transformed::yes(lit(v)))
                            }
                            None => Ok(Transformed::no(Expr::OuterReferenceColumn(field, c))),
                        }
                    }
                    other => Ok(Transformed::no(other)),
                })
            })
        })?
        .data)
}

const APPLY: &str = "__freshet_apply";

fn input_name(i: usize) -> String {
    format!("__freshet_in_{i}")
}

fn subquery_name(j: usize) -> String {
    format!("__freshet_sq_{j}")
}

//! Subqueries in `ORDER BY` keys (see [`SortSubqueries`]).

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, Result};
use datafusion::logical_expr::{Expr, LogicalPlan, Projection, Sort, SortExpr};
use datafusion::optimizer::AnalyzerRule;
use std::sync::Arc;

/// DataFusion decorrelates subqueries in projections and filters only, and
/// refuses a plan whose `Sort` holds one. Postgres sorts by any expression
/// (Grafana orders its table list by `CASE WHEN ... IN (SELECT ...)`), so
/// such keys are computed by a projection below the sort, which sorts by
/// their columns, and a projection above it drops them again: the same
/// rows in the same order, in plan shapes DataFusion plans.
#[derive(Debug, Default)]
pub struct SortSubqueries;

/// The name of the column computing sort key `i`.
fn key_column(i: usize) -> String {
    format!("__freshet_sort_key_{i}")
}

impl AnalyzerRule for SortSubqueries {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let out = plan.transform_up_with_subqueries(|node| {
            let LogicalPlan::Sort(sort) = node else {
                return Ok(Transformed::no(node));
            };
            if !sort.expr.iter().any(|s| has_subquery(&s.expr)) {
                return Ok(Transformed::no(LogicalPlan::Sort(sort)));
            }
            let Sort { expr, input, fetch } = sort;
            let passed: Vec<Expr> = input
                .schema()
                .columns()
                .into_iter()
                .map(Expr::Column)
                .collect();
            let mut computed = passed.clone();
            let mut keys = Vec::with_capacity(expr.len());
            for (i, key) in expr.into_iter().enumerate() {
                if has_subquery(&key.expr) {
                    let name = key_column(i);
                    computed.push(key.expr.alias(&name));
                    keys.push(SortExpr {
                        expr: Expr::Column(Column::new_unqualified(name)),
                        ..key
                    });
                } else {
                    keys.push(key);
                }
            }
            let below = LogicalPlan::Projection(Projection::try_new(computed, input)?);
            let sorted = LogicalPlan::Sort(Sort {
                expr: keys,
                input: Arc::new(below),
                fetch,
            });
            let above = Projection::try_new(passed, Arc::new(sorted))?;
            Ok(Transformed::yes(LogicalPlan::Projection(above)))
        })?;
        Ok(out.data)
    }

    fn name(&self) -> &str {
        "freshet_sort_subqueries"
    }
}

/// Whether `expr` holds a subquery of any kind.
fn has_subquery(expr: &Expr) -> bool {
    expr.exists(|e| {
        Ok(matches!(
            e,
            Expr::ScalarSubquery(_) | Expr::InSubquery(_) | Expr::Exists(_)
        ))
    })
    .unwrap_or(false)
}

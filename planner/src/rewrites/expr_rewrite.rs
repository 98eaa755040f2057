//! Running an expression rewrite over every node of a plan.
//!
//! Freshet's analyzer rules rewrite expressions bottom-up against the
//! schema of each node's inputs, and must keep every expression's output
//! name (a projection above refers to it by name), so they all walk plans
//! the same way; this is that walk.

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Expr, LogicalPlan};

/// Apply `rewrite` bottom-up to every expression of every node (subqueries
/// included), with the merged schema of the node's inputs, preserving the
/// expressions' names.
pub(crate) fn rewrite_expressions_up(
    plan: LogicalPlan,
    rewrite: impl Fn(Expr, &DFSchema) -> Result<Transformed<Expr>>,
) -> Result<LogicalPlan> {
    let out = plan.transform_up_with_subqueries(|node| {
        let mut schema = DFSchema::empty();
        for input in node.inputs() {
            schema.merge(input.schema());
        }
        let preserver = NamePreserver::new(&node);
        node.map_expressions(|e| {
            let saved = preserver.save(&e);
            Ok(e.transform_up(|e| rewrite(e, &schema))?
                .update_data(|e| saved.restore(e)))
        })
    })?;
    Ok(out.data)
}

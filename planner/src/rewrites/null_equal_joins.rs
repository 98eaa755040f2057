//! Joins whose keys match NULLs (`NullEqualsNull`) keep that meaning for
//! their own keys only.
//!
//! The unnesting rule ([`crate::decorrelate`]) joins outer rows back to
//! their subquery results on the outer values *including NULL* (an outer
//! row with a NULL correlation value still has a subquery result), and
//! DataFusion turns `a IS NOT DISTINCT FROM b` join filters into such keys
//! too. DataFusion's `extract_equijoin_predicate` later moves any plain
//! `x = y` of the join's filter into the keys, where it inherits the
//! join's NULL matching: `WHERE t.a = (SELECT ... no rows)` then kept the
//! rows whose `a` is NULL. This rule runs right before that extraction:
//! on a NULL-matching join whose filter holds an equality, it turns the
//! keys back into `IS NOT DISTINCT FROM` conjuncts of the filter and makes
//! the join NULL-rejecting, so the extraction that follows keys the join
//! on the plain equalities (with SQL's NULL semantics) and keeps the
//! NULL-matching ones as the residual filter.

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::common::{NullEquality, Result};
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{BinaryExpr, Expr, Join, JoinType, LogicalPlan, Operator};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use crate::decorrelate::domain::is_not_distinct_from;

/// The rule (see the module docs).
#[derive(Debug, Default)]
pub struct NullEqualJoins;

impl NullEqualJoins {
    /// The DataFusion rule this one must run right before.
    const BEFORE: &'static str = "extract_equijoin_predicate";

    /// `rules` with this rule right before DataFusion's equijoin
    /// extraction (in every pass of the optimizer).
    pub fn placed_in(
        mut rules: Vec<Arc<dyn OptimizerRule + Send + Sync>>,
    ) -> Vec<Arc<dyn OptimizerRule + Send + Sync>> {
        let at = rules
            .iter()
            .position(|r| r.name() == Self::BEFORE)
            .unwrap_or(0);
        rules.insert(at, Arc::new(NullEqualJoins));
        rules
    }
}

/// Whether `filter` has a top-level `x = y` conjunct.
fn has_equality(filter: &Expr) -> bool {
    split_conjunction(filter).into_iter().any(|e| {
        matches!(
            e,
            Expr::BinaryExpr(BinaryExpr {
                op: Operator::Eq,
                ..
            })
        )
    })
}

impl OptimizerRule for NullEqualJoins {
    fn name(&self) -> &str {
        "null_equal_joins"
    }

    fn apply_order(&self) -> Option<datafusion::optimizer::ApplyOrder> {
        Some(datafusion::optimizer::ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Join(j) = &plan else {
            return Ok(Transformed::no(plan));
        };
        let Some(filter) = &j.filter else {
            return Ok(Transformed::no(plan));
        };
        // Mark and null-aware joins keep their keys: their NULL handling is
        // their own (and DataFusion's rules expect their keys in place).
        let marks = matches!(j.join_type, JoinType::LeftMark | JoinType::RightMark);
        if j.null_equality != NullEquality::NullEqualsNull
            || marks
            || j.null_aware
            || !has_equality(filter)
        {
            return Ok(Transformed::no(plan));
        }
        let keys =
            j.on.iter()
                .map(|(l, r)| is_not_distinct_from(l.clone(), r.clone()));
        let filter = conjunction(keys.chain(std::iter::once(filter.clone())));
        Ok(Transformed::yes(LogicalPlan::Join(Join::try_new(
            Arc::clone(&j.left),
            Arc::clone(&j.right),
            vec![],
            filter,
            j.join_type,
            j.join_constraint,
            NullEquality::NullEqualsNothing,
            j.null_aware,
        )?)))
    }
}

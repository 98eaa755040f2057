//! Temporal filters: the `mz_now()` conjuncts of a maintained query's
//! `WHERE`, lowered to [`RelPlan::TemporalFilter`].
//!
//! A conjunct is a time bound when it compares `mz_now()` (times a whole
//! number, as [`crate::rewrites::mz_now_comparisons`] states comparisons
//! with timestamps in microseconds) with an expression that does not call
//! `mz_now()`, by `=`, `<`, `<=`, `>` or `>=`, either way round.
//! `BETWEEN` arrives as two such conjuncts. Any other use of `mz_now()` in
//! a maintained definition is refused, saying which forms work.

use datafusion::common::tree_node::TreeNode;
use datafusion::common::{DFSchemaRef, ScalarValue};
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use freshet_compute_types::{RelPlan, TimeBound, TimeOp};

use crate::error::{PlanError, Result};
use crate::rewrites::mz_now_comparisons::is_mz_now;

/// What a maintained definition may do with `mz_now()`.
pub const FORMS: &str = "mz_now() may appear in a materialized view, index or SUBSCRIBE only in \
     WHERE conditions ANDed at top level of the form mz_now() {=, <, <=, >, >=} expr or \
     mz_now() BETWEEN a AND b (either way round), where expr does not call mz_now()";

/// Whether `e` calls `mz_now()` anywhere.
pub fn calls_mz_now(e: &Expr) -> bool {
    e.exists(|x| Ok(is_mz_now(x))).unwrap_or(false)
}

/// Whether any expression of `plan` (subqueries included) calls
/// `mz_now()`.
pub fn plan_calls_mz_now(plan: &datafusion::logical_expr::LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        found = node.expressions().iter().any(calls_mz_now);
        Ok(if found {
            datafusion::common::tree_node::TreeNodeRecursion::Stop
        } else {
            datafusion::common::tree_node::TreeNodeRecursion::Continue
        })
    });
    found
}

/// A whole-number literal (through casts).
fn whole(e: &Expr) -> Option<i64> {
    match e {
        Expr::Literal(v, _) => match v {
            ScalarValue::Int64(Some(v)) => Some(*v),
            ScalarValue::Int32(Some(v)) => Some(i64::from(*v)),
            ScalarValue::Decimal128(Some(v), _, 0) => i64::try_from(*v).ok(),
            _ => None,
        },
        Expr::Cast(c) => whole(&c.expr),
        Expr::TryCast(c) => whole(&c.expr),
        _ => None,
    }
}

/// The units per millisecond of `e` if it is `mz_now()` times a whole
/// number (through casts).
fn units(e: &Expr) -> Option<i64> {
    match e {
        _ if is_mz_now(e) => Some(1),
        Expr::Cast(c) => units(&c.expr),
        Expr::TryCast(c) => units(&c.expr),
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Multiply,
            right,
        }) => match (units(left), whole(right), whole(left), units(right)) {
            (Some(u), Some(k), _, _) | (_, _, Some(k), Some(u)) if k > 0 => u.checked_mul(k),
            _ => None,
        },
        _ => None,
    }
}

fn time_op(op: Operator) -> Option<TimeOp> {
    Some(match op {
        Operator::Eq => TimeOp::Eq,
        Operator::Lt => TimeOp::Lt,
        Operator::LtEq => TimeOp::LtEq,
        Operator::Gt => TimeOp::Gt,
        Operator::GtEq => TimeOp::GtEq,
        _ => return None,
    })
}

/// `e <op> now` as `now <op'> e`.
fn flipped(op: TimeOp) -> TimeOp {
    match op {
        TimeOp::Eq => TimeOp::Eq,
        TimeOp::Lt => TimeOp::Gt,
        TimeOp::LtEq => TimeOp::GtEq,
        TimeOp::Gt => TimeOp::Lt,
        TimeOp::GtEq => TimeOp::LtEq,
    }
}

/// The time bound `conjunct` states, if it is one.
pub fn bound(conjunct: &Expr) -> Option<TimeBound> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = conjunct else {
        return None;
    };
    let op = time_op(*op)?;
    match (units(left), units(right)) {
        (Some(units), None) if !calls_mz_now(right) => Some(TimeBound {
            op,
            expr: right.as_ref().clone(),
            units,
        }),
        (None, Some(units)) if !calls_mz_now(left) => Some(TimeBound {
            op: flipped(op),
            expr: left.as_ref().clone(),
            units,
        }),
        _ => None,
    }
}

/// A predicate's ordinary conjuncts (as one predicate) and its time
/// bounds; an error if `mz_now()` is used any other way.
pub fn split(predicate: &Expr) -> Result<(Option<Expr>, Vec<TimeBound>)> {
    let mut ordinary = Vec::new();
    let mut bounds = Vec::new();
    for conjunct in split_conjunction(predicate) {
        if !calls_mz_now(conjunct) {
            ordinary.push(conjunct.clone());
            continue;
        }
        match bound(conjunct) {
            Some(b) => bounds.push(b),
            None => return Err(refused()),
        }
    }
    Ok((conjunction(ordinary), bounds))
}

/// The error for any other use of `mz_now()`.
pub fn refused() -> PlanError {
    PlanError::Unsupported(FORMS.into())
}

/// `input` (over `schema`) kept to the rows `bounds` admit at each time.
pub fn temporal_filter(input: RelPlan, schema: &DFSchemaRef, bounds: Vec<TimeBound>) -> RelPlan {
    if bounds.is_empty() {
        return input;
    }
    RelPlan::TemporalFilter {
        input: Box::new(input),
        input_schema: std::sync::Arc::clone(schema),
        bounds,
    }
}

//! `mz_now()` compared with timestamps (see [`MzNowComparisons`]).

use std::sync::Arc;

use arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    Between, BinaryExpr, Cast, Expr, ExprSchemable, LogicalPlan, Operator, lit,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::sql::sqlparser::ast::BinaryOperator;

/// `mz_now()` is Materialize's `mz_timestamp`: milliseconds, shown as a
/// number, but comparable with `timestamp`, `timestamptz` and `date`
/// (`WHERE mz_now() <= ts + INTERVAL '5 minutes'`). DataFusion cannot
/// coerce a decimal and a timestamp, so before type coercion each such
/// comparison is restated exactly in microseconds: `mz_now() * 1000 <op>
/// CAST(ts AS bigint)` (a timestamp's microseconds since the epoch).
/// `mz_now() BETWEEN a AND b` becomes the two comparisons first. The
/// maintained form (`lower::temporal`) reads the same shapes, so a view
/// and its query ad hoc compare the same numbers.
#[derive(Debug, Default)]
pub struct MzNowComparisons;

/// The same restatement while the SQL planner builds a comparison: a
/// select list is typed as it is planned, before any analyzer rule runs
/// (`SELECT mz_now() < end_time` would fail there).
#[derive(Debug, Default)]
pub struct MzNowComparisonPlanner;

impl ExprPlanner for MzNowComparisonPlanner {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        let op = match expr.op {
            BinaryOperator::Eq => Operator::Eq,
            BinaryOperator::Lt => Operator::Lt,
            BinaryOperator::LtEq => Operator::LtEq,
            BinaryOperator::Gt => Operator::Gt,
            BinaryOperator::GtEq => Operator::GtEq,
            _ => return Ok(PlannerResult::Original(expr)),
        };
        if !(is_mz_now(&expr.left) || is_mz_now(&expr.right)) {
            return Ok(PlannerResult::Original(expr));
        }
        let comparison = Expr::BinaryExpr(BinaryExpr::new(
            Box::new(expr.left.clone()),
            op,
            Box::new(expr.right.clone()),
        ));
        let restated = restate(comparison.clone(), schema)?;
        Ok(if restated == comparison {
            PlannerResult::Original(expr)
        } else {
            PlannerResult::Planned(restated)
        })
    }
}

/// Whether `e` is a call of `mz_now()`.
pub fn is_mz_now(e: &Expr) -> bool {
    matches!(e, Expr::ScalarFunction(f) if f.func.name() == "mz_now" && f.args.is_empty())
}

fn comparison(op: Operator) -> bool {
    matches!(
        op,
        Operator::Eq | Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq
    )
}

/// The microseconds of a timestamp or date expression.
fn micros(e: Expr) -> Expr {
    let utc = DataType::Timestamp(TimeUnit::Microsecond, Some(freshet_repr::UTC_TZ.into()));
    Expr::Cast(Cast::new(
        Box::new(Expr::Cast(Cast::new(Box::new(e), utc))),
        DataType::Int64,
    ))
}

fn is_time(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Timestamp(..) | DataType::Date32 | DataType::Date64
    )
}

/// Restate one expression (and its children) for `schema`.
fn rewrite(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    e.transform_up(|e| match e {
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) if is_mz_now(&expr) => {
            let lower = restate(
                Expr::BinaryExpr(BinaryExpr::new(expr.clone(), Operator::GtEq, low)),
                schema,
            )?;
            let upper = restate(
                Expr::BinaryExpr(BinaryExpr::new(expr, Operator::LtEq, high)),
                schema,
            )?;
            Ok(Transformed::yes(lower.and(upper)))
        }
        Expr::BinaryExpr(b) if comparison(b.op) && (is_mz_now(&b.left) || is_mz_now(&b.right)) => {
            Ok(Transformed::yes(restate(Expr::BinaryExpr(b), schema)?))
        }
        other => Ok(Transformed::no(other)),
    })
}

/// `mz_now() <op> ts` (either way round) in microseconds, if `ts` is a
/// time; anything else as it is.
fn restate(e: Expr, schema: &DFSchema) -> Result<Expr> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = e else {
        return Ok(e);
    };
    let now_micros = |now: Box<Expr>| {
        Box::new(Expr::BinaryExpr(BinaryExpr::new(
            now,
            Operator::Multiply,
            Box::new(lit(1000_i64)),
        )))
    };
    let typed = |x: &Expr| x.get_type(schema).ok().is_some_and(|t| is_time(&t));
    Ok(if is_mz_now(&left) && typed(&right) {
        Expr::BinaryExpr(BinaryExpr::new(
            now_micros(left),
            op,
            Box::new(micros(*right)),
        ))
    } else if is_mz_now(&right) && typed(&left) {
        Expr::BinaryExpr(BinaryExpr::new(
            Box::new(micros(*left)),
            op,
            now_micros(right),
        ))
    } else {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
    })
}

impl AnalyzerRule for MzNowComparisons {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let out = plan.transform_up_with_subqueries(|node| {
            let uses_mz_now = node
                .expressions()
                .iter()
                .any(|e| e.exists(|x| Ok(is_mz_now(x))).unwrap_or(false));
            if !uses_mz_now {
                return Ok(Transformed::no(node));
            }
            // The columns the node's expressions may name.
            let mut schema = DFSchema::empty();
            for input in node.inputs() {
                schema.merge(input.schema());
            }
            let schema = Arc::new(schema);
            let node = node.map_expressions(|e| rewrite(e, &schema))?;
            if node.transformed {
                Ok(Transformed::yes(node.data.recompute_schema()?))
            } else {
                Ok(node)
            }
        })?;
        Ok(out.data)
    }

    fn name(&self) -> &str {
        "mz_now_comparisons"
    }
}

//! Comparisons and arithmetic that mix `double precision` with `numeric`
//! run in `double precision`, as in Postgres (see [`FloatNumericMixes`]).

use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::{Between, InList};
use datafusion::logical_expr::{BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator};
use datafusion::optimizer::AnalyzerRule;

use super::expr_rewrite::rewrite_expressions_up;

/// Postgres resolves `float8 = numeric` (and `<`, `+`, `IN`, `BETWEEN`,
/// ...) by casting the `numeric` side to `float8`, its numeric category's
/// preferred type; DataFusion's coercion casts the float to a decimal
/// instead, which fails on NaN, infinities and values past the decimal's
/// range (`numeric field overflow` for `f = 0.5` when any row holds
/// `'NaN'`) and rounds the float. Runs before type coercion: the decimal
/// side of such a mix is cast to `Float64`, and coercion widens a `real`
/// side to match (Postgres also compares `real` with `numeric` as
/// `float8`).
#[derive(Debug, Default)]
pub struct FloatNumericMixes;

impl AnalyzerRule for FloatNumericMixes {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        rewrite_expressions_up(plan, |e, schema| match e {
            Expr::BinaryExpr(BinaryExpr { left, op, right }) if mixing_operator(op) => {
                let mut operands = [*left, *right];
                let changed = as_float_where_mixed(&mut operands, schema)?;
                let [left, right] = operands;
                Ok(Transformed::new_transformed(
                    Expr::BinaryExpr(BinaryExpr::new(Box::new(left), op, Box::new(right))),
                    changed,
                ))
            }
            Expr::Between(Between {
                expr,
                negated,
                low,
                high,
            }) => {
                let mut operands = [*expr, *low, *high];
                let changed = as_float_where_mixed(&mut operands, schema)?;
                let [expr, low, high] = operands;
                Ok(Transformed::new_transformed(
                    Expr::Between(Between::new(
                        Box::new(expr),
                        negated,
                        Box::new(low),
                        Box::new(high),
                    )),
                    changed,
                ))
            }
            Expr::InList(InList {
                expr,
                list,
                negated,
            }) => {
                let mut operands: Vec<Expr> = std::iter::once(*expr).chain(list).collect();
                let changed = as_float_where_mixed(&mut operands, schema)?;
                let list = operands.split_off(1);
                Ok(Transformed::new_transformed(
                    Expr::InList(InList::new(Box::new(operands.remove(0)), list, negated)),
                    changed,
                ))
            }
            other => Ok(Transformed::no(other)),
        })
    }

    fn name(&self) -> &str {
        "freshet_float_numeric_mixes"
    }
}

/// The operators whose operands Postgres brings to one type.
fn mixing_operator(op: Operator) -> bool {
    use Operator::*;
    matches!(
        op,
        Eq | NotEq
            | Lt
            | LtEq
            | Gt
            | GtEq
            | IsDistinctFrom
            | IsNotDistinctFrom
            | Plus
            | Minus
            | Multiply
            | Divide
            | Modulo
    )
}

/// When `operands` hold both a float and a decimal, cast each decimal
/// one to `Float64`; whether any was cast.
fn as_float_where_mixed(operands: &mut [Expr], schema: &DFSchema) -> Result<bool> {
    // An operand whose type is not known here (a column of an outer
    // query) is left to type coercion.
    let Some(types) = operands
        .iter()
        .map(|e| e.get_type(schema).ok())
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(false);
    };
    let float = types
        .iter()
        .any(|t| matches!(t, DataType::Float32 | DataType::Float64));
    let decimal = |t: &DataType| matches!(t, DataType::Decimal128(..) | DataType::Decimal256(..));
    if !float || !types.iter().any(decimal) {
        return Ok(false);
    }
    for (e, t) in operands.iter_mut().zip(&types) {
        if decimal(t) {
            let taken = std::mem::replace(e, Expr::Literal(ScalarValue::Null, None));
            *e = taken.cast_to(&DataType::Float64, schema)?;
        }
    }
    Ok(true)
}

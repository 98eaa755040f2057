//! `x op ANY (array)` with PostgreSQL's three-valued answer.
//!
//! DataFusion plans `x = ANY (a)` as `array_has(a, x)` and the other
//! comparisons through `array_min`/`array_max`, which skip NULL elements:
//! `3 = ANY ('{1,NULL}')` comes out false where PostgreSQL answers NULL
//! (the NULL element might be 3), and `NULL = ANY ('{}')` NULL where
//! PostgreSQL answers false (no element, so no comparison can hold).
//! PostgreSQL's rule: true if the comparison holds for some element; else
//! NULL if the array or `x` is NULL (and the array is not empty) or an
//! element is NULL; else false. This rewrite spells that rule out as a
//! `CASE` over the same functions, on the AST (`ANY` over a subquery is
//! planned elsewhere; an untyped string literal on the right is left to
//! DataFusion, which reads it as the array it spells, and so is a bare
//! parameter, whose type is inferred from DataFusion's plan).

use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr, Value};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// Rewrite `expr` if it is `x op ANY (array)` (see the module docs).
pub fn rewrite(expr: &mut Expr) {
    let Expr::AnyOp {
        left,
        compare_op,
        right,
        ..
    } = expr
    else {
        return;
    };
    // A bare parameter (`= ANY($1)`) is left to DataFusion too: its type
    // is inferred from `array_has($1, x)` as an array of `x`'s type
    // (`statements::context`), which the functions below would refuse
    // for a parameter not yet typed.
    if matches!(right.as_ref(), Expr::Subquery(_))
        || matches!(right.as_ref(), Expr::Value(v) if matches!(v.value, Value::SingleQuotedString(_) | Value::Placeholder(_)))
    {
        return;
    }
    let (x, a) = (format!("({left})"), format!("({right})"));
    // Whether the comparison holds for some non-NULL element.
    let holds = match compare_op {
        BinaryOperator::Eq => format!("array_has({a}, {x})"),
        BinaryOperator::NotEq => format!("{x} <> array_min({a}) OR {x} <> array_max({a})"),
        BinaryOperator::Gt => format!("{x} > array_min({a})"),
        BinaryOperator::GtEq => format!("{x} >= array_min({a})"),
        BinaryOperator::Lt => format!("{x} < array_max({a})"),
        BinaryOperator::LtEq => format!("{x} <= array_max({a})"),
        _ => return,
    };
    let sql = format!(
        "CASE WHEN {a} IS NULL THEN NULL WHEN cardinality({a}) = 0 THEN false \
         WHEN {x} IS NULL THEN NULL WHEN {holds} THEN true \
         WHEN array_position({a}, NULL) IS NOT NULL THEN NULL ELSE false END"
    );
    if let Ok(case) = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_expr())
    {
        *expr = Expr::Nested(Box::new(case));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut e = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(sql)
            .and_then(|mut p| p.parse_expr())
            .expect("parses");
        rewrite(&mut e);
        e.to_string()
    }

    #[test]
    fn arrays_get_the_null_aware_case() {
        let e = rewritten("x = ANY(a)");
        assert!(e.starts_with("(CASE WHEN (a) IS NULL THEN NULL"), "{e}");
        assert!(e.contains("array_has((a), (x))"), "{e}");
        assert!(
            e.contains("array_position((a), NULL) IS NOT NULL THEN NULL"),
            "{e}"
        );
        assert!(rewritten("x > ANY(a)").contains("(x) > array_min((a))"));
    }

    #[test]
    fn subqueries_and_untyped_literals_are_left_alone() {
        assert_eq!(
            rewritten("x = ANY(SELECT y FROM t)"),
            "x = ANY(SELECT y FROM t)"
        );
        assert_eq!(rewritten("x = ANY('{1,2}')"), "x = ANY('{1,2}')");
        assert_eq!(rewritten("x = ANY($1)"), "x = ANY($1)");
    }
}

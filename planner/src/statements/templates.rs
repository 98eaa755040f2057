//! Statement templates: a simple-protocol `UPDATE` or `DELETE` with its
//! integer literals made parameters, so that statements differing only
//! in those literals share one plan, as executions of a prepared
//! statement do.
//!
//! Each integer literal becomes `CAST($n AS integer)` (or `bigint`, for
//! one beyond 32 bits) with the literal's value as the parameter: exactly
//! the type [`crate::rewrites::integer_literals`] gives the literal, so
//! the template's plan computes what the statement's would. Other
//! literals (strings, whose type depends on where they stand; decimals)
//! stay in the template's text, which is its cache key. A statement with
//! a subquery, or one that already has `$n`, is not templated.

use std::ops::ControlFlow;

use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{
    self, CastKind, DataType, Expr, Query, Value, ValueWithSpan, VisitMut, VisitorMut,
};

use crate::parser::Statement;

/// The template of `stmt` and the values of its parameters, if `stmt` is
/// an `UPDATE` or `DELETE` with at least one integer literal to take out.
pub fn parameterize(stmt: &Statement) -> Option<(Statement, Vec<ScalarValue>)> {
    let Statement::Sql(sql) = stmt else {
        return None;
    };
    if !matches!(
        sql.as_ref(),
        ast::Statement::Update(_) | ast::Statement::Delete(_)
    ) {
        return None;
    }
    let mut template = sql.as_ref().clone();
    let mut taker = LiteralTaker::default();
    if template.visit(&mut taker).is_break() || taker.values.is_empty() {
        return None;
    }
    Some((Statement::Sql(Box::new(template)), taker.values))
}

#[derive(Default)]
struct LiteralTaker {
    values: Vec<ScalarValue>,
}

impl VisitorMut for LiteralTaker {
    type Break = ();

    fn pre_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        ControlFlow::Break(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Value(ValueWithSpan { value, .. }) = expr else {
            return ControlFlow::Continue(());
        };
        match value {
            Value::Placeholder(_) => return ControlFlow::Break(()),
            Value::Number(text, false) if text.bytes().all(|b| b.is_ascii_digit()) => {
                let Ok(n) = text.parse::<i64>() else {
                    return ControlFlow::Continue(());
                };
                let (value, ty) = match i32::try_from(n) {
                    Ok(small) => (ScalarValue::Int32(Some(small)), DataType::Integer(None)),
                    Err(_) => (ScalarValue::Int64(Some(n)), DataType::BigInt(None)),
                };
                self.values.push(value);
                let placeholder = Value::Placeholder(format!("${}", self.values.len()));
                *expr = Expr::Cast {
                    kind: CastKind::Cast,
                    expr: Box::new(Expr::value(placeholder)),
                    data_type: ty,
                    array: false,
                    format: None,
                };
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(sql: &str) -> Option<(String, Vec<ScalarValue>)> {
        let stmt = crate::parser::parse(sql)
            .unwrap()
            .into_iter()
            .next()
            .unwrap();
        parameterize(&stmt).map(|(t, v)| (t.to_string(), v))
    }

    #[test]
    fn integer_literals_become_typed_parameters() {
        let (text, values) =
            template("UPDATE kv SET v = v + 1, s = 'a1' WHERE k = 3000000000 AND x = 2.5").unwrap();
        assert_eq!(
            text,
            "UPDATE kv SET v = v + CAST($1 AS INTEGER), s = 'a1' WHERE k = CAST($2 AS BIGINT) AND x = 2.5"
        );
        assert_eq!(
            values,
            vec![
                ScalarValue::Int32(Some(1)),
                ScalarValue::Int64(Some(3_000_000_000))
            ]
        );
        assert!(template("DELETE FROM t WHERE k = -7").is_some());
    }

    #[test]
    fn other_statements_are_not_templated() {
        assert!(template("SELECT 1").is_none());
        assert!(template("INSERT INTO t VALUES (1)").is_none());
        assert!(template("UPDATE t SET v = 'x' WHERE k = 'a'").is_none());
        assert!(template("UPDATE t SET v = 1 WHERE k = $1").is_none());
        assert!(template("DELETE FROM t WHERE k IN (SELECT 1)").is_none());
        assert!(template("UPDATE t SET v = 99999999999999999999 WHERE k = 'a'").is_none());
    }
}

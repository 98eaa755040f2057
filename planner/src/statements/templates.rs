//! Statement templates: a simple-protocol `UPDATE` or `DELETE` with its
//! integer literals made parameters (for a `SELECT`, those of its `WHERE`
//! clause), so that statements differing only in those literals share
//! one plan, as executions of a prepared statement do.
//!
//! Each integer literal becomes `CAST($n AS integer)` (or `bigint`, for
//! one beyond 32 bits) with the literal's value as the parameter: exactly
//! the type [`crate::rewrites::integer_literals`] gives the literal, so
//! the template's plan computes what the statement's would. Other
//! literals (strings, whose type depends on where they stand; decimals)
//! stay in the template's text, which is its cache key. A statement with
//! a subquery, or one that already has `$n`, is not templated.
//!
//! A `SELECT`'s other literals stay: one in the select list names its
//! column (`SELECT 1` is `?column?`, a cast would be `int4`), one in
//! `GROUP BY 1`/`ORDER BY 1` is a position, and `LIMIT` is no key.

use std::ops::ControlFlow;

use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{
    self, CastKind, DataType, Expr, Query, Value, ValueWithSpan, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::tokenizer::Location;

use crate::parser::Statement;

/// A statement with its integer literals taken out.
#[derive(Debug)]
pub struct Parameterized {
    /// The statement with `CAST($n AS integer|bigint)` for each literal.
    pub template: Statement,
    /// The literals' values, in parameter order.
    pub values: Vec<ScalarValue>,
    /// Where each literal stood in the statement's text, in parameter
    /// order: what a [`super::shapes::ShapeBinding`] learns from.
    pub taken: Vec<Location>,
}

/// The template of `stmt` and the values of its parameters, if `stmt` is
/// an `UPDATE`, `DELETE` or single `SELECT` with at least one integer
/// literal to take out.
pub fn parameterize(stmt: &Statement) -> Option<Parameterized> {
    let Statement::Sql(sql) = stmt else {
        return None;
    };
    let mut template = sql.as_ref().clone();
    let mut taker = LiteralTaker::default();
    let taken = match &mut template {
        ast::Statement::Update(_) | ast::Statement::Delete(_) => template.visit(&mut taker),
        ast::Statement::Query(query) => {
            // A subquery outside `WHERE` is not seen by the taker: refuse
            // it there too, as for writes.
            if query.with.is_some() || has_subquery(&query.body) {
                return None;
            }
            match query.body.as_mut() {
                ast::SetExpr::Select(select) => select.selection.as_mut()?.visit(&mut taker),
                _ => return None,
            }
        }
        _ => return None,
    };
    if taken.is_break() || taker.values.is_empty() {
        return None;
    }
    Some(Parameterized {
        template: Statement::Sql(Box::new(template)),
        values: taker.values,
        taken: taker.taken,
    })
}

/// Whether a query's body holds a subquery (or `$n`) anywhere: the
/// template of a `SELECT` binds values in its `WHERE` clause only, and a
/// plan with nested queries is not kept anyway.
fn has_subquery(body: &ast::SetExpr) -> bool {
    struct Finder;
    impl ast::Visitor for Finder {
        type Break = ();
        fn pre_visit_query(&mut self, _query: &Query) -> ControlFlow<()> {
            ControlFlow::Break(())
        }
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            match expr {
                Expr::Value(ValueWithSpan {
                    value: Value::Placeholder(_),
                    ..
                }) => ControlFlow::Break(()),
                _ => ControlFlow::Continue(()),
            }
        }
    }
    ast::Visit::visit(body, &mut Finder).is_break()
}

#[derive(Default)]
struct LiteralTaker {
    values: Vec<ScalarValue>,
    taken: Vec<Location>,
}

impl VisitorMut for LiteralTaker {
    type Break = ();

    fn pre_visit_query(&mut self, _query: &mut Query) -> ControlFlow<()> {
        ControlFlow::Break(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Value(ValueWithSpan { value, span }) = expr else {
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
                self.taken.push(span.start);
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
        parameterize(&stmt).map(|p| (p.template.to_string(), p.values))
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
    fn a_select_templates_its_where_clause_only() {
        let (text, values) = template(
            "SELECT v, 2 FROM kv JOIN t ON t.a = kv.v + 1 WHERE kv.k = 7 ORDER BY 1 LIMIT 3",
        )
        .unwrap();
        assert_eq!(
            text,
            "SELECT v, 2 FROM kv JOIN t ON t.a = kv.v + 1 WHERE kv.k = CAST($1 AS INTEGER) ORDER BY 1 LIMIT 3"
        );
        assert_eq!(values, vec![ScalarValue::Int32(Some(7))]);
    }

    #[test]
    fn other_statements_are_not_templated() {
        assert!(template("SELECT 1").is_none());
        assert!(template("SELECT 1 FROM t WHERE k = 'a'").is_none());
        assert!(template("SELECT (SELECT 1) FROM t WHERE k = 1").is_none());
        assert!(template("SELECT * FROM t WHERE k = 1 AND v IN (SELECT 2)").is_none());
        assert!(template("WITH c AS (SELECT 1) SELECT * FROM c WHERE k = 1").is_none());
        assert!(template("SELECT * FROM t WHERE k = 1 UNION SELECT * FROM t").is_none());
        assert!(template("SELECT $1 FROM t WHERE k = 1").is_none());
        assert!(template("INSERT INTO t VALUES (1)").is_none());
        assert!(template("UPDATE t SET v = 'x' WHERE k = 'a'").is_none());
        assert!(template("UPDATE t SET v = 1 WHERE k = $1").is_none());
        assert!(template("DELETE FROM t WHERE k IN (SELECT 1)").is_none());
        assert!(template("UPDATE t SET v = 99999999999999999999 WHERE k = 'a'").is_none());
    }
}

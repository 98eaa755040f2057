//! Postgres literal typing: integer literals that fit in 32 bits are
//! `integer` (int4), as in Postgres, where DataFusion types every integer
//! literal as `bigint`.
//!
//! Done on the AST, before DataFusion plans, so every decision DataFusion
//! makes (insert casts, unions, function signatures) sees the Postgres
//! type. Positions where a number is not a value are left alone:
//! `ORDER BY 1` / `GROUP BY 1` (column positions), `LIMIT`/`OFFSET`, and
//! table-function arguments.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    CastKind, DataType, Expr, GroupByExpr, LimitClause, OrderByKind, Query, Select, TableFactor,
    Value, VisitMut, VisitorMut,
};

/// Wrap integer literals that fit in 32 bits in `CAST(... AS integer)`.
pub fn type_integer_literals<V: VisitMut>(node: &mut V) {
    let mut typer = LiteralTyper::default();
    let _ = node.visit(&mut typer);
}

#[derive(Default)]
struct LiteralTyper {
    skip: HashSet<*const Expr>,
    in_table_function: usize,
}

impl VisitorMut for LiteralTyper {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(order_by) = &query.order_by
            && let OrderByKind::Expressions(exprs) = &order_by.kind
        {
            self.skip
                .extend(exprs.iter().map(|e| &e.expr as *const Expr));
        }
        match &query.limit_clause {
            Some(LimitClause::LimitOffset { limit, offset, .. }) => {
                self.skip.extend(limit.iter().map(|e| e as *const Expr));
                self.skip
                    .extend(offset.iter().map(|o| &o.value as *const Expr));
            }
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => {
                self.skip.insert(offset as *const Expr);
                self.skip.insert(limit as *const Expr);
            }
            None => {}
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        if let GroupByExpr::Expressions(exprs, _) = &select.group_by {
            self.skip.extend(exprs.iter().map(|e| e as *const Expr));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if matches!(
            factor,
            TableFactor::Table { args: Some(_), .. } | TableFactor::Function { .. }
        ) {
            self.in_table_function += 1;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if matches!(
            factor,
            TableFactor::Table { args: Some(_), .. } | TableFactor::Function { .. }
        ) {
            self.in_table_function -= 1;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if self.in_table_function > 0 || self.skip.contains(&(expr as *const Expr)) {
            return ControlFlow::Continue(());
        }
        if let Expr::Value(v) = expr
            && let Value::Number(n, false) = &v.value
            && n.parse::<i32>().is_ok()
        {
            let literal = expr.clone();
            *expr = Expr::Cast {
                kind: CastKind::Cast,
                expr: Box::new(literal),
                data_type: DataType::Integer(None),
                array: false,
                format: None,
            };
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn typed(sql: &str) -> String {
        let mut stmts = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap();
        type_integer_literals(&mut stmts);
        stmts[0].to_string()
    }

    #[test]
    fn wraps_values_but_not_positions() {
        assert_eq!(
            typed("SELECT 1, 2.5, 3000000000, a + 2 FROM t GROUP BY 1 ORDER BY 1 LIMIT 5 OFFSET 2"),
            "SELECT CAST(1 AS INTEGER), 2.5, 3000000000, a + CAST(2 AS INTEGER) FROM t GROUP BY 1 ORDER BY 1 LIMIT 5 OFFSET 2"
        );
        assert_eq!(
            typed("SELECT * FROM generate_series(1, 3) WHERE x > 1"),
            "SELECT * FROM generate_series(1, 3) WHERE x > CAST(1 AS INTEGER)"
        );
        assert_eq!(
            typed("INSERT INTO t VALUES (1, -2)"),
            "INSERT INTO t VALUES (CAST(1 AS INTEGER), -CAST(2 AS INTEGER))"
        );
    }
}

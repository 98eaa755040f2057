//! Integer literals typed as Postgres types them: those that fit in 32
//! bits are `integer` (int4), where DataFusion types every integer literal
//! as `bigint`. Positions where a number is not a value are left alone:
//! `ORDER BY 1` / `GROUP BY 1` (column positions), `LIMIT`/`OFFSET`, and
//! table-function arguments (`generate_series(...)` in a select list
//! returns rows, not an array).

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    CastKind, DataType, Expr, Function, FunctionArgumentList, FunctionArguments, GroupByExpr,
    Ident, LimitClause, ObjectName, ObjectNamePart, OrderByKind, Query, Select, SelectItem,
    TableFactor, Value, VisitMut, VisitorMut, WindowFrameBound, WindowType,
};

/// Wrap integer literals that fit in 32 bits in `CAST(... AS integer)`.
///
/// Not the items of a long `IN` list: an item's type only picks the type
/// the comparison is made in, and integer equality answers the same in
/// `bigint` as in `integer`, while 100,000 casts are 100,000 more
/// expressions to plan (such a list becomes one set anyway,
/// [`crate::rewrites::literal_sets`]).
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
        // A set-returning function in the select list returns rows.
        for item in &mut select.projection {
            let expr = match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
                _ => continue,
            };
            if let Expr::Function(f) = expr
                && f.name.to_string().eq_ignore_ascii_case("generate_series")
            {
                let inner = expr.clone();
                *expr = Expr::Function(Function {
                    name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new("unnest"))]),
                    uses_odbc_syntax: false,
                    parameters: FunctionArguments::None,
                    args: FunctionArguments::List(FunctionArgumentList {
                        duplicate_treatment: None,
                        args: vec![datafusion::sql::sqlparser::ast::FunctionArg::Unnamed(
                            datafusion::sql::sqlparser::ast::FunctionArgExpr::Expr(inner),
                        )],
                        clauses: vec![],
                    }),
                    filter: None,
                    null_treatment: None,
                    over: None,
                    within_group: vec![],
                });
            }
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

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::InList { list, .. } = expr
            && list.len() > crate::rewrites::literal_sets::LONG_IN_LIST
        {
            self.skip.extend(list.iter().map(|e| e as *const Expr));
        }
        // Window frame offsets must stay plain literals.
        if let Expr::Function(f) = expr
            && let Some(WindowType::WindowSpec(spec)) = &f.over
            && let Some(frame) = &spec.window_frame
        {
            for bound in std::iter::once(&frame.start_bound).chain(frame.end_bound.iter()) {
                if let WindowFrameBound::Preceding(Some(e)) | WindowFrameBound::Following(Some(e)) =
                    bound
                {
                    self.skip.insert(e.as_ref() as *const Expr);
                }
            }
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

    #[test]
    fn leaves_the_items_of_long_in_lists_plain() {
        let long: Vec<String> = (0..=crate::rewrites::literal_sets::LONG_IN_LIST)
            .map(|i| i.to_string())
            .collect();
        let sql = format!("SELECT x IN ({}), x IN (1, 2) FROM t", long.join(", "));
        let out = typed(&sql);
        assert!(out.starts_with("SELECT x IN (0, 1, 2,"), "{out}");
        assert!(
            out.contains("x IN (CAST(1 AS INTEGER), CAST(2 AS INTEGER))"),
            "{out}"
        );
    }
}

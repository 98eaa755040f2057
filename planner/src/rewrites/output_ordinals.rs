//! Output-column ordinals where PostgreSQL reads them and DataFusion does
//! not: inside `ROLLUP`, `CUBE` and `GROUPING SETS` (`GROUP BY 1, ROLLUP
//! (2)`) and in `DISTINCT ON (1)`. DataFusion resolves a bare `GROUP BY 2`
//! and `ORDER BY 2` itself but takes an ordinal in these places as the
//! constant it spells, so the grouping is wrong or the query fails. Each
//! such ordinal is replaced by the select item it names (its expression,
//! not its alias); an ordinal out of range is PostgreSQL's 42P10. With
//! `DISTINCT ON`, the `ORDER BY` ordinals are replaced too: DataFusion
//! matches `DISTINCT ON` against `ORDER BY` before resolving them.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, Distinct, Expr, GroupByExpr, SelectItem, Value, VisitMut, VisitorMut,
};

use crate::error::{PlanError, Result, sqlstate_error};

/// PostgreSQL's invalid_column_reference.
const INVALID_COLUMN_REFERENCE: &str = "42P10";

/// Resolve the ordinals of every `SELECT` in `node`.
pub fn rewrite<V: VisitMut>(node: &mut V) -> Result<()> {
    struct Selects;
    impl VisitorMut for Selects {
        type Break = PlanError;
        fn pre_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<PlanError> {
            match order_by_with_distinct_on(query) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => ControlFlow::Break(e),
            }
        }
        fn pre_visit_select(&mut self, select: &mut ast::Select) -> ControlFlow<PlanError> {
            match resolve(select) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => ControlFlow::Break(e),
            }
        }
    }
    match node.visit(&mut Selects) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// The items of a select list, unless it has a wildcard (then the items
/// are not known here and DataFusion's reading stands).
fn items_of(select: &ast::Select) -> Option<Vec<Expr>> {
    select
        .projection
        .iter()
        .map(|item| match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                Some(e.clone())
            }
            _ => None,
        })
        .collect()
}

/// Replace `e` by the item it names if it is an ordinal.
fn by_ordinal(items: &[Expr], e: &mut Expr, clause: &str) -> Result<()> {
    let Some(n) = ordinal(e) else {
        return Ok(());
    };
    match n.checked_sub(1).and_then(|i| items.get(i)) {
        Some(item) => {
            *e = item.clone();
            Ok(())
        }
        None => Err(PlanError::DataFusion(sqlstate_error(
            INVALID_COLUMN_REFERENCE,
            format!("{clause} position {n} is not in select list"),
        ))),
    }
}

fn order_by_with_distinct_on(query: &mut ast::Query) -> Result<()> {
    let ast::SetExpr::Select(select) = query.body.as_ref() else {
        return Ok(());
    };
    if !matches!(select.distinct, Some(Distinct::On(_))) {
        return Ok(());
    }
    let Some(items) = items_of(select) else {
        return Ok(());
    };
    if let Some(ast::OrderBy {
        kind: ast::OrderByKind::Expressions(exprs),
        ..
    }) = &mut query.order_by
    {
        for e in exprs.iter_mut() {
            by_ordinal(&items, &mut e.expr, "ORDER BY")?;
        }
    }
    Ok(())
}

fn resolve(select: &mut ast::Select) -> Result<()> {
    let Some(items) = items_of(select) else {
        return Ok(());
    };
    let by_ordinal = |e: &mut Expr, clause: &str| -> Result<()> { by_ordinal(&items, e, clause) };
    if let GroupByExpr::Expressions(exprs, _) = &mut select.group_by {
        for e in exprs.iter_mut() {
            if let Expr::Rollup(sets) | Expr::Cube(sets) | Expr::GroupingSets(sets) = e {
                for set in sets.iter_mut() {
                    for member in set.iter_mut() {
                        by_ordinal(member, "GROUP BY")?;
                    }
                }
            }
        }
    }
    if let Some(Distinct::On(exprs)) = &mut select.distinct {
        for e in exprs.iter_mut() {
            by_ordinal(e, "DISTINCT ON")?;
        }
    }
    Ok(())
}

/// The ordinal an unsigned integer literal spells.
fn ordinal(e: &Expr) -> Option<usize> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        Expr::Nested(inner) => ordinal(inner),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> String {
        let mut stmts = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap();
        super::rewrite(&mut stmts[0]).unwrap();
        stmts[0].to_string()
    }

    #[test]
    fn ordinals_in_grouping_constructs_and_distinct_on_name_items() {
        assert_eq!(
            rewritten("SELECT a, b AS x, sum(c) FROM t GROUP BY 1, ROLLUP (2)"),
            "SELECT a, b AS x, sum(c) FROM t GROUP BY 1, ROLLUP (b)"
        );
        assert_eq!(
            rewritten("SELECT a, b FROM t GROUP BY CUBE (1, 2)"),
            "SELECT a, b FROM t GROUP BY CUBE (a, b)"
        );
        assert_eq!(
            rewritten("SELECT DISTINCT ON (1) a, b FROM t ORDER BY 1, b"),
            "SELECT DISTINCT ON (a) a, b FROM t ORDER BY a, b"
        );
        // A bare GROUP BY ordinal is DataFusion's; a wildcard is left.
        assert_eq!(
            rewritten("SELECT a FROM t GROUP BY 1"),
            "SELECT a FROM t GROUP BY 1"
        );
        assert_eq!(
            rewritten("SELECT * FROM t GROUP BY ROLLUP (1)"),
            "SELECT * FROM t GROUP BY ROLLUP (1)"
        );
    }

    #[test]
    fn an_ordinal_beyond_the_select_list_is_42p10() {
        let mut stmts =
            Parser::parse_sql(&PostgreSqlDialect {}, "SELECT a FROM t GROUP BY ROLLUP (3)")
                .unwrap();
        let err = super::rewrite(&mut stmts[0]).unwrap_err();
        assert!(err.to_string().contains("position 3"), "{err}");
    }
}

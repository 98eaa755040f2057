//! `x [NOT] IN (subquery)` used as a value (in a select list or an `ORDER
//! BY` key) rather than as a filter.
//!
//! DataFusion plans `IN (subquery)` only where it can turn it into a semi
//! or mark join: a `WHERE`/`HAVING` conjunct or disjunct. Tools also use it
//! as a value; Grafana orders its table list by `CASE WHEN
//! quote_ident(table_schema) IN (SELECT ... search_path ...) THEN 0 ELSE 1
//! END`. There it becomes three aggregate scalar subqueries, which
//! DataFusion decorrelates, keeping SQL's three-valued answer:
//!
//! ```sql
//! -- x IN (SELECT v FROM s WHERE p)
//! CASE WHEN (SELECT count(*) FROM s WHERE p AND v = x) > 0 THEN true
//!      WHEN x IS NULL AND (SELECT count(*) FROM s WHERE p) > 0 THEN NULL
//!      WHEN (SELECT count(*) FROM s WHERE p AND v IS NULL) > 0 THEN NULL
//!      ELSE false END
//! ```
//!
//! (`NOT IN` is its negation; a grouped, distinct or limited subquery is
//! counted as a derived table.) Unless `s` or `p` already were, only the
//! first subquery is correlated, by one equality, the form DataFusion's
//! decorrelation takes; `x` is written as it was, so it names the outer
//! query's columns as before.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, GroupByExpr, Ident, OrderByKind, Query, SelectItem, SetExpr, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::error::{PlanError, Result};

/// The derived table's alias and column in the rewrite (unlikely to be a
/// user's name, and the column is only ever named qualified).
const SET_ALIAS: &str = "__in_set";
const SET_COLUMN: &str = "__in_value";

/// Rewrite `[NOT] IN (subquery)` wherever a query's select list or `ORDER
/// BY` keys use it as a value (at any depth of those expressions). Where
/// the subquery is correlated and `x` could be captured by its `FROM` (see
/// [`as_value`]) it is left to the planner's general unnesting.
pub fn rewrite<V: VisitMut>(node: &mut V) -> Result<()> {
    struct Rewriter;
    impl VisitorMut for Rewriter {
        type Break = PlanError;
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<PlanError> {
            if let SetExpr::Select(select) = query.body.as_mut() {
                for item in &mut select.projection {
                    if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } =
                        item
                    {
                        rewrite_values(e)?;
                    }
                }
            }
            if let Some(order_by) = &mut query.order_by
                && let OrderByKind::Expressions(keys) = &mut order_by.kind
            {
                for key in keys {
                    rewrite_values(&mut key.expr)?;
                }
            }
            ControlFlow::Continue(())
        }
    }
    match node.visit(&mut Rewriter) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Replace each `IN (subquery)` within `expr`, but not within the queries
/// it holds: the outer visitor reaches those in turn.
fn rewrite_values(expr: &mut Expr) -> ControlFlow<PlanError> {
    struct Values {
        depth: usize,
    }
    impl VisitorMut for Values {
        type Break = PlanError;
        fn pre_visit_query(&mut self, _query: &mut Query) -> ControlFlow<PlanError> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _query: &mut Query) -> ControlFlow<PlanError> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<PlanError> {
            if self.depth == 0
                && let Expr::InSubquery {
                    expr: left,
                    subquery,
                    negated,
                } = expr
                && !matches!(left.as_ref(), Expr::Tuple(_))
            {
                match as_value(left, subquery, *negated) {
                    Ok(Some(new)) => *expr = new,
                    Ok(None) => {}
                    Err(e) => return ControlFlow::Break(e),
                }
            }
            ControlFlow::Continue(())
        }
    }
    expr.visit(&mut Values { depth: 0 })
}

/// The CASE form of `left [NOT] IN (subquery)` (module docs).
fn as_value(left: &Expr, subquery: &Query, negated: bool) -> Result<Option<Expr>> {
    use super::correlated_subqueries::{
        bound_qualifiers, has_bare_identifier, is_correlated, used_qualifiers,
    };
    // Inlined, `left` moves into the subquery's scope, where a name its
    // `FROM` binds would capture it; only qualified names bound outside
    // are sure to keep their meaning.
    let bound = bound_qualifiers(subquery);
    let inlinable =
        !has_bare_identifier(left) && used_qualifiers(left).iter().all(|q| !bound.contains(q));
    let (set, value) = match single_item(subquery).filter(|_| inlinable) {
        Some(item) => (subquery.clone(), item),
        // A derived table cannot see the outer query: left as it is, for
        // the planner's general unnesting (`crate::decorrelate`).
        None if is_correlated(subquery) => return Ok(None),
        None => {
            // Grouped, distinct, limited, a set operation, or `left` could
            // be captured: counted over as a derived table.
            let Some(wrapped) = parse_query(&format!(
                "SELECT {alias}.{column} FROM ({subquery}) AS {alias}({column})",
                alias = Ident::with_quote('"', SET_ALIAS),
                column = Ident::with_quote('"', SET_COLUMN),
            )) else {
                return Ok(None);
            };
            let Some(item) = single_item(&wrapped) else {
                return Ok(None);
            };
            (wrapped, item)
        }
    };
    let x = format!("({left})");
    let count = |extra: Option<String>| counting(&set, extra);
    let (Some(matching), Some(all), Some(nulls)) = (
        count(Some(format!("({value}) = {x}"))),
        count(None),
        count(Some(format!("({value}) IS NULL"))),
    ) else {
        return Ok(None);
    };
    let case = format!(
        "CASE WHEN ({matching}) > 0 THEN true \
         WHEN {x} IS NULL AND ({all}) > 0 THEN NULL \
         WHEN ({nulls}) > 0 THEN NULL \
         ELSE false END"
    );
    let sql = if negated {
        format!("NOT ({case})")
    } else {
        format!("({case})")
    };
    Ok(parse_expr(&sql))
}

/// The one item of a plain `SELECT e FROM ... [WHERE ...]` (no grouping,
/// `DISTINCT`, `ORDER BY`, `LIMIT` or `WITH`), whose rows can be counted
/// by replacing `e` with `count(*)`: its `FROM` and `WHERE` stay where
/// they are, so a subquery correlated with the outer query stays so.
fn single_item(q: &Query) -> Option<Expr> {
    if q.with.is_some() || q.order_by.is_some() || q.limit_clause.is_some() || q.fetch.is_some() {
        return None;
    }
    let SetExpr::Select(select) = q.body.as_ref() else {
        return None;
    };
    let grouped = match &select.group_by {
        GroupByExpr::All(_) => true,
        GroupByExpr::Expressions(e, _) => !e.is_empty(),
    };
    if grouped || select.having.is_some() || select.distinct.is_some() || select.from.is_empty() {
        return None;
    }
    match select.projection.as_slice() {
        [SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }] => Some(e.clone()),
        _ => None,
    }
}

/// `SELECT count(*)` over plain query `q`'s rows that also satisfy
/// `extra` (SQL text).
fn counting(q: &Query, extra: Option<String>) -> Option<Query> {
    let mut q = q.clone();
    let SetExpr::Select(select) = q.body.as_mut() else {
        return None;
    };
    let count = parse_expr("count(*)")?;
    select.projection = vec![SelectItem::UnnamedExpr(count)];
    if let Some(extra) = extra {
        let condition = match &select.selection {
            Some(w) => format!("({w}) AND {extra}"),
            None => extra,
        };
        select.selection = Some(parse_expr(&condition)?);
    }
    Some(q)
}

fn parse_expr(sql: &str) -> Option<Expr> {
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .ok()
}

fn parse_query(sql: &str) -> Option<Query> {
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_query())
        .ok()
        .map(|q| *q)
}

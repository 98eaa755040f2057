//! Query blocks that provably return no rows because they read a relation
//! Freshet keeps empty (`pg_policy`, `pg_publication`, `pg_inherits`, ...:
//! Postgres features Freshet does not have): their select-list
//! subqueries are never evaluated, so they are replaced by NULL before
//! planning.
//!
//! Tools compute elaborate expressions over these relations (psql's `\d`
//! builds policy role lists with correlated `ARRAY(SELECT ...)` and
//! publication column lists with a lateral `generate_series`), which
//! DataFusion cannot always plan; without rows they cannot matter. A block
//! is empty when one of its `FROM` items is such a relation reached through
//! inner or cross joins (or as the preserved side of a left join) and, if it
//! has no `GROUP BY`, it computes no aggregate (which would return a row).
//! The rewritten columns keep their names; their type becomes unknown
//! (`text`), which no row shows.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Array, ArrayElemTypeDef, CastKind, DataType, Expr, FunctionArguments, GroupByExpr,
    JoinOperator, Select, SelectItem, SetExpr, TableFactor, TableWithJoins, Value, Visit, VisitMut,
    Visitor, VisitorMut,
};

/// Rewrite every empty query block in `node`. `is_empty` says whether a
/// relation name denotes an always-empty relation; `is_aggregate`
/// whether a function name is an aggregate.
pub fn rewrite<V: VisitMut>(
    node: &mut V,
    is_empty: &dyn Fn(&datafusion::sql::sqlparser::ast::ObjectName) -> bool,
    is_aggregate: &dyn Fn(&str) -> bool,
) {
    struct Rewriter<'f> {
        is_empty: &'f dyn Fn(&datafusion::sql::sqlparser::ast::ObjectName) -> bool,
        is_aggregate: &'f dyn Fn(&str) -> bool,
    }
    impl VisitorMut for Rewriter<'_> {
        type Break = ();
        fn pre_visit_query(
            &mut self,
            query: &mut datafusion::sql::sqlparser::ast::Query,
        ) -> ControlFlow<()> {
            rewrite_set(&mut query.body, self);
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            let empty = |q: &datafusion::sql::sqlparser::ast::Query| match q.body.as_ref() {
                SetExpr::Select(s) => block_is_empty(s, self.is_empty, self.is_aggregate),
                _ => false,
            };
            let constant = match expr {
                Expr::Subquery(q) if empty(q) => Some(Expr::value(Value::Null)),
                Expr::Exists { subquery, negated } if empty(subquery) => {
                    Some(Expr::value(Value::Boolean(*negated)))
                }
                Expr::InSubquery {
                    subquery, negated, ..
                } if empty(subquery) => Some(Expr::value(Value::Boolean(*negated))),
                Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case("array") => {
                    match &f.args {
                        // No rows: an empty array (of text: the element
                        // type is not known before planning).
                        FunctionArguments::Subquery(q) if empty(q) => Some(Expr::Cast {
                            kind: CastKind::DoubleColon,
                            expr: Box::new(Expr::Array(Array {
                                elem: vec![],
                                named: true,
                            })),
                            data_type: DataType::Array(ArrayElemTypeDef::SquareBracket(
                                Box::new(DataType::Text),
                                None,
                            )),
                            array: false,
                            format: None,
                        }),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some(c) = constant {
                *expr = c;
            }
            ControlFlow::Continue(())
        }
    }
    fn rewrite_set(set: &mut SetExpr, r: &Rewriter) {
        match set {
            SetExpr::Select(select) if block_is_empty(select, r.is_empty, r.is_aggregate) => {
                empty_select_list(select);
            }
            SetExpr::SetOperation { left, right, .. } => {
                rewrite_set(left, r);
                rewrite_set(right, r);
            }
            _ => {}
        }
    }
    let _ = node.visit(&mut Rewriter {
        is_empty,
        is_aggregate,
    });
}

fn block_is_empty(
    select: &Select,
    is_empty: &dyn Fn(&datafusion::sql::sqlparser::ast::ObjectName) -> bool,
    is_aggregate: &dyn Fn(&str) -> bool,
) -> bool {
    let grouped = match &select.group_by {
        GroupByExpr::All(_) => true,
        GroupByExpr::Expressions(exprs, _) => !exprs.is_empty(),
    };
    if !grouped && (has_aggregate(&select.projection, is_aggregate) || select.having.is_some()) {
        return false;
    }
    select.from.iter().any(|t| from_item_is_empty(t, is_empty))
}

fn factor_is_empty(
    factor: &TableFactor,
    is_empty: &dyn Fn(&datafusion::sql::sqlparser::ast::ObjectName) -> bool,
) -> bool {
    matches!(factor, TableFactor::Table { name, args: None, .. } if is_empty(name))
}

fn from_item_is_empty(
    item: &TableWithJoins,
    is_empty: &dyn Fn(&datafusion::sql::sqlparser::ast::ObjectName) -> bool,
) -> bool {
    let inner = |op: &JoinOperator| {
        matches!(
            op,
            JoinOperator::Join(_) | JoinOperator::Inner(_) | JoinOperator::CrossJoin(_)
        )
    };
    let keeps_left = |op: &JoinOperator| {
        inner(op) || matches!(op, JoinOperator::Left(_) | JoinOperator::LeftOuter(_))
    };
    if !item.joins.iter().all(|j| keeps_left(&j.join_operator)) {
        return false;
    }
    factor_is_empty(&item.relation, is_empty)
        || item
            .joins
            .iter()
            .any(|j| inner(&j.join_operator) && factor_is_empty(&j.relation, is_empty))
}

fn has_aggregate(items: &[SelectItem], is_aggregate: &dyn Fn(&str) -> bool) -> bool {
    items
        .iter()
        .any(|i| super::correlated_subqueries::calls_aggregate(i, is_aggregate))
}

fn contains_subquery(expr: &Expr) -> bool {
    struct Finder;
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_query(
            &mut self,
            _query: &datafusion::sql::sqlparser::ast::Query,
        ) -> ControlFlow<()> {
            ControlFlow::Break(())
        }
    }
    expr.visit(&mut Finder).is_break()
}

/// Replace the block's select-list subqueries by NULL (under their names).
fn empty_select_list(select: &mut Select) {
    for item in &mut select.projection {
        match item {
            SelectItem::UnnamedExpr(e) if contains_subquery(e) => {
                *e = Expr::value(Value::Null);
            }
            SelectItem::ExprWithAlias { expr, .. } if contains_subquery(expr) => {
                *expr = Expr::value(Value::Null);
            }
            _ => {}
        }
    }
}

//! Correlated subqueries in the forms DataFusion can decorrelate.
//!
//! DataFusion decorrelates a scalar subquery only when it aggregates, with
//! equality correlation, and `EXISTS` only as a filter. Tools write others
//! (psql's `\d` has all three below), so before planning:
//!
//! - a correlated scalar subquery that does not aggregate,
//!   `(SELECT e FROM ... WHERE p)`, becomes `(SELECT single_value(e) ...)`:
//!   the same value, NULL for no row, and Postgres's 21000 for more than
//!   one ([`crate::query::single_value`]);
//! - conjuncts of its `WHERE` that read only the outer query (`AND
//!   a.atthasdef`) move out of it, as `CASE WHEN <them> THEN (SELECT ...)
//!   END` (no row when they do not hold is NULL either way);
//! - if its item reads the outer query too (SQLAlchemy's
//!   `json_build_object(..., a.attidentity = 'a', ...)`), each part of the
//!   item reading only the subquery becomes a subquery of its own (see
//!   `hoisted`);
//! - `[NOT] EXISTS (...)` in a select list becomes a count compared with
//!   zero; `[NOT] EXISTS` of an aggregate without `GROUP BY` or `HAVING`
//!   (`EXISTS (SELECT max(v) FROM u WHERE u.k = t.k)`), which always has
//!   one row, becomes `true` (`false`) anywhere (DataFusion's semi join
//!   kept only the outer rows with a matching input row);
//! - `ARRAY(SELECT e FROM ... [ORDER BY o])` becomes `(SELECT
//!   array_agg(e ORDER BY o) FROM ...)` (an empty result is NULL rather
//!   than `{}`), and `ARRAY(SELECT e FROM unnest(a) x)` becomes
//!   `array_transform(a, x -> e)`.
//!
//! Correlation is found syntactically: a subquery is correlated when it
//! names a column through a qualifier (`a.attnum`) that none of its own
//! `FROM` items binds. General decorrelation (any correlation predicate,
//! aggregates over non-equality correlation) is still open.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArgumentClause,
    FunctionArguments, GroupByExpr, Ident, ObjectName, ObjectNamePart, OrderByKind, Query, Select,
    SelectItem, SetExpr, TableFactor, Value, Visit, VisitMut, Visitor, VisitorMut,
};

/// The aggregate a non-aggregating scalar subquery is planned with
/// (registered by [`crate::query::single_value`]).
pub const SINGLE_VALUE: &str = "single_value";

/// Rewrite the subqueries of `node`; `is_aggregate` says whether a function
/// name is an aggregate.
pub fn rewrite<V: VisitMut>(node: &mut V, is_aggregate: &dyn Fn(&str) -> bool) {
    struct Rewriter<'f> {
        is_aggregate: &'f dyn Fn(&str) -> bool,
        /// The right operands of `op ANY/ALL (subquery)`: sets, not
        /// scalar subqueries, so left alone (by address, stable in the
        /// box while the walk runs).
        quantified: HashSet<*const Query>,
    }
    impl VisitorMut for Rewriter<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            if let Expr::AnyOp { right, .. } | Expr::AllOp { right, .. } = expr
                && let Expr::Subquery(q) = right.as_ref()
            {
                self.quantified.insert(q.as_ref() as *const Query);
            }
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            match expr {
                Expr::Subquery(q)
                    if is_correlated(q)
                        && !self.quantified.contains(&(q.as_ref() as *const Query)) =>
                {
                    if let Some(new) = single_valued(q, self.is_aggregate) {
                        *expr = new;
                    }
                }
                Expr::Exists { subquery, negated } if one_row(subquery, self.is_aggregate) => {
                    *expr = Expr::value(Value::Boolean(!*negated));
                }
                Expr::Function(f)
                    if matches!(f.args, FunctionArguments::Subquery(_))
                        && f.name.to_string().eq_ignore_ascii_case("array") =>
                {
                    if let FunctionArguments::Subquery(q) = &f.args
                        && let Some(new) = array_aggregated(q, self.is_aggregate)
                    {
                        *expr = new;
                    }
                }
                _ => {}
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
            if let SetExpr::Select(select) = query.body.as_mut() {
                for item in &mut select.projection {
                    if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } =
                        item
                    {
                        rewrite_exists(e, self.is_aggregate);
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = node.visit(&mut Rewriter {
        is_aggregate,
        quantified: HashSet::new(),
    });
}

/// Qualifiers a query's `FROM` items bind, at any depth.
pub(crate) fn bound_qualifiers(q: &Query) -> HashSet<String> {
    struct Binder(HashSet<String>);
    impl Visitor for Binder {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
            match factor {
                TableFactor::Table { name, alias, .. } => {
                    if let Some(a) = alias {
                        self.0.insert(a.name.value.to_lowercase());
                    }
                    if let Some(last) = name.0.last().and_then(|p| p.as_ident()) {
                        self.0.insert(last.value.to_lowercase());
                    }
                }
                TableFactor::Derived { alias: Some(a), .. }
                | TableFactor::Function { alias: Some(a), .. }
                | TableFactor::UNNEST { alias: Some(a), .. } => {
                    self.0.insert(a.name.value.to_lowercase());
                }
                _ => {}
            }
            ControlFlow::Continue(())
        }
    }
    let mut b = Binder(HashSet::new());
    let _ = q.visit(&mut b);
    b.0
}

/// Qualifiers used in column references within `node`.
pub(crate) fn used_qualifiers<V: Visit>(node: &V) -> HashSet<String> {
    struct Users(HashSet<String>);
    impl Visitor for Users {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if let Expr::CompoundIdentifier(parts) = expr
                && parts.len() >= 2
            {
                self.0.insert(parts[parts.len() - 2].value.to_lowercase());
            }
            ControlFlow::Continue(())
        }
    }
    let mut u = Users(HashSet::new());
    let _ = node.visit(&mut u);
    u.0
}

/// Whether `q` names a qualifier its own `FROM` items do not bind.
pub(crate) fn is_correlated(q: &Query) -> bool {
    let bound = bound_qualifiers(q);
    used_qualifiers(q).iter().any(|u| !bound.contains(u))
}

/// The one select block of a plain query (no set operation, `LIMIT`,
/// `OFFSET`, `FETCH`, or CTEs).
fn plain_select(q: &Query) -> Option<&Select> {
    if q.with.is_some() || q.limit_clause.is_some() || q.fetch.is_some() {
        return None;
    }
    match q.body.as_ref() {
        SetExpr::Select(s) => Some(s),
        _ => None,
    }
}

/// Whether `q` yields exactly one row whatever its input: an aggregate
/// without `GROUP BY`, `HAVING` or window functions, in a plain block.
fn one_row(q: &Query, is_aggregate: &dyn Fn(&str) -> bool) -> bool {
    let Some(select) = plain_select(q) else {
        return false;
    };
    let grouped = match &select.group_by {
        GroupByExpr::All(_) => true,
        GroupByExpr::Expressions(e, _) => !e.is_empty(),
    };
    let windowed = select
        .projection
        .iter()
        .any(|i| calls_aggregate(i, &|_: &str| false));
    !grouped
        && select.having.is_none()
        && !windowed
        && select
            .projection
            .iter()
            .any(|i| calls_aggregate(i, is_aggregate))
}

fn aggregates(select: &Select, is_aggregate: &dyn Fn(&str) -> bool) -> bool {
    let grouped = match &select.group_by {
        GroupByExpr::All(_) => true,
        GroupByExpr::Expressions(e, _) => !e.is_empty(),
    };
    grouped
        || select.having.is_some()
        || select.distinct.is_some()
        || select
            .projection
            .iter()
            .any(|i| calls_aggregate(i, is_aggregate))
}

/// Whether `node` calls an aggregate or window function of its own block
/// (not inside a subquery, whose aggregates are that block's).
pub(crate) fn calls_aggregate<V: Visit>(node: &V, is_aggregate: &dyn Fn(&str) -> bool) -> bool {
    struct Finder<'f> {
        is_aggregate: &'f dyn Fn(&str) -> bool,
        depth: usize,
    }
    impl Visitor for Finder<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, _q: &Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _q: &Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if self.depth == 0
                && let Expr::Function(f) = expr
            {
                let name = f.name.to_string().to_lowercase();
                let name = name.strip_prefix("pg_catalog.").unwrap_or(&name);
                if f.over.is_some() || (self.is_aggregate)(name) {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        }
    }
    node.visit(&mut Finder {
        is_aggregate,
        depth: 0,
    })
    .is_break()
}

fn conjuncts(expr: Expr, out: &mut Vec<Expr>) {
    match expr {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            conjuncts(*left, out);
            conjuncts(*right, out);
        }
        Expr::Nested(inner)
            if matches!(
                inner.as_ref(),
                Expr::BinaryOp {
                    op: BinaryOperator::And,
                    ..
                }
            ) =>
        {
            conjuncts(*inner, out)
        }
        other => out.push(other),
    }
}

fn and_all(exprs: Vec<Expr>) -> Option<Expr> {
    exprs.into_iter().reduce(|a, b| Expr::BinaryOp {
        left: Box::new(a),
        op: BinaryOperator::And,
        right: Box::new(b),
    })
}

/// Split off the `WHERE` conjuncts that read only outer columns.
fn split_outer_only(select: &mut Select, bound: &HashSet<String>) -> Vec<Expr> {
    let Some(selection) = select.selection.take() else {
        return vec![];
    };
    let mut all = Vec::new();
    conjuncts(selection, &mut all);
    let (outer, inner): (Vec<Expr>, Vec<Expr>) = all.into_iter().partition(|c| {
        let used = used_qualifiers(c);
        !used.is_empty() && used.iter().all(|u| !bound.contains(u)) && !has_bare_identifier(c)
    });
    select.selection = and_all(inner);
    outer
}

/// Whether `expr` names an unqualified column (or holds a subquery).
pub(crate) fn has_bare_identifier(expr: &Expr) -> bool {
    struct Finder;
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            match expr {
                Expr::Identifier(_) => ControlFlow::Break(()),
                Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => {
                    ControlFlow::Break(())
                }
                _ => ControlFlow::Continue(()),
            }
        }
    }
    expr.visit(&mut Finder).is_break()
}

fn call(name: &str, arg: Expr, clauses: Vec<FunctionArgumentClause>) -> Expr {
    Expr::Function(ast::Function {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(name))]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))],
            clauses,
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

fn only_item(select: &mut Select) -> Option<&mut Expr> {
    match select.projection.as_mut_slice() {
        [SelectItem::UnnamedExpr(e)] | [SelectItem::ExprWithAlias { expr: e, .. }] => Some(e),
        _ => None,
    }
}

fn single_valued(q: &Query, is_aggregate: &dyn Fn(&str) -> bool) -> Option<Expr> {
    let select = plain_select(q)?;
    if aggregates(select, is_aggregate) || q.order_by.is_some() {
        return None;
    }
    let bound = bound_qualifiers(q);
    let mut q = q.clone();
    let SetExpr::Select(select) = q.body.as_mut() else {
        return None;
    };
    let outer_only = split_outer_only(select, &bound);
    let item = only_item(select)?;
    let e = std::mem::replace(item, Expr::value(Value::Null));
    let reads_outer = used_qualifiers(&e).iter().any(|u| !bound.contains(u));
    let sub = if reads_outer {
        hoisted(&q, e, &bound)
    } else {
        let SetExpr::Select(select) = q.body.as_mut() else {
            return None;
        };
        *only_item(select)? = call(SINGLE_VALUE, e, vec![]);
        Expr::Subquery(Box::new(q))
    };
    Some(match and_all(outer_only) {
        None => sub,
        Some(condition) => Expr::Case {
            case_token: ast::helpers::attached_token::AttachedToken::empty(),
            end_token: ast::helpers::attached_token::AttachedToken::empty(),
            operand: None,
            conditions: vec![ast::CaseWhen {
                condition,
                result: sub,
            }],
            else_result: None,
        },
    })
}

/// A scalar subquery whose item also reads the outer query, `(SELECT
/// f(o.x, i.y) FROM i WHERE p)`: DataFusion cannot decorrelate an
/// aggregate over outer columns, so each largest part of the item that
/// reads only the subquery's own columns becomes a subquery of its own,
/// `f(o.x, (SELECT single_value(i.y) FROM i WHERE p))`, and the whole is
/// NULL when no row matches, as the original is: `CASE WHEN (SELECT
/// count(*) FROM i WHERE p) > 0 THEN ... END`. (More than one row still
/// fails with 21000, in each part.)
fn hoisted(q: &Query, item: Expr, bound: &HashSet<String>) -> Expr {
    struct Hoister<'a> {
        q: &'a Query,
        bound: &'a HashSet<String>,
        depth: usize,
    }
    impl Hoister<'_> {
        fn with_item(&self, item: Expr) -> Expr {
            let mut q = self.q.clone();
            if let SetExpr::Select(select) = q.body.as_mut()
                && let Some(slot) = only_item(select)
            {
                *slot = item;
            }
            Expr::Subquery(Box::new(q))
        }
    }
    impl VisitorMut for Hoister<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            if self.depth > 0 {
                return ControlFlow::Continue(());
            }
            let reads_outer = used_qualifiers(expr)
                .iter()
                .any(|u| !self.bound.contains(u));
            if !reads_outer && names_a_column(expr) {
                let part = std::mem::replace(expr, Expr::value(Value::Null));
                *expr = Expr::Nested(Box::new(self.with_item(call(SINGLE_VALUE, part, vec![]))));
            }
            ControlFlow::Continue(())
        }
    }
    let mut hoister = Hoister { q, bound, depth: 0 };
    let count = hoister.with_item(call(
        "count",
        Expr::value(Value::Number("1".into(), false)),
        vec![],
    ));
    let mut item = item;
    let _ = VisitMut::visit(&mut item, &mut hoister);
    Expr::Case {
        case_token: ast::helpers::attached_token::AttachedToken::empty(),
        end_token: ast::helpers::attached_token::AttachedToken::empty(),
        operand: None,
        conditions: vec![ast::CaseWhen {
            condition: Expr::BinaryOp {
                left: Box::new(count),
                op: BinaryOperator::Gt,
                right: Box::new(Expr::value(Value::Number("0".into(), false))),
            },
            result: item,
        }],
        else_result: None,
    }
}

/// Whether `expr` names a column (outside any subquery it holds).
fn names_a_column(expr: &Expr) -> bool {
    struct Finder(usize);
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_query(&mut self, _q: &Query) -> ControlFlow<()> {
            self.0 += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _q: &Query) -> ControlFlow<()> {
            self.0 -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if self.0 == 0 && matches!(expr, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) {
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    expr.visit(&mut Finder(0)).is_break()
}

/// `ARRAY(SELECT e FROM unnest(a) x)` (no `WHERE`, grouping or order):
/// `array_transform(a, x -> e)`, which needs no join.
fn array_transformed(q: &Query) -> Option<Expr> {
    let select = plain_select(q)?;
    if q.order_by.is_some()
        || select.selection.is_some()
        || select.distinct.is_some()
        || select.having.is_some()
        || select.from.len() != 1
        || !select.from[0].joins.is_empty()
    {
        return None;
    }
    let (array, alias) = match &select.from[0].relation {
        TableFactor::Table {
            name,
            args: Some(args),
            alias: Some(alias),
            ..
        } if name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .is_some_and(|i| i.value.eq_ignore_ascii_case("unnest"))
            && args.args.len() == 1 =>
        {
            match &args.args[0] {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(a)) => (a.clone(), alias.name.clone()),
                _ => return None,
            }
        }
        TableFactor::UNNEST {
            array_exprs,
            alias: Some(alias),
            with_offset: false,
            with_ordinality: false,
            ..
        } if array_exprs.len() == 1 => (array_exprs[0].clone(), alias.name.clone()),
        _ => return None,
    };
    let body = match select.projection.as_slice() {
        [SelectItem::UnnamedExpr(e)] | [SelectItem::ExprWithAlias { expr: e, .. }] => e.clone(),
        _ => return None,
    };
    let lambda = Expr::Lambda(ast::LambdaFunction {
        params: ast::OneOrManyWithParens::One(ast::LambdaFunctionParameter {
            name: alias,
            data_type: None,
        }),
        body: Box::new(body),
        syntax: ast::LambdaSyntax::Arrow,
    });
    Some(Expr::Function(ast::Function {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(
            "array_transform",
        ))]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: vec![
                FunctionArg::Unnamed(FunctionArgExpr::Expr(array)),
                FunctionArg::Unnamed(FunctionArgExpr::Expr(lambda)),
            ],
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    }))
}

fn array_aggregated(q: &Query, is_aggregate: &dyn Fn(&str) -> bool) -> Option<Expr> {
    if let Some(transformed) = array_transformed(q) {
        return Some(transformed);
    }
    let select = plain_select(q)?;
    if aggregates(select, is_aggregate) {
        return None;
    }
    let mut q = q.clone();
    let order_by = q.order_by.take();
    let SetExpr::Select(select) = q.body.as_mut() else {
        return None;
    };
    let item = only_item(select)?;
    let e = std::mem::replace(item, Expr::value(Value::Null));
    let mut clauses = vec![];
    if let Some(order_by) = order_by {
        let OrderByKind::Expressions(mut exprs) = order_by.kind else {
            return None;
        };
        for o in &mut exprs {
            // `ORDER BY 1` names the select item.
            if let Expr::Value(v) = &o.expr
                && matches!(&v.value, Value::Number(n, _) if n == "1")
            {
                o.expr = e.clone();
            }
        }
        clauses.push(FunctionArgumentClause::OrderBy(exprs));
    }
    // Over zero rows `ARRAY(...)` is `{}`, where `array_agg` is NULL.
    *item = call(
        crate::query::array_functions::ARRAY_OR_EMPTY,
        call("array_agg", e, clauses),
        vec![],
    );
    Some(Expr::Subquery(Box::new(q)))
}

/// `[NOT] EXISTS (q)` anywhere in a select-list expression, when `q` is
/// correlated: `(SELECT count(*) FROM ...) > 0` (`= 0`).
fn rewrite_exists(expr: &mut Expr, is_aggregate: &dyn Fn(&str) -> bool) {
    struct Rewriter<'f> {
        is_aggregate: &'f dyn Fn(&str) -> bool,
    }
    impl VisitorMut for Rewriter<'_> {
        type Break = ();
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            if let Expr::Exists { subquery, negated } = expr
                && one_row(subquery, self.is_aggregate)
            {
                *expr = Expr::value(Value::Boolean(!*negated));
                return ControlFlow::Continue(());
            }
            if let Expr::Exists { subquery, negated } = expr
                && is_correlated(subquery)
                && plain_select(subquery).is_some()
            {
                let mut q = subquery.as_ref().clone();
                q.order_by = None;
                if let SetExpr::Select(select) = q.body.as_mut() {
                    let grouped = match &select.group_by {
                        GroupByExpr::All(_) => true,
                        GroupByExpr::Expressions(e, _) => !e.is_empty(),
                    };
                    if grouped || select.having.is_some() {
                        return ControlFlow::Continue(());
                    }
                    select.distinct = None;
                    select.projection = vec![SelectItem::UnnamedExpr(call(
                        "count",
                        Expr::value(Value::Number("1".into(), false)),
                        vec![],
                    ))];
                }
                *expr = Expr::Nested(Box::new(Expr::BinaryOp {
                    left: Box::new(Expr::Subquery(Box::new(q))),
                    op: if *negated {
                        BinaryOperator::Eq
                    } else {
                        BinaryOperator::Gt
                    },
                    right: Box::new(Expr::value(Value::Number("0".into(), false))),
                }));
            }
            ControlFlow::Continue(())
        }
    }
    let _ = expr.visit(&mut Rewriter { is_aggregate });
}

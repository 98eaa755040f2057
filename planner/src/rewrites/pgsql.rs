//! Postgres semantics applied to a statement's AST before DataFusion plans
//! it, so that every decision DataFusion makes (insert casts, unions,
//! function signatures) already sees them:
//!
//! * Integer literals that fit in 32 bits are `integer` (int4), as in
//!   Postgres, where DataFusion types every integer literal as `bigint`.
//!   Positions where a number is not a value are left alone: `ORDER BY 1` /
//!   `GROUP BY 1` (column positions), `LIMIT`/`OFFSET`, and table-function
//!   arguments.
//! * `generate_series(...)` in a select list returns rows, not an array.
//! * Constructs DataFusion would plan with different semantics are refused
//!   (`EXCEPT ALL` and `INTERSECT ALL` drop or keep every duplicate rather
//!   than subtracting multiplicities).

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    CastKind, DataType, Expr, Function, FunctionArgumentList, FunctionArguments, GroupByExpr,
    Ident, LimitClause, ObjectName, ObjectNamePart, OrderByKind, Query, Select, SelectItem,
    SetExpr, SetOperator, SetQuantifier, TableFactor, Value, Visit, VisitMut, Visitor, VisitorMut,
    WindowFrameBound, WindowType,
};

use crate::error::{PlanError, Result};

/// Refuse constructs DataFusion would answer differently from Postgres.
pub fn check_supported<V: Visit>(node: &V) -> Result<()> {
    struct Checker;
    impl Visitor for Checker {
        type Break = PlanError;
        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<PlanError> {
            fn walk(set: &SetExpr) -> Option<PlanError> {
                match set {
                    SetExpr::SetOperation {
                        op,
                        set_quantifier,
                        left,
                        right,
                    } => {
                        let all = matches!(set_quantifier, SetQuantifier::All);
                        match op {
                            SetOperator::Except | SetOperator::Minus if all => {
                                return Some(PlanError::unsupported("EXCEPT ALL"));
                            }
                            SetOperator::Intersect if all => {
                                return Some(PlanError::unsupported("INTERSECT ALL"));
                            }
                            _ => {}
                        }
                        walk(left).or_else(|| walk(right))
                    }
                    SetExpr::Query(q) => walk(&q.body),
                    _ => None,
                }
            }
            match walk(&query.body) {
                Some(e) => ControlFlow::Break(e),
                None => ControlFlow::Continue(()),
            }
        }
    }
    match node.visit(&mut Checker) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Relation aliases a select's `FROM` introduces (id-form relations always
/// carry one).
fn from_aliases(select: &Select) -> Vec<String> {
    let mut out = Vec::new();
    let mut add = |f: &TableFactor| {
        let alias = match f {
            TableFactor::Table { alias, .. }
            | TableFactor::Derived { alias, .. }
            | TableFactor::Function { alias, .. } => alias.as_ref(),
            _ => None,
        };
        if let Some(a) = alias {
            out.push(crate::parser::normalize_ident(&a.name));
        }
    };
    for twj in &select.from {
        add(&twj.relation);
        for j in &twj.joins {
            add(&j.relation);
        }
    }
    out
}

fn first_select(query: &Query) -> Option<&Select> {
    let mut body = query.body.as_ref();
    loop {
        match body {
            SetExpr::Select(s) => return Some(s),
            SetExpr::Query(q) => body = q.body.as_ref(),
            _ => return None,
        }
    }
}

/// Rewrite `x = ANY (subquery)` to `x IN (subquery)` and `x <> ALL
/// (subquery)` to `x NOT IN (subquery)` (equivalent, NULLs included). Other
/// comparisons with `ANY`/`ALL` over a subquery are refused when the
/// subquery reuses a relation name of an enclosing query, because
/// DataFusion then confuses the two (it returns wrong rows); with distinct
/// names they are planned as usual. `FULL JOIN ... USING` is refused too:
/// DataFusion takes the merged column from the left side only.
pub fn rewrite_quantified<V: VisitMut>(node: &mut V) -> Result<()> {
    struct Rewriter {
        scopes: Vec<Vec<String>>,
    }
    impl VisitorMut for Rewriter {
        type Break = PlanError;
        fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<PlanError> {
            use datafusion::sql::sqlparser::ast::{JoinConstraint, JoinOperator};
            for twj in &select.from {
                for join in &twj.joins {
                    if let JoinOperator::FullOuter(JoinConstraint::Using(_)) = &join.join_operator {
                        return ControlFlow::Break(PlanError::Unsupported(
                            "FULL JOIN ... USING is not supported; use FULL JOIN ... ON".into(),
                        ));
                    }
                }
            }
            self.scopes.push(from_aliases(select));
            ControlFlow::Continue(())
        }
        fn post_visit_select(&mut self, _select: &mut Select) -> ControlFlow<PlanError> {
            self.scopes.pop();
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<PlanError> {
            use datafusion::sql::sqlparser::ast::BinaryOperator;
            let (left, op, right, all) = match expr {
                Expr::AnyOp {
                    left,
                    compare_op,
                    right,
                    ..
                } => (left, compare_op.clone(), right, false),
                Expr::AllOp {
                    left,
                    compare_op,
                    right,
                } => (left, compare_op.clone(), right, true),
                _ => return ControlFlow::Continue(()),
            };
            let Expr::Subquery(query) = right.as_ref() else {
                return ControlFlow::Continue(());
            };
            let negated = match (&op, all) {
                (BinaryOperator::Eq, false) => false,
                (BinaryOperator::NotEq, true) => true,
                _ => {
                    let inner = first_select(query).map(from_aliases).unwrap_or_default();
                    if let Some(clash) = inner
                        .iter()
                        .find(|a| self.scopes.iter().any(|scope| scope.contains(a)))
                    {
                        return ControlFlow::Break(PlanError::Unsupported(format!(
                            "{op} {} (subquery) naming relation \"{clash}\" like the outer query is not supported; give one of them an alias",
                            if all { "ALL" } else { "ANY" }
                        )));
                    }
                    return ControlFlow::Continue(());
                }
            };
            *expr = Expr::InSubquery {
                expr: left.clone(),
                subquery: query.clone(),
                negated,
            };
            ControlFlow::Continue(())
        }
    }
    match node.visit(&mut Rewriter { scopes: vec![] }) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Give every unnamed, non-column select item a distinct alias, so that
/// DataFusion accepts select lists Postgres accepts with repeated
/// expressions (`SELECT power(2, 10), 2 ^ 10`). Output names come from the
/// original statement, so users never see these aliases.
pub fn alias_unnamed_items<V: VisitMut>(node: &mut V) {
    struct Aliaser(usize);
    impl VisitorMut for Aliaser {
        type Break = ();
        fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
            // Column references keep their names unless one repeats
            // (`SELECT b.k, b.k`), which DataFusion refuses.
            let mut seen = HashSet::new();
            for item in &mut select.projection {
                let repeated = match item {
                    SelectItem::UnnamedExpr(Expr::Identifier(i)) => !seen.insert(i.value.clone()),
                    SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
                        parts.last().is_some_and(|i| !seen.insert(i.value.clone()))
                    }
                    _ => false,
                };
                if let SelectItem::UnnamedExpr(e) = item
                    && (repeated || !matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_)))
                {
                    self.0 += 1;
                    *item = SelectItem::ExprWithAlias {
                        expr: e.clone(),
                        alias: Ident::with_quote('"', format!("?column?{}", self.0)),
                    };
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = node.visit(&mut Aliaser(0));
}

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

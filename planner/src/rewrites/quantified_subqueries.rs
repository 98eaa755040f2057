//! `x = ANY (subquery)` as `x IN (subquery)` and `x <> ALL (subquery)` as
//! `x NOT IN (subquery)`, and the refusals around them where DataFusion
//! would return wrong rows (see [`rewrite_quantified`]).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Query, Select, SetExpr, TableFactor, VisitMut, VisitorMut,
};

use crate::error::{PlanError, Result};

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

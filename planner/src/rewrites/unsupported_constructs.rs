//! Refusing constructs DataFusion would plan with other semantics than
//! Postgres: nested `EXCEPT ALL` / `INTERSECT ALL` (which DataFusion
//! answers as set operations; the top-level ones are rewritten by
//! [`super::set_all`]) and `DISTINCT` in a window function's arguments
//! (`count(DISTINCT x) OVER (...)`, which DataFusion computes and
//! PostgreSQL refuses).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    DuplicateTreatment, Expr, FunctionArguments, Query, SetExpr, SetOperator, SetQuantifier, Visit,
    Visitor,
};

use crate::error::{PlanError, Result};

/// Refuse constructs DataFusion would answer differently from Postgres.
pub fn check_supported<V: Visit>(node: &V) -> Result<()> {
    struct Checker;
    impl Visitor for Checker {
        type Break = PlanError;
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<PlanError> {
            if let Expr::Function(f) = expr
                && f.over.is_some()
                && let FunctionArguments::List(args) = &f.args
                && args.duplicate_treatment == Some(DuplicateTreatment::Distinct)
            {
                return ControlFlow::Break(PlanError::Unsupported(
                    "DISTINCT is not implemented for window functions".into(),
                ));
            }
            ControlFlow::Continue(())
        }
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

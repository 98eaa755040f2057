//! Refusing constructs DataFusion would plan with other semantics than
//! Postgres: nested `EXCEPT ALL` / `INTERSECT ALL` (which DataFusion
//! answers as set operations; the top-level ones are rewritten by
//! [`super::set_all`]).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Query, SetExpr, SetOperator, SetQuantifier, Visit, Visitor};

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

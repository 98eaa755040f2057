//! Reshaping long operator chains before DataFusion plans them.
//!
//! The parser builds `x1 OR x2 OR ... OR xn` and `a + b + ... + z` as
//! left-deep trees as deep as they are long, and DataFusion types a binary
//! expression by typing both of its sides again, so type coercion alone
//! costs the square of a chain's length (3,000 `OR` terms took 12 s to
//! plan in a debug build). Chains longer than [`LONG_CHAIN`] are reshaped
//! in the syntax tree, where nothing has been typed yet:
//!
//! * `AND` and `OR` chains become balanced trees of the same operands in
//!   the same order. Both operators are associative in SQL's three-valued
//!   logic, and SQL leaves their evaluation order open, so the result is
//!   the same; the depth becomes the logarithm of the length.
//! * Arithmetic chains (`+ - * / %` along a left spine) become one
//!   `checked_arith('+-...', x0, x1, ...)` call, which folds its operands
//!   left to right with each operator's own typing and PostgreSQL's errors
//!   (see [`crate::rewrites::checked_arithmetic`]): the same result, the same error
//!   at the same step. Arithmetic is not associative under overflow and
//!   rounding, so these chains are flattened, never re-balanced.
//!
//! Shorter chains are left exactly as written.
//!
//! DataFusion's optimizer splits predicates into their conjuncts (to push
//! them down) and joins them again left-deep, and a deep physical `AND`
//! asks each level for its type as it evaluates, so a rebuilt chain would
//! cost the square of its length on every batch. [`BalanceBooleanChains`],
//! the last optimizer rule, balances long `AND`/`OR` chains again in the
//! optimized plan, which both queries and dataflows run; and
//! [`BalanceFilterPredicates`], the last physical optimizer rule, once more
//! in a query's physical filters, which DataFusion's physical filter
//! pushdown rebuilds left-deep.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArgumentList,
    FunctionArguments, Ident, ObjectName, Statement, Value, VisitMut, VisitorMut,
};

use datafusion::common::Result;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{self as logical, LogicalPlan, Operator};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};
use datafusion::physical_expr::expressions::BinaryExpr;
use datafusion::physical_expr::{PhysicalExpr, split_conjunction};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};

use crate::rewrites::checked_arithmetic::CHAIN;

/// Chains with more operators than this are reshaped.
pub const LONG_CHAIN: usize = 32;

/// Reshape every long chain in `stmt`.
pub fn reshape(stmt: &mut Statement) {
    let _ = stmt.visit(&mut Reshaper);
}

struct Reshaper;

impl VisitorMut for Reshaper {
    type Break = ();

    // Before the visitor descends: it then walks the reshaped, shallow
    // tree instead of the chain.
    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::BinaryOp { op, .. } = expr else {
            return ControlFlow::Continue(());
        };
        let reshaped = match op {
            BinaryOperator::And | BinaryOperator::Or => {
                let op = op.clone();
                (spine_len(expr, |o| *o == op) > LONG_CHAIN).then(|| {
                    let (operands, _) = take_spine(expr, |o| *o == op);
                    balance(operands, &op)
                })
            }
            o if arithmetic(o).is_some() => {
                (spine_len(expr, |o| arithmetic(o).is_some()) > LONG_CHAIN).then(|| {
                    let (operands, ops) = take_spine(expr, |o| arithmetic(o).is_some());
                    chain_call(operands, &ops)
                })
            }
            _ => None,
        };
        if let Some(reshaped) = reshaped {
            *expr = reshaped;
        }
        ControlFlow::Continue(())
    }
}

/// How `checked_arith` spells an arithmetic operator.
fn arithmetic(op: &BinaryOperator) -> Option<char> {
    match op {
        BinaryOperator::Plus => Some('+'),
        BinaryOperator::Minus => Some('-'),
        BinaryOperator::Multiply => Some('*'),
        BinaryOperator::Divide => Some('/'),
        BinaryOperator::Modulo => Some('%'),
        _ => None,
    }
}

/// How many operators of the chain start here, along the left spine.
fn spine_len(expr: &Expr, member: impl Fn(&BinaryOperator) -> bool) -> usize {
    let mut n = 0;
    let mut e = expr;
    while let Expr::BinaryOp { left, op, .. } = e
        && member(op)
    {
        n += 1;
        e = left;
    }
    n
}

/// The operands of the chain starting at `expr` and the operators between
/// them, left to right; `expr` is left as a placeholder. Iterative, so a
/// chain of any length is taken apart without recursion.
fn take_spine(
    expr: &mut Expr,
    member: impl Fn(&BinaryOperator) -> bool,
) -> (Vec<Expr>, Vec<BinaryOperator>) {
    let mut rights = Vec::new();
    let mut ops = Vec::new();
    let mut current = std::mem::replace(expr, placeholder());
    loop {
        match current {
            Expr::BinaryOp { left, op, right } if member(&op) => {
                rights.push(*right);
                ops.push(op);
                current = *left;
            }
            first => {
                rights.push(first);
                break;
            }
        }
    }
    rights.reverse();
    ops.reverse();
    (rights, ops)
}

fn placeholder() -> Expr {
    Expr::Value(Value::Null.into())
}

/// A balanced tree of `op` over `operands`, in order.
fn balance(operands: Vec<Expr>, op: &BinaryOperator) -> Expr {
    balanced(operands, |left, right| Expr::BinaryOp {
        left: Box::new(left),
        op: op.clone(),
        right: Box::new(right),
    })
    .unwrap_or_else(placeholder)
}

/// `operands` joined pairwise by `join` into a balanced tree, in order
/// (for either kind of tree: the syntax tree's or DataFusion's). Each
/// round pairs neighbours and halves the count, so the depth is the
/// logarithm of the length.
fn balanced<E>(mut operands: Vec<E>, join: impl Fn(E, E) -> E) -> Option<E> {
    while operands.len() > 1 {
        let mut next = Vec::with_capacity(operands.len().div_ceil(2));
        let mut it = operands.into_iter();
        while let Some(left) = it.next() {
            next.push(match it.next() {
                Some(right) => join(left, right),
                None => left,
            });
        }
        operands = next;
    }
    operands.pop()
}

/// `checked_arith('<ops>', operands...)`.
fn chain_call(operands: Vec<Expr>, ops: &[BinaryOperator]) -> Expr {
    let spelled: String = ops.iter().filter_map(arithmetic).collect();
    let arg = |e: Expr| FunctionArg::Unnamed(FunctionArgExpr::Expr(e));
    let mut args = vec![arg(Expr::Value(Value::SingleQuotedString(spelled).into()))];
    args.extend(operands.into_iter().map(arg));
    Expr::Function(Function {
        name: ObjectName::from(vec![Ident::new(CHAIN)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args,
            clauses: Vec::new(),
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: Vec::new(),
    })
}

/// Balances long `AND`/`OR` chains in an optimized plan (see the module
/// documentation).
#[derive(Debug, Default)]
pub struct BalanceBooleanChains;

impl OptimizerRule for BalanceBooleanChains {
    fn name(&self) -> &str {
        "freshet_balance_boolean_chains"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        plan.transform_up_with_subqueries(|node| {
            // Most plans have no long chain: look before naming anything
            // (this runs in every optimizer pass of every statement).
            let mut long = false;
            node.apply_expressions(|e| {
                long = e.exists(|e| Ok(logical_spine(e).is_some_and(|(_, n)| n > LONG_CHAIN)))?;
                Ok(if long {
                    TreeNodeRecursion::Stop
                } else {
                    TreeNodeRecursion::Continue
                })
            })?;
            if !long {
                return Ok(Transformed::no(node));
            }
            let preserver = NamePreserver::new(&node);
            node.map_expressions(|e| {
                let saved = preserver.save(&e);
                Ok(e.transform_down(balance_logical)?
                    .update_data(|e| saved.restore(e)))
            })
        })
    }
}

/// Balances long `AND` chains in physical filters. DataFusion's physical
/// filter pushdown splits a filter's predicate into conjuncts and joins
/// them again left-deep after [`BalanceBooleanChains`] ran, and a deep
/// physical `AND` re-derives its children's types at every level as it
/// evaluates. The last physical optimizer rule.
#[derive(Debug, Default)]
pub struct BalanceFilterPredicates;

impl PhysicalOptimizerRule for BalanceFilterPredicates {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(filter) = node.downcast_ref::<FilterExec>() else {
                return Ok(Transformed::no(node));
            };
            let conjuncts = split_conjunction(filter.predicate());
            if conjuncts.len() <= LONG_CHAIN + 1 {
                return Ok(Transformed::no(node));
            }
            let operands: Vec<Arc<dyn PhysicalExpr>> = conjuncts.into_iter().cloned().collect();
            let Some(predicate) = balanced(operands, |l, r| {
                Arc::new(BinaryExpr::new(l, Operator::And, r)) as Arc<dyn PhysicalExpr>
            }) else {
                return Ok(Transformed::no(node));
            };
            let rebuilt = FilterExecBuilder::from(filter)
                .with_predicate(predicate)
                .build()?;
            Ok(Transformed::yes(Arc::new(rebuilt) as Arc<dyn ExecutionPlan>))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "freshet_balance_filter_predicates"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// An `AND`/`OR` expression's operator and the number of operators along
/// its left spine.
fn logical_spine(e: &logical::Expr) -> Option<(Operator, usize)> {
    let logical::Expr::BinaryExpr(b) = e else {
        return None;
    };
    let op = b.op;
    if !matches!(op, Operator::And | Operator::Or) {
        return None;
    }
    let mut len = 0;
    let mut at = e;
    while let logical::Expr::BinaryExpr(b) = at
        && b.op == op
    {
        len += 1;
        at = &b.left;
    }
    Some((op, len))
}

/// At the top of a long `AND`/`OR` chain, the same operands balanced; the
/// walk then goes on below the balanced tree.
fn balance_logical(e: logical::Expr) -> Result<Transformed<logical::Expr>> {
    let Some((op, len)) = logical_spine(&e) else {
        return Ok(Transformed::no(e));
    };
    if len <= LONG_CHAIN {
        return Ok(Transformed::no(e));
    }
    let mut rights = Vec::new();
    let mut current = e;
    loop {
        match current {
            logical::Expr::BinaryExpr(b) if b.op == op => {
                rights.push(*b.right);
                current = *b.left;
            }
            first => {
                rights.push(first);
                break;
            }
        }
    }
    rights.reverse();
    let balanced = balanced(rights, |l, r| logical::binary_expr(l, op, r))
        .unwrap_or_else(|| logical::lit(op == Operator::And));
    // The walk goes on into the operands (which may hold chains of their
    // own); the balanced levels above them are short.
    Ok(Transformed::yes(balanced))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn reshaped(sql: &str) -> String {
        let mut stmt = Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0);
        reshape(&mut stmt);
        stmt.to_string()
    }

    fn chain(op: &str, n: usize) -> String {
        (0..n).map(|i| format!("x{i}")).collect::<Vec<_>>().join(op)
    }

    #[test]
    fn short_chains_are_left_as_written() {
        let sql = format!("SELECT {} FROM t", chain(" + ", LONG_CHAIN + 1));
        assert_eq!(reshaped(&sql), sql);
        let sql = format!("SELECT 1 FROM t WHERE {}", chain(" OR ", LONG_CHAIN + 1));
        assert_eq!(reshaped(&sql), sql);
    }

    /// The WHERE clause of a reshaped `SELECT`.
    fn reshaped_where(sql: &str) -> Expr {
        use datafusion::sql::sqlparser::ast::SetExpr;
        let mut stmt = Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0);
        reshape(&mut stmt);
        let Statement::Query(q) = stmt else {
            panic!("not a query")
        };
        let SetExpr::Select(select) = *q.body else {
            panic!("not a select")
        };
        select.selection.unwrap()
    }

    /// The leaves of a tree of `op`, left to right.
    fn leaves(e: &Expr, op: &BinaryOperator, out: &mut Vec<String>) {
        match e {
            Expr::BinaryOp { left, op: o, right } if o == op => {
                leaves(left, op, out);
                leaves(right, op, out);
            }
            other => out.push(other.to_string()),
        }
    }

    fn depth(e: &Expr) -> usize {
        match e {
            Expr::BinaryOp { left, right, .. } => 1 + depth(left).max(depth(right)),
            _ => 0,
        }
    }

    #[test]
    fn long_boolean_chains_are_balanced_in_order() {
        let e = reshaped_where(&format!("SELECT 1 FROM t WHERE {}", chain(" OR ", 40)));
        let mut out = Vec::new();
        leaves(&e, &BinaryOperator::Or, &mut out);
        assert_eq!(out, (0..40).map(|i| format!("x{i}")).collect::<Vec<_>>());
        assert_eq!(depth(&e), 6);
        // An AND inside an OR chain is an operand, not part of it.
        let e = reshaped_where(&format!(
            "SELECT 1 FROM t WHERE a AND b OR {}",
            chain(" OR ", 40)
        ));
        let mut out = Vec::new();
        leaves(&e, &BinaryOperator::Or, &mut out);
        assert_eq!(out[0], "a AND b");
        assert_eq!(out.len(), 41);
    }

    #[test]
    fn long_arithmetic_chains_are_one_call() {
        let sql = format!("SELECT {} * y - z FROM t", chain(" + ", 40));
        // `x39 * y` binds first, so it is one operand of the spine.
        let mut operands: Vec<String> = (0..39).map(|i| format!("x{i}")).collect();
        operands.extend(["x39 * y".to_string(), "z".to_string()]);
        let ops = "+".repeat(39) + "-";
        assert_eq!(
            reshaped(&sql),
            format!("SELECT {CHAIN}('{ops}', {}) FROM t", operands.join(", "))
        );
    }

    #[test]
    fn chains_of_any_length_are_taken_apart_without_recursion() {
        let n = 200_000;
        let mut e = Expr::Identifier(Ident::new("x"));
        for _ in 0..n {
            e = Expr::BinaryOp {
                left: Box::new(e),
                op: BinaryOperator::Or,
                right: Box::new(Expr::Identifier(Ident::new("y"))),
            };
        }
        let (operands, ops) = take_spine(&mut e, |o| *o == BinaryOperator::Or);
        assert_eq!((operands.len(), ops.len()), (n + 1, n));
        let balanced = balance(operands, &BinaryOperator::Or);
        assert!(spine_len(&balanced, |o| *o == BinaryOperator::Or) <= 18);
    }

    /// The depth of a physical expression tree.
    fn physical_depth(e: &Arc<dyn PhysicalExpr>) -> usize {
        1 + e
            .children()
            .into_iter()
            .map(physical_depth)
            .max()
            .unwrap_or(0)
    }

    #[tokio::test]
    async fn physical_filters_keep_long_conjunctions_balanced() {
        let state = crate::query::engine::new_session_state(1);
        let terms: Vec<String> = (0..300)
            .map(|i| format!("x * 2 <> {}", 2 * i + 1))
            .collect();
        let sql = format!(
            "SELECT x FROM (VALUES (1000), (5)) t(x) WHERE {}",
            terms.join(" AND ")
        );
        let logical = state.create_logical_plan(&sql).await.expect("plans");
        let physical = state.create_physical_plan(&logical).await.expect("plans");
        let mut depths = vec![];
        physical
            .apply(|node| {
                if let Some(f) = node.downcast_ref::<FilterExec>() {
                    depths.push(physical_depth(f.predicate()));
                }
                Ok(TreeNodeRecursion::Continue)
            })
            .expect("walks");
        // 300 conjuncts: a balanced tree of them is 9 `AND`s deep, plus
        // the comparison and its operands.
        assert!(
            !depths.is_empty(),
            "{}",
            datafusion::physical_plan::displayable(physical.as_ref()).indent(true)
        );
        assert!(depths.iter().all(|d| *d <= 16), "{depths:?}");
    }
}

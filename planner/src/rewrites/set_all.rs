//! `EXCEPT ALL` and `INTERSECT ALL` with Postgres's multiset semantics.
//!
//! DataFusion plans both as (anti/semi) joins that drop or keep *every*
//! copy of a row present on the other side; Postgres subtracts (or takes
//! the minimum of) multiplicities. Numbering the copies of each distinct
//! row turns the multiset operation into a set operation with the same
//! answer: `L EXCEPT ALL R` keeps copy `i` of row `x` iff `R` has fewer
//! than `i` copies of `x`, which is
//!
//! ```text
//! SELECT c1, .., cn FROM (
//!     SELECT *, row_number() OVER (PARTITION BY c1, .., cn) FROM (L) AS l(c1, .., cn)
//!     EXCEPT
//!     SELECT *, row_number() OVER (PARTITION BY c1, .., cn) FROM (R) AS r(c1, .., cn)
//! )
//! ```
//!
//! (likewise `INTERSECT`). Set operations treat NULLs as equal, as
//! PARTITION BY does. The rewrite needs the arity of `L`, so `L` is planned
//! first; it applies to the set operations of a statement's top-level
//! query (nested ones inside subqueries are still refused).

use datafusion::sql::sqlparser::ast::{self, Query, SetExpr, SetOperator, SetQuantifier};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::error::{PlanError, Result};
use crate::parser::quote_if_needed;
use crate::pg::naming;

/// The names DataFusion gives the output columns of a query, in order:
/// the rewrite plans the left side of each operation for its arity.
pub type OutputNames<'a> = dyn Fn(&Query) -> Result<Vec<String>> + 'a;

/// Rewrite the `EXCEPT ALL` / `INTERSECT ALL` operations of `query`'s body.
pub fn rewrite(output_names: &OutputNames<'_>, query: &mut Query) -> Result<()> {
    let with = query.with.clone();
    rewrite_set(output_names, &with, &mut query.body)
}

fn rewrite_set(
    output_names: &OutputNames<'_>,
    with: &Option<ast::With>,
    set: &mut SetExpr,
) -> Result<()> {
    let SetExpr::SetOperation {
        op,
        set_quantifier,
        left,
        right,
    } = set
    else {
        return Ok(());
    };
    rewrite_set(output_names, with, left)?;
    rewrite_set(output_names, with, right)?;
    let keyword = match op {
        SetOperator::Except | SetOperator::Minus => "EXCEPT",
        SetOperator::Intersect => "INTERSECT",
        _ => return Ok(()),
    };
    if !matches!(set_quantifier, SetQuantifier::All) {
        return Ok(());
    }
    // Plan the left side alone for its arity and column names.
    let left_query = Query {
        with: with.clone(),
        body: left.clone(),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: vec![],
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: vec![],
    };
    let df_names = output_names(&left_query)?;
    let names = naming::output_names(&left_query, &df_names);
    let cols: Vec<String> = (1..=names.len()).map(|i| format!("__c{i}")).collect();
    let cols = cols.join(", ");
    let select: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("__c{} AS {}", i + 1, quote_if_needed(n)))
        .collect();
    let numbered = |side: &SetExpr, alias: &str| {
        format!(
            "SELECT *, row_number() OVER (PARTITION BY {cols}) AS __copy \
             FROM ({side}) AS {alias}({cols})"
        )
    };
    let sql = format!(
        "SELECT {} FROM ({} {keyword} {}) AS __multiset",
        select.join(", "),
        numbered(left, "__left"),
        numbered(right, "__right"),
    );
    let rewritten = Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .map_err(|e| PlanError::Internal(format!("rewriting {keyword} ALL: {e}")))?;
    *set = SetExpr::Query(rewritten);
    Ok(())
}

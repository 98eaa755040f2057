//! `WINDOW w AS (...)` definitions inlined into every `OVER` that names
//! them, with PostgreSQL's rules for refining a named window.
//!
//! DataFusion substitutes a bare `OVER w`, but in `OVER (w ORDER BY x)` it
//! drops `w` altogether, and a definition built on another (`WINDOW w2 AS
//! (w1 ORDER BY x)`) loses `w1`'s `PARTITION BY`: ranks and frames then
//! span the whole input, silently. PostgreSQL's rules, applied here before
//! DataFusion sees the query:
//!
//! - `OVER w` is `w` as defined, frame included;
//! - `OVER (w ...)` (and `WINDOW v AS (w ...)`) copies `w`'s `PARTITION BY`
//!   and `ORDER BY` and adds its own `ORDER BY` and frame; it may not give
//!   a `PARTITION BY` of its own, nor an `ORDER BY` when `w` has one, nor
//!   copy a `w` that has a frame (42P20 in each case);
//! - a name that no definition of the same `SELECT` gives is 42704.
//!
//! Names are scoped to their `SELECT`: a subquery's window functions see
//! only the subquery's own `WINDOW` clause.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self, Expr, Ident, NamedWindowDefinition, NamedWindowExpr, SetExpr, VisitMut, VisitorMut,
    WindowSpec, WindowType,
};
use freshet_repr::sqlstate;

use crate::error::{PlanError, Result, sqlstate_error};

/// PostgreSQL's windowing_error.
const WINDOWING_ERROR: &str = "42P20";

/// Inline the named windows of every `SELECT` in `node`.
pub fn rewrite<V: VisitMut>(node: &mut V) -> Result<()> {
    struct Queries;
    impl VisitorMut for Queries {
        type Break = PlanError;
        fn pre_visit_query(&mut self, query: &mut ast::Query) -> ControlFlow<PlanError> {
            match inline_in_set_expr(&mut query.body, query.order_by.as_mut()) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => ControlFlow::Break(e),
            }
        }
    }
    match node.visit(&mut Queries) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// The `SELECT`s directly under a query body (through set operations, not
/// into subqueries, which the visitor reaches on its own). The query's
/// `ORDER BY` belongs to a lone `SELECT`.
fn inline_in_set_expr(body: &mut SetExpr, order_by: Option<&mut ast::OrderBy>) -> Result<()> {
    match body {
        SetExpr::Select(select) => {
            if select.named_window.is_empty() {
                return Ok(());
            }
            let windows = resolve_definitions(&select.named_window)?;
            let mut functions = Functions {
                windows: &windows,
                depth: 0,
            };
            let visits = [
                select.projection.visit(&mut functions),
                select.having.visit(&mut functions),
                select.qualify.visit(&mut functions),
                order_by.map_or(ControlFlow::Continue(()), |o| o.visit(&mut functions)),
            ];
            for visited in visits {
                if let ControlFlow::Break(e) = visited {
                    return Err(e);
                }
            }
            select.named_window.clear();
            Ok(())
        }
        SetExpr::SetOperation { left, right, .. } => {
            inline_in_set_expr(left, None)?;
            inline_in_set_expr(right, None)
        }
        _ => Ok(()),
    }
}

/// Every definition of a `WINDOW` clause as a complete specification, in
/// order (a definition may build on an earlier one).
fn resolve_definitions(defs: &[NamedWindowDefinition]) -> Result<Vec<(Ident, WindowSpec)>> {
    let mut resolved: Vec<(Ident, WindowSpec)> = vec![];
    for NamedWindowDefinition(name, expr) in defs {
        if resolved.iter().any(|(n, _)| n.value == name.value) {
            return Err(windowing_error(format!(
                "window \"{}\" is already defined",
                name.value
            )));
        }
        let spec = match expr {
            NamedWindowExpr::NamedWindow(base) => lookup(&resolved, base)?.clone(),
            NamedWindowExpr::WindowSpec(spec) => refine(&resolved, spec)?,
        };
        resolved.push((name.clone(), spec));
    }
    Ok(resolved)
}

/// The definition named `name`.
fn lookup<'a>(windows: &'a [(Ident, WindowSpec)], name: &Ident) -> Result<&'a WindowSpec> {
    windows
        .iter()
        .find(|(n, _)| n.value == name.value)
        .map(|(_, spec)| spec)
        .ok_or_else(|| {
            PlanError::DataFusion(sqlstate_error(
                sqlstate::UNDEFINED_OBJECT,
                format!("window \"{}\" does not exist", name.value),
            ))
        })
}

/// `spec` with the window it names (if any) copied in, by PostgreSQL's
/// rules (see the module docs).
fn refine(windows: &[(Ident, WindowSpec)], spec: &WindowSpec) -> Result<WindowSpec> {
    let Some(base_name) = &spec.window_name else {
        return Ok(spec.clone());
    };
    let base = lookup(windows, base_name)?;
    let name = &base_name.value;
    if !spec.partition_by.is_empty() {
        return Err(windowing_error(format!(
            "cannot override PARTITION BY clause of window \"{name}\""
        )));
    }
    if !spec.order_by.is_empty() && !base.order_by.is_empty() {
        return Err(windowing_error(format!(
            "cannot override ORDER BY clause of window \"{name}\""
        )));
    }
    if base.window_frame.is_some() {
        return Err(windowing_error(format!(
            "cannot copy window \"{name}\" because it has a frame clause"
        )));
    }
    Ok(WindowSpec {
        window_name: None,
        partition_by: base.partition_by.clone(),
        order_by: if spec.order_by.is_empty() {
            base.order_by.clone()
        } else {
            spec.order_by.clone()
        },
        window_frame: spec.window_frame.clone(),
    })
}

fn windowing_error(message: String) -> PlanError {
    PlanError::DataFusion(sqlstate_error(WINDOWING_ERROR, message))
}

/// Rewrites the `OVER` clauses of one `SELECT`'s expressions, leaving
/// subqueries (depth > 0) alone.
struct Functions<'w> {
    windows: &'w [(Ident, WindowSpec)],
    depth: usize,
}

impl VisitorMut for Functions<'_> {
    type Break = PlanError;

    fn pre_visit_query(&mut self, _query: &mut ast::Query) -> ControlFlow<PlanError> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &mut ast::Query) -> ControlFlow<PlanError> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<PlanError> {
        if self.depth > 0 {
            return ControlFlow::Continue(());
        }
        let Expr::Function(f) = expr else {
            return ControlFlow::Continue(());
        };
        let inlined = match &f.over {
            Some(WindowType::NamedWindow(name)) => lookup(self.windows, name).cloned(),
            Some(WindowType::WindowSpec(spec)) if spec.window_name.is_some() => {
                refine(self.windows, spec)
            }
            _ => return ControlFlow::Continue(()),
        };
        match inlined {
            Ok(spec) => {
                f.over = Some(WindowType::WindowSpec(spec));
                ControlFlow::Continue(())
            }
            Err(e) => ControlFlow::Break(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    use super::*;

    fn inlined(sql: &str) -> Result<String> {
        let mut stmts = Parser::parse_sql(&PostgreSqlDialect {}, sql).expect("parses");
        rewrite(&mut stmts)?;
        Ok(stmts[0].to_string())
    }

    #[test]
    fn refinements_copy_partition_and_order() {
        let sql = inlined(
            "SELECT rank() OVER (w ORDER BY a), sum(a) OVER w, count(*) OVER (w2 ROWS \
             BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t WINDOW w AS (PARTITION BY g), \
             w2 AS (w ORDER BY b)",
        )
        .expect("valid");
        assert_eq!(
            sql,
            "SELECT rank() OVER (PARTITION BY g ORDER BY a), sum(a) OVER (PARTITION BY g), \
             count(*) OVER (PARTITION BY g ORDER BY b ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) \
             FROM t"
        );
    }

    #[test]
    fn postgres_refusals_are_windowing_errors() {
        for sql in [
            "SELECT rank() OVER (w ORDER BY b) FROM t WINDOW w AS (ORDER BY a)",
            "SELECT rank() OVER (w PARTITION BY b) FROM t WINDOW w AS (ORDER BY a)",
            "SELECT sum(a) OVER (w) FROM t WINDOW w AS (ORDER BY a ROWS UNBOUNDED PRECEDING)",
        ] {
            let err = inlined(sql).expect_err(sql);
            assert!(err.to_string().contains("window \"w\""), "{sql}: {err}");
        }
        let err = inlined("SELECT sum(a) OVER v FROM t WINDOW w AS ()").expect_err("unknown");
        assert!(
            err.to_string().contains("window \"v\" does not exist"),
            "{err}"
        );
    }

    #[test]
    fn subqueries_keep_their_own_windows() {
        let sql = inlined(
            "SELECT sum(a) OVER w, (SELECT max(b) OVER w FROM u WINDOW w AS (ORDER BY b) \
             LIMIT 1) FROM t WINDOW w AS (PARTITION BY g)",
        )
        .expect("valid");
        assert_eq!(
            sql,
            "SELECT sum(a) OVER (PARTITION BY g), (SELECT max(b) OVER (ORDER BY b) FROM u \
             LIMIT 1) FROM t"
        );
    }
}

//! Output column names as Postgres gives them.
//!
//! DataFusion names an unaliased expression after its text (`count(*)`,
//! `Int64(1) + t.a`); Postgres names it after the column or function it
//! applies, or `?column?`. Names are computed from the AST of the query's
//! first `SELECT` and used in `RowDescription` and for view columns.

use datafusion::sql::sqlparser::ast::{Expr, FunctionArguments, Query, SelectItem, SetExpr};

use crate::parser::normalize_ident;

/// Postgres's name for an unaliased select-list expression.
pub fn expr_name(expr: &Expr) -> String {
    match expr {
        Expr::Identifier(i) => normalize_ident(i),
        Expr::CompoundIdentifier(parts) => parts.last().map(normalize_ident).unwrap_or_default(),
        Expr::Nested(e) => expr_name(e),
        Expr::Function(f) => {
            // `CURRENT_TIMESTAMP` etc. parse as argument-less functions.
            let name = f
                .name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(normalize_ident)
                .unwrap_or_else(|| "?column?".into());
            if matches!(f.args, FunctionArguments::None) {
                name.to_lowercase()
            } else {
                name
            }
        }
        Expr::Cast {
            expr, data_type, ..
        } => match expr.as_ref() {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Function(_) => {
                expr_name(expr)
            }
            Expr::Nested(inner)
                if matches!(
                    inner.as_ref(),
                    Expr::Identifier(_) | Expr::CompoundIdentifier(_) | Expr::Function(_)
                ) =>
            {
                expr_name(inner)
            }
            _ => crate::pg::types::pg_type_of(data_type)
                .map(|t| t.typname().to_string())
                .unwrap_or_else(|_| "?column?".into()),
        },
        Expr::TypedString(ts) => crate::pg::types::pg_type_of(&ts.data_type)
            .map(|t| t.typname().to_string())
            .unwrap_or_else(|_| "?column?".into()),
        Expr::Case { .. } => "case".into(),
        Expr::Exists { .. } => "exists".into(),
        Expr::Array(_) => "array".into(),
        Expr::Extract { .. } => "extract".into(),
        Expr::Substring { .. } => "substring".into(),
        Expr::Position { .. } => "position".into(),
        Expr::Trim { .. } => "btrim".into(),
        Expr::Ceil { .. } => "ceil".into(),
        Expr::Floor { .. } => "floor".into(),
        Expr::Subquery(q) => first_select_names(q)
            .and_then(|names| names.into_iter().next().flatten())
            .unwrap_or_else(|| "?column?".into()),
        _ => "?column?".into(),
    }
}

/// Names of the first `SELECT` of a query, one per select item; `None` for
/// items that are wildcards (their expansion is named by DataFusion).
fn first_select_names(query: &Query) -> Option<Vec<Option<String>>> {
    let mut body = query.body.as_ref();
    loop {
        match body {
            SetExpr::Select(select) => {
                return Some(
                    select
                        .projection
                        .iter()
                        .map(|item| match item {
                            SelectItem::UnnamedExpr(e) => Some(expr_name(e)),
                            SelectItem::ExprWithAlias { alias, .. } => Some(normalize_ident(alias)),
                            _ => None,
                        })
                        .collect(),
                );
            }
            SetExpr::Query(q) => body = q.body.as_ref(),
            SetExpr::SetOperation { left, .. } => body = left.as_ref(),
            _ => return None,
        }
    }
}

/// Postgres-style names for a query's `arity` output columns, falling back
/// to DataFusion's names where the select list cannot be matched up (e.g.
/// several wildcards).
pub fn output_names(query: &Query, datafusion_names: &[String]) -> Vec<String> {
    let Some(items) = first_select_names(query) else {
        return datafusion_names.to_vec();
    };
    let wildcards = items.iter().filter(|i| i.is_none()).count();
    let named = items.len() - wildcards;
    let n = datafusion_names.len();
    if wildcards > 1 || (wildcards == 0 && named != n) || named > n {
        return datafusion_names.to_vec();
    }
    let expansion = n - named;
    let mut out = Vec::with_capacity(n);
    for item in items {
        match item {
            Some(name) => out.push(name),
            None => {
                let start = out.len();
                out.extend(datafusion_names[start..start + expansion].iter().cloned());
            }
        }
    }
    out
}

//! Distinct aliases for unnamed select items, so that DataFusion accepts
//! the repeated expressions Postgres accepts (`SELECT power(2, 10), 2 ^
//! 10`).

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Ident, Select, SelectItem, Value, VisitMut, VisitorMut,
};

/// Give every unnamed, non-column select item a distinct alias, so that
/// DataFusion accepts select lists Postgres accepts with repeated
/// expressions (`SELECT power(2, 10), 2 ^ 10`), and likewise every item
/// whose name repeats another's. Output names come from the original
/// statement, so users never see these aliases.
pub fn alias_unnamed_items<V: VisitMut>(node: &mut V) {
    struct Aliaser(usize);
    impl VisitorMut for Aliaser {
        type Break = ();
        fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
            // Column references and aliases keep their names unless one
            // repeats (`SELECT b.k, b.k`, `SELECT 1 AS a, 2 AS a`), which
            // DataFusion refuses and Postgres allows; a column reference
            // next to a wildcard (`SELECT db.oid, db.*`, as DBeaver
            // writes) is renamed too, as the wildcard repeats it.
            // `*` repeats every column; `x.*` those of `x`, so it repeats
            // `x.c` (whether it repeats a bare `c` is not known here).
            let star = select
                .projection
                .iter()
                .any(|i| matches!(i, SelectItem::Wildcard(_)));
            let qualified: Vec<String> = select
                .projection
                .iter()
                .filter_map(|i| match i {
                    SelectItem::QualifiedWildcard(
                        datafusion::sql::sqlparser::ast::SelectItemQualifiedWildcardKind::ObjectName(n),
                        _,
                    ) => n.0.last().and_then(|p| p.as_ident()).map(|i| i.value.clone()),
                    _ => None,
                })
                .collect();
            let mut seen = HashSet::new();
            for item in &mut select.projection {
                let repeated = match &*item {
                    SelectItem::UnnamedExpr(Expr::Identifier(i)) => {
                        !seen.insert(i.value.clone()) || star
                    }
                    SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
                        let table = parts
                            .len()
                            .checked_sub(2)
                            .and_then(|k| parts.get(k))
                            .map(|t| t.value.as_str());
                        parts.last().is_some_and(|i| !seen.insert(i.value.clone()))
                            || star
                            || table.is_some_and(|t| qualified.iter().any(|q| q == t))
                    }
                    SelectItem::UnnamedExpr(_) => true,
                    SelectItem::ExprWithAlias { alias, .. } => !seen.insert(alias.value.clone()),
                    _ => false,
                };
                if !repeated {
                    continue;
                }
                let (SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) = item
                else {
                    continue;
                };
                let expr = std::mem::replace(e, Expr::value(Value::Null));
                self.0 += 1;
                *item = SelectItem::ExprWithAlias {
                    expr,
                    alias: Ident::with_quote('"', format!("?column?{}", self.0)),
                };
            }
            ControlFlow::Continue(())
        }
    }
    let _ = node.visit(&mut Aliaser(0));
}

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
            let wildcard = select.projection.iter().any(|i| {
                matches!(
                    i,
                    SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
                )
            });
            let mut seen = HashSet::new();
            for item in &mut select.projection {
                let repeated = match &*item {
                    SelectItem::UnnamedExpr(Expr::Identifier(i)) => {
                        !seen.insert(i.value.clone()) || wildcard
                    }
                    SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
                        parts.last().is_some_and(|i| !seen.insert(i.value.clone())) || wildcard
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

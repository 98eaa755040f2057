//! Distinct aliases for unnamed select items, so that DataFusion accepts
//! the repeated expressions Postgres accepts (`SELECT power(2, 10), 2 ^
//! 10`).

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Expr, Ident, Select, SelectItem, VisitMut, VisitorMut};

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

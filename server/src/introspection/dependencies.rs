//! `pg_rewrite` and `pg_depend`: which relations each view and
//! materialized view reads, and which relation each index is on, as
//! PostgreSQL records them. Tools walk these to learn what a `DROP ...
//! CASCADE` takes with it (dbt's relation cache does, so that it rebuilds a
//! materialized view whose input view it replaced).
//!
//! A view's (or materialized view's) query is its `_RETURN` rule, whose oid
//! is derived from the view's like a key constraint's (views have no keys,
//! so the oid is free); the rule depends on each relation the query names
//! directly (`deptype 'n'`) and on its own view (`'i'`). An index depends
//! on its relation automatically (`'a'`).

use freshet_catalog::{ItemDetails, ItemKind};
use freshet_planner::builtins::key_constraint_oid;

use super::{QueryReader, Row};

/// `pg_class`'s oid (`classid`/`refclassid` of relations).
const PG_CLASS_OID: u32 = 1259;
/// `pg_rewrite`'s oid (`classid` of rules).
const PG_REWRITE_OID: u32 = 2618;

fn text(v: impl ToString) -> Option<String> {
    Some(v.to_string())
}

/// The oid of a view's `_RETURN` rule.
fn rule_oid(view_oid: u32) -> u32 {
    key_constraint_oid(view_oid, 0)
}

fn is_view(kind: ItemKind) -> bool {
    matches!(kind, ItemKind::View | ItemKind::MaterializedView)
}

impl QueryReader {
    /// `pg_rewrite`: the `_RETURN` rule of every view and materialized view.
    pub(super) fn pg_rewrite(&self) -> Vec<Row> {
        self.items_in_db()
            .into_iter()
            .filter(|(i, _)| is_view(i.kind))
            .map(|(i, _)| {
                vec![
                    text(rule_oid(i.oid)),
                    text("_RETURN"),
                    text(i.oid),
                    text("1"),
                    text("O"),
                    text("t"),
                    text("<>"),
                    None,
                ]
            })
            .collect()
    }

    /// `pg_depend` for views, materialized views and indexes.
    pub(super) fn pg_depend(&self) -> Vec<Row> {
        let dep = |classid: u32, objid: u32, refobjid: u32, deptype: &str| {
            vec![
                text(classid),
                text(objid),
                text(0),
                text(PG_CLASS_OID),
                text(refobjid),
                text(0),
                text(deptype),
            ]
        };
        let mut rows = Vec::new();
        for (i, _) in self.items_in_db() {
            if is_view(i.kind) {
                let rule = rule_oid(i.oid);
                rows.push(dep(PG_REWRITE_OID, rule, i.oid, "i"));
                for r in &i.references {
                    if let Some(referenced) = self.catalog.item(*r)
                        && (referenced.kind.has_collection() || is_view(referenced.kind))
                    {
                        rows.push(dep(PG_REWRITE_OID, rule, referenced.oid, "n"));
                    }
                }
            }
            if let ItemDetails::Index { on, .. } = &i.details
                && let Some(on) = self.catalog.item(*on)
            {
                rows.push(dep(PG_CLASS_OID, i.oid, on.oid, "a"));
            }
        }
        rows
    }
}

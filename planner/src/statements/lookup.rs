//! Finding the object a statement names by kind (`DROP VIEW v`, `ALTER
//! INDEX i ...`): the item must exist and be of that kind, with Postgres's
//! errors when it is not.

use datafusion::sql::sqlparser::ast::ObjectName;
use freshet_catalog::ItemKind;
use freshet_repr::GlobalId;

use crate::error::{PlanError, Result};
use crate::parser::ObjectKind;
use crate::query::resolve::Resolved;
use crate::statements::context::StatementContext;

/// The catalog kind a statement's object kind names, and how messages
/// name it.
pub(crate) fn expected_kind(kind: ObjectKind) -> (ItemKind, &'static str) {
    match kind {
        ObjectKind::Table => (ItemKind::Table, "a table"),
        ObjectKind::View => (ItemKind::View, "a view"),
        ObjectKind::MaterializedView => (ItemKind::MaterializedView, "a materialized view"),
        ObjectKind::Index => (ItemKind::Index, "an index"),
        ObjectKind::Source => (ItemKind::Source, "a source"),
        ObjectKind::Sink => (ItemKind::Sink, "a sink"),
        ObjectKind::Sequence => (ItemKind::Sequence, "a sequence"),
        ObjectKind::Secret => (ItemKind::Secret, "a secret"),
        ObjectKind::Connection => (ItemKind::Connection, "a connection"),
    }
}

/// Resolve an item that must be of `kind`; `Ok(None)` if it does not exist.
pub(crate) fn lookup_kind(
    cx: &StatementContext,
    name: &ObjectName,
    kind: ObjectKind,
) -> Result<Option<GlobalId>> {
    let resolver = cx.resolver();
    let found = match resolver.lookup_relation(name) {
        Ok(f) => f,
        Err(PlanError::UnknownSchema(_)) | Err(PlanError::UnknownDatabase(_)) => None,
        Err(e) => return Err(e),
    };
    match found {
        None => Ok(None),
        Some(Resolved::System(rel)) => Err(PlanError::Catalog(
            freshet_catalog::CatalogError::SystemObject(rel.qualified_name()),
        )),
        Some(Resolved::Item(id)) => {
            let item = cx.catalog.get_item(id)?;
            let (want, expected) = expected_kind(kind);
            if item.kind != want {
                return Err(PlanError::WrongObjectType {
                    name: item.name.clone(),
                    expected,
                });
            }
            Ok(Some(id))
        }
    }
}

pub(crate) fn missing_message(kind: ObjectKind, name: &ObjectName) -> PlanError {
    PlanError::Catalog(freshet_catalog::CatalogError::UnknownItem {
        kind: expected_kind(kind)
            .1
            .trim_start_matches("a ")
            .trim_start_matches("an ")
            .into(),
        name: name.to_string(),
    })
}

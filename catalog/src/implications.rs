//! What a committed diff implies for storage and compute.
//!
//! The sequencer applies these in order after every DDL, and boot applies
//! them for the whole catalog as one diff from empty; storage and compute
//! learn about maintained objects in no other way.

use freshet_repr::{GlobalId, RelationDesc};

use crate::diff::{CatalogDiff, Change};
use crate::objects::{CatalogObject, Item, ItemKind};
use crate::sources::SourceDetails;

/// One action storage or compute must take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Implication {
    /// Stop a source's ingestion (before its collections go).
    StopIngestion(GlobalId),
    /// Stop a sink export.
    DropSinkExport(GlobalId),
    /// Tear down a materialized view's or index's dataflow.
    DropDataflow(GlobalId),
    /// Unregister a collection and delete its shard.
    DropCollection(GlobalId),
    /// Register a table's (or source's) storage collection.
    CreateTableCollection {
        /// The table.
        id: GlobalId,
        /// Its columns.
        desc: RelationDesc,
    },
    /// Start a source's ingestion, once the collections it writes (its
    /// own, its subsources', its progress relation) exist.
    StartIngestion(GlobalId),
    /// Register a materialized view's output collection.
    CreateMaterializedCollection {
        /// The materialized view.
        id: GlobalId,
        /// Its columns.
        desc: RelationDesc,
    },
    /// Install a materialized view's or index's dataflow.
    InstallDataflow(GlobalId),
    /// Start a sink export.
    ExportSink(GlobalId),
    /// Set the read policy of a table's, materialized view's or index's
    /// collection from its options (`RETAIN HISTORY`, a refresh
    /// schedule's first refresh): at creation and whenever they change.
    InitReadPolicy(GlobalId),
}

/// Whether `item` is a source that ingests (not a subsource or progress
/// relation).
fn is_ingestion(item: &Item) -> bool {
    matches!(item.source_details(), Some(SourceDetails::Ingestion(_)))
}

fn removed_actions(item: &Item, out: &mut [Vec<Implication>; 3]) {
    if is_ingestion(item) {
        out[0].push(Implication::StopIngestion(item.id));
    }
    match item.kind {
        ItemKind::Sink => out[0].push(Implication::DropSinkExport(item.id)),
        ItemKind::MaterializedView | ItemKind::Index => {
            out[1].push(Implication::DropDataflow(item.id))
        }
        _ => {}
    }
    if item.has_collection() {
        out[2].push(Implication::DropCollection(item.id));
    }
}

fn added_actions(item: &Item, out: &mut [Vec<Implication>; 6]) {
    let desc = item.desc.clone().unwrap_or_default();
    match item.kind {
        ItemKind::Table | ItemKind::Source => {
            if item.has_collection() {
                out[0].push(Implication::CreateTableCollection { id: item.id, desc })
            }
            if is_ingestion(item) {
                out[1].push(Implication::StartIngestion(item.id));
            }
        }
        ItemKind::MaterializedView => {
            out[2].push(Implication::CreateMaterializedCollection { id: item.id, desc });
            out[3].push(Implication::InstallDataflow(item.id));
        }
        ItemKind::Index => out[3].push(Implication::InstallDataflow(item.id)),
        ItemKind::Sink => out[4].push(Implication::ExportSink(item.id)),
        ItemKind::View | ItemKind::Sequence | ItemKind::Secret | ItemKind::Connection => {}
    }
    if item.has_collection() || item.kind == ItemKind::Index {
        out[5].push(Implication::InitReadPolicy(item.id));
    }
}

/// Whether replacing `old` by `new` changes what runs (not just names).
fn changes_runtime(old: &Item, new: &Item) -> bool {
    (old.kind.has_collection() || matches!(old.kind, ItemKind::Index | ItemKind::Sink))
        && (old.create_sql != new.create_sql
            || old.desc != new.desc
            || old.kind != new.kind
            || (is_ingestion(old) && old.details != new.details))
}

/// The ordered actions a committed diff implies: removals first
/// (ingestions and sinks, then dataflows, then collections), then additions in the order of
/// ARCHITECTURE.md (table and source collections, source ingestion,
/// materialized-view collections, dataflows, sink exports, read
/// policies). Renames imply
/// nothing: storage and compute know objects only by id.
pub fn implications(diff: &CatalogDiff) -> Vec<Implication> {
    let mut removed: [Vec<Implication>; 3] = Default::default();
    let mut added: [Vec<Implication>; 6] = Default::default();
    for change in &diff.changes {
        match change {
            Change::Removed(CatalogObject::Item(item)) => removed_actions(item, &mut removed),
            Change::Added(CatalogObject::Item(item)) => added_actions(item, &mut added),
            Change::Updated {
                old: CatalogObject::Item(old),
                new: CatalogObject::Item(new),
            } if changes_runtime(old, new) => {
                removed_actions(old, &mut removed);
                added_actions(new, &mut added);
            }
            Change::Updated {
                old: CatalogObject::Item(old),
                new: CatalogObject::Item(new),
            } if old.options != new.options
                && (new.has_collection() || new.kind == ItemKind::Index) =>
            {
                added[5].push(Implication::InitReadPolicy(new.id));
            }
            _ => {}
        }
    }
    removed.into_iter().chain(added).flatten().collect()
}

//! Catalog transactions: operations validated against a working copy of the
//! state, producing the committed diff.

use std::collections::BTreeSet;

use freshet_repr::{GlobalId, RelationDesc};

use crate::diff::{CatalogDiff, Change};
use crate::error::CatalogError;
use crate::objects::{CatalogObject, Database, Item, ItemDetails, ItemKind, ItemOptions, Schema};
use crate::state::CatalogState;

/// The definition of a new item (its id is assigned by the transaction).
#[derive(Clone, Debug)]
pub struct ItemDef {
    /// Schema to create it in.
    pub schema_id: GlobalId,
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: ItemKind,
    /// Canonical definition (references resolved to ids).
    pub create_sql: String,
    /// Columns, for relations.
    pub desc: Option<RelationDesc>,
    /// Direct dependencies.
    pub references: Vec<GlobalId>,
    /// Kind-specific details.
    pub details: ItemDetails,
    /// `WITH (...)` options.
    pub options: Box<ItemOptions>,
}

/// One step of a catalog transaction.
#[derive(Clone, Debug)]
pub enum Op {
    /// Create a database (and its `public` schema).
    CreateDatabase {
        /// Name.
        name: String,
    },
    /// Create a schema.
    CreateSchema {
        /// Database to create it in.
        database_id: GlobalId,
        /// Name.
        name: String,
    },
    /// Create an item.
    CreateItem(ItemDef),
    /// Create a source and the relations it writes (subsources, its
    /// progress relation). Each part is made to reference the source and
    /// its [`SourceDetails`](crate::SourceDetails) to name it, so the
    /// group is one object as far as dependencies go.
    CreateSource {
        /// The source itself.
        source: ItemDef,
        /// Its subsources and progress relation.
        parts: Vec<ItemDef>,
    },
    /// Drop these objects. Anything depending on them must be in the set
    /// too (the caller expands `CASCADE` with
    /// [`CatalogState::transitive_dependents`]).
    Drop(Vec<GlobalId>),
    /// Rename an item within its schema.
    RenameItem {
        /// The item.
        id: GlobalId,
        /// Its new name.
        new_name: String,
    },
    /// Replace an item's definition in place, keeping its id (and so its
    /// dependents): `CREATE OR REPLACE VIEW`.
    ReplaceItem {
        /// The item.
        id: GlobalId,
        /// The new definition (its schema and name must match).
        def: ItemDef,
    },
    /// Replace an item's options (`ALTER ... SET/RESET (...)`).
    SetOptions {
        /// The item.
        id: GlobalId,
        /// Its options from now on.
        options: ItemOptions,
    },
    /// Replace an item's kind-specific details (e.g. record an MV's plan).
    UpdateDetails {
        /// The item.
        id: GlobalId,
        /// New details.
        details: ItemDetails,
    },
    /// Give the objects the following ops create the ids after `after`: a
    /// transaction block's statement reserves its ids when it runs (see
    /// [`crate::Catalog::preview_step`]) and COMMIT creates the objects
    /// under those ids, whatever other sessions committed meanwhile.
    AllocateAfter(u64),
}

/// Apply `ops` to a copy of `state`, returning the new state, the diff and
/// the ids created (in order).
pub(crate) fn transact(
    state: &CatalogState,
    ops: Vec<Op>,
) -> Result<(CatalogState, CatalogDiff, Vec<GlobalId>), CatalogError> {
    let mut next = state.clone();
    let mut diff = CatalogDiff::default();
    let mut created = Vec::new();
    // The highest id allocated: `AllocateAfter` may move allocation below
    // it (into a reserved range), never the state's counter.
    let mut high = next.next_id;
    for op in ops {
        diff.changes.extend(apply_op(&mut next, op, &mut created)?);
        high = high.max(next.next_id);
    }
    next.next_id = high;
    Ok((next, diff, created))
}

/// Plan `op` against `state` and apply it there, returning its changes.
fn apply_op(
    state: &mut CatalogState,
    op: Op,
    created: &mut Vec<GlobalId>,
) -> Result<Vec<Change>, CatalogError> {
    if let Op::CreateSource { source, parts } = op {
        let mut changes = apply_op(state, Op::CreateItem(source), created)?;
        let Some(&source_id) = created.last() else {
            return Err(CatalogError::InvalidDefinition(
                "a source was created without an id".into(),
            ));
        };
        for mut part in parts {
            part.references.push(source_id);
            if let ItemDetails::Source(d) = &mut part.details {
                d.set_source(source_id);
            }
            changes.extend(apply_op(state, Op::CreateItem(part), created)?);
        }
        return Ok(changes);
    }
    let step = CatalogDiff {
        changes: plan_op(state, op, created)?,
    };
    state.apply(&step)?;
    Ok(step.changes)
}

fn plan_op(
    state: &mut CatalogState,
    op: Op,
    created: &mut Vec<GlobalId>,
) -> Result<Vec<Change>, CatalogError> {
    Ok(match op {
        Op::CreateDatabase { name } => {
            if state.database_by_name(&name).is_some() {
                return Err(CatalogError::AlreadyExists {
                    kind: "database",
                    name,
                });
            }
            let db_id = state.allocate_id();
            let schema_id = state.allocate_id();
            created.push(db_id);
            vec![
                Change::Added(CatalogObject::Database(Database {
                    id: db_id,
                    oid: CatalogState::oid_for(db_id),
                    name,
                })),
                Change::Added(CatalogObject::Schema(Schema {
                    id: schema_id,
                    oid: CatalogState::oid_for(schema_id),
                    database_id: db_id,
                    name: "public".into(),
                })),
            ]
        }
        Op::CreateSchema { database_id, name } => {
            if state.database(database_id).is_none() {
                return Err(CatalogError::UnknownId(database_id));
            }
            if state.schema_by_name(database_id, &name).is_some() {
                return Err(CatalogError::AlreadyExists {
                    kind: "schema",
                    name,
                });
            }
            let id = state.allocate_id();
            created.push(id);
            vec![Change::Added(CatalogObject::Schema(Schema {
                id,
                oid: CatalogState::oid_for(id),
                database_id,
                name,
            }))]
        }
        Op::CreateItem(def) => {
            if state.item_by_name(def.schema_id, &def.name).is_some() {
                return Err(CatalogError::AlreadyExists {
                    kind: "relation",
                    name: def.name,
                });
            }
            let id = state.allocate_id();
            created.push(id);
            vec![Change::Added(CatalogObject::Item(item_from_def(id, def)))]
        }
        Op::CreateSource { .. } => {
            return Err(CatalogError::InvalidDefinition(
                "a source group is created by apply_op".into(),
            ));
        }
        Op::Drop(ids) => {
            let set: BTreeSet<GlobalId> = ids.iter().copied().collect();
            for id in &set {
                for dep in state.dependents(*id) {
                    if !set.contains(&dep) {
                        return Err(CatalogError::DependentObjects {
                            what: state.describe(*id),
                            detail: format!(
                                "{} depends on {}",
                                state.describe(dep),
                                state.describe(*id)
                            ),
                        });
                    }
                }
            }
            // Dependents before what they depend on: items (newest first,
            // then by references), schemas, databases.
            let mut order: Vec<GlobalId> = Vec::new();
            let mut done = BTreeSet::new();
            fn visit(
                state: &CatalogState,
                id: GlobalId,
                set: &BTreeSet<GlobalId>,
                done: &mut BTreeSet<GlobalId>,
                order: &mut Vec<GlobalId>,
            ) {
                if !done.insert(id) {
                    return;
                }
                for dep in state.dependents(id) {
                    if set.contains(&dep) {
                        visit(state, dep, set, done, order);
                    }
                }
                order.push(id);
            }
            for id in &set {
                visit(state, *id, &set, &mut done, &mut order);
            }
            let mut changes = Vec::new();
            for id in order {
                let obj = if let Some(i) = state.item(id) {
                    CatalogObject::Item(i.clone())
                } else if let Some(s) = state.schema(id) {
                    CatalogObject::Schema(s.clone())
                } else if let Some(d) = state.database(id) {
                    CatalogObject::Database(d.clone())
                } else {
                    return Err(CatalogError::UnknownId(id));
                };
                changes.push(Change::Removed(obj));
            }
            changes
        }
        Op::RenameItem { id, new_name } => {
            let old = state.get_item(id)?.clone();
            if old.name == new_name {
                return Ok(vec![]);
            }
            if state.item_by_name(old.schema_id, &new_name).is_some() {
                return Err(CatalogError::AlreadyExists {
                    kind: "relation",
                    name: new_name,
                });
            }
            let mut new = old.clone();
            new.name = new_name;
            vec![Change::Updated {
                old: CatalogObject::Item(old),
                new: CatalogObject::Item(new),
            }]
        }
        Op::ReplaceItem { id, def } => {
            let old = state.get_item(id)?.clone();
            if def.schema_id != old.schema_id || def.name != old.name || def.kind != old.kind {
                return Err(CatalogError::InvalidDefinition(format!(
                    "cannot replace {} with a different kind of object",
                    state.describe(id)
                )));
            }
            if state.transitive_references(id).contains(&id)
                || def
                    .references
                    .iter()
                    .any(|r| *r == id || state.transitive_references(*r).contains(&id))
            {
                return Err(CatalogError::InvalidDefinition(format!(
                    "{} would depend on itself",
                    state.describe(id)
                )));
            }
            if let Some(d) = state.transitive_dependents(&[id]).into_iter().find(|d| {
                state
                    .item(*d)
                    .is_some_and(|i| matches!(i.kind, ItemKind::MaterializedView | ItemKind::Index))
            }) {
                return Err(CatalogError::MaintainedDependent {
                    what: state.describe(id),
                    dependent: state.describe(d),
                });
            }
            let new = item_from_def(id, def);
            vec![Change::Updated {
                old: CatalogObject::Item(old),
                new: CatalogObject::Item(new),
            }]
        }
        Op::SetOptions { id, options } => {
            let old = state.get_item(id)?.clone();
            let mut new = old.clone();
            new.options = Box::new(options);
            vec![Change::Updated {
                old: CatalogObject::Item(old),
                new: CatalogObject::Item(new),
            }]
        }
        Op::AllocateAfter(after) => {
            state.next_id = after;
            Vec::new()
        }
        Op::UpdateDetails { id, details } => {
            let old = state.get_item(id)?.clone();
            let mut new = old.clone();
            new.details = details;
            vec![Change::Updated {
                old: CatalogObject::Item(old),
                new: CatalogObject::Item(new),
            }]
        }
    })
}

fn item_from_def(id: GlobalId, def: ItemDef) -> Item {
    Item {
        id,
        oid: CatalogState::oid_for(id),
        schema_id: def.schema_id,
        name: def.name,
        kind: def.kind,
        create_sql: def.create_sql,
        desc: def.desc,
        references: def.references,
        details: def.details,
        options: def.options,
    }
}

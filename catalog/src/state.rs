//! An immutable view of the catalog at one version, with name resolution
//! and dependency queries.

use std::collections::{BTreeMap, BTreeSet};

use freshet_repr::GlobalId;

use crate::diff::{CatalogDiff, Change};
use crate::error::CatalogError;
use crate::objects::{CatalogObject, Database, Item, Schema};

/// Postgres's first OID for user objects; Freshet's OIDs start here.
pub const FIRST_USER_OID: u32 = 16384;

/// The catalog's contents at one version.
#[derive(Clone, Debug, Default)]
pub struct CatalogState {
    databases: BTreeMap<GlobalId, Database>,
    schemas: BTreeMap<GlobalId, Schema>,
    items: BTreeMap<GlobalId, Item>,
    database_by_name: BTreeMap<String, GlobalId>,
    schema_by_name: BTreeMap<(GlobalId, String), GlobalId>,
    item_by_name: BTreeMap<(GlobalId, String), GlobalId>,
    pub(crate) next_id: u64,
}

impl CatalogState {
    /// The database with this name.
    pub fn database_by_name(&self, name: &str) -> Option<&Database> {
        self.database_by_name
            .get(name)
            .and_then(|id| self.databases.get(id))
    }

    /// The schema with this name in a database.
    pub fn schema_by_name(&self, database_id: GlobalId, name: &str) -> Option<&Schema> {
        self.schema_by_name
            .get(&(database_id, name.to_string()))
            .and_then(|id| self.schemas.get(id))
    }

    /// The item with this name in a schema.
    pub fn item_by_name(&self, schema_id: GlobalId, name: &str) -> Option<&Item> {
        self.item_by_name
            .get(&(schema_id, name.to_string()))
            .and_then(|id| self.items.get(id))
    }

    /// A database by id.
    pub fn database(&self, id: GlobalId) -> Option<&Database> {
        self.databases.get(&id)
    }

    /// A schema by id.
    pub fn schema(&self, id: GlobalId) -> Option<&Schema> {
        self.schemas.get(&id)
    }

    /// An item by id.
    pub fn item(&self, id: GlobalId) -> Option<&Item> {
        self.items.get(&id)
    }

    /// An item by id, or an error naming the id.
    pub fn get_item(&self, id: GlobalId) -> Result<&Item, CatalogError> {
        self.items.get(&id).ok_or(CatalogError::UnknownId(id))
    }

    /// Every database.
    pub fn databases(&self) -> impl Iterator<Item = &Database> {
        self.databases.values()
    }

    /// Every schema.
    pub fn schemas(&self) -> impl Iterator<Item = &Schema> {
        self.schemas.values()
    }

    /// Every item.
    pub fn items(&self) -> impl Iterator<Item = &Item> {
        self.items.values()
    }

    /// An item's `(database, schema, item)` names.
    pub fn full_name(&self, id: GlobalId) -> Option<(String, String, String)> {
        let item = self.items.get(&id)?;
        let schema = self.schemas.get(&item.schema_id)?;
        let db = self.databases.get(&schema.database_id)?;
        Some((db.name.clone(), schema.name.clone(), item.name.clone()))
    }

    /// The indexes on item `id` (an object's indexes go wherever it goes).
    pub fn indexes_on(&self, id: GlobalId) -> impl Iterator<Item = &Item> {
        self.items.values().filter(
            move |i| matches!(&i.details, crate::ItemDetails::Index { on, .. } if *on == id),
        )
    }

    /// Objects that depend directly on `id`: items referencing an item,
    /// items in a schema, schemas in a database.
    pub fn dependents(&self, id: GlobalId) -> Vec<GlobalId> {
        if self.databases.contains_key(&id) {
            return self
                .schemas
                .values()
                .filter(|s| s.database_id == id)
                .map(|s| s.id)
                .collect();
        }
        if self.schemas.contains_key(&id) {
            return self
                .items
                .values()
                .filter(|i| i.schema_id == id)
                .map(|i| i.id)
                .collect();
        }
        self.items
            .values()
            .filter(|i| i.references.contains(&id))
            .map(|i| i.id)
            .collect()
    }

    /// `ids` and everything that depends on them, transitively: what a
    /// `DROP ... CASCADE` removes.
    pub fn transitive_dependents(&self, ids: &[GlobalId]) -> BTreeSet<GlobalId> {
        let mut out = BTreeSet::new();
        let mut stack: Vec<GlobalId> = ids.to_vec();
        while let Some(id) = stack.pop() {
            if out.insert(id) {
                stack.extend(self.dependents(id));
            }
        }
        out
    }

    /// Items that `id` reads from, transitively (its inputs through views).
    pub fn transitive_references(&self, id: GlobalId) -> BTreeSet<GlobalId> {
        let mut out = BTreeSet::new();
        let mut stack = vec![id];
        while let Some(id) = stack.pop() {
            if let Some(item) = self.items.get(&id) {
                for r in &item.references {
                    if out.insert(*r) {
                        stack.push(*r);
                    }
                }
            }
        }
        out
    }

    /// The storage collections `id` reads, through views: what must stay
    /// readable for a dataflow that reads `id`.
    pub fn collections_behind(&self, id: GlobalId) -> Vec<GlobalId> {
        self.transitive_references(id)
            .into_iter()
            .filter(|r| self.items.get(r).is_some_and(|i| i.has_collection()))
            .collect()
    }

    /// The relations source `source` writes besides itself: its
    /// subsources and its progress relation (a source group goes
    /// together: created, dropped and retained alike).
    pub fn source_parts(&self, source: GlobalId) -> Vec<&Item> {
        self.items
            .values()
            .filter(|i| i.id != source && i.references.contains(&source))
            .filter(|i| i.source_details().is_some_and(|d| d.source(i.id) == source))
            .collect()
    }

    /// A human description for errors: `table t`, `view public.v`.
    pub fn describe(&self, id: GlobalId) -> String {
        if let Some(d) = self.databases.get(&id) {
            return format!("database {}", d.name);
        }
        if let Some(s) = self.schemas.get(&id) {
            return format!("schema {}", s.name);
        }
        match self.items.get(&id) {
            Some(i) => format!("{} {}", i.kind.name(), i.name),
            None => id.to_string(),
        }
    }

    /// The whole catalog as one diff from empty, dependencies first: what
    /// boot applies through `implications`.
    pub fn as_diff_from_empty(&self) -> CatalogDiff {
        let mut changes: Vec<Change> = Vec::new();
        changes.extend(
            self.databases
                .values()
                .map(|d| Change::Added(CatalogObject::Database(d.clone()))),
        );
        changes.extend(
            self.schemas
                .values()
                .map(|s| Change::Added(CatalogObject::Schema(s.clone()))),
        );
        // Items in dependency order (a replaced view may reference newer ids).
        let mut done: BTreeSet<GlobalId> = BTreeSet::new();
        fn visit(
            state: &CatalogState,
            id: GlobalId,
            done: &mut BTreeSet<GlobalId>,
            out: &mut Vec<Change>,
        ) {
            if !done.insert(id) {
                return;
            }
            if let Some(item) = state.items.get(&id) {
                for r in &item.references {
                    visit(state, *r, done, out);
                }
                out.push(Change::Added(CatalogObject::Item(item.clone())));
            }
        }
        for id in self.items.keys() {
            visit(self, *id, &mut done, &mut changes);
        }
        CatalogDiff { changes }
    }

    /// Apply a committed diff.
    pub(crate) fn apply(&mut self, diff: &CatalogDiff) -> Result<(), CatalogError> {
        for change in &diff.changes {
            match change {
                Change::Added(obj) => self.insert(obj.clone())?,
                Change::Removed(obj) => self.remove(obj.id())?,
                Change::Updated { old, new } => {
                    self.remove(old.id())?;
                    self.insert(new.clone())?;
                }
            }
        }
        Ok(())
    }

    fn insert(&mut self, obj: CatalogObject) -> Result<(), CatalogError> {
        match obj {
            CatalogObject::Database(d) => {
                if self.database_by_name.contains_key(&d.name) {
                    return Err(CatalogError::AlreadyExists {
                        kind: "database",
                        name: d.name,
                    });
                }
                self.database_by_name.insert(d.name.clone(), d.id);
                self.databases.insert(d.id, d);
            }
            CatalogObject::Schema(s) => {
                if !self.databases.contains_key(&s.database_id) {
                    return Err(CatalogError::UnknownId(s.database_id));
                }
                let key = (s.database_id, s.name.clone());
                if self.schema_by_name.contains_key(&key) {
                    return Err(CatalogError::AlreadyExists {
                        kind: "schema",
                        name: s.name,
                    });
                }
                self.schema_by_name.insert(key, s.id);
                self.schemas.insert(s.id, s);
            }
            CatalogObject::Item(i) => {
                if !self.schemas.contains_key(&i.schema_id) {
                    return Err(CatalogError::UnknownId(i.schema_id));
                }
                for r in &i.references {
                    if !self.items.contains_key(r) {
                        return Err(CatalogError::UnknownId(*r));
                    }
                }
                let key = (i.schema_id, i.name.clone());
                if self.item_by_name.contains_key(&key) {
                    return Err(CatalogError::AlreadyExists {
                        kind: "relation",
                        name: i.name,
                    });
                }
                self.item_by_name.insert(key, i.id);
                self.items.insert(i.id, i);
            }
        }
        Ok(())
    }

    fn remove(&mut self, id: GlobalId) -> Result<(), CatalogError> {
        if let Some(d) = self.databases.remove(&id) {
            self.database_by_name.remove(&d.name);
        } else if let Some(s) = self.schemas.remove(&id) {
            self.schema_by_name.remove(&(s.database_id, s.name));
        } else if let Some(i) = self.items.remove(&id) {
            self.item_by_name.remove(&(i.schema_id, i.name));
        } else {
            return Err(CatalogError::UnknownId(id));
        }
        Ok(())
    }

    /// Allocate a fresh user id.
    pub(crate) fn allocate_id(&mut self) -> GlobalId {
        self.next_id += 1;
        GlobalId::User(self.next_id)
    }

    /// The OID for an id.
    pub(crate) fn oid_for(id: GlobalId) -> u32 {
        FIRST_USER_OID + id.inner() as u32
    }
}

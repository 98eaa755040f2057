//! Primary keys and `UNIQUE` constraints: the key values each keyed
//! table holds, checked by every commit that writes the table.
//!
//! A table's key set is built from its contents the first time a commit
//! writes it (so boot pays nothing for tables nobody writes) and kept in
//! step with every commit after that. A commit locks the key sets of the
//! keys it writes (in order), checks that no key would be held by two rows
//! once its retractions and insertions apply, reserves the keys it adds,
//! and unlocks, so concurrent commits still share a group commit; once
//! storage has answered, it drops the keys it removed (or, if the commit
//! failed, its reservations). The sequencer runs each commit in a task of
//! its own, so a client that goes away mid-commit cannot leave a key set
//! behind storage.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, Int64Array, RecordBatch};
use arrow::row::{RowConverter, SortField};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use freshet_repr::sqlstate;
use freshet_repr::{GlobalId, Timestamp};
use freshet_storage::{Storage, TableWrite};

use crate::error::{AdapterError, Result};

/// What a commit needs to know about one key of a table it writes.
#[derive(Debug, Clone)]
pub struct KeySpec {
    /// The table.
    pub id: GlobalId,
    /// Which of the table's keys (0: the primary key, 1..: `UNIQUE`s).
    pub slot: usize,
    /// The table's name, for messages.
    pub table: String,
    /// The constraint's name (`<table>_pkey`, `<table>_<cols>_key`).
    pub constraint: String,
    /// Rows whose key has a NULL in it conflict with nothing (`UNIQUE`
    /// without `NULLS NOT DISTINCT`).
    pub nulls_distinct: bool,
    /// Key column positions.
    pub columns: Vec<usize>,
    /// Key column names, for the error's detail.
    pub names: Vec<String>,
    /// Key column types (as the table's batches carry them).
    pub types: Vec<arrow::datatypes::DataType>,
}

/// A key set, not loaded until a commit first needs it.
type SharedKeySet = Arc<tokio::sync::Mutex<Option<KeySet>>>;

/// The key sets of keyed tables, by table and key.
#[derive(Debug, Default)]
pub struct KeySets {
    tables: parking_lot::Mutex<HashMap<(GlobalId, usize), SharedKeySet>>,
    /// Per table, shared by every commit that writes it (from before it
    /// reads the table's keys off the catalog until storage answers) and
    /// held alone while a key is added to the table, so no commit checked
    /// against the keys before the change lands after the rows were
    /// checked against the new key.
    gates: parking_lot::Mutex<HashMap<GlobalId, Arc<tokio::sync::RwLock<()>>>>,
}

/// A commit's share of the gates of the tables it writes.
pub type WriteGates = Vec<tokio::sync::OwnedRwLockReadGuard<()>>;

/// One table's key values, in Arrow's row format.
struct KeySet {
    converter: RowConverter,
    /// How many columns the key has.
    arity: usize,
    keys: HashSet<Key, KeyHasher>,
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySet")
            .field("keys", &self.keys.len())
            .finish()
    }
}

impl KeySets {
    /// Forget a dropped table's keys.
    pub fn forget(&self, id: GlobalId) {
        self.tables.lock().retain(|(table, _), _| *table != id);
    }

    fn gate(&self, id: GlobalId) -> Arc<tokio::sync::RwLock<()>> {
        Arc::clone(self.gates.lock().entry(id).or_default())
    }

    /// Enter the gates of `tables` (taken in id order, so two commits
    /// never wait on each other).
    pub async fn enter(&self, tables: impl IntoIterator<Item = GlobalId>) -> WriteGates {
        let ids: std::collections::BTreeSet<GlobalId> = tables.into_iter().collect();
        let mut guards = Vec::with_capacity(ids.len());
        for id in ids {
            guards.push(self.gate(id).read_owned().await);
        }
        guards
    }

    /// Wait for the commits writing `table` to finish and keep new ones
    /// out while the guard lives.
    pub async fn exclude_writes(&self, table: GlobalId) -> tokio::sync::OwnedRwLockWriteGuard<()> {
        self.gate(table).write_owned().await
    }

    /// Check the rows `table` holds against a key it is about to get
    /// (23505 if two rows share a key value, 23502 if a primary key
    /// column holds a NULL) and keep the key values for the commits after
    /// it. The caller excludes writes to the table meanwhile.
    pub fn install(&self, storage: &Storage, spec: &KeySpec) -> Result<()> {
        let set = KeySet::load(storage, spec, true)?;
        *self.key_set(spec).try_lock().map_err(|_| {
            AdapterError::Internal(format!("the keys of {} are in use", spec.table))
        })? = Some(set);
        Ok(())
    }

    /// Forget one key's values (a key whose addition did not commit).
    pub fn forget_key(&self, id: GlobalId, slot: usize) {
        self.tables.lock().remove(&(id, slot));
    }

    fn key_set(&self, spec: &KeySpec) -> SharedKeySet {
        Arc::clone(self.tables.lock().entry((spec.id, spec.slot)).or_default())
    }

    /// Commit `writes`, first checking the keys in `specs` (those of the
    /// tables they write), if no table in `reads` changed after the time
    /// paired with it. Fails with 23505 if a key would be held by two
    /// rows; nothing is committed then. The caller runs this to the end
    /// (in a task of its own): stopping between the commit and the release
    /// of its reservations would leave the key sets behind storage.
    pub async fn commit(
        &self,
        storage: &Storage,
        specs: Vec<KeySpec>,
        writes: Vec<TableWrite>,
        reads: Vec<(GlobalId, Timestamp)>,
    ) -> Result<Timestamp> {
        if specs.is_empty() {
            return Ok(storage.commit_if_unchanged(writes, reads).await?);
        }
        self.check_and_commit(storage, specs, writes, reads).await
    }

    async fn check_and_commit(
        &self,
        storage: &Storage,
        mut specs: Vec<KeySpec>,
        writes: Vec<TableWrite>,
        reads: Vec<(GlobalId, Timestamp)>,
    ) -> Result<Timestamp> {
        specs.sort_by_key(|s| (s.id, s.slot));
        let sets: Vec<SharedKeySet> = specs.iter().map(|s| self.key_set(s)).collect();
        let mut guards = Vec::with_capacity(sets.len());
        for set in &sets {
            guards.push(Arc::clone(set).lock_owned().await);
        }
        let mut changes = Vec::with_capacity(specs.len());
        for (spec, guard) in specs.iter().zip(guards.iter_mut()) {
            let checked = match &mut **guard {
                Some(set) => set.check(storage, spec, &writes),
                None => KeySet::load(storage, spec, false).and_then(|mut set| {
                    let change = set.check(storage, spec, &writes);
                    **guard = Some(set);
                    change
                }),
            };
            match checked {
                Ok(change) => changes.push(change),
                Err(e) => {
                    // Keys the keys checked before this one reserved.
                    for (guard, change) in guards.iter_mut().zip(&changes) {
                        if let Some(set) = guard.as_mut() {
                            set.unreserve(change);
                        }
                    }
                    return Err(e);
                }
            }
        }
        // Reserve the added keys and let other commits check while this one
        // is in the group commit. A key this commit removes stays held until
        // it is durable: a commit checked meanwhile is one that ran before
        // this one, and either order is a valid history of the two.
        for (guard, change) in guards.iter_mut().zip(&changes) {
            if let Some(set) = guard.as_mut() {
                set.keys.extend(change.added.iter().cloned());
            }
        }
        drop(guards);
        let result = storage.commit_if_unchanged(writes, reads).await;
        for (set, change) in sets.iter().zip(changes) {
            let mut guard = set.lock().await;
            if let Some(set) = guard.as_mut() {
                if result.is_ok() {
                    for key in &change.removed {
                        set.keys.remove(key);
                    }
                } else {
                    set.unreserve(&change);
                }
            }
        }
        Ok(result?)
    }
}

/// A key value in Arrow's row format, inline up to 16 bytes (an integer
/// key, or two, takes 5 bytes per column): a table's key set holds
/// millions of them, and a heap allocation each cost more than the key.
type Key = smallvec::SmallVec<[u8; 16]>;

/// Hashing for key sets: seeded per process (keys come from clients), and
/// several times cheaper than SipHash on short keys.
type KeyHasher = foldhash::fast::RandomState;

/// What a commit does to one key: the change of how many rows hold it, and
/// (write, row) of its first insertion.
#[derive(Default)]
struct NetChange {
    delta: i64,
    first_insert: Option<(usize, usize)>,
}

/// The keys a commit removes from and adds to one table.
#[derive(Default)]
struct KeyChange {
    removed: Vec<Key>,
    /// Keys to reserve once every key of the commit is checked.
    added: Vec<Key>,
    /// Keys the check already reserved (the insert-only check adds them
    /// as it goes), as it encoded them: taken out again if the commit
    /// fails or another of its keys does not pass.
    reserved: Vec<arrow::row::Rows>,
}

impl KeySet {
    /// Take the keys `change` reserved out of the set again.
    fn unreserve(&mut self, change: &KeyChange) {
        for key in &change.added {
            self.keys.remove(key);
        }
        for rows in &change.reserved {
            for row in rows.iter() {
                self.keys.remove(row.as_ref());
            }
        }
    }
}

impl KeySet {
    /// The table's keys as of now (every earlier commit to it is visible:
    /// they all ran under the lock the caller holds).
    ///
    /// `new`: the key is one the table does not have yet (`ALTER TABLE
    /// ... ADD PRIMARY KEY`), so a NULL or a duplicate is the user's
    /// error, said as PostgreSQL says it when it builds the key's index;
    /// otherwise a duplicate is a bug.
    fn load(storage: &Storage, spec: &KeySpec, new: bool) -> Result<KeySet> {
        let fields: Vec<SortField> = spec.types.iter().cloned().map(SortField::new).collect();
        let mut set = KeySet {
            converter: RowConverter::new(fields)
                .map_err(|e| AdapterError::Internal(format!("key encoding: {e}")))?,
            arity: spec.columns.len(),
            keys: HashSet::default(),
        };
        for batch in storage.snapshot(spec.id, storage.read_ts())? {
            let batch = key_columns(spec, &batch, false)?;
            if new
                && spec.slot == 0
                && let Some(name) = spec
                    .names
                    .iter()
                    .enumerate()
                    .find(|(i, _)| batch.column(*i).null_count() > 0)
                    .map(|(_, n)| n)
            {
                return Err(AdapterError::Data {
                    code: sqlstate::NOT_NULL_VIOLATION,
                    message: format!(
                        "column \"{name}\" of relation \"{}\" contains null values",
                        spec.table
                    ),
                    detail: None,
                });
            }
            let rows = set.convert(&batch)?;
            for (r, row) in rows.iter().enumerate() {
                if exempt(spec, &batch, r) || set.keys.insert(Key::from_slice(row.as_ref())) {
                    continue;
                }
                return Err(if new {
                    AdapterError::Data {
                        code: sqlstate::UNIQUE_VIOLATION,
                        message: format!("could not create unique index \"{}\"", spec.constraint),
                        detail: Some(key_detail(spec, &batch, r, "is duplicated")),
                    }
                } else {
                    AdapterError::Internal(format!(
                        "table {} already holds a duplicate key",
                        spec.table
                    ))
                });
            }
        }
        Ok(set)
    }

    /// The key values of a batch of [`key_columns`].
    fn convert(&self, keys: &RecordBatch) -> Result<arrow::row::Rows> {
        let arrays: Vec<_> = keys.columns()[..self.arity].to_vec();
        self.converter
            .convert_columns(&arrays)
            .map_err(|e| AdapterError::Internal(format!("encoding keys: {e}")))
    }

    /// The change `writes` make to this table's keys, or 23505 if a key
    /// would be held twice. Parts a write staged are read back (only
    /// their key columns are kept).
    fn check(
        &mut self,
        storage: &Storage,
        spec: &KeySpec,
        writes: &[TableWrite],
    ) -> Result<KeyChange> {
        if let Some(change) = self.check_inserts(storage, spec, writes)? {
            return Ok(change);
        }
        let mut sources = Vec::new();
        for write in writes.iter().filter(|w| w.id == spec.id) {
            sources.push(key_columns(spec, &write.updates, true)?);
            for part in &write.staged {
                sources.push(storage.read_staged_columns(part, &spec.columns)?);
            }
        }
        // Net multiplicity change per key, with where its first insertion
        // is (for the error's detail).
        let mut net: HashMap<Key, NetChange, KeyHasher> = HashMap::default();
        for (w, batch) in sources.iter().enumerate() {
            let diffs = batch
                .column(batch.num_columns() - 1)
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or_else(|| AdapterError::Internal("a table write without diffs".into()))?;
            if spec.slot == 0 {
                null_key_check(spec, batch, diffs)?;
            }
            let rows = self.convert(batch)?;
            for (r, row) in rows.iter().enumerate() {
                if exempt(spec, batch, r) {
                    continue;
                }
                let entry = net.entry(Key::from_slice(row.as_ref())).or_default();
                entry.delta += diffs.value(r);
                if diffs.value(r) > 0 && entry.first_insert.is_none() {
                    entry.first_insert = Some((w, r));
                }
            }
        }
        let mut change = KeyChange::default();
        for (
            key,
            NetChange {
                delta,
                first_insert,
            },
        ) in net
        {
            let held = i64::from(self.keys.contains(&key));
            let after = held + delta;
            if after > 1 {
                let detail = first_insert
                    .map(|(w, r)| key_detail(spec, &sources[w], r, "already exists"))
                    .unwrap_or_default();
                return Err(duplicate_key(spec, detail));
            }
            match (held, after) {
                (1, 0) => change.removed.push(key),
                (0, 1) => change.added.push(key),
                _ => {}
            }
        }
        Ok(change)
    }

    /// [`KeySet::check`] for writes that only insert, one row each (a
    /// `COPY`, an `INSERT`): every key must be new to the table and to the
    /// commit, so each is added to the set as it is checked (one hash
    /// insertion per key, no set of the commit's keys beside it: for a
    /// load of millions of rows that was most of the time and memory the
    /// check took), and a staged part is read back by its key columns
    /// alone. On a duplicate the keys added so far are taken out again.
    /// `None` when a write also deletes or repeats a row.
    fn check_inserts(
        &mut self,
        storage: &Storage,
        spec: &KeySpec,
        writes: &[TableWrite],
    ) -> Result<Option<KeyChange>> {
        let ours: Vec<&TableWrite> = writes.iter().filter(|w| w.id == spec.id).collect();
        // Decide before raising any error: a delete later in the commit
        // may free a key an insert takes. (Staged parts hold a COPY's
        // rows, inserts only; one that did not would fall back below.)
        for write in &ours {
            let n = write.updates.num_columns();
            let inserts_only = n > 0
                && write
                    .updates
                    .column(n - 1)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .is_some_and(|d| d.values().iter().all(|d| *d == 1));
            if !inserts_only && write.updates.num_rows() > 0 {
                return Ok(None);
            }
        }
        let mut change = KeyChange::default();
        let mut visit = |set: &mut KeySet, batch: RecordBatch| -> Result<bool> {
            let diffs = batch
                .column(batch.num_columns() - 1)
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or_else(|| AdapterError::Internal("a table write without diffs".into()))?;
            if diffs.values().iter().any(|d| *d != 1) {
                return Ok(false);
            }
            if spec.slot == 0 {
                null_key_check(spec, &batch, diffs)?;
            }
            let rows = set.convert(&batch)?;
            set.keys.reserve(rows.num_rows());
            for (r, row) in rows.iter().enumerate() {
                if !exempt(spec, &batch, r) && !set.keys.insert(Key::from_slice(row.as_ref())) {
                    // This batch's keys before the duplicate were added.
                    for row in rows.iter().take(r) {
                        set.keys.remove(row.as_ref());
                    }
                    return Err(duplicate_key(
                        spec,
                        key_detail(spec, &batch, r, "already exists"),
                    ));
                }
            }
            change.reserved.push(rows);
            Ok(true)
        };
        let mut visit_all = |set: &mut KeySet| -> Result<bool> {
            for write in &ours {
                if !visit(set, key_columns(spec, &write.updates, true)?)? {
                    return Ok(false);
                }
                for part in &write.staged {
                    if !visit(set, storage.read_staged_columns(part, &spec.columns)?)? {
                        return Ok(false);
                    }
                }
            }
            Ok(true)
        };
        let outcome = visit_all(self);
        match outcome {
            Ok(true) => Ok(Some(change)),
            other => {
                self.unreserve(&change);
                other.map(|_| None)
            }
        }
    }
}

/// 23502 if a row `batch` inserts has a NULL in a primary-key column:
/// primary-key columns are NOT NULL. (A key added to a table that held
/// rows leaves the columns' declared nullability as it was, so this is
/// where the rule holds for it.)
fn null_key_check(spec: &KeySpec, batch: &RecordBatch, diffs: &Int64Array) -> Result<()> {
    for (i, name) in spec.names.iter().enumerate() {
        let column = batch.column(i);
        if column.null_count() == 0 {
            continue;
        }
        if (0..batch.num_rows()).any(|r| column.is_null(r) && diffs.value(r) > 0) {
            return Err(AdapterError::Data {
                code: sqlstate::NOT_NULL_VIOLATION,
                message: format!(
                    "null value in column \"{name}\" of relation \"{}\" violates not-null constraint",
                    spec.table
                ),
                detail: None,
            });
        }
    }
    Ok(())
}

/// Whether row `row` of `batch` is outside the key: a NULL in a key whose
/// NULLs are distinct.
fn exempt(spec: &KeySpec, batch: &RecordBatch, row: usize) -> bool {
    spec.nulls_distinct && (0..spec.columns.len()).any(|i| batch.column(i).is_null(row))
}

/// The key columns of `batch` (rows of the table, or a table write when
/// `with_diff`, whose diff column is kept last): what the checks below
/// read, by position `0..` the key's arity.
fn key_columns(spec: &KeySpec, batch: &RecordBatch, with_diff: bool) -> Result<RecordBatch> {
    let mut columns: Vec<usize> = spec.columns.clone();
    if with_diff {
        columns.push(batch.num_columns().saturating_sub(1));
    }
    batch
        .project(&columns)
        .map_err(|e| AdapterError::Internal(format!("key columns: {e}")))
}

/// 23505 for a key of `spec`'s constraint held twice, as PostgreSQL
/// words it.
fn duplicate_key(spec: &KeySpec, detail: String) -> AdapterError {
    AdapterError::Data {
        code: sqlstate::UNIQUE_VIOLATION,
        message: format!(
            "duplicate key value violates unique constraint \"{}\"",
            spec.constraint
        ),
        detail: Some(detail),
    }
}

/// `Key (a, b)=(1, x) already exists.` (or `is duplicated.`), as
/// PostgreSQL says it.
fn key_detail(spec: &KeySpec, batch: &RecordBatch, row: usize, what: &str) -> String {
    let options = FormatOptions::default().with_null("null");
    let values: Vec<String> = (0..spec.columns.len())
        .map(|i| {
            ArrayFormatter::try_new(batch.column(i).as_ref(), &options)
                .map(|f| f.value(row).to_string())
                .unwrap_or_else(|_| "?".into())
        })
        .collect();
    format!(
        "Key ({})=({}) {what}.",
        spec.names.join(", "),
        values.join(", ")
    )
}

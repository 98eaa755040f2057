//! The rows of tables with a primary key, by key: how an `UPDATE` or
//! `DELETE ... WHERE <primary key> = ...` finds its row without reading
//! the table.
//!
//! A table's rows by key are built the first time a keyed write needs
//! them (from a snapshot, so boot and tables nobody updates by key pay
//! nothing) and then follow the table's committed updates through a
//! storage listen, in commit order: a lookup first applies everything
//! queued, so it sees every commit that has been acknowledged. A task
//! applies the queue meanwhile once it grows, so an idle map holds no
//! backlog. Rows are kept in Arrow's row format (the key's encoding maps
//! to the whole row's).
//!
//! A keyed write holds its key's stripe lock from lookup to the end of its
//! commit, so two writes of one key run one after the other, and each sees
//! the other's row; writes that read the table another way (the general
//! path, a transaction block's COMMIT) hold the table's write lock, which
//! keyed writes share. Writes that only insert take neither: a new key is
//! the key sets' to check (`crate::keys`), and an insert that has not
//! committed when a keyed write looks its key up is ordered after it.
//!
//! The map holds the table's rows once more, in memory. That is the price
//! of reading one row by key while table shards are read whole; once
//! shards are read by part through a bounded cache, this becomes a lookup
//! in an index of the table's parts.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, UInt64Array};
use arrow::compute::{concat_batches, sort_to_indices, take_record_batch};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, SortField};
use datafusion::common::ScalarValue;
use freshet_repr::GlobalId;
use freshet_storage::{Listen, ListenEvent, Storage};

use crate::error::{AdapterError, Result};

/// How many stripe locks each table's keys hash to.
const STRIPES: usize = 256;

/// How many events may wait in a table's listen before its task applies
/// them.
const BACKLOG: usize = 1024;

/// The rows by key of every table a keyed write has touched.
#[derive(Debug, Default)]
pub struct KeyedRows {
    tables: parking_lot::Mutex<HashMap<GlobalId, Arc<TableRows>>>,
}

impl KeyedRows {
    /// `table`'s rows by the key on `key_columns` (built at its first
    /// lookup).
    pub fn table(&self, table: GlobalId, key_columns: &[usize]) -> Arc<TableRows> {
        let mut tables = self.tables.lock();
        match tables.get(&table) {
            Some(rows) if rows.key_columns == key_columns => Arc::clone(rows),
            _ => {
                let rows = Arc::new(TableRows::new(table, key_columns.to_vec()));
                tables.insert(table, Arc::clone(&rows));
                rows
            }
        }
    }

    /// Forget a dropped table's rows.
    pub fn forget(&self, table: GlobalId) {
        self.tables.lock().remove(&table);
    }
}

/// One table's rows by key.
pub struct TableRows {
    table: GlobalId,
    key_columns: Vec<usize>,
    stripes: Vec<Arc<tokio::sync::Mutex<()>>>,
    state: tokio::sync::OnceCell<Arc<parking_lot::Mutex<RowsState>>>,
}

impl std::fmt::Debug for TableRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableRows")
            .field("table", &self.table)
            .field("key_columns", &self.key_columns)
            .finish_non_exhaustive()
    }
}

/// The map and the listen that keeps it current.
struct RowsState {
    table: GlobalId,
    keys: RowConverter,
    rows: RowConverter,
    schema: SchemaRef,
    key_columns: Vec<usize>,
    by_key: HashMap<Box<[u8]>, Box<[u8]>>,
    listen: Listen,
    queued: Arc<AtomicUsize>,
    /// Wakes the task applying the backlog (at drop, to end it).
    wake: Arc<tokio::sync::Notify>,
    /// Set when the table's updates stopped (it was dropped) or did not
    /// fit the map (a key held twice): lookups answer
    /// [`Found::Unavailable`] and the map is built again.
    broken: Option<String>,
}

impl TableRows {
    fn new(table: GlobalId, key_columns: Vec<usize>) -> Self {
        TableRows {
            table,
            key_columns,
            stripes: (0..STRIPES).map(|_| Arc::default()).collect(),
            state: tokio::sync::OnceCell::new(),
        }
    }

    /// The lock of `key`'s stripe: held from a keyed write's lookup to the
    /// end of its commit.
    pub async fn lock_key(&self, key: &[ScalarValue]) -> tokio::sync::OwnedMutexGuard<()> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut hasher);
        let stripe = (hasher.finish() % STRIPES as u64) as usize;
        Arc::clone(&self.stripes[stripe]).lock_owned().await
    }

    /// The row whose key is `key` (values in key order, as the key
    /// columns' types), as a one-row batch of the table's columns; every
    /// commit acknowledged before the call is reflected.
    pub async fn get(&self, storage: &Arc<Storage>, key: &[ScalarValue]) -> Result<Found> {
        let state = self
            .state
            .get_or_try_init(|| async {
                let storage = Arc::clone(storage);
                let (table, key_columns) = (self.table, self.key_columns.clone());
                let state = tokio::task::spawn_blocking(move || {
                    RowsState::build(&storage, table, key_columns)
                })
                .await
                .map_err(|e| AdapterError::Internal(format!("building rows by key: {e}")))??;
                Ok::<_, AdapterError>(state)
            })
            .await?;
        let mut state = state.lock();
        state.apply_queued();
        if let Some(why) = &state.broken {
            tracing::warn!(table = %self.table, why, "rows by key unavailable");
            return Ok(Found::Unavailable);
        }
        Ok(match state.lookup(key)? {
            Some(row) => Found::Row(row),
            None => Found::Missing,
        })
    }
}

/// What a lookup by key found.
#[derive(Debug)]
pub enum Found {
    /// The row holding the key, as a one-row batch of the table's columns.
    Row(RecordBatch),
    /// No row holds the key.
    Missing,
    /// The map no longer follows the table (it was dropped, or an update
    /// did not fit): forget the map and build it again from the table.
    Unavailable,
}

impl RowsState {
    /// The table's rows now, and a listen from then on; a task applies
    /// the listen's backlog whenever it grows past [`BACKLOG`].
    fn build(
        storage: &Storage,
        table: GlobalId,
        key_columns: Vec<usize>,
    ) -> Result<Arc<parking_lot::Mutex<RowsState>>> {
        let schema = storage.schema(table)?;
        let field = |i: usize| -> Result<SortField> {
            schema
                .fields()
                .get(i)
                .map(|f| SortField::new(f.data_type().clone()))
                .ok_or_else(|| AdapterError::Internal(format!("no column {i} in {table}")))
        };
        let keys = RowConverter::new(
            key_columns
                .iter()
                .map(|&i| field(i))
                .collect::<Result<_>>()?,
        )
        .map_err(|e| AdapterError::Internal(format!("key encoding: {e}")))?;
        let rows = RowConverter::new(
            (0..schema.fields().len())
                .map(field)
                .collect::<Result<_>>()?,
        )
        .map_err(|e| AdapterError::Internal(format!("row encoding: {e}")))?;
        let as_of = storage.read_ts();
        let hold = storage.acquire_read_hold(table, as_of)?;
        let snapshot = storage.snapshot(table, as_of)?;
        let queued = Arc::new(AtomicUsize::new(0));
        let wake = Arc::new(tokio::sync::Notify::new());
        let notify: freshet_storage::Notify = {
            let (queued, wake) = (Arc::clone(&queued), Arc::clone(&wake));
            Arc::new(move || {
                if queued.fetch_add(1, Ordering::Relaxed) + 1 == BACKLOG {
                    wake.notify_one();
                }
            })
        };
        let listen = storage.listen(table, as_of, Some(notify))?;
        drop(hold);
        let mut state = RowsState {
            table,
            keys,
            rows,
            schema,
            key_columns,
            by_key: HashMap::new(),
            listen,
            queued,
            wake: Arc::clone(&wake),
            broken: None,
        };
        for batch in &snapshot {
            let keys = state.encode_keys(batch)?;
            let rows = state.encode_rows(batch)?;
            for (key, row) in keys.iter().zip(rows.iter()) {
                if state
                    .by_key
                    .insert(key.as_ref().into(), row.as_ref().into())
                    .is_some()
                {
                    return Err(AdapterError::Internal(format!(
                        "table {table} holds a primary key twice"
                    )));
                }
            }
        }
        tracing::debug!(%table, rows = state.by_key.len(), "rows by key built");
        let state = Arc::new(parking_lot::Mutex::new(state));
        tokio::spawn(apply_backlog(Arc::downgrade(&state), wake));
        Ok(state)
    }

    fn encode_keys(&self, batch: &RecordBatch) -> Result<arrow::row::Rows> {
        let arrays: Vec<ArrayRef> = self
            .key_columns
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        self.keys
            .convert_columns(&arrays)
            .map_err(|e| AdapterError::Internal(format!("encoding keys: {e}")))
    }

    fn encode_rows(&self, batch: &RecordBatch) -> Result<arrow::row::Rows> {
        let arrays: Vec<ArrayRef> = batch.columns()[..self.schema.fields().len()].to_vec();
        self.rows
            .convert_columns(&arrays)
            .map_err(|e| AdapterError::Internal(format!("encoding rows: {e}")))
    }

    fn lookup(&self, key: &[ScalarValue]) -> Result<Option<RecordBatch>> {
        let arrays = key
            .iter()
            .map(|v| v.to_array())
            .collect::<datafusion::common::Result<Vec<_>>>()?;
        let encoded = self
            .keys
            .convert_columns(&arrays)
            .map_err(|e| AdapterError::Internal(format!("encoding a key: {e}")))?;
        let Some(row) = self.by_key.get(encoded.row(0).as_ref()) else {
            return Ok(None);
        };
        let parser = self.rows.parser();
        let columns = self
            .rows
            .convert_rows(std::iter::once(parser.parse(row)))
            .map_err(|e| AdapterError::Internal(format!("decoding a row: {e}")))?;
        Ok(Some(RecordBatch::try_new(
            Arc::clone(&self.schema),
            columns,
        )?))
    }

    /// Apply every update the listen has queued, in time order.
    fn apply_queued(&mut self) {
        if self.broken.is_some() {
            return;
        }
        let mut updates = Vec::new();
        loop {
            match self.listen.try_next() {
                Ok(ListenEvent::Updates(batch)) => updates.push(batch),
                Ok(ListenEvent::Progress(_)) => {}
                Err(false) => break,
                Err(true) => {
                    self.broken = Some("the table's updates ended".into());
                    return;
                }
            }
        }
        self.queued.store(0, Ordering::Relaxed);
        if updates.is_empty() {
            return;
        }
        if let Err(e) = self.apply(&updates) {
            tracing::error!(error = %e, "rows by key no longer follow their table");
            self.broken = Some(e.to_string());
        }
    }

    /// Apply `updates` (data columns, time, diff): per time, each key's
    /// rows net of their diffs, starting from the row the map holds; a
    /// key ends with one row or none.
    fn apply(&mut self, updates: &[RecordBatch]) -> Result<()> {
        let batch = concat_batches(&updates[0].schema(), updates)?;
        let n = batch.num_columns();
        let times = batch
            .column(n - 2)
            .as_any()
            .downcast_ref::<UInt64Array>()
            .ok_or_else(|| AdapterError::Internal("updates without times".into()))?;
        let order = sort_to_indices(times, None, None)?;
        let batch = take_record_batch(&batch, &order)?;
        let times = batch
            .column(n - 2)
            .as_any()
            .downcast_ref::<UInt64Array>()
            .ok_or_else(|| AdapterError::Internal("updates without times".into()))?
            .clone();
        let diffs = batch
            .column(n - 1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| AdapterError::Internal("updates without diffs".into()))?
            .clone();
        let keys = self.encode_keys(&batch)?;
        let rows = self.encode_rows(&batch)?;
        let mut start = 0;
        while start < batch.num_rows() {
            let time = times.value(start);
            let mut end = start;
            while end < batch.num_rows() && times.value(end) == time {
                end += 1;
            }
            // Each key's rows at this time, with their net diffs.
            let mut net: HashMap<&[u8], Vec<(&[u8], i64)>> = HashMap::new();
            for r in start..end {
                let entry = net.entry(keys.row(r).data()).or_default();
                let row = rows.row(r).data();
                match entry.iter_mut().find(|(held, _)| *held == row) {
                    Some((_, diff)) => *diff += diffs.value(r),
                    None => entry.push((row, diffs.value(r))),
                }
            }
            for (key, mut changes) in net {
                if let Some(held) = self.by_key.get(key) {
                    match changes.iter_mut().find(|(row, _)| *row == held.as_ref()) {
                        Some((_, diff)) => *diff += 1,
                        None => changes.push((held.as_ref(), 1)),
                    }
                }
                let mut present = changes.iter().filter(|(_, diff)| *diff != 0);
                match (present.next(), present.next()) {
                    (None, _) => {
                        self.by_key.remove(key);
                    }
                    (Some((row, 1)), None) => {
                        let row: Box<[u8]> = (*row).into();
                        self.by_key.insert(key.into(), row);
                    }
                    _ => {
                        return Err(AdapterError::Internal(format!(
                            "a key of table {} held by other than one row at {time}",
                            self.table
                        )));
                    }
                }
            }
            start = end;
        }
        Ok(())
    }
}

/// Apply a table's queued updates whenever its listen's backlog grows,
/// until the table's rows by key are dropped.
async fn apply_backlog(state: Weak<parking_lot::Mutex<RowsState>>, wake: Arc<tokio::sync::Notify>) {
    loop {
        wake.notified().await;
        let Some(state) = state.upgrade() else {
            return;
        };
        state.lock().apply_queued();
    }
}

impl Drop for RowsState {
    fn drop(&mut self) {
        // The backlog task finds the map gone and ends.
        self.wake.notify_one();
    }
}

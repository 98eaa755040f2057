//! The write path: INSERT, UPDATE and DELETE run their source query,
//! check rows against the table, and hand the writes to group commit after
//! the key checks.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::common::ScalarValue;
use freshet_catalog::ItemDetails;
use freshet_planner::statements::insert_values::{InsertCell, InsertValuesPlan};
use freshet_planner::{KeyedWrite, PlanError, WriteKind, WritePlan};
use freshet_repr::{GlobalId, RelationDesc, Timestamp};
use freshet_storage::{StorageError, TableWrite, write_batch};

use super::{Coordinator, ExecuteResponse};
use crate::error::{AdapterError, Result};
use crate::keyed_rows::Found;
use crate::session::{Session, TxnStatus};
use crate::values::check_rows;
use crate::vars::Isolation;

impl Coordinator {
    /// Commit table writes, checking the keys of the tables they write,
    /// if no table in `reads` changed after the time paired with it; then
    /// release `locks` (the write locks of the tables the statement holds)
    /// — in a task of its own, so a cancelled or timed-out statement can
    /// neither release the locks nor stop the key bookkeeping while the
    /// commit is still in flight.
    pub(super) async fn commit_writes<L: Send + 'static>(
        &self,
        writes: Vec<TableWrite>,
        locks: L,
        reads: Vec<(GlobalId, Timestamp)>,
    ) -> Result<Timestamp> {
        let storage = Arc::clone(&self.storage);
        let keys = Arc::clone(&self.keys);
        // Enter the tables' gates before reading their keys off the
        // catalog: a key added meanwhile waits for this commit to end.
        let gates = keys.enter(writes.iter().map(|w| w.id)).await;
        let specs = self.key_specs(&writes);
        let result = tokio::spawn(async move {
            let result = keys.commit(&storage, specs, writes, reads).await;
            drop(locks);
            drop(gates);
            result
        })
        .await
        .map_err(|e| AdapterError::Internal(format!("commit task failed: {e}")))?;
        match result {
            Err(AdapterError::Storage(StorageError::ReadConflict { id, .. })) => {
                Err(AdapterError::SerializationFailure {
                    detail: format!(
                        "The {} was written by another transaction after this transaction read it.",
                        self.catalog_state().describe(id)
                    ),
                })
            }
            other => other,
        }
    }

    /// The keys (primary and `UNIQUE`) of the tables `writes` write.
    pub(super) fn key_specs(&self, writes: &[TableWrite]) -> Vec<crate::keys::KeySpec> {
        let catalog = self.catalog_state();
        let ids: BTreeSet<GlobalId> = writes.iter().map(|w| w.id).collect();
        ids.into_iter()
            .filter_map(|id| catalog.item(id))
            .flat_map(|item| match &item.details {
                ItemDetails::Table { keys, .. } => table_key_specs(item, keys),
                _ => Vec::new(),
            })
            .collect()
    }

    pub(super) fn table_lock(&self, id: GlobalId) -> Arc<tokio::sync::RwLock<()>> {
        Arc::clone(self.table_locks.lock().entry(id).or_default())
    }

    /// Rows as batches of the table's exact schema, checked.
    pub(super) fn table_rows(
        &self,
        table: GlobalId,
        desc: &RelationDesc,
        batches: Vec<RecordBatch>,
    ) -> Result<Vec<RecordBatch>> {
        let name = self.table_name(table);
        batches
            .into_iter()
            .filter(|b| b.num_rows() > 0)
            .map(|b| check_rows(&name, desc, b))
            .collect()
    }

    pub(super) async fn write(
        &self,
        session: &mut Session,
        w: WritePlan,
    ) -> Result<ExecuteResponse> {
        if session.status == TxnStatus::InBlock {
            return self.write_in_block(session, w).await;
        }
        if let Some(keyed) = &w.keyed
            && let Some(key) = &keyed.key
        {
            return self.write_by_key(session, &w, keyed, key).await;
        }
        let lock = if w.read_then_write {
            Some(self.table_lock(w.table).write_owned().await)
        } else {
            None
        };
        let (ts, holds) = self.choose_and_hold(&w.source.inputs, Isolation::StrictSerializable)?;
        let rows = self.run_at(session, &w.source, ts).await?;
        drop(holds);
        let (writes, written, count) = self.changes(&w, rows)?;
        let commit_ts = if writes.is_empty() {
            ts
        } else {
            self.commit_writes(writes, lock, Vec::new()).await?
        };
        self.finish_write(session, &w, written, commit_ts, count)
            .await
    }

    /// An `UPDATE` or `DELETE` of the row with primary key `key`: the row
    /// is looked up by key (under the table's write lock shared and the
    /// key's stripe lock, held to the end of the commit) and the source
    /// query's steps applied to it, instead of reading the table. (A
    /// prepared statement's source query may still hold its `$n`: it is
    /// not run.)
    async fn write_by_key(
        &self,
        session: &mut Session,
        w: &WritePlan,
        keyed: &KeyedWrite,
        key: &[ScalarValue],
    ) -> Result<ExecuteResponse> {
        let table_lock = self.table_lock(w.table).read_owned().await;
        let mut rows = self.keyed_rows.table(w.table, &keyed.key_columns);
        let mut key_lock = rows.lock_key(key).await;
        let mut found = rows.get(&self.storage, key).await?;
        if matches!(found, Found::Unavailable) {
            // Built again from the table, once.
            drop(key_lock);
            self.keyed_rows.forget(w.table);
            rows = self.keyed_rows.table(w.table, &keyed.key_columns);
            key_lock = rows.lock_key(key).await;
            found = rows.get(&self.storage, key).await?;
        }
        let source = match found {
            Found::Row(row) => vec![keyed.finish.apply(&session.df, row)?],
            Found::Missing => Vec::new(),
            Found::Unavailable => {
                return Err(AdapterError::Internal(format!(
                    "the rows by key of {} do not follow it",
                    self.table_name(w.table)
                )));
            }
        };
        let (writes, written, count) = self.changes(w, source)?;
        let ts = if writes.is_empty() {
            self.storage.read_ts()
        } else {
            self.commit_writes(writes, (table_lock, key_lock), Vec::new())
                .await?
        };
        self.finish_write(session, w, written, ts, count).await
    }

    /// An `INSERT ... VALUES` of constants and parameters, its `rows`
    /// bound: checked and committed as any write's rows are (in a block,
    /// joining the block's writes), with no query to run and no lock to
    /// take (it reads nothing).
    pub(super) async fn insert_values(
        &self,
        session: &mut Session,
        insert: &InsertValuesPlan,
        rows: RecordBatch,
    ) -> Result<ExecuteResponse> {
        let rows = self.table_rows(insert.table, &insert.table_desc, vec![rows])?;
        let count: usize = rows.iter().map(|b| b.num_rows()).sum();
        let writes = table_writes(insert.table, &rows, 1)?;
        if session.status == TxnStatus::InBlock {
            session.txn.writes.extend(writes);
        } else if !writes.is_empty() {
            self.commit_writes(writes, (), Vec::new()).await?;
        }
        Ok(ExecuteResponse::Command(format!("INSERT 0 {count}")))
    }

    /// An `INSERT ... VALUES` whose parameters do not bind to its columns'
    /// types (or are missing): planned again with their values, which
    /// plans it as a query that casts them or reports why it cannot.
    pub(super) async fn insert_unbound(
        &self,
        session: &mut Session,
        stmt: &freshet_planner::parser::Statement,
        insert: &InsertValuesPlan,
        params: Option<&datafusion::common::ParamValues>,
    ) -> Result<ExecuteResponse> {
        if params.is_none() {
            let first = insert
                .rows
                .iter()
                .flatten()
                .find_map(|c| match c {
                    InsertCell::Param(i) => Some(i + 1),
                    InsertCell::Value(_) => None,
                })
                .unwrap_or(1);
            return Err(PlanError::UndefinedParameter(first.to_string()).into());
        }
        match self.plan(session, stmt, params).await? {
            freshet_planner::Plan::Write(w) => self.write(session, *w).await,
            _ => Err(AdapterError::Internal(
                "an INSERT whose parameters do not bind planned without a query".into(),
            )),
        }
    }

    /// `TRUNCATE`: every row of each table retracted, in one commit (in a
    /// block, with the block's writes), the tables' write locks held from
    /// the read to the commit as for a DELETE.
    pub(super) async fn truncate(
        &self,
        session: &mut Session,
        writes: Vec<WritePlan>,
    ) -> Result<ExecuteResponse> {
        if session.status == TxnStatus::InBlock {
            for w in writes {
                self.write_in_block(session, w).await?;
            }
            return Ok(ExecuteResponse::Command("TRUNCATE TABLE".into()));
        }
        let tables: BTreeSet<GlobalId> = writes.iter().map(|w| w.table).collect();
        let mut locks = Vec::with_capacity(tables.len());
        for id in &tables {
            locks.push(self.table_lock(*id).write_owned().await);
        }
        let (ts, holds) = self.choose_and_hold(&tables, Isolation::StrictSerializable)?;
        let mut changes = Vec::new();
        for w in &writes {
            let rows = self.run_at(session, &w.source, ts).await?;
            changes.extend(self.changes(w, rows)?.0);
        }
        drop(holds);
        if !changes.is_empty() {
            self.commit_writes(changes, locks, Vec::new()).await?;
        }
        Ok(ExecuteResponse::Command("TRUNCATE TABLE".into()))
    }

    /// A write inside a transaction block: its source query runs at the
    /// transaction's read time over what the transaction has written so
    /// far (an UPDATE sees the rows an earlier INSERT added), and its
    /// changes join the transaction's writes, applied at COMMIT.
    pub(super) async fn write_in_block(
        &self,
        session: &mut Session,
        w: WritePlan,
    ) -> Result<ExecuteResponse> {
        // A write that reads nothing (INSERT ... VALUES) needs no read
        // time, and leaves the transaction free to pick one later.
        let ts = if w.source.inputs.is_empty() {
            self.storage.read_ts()
        } else {
            self.read_time(session, &w.source.inputs, true)?.0
        };
        let rows = self.run_at(session, &w.source, ts).await?;
        let (writes, written, count) = self.changes(&w, rows)?;
        session.txn.writes.extend(writes);
        self.finish_write(session, &w, written, ts, count).await
    }

    /// What a write's source rows change: the table writes, the rows
    /// written (new rows, for RETURNING) and the count the tag reports.
    fn changes(
        &self,
        w: &WritePlan,
        rows: Vec<RecordBatch>,
    ) -> Result<(Vec<TableWrite>, Vec<RecordBatch>, usize)> {
        let n = w.table_desc.arity();
        Ok(match w.kind {
            WriteKind::Insert | WriteKind::Delete => {
                let rows = self.table_rows(w.table, &w.table_desc, rows)?;
                let diff = if w.kind == WriteKind::Insert { 1 } else { -1 };
                let writes = table_writes(w.table, &rows, diff)?;
                let count = rows.iter().map(|b| b.num_rows()).sum();
                (writes, rows, count)
            }
            WriteKind::Update => {
                let mut old = Vec::new();
                let mut new = Vec::new();
                for b in rows.into_iter().filter(|b| b.num_rows() > 0) {
                    old.push(
                        b.project(&(0..n).collect::<Vec<_>>())
                            .map_err(|e| AdapterError::Internal(e.to_string()))?,
                    );
                    new.push(
                        b.project(&(n..2 * n).collect::<Vec<_>>())
                            .map_err(|e| AdapterError::Internal(e.to_string()))?,
                    );
                }
                let old = self.table_rows(w.table, &w.table_desc, old)?;
                let new = self.table_rows(w.table, &w.table_desc, new)?;
                let mut writes = table_writes(w.table, &old, -1)?;
                writes.extend(table_writes(w.table, &new, 1)?);
                let count = new.iter().map(|b| b.num_rows()).sum();
                (writes, new, count)
            }
        })
    }

    pub(super) async fn finish_write(
        &self,
        session: &Session,
        w: &WritePlan,
        written: Vec<RecordBatch>,
        ts: Timestamp,
        count: usize,
    ) -> Result<ExecuteResponse> {
        let (tag_prefix, tag) = match w.kind {
            WriteKind::Insert => ("INSERT 0", format!("INSERT 0 {count}")),
            WriteKind::Update => ("UPDATE", format!("UPDATE {count}")),
            WriteKind::Delete => ("DELETE", format!("DELETE {count}")),
        };
        match &w.returning {
            None => Ok(ExecuteResponse::Command(tag)),
            Some(r) => {
                r.binding
                    .bind_rows(written)
                    .map_err(AdapterError::Internal)?;
                let (_, holds) = self.choose_and_hold(&r.inputs, Isolation::StrictSerializable)?;
                let batches = self
                    .run_at(session, r, ts.max(self.storage.read_ts()))
                    .await?;
                drop(holds);
                Ok(ExecuteResponse::Rows {
                    desc: r.desc.clone(),
                    batches,
                    tag: tag_prefix.into(),
                })
            }
        }
    }
}

/// `batches` of rows of `table` as writes with multiplicity `diff` (1
/// inserts them, -1 retracts them).
pub(super) fn table_writes(
    table: GlobalId,
    batches: &[RecordBatch],
    diff: i64,
) -> Result<Vec<TableWrite>> {
    batches
        .iter()
        .map(|b| {
            Ok(TableWrite {
                id: table,
                updates: write_batch(b, diff)?,
                staged: Vec::new(),
            })
        })
        .collect()
}

/// The key specs of a table with keys `table_keys`, by slot (0: the
/// primary key, 1..: the `UNIQUE`s in order).
pub(super) fn table_key_specs(
    item: &freshet_catalog::Item,
    table_keys: &freshet_catalog::TableKeys,
) -> Vec<crate::keys::KeySpec> {
    let Some(desc) = item.desc.as_ref() else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    if !table_keys.primary_key.is_empty() {
        keys.push((
            0,
            format!("{}_pkey", item.name),
            &table_keys.primary_key,
            false,
        ));
    }
    for (i, u) in table_keys.unique.iter().enumerate() {
        keys.push((i + 1, u.name.clone(), &u.columns, !u.nulls_not_distinct));
    }
    keys.into_iter()
        .filter_map(|(slot, constraint, positions, nulls_distinct)| {
            let columns = positions
                .iter()
                .map(|&i| desc.columns.get(i))
                .collect::<Option<Vec<_>>>()?;
            Some(crate::keys::KeySpec {
                id: item.id,
                slot,
                table: item.name.clone(),
                constraint,
                nulls_distinct,
                columns: positions.clone(),
                names: columns.iter().map(|c| c.name.clone()).collect(),
                types: columns.iter().map(|c| c.ty.arrow_type()).collect(),
            })
        })
        .collect()
}

//! The ingestion task of a PostgreSQL source.
//!
//! First start (no durable progress): create the replication slot with an
//! exported snapshot, copy every table inside a `REPEATABLE READ`
//! transaction using that snapshot, and append all of it together with
//! the slot's consistent point as the progress LSN. The snapshot holds
//! exactly the transactions that committed before that point, and the
//! slot streams exactly those after it, so nothing is missed or seen
//! twice.
//!
//! Then stream: each upstream transaction's changes are gathered between
//! its `Begin` and `Commit` and applied whole; transactions that arrive
//! together share one append (one Freshet timestamp), whose progress row
//! is the end LSN of the last of them. Only then is that LSN acknowledged
//! to the upstream, so the slot never lets go of WAL Freshet has not made
//! durable. After a restart (of either side) streaming resumes from the
//! durable LSN, and transactions that end before it are skipped.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use freshet_catalog::{PostgresSourceSpec, PostgresSourceTable};
use freshet_repr::PgType;
use freshet_storage::{Storage, TableWrite};
use futures::{FutureExt, StreamExt};
use pgwire_replication::{Lsn, ReplicationClient, ReplicationConfig, ReplicationEvent};
use tokio::sync::watch;

use super::copy_text::{LineSplitter, split_row};
use super::pgoutput::{self, LogicalMessage, Relation, TupleValue};
use super::text;
use super::upstream::{PostgresEndpoint, drop_slot_with, upstream_error};
use crate::datum::{Datum, Update, write_updates};
use crate::error::{Result, SourceError};
use crate::status::{SourceState, StatusCell};
use crate::supervise::{Sessions, supervise};
use crate::{IngestionTarget, OutputTarget, progress};

/// Updates gathered before an append is made even though more are ready.
const MAX_BATCH_UPDATES: usize = 50_000;

/// Session settings that make upstream text output the forms
/// [`text::parse`] reads.
const SESSION_OPTIONS: &str = "-c datestyle=ISO,MDY -c intervalstyle=postgres -c timezone=UTC \
     -c extra_float_digits=3 -c bytea_output=hex";

/// Build the ingestion task of a PostgreSQL source.
pub(crate) fn run(
    storage: Arc<Storage>,
    target: IngestionTarget,
    spec: PostgresSourceSpec,
    endpoint: PostgresEndpoint,
    status: StatusCell,
    stopped: watch::Receiver<bool>,
) -> Result<impl std::future::Future<Output = ()> + Send + 'static> {
    let mut tables = Vec::with_capacity(spec.tables.len());
    for table in &spec.tables {
        let output = target
            .outputs
            .iter()
            .find(|o| o.upstream == table.output)
            .ok_or_else(|| {
                SourceError::Internal(format!(
                    "source {} has no subsource for {}",
                    target.source,
                    table.qualified()
                ))
            })?;
        let types = output
            .schema
            .fields()
            .iter()
            .map(|f| PgType::of_field(f))
            .collect();
        tables.push(Table {
            spec: table.clone(),
            output: output.clone(),
            types,
            positions: None,
        });
    }
    let by_oid = tables
        .iter()
        .enumerate()
        .map(|(i, t)| (t.spec.oid, i))
        .collect();
    Ok(async move {
        supervise(Runner {
            storage,
            progress: target.progress.clone(),
            spec,
            endpoint,
            tables,
            by_oid,
            status,
            stopped,
        })
        .await
    })
}

/// One ingested table.
struct Table {
    spec: PostgresSourceTable,
    output: OutputTarget,
    /// The subsource's column types, in order.
    types: Vec<PgType>,
    /// Where each of our columns is in the upstream's tuples, from the
    /// last `Relation` message of this replication session.
    positions: Option<Vec<usize>>,
}

struct Runner {
    storage: Arc<Storage>,
    progress: OutputTarget,
    spec: PostgresSourceSpec,
    endpoint: PostgresEndpoint,
    tables: Vec<Table>,
    by_oid: HashMap<u32, usize>,
    status: StatusCell,
    stopped: watch::Receiver<bool>,
}

/// Changes gathered for an append: per table, then the LSN they reach.
struct Pending {
    updates: Vec<Vec<Update>>,
    count: usize,
}

impl Pending {
    fn new(tables: usize) -> Self {
        Pending {
            updates: vec![Vec::new(); tables],
            count: 0,
        }
    }

    fn push(&mut self, table: usize, update: Update) {
        self.updates[table].push(update);
        self.count += 1;
    }

    fn absorb(&mut self, other: Pending) {
        for (mine, theirs) in self.updates.iter_mut().zip(other.updates) {
            mine.extend(theirs);
        }
        self.count += other.count;
    }
}

impl Sessions for Runner {
    fn stopped(&mut self) -> &mut watch::Receiver<bool> {
        &mut self.stopped
    }

    fn status(&self) -> &StatusCell {
        &self.status
    }

    fn session(&mut self) -> impl std::future::Future<Output = Result<()>> + Send {
        self.replicate()
    }
}

impl Runner {
    /// One replication session: resume (or snapshot), then stream until
    /// stopped or an error.
    async fn replicate(&mut self) -> Result<()> {
        for t in &mut self.tables {
            t.positions = None;
        }
        let durable = progress::read_offset(&self.storage, &self.progress).await?;
        let (mut repl, durable) = match durable {
            Some(lsn) => {
                self.status.resumed_at(Lsn(lsn).to_pg_string());
                let cfg = self
                    .config()
                    .with_start_lsn(Lsn(lsn))
                    .with_ack_lsn(Lsn(lsn));
                let mut repl = ReplicationClient::connect(cfg)
                    .await
                    .map_err(|e| self.replication_error(e))?;
                repl.wait_started()
                    .await
                    .map_err(|e| self.replication_error(e))?;
                (repl, lsn)
            }
            None => self.snapshot().await?,
        };
        self.status.set_state(SourceState::Running, None);
        let result = self.stream(&mut repl, durable).await;
        repl.stop();
        result
    }

    fn config(&self) -> ReplicationConfig {
        ReplicationConfig::new(
            self.endpoint.host.clone(),
            self.endpoint.user.clone(),
            self.endpoint.password.clone().unwrap_or_default(),
            self.endpoint.database.clone(),
            self.spec.slot.clone(),
            self.spec.publication.clone(),
        )
        .with_port(self.endpoint.port)
        .with_options(SESSION_OPTIONS)
        .with_application_name(format!("freshet {}", self.spec.slot))
        .with_status_interval(Duration::from_secs(1))
    }

    /// A replication error as a source error: a slot that is gone cannot
    /// be resumed without a gap, so that fails the source; anything else
    /// stalls it.
    fn replication_error(&self, e: pgwire_replication::PgWireError) -> SourceError {
        let message = e.to_string();
        if message.contains("does not exist") && message.contains(&self.spec.slot) {
            SourceError::Invalid(format!(
                "replication slot {} is gone upstream; the source cannot resume without a gap (recreate it): {message}",
                self.spec.slot
            ))
        } else {
            SourceError::Upstream(format!("replication from {:?}: {message}", self.endpoint))
        }
    }

    /// Create the slot and append the snapshot taken at its consistent
    /// point; returns the session, started, and that point.
    async fn snapshot(&mut self) -> Result<(ReplicationClient, u64)> {
        let client = self.endpoint.connect().await?;
        // A slot left by a crash before the snapshot was durable.
        drop_slot_with(&client, &self.spec.slot).await?;
        let mut repl = ReplicationClient::connect_gated(self.config())
            .await
            .map_err(|e| self.replication_error(e))?;
        let rows = repl
            .simple_query(&format!(
                "CREATE_REPLICATION_SLOT {} LOGICAL pgoutput EXPORT_SNAPSHOT",
                self.spec.slot
            ))
            .await
            .map_err(|e| self.replication_error(e))?;
        let field = |i: usize| -> Result<String> {
            rows.first()
                .and_then(|r| r.get(i))
                .and_then(|v| v.as_ref())
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .ok_or_else(|| {
                    SourceError::Upstream("CREATE_REPLICATION_SLOT returned no row".into())
                })
        };
        let consistent_point = Lsn::parse(&field(1)?)
            .map_err(|e| SourceError::Upstream(format!("bad consistent point: {e}")))?
            .as_u64();
        let snapshot_name = field(2)?;
        tracing::info!(slot = %self.spec.slot, lsn = %Lsn(consistent_point).to_pg_string(), "created replication slot; copying the snapshot");
        let copy = self.copy_tables(&client, &snapshot_name).await;
        let updates = match copy {
            Ok(u) => u,
            Err(e) => {
                drop(repl);
                let _ = drop_slot_with(&client, &self.spec.slot).await;
                return Err(e);
            }
        };
        self.append(updates, None, consistent_point).await?;
        repl.start().await.map_err(|e| self.replication_error(e))?;
        repl.wait_started()
            .await
            .map_err(|e| self.replication_error(e))?;
        Ok((repl, consistent_point))
    }

    /// Copy every table as of the exported snapshot.
    async fn copy_tables(
        &self,
        client: &tokio_postgres::Client,
        snapshot_name: &str,
    ) -> Result<Pending> {
        let sql = |what: &str, e: tokio_postgres::Error| upstream_error(what, &e);
        client
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(|e| sql("starting the snapshot transaction", e))?;
        client
            .batch_execute(&format!(
                "SET TRANSACTION SNAPSHOT '{}'",
                snapshot_name.replace('\'', "''")
            ))
            .await
            .map_err(|e| sql("using the slot's snapshot", e))?;
        client
            .batch_execute(
                "SET LOCAL datestyle = 'ISO, MDY'; SET LOCAL intervalstyle = 'postgres'; \
                 SET LOCAL timezone = 'UTC'; SET LOCAL extra_float_digits = 3; \
                 SET LOCAL bytea_output = 'hex'",
            )
            .await
            .map_err(|e| sql("setting output formats", e))?;
        let mut pending = Pending::new(self.tables.len());
        for (i, table) in self.tables.iter().enumerate() {
            self.check_columns(client, table).await?;
            let columns: Vec<String> = table
                .spec
                .columns
                .iter()
                .map(|c| quote_ident(&c.name))
                .collect();
            let copy = format!(
                "COPY (SELECT {} FROM {}.{}) TO STDOUT",
                columns.join(", "),
                quote_ident(&table.spec.schema),
                quote_ident(&table.spec.name)
            );
            let stream = client
                .copy_out(copy.as_str())
                .await
                .map_err(|e| sql(&format!("copying {}", table.spec.qualified()), e))?;
            futures::pin_mut!(stream);
            let mut lines = LineSplitter::default();
            while let Some(chunk) = stream.next().await {
                let chunk =
                    chunk.map_err(|e| sql(&format!("copying {}", table.spec.qualified()), e))?;
                if *self.stopped.borrow() {
                    return Err(SourceError::Upstream("stopped during the snapshot".into()));
                }
                lines.push(&chunk);
                while let Some(line) = lines.next_line() {
                    let fields = split_row(&line)?;
                    let row = self.decode_fields(table, fields)?;
                    pending.push(i, (row, 1));
                }
            }
            lines.finish()?;
        }
        client
            .batch_execute("COMMIT")
            .await
            .map_err(|e| sql("ending the snapshot transaction", e))?;
        Ok(pending)
    }

    /// Check, inside the snapshot, that a table still has the columns
    /// recorded at `CREATE SOURCE` with the same types.
    async fn check_columns(&self, client: &tokio_postgres::Client, table: &Table) -> Result<()> {
        let rows = client
            .query(
                "SELECT attname::text, atttypid, atttypmod FROM pg_attribute \
                 WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped",
                &[&table.spec.oid],
            )
            .await
            .map_err(|e| upstream_error("reading a table's columns", &e))?;
        let now: Vec<(String, u32, i32)> = rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        if now.is_empty() {
            return Err(SourceError::Invalid(format!(
                "upstream table {} no longer exists",
                table.spec.qualified()
            )));
        }
        for column in &table.spec.columns {
            match now.iter().find(|(n, _, _)| *n == column.name) {
                Some((_, oid, typmod))
                    if column.as_text
                        || (*oid == column.type_oid && *typmod == column.type_modifier) => {}
                Some(_) => return Err(incompatible(&table.spec, &column.name, "changed type")),
                None => return Err(incompatible(&table.spec, &column.name, "was dropped")),
            }
        }
        Ok(())
    }

    /// Stream from `durable` on until stopped or an error.
    async fn stream(&mut self, repl: &mut ReplicationClient, mut durable: u64) -> Result<()> {
        let mut batch = Pending::new(self.tables.len());
        let mut batch_end: Option<u64> = None;
        // The transaction being received: its commit LSN and changes.
        let mut txn: Option<(u64, Pending)> = None;
        loop {
            let event = if batch_end.is_some() {
                match repl.recv().now_or_never() {
                    Some(e) => e,
                    None => {
                        // Nothing more is ready: make what came durable.
                        if let Some(end) = batch_end.take() {
                            self.flush(repl, &mut batch, &mut durable, end).await?;
                        }
                        continue;
                    }
                }
            } else {
                tokio::select! {
                    e = repl.recv() => e,
                    _ = self.stopped.changed() => return Ok(()),
                }
            };
            let event = event
                .map_err(|e| self.replication_error(e))?
                .ok_or_else(|| SourceError::Upstream("the replication stream ended".into()))?;
            match event {
                ReplicationEvent::Begin { final_lsn, .. } => {
                    txn = Some((final_lsn.as_u64(), Pending::new(self.tables.len())));
                }
                ReplicationEvent::XLogData { data, .. } => {
                    let message = pgoutput::decode(&data)?;
                    self.apply(message, txn.as_mut().map(|(_, p)| p))?;
                }
                ReplicationEvent::Commit { lsn, end_lsn, .. } => {
                    let Some((_, changes)) = txn.take() else {
                        return Err(SourceError::Upstream(
                            "a commit arrived outside a transaction".into(),
                        ));
                    };
                    // Already applied before a restart.
                    if lsn.as_u64() < durable {
                        continue;
                    }
                    batch.absorb(changes);
                    batch_end = Some(end_lsn.as_u64());
                    if batch.count >= MAX_BATCH_UPDATES {
                        batch_end = None;
                        self.flush(repl, &mut batch, &mut durable, end_lsn.as_u64())
                            .await?;
                    }
                }
                ReplicationEvent::KeepAlive { wal_end, .. } => {
                    // Everything before `wal_end` was sent and, with no
                    // transaction open or pending, is durable here: let the
                    // slot move on, so an idle source holds no WAL back.
                    if txn.is_none() && batch_end.is_none() {
                        repl.update_applied_lsn(wal_end);
                    }
                }
                ReplicationEvent::Message { .. } | ReplicationEvent::StoppedAt { .. } => {}
            }
        }
    }

    /// Append the gathered transactions with progress `end`, then let the
    /// upstream know everything before `end` is durable.
    async fn flush(
        &self,
        repl: &ReplicationClient,
        batch: &mut Pending,
        durable: &mut u64,
        end: u64,
    ) -> Result<()> {
        let b = std::mem::replace(batch, Pending::new(self.tables.len()));
        self.append(b, Some(*durable), end).await?;
        *durable = end;
        repl.update_applied_lsn(Lsn(end));
        Ok(())
    }

    /// Apply one decoded message to the open transaction.
    fn apply(&mut self, message: LogicalMessage, txn: Option<&mut Pending>) -> Result<()> {
        let outside = || SourceError::Upstream("a change arrived outside a transaction".into());
        match message {
            LogicalMessage::Relation(relation) => self.relation(&relation),
            LogicalMessage::Insert { relation, new } => {
                let Some(&i) = self.by_oid.get(&relation) else {
                    return Ok(());
                };
                let row = self.decode_tuple(i, &new, None)?;
                txn.ok_or_else(outside)?.push(i, (row, 1));
                Ok(())
            }
            LogicalMessage::Update { relation, old, new } => {
                let Some(&i) = self.by_oid.get(&relation) else {
                    return Ok(());
                };
                let Some((false, old)) = old else {
                    return Err(self.identity_error(i));
                };
                let old_row = self.decode_tuple(i, &old, None)?;
                let new_row = self.decode_tuple(i, &new, Some(&old_row))?;
                let txn = txn.ok_or_else(outside)?;
                txn.push(i, (old_row, -1));
                txn.push(i, (new_row, 1));
                Ok(())
            }
            LogicalMessage::Delete { relation, old } => {
                let Some(&i) = self.by_oid.get(&relation) else {
                    return Ok(());
                };
                let (false, old) = old else {
                    return Err(self.identity_error(i));
                };
                let row = self.decode_tuple(i, &old, None)?;
                txn.ok_or_else(outside)?.push(i, (row, -1));
                Ok(())
            }
            LogicalMessage::Truncate { relations, .. } => {
                match relations.iter().find_map(|r| self.by_oid.get(r)) {
                    Some(&i) => Err(SourceError::Invalid(format!(
                        "upstream table {} was truncated; Freshet cannot follow a TRUNCATE (drop and recreate the source)",
                        self.tables[i].spec.qualified()
                    ))),
                    None => Ok(()),
                }
            }
            LogicalMessage::Type { .. }
            | LogicalMessage::Origin { .. }
            | LogicalMessage::Other(_) => Ok(()),
        }
    }

    fn identity_error(&self, table: usize) -> SourceError {
        SourceError::Invalid(format!(
            "upstream table {} no longer has REPLICA IDENTITY FULL, so its updates and deletes cannot be applied (ALTER TABLE ... REPLICA IDENTITY FULL and recreate the source)",
            self.tables[table].spec.qualified()
        ))
    }

    /// A table's shape as the stream describes it now: where each of our
    /// columns is, refusing a change we cannot follow.
    fn relation(&mut self, relation: &Relation) -> Result<()> {
        let Some(&i) = self.by_oid.get(&relation.oid) else {
            return Ok(());
        };
        let table = &mut self.tables[i];
        let mut positions = Vec::with_capacity(table.spec.columns.len());
        for column in &table.spec.columns {
            let Some(at) = relation.columns.iter().position(|c| c.name == column.name) else {
                return Err(incompatible(&table.spec, &column.name, "was dropped"));
            };
            let upstream = &relation.columns[at];
            if !column.as_text
                && (upstream.type_oid != column.type_oid
                    || upstream.type_modifier != column.type_modifier)
            {
                return Err(incompatible(&table.spec, &column.name, "changed type"));
            }
            positions.push(at);
        }
        table.positions = Some(positions);
        Ok(())
    }

    /// A row from a tuple: our columns, in order; an unchanged TOASTed
    /// value comes from `old`.
    fn decode_tuple(
        &self,
        table: usize,
        tuple: &[TupleValue],
        old: Option<&[Datum]>,
    ) -> Result<Vec<Datum>> {
        let t = &self.tables[table];
        let positions = t.positions.as_ref().ok_or_else(|| {
            SourceError::Upstream(format!(
                "a change to {} arrived before its relation message",
                t.spec.qualified()
            ))
        })?;
        positions
            .iter()
            .enumerate()
            .map(|(c, &at)| match tuple.get(at) {
                Some(TupleValue::Null) => Ok(Datum::Null),
                Some(TupleValue::Text(bytes)) => {
                    let s = std::str::from_utf8(bytes).map_err(|_| {
                        SourceError::Upstream(format!(
                            "a value of {}.{} is not UTF-8",
                            t.spec.qualified(),
                            t.spec.columns[c].name
                        ))
                    })?;
                    self.parse(t, c, s)
                }
                Some(TupleValue::UnchangedToast) => {
                    old.and_then(|o| o.get(c).cloned()).ok_or_else(|| {
                        SourceError::Upstream(format!(
                            "an unchanged TOASTed value of {}.{} came without the old row",
                            t.spec.qualified(),
                            t.spec.columns[c].name
                        ))
                    })
                }
                Some(TupleValue::Binary(_)) => Err(SourceError::Upstream(
                    "binary tuple data was not asked for".into(),
                )),
                None => Err(SourceError::Upstream(format!(
                    "a tuple of {} has too few columns",
                    t.spec.qualified()
                ))),
            })
            .collect()
    }

    /// A snapshot row's fields as a row.
    fn decode_fields(&self, table: &Table, fields: Vec<Option<String>>) -> Result<Vec<Datum>> {
        if fields.len() != table.types.len() {
            return Err(SourceError::Upstream(format!(
                "a snapshot row of {} has {} fields, expected {}",
                table.spec.qualified(),
                fields.len(),
                table.types.len()
            )));
        }
        fields
            .into_iter()
            .enumerate()
            .map(|(c, f)| match f {
                None => Ok(Datum::Null),
                Some(s) => self.parse(table, c, &s),
            })
            .collect()
    }

    /// Column `c`'s value from its text form.
    fn parse(&self, table: &Table, c: usize, s: &str) -> Result<Datum> {
        text::parse(&table.types[c], s).map_err(|e| match e {
            SourceError::Invalid(m) => SourceError::Invalid(format!(
                "{}.{}: {m}",
                table.spec.qualified(),
                table.spec.columns[c].name
            )),
            other => other,
        })
    }

    /// Append `pending` and the progress row `end` (replacing `old`) in one
    /// commit.
    async fn append(&self, pending: Pending, old: Option<u64>, end: u64) -> Result<()> {
        let mut writes = Vec::new();
        let mut records = 0u64;
        let mut bytes = 0u64;
        for (table, updates) in self.tables.iter().zip(pending.updates) {
            if updates.is_empty() {
                continue;
            }
            let batch = write_updates(&table.output.schema, &updates)?;
            records += batch.num_rows() as u64;
            bytes += batch.get_array_memory_size() as u64;
            writes.push(TableWrite {
                id: table.output.id,
                updates: batch,
                staged: Vec::new(),
            });
        }
        let lsn = |l: u64| vec![Datum::Int64(i64::try_from(l).unwrap_or(i64::MAX))];
        writes.push(TableWrite {
            id: self.progress.id,
            updates: write_updates(
                &self.progress.schema,
                &progress::replace(old.map(lsn).as_deref(), lsn(end)),
            )?,
            staged: Vec::new(),
        });
        self.storage.commit(writes).await?;
        self.status
            .ingested(records, bytes, Lsn(end).to_pg_string());
        Ok(())
    }
}

fn incompatible(table: &PostgresSourceTable, column: &str, what: &str) -> SourceError {
    SourceError::Invalid(format!(
        "incompatible schema change upstream: column {column} of {} {what} (drop and recreate the source)",
        table.qualified()
    ))
}

/// Quote an identifier for upstream SQL.
fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

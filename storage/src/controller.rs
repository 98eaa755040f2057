//! [`Storage`]: the one entry point the rest of Freshet uses.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use freshet_repr::Frontier;
use freshet_repr::{DIFF_COLUMN, GlobalId, Timestamp};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{oneshot, watch};

use crate::appender::{self, AppendCommand, AppendDone};
use crate::batch::{retag, stamp, times};
use crate::blob::Blob;
use crate::collection::{Collection, CollectionKind, ReadPolicy, Shared};
use crate::epoch::Fence;
use crate::error::{Result, StorageError};
use crate::holds::{HoldInfo, ReadHold};
use crate::listen::{Listen, Notify};
use crate::oracle::{TimestampOracle, wall_clock_ms};
use crate::part_cache::PartCache;
use crate::scan::SnapshotScan;
use crate::shard::{DurableShard, PartMeta, StagedPart, decode_state, delete_shard, part_prefix};
use crate::sinces::SinceLog;
use crate::txn_log::{self, TxnLog};

/// Tunables for [`Storage`]; the defaults suit the embedded server.
#[derive(Clone)]
pub struct StorageConfig {
    /// Directory of the transaction log segments.
    pub txn_dir: PathBuf,
    /// How often time advances when nobody writes, and how often background
    /// maintenance (since advancement, compaction, fencing checks) runs.
    pub tick: Duration,
    /// Flush table writes from the log into shards at least this often.
    pub flush_interval: Duration,
    /// ... or once this many bytes of table writes are pending.
    pub flush_bytes: usize,
    /// Compact a shard once it has more parts than this.
    pub max_parts: usize,
    /// Bytes of decoded parts kept in memory for later reads, over all
    /// collections (least recently used dropped first).
    pub part_cache_bytes: usize,
    /// The wall clock, in milliseconds (replaceable in tests).
    pub now: Arc<dyn Fn() -> Timestamp + Send + Sync>,
}

impl StorageConfig {
    /// Defaults for a data directory.
    pub fn new(data_dir: &Path) -> Self {
        StorageConfig {
            txn_dir: data_dir.join("txn"),
            tick: Duration::from_millis(1_000),
            flush_interval: Duration::from_secs(10),
            flush_bytes: 16 << 20,
            max_parts: 8,
            part_cache_bytes: 1 << 30,
            now: Arc::new(wall_clock_ms),
        }
    }
}

impl std::fmt::Debug for StorageConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageConfig")
            .field("txn_dir", &self.txn_dir)
            .field("tick", &self.tick)
            .field("flush_interval", &self.flush_interval)
            .field("flush_bytes", &self.flush_bytes)
            .field("max_parts", &self.max_parts)
            .field("part_cache_bytes", &self.part_cache_bytes)
            .finish_non_exhaustive()
    }
}

/// One table's share of a group commit: data columns plus a trailing
/// `diff` column (see [`write_batch`](crate::write_batch)).
#[derive(Clone, Debug)]
pub struct TableWrite {
    /// The table written.
    pub id: GlobalId,
    /// Rows to insert (diff > 0) or retract (diff < 0).
    pub updates: RecordBatch,
    /// More of the write, already in part files (see
    /// [`Storage::stage`]): a commit records only their names.
    pub staged: Vec<StagedPart>,
}

impl TableWrite {
    /// A write of `updates` (data columns plus a diff column) to `id`.
    pub fn new(id: GlobalId, updates: RecordBatch) -> Self {
        TableWrite {
            id,
            updates,
            staged: Vec::new(),
        }
    }

    /// Whether it changes anything.
    pub fn is_empty(&self) -> bool {
        self.updates.num_rows() == 0 && self.staged.iter().all(|p| p.rows() == 0)
    }
}

/// Replayed log records of one table, until it registers.
#[derive(Default)]
struct Recovered {
    updates: Vec<RecordBatch>,
    parts: Vec<PartMeta>,
}

/// One commit of a group: its writes, and the tables (with the times they
/// were read at) that must not have changed since.
struct CommitRequest {
    writes: Vec<TableWrite>,
    reads: Vec<(GlobalId, Timestamp)>,
}

/// A collection's frontiers and size, for introspection.
#[derive(Clone, Debug)]
pub struct CollectionInfo {
    /// The collection.
    pub id: GlobalId,
    /// Table or materialized.
    pub kind: CollectionKind,
    /// Reads below this are refused.
    pub since: Frontier,
    /// Every time below this is final.
    pub upper: Frontier,
    /// Durable parts in its shard.
    pub parts: usize,
    /// Of those, how many are small enough to be kept in the shard's
    /// state rather than in a file.
    pub inline_parts: usize,
    /// How far its dependents permit compaction (`None`: unconstrained).
    pub permission: Option<Timestamp>,
}

/// A materialized view's or sink's claim on its inputs' history: it
/// must be able to resume from `max(as_of, durable output upper - 1)`
/// (a view) or `max(as_of, progress)` (a sink, which has no collection
/// and says itself how far its target has durably come).
#[derive(Clone, Debug)]
struct Dependent {
    /// The committed `as_of` of its first output.
    as_of: Timestamp,
    /// The storage collections it reads.
    inputs: Vec<GlobalId>,
    /// A sink's reported resume time: every change after it is yet to
    /// reach the target durably (`None` until it reports).
    progress: Option<Timestamp>,
}

enum Command {
    Commit(CommitRequest, oneshot::Sender<Result<Timestamp>>),
    Flush(oneshot::Sender<Result<()>>),
    Shutdown,
}

struct Inner {
    blob: Arc<dyn Blob>,
    fence: Fence,
    oracle: TimestampOracle,
    config: StorageConfig,
    collections: RwLock<BTreeMap<GlobalId, Arc<Collection>>>,
    txn_upper: Arc<AtomicU64>,
    txn_watch: watch::Sender<Timestamp>,
    /// Compaction requirements of materialized views on their inputs.
    dependents: Mutex<BTreeMap<GlobalId, Dependent>>,
    /// Log records replayed at boot, waiting for their tables to register:
    /// updates, and staged parts the commits added.
    recovered: Mutex<HashMap<GlobalId, Recovered>>,
    /// Set once boot has collected orphans: compaction and periodic
    /// flushes wait for it.
    booted: AtomicBool,
    /// Set once a newer process fenced this one.
    fenced: watch::Sender<bool>,
    shutting_down: AtomicBool,
    /// The durable record of collections' logical sinces.
    sinces: Mutex<SinceLog>,
    /// Decoded parts of every collection, within a byte budget.
    cache: Arc<PartCache>,
    /// The table transaction log. Whoever holds it commits the next
    /// group: the commit thread, or a writer that found it idle (see
    /// [`Storage::submit`]).
    log: Mutex<TxnLog>,
    /// Commit requests sent to the commit thread and not yet committed
    /// by it; a writer commits on its own thread only when this is zero,
    /// so a queued request is never overtaken.
    queued_commits: AtomicUsize,
}

/// Durable collections, table transactions, timestamps and read holds.
///
/// `Storage` learns which collections exist only from the catalog's
/// implications ([`create_collection`](Storage::create_collection),
/// [`drop_collection`](Storage::drop_collection)); everything that reads data
/// does so through [`snapshot`](Storage::snapshot) or
/// [`listen`](Storage::listen) under a [`ReadHold`].
pub struct Storage {
    inner: Arc<Inner>,
    commands: mpsc::Sender<Command>,
    /// The appender thread's queue (`None` once shut down).
    appends: Mutex<Option<mpsc::Sender<AppendCommand>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("epoch", &self.inner.fence.epoch())
            .finish_non_exhaustive()
    }
}

impl Storage {
    /// Open storage for a process that holds `fence`: replay the transaction
    /// log, resume the oracle, and start the group-commit and maintenance
    /// threads. Collections must then be registered (boot applies the
    /// catalog), after which [`finish_boot`](Storage::finish_boot) runs.
    pub fn open(blob: Arc<dyn Blob>, fence: Fence, config: StorageConfig) -> Result<Storage> {
        fence.check()?;
        let records = txn_log::recover(&config.txn_dir)?;
        let consensus = Arc::clone(fence.consensus());
        let mut min_ts = records.iter().map(|r| r.ts + 1).max().unwrap_or(0);
        for key in consensus.list_keys("shard/")? {
            if let Some(v) = consensus.head(&key)? {
                let state = decode_state(&v.data)?;
                if let Some(u) = state.upper.as_option() {
                    min_ts = min_ts.max(*u);
                }
            }
        }
        let oracle = TimestampOracle::open(fence.clone(), min_ts, Arc::clone(&config.now))?;
        let sinces = SinceLog::open(fence.clone())?;
        let start = oracle.read_ts();
        let mut recovered: HashMap<GlobalId, Recovered> = HashMap::new();
        let n_records = records.len();
        for record in records {
            for (id, write) in record.writes {
                recovered
                    .entry(id)
                    .or_default()
                    .updates
                    .push(stamp(&write, record.ts)?);
            }
            for (id, meta) in record.staged {
                recovered.entry(id).or_default().parts.push(meta);
            }
        }
        tracing::info!(
            records = n_records,
            tables = recovered.len(),
            "replayed transaction log"
        );
        let log = TxnLog::create(&config.txn_dir, fence.epoch())?;
        let inner = Arc::new(Inner {
            blob,
            fence,
            oracle,
            collections: RwLock::new(BTreeMap::new()),
            dependents: Mutex::new(BTreeMap::new()),
            txn_upper: Arc::new(AtomicU64::new(start + 1)),
            txn_watch: watch::Sender::new(start + 1),
            recovered: Mutex::new(recovered),
            booted: AtomicBool::new(false),
            fenced: watch::Sender::new(false),
            shutting_down: AtomicBool::new(false),
            sinces: Mutex::new(sinces),
            cache: Arc::new(PartCache::new(config.part_cache_bytes)),
            config,
            log: Mutex::new(log),
            queued_commits: AtomicUsize::new(0),
        });
        let (tx, rx) = mpsc::channel();
        let committer = {
            let inner = Arc::clone(&inner);
            std::thread::Builder::new()
                .name("freshet-commit".into())
                .spawn(move || run_committer(inner, rx))?
        };
        let maintenance = {
            let inner = Arc::downgrade(&inner);
            std::thread::Builder::new()
                .name("freshet-maint".into())
                .spawn(move || run_maintenance(inner))?
        };
        let (appends, queued) = mpsc::channel();
        let appender = {
            let inner = Arc::clone(&inner);
            std::thread::Builder::new()
                .name("freshet-append".into())
                .spawn(move || {
                    appender::run(queued, |id, updates, expected, new_upper| {
                        inner
                            .collection(id)?
                            .compare_and_append(updates, expected, new_upper, true)
                            .inspect_err(|e| inner.note_error(e))
                    })
                })?
        };
        Ok(Storage {
            inner,
            commands: tx,
            appends: Mutex::new(Some(appends)),
            threads: Mutex::new(vec![committer, maintenance, appender]),
        })
    }

    /// The epoch this process holds.
    pub fn epoch(&self) -> u64 {
        self.inner.fence.epoch()
    }

    /// Becomes `true` once a newer process has fenced this one.
    pub fn fenced(&self) -> watch::Receiver<bool> {
        self.inner.fenced.subscribe()
    }

    /// Write table writes (data columns plus a diff column, as a
    /// [`TableWrite`]'s updates) for table `id` to a part file now, for a
    /// later commit to name in [`TableWrite::staged`]: how a `COPY` of
    /// any size holds only one part's rows in memory. Blocking file I/O.
    pub fn stage(&self, id: GlobalId, writes: &[RecordBatch]) -> Result<StagedPart> {
        let c = self.collection(id)?;
        let probe = TableWrite::new(
            id,
            writes.first().cloned().unwrap_or_else(|| {
                RecordBatch::new_empty(crate::batch::write_schema(&c.data_schema))
            }),
        );
        self.inner.validate(&probe)?;
        let schema = probe.updates.schema();
        let writer = c.state.lock().shard.part_writer();
        // Its bounds come with it, while its rows are at hand: reads after
        // the commit can skip it without decoding it first.
        let (meta, stats) = writer.write_staged(&schema, writes)?;
        c.state.lock().stats.insert(meta.key.clone(), stats);
        Ok(StagedPart { id, meta })
    }

    /// Delete staged parts no commit will name (the write failed or was
    /// rolled back). Ones left behind are collected at the next start.
    pub fn discard_staged(&self, parts: &[StagedPart]) {
        for p in parts {
            if let Ok(c) = self.collection(p.id) {
                c.state.lock().stats.remove(&p.meta.key);
            }
            if let Err(e) = self.inner.blob.delete(&p.meta.key) {
                tracing::warn!(key = %p.meta.key, error = %e, "could not delete a staged part");
            }
        }
    }

    /// Data columns `columns` of a staged part's table writes, then its
    /// diff column, decoding only those (key checks read a `COPY`'s
    /// staged keys back). Blocking file I/O.
    pub fn read_staged_columns(&self, part: &StagedPart, columns: &[usize]) -> Result<RecordBatch> {
        let c = self.collection(part.id)?;
        let writer = c.state.lock().shard.part_writer();
        let data = c.data_schema.fields().len();
        // In the updates schema: the data columns, then time, then diff.
        let mut want = columns.to_vec();
        want.push(data + 1);
        let (arrays, rows) = writer.read_columns(&part.meta, data, &want)?;
        let mut projection = columns.to_vec();
        projection.push(data);
        let schema = crate::batch::write_schema(&c.data_schema).project(&projection)?;
        Ok(RecordBatch::try_new_with_options(
            Arc::new(schema),
            arrays,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }

    /// Bytes of decoded parts the cache holds now (at most
    /// [`StorageConfig::part_cache_bytes`]).
    pub fn part_cache_bytes(&self) -> usize {
        self.inner.cache.bytes()
    }

    /// Register a collection (creating its shard if new). Idempotent.
    pub fn create_collection(
        &self,
        id: GlobalId,
        schema: SchemaRef,
        kind: CollectionKind,
    ) -> Result<()> {
        if self.inner.collections.read().contains_key(&id) {
            return Ok(());
        }
        let shard = DurableShard::open(id, Arc::clone(&self.inner.blob), self.inner.fence.clone())
            .inspect_err(|e| self.inner.note_error(e))?;
        let recorded_since = self.inner.sinces.lock().recorded(id);
        let collection = Collection::new(
            id,
            kind,
            schema,
            shard,
            recorded_since,
            Shared {
                cache: &self.inner.cache,
                txn_upper: &self.inner.txn_upper,
                txn_watch: &self.inner.txn_watch,
            },
        );
        if kind == CollectionKind::Table
            && let Some(recovered) = self.inner.recovered.lock().remove(&id)
        {
            let shard_upper = collection.state.lock().shard.upper().as_option().copied();
            // Parts of commits the shard already holds were flushed.
            for meta in recovered.parts {
                let ts = meta.max_time;
                if shard_upper.is_some_and(|u| ts >= u) {
                    collection.push_staged(ts, vec![meta])?;
                }
            }
            for b in recovered.updates {
                let keep = arrow::compute::kernels::cmp::gt_eq(
                    times(&b)?,
                    &arrow::array::UInt64Array::new_scalar(shard_upper.unwrap_or(Timestamp::MAX)),
                )?;
                let b = arrow::compute::filter_record_batch(&b, &keep)?;
                let b = retag(b, &collection.updates_schema)?;
                collection.push_pending(b);
            }
        }
        self.inner
            .collections
            .write()
            .insert(id, Arc::new(collection));
        Ok(())
    }

    /// Unregister a collection and delete its shard. Listeners end; holds
    /// on it become inert.
    pub fn drop_collection(&self, id: GlobalId) -> Result<()> {
        if self.inner.dependents.lock().remove(&id).is_some() {
            self.inner.publish_permissions();
        }
        let removed = self.inner.collections.write().remove(&id);
        if let Some(c) = removed {
            c.close_listeners();
            c.forget_cached();
            delete_shard(id, &self.inner.blob, &self.inner.fence)
                .inspect_err(|e| self.inner.note_error(e))?;
        }
        Ok(())
    }

    /// After boot registered every collection: flush replayed log records
    /// into shards, delete the replayed segments, and collect shards and
    /// parts that no registered collection owns (left by a crash). Views
    /// may already be appending: each collection's scan holds its
    /// `shard_writes`, so no append is between writing a part and naming
    /// it; merges, which write parts before they take that lock, start
    /// only once this is done.
    pub fn finish_boot(&self) -> Result<()> {
        self.inner.recovered.lock().clear();
        let (tx, rx) = oneshot::channel();
        self.send(Command::Flush(tx))?;
        rx.blocking_recv().map_err(|_| StorageError::ShutDown)??;
        let consensus = Arc::clone(self.inner.fence.consensus());
        let live: BTreeMap<GlobalId, Arc<Collection>> = self.inner.collections.read().clone();
        for key in consensus.list_keys("shard/")? {
            let Some(id) = key
                .strip_prefix("shard/")
                .and_then(|s| s.parse::<GlobalId>().ok())
            else {
                continue;
            };
            if !live.contains_key(&id) {
                tracing::info!(%id, "deleting shard of a dropped collection");
                delete_shard(id, &self.inner.blob, &self.inner.fence)?;
            }
        }
        for (id, c) in &live {
            let _writes = c.shard_writes.lock();
            let referenced: Vec<String> = {
                let state = c.state.lock();
                state.shard.parts().iter().map(|p| p.key.clone()).collect()
            };
            for key in self.inner.blob.list_keys(&part_prefix(*id))? {
                if !referenced.contains(&key) {
                    tracing::info!(%key, "deleting orphaned part");
                    self.inner.blob.delete(&key)?;
                }
            }
        }
        self.inner.booted.store(true, Ordering::SeqCst);
        Ok(())
    }

    fn send(&self, cmd: Command) -> Result<()> {
        self.commands.send(cmd).map_err(|_| StorageError::ShutDown)
    }

    fn collection(&self, id: GlobalId) -> Result<Arc<Collection>> {
        self.inner.collection(id)
    }

    /// Group-commit table writes atomically at one timestamp, returning it
    /// once the group is durable and visible.
    pub async fn commit(&self, writes: Vec<TableWrite>) -> Result<Timestamp> {
        self.commit_if_unchanged(writes, Vec::new()).await
    }

    /// [`commit`](Storage::commit), only if no table in `reads` has been
    /// written after the time paired with it (the time a transaction read
    /// it at); otherwise nothing is written and the commit fails with
    /// [`StorageError::ReadConflict`]. The check and the commit are one
    /// step of the group-commit thread, so no write can come between them:
    /// this is what makes a transaction that read, then wrote,
    /// serializable.
    pub async fn commit_if_unchanged(
        &self,
        writes: Vec<TableWrite>,
        reads: Vec<(GlobalId, Timestamp)>,
    ) -> Result<Timestamp> {
        let (tx, rx) = oneshot::channel();
        self.submit(CommitRequest { writes, reads }, tx)?;
        rx.await.map_err(|_| StorageError::ShutDown)?
    }

    /// [`commit`](Storage::commit) for threads outside an async runtime.
    pub fn commit_blocking(&self, writes: Vec<TableWrite>) -> Result<Timestamp> {
        let (tx, rx) = oneshot::channel();
        let request = CommitRequest {
            writes,
            reads: Vec::new(),
        };
        self.submit(request, tx)?;
        rx.blocking_recv().map_err(|_| StorageError::ShutDown)?
    }

    /// Commit `request` as a group of its own on the caller's thread when
    /// no group is being committed or waiting, else queue it for the
    /// commit thread, which gathers what arrives meanwhile into the next
    /// group.
    ///
    /// A lone writer so skips two thread hand-offs (to the commit thread
    /// and back to its runtime), as a PostgreSQL backend flushes the WAL
    /// itself; under load the groups form as before. The caller's thread
    /// is held for the log write and its `fdatasync` (about 0.1 ms here),
    /// which only happens when nothing else is committing.
    fn submit(
        &self,
        request: CommitRequest,
        reply: oneshot::Sender<Result<Timestamp>>,
    ) -> Result<()> {
        if self.inner.queued_commits.load(Ordering::SeqCst) == 0
            && !self.inner.shutting_down.load(Ordering::SeqCst)
            && let Some(mut log) = self.inner.log.try_lock()
        {
            self.inner
                .commit_or_refuse(&mut log, vec![(request, reply)]);
            return Ok(());
        }
        self.inner.queued_commits.fetch_add(1, Ordering::SeqCst);
        self.send(Command::Commit(request, reply)).inspect_err(|_| {
            self.inner.queued_commits.fetch_sub(1, Ordering::SeqCst);
        })
    }

    /// Flush pending table writes into shards now.
    pub fn flush_blocking(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Flush(tx))?;
        rx.blocking_recv().map_err(|_| StorageError::ShutDown)?
    }

    /// The strict-serializable read time: every write acknowledged before
    /// this call is visible at it.
    pub fn read_ts(&self) -> Timestamp {
        self.inner.oracle.read_ts()
    }

    /// A collection's `(since, upper)`.
    pub fn frontiers(&self, id: GlobalId) -> Result<(Frontier, Frontier)> {
        Ok(self.collection(id)?.frontiers())
    }

    /// Hold `id` readable at `time` until the returned hold is dropped.
    pub fn acquire_read_hold(&self, id: GlobalId, time: Timestamp) -> Result<ReadHold> {
        let c = self.collection(id)?;
        c.acquire_hold(time)?;
        Ok(ReadHold::new(id, time, Arc::downgrade(&c)))
    }

    /// Every live read hold.
    pub fn read_holds(&self) -> Vec<HoldInfo> {
        let collections = self.inner.collections.read();
        let mut out = Vec::new();
        for (id, c) in collections.iter() {
            let state = c.state.lock();
            out.extend(state.holds.iter().map(|(time, count)| HoldInfo {
                id: *id,
                time,
                count,
            }));
        }
        out
    }

    /// Every registered collection with its frontiers.
    pub fn collections(&self) -> Vec<CollectionInfo> {
        let collections = self.inner.collections.read();
        collections
            .values()
            .map(|c| {
                let state = c.state.lock();
                CollectionInfo {
                    id: c.id,
                    kind: c.kind,
                    since: Frontier::at(state.since),
                    upper: c.upper_locked(&state),
                    parts: state.shard.parts().len(),
                    inline_parts: state
                        .shard
                        .parts()
                        .iter()
                        .filter(|p| p.inline.is_some())
                        .count(),
                    permission: state.permission,
                }
            })
            .collect()
    }

    /// Set how a collection's since advances.
    pub fn set_read_policy(&self, id: GlobalId, policy: ReadPolicy) -> Result<()> {
        self.collection(id)?.state.lock().policy = policy;
        Ok(())
    }

    /// Refuse reads of `id` below `floor` (a scheduled view's first
    /// refresh). The since never moves back.
    pub fn raise_since(&self, id: GlobalId, floor: Timestamp) -> Result<()> {
        self.collection(id)?.raise_since(floor);
        Ok(())
    }

    /// Admit `dependent`'s compaction requirement on `inputs`: from now on
    /// their since stays at or below `max(as_of, dependent's durable upper
    /// - 1)`, the time it would resume from after a crash. Called when the
    /// catalog transaction creating `dependent` is applied, and for every
    /// materialized view at boot before compaction resumes; released when
    /// `dependent`'s collection is dropped. The caller holds the inputs at
    /// `as_of` while it commits (or, at boot, nothing has compacted yet).
    pub fn admit_dependent(&self, dependent: GlobalId, as_of: Timestamp, inputs: Vec<GlobalId>) {
        self.inner.dependents.lock().insert(
            dependent,
            Dependent {
                as_of,
                inputs,
                progress: None,
            },
        );
        self.inner.publish_permissions();
    }

    /// A sink's target has durably received every change at times up to
    /// and including `resume` (it would resume reading its inputs there):
    /// its inputs may compact up to it. Reported only after the target
    /// committed, so the since never passes what a restart reads; after a
    /// restart the claim falls back to the sink's `as_of` until the sink
    /// reads its target's progress again. Never moves back.
    pub fn advance_dependent(&self, dependent: GlobalId, resume: Timestamp) {
        let advanced = match self.inner.dependents.lock().get_mut(&dependent) {
            Some(d) if d.progress.is_none_or(|p| p < resume) => {
                d.progress = Some(resume);
                true
            }
            _ => false,
        };
        if advanced {
            self.inner.publish_permissions();
        }
    }

    /// Release `dependent`'s claim (a dropped sink; a view's goes with
    /// its collection).
    pub fn release_dependent(&self, dependent: GlobalId) {
        if self.inner.dependents.lock().remove(&dependent).is_some() {
            self.inner.publish_permissions();
        }
    }

    /// The contents of `id` at `as_of` as batches of its schema: each row
    /// repeated by its multiplicity. Requires `since <= as_of < upper`.
    pub fn snapshot(&self, id: GlobalId, as_of: Timestamp) -> Result<Vec<RecordBatch>> {
        self.collection(id)?.snapshot(as_of)
    }

    /// The contents of `id` at `as_of`, to be read part by part (see
    /// [`SnapshotScan`]): a query holds one part decoded at a time, and
    /// skips parts its filters rule out. Requires `since <= as_of < upper`;
    /// the caller holds a read hold at `as_of` while it reads.
    pub fn scan(&self, id: GlobalId, as_of: Timestamp) -> Result<SnapshotScan> {
        self.collection(id)?.scan(as_of)
    }

    /// Updates to `id` at times after `as_of`, in time order with progress;
    /// `notify` (if any) runs after each event is queued.
    pub fn listen(&self, id: GlobalId, as_of: Timestamp, notify: Option<Notify>) -> Result<Listen> {
        self.collection(id)?.listen(as_of, notify)
    }

    /// Durably append updates to a non-table collection if its upper is
    /// `expected`, advancing it to `new_upper`.
    pub fn compare_and_append(
        &self,
        id: GlobalId,
        updates: &[RecordBatch],
        expected: &Frontier,
        new_upper: Frontier,
    ) -> Result<()> {
        self.collection(id)?
            .compare_and_append(updates, expected, new_upper, false)
            .inspect_err(|e| self.inner.note_error(e))
    }

    /// Append to a derived collection (a materialized view's output):
    /// visible at once — its upper moves, reads and listeners see the
    /// updates — and made durable as
    /// [`compare_and_append`](Storage::compare_and_append) does on
    /// storage's appender thread (see [`crate::appender`]): appends that
    /// continue one another are written together, and `done` hears each
    /// one's outcome, in queued order, once durable. Fails at once, with
    /// nothing visible, if `expected` is not the collection's upper.
    ///
    /// Visible before durable is safe for a derived collection: what a
    /// crash loses is computed again, the same, from durable inputs (see
    /// `Collection::publish`); its writer's read holds follow `done`.
    pub fn append_in_background(
        &self,
        id: GlobalId,
        updates: Vec<RecordBatch>,
        expected: Frontier,
        new_upper: Frontier,
        done: AppendDone,
    ) -> Result<()> {
        let appends = self.appends.lock();
        let queue = appends.as_ref().ok_or(StorageError::ShutDown)?;
        // Published under the queue's lock: appends reach the queue in
        // the order they became visible.
        self.collection(id)?
            .publish(&updates, &expected, &new_upper)?;
        queue
            .send(AppendCommand::Append {
                id,
                updates,
                expected,
                new_upper,
                done,
            })
            .map_err(|_| StorageError::ShutDown)
    }

    /// Wait until every background append queued so far is durable (or
    /// failed), so that a collection's shard holds what its writer last
    /// asked for (a view's output restarting in this process reads it).
    pub fn flush_appends(&self) -> Result<()> {
        let (answer, done) = mpsc::channel();
        {
            let appends = self.appends.lock();
            let queue = appends.as_ref().ok_or(StorageError::ShutDown)?;
            queue
                .send(AppendCommand::Flush(answer))
                .map_err(|_| StorageError::ShutDown)?;
        }
        done.recv().map_err(|_| StorageError::ShutDown)
    }

    /// The Arrow schema of a collection's data.
    pub fn schema(&self, id: GlobalId) -> Result<SchemaRef> {
        Ok(Arc::clone(&self.collection(id)?.data_schema))
    }

    /// Wait until `id`'s upper is beyond `time` (the collection is complete
    /// at `time`).
    pub async fn wait_for_upper(&self, id: GlobalId, time: Timestamp) -> Result<()> {
        let mut rx = self.collection(id)?.upper_watch.subscribe();
        rx.wait_for(|u| *u > time)
            .await
            .map_err(|_| StorageError::UnknownCollection(id))?;
        Ok(())
    }

    /// Stop background threads. Acknowledged writes are already durable.
    pub fn shutdown(&self) {
        self.inner.shutting_down.store(true, Ordering::SeqCst);
        let _ = self.commands.send(Command::Shutdown);
        // The appender writes what is queued, then stops.
        self.appends.lock().take();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Inner {
    fn collection(&self, id: GlobalId) -> Result<Arc<Collection>> {
        self.collections
            .read()
            .get(&id)
            .cloned()
            .ok_or(StorageError::UnknownCollection(id))
    }

    /// Recompute every collection's compaction permission from its
    /// dependents' committed `as_of` and durable output uppers. Runs on
    /// every maintenance tick, so advances are published in batches.
    fn publish_permissions(&self) {
        let dependents: Vec<(GlobalId, Dependent)> = self
            .dependents
            .lock()
            .iter()
            .map(|(id, d)| (*id, d.clone()))
            .collect();
        let collections = self.collections.read().clone();
        let mut permitted: BTreeMap<GlobalId, Timestamp> = BTreeMap::new();
        for (id, d) in dependents {
            let resume = match collections.get(&id).map(|c| c.durable_upper()) {
                // Sealed: it will never read its inputs again.
                Some(upper) if upper.is_closed() => continue,
                Some(upper) => upper
                    .as_option()
                    .map_or(d.as_of, |u| d.as_of.max(u.saturating_sub(1))),
                None => d.as_of.max(d.progress.unwrap_or(0)),
            };
            for input in d.inputs {
                let p = permitted.entry(input).or_insert(resume);
                *p = (*p).min(resume);
            }
        }
        for (id, c) in &collections {
            c.state.lock().permission = permitted.get(id).copied();
        }
    }

    fn tables(&self) -> Vec<Arc<Collection>> {
        self.collections
            .read()
            .values()
            .filter(|c| c.kind == CollectionKind::Table)
            .cloned()
            .collect()
    }

    fn note_error(&self, e: &StorageError) {
        if e.is_fenced() && !*self.fenced.borrow() {
            tracing::error!(error = %e, "a newer process took over the data directory; this process stops writing");
            self.fenced.send_replace(true);
        }
    }

    /// Check a write against its table before it is assigned a time.
    fn validate(&self, write: &TableWrite) -> Result<Arc<Collection>> {
        let c = self.collection(write.id)?;
        if c.kind != CollectionKind::Table {
            return Err(StorageError::InvalidUsage(format!(
                "{} is not a table",
                write.id
            )));
        }
        let schema = write.updates.schema();
        let n = schema.fields().len();
        let matches = n == c.data_schema.fields().len() + 1
            && schema.field(n - 1).name() == DIFF_COLUMN
            && schema.fields()[..n - 1]
                .iter()
                .zip(c.data_schema.fields().iter())
                .all(|(a, b)| a.data_type() == b.data_type());
        if !matches {
            return Err(StorageError::InvalidUsage(format!(
                "write to {} does not match its schema",
                write.id
            )));
        }
        if let Some(p) = write.staged.iter().find(|p| p.id != write.id) {
            return Err(StorageError::InvalidUsage(format!(
                "a part staged for {} in a write to {}",
                p.id, write.id
            )));
        }
        Ok(c)
    }

    /// Fail if a table in `reads` was written after the time it was read
    /// at, or is written by a commit accepted earlier in this group.
    fn check_unchanged(
        &self,
        reads: &[(GlobalId, Timestamp)],
        written_now: &BTreeSet<GlobalId>,
    ) -> Result<()> {
        for &(id, read_at) in reads {
            let c = self.collection(id)?;
            let last = c.last_write.load(Ordering::SeqCst);
            if last > read_at {
                return Err(StorageError::ReadConflict {
                    id,
                    read_at,
                    written_at: last,
                });
            }
            if written_now.contains(&id) {
                return Err(StorageError::ReadConflict {
                    id,
                    read_at,
                    written_at: self.oracle.read_ts().saturating_add(1),
                });
            }
        }
        Ok(())
    }

    /// Commit one group, or refuse it if a newer process took over.
    fn commit_or_refuse(
        &self,
        log: &mut TxnLog,
        requests: Vec<(CommitRequest, oneshot::Sender<Result<Timestamp>>)>,
    ) {
        if *self.fenced.borrow() {
            for (_, reply) in requests {
                let _ = reply.send(Err(StorageError::Fenced {
                    mine: self.fence.epoch(),
                    current: self.fence.current().unwrap_or(0),
                }));
            }
        } else {
            self.commit_group(log, requests);
        }
    }

    /// Commit one group: one timestamp, one log record, one fsync.
    fn commit_group(
        &self,
        log: &mut TxnLog,
        requests: Vec<(CommitRequest, oneshot::Sender<Result<Timestamp>>)>,
    ) {
        let mut accepted = Vec::new();
        // Tables written by requests accepted earlier in this group: they
        // commit at the group's time, after any read a later request made.
        let mut written_now: BTreeSet<GlobalId> = BTreeSet::new();
        for (CommitRequest { writes, reads }, reply) in requests {
            let checked = writes
                .iter()
                .map(|w| self.validate(w))
                .collect::<Result<Vec<_>>>()
                .and_then(|targets| {
                    self.check_unchanged(&reads, &written_now)?;
                    Ok(targets)
                });
            match checked {
                Ok(targets) => {
                    written_now.extend(writes.iter().filter(|w| !w.is_empty()).map(|w| w.id));
                    accepted.push((writes, targets, reply))
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            }
        }
        let result = (|| {
            let ts = self.oracle.allocate_write_ts()?;
            let flat: Vec<(GlobalId, RecordBatch)> = accepted
                .iter()
                .flat_map(|(writes, _, _)| writes.iter())
                .filter(|w| w.updates.num_rows() > 0)
                .map(|w| (w.id, w.updates.clone()))
                .collect();
            let staged: Vec<(GlobalId, &PartMeta)> = accepted
                .iter()
                .flat_map(|(writes, _, _)| writes.iter())
                .flat_map(|w| w.staged.iter().map(|p| (p.id, &p.meta)))
                .collect();
            if !flat.is_empty() || !staged.is_empty() {
                log.append(ts, &flat, &staged)?;
            }
            // After the fsync and before anyone is told: if a newer process
            // took over, it may already have replayed the log without this
            // record, so the write must not be acknowledged.
            self.fence.check()?;
            // The group is durable now: every write of it is made visible
            // and time advances even if handing one to its listeners
            // fails (the group's replies then carry that error), so
            // nothing durable is left out of the next flush.
            let mut visible = Ok(ts);
            for (writes, targets, _) in &accepted {
                for (w, c) in writes.iter().zip(targets) {
                    if w.updates.num_rows() > 0 {
                        c.push_pending(retag(stamp(&w.updates, ts)?, &c.updates_schema)?);
                    }
                    if !w.staged.is_empty()
                        && let Err(e) =
                            c.push_staged(ts, w.staged.iter().map(|p| p.meta.clone()).collect())
                    {
                        visible = Err(e);
                    }
                    if !w.is_empty() {
                        c.last_write.store(ts, Ordering::SeqCst);
                    }
                }
            }
            self.txn_upper.store(ts + 1, Ordering::SeqCst);
            self.txn_watch.send_replace(ts + 1);
            for t in self.tables() {
                t.broadcast_progress();
            }
            self.oracle.apply_write(ts);
            visible
        })();
        if let Err(e) = &result {
            self.note_error(e);
        }
        for (_, _, reply) in accepted {
            let _ = reply.send(match &result {
                Ok(ts) => Ok(*ts),
                Err(e) => Err(clone_error(e)),
            });
        }
    }

    /// Move every table's pending writes into its shard, then delete the log
    /// segments they came from.
    fn flush(&self, log: &mut TxnLog) -> Result<()> {
        let old = log.roll()?;
        let upper = self.txn_upper.load(Ordering::SeqCst);
        for t in self.tables() {
            t.flush_pending(upper)?;
        }
        txn_log::delete_segments(&self.config.txn_dir, &old)?;
        Ok(())
    }

    fn pending_bytes(&self) -> usize {
        self.tables()
            .iter()
            .map(|t| t.state.lock().pending_bytes)
            .sum()
    }
}

/// Errors are delivered to every writer of a failed group.
fn clone_error(e: &StorageError) -> StorageError {
    match e {
        StorageError::Fenced { mine, current } => StorageError::Fenced {
            mine: *mine,
            current: *current,
        },
        StorageError::ShutDown => StorageError::ShutDown,
        other => StorageError::Corruption(other.to_string()),
    }
}

fn run_committer(inner: Arc<Inner>, rx: mpsc::Receiver<Command>) {
    let mut last_flush = Instant::now();
    let mut last_tick = Instant::now();
    loop {
        let first = match rx.recv_timeout(inner.config.tick.saturating_sub(last_tick.elapsed())) {
            Ok(cmd) => Some(cmd),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let mut commits = Vec::new();
        let mut flushes = Vec::new();
        let mut shutdown = false;
        for cmd in first
            .into_iter()
            .chain(std::iter::from_fn(|| rx.try_recv().ok()))
        {
            match cmd {
                Command::Commit(request, reply) => commits.push((request, reply)),
                Command::Flush(reply) => flushes.push(reply),
                Command::Shutdown => shutdown = true,
            }
        }
        if !commits.is_empty() || last_tick.elapsed() >= inner.config.tick {
            // An empty group still advances time, so idle tables never stall
            // readers and read policies keep moving.
            let taken = commits.len();
            inner.commit_or_refuse(&mut inner.log.lock(), commits);
            // Only now may a writer commit on its own thread again.
            inner.queued_commits.fetch_sub(taken, Ordering::SeqCst);
            last_tick = Instant::now();
        }
        let booted = inner.booted.load(Ordering::SeqCst);
        let due = last_flush.elapsed() >= inner.config.flush_interval
            || inner.pending_bytes() >= inner.config.flush_bytes;
        if !flushes.is_empty() || (booted && due && !*inner.fenced.borrow()) {
            let result = inner.flush(&mut inner.log.lock());
            if let Err(e) = &result {
                inner.note_error(e);
                tracing::error!(error = %e, "flushing table writes failed");
            }
            last_flush = Instant::now();
            for reply in flushes {
                let _ = reply.send(match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(clone_error(e)),
                });
            }
        }
        if shutdown {
            return;
        }
    }
}

fn run_maintenance(inner: Weak<Inner>) {
    loop {
        let Some(inner) = inner.upgrade() else { return };
        if inner.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        let tick = inner.config.tick;
        if !*inner.fenced.borrow() {
            if let Err(e) = inner.fence.check() {
                inner.note_error(&e);
            }
            // Until boot has re-admitted every dependent's requirement
            // (recomputed from durable state), nothing may compact.
            if inner.booted.load(Ordering::SeqCst) {
                inner.publish_permissions();
                let collections: Vec<Arc<Collection>> =
                    inner.collections.read().values().cloned().collect();
                let sinces = collections
                    .iter()
                    .filter_map(|c| c.advance_since().map(|t| (c.id, t)))
                    .collect();
                // Record the sinces before compaction consolidates at them,
                // so a restart never starts a collection below one.
                let recorded = inner.sinces.lock().record(sinces);
                if let Err(e) = recorded {
                    inner.note_error(&e);
                    tracing::warn!(error = %e, "cannot record collections' sinces");
                    drop(inner);
                    std::thread::sleep(tick);
                    continue;
                }
                for c in collections {
                    if let Err(e) = c.maybe_compact(inner.config.max_parts) {
                        inner.note_error(&e);
                        tracing::warn!(id = %c.id, error = %e, "compaction failed");
                    }
                }
            }
        }
        drop(inner);
        std::thread::sleep(tick);
    }
}

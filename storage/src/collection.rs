//! The in-process state of one collection: its durable shard, decoded parts,
//! table writes not yet flushed from the transaction log, listeners and
//! read holds.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use freshet_repr::Frontier;
use freshet_repr::{GlobalId, Timestamp};
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};

use crate::batch::{retag, times, total_bytes, updates_schema};
use crate::consolidate::{self, PartView};
use crate::error::{Result, StorageError};
use crate::holds::HoldSet;
use crate::listen::{Listen, ListenEvent, Listener, Notify};
use crate::part_cache::PartCache;
use crate::part_stats::PartStats;
use crate::scan::{PartLeases, PartSource, ScanPart, SnapshotScan};
use crate::shard::{DurableShard, PartMeta, PartWriter, WrittenPart, check_append};

/// Columns just decoded from a part file, by index of the updates schema.
type FreshColumns = Vec<(usize, ArrayRef)>;

/// Parts at least this large (decoded) are merged only when the small
/// ones add up to a quarter of the collection (see
/// [`Collection::maybe_compact`]).
const LARGE_PART_BYTES: usize = 32 << 20;

/// A collection up to this size is merged whole whenever it has too many
/// parts.
const FULL_MERGE_BYTES: usize = 128 << 20;

/// Largest part a merge writes: merged output is split into parts of
/// about this size.
const MERGED_PART_BYTES: usize = 64 << 20;

/// What kind of collection this is, which decides who writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollectionKind {
    /// Written through the transaction log; its upper is the log's upper.
    Table,
    /// Written directly with `compare_and_append` (materialized view outputs,
    /// sources).
    Materialized,
}

/// How a collection's `since` advances when nothing holds it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadPolicy {
    /// Keep history for this many milliseconds behind the upper.
    LagBehindUpper(Timestamp),
}

impl Default for ReadPolicy {
    fn default() -> Self {
        ReadPolicy::LagBehindUpper(1_000)
    }
}

#[derive(Debug)]
pub(crate) struct CollectionState {
    pub shard: DurableShard,
    /// Table only: committed updates not yet flushed to the shard.
    pub pending: Vec<RecordBatch>,
    pub pending_bytes: usize,
    /// Table only: committed staged parts (their `time` set) not yet
    /// named by the shard.
    pub pending_parts: Vec<PartMeta>,
    pub listeners: Vec<Listener>,
    pub holds: HoldSet,
    /// The logical since: reads below it are refused.
    pub since: Timestamp,
    pub policy: ReadPolicy,
    /// How far dependents (materialized views reading this collection)
    /// permit compaction: the least time one of them may still resume
    /// from. `None`: no dependent constrains it.
    pub permission: Option<Timestamp>,
    /// Column bounds of the parts decoded since this process started.
    pub stats: HashMap<String, Arc<PartStats>>,
    /// Materialized only: appends made visible before they are durable
    /// (see [`Collection::publish`]), oldest first: how many batches each
    /// added to the end of `pending`, and the upper it moved to.
    pub published: VecDeque<(usize, Frontier)>,
}

/// One registered collection.
#[derive(Debug)]
pub struct Collection {
    pub(crate) id: GlobalId,
    pub(crate) kind: CollectionKind,
    pub(crate) data_schema: SchemaRef,
    pub(crate) updates_schema: SchemaRef,
    pub(crate) state: Mutex<CollectionState>,
    /// Held by whatever commits to the shard (appends, compaction), taken
    /// before `state`: a view's append writes its part and commit holding
    /// only this, so readers and the view's next (published) append do not
    /// wait for its files.
    pub(crate) shard_writes: Mutex<()>,
    /// Decoded parts, shared with every collection (see [`PartCache`]).
    cache: Arc<PartCache>,
    /// Scans running: part files they read outlive a compaction until
    /// they end.
    leases: Arc<PartLeases>,
    /// For tables, the transaction log's upper, shared by every table.
    txn_upper: Arc<AtomicU64>,
    /// Published upper (for tables, a clone of the log's watch).
    pub(crate) upper_watch: watch::Sender<Timestamp>,
    /// For tables, the time of the latest commit that changed it (0: none
    /// since this process started). A transaction cannot outlive the
    /// process, and every time this process reads at is past every write
    /// boot replayed, so 0 is a safe start.
    pub(crate) last_write: AtomicU64,
}

/// What every collection of a `Storage` shares.
pub(crate) struct Shared<'a> {
    /// The decoded-part cache.
    pub cache: &'a Arc<PartCache>,
    /// The transaction log's upper (tables' upper).
    pub txn_upper: &'a Arc<AtomicU64>,
    /// Its published form.
    pub txn_watch: &'a watch::Sender<Timestamp>,
}

impl Collection {
    pub(crate) fn new(
        id: GlobalId,
        kind: CollectionKind,
        data_schema: SchemaRef,
        shard: DurableShard,
        recorded_since: Option<Timestamp>,
        shared: Shared<'_>,
    ) -> Self {
        // The since recorded before a restart may be ahead of the shard's
        // (which only compaction advances): never go back behind it.
        let since = shard
            .since()
            .as_option()
            .copied()
            .unwrap_or(Timestamp::MAX)
            .max(recorded_since.unwrap_or(0));
        let upper_watch = match kind {
            CollectionKind::Table => shared.txn_watch.clone(),
            CollectionKind::Materialized => {
                watch::Sender::new(shard.upper().as_option().copied().unwrap_or(Timestamp::MAX))
            }
        };
        Collection {
            id,
            kind,
            updates_schema: updates_schema(&data_schema),
            data_schema,
            state: Mutex::new(CollectionState {
                shard,
                pending: vec![],
                pending_bytes: 0,
                pending_parts: vec![],
                listeners: vec![],
                holds: HoldSet::default(),
                since,
                policy: ReadPolicy::default(),
                permission: None,
                stats: HashMap::new(),
                published: VecDeque::new(),
            }),
            shard_writes: Mutex::new(()),
            cache: Arc::clone(shared.cache),
            leases: Arc::default(),
            txn_upper: Arc::clone(shared.txn_upper),
            upper_watch,
            last_write: AtomicU64::new(0),
        }
    }

    /// The collection's upper: for tables, the transaction log's; for a
    /// materialized collection, the latest published append's, else the
    /// shard's.
    pub(crate) fn upper_locked(&self, state: &CollectionState) -> Frontier {
        match self.kind {
            CollectionKind::Table => Frontier::at(self.txn_upper.load(Ordering::SeqCst)),
            CollectionKind::Materialized => match state.published.back() {
                Some((_, upper)) => upper.clone(),
                None => state.shard.upper().clone(),
            },
        }
    }

    pub(crate) fn frontiers(&self) -> (Frontier, Frontier) {
        let state = self.state.lock();
        (Frontier::at(state.since), self.upper_locked(&state))
    }

    fn check_readable(
        &self,
        state: &CollectionState,
        as_of: Timestamp,
        need_upper: bool,
    ) -> Result<()> {
        let upper = self.upper_locked(state);
        if as_of < state.since || (need_upper && upper.less_equal(&as_of)) {
            return Err(StorageError::InvalidReadTime {
                id: self.id,
                as_of,
                since: Frontier::at(state.since),
                upper,
            });
        }
        Ok(())
    }

    /// Decoded parts and pending updates, loading parts into the cache.
    fn part_views(&self, state: &mut CollectionState) -> Result<Vec<PartView>> {
        let metas: Vec<PartMeta> = state
            .shard
            .parts()
            .iter()
            .chain(&state.pending_parts)
            .cloned()
            .collect();
        let mut views = self.load_views(state, &metas)?;
        for p in &state.pending {
            views.push(PartView {
                max_time: times(p)?.values().iter().copied().max().unwrap_or(0),
                updates: Arc::new(p.clone()),
            });
        }
        Ok(views)
    }

    /// Columns `want` (of the updates schema) of part `meta`: cached ones
    /// from the cache, the rest decoded from its file in one read. The
    /// columns read from the file are returned apart, for the caller to
    /// cache (or not: a part compacted away meanwhile is not worth it).
    fn part_columns(
        &self,
        meta: &PartMeta,
        reader: &PartWriter,
        want: &[usize],
    ) -> Result<(Vec<ArrayRef>, FreshColumns)> {
        let mut columns: Vec<Option<ArrayRef>> =
            want.iter().map(|c| self.cache.get(&meta.key, *c)).collect();
        let missing: Vec<usize> = want
            .iter()
            .zip(&columns)
            .filter(|(_, a)| a.is_none())
            .map(|(c, _)| *c)
            .collect();
        let mut fresh = Vec::new();
        if !missing.is_empty() {
            let (read, _) = reader.read_columns(meta, self.data_schema.fields().len(), &missing)?;
            fresh = missing.into_iter().zip(read).collect::<Vec<_>>();
            for (slot, c) in columns.iter_mut().zip(want) {
                if slot.is_none() {
                    *slot = fresh
                        .iter()
                        .find(|(f, _)| f == c)
                        .map(|(_, a)| Arc::clone(a));
                }
            }
        }
        let columns = columns
            .into_iter()
            .map(|a| {
                a.ok_or_else(|| {
                    StorageError::InvalidUsage(format!("column asked twice of part {}", meta.key))
                })
            })
            .collect::<Result<_>>()?;
        Ok((columns, fresh))
    }

    /// The parts `metas`, decoded whole (through the cache); the caller
    /// holds the state lock, so every part is still the collection's.
    fn load_views(&self, state: &mut CollectionState, metas: &[PartMeta]) -> Result<Vec<PartView>> {
        let reader = state.shard.part_writer();
        let all: Vec<usize> = (0..self.updates_schema.fields().len()).collect();
        let mut views = Vec::with_capacity(metas.len());
        for meta in metas {
            let (columns, fresh) = self.part_columns(meta, &reader, &all)?;
            for (c, array) in fresh {
                self.cache.insert(&meta.key, c, array);
            }
            views.push(PartView {
                updates: Arc::new(RecordBatch::try_new(
                    Arc::clone(&self.updates_schema),
                    columns,
                )?),
                max_time: meta.max_time,
            });
        }
        Ok(views)
    }

    /// Consolidated contents at `as_of`.
    pub(crate) fn snapshot(self: &Arc<Self>, as_of: Timestamp) -> Result<Vec<RecordBatch>> {
        self.scan(as_of)?.read_all()
    }

    /// A read of the collection at `as_of`, part by part (see
    /// [`SnapshotScan`]).
    pub(crate) fn scan(self: &Arc<Self>, as_of: Timestamp) -> Result<SnapshotScan> {
        let state = self.state.lock();
        self.check_readable(&state, as_of, true)?;
        let mut parts = Vec::new();
        for meta in state.shard.parts().iter().chain(&state.pending_parts) {
            // A staged part is entirely at its commit's time.
            if meta.time.is_some_and(|t| t > as_of) {
                continue;
            }
            parts.push(ScanPart {
                source: PartSource::Stored(meta.clone()),
                rows: meta.rows,
                positive: meta.positive || meta.consolidated,
                unit: meta.unit_diffs,
                max_time: meta.max_time,
                stats: state.stats.get(&meta.key).cloned(),
            });
        }
        for batch in &state.pending {
            let d = crate::batch::diffs(batch)?.values();
            parts.push(ScanPart {
                source: PartSource::Memory(Arc::new(batch.clone())),
                rows: batch.num_rows(),
                positive: d.iter().all(|x| *x > 0),
                unit: d.iter().all(|x| *x == 1),
                max_time: times(batch)?.values().iter().copied().max().unwrap_or(0),
                stats: None,
            });
        }
        let writer = state.shard.part_writer();
        let lease = self.leases.acquire(writer.clone());
        drop(state);
        self.stored_stats(&writer, &mut parts);
        Ok(SnapshotScan::new(
            Arc::clone(self),
            as_of,
            parts,
            writer,
            lease,
        ))
    }

    /// Whether the shard (or the flush to come) still names part `key`.
    fn is_live(state: &CollectionState, key: &str) -> bool {
        state
            .shard
            .parts()
            .iter()
            .chain(&state.pending_parts)
            .any(|p| p.key == key)
    }

    /// Fill in the bounds of stored parts not known since this process
    /// started from their files' footers (under the scan's lease, without
    /// the lock), and keep them. A part without stored bounds (written
    /// before they were stored) or whose footer cannot be read is left
    /// unbounded: it is read, and the read computes them.
    fn stored_stats(&self, writer: &PartWriter, parts: &mut [ScanPart]) {
        let data = &self.data_schema.fields()[..];
        let mut found = Vec::new();
        for part in parts.iter_mut().filter(|p| p.stats.is_none()) {
            let PartSource::Stored(meta) = &part.source else {
                continue;
            };
            match writer.stored_stats(meta, data) {
                Ok(Some(stats)) => {
                    part.stats = Some(Arc::clone(&stats));
                    found.push((meta.key.clone(), stats));
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(id = %self.id, part = %meta.key, error = %e,
                        "no stored bounds; the part is read whole");
                }
            }
        }
        if found.is_empty() {
            return;
        }
        let mut state = self.state.lock();
        for (key, stats) in found {
            if Self::is_live(&state, &key) {
                state.stats.insert(key, stats);
            }
        }
    }

    /// Data columns `columns` of a part's updates, with its time and diff
    /// columns: from the cache, or decoded from its file and (while the
    /// part is still the collection's) cached. A part whose bounds are
    /// not known (written before parts stored them) has every column
    /// decoded on its first read, to note them.
    pub(crate) fn load_part(
        &self,
        meta: &PartMeta,
        writer: &PartWriter,
        columns: &[usize],
    ) -> Result<RecordBatch> {
        let n = self.data_schema.fields().len();
        let bounded = self.state.lock().stats.contains_key(&meta.key);
        let mut want: Vec<usize> = if bounded {
            columns.to_vec()
        } else {
            (0..n).collect()
        };
        want.extend([n, n + 1]);
        let (arrays, fresh) = self.part_columns(meta, writer, &want)?;
        let updates = RecordBatch::try_new(Arc::new(self.updates_schema.project(&want)?), arrays)?;
        let stats = (!bounded).then(|| PartStats::compute(&updates, n));
        {
            let mut state = self.state.lock();
            // A part a compaction replaced during the scan is read from
            // its leased file but not cached: nothing would read it again.
            if Self::is_live(&state, &meta.key) {
                if let Some(stats) = stats {
                    state.stats.insert(meta.key.clone(), stats);
                }
                for (c, array) in fresh {
                    if c >= n || columns.contains(&c) {
                        self.cache.insert(&meta.key, c, array);
                    }
                }
            }
        }
        if bounded {
            return Ok(updates);
        }
        let mut projection = columns.to_vec();
        projection.extend([n, n + 1]);
        Ok(updates.project(&projection)?)
    }

    /// Updates after `as_of`, then live updates and progress.
    pub(crate) fn listen(&self, as_of: Timestamp, notify: Option<Notify>) -> Result<Listen> {
        let (tx, rx) = mpsc::unbounded_channel();
        let listener = Listener { tx, notify };
        let mut state = self.state.lock();
        self.check_readable(&state, as_of, false)?;
        for view in self.part_views(&mut state)? {
            if view.max_time <= as_of {
                continue;
            }
            let keep = arrow::compute::kernels::cmp::gt(
                times(&view.updates)?,
                &UInt64Array::new_scalar(as_of),
            )?;
            let later = filter_record_batch(&view.updates, &keep)?;
            if later.num_rows() > 0 {
                listener.send(ListenEvent::Updates(later));
            }
        }
        listener.send(ListenEvent::Progress(self.upper_locked(&state)));
        state.listeners.push(listener);
        Ok(Listen { rx })
    }

    /// Table only: add committed updates (already stamped) from the log.
    pub(crate) fn push_pending(&self, updates: RecordBatch) {
        let mut state = self.state.lock();
        if updates.num_rows() == 0 {
            return;
        }
        state.pending_bytes += total_bytes(std::slice::from_ref(&updates));
        state
            .listeners
            .retain(|l| l.send(ListenEvent::Updates(updates.clone())));
        state.pending.push(updates);
    }

    /// Table only: add committed staged parts at `ts` (the files exist;
    /// the shard names them at the next flush) and hand listeners their
    /// rows, read back from the files.
    ///
    /// Every part is recorded before any is read, so a failed read (the
    /// disk failing under a file just written) cannot keep a durable
    /// commit from reaching the shard; it fails the commit's reply (an
    /// ambiguous commit, as a lost connection is) and is logged, and the
    /// table's listeners miss those rows until a restart.
    pub(crate) fn push_staged(&self, ts: Timestamp, parts: Vec<PartMeta>) -> Result<()> {
        let mut state = self.state.lock();
        let first = state.pending_parts.len();
        for mut meta in parts {
            meta.time = Some(ts);
            meta.max_time = ts;
            state.pending_parts.push(meta);
        }
        if state.listeners.is_empty() {
            return Ok(());
        }
        for i in first..state.pending_parts.len() {
            let meta = state.pending_parts[i].clone();
            let batches = state.shard.load_part(&meta).inspect_err(|e| {
                tracing::error!(id = %self.id, part = %meta.key, error = %e,
                    "a committed part could not be read back for this table's listeners");
            })?;
            for b in batches {
                let b = retag(b, &self.updates_schema)?;
                state
                    .listeners
                    .retain(|l| l.send(ListenEvent::Updates(b.clone())));
            }
        }
        Ok(())
    }

    /// Tell listeners the upper advanced.
    pub(crate) fn broadcast_progress(&self) {
        let mut state = self.state.lock();
        if state.listeners.is_empty() {
            return;
        }
        let upper = self.upper_locked(&state);
        state
            .listeners
            .retain(|l| l.send(ListenEvent::Progress(upper.clone())));
    }

    /// Table only: move pending updates into the shard, advancing its upper.
    pub(crate) fn flush_pending(&self, new_upper: Timestamp) -> Result<()> {
        let _writes = self.shard_writes.lock();
        let mut state = self.state.lock();
        let expected = state.shard.upper().clone();
        if !expected.less_than(&new_upper)
            && state.pending.is_empty()
            && state.pending_parts.is_empty()
        {
            return Ok(());
        }
        let pending = std::mem::take(&mut state.pending);
        let parts = std::mem::take(&mut state.pending_parts);
        match state.shard.compare_and_append(
            &self.updates_schema,
            &pending,
            &parts,
            &expected,
            Frontier::at(new_upper),
        ) {
            Ok(written) => {
                if let Some(part) = &written {
                    self.note_written(&mut state, part);
                }
                state.pending_bytes = 0;
                Ok(())
            }
            Err(e) => {
                state.pending = pending;
                state.pending_parts = parts;
                Err(e)
            }
        }
    }

    /// Materialized only: make an append visible now — readers at times
    /// before `new_upper` see `updates`, listeners hear of them, the upper
    /// moves — ahead of its durable write ([`Self::compare_and_append`]
    /// with `published`), which the caller queues next.
    ///
    /// Safe for a derived collection because its writer is
    /// self-correcting: its contents at every time are a function of its
    /// inputs, which are durable, so what a crash loses here is written
    /// again, the same, when its dataflow resumes from the durable upper
    /// (which read holds on its inputs follow). A materialized view's
    /// output thus reaches readers without waiting for a part file and a
    /// consensus commit, as an index's arrangement already does.
    pub(crate) fn publish(
        &self,
        updates: &[RecordBatch],
        expected: &Frontier,
        new_upper: &Frontier,
    ) -> Result<()> {
        if self.kind == CollectionKind::Table {
            return Err(StorageError::InvalidUsage(format!(
                "{} is a table; write it through the transaction log",
                self.id
            )));
        }
        let mut state = self.state.lock();
        let upper = self.upper_locked(&state);
        if &upper != expected {
            return Err(StorageError::UpperMismatch {
                id: self.id,
                expected: expected.clone(),
                actual: upper,
            });
        }
        check_append(self.id, updates, expected, new_upper)?;
        let batches = updates
            .iter()
            .filter(|b| b.num_rows() > 0)
            .map(|b| retag(b.clone(), &self.updates_schema))
            .collect::<Result<Vec<_>>>()?;
        self.announce(&mut state, &batches, new_upper);
        state
            .published
            .push_back((batches.len(), new_upper.clone()));
        state.pending.extend(batches);
        Ok(())
    }

    /// Tell listeners of `batches` and that the upper moved to
    /// `new_upper`, and publish the upper.
    fn announce(&self, state: &mut CollectionState, batches: &[RecordBatch], new_upper: &Frontier) {
        for b in batches {
            state
                .listeners
                .retain(|l| l.send(ListenEvent::Updates(b.clone())));
        }
        state
            .listeners
            .retain(|l| l.send(ListenEvent::Progress(new_upper.clone())));
        self.upper_watch
            .send_replace(new_upper.as_option().copied().unwrap_or(Timestamp::MAX));
    }

    /// Materialized only: durably append updates and advance the upper,
    /// then tell readers. With `published`, the append was made visible by [`Self::publish`]
    /// (and any before it that this one's write joined): their batches
    /// leave memory for the part now holding them, and readers and
    /// listeners, who saw them then, hear nothing new.
    pub(crate) fn compare_and_append(
        &self,
        updates: &[RecordBatch],
        expected: &Frontier,
        new_upper: Frontier,
        published: bool,
    ) -> Result<()> {
        if self.kind == CollectionKind::Table {
            return Err(StorageError::InvalidUsage(format!(
                "{} is a table; write it through the transaction log",
                self.id
            )));
        }
        // Planned under the lock, written holding only `shard_writes`
        // (readers and the next publish go on meanwhile), taken in under
        // the lock again.
        let _writes = self.shard_writes.lock();
        let plan =
            self.state
                .lock()
                .shard
                .plan_append(updates, &[], expected, new_upper.clone())?;
        let written = match plan {
            Some(plan) => Some(plan.write(&self.updates_schema, updates)?),
            None => None,
        };
        let mut state = self.state.lock();
        let part = written.and_then(|(part, committed)| {
            state.shard.install(committed);
            part
        });
        if let Some(part) = &part {
            self.note_written(&mut state, part);
        }
        if published {
            // The published appends this one made durable leave memory:
            // the part now holds them.
            while state
                .published
                .front()
                .is_some_and(|(_, upper)| *upper <= new_upper)
            {
                if let Some((batches, _)) = state.published.pop_front() {
                    let batches = batches.min(state.pending.len());
                    state.pending.drain(..batches);
                }
            }
        } else {
            let batches: Vec<RecordBatch> = part
                .map(|part| part.appended.as_ref().clone())
                .into_iter()
                .collect();
            self.announce(&mut state, &batches, &new_upper);
        }
        Ok(())
    }

    /// Keep what is known of a part just written: its bounds, and its
    /// updates in the cache; forget the inline parts it replaced.
    fn note_written(&self, state: &mut CollectionState, part: &WrittenPart) {
        for key in &part.replaced {
            self.cache.remove(key);
            state.stats.remove(key);
        }
        state
            .stats
            .insert(part.meta.key.clone(), Arc::clone(&part.stats));
        self.cache.insert_batch(&part.meta.key, &part.batch);
    }

    pub(crate) fn acquire_hold(&self, t: Timestamp) -> Result<()> {
        let mut state = self.state.lock();
        if t < state.since {
            return Err(StorageError::InvalidReadTime {
                id: self.id,
                as_of: t,
                since: Frontier::at(state.since),
                upper: self.upper_locked(&state),
            });
        }
        state.holds.add(t);
        Ok(())
    }

    pub(crate) fn add_hold_unchecked(&self, t: Timestamp) {
        self.state.lock().holds.add(t);
    }

    pub(crate) fn release_hold(&self, t: Timestamp) {
        self.state.lock().holds.remove(t);
    }

    pub(crate) fn move_hold(&self, from: Timestamp, to: Timestamp) {
        let mut state = self.state.lock();
        state.holds.add(to);
        state.holds.remove(from);
    }

    /// Advance the logical since as far as the read policy allows, but
    /// never past a read hold or the dependents' compaction permission.
    /// Returns the since (`None` once the collection is sealed).
    pub(crate) fn advance_since(&self) -> Option<Timestamp> {
        let mut state = self.state.lock();
        let upper = self.upper_locked(&state).as_option().copied()?;
        // Never ahead of the present: a scheduled view's upper is its next
        // refresh, which may be far in the future.
        let upper = upper.min(self.txn_upper.load(Ordering::SeqCst));
        let ReadPolicy::LagBehindUpper(lag) = state.policy;
        let mut target = upper.saturating_sub(1).saturating_sub(lag);
        if let Some(held) = state.holds.min() {
            target = target.min(held);
        }
        if let Some(permitted) = state.permission {
            target = target.min(permitted);
        }
        if target > state.since {
            state.since = target;
        }
        Some(state.since)
    }

    /// Refuse reads below `floor` from now on (a materialized view whose
    /// first refresh is at `floor` has no contents before it).
    pub(crate) fn raise_since(&self, floor: Timestamp) {
        let mut state = self.state.lock();
        state.since = state.since.max(floor);
    }

    /// The upper as last written to consensus (a crash resumes from it).
    pub(crate) fn durable_upper(&self) -> Frontier {
        match self.kind {
            CollectionKind::Table => self.upper_locked(&self.state.lock()),
            CollectionKind::Materialized => self.state.lock().shard.durable_upper().clone(),
        }
    }

    /// Merge parts when there are too many, consolidating at the since.
    ///
    /// A small collection is merged whole. In a large one, parts of at
    /// least [`LARGE_PART_BYTES`] (a `COPY`'s staged parts, earlier merges)
    /// are left alone and only the small ones are merged, so a load of
    /// gigabytes is not rewritten every few flushes; once the small parts
    /// add up to a quarter of the collection, everything is merged, which
    /// cancels their retractions against the large parts and bounds the
    /// space they take. Merged output is written as parts of at most
    /// [`MERGED_PART_BYTES`].
    ///
    /// While the merge runs (without the lock), appends do not write the
    /// shard's inline parts out to a file (see [`MergingGuard`]): the
    /// merge may have chosen them, and would hold their updates twice.
    pub(crate) fn maybe_compact(&self, max_parts: usize) -> Result<()> {
        let (metas, views, since, writer) = {
            let mut state = self.state.lock();
            let parts = state.shard.parts();
            let total: usize = parts.iter().map(|p| p.bytes).sum();
            let small: Vec<&PartMeta> = parts
                .iter()
                .filter(|p| p.bytes < LARGE_PART_BYTES)
                .collect();
            let small_bytes: usize = small.iter().map(|p| p.bytes).sum();
            let chosen: Vec<PartMeta> = if total <= FULL_MERGE_BYTES || small_bytes * 4 > total {
                if parts.len() <= max_parts {
                    return Ok(());
                }
                parts.to_vec()
            } else {
                if small.len() <= max_parts {
                    return Ok(());
                }
                small.into_iter().cloned().collect()
            };
            let views = self.load_views(&mut state, &chosen)?;
            state.shard.set_merging(true);
            (chosen, views, state.since, state.shard.part_writer())
        };
        let _merging = MergingGuard(self);
        let keys: Vec<String> = metas.iter().map(|p| p.key.clone()).collect();
        // Merged and written without the lock: appends, commits and reads
        // of this collection go on meanwhile (the merged part of a large
        // table takes a while to write); only the commit below takes it.
        let (merged, consolidated) =
            consolidate::compact(self.id, &self.updates_schema, &views, since)?;
        drop(views);
        let rows = merged.num_rows();
        let chunk_rows = match total_bytes(std::slice::from_ref(&merged)) {
            0 => rows.max(1),
            bytes => (rows * MERGED_PART_BYTES / bytes).max(1),
        };
        let mut written: Vec<(PartMeta, Arc<RecordBatch>, Arc<PartStats>)> = Vec::new();
        for offset in (0..rows).step_by(chunk_rows) {
            let chunk = merged.slice(offset, chunk_rows.min(rows - offset));
            let max_time = times(&chunk)?.values().iter().copied().max().unwrap_or(0);
            match writer.write(&self.updates_schema, &chunk, max_time, consolidated) {
                Ok((meta, stats)) => written.push((meta, Arc::new(chunk), stats)),
                Err(e) => {
                    writer.delete(
                        &written
                            .iter()
                            .map(|(m, _, _)| m.key.clone())
                            .collect::<Vec<_>>(),
                    );
                    return Err(e);
                }
            }
        }
        let _writes = self.shard_writes.lock();
        let mut state = self.state.lock();
        let committed = state.shard.compact(
            &keys,
            written.iter().map(|(m, _, _)| m.clone()).collect(),
            Frontier::at(since),
        )?;
        if !committed {
            tracing::warn!(id = %self.id, "a compaction's parts changed under it; retried next tick");
            return Ok(());
        }
        for k in &keys {
            self.cache.remove(k);
            state.stats.remove(k);
        }
        let chunks = written.len();
        for (meta, batch, stats) in written {
            state.stats.insert(meta.key.clone(), stats);
            // Chunks of a larger merge share its buffers, which the cache
            // would count once per chunk: they are read from their files
            // when next needed instead.
            if chunks == 1 {
                self.cache.insert_batch(&meta.key, &batch);
            }
        }
        drop(state);
        // The replaced files go after the lock: a view's shard can have
        // hundreds of small parts, and unlinking them under the lock
        // stalled its appends and reads for 30-40 ms each second. A scan
        // still reading them keeps them until it ends.
        let merged_parts = keys.len();
        self.leases.retire(&writer, keys);
        tracing::debug!(id = %self.id, merged = merged_parts, rows, since, "compacted");
        Ok(())
    }

    /// Drop its decoded parts from the cache (the collection is being
    /// dropped).
    pub(crate) fn forget_cached(&self) {
        let mut state = self.state.lock();
        for meta in state.shard.parts().iter().chain(&state.pending_parts) {
            self.cache.remove(&meta.key);
        }
        state.stats.clear();
    }

    /// Close every listener (the collection is being dropped).
    pub(crate) fn close_listeners(&self) {
        self.state.lock().listeners.clear();
    }
}

/// Marks a collection's shard as being merged while it lives: appends
/// meanwhile add inline parts or part files but do not write the inline
/// parts out (they may be among the merge's inputs). Dropped before or
/// after the merge's commit, never while holding the collection's state
/// lock (it takes it).
struct MergingGuard<'a>(&'a Collection);

impl Drop for MergingGuard<'_> {
    fn drop(&mut self) {
        self.0.state.lock().shard.set_merging(false);
    }
}

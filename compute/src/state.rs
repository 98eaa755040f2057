//! What the controller and the workers share about each installed
//! dataflow: its frontiers, errors, holds and sizes ([`DataflowState`]),
//! and the holds peeks take on an index ([`IndexHold`]).
//!
//! Workers write what they observe (the sink's upper, an index's per-worker
//! uppers, arrangement sizes, errors); the controller and the coordinator
//! read it to choose times, serve peeks and report introspection.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use freshet_repr::{GlobalId, Timestamp};
use freshet_storage::ReadHold;
use parking_lot::{Mutex, RwLock};

use crate::error::{ComputeError, DataflowError, Result};
use crate::render::PublishedRows;
use crate::row::RowCodec;
use crate::subscribe_queue::SubscribeQueue;

/// Live facts about one installed dataflow, shared by the controller (for
/// reads and introspection) and the worker that writes its output.
#[derive(Debug)]
pub struct DataflowState {
    /// The object maintained.
    pub id: GlobalId,
    /// For an index: how its keys and its rows are encoded.
    pub(crate) index_codecs: Option<IndexCodecs>,
    /// For a subscribe: where its updates go.
    pub(crate) subscribe: Option<Arc<SubscribeQueue>>,
    /// For an index: no error exists at times before this (0: unknown).
    errors_absent_through: AtomicU64,
    /// For an index: each worker's rows as of its last step, which peeks
    /// of one key read without waking the worker.
    published: RwLock<Vec<Option<Arc<PublishedRows>>>>,
    /// Inputs were read as of this time.
    pub as_of: Timestamp,
    /// Output began at this time.
    pub start: Timestamp,
    /// The collections it reads.
    pub inputs: Vec<GlobalId>,
    /// The output shard's upper as the sink last wrote it.
    upper: AtomicU64,
    hydrated: AtomicBool,
    /// An index's history behind its upper (ms): `RETAIN HISTORY`.
    history: AtomicU64,
    /// Set when the dataflow is dropped: failures after that (its output
    /// collection going away under a last write) are expected.
    pub(crate) dropped: AtomicBool,
    /// Set when it was torn down for holding too much memory (its state
    /// stays, failed, so reads report why).
    pub(crate) evicted: AtomicBool,
    installed_at: Instant,
    pub(crate) inner: Mutex<StateInner>,
    /// Where frontier reports go: the controller's hold follower.
    reports: FrontierReports,
}

/// Where a dataflow reports its output frontier as it advances: the
/// controller's hold follower (through `protocol::Report::Frontier`). A
/// function, so that the shared state does not depend on the protocol.
pub(crate) struct FrontierReports(Box<dyn Fn(GlobalId, Timestamp) + Send + Sync>);

impl FrontierReports {
    pub(crate) fn new(report: impl Fn(GlobalId, Timestamp) + Send + Sync + 'static) -> Self {
        FrontierReports(Box::new(report))
    }
}

impl std::fmt::Debug for FrontierReports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FrontierReports")
    }
}

#[derive(Debug, Default)]
pub(crate) struct StateInner {
    /// Current errors with their multiplicities.
    errors: BTreeMap<DataflowError, i64>,
    /// Updates and bytes held in arrangements, per worker.
    pub arranged: BTreeMap<usize, (i64, usize)>,
    /// Set when the dataflow cannot continue (storage failed under it, or
    /// its arrangements outgrew the server's bound).
    failure: Option<DataflowError>,
    /// Holds on the inputs, following the output upper.
    pub holds: Vec<ReadHold>,
    /// An index's completed times per worker (`None`: complete forever).
    index_uppers: BTreeMap<usize, Option<Timestamp>>,
    /// Times peeks of an index read at, with counts.
    peek_holds: BTreeMap<Timestamp, usize>,
    /// An index may be compacted up to here; peeks read at or after it.
    index_since: Timestamp,
    /// An index's distinct errors (its views' errors are in `errors`).
    index_errors: usize,
}

/// How far an index's compaction trails its upper (ms) by default, so
/// reads that choose a slightly older time still find it readable.
const INDEX_HISTORY: Timestamp = 1_000;

impl DataflowState {
    /// The state of dataflow `desc` as installed: holding its inputs with
    /// `holds`, output upper at its start.
    pub(crate) fn new(
        desc: &freshet_compute_types::DataflowDesc,
        holds: Vec<ReadHold>,
        index_codecs: Option<IndexCodecs>,
        subscribe: Option<Arc<SubscribeQueue>>,
        reports: FrontierReports,
    ) -> Arc<Self> {
        Arc::new(DataflowState {
            id: desc.id,
            reports,
            index_codecs,
            subscribe,
            errors_absent_through: AtomicU64::new(0),
            published: RwLock::new(Vec::new()),
            as_of: desc.as_of,
            start: desc.start,
            inputs: desc.plan.inputs().into_iter().collect(),
            upper: AtomicU64::new(desc.start),
            hydrated: AtomicBool::new(false),
            history: AtomicU64::new(INDEX_HISTORY),
            dropped: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            installed_at: Instant::now(),
            inner: Mutex::new(StateInner {
                holds,
                index_since: desc.as_of,
                ..StateInner::default()
            }),
        })
    }

    /// The output upper as last written.
    pub fn upper(&self) -> Timestamp {
        self.upper.load(Ordering::SeqCst)
    }

    /// Whether the output has been written past `start` (the initial
    /// snapshot is fully processed).
    pub fn hydrated(&self) -> bool {
        self.hydrated.load(Ordering::SeqCst)
    }

    /// How long ago the dataflow was installed.
    pub fn age(&self) -> std::time::Duration {
        self.installed_at.elapsed()
    }

    /// Why the dataflow stopped, if it did (storage failed under it, or it
    /// was evicted for holding too much memory).
    pub fn failure(&self) -> Option<DataflowError> {
        self.inner.lock().failure.clone()
    }

    /// Updates held in the dataflow's arrangements over all workers (as
    /// last reported; workers report every second).
    pub fn arranged_records(&self) -> i64 {
        self.inner.lock().arranged.values().map(|(r, _)| r).sum()
    }

    /// Bytes the dataflow's arrangements hold over all workers (keys,
    /// values, times, diffs and offsets; as last reported).
    pub fn arranged_bytes(&self) -> usize {
        self.inner.lock().arranged.values().map(|(_, b)| b).sum()
    }

    pub(crate) fn set_arranged(&self, worker: usize, records: i64, bytes: usize) {
        // A report racing an eviction: the workers are tearing it down.
        if self.evicted.load(Ordering::SeqCst) {
            return;
        }
        self.inner.lock().arranged.insert(worker, (records, bytes));
    }

    /// How many distinct errors the output currently holds.
    pub fn error_count(&self) -> usize {
        let inner = self.inner.lock();
        inner.errors.len() + inner.index_errors
    }

    /// An index's distinct errors at its upper, as its error worker last
    /// counted them.
    pub(crate) fn set_index_errors(&self, count: usize) {
        self.inner.lock().index_errors = count;
    }

    /// Count error changes written to (or found in) the output shard.
    pub(crate) fn record_errors(&self, errors: Vec<(DataflowError, i64)>) {
        let mut inner = self.inner.lock();
        for (e, d) in errors {
            let n = inner.errors.entry(e.clone()).or_default();
            *n += d;
            if *n == 0 {
                inner.errors.remove(&e);
            }
        }
    }

    /// A worker's part of the index reached `upper`; the index's upper is
    /// the least over workers. Returns how far that worker may compact:
    /// never past `read_ts` (the time strict-serializable reads choose, so
    /// such a read always finds the index readable), a peek's hold, or
    /// about a second behind the upper.
    pub(crate) fn index_progress(
        &self,
        worker: usize,
        workers: usize,
        upper: Option<Timestamp>,
        read_ts: Timestamp,
    ) -> Timestamp {
        let mut inner = self.inner.lock();
        inner.index_uppers.insert(worker, upper);
        let least = if inner.index_uppers.len() == workers {
            Some(
                inner
                    .index_uppers
                    .values()
                    .map(|u| u.unwrap_or(Timestamp::MAX))
                    .min()
                    .unwrap_or(Timestamp::MAX),
            )
        } else {
            None
        };
        if let Some(least) = least {
            let mut since = least
                .saturating_sub(self.history.load(Ordering::Relaxed))
                .min(read_ts)
                .max(self.as_of);
            if let Some((&held, _)) = inner.peek_holds.iter().next() {
                since = since.min(held);
            }
            inner.index_since = inner.index_since.max(since);
        }
        let since = inner.index_since;
        drop(inner);
        if let Some(least) = least
            && least > self.upper()
        {
            self.advance(least, Vec::new());
        }
        since
    }

    /// Keep `ms` of an index's history readable behind its upper.
    pub fn set_history(&self, ms: Timestamp) {
        self.history.store(ms, Ordering::Relaxed);
    }

    /// The earliest time a peek of the index may read at.
    pub fn index_since(&self) -> Timestamp {
        self.inner.lock().index_since
    }

    /// Record that the index has no error before `through` (`None`: it
    /// may have errors).
    pub(crate) fn set_errors_absent_through(&self, through: Option<Timestamp>) {
        self.errors_absent_through
            .store(through.unwrap_or(0), Ordering::SeqCst);
    }

    /// Worker `worker` published its part of the index's rows (`None`:
    /// it stopped maintaining them, so readers must ask it).
    pub(crate) fn publish_rows(&self, worker: usize, rows: Option<PublishedRows>) {
        let mut published = self.published.write();
        if published.len() <= worker {
            published.resize(worker + 1, None);
        }
        published[worker] = rows.map(Arc::new);
    }

    /// Worker `worker`'s part of the index's rows as last published.
    pub(crate) fn published_rows(&self, worker: usize) -> Option<Arc<PublishedRows>> {
        self.published.read().get(worker).cloned().flatten()
    }

    /// Whether the index certainly has no error at `time`.
    pub(crate) fn errors_absent_at(&self, time: Timestamp) -> bool {
        time < self.errors_absent_through.load(Ordering::SeqCst)
    }

    /// Hold the index readable at `time` (refused below its since).
    pub fn hold_index(self: &Arc<Self>, time: Timestamp) -> Result<IndexHold> {
        let mut inner = self.inner.lock();
        if time < inner.index_since {
            return Err(ComputeError::NotReadable {
                id: self.id,
                time,
                since: inner.index_since,
            });
        }
        *inner.peek_holds.entry(time).or_default() += 1;
        Ok(IndexHold {
            state: Arc::clone(self),
            time,
        })
    }

    /// Record an internal failure that stops the dataflow.
    pub(crate) fn fail(&self, message: String) {
        if self.dropped.load(Ordering::SeqCst) {
            tracing::debug!(dataflow = %self.id, %message, "dropped dataflow stopped");
            return;
        }
        let what = if self.subscribe.is_some() {
            "subscribe".to_string()
        } else {
            format!("materialized view {}", self.id)
        };
        self.fail_with(DataflowError::internal(format!("{what} failed: {message}")));
    }

    /// Record `error` as what stops the dataflow: reads of its output fail
    /// with it, and a subscribe ends with it.
    pub(crate) fn fail_with(&self, error: DataflowError) {
        tracing::error!(dataflow = %self.id, %error, "dataflow failed");
        if let Some(queue) = &self.subscribe {
            queue.fail(error.clone());
        }
        self.inner.lock().failure.get_or_insert(error);
    }

    /// Where a subscribe's worker sends its updates (`None`: not a
    /// subscribe).
    pub(crate) fn subscribe_queue(&self) -> Option<&SubscribeQueue> {
        self.subscribe.as_deref()
    }

    /// End a subscribe with `error`, which its consumer receives after
    /// what is already queued (an input was dropped, the server is
    /// shutting down). No effect on other dataflows.
    pub fn end_subscribe(&self, error: DataflowError) {
        if let Some(queue) = &self.subscribe {
            queue.fail(error);
        }
    }

    /// The sink wrote through `upper` with these error changes. Returns
    /// whether this made the dataflow hydrated.
    ///
    /// The new upper is reported to the controller, which moves the
    /// inputs' holds ([`Self::follow_upper`]); workers never touch holds.
    pub(crate) fn advance(&self, upper: Timestamp, errors: Vec<(DataflowError, i64)>) -> bool {
        self.record_errors(errors);
        self.upper.store(upper, Ordering::SeqCst);
        (self.reports.0)(self.id, upper);
        upper > self.start && !self.hydrated.swap(true, Ordering::SeqCst)
    }

    /// Let the inputs' holds follow the output's `upper` (the controller's
    /// answer to a `protocol::Report::Frontier`): inputs must stay readable at
    /// `upper - 1`, where a restart resumes.
    pub(crate) fn follow_upper(&self, upper: Timestamp) {
        let hold_at = upper.saturating_sub(1).max(self.as_of);
        let mut inner = self.inner.lock();
        for h in &mut inner.holds {
            if h.time() < hold_at
                && let Err(e) = h.downgrade(hold_at)
            {
                tracing::warn!(dataflow = %self.id, error = %e, "cannot downgrade input hold");
            }
        }
    }
}

/// Keeps an index readable at one time while a peek reads it; released on
/// drop.
#[derive(Debug)]
pub struct IndexHold {
    state: Arc<DataflowState>,
    time: Timestamp,
}

impl Drop for IndexHold {
    fn drop(&mut self) {
        let mut inner = self.state.inner.lock();
        if let Some(n) = inner.peek_holds.get_mut(&self.time) {
            *n -= 1;
            if *n == 0 {
                inner.peek_holds.remove(&self.time);
            }
        }
    }
}

/// How an index's keys and rows are encoded.
#[derive(Debug, Clone)]
pub(crate) struct IndexCodecs {
    pub key: Arc<RowCodec>,
    pub rows: Arc<RowCodec>,
}

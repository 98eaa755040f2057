//! The compute controller: timely workers on dedicated threads, driven by
//! one ordered stream of commands that every worker receives identically.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use arrow::array::RecordBatch;
use datafusion::common::ScalarValue;
use freshet_repr::{GlobalId, Timestamp};
use freshet_storage::{ReadHold, Storage};
use parking_lot::Mutex;
use timely::communication::initialize::WorkerGuards;

use crate::error::{ComputeError, DataflowError, Result};
use crate::plan::wire::PlanCodec;
use crate::plan::{DataflowDesc, Export};
use crate::render::{PeekPart, compile, compile_index_key, error_worker};
use crate::row::{Row, RowCodec};
use crate::subscribe::{SubscribeQueue, Subscription};
use crate::worker::{Command, run_worker};

/// Live facts about one installed dataflow, shared by the controller (for
/// reads and introspection) and the worker that writes its output.
#[derive(Debug)]
pub struct DataflowState {
    /// The object maintained.
    pub id: GlobalId,
    /// For an index: how its keys and its rows are encoded.
    index_codecs: Option<IndexCodecs>,
    /// For a subscribe: where its updates go.
    subscribe: Option<Arc<SubscribeQueue>>,
    /// For an index: no error exists at times before this (0: unknown).
    errors_absent_through: AtomicU64,
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
    dropped: AtomicBool,
    /// Set when it was torn down for holding too much memory (its state
    /// stays, failed, so reads report why).
    evicted: AtomicBool,
    installed_at: Instant,
    inner: Mutex<StateInner>,
}

#[derive(Debug, Default)]
struct StateInner {
    /// Current errors with their multiplicities.
    errors: BTreeMap<DataflowError, i64>,
    /// Updates and bytes held in arrangements, per worker.
    arranged: BTreeMap<usize, (i64, usize)>,
    /// Set when the dataflow cannot continue (storage failed under it, or
    /// its arrangements outgrew the server's bound).
    failure: Option<DataflowError>,
    /// Holds on the inputs, following the output upper.
    holds: Vec<ReadHold>,
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

    /// Whether the index certainly has no error at `time`.
    fn errors_absent_at(&self, time: Timestamp) -> bool {
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
    fn fail_with(&self, error: DataflowError) {
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
    pub(crate) fn advance(&self, upper: Timestamp, errors: Vec<(DataflowError, i64)>) -> bool {
        self.record_errors(errors);
        let mut inner = self.inner.lock();
        // Inputs must stay readable at `upper - 1`, where a restart resumes.
        let hold_at = upper.saturating_sub(1).max(self.as_of);
        for h in &mut inner.holds {
            if let Err(e) = h.downgrade(hold_at) {
                tracing::warn!(dataflow = %self.id, error = %e, "cannot downgrade input hold");
            }
        }
        drop(inner);
        self.upper.store(upper, Ordering::SeqCst);
        upper > self.start && !self.hydrated.swap(true, Ordering::SeqCst)
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
struct IndexCodecs {
    key: Arc<RowCodec>,
    rows: Arc<RowCodec>,
}

/// A peek on its way: every worker's answer, once each has it. Awaiting
/// it parks the requesting task, not a thread: workers wake it directly.
#[derive(Debug)]
pub struct PendingPeek {
    answers: futures::channel::mpsc::UnboundedReceiver<PeekPart>,
    workers: usize,
    rows: Arc<RowCodec>,
    _hold: IndexHold,
}

impl PendingPeek {
    /// All workers' answers as one batch of the index's rows (each
    /// repeated by its multiplicity; every column nullable), or the error
    /// the index holds at the peek's time. (The caller bounds the wait,
    /// e.g. with the statement timeout; dropping the future releases the
    /// index hold.)
    pub async fn wait(mut self) -> Result<std::result::Result<RecordBatch, DataflowError>> {
        use futures::StreamExt;
        let mut rows = Vec::new();
        for _ in 0..self.workers {
            match self.answers.next().await {
                Some(Ok(part)) => rows.extend(part),
                Some(Err(e)) => return Ok(Err(e)),
                None => return Err(ComputeError::ShutDown),
            }
        }
        let mut expanded = Vec::with_capacity(rows.len());
        for (row, n) in &rows {
            let n = usize::try_from(*n).map_err(|_| {
                ComputeError::PlanWire(format!("an index holds a row with multiplicity {n}"))
            })?;
            expanded.extend(std::iter::repeat_n(row, n));
        }
        Ok(Ok(self.rows.decode(expanded)?))
    }
}

/// Installs, runs and drops dataflows on a pool of timely workers.
pub struct ComputeController {
    storage: Arc<Storage>,
    senders: Mutex<Vec<mpsc::Sender<Command>>>,
    guards: Mutex<Option<WorkerGuards<()>>>,
    dataflows: Mutex<BTreeMap<GlobalId, Arc<DataflowState>>>,
    codec: PlanCodec,
    workers: usize,
    /// Bytes all dataflows' arrangements may hold together (see
    /// [`ComputeController::enforce_arrangement_limit`]).
    arrangement_limit: AtomicU64,
}

impl std::fmt::Debug for ComputeController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComputeController")
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

impl ComputeController {
    /// Start `workers` timely worker threads reading from `storage`;
    /// plans travel to them encoded by `codec`.
    pub fn start(workers: usize, storage: Arc<Storage>, codec: PlanCodec) -> Result<Self> {
        let workers = workers.max(1);
        let mut senders = Vec::with_capacity(workers);
        let mut receivers = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (tx, rx) = mpsc::channel();
            senders.push(tx);
            receivers.push(Some(rx));
        }
        let receivers = Arc::new(Mutex::new(receivers));
        let worker_storage = Arc::clone(&storage);
        let worker_codec = codec.clone();
        let guards = timely::execute(timely::Config::process(workers), move |worker| {
            let rx = receivers.lock()[worker.index()].take();
            if let Some(rx) = rx {
                run_worker(worker, rx, Arc::clone(&worker_storage), &worker_codec);
            }
        })
        .map_err(ComputeError::Start)?;
        tracing::info!(workers, "compute workers started");
        Ok(ComputeController {
            storage,
            senders: Mutex::new(senders),
            guards: Mutex::new(Some(guards)),
            dataflows: Mutex::new(BTreeMap::new()),
            codec,
            workers,
            arrangement_limit: AtomicU64::new(u64::MAX),
        })
    }

    /// Bound the bytes all dataflows' arrangements may hold together.
    pub fn set_arrangement_limit(&self, bytes: u64) {
        self.arrangement_limit.store(bytes, Ordering::Relaxed);
    }

    /// Keep the dataflows' arrangements within the server's bound: while
    /// the bytes they hold together (as workers last reported them, once a
    /// second) exceed it, the largest dataflow is evicted — torn down on
    /// the workers, its input holds released, and failed with 53200, which
    /// every read of its output (and a subscribe it feeds) then reports.
    /// The object stays in the catalog: dropping it, or restarting with a
    /// larger bound, is the way back. One object fails instead of the
    /// process being killed for memory. Returns the evicted dataflows.
    pub fn enforce_arrangement_limit(&self) -> Vec<GlobalId> {
        let limit = self.arrangement_limit.load(Ordering::Relaxed);
        let mut live: Vec<(u64, Arc<DataflowState>)> = self
            .dataflows()
            .into_iter()
            .filter(|d| !d.evicted.load(Ordering::SeqCst))
            .map(|d| (d.arranged_bytes() as u64, d))
            .collect();
        let mut total: u64 = live.iter().map(|(bytes, _)| bytes).sum();
        live.sort_by_key(|(bytes, _)| std::cmp::Reverse(*bytes));
        let mut evicted = Vec::new();
        for (bytes, state) in live {
            if total <= limit {
                break;
            }
            total -= bytes;
            self.evict(&state, bytes, limit);
            evicted.push(state.id);
        }
        evicted
    }

    fn evict(&self, state: &Arc<DataflowState>, bytes: u64, limit: u64) {
        let what = if state.subscribe.is_some() {
            "subscribe".to_string()
        } else if state.index_codecs.is_some() {
            format!("index {}", state.id)
        } else {
            format!("materialized view {}", state.id)
        };
        state.evicted.store(true, Ordering::SeqCst);
        state.fail_with(DataflowError {
            code: "53200".into(),
            message: format!(
                "{what} was stopped: its arrangements held {bytes} bytes, \
                 beyond the server's arrangement memory limit of {limit} bytes \
                 (--max-arrangement-memory); drop it, or restart with a larger limit"
            ),
        });
        {
            let mut inner = state.inner.lock();
            inner.holds.clear();
            inner.arranged.clear();
        }
        if let Err(e) = self.broadcast(|| Command::Drop(state.id)) {
            tracing::warn!(dataflow = %state.id, error = %e, "cannot tear down an evicted dataflow");
        }
    }

    /// The number of timely workers.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The plan as `EXPLAIN` shows it, each reduction annotated with how it
    /// is maintained (which depends on its aggregates, decided when the
    /// plan is compiled).
    pub fn explain(plan: &crate::plan::RelPlan) -> Result<String> {
        let mut strategies = Vec::new();
        compile(plan)?.reduce_strategies(&mut strategies);
        let mut strategies = strategies.into_iter();
        let mut out = String::new();
        for line in plan.to_string().lines() {
            out.push_str(line);
            if line.trim_start().starts_with("Reduce ")
                && let Some(s) = strategies.next()
            {
                out.push_str(" -- ");
                out.push_str(s);
            }
            out.push('\n');
        }
        Ok(out)
    }

    /// Check that `plan` survives its wire form and renders, without
    /// installing it: the planner calls this before committing a CREATE,
    /// so a committed view installs.
    pub fn validate(codec: &PlanCodec, plan: &crate::plan::RelPlan) -> Result<()> {
        Self::validate_export(codec, plan, Export::Shard)
    }

    /// [`Self::validate`] for a plan exported as `export` (an index's keys
    /// must also survive the wire form and compile).
    pub fn validate_export(
        codec: &PlanCodec,
        plan: &crate::plan::RelPlan,
        export: Export,
    ) -> Result<()> {
        let desc = DataflowDesc {
            id: GlobalId::User(0),
            export,
            plan: plan.clone(),
            as_of: 0,
            start: 0,
            refresh: None,
        };
        let decoded = codec.decode(&codec.encode(&desc)?)?;
        compile(&decoded.plan)?;
        compile_index_key(&decoded).map(|_| ())
    }

    /// Install the dataflow `desc`, whose inputs are readable at
    /// `desc.as_of` under `holds` (holds for inputs not covered are
    /// acquired here). The output collection must exist in storage.
    ///
    /// `as_of` and `start` are adjusted to resume where the output shard's
    /// upper says an earlier incarnation stopped.
    ///
    /// A plan that imports indexes' arrangements ([`RelPlan::ArrangedGet`])
    /// is replaced by `from_storage` (the same relation read from storage)
    /// when an index cannot serve the dataflow's start time (it is gone,
    /// or compacted past it, as after a restart).
    pub fn install(
        &self,
        desc: DataflowDesc,
        holds: Vec<ReadHold>,
        from_storage: Option<crate::plan::RelPlan>,
    ) -> Result<Arc<DataflowState>> {
        self.install_with(desc, holds, from_storage, None)
    }

    /// Whether every index `plan` imports is installed and readable at
    /// `time`.
    fn imports_readable(&self, plan: &crate::plan::RelPlan, time: Timestamp) -> bool {
        plan.imported_indexes().into_iter().all(|index| {
            self.dataflow(index)
                .is_some_and(|d| d.index_codecs.is_some() && d.index_since() <= time)
        })
    }

    /// Start a subscribe: install `desc` (exported as
    /// [`Export::Subscribe`], with a transient id) reading its inputs at
    /// `desc.as_of` under `holds`, with at most `limit` updates waiting
    /// for the consumer. Dropping the returned handle ends it.
    pub fn subscribe(
        self: &Arc<Self>,
        desc: DataflowDesc,
        holds: Vec<ReadHold>,
        from_storage: Option<crate::plan::RelPlan>,
        limit: usize,
    ) -> Result<Subscription> {
        if !matches!(desc.export, Export::Subscribe { .. }) {
            return Err(ComputeError::PlanWire(
                "a subscribe must export as Export::Subscribe".into(),
            ));
        }
        let codec = Arc::new(RowCodec::new(freshet_repr::nullable_schema(
            &desc.plan.schema(),
        ))?);
        let queue = Arc::new(SubscribeQueue::new(limit));
        let state = self.install_with(desc, holds, from_storage, Some(Arc::clone(&queue)))?;
        Ok(Subscription::new(Arc::clone(self), state, queue, codec))
    }

    fn install_with(
        &self,
        mut desc: DataflowDesc,
        mut holds: Vec<ReadHold>,
        from_storage: Option<crate::plan::RelPlan>,
        subscribe: Option<Arc<SubscribeQueue>>,
    ) -> Result<Arc<DataflowState>> {
        if self.dataflows.lock().contains_key(&desc.id) {
            return Err(ComputeError::AlreadyInstalled(desc.id));
        }
        // An index or subscribe has no shard: it always builds from `as_of`.
        let upper = match desc.export {
            Export::Index { .. } | Export::Subscribe { .. } => 0,
            Export::Shard => {
                let (_, upper) = self.storage.frontiers(desc.id)?;
                let Some(&upper) = upper.as_option() else {
                    // Sealed: the output is complete for all time.
                    tracing::info!(dataflow = %desc.id, "output is sealed; nothing to maintain");
                    let state = self.new_state(&desc, Vec::new(), None, None);
                    state.advance(Timestamp::MAX, Vec::new());
                    return Ok(state);
                };
                upper
            }
        };
        // Resume from the output's upper when there is one; inputs may
        // have compacted past it while nobody held them.
        let mut as_of = if upper > 0 { upper - 1 } else { desc.as_of };
        for input in desc.plan.inputs() {
            let (since, _) = self.storage.frontiers(input)?;
            if let Some(&s) = since.as_option() {
                as_of = as_of.max(s);
            }
        }
        desc.as_of = as_of;
        desc.start = as_of.max(upper);
        if let Some(from_storage) = from_storage
            && !self.imports_readable(&desc.plan, as_of)
        {
            tracing::info!(dataflow = %desc.id, as_of,
                "an index it would reuse cannot serve its start; reading storage instead");
            desc.plan = from_storage;
        }
        let mut acquired = Vec::new();
        for input in desc.plan.inputs() {
            let held = holds.iter().position(|h| h.id() == input);
            match held {
                Some(i) => {
                    let mut h = holds.swap_remove(i);
                    if h.time() < as_of {
                        h.downgrade(as_of)?;
                    }
                    acquired.push(h);
                }
                None => acquired.push(self.storage.acquire_read_hold(input, as_of)?),
            }
        }
        // Workers get the plan only in its wire form; decoding and
        // compiling it here first turns a plan they could not build into
        // an error for this request.
        let plan: Arc<[u8]> = self.codec.encode(&desc)?.into();
        let decoded = self.codec.decode(&plan)?;
        compile(&decoded.plan)?;
        let index_codecs = compile_index_key(&decoded)?.map(|k| IndexCodecs {
            key: k.key_codec(),
            rows: Arc::clone(&k.input),
        });
        // Imported indexes must stay readable at `as_of` until every
        // worker has built the dataflow.
        let mut index_holds = Vec::new();
        for index in desc.plan.imported_indexes() {
            let imported = self
                .dataflow(index)
                .filter(|d| d.index_codecs.is_some())
                .ok_or(ComputeError::UnknownIndex(index))?;
            index_holds.push(imported.hold_index(desc.as_of)?);
        }
        let index_holds = Arc::new(index_holds);
        let state = self.new_state(&desc, acquired, index_codecs, subscribe);
        self.broadcast(|| Command::Install {
            plan: Arc::clone(&plan),
            state: Arc::clone(&state),
            index_holds: Arc::clone(&index_holds),
        })?;
        tracing::info!(dataflow = %desc.id, as_of = desc.as_of, start = desc.start, "dataflow installed");
        Ok(state)
    }

    fn new_state(
        &self,
        desc: &DataflowDesc,
        holds: Vec<ReadHold>,
        index_codecs: Option<IndexCodecs>,
        subscribe: Option<Arc<SubscribeQueue>>,
    ) -> Arc<DataflowState> {
        let state = Arc::new(DataflowState {
            id: desc.id,
            index_codecs,
            subscribe,
            errors_absent_through: AtomicU64::new(0),
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
        });
        self.dataflows.lock().insert(desc.id, Arc::clone(&state));
        state
    }

    /// Read index `id` at `time`: every row, or those whose key equals
    /// `key` (values in key order, cast to the key's types). Workers answer
    /// once the index is complete at `time`.
    pub fn peek(
        &self,
        id: GlobalId,
        time: Timestamp,
        key: Option<Vec<ScalarValue>>,
    ) -> Result<PendingPeek> {
        let state = self.dataflow(id).ok_or(ComputeError::UnknownIndex(id))?;
        if let Some(failure) = state.failure() {
            return Err(ComputeError::Failed(failure));
        }
        let codecs = state
            .index_codecs
            .clone()
            .ok_or(ComputeError::UnknownIndex(id))?;
        let key = key
            .map(|values| encode_key(&codecs.key, &values))
            .transpose()?;
        let hold = state.hold_index(time)?;
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let command = |key: Option<Row>| Command::Peek {
            id,
            time,
            key,
            answer: tx.clone(),
        };
        let workers = match key {
            // Rows are spread over workers by their key's hash (as timely's
            // exchange does): only the key's worker can hold them, and only
            // the error worker can hold errors.
            Some(key) => {
                let n = self.workers as u64;
                let owner = (differential_dataflow::Hashable::hashed(&key) % n) as usize;
                let errors = error_worker(self.workers);
                self.send_to(owner, command(Some(key.clone())))?;
                if errors != owner && !state.errors_absent_at(time) {
                    self.send_to(errors, command(Some(key)))?;
                    2
                } else {
                    1
                }
            }
            None => {
                self.broadcast(|| command(None))?;
                self.workers
            }
        };
        Ok(PendingPeek {
            answers: rx,
            workers,
            rows: codecs.rows,
            _hold: hold,
        })
    }

    /// Tear down the dataflow maintaining `id` and release its holds.
    pub fn drop_dataflow(&self, id: GlobalId) -> Result<()> {
        let Some(state) = self.dataflows.lock().remove(&id) else {
            return Ok(());
        };
        state.dropped.store(true, Ordering::SeqCst);
        self.broadcast(|| Command::Drop(id))?;
        tracing::info!(dataflow = %id, "dataflow dropped");
        Ok(())
    }

    /// The state of the dataflow maintaining `id`, if installed.
    pub fn dataflow(&self, id: GlobalId) -> Option<Arc<DataflowState>> {
        self.dataflows.lock().get(&id).cloned()
    }

    /// Every installed dataflow.
    pub fn dataflows(&self) -> Vec<Arc<DataflowState>> {
        self.dataflows.lock().values().cloned().collect()
    }

    /// Send `command` to one worker and wake it.
    fn send_to(&self, worker: usize, command: Command) -> Result<()> {
        let senders = self.senders.lock();
        let tx = senders.get(worker).ok_or(ComputeError::ShutDown)?;
        tx.send(command).map_err(|_| ComputeError::ShutDown)?;
        if let Some(guards) = self.guards.lock().as_ref()
            && let Some(g) = guards.guards().get(worker)
        {
            g.thread().unpark();
        }
        Ok(())
    }

    fn broadcast(&self, command: impl Fn() -> Command) -> Result<()> {
        let senders = self.senders.lock();
        for tx in senders.iter() {
            tx.send(command()).map_err(|_| ComputeError::ShutDown)?;
        }
        if let Some(guards) = self.guards.lock().as_ref() {
            for g in guards.guards() {
                g.thread().unpark();
            }
        }
        Ok(())
    }

    /// Stop the workers (dataflows stop where they are; their outputs are
    /// durable up to their uppers).
    pub fn shutdown(&self) {
        let _ = self.broadcast(|| Command::Shutdown);
        self.senders.lock().clear();
        if let Some(guards) = self.guards.lock().take() {
            drop(guards.join());
        }
        self.dataflows.lock().clear();
    }
}

impl Drop for ComputeController {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The key row of `values`, cast to the key's column types.
fn encode_key(codec: &RowCodec, values: &[ScalarValue]) -> Result<Row> {
    let fields = codec.schema().fields();
    if fields.len() != values.len() {
        return Err(ComputeError::PlanWire(format!(
            "index key has {} columns, lookup gave {}",
            fields.len(),
            values.len()
        )));
    }
    // NULL equals no key (the index keeps rows with NULL keys for full
    // scans, so a NULL lookup must not reach it).
    if values.iter().any(ScalarValue::is_null) {
        return Err(ComputeError::PlanWire("NULL is not a key value".into()));
    }
    let columns = values
        .iter()
        .zip(fields)
        .map(|(v, f)| {
            let array = v.to_array()?;
            Ok(arrow::compute::cast(&array, f.data_type())?)
        })
        .collect::<Result<Vec<_>>>()?;
    codec
        .encode_columns(&columns, 1)?
        .pop()
        .ok_or_else(|| ComputeError::PlanWire("no key encoded".into()))
}

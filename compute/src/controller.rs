//! The compute controller: timely workers on dedicated threads, driven by
//! one ordered stream of commands ([`crate::protocol::Command`]) that every
//! worker receives identically. What it and the workers know about each
//! dataflow is in [`crate::state`].

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use arrow::array::RecordBatch;
use datafusion::common::ScalarValue;
use freshet_repr::sqlstate;
use freshet_repr::{GlobalId, Timestamp};
use freshet_storage::{ReadHold, Storage};
use parking_lot::Mutex;
use timely::communication::initialize::WorkerGuards;

use crate::error::{ComputeError, DataflowError, Result};
use crate::protocol::{Command, Compiled, Report};
use crate::render::{KeySelect, PeekPart, compile, compile_index_key, error_worker};
use crate::row::{Row, RowCodec};
use crate::state::{DataflowState, FrontierReports, IndexCodecs, IndexHold};
use crate::subscribe::Subscription;
use crate::subscribe_queue::SubscribeQueue;
use crate::worker::run_worker;
use freshet_compute_types::{DataflowDesc, Export, RelPlan};

/// A peek on its way: every worker's answer, once each has it. Awaiting
/// it parks the requesting task, not a thread: workers wake it directly.
#[derive(Debug)]
pub struct PendingPeek {
    answers: futures::channel::mpsc::UnboundedReceiver<PeekPart>,
    workers: usize,
    rows: Arc<RowCodec>,
    _hold: IndexHold,
}

/// What `select` picks at `time` from the rows each of `workers` published
/// after its last step, if every one of them is complete at `time` and no
/// error can exist there: a peek answered on the caller's thread, without
/// waking a worker (whose steps maintain every dataflow). One answer per
/// worker; `None` asks the workers.
fn published_answers(
    state: &DataflowState,
    time: Timestamp,
    workers: impl IntoIterator<Item = usize>,
    select: &KeySelect,
) -> Option<Vec<PeekPart>> {
    if !state.errors_absent_at(time) {
        return None;
    }
    workers
        .into_iter()
        .map(|w| {
            let rows = state
                .published_rows(w)
                .filter(|rows| rows.complete_at(time))?;
            Some(Ok(rows.peek(time, select)))
        })
        .collect()
}

impl PendingPeek {
    /// A peek whose answers are already here (see [`published_answers`]).
    fn answered(answers: Vec<PeekPart>, rows: Arc<RowCodec>, hold: IndexHold) -> PendingPeek {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let workers = answers.len();
        for answer in answers {
            // The receiver is alive: a send cannot fail.
            let _ = tx.unbounded_send(answer);
        }
        PendingPeek {
            answers: rx,
            workers,
            rows,
            _hold: hold,
        }
    }

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
    dataflows: Arc<Mutex<BTreeMap<GlobalId, Arc<DataflowState>>>>,
    /// Frontier reports from dataflows, to [`follow_frontiers`].
    reports: mpsc::Sender<Report>,
    follower: Mutex<Option<std::thread::JoinHandle<()>>>,
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
    /// Start `workers` timely worker threads reading from `storage`.
    pub fn start(workers: usize, storage: Arc<Storage>) -> Result<Self> {
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
        let guards = timely::execute(timely::Config::process(workers), move |worker| {
            let rx = receivers.lock()[worker.index()].take();
            if let Some(rx) = rx {
                run_worker(worker, rx, Arc::clone(&worker_storage));
            }
        })
        .map_err(ComputeError::Start)?;
        tracing::info!(workers, "compute workers started");
        let dataflows = Arc::new(Mutex::new(BTreeMap::new()));
        let (reports, reported) = mpsc::channel();
        let follower = std::thread::Builder::new()
            .name("compute-holds".into())
            .spawn({
                let dataflows = Arc::clone(&dataflows);
                move || follow_frontiers(reported, dataflows)
            })
            .map_err(|e| ComputeError::Start(e.to_string()))?;
        Ok(ComputeController {
            storage,
            senders: Mutex::new(senders),
            guards: Mutex::new(Some(guards)),
            dataflows,
            reports,
            follower: Mutex::new(Some(follower)),
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
            code: sqlstate::OUT_OF_MEMORY.into(),
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
    pub fn explain(plan: &RelPlan) -> Result<String> {
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

    /// Check that `desc` renders (its expressions and aggregates build, an
    /// index's keys evaluate over its rows), without installing it: the
    /// coordinator calls this before committing a CREATE, so a committed
    /// view or index installs.
    pub fn validate(desc: &DataflowDesc) -> Result<()> {
        compile(&desc.plan)?;
        compile_index_key(desc).map(|_| ())
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
        from_storage: Option<RelPlan>,
    ) -> Result<Arc<DataflowState>> {
        self.install_with(desc, holds, from_storage, None)
    }

    /// Whether every index `plan` imports is installed and readable at
    /// `time`.
    fn imports_readable(&self, plan: &RelPlan, time: Timestamp) -> bool {
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
        from_storage: Option<RelPlan>,
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
        let controller = Arc::clone(self);
        let end = Box::new(move |id| controller.drop_dataflow(id));
        Ok(Subscription::new(end, state, queue, codec))
    }

    fn install_with(
        &self,
        mut desc: DataflowDesc,
        mut holds: Vec<ReadHold>,
        from_storage: Option<RelPlan>,
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
        // Compiled once, here: a plan that cannot be built is an error for
        // this request, and every worker builds the same compiled plan.
        let node = compile(&desc.plan)?;
        let index_key = compile_index_key(&desc)?;
        let index_codecs = index_key.as_ref().map(|k| IndexCodecs {
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
        let (id, as_of, start) = (desc.id, desc.as_of, desc.start);
        let compiled = Arc::new(Compiled {
            node,
            index_key,
            desc: Arc::new(desc),
        });
        self.broadcast(|| Command::Install {
            compiled: Arc::clone(&compiled),
            state: Arc::clone(&state),
            index_holds: Arc::clone(&index_holds),
        })?;
        tracing::info!(dataflow = %id, as_of, start, "dataflow installed");
        Ok(state)
    }

    fn new_state(
        &self,
        desc: &DataflowDesc,
        holds: Vec<ReadHold>,
        index_codecs: Option<IndexCodecs>,
        subscribe: Option<Arc<SubscribeQueue>>,
    ) -> Arc<DataflowState> {
        let reports = self.reports.clone();
        let reports = FrontierReports::new(move |id, upper| {
            // A controller that is gone has dropped this dataflow's holds.
            let _ = reports.send(Report::Frontier { id, upper });
        });
        let state = DataflowState::new(desc, holds, index_codecs, subscribe, reports);
        self.dataflows.lock().insert(desc.id, Arc::clone(&state));
        state
    }

    /// Index `id`'s dataflow and codecs, unless it failed or is no index.
    fn readable_index(&self, id: GlobalId) -> Result<(Arc<DataflowState>, IndexCodecs)> {
        let state = self.dataflow(id).ok_or(ComputeError::UnknownIndex(id))?;
        if let Some(failure) = state.failure() {
            return Err(ComputeError::Failed(failure));
        }
        let codecs = state
            .index_codecs
            .clone()
            .ok_or(ComputeError::UnknownIndex(id))?;
        Ok((state, codecs))
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
        let (state, codecs) = self.readable_index(id)?;
        let key = key
            .map(|values| encode_key(&codecs.key, &values))
            .transpose()?;
        let hold = state.hold_index(time)?;
        // Rows are spread over workers by their key's hash (as timely's
        // exchange does): only the key's worker can hold them, and only
        // the error worker can hold errors.
        let owner = key.as_ref().map(|key| {
            (differential_dataflow::Hashable::hashed(key) % self.workers as u64) as usize
        });
        let select = key.map_or(KeySelect::All, KeySelect::Equal);
        if let Some(owner) = owner
            && let Some(answers) = published_answers(&state, time, [owner], &select)
        {
            return Ok(PendingPeek::answered(answers, codecs.rows, hold));
        }
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let command = || Command::Peek {
            id,
            time,
            select: select.clone(),
            answer: tx.clone(),
        };
        let workers = match owner {
            Some(owner) => {
                let errors = error_worker(self.workers);
                self.send_to(owner, command())?;
                if errors != owner && !state.errors_absent_at(time) {
                    self.send_to(errors, command())?;
                    2
                } else {
                    1
                }
            }
            None => {
                self.broadcast(command)?;
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

    /// Read index `id` at `time`: the rows whose key's first column lies
    /// within `lower` and `upper` (values of that column's type, not
    /// NULL). Every worker holds some of them; each answers once the index
    /// is complete at `time`. The caller picks key types whose order is
    /// their values' (the rows are in the encoded keys' byte order).
    pub fn peek_range(
        &self,
        id: GlobalId,
        time: Timestamp,
        lower: Bound<ScalarValue>,
        upper: Bound<ScalarValue>,
    ) -> Result<PendingPeek> {
        let (state, codecs) = self.readable_index(id)?;
        let first = codecs
            .key
            .schema()
            .fields()
            .first()
            .cloned()
            .ok_or_else(|| ComputeError::PlanWire("an index without key columns".into()))?;
        let codec = RowCodec::new(Arc::new(arrow::datatypes::Schema::new(vec![first])))?;
        let encode = |bound: Bound<ScalarValue>| -> Result<Bound<Row>> {
            Ok(match bound {
                Bound::Included(v) => Bound::Included(encode_key(&codec, &[v])?),
                Bound::Excluded(v) => Bound::Excluded(encode_key(&codec, &[v])?),
                Bound::Unbounded => Bound::Unbounded,
            })
        };
        let select = KeySelect::Range {
            lower: encode(lower)?,
            upper: encode(upper)?,
        };
        let hold = state.hold_index(time)?;
        if let Some(answers) = published_answers(&state, time, 0..self.workers, &select) {
            return Ok(PendingPeek::answered(answers, codecs.rows, hold));
        }
        let (tx, rx) = futures::channel::mpsc::unbounded();
        self.broadcast(|| Command::Peek {
            id,
            time,
            select: select.clone(),
            answer: tx.clone(),
        })?;
        Ok(PendingPeek {
            answers: rx,
            workers: self.workers,
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
        if let Some(follower) = self.follower.lock().take() {
            let _ = self.reports.send(Report::Shutdown);
            let _ = follower.join();
        }
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

/// The controller's side of frontier reports: move each reporting
/// dataflow's input holds to follow its output (in Materialize's terms,
/// the controller, not the replica, owns read holds).
fn follow_frontiers(
    reports: mpsc::Receiver<Report>,
    dataflows: Arc<Mutex<BTreeMap<GlobalId, Arc<DataflowState>>>>,
) {
    while let Ok(report) = reports.recv() {
        match report {
            Report::Frontier { id, upper } => {
                // A dropped dataflow's holds went with it.
                let state = dataflows.lock().get(&id).cloned();
                if let Some(state) = state {
                    state.follow_upper(upper);
                }
            }
            Report::Shutdown => return,
        }
    }
}

//! The compute controller: timely workers on dedicated threads, driven by
//! one ordered stream of commands that every worker receives identically.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use freshet_repr::{GlobalId, Timestamp};
use freshet_storage::{ReadHold, Storage};
use parking_lot::Mutex;
use timely::communication::initialize::WorkerGuards;

use crate::error::{ComputeError, DataflowError, Result};
use crate::plan::DataflowDesc;
use crate::plan::wire::PlanCodec;
use crate::render::compile;
use crate::worker::{Command, run_worker};

/// Live facts about one installed dataflow, shared by the controller (for
/// reads and introspection) and the worker that writes its output.
#[derive(Debug)]
pub struct DataflowState {
    /// The object maintained.
    pub id: GlobalId,
    /// Inputs were read as of this time.
    pub as_of: Timestamp,
    /// Output began at this time.
    pub start: Timestamp,
    /// The collections it reads.
    pub inputs: Vec<GlobalId>,
    /// The output shard's upper as the sink last wrote it.
    upper: AtomicU64,
    hydrated: AtomicBool,
    /// Set when the dataflow is dropped: failures after that (its output
    /// collection going away under a last write) are expected.
    dropped: AtomicBool,
    installed_at: Instant,
    inner: Mutex<StateInner>,
}

#[derive(Debug, Default)]
struct StateInner {
    /// Current errors with their multiplicities.
    errors: BTreeMap<DataflowError, i64>,
    /// Updates and bytes held in arrangements, per worker.
    arranged: BTreeMap<usize, (i64, usize)>,
    /// Set when the dataflow cannot continue (storage failed under it).
    failure: Option<String>,
    /// Holds on the inputs, following the output upper.
    holds: Vec<ReadHold>,
}

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

    /// Why the dataflow stopped, if it did (storage failed under it).
    pub fn failure(&self) -> Option<DataflowError> {
        self.inner
            .lock()
            .failure
            .as_ref()
            .map(|f| DataflowError::internal(format!("materialized view {} failed: {f}", self.id)))
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
        self.inner.lock().arranged.insert(worker, (records, bytes));
    }

    /// How many distinct errors the output currently holds.
    pub fn error_count(&self) -> usize {
        self.inner.lock().errors.len()
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

    /// Record a failure that stops the dataflow.
    pub(crate) fn fail(&self, message: String) {
        if self.dropped.load(Ordering::SeqCst) {
            tracing::debug!(dataflow = %self.id, %message, "dropped dataflow stopped");
            return;
        }
        tracing::error!(dataflow = %self.id, %message, "dataflow failed");
        self.inner.lock().failure.get_or_insert(message);
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

/// Installs, runs and drops dataflows on a pool of timely workers.
pub struct ComputeController {
    storage: Arc<Storage>,
    senders: Mutex<Vec<mpsc::Sender<Command>>>,
    guards: Mutex<Option<WorkerGuards<()>>>,
    dataflows: Mutex<BTreeMap<GlobalId, Arc<DataflowState>>>,
    codec: PlanCodec,
    workers: usize,
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
        })
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
        let desc = DataflowDesc {
            id: GlobalId::User(0),
            plan: plan.clone(),
            as_of: 0,
            start: 0,
        };
        let decoded = codec.decode(&codec.encode(&desc)?)?;
        compile(&decoded.plan).map(|_| ())
    }

    /// Install the dataflow `desc`, whose inputs are readable at
    /// `desc.as_of` under `holds` (holds for inputs not covered are
    /// acquired here). The output collection must exist in storage.
    ///
    /// `as_of` and `start` are adjusted to resume where the output shard's
    /// upper says an earlier incarnation stopped.
    pub fn install(
        &self,
        mut desc: DataflowDesc,
        mut holds: Vec<ReadHold>,
    ) -> Result<Arc<DataflowState>> {
        if self.dataflows.lock().contains_key(&desc.id) {
            return Err(ComputeError::AlreadyInstalled(desc.id));
        }
        let (_, upper) = self.storage.frontiers(desc.id)?;
        let Some(&upper) = upper.as_option() else {
            // Sealed: the output is complete for all time.
            tracing::info!(dataflow = %desc.id, "output is sealed; nothing to maintain");
            let state = self.new_state(&desc, Vec::new());
            state.advance(Timestamp::MAX, Vec::new());
            return Ok(state);
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
        compile(&self.codec.decode(&plan)?.plan)?;
        let state = self.new_state(&desc, acquired);
        self.broadcast(|| Command::Install {
            plan: Arc::clone(&plan),
            state: Arc::clone(&state),
        })?;
        tracing::info!(dataflow = %desc.id, as_of = desc.as_of, start = desc.start, "dataflow installed");
        Ok(state)
    }

    fn new_state(&self, desc: &DataflowDesc, holds: Vec<ReadHold>) -> Arc<DataflowState> {
        let state = Arc::new(DataflowState {
            id: desc.id,
            as_of: desc.as_of,
            start: desc.start,
            inputs: desc.plan.inputs().into_iter().collect(),
            upper: AtomicU64::new(desc.start),
            hydrated: AtomicBool::new(false),
            dropped: AtomicBool::new(false),
            installed_at: Instant::now(),
            inner: Mutex::new(StateInner {
                holds,
                ..StateInner::default()
            }),
        });
        self.dataflows.lock().insert(desc.id, Arc::clone(&state));
        state
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

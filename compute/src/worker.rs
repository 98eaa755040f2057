//! The loop each timely worker runs: apply commands in order, then step
//! the installed dataflows.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use freshet_repr::GlobalId;
use freshet_storage::Storage;
use timely::worker::Worker;

use crate::arrangements::ArrangementSizes;
use crate::protocol::Command;
use crate::state::DataflowState;

/// How often each worker publishes its arrangement sizes.
const SIZE_REPORT_INTERVAL: Duration = Duration::from_secs(1);
/// Hydration taking longer than this is logged, every this often.
const HYDRATION_LOG_AFTER: Duration = Duration::from_secs(5);
use crate::render::{Context, IndexTraces, PeekPart, SizeProbe, build_dataflow, error_worker};

/// A dataflow this worker runs.
struct Installed {
    /// Its index in the worker.
    index: usize,
    state: Arc<DataflowState>,
    /// The bytes of its arrangements on this worker.
    probes: Vec<SizeProbe>,
    /// This worker's part of the index it exports, if it is an index.
    traces: Option<IndexTraces>,
}

/// A peek this worker has not answered yet (its index is not complete at
/// the peek's time).
struct WaitingPeek {
    id: GlobalId,
    time: freshet_repr::Timestamp,
    select: crate::render::KeySelect,
    answer: futures::channel::mpsc::UnboundedSender<PeekPart>,
}

/// Run commands and dataflows until shut down.
pub(crate) fn run_worker(
    worker: &mut Worker,
    commands: mpsc::Receiver<Command>,
    storage: Arc<Storage>,
) {
    let mut installed: BTreeMap<GlobalId, Installed> = BTreeMap::new();
    // Which dataflows import each index; an index dropped while imported
    // keeps running (unreachable for peeks) until its importers are gone,
    // since an imported arrangement nobody maintains would stall them.
    let mut imported_by: BTreeMap<GlobalId, std::collections::BTreeSet<GlobalId>> = BTreeMap::new();
    let mut orphans: std::collections::BTreeSet<GlobalId> = Default::default();
    let mut peeks: Vec<WaitingPeek> = Vec::new();
    let sizes = ArrangementSizes::register(worker);
    let mut reported = Instant::now();
    loop {
        loop {
            match commands.try_recv() {
                Ok(Command::Install {
                    compiled,
                    state,
                    index_holds,
                }) => {
                    // Every worker builds the same compiled plan.
                    let desc = &compiled.desc;
                    let index = worker.next_dataflow_index();
                    let id = desc.id;
                    let mut imports = BTreeMap::new();
                    for imported in desc.plan.imported_indexes() {
                        if let Some(traces) =
                            installed.get(&imported).and_then(|d| d.traces.as_ref())
                        {
                            imports.insert(imported, traces.import());
                            imported_by.entry(imported).or_default().insert(id);
                        }
                    }
                    let ctx = Arc::new(Context {
                        storage: Arc::clone(&storage),
                        desc: Arc::clone(desc),
                        state: Arc::clone(&state),
                    });
                    let (probes, traces) = build_dataflow(
                        worker,
                        &compiled.node,
                        compiled.index_key.clone(),
                        ctx,
                        &mut imports,
                    );
                    // Built: the imports read what they need from here on.
                    drop(index_holds);
                    installed.insert(
                        id,
                        Installed {
                            index,
                            state,
                            probes,
                            traces,
                        },
                    );
                }
                Ok(Command::Drop(id)) => {
                    let mut dropping = vec![id];
                    while let Some(id) = dropping.pop() {
                        if imported_by.get(&id).is_some_and(|i| !i.is_empty()) {
                            orphans.insert(id);
                            continue;
                        }
                        imported_by.remove(&id);
                        orphans.remove(&id);
                        // Dropping `dataflow` releases the trace handles its
                        // probes and index traces hold.
                        if let Some(dataflow) = installed.remove(&id) {
                            dataflow.state.publish_rows(worker.index(), None);
                            worker.drop_dataflow(dataflow.index);
                            sizes.forget(dataflow.index);
                        }
                        // Indexes it imported that were dropped meanwhile.
                        for (index, importers) in imported_by.iter_mut() {
                            if importers.remove(&id)
                                && importers.is_empty()
                                && orphans.contains(index)
                            {
                                dropping.push(*index);
                            }
                        }
                    }
                }
                Ok(Command::Peek {
                    id,
                    time,
                    select,
                    answer,
                }) => peeks.push(WaitingPeek {
                    id,
                    time,
                    select,
                    answer,
                }),
                Ok(Command::Shutdown) | Err(mpsc::TryRecvError::Disconnected) => {
                    for (_, dataflow) in std::mem::take(&mut installed) {
                        dataflow.state.publish_rows(worker.index(), None);
                        worker.drop_dataflow(dataflow.index);
                    }
                    return;
                }
                Err(mpsc::TryRecvError::Empty) => break,
            }
        }
        // Answer what can be answered before parking: a peek of an index
        // that is already complete at its time must not wait for a step.
        peeks.retain_mut(|peek| !answer_peek(peek, &mut installed));
        worker.step_or_park(Some(Duration::from_millis(100)));
        let workers = worker.peers();
        let holds_errors = worker.index() == error_worker(workers);
        // Only indexes need the oracle's read time (their compaction bound).
        let read_ts = if installed.values().any(|d| d.traces.is_some()) {
            storage.read_ts()
        } else {
            0
        };
        for dataflow in installed.values_mut() {
            if let Some(traces) = dataflow.traces.as_mut() {
                let upper = traces.upper();
                let since = dataflow
                    .state
                    .index_progress(worker.index(), workers, upper, read_ts);
                traces.compact_to(since);
                if let Some(rows) = traces.publish() {
                    dataflow.state.publish_rows(worker.index(), Some(rows));
                }
                if holds_errors {
                    // Lets keyed peeks skip this worker while there is
                    // no error to find.
                    dataflow
                        .state
                        .set_errors_absent_through(traces.errors_absent_through());
                }
            }
        }
        peeks.retain_mut(|peek| !answer_peek(peek, &mut installed));
        if reported.elapsed() >= SIZE_REPORT_INTERVAL {
            reported = Instant::now();
            let holds_errors = worker.index() == error_worker(worker.peers());
            for dataflow in installed.values_mut() {
                let state = &dataflow.state;
                if holds_errors && let Some(traces) = dataflow.traces.as_mut() {
                    state.set_index_errors(traces.error_count());
                }
                let records = sizes.records(dataflow.index);
                let bytes = dataflow.probes.iter_mut().map(SizeProbe::bytes).sum();
                state.set_arranged(worker.index(), records, bytes);
                // Hydrating a large input takes a while: say how far it got.
                let age = state.age();
                if !state.hydrated()
                    && age >= HYDRATION_LOG_AFTER
                    && age.as_secs() % HYDRATION_LOG_AFTER.as_secs() == 0
                {
                    tracing::info!(dataflow = %state.id, worker = worker.index(),
                        arranged_records = records, arranged_bytes = bytes, elapsed_s = age.as_secs(), "dataflow still hydrating");
                }
            }
        }
    }
}

/// Answer `peek` if its index is complete at its time. Returns whether it
/// was answered (or can never be: its index is gone).
fn answer_peek(peek: &mut WaitingPeek, installed: &mut BTreeMap<GlobalId, Installed>) -> bool {
    let Some(traces) = installed.get_mut(&peek.id).and_then(|d| d.traces.as_mut()) else {
        let _ = peek
            .answer
            .unbounded_send(Err(crate::error::DataflowError::internal(format!(
                "index {} was dropped",
                peek.id
            ))));
        return true;
    };
    if traces.upper().is_some_and(|upper| upper <= peek.time) {
        return false;
    }
    // The requester may have gone away (timeout, cancel): nothing to do.
    let _ = peek
        .answer
        .unbounded_send(traces.peek(peek.time, &peek.select));
    true
}

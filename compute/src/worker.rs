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
use crate::controller::DataflowState;

/// How often each worker publishes its arrangement sizes.
const SIZE_REPORT_INTERVAL: Duration = Duration::from_secs(1);
/// Hydration taking longer than this is logged, every this often.
const HYDRATION_LOG_AFTER: Duration = Duration::from_secs(5);
use crate::plan::wire::PlanCodec;
use crate::render::{Context, SizeProbe, build_dataflow, compile};

/// A dataflow this worker runs.
struct Installed {
    /// Its index in the worker.
    index: usize,
    state: Arc<DataflowState>,
    /// The bytes of its arrangements on this worker.
    probes: Vec<SizeProbe>,
}

/// What the controller asks every worker to do, in the same order.
pub(crate) enum Command {
    /// Build the dataflow whose plan these bytes encode.
    Install {
        plan: Arc<[u8]>,
        state: Arc<DataflowState>,
    },
    /// Tear one down.
    Drop(GlobalId),
    /// Exit.
    Shutdown,
}

/// Run commands and dataflows until shut down.
pub(crate) fn run_worker(
    worker: &mut Worker,
    commands: mpsc::Receiver<Command>,
    storage: Arc<Storage>,
    codec: &PlanCodec,
) {
    let mut installed: BTreeMap<GlobalId, Installed> = BTreeMap::new();
    let sizes = ArrangementSizes::register(worker);
    let mut reported = Instant::now();
    loop {
        loop {
            match commands.try_recv() {
                Ok(Command::Install { plan, state }) => {
                    // Every worker builds the same dataflow or none: the
                    // controller decoded and compiled this plan already.
                    let built = codec
                        .decode(&plan)
                        .and_then(|desc| Ok((compile(&desc.plan)?, desc)));
                    let (node, desc) = match built {
                        Ok(built) => built,
                        Err(e) => {
                            state.fail(format!("cannot build dataflow: {e}"));
                            continue;
                        }
                    };
                    let index = worker.next_dataflow_index();
                    let id = desc.id;
                    let ctx = Arc::new(Context {
                        storage: Arc::clone(&storage),
                        desc: Arc::new(desc),
                        state: Arc::clone(&state),
                    });
                    let probes = build_dataflow(worker, &node, ctx);
                    installed.insert(
                        id,
                        Installed {
                            index,
                            state,
                            probes,
                        },
                    );
                }
                Ok(Command::Drop(id)) => {
                    if let Some(dataflow) = installed.remove(&id) {
                        // The probes hold trace handles: release them too.
                        drop(dataflow.probes);
                        worker.drop_dataflow(dataflow.index);
                        sizes.forget(dataflow.index);
                    }
                }
                Ok(Command::Shutdown) | Err(mpsc::TryRecvError::Disconnected) => {
                    for (_, dataflow) in std::mem::take(&mut installed) {
                        drop(dataflow.probes);
                        worker.drop_dataflow(dataflow.index);
                    }
                    return;
                }
                Err(mpsc::TryRecvError::Empty) => break,
            }
        }
        worker.step_or_park(Some(Duration::from_millis(100)));
        if reported.elapsed() >= SIZE_REPORT_INTERVAL {
            reported = Instant::now();
            for dataflow in installed.values_mut() {
                let state = &dataflow.state;
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

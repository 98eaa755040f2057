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
use crate::plan::DataflowDesc;
use crate::render::{Context, Node, build_dataflow};

/// What the controller asks every worker to do, in the same order.
pub(crate) enum Command {
    /// Build a dataflow.
    Install {
        desc: Arc<DataflowDesc>,
        node: Arc<Node>,
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
) {
    let mut installed: BTreeMap<GlobalId, (usize, Arc<DataflowState>)> = BTreeMap::new();
    let sizes = ArrangementSizes::register(worker);
    let mut reported = Instant::now();
    loop {
        loop {
            match commands.try_recv() {
                Ok(Command::Install { desc, node, state }) => {
                    let index = worker.next_dataflow_index();
                    let id = desc.id;
                    let ctx = Arc::new(Context {
                        storage: Arc::clone(&storage),
                        desc,
                        state: Arc::clone(&state),
                    });
                    build_dataflow(worker, &node, ctx);
                    installed.insert(id, (index, state));
                }
                Ok(Command::Drop(id)) => {
                    if let Some((index, _)) = installed.remove(&id) {
                        worker.drop_dataflow(index);
                        sizes.forget(index);
                    }
                }
                Ok(Command::Shutdown) | Err(mpsc::TryRecvError::Disconnected) => {
                    for (_, (index, _)) in std::mem::take(&mut installed) {
                        worker.drop_dataflow(index);
                    }
                    return;
                }
                Err(mpsc::TryRecvError::Empty) => break,
            }
        }
        worker.step_or_park(Some(Duration::from_millis(100)));
        if reported.elapsed() >= SIZE_REPORT_INTERVAL {
            reported = Instant::now();
            for (index, state) in installed.values() {
                let records = sizes.records(*index);
                state.set_arranged_records(worker.index(), records);
                // Hydrating a large input takes a while: say how far it got.
                let age = state.age();
                if !state.hydrated()
                    && age >= HYDRATION_LOG_AFTER
                    && age.as_secs() % HYDRATION_LOG_AFTER.as_secs() == 0
                {
                    tracing::info!(dataflow = %state.id, worker = worker.index(),
                        arranged_records = records, elapsed_s = age.as_secs(), "dataflow still hydrating");
                }
            }
        }
    }
}

//! The compute protocol: what the controller asks every worker to do, in
//! the same order on each, and the compiled dataflows it hands them.
//!
//! Answers travel back in the request's own channel (a peek's
//! [`PeekPart`]s, a subscribe's [`crate::subscribe::SubscribeBatch`]es
//! through its queue); frontiers, errors and sizes are reported into the
//! dataflow's shared [`crate::state::DataflowState`].

use std::sync::Arc;

use freshet_compute_types::DataflowDesc;
use freshet_repr::{GlobalId, Timestamp};

pub(crate) use crate::render::PeekPart;
use crate::render::{KeyEval, Node};
use crate::state::{DataflowState, IndexHold};

/// A dataflow as the controller compiled it: its operators' evaluators
/// (physical expressions over row batches), shared by every worker, which
/// renders its own timely operators from them.
pub(crate) struct Compiled {
    /// The compiled plan.
    pub node: Node,
    /// For an index, how its keys are evaluated.
    pub index_key: Option<Arc<KeyEval>>,
    /// The dataflow it was compiled from.
    pub desc: Arc<DataflowDesc>,
}

/// What the controller asks every worker to do, in the same order.
pub(crate) enum Command {
    /// Build this compiled dataflow.
    Install {
        compiled: Arc<Compiled>,
        state: Arc<DataflowState>,
        /// Keep the indexes it imports readable at its `as_of` until it
        /// is built.
        index_holds: Arc<Vec<IndexHold>>,
    },
    /// Tear one down.
    Drop(GlobalId),
    /// Read an index at a time (the rows `select` picks).
    Peek {
        id: GlobalId,
        time: Timestamp,
        select: crate::render::KeySelect,
        answer: futures::channel::mpsc::UnboundedSender<PeekPart>,
    },
    /// Exit.
    Shutdown,
}

/// What dataflows report to the controller, which acts on it off the
/// workers' threads.
pub(crate) enum Report {
    /// Dataflow `id`'s output is complete before `upper`: its inputs'
    /// holds may follow.
    Frontier {
        /// The dataflow.
        id: GlobalId,
        /// Its output's new upper.
        upper: Timestamp,
    },
    /// The controller is shutting down.
    Shutdown,
}

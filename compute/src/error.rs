//! Errors of compute: rendering failures, and the per-row evaluation
//! errors dataflows carry beside their data.

use datafusion::error::DataFusionError;
use freshet_repr::GlobalId;
use freshet_repr::sqlstate;
use serde::{Deserialize, Serialize};

use crate::sqlstate::datafusion_sqlstate;

/// A query failure for some input row (division by zero, a bad cast, an
/// overflow). Dataflows keep these in an error collection beside the
/// rows, so one bad row fails reads of the view without stopping it, and
/// retracting the row clears the error.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DataflowError {
    /// The SQLSTATE the defining query would raise ad hoc.
    pub code: String,
    /// Its message.
    pub message: String,
}

impl DataflowError {
    /// The error a DataFusion evaluation failure stands for.
    pub fn from_datafusion(e: &DataFusionError) -> Self {
        let (code, message) = datafusion_sqlstate(e);
        DataflowError {
            code: code.to_string(),
            message,
        }
    }

    /// An internal error (a bug, or storage failing under a dataflow).
    pub fn internal(message: impl Into<String>) -> Self {
        DataflowError {
            code: sqlstate::INTERNAL_ERROR.into(),
            message: message.into(),
        }
    }
}

impl DataflowError {
    /// The SQLSTATE as a static string, for error responses. SQLSTATEs are
    /// a small closed set, so each distinct code is interned once.
    pub fn sqlstate(&self) -> &'static str {
        static INTERNED: std::sync::Mutex<std::collections::BTreeSet<&'static str>> =
            std::sync::Mutex::new(std::collections::BTreeSet::new());
        let mut set = INTERNED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(code) = set.get(self.code.as_str()) {
            return code;
        }
        let code: &'static str = Box::leak(self.code.clone().into_boxed_str());
        set.insert(code);
        code
    }
}

impl std::fmt::Display for DataflowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// Why compute refused a request.
#[derive(Debug, thiserror::Error)]
pub enum ComputeError {
    /// The plan cannot be rendered (an expression or aggregate DataFusion
    /// cannot build, a schema mismatch): a planner bug or an unsupported
    /// construct that slipped through.
    #[error("cannot render dataflow: {0}")]
    Render(#[from] DataFusionError),
    /// Arrow refused a schema or row conversion.
    #[error("cannot render dataflow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// Storage refused a read, a hold or a write.
    #[error(transparent)]
    Storage(#[from] freshet_storage::StorageError),
    /// The dataflow is already installed.
    #[error("dataflow {0} already exists")]
    AlreadyInstalled(GlobalId),
    /// The timely workers are gone.
    #[error("compute workers have shut down")]
    ShutDown,
    /// The workers could not start.
    #[error("cannot start compute workers: {0}")]
    Start(String),
    /// No index with this id is installed.
    #[error("index {0} does not exist")]
    UnknownIndex(GlobalId),
    /// A read below what an index still holds.
    #[error("timestamp {time} is not valid for index {id}: it is readable from {since}")]
    NotReadable {
        /// The index.
        id: GlobalId,
        /// The time asked for.
        time: u64,
        /// Its since.
        since: u64,
    },
    /// The dataflow stopped (see [`crate::DataflowState::failure`]).
    #[error("{0}")]
    Failed(DataflowError),
    /// Workers did not answer a peek in time.
    #[error("index read timed out")]
    PeekTimeout,
    /// A request or an answer that does not fit the dataflow it names (a
    /// key of the wrong arity, an index row with a bad multiplicity).
    #[error("malformed dataflow plan: {0}")]
    PlanWire(String),
}

/// Results of compute requests.
pub type Result<T, E = ComputeError> = std::result::Result<T, E>;

/// A query-visible error as DataFusion carries it, so a scan that meets
/// one fails its query with the error's SQLSTATE.
impl From<DataflowError> for DataFusionError {
    fn from(e: DataflowError) -> Self {
        DataFusionError::External(Box::new(freshet_repr::SqlStateError {
            code: e.sqlstate(),
            message: e.message,
        }))
    }
}

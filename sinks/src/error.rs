//! Why a sink cannot go on: for a while (the target is down; it retries
//! from the target's progress) or for good.

/// A sink's error.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The target cannot be reached or written: the sink stalls and
    /// retries from the progress recorded at the target.
    #[error("{0}")]
    Target(String),
    /// The dataflow could not start or failed: retried like a target
    /// error.
    #[error("{0}")]
    Dataflow(String),
    /// Rows cannot be encoded in the target's format.
    #[error("{0}")]
    Encode(String),
    /// The sink cannot go on at all (a key violation; a target another
    /// sink owns): it fails and stays failed.
    #[error("{0}")]
    Fatal(String),
    /// A bug.
    #[error("internal error: {0}")]
    Internal(String),
}

impl SinkError {
    /// Whether retrying may help.
    pub fn is_transient(&self) -> bool {
        matches!(self, SinkError::Target(_) | SinkError::Dataflow(_))
    }
}

impl From<arrow::error::ArrowError> for SinkError {
    fn from(e: arrow::error::ArrowError) -> Self {
        SinkError::Internal(e.to_string())
    }
}

/// A sink result.
pub type Result<T> = std::result::Result<T, SinkError>;

//! Ingestion errors.

use freshet_storage::StorageError;

/// Why an ingestion step failed.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Storage refused or failed the append.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Building a batch failed.
    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
    /// The upstream could not be reached or answered with an error.
    #[error("{0}")]
    Upstream(String),
    /// What the source was asked to do is not possible.
    #[error("{0}")]
    Invalid(String),
    /// A bug.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Ingestion results.
pub type Result<T, E = SourceError> = std::result::Result<T, E>;

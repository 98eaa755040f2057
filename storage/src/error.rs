use freshet_repr::Frontier;
use freshet_repr::{GlobalId, Timestamp};

/// Everything that can go wrong in storage.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// An I/O error from the local directory behind `Blob` or `Consensus`.
    #[error("storage I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Arrow failed to encode or decode a batch.
    #[error("arrow error: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// A newer process has taken over the data directory.
    #[error(
        "fenced: this process holds epoch {mine} but epoch {current} has taken over the data directory"
    )]
    Fenced {
        /// The epoch this process holds.
        mine: u64,
        /// The epoch that superseded it.
        current: u64,
    },
    /// A `compare_and_append` expected a different upper.
    #[error("upper mismatch on {id}: expected {expected:?}, found {actual:?}")]
    UpperMismatch {
        /// The collection written to.
        id: GlobalId,
        /// The upper the writer expected.
        expected: Frontier,
        /// The collection's actual upper.
        actual: Frontier,
    },
    /// A read asked for a time outside `[since, upper)`.
    #[error("timestamp {as_of} is not valid for {id}: since {since:?}, upper {upper:?}")]
    InvalidReadTime {
        /// The collection read.
        id: GlobalId,
        /// The time requested.
        as_of: Timestamp,
        /// The collection's since.
        since: Frontier,
        /// The collection's upper.
        upper: Frontier,
    },
    /// The collection is not registered with storage.
    #[error("unknown collection {0}")]
    UnknownCollection(GlobalId),
    /// Updates consolidated to a negative multiplicity: a bug upstream.
    #[error("internal error: {id} has a row with negative multiplicity {diff} at {as_of}")]
    NegativeMultiplicity {
        /// The collection.
        id: GlobalId,
        /// The time of the snapshot.
        as_of: Timestamp,
        /// The consolidated multiplicity.
        diff: i64,
    },
    /// Durable state failed validation.
    #[error("storage corruption: {0}")]
    Corruption(String),
    /// A caller broke an API contract.
    #[error("invalid storage usage: {0}")]
    InvalidUsage(String),
    /// Storage is shutting down.
    #[error("storage is shut down")]
    ShutDown,
    /// A commit conditioned on what a transaction read found that a
    /// collection it read was written after the time it read at.
    #[error("{id} was written at {written_at}, after this transaction read it at {read_at}")]
    ReadConflict {
        /// The collection read and written since.
        id: GlobalId,
        /// The time the transaction read it at.
        read_at: Timestamp,
        /// The latest write to it.
        written_at: Timestamp,
    },
}

impl StorageError {
    /// Whether this error means the process was fenced and must stop writing.
    pub fn is_fenced(&self) -> bool {
        matches!(self, StorageError::Fenced { .. })
    }
}

/// Result alias for storage operations.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

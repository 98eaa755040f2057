/// An error with a specific Postgres SQLSTATE, raised where the code that
/// knows the SQLSTATE is far from the code that reports it (inside
/// DataFusion evaluation, inside a dataflow).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SqlStateError {
    /// The SQLSTATE.
    pub code: &'static str,
    /// The message.
    pub message: String,
}

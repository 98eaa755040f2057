//! The benchmark's error type.
//!
//! Every error carries what the benchmark was doing when it happened
//! ("COPY orders into Freshet", "initdb"), because a bare "connection
//! refused" or "db error" after ten minutes of loading is useless.

use thiserror::Error;

/// Why a step of the benchmark failed.
#[derive(Debug, Error)]
pub enum BenchError {
    /// A statement or connection failed; the server's message and SQLSTATE
    /// are shown when there is one.
    #[error("{context}: {}", describe_pg(.source))]
    Postgres {
        context: String,
        #[source]
        source: tokio_postgres::Error,
    },
    /// Spawning a process or touching a file failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// Anything else: a wrong result, a timeout, a process that exited.
    #[error("{0}")]
    Failed(String),
}

/// The benchmark's result type.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// `ERROR 42P01: relation "x" does not exist` for server errors (the
/// default `Display` says only "db error"), the plain message otherwise.
fn describe_pg(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} {}: {}", db.severity(), db.code().code(), db.message()),
        None => e.to_string(),
    }
}

/// Attach what was being done to an error.
pub trait Context<T> {
    /// Wrap the error with a description of the failed step.
    fn context(self, what: impl Into<String>) -> Result<T>;
}

impl<T> Context<T> for std::result::Result<T, tokio_postgres::Error> {
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.map_err(|source| BenchError::Postgres {
            context: what.into(),
            source,
        })
    }
}

impl<T> Context<T> for std::result::Result<T, std::io::Error> {
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.map_err(|source| BenchError::Io {
            context: what.into(),
            source,
        })
    }
}

/// Shorthand for a [`BenchError::Failed`].
pub fn failed<T>(message: impl Into<String>) -> Result<T> {
    Err(BenchError::Failed(message.into()))
}

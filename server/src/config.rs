//! Command-line flags and `FRESHET_*` environment variables.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

/// How to run a Freshet server.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "freshet",
    version,
    about = "A PostgreSQL-compatible streaming SQL database"
)]
pub struct Config {
    /// Directory holding all durable state.
    #[arg(long, env = "FRESHET_DATA_DIR", default_value = "./freshet-data")]
    pub data_dir: PathBuf,
    /// Address for PostgreSQL clients.
    #[arg(long, env = "FRESHET_LISTEN", default_value = "127.0.0.1:6875")]
    pub listen: SocketAddr,
    /// Address for the HTTP endpoint (`/health`).
    #[arg(long, env = "FRESHET_HTTP_LISTEN", default_value = "127.0.0.1:6876")]
    pub http_listen: SocketAddr,
    /// Timely worker threads maintaining materialized views (default: the
    /// number of cores).
    #[arg(long, env = "FRESHET_WORKERS")]
    pub workers: Option<usize>,
    /// `tracing` filter, e.g. `info,freshet_storage=debug`.
    #[arg(long, env = "FRESHET_LOG_FILTER", default_value = "info")]
    pub log_filter: String,
}

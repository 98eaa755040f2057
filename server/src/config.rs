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
    /// Address for the HTTP endpoint (`/health`, webhook sources).
    #[arg(long, env = "FRESHET_HTTP_LISTEN", default_value = "127.0.0.1:6876")]
    pub http_listen: SocketAddr,
    /// Timely worker threads maintaining materialized views (default: the
    /// number of cores).
    #[arg(long, env = "FRESHET_WORKERS")]
    pub workers: Option<usize>,
    /// Threads running queries (default: four per core, at least eight).
    /// More threads than cores let the operating system share the cores
    /// among running queries: an operator that computes for seconds without
    /// yielding (a nested-loop join whose filter rejects everything) holds
    /// its thread, not every other session's next query.
    #[arg(long, env = "FRESHET_QUERY_THREADS")]
    pub query_threads: Option<usize>,
    /// Most client connections served at once; more are refused with
    /// 53300 (as PostgreSQL's `max_connections`).
    #[arg(long, env = "FRESHET_MAX_CONNECTIONS", default_value_t = 1000)]
    pub max_connections: usize,
    /// Memory one query may use for its operators and result (e.g.
    /// `512MiB`, `2GiB`); sorts and aggregations spill to disk beyond it,
    /// other queries fail with 53200. Also bounds one row of a
    /// `COPY FROM STDIN`.
    #[arg(long, env = "FRESHET_QUERY_MEMORY_LIMIT", default_value = "2GiB", value_parser = crate::query_exec::parse_size)]
    pub query_memory_limit: usize,
    /// Rows a `COPY FROM STDIN` holds in memory before writing them to a
    /// part file of the table (staged until the COPY commits, written while
    /// the next part is made): a load of any size holds about twice this
    /// much per running COPY.
    #[arg(long, env = "FRESHET_COPY_PART_SIZE", default_value = "64MiB", value_parser = crate::query_exec::parse_size)]
    pub copy_part_size: usize,
    /// Memory for table and view parts kept decoded after a read, over
    /// all collections; beyond it the least recently used are dropped and
    /// read from their files again when needed.
    #[arg(long, env = "FRESHET_PART_CACHE_SIZE", default_value = "1GiB", value_parser = crate::query_exec::parse_size)]
    pub part_cache_size: usize,
    /// Memory all running queries together may use.
    #[arg(long, env = "FRESHET_TOTAL_QUERY_MEMORY", default_value = "8GiB", value_parser = crate::query_exec::parse_size)]
    pub total_query_memory: usize,
    /// Memory the arrangements of all materialized views, indexes and
    /// subscribes may hold together. Beyond it the largest is stopped and
    /// fails reads with 53200, instead of the process running out of
    /// memory (checked once a second).
    #[arg(long, env = "FRESHET_MAX_ARRANGEMENT_MEMORY", default_value = "8GiB", value_parser = crate::query_exec::parse_size)]
    pub max_arrangement_memory: usize,
    /// Largest body a webhook request may have (e.g. `2MiB`); larger
    /// ones are refused with 413.
    #[arg(long, env = "FRESHET_WEBHOOK_BODY_LIMIT", default_value = "2MiB", value_parser = crate::query_exec::parse_size)]
    pub webhook_body_limit: usize,
    /// `tracing` filter, e.g. `info,freshet_storage=debug`.
    #[arg(long, env = "FRESHET_LOG_FILTER", default_value = "info")]
    pub log_filter: String,
}

/// Stack size of every thread that parses, plans or executes statements:
/// enough for the deepest expression the parser admits
/// (`freshet_planner::parser::complexity::MAX_EXPRESSION_DEPTH`) to be planned,
/// optimized and evaluated by recursive code. Only the pages a thread
/// touches are committed.
pub const STATEMENT_STACK_BYTES: usize = 64 << 20;

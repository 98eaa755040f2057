//! Command-line arguments.

use std::path::PathBuf;

use clap::Parser;

/// Runs sqllogictest (.slt / .test) files against Freshet over pgwire.
///
/// By default every file gets its own freshly started server (a new temp data dir and free
/// ports), which is SIGKILLed and restarted in place by a `restart` line in the file. With
/// `--host`, files run against that already running server instead, sharing its state.
///
/// Records are run one at a time and counted as passed, failed or skipped (excluded by
/// `onlyif`/`skipif`; the labels are `postgresql`, `freshet` and any `--label`). The exit
/// status is non-zero if any record failed.
#[derive(Debug, Parser)]
#[command(name = "freshet-sqllogictest", version)]
pub struct Args {
    /// Test files, or directories whose `*.slt` and `*.test` files are run (sorted by name).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,

    /// Run against an existing server at this host instead of starting one per file.
    #[arg(long, env = "FRESHET_SLT_HOST")]
    pub host: Option<String>,

    /// pgwire port of the existing server (only with --host).
    #[arg(
        long,
        env = "FRESHET_SLT_PORT",
        default_value_t = 6875,
        requires = "host"
    )]
    pub port: u16,

    /// User name for connections.
    #[arg(long, default_value = "freshet")]
    pub user: String,

    /// Database name for connections.
    #[arg(long, default_value = "freshet")]
    pub database: String,

    /// The `freshet` server binary to start. Default: `freshet` in the same directory as this
    /// runner's executable, else `target/debug/freshet` of the workspace this runner was built
    /// from.
    #[arg(long, env = "FRESHET_SERVER_BINARY")]
    pub server_binary: Option<PathBuf>,

    /// Seconds one record may take before it fails (the session is then reopened).
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,

    /// Seconds a (re)started server may take to answer `SELECT 1`.
    #[arg(long, default_value_t = 120)]
    pub startup_timeout: u64,

    /// `--log-filter` passed to started servers (their log is in the temp dir).
    #[arg(long, default_value = "warn")]
    pub server_log_filter: String,

    /// Keep each started server's temp dir (data and `server.log`) and print where it is.
    #[arg(long)]
    pub keep_data: bool,

    /// Extra label for `onlyif` / `skipif` (repeatable).
    #[arg(long = "label")]
    pub labels: Vec<String>,

    /// Check the files' expectations against a real PostgreSQL (use with --host/--port/--user):
    /// the `freshet` label is left out, so `onlyif freshet` records are skipped.
    #[arg(long, requires = "host")]
    pub reference_postgres: bool,

    /// Print every failing record with its error.
    #[arg(short, long)]
    pub verbose: bool,
}

//! `freshet-sqllogictest`: runs sqllogictest files against a Freshet server.

mod cli;
mod db;
mod harness;
mod report;
mod script;
mod server;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::cli::Args;
use crate::db::ConnParams;
use crate::harness::{HarnessConfig, Target};
use crate::report::Totals;
use crate::server::{ServerConfig, resolve_server_binary};

/// The label that marks Freshet-only records.
const FRESHET_LABEL: &str = "freshet";

/// Labels every run has (`freshet` is left out with `--reference-postgres`).
const BUILTIN_LABELS: [&str; 2] = ["postgresql", FRESHET_LABEL];

/// Test file extensions picked up from directories.
const TEST_EXTENSIONS: [&str; 2] = ["slt", "test"];

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(run(args))
}

async fn run(args: Args) -> ExitCode {
    let config = match harness_config(&args) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let files = match expand_files(&args.files) {
        Ok(files) => files,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let mut totals = Totals::default();
    for file in &files {
        let report = harness::run_file(file, &config).await;
        if args.verbose {
            print!("{}", report.failure_details());
        }
        if let Some(reason) = &report.aborted {
            println!("{}: aborted: {reason}", report.path.display());
        }
        if let Some(dir) = &report.kept_dir {
            println!(
                "{}: server data and log kept in {}",
                report.path.display(),
                dir.display()
            );
        }
        println!("{}", report.summary_line());
        totals.add(&report);
    }
    if totals.failed > 0 && !args.verbose {
        println!("(run with --verbose to see each failing record)");
    }
    println!("{totals}");
    if totals.failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn harness_config(args: &Args) -> Result<HarnessConfig, String> {
    let target = match &args.host {
        Some(host) => Target::External(ConnParams {
            host: host.clone(),
            port: args.port,
            user: args.user.clone(),
            database: args.database.clone(),
        }),
        None => {
            let binary =
                resolve_server_binary(args.server_binary.as_deref()).map_err(|e| e.to_string())?;
            Target::Managed(ServerConfig {
                binary,
                startup_timeout: Duration::from_secs(args.startup_timeout),
                log_filter: args.server_log_filter.clone(),
                keep_data: args.keep_data,
            })
        }
    };
    let mut labels: Vec<String> = BUILTIN_LABELS
        .iter()
        .filter(|l| !(args.reference_postgres && **l == FRESHET_LABEL))
        .map(|l| l.to_string())
        .collect();
    for label in &args.labels {
        if !labels.contains(label) {
            labels.push(label.clone());
        }
    }
    Ok(HarnessConfig {
        target,
        labels,
        record_timeout: Duration::from_secs(args.timeout),
    })
}

/// Expands directories into their test files; plain files are kept as given.
fn expand_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let entries = std::fs::read_dir(path)
                .map_err(|e| format!("cannot list {}: {e}", path.display()))?;
            let mut found: Vec<PathBuf> = entries
                .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                .filter(|p| p.is_file() && has_test_extension(p))
                .collect();
            found.sort();
            files.extend(found);
        } else if path.is_file() {
            files.push(path.clone());
        } else {
            return Err(format!("no such test file: {}", path.display()));
        }
    }
    Ok(files)
}

fn has_test_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|ext| ext.to_str())
        .is_some_and(|ext| TEST_EXTENSIONS.contains(&ext))
}

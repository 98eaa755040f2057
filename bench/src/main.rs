//! `freshet-bench`: materialized-view maintenance in Freshet vs PostgreSQL.
//!
//! Starts a `freshet` binary and a PostgreSQL 15 cluster on loopback ports,
//! loads `customers` (10,000 rows) and `orders` (each of `--sizes`) into
//! both with COPY, defines
//!
//! ```sql
//! CREATE MATERIALIZED VIEW region_stats AS
//!   SELECT c.region, count(*) AS orders, sum(o.amount) AS revenue
//!   FROM orders o JOIN customers c ON o.customer_id = c.id GROUP BY c.region
//! ```
//!
//! and measures how quickly Freshet reflects single-row changes and bulk
//! changes in it, against what PostgreSQL pays to REFRESH it. The report
//! (Markdown) goes to stdout and, with `--report`, to a file; progress goes
//! to stderr. See docs/bench-mv.md.
//!
//! It talks to both servers over pgwire only and depends on no Freshet
//! crate, so it builds in seconds and measures the real server binary.

mod cdc;
mod connections;
mod db;
mod error;
mod freshet;
mod kafka;
mod lookup;
mod phases;
mod planning;
mod postgres;
mod recovery;
mod report;
mod run;
mod sources;
mod stats;
mod subscribe;
mod tpch_load;
mod tpch_queries;
mod workload;
mod writes;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::error::{Context, Result, failed};
use crate::phases::ViewKind;
use crate::postgres::PgServer;
use crate::report::Environment;
use crate::run::{Settings, SizeRun};

/// Command-line flags.
#[derive(Debug, Parser)]
#[command(
    name = "freshet-bench",
    about = "Materialized-view maintenance: Freshet vs PostgreSQL 15 (Markdown report on stdout)"
)]
struct Args {
    /// The `freshet` server binary. Relative paths are tried against the
    /// current directory, then the workspace root.
    #[arg(long, default_value = "target/release/freshet")]
    freshet_bin: PathBuf,
    /// Pass `--workers N` to freshet (omitted when not given).
    #[arg(long)]
    freshet_workers: Option<u32>,
    /// Numbers of orders to measure at, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
    sizes: Vec<usize>,
    /// Single-row changes per kind (INSERT, UPDATE, DELETE) and size.
    #[arg(long, default_value_t = 200)]
    changes: usize,
    /// Rows per bulk batch in the throughput measurement.
    #[arg(long, default_value_t = 10_000)]
    batch: usize,
    /// Bulk insert batches (and as many id-range deletes) per size.
    #[arg(long, default_value_t = 5)]
    batches: usize,
    /// Measure Freshet only.
    #[arg(long)]
    skip_postgres: bool,
    /// Directory with PostgreSQL's initdb and pg_ctl (default:
    /// $FRESHET_PG_BINDIR, $PATH, /usr/lib/postgresql/15/bin).
    #[arg(long)]
    pg_bindir: Option<PathBuf>,
    /// Also write the report to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// How the freshet binary was built, for the report (default: guessed
    /// from its path, `release` or `debug`).
    #[arg(long)]
    build_profile: Option<String>,
    /// Give up on a change that is not visible in the view after this many
    /// seconds.
    #[arg(long, default_value_t = 60)]
    timeout_secs: u64,
    /// Seed of the generated data and changes.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Harness check: make region_stats a plain VIEW on Freshet (every read
    /// recomputes it), to exercise the freshness and throughput code before
    /// materialized views exist. The numbers are then not MV maintenance.
    #[arg(long)]
    plain_view: bool,
    /// Run the keyed-lookup benchmark (an indexed materialized view vs a
    /// primary key, with pgbench) instead of the maintenance benchmark.
    #[arg(long)]
    lookup: bool,
    /// Rows in the lookup benchmark's table.
    #[arg(long, default_value_t = 100_000)]
    lookup_rows: usize,
    /// Client counts of the lookup benchmark, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    lookup_clients: Vec<u32>,
    /// Seconds per pgbench run in the lookup benchmark.
    #[arg(long, default_value_t = 10)]
    lookup_seconds: u64,
    /// Run the writes benchmark (single-row INSERT into tables without
    /// and with a primary key, UPDATE by primary key, with pgbench) instead
    /// of the maintenance benchmark.
    #[arg(long)]
    writes: bool,
    /// Rows in the writes benchmark's updated table.
    #[arg(long, default_value_t = 100_000)]
    writes_rows: usize,
    /// Client counts of the writes benchmark, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    writes_clients: Vec<u32>,
    /// Seconds per pgbench run in the writes benchmark.
    #[arg(long, default_value_t = 5)]
    writes_seconds: u64,
    /// Run the SUBSCRIBE latency benchmark (write commit → row delivered)
    /// instead of the maintenance benchmark.
    #[arg(long)]
    subscribe: bool,
    /// Write rates of the subscribe benchmark (writes/s), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    subscribe_rates: Vec<u32>,
    /// Seconds of writing per rate in the subscribe benchmark.
    #[arg(long, default_value_t = 10)]
    subscribe_seconds: u64,
    /// Writer connections in the subscribe benchmark.
    #[arg(long, default_value_t = 32)]
    subscribe_writers: u32,
    /// Rows per INSERT in the subscribe benchmark, one per rate
    /// (comma-separated; the last repeats).
    #[arg(long, value_delimiter = ',', default_value = "1,10")]
    subscribe_rows_per_insert: Vec<u32>,
    /// Rows in the subscribe benchmark's table before the writes,
    /// comma-separated; above 0 it subscribes to a materialized view over
    /// the table.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    subscribe_sizes: Vec<usize>,
    /// Also write each write's times in the subscribe benchmark to
    /// `DIR/subscribe-SIZE-RATE.csv` (milliseconds from the first write
    /// due: sent, acknowledged, delivered), to see when the slow ones came.
    #[arg(long)]
    subscribe_trace: Option<PathBuf>,
    /// In the subscribe benchmark, deliver through a sink (`files`, the
    /// default; `kafka`; `postgres`) instead of a subscribed client:
    /// commit → visible at the sink's target.
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "files")]
    subscribe_sink: Option<subscribe::SinkBench>,
    /// With `--subscribe-sink`: also commit this many rows at once and
    /// time the sink delivering them (sink throughput); 0 skips it.
    #[arg(long, default_value_t = 0)]
    subscribe_sink_bulk: u64,
    /// Run the concurrent-connections benchmark (idle memory per
    /// connection; SELECT 1 and keyed lookups from N sessions at once)
    /// instead of the maintenance benchmark.
    #[arg(long)]
    connections: bool,
    /// Connection counts of the connections benchmark, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "300,1000")]
    connections_counts: Vec<usize>,
    /// Seconds of each query loop in the connections benchmark.
    #[arg(long, default_value_t = 10)]
    connections_seconds: u64,
    /// Rows in the connections benchmark's `kv` table.
    #[arg(long, default_value_t = 100_000)]
    connections_rows: usize,
    /// Run the planning benchmark (long `IN` lists and operator chains,
    /// Freshet and PostgreSQL) instead of the maintenance benchmark.
    #[arg(long)]
    planning: bool,
    /// Run the restart benchmark (hydration vs. serializable and fresh
    /// reads after kill -9) instead of the maintenance benchmark.
    #[arg(long)]
    restart: bool,
    /// Rows in `orders` for the restart benchmark.
    #[arg(long, default_value_t = 1_000_000)]
    restart_rows: usize,
    /// Run the soak benchmark (RSS and disk under continuous updates).
    #[arg(long)]
    soak: bool,
    /// Run the bulk-load benchmark instead: COPY of TPC-H's tables (CSV
    /// files in this directory, from `tpchgen-cli csv -s 1 --output-dir
    /// DIR`) into Freshet and PostgreSQL, with and without primary keys.
    #[arg(long, value_name = "DIR")]
    tpch_load: Option<PathBuf>,
    /// Run the TPC-H query benchmark instead: load the CSV files in this
    /// directory (as `--tpch-load`) into Freshet and PostgreSQL with
    /// primary keys, restart Freshet, then run scan probes and the 22
    /// queries (from `--tpch-sql`) on both and compare their results.
    #[arg(long, value_name = "DIR")]
    tpch_queries: Option<PathBuf>,
    /// `--tpch-queries`: timed Freshet runs of each query after a warm-up.
    #[arg(long, default_value_t = 3)]
    tpch_runs: usize,
    /// `--tpch-queries`: whether PostgreSQL runs each query once untimed
    /// first (`false` at SF10, where its slow queries take minutes).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    tpch_pg_warmup: bool,
    /// `--tpch-queries`: seconds before PostgreSQL gives up on a query.
    #[arg(long, default_value_t = 60)]
    tpch_pg_timeout: u64,
    /// Where the 22 TPC-H queries are (`q1.sql` ... `q22.sql`).
    #[arg(long, value_name = "DIR", default_value = "../shared/bench/tpch")]
    tpch_sql: PathBuf,
    /// Run the source ingest benchmark (each load generator's snapshot of
    /// about a million updates) instead of the maintenance benchmark.
    #[arg(long)]
    sources: bool,
    /// Run the Kafka source ingest benchmark (a backlog of records read
    /// per format and envelope, then a steady producer) against a tansu
    /// broker it starts, instead of the maintenance benchmark.
    #[arg(long)]
    kafka: bool,
    /// Records in each backlog of the Kafka benchmark.
    #[arg(long, default_value_t = 1_000_000)]
    kafka_records: u64,
    /// Records per second of the Kafka benchmark's steady producer.
    #[arg(long, default_value_t = 10_000)]
    kafka_rate: u32,
    /// Seconds of the Kafka benchmark's steady producer.
    #[arg(long, default_value_t = 10)]
    kafka_seconds: u64,
    /// Updates in the soak benchmark.
    #[arg(long, default_value_t = 10_000_000)]
    soak_updates: u64,
    /// Rows per UPDATE statement in the soak benchmark (1..=1000).
    #[arg(long, default_value_t = 1000)]
    soak_rows_per_update: u64,
    /// Run the PostgreSQL CDC benchmark (snapshot rate, upstream commit →
    /// visible in a materialized view) against a PostgreSQL 15 it starts
    /// with wal_level=logical.
    #[arg(long)]
    cdc: bool,
    /// Seconds of upstream writing per rate in the CDC benchmark.
    #[arg(long, default_value_t = 20)]
    cdc_seconds: u64,
    /// Upstream write rates (rows/s) of the CDC benchmark, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    cdc_rates: Vec<u32>,
    /// Rows per upstream transaction (one INSERT each) at each CDC rate,
    /// comma-separated; the last repeats.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    cdc_rows_per_txn: Vec<u32>,
    /// Upstream writer connections in the CDC benchmark's paced runs.
    #[arg(long, default_value_t = 32)]
    cdc_writers: u32,
    /// Rows in the upstream table the CDC benchmark snapshots.
    #[arg(long, default_value_t = 1_000_000)]
    cdc_snapshot_rows: usize,
    /// Rows of the CDC benchmark's unpaced burst (0: none).
    #[arg(long, default_value_t = 200_000)]
    cdc_burst_rows: usize,
    /// Rows per upstream transaction in the CDC burst.
    #[arg(long, default_value_t = 1000)]
    cdc_burst_rows_per_txn: usize,
    /// Upstream writer connections in the CDC burst.
    #[arg(long, default_value_t = 4)]
    cdc_burst_writers: u32,
    /// What the CDC benchmark subscribes to: `ticks_mv` (the materialized
    /// view, the measurement) or `ticks` (the subsource, with no view
    /// defined, for comparison).
    #[arg(long, default_value = "ticks_mv")]
    cdc_relation: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    match bench(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("freshet-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Run every size on both systems, then print (and save) the report.
async fn bench(args: &Args) -> Result<()> {
    validate(args)?;
    let bin = resolve_bin(&args.freshet_bin)?;
    let settings = Settings {
        changes: args.changes,
        batch: args.batch,
        batches: args.batches,
        timeout: Duration::from_secs(args.timeout_secs),
        view: if args.plain_view {
            ViewKind::Plain
        } else {
            ViewKind::Materialized
        },
        seed: args.seed,
    };
    let load_before = load_average();
    let mut notes = vec![];
    if args.subscribe {
        let sub_settings = subscribe::SubscribeSettings {
            bin: &bin,
            workers: args.freshet_workers,
            rates: args.subscribe_rates.clone(),
            seconds: args.subscribe_seconds,
            writers: args.subscribe_writers,
            rows_per_insert: args.subscribe_rows_per_insert.clone(),
            sizes: args.subscribe_sizes.clone(),
            trace: args.subscribe_trace.as_deref(),
            sink: args.subscribe_sink,
        };
        let rows = subscribe::run(&sub_settings).await?;
        let mut bulk = String::new();
        if let (Some(kind), n) = (args.subscribe_sink, args.subscribe_sink_bulk)
            && n > 0
        {
            eprintln!("subscribe: bulk export of {n} rows");
            let (insert, export, commits) =
                subscribe::bulk(&bin, args.freshet_workers, kind, n).await?;
            bulk = format!(
                "\n### Sink throughput: {n} rows committed at once\n\n\
                 `INSERT INTO ev SELECT ... generate_series` of {n} rows into an empty `ev` with \
                 the sink above on it, then `messages_written` in `sink_statuses` polled every \
                 20 ms until it reaches {n}.\n\n\
                 | INSERT (s) | INSERT acknowledged → all at the target (s) | changes/s | sink commits |\n\
                 |---:|---:|---:|---:|\n\
                 | {insert:.2} | {export:.2} | {:.0} | {commits} |\n",
                n as f64 / export
            );
        }
        notes.push("PostgreSQL has no SUBSCRIBE; this section measures Freshet alone.".into());
        let env = environment(args, &bin, settings.view, "not run".into(), load_before);
        let text = format!(
            "{}\n{}{bulk}",
            report::render_environment("SUBSCRIBE latency", &env, &notes),
            subscribe::render(&rows, &sub_settings)
        );
        return emit(args, &text);
    }
    if args.cdc {
        let cdc_settings = cdc::CdcSettings {
            bin: &bin,
            workers: args.freshet_workers,
            pg_bindir: args.pg_bindir.as_deref(),
            seconds: args.cdc_seconds,
            rates: args.cdc_rates.clone(),
            rows_per_txn: args.cdc_rows_per_txn.clone(),
            writers: args.cdc_writers,
            snapshot_rows: args.cdc_snapshot_rows,
            burst_rows: args.cdc_burst_rows,
            burst_rows_per_txn: args.cdc_burst_rows_per_txn,
            burst_writers: args.cdc_burst_writers,
            relation: args.cdc_relation.clone(),
        };
        let run = cdc::run(&cdc_settings).await?;
        notes.extend(cdc::notes());
        let env = standalone_environment(args, &bin, run.pg_version.clone(), load_before);
        let text = format!(
            "{}\n{}",
            report::render_environment("PostgreSQL CDC", &env, &notes),
            cdc::render(&run, &cdc_settings)
        );
        return emit(args, &text);
    }
    if let Some(dir) = &args.tpch_queries {
        let run = tpch_queries::run(
            &bin,
            args.freshet_workers,
            args.pg_bindir.as_deref(),
            dir,
            &args.tpch_sql,
            tpch_queries::Options {
                runs: args.tpch_runs,
                pg_warmup: args.tpch_pg_warmup,
                pg_timeout: Duration::from_secs(args.tpch_pg_timeout),
            },
        )
        .await?;
        let env =
            standalone_environment(args, &bin, "PostgreSQL 15 (fsync on)".into(), load_before);
        let text = format!(
            "{}\n{}",
            report::render_environment("TPC-H queries", &env, &notes),
            tpch_queries::render(&run)
        );
        return emit(args, &text);
    }
    if let Some(dir) = &args.tpch_load {
        let run =
            tpch_load::run(&bin, args.freshet_workers, args.pg_bindir.as_deref(), dir).await?;
        let env =
            standalone_environment(args, &bin, "PostgreSQL 15 (fsync on)".into(), load_before);
        let text = format!(
            "{}\n{}",
            report::render_environment("TPC-H bulk load", &env, &notes),
            tpch_load::render(&run)
        );
        return emit(args, &text);
    }
    if args.sources {
        let rows = sources::run(&bin, args.freshet_workers).await?;
        notes.push("PostgreSQL has no sources; this section measures Freshet alone.".into());
        let env = standalone_environment(args, &bin, "not run".into(), load_before);
        let text = format!(
            "{}\n{}",
            report::render_environment("source ingest", &env, &notes),
            sources::render(&rows)
        );
        return emit(args, &text);
    }
    if args.kafka {
        let kafka_settings = kafka::KafkaSettings {
            bin: &bin,
            workers: args.freshet_workers,
            records: args.kafka_records,
            rate: args.kafka_rate,
            seconds: args.kafka_seconds,
        };
        let run = kafka::run(&kafka_settings).await?;
        notes.push("PostgreSQL has no sources; this section measures Freshet alone.".into());
        notes.extend(kafka::notes(&run));
        let env = standalone_environment(args, &bin, "not run".into(), load_before);
        let text = format!(
            "{}\n{}",
            report::render_environment("Kafka source ingest", &env, &notes),
            kafka::render(&run, &kafka_settings)
        );
        return emit(args, &text);
    }
    if args.restart || args.soak {
        let mut server = freshet::FreshetServer::start(&bin, args.freshet_workers).await?;
        let env = environment(args, &bin, settings.view, "not run".into(), load_before);
        let what = if args.restart { "restart" } else { "soak" };
        let mut text = report::render_environment(what, &env, &notes);
        text.push('\n');
        if args.restart {
            let run = recovery::restart(&mut server, args.restart_rows).await?;
            text.push_str(&recovery::render_restart(&run));
        } else {
            let samples =
                recovery::soak(&server, args.soak_updates, args.soak_rows_per_update, 20).await?;
            text.push_str(&recovery::render_soak(&samples, args.soak_rows_per_update));
        }
        return emit(args, &text);
    }
    let connections_settings = connections::ConnectionsSettings {
        bin: &bin,
        workers: args.freshet_workers,
        counts: args.connections_counts.clone(),
        seconds: args.connections_seconds,
        rows: args.connections_rows,
        seed: args.seed,
    };
    let pg_settings = if args.connections {
        vec![format!(
            "max_connections={}",
            connections_settings.max_connections()
        )]
    } else {
        vec![]
    };
    let pg = start_postgres(args, &pg_settings, &mut notes);
    let pg_version = match &pg {
        Some(pg) => postgres_version(pg).await,
        None => "not run".to_string(),
    };
    if args.connections {
        let rows = connections::run(&connections_settings, pg.as_ref()).await?;
        drop(pg);
        notes.push(format!(
            "Both servers ran with max_connections {} (PostgreSQL: `-c max_connections={}`; \
             Freshet: `--max-connections {}`).",
            connections_settings.max_connections(),
            connections_settings.max_connections(),
            connections_settings.max_connections()
        ));
        let env = standalone_environment(args, &bin, pg_version, load_before);
        let text = format!(
            "{}\n{}",
            report::render_environment("connections", &env, &notes),
            connections::render(&rows, &connections_settings)
        );
        return emit(args, &text);
    }
    if args.planning {
        let rows = planning::run(&bin, args.freshet_workers, pg.as_ref()).await?;
        drop(pg);
        planning::check(&rows)?;
        let env = standalone_environment(args, &bin, pg_version, load_before);
        let text = format!(
            "{}\n{}",
            report::render_environment("planning", &env, &notes),
            planning::render(&rows)
        );
        return emit(args, &text);
    }
    if args.writes {
        let write_settings = writes::WriteSettings {
            bin: &bin,
            workers: args.freshet_workers,
            rows: args.writes_rows,
            clients: args.writes_clients.clone(),
            seconds: args.writes_seconds,
        };
        let rows = writes::run(&write_settings, pg.as_ref()).await?;
        drop(pg);
        let env = standalone_environment(args, &bin, pg_version, load_before);
        let text = format!(
            "{}\n{}",
            report::render_environment("writes", &env, &notes),
            writes::render(&rows, &write_settings)
        );
        return emit(args, &text);
    }
    if args.lookup {
        let lookup_settings = lookup::LookupSettings {
            bin: &bin,
            workers: args.freshet_workers,
            rows: args.lookup_rows,
            clients: args.lookup_clients.clone(),
            seconds: args.lookup_seconds,
        };
        let rows = lookup::run(&lookup_settings, pg.as_ref()).await?;
        drop(pg);
        let env = environment(args, &bin, settings.view, pg_version, load_before);
        let text = format!(
            "{}\n{}",
            report::render_environment("keyed-lookup", &env, &notes),
            lookup::render(&rows, &lookup_settings)
        );
        return emit(args, &text);
    }
    let mut runs = vec![];
    for &size in &args.sizes {
        eprintln!("[{size} orders] generating data");
        let data = workload::generate(size, args.seed ^ size as u64);
        let freshet = run::freshet(&bin, args.freshet_workers, &data, size, &settings).await;
        let postgres = match &pg {
            Some(pg) => Some(run::postgres(pg, &data, size, &settings).await),
            None => None,
        };
        runs.push(SizeRun {
            size,
            freshet,
            postgres,
        });
    }
    drop(pg);
    let env = environment(args, &bin, settings.view, pg_version, load_before);
    let text = report::render(&env, &runs, &notes);
    emit(args, &text)
}

/// Print the report, and save it where `--report` says.
fn emit(args: &Args, text: &str) -> Result<()> {
    print!("{text}");
    if let Some(path) = &args.report {
        std::fs::write(path, text).context(format!("write the report to {}", path.display()))?;
        eprintln!("report written to {}", path.display());
    }
    Ok(())
}

/// Reject flag values that would make the measurements meaningless.
fn validate(args: &Args) -> Result<()> {
    if args.sizes.is_empty() || args.sizes.contains(&0) {
        return failed("--sizes must list positive numbers of orders");
    }
    if args.subscribe_rates.contains(&0) || args.subscribe_writers == 0 {
        return failed("--subscribe-rates and --subscribe-writers must be positive");
    }
    if args.connections
        && (args.connections_counts.is_empty()
            || args.connections_counts.contains(&0)
            || args.connections_seconds == 0
            || args.connections_rows == 0)
    {
        return failed(
            "--connections-counts, --connections-seconds and --connections-rows must be positive",
        );
    }
    if args.cdc
        && (args.cdc_rates.is_empty()
            || args.cdc_rates.contains(&0)
            || args.cdc_rows_per_txn.is_empty()
            || args.cdc_rows_per_txn.contains(&0)
            || args.cdc_seconds == 0
            || args.cdc_writers == 0
            || args.cdc_snapshot_rows == 0
            || args.cdc_burst_rows_per_txn == 0
            || args.cdc_burst_writers == 0
            || !matches!(args.cdc_relation.as_str(), "ticks_mv" | "ticks"))
    {
        return failed(
            "--cdc-rates, --cdc-rows-per-txn, --cdc-seconds, --cdc-writers, --cdc-snapshot-rows, \
             --cdc-burst-rows-per-txn and --cdc-burst-writers must be positive, and \
             --cdc-relation ticks_mv or ticks",
        );
    }
    if args.kafka && (args.kafka_records == 0 || args.kafka_rate == 0 || args.kafka_seconds == 0) {
        return failed("--kafka-records, --kafka-rate and --kafka-seconds must be positive");
    }
    if args.changes == 0 || args.batch == 0 || args.batches == 0 {
        return failed("--changes, --batch and --batches must be positive");
    }
    Ok(())
}

/// The freshet binary: as given if absolute or present relative to the
/// current directory, else relative to the workspace root (so the default
/// works from any directory).
fn resolve_bin(bin: &Path) -> Result<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidates = [bin.to_path_buf(), workspace.join(bin)];
    match candidates.iter().find(|p| p.is_file()) {
        Some(p) => Ok(p.canonicalize().unwrap_or_else(|_| p.clone())),
        None => failed(format!(
            "freshet binary {} not found (tried the current directory and the workspace \
             root); build it with `cargo build --release -p freshet-server` or pass \
             --freshet-bin",
            bin.display()
        )),
    }
}

/// Start PostgreSQL unless skipped; a failure is noted in the report and
/// Freshet is still measured.
fn start_postgres(args: &Args, settings: &[String], notes: &mut Vec<String>) -> Option<PgServer> {
    if args.skip_postgres {
        notes.push("PostgreSQL skipped (--skip-postgres).".into());
        return None;
    }
    eprintln!("starting PostgreSQL");
    match PgServer::start_with(args.pg_bindir.as_deref(), settings) {
        Ok(pg) => Some(pg),
        Err(e) => {
            eprintln!("PostgreSQL did not start: {e}");
            notes.push(format!("PostgreSQL did not start: {e}"));
            None
        }
    }
}

/// `SELECT version()`, for the environment table.
async fn postgres_version(pg: &PgServer) -> String {
    let version = async {
        let client = pg.connect().await?;
        db::rows(&client, "SELECT version()", "PostgreSQL").await
    };
    match version.await {
        Ok(rows) => rows
            .first()
            .and_then(|r| r.first().cloned().flatten())
            .unwrap_or_default(),
        Err(e) => format!("unknown ({e})"),
    }
}

/// The environment table of a benchmark other than view maintenance,
/// whose knobs (sizes, batches, the view) do not apply to it.
fn standalone_environment(
    args: &Args,
    bin: &Path,
    pg_version: String,
    load_before: String,
) -> Environment {
    let mut env = environment(args, bin, ViewKind::Materialized, pg_version, load_before);
    env.rows.retain(|(k, _)| {
        !matches!(
            *k,
            "region_stats on Freshet" | "orders sizes" | "changes / batch / batches"
        )
    });
    env
}

/// The environment table's rows.
fn environment(
    args: &Args,
    bin: &Path,
    view: ViewKind,
    pg_version: String,
    load_before: String,
) -> Environment {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let profile = args
        .build_profile
        .clone()
        .unwrap_or_else(|| guess_profile(bin));
    let workers = args
        .freshet_workers
        .map_or_else(|| "server default (no --workers)".into(), |n| n.to_string());
    let sizes: Vec<String> = args
        .sizes
        .iter()
        .map(|s| report::thousands(*s as f64))
        .collect();
    let rows = vec![
        (
            "date (UTC)",
            chrono::Utc::now().format("%Y-%m-%d %H:%M").to_string(),
        ),
        ("cores (available_parallelism)", cores.to_string()),
        ("memory", memory()),
        (
            "load average at start / end",
            format!("{load_before} / {}", load_average()),
        ),
        (
            "freshet binary",
            format!("`{}` ({})", bin.display(), freshet::version(bin)),
        ),
        ("freshet build profile", profile),
        ("freshet workers", workers),
        ("freshet durability", "default (fsync on commit)".into()),
        (
            "region_stats on Freshet",
            format!("`{}`", view.create_sql()),
        ),
        ("PostgreSQL", pg_version),
        ("PostgreSQL settings", postgres::PG_SETTINGS.into()),
        ("orders sizes", sizes.join(", ")),
        (
            "changes / batch / batches",
            format!(
                "{} per kind / {} rows / {}",
                args.changes, args.batch, args.batches
            ),
        ),
        ("seed", args.seed.to_string()),
    ];
    Environment { rows, view }
}

/// `release` or `debug` from the binary's path (`target/<profile>/freshet`).
fn guess_profile(bin: &Path) -> String {
    let parent = bin.parent().and_then(Path::file_name);
    match parent.and_then(|p| p.to_str()) {
        Some(p @ ("release" | "debug")) => p.to_string(),
        Some(p) => format!("unknown (binary in `{p}`; pass --build-profile)"),
        None => "unknown (pass --build-profile)".into(),
    }
}

/// The 1, 5 and 15 minute load averages: the machine may be shared.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Total memory from /proc/meminfo.
fn memory() -> String {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse::<f64>().ok())
        .map_or_else(
            || "unknown".into(),
            |kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0),
        )
}

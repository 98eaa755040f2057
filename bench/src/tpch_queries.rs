//! Ad hoc analytics over a loaded TPC-H database: the 22 queries (from
//! `../shared/bench/tpch/`) and a few scan probes (a key filter, a
//! non-key filter, `LIMIT`, `count(*)`), on Freshet and PostgreSQL 15 with
//! the same data and primary keys, each result compared row for row.
//!
//! Freshet is restarted after its load, so its queries read parts from
//! disk through its part cache as a server that was not just loaded does.
//! Times are client wall time including the fetch of the result: Freshet's
//! the median of three runs after a warm-up, PostgreSQL's one run after a
//! warm-up (its slow queries make more too long), with a per-statement
//! timeout. Freshet's resident memory is taken before the queries, at its
//! peak during them and after them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio_postgres::{Client, SimpleQueryMessage};

use crate::error::{Context, Result};
use crate::freshet::FreshetServer;
use crate::postgres::PgServer;
use crate::tpch_load::{TABLES, copy_file, create_sql, csv, dir_bytes, proc_kib};

/// How the queries are timed (`freshet-bench` defaults: 3 runs, a
/// PostgreSQL warm-up, 60 s); at SF10 fewer runs and
/// a longer PostgreSQL timeout keep the run within the hour.
#[derive(Clone, Debug)]
pub struct Options {
    /// Timed Freshet runs of each query after one warm-up (the median is
    /// reported).
    pub runs: usize,
    /// Whether PostgreSQL runs each query once before the timed run.
    pub pg_warmup: bool,
    /// PostgreSQL gives up on a query after this long.
    pub pg_timeout: Duration,
}

/// Scan probes: what a table scan reads for a key filter, a filter on
/// another column, a limit and a count.
const PROBES: [(&str, &str); 5] = [
    (
        "key filter",
        "SELECT * FROM lineitem WHERE l_orderkey = 4000000",
    ),
    (
        "non-key filter",
        "SELECT count(*) FROM lineitem WHERE l_shipdate = date '1995-06-17'",
    ),
    ("limit", "SELECT * FROM lineitem LIMIT 1"),
    ("count", "SELECT count(*) FROM lineitem"),
    (
        "key range",
        "SELECT count(*), sum(o_totalprice) FROM orders WHERE o_orderkey BETWEEN 1000000 AND 1010000",
    ),
];

/// One query on both systems.
#[derive(Debug)]
pub struct QueryRun {
    name: String,
    /// Median seconds (Freshet), seconds (PostgreSQL); `None`: failed or
    /// timed out (the reason in `note`).
    freshet: Option<f64>,
    postgres: Option<f64>,
    rows: usize,
    /// Whether the results are equal as multisets (numbers to 1e-6
    /// relative); `None` when one side has no result.
    agree: Option<bool>,
    note: String,
}

/// The benchmark's results.
#[derive(Debug)]
pub struct TpchQueries {
    dir: PathBuf,
    options: Options,
    /// Seconds to load Freshet (tables with primary keys, every COPY),
    /// its peak RSS while loading and its data directory after (KiB,
    /// bytes).
    freshet_load: f64,
    freshet_load_peak: Option<u64>,
    freshet_disk: u64,
    /// Seconds to load PostgreSQL (COPY, then primary keys, then ANALYZE).
    pg_load: f64,
    probes: Vec<QueryRun>,
    queries: Vec<QueryRun>,
    /// Freshet's RSS after the restart (KiB), its peak during the queries,
    /// and after them.
    rss_before: Option<u64>,
    rss_peak: Option<u64>,
    rss_after: Option<u64>,
}

type Rows = Vec<Vec<Option<String>>>;

/// Run `sql` (one or more statements) and collect the rows it returns.
async fn rows_of(client: &Client, sql: &str) -> std::result::Result<Rows, String> {
    let messages = client
        .simple_query(sql)
        .await
        .map_err(|e| match e.as_db_error() {
            Some(db) => format!("{}: {}", db.code().code(), db.message()),
            None => e.to_string(),
        })?;
    Ok(messages
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => Some(
                (0..r.len())
                    .map(|i| r.get(i).map(|v| v.trim_end().to_string()))
                    .collect(),
            ),
            _ => None,
        })
        .collect())
}

fn same_value(a: &Option<String>, b: &Option<String>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) if a == b => true,
        (Some(a), Some(b)) => match (a.parse::<f64>(), b.parse::<f64>()) {
            (Ok(x), Ok(y)) => (x - y).abs() <= 1e-6 * x.abs().max(y.abs()).max(1.0),
            _ => false,
        },
        (None, None) => true,
        _ => false,
    }
}

/// Equal as multisets, numbers compared to 1e-6 relative (decimal
/// averages differ in their last digits between engines).
fn agree(a: &Rows, b: &Rows) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let sorted = |r: &Rows| {
        let mut r = r.clone();
        r.sort();
        r
    };
    let (a, b) = (sorted(a), sorted(b));
    a.iter()
        .zip(&b)
        .all(|(x, y)| x.len() == y.len() && x.iter().zip(y).all(|(u, v)| same_value(u, v)))
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The 22 queries' SQL, by name.
fn queries(sql_dir: &Path) -> Result<Vec<(String, String)>> {
    (1..=22)
        .map(|i| {
            let path = sql_dir.join(format!("q{i}.sql"));
            let sql = std::fs::read_to_string(&path).context(format!("read {}", path.display()))?;
            Ok((format!("q{i}"), sql))
        })
        .collect()
}

/// Load, restart, then run the probes and the 22 queries on both systems.
pub async fn run(
    bin: &Path,
    workers: Option<u32>,
    pg_bindir: Option<&Path>,
    dir: &Path,
    sql_dir: &Path,
    options: Options,
) -> Result<TpchQueries> {
    let sql = queries(sql_dir)?;
    eprintln!("tpch queries: loading Freshet");
    let mut server = FreshetServer::start(bin, workers).await?;
    let start = Instant::now();
    {
        let client = server.connect().await?;
        for stmt in create_sql(true) {
            client.batch_execute(&stmt).await.context(stmt.clone())?;
        }
        for (t, _, _) in TABLES {
            copy_file(&client, t, &csv(dir, t)).await?;
        }
    }
    let freshet_load = start.elapsed().as_secs_f64();
    let freshet_load_peak = proc_kib(server.pid(), "VmHWM:");
    let freshet_disk = dir_bytes(&server.data_dir());
    eprintln!("tpch queries: Freshet loaded in {freshet_load:.1} s");
    server.kill_and_restart().await?;
    eprintln!("tpch queries: loading PostgreSQL");
    let pg = PgServer::start_with(pg_bindir, &[])?;
    let start = Instant::now();
    let pg_client = pg.connect().await?;
    for stmt in create_sql(false) {
        pg_client.batch_execute(&stmt).await.context(stmt.clone())?;
    }
    for (t, _, pk) in TABLES {
        copy_file(&pg_client, t, &csv(dir, t)).await?;
        let stmt = format!("ALTER TABLE {t} ADD PRIMARY KEY ({pk})");
        pg_client.batch_execute(&stmt).await.context(stmt)?;
    }
    pg_client
        .batch_execute(&format!(
            "ANALYZE; SET statement_timeout = {}",
            options.pg_timeout.as_millis()
        ))
        .await
        .context("ANALYZE")?;
    let pg_load = start.elapsed().as_secs_f64();
    eprintln!("tpch queries: PostgreSQL loaded in {pg_load:.1} s");

    let client = server.connect().await?;
    let pid = server.pid();
    let rss_before = proc_kib(pid, "VmRSS:");
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
    let mut probes = Vec::new();
    for (name, q) in PROBES {
        probes.push(compare(&client, &pg_client, name, q, &options).await);
    }
    let mut runs = Vec::new();
    for (name, q) in &sql {
        runs.push(compare(&client, &pg_client, name, q, &options).await);
    }
    let rss_peak = proc_kib(pid, "VmHWM:");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after = proc_kib(pid, "VmRSS:");
    Ok(TpchQueries {
        dir: dir.to_path_buf(),
        options,
        freshet_load,
        freshet_load_peak,
        freshet_disk,
        pg_load,
        probes,
        queries: runs,
        rss_before,
        rss_peak,
        rss_after,
    })
}

/// Time `q` on both systems and compare the results.
async fn compare(
    freshet: &Client,
    pg: &Client,
    name: &str,
    q: &str,
    options: &Options,
) -> QueryRun {
    let mut note = String::new();
    let mut times = Vec::new();
    let mut result = None;
    for i in 0..=options.runs.max(1) {
        let start = Instant::now();
        match rows_of(freshet, q).await {
            Ok(rows) => {
                if i > 0 {
                    times.push(start.elapsed().as_secs_f64());
                }
                result = Some(rows);
            }
            Err(e) => {
                note = format!("Freshet: {e}");
                result = None;
                times.clear();
                break;
            }
        }
    }
    let freshet_secs = (!times.is_empty()).then(|| median(times));
    // Warm up (unless told not to), then time one run (a query that fails
    // or times out is not run again).
    let mut pg_result = None;
    let mut pg_secs = None;
    let first = usize::from(!options.pg_warmup);
    for i in first..2 {
        let start = Instant::now();
        match rows_of(pg, q).await {
            Ok(rows) => {
                if i == 1 {
                    pg_secs = Some(start.elapsed().as_secs_f64());
                }
                pg_result = Some(rows);
            }
            Err(e) => {
                if !note.is_empty() {
                    note.push_str("; ");
                }
                note.push_str(&format!("PostgreSQL: {e}"));
                // q15's view may be left behind by a failed run.
                let _ = pg.batch_execute("DROP VIEW IF EXISTS revenue0").await;
                pg_result = None;
                break;
            }
        }
    }
    let agree = match (&result, &pg_result) {
        (Some(a), Some(b)) => Some(agree(a, b)),
        _ => None,
    };
    eprintln!(
        "  {name}: Freshet {freshet_secs:?} s, PostgreSQL {pg_secs:?} s, agree {agree:?} {note}"
    );
    QueryRun {
        name: name.to_string(),
        freshet: freshet_secs,
        postgres: pg_secs,
        rows: result.as_ref().map_or(0, Vec::len),
        agree,
        note,
    }
}

fn secs(s: Option<f64>) -> String {
    s.map_or("-".into(), |s| format!("{:.3}", s))
}

fn table(out: &mut String, runs: &[QueryRun]) {
    out.push_str(
        "| query | rows | Freshet s | PostgreSQL s | Freshet/PostgreSQL | results equal | note |\n|---|---:|---:|---:|---:|---|---|\n",
    );
    for r in runs {
        let ratio = match (r.freshet, r.postgres) {
            (Some(f), Some(p)) if p > 0.0 => format!("{:.2}x", f / p),
            _ => "-".into(),
        };
        let agree = match r.agree {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "-",
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.name,
            r.rows,
            secs(r.freshet),
            secs(r.postgres),
            ratio,
            agree,
            r.note
        ));
    }
}

/// The report section.
pub fn render(run: &TpchQueries) -> String {
    let mib = |k: Option<u64>| k.map_or("-".into(), |k| format!("{:.0} MiB", k as f64 / 1024.0));
    let mut out = format!(
        "## TPC-H ad hoc queries ({}; Freshet restarted after its load)\n\n",
        run.dir.display()
    );
    out.push_str(&format!(
        "Freshet: median of {} runs after a warm-up. PostgreSQL: one run{}, {} s timeout.\n\n",
        run.options.runs.max(1),
        if run.options.pg_warmup {
            " after a warm-up"
        } else {
            ", no warm-up"
        },
        run.options.pg_timeout.as_secs(),
    ));
    out.push_str(&format!(
        "Load with primary keys: Freshet {:.1} s (peak RSS {}, data directory {:.2} GB), PostgreSQL {:.1} s (COPY, primary keys, ANALYZE).\n\n### Scan probes\n\n",
        run.freshet_load,
        mib(run.freshet_load_peak),
        run.freshet_disk as f64 / 1e9,
        run.pg_load,
    ));
    table(&mut out, &run.probes);
    out.push_str("\n### The 22 queries\n\n");
    table(&mut out, &run.queries);
    let both: Vec<&QueryRun> = run
        .queries
        .iter()
        .filter(|r| r.freshet.is_some() && r.postgres.is_some())
        .collect();
    let f: f64 = both.iter().filter_map(|r| r.freshet).sum();
    let p: f64 = both.iter().filter_map(|r| r.postgres).sum();
    let freshet_all: f64 = run.queries.iter().filter_map(|r| r.freshet).sum();
    out.push_str(&format!(
        "\nTotal over the {} queries both finished: Freshet {f:.2} s, PostgreSQL {p:.2} s. Freshet over all {} it finished: {freshet_all:.2} s. Freshet RSS before the queries {}, peak during them {}, after them {}.\n\n",
        both.len(),
        run.queries.iter().filter(|r| r.freshet.is_some()).count(),
        mib(run.rss_before),
        mib(run.rss_peak),
        mib(run.rss_after),
    ));
    out
}

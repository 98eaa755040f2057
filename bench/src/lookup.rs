//! Keyed lookups: an indexed materialized view in Freshet against a
//! primary-key lookup in PostgreSQL, driven by `pgbench` with a custom
//! script, for several query shapes, client counts and both protocols.
//!
//! Both systems hold `kv (k int, v text)` with `--lookup-rows` rows and
//! `dim (id int, name text)` with 100. Freshet serves reads of `kv_mv`
//! (`AS SELECT k, v FROM kv`, indexed on `k`); PostgreSQL the same reads
//! of `kv` through its primary key. The shapes: the whole row by key, one
//! column by key (both answered from the index without a DataFusion plan),
//! the keyed row joined with `dim` (Freshet: `dim` indexed on `id`, as
//! PostgreSQL's primary key indexes it; the keyed peek joined with a
//! lookup of that index, again without a DataFusion plan), and ten
//! consecutive keys (`k BETWEEN :k AND :k2`, `k2 = k + 9`: a range of the
//! index in Freshet, an index range scan in PostgreSQL). `pgbench -n -M
//! simple|prepared -c N -j min(N, 2) -T secs` runs on the same machine,
//! against each server in turn.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::db;
use crate::error::{Context, Result, failed};
use crate::freshet::FreshetServer;
use crate::postgres::PgServer;

/// One `pgbench` run's figures.
#[derive(Debug, Clone, Copy)]
pub struct PgbenchResult {
    /// Transactions (lookups) per second, without connection time.
    pub tps: f64,
    /// Mean latency in milliseconds.
    pub latency_ms: f64,
    /// Transactions that completed.
    pub transactions: u64,
}

/// A query shape, as each system spells it (`:k` is pgbench's key).
struct Shape {
    name: &'static str,
    freshet: &'static str,
    postgres: &'static str,
}

const SHAPES: &[Shape] = &[
    Shape {
        name: "`SELECT *` by key",
        freshet: "SELECT * FROM kv_mv WHERE k = :k",
        postgres: "SELECT * FROM kv WHERE k = :k",
    },
    Shape {
        name: "one column by key",
        freshet: "SELECT v FROM kv_mv WHERE k = :k",
        postgres: "SELECT v FROM kv WHERE k = :k",
    },
    Shape {
        name: "by key, joined with a table",
        freshet: "SELECT kv_mv.v, dim.name FROM kv_mv JOIN dim ON dim.id = kv_mv.k % 100 WHERE kv_mv.k = :k",
        postgres: "SELECT kv.v, dim.name FROM kv JOIN dim ON dim.id = kv.k % 100 WHERE kv.k = :k",
    },
    Shape {
        name: "a range of ten keys",
        freshet: "SELECT k, v FROM kv_mv WHERE k BETWEEN :k AND :k2",
        postgres: "SELECT k, v FROM kv WHERE k BETWEEN :k AND :k2",
    },
];

/// One measured combination of a pgbench benchmark (lookups, writes).
#[derive(Debug, Clone)]
pub struct PgbenchRow {
    /// The query shape.
    pub shape: &'static str,
    /// `simple` or `prepared`.
    pub mode: &'static str,
    /// Concurrent clients.
    pub clients: u32,
    /// Freshet's figures.
    pub freshet: PgbenchResult,
    /// PostgreSQL's, if it ran.
    pub postgres: Option<PgbenchResult>,
}

/// What the lookup benchmark needs to know.
pub struct LookupSettings<'a> {
    /// The freshet binary.
    pub bin: &'a Path,
    /// `--workers` for freshet.
    pub workers: Option<u32>,
    /// Rows in `kv`.
    pub rows: usize,
    /// Client counts.
    pub clients: Vec<u32>,
    /// Seconds per pgbench run.
    pub seconds: u64,
}

/// Load both systems, then run pgbench for every mode and client count.
pub async fn run(settings: &LookupSettings<'_>, pg: Option<&PgServer>) -> Result<Vec<PgbenchRow>> {
    let freshet = FreshetServer::start(settings.bin, settings.workers).await?;
    let fc = freshet.connect().await?;
    let n = settings.rows;
    for sql in [
        "CREATE TABLE kv (k int, v text)".to_string(),
        format!("INSERT INTO kv SELECT value, 'value ' || value FROM generate_series(1, {n})"),
        "CREATE MATERIALIZED VIEW kv_mv AS SELECT k, v FROM kv".to_string(),
        "CREATE INDEX kv_mv_k ON kv_mv (k)".to_string(),
        "CREATE TABLE dim (id int PRIMARY KEY, name text)".to_string(),
        "INSERT INTO dim SELECT value, 'name ' || value FROM generate_series(0, 99)".to_string(),
        "CREATE INDEX dim_id ON dim (id)".to_string(),
    ] {
        db::exec(&fc, &sql, "Freshet").await?;
    }
    // The index is built once a read through it returns every row.
    let counted = db::rows(&fc, "SELECT count(*) FROM kv_mv", "Freshet").await?;
    if counted.first().and_then(|r| r.first().cloned()).flatten() != Some(n.to_string()) {
        return failed(format!("kv_mv does not hold {n} rows: {counted:?}"));
    }
    for shape in SHAPES {
        let sql = format!(
            "EXPLAIN {}",
            shape.freshet.replace(":k2", "10").replace(":k", "1")
        );
        let plan = db::rows(&fc, &sql, "Freshet").await?;
        let first = plan.first().and_then(|r| r.first().cloned()).flatten();
        if !first.as_deref().is_some_and(|l| l.starts_with("Fast path")) {
            return failed(format!(
                "{} does not take the index fast path: {first:?}",
                shape.name
            ));
        }
    }
    if let Some(pg) = pg {
        let pc = pg.connect().await?;
        for sql in [
            "DROP TABLE IF EXISTS kv".to_string(),
            "CREATE TABLE kv (k int PRIMARY KEY, v text)".to_string(),
            format!("INSERT INTO kv SELECT g, 'value ' || g FROM generate_series(1, {n}) g"),
            "DROP TABLE IF EXISTS dim".to_string(),
            "CREATE TABLE dim (id int PRIMARY KEY, name text)".to_string(),
            "INSERT INTO dim SELECT g, 'name ' || g FROM generate_series(0, 99) g".to_string(),
            "VACUUM ANALYZE kv".to_string(),
            "VACUUM ANALYZE dim".to_string(),
        ] {
            db::exec(&pc, &sql, "PostgreSQL").await?;
        }
    }
    let dir = tempfile::tempdir().context("create a temp dir for pgbench scripts")?;
    let script = |name: String, query: &str| -> Result<std::path::PathBuf> {
        let path = dir.path().join(name);
        let text = format!("\\set k random(1, {n})\n\\set k2 :k + 9\n{query};\n");
        std::fs::write(&path, text).context(format!("write {}", path.display()))?;
        Ok(path)
    };
    let mut out = Vec::new();
    for (i, shape) in SHAPES.iter().enumerate() {
        let freshet_script = script(format!("freshet{i}.sql"), shape.freshet)?;
        let pg_script = script(format!("postgres{i}.sql"), shape.postgres)?;
        for mode in ["simple", "prepared"] {
            for &clients in &settings.clients {
                eprintln!("lookup: {}, {mode}, {clients} client(s)", shape.name);
                let (f, p) = pgbench_pair(
                    freshet.port(),
                    pg,
                    mode,
                    clients,
                    settings.seconds,
                    (&freshet_script, &pg_script),
                )?;
                out.push(PgbenchRow {
                    shape: shape.name,
                    mode,
                    clients,
                    freshet: f,
                    postgres: p,
                });
            }
        }
    }
    drop(freshet);
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(out)
}

/// Where pgbench connects.
struct Target {
    port: u16,
    user: &'static str,
    db: &'static str,
}

/// Run pgbench against Freshet (on `freshet_port`), then against
/// PostgreSQL if it runs, with the same settings; `scripts` is each
/// system's script.
pub(crate) fn pgbench_pair(
    freshet_port: u16,
    pg: Option<&PgServer>,
    mode: &str,
    clients: u32,
    seconds: u64,
    scripts: (&Path, &Path),
) -> Result<(PgbenchResult, Option<PgbenchResult>)> {
    let freshet = Target {
        port: freshet_port,
        user: "freshet",
        db: "freshet",
    };
    let f = pgbench(&freshet, mode, clients, seconds, scripts.0)?;
    let p = match pg {
        Some(pg) => {
            let target = Target {
                port: pg.port(),
                user: "postgres",
                db: "postgres",
            };
            Some(pgbench(&target, mode, clients, seconds, scripts.1)?)
        }
        None => None,
    };
    Ok((f, p))
}

/// Run pgbench once and read its tps and mean latency.
fn pgbench(
    target: &Target,
    mode: &str,
    clients: u32,
    seconds: u64,
    script: &Path,
) -> Result<PgbenchResult> {
    let out = Command::new("pgbench")
        .args(["-n", "-h", "127.0.0.1"])
        .arg("-p")
        .arg(target.port.to_string())
        .arg("-U")
        .arg(target.user)
        .arg("-M")
        .arg(mode)
        .arg("-c")
        .arg(clients.to_string())
        .arg("-j")
        .arg(clients.min(2).to_string())
        .arg("-T")
        .arg(seconds.to_string())
        .arg("-f")
        .arg(script)
        .arg(target.db)
        .output()
        .context("run pgbench (is PostgreSQL's client package installed?)")?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        return failed(format!(
            "pgbench failed: {}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let field = |prefix: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    };
    let processed = text
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("number of transactions actually processed: ")
        })
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|v| v.parse().ok());
    match (field("tps = "), field("latency average = "), processed) {
        (Some(tps), Some(latency_ms), Some(transactions)) => Ok(PgbenchResult {
            tps,
            latency_ms,
            transactions,
        }),
        _ => failed(format!("cannot read pgbench's output:\n{text}")),
    }
}

/// The Markdown section of the lookup benchmark.
pub fn render(rows: &[PgbenchRow], settings: &LookupSettings<'_>) -> String {
    let mut s = format!(
        "## Keyed lookups: indexed materialized view vs primary key\n\n\
         `kv` has {} rows, `dim` 100. Freshet reads the materialized view `kv_mv` (`SELECT k, v \
         FROM kv`, indexed on `k`); PostgreSQL reads `kv` through its primary key. Shapes: \
         `SELECT * … WHERE k = :k` and `SELECT v … WHERE k = :k` (Freshet: peeks of the index, \
         no query plan), and the keyed row joined with `dim ON dim.id = k % 100` (Freshet: the \
         peek joined with a lookup of `dim`'s index on `id`, no query plan). pgbench `-n -c N -j min(N,2) -T {}` with a random key per \
         transaction, against each server in turn on this machine.\n\n\
         | shape | protocol | clients | Freshet tps | PostgreSQL tps | Freshet / PostgreSQL | \
         Freshet latency (ms) | PostgreSQL latency (ms) |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
        settings.rows, settings.seconds
    );
    for r in rows {
        let (pg_tps, ratio, pg_lat) = match r.postgres {
            Some(p) => (
                format!("{:.0}", p.tps),
                format!("{:.2}×", r.freshet.tps / p.tps),
                format!("{:.3}", p.latency_ms),
            ),
            None => ("—".into(), "—".into(), "—".into()),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {:.0} | {} | {} | {:.3} | {} |\n",
            r.shape, r.mode, r.clients, r.freshet.tps, pg_tps, ratio, r.freshet.latency_ms, pg_lat
        ));
    }
    s
}

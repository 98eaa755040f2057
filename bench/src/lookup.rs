//! Keyed lookups: an indexed materialized view in Freshet against a
//! primary-key lookup in PostgreSQL, driven by `pgbench` with a custom
//! script, for several client counts and both query protocols.
//!
//! Both systems hold `kv (k int, v text)` with `--lookup-rows` rows. Freshet
//! serves `SELECT * FROM kv_mv WHERE k = :k` from an index on the
//! materialized view `kv_mv AS SELECT k, v FROM kv`; PostgreSQL serves
//! `SELECT * FROM kv WHERE k = :k` from the table's primary key. `pgbench
//! -n -M simple|prepared -c N -j min(N, 2) -T secs` runs on the same machine,
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
}

/// One measured combination.
#[derive(Debug, Clone)]
pub struct LookupRow {
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
pub async fn run(settings: &LookupSettings<'_>, pg: Option<&PgServer>) -> Result<Vec<LookupRow>> {
    let freshet = FreshetServer::start(settings.bin, settings.workers).await?;
    let fc = freshet.connect().await?;
    let n = settings.rows;
    for sql in [
        "CREATE TABLE kv (k int, v text)".to_string(),
        format!("INSERT INTO kv SELECT value, 'value ' || value FROM generate_series(1, {n})"),
        "CREATE MATERIALIZED VIEW kv_mv AS SELECT k, v FROM kv".to_string(),
        "CREATE INDEX kv_mv_k ON kv_mv (k)".to_string(),
    ] {
        db::exec(&fc, &sql, "Freshet").await?;
    }
    // The index is built once a read through it returns every row.
    let counted = db::rows(&fc, "SELECT count(*) FROM kv_mv", "Freshet").await?;
    if counted.first().and_then(|r| r.first().cloned()).flatten() != Some(n.to_string()) {
        return failed(format!("kv_mv does not hold {n} rows: {counted:?}"));
    }
    let plan = db::rows(&fc, "EXPLAIN SELECT * FROM kv_mv WHERE k = 1", "Freshet").await?;
    let first = plan.first().and_then(|r| r.first().cloned()).flatten();
    if !first.as_deref().is_some_and(|l| l.starts_with("Fast path")) {
        return failed(format!(
            "the lookup does not take the index fast path: {first:?}"
        ));
    }
    if let Some(pg) = pg {
        let pc = pg.connect().await?;
        for sql in [
            "DROP TABLE IF EXISTS kv".to_string(),
            "CREATE TABLE kv (k int PRIMARY KEY, v text)".to_string(),
            format!("INSERT INTO kv SELECT g, 'value ' || g FROM generate_series(1, {n}) g"),
            "VACUUM ANALYZE kv".to_string(),
        ] {
            db::exec(&pc, &sql, "PostgreSQL").await?;
        }
    }
    let dir = tempfile::tempdir().context("create a temp dir for pgbench scripts")?;
    let script = |name: &str, relation: &str| -> Result<std::path::PathBuf> {
        let path = dir.path().join(name);
        let text = format!("\\set k random(1, {n})\nSELECT * FROM {relation} WHERE k = :k;\n");
        std::fs::write(&path, text).context(format!("write {}", path.display()))?;
        Ok(path)
    };
    let freshet_script = script("freshet.sql", "kv_mv")?;
    let pg_script = script("postgres.sql", "kv")?;
    let mut out = Vec::new();
    for mode in ["simple", "prepared"] {
        for &clients in &settings.clients {
            eprintln!("lookup: {mode}, {clients} client(s)");
            let target = Target {
                port: freshet.port(),
                user: "freshet",
                db: "freshet",
            };
            let f = pgbench(&target, mode, clients, settings.seconds, &freshet_script)?;
            let p = match pg {
                Some(pg) => {
                    let target = Target {
                        port: pg.port(),
                        user: "postgres",
                        db: "postgres",
                    };
                    Some(pgbench(
                        &target,
                        mode,
                        clients,
                        settings.seconds,
                        &pg_script,
                    )?)
                }
                None => None,
            };
            out.push(LookupRow {
                mode,
                clients,
                freshet: f,
                postgres: p,
            });
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
    match (field("tps = "), field("latency average = ")) {
        (Some(tps), Some(latency_ms)) => Ok(PgbenchResult { tps, latency_ms }),
        _ => failed(format!("cannot read pgbench's output:\n{text}")),
    }
}

/// The Markdown section of the lookup benchmark.
pub fn render(rows: &[LookupRow], settings: &LookupSettings<'_>) -> String {
    let mut s = format!(
        "## Keyed lookups: indexed materialized view vs primary key\n\n\
         `kv` has {} rows. Freshet answers `SELECT * FROM kv_mv WHERE k = :k` from an index on \
         the materialized view `kv_mv` (the fast path, no query plan); PostgreSQL answers \
         `SELECT * FROM kv WHERE k = :k` from the primary key. pgbench `-n -c N -j min(N,2) \
         -T {}` with a random key per transaction, against each server in turn on this \
         machine.\n\n\
         | protocol | clients | Freshet tps | PostgreSQL tps | Freshet / PostgreSQL | \
         Freshet latency (ms) | PostgreSQL latency (ms) |\n|---|---:|---:|---:|---:|---:|---:|\n",
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
            "| {} | {} | {:.0} | {} | {} | {:.3} | {} |\n",
            r.mode, r.clients, r.freshet.tps, pg_tps, ratio, r.freshet.latency_ms, pg_lat
        ));
    }
    s
}

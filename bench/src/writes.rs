//! Writes: single-row `INSERT`s (into a table without and with a primary
//! key) and `UPDATE`s by primary key, driven by `pgbench` against Freshet
//! and PostgreSQL (`fsync` on) in turn, for several client counts and both
//! protocols.
//!
//! Both systems hold `w_plain (k bigint, v int)`, `w_keyed (k bigint
//! PRIMARY KEY, v int)` and `kv (k int PRIMARY KEY, v int)` with
//! `--writes-rows` rows. Inserts use random keys in 1..9·10¹⁸ (a repeat
//! is a 23505 that pgbench would report; none happened in any run), so
//! the key check of `w_keyed` grows with the run; updates pick a random
//! key of `kv`.

use std::time::Duration;

use crate::db;
use crate::error::{Context, Result, failed};
use crate::freshet::FreshetServer;
use crate::lookup::{PgbenchRow, pgbench_pair};
use crate::postgres::PgServer;

/// A measured statement, as both systems spell it (`:k` is pgbench's
/// key, drawn from `range`).
struct Shape {
    name: &'static str,
    sql: &'static str,
    /// Whether `:k` ranges over `kv`'s rows (else over 1..9·10¹⁸).
    existing_key: bool,
}

const SHAPES: &[Shape] = &[
    Shape {
        name: "INSERT, no key",
        sql: "INSERT INTO w_plain VALUES (:k, 1)",
        existing_key: false,
    },
    Shape {
        name: "INSERT, primary key",
        sql: "INSERT INTO w_keyed VALUES (:k, 1)",
        existing_key: false,
    },
    Shape {
        name: "UPDATE by primary key",
        sql: "UPDATE kv SET v = v + 1 WHERE k = :k",
        existing_key: true,
    },
];

/// What the writes benchmark needs to know.
pub struct WriteSettings<'a> {
    /// The freshet binary.
    pub bin: &'a std::path::Path,
    /// `--workers` for freshet.
    pub workers: Option<u32>,
    /// Rows in `kv`.
    pub rows: usize,
    /// Client counts.
    pub clients: Vec<u32>,
    /// Seconds per pgbench run.
    pub seconds: u64,
}

/// The tables, as both systems create them.
fn setup(rows: usize) -> Vec<String> {
    vec![
        "DROP TABLE IF EXISTS w_plain".into(),
        "DROP TABLE IF EXISTS w_keyed".into(),
        "DROP TABLE IF EXISTS kv".into(),
        "CREATE TABLE w_plain (k bigint, v int)".into(),
        "CREATE TABLE w_keyed (k bigint PRIMARY KEY, v int)".into(),
        "CREATE TABLE kv (k int PRIMARY KEY, v int)".into(),
        format!("INSERT INTO kv SELECT g, 0 FROM generate_series(1, {rows}) g"),
    ]
}

/// Load both systems, then run pgbench for every statement, protocol and
/// client count, Freshet and PostgreSQL one after the other per row.
pub async fn run(settings: &WriteSettings<'_>, pg: Option<&PgServer>) -> Result<Vec<PgbenchRow>> {
    let freshet = FreshetServer::start(settings.bin, settings.workers).await?;
    let fc = freshet.connect().await?;
    for sql in setup(settings.rows) {
        db::exec(&fc, &sql, "Freshet").await?;
    }
    // The update must read its row by key, not scan the table.
    let plan = db::rows(
        &fc,
        "EXPLAIN UPDATE kv SET v = v + 1 WHERE k = 1",
        "Freshet",
    )
    .await?;
    let first = plan.first().and_then(|r| r.first().cloned()).flatten();
    if !first.as_deref().is_some_and(|l| l.starts_with("Fast path")) {
        return failed(format!("the keyed UPDATE does not read by key: {first:?}"));
    }
    if let Some(pg) = pg {
        let pc = pg.connect().await?;
        for sql in setup(settings.rows) {
            db::exec(&pc, &sql, "PostgreSQL").await?;
        }
        db::exec(&pc, "VACUUM ANALYZE kv", "PostgreSQL").await?;
    }
    let dir = tempfile::tempdir().context("create a temp dir for pgbench scripts")?;
    let mut out = Vec::new();
    for (i, shape) in SHAPES.iter().enumerate() {
        let range = if shape.existing_key {
            format!("random(1, {})", settings.rows)
        } else {
            "random(1, 9000000000000000000)".to_string()
        };
        let path = dir.path().join(format!("write{i}.sql"));
        std::fs::write(&path, format!("\\set k {range}\n{};\n", shape.sql))
            .context(format!("write {}", path.display()))?;
        for mode in ["simple", "prepared"] {
            for &clients in &settings.clients {
                eprintln!("writes: {}, {mode}, {clients} client(s)", shape.name);
                let (f, p) = pgbench_pair(
                    freshet.port(),
                    pg,
                    mode,
                    clients,
                    settings.seconds,
                    (&path, &path),
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
    // Every update landed once: `v` sums to the updates pgbench counted.
    let updates: u64 = out
        .iter()
        .filter(|r| r.shape == "UPDATE by primary key")
        .map(|r| r.freshet.transactions)
        .sum();
    let sum = db::rows(&fc, "SELECT sum(v) FROM kv", "Freshet").await?;
    let sum = sum.first().and_then(|r| r.first().cloned()).flatten();
    if sum != Some(updates.to_string()) {
        return failed(format!("kv sums to {sum:?} after {updates} updates by key"));
    }
    drop(freshet);
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(out)
}

/// The Markdown section of the writes benchmark.
pub fn render(rows: &[PgbenchRow], settings: &WriteSettings<'_>) -> String {
    let mut s = format!(
        "## Writes: single-row INSERT and UPDATE by primary key\n\n\
         `kv` has {} rows. pgbench `-n -c N -j min(N,2) -T {}`, one statement per \
         transaction with a random key, against each server in turn on this machine \
         (PostgreSQL with `fsync` on). Ratios: Freshet's tps over PostgreSQL's (≥ 1 is \
         better), and Freshet's latency over PostgreSQL's (≤ 1 is better).\n\n\
         | statement | protocol | clients | Freshet tps | PostgreSQL tps | tps ratio | \
         Freshet latency (ms) | PostgreSQL latency (ms) | latency ratio |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n",
        settings.rows, settings.seconds
    );
    for r in rows {
        let (pg_tps, ratio, pg_lat, lat_ratio) = match r.postgres {
            Some(p) => (
                format!("{:.0}", p.tps),
                format!("{:.2}×", r.freshet.tps / p.tps),
                format!("{:.3}", p.latency_ms),
                format!("{:.2}×", r.freshet.latency_ms / p.latency_ms),
            ),
            None => ("—".into(), "—".into(), "—".into(), "—".into()),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {:.0} | {} | {} | {:.3} | {} | {} |\n",
            r.shape,
            r.mode,
            r.clients,
            r.freshet.tps,
            pg_tps,
            ratio,
            r.freshet.latency_ms,
            pg_lat,
            lat_ratio
        ));
    }
    s
}

//! Restart and soak benchmarks (`--restart`, `--soak`).
//!
//! *Restart*: load `orders` (`--restart-rows`) and `customers`, define a
//! join + aggregate view, time its initial hydration, `kill -9` the server
//! and time, from the new process's start, (1) accepting connections, (2)
//! a `serializable` read of the view (answered from its shard), and (3) a
//! `strict serializable` read (which waits until the view is fresh).
//!
//! *Soak*: `--soak-updates` single-row-equivalent updates over 1,000 keys
//! with a view over them, sampling the server's RSS and the data
//! directory's size as it goes: both should stay flat.

use std::time::{Duration, Instant};

use tokio_postgres::Client;

use crate::error::{Context, Result, failed};
use crate::freshet::FreshetServer;

const VIEW: &str = "CREATE MATERIALIZED VIEW region_stats AS \
    SELECT c.region, count(*) AS orders, sum(o.amount) AS revenue \
    FROM orders o JOIN customers c ON o.customer_id = c.id GROUP BY c.region";

const READ: &str = "SELECT region, orders, revenue FROM region_stats ORDER BY region";

/// Figures of one restart measurement.
#[derive(Debug)]
pub struct RestartRun {
    /// Rows in `orders`.
    pub rows: usize,
    /// Loading the tables.
    pub load: Duration,
    /// `CREATE MATERIALIZED VIEW` until a strict read returns.
    pub hydration: Duration,
    /// Process start until it accepts connections.
    pub listening: Duration,
    /// Process start until a serializable read of the view returns.
    pub serializable: Duration,
    /// Process start until a strict-serializable read returns.
    pub fresh: Duration,
    /// Whether the reads after the restart equal the one before.
    pub same_result: bool,
}

async fn rows_text(c: &Client, sql: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for m in c.simple_query(sql).await.context(sql.to_string())? {
        if let tokio_postgres::SimpleQueryMessage::Row(r) = m {
            out.push(
                (0..r.len())
                    .map(|i| r.get(i).unwrap_or("NULL"))
                    .collect::<Vec<_>>()
                    .join("|"),
            );
        }
    }
    Ok(out)
}

/// The restart benchmark.
pub async fn restart(server: &mut FreshetServer, rows: usize) -> Result<RestartRun> {
    let c = server.connect().await?;
    let began = Instant::now();
    c.batch_execute(
        "CREATE TABLE customers (id int, region text);
         INSERT INTO customers SELECT g, 'r' || (g % 16) FROM generate_series(1, 10000) AS s(g);
         CREATE TABLE orders (id bigint, customer_id int, amount numeric(12,2));",
    )
    .await
    .context("create tables")?;
    let chunk = 100_000;
    let mut loaded = 0;
    while loaded < rows {
        let n = chunk.min(rows - loaded);
        c.batch_execute(&format!(
            "INSERT INTO orders SELECT g, (g % 10000) + 1, (g % 1000) / 10.0 \
             FROM generate_series({}, {}) AS s(g)",
            loaded + 1,
            loaded + n
        ))
        .await
        .context("load orders")?;
        loaded += n;
        eprintln!("[restart] loaded {loaded} orders");
    }
    let load = began.elapsed();
    let count = rows_text(&c, "SELECT count(*) FROM orders").await?;
    if count != [rows.to_string()] {
        return failed(format!("orders holds {count:?} rows, expected {rows}"));
    }
    let began = Instant::now();
    c.batch_execute(VIEW).await.context("create the view")?;
    // The strict read waits for the view to hydrate.
    rows_text(&c, READ).await?;
    let hydration = began.elapsed();
    eprintln!("[restart] hydrated in {hydration:?}");
    // A few more writes, then wait a moment so the view's output is
    // durable through them, as it would be in steady state.
    c.batch_execute("INSERT INTO orders VALUES (0, 1, 1.00)")
        .await
        .context("write")?;
    let before_kill = rows_text(&c, READ).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(c);
    let start = Instant::now();
    server.kill_and_restart().await?;
    let listening = start.elapsed();
    let c = server.connect().await?;
    c.batch_execute("SET transaction_isolation = 'serializable'")
        .await
        .context("set isolation")?;
    let serializable_rows = rows_text(&c, READ).await?;
    let serializable = start.elapsed();
    let strict = server.connect().await?;
    let fresh_rows = rows_text(&strict, READ).await?;
    let fresh = start.elapsed();
    eprintln!("[restart] serializable {serializable:?}, fresh {fresh:?}");
    Ok(RestartRun {
        rows,
        load,
        hydration,
        listening,
        serializable,
        fresh,
        same_result: serializable_rows == before_kill && fresh_rows == before_kill,
    })
}

/// One sample of the soak benchmark.
#[derive(Debug)]
pub struct SoakSample {
    /// Updates applied so far.
    pub updates: u64,
    /// Since the start.
    pub elapsed: Duration,
    /// Server resident memory (MiB).
    pub rss_mib: f64,
    /// Data directory size (MiB).
    pub disk_mib: f64,
}

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn dir_mib(dir: &std::path::Path) -> f64 {
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total as f64 / (1024.0 * 1024.0)
}

/// The soak benchmark: `updates` updates over 1,000 keys, `per_statement`
/// rows per UPDATE, sampled `samples` times.
pub async fn soak(
    server: &FreshetServer,
    updates: u64,
    per_statement: u64,
    samples: u64,
) -> Result<Vec<SoakSample>> {
    let c = server.connect().await?;
    c.batch_execute(
        "CREATE TABLE kv (k int, v bigint);
         INSERT INTO kv SELECT g, 0 FROM generate_series(0, 999) AS s(g);
         CREATE MATERIALIZED VIEW kv_stats AS SELECT k % 10 AS bucket, sum(v) AS total, count(*) AS n FROM kv GROUP BY 1;",
    )
    .await
    .context("create the soak tables")?;
    if per_statement == 0 || per_statement > 1000 {
        return failed("--soak-rows-per-update must be between 1 and 1000");
    }
    let statements = updates.div_ceil(per_statement);
    let every = (statements / samples.max(1)).max(1);
    let began = Instant::now();
    let mut out = vec![SoakSample {
        updates: 0,
        elapsed: Duration::ZERO,
        rss_mib: rss_mib(server.pid()),
        disk_mib: dir_mib(&server.data_dir()),
    }];
    for i in 0..statements {
        let first = (i * per_statement) % 1000;
        c.batch_execute(&format!(
            "UPDATE kv SET v = v + 1 WHERE k >= {first} AND k < {}",
            first + per_statement
        ))
        .await
        .context("update")?;
        if (i + 1) % every == 0 || i + 1 == statements {
            let sample = SoakSample {
                updates: (i + 1) * per_statement,
                elapsed: began.elapsed(),
                rss_mib: rss_mib(server.pid()),
                disk_mib: dir_mib(&server.data_dir()),
            };
            eprintln!(
                "[soak] {} updates, {:.0} s, RSS {:.0} MiB, disk {:.1} MiB",
                sample.updates,
                sample.elapsed.as_secs_f64(),
                sample.rss_mib,
                sample.disk_mib
            );
            out.push(sample);
        }
    }
    // The view still equals its definition at the end.
    let view = rows_text(&c, "SELECT bucket, total, n FROM kv_stats ORDER BY 1").await?;
    let query = rows_text(
        &c,
        "SELECT k % 10, sum(v), count(*) FROM kv GROUP BY 1 ORDER BY 1",
    )
    .await?;
    if view != query {
        return failed(format!(
            "kv_stats differs from its query: {view:?} vs {query:?}"
        ));
    }
    Ok(out)
}

/// Markdown for the restart run.
pub fn render_restart(r: &RestartRun) -> String {
    let ms = |d: Duration| format!("{:.0}", d.as_secs_f64() * 1000.0);
    format!(
        "## Restart ({} orders, join + aggregate view)\n\n\
         | step | ms |\n|---|---:|\n\
         | load orders (INSERT ... SELECT, 100k per statement) | {} |\n\
         | initial hydration (CREATE MATERIALIZED VIEW until a strict read returns) | {} |\n\
         | after kill -9: process start until accepting connections | {} |\n\
         | after kill -9: until a serializable read of the view returns | {} |\n\
         | after kill -9: until a strict serializable (fresh) read returns | {} |\n\n\
         Reads after the restart equal the read before the kill: {}.\n",
        r.rows,
        ms(r.load),
        ms(r.hydration),
        ms(r.listening),
        ms(r.serializable),
        ms(r.fresh),
        if r.same_result { "yes" } else { "NO" }
    )
}

/// Markdown for the soak samples.
pub fn render_soak(samples: &[SoakSample], per_statement: u64) -> String {
    let mut text = format!(
        "## Soak (updates over 1,000 keys, {per_statement} rows per UPDATE, view `kv_stats`)\n\n\
         | updates | elapsed s | RSS MiB | data dir MiB |\n|---:|---:|---:|---:|\n"
    );
    for s in samples {
        text.push_str(&format!(
            "| {} | {:.0} | {:.0} | {:.1} |\n",
            s.updates,
            s.elapsed.as_secs_f64(),
            s.rss_mib,
            s.disk_mib
        ));
    }
    text
}

//! Many concurrent connections (issue 14): what an idle connection costs
//! each server in memory, and how `SELECT 1` and a keyed lookup behave
//! when hundreds or a thousand sessions all run at once.
//!
//! For every count N of `--connections-counts`, against Freshet and then
//! PostgreSQL (both on this machine, measured one after the other):
//!
//! 1. sample the server's memory with no client connected, open N
//!    tokio-postgres connections (at most [`OPEN_CONCURRENCY`] handshakes
//!    in flight), wait [`SETTLE`], and sample again: (with N − without) / N
//!    is the cost of one idle connection. Freshet is one process: its
//!    `VmRSS` and its `Pss` (`/proc/<pid>/smaps_rollup`). PostgreSQL forks
//!    a backend per connection: the sums of `VmRSS` and of `Pss` over the
//!    postmaster and all its children. The RSS sum counts each page of
//!    shared memory (shared_buffers, the catalog caches' shared parts, the
//!    binary's text) once per process that touched it, so it overstates
//!    PostgreSQL's cost; PSS divides each shared page among the processes
//!    that map it, and is the fairer figure for both.
//! 2. all N sessions loop `SELECT 1` (simple query protocol) concurrently
//!    for `--connections-seconds`, timing every query: p50, p99, total qps;
//! 3. the same with a prepared `SELECT * FROM kv WHERE k = $1`, random
//!    keys, over `kv (k bigint, v bigint)` with `--connections-rows` rows
//!    and an index on `k` (Freshet: `CREATE INDEX kv_k ON kv (k)`, which
//!    it answers on the index fast path; PostgreSQL: the same btree
//!    index);
//! 4. the same with `SELECT v FROM kv WHERE k = $1`: Freshet's fast path
//!    covers `SELECT *` only, so this one is planned by DataFusion (a
//!    filter over the table), while PostgreSQL uses the index for both.
//!
//! The client is this process's single-threaded tokio runtime; client and
//! servers share the machine's cores.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_postgres::Client;

use crate::db;
use crate::error::{Context, Result, failed};
use crate::freshet::FreshetServer;
use crate::postgres::PgServer;
use crate::stats::{self, Summary};

/// Connection handshakes in flight at once while opening N connections.
const OPEN_CONCURRENCY: usize = 32;

/// Wait after the last connection opened before sampling memory.
const SETTLE: Duration = Duration::from_secs(2);

/// Longest one query may take before it counts as an error.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// Most queries one session issues in a loop, whatever the duration.
const MAX_QUERIES_PER_SESSION: usize = 5_000_000;

/// What the connections benchmark needs to know.
pub struct ConnectionsSettings<'a> {
    /// The freshet binary.
    pub bin: &'a Path,
    /// `--workers` for freshet.
    pub workers: Option<u32>,
    /// Connection counts.
    pub counts: Vec<usize>,
    /// Seconds of each query loop.
    pub seconds: u64,
    /// Rows in `kv`.
    pub rows: usize,
    /// Seed of the lookup keys.
    pub seed: u64,
}

impl ConnectionsSettings<'_> {
    /// The `max_connections` both servers are started with: room for the
    /// largest count plus the benchmark's own setup session.
    pub fn max_connections(&self) -> usize {
        self.counts.iter().copied().max().unwrap_or(0) + 100
    }
}

/// Memory of a server, summed over its processes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    pub rss_kib: u64,
    pub pss_kib: u64,
    pub processes: usize,
}

/// One loop of N sessions.
#[derive(Debug, Clone, Copy)]
pub struct LoadResult {
    pub queries: usize,
    pub errors: usize,
    pub elapsed: Duration,
    pub latency: Option<Summary>,
}

impl LoadResult {
    fn qps(&self) -> f64 {
        self.queries as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Everything measured for one system at one count.
#[derive(Debug, Clone)]
pub struct ConnectionsRow {
    pub system: &'static str,
    pub connections: usize,
    pub open_time: Duration,
    pub idle_before: Memory,
    pub idle_after: Memory,
    pub select1: LoadResult,
    /// `SELECT * FROM kv WHERE k = $1`.
    pub lookup: LoadResult,
    /// `SELECT v FROM kv WHERE k = $1`.
    pub lookup_v: LoadResult,
}

/// How to reach one system and where its memory is.
struct Target {
    system: &'static str,
    conn_str: String,
    memory: MemorySource,
}

#[derive(Clone, Copy)]
enum MemorySource {
    /// One process.
    Process(u32),
    /// The postmaster and every process it forked.
    ProcessTree(u32),
}

/// Measure Freshet, then PostgreSQL (if given), at every count.
pub async fn run(
    settings: &ConnectionsSettings<'_>,
    pg: Option<&PgServer>,
) -> Result<Vec<ConnectionsRow>> {
    check_fd_limit(settings)?;
    let mut out = Vec::new();
    let extra = vec![
        "--max-connections".to_string(),
        settings.max_connections().to_string(),
    ];
    let freshet = FreshetServer::start_with(settings.bin, settings.workers, &extra).await?;
    load_freshet(&freshet, settings.rows).await?;
    let target = Target {
        system: "Freshet",
        conn_str: format!(
            "host=127.0.0.1 port={} user=freshet dbname=freshet",
            freshet.port()
        ),
        memory: MemorySource::Process(freshet.pid()),
    };
    for &n in &settings.counts {
        out.push(measure(&target, n, settings).await?);
    }
    drop(freshet);
    if let Some(pg) = pg {
        load_postgres(pg, settings.rows).await?;
        let target = Target {
            system: "PostgreSQL",
            conn_str: format!(
                "host=127.0.0.1 port={} user=postgres dbname=postgres",
                pg.port()
            ),
            memory: MemorySource::ProcessTree(pg.postmaster_pid()?),
        };
        for &n in &settings.counts {
            out.push(measure(&target, n, settings).await?);
        }
    }
    Ok(out)
}

/// Fail early, with the fix, when this process cannot hold the sockets.
fn check_fd_limit(settings: &ConnectionsSettings<'_>) -> Result<()> {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let soft = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse::<usize>().ok());
    let need = settings.max_connections() + 200;
    match soft {
        Some(soft) if soft < need => failed(format!(
            "the open-file limit is {soft}, but {} connections need about {need} \
             descriptors: run `ulimit -n {}` in this shell first",
            settings.max_connections() - 100,
            need.max(4096)
        )),
        _ => Ok(()),
    }
}

async fn load_freshet(server: &FreshetServer, rows: usize) -> Result<()> {
    let c = server.connect().await?;
    for sql in [
        "CREATE TABLE kv (k bigint, v bigint)".to_string(),
        format!("INSERT INTO kv SELECT value, value * 2 FROM generate_series(1, {rows})"),
        "CREATE INDEX kv_k ON kv (k)".to_string(),
    ] {
        db::exec(&c, &sql, "Freshet").await?;
    }
    check_loaded(&c, "Freshet", rows).await?;
    let plan = db::rows(&c, "EXPLAIN SELECT * FROM kv WHERE k = 1", "Freshet").await?;
    let first = plan.first().and_then(|r| r.first().cloned()).flatten();
    if !first.as_deref().is_some_and(|l| l.starts_with("Fast path")) {
        return failed(format!(
            "Freshet: the lookup does not take the index fast path: {first:?}"
        ));
    }
    Ok(())
}

async fn load_postgres(pg: &PgServer, rows: usize) -> Result<()> {
    let c = pg.connect().await?;
    for sql in [
        "DROP TABLE IF EXISTS kv".to_string(),
        "CREATE TABLE kv (k bigint, v bigint)".to_string(),
        format!("INSERT INTO kv SELECT g, g * 2 FROM generate_series(1, {rows}) g"),
        "CREATE INDEX kv_k ON kv (k)".to_string(),
        "VACUUM ANALYZE kv".to_string(),
    ] {
        db::exec(&c, &sql, "PostgreSQL").await?;
    }
    check_loaded(&c, "PostgreSQL", rows).await
}

async fn check_loaded(c: &Client, who: &str, rows: usize) -> Result<()> {
    let counted = db::rows(c, "SELECT count(*) FROM kv", who).await?;
    if counted.first().and_then(|r| r.first().cloned()).flatten() != Some(rows.to_string()) {
        return failed(format!("{who}: kv does not hold {rows} rows: {counted:?}"));
    }
    Ok(())
}

/// Idle memory, then both query loops, with `n` connections.
async fn measure(
    target: &Target,
    n: usize,
    settings: &ConnectionsSettings<'_>,
) -> Result<ConnectionsRow> {
    // Let the previous count's sessions finish closing.
    tokio::time::sleep(SETTLE).await;
    let idle_before = memory(target.memory)?;
    eprintln!("connections: {}: opening {n} connections", target.system);
    let started = Instant::now();
    let clients = open(target, n).await?;
    let open_time = started.elapsed();
    tokio::time::sleep(SETTLE).await;
    let idle_after = memory(target.memory)?;
    let clients: Vec<Arc<Client>> = clients.into_iter().map(Arc::new).collect();
    let duration = Duration::from_secs(settings.seconds);
    eprintln!(
        "connections: {}: {n} sessions loop SELECT 1 for {duration:?}",
        target.system
    );
    let select1 = load(&clients, duration, settings.seed, Query::SelectOne).await;
    eprintln!(
        "connections: {}: {n} sessions loop a keyed lookup for {duration:?}",
        target.system
    );
    let lookup = load(
        &clients,
        duration,
        settings.seed,
        Query::Lookup {
            rows: settings.rows,
            star: true,
        },
    )
    .await;
    eprintln!(
        "connections: {}: {n} sessions loop a projected keyed lookup for {duration:?}",
        target.system
    );
    let lookup_v = load(
        &clients,
        duration,
        settings.seed,
        Query::Lookup {
            rows: settings.rows,
            star: false,
        },
    )
    .await;
    drop(clients);
    Ok(ConnectionsRow {
        system: target.system,
        connections: n,
        open_time,
        idle_before,
        idle_after,
        select1,
        lookup,
        lookup_v,
    })
}

/// Open `n` sessions, [`OPEN_CONCURRENCY`] handshakes at a time.
async fn open(target: &Target, n: usize) -> Result<Vec<Client>> {
    let mut opened = futures::stream::iter(0..n)
        .map(|_| db::connect(&target.conn_str, target.system))
        .buffer_unordered(OPEN_CONCURRENCY);
    let mut clients = Vec::with_capacity(n);
    while let Some(client) = opened.next().await {
        match client {
            Ok(c) => clients.push(c),
            Err(e) => {
                return failed(format!(
                    "{}: connection {} of {n} failed: {e}",
                    target.system,
                    clients.len() + 1
                ));
            }
        }
    }
    Ok(clients)
}

#[derive(Clone, Copy)]
enum Query {
    SelectOne,
    /// A prepared lookup of a random key in `1..=rows`: `SELECT *` (both
    /// columns) when `star`, else `SELECT v`.
    Lookup {
        rows: usize,
        star: bool,
    },
}

impl Query {
    fn sql(self) -> &'static str {
        match self {
            Query::SelectOne => "SELECT 1",
            Query::Lookup { star: true, .. } => "SELECT * FROM kv WHERE k = $1",
            Query::Lookup { star: false, .. } => "SELECT v FROM kv WHERE k = $1",
        }
    }
}

/// Every session loops `query` until `duration` has passed; the latency
/// of each query that succeeded, and how many failed.
async fn load(clients: &[Arc<Client>], duration: Duration, seed: u64, query: Query) -> LoadResult {
    let start = Instant::now();
    let end = start + duration;
    let tasks: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(i, client)| {
            let client = Arc::clone(client);
            tokio::spawn(async move { session_loop(&client, end, seed ^ i as u64, query).await })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut first_errors = BTreeSet::new();
    for task in tasks {
        match task.await {
            Ok((l, e, msg)) => {
                latencies.extend(l);
                errors += e;
                if let Some(m) = msg {
                    first_errors.insert(m);
                }
            }
            Err(e) => {
                errors += 1;
                first_errors.insert(format!("session task failed: {e}"));
            }
        }
    }
    let elapsed = start.elapsed();
    for m in first_errors.iter().take(3) {
        eprintln!("connections: error: {m}");
    }
    LoadResult {
        queries: latencies.len(),
        errors,
        elapsed,
        latency: stats::summarize(&latencies),
    }
}

/// One session's loop: latencies, errors, the first error's text. A
/// session stops at its first error (its connection may be gone).
async fn session_loop(
    client: &Client,
    end: Instant,
    seed: u64,
    query: Query,
) -> (Vec<Duration>, usize, Option<String>) {
    let mut latencies = Vec::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let stmt = match query {
        Query::SelectOne => None,
        Query::Lookup { .. } => match client.prepare(query.sql()).await {
            Ok(s) => Some(s),
            Err(e) => return (latencies, 1, Some(format!("prepare: {e}"))),
        },
    };
    for _ in 0..MAX_QUERIES_PER_SESSION {
        if Instant::now() >= end {
            break;
        }
        let t = Instant::now();
        let result = match (query, &stmt) {
            (Query::Lookup { rows, star }, Some(stmt)) => {
                let k: i64 = rng.random_range(1..=rows as i64);
                let column = usize::from(star);
                tokio::time::timeout(QUERY_TIMEOUT, client.query(stmt, &[&k]))
                    .await
                    .map(|r| {
                        r.and_then(|rows| {
                            rows.first()
                                .map(|row| row.try_get::<_, i64>(column))
                                .transpose()
                        })
                        .map(|v| v == Some(k * 2))
                    })
            }
            _ => tokio::time::timeout(QUERY_TIMEOUT, client.simple_query(query.sql()))
                .await
                .map(|r| r.map(|_| true)),
        };
        match result {
            Ok(Ok(true)) => latencies.push(t.elapsed()),
            Ok(Ok(false)) => {
                return (latencies, 1, Some("a lookup returned a wrong value".into()));
            }
            Ok(Err(e)) => return (latencies, 1, Some(e.to_string())),
            Err(_) => {
                return (
                    latencies,
                    1,
                    Some(format!("a query took over {QUERY_TIMEOUT:?}")),
                );
            }
        }
    }
    (latencies, 0, None)
}

/// Memory of a process, or of a process and its children.
fn memory(source: MemorySource) -> Result<Memory> {
    let pids = match source {
        MemorySource::Process(pid) => vec![pid],
        MemorySource::ProcessTree(pid) => {
            let mut pids = vec![pid];
            pids.extend(children(pid)?);
            pids
        }
    };
    let mut m = Memory::default();
    for pid in pids {
        // A backend may exit between listing and reading: skip it.
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).context(
            format!("read /proc/{pid}/smaps_rollup (run as root or the server's user)"),
        )?;
        m.rss_kib += kib_field(&status, "VmRSS:");
        m.pss_kib += kib_field(&rollup, "Pss:");
        m.processes += 1;
    }
    if m.processes == 0 {
        return failed("the server process is gone");
    }
    Ok(m)
}

/// The processes whose parent is `parent`.
fn children(parent: u32) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").context("list /proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command name (which may hold spaces): state, ppid.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    Ok(out)
}

/// A `Name:   123 kB` field of a /proc file, in KiB (0 if absent).
fn kib_field(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn per_connection_kib(before: u64, after: u64, n: usize) -> String {
    let delta = after as f64 - before as f64;
    format!("{:.0}", delta / n.max(1) as f64)
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

fn latency_ms(s: Option<Summary>) -> (String, String) {
    match s {
        Some(s) => (
            format!("{:.3}", s.p50.as_secs_f64() * 1e3),
            format!("{:.3}", s.p99.as_secs_f64() * 1e3),
        ),
        None => ("—".into(), "—".into()),
    }
}

/// The Markdown section of the connections benchmark.
pub fn render(rows: &[ConnectionsRow], settings: &ConnectionsSettings<'_>) -> String {
    let mut s = format!(
        "## Concurrent connections\n\n\
         Both servers started with `max_connections` {max}. Idle memory: sampled with no \
         client connected, then {settle:?} after N tokio-postgres connections opened (startup \
         done, no statement run yet); per connection = (with N − without) / N. Freshet is one \
         process (`VmRSS`, and `Pss` from `/proc/<pid>/smaps_rollup`); PostgreSQL's figures are \
         sums over the postmaster and all its children (a backend process per connection). The \
         RSS sum counts shared pages once per process that touched them; PSS splits them among \
         those processes.\n\n\
         | system | connections | open all (s) | RSS without → with (MiB) | **RSS per connection (KiB)** | PSS without → with (MiB) | **PSS per connection (KiB)** | processes |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
        max = settings.max_connections(),
        settle = SETTLE,
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {:.3} | {} → {} | {} | {} → {} | {} | {} → {} |\n",
            r.system,
            r.connections,
            r.open_time.as_secs_f64(),
            mib(r.idle_before.rss_kib),
            mib(r.idle_after.rss_kib),
            per_connection_kib(r.idle_before.rss_kib, r.idle_after.rss_kib, r.connections),
            mib(r.idle_before.pss_kib),
            mib(r.idle_after.pss_kib),
            per_connection_kib(r.idle_before.pss_kib, r.idle_after.pss_kib, r.connections),
            r.idle_before.processes,
            r.idle_after.processes,
        ));
    }
    s.push_str(&format!(
        "\nAll N sessions loop concurrently for {secs} s: `SELECT 1` (simple query protocol), \
         then prepared `SELECT * FROM kv WHERE k = $1` and `SELECT v FROM kv WHERE k = $1` \
         with a random key (`kv` has {rows} rows, index `kv_k` on `k`; every answer checked; \
         Freshet answers the first on its index fast path and plans the second with DataFusion). \
         Latency is per query, from send to \
         the last row; qps = queries completed / elapsed. The client is one single-threaded \
         tokio runtime on the same machine.\n\n\
         | system | connections | query | queries | qps | p50 (ms) | p99 (ms) | errors |\n\
         |---|---:|---|---:|---:|---:|---:|---:|\n",
        secs = settings.seconds,
        rows = settings.rows,
    ));
    for r in rows {
        for (what, l) in [
            ("SELECT 1", &r.select1),
            ("`SELECT *` by key", &r.lookup),
            ("`SELECT v` by key", &r.lookup_v),
        ] {
            let (p50, p99) = latency_ms(l.latency);
            s.push_str(&format!(
                "| {} | {} | {what} | {} | {:.0} | {p50} | {p99} | {} |\n",
                r.system,
                r.connections,
                l.queries,
                l.qps(),
                l.errors
            ));
        }
    }
    s
}

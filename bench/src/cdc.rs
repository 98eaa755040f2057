//! PostgreSQL change data capture (issue 17): how fast a PostgreSQL
//! source takes its snapshot, and how long after an upstream commit the
//! row is visible in a materialized view over the subsource.
//!
//! One PostgreSQL 15 (`wal_level=logical`, otherwise the benchmark's usual
//! durable settings) is the upstream for two fresh Freshet servers:
//!
//! * **Snapshot**: `orders` (a million rows, `REPLICA IDENTITY FULL`) in a
//!   publication; `CREATE SOURCE ... FOR ALL TABLES` answers once the
//!   snapshot is durable, so its wall time is slot creation + the upstream
//!   `COPY` + decoding + the durable append. The rows are then checked
//!   against upstream (count, sums). The upstream `COPY` alone is timed
//!   too, read by the benchmark, for scale.
//! * **Streaming**: `ticks (seq, sent_at DEFAULT clock_timestamp(), pad)`
//!   in a second publication, a source over it and
//!   `CREATE MATERIALIZED VIEW ticks_mv AS SELECT seq, sent_at FROM ticks`,
//!   streamed by `COPY (SUBSCRIBE ticks_mv WITH (SNAPSHOT = false)) TO
//!   STDOUT` on its own thread (its own runtime, so that the writers'
//!   work does not delay its timestamps). Writer connections insert rows,
//!   one autocommit INSERT per transaction (one row, or a few with
//!   `--cdc-rows-per-txn`), each writer on a tokio interval, so that
//!   together they ask for R rows per second (open loop: a late writer
//!   catches up, the schedule does not slow down). For every row: the
//!   instant its INSERT (= COMMIT) returned to the writer and the instant
//!   the subscriber read its insertion; latency is the difference (both
//!   monotonic clocks of this process). `sent_at` (upstream
//!   `clock_timestamp()` during the INSERT, before the commit) against the
//!   wall clock at delivery is a cross-check that does not depend on when
//!   the writer task ran.
//! * **Burst**: a few connections insert rows in multi-row transactions
//!   as fast as upstream takes them; timed until the last row is
//!   delivered, for the streaming ingest rate Freshet sustains.
//!
//! PostgreSQL, Freshet and the benchmark share the machine's cores; CPU
//! seconds per wall second of each are sampled from /proc.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;
use tokio_postgres::{Client, Statement};

use crate::db;
use crate::error::{BenchError, Context, Result, failed};
use crate::freshet::FreshetServer;
use crate::postgres::PgServer;
use crate::report::thousands;
use crate::stats::{Latency, latency, percentile_ms as percentile, signed_ms};

/// Settings added to the benchmark's usual PostgreSQL ones.
pub const PG_EXTRA_SETTINGS: &[&str] = &[
    "wal_level=logical",
    "max_wal_senders=10",
    "max_replication_slots=10",
];

/// The `pad` of every tick: 64 bytes.
const PAD: &str = "cdc-benchmark-padding-0123456789-abcdefghijklmnopqrstuvwxyz-0000";

/// How long the rows of one rate may take to arrive after the writers end.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(180);

/// What the CDC benchmark needs to know.
pub struct CdcSettings<'a> {
    /// The freshet binary.
    pub bin: &'a Path,
    /// `--workers` for freshet.
    pub workers: Option<u32>,
    /// Where PostgreSQL's binaries are (default lookup when `None`).
    pub pg_bindir: Option<&'a Path>,
    /// Seconds of writing per rate.
    pub seconds: u64,
    /// Upstream write rates (rows per second).
    pub rates: Vec<u32>,
    /// Rows per upstream transaction at each rate (the last repeats).
    pub rows_per_txn: Vec<u32>,
    /// Writer connections for the paced runs.
    pub writers: u32,
    /// Rows in the upstream `orders` table for the snapshot.
    pub snapshot_rows: usize,
    /// Rows of the unpaced burst (0: no burst).
    pub burst_rows: usize,
    /// Rows per upstream transaction in the burst.
    pub burst_rows_per_txn: usize,
    /// Writer connections in the burst.
    pub burst_writers: u32,
    /// What the subscriber streams: `ticks_mv` (the measurement) or
    /// `ticks` (the subsource itself, with no view defined, to see what
    /// the view adds).
    pub relation: String,
}

/// CPU seconds per wall second of each party over an interval.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuShare {
    freshet: f64,
    /// Every PostgreSQL process except the walsender.
    postgres: f64,
    walsender: f64,
    bench: f64,
}

/// The snapshot measurement.
pub struct SnapshotRow {
    rows: u64,
    copy_secs: f64,
    copy_bytes: u64,
    create_secs: f64,
    cpu: CpuShare,
}

/// One paced rate's measurement.
pub struct RateRow {
    target: u32,
    rows_per_txn: u32,
    writers: u32,
    written: usize,
    seen: usize,
    /// Rows committed upstream per second, from the schedule's start to
    /// the last commit.
    achieved: f64,
    /// Rows delivered per second, from the schedule's start to the last
    /// delivery.
    delivered_rate: f64,
    commit_to_visible: Latency,
    /// p50 of commit → visible in each quarter of the schedule (by seq),
    /// to show whether a lag builds up.
    quarter_p50: [f64; 4],
    clock_to_visible: Option<Latency>,
    insert_round_trip: Latency,
    cpu: CpuShare,
}

/// The unpaced burst's measurement.
pub struct BurstRow {
    rows: usize,
    rows_per_txn: usize,
    writers: u32,
    upstream_secs: f64,
    visible_secs: f64,
    cpu: CpuShare,
}

/// Everything the CDC benchmark measured.
pub struct CdcRun {
    pub pg_version: String,
    snapshot: SnapshotRow,
    rates: Vec<RateRow>,
    burst: Option<BurstRow>,
    /// The streaming source's status row at the end.
    status: String,
    /// What the streaming server logged (at `warn` and above).
    log: String,
}

/// Start PostgreSQL with logical WAL and run every measurement.
pub async fn run(s: &CdcSettings<'_>) -> Result<CdcRun> {
    eprintln!(
        "cdc: starting PostgreSQL ({})",
        PG_EXTRA_SETTINGS.join(", ")
    );
    let pg_settings: Vec<String> = PG_EXTRA_SETTINGS.iter().map(|s| s.to_string()).collect();
    let pg = PgServer::start_with(s.pg_bindir, &pg_settings).map_err(|e| {
        BenchError::Failed(format!(
            "--cdc needs a PostgreSQL 15 to replicate from, and it could not be started \
             (install PostgreSQL 15 or pass --pg-bindir): {e}"
        ))
    })?;
    let up = pg.connect().await?;
    let pg_version = first_value(&up, "SELECT version()").await?;
    let snapshot = snapshot(&pg, &up, s).await?;
    // The snapshot's slot is gone with its source; drop any left behind
    // (an inactive slot still holds WAL back).
    db::exec(
        &up,
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active",
        "PostgreSQL",
    )
    .await?;
    let streaming = streaming(&pg, &up, s).await?;
    Ok(CdcRun {
        pg_version,
        snapshot,
        rates: streaming.rates,
        burst: streaming.burst,
        status: streaming.status,
        log: streaming.log,
    })
}

/// `CREATE CONNECTION pg` to the upstream (trust auth: no password).
fn connection_sql(pg: &PgServer) -> String {
    format!(
        "CREATE CONNECTION pg TO POSTGRES (HOST '127.0.0.1', PORT {}, USER postgres, DATABASE 'postgres')",
        pg.port()
    )
}

/// The first column of the first row of `sql`.
async fn first_value(client: &Client, sql: &str) -> Result<String> {
    let rows = db::rows(client, sql, sql).await?;
    match rows.first().and_then(|r| r.first().cloned().flatten()) {
        Some(v) => Ok(v),
        None => failed(format!("{sql}: no value")),
    }
}

/// Load `orders` upstream, time its `COPY` alone, then time `CREATE SOURCE`
/// on a fresh Freshet and check the rows.
async fn snapshot(pg: &PgServer, up: &Client, s: &CdcSettings<'_>) -> Result<SnapshotRow> {
    eprintln!("cdc: loading {} upstream orders", s.snapshot_rows);
    db::exec(
        up,
        &format!(
            "CREATE TABLE orders (id bigint PRIMARY KEY, customer bigint, amount numeric(12,2), \
                                  note text, created timestamptz);
             ALTER TABLE orders REPLICA IDENTITY FULL;
             INSERT INTO orders SELECT g, g % 10007, (g % 100000) / 100.0, 'order note ' || g,
                    timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second'
               FROM generate_series(1, {}) g;
             CREATE PUBLICATION p_orders FOR TABLE orders;",
            s.snapshot_rows
        ),
        "PostgreSQL",
    )
    .await?;
    // Hint bits set and a checkpoint done now, not during the measurement.
    db::exec(up, "VACUUM ANALYZE orders", "PostgreSQL").await?;
    db::exec(up, "CHECKPOINT", "PostgreSQL").await?;

    let started = Instant::now();
    let copy_sql = "COPY (SELECT id, customer, amount, note, created FROM orders) TO STDOUT";
    let stream = up.copy_out(copy_sql).await.context(copy_sql)?;
    futures::pin_mut!(stream);
    let mut copy_bytes = 0u64;
    while let Some(chunk) = stream.next().await {
        copy_bytes += chunk.context(copy_sql)?.len() as u64;
    }
    let copy_secs = started.elapsed().as_secs_f64();

    let server = FreshetServer::start(s.bin, s.workers).await?;
    let fc = server.connect().await?;
    db::exec(&fc, &connection_sql(pg), "Freshet").await?;
    eprintln!("cdc: CREATE SOURCE over {} rows", s.snapshot_rows);
    let cpu = CpuSampler::new(&server, pg)?;
    let started = Instant::now();
    db::exec(
        &fc,
        "CREATE SOURCE shop FROM POSTGRES CONNECTION pg (PUBLICATION 'p_orders') FOR ALL TABLES",
        "Freshet",
    )
    .await?;
    let create_secs = started.elapsed().as_secs_f64();
    let cpu = cpu.share(&server, pg);
    let check = "SELECT count(*), sum(id), sum(customer) FROM orders";
    let want = db::rows(up, check, "PostgreSQL").await?;
    let got = db::rows(&fc, check, "Freshet").await?;
    if got != want {
        return failed(format!(
            "the snapshot differs from upstream right after CREATE SOURCE answered: \
             Freshet {got:?}, PostgreSQL {want:?}\nFreshet log:\n{}",
            server.log_tail()
        ));
    }
    let amounts = "SELECT sum(amount)::float8 FROM orders";
    let (want, got) = (
        first_value(up, amounts).await?,
        first_value(&fc, amounts).await?,
    );
    if (parse_f64(&want) - parse_f64(&got)).abs() > 0.5 {
        return failed(format!(
            "snapshot amounts differ: Freshet {got}, PostgreSQL {want}"
        ));
    }
    let rows = parse_f64(&first_value(&fc, "SELECT count(*) FROM orders").await?) as u64;
    // Drops the slot upstream.
    db::exec(&fc, "DROP SOURCE shop CASCADE", "Freshet").await?;
    drop(server);
    Ok(SnapshotRow {
        rows,
        copy_secs,
        copy_bytes,
        create_secs,
        cpu,
    })
}

fn parse_f64(s: &str) -> f64 {
    s.trim().parse().unwrap_or(f64::NAN)
}

/// What the streaming phase measured.
struct Streaming {
    rates: Vec<RateRow>,
    burst: Option<BurstRow>,
    status: String,
    log: String,
}

/// The paced rates and the burst, on one fresh Freshet.
async fn streaming(pg: &PgServer, up: &Client, s: &CdcSettings<'_>) -> Result<Streaming> {
    db::exec(
        up,
        "CREATE TABLE ticks (seq bigint, sent_at timestamptz DEFAULT clock_timestamp(), pad text);
         ALTER TABLE ticks REPLICA IDENTITY FULL;
         CREATE PUBLICATION p_ticks FOR TABLE ticks;",
        "PostgreSQL",
    )
    .await?;
    let server = FreshetServer::start(s.bin, s.workers).await?;
    let fc = server.connect().await?;
    db::exec(&fc, &connection_sql(pg), "Freshet").await?;
    db::exec(
        &fc,
        "CREATE SOURCE live FROM POSTGRES CONNECTION pg (PUBLICATION 'p_ticks') FOR ALL TABLES",
        "Freshet",
    )
    .await?;
    // With `--cdc-relation ticks` no view is defined: the subsource alone.
    if s.relation == "ticks_mv" {
        db::exec(
            &fc,
            "CREATE MATERIALIZED VIEW ticks_mv AS SELECT seq, sent_at FROM ticks",
            "Freshet",
        )
        .await?;
    }
    let mut sub = Subscriber::start(server.port(), &s.relation);
    sub.ready().await?;

    // Warm-up: one row through the whole path.
    db::exec(
        up,
        "INSERT INTO ticks (seq, pad) VALUES (0, 'warm-up')",
        "PostgreSQL",
    )
    .await?;
    sub.collect(0..1, Duration::from_secs(60))
        .await
        .map_err(|e| with_log(e, &server))?;

    let mut writers = Vec::new();
    for _ in 0..s.writers.max(s.burst_writers) {
        let client = pg.connect().await?;
        let one = client
            .prepare("INSERT INTO ticks (seq, pad) VALUES ($1, $2)")
            .await
            .context("prepare the upstream INSERT")?;
        let many = client
            .prepare(
                "INSERT INTO ticks (seq, pad) SELECT g, $2::text FROM generate_series($1::bigint, $3::bigint) g",
            )
            .await
            .context("prepare the upstream multi-row INSERT")?;
        writers.push(Writer {
            client: Arc::new(client),
            one,
            many,
        });
    }

    let mut rates = Vec::new();
    for (i, &rate) in s.rates.iter().enumerate() {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let base = (i as i64 + 1) * 1_000_000_000;
        let per = s
            .rows_per_txn
            .get(i)
            .or(s.rows_per_txn.last())
            .copied()
            .unwrap_or(1)
            .max(1);
        eprintln!(
            "cdc: {rate} upstream rows/s, {per} per transaction, for {} s, {} writers",
            s.seconds, s.writers
        );
        let row = paced(
            &server,
            pg,
            &mut sub,
            &writers[..s.writers as usize],
            rate,
            per,
            base,
            s,
        )
        .await
        .map_err(|e| with_log(e, &server))?;
        eprintln!(
            "cdc: {rate}/s: achieved {:.0}/s, commit → visible p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            row.achieved,
            row.commit_to_visible.p50,
            row.commit_to_visible.p99,
            row.commit_to_visible.max
        );
        rates.push(row);
    }

    let burst = if s.burst_rows > 0 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        eprintln!(
            "cdc: burst of {} rows, {} per transaction, {} writers",
            s.burst_rows, s.burst_rows_per_txn, s.burst_writers
        );
        let row = burst(
            &server,
            pg,
            &mut sub,
            &writers[..s.burst_writers as usize],
            9_000_000_000,
            s,
        )
        .await
        .map_err(|e| with_log(e, &server))?;
        eprintln!(
            "cdc: burst visible after {:.2} s ({:.0} rows/s)",
            row.visible_secs,
            row.rows as f64 / row.visible_secs
        );
        Some(row)
    } else {
        None
    };

    // Every row upstream is in Freshet, once.
    let count = "SELECT count(*), count(DISTINCT seq), sum(seq) FROM ticks";
    let want = db::rows(up, count, "PostgreSQL").await?;
    let got = db::rows(&fc, count, "Freshet").await?;
    if got != want {
        return failed(format!(
            "ticks in Freshet {got:?} differ from upstream {want:?}\nFreshet log:\n{}",
            server.log_tail()
        ));
    }
    if sub.duplicates > 0 || sub.retractions > 0 {
        return failed(format!(
            "the subscription delivered {} duplicate and {} retracted rows",
            sub.duplicates, sub.retractions
        ));
    }
    let status = db::rows(
        &fc,
        "SELECT status, coalesce(error, ''), records_ingested, progress \
         FROM freshet_internal.source_statuses WHERE name = 'freshet.public.live'",
        "Freshet",
    )
    .await?
    .into_iter()
    .map(|r| {
        r.into_iter()
            .map(Option::unwrap_or_default)
            .collect::<Vec<_>>()
            .join(" | ")
    })
    .collect::<Vec<_>>()
    .join("; ");
    let log = server.log_tail();
    drop(fc);
    drop(server);
    Ok(Streaming {
        rates,
        burst,
        status,
        log,
    })
}

/// Add the Freshet log's tail to a failure.
fn with_log(e: BenchError, server: &FreshetServer) -> BenchError {
    BenchError::Failed(format!("{e}\nFreshet log:\n{}", server.log_tail()))
}

/// An upstream writer connection and its prepared INSERTs.
struct Writer {
    client: Arc<Client>,
    /// `INSERT ... VALUES ($1, $2)`: one row.
    one: Statement,
    /// `INSERT ... SELECT generate_series($1, $3)`: rows $1..=$3.
    many: Statement,
}

/// One written row: its seq, when its INSERT was sent and when it
/// returned (committed).
type Write = (i64, Instant, Instant);

/// `rate` rows per second for `seconds`, `per` rows per transaction
/// (one INSERT, autocommit), seqs from `base`.
#[expect(clippy::too_many_arguments, reason = "one call site")]
async fn paced(
    server: &FreshetServer,
    pg: &PgServer,
    sub: &mut Subscriber,
    writers: &[Writer],
    rate: u32,
    per: u32,
    base: i64,
    s: &CdcSettings<'_>,
) -> Result<RateRow> {
    let total = rate as usize * s.seconds as usize;
    let per_txn = per as usize;
    let statements = total.div_ceil(per_txn);
    let n = writers.len();
    // Statement j is due at start + j * per / rate; writer w runs
    // statements w, w + n, ... on its own interval.
    let period = Duration::from_secs_f64(n as f64 * f64::from(per) / f64::from(rate));
    let cpu = CpuSampler::new(server, pg)?;
    let start = Instant::now() + Duration::from_millis(100);
    let mut tasks = Vec::new();
    for (w, writer) in writers.iter().enumerate() {
        let client = Arc::clone(&writer.client);
        let (one, many) = (writer.one.clone(), writer.many.clone());
        let first = start + Duration::from_secs_f64(w as f64 * f64::from(per) / f64::from(rate));
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(first.into(), period);
            tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
            let mut out: Vec<Write> = Vec::with_capacity(total / n + per_txn);
            for j in (w..statements).step_by(n) {
                tick.tick().await;
                let seq = base + (j * per_txn) as i64;
                let last = base + ((j + 1) * per_txn).min(total) as i64 - 1;
                let sent = Instant::now();
                let result = if seq == last {
                    client.execute(&one, &[&seq, &PAD]).await
                } else {
                    client.execute(&many, &[&seq, &PAD, &last]).await
                };
                result.map_err(|e| format!("upstream INSERT of seq {seq}: {e}"))?;
                let committed = Instant::now();
                out.extend((seq..=last).map(|q| (q, sent, committed)));
            }
            Ok::<_, String>(out)
        }));
    }
    let writes = join_writers(tasks).await?;
    let last_commit = writes.iter().map(|w| w.2).max().unwrap_or(start);
    sub.collect(base..base + total as i64, DELIVERY_TIMEOUT)
        .await?;
    let cpu = cpu.share(server, pg);

    let mut visible = Vec::with_capacity(total);
    let mut quarters: [Vec<f64>; 4] = Default::default();
    let mut clock = Vec::with_capacity(total);
    let mut round_trip = Vec::with_capacity(total);
    let mut last_delivery = start;
    for &(seq, sent, committed) in &writes {
        let Some(d) = sub.delivered.get(&seq) else {
            return failed(format!("seq {seq} was committed but not delivered"));
        };
        let latency = signed_ms(d.at, committed);
        visible.push(latency);
        quarters[((seq - base) as usize * 4 / total).min(3)].push(latency);
        if let Some(sent_at) = d.sent_at {
            clock.push((d.wall - sent_at).num_microseconds().unwrap_or(0) as f64 / 1e3);
        }
        round_trip.push(signed_ms(committed, sent));
        last_delivery = last_delivery.max(d.at);
    }
    let seen = (base..base + total as i64)
        .filter(|seq| sub.delivered.contains_key(seq))
        .count();
    if writes.len() != total || seen != total {
        return failed(format!(
            "{rate}/s: wrote {} rows, the subscription saw {seen}, expected {total}",
            writes.len()
        ));
    }
    Ok(RateRow {
        target: rate,
        rows_per_txn: per,
        writers: n as u32,
        written: writes.len(),
        seen,
        achieved: total as f64 / last_commit.duration_since(start).as_secs_f64(),
        delivered_rate: total as f64 / last_delivery.duration_since(start).as_secs_f64(),
        commit_to_visible: latency(&mut visible),
        quarter_p50: quarters.map(|mut q| percentile(&mut q, 50.0)),
        clock_to_visible: (clock.len() == total).then(|| latency(&mut clock)),
        insert_round_trip: latency(&mut round_trip),
        cpu,
    })
}

/// Unpaced: `burst_rows` rows in transactions of `burst_rows_per_txn`,
/// from `writers`, as fast as upstream commits them.
async fn burst(
    server: &FreshetServer,
    pg: &PgServer,
    sub: &mut Subscriber,
    writers: &[Writer],
    base: i64,
    s: &CdcSettings<'_>,
) -> Result<BurstRow> {
    let per = s.burst_rows_per_txn.max(1);
    let txns = s.burst_rows.div_ceil(per);
    let total = s.burst_rows;
    let n = writers.len();
    let cpu = CpuSampler::new(server, pg)?;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (w, writer) in writers.iter().enumerate() {
        let client = Arc::clone(&writer.client);
        tasks.push(tokio::spawn(async move {
            let mut out: Vec<Write> = Vec::new();
            for t in (w..txns).step_by(n) {
                let first = base + (t * per) as i64;
                let last = base + ((t + 1) * per).min(total) as i64 - 1;
                let sent = Instant::now();
                client
                    .batch_execute(&format!(
                        "INSERT INTO ticks (seq, pad) SELECT g, '{PAD}' FROM generate_series({first}, {last}) g"
                    ))
                    .await
                    .map_err(|e| format!("upstream burst INSERT at seq {first}: {e}"))?;
                out.push((first, sent, Instant::now()));
            }
            Ok::<_, String>(out)
        }));
    }
    let writes = join_writers(tasks).await?;
    let upstream_done = writes.iter().map(|w| w.2).max().unwrap_or(start);
    sub.collect(base..base + total as i64, DELIVERY_TIMEOUT)
        .await?;
    let cpu = cpu.share(server, pg);
    let last_delivery = (base..base + total as i64)
        .filter_map(|seq| sub.delivered.get(&seq).map(|d| d.at))
        .max()
        .unwrap_or(start);
    Ok(BurstRow {
        rows: total,
        rows_per_txn: per,
        writers: n as u32,
        upstream_secs: upstream_done.duration_since(start).as_secs_f64(),
        visible_secs: last_delivery.duration_since(start).as_secs_f64(),
        cpu,
    })
}

/// Wait for every writer task; all their writes.
async fn join_writers(
    tasks: Vec<tokio::task::JoinHandle<std::result::Result<Vec<Write>, String>>>,
) -> Result<Vec<Write>> {
    let mut all = Vec::new();
    for t in tasks {
        match t.await {
            Ok(Ok(w)) => all.extend(w),
            Ok(Err(e)) => return failed(format!("a writer failed: {e}")),
            Err(e) => return failed(format!("a writer panicked: {e}")),
        }
    }
    Ok(all)
}

/// When and how a row reached the subscriber.
struct Delivery {
    /// Monotonic instant its bytes were read.
    at: Instant,
    /// Wall clock at the same moment.
    wall: DateTime<Utc>,
    /// The row's `sent_at` (upstream `clock_timestamp()`).
    sent_at: Option<DateTime<Utc>>,
}

/// What the subscriber thread sends.
enum Event {
    /// The SUBSCRIBE is running.
    Ready,
    /// Bytes of COPY data and when they were read.
    Data(Instant, DateTime<Utc>, Bytes),
    /// The subscription failed or ended.
    Ended(String),
}

/// `COPY (SUBSCRIBE <relation> ...) TO STDOUT` on its own thread and
/// runtime; the deliveries, parsed here.
struct Subscriber {
    events: mpsc::UnboundedReceiver<Event>,
    /// The incomplete last line of the data so far (a line is delivered
    /// when the chunk that completes it is read).
    partial: Vec<u8>,
    delivered: HashMap<i64, Delivery>,
    duplicates: usize,
    retractions: usize,
}

impl Subscriber {
    fn start(port: u16, relation: &str) -> Subscriber {
        let (tx, events) = mpsc::unbounded_channel();
        let sql = format!("COPY (SUBSCRIBE {relation} WITH (SNAPSHOT = false)) TO STDOUT");
        std::thread::spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Event::Ended(format!("subscriber runtime: {e}")));
                    return;
                }
            };
            let why = runtime.block_on(async {
                let conn = format!("host=127.0.0.1 port={port} user=freshet dbname=freshet");
                let client = match db::connect(&conn, "Freshet").await {
                    Ok(c) => c,
                    Err(e) => return e.to_string(),
                };
                let stream = match client.copy_out(sql.as_str()).await {
                    Ok(s) => s,
                    Err(e) => return format!("{sql}: {e}"),
                };
                if tx.send(Event::Ready).is_err() {
                    return String::new();
                }
                futures::pin_mut!(stream);
                while let Some(chunk) = stream.next().await {
                    let at = Instant::now();
                    let wall = Utc::now();
                    match chunk {
                        Ok(b) => {
                            if tx.send(Event::Data(at, wall, b)).is_err() {
                                return String::new();
                            }
                        }
                        Err(e) => return format!("the subscription failed: {e}"),
                    }
                }
                "the subscription ended".into()
            });
            let _ = tx.send(Event::Ended(why));
        });
        Subscriber {
            events,
            partial: Vec::new(),
            delivered: HashMap::new(),
            duplicates: 0,
            retractions: 0,
        }
    }

    /// Wait until the SUBSCRIBE runs.
    async fn ready(&mut self) -> Result<()> {
        match tokio::time::timeout(Duration::from_secs(30), self.events.recv()).await {
            Ok(Some(Event::Ready)) => Ok(()),
            Ok(Some(Event::Ended(why))) => failed(format!("the SUBSCRIBE: {why}")),
            Ok(Some(Event::Data(..))) => failed("the SUBSCRIBE sent data before starting"),
            Ok(None) => failed("the subscriber thread ended"),
            Err(_) => failed("the SUBSCRIBE did not start within 30 s"),
        }
    }

    /// Take deliveries until every seq in `range` arrived, or fail after
    /// `timeout`.
    async fn collect(&mut self, range: Range<i64>, timeout: Duration) -> Result<()> {
        let want = (range.end - range.start) as usize;
        let mut have = range
            .clone()
            .filter(|seq| self.delivered.contains_key(seq))
            .count();
        let deadline = tokio::time::Instant::now() + timeout;
        while have < want {
            let event = match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some(e)) => e,
                Ok(None) => return failed("the subscriber thread ended"),
                Err(_) => {
                    return failed(format!(
                        "only {have} of {want} rows (seq {}..{}) were delivered within {timeout:?} \
                         after the writers finished",
                        range.start, range.end
                    ));
                }
            };
            match event {
                Event::Data(at, wall, bytes) => {
                    have += self.take(at, wall, &bytes, &range);
                }
                Event::Ended(why) => return failed(format!("the SUBSCRIBE: {why}")),
                Event::Ready => {}
            }
        }
        Ok(())
    }

    /// Parse the lines `bytes` completes; how many new seqs of `range`.
    fn take(
        &mut self,
        at: Instant,
        wall: DateTime<Utc>,
        bytes: &[u8],
        range: &Range<i64>,
    ) -> usize {
        self.partial.extend_from_slice(bytes);
        let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return 0;
        };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        let mut new = 0;
        for line in complete.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let line = String::from_utf8_lossy(line);
            // mz_timestamp, mz_diff, seq, sent_at (, pad for `ticks`)
            let mut fields = line.split('\t').skip(1);
            let diff = fields.next().and_then(|v| v.parse::<i64>().ok());
            let seq = fields.next().and_then(|v| v.parse::<i64>().ok());
            let sent_at = fields.next().and_then(parse_timestamptz);
            let (Some(diff), Some(seq)) = (diff, seq) else {
                continue;
            };
            if diff != 1 {
                self.retractions += 1;
                continue;
            }
            if self.delivered.contains_key(&seq) {
                self.duplicates += 1;
                continue;
            }
            self.delivered.insert(seq, Delivery { at, wall, sent_at });
            if range.contains(&seq) {
                new += 1;
            }
        }
        new
    }
}

/// `2026-12-03 14:07:01.123456+00` as a UTC instant.
fn parse_timestamptz(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_str(s.trim(), "%Y-%m-%d %H:%M:%S%.f%#z")
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// CPU time of Freshet, PostgreSQL (walsender apart) and the benchmark.
struct CpuSampler {
    at: Instant,
    ticks: [u64; 4],
}

impl CpuSampler {
    fn new(server: &FreshetServer, pg: &PgServer) -> Result<CpuSampler> {
        // Fail early if /proc cannot be read for the postmaster.
        pg.postmaster_pid()?;
        Ok(CpuSampler {
            at: Instant::now(),
            ticks: cpu_ticks(server, pg),
        })
    }

    /// CPU seconds per wall second since `new`.
    fn share(&self, server: &FreshetServer, pg: &PgServer) -> CpuShare {
        let now = cpu_ticks(server, pg);
        let wall = self.at.elapsed().as_secs_f64().max(1e-9);
        // USER_HZ is 100 on Linux.
        let per = |i: usize| now[i].saturating_sub(self.ticks[i]) as f64 / 100.0 / wall;
        CpuShare {
            freshet: per(0),
            postgres: per(1),
            walsender: per(2),
            bench: per(3),
        }
    }
}

/// utime + stime of Freshet, PostgreSQL's processes except walsenders,
/// walsenders, and this process, in clock ticks. A process that exits
/// between two samples takes its ticks with it, so PostgreSQL's figure is
/// a lower bound (its backends here live through the measurements).
fn cpu_ticks(server: &FreshetServer, pg: &PgServer) -> [u64; 4] {
    let mut out = [0u64; 4];
    out[0] = proc_stat(server.pid()).map_or(0, |s| s.ticks);
    out[3] = proc_stat(std::process::id()).map_or(0, |s| s.ticks);
    let Ok(postmaster) = pg.postmaster_pid() else {
        return out;
    };
    out[1] = proc_stat(postmaster).map_or(0, |s| s.ticks);
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Some(stat) = proc_stat(pid) else { continue };
        if stat.ppid != postmaster {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains("walsender") {
            out[2] += stat.ticks;
        } else {
            out[1] += stat.ticks;
        }
    }
    out
}

struct ProcStat {
    ppid: u32,
    ticks: u64,
}

/// The parent and utime + stime of a process, from /proc/<pid>/stat.
fn proc_stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After "pid (comm) ": state ppid ... utime (14th field) stime (15th).
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(ProcStat {
        ppid,
        ticks: utime + stime,
    })
}

/// Notes for the report's environment.
pub fn notes() -> Vec<String> {
    vec![
        format!(
            "PostgreSQL (the upstream) also ran with {}; it keeps fsync=on and \
             synchronous_commit=on, so every upstream commit waits for its WAL flush.",
            PG_EXTRA_SETTINGS.join(", ")
        ),
        "PostgreSQL, Freshet and the benchmark (writers, subscriber) share the same cores.".into(),
    ]
}

fn cpu_cell(c: &CpuShare) -> String {
    format!(
        "{:.2} / {:.2} / {:.2} / {:.2}",
        c.freshet, c.postgres, c.walsender, c.bench
    )
}

/// The report section.
pub fn render(run: &CdcRun, s: &CdcSettings<'_>) -> String {
    let mut out = String::from("## PostgreSQL CDC\n\n### Snapshot\n\n");
    let sn = &run.snapshot;
    out.push_str(
        "| upstream rows | upstream COPY alone (bench reads) | CREATE SOURCE → durable | rows/s | \
         CPU s/s Freshet / PostgreSQL / walsender / bench |\n|---:|---:|---:|---:|---:|\n",
    );
    out.push_str(&format!(
        "| {} | {:.2} s ({:.0} MB text) | {:.2} s | {} | {} |\n",
        thousands(sn.rows as f64),
        sn.copy_secs,
        sn.copy_bytes as f64 / 1e6,
        sn.create_secs,
        thousands(sn.rows as f64 / sn.create_secs.max(1e-9)),
        cpu_cell(&sn.cpu)
    ));
    out.push_str(&format!(
        "\n### Streaming: upstream commit → visible in `{}`{} ({} s per rate)\n\n",
        s.relation,
        if s.relation == "ticks" {
            " (the subsource; no view defined)"
        } else {
            ""
        },
        s.seconds
    ));
    out.push_str(
        "| target rows/s | rows/transaction | writers | rows written / seen | achieved upstream rows/s | \
         delivered rows/s | commit → visible p50 / p99 / max (ms) | p50 by quarter of the run (ms) | \
         upstream clock_timestamp() → visible p50 / p99 / max (ms) | upstream INSERT round trip p50 / p99 (ms) | \
         CPU s/s Freshet / PostgreSQL / walsender / bench |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in &run.rates {
        let clock = r.clock_to_visible.map_or_else(
            || "—".into(),
            |c| format!("{:.2} / {:.2} / {:.2}", c.p50, c.p99, c.max),
        );
        out.push_str(&format!(
            "| {} | {} | {} | {} / {} | {:.0} | {:.0} | {:.2} / {:.2} / {:.2} | {} | {} | {:.2} / {:.2} | {} |\n",
            thousands(f64::from(r.target)),
            r.rows_per_txn,
            r.writers,
            thousands(r.written as f64),
            thousands(r.seen as f64),
            r.achieved,
            r.delivered_rate,
            r.commit_to_visible.p50,
            r.commit_to_visible.p99,
            r.commit_to_visible.max,
            r.quarter_p50
                .iter()
                .map(|p| format!("{p:.0}"))
                .collect::<Vec<_>>()
                .join(" / "),
            clock,
            r.insert_round_trip.p50,
            r.insert_round_trip.p99,
            cpu_cell(&r.cpu)
        ));
    }
    if let Some(b) = &run.burst {
        out.push_str("\n### Burst: unpaced multi-row upstream transactions\n\n");
        out.push_str(&format!(
            "| rows | rows/transaction | writers | upstream committed all | all visible in `{}` | \
             visible rows/s | CPU s/s Freshet / PostgreSQL / walsender / bench |\n\
             |---:|---:|---:|---:|---:|---:|---:|\n",
            s.relation
        ));
        out.push_str(&format!(
            "| {} | {} | {} | {:.2} s | {:.2} s | {} | {} |\n",
            thousands(b.rows as f64),
            b.rows_per_txn,
            b.writers,
            b.upstream_secs,
            b.visible_secs,
            thousands(b.rows as f64 / b.visible_secs.max(1e-9)),
            cpu_cell(&b.cpu)
        ));
    }
    out.push_str(&format!(
        "\nSource status at the end: {}\n",
        if run.status.is_empty() {
            "(none)"
        } else {
            &run.status
        }
    ));
    if run.log.trim().is_empty() {
        out.push_str("\nThe streaming server logged nothing at `warn` or above.\n");
    } else {
        out.push_str(&format!(
            "\nThe streaming server's log (`warn` and above), last lines:\n\n```\n{}\n```\n",
            run.log.trim_end()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_timestamptz_text() {
        let t = parse_timestamptz("2026-12-03 14:07:01.123456+00").unwrap();
        assert_eq!(t.timestamp_subsec_micros(), 123_456);
        assert!(parse_timestamptz("2026-12-03 14:07:01+00").is_some());
        assert!(parse_timestamptz("2026-12-03 14:07:01.5+05:30").is_some());
    }

    #[test]
    fn nearest_rank() {
        let mut v: Vec<f64> = (1..=200).map(f64::from).collect();
        let l = latency(&mut v);
        assert_eq!((l.p50, l.p99, l.max), (100.0, 198.0, 200.0));
    }
}

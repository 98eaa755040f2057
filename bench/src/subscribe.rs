//! SUBSCRIBE latency: how long after a write commits its row reaches a
//! subscribed client, at a paced write rate.
//!
//! One client runs `COPY (SUBSCRIBE ev WITH (SNAPSHOT = false)) TO STDOUT`
//! and timestamps each row as it arrives. Writer connections insert rows
//! (`INSERT ... VALUES (i)`, or `INSERT ... SELECT generate_series(i, j)` of
//! `rows_per_insert` rows; one autocommit transaction each) on an
//! open-loop schedule of `rate` rows per second, timestamping when each INSERT is sent and when its
//! acknowledgement (CommandComplete) arrives. Commit happens between the
//! two, so `sent → delivered` bounds commit → delivered from above and
//! `acknowledged → delivered` from below (negative when the row reached
//! the subscriber before the writer heard back).
//!
//! With a table size N > 0, `ev` first gets N older rows and the client
//! subscribes to a materialized view over all of it instead,
//! `ev_latest AS SELECT g, max(id) AS last, count(*) AS n FROM ev GROUP
//! BY g` (1,000 groups, so each group holds N/1,000 rows): each write is
//! the new maximum of its group, and is delivered when the view's row
//! for the group changes to it. That is commit → visible in a maintained
//! view whose per-update work reads a group of the table, at each size.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::Mutex;

use crate::db;
use crate::error::{Context, Result, failed};
use crate::freshet::FreshetServer;

/// What the subscribe benchmark needs to know.
pub struct SubscribeSettings<'a> {
    /// The freshet binary.
    pub bin: &'a std::path::Path,
    /// `--workers` for freshet.
    pub workers: Option<u32>,
    /// Target write rates (writes per second).
    pub rates: Vec<u32>,
    /// Seconds of writing per rate.
    pub seconds: u64,
    /// Writer connections.
    pub writers: u32,
    /// Rows per INSERT for each rate (a write is a row; 1: single-row
    /// transactions); the last entry repeats.
    pub rows_per_insert: Vec<u32>,
    /// Rows in `ev` before the writes start; 0 subscribes to the table
    /// itself, more to the view `ev_latest` over it (see the module).
    pub sizes: Vec<usize>,
    /// Where to write each write's times, if anywhere (see `--subscribe-trace`).
    pub trace: Option<&'a std::path::Path>,
    /// Deliver through a sink instead of a subscribed client (see
    /// [`SinkBench`]).
    pub sink: Option<SinkBench>,
}

/// The target a sink delivers to in the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SinkBench {
    /// `INTO FILES ... FORMAT CSV`: a row is delivered when a manifest
    /// naming its file is seen (polled every millisecond).
    Files,
    /// `INTO KAFKA ... ENVELOPE UPSERT` on a tansu broker the bench
    /// starts: a row is delivered when a fetch (5 ms wait) returns its
    /// message.
    Kafka,
    /// `INTO POSTGRES` on a PostgreSQL 15 the bench starts: a row is
    /// delivered when a poll of the table (every 2 ms) shows it.
    Postgres,
}

/// One rate's figures.
#[derive(Debug, Clone)]
pub struct SubscribeRow {
    /// Rows in `ev` before the writes (0: subscribed to the table).
    pub size: usize,
    /// Target rate (rows/s).
    pub rate: u32,
    /// Rows per INSERT.
    pub rows_per_insert: u32,
    /// Writes acknowledged per second, as achieved.
    pub achieved: f64,
    /// Writes measured.
    pub writes: usize,
    /// p50 and p99 of sent → delivered (ms).
    pub sent: (f64, f64),
    /// p50 and p99 of acknowledged → delivered (ms).
    pub acked: (f64, f64),
    /// A sink's commits: how many, their mean time (ms), and the share of
    /// it spent recording progress (from `sink_statuses`).
    pub commits: Option<(u64, f64, f64)>,
}

/// Per write: when sent, when acknowledged, when delivered.
#[derive(Debug, Default, Clone, Copy)]
struct Times {
    sent: Option<Instant>,
    acked: Option<Instant>,
    delivered: Option<Instant>,
}

/// Run every rate against a fresh server.
pub async fn run(settings: &SubscribeSettings<'_>) -> Result<Vec<SubscribeRow>> {
    let mut out = Vec::new();
    for &size in &settings.sizes {
        for (i, &rate) in settings.rates.iter().enumerate() {
            let per = settings
                .rows_per_insert
                .get(i)
                .or(settings.rows_per_insert.last())
                .copied()
                .unwrap_or(1);
            eprintln!(
                "subscribe: {size} rows, {rate} writes/s, {per} per INSERT, for {} s",
                settings.seconds
            );
            let server = FreshetServer::start(settings.bin, settings.workers).await?;
            out.push(one_rate(&server, size, rate, per, settings).await?);
            drop(server);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(out)
}

/// Groups of `ev_latest`.
const GROUPS: i64 = 1000;

async fn one_rate(
    server: &FreshetServer,
    size: usize,
    rate: u32,
    per: u32,
    settings: &SubscribeSettings<'_>,
) -> Result<SubscribeRow> {
    let setup = server.connect().await?;
    db::exec(&setup, "CREATE TABLE ev (id bigint, g bigint)", "Freshet").await?;
    let subscribed = if size == 0 {
        "ev"
    } else {
        // Older rows: negative ids, so every write is its group's new max.
        db::exec(
            &setup,
            &format!(
                "INSERT INTO ev SELECT -value, value % {GROUPS} FROM generate_series(1, {size})"
            ),
            "Freshet",
        )
        .await?;
        db::exec(
            &setup,
            "CREATE MATERIALIZED VIEW ev_latest AS \
             SELECT g, max(id) AS last, count(*) AS n FROM ev GROUP BY g",
            "Freshet",
        )
        .await?;
        // Read once: returns when the view has caught up with the older
        // rows, so no write waits for the view's first computation.
        db::exec(&setup, "SELECT count(*) FROM ev_latest", "Freshet").await?;
        "ev_latest"
    };
    let total = rate as usize * settings.seconds as usize;
    let times: Arc<Mutex<HashMap<i64, Times>>> =
        Arc::new(Mutex::new(HashMap::with_capacity(total)));

    let column = if size == 0 { 2 } else { 3 };
    let sink_dir = tempfile::tempdir().context("a directory for the sink")?;
    let key = if size == 0 { "id" } else { "g" };
    let field = if size == 0 { "id" } else { "last" };
    let services = match settings.sink {
        Some(kind) => create_sink(&setup, kind, subscribed, key, sink_dir.path()).await?,
        None => Services::default(),
    };
    let reader = if let Some(broker) = &services.broker {
        let client = broker.client().await?;
        let pc = match client
            .partition_client(
                "evs",
                0,
                rskafka::client::partition::UnknownTopicHandling::Retry,
            )
            .await
        {
            Ok(pc) => pc,
            Err(e) => return failed(format!("a client of topic evs: {e}")),
        };
        tokio::spawn(kafka_reader(pc, Arc::clone(&times), total, field))
    } else if let Some(pg) = &services.postgres {
        let client = pg.connect().await?;
        tokio::spawn(postgres_reader(
            client,
            Arc::clone(&times),
            total,
            size == 0,
        ))
    } else if settings.sink == Some(SinkBench::Files) {
        tokio::spawn(sink_reader(
            sink_dir.path().to_path_buf(),
            Arc::clone(&times),
            total,
            column,
        ))
    } else {
        subscriber_reader(server, subscribed, Arc::clone(&times), total, column).await?
    };

    // Writers on an open-loop schedule: INSERT j (rows j*r .. j*r+r-1) is
    // due at start + j*r/rate.
    let per = per.max(1) as usize;
    let statements = total.div_ceil(per);
    let interval = Duration::from_secs_f64(per as f64 / f64::from(rate));
    let start = Instant::now() + Duration::from_millis(200);
    let mut tasks = Vec::new();
    for w in 0..settings.writers {
        let client = server.connect().await?;
        let times = Arc::clone(&times);
        let writers = settings.writers as usize;
        tasks.push(tokio::spawn(async move {
            let mut j = w as usize;
            while j < statements {
                let due = start + interval * j as u32;
                tokio::time::sleep_until(due.into()).await;
                let first = (j * per) as i64;
                let last = ((j + 1) * per).min(total) as i64 - 1;
                let sent = Instant::now();
                let sql = if first == last {
                    format!("INSERT INTO ev VALUES ({first}, {})", first % GROUPS)
                } else {
                    format!(
                        "INSERT INTO ev SELECT value, value % {GROUPS} \
                         FROM generate_series({first}, {last})"
                    )
                };
                client
                    .batch_execute(&sql)
                    .await
                    .map_err(|e| e.to_string())?;
                let acked = Instant::now();
                let mut map = times.lock().await;
                for id in first..=last {
                    let t = map.entry(id).or_default();
                    t.sent = Some(sent);
                    t.acked = Some(acked);
                }
                drop(map);
                j += writers;
            }
            Ok::<_, String>(())
        }));
    }
    for t in tasks {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return failed(format!("a writer failed: {e}")),
            Err(e) => return failed(format!("a writer panicked: {e}")),
        }
    }
    let elapsed = start.elapsed();
    let seen = match tokio::time::timeout(Duration::from_secs(60), reader).await {
        Ok(Ok(seen)) => seen,
        Ok(Err(e)) => return failed(format!("the subscriber task failed: {e}")),
        Err(_) => return failed("the subscriber did not see every row within 60 s"),
    };
    if seen < total {
        return failed(format!("the subscriber saw {seen} of {total} rows"));
    }
    let map = times.lock().await;
    if let Some(dir) = settings.trace {
        let mut csv = String::from("sent_ms,acked_ms,delivered_ms\n");
        let mut rows: Vec<_> = map
            .values()
            .filter_map(|t| Some((t.sent?, t.acked?, t.delivered?)))
            .map(|(s, a, d)| {
                (
                    signed_ms(s, start),
                    signed_ms(a, start),
                    signed_ms(d, start),
                )
            })
            .collect();
        rows.sort_by(|x, y| x.0.total_cmp(&y.0));
        for (s, a, d) in rows {
            csv.push_str(&format!("{s:.3},{a:.3},{d:.3}\n"));
        }
        let path = dir.join(format!("subscribe-{size}-{rate}.csv"));
        std::fs::write(&path, csv).context(format!("write {}", path.display()))?;
    }
    let mut sent = Vec::with_capacity(total);
    let mut acked = Vec::with_capacity(total);
    for t in map.values() {
        if let (Some(s), Some(a), Some(d)) = (t.sent, t.acked, t.delivered) {
            sent.push(signed_ms(d, s));
            acked.push(signed_ms(d, a));
        }
    }
    let commits = if settings.sink.is_some() {
        let row = setup
            .query_one(
                "SELECT commits, commit_us, progress_us FROM freshet_internal.sink_statuses",
                &[],
            )
            .await
            .context("read the sink's status")?;
        let (n, total_us, progress_us): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        Some((
            n as u64,
            total_us as f64 / 1e3 / (n.max(1) as f64),
            progress_us as f64 / (total_us.max(1) as f64),
        ))
    } else {
        None
    };
    drop(services);
    Ok(SubscribeRow {
        size,
        rate,
        rows_per_insert: per as u32,
        achieved: total as f64 / elapsed.as_secs_f64(),
        writes: sent.len(),
        sent: p50_p99(&mut sent),
        acked: p50_p99(&mut acked),
        commits,
    })
}

/// Start what sink `kind` writes to and create sink `evs` from
/// `subscribed` (keyed by `key` for an envelope), exporting only changes
/// after its creation.
async fn create_sink(
    setup: &tokio_postgres::Client,
    kind: SinkBench,
    subscribed: &str,
    key: &str,
    dir: &std::path::Path,
) -> Result<Services> {
    let mut services = Services::default();
    let sql = match kind {
        SinkBench::Kafka => {
            let broker = crate::kafka::Broker::start().await?;
            let sql = format!(
                "CREATE CONNECTION k TO KAFKA (BROKER '{}'); \
                 CREATE SINK evs FROM {subscribed} INTO KAFKA CONNECTION k (TOPIC 'evs') \
                 KEY ({key}) NOT ENFORCED ENVELOPE UPSERT WITH (SNAPSHOT = false)",
                broker.address()
            );
            services.broker = Some(broker);
            sql
        }
        SinkBench::Postgres => {
            let pg = crate::postgres::PgServer::start_with(None, &[])?;
            let sql = format!(
                "CREATE CONNECTION pg TO POSTGRES (HOST '127.0.0.1', PORT {}, USER postgres, \
                 DATABASE 'postgres') WITH (VALIDATE = false); \
                 CREATE SINK evs FROM {subscribed} INTO POSTGRES CONNECTION pg (TABLE 'evs') \
                 KEY ({key}) NOT ENFORCED WITH (SNAPSHOT = false)",
                pg.port()
            );
            services.postgres = Some(pg);
            sql
        }
        SinkBench::Files => format!(
            "CREATE SINK evs FROM {subscribed} INTO FILES (PATH '{}') FORMAT CSV \
             WITH (SNAPSHOT = false)",
            dir.display()
        ),
    };
    db::exec(setup, &sql, "Freshet").await?;
    Ok(services)
}

/// Bulk export: how fast sink `kind` delivers `rows` changes committed at
/// once (one `INSERT ... SELECT generate_series`) into `ev`: from the
/// INSERT's acknowledgement until `messages_written` in `sink_statuses`
/// (counted after each commit at the target) reaches `rows`, polled every
/// 20 ms. Returns (insert seconds, export seconds after it, commits).
pub async fn bulk(
    bin: &std::path::Path,
    workers: Option<u32>,
    kind: SinkBench,
    rows: u64,
) -> Result<(f64, f64, u64)> {
    let server = FreshetServer::start(bin, workers).await?;
    let setup = server.connect().await?;
    db::exec(&setup, "CREATE TABLE ev (id bigint, g bigint)", "Freshet").await?;
    let dir = tempfile::tempdir().context("a directory for the sink")?;
    let services = create_sink(&setup, kind, "ev", "id", dir.path()).await?;
    let sent = Instant::now();
    db::exec(
        &setup,
        &format!(
            "INSERT INTO ev SELECT value, value % {GROUPS} FROM generate_series(0, {})",
            rows - 1
        ),
        "Freshet",
    )
    .await?;
    let acked = Instant::now();
    let deadline = acked + Duration::from_secs(900);
    loop {
        let row = setup
            .query_one(
                "SELECT messages_written, commits FROM freshet_internal.sink_statuses",
                &[],
            )
            .await
            .context("read the sink's status")?;
        let (written, commits): (i64, i64) = (row.get(0), row.get(1));
        if written as u64 >= rows {
            let done = Instant::now();
            drop(services);
            return Ok((
                (acked - sent).as_secs_f64(),
                (done - acked).as_secs_f64(),
                commits as u64,
            ));
        }
        if Instant::now() > deadline {
            return failed(format!(
                "the sink wrote {written} of {rows} changes in 900 s"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The services a sink's benchmark started, stopped when dropped.
#[derive(Default)]
struct Services {
    broker: Option<crate::kafka::Broker>,
    postgres: Option<crate::postgres::PgServer>,
}

/// The Kafka sink's reader: fetches the topic's partition (one, as the
/// sink creates it) with a 5 ms wait; the rows of the messages a fetch
/// returns are delivered when it returns.
async fn kafka_reader(
    pc: rskafka::client::partition::PartitionClient,
    times: Arc<Mutex<HashMap<i64, Times>>>,
    total: usize,
    field: &'static str,
) -> usize {
    let mut next = 0i64;
    let mut seen = 0usize;
    let mut marks = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(600);
    while seen < total && Instant::now() < deadline {
        let Ok((records, _)) = pc.fetch_records(next, 1..8_000_000, 5).await else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let now = Instant::now();
        let mut map = times.lock().await;
        for r in records {
            if r.offset < next {
                continue;
            }
            next = r.offset + 1;
            let Some(value) = r.record.value else {
                continue;
            };
            let Ok(value) = serde_json::from_slice::<serde_json::Value>(&value) else {
                continue;
            };
            match (field, value["g"].as_i64(), value[field].as_i64()) {
                ("last", Some(g), Some(last)) => {
                    seen += mark_upto(&mut map, &mut marks, g, last, now)
                }
                (_, _, Some(id)) => seen += usize::from(mark(&mut map, id, now)),
                _ => {}
            }
        }
    }
    seen
}

/// The PostgreSQL sink's reader: polls the table every 2 ms (for `ev`,
/// the ids above the highest one below which all have arrived; for the
/// view, every group's `last`).
async fn postgres_reader(
    client: tokio_postgres::Client,
    times: Arc<Mutex<HashMap<i64, Times>>>,
    total: usize,
    table: bool,
) -> usize {
    let mut seen = 0usize;
    let mut delivered = std::collections::HashSet::new();
    let mut floor = -1i64;
    let mut marks = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(600);
    while seen < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let sql = if table {
            format!("SELECT id FROM evs WHERE id > {floor}")
        } else {
            "SELECT g, last FROM evs".to_string()
        };
        let Ok(rows) = client.query(&sql, &[]).await else {
            continue;
        };
        let now = Instant::now();
        let mut map = times.lock().await;
        for row in rows {
            if table {
                let id: i64 = row.get(0);
                if delivered.insert(id) {
                    seen += usize::from(mark(&mut map, id, now));
                }
            } else {
                let (g, last): (i64, i64) = (row.get(0), row.get(1));
                seen += mark_upto(&mut map, &mut marks, g, last, now);
            }
        }
        while delivered.contains(&(floor + 1)) {
            floor += 1;
        }
    }
    seen
}

/// The view's row for group `g` shows `last`: every write of `g` up to it
/// is visible (a sink may carry only the latest of several writes to one
/// group: a commit's last change per key, or one timestamp's). Marks them
/// delivered at `now` (`marks`: per group, the last id marked); how many
/// were new.
fn mark_upto(
    map: &mut HashMap<i64, Times>,
    marks: &mut HashMap<i64, i64>,
    g: i64,
    last: i64,
    now: Instant,
) -> usize {
    let from = marks.get(&g).copied().unwrap_or(g - GROUPS);
    if last <= from {
        return 0;
    }
    let mut n = 0;
    let mut id = from + GROUPS;
    while id <= last {
        n += usize::from(mark(map, id, now));
        id += GROUPS;
    }
    marks.insert(g, last);
    n
}

/// Mark write `id` delivered at `now` if it is a measured write not seen
/// before; whether it was.
fn mark(map: &mut HashMap<i64, Times>, id: i64, now: Instant) -> bool {
    if id < 0 {
        return false;
    }
    let t = map.entry(id).or_default();
    if t.delivered.is_none() {
        t.delivered = Some(now);
        true
    } else {
        false
    }
}

/// The subscribed client: a row is delivered when its line arrives.
async fn subscriber_reader(
    server: &FreshetServer,
    subscribed: &str,
    times: Arc<Mutex<HashMap<i64, Times>>>,
    total: usize,
    column: usize,
) -> Result<tokio::task::JoinHandle<usize>> {
    let subscriber = server.connect().await?;
    let stream = subscriber
        .copy_out(&format!(
            "COPY (SUBSCRIBE {subscribed} WITH (SNAPSHOT = false)) TO STDOUT"
        ))
        .await
        .context("start the subscribe")?;
    Ok(tokio::spawn(async move {
        let mut stream = Box::pin(stream);
        let mut pending = String::new();
        let mut seen = 0usize;
        while seen < total {
            let chunk: Option<std::result::Result<Bytes, _>> = stream.next().await;
            let Some(Ok(chunk)) = chunk else { break };
            let now = Instant::now();
            pending.push_str(&String::from_utf8_lossy(&chunk));
            let mut map = times.lock().await;
            while let Some(i) = pending.find('\n') {
                let line: String = pending.drain(..=i).collect();
                // mz_timestamp, mz_diff, then `ev`'s id and g, or the
                // view's g, last, n: the write is the id (the group's new
                // last) of an inserted row.
                let fields: Vec<&str> = line.trim_end().split('\t').collect();
                seen += usize::from(deliver(&mut map, &fields, column, now));
            }
        }
        seen
    }))
}

/// The files sink's reader: polls the sink's `manifest.json` every
/// millisecond; the rows of each file it names for the first time are
/// delivered at that moment (the file is complete and committed then).
/// CSV columns: `mz_timestamp`, `mz_diff`, then the relation's.
async fn sink_reader(
    dir: std::path::PathBuf,
    times: Arc<Mutex<HashMap<i64, Times>>>,
    total: usize,
    column: usize,
) -> usize {
    let mut read_files = std::collections::HashSet::new();
    let mut marks = HashMap::new();
    let mut seen = 0usize;
    let deadline = Instant::now() + Duration::from_secs(600);
    while seen < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let Ok(text) = std::fs::read_to_string(dir.join("manifest.json")) else {
            continue;
        };
        let now = Instant::now();
        let Ok(manifest) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let names: Vec<String> = manifest["files"]
            .as_array()
            .map(|files| {
                files
                    .iter()
                    .filter_map(|f| f["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        for name in names {
            if !read_files.insert(name.clone()) {
                continue;
            }
            let Ok(csv) = std::fs::read_to_string(dir.join(&name)) else {
                continue;
            };
            let mut map = times.lock().await;
            for line in csv.lines().skip(1) {
                let fields: Vec<&str> = line.split(',').collect();
                seen += if column == 3 {
                    // The view: its row for group g shows every write of
                    // g up to `last`.
                    match (fields.get(1), fields.get(2), fields.get(3)) {
                        (Some(&"1"), Some(g), Some(last)) => match (g.parse(), last.parse()) {
                            (Ok(g), Ok(last)) => mark_upto(&mut map, &mut marks, g, last, now),
                            _ => 0,
                        },
                        _ => 0,
                    }
                } else {
                    usize::from(deliver(&mut map, &fields, column, now))
                };
            }
        }
    }
    seen
}

/// Mark the write a delivered row names (`mz_timestamp`, `mz_diff`, then
/// the columns; the write's id in `column`) as delivered at `now`, if it
/// is an insert of a measured write not seen before; whether it was.
fn deliver(map: &mut HashMap<i64, Times>, fields: &[&str], column: usize, now: Instant) -> bool {
    if fields.get(1) == Some(&"1")
        && let Some(id) = fields.get(column).and_then(|v| v.parse::<i64>().ok())
        && id >= 0
    {
        let t = map.entry(id).or_default();
        if t.delivered.is_none() {
            t.delivered = Some(now);
            return true;
        }
    }
    false
}

/// `later - earlier` in milliseconds, negative if `later` came first.
fn signed_ms(later: Instant, earlier: Instant) -> f64 {
    if later >= earlier {
        (later - earlier).as_secs_f64() * 1e3
    } else {
        -((earlier - later).as_secs_f64() * 1e3)
    }
}

/// Nearest-rank p50 and p99.
fn p50_p99(values: &mut [f64]) -> (f64, f64) {
    values.sort_by(|a, b| a.total_cmp(b));
    let rank = |p: f64| {
        let r = (p / 100.0 * values.len() as f64).ceil() as usize;
        values
            .get(r.clamp(1, values.len().max(1)) - 1)
            .copied()
            .unwrap_or(f64::NAN)
    };
    (rank(50.0), rank(99.0))
}

/// The Markdown section of the subscribe benchmark.
pub fn render(rows: &[SubscribeRow], settings: &SubscribeSettings<'_>) -> String {
    let mut s = String::new();
    match settings.sink {
        Some(SinkBench::Files) => s.push_str(
            "Delivered through a files sink: `CREATE SINK evs FROM x INTO FILES (PATH ...) \
             FORMAT CSV WITH (SNAPSHOT = false)`; a row is delivered when the benchmark, polling \
             the sink's `manifest.json` every millisecond, first sees a manifest naming the row's \
             file (the sink commits about once a second).\n\n",
        ),
        Some(SinkBench::Kafka) => s.push_str(
            "Delivered through a Kafka sink: `CREATE SINK evs FROM x INTO KAFKA CONNECTION k \
             (TOPIC 'evs') KEY (id | g) NOT ENFORCED ENVELOPE UPSERT WITH (SNAPSHOT = false)` on a \
             tansu broker (in memory) the benchmark starts; a row is delivered when the \
             benchmark's fetch of the topic (5 ms wait) returns its message (the sink commits \
             about once a second).\n\n",
        ),
        Some(SinkBench::Postgres) => s.push_str(
            "Delivered through a PostgreSQL sink: `CREATE SINK evs FROM x INTO POSTGRES \
             CONNECTION pg (TABLE 'evs') KEY (id | g) NOT ENFORCED WITH (SNAPSHOT = false)` on a \
             PostgreSQL 15 the benchmark starts; a row is delivered when the benchmark's poll of \
             the table (every 2 ms) shows it (the sink commits about once a second).\n\n",
        ),
        None => {}
    }
    if settings.sink.is_some() {
        s.push_str(
            "With the view, a write counts as visible when its group's row at the target \
             shows it or a later write of the group (a sink may carry only the latest change \
             of a key per timestamp; a PostgreSQL sink only per commit). *Sink commits*, \
             *mean commit* and *of it recording progress* come from `sink_statuses` \
             (`commits`, `commit_us`, `progress_us`) at the end of the rate: the cost of \
             recording progress at the target (the manifest, the progress record, the \
             progress row), which is what exactly-once adds to delivering the changes.\n\n",
        );
    }
    s += &format!(
        "## SUBSCRIBE latency: write commit → row delivered\n\n\
         One client streams `COPY (SUBSCRIBE x WITH (SNAPSHOT = false)) TO STDOUT`; {} writer \
         connections insert rows (`INSERT INTO ev VALUES (i, i % {GROUPS})`, or `INSERT INTO ev \
         SELECT ... generate_series(i, j)` of *rows/INSERT* rows; simple protocol, one autocommit \
         transaction each) on an open-loop schedule for {} s \
         per rate; a write is a row. With *rows in ev* = 0, `x` is the table `ev`; otherwise `ev` \
         first holds that many older rows and `x` is the materialized view `ev_latest AS SELECT g, \
         max(id) AS last, count(*) AS n FROM ev GROUP BY g` ({GROUPS} groups), where each write \
         becomes its group's new `last`. A row's commit lies between \
         its INSERT being sent and acknowledged, so *sent → delivered* bounds commit → delivered \
         from above and *acknowledged → delivered* from below (negative: the subscriber had the row \
         before the writer had its acknowledgement).\n\n\
         | rows in ev | subscribed to | target writes/s | rows/INSERT | achieved writes/s | writes | \
         sent → delivered p50 / p99 (ms) | acknowledged → delivered p50 / p99 (ms) |{}\n\
         |---:|---|---:|---:|---:|---:|---:|---:|{}\n",
        settings.writers,
        settings.seconds,
        if settings.sink.is_some() {
            " sink commits | mean commit (ms) | of it recording progress |"
        } else {
            ""
        },
        if settings.sink.is_some() {
            "---:|---:|---:|"
        } else {
            ""
        }
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {} | {:.2} / {:.2} | {:.2} / {:.2} |{}\n",
            r.size,
            if r.size == 0 { "`ev`" } else { "`ev_latest`" },
            r.rate,
            r.rows_per_insert,
            r.achieved,
            r.writes,
            r.sent.0,
            r.sent.1,
            r.acked.0,
            r.acked.1,
            match r.commits {
                Some((n, mean, share)) => format!(" {n} | {mean:.2} | {:.1} % |", share * 100.0),
                None => String::new(),
            }
        ));
    }
    s
}

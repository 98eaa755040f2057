//! Kafka source ingest (issue 17): how fast a Kafka source reads a topic
//! that already holds a backlog, per format and envelope, and how long
//! after a producer's acknowledgement a record is readable when records
//! arrive at a steady rate.
//!
//! The broker is tansu (in memory; `$FRESHET_TANSU_BIN` or
//! `~/.cache/freshet-tools/tansu/bin/tansu`, where `scripts/test.sh`
//! installs it), started by the bench on a free loopback port. Every case
//! gets a fresh broker and a fresh Freshet server.
//!
//! * **Backlog.** N records (`--kafka-records`, default a million) are
//!   produced into a topic of [`PARTITIONS`] partitions before the source
//!   exists: record n, with key `n % 100000`, goes to partition `n % 4`,
//!   [`PRODUCE_BATCH`] records per produce call, the partitions
//!   concurrently. Timed from issuing `CREATE SOURCE` until the source's
//!   progress relation (`<source>_progress`, the next offset of each
//!   partition, written in the same commit as the rows of the records
//!   before it) says every record was read, polled every 20 ms. Polling
//!   the four progress rows rather than `count(*)` keeps the poll from
//!   scanning the growing source on the cores the ingestion uses; right
//!   after, `count(*)` must equal N (with `ENVELOPE UPSERT`: the number of
//!   distinct keys produced) and checksums of the ids (the latest id of
//!   each key for upsert) and offsets must match what was produced. For
//!   scale, before Freshet starts the bench reads the backlog back itself
//!   with the fetch settings of Freshet's fetch tasks (one fetch at a
//!   time per partition, 250 ms wait, 4 MiB), timed.
//! * **Steady.** A source over an empty topic; the bench produces R
//!   records per second (one produce call of R/100 records every 10 ms,
//!   round-robin over the partitions, open loop: a call does not wait for
//!   the previous one's acknowledgement) for S seconds, while a thread of
//!   its own polls the progress relation every 5 ms. A batch's latency runs
//!   from its produce call returning (the broker acknowledged it) to the
//!   first poll answer showing its partition past its last offset: an
//!   upper bound with a resolution of the poll period plus a round trip.
//!
//! The broker, Freshet and the bench share the machine's cores; CPU seconds
//! per wall second of each are sampled from /proc.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use rskafka::chrono::Utc;
use rskafka::client::partition::{Compression, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record;
use tokio::time::MissedTickBehavior;
use tokio_postgres::Client as PgClient;

use crate::db;
use crate::error::{BenchError, Context, Result, failed};
use crate::freshet::{FreshetServer, free_port};
use crate::report::thousands;
use crate::stats::{Latency, latency, percentile_ms as percentile, signed_ms};

/// Partitions of every topic.
pub const PARTITIONS: i32 = 4;

/// Records per produce call while loading a backlog.
pub const PRODUCE_BATCH: usize = 5_000;

/// Distinct keys: record n has key `n % UPSERT_KEYS` (divisible by
/// [`PARTITIONS`], so all records of a key are in one partition, in order).
const UPSERT_KEYS: u64 = 100_000;

/// How often the backlog's progress is polled.
const BACKLOG_POLL: Duration = Duration::from_millis(20);

/// How long a backlog may take to be read.
const BACKLOG_TIMEOUT: Duration = Duration::from_secs(900);

/// One produce call every this long in the steady measurement.
const STEADY_TICK: Duration = Duration::from_millis(10);

/// How often the steady measurement polls the progress relation.
const STEADY_POLL: Duration = Duration::from_millis(5);

/// How long the steady records may take to be read after the last one
/// was produced.
const STEADY_TIMEOUT: Duration = Duration::from_secs(120);

/// The fetch settings of Freshet's Kafka source (`sources/src/kafka.rs`:
/// `FETCH_WAIT_MS`, `FETCH_MAX_BYTES`), with which the bench reads a
/// backlog alone, for scale.
const FETCH_WAIT_MS: i32 = 250;
const FETCH_MAX_BYTES: i32 = 4 * 1024 * 1024;

/// How long the broker may take to listen.
const BROKER_STARTUP: Duration = Duration::from_secs(30);

/// The text records' padding: with the 12-digit number and a space, each
/// value is 100 bytes.
const TEXT_PAD: &str =
    "kafka-benchmark-text-value-padding-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMN";

/// What the Kafka benchmark needs to know.
pub struct KafkaSettings<'a> {
    /// The freshet binary.
    pub bin: &'a Path,
    /// `--workers` for freshet.
    pub workers: Option<u32>,
    /// Records in each backlog case.
    pub records: u64,
    /// Records per second of the steady measurement.
    pub rate: u32,
    /// Seconds of producing in the steady measurement.
    pub seconds: u64,
}

/// The backlog cases: what the source is created with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    /// `FORMAT TEXT`, 100-byte values.
    Text,
    /// `FORMAT JSON`, 84–93-byte objects.
    Json,
    /// `FORMAT JSON INCLUDE KEY, PARTITION, OFFSET, TIMESTAMP`.
    JsonMetadata,
    /// `FORMAT JSON INCLUDE KEY ENVELOPE UPSERT`.
    Upsert,
}

const CASES: [Case; 4] = [Case::Text, Case::Json, Case::JsonMetadata, Case::Upsert];

impl Case {
    /// What follows `CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 't')`.
    fn options(self) -> &'static str {
        match self {
            Case::Text => "FORMAT TEXT",
            Case::Json => "FORMAT JSON",
            Case::JsonMetadata => {
                "FORMAT JSON INCLUDE KEY, PARTITION, OFFSET AS off, TIMESTAMP AS ts"
            }
            Case::Upsert => "FORMAT JSON INCLUDE KEY ENVELOPE UPSERT",
        }
    }

    /// The check run once every record was read.
    fn check_sql(self) -> &'static str {
        match self {
            Case::Text => "SELECT count(*) FROM s",
            Case::Json => "SELECT count(*), sum((data->>'id')::bigint) FROM s",
            Case::JsonMetadata => {
                "SELECT count(*), sum((data->>'id')::bigint), sum(off), count(key), count(ts), \
                 count(DISTINCT partition) FROM s"
            }
            Case::Upsert => {
                "SELECT count(*), sum((data->>'id')::bigint), count(DISTINCT key) FROM s"
            }
        }
    }

    /// What [`Case::check_sql`] must answer after `n` records.
    fn expected(self, n: u64) -> Vec<String> {
        let ids = n * n.saturating_sub(1) / 2;
        match self {
            Case::Text => vec![n.to_string()],
            Case::Json => vec![n.to_string(), ids.to_string()],
            Case::JsonMetadata => {
                // Partition p holds records p, p + 4, ...: offsets 0..m.
                let offsets: u64 = (0..PARTITIONS as u64)
                    .map(|p| {
                        let m = n.saturating_sub(p).div_ceil(PARTITIONS as u64);
                        m * m.saturating_sub(1) / 2
                    })
                    .sum();
                let partitions = n.min(PARTITIONS as u64);
                vec![
                    n.to_string(),
                    ids.to_string(),
                    offsets.to_string(),
                    n.to_string(),
                    n.to_string(),
                    partitions.to_string(),
                ]
            }
            Case::Upsert => {
                let (keys, latest) = upsert_expectation(n);
                vec![keys.to_string(), latest.to_string(), keys.to_string()]
            }
        }
    }

    /// Whether the values are JSON objects (else 100 bytes of text).
    fn json(self) -> bool {
        self != Case::Text
    }
}

/// Distinct keys among records `0..n` and the sum of each key's latest
/// id (no record is a tombstone). All records of a key are in one
/// partition, produced in id order, so its latest record has the largest
/// id.
fn upsert_expectation(n: u64) -> (u64, u64) {
    let mut latest = vec![None::<u64>; UPSERT_KEYS as usize];
    for id in 0..n {
        latest[(id % UPSERT_KEYS) as usize] = Some(id);
    }
    let keys = latest.iter().flatten().count() as u64;
    (keys, latest.iter().flatten().sum())
}

/// Record `id`'s value: 100 bytes of text, or a JSON object of 84–93
/// bytes.
fn value(json: bool, id: u64) -> String {
    if json {
        format!(
            r#"{{"id":{id},"user":"u{}","amount":{}.{:02},"ts":"2026-12-03T16:{:02}:{:02}.{:06}Z","kind":"click"}}"#,
            id % 1000,
            id % 1000,
            id % 100,
            (id / 60) % 60,
            id % 60,
            id % 1_000_000
        )
    } else {
        format!("{id:012} {TEXT_PAD}")
    }
}

/// Record `id`: key `id % UPSERT_KEYS` (a JSON number, also valid text).
fn record(json: bool, id: u64) -> Record {
    Record {
        key: Some((id % UPSERT_KEYS).to_string().into_bytes()),
        value: Some(value(json, id).into_bytes()),
        headers: Default::default(),
        timestamp: Utc::now(),
    }
}

/// A Kafka client error as the bench's.
fn kafka<T, E: std::fmt::Display>(r: std::result::Result<T, E>, what: &str) -> Result<T> {
    r.map_err(|e| BenchError::Failed(format!("{what}: {e}")))
}

/// A tansu broker on a free loopback port, in memory, killed when
/// dropped.
pub(crate) struct Broker {
    port: u16,
    child: Child,
    log_path: PathBuf,
    /// Holds the broker's log.
    _tmp: tempfile::TempDir,
}

impl Broker {
    /// `$FRESHET_TANSU_BIN`, else where `scripts/test.sh` installs tansu.
    fn binary() -> PathBuf {
        if let Ok(bin) = std::env::var("FRESHET_TANSU_BIN") {
            return PathBuf::from(bin);
        }
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        PathBuf::from(home).join(".cache/freshet-tools/tansu/bin/tansu")
    }

    /// Start the broker and wait until it listens.
    pub(crate) async fn start() -> Result<Broker> {
        let bin = Self::binary();
        if !bin.is_file() {
            return failed(format!(
                "--kafka needs a Kafka broker: no tansu at {} (install it with `cargo install \
                 tansu --features dynostore --root ~/.cache/freshet-tools/tansu`, or set \
                 FRESHET_TANSU_BIN)",
                bin.display()
            ));
        }
        let tmp = tempfile::Builder::new()
            .prefix("freshet-bench-tansu-")
            .tempdir()
            .context("create a temp dir for tansu")?;
        let log_path = tmp.path().join("tansu.log");
        let log =
            std::fs::File::create(&log_path).context(format!("create {}", log_path.display()))?;
        let port = free_port()?;
        let url = format!("tcp://127.0.0.1:{port}");
        let child = Command::new(&bin)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context(format!("spawn {}", bin.display()))?;
        let mut broker = Broker {
            port,
            child,
            log_path,
            _tmp: tmp,
        };
        let deadline = Instant::now() + BROKER_STARTUP;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = broker.child.try_wait().context("wait for tansu")? {
                return failed(format!(
                    "tansu exited during startup ({status}); its log:\n{}",
                    broker.log_tail()
                ));
            }
            if Instant::now() > deadline {
                return failed(format!(
                    "tansu did not listen on port {port} within {BROKER_STARTUP:?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(broker)
    }

    /// `127.0.0.1:<port>`.
    pub(crate) fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The process id (for sampling its CPU time).
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A new client of the broker.
    pub(crate) async fn client(&self) -> Result<Client> {
        kafka(
            ClientBuilder::new(vec![self.address()]).build().await,
            "connect to tansu",
        )
    }

    /// Create `topic` with [`PARTITIONS`] partitions; a client of each.
    async fn topic(&self, client: &Client, topic: &str) -> Result<Vec<PartitionClient>> {
        let controller = kafka(client.controller_client(), "the controller client")?;
        kafka(
            controller.create_topic(topic, PARTITIONS, 1, 5_000).await,
            &format!("create topic {topic}"),
        )?;
        let mut clients = Vec::new();
        for p in 0..PARTITIONS {
            clients.push(kafka(
                client
                    .partition_client(topic, p, UnknownTopicHandling::Retry)
                    .await,
                &format!("a client of {topic} partition {p}"),
            )?);
        }
        Ok(clients)
    }

    /// The last lines of the broker's log.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tansu --version`, for the notes.
fn broker_version() -> String {
    match Command::new(Broker::binary()).arg("--version").output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        Ok(out) => format!("unknown (--version exited with {})", out.status),
        Err(e) => format!("unknown ({e})"),
    }
}

/// CPU seconds per wall second of each party over an interval.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuShare {
    freshet: f64,
    broker: f64,
    bench: f64,
}

/// One backlog case's measurement.
pub struct BacklogRow {
    case: Case,
    records: u64,
    value_bytes: u64,
    produce_secs: f64,
    /// The bench reading the topic alone.
    alone: ReadAlone,
    /// `CREATE SOURCE` until it answered.
    create_secs: f64,
    /// `CREATE SOURCE` until every record was read.
    read_secs: f64,
    /// `count(*)` at the end.
    rows: u64,
    /// How long one `SELECT count(*)` took at the end (ms).
    count_ms: f64,
    cpu: CpuShare,
    status: String,
    log: String,
}

/// The steady measurement.
pub struct SteadyRow {
    target: u32,
    seconds: u64,
    per_batch: usize,
    produced: u64,
    visible: u64,
    /// Records acknowledged per second, from the schedule's start to the
    /// last acknowledgement.
    achieved: f64,
    /// Records readable per second, from the schedule's start until the
    /// last batch was seen.
    delivered: f64,
    ack_to_visible: Latency,
    /// p50 of ack → visible in each quarter of the schedule.
    quarter_p50: [f64; 4],
    produce_round_trip: Latency,
    /// Poll answers and their mean round trip (ms).
    polls: usize,
    poll_ms: f64,
    cpu: CpuShare,
    status: String,
    log: String,
}

/// Everything the Kafka benchmark measured.
pub struct KafkaRun {
    broker: String,
    backlog: Vec<BacklogRow>,
    steady: SteadyRow,
}

/// Run the backlog cases, then the steady measurement.
pub async fn run(s: &KafkaSettings<'_>) -> Result<KafkaRun> {
    let mut backlog = Vec::new();
    for case in CASES {
        backlog.push(backlog_case(s, case).await?);
    }
    let steady = steady(s).await?;
    Ok(KafkaRun {
        broker: broker_version(),
        backlog,
        steady,
    })
}

/// `CREATE CONNECTION k` to the broker.
async fn connect_freshet(server: &FreshetServer, broker: &Broker) -> Result<PgClient> {
    let fc = server.connect().await?;
    db::exec(
        &fc,
        &format!(
            "CREATE CONNECTION k TO KAFKA (BROKER '{}')",
            broker.address()
        ),
        "Freshet",
    )
    .await?;
    Ok(fc)
}

/// Produce records `0..n` into the partitions `pcs`: record `id` to
/// partition `id % PARTITIONS`, in id order, [`PRODUCE_BATCH`] per call,
/// the partitions concurrently. The values' total bytes.
async fn produce_backlog(pcs: &[PartitionClient], json: bool, n: u64) -> Result<u64> {
    let parts = PARTITIONS as u64;
    let tasks = pcs.iter().enumerate().map(|(p, pc)| async move {
        let mut bytes = 0u64;
        let mut id = p as u64;
        while id < n {
            let mut records = Vec::with_capacity(PRODUCE_BATCH);
            while id < n && records.len() < PRODUCE_BATCH {
                let r = record(json, id);
                bytes += r.value.as_ref().map_or(0, |v| v.len() as u64);
                records.push(r);
                id += parts;
            }
            kafka(
                pc.produce(records, Compression::NoCompression).await,
                &format!("produce to partition {p}"),
            )?;
        }
        Ok::<_, BenchError>(bytes)
    });
    Ok(futures::future::try_join_all(tasks)
        .await?
        .into_iter()
        .sum())
}

/// What reading a backlog from the bench alone took.
#[derive(Debug, Clone, Copy)]
pub struct ReadAlone {
    secs: f64,
    fetches: usize,
    /// One fetch call's round trip, p50 and max (ms).
    fetch_p50: f64,
    fetch_max: f64,
}

/// Read partitions `pcs` (holding records `0..n` as [`produce_backlog`]
/// wrote them) from offset 0 to their end the way Freshet's fetch tasks
/// do: one fetch call at a time per partition, [`FETCH_WAIT_MS`] and
/// [`FETCH_MAX_BYTES`], the partitions concurrently.
async fn read_alone(pcs: &[PartitionClient], n: u64) -> Result<ReadAlone> {
    let parts = PARTITIONS as u64;
    let started = Instant::now();
    let tasks = pcs.iter().enumerate().map(|(p, pc)| async move {
        let end = n.saturating_sub(p as u64).div_ceil(parts) as i64;
        let (mut next, mut calls) = (0i64, Vec::new());
        while next < end {
            let sent = Instant::now();
            let (records, _high) = kafka(
                pc.fetch_records(next, 1..FETCH_MAX_BYTES, FETCH_WAIT_MS)
                    .await,
                &format!("fetch partition {p} at offset {next}"),
            )?;
            calls.push(sent.elapsed().as_secs_f64() * 1e3);
            match records.iter().map(|r| r.offset).max() {
                Some(last) if last >= next => next = last + 1,
                _ => return failed(format!("partition {p}: no records at offset {next}")),
            }
        }
        Ok::<_, BenchError>(calls)
    });
    let mut calls: Vec<f64> = futures::future::try_join_all(tasks)
        .await?
        .into_iter()
        .flatten()
        .collect();
    let secs = started.elapsed().as_secs_f64();
    let l = latency(&mut calls);
    Ok(ReadAlone {
        secs,
        fetches: calls.len(),
        fetch_p50: l.p50,
        fetch_max: l.max,
    })
}

/// The first column of the first row of `sql`, parsed (`None` for NULL).
async fn first_u64(client: &PgClient, sql: &str) -> Result<Option<u64>> {
    let rows = db::rows(client, sql, "Freshet").await?;
    match rows.first().and_then(|r| r.first()) {
        Some(Some(v)) => match v.parse() {
            Ok(n) => Ok(Some(n)),
            Err(_) => failed(format!("{sql}: {v} is not a number")),
        },
        _ => Ok(None),
    }
}

/// The source's status row: `status | error | records_ingested | progress`.
async fn status(client: &PgClient, source: &str) -> Result<String> {
    let rows = db::rows(
        client,
        &format!(
            "SELECT status, coalesce(error, ''), records_ingested, progress \
             FROM freshet_internal.source_statuses WHERE name = 'freshet.public.{source}'"
        ),
        "Freshet",
    )
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(Option::unwrap_or_default)
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect::<Vec<_>>()
        .join("; "))
}

/// Poll `sum("offset")` of `<source>_progress` every `period` until it is
/// `want` (every record read); fails when the source fails or after
/// `timeout`.
async fn wait_read(
    client: &PgClient,
    server: &FreshetServer,
    source: &str,
    want: u64,
    period: Duration,
    timeout: Duration,
) -> Result<()> {
    let sql = format!("SELECT sum(\"offset\") FROM {source}_progress");
    let deadline = Instant::now() + timeout;
    let mut polls = 0u64;
    loop {
        let read = first_u64(client, &sql).await?.unwrap_or(0);
        if read == want {
            return Ok(());
        }
        if read > want {
            return failed(format!("{sql}: {read}, more than the {want} produced"));
        }
        polls += 1;
        // The status now and then, to stop early on a failed source.
        if polls.is_multiple_of(50) || Instant::now() > deadline {
            let st = status(client, source).await?;
            if st.starts_with("failed") || Instant::now() > deadline {
                return failed(format!(
                    "source {source} read {read} of {want} records (status: {st})\nFreshet log:\n{}",
                    server.log_tail()
                ));
            }
        }
        tokio::time::sleep(period).await;
    }
}

/// One backlog case on a fresh broker and server.
async fn backlog_case(s: &KafkaSettings<'_>, case: Case) -> Result<BacklogRow> {
    let broker = Broker::start().await?;
    let kc = broker.client().await?;
    let pcs = broker.topic(&kc, "t").await?;
    eprintln!("kafka: {}: producing {} records", case.options(), s.records);
    let started = Instant::now();
    let value_bytes = produce_backlog(&pcs, case.json(), s.records).await?;
    let produce_secs = started.elapsed().as_secs_f64();
    let alone = read_alone(&pcs, s.records).await?;
    drop(pcs);
    drop(kc);

    let server = FreshetServer::start(s.bin, s.workers).await?;
    let fc = connect_freshet(&server, &broker).await?;
    let create = format!(
        "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 't') {}",
        case.options()
    );
    eprintln!("kafka: {create}");
    let cpu = CpuSampler::new(&[server.pid(), broker.pid(), std::process::id()]);
    let started = Instant::now();
    db::exec(&fc, &create, "Freshet").await?;
    let create_secs = started.elapsed().as_secs_f64();
    wait_read(&fc, &server, "s", s.records, BACKLOG_POLL, BACKLOG_TIMEOUT).await?;
    let read_secs = started.elapsed().as_secs_f64();
    let cpu = cpu.share();
    let got: Vec<String> = db::rows(&fc, case.check_sql(), "Freshet")
        .await?
        .into_iter()
        .next()
        .unwrap_or_default()
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect();
    let want = case.expected(s.records);
    if got != want {
        return failed(format!(
            "{create}: after reading every record `{}` answered {got:?}, expected {want:?}\n\
             Freshet log:\n{}",
            case.check_sql(),
            server.log_tail()
        ));
    }
    let rows = got.first().and_then(|v| v.parse().ok()).unwrap_or(0);
    // What one poll by count(*) would cost at the end, for comparison.
    let timed = Instant::now();
    first_u64(&fc, "SELECT count(*) FROM s").await?;
    let count_ms = timed.elapsed().as_secs_f64() * 1e3;
    eprintln!(
        "kafka: {}: read in {read_secs:.2} s ({:.0} records/s)",
        case.options(),
        s.records as f64 / read_secs
    );
    Ok(BacklogRow {
        case,
        records: s.records,
        value_bytes,
        produce_secs,
        alone,
        create_secs,
        read_secs,
        rows,
        count_ms,
        cpu,
        status: status(&fc, "s").await?,
        log: server.log_tail(),
    })
}

/// One produce call of the steady measurement.
struct Batch {
    partition: i32,
    /// Offset of its last record.
    last: i64,
    /// Its place in the schedule.
    index: usize,
    sent: Instant,
    acked: Instant,
}

/// What a poll saw: when its answer arrived, and each partition's next
/// offset.
type Observation = (Instant, Vec<(i32, i64)>);

/// What the poller saw.
struct Polled {
    /// The answers that differed from the previous one.
    seen: Vec<Observation>,
    /// Polls made.
    polls: usize,
    /// Their mean round trip, in milliseconds.
    mean_ms: f64,
}

/// Polls `<source>_progress` every [`STEADY_POLL`] on its own thread and
/// runtime (so that producing does not delay its timestamps), keeping the
/// answers that changed.
struct Poller {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<std::result::Result<Polled, String>>,
}

impl Poller {
    fn start(port: u16, source: &str) -> Poller {
        let stop = Arc::new(AtomicBool::new(false));
        let sql = format!("SELECT partition, \"offset\" FROM {source}_progress");
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("poller runtime: {e}"))?;
            runtime.block_on(async move {
                let conn = format!("host=127.0.0.1 port={port} user=freshet dbname=freshet");
                let client = db::connect(&conn, "Freshet")
                    .await
                    .map_err(|e| e.to_string())?;
                let mut seen: Vec<Observation> = Vec::new();
                let (mut polls, mut round_trips) = (0usize, 0f64);
                while !flag.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    let rows = client
                        .simple_query(&sql)
                        .await
                        .map_err(|e| format!("{sql}: {e}"))?;
                    let at = Instant::now();
                    polls += 1;
                    round_trips += (at - sent).as_secs_f64() * 1e3;
                    let mut offsets: Vec<(i32, i64)> = rows
                        .iter()
                        .filter_map(|m| match m {
                            tokio_postgres::SimpleQueryMessage::Row(r) => Some((
                                r.get(0).and_then(|v| v.parse().ok())?,
                                r.get(1).and_then(|v| v.parse().ok())?,
                            )),
                            _ => None,
                        })
                        .collect();
                    offsets.sort_unstable();
                    if seen.last().is_none_or(|(_, last)| *last != offsets) {
                        seen.push((at, offsets));
                    }
                    tokio::time::sleep(STEADY_POLL).await;
                }
                Ok(Polled {
                    seen,
                    polls,
                    mean_ms: round_trips / polls.max(1) as f64,
                })
            })
        });
        Poller { stop, thread }
    }

    /// Stop polling; what it saw.
    fn finish(self) -> Result<Polled> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.join() {
            Ok(Ok(seen)) => Ok(seen),
            Ok(Err(e)) => failed(format!("the progress poller: {e}")),
            Err(_) => failed("the progress poller panicked"),
        }
    }
}

/// A source over an empty topic, then `rate` records per second for
/// `seconds`, one produce call every [`STEADY_TICK`].
async fn steady(s: &KafkaSettings<'_>) -> Result<SteadyRow> {
    let broker = Broker::start().await?;
    let kc = broker.client().await?;
    let pcs = broker.topic(&kc, "live").await?;
    let server = FreshetServer::start(s.bin, s.workers).await?;
    let fc = connect_freshet(&server, &broker).await?;
    db::exec(
        &fc,
        "CREATE SOURCE live FROM KAFKA CONNECTION k (TOPIC 'live') FORMAT JSON",
        "Freshet",
    )
    .await?;
    // Warm-up: one record per partition through the whole path.
    for (p, pc) in pcs.iter().enumerate() {
        kafka(
            pc.produce(vec![record(true, p as u64)], Compression::NoCompression)
                .await,
            "produce a warm-up record",
        )?;
    }
    let warm = PARTITIONS as u64;
    wait_read(
        &fc,
        &server,
        "live",
        warm,
        BACKLOG_POLL,
        Duration::from_secs(60),
    )
    .await?;
    let poller = Poller::start(server.port(), "live");
    tokio::time::sleep(Duration::from_millis(200)).await;

    let per_batch = ((f64::from(s.rate) * STEADY_TICK.as_secs_f64()).round() as usize).max(1);
    let batches = (s.seconds as f64 / STEADY_TICK.as_secs_f64()).round() as usize;
    let total = (per_batch * batches) as u64;
    eprintln!(
        "kafka: steady: {} records/s ({per_batch} per produce call every {STEADY_TICK:?}) for {} s",
        s.rate, s.seconds
    );
    let cpu = CpuSampler::new(&[server.pid(), broker.pid(), std::process::id()]);
    let start = Instant::now() + Duration::from_millis(100);
    let n = pcs.len();
    // Partition p makes calls p, p + n, ... every n ticks, without
    // waiting for the previous call's acknowledgement (open loop: a slow
    // acknowledgement does not slow the schedule down).
    let producers = pcs.iter().enumerate().map(|(p, pc)| async move {
        let first = start + STEADY_TICK * p as u32;
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::from_std(first),
            STEADY_TICK * n as u32,
        );
        tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
        let mut due = (p..batches).step_by(n);
        let mut next = due.next();
        let mut in_flight = FuturesUnordered::new();
        let mut out = Vec::new();
        while next.is_some() || !in_flight.is_empty() {
            tokio::select! {
                _ = tick.tick(), if next.is_some() => {
                    let Some(index) = next else { continue };
                    next = due.next();
                    let first_id = warm + (index * per_batch) as u64;
                    let records = (first_id..first_id + per_batch as u64)
                        .map(|id| record(true, id))
                        .collect();
                    in_flight.push(async move {
                        let sent = Instant::now();
                        let offsets = pc.produce(records, Compression::NoCompression).await;
                        (index, sent, Instant::now(), offsets)
                    });
                }
                Some((index, sent, acked, offsets)) = in_flight.next() => {
                    let offsets = kafka(offsets, &format!("produce to partition {p}"))?;
                    let Some(&last) = offsets.last() else {
                        return failed("a produce call returned no offsets");
                    };
                    out.push(Batch {
                        partition: p as i32,
                        last,
                        index,
                        sent,
                        acked,
                    });
                }
            }
        }
        Ok::<_, BenchError>(out)
    });
    let mut sent: Vec<Batch> = futures::future::try_join_all(producers)
        .await?
        .into_iter()
        .flatten()
        .collect();
    sent.sort_by_key(|b| b.index);
    let last_ack = sent.iter().map(|b| b.acked).max().unwrap_or(start);
    let waited = wait_read(
        &fc,
        &server,
        "live",
        warm + total,
        BACKLOG_POLL,
        STEADY_TIMEOUT,
    )
    .await;
    // Let the poller see the last commit too.
    tokio::time::sleep(STEADY_POLL * 4).await;
    let cpu = cpu.share();
    let polled = poller.finish()?;
    waited?;

    // Per partition: (when, next offset) as the polls saw them.
    let mut by_partition: BTreeMap<i32, Vec<(Instant, i64)>> = BTreeMap::new();
    for (at, offsets) in &polled.seen {
        for &(p, o) in offsets {
            by_partition.entry(p).or_default().push((*at, o));
        }
    }
    let mut lags = Vec::with_capacity(sent.len());
    let mut quarters: [Vec<f64>; 4] = Default::default();
    let mut round_trips = Vec::with_capacity(sent.len());
    let mut last_visible = start;
    for b in &sent {
        let seen_at = by_partition.get(&b.partition).and_then(|obs| {
            let i = obs.partition_point(|(_, next)| *next <= b.last);
            obs.get(i).map(|(at, _)| *at)
        });
        let Some(at) = seen_at else {
            return failed(format!(
                "partition {} offset {} was read but no poll saw it",
                b.partition, b.last
            ));
        };
        let lag = signed_ms(at, b.acked);
        lags.push(lag);
        quarters[(b.index * 4 / batches.max(1)).min(3)].push(lag);
        round_trips.push(signed_ms(b.acked, b.sent));
        last_visible = last_visible.max(at);
    }
    let check = "SELECT count(*), sum((data->>'id')::bigint) FROM live";
    let got: Vec<String> = db::rows(&fc, check, "Freshet")
        .await?
        .into_iter()
        .next()
        .unwrap_or_default()
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect();
    let all = warm + total;
    let want = vec![all.to_string(), (all * (all - 1) / 2).to_string()];
    if got != want {
        return failed(format!(
            "steady: `{check}` answered {got:?}, expected {want:?}\nFreshet log:\n{}",
            server.log_tail()
        ));
    }
    let visible = got
        .first()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        .saturating_sub(warm);
    let row = SteadyRow {
        target: s.rate,
        seconds: s.seconds,
        per_batch,
        produced: total,
        visible,
        achieved: total as f64 / last_ack.duration_since(start).as_secs_f64().max(1e-9),
        delivered: total as f64 / last_visible.duration_since(start).as_secs_f64().max(1e-9),
        ack_to_visible: latency(&mut lags),
        quarter_p50: quarters.map(|mut q| percentile(&mut q, 50.0)),
        produce_round_trip: latency(&mut round_trips),
        polls: polled.polls,
        poll_ms: polled.mean_ms,
        cpu,
        status: status(&fc, "live").await?,
        log: server.log_tail(),
    };
    eprintln!(
        "kafka: steady: ack → visible p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        row.ack_to_visible.p50, row.ack_to_visible.p99, row.ack_to_visible.max
    );
    Ok(row)
}

/// CPU time of Freshet, the broker and the bench.
struct CpuSampler {
    at: Instant,
    pids: [u32; 3],
    ticks: [u64; 3],
}

impl CpuSampler {
    /// Start sampling `[freshet, broker, bench]`.
    fn new(pids: &[u32; 3]) -> CpuSampler {
        CpuSampler {
            at: Instant::now(),
            pids: *pids,
            ticks: pids.map(cpu_ticks),
        }
    }

    /// CPU seconds per wall second since `new`.
    fn share(&self) -> CpuShare {
        let now = self.pids.map(cpu_ticks);
        let wall = self.at.elapsed().as_secs_f64().max(1e-9);
        // USER_HZ is 100 on Linux.
        let per = |i: usize| now[i].saturating_sub(self.ticks[i]) as f64 / 100.0 / wall;
        CpuShare {
            freshet: per(0),
            broker: per(1),
            bench: per(2),
        }
    }
}

/// utime + stime of a process (all its threads), in clock ticks; 0 when
/// /proc cannot be read.
fn cpu_ticks(pid: u32) -> u64 {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // After "pid (comm) ": state ppid ... utime (14th field) stime (15th).
    let Some(rest) = text.rfind(')').map(|i| &text[i + 1..]) else {
        return 0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
    field(11).unwrap_or(0) + field(12).unwrap_or(0)
}

/// Notes for the report's environment.
pub fn notes(run: &KafkaRun) -> Vec<String> {
    vec![
        format!(
            "The broker is {} (`--storage-engine memory://tansu/`), one fresh broker and one \
             fresh Freshet server per case.",
            run.broker
        ),
        "The broker, Freshet and the bench (producer, poller) share the same cores.".into(),
    ]
}

fn cpu_cell(c: &CpuShare) -> String {
    format!("{:.2} / {:.2} / {:.2}", c.freshet, c.broker, c.bench)
}

/// The report section.
pub fn render(run: &KafkaRun, s: &KafkaSettings<'_>) -> String {
    let mut out = format!(
        "## Kafka sources\n\n### Backlog: {} records in {PARTITIONS} partitions before CREATE SOURCE\n\n",
        thousands(s.records as f64)
    );
    out.push_str(
        "| source options | records | mean value bytes | produce (bench → broker) | \
         bench reads the topic alone (fetches; fetch p50 / max ms) | CREATE SOURCE answered | \
         CREATE SOURCE → all read | records/s | value MB/s | rows at the end (one count(*) then) | \
         CPU s/s Freshet / broker / bench |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in &run.backlog {
        out.push_str(&format!(
            "| `{}` | {} | {:.0} | {:.2} s | {:.2} s ({}; {:.0} / {:.0}) | {:.3} s | {:.2} s | {} | {:.1} | {} ({:.0} ms) | {} |\n",
            r.case.options(),
            thousands(r.records as f64),
            r.value_bytes as f64 / r.records.max(1) as f64,
            r.produce_secs,
            r.alone.secs,
            r.alone.fetches,
            r.alone.fetch_p50,
            r.alone.fetch_max,
            r.create_secs,
            r.read_secs,
            thousands(r.records as f64 / r.read_secs.max(1e-9)),
            r.value_bytes as f64 / 1e6 / r.read_secs.max(1e-9),
            thousands(r.rows as f64),
            r.count_ms,
            cpu_cell(&r.cpu)
        ));
    }
    let st = &run.steady;
    out.push_str(&format!(
        "\n### Steady: {} records/s for {} s (`FORMAT JSON`), produce acknowledged → readable\n\n",
        thousands(f64::from(st.target)),
        st.seconds
    ));
    out.push_str(
        "| target records/s | records per produce call | produced / readable | achieved produce records/s | \
         readable records/s | ack → readable p50 / p99 / max (ms) | p50 by quarter of the run (ms) | \
         produce round trip p50 / p99 (ms) | polls (mean round trip) | CPU s/s Freshet / broker / bench |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    out.push_str(&format!(
        "| {} | {} | {} / {} | {:.0} | {:.0} | {:.2} / {:.2} / {:.2} | {} | {:.2} / {:.2} | {} ({:.2} ms) | {} |\n",
        thousands(f64::from(st.target)),
        st.per_batch,
        thousands(st.produced as f64),
        thousands(st.visible as f64),
        st.achieved,
        st.delivered,
        st.ack_to_visible.p50,
        st.ack_to_visible.p99,
        st.ack_to_visible.max,
        st.quarter_p50
            .iter()
            .map(|p| format!("{p:.1}"))
            .collect::<Vec<_>>()
            .join(" / "),
        st.produce_round_trip.p50,
        st.produce_round_trip.p99,
        thousands(st.polls as f64),
        st.poll_ms,
        cpu_cell(&st.cpu)
    ));
    out.push_str("\nSource status at the end of each case (status | error | records_ingested | progress):\n\n");
    let cases = run
        .backlog
        .iter()
        .map(|r| (r.case.options(), &r.status, &r.log))
        .chain(std::iter::once(("steady", &st.status, &st.log)));
    let mut logs = String::new();
    for (name, status, log) in cases {
        out.push_str(&format!("* `{name}`: {status}\n"));
        if !log.trim().is_empty() {
            logs.push_str(&format!(
                "\n`{name}`, the server's log (`warn` and above), last lines:\n\n```\n{}\n```\n",
                log.trim_end()
            ));
        }
    }
    if logs.is_empty() {
        out.push_str("\nNo server logged anything at `warn` or above.\n");
    } else {
        out.push_str(&logs);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_values() {
        assert_eq!(value(false, 7).len(), 100);
        assert_eq!(value(false, 999_999).len(), 100);
        let json = value(true, 123_456);
        assert!((85..=100).contains(&json.len()), "{json}");
        assert!(json.starts_with(r#"{"id":123456,"user":"u456","amount":456.56,"#));
    }

    #[test]
    fn expectations() {
        assert_eq!(Case::Json.expected(4), vec!["4", "6"]);
        // Partitions get 3, 2, 2, 2 of 9 records: offsets 0+1+2, 0+1, ...
        assert_eq!(Case::JsonMetadata.expected(9)[2], "6");
        assert_eq!(upsert_expectation(10), (10, 45));
        // Keys 0..100000, each last seen at id + 100000 for id < 50000.
        let (keys, sum) = upsert_expectation(150_000);
        assert_eq!(keys, UPSERT_KEYS);
        let want: u64 =
            (0..50_000u64).map(|k| k + 100_000).sum::<u64>() + (50_000..100_000).sum::<u64>();
        assert_eq!(sum, want);
    }
}

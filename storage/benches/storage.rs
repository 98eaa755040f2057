//! Storage benchmark for `freshet-storage` (issue 2).
//!
//! Measures the two storage paths every table workload goes through, so that
//! their cost is known before materialized views and indexes are built on top:
//!
//! 1. **Group-commit throughput.** 1, 8 and 64 writer threads each loop
//!    [`Storage::commit_blocking`] with small table writes (1 and 100 rows per
//!    commit) for a fixed time, into one table or spread over two. Reported:
//!    acknowledged commits/s, distinct group commits/s (distinct timestamps
//!    returned), rows/s and commit latency. Every write is new rows, built
//!    by the writer between commits. Every group commit is one fsync of the
//!    transaction log, so the disk's raw `fdatasync` latency (append +
//!    `sync_data` on a file in the same directory) is measured back to back
//!    first and sampled every 50 ms during each case (a shared virtual
//!    disk's latency changes from minute to minute); it bounds group
//!    commits/s.
//! 2. **Snapshot speed** for one table of `FRESHET_BENCH_ROWS` rows
//!    (`id bigint, name text` of 16 chars, `amount double`), loaded in large
//!    commits and flushed into the shard: [`Storage::snapshot`] at the read
//!    timestamp, (a) from the flushed part in memory, (b) right after a
//!    restart, so the part must be decoded from its file, (c) with 10,000
//!    updates and deletes layered on top, so consolidation must cancel rows.
//!    For comparison, (d) and (e) repeat (a) and (b) after background
//!    compaction has merged the shard into one consolidated part (the
//!    snapshot fast path). Every snapshot's row count and `sum(amount)` are
//!    checked against the expected contents.
//!
//! This is a benchmark with a written report, not a timed test: nothing is
//! asserted about timing. Results print as markdown tables; a recorded run
//! lives in `docs/benchmarks.md`.
//!
//! Run from the workspace root:
//!
//! ```text
//! CARGO_TARGET_DIR=/tmp/bench-target cargo bench -p freshet-storage --bench storage
//! ```
//!
//! Environment variables (defaults keep a run under ~3 minutes on 2 cores):
//!
//! - `FRESHET_BENCH_SECONDS` (5): duration of each group-commit case.
//! - `FRESHET_BENCH_WRITERS` (`1,8,64`): writer thread counts.
//! - `FRESHET_BENCH_ROWS` (1000000): rows in the snapshot table.
//! - `FRESHET_BENCH_REPEATS` (5): snapshots (or restarts) per snapshot case.
//! - `FRESHET_BENCH_ORDER` (`shuffled`): insertion order of the snapshot
//!   table's ids, `shuffled` or `sorted`. Consolidation sorts rows, and an
//!   already sorted input makes that sort nearly free, so the default
//!   shuffles (seeded, reproducible).
//! - `FRESHET_BENCH_ONLY` (`all`): `commit` or `snapshot` to run one part.
//! - `FRESHET_BENCH_DIR` (the system temp dir): where data directories and
//!   the fsync probe file are created; point it at the disk of interest.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use arrow::array::{Array, Float64Array, Int64Array, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use freshet_repr::{GlobalId, Timestamp};
use freshet_storage::{
    CollectionKind, ReadPolicy, Storage, StorageConfig, TableWrite, open_local, write_batch,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use tempfile::TempDir;

/// The table of the snapshot benchmark.
const SNAPSHOT_TABLE: GlobalId = GlobalId::User(1);
/// Rows per commit when loading the snapshot table.
const LOAD_CHUNK_ROWS: usize = 100_000;
/// Updates plus deletes layered on the snapshot table in case (c).
const MAX_CHANGES: usize = 10_000;
/// Group-commit cases run for each of these rows-per-commit sizes...
const ROWS_PER_COMMIT: [usize; 2] = [1, 100];
/// ... and each of these table counts.
const TABLE_COUNTS: [usize; 2] = [1, 2];
/// Time budget of the back-to-back fdatasync probe.
const FSYNC_PROBE_TIME: Duration = Duration::from_secs(2);
/// Pause between fdatasync samples taken while a group-commit case runs.
const DISK_SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// Bytes appended per fdatasync in the probe (about one small log record).
const FSYNC_PROBE_BYTES: usize = 1024;

// ---------------------------------------------------------------------------
// Configuration and shared helpers
// ---------------------------------------------------------------------------

/// What to run, from `FRESHET_BENCH_*` environment variables.
#[derive(Debug)]
struct BenchConfig {
    commit_time: Duration,
    writers: Vec<usize>,
    rows: usize,
    repeats: usize,
    shuffled: bool,
    run_commit: bool,
    run_snapshot: bool,
    base_dir: PathBuf,
}

impl BenchConfig {
    fn from_env() -> Self {
        let writers: String = env_or("FRESHET_BENCH_WRITERS", "1,8,64".to_string());
        let order: String = env_or("FRESHET_BENCH_ORDER", "shuffled".to_string());
        let only: String = env_or("FRESHET_BENCH_ONLY", "all".to_string());
        assert!(
            matches!(order.as_str(), "shuffled" | "sorted"),
            "FRESHET_BENCH_ORDER must be shuffled or sorted"
        );
        assert!(
            matches!(only.as_str(), "all" | "commit" | "snapshot"),
            "FRESHET_BENCH_ONLY must be all, commit or snapshot"
        );
        BenchConfig {
            commit_time: Duration::from_secs_f64(env_or("FRESHET_BENCH_SECONDS", 5.0)),
            writers: writers
                .split(',')
                .map(|w| {
                    w.trim()
                        .parse()
                        .expect("FRESHET_BENCH_WRITERS: comma-separated counts")
                })
                .collect(),
            rows: env_or("FRESHET_BENCH_ROWS", 1_000_000usize).max(100),
            repeats: env_or("FRESHET_BENCH_REPEATS", 5usize).max(1),
            shuffled: order == "shuffled",
            run_commit: only != "snapshot",
            run_snapshot: only != "commit",
            base_dir: std::env::var_os("FRESHET_BENCH_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(std::env::temp_dir),
        }
    }
}

/// The value of environment variable `name`, or `default` if it is unset.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a valid value")),
        Err(_) => default,
    }
}

fn temp_dir(cfg: &BenchConfig) -> TempDir {
    std::fs::create_dir_all(&cfg.base_dir).expect("create FRESHET_BENCH_DIR");
    tempfile::tempdir_in(&cfg.base_dir).expect("create temp dir")
}

/// `id bigint, name text, amount double`, all non-null.
fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("amount", DataType::Float64, false),
    ]))
}

/// Append `id`'s 16-character name to `names`.
fn push_name(names: &mut StringBuilder, id: i64) {
    write!(names, "customer-{:07}", id.rem_euclid(10_000_000)).expect("write to a builder");
    names.append_value("");
}

/// A multiple of 0.25, so sums over millions of rows stay exact.
fn amount_of(id: i64) -> f64 {
    id.rem_euclid(1_000) as f64 * 0.25
}

/// Rows for `ids` with amounts raised by `bump`.
fn rows(ids: &[i64], bump: f64) -> RecordBatch {
    let mut names = StringBuilder::with_capacity(ids.len(), ids.len() * 16);
    for &id in ids {
        push_name(&mut names, id);
    }
    let amounts: Vec<f64> = ids.iter().map(|&id| amount_of(id) + bump).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(names.finish()),
            Arc::new(Float64Array::from(amounts)),
        ],
    )
    .expect("rows match the schema")
}

/// A table write of `data` to `id`, every row with multiplicity change `diff`.
fn table_write(id: GlobalId, data: &RecordBatch, diff: i64) -> TableWrite {
    TableWrite {
        staged: Vec::new(),
        id,
        updates: write_batch(data, diff).expect("table write"),
    }
}

/// Open storage on `dir` and register `tables` the way boot does.
fn open_storage(dir: &Path, config: StorageConfig, tables: &[GlobalId]) -> Storage {
    let (blob, fence) = open_local(dir).expect("open data dir");
    let storage = Storage::open(blob, fence, config).expect("open storage");
    for &id in tables {
        storage
            .create_collection(id, schema(), CollectionKind::Table)
            .expect("create table");
    }
    storage.finish_boot().expect("finish boot");
    storage
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx]
}

/// Milliseconds with about three significant digits.
fn fmt_ms(ms: f64) -> String {
    if ms < 1.0 {
        format!("{ms:.3}")
    } else if ms < 10.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.1}")
    }
}

fn sorted_ms(times: &[Duration]) -> Vec<f64> {
    let mut ms: Vec<f64> = times.iter().map(|t| t.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    ms
}

/// `1234567.8` as `1,234,568`.
fn grouped(x: f64) -> String {
    let digits = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

// ---------------------------------------------------------------------------
// Machine facts and raw fdatasync latency
// ---------------------------------------------------------------------------

fn total_memory() -> String {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let kb: f64 = m
                .lines()
                .find(|l| l.starts_with("MemTotal:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some(format!("{:.1} GiB", kb / (1024.0 * 1024.0)))
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The 1, 5 and 15 minute load averages: other work on the machine skews
/// both CPU-bound and fsync-bound numbers.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn print_machine(cfg: &BenchConfig) {
    let cpus = thread::available_parallelism().map_or(0, |n| n.get());
    println!("## Storage benchmark\n");
    println!("- CPUs (available parallelism): {cpus}");
    println!("- memory: {}", total_memory());
    println!("- load average at start: {}", load_average());
    println!("- data directory: {}", cfg.base_dir.display());
    println!(
        "- config: {:?} per commit case, writers {:?}, {} snapshot rows ({}), {} repeats\n",
        cfg.commit_time,
        cfg.writers,
        cfg.rows,
        if cfg.shuffled { "shuffled" } else { "sorted" },
        cfg.repeats
    );
}

/// A file in the benchmark directory for timing raw `fdatasync`: append
/// [`FSYNC_PROBE_BYTES`], then `fdatasync`, the same pattern as one group
/// commit of the transaction log.
struct SyncProbe {
    file: File,
    record: Vec<u8>,
    _dir: TempDir,
}

impl SyncProbe {
    fn new(cfg: &BenchConfig) -> Self {
        let dir = temp_dir(cfg);
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(dir.path().join("fsync-probe.log"))
            .expect("create fsync probe file");
        SyncProbe {
            file,
            record: vec![0xA5u8; FSYNC_PROBE_BYTES],
            _dir: dir,
        }
    }

    fn sample(&mut self) -> Duration {
        let t = Instant::now();
        self.file.write_all(&self.record).expect("probe write");
        self.file.sync_data().expect("probe fdatasync");
        t.elapsed()
    }
}

/// Back-to-back fdatasync latencies (ms, sorted) for about `budget`.
fn measure_fdatasync(cfg: &BenchConfig, budget: Duration) -> Vec<f64> {
    let mut probe = SyncProbe::new(cfg);
    let start = Instant::now();
    let mut samples = Vec::new();
    while (start.elapsed() < budget || samples.len() < 20) && samples.len() < 20_000 {
        samples.push(probe.sample());
    }
    sorted_ms(&samples)
}

/// fdatasync latencies (ms, sorted) sampled every [`DISK_SAMPLE_EVERY`]
/// until `stop`: the disk's state while a case runs, at a rate too low to
/// compete with the transaction log.
fn sample_fdatasync_until(cfg: &BenchConfig, stop: &AtomicBool) -> Vec<f64> {
    let mut probe = SyncProbe::new(cfg);
    let mut samples = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        samples.push(probe.sample());
        thread::sleep(DISK_SAMPLE_EVERY);
    }
    sorted_ms(&samples)
}

fn print_fdatasync(ms: &[f64]) {
    let mean = ms.iter().sum::<f64>() / ms.len() as f64;
    println!("### Raw fdatasync latency (append 1 KiB + fdatasync, back to back)\n");
    println!("| samples | p10 ms | p50 ms | p90 ms | p99 ms | mean ms | fdatasyncs/s (1/mean) |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {} | {} | {} | {} | {} | {} | {} |\n",
        ms.len(),
        fmt_ms(percentile(ms, 0.1)),
        fmt_ms(percentile(ms, 0.5)),
        fmt_ms(percentile(ms, 0.9)),
        fmt_ms(percentile(ms, 0.99)),
        fmt_ms(mean),
        grouped(1e3 / mean)
    );
}

// ---------------------------------------------------------------------------
// 1. Group-commit throughput
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
struct CommitCase {
    writers: usize,
    tables: usize,
    rows_per_commit: usize,
}

/// What one writer thread saw.
#[derive(Default)]
struct WriterLog {
    timestamps: Vec<Timestamp>,
    latencies: Vec<Duration>,
}

struct CommitResult {
    case: CommitCase,
    elapsed: Duration,
    commits: usize,
    groups: usize,
    latency_ms: Vec<f64>,
    /// Raw fdatasync p50 sampled during the case (the disk's speed varies).
    disk_p50_ms: f64,
}

fn commit_cases(cfg: &BenchConfig) -> Vec<CommitCase> {
    let mut cases = Vec::new();
    for tables in TABLE_COUNTS {
        for rows_per_commit in ROWS_PER_COMMIT {
            for &writers in &cfg.writers {
                cases.push(CommitCase {
                    writers,
                    tables,
                    rows_per_commit,
                });
            }
        }
    }
    cases
}

/// Writer `writer`'s `k`-th commit: `rows_per_commit` new rows (ids never
/// repeat, as with real inserts, so flushes and compaction see distinct
/// rows), into the tables in turn.
fn next_write(tables: &[GlobalId], writer: usize, k: usize, rows_per_commit: usize) -> TableWrite {
    let first = ((writer as i64) << 40) + (k * rows_per_commit) as i64;
    let ids: Vec<i64> = (first..first + rows_per_commit as i64).collect();
    table_write(tables[(writer + k) % tables.len()], &rows(&ids, 0.0), 1)
}

/// Commit until `stop`. Building each write is the client's work: it counts
/// in throughput but not in commit latency.
fn write_until(
    storage: &Storage,
    tables: &[GlobalId],
    writer: usize,
    rows_per_commit: usize,
    stop: &AtomicBool,
) -> WriterLog {
    let mut log = WriterLog::default();
    let mut k = 0;
    while !stop.load(Ordering::Relaxed) {
        let write = next_write(tables, writer, k, rows_per_commit);
        k += 1;
        let t = Instant::now();
        let ts = storage.commit_blocking(vec![write]).expect("commit");
        log.latencies.push(t.elapsed());
        log.timestamps.push(ts);
    }
    log
}

fn run_commit_case(cfg: &BenchConfig, case: CommitCase) -> CommitResult {
    let dir = temp_dir(cfg);
    let tables: Vec<GlobalId> = (1..=case.tables as u64).map(GlobalId::User).collect();
    let storage = open_storage(dir.path(), StorageConfig::new(dir.path()), &tables);
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(case.writers + 1);
    let (elapsed, logs, disk) = thread::scope(|scope| {
        let writers: Vec<_> = (0..case.writers)
            .map(|w| {
                let (storage, tables, stop, barrier) = (&storage, &tables, &stop, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    write_until(storage, tables, w, case.rows_per_commit, stop)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let disk = scope.spawn(|| sample_fdatasync_until(cfg, &stop));
        thread::sleep(cfg.commit_time);
        stop.store(true, Ordering::Relaxed);
        let logs: Vec<WriterLog> = writers
            .into_iter()
            .map(|h| h.join().expect("writer thread panicked"))
            .collect();
        let elapsed = start.elapsed();
        (elapsed, logs, disk.join().expect("disk sampler panicked"))
    });
    summarize_commits(case, elapsed, logs, percentile(&disk, 0.5))
}

fn summarize_commits(
    case: CommitCase,
    elapsed: Duration,
    logs: Vec<WriterLog>,
    disk_p50_ms: f64,
) -> CommitResult {
    let mut timestamps: Vec<Timestamp> = logs
        .iter()
        .flat_map(|l| l.timestamps.iter().copied())
        .collect();
    let latencies: Vec<Duration> = logs
        .iter()
        .flat_map(|l| l.latencies.iter().copied())
        .collect();
    let commits = timestamps.len();
    timestamps.sort_unstable();
    timestamps.dedup();
    CommitResult {
        case,
        elapsed,
        commits,
        groups: timestamps.len(),
        latency_ms: sorted_ms(&latencies),
        disk_p50_ms,
    }
}

fn print_commit_header() {
    println!("### Group commit throughput\n");
    println!(
        "| writers | tables | rows/commit | commits/s | group commits/s | commits/group | rows/s | p50 latency ms | p99 latency ms | disk fdatasync p50 ms (during case) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
}

fn print_commit_row(r: &CommitResult) {
    let secs = r.elapsed.as_secs_f64();
    println!(
        "| {} | {} | {} | {} | {} | {:.1} | {} | {} | {} | {} |",
        r.case.writers,
        r.case.tables,
        r.case.rows_per_commit,
        grouped(r.commits as f64 / secs),
        grouped(r.groups as f64 / secs),
        r.commits as f64 / r.groups.max(1) as f64,
        grouped((r.commits * r.case.rows_per_commit) as f64 / secs),
        fmt_ms(percentile(&r.latency_ms, 0.5)),
        fmt_ms(percentile(&r.latency_ms, 0.99)),
        fmt_ms(r.disk_p50_ms),
    );
}

// ---------------------------------------------------------------------------
// 2. Snapshot speed
// ---------------------------------------------------------------------------

/// What a snapshot returned: enough to check it against the expected
/// contents without comparing every row.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Contents {
    rows: usize,
    amount_sum: f64,
}

fn contents_of(batches: &[RecordBatch]) -> Contents {
    let mut c = Contents {
        rows: 0,
        amount_sum: 0.0,
    };
    for b in batches {
        let amounts = b
            .column(2)
            .as_any()
            .downcast_ref::<Float64Array>()
            .expect("amount is a double");
        c.rows += b.num_rows();
        c.amount_sum += amounts.values().iter().sum::<f64>();
    }
    c
}

fn loaded_contents(rows: usize) -> Contents {
    Contents {
        rows,
        amount_sum: (0..rows as i64).map(amount_of).sum(),
    }
}

/// One snapshot case: timings of repeated snapshots and what they returned.
struct SnapshotResult {
    label: String,
    parts: usize,
    expected: Contents,
    returned: Vec<Contents>,
    times: Vec<Duration>,
}

/// Time one snapshot at the current read timestamp, under a read hold.
fn snapshot_once(storage: &Storage) -> (Duration, Contents) {
    let ts = storage.read_ts();
    let _hold = storage
        .acquire_read_hold(SNAPSHOT_TABLE, ts)
        .expect("hold at read_ts");
    let t = Instant::now();
    let batches = storage.snapshot(SNAPSHOT_TABLE, ts).expect("snapshot");
    let took = t.elapsed();
    (took, contents_of(&batches))
}

fn part_count(storage: &Storage) -> usize {
    storage
        .collections()
        .iter()
        .find(|c| c.id == SNAPSHOT_TABLE)
        .map_or(0, |c| c.parts)
}

fn time_snapshots(
    storage: &Storage,
    label: String,
    repeats: usize,
    expected: Contents,
) -> SnapshotResult {
    let (times, returned) = (0..repeats).map(|_| snapshot_once(storage)).unzip();
    SnapshotResult {
        label,
        parts: part_count(storage),
        expected,
        returned,
        times,
    }
}

/// Storage whose table writes reach the shard only on `flush_blocking`, so
/// the part layout is exactly what the benchmark asks for.
fn manual_flush_config(dir: &Path) -> StorageConfig {
    let mut c = StorageConfig::new(dir);
    c.flush_interval = Duration::from_secs(24 * 3600);
    c.flush_bytes = usize::MAX;
    c
}

/// Ids `0..rows`, in a seeded random order if `shuffled`.
fn load_ids(rows_total: usize, shuffled: bool) -> Vec<i64> {
    let mut ids: Vec<i64> = (0..rows_total as i64).collect();
    if shuffled {
        ids.shuffle(&mut StdRng::seed_from_u64(2));
    }
    ids
}

/// Commit rows `0..rows` in commits of `chunk` rows (flushing after each if
/// `flush_each`); returns the time spent committing and flushing.
fn load(cfg: &BenchConfig, storage: &Storage, chunk: usize, flush_each: bool) -> Duration {
    let batches: Vec<RecordBatch> = load_ids(cfg.rows, cfg.shuffled)
        .chunks(chunk)
        .map(|ids| rows(ids, 0.0))
        .collect();
    let t = Instant::now();
    for b in &batches {
        storage
            .commit_blocking(vec![table_write(SNAPSHOT_TABLE, b, 1)])
            .expect("load commit");
        if flush_each {
            storage.flush_blocking().expect("flush");
        }
    }
    t.elapsed()
}

/// Case (c): in one commit, update the amount of up to 5,000 rows spread
/// over the table and delete as many others. Returns the expected contents
/// afterwards and the number of rows changed.
fn layer_changes(storage: &Storage, rows_total: usize, before: Contents) -> (Contents, usize) {
    let changes = (rows_total / 100).clamp(2, MAX_CHANGES) & !1;
    let stride = (rows_total / changes) as i64;
    let ids: Vec<i64> = (0..changes as i64).map(|i| i * stride).collect();
    let (updated, deleted) = ids.split_at(changes / 2);
    storage
        .commit_blocking(vec![
            table_write(SNAPSHOT_TABLE, &rows(&ids, 0.0), -1),
            table_write(SNAPSHOT_TABLE, &rows(updated, 1.0), 1),
        ])
        .expect("commit changes");
    storage.flush_blocking().expect("flush changes");
    let after = Contents {
        rows: before.rows - deleted.len(),
        amount_sum: before.amount_sum - deleted.iter().copied().map(amount_of).sum::<f64>()
            + updated.len() as f64,
    };
    (after, changes)
}

/// Setup timings reported next to the snapshot table.
#[derive(Default)]
struct SetupTimes {
    load: Duration,
    flush: Duration,
    reopen: Vec<Duration>,
    compacted_parts: usize,
    compacted_load: Duration,
    compaction_wait: Duration,
}

/// Reopen the data directory `repeats` times and time the first snapshot
/// after each restart (nothing decoded yet). Returns the last storage.
fn snapshots_after_restart(
    mut storage: Storage,
    dir: &Path,
    config: &dyn Fn() -> StorageConfig,
    label: String,
    repeats: usize,
    expected: Contents,
    reopen_times: &mut Vec<Duration>,
) -> (Storage, SnapshotResult) {
    let mut result = SnapshotResult {
        label,
        parts: 0,
        expected,
        returned: vec![],
        times: vec![],
    };
    for _ in 0..repeats {
        drop(storage);
        let t = Instant::now();
        storage = open_storage(dir, config(), &[SNAPSHOT_TABLE]);
        reopen_times.push(t.elapsed());
        let (took, got) = snapshot_once(&storage);
        result.times.push(took);
        result.returned.push(got);
    }
    result.parts = part_count(&storage);
    (storage, result)
}

/// Cases (a), (b) and (c) on one data directory.
fn run_flushed_cases(cfg: &BenchConfig, setup: &mut SetupTimes) -> Vec<SnapshotResult> {
    let dir = temp_dir(cfg);
    let config = || manual_flush_config(dir.path());
    let storage = open_storage(dir.path(), config(), &[SNAPSHOT_TABLE]);
    setup.load = load(cfg, &storage, LOAD_CHUNK_ROWS, false);
    let t = Instant::now();
    storage.flush_blocking().expect("flush");
    setup.flush = t.elapsed();
    let loaded = loaded_contents(cfg.rows);

    let a = time_snapshots(
        &storage,
        "(a) flushed part, in memory".into(),
        cfg.repeats,
        loaded,
    );
    let (storage, b) = snapshots_after_restart(
        storage,
        dir.path(),
        &config,
        "(b) first snapshot after restart".into(),
        cfg.repeats,
        loaded,
        &mut setup.reopen,
    );
    let (changed, n) = layer_changes(&storage, cfg.rows, loaded);
    let label = format!(
        "(c) + {} updates and {} deletes",
        grouped((n / 2) as f64),
        grouped((n / 2) as f64)
    );
    let c = time_snapshots(&storage, label, cfg.repeats, changed);
    vec![a, b, c]
}

/// Wait until background compaction has merged the table into one part.
fn wait_for_one_part(storage: &Storage) -> Duration {
    let t = Instant::now();
    while part_count(storage) > 1 {
        assert!(
            t.elapsed() < Duration::from_secs(300),
            "compaction never ran"
        );
        thread::sleep(Duration::from_millis(5));
    }
    t.elapsed()
}

/// Cases (d) and (e): the same rows, loaded as `max_parts + 1` flushed parts
/// so background compaction merges them into one consolidated part.
fn run_compacted_cases(cfg: &BenchConfig, setup: &mut SetupTimes) -> Vec<SnapshotResult> {
    let dir = temp_dir(cfg);
    let config = || {
        let mut c = manual_flush_config(dir.path());
        c.tick = Duration::from_millis(50);
        c
    };
    let storage = open_storage(dir.path(), config(), &[SNAPSHOT_TABLE]);
    // With no lag, the since passes every loaded time, so compaction can
    // produce snapshot form (one row per distinct row, every time at since).
    storage
        .set_read_policy(SNAPSHOT_TABLE, ReadPolicy::LagBehindUpper(0))
        .expect("read policy");
    setup.compacted_parts = config().max_parts + 1;
    let chunk = cfg.rows.div_ceil(setup.compacted_parts);
    setup.compacted_load = load(cfg, &storage, chunk, true);
    setup.compaction_wait = wait_for_one_part(&storage);
    storage
        .set_read_policy(SNAPSHOT_TABLE, ReadPolicy::default())
        .expect("read policy");
    let loaded = loaded_contents(cfg.rows);
    let d = time_snapshots(
        &storage,
        "(d) compacted part, in memory".into(),
        cfg.repeats,
        loaded,
    );
    let mut reopen = Vec::new();
    let (_storage, e) = snapshots_after_restart(
        storage,
        dir.path(),
        &config,
        "(e) compacted, first snapshot after restart".into(),
        cfg.repeats,
        loaded,
        &mut reopen,
    );
    vec![d, e]
}

fn print_snapshot_table(results: &[SnapshotResult]) {
    println!("### Snapshot into Arrow\n");
    println!(
        "| case | parts | rows returned | expected rows | contents check | median ms | min ms | max ms | rows/s (median) |"
    );
    println!("|---|---:|---:|---:|---|---:|---:|---:|---:|");
    for r in results {
        let ms = sorted_ms(&r.times);
        let median = percentile(&ms, 0.5);
        let ok = r.returned.iter().all(|c| *c == r.expected);
        let rows = r.returned.first().map_or(0, |c| c.rows);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.label,
            r.parts,
            grouped(rows as f64),
            grouped(r.expected.rows as f64),
            if ok { "ok" } else { "MISMATCH" },
            fmt_ms(median),
            fmt_ms(ms[0]),
            fmt_ms(ms[ms.len() - 1]),
            grouped(rows as f64 / (median / 1e3)),
        );
    }
    println!();
}

fn print_setup(cfg: &BenchConfig, setup: &SetupTimes) {
    let secs = |d: Duration| d.as_secs_f64();
    let reopen = sorted_ms(&setup.reopen);
    println!("### Snapshot setup\n");
    println!("| step | time | rate |");
    println!("|---|---:|---:|");
    println!(
        "| load {} rows in commits of {} | {:.2} s | {} rows/s |",
        grouped(cfg.rows as f64),
        grouped(LOAD_CHUNK_ROWS as f64),
        secs(setup.load),
        grouped(cfg.rows as f64 / secs(setup.load))
    );
    println!(
        "| flush them into one part | {:.2} s | {} rows/s |",
        secs(setup.flush),
        grouped(cfg.rows as f64 / secs(setup.flush))
    );
    println!(
        "| reopen storage (open, register, finish_boot), median | {} ms | |",
        fmt_ms(percentile(&reopen, 0.5))
    );
    println!(
        "| load as {} flushed parts (for (d), (e)) | {:.2} s | {} rows/s |",
        setup.compacted_parts,
        secs(setup.compacted_load),
        grouped(cfg.rows as f64 / secs(setup.compacted_load))
    );
    println!(
        "| wait for background compaction to one part | {:.2} s | |\n",
        secs(setup.compaction_wait)
    );
}

fn main() {
    let started = Instant::now();
    let cfg = BenchConfig::from_env();
    print_machine(&cfg);
    print_fdatasync(&measure_fdatasync(&cfg, FSYNC_PROBE_TIME));

    if cfg.run_commit {
        print_commit_header();
        for case in commit_cases(&cfg) {
            print_commit_row(&run_commit_case(&cfg, case));
        }
        println!();
    }
    if cfg.run_snapshot {
        let mut setup = SetupTimes::default();
        let mut results = run_flushed_cases(&cfg, &mut setup);
        results.extend(run_compacted_cases(&cfg, &mut setup));
        print_snapshot_table(&results);
        print_setup(&cfg, &setup);
    }
    println!("Load average at end: {}", load_average());
    println!(
        "Total benchmark time: {:.0} s",
        started.elapsed().as_secs_f64()
    );
}

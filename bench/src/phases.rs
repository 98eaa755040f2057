//! The measurements, each a function over a pair of sessions on one server.
//! They are the same for both systems wherever the systems can do the same
//! thing; `run.rs` decides which ones each system gets.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use tokio_postgres::Client;

use crate::db;
use crate::error::{Result, failed};
use crate::stats::{Summary, median, summarize};
use crate::workload::{CREATE_TABLES, ChangeKind, Dataset, Model, Stats, VIEW_QUERY, parse_stats};

/// How many times full recomputations (REFRESH, the ad-hoc view query) are
/// repeated; the median is reported.
const REPEATS: usize = 3;

/// Two sessions on one server: writes go through `writer`, visibility is
/// checked through `reader`, as a dashboard reading what an application
/// wrote would. Freshet's strict serializability covers reads from any
/// session, so a second session is the honest test of it.
pub struct Target {
    pub system: &'static str,
    pub writer: Client,
    pub reader: Client,
}

/// What `region_stats` is on the server under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewKind {
    /// `CREATE MATERIALIZED VIEW`: the thing being benchmarked.
    Materialized,
    /// `CREATE VIEW`: exercises the harness on a Freshet without
    /// materialized views; every read recomputes the join.
    Plain,
}

impl ViewKind {
    /// The statement that creates this kind of view.
    pub fn create_sql(self) -> &'static str {
        match self {
            ViewKind::Materialized => "CREATE MATERIALIZED VIEW",
            ViewKind::Plain => "CREATE VIEW",
        }
    }
}

/// COPY times of the initial data.
#[derive(Clone, Copy, Debug)]
pub struct LoadTimes {
    pub customers: Duration,
    pub orders: Duration,
    pub order_rows: usize,
}

/// Commit latency of single-row writes of one kind.
#[derive(Clone, Copy, Debug)]
pub struct WriteLatency {
    pub kind: ChangeKind,
    pub latency: Summary,
}

/// Freshness of single-row writes of one kind through the view.
#[derive(Clone, Copy, Debug)]
pub struct Freshness {
    pub kind: ChangeKind,
    /// Write sent → write acknowledged.
    pub commit: Summary,
    /// Write acknowledged → a SELECT on the view returned the new value.
    pub ack_to_visible: Summary,
    /// Write sent → a SELECT on the view returned the new value.
    pub start_to_visible: Summary,
    /// Changes whose first SELECT already returned the new value.
    pub first_read_hits: usize,
    /// The most SELECTs one change needed.
    pub max_reads: u32,
}

/// A bulk operation of the throughput measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchOp {
    /// `COPY orders FROM STDIN` of new orders.
    Insert,
    /// `DELETE ... WHERE id BETWEEN` of the orders one insert batch added.
    Delete,
}

impl BatchOp {
    pub fn name(self) -> &'static str {
        match self {
            BatchOp::Insert => "insert (COPY)",
            BatchOp::Delete => "delete (id range)",
        }
    }
}

/// Sustained maintenance throughput of one bulk operation.
#[derive(Clone, Copy, Debug)]
pub struct Throughput {
    pub op: BatchOp,
    pub batches: usize,
    pub rows: usize,
    /// Median time to acknowledge one batch.
    pub commit_median: Duration,
    /// Median time from sending one batch to seeing it in the view.
    pub visible_median: Duration,
    /// Sum over batches of send → visible.
    pub total: Duration,
}

impl Throughput {
    /// Rows reflected in the view per second of send → visible time.
    pub fn rows_per_sec(&self) -> f64 {
        self.rows as f64 / self.total.as_secs_f64()
    }
}

/// Create both tables and COPY the initial data in, timing each COPY.
pub async fn load(t: &Target, data: &Dataset, order_rows: usize) -> Result<LoadTimes> {
    for sql in CREATE_TABLES {
        db::exec(&t.writer, sql, t.system).await?;
    }
    let start = Instant::now();
    let customers = data.customers_copy.clone();
    let n = crate::workload::CUSTOMERS as usize;
    db::copy_in(
        &t.writer,
        "COPY customers FROM STDIN",
        customers,
        n,
        t.system,
    )
    .await?;
    let customers = start.elapsed();
    let start = Instant::now();
    let orders = data.orders_copy.clone();
    db::copy_in(
        &t.writer,
        "COPY orders FROM STDIN",
        orders,
        order_rows,
        t.system,
    )
    .await?;
    Ok(LoadTimes {
        customers,
        orders: start.elapsed(),
        order_rows,
    })
}

/// Send one single-row write and check that it changed exactly one row.
async fn write_one(t: &Target, sql: &str) -> Result<()> {
    let n = db::exec(&t.writer, sql, t.system).await?;
    if n != 1 {
        return failed(format!(
            "{}: `{sql}` changed {n} rows, expected 1",
            t.system
        ));
    }
    Ok(())
}

/// Commit latency of `k` single-row writes of each kind, with no view
/// defined: the baseline the freshness numbers are compared with.
pub async fn single_row_writes(
    t: &Target,
    model: &mut Model,
    rng: &mut StdRng,
    k: usize,
) -> Result<Vec<WriteLatency>> {
    let mut out = vec![];
    for kind in ChangeKind::ALL {
        let mut samples = Vec::with_capacity(k);
        for _ in 0..k {
            let change = model.change(kind, rng)?;
            let start = Instant::now();
            write_one(t, &change.sql).await?;
            samples.push(start.elapsed());
        }
        if let Some(latency) = summarize(&samples) {
            out.push(WriteLatency { kind, latency });
        }
    }
    Ok(out)
}

/// The view's query run directly, median of [`REPEATS`]: what answering
/// the question costs without a materialized view. Checks the result.
pub async fn adhoc_query(t: &Target, model: &Model) -> Result<Duration> {
    let mut samples = vec![];
    for _ in 0..REPEATS {
        let start = Instant::now();
        let rows = db::rows(&t.reader, VIEW_QUERY, t.system).await?;
        samples.push(start.elapsed());
        check_stats(
            t.system,
            "the view's query",
            &parse_stats(&rows)?,
            &model.stats(),
        )?;
    }
    Ok(median(&samples).unwrap_or_default())
}

/// Create `region_stats`; the time includes computing its initial contents.
/// Freshet's CREATE returns once the dataflow is installed, so the time
/// runs until a first read returns (a read waits for the view to be
/// complete at its timestamp, i.e. for hydration).
pub async fn create_view(t: &Target, kind: ViewKind) -> Result<Duration> {
    let sql = format!("{} region_stats AS {VIEW_QUERY}", kind.create_sql());
    let start = Instant::now();
    db::exec(&t.writer, &sql, t.system).await?;
    db::rows(&t.reader, "SELECT count(*) FROM region_stats", t.system).await?;
    Ok(start.elapsed())
}

/// `REFRESH MATERIALIZED VIEW`, median of [`REPEATS`]; checks the result.
pub async fn refresh(t: &Target, model: &Model) -> Result<Duration> {
    let mut samples = vec![];
    for _ in 0..REPEATS {
        let start = Instant::now();
        db::exec(
            &t.writer,
            "REFRESH MATERIALIZED VIEW region_stats",
            t.system,
        )
        .await?;
        samples.push(start.elapsed());
    }
    let rows = db::rows(
        &t.reader,
        "SELECT region, orders, revenue FROM region_stats",
        t.system,
    )
    .await?;
    check_stats(
        t.system,
        "region_stats after REFRESH",
        &parse_stats(&rows)?,
        &model.stats(),
    )?;
    Ok(median(&samples).unwrap_or_default())
}

/// Fail unless the server's view contents equal the model's.
fn check_stats(system: &str, what: &str, got: &Stats, expected: &Stats) -> Result<()> {
    if got == expected {
        return Ok(());
    }
    failed(format!(
        "{system}: {what} returned {got:?}, expected {expected:?}"
    ))
}

/// Read the view (one region, or all of it) through fresh SELECTs until it
/// equals `expected`; returns how many SELECTs that took. Polls without
/// sleeping: each SELECT is a round trip, and on Freshet a read after an
/// acknowledged write already waits for the view to catch up.
pub async fn wait_visible(
    t: &Target,
    region: Option<i32>,
    expected: &Stats,
    deadline: Instant,
) -> Result<u32> {
    let sql = match region {
        Some(r) => format!("SELECT region, orders, revenue FROM region_stats WHERE region = {r}"),
        None => "SELECT region, orders, revenue FROM region_stats".to_string(),
    };
    let mut reads = 0;
    loop {
        reads += 1;
        let got = parse_stats(&db::rows(&t.reader, &sql, t.system).await?)?;
        if &got == expected {
            return Ok(reads);
        }
        if Instant::now() > deadline {
            return failed(format!(
                "{}: region_stats still returned {got:?} after {reads} reads, expected {expected:?}",
                t.system
            ));
        }
    }
}

/// Freshness of `k` single-row writes of each kind through the view.
pub async fn freshness(
    t: &Target,
    model: &mut Model,
    rng: &mut StdRng,
    k: usize,
    timeout: Duration,
) -> Result<Vec<Freshness>> {
    let mut out = vec![];
    for kind in ChangeKind::ALL {
        eprintln!(
            "  {}: freshness of {k} single-row {}s",
            t.system,
            kind.name()
        );
        if let Some(f) = freshness_of_kind(t, model, rng, kind, k, timeout).await? {
            out.push(f);
        }
    }
    Ok(out)
}

async fn freshness_of_kind(
    t: &Target,
    model: &mut Model,
    rng: &mut StdRng,
    kind: ChangeKind,
    k: usize,
    timeout: Duration,
) -> Result<Option<Freshness>> {
    let (mut commit, mut ack_to_visible, mut start_to_visible) = (vec![], vec![], vec![]);
    let (mut first_read_hits, mut max_reads) = (0, 0);
    for _ in 0..k {
        let change = model.change(kind, rng)?;
        let expected = model.region_stats(change.region);
        let start = Instant::now();
        write_one(t, &change.sql).await?;
        let ack = Instant::now();
        let reads = wait_visible(t, Some(change.region), &expected, start + timeout).await?;
        let visible = Instant::now();
        commit.push(ack - start);
        ack_to_visible.push(visible - ack);
        start_to_visible.push(visible - start);
        first_read_hits += usize::from(reads == 1);
        max_reads = max_reads.max(reads);
    }
    let (Some(commit), Some(ack_to_visible), Some(start_to_visible)) = (
        summarize(&commit),
        summarize(&ack_to_visible),
        summarize(&start_to_visible),
    ) else {
        return Ok(None);
    };
    Ok(Some(Freshness {
        kind,
        commit,
        ack_to_visible,
        start_to_visible,
        first_read_hits,
        max_reads,
    }))
}

/// `batches` COPYs of `batch` new orders, then one id-range DELETE per
/// inserted batch, each timed from sending it until the whole view shows
/// it.
pub async fn throughput(
    t: &Target,
    model: &mut Model,
    rng: &mut StdRng,
    batch: usize,
    batches: usize,
    timeout: Duration,
) -> Result<Vec<Throughput>> {
    eprintln!("  {}: {batches} insert batches of {batch} rows", t.system);
    let (mut inserts, mut ranges) = (vec![], vec![]);
    for _ in 0..batches {
        let (copy, ids) = model.insert_batch(rng, batch);
        let expected = model.stats();
        let start = Instant::now();
        db::copy_in(&t.writer, "COPY orders FROM STDIN", copy, batch, t.system).await?;
        let ack = start.elapsed();
        wait_visible(t, None, &expected, start + timeout).await?;
        inserts.push((ack, start.elapsed(), batch));
        ranges.push(ids);
    }
    eprintln!("  {}: {batches} id-range deletes of {batch} rows", t.system);
    let mut deletes = vec![];
    for ids in ranges {
        let (sql, rows) = model.delete_range(ids);
        let expected = model.stats();
        let start = Instant::now();
        let n = db::exec(&t.writer, &sql, t.system).await?;
        if n != rows as u64 {
            return failed(format!(
                "{}: `{sql}` deleted {n} rows, expected {rows}",
                t.system
            ));
        }
        let ack = start.elapsed();
        wait_visible(t, None, &expected, start + timeout).await?;
        deletes.push((ack, start.elapsed(), rows));
    }
    Ok([(BatchOp::Insert, inserts), (BatchOp::Delete, deletes)]
        .into_iter()
        .filter_map(|(op, samples)| summarize_batches(op, &samples))
        .collect())
}

/// Fold `(ack, visible, rows)` per batch into a [`Throughput`].
fn summarize_batches(op: BatchOp, samples: &[(Duration, Duration, usize)]) -> Option<Throughput> {
    let acks: Vec<_> = samples.iter().map(|s| s.0).collect();
    let visible: Vec<_> = samples.iter().map(|s| s.1).collect();
    Some(Throughput {
        op,
        batches: samples.len(),
        rows: samples.iter().map(|s| s.2).sum(),
        commit_median: median(&acks)?,
        visible_median: median(&visible)?,
        total: visible.iter().sum(),
    })
}

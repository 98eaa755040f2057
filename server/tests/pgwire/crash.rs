//! The crash harness: writers, materialized views, indexes and DDL under
//! `kill -9` at random points, checked after every restart; and a second
//! server taking over a busy data directory.
//!
//! `FRESHET_CRASH_CYCLES` sets how many kill/restart cycles run (4 by
//! default, which CI runs; docs/operations.md describes longer runs).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::Rng;
use tokio_postgres::Client;

use crate::harness::*;

const SETUP: &str = "
    CREATE TABLE events (id bigint, writer int, k int, v int);
    CREATE TABLE dims (k int, name text);
    INSERT INTO dims SELECT g, 'd' || (g % 3) FROM generate_series(0, 9) AS s(g);
    CREATE MATERIALIZED VIEW per_k AS SELECT k, count(*) AS n, sum(v) AS total FROM events GROUP BY k;
    CREATE MATERIALIZED VIEW per_name AS
      SELECT d.name, count(*) AS n, max(e.v) AS top FROM events e JOIN dims d ON e.k = d.k GROUP BY d.name;
    CREATE VIEW latest AS SELECT k, max(id) AS last_id FROM events GROUP BY k;
    CREATE INDEX latest_k ON latest (k);
    CREATE INDEX events_k ON events (k);
";

/// Pairs of (maintained relation, its definition) every check compares.
const CHECKS: &[(&str, &str)] = &[
    (
        "SELECT k, n, total FROM per_k",
        "SELECT k, count(*), sum(v) FROM events GROUP BY k",
    ),
    (
        "SELECT name, n, top FROM per_name",
        "SELECT d.name, count(*), max(e.v) FROM events e JOIN dims d ON e.k = d.k GROUP BY d.name",
    ),
    (
        "SELECT k, last_id FROM latest",
        "SELECT k, max(id) FROM events GROUP BY k",
    ),
    (
        "SELECT id, v FROM events WHERE k = 3",
        "SELECT id, v FROM (SELECT * FROM events) e WHERE k + 0 = 3",
    ),
];

async fn sorted(c: &Client, sql: &str) -> Vec<Vec<Option<String>>> {
    let mut r = rows(c, sql).await;
    r.sort();
    r
}

/// Every maintained relation equals its definition, read in one
/// transaction (one timestamp).
async fn check_views(c: &Client, cycle: usize) {
    for (view, query) in CHECKS {
        c.batch_execute("BEGIN").await.unwrap();
        let v = sorted(c, view).await;
        let q = sorted(c, query).await;
        c.batch_execute("COMMIT").await.unwrap();
        assert_eq!(v, q, "cycle {cycle}: {view} differs from its definition");
    }
    // The DDL task's views, whichever exist.
    for name in rows(
        c,
        "SELECT object_name FROM freshet_internal.dataflows WHERE object_name LIKE '%.churn%'",
    )
    .await
    {
        let name = name[0].clone().unwrap();
        let short = name.rsplit('.').next().unwrap();
        c.batch_execute("BEGIN").await.unwrap();
        let v = sorted(c, &format!("SELECT writer, n FROM {short}")).await;
        let q = sorted(c, "SELECT writer, count(*) FROM events GROUP BY writer").await;
        c.batch_execute("COMMIT").await.unwrap();
        assert_eq!(v, q, "cycle {cycle}: {short} differs from its definition");
    }
}

fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// What `check_files` counts at one moment.
struct FileCounts {
    referenced: usize,
    parts: usize,
    segments: usize,
    /// The largest consensus log, and its size in bytes.
    largest_log: (String, u64),
}

impl FileCounts {
    async fn take(c: &Client, data_dir: &Path) -> FileCounts {
        // Inline parts live in the shard's state, not in files.
        let referenced: usize = rows(
            c,
            "SELECT parts - inline_parts FROM freshet_internal.collections",
        )
        .await
        .iter()
        .map(|r| r[0].as_deref().unwrap().parse::<usize>().unwrap())
        .sum();
        let parts = files_under(&data_dir.join("blob")).len();
        let segments = files_under(&data_dir.join("txn")).len();
        let mut largest_log = (String::new(), 0);
        for file in files_under(&data_dir.join("consensus")) {
            let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
            if file.file_name().is_some_and(|n| n == "log") && bytes > largest_log.1 {
                largest_log = (file.display().to_string(), bytes);
            }
        }
        FileCounts {
            referenced,
            parts,
            segments,
            largest_log,
        }
    }

    /// Shards truncate every 32 versions and the catalog rewrites
    /// itself as a snapshot after 256 entries, so no consensus log grows
    /// past what a rewrite allocates (16 MiB ahead, plus four times the
    /// live entries); old log segments are collected.
    fn tidy(&self) -> bool {
        self.parts == self.referenced && self.segments <= 4 && self.largest_log.1 <= 64 << 20
    }
}

/// No file is left behind by a crash: every part file belongs to a
/// shard, old log segments are collected and consensus logs stay small. The
/// restarted server is live (views write their outputs, compaction runs),
/// so a part written but not yet committed, or replaced but not yet
/// deleted, is counted for a moment; a leftover stays. The counts are
/// taken until they are tidy, for up to 20 s.
async fn check_files(c: &Client, data_dir: &Path, cycle: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let n = FileCounts::take(c, data_dir).await;
        if n.tidy() {
            return;
        }
        if std::time::Instant::now() > deadline {
            assert_eq!(n.parts, n.referenced, "cycle {cycle}: orphaned part files");
            assert!(
                n.segments <= 4,
                "cycle {cycle}: {} log segments kept",
                n.segments
            );
            let (key, bytes) = &n.largest_log;
            panic!("cycle {cycle}: consensus log {key} holds {bytes} bytes");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_at_random_points_loses_no_acknowledged_write_and_views_stay_correct() {
    let cycles: usize = std::env::var("FRESHET_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let mut s = Server::start();
    s.connect().await.batch_execute(SETUP).await.unwrap();
    let acked: Arc<Mutex<BTreeSet<i64>>> = Arc::default();
    let deleting: Arc<Mutex<BTreeSet<i64>>> = Arc::default();
    let mut next_id: i64 = 0;
    for cycle in 0..cycles {
        let mut tasks = Vec::new();
        for writer in 0..3i32 {
            let conn = s.connect().await;
            let acked = Arc::clone(&acked);
            let deleting = Arc::clone(&deleting);
            let first = next_id + i64::from(writer) * 1_000_000;
            tasks.push(tokio::spawn(async move {
                for i in 0.. {
                    let id = first + i;
                    let row = |id: i64| format!("({id}, {writer}, {}, {})", id % 10, id % 97);
                    let (sql, written, deleted) = match i % 7 {
                        // A transaction writing two rows at one time.
                        3 => (
                            format!(
                                "BEGIN; INSERT INTO events VALUES {}; INSERT INTO events VALUES {}; COMMIT",
                                row(id),
                                row(id + 500_000)
                            ),
                            vec![id, id + 500_000],
                            None,
                        ),
                        // A delete of an earlier acknowledged row.
                        6 => (
                            format!("DELETE FROM events WHERE id = {}", id - 2),
                            vec![],
                            Some(id - 2),
                        ),
                        _ => (format!("INSERT INTO events VALUES {}", row(id)), vec![id], None),
                    };
                    if let Some(d) = deleted {
                        // Whether or not it is acknowledged, it may be gone.
                        deleting.lock().insert(d);
                    }
                    match conn.batch_execute(&sql).await {
                        Ok(()) => {
                            let mut a = acked.lock();
                            a.extend(written);
                            if let Some(d) = deleted {
                                a.remove(&d);
                            }
                        }
                        Err(_) => break,
                    }
                }
            }));
        }
        {
            let conn = s.connect().await;
            tasks.push(tokio::spawn(async move {
                for n in 0.. {
                    let name = format!("churn{}", n % 3);
                    let sql = format!(
                        "DROP MATERIALIZED VIEW IF EXISTS {name}; \
                         CREATE MATERIALIZED VIEW {name} AS SELECT writer, count(*) AS n FROM events GROUP BY writer"
                    );
                    if conn.batch_execute(&sql).await.is_err() {
                        break;
                    }
                }
            }));
        }
        next_id += 10_000_000;
        let pause = rand::rng().random_range(300..1500);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        s.kill();
        for t in tasks {
            t.await.unwrap();
        }
        s.kill_and_restart();
        let c = s.connect().await;
        let present: BTreeSet<i64> = rows(&c, "SELECT id FROM events")
            .await
            .into_iter()
            .map(|r| r[0].as_deref().unwrap().parse().unwrap())
            .collect();
        let expected: BTreeSet<i64> = acked.lock().difference(&deleting.lock()).copied().collect();
        let lost: Vec<&i64> = expected.difference(&present).take(5).collect();
        assert!(
            lost.is_empty(),
            "cycle {cycle}: acknowledged rows lost: {lost:?}"
        );
        check_views(&c, cycle).await;
        check_files(&c, &s.data_dir, cycle).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_server_takes_over_a_busy_data_directory() {
    let mut first = Server::start();
    first.connect().await.batch_execute(SETUP).await.unwrap();
    let acked: Arc<Mutex<BTreeSet<i64>>> = Arc::default();
    let mut tasks = Vec::new();
    for writer in 0..4i64 {
        let conn = first.connect().await;
        let acked = Arc::clone(&acked);
        tasks.push(tokio::spawn(async move {
            for i in 0.. {
                let id = writer * 1_000_000 + i;
                let sql = format!("INSERT INTO events VALUES ({id}, {writer}, {}, 1)", id % 10);
                match conn.batch_execute(&sql).await {
                    Ok(()) => {
                        acked.lock().insert(id);
                    }
                    Err(_) => break,
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    // The second server opens the directory while the first is writing.
    let mut second = Server::start_on(&first.data_dir.clone());
    let c = second.connect().await;
    // The first stops writing (its writers get errors) and exits.
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(30), t)
            .await
            .expect("writers of the fenced server stop")
            .unwrap();
    }
    assert!(first.wait_exit(Duration::from_secs(20)).is_some());
    let present: BTreeSet<i64> = rows(&c, "SELECT id FROM events")
        .await
        .into_iter()
        .map(|r| r[0].as_deref().unwrap().parse().unwrap())
        .collect();
    let acked = acked.lock().clone();
    assert!(!acked.is_empty());
    let lost: Vec<&i64> = acked.difference(&present).take(5).collect();
    assert!(
        lost.is_empty(),
        "acknowledged rows lost in the takeover: {lost:?}"
    );
    check_views(&c, 0).await;
    c.batch_execute("INSERT INTO events VALUES (-1, -1, 1, 1)")
        .await
        .unwrap();
    check_views(&c, 1).await;
    drop(c);
    second.kill_and_restart();
    let c = second.connect().await;
    check_views(&c, 2).await;
    check_files(&c, &second.data_dir, 2).await;
}

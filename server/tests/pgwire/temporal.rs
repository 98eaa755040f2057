//! Property test of temporal filters: random rows whose time windows open
//! and close around the present, written while time passes; at random
//! read times every maintained view must equal its query ad hoc at the
//! same time (one read-only transaction on Freshet), and both must equal
//! PostgreSQL 15 running the query with that time as a literal.
//!
//! `FRESHET_TEMPORAL_SEED` picks the random stream (printed on failure).

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_postgres::{Client, NoTls};

use crate::harness::*;
use crate::pg::PgServer;

/// Each view's query over `ev`, with `{now}` where the time goes in a
/// comparison with numbers (milliseconds) and `{now_ts}` where it is
/// compared with a timestamp.
const QUERIES: &[(&str, &str)] = &[
    (
        "w_numeric",
        "SELECT id FROM ev WHERE {now} >= lo AND {now} < hi",
    ),
    (
        "w_between",
        "SELECT id, lo FROM ev WHERE {now} BETWEEN lo AND hi",
    ),
    (
        "w_recent",
        "SELECT id FROM ev WHERE {now_ts} <= ts + INTERVAL '1 second'",
    ),
    (
        "w_future",
        "SELECT id FROM ev WHERE ts > {now_ts} AND {now} > lo - 5000",
    ),
    (
        "w_counts",
        "SELECT id % 3 AS g, count(*) AS n FROM ev WHERE {now} < hi GROUP BY id % 3",
    ),
];

/// The query as Freshet runs it: `mz_now()` for the time.
fn freshet_sql(query: &str) -> String {
    query
        .replace("{now_ts}", "mz_now()")
        .replace("{now}", "mz_now()")
}

/// A `timestamptz` literal of `ms` milliseconds since the epoch.
fn stamp(ms: i64) -> String {
    let t = chrono::DateTime::from_timestamp_millis(ms).expect("a time");
    format!("timestamptz '{}'", t.format("%Y-%m-%d %H:%M:%S%.3f+00"))
}

/// The query as PostgreSQL runs it at time `t` (milliseconds).
fn postgres_sql(query: &str, t: i64) -> String {
    query
        .replace("{now_ts}", &stamp(t))
        .replace("{now}", &t.to_string())
}

async fn sorted(c: &Client, sql: &str) -> Vec<Vec<Option<String>>> {
    let mut r = rows(c, sql).await;
    r.sort();
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn temporal_views_equal_adhoc_and_postgres_at_every_read() {
    let seed = std::env::var("FRESHET_TEMPORAL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random::<u64>());
    println!("FRESHET_TEMPORAL_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let postgres = PgServer::start();
    let (pg, connection) = tokio_postgres::connect(&postgres.conn_str(), NoTls)
        .await
        .expect("connect to PostgreSQL");
    tokio::spawn(connection);
    let server = Server::start();
    let fr = server.connect().await;
    let ddl = "CREATE TABLE ev (id int, lo bigint, hi bigint, ts timestamptz)";
    fr.batch_execute(ddl).await.expect("freshet table");
    pg.batch_execute(ddl).await.expect("postgres table");
    for (name, query) in QUERIES {
        fr.batch_execute(&format!(
            "CREATE MATERIALIZED VIEW {name} AS {}",
            freshet_sql(query)
        ))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let mut next_id = 0;
    let mut checks = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    while std::time::Instant::now() < deadline {
        // A write: rows with windows around the present, or a delete.
        let now: i64 = value(&fr, "SELECT mz_now()::bigint")
            .await
            .and_then(|v| v.parse().ok())
            .expect("mz_now");
        let write = if rng.random_range(0..5) == 0 && next_id > 0 {
            format!("DELETE FROM ev WHERE id = {}", rng.random_range(0..next_id))
        } else {
            let rows: Vec<String> = (0..rng.random_range(1..4))
                .map(|_| {
                    next_id += 1;
                    let lo = now + rng.random_range(-2_000..2_000);
                    let hi = lo + rng.random_range(-500..3_000);
                    let ts = now + rng.random_range(-3_000..1_500);
                    let null = rng.random_range(0..10) == 0;
                    format!(
                        "({next_id}, {lo}, {}, {})",
                        if null {
                            "NULL".to_string()
                        } else {
                            hi.to_string()
                        },
                        stamp(ts)
                    )
                })
                .collect();
            format!("INSERT INTO ev VALUES {}", rows.join(", "))
        };
        fr.batch_execute(&write).await.expect(&write);
        pg.batch_execute(&write).await.expect(&write);
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..400))).await;
        // A read: every view, its query ad hoc, at one time.
        fr.batch_execute("BEGIN READ ONLY").await.expect("begin");
        let t: i64 = value(&fr, "SELECT mz_now()::bigint")
            .await
            .and_then(|v| v.parse().ok())
            .expect("mz_now");
        for (name, query) in QUERIES {
            let view = sorted(&fr, &format!("SELECT * FROM {name}")).await;
            let adhoc = sorted(&fr, &freshet_sql(query)).await;
            let reference = sorted(&pg, &postgres_sql(query, t)).await;
            assert_eq!(view, adhoc, "seed {seed}: {name} at {t}: view vs ad hoc");
            assert_eq!(
                adhoc, reference,
                "seed {seed}: {name} at {t}: Freshet vs PostgreSQL"
            );
            checks += 1;
        }
        fr.batch_execute("COMMIT").await.expect("commit");
    }
    assert!(checks >= 5 * QUERIES.len(), "only {checks} checks ran");
}

/// A SUBSCRIBE over a temporal filter: the row arrives, then leaves at
/// the time its window closes, without any write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_sees_a_row_leave_when_its_window_closes() {
    let server = Server::start();
    let c = server.connect().await;
    c.batch_execute(
        "CREATE TABLE w (id int, until numeric); \
         INSERT INTO w SELECT 1, mz_now() + 1000; \
         INSERT INTO w SELECT 2, mz_now() + 600000; \
         BEGIN; \
         DECLARE c CURSOR FOR SUBSCRIBE (SELECT id FROM w WHERE mz_now() < until);",
    )
    .await
    .expect("setup");
    let until: i64 = value(&c, "SELECT until::bigint FROM w WHERE id = 1")
        .await
        .and_then(|v| v.parse().ok())
        .expect("until");
    let mut updates: Vec<(i64, i64, i64)> = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !updates.iter().any(|u| u.1 == -1) {
        assert!(
            std::time::Instant::now() < deadline,
            "no retraction: {updates:?}"
        );
        for row in rows(&c, "FETCH ALL c WITH (timeout = '500ms')").await {
            let n = |i: usize| row[i].as_deref().unwrap_or("0").parse::<i64>().unwrap_or(0);
            updates.push((n(0), n(1), n(2)));
        }
    }
    let inserted: Vec<i64> = updates.iter().filter(|u| u.1 == 1).map(|u| u.2).collect();
    assert_eq!(inserted, vec![1, 2], "{updates:?}");
    let retracted: Vec<&(i64, i64, i64)> = updates.iter().filter(|u| u.1 == -1).collect();
    assert_eq!(retracted.len(), 1, "{updates:?}");
    // Retracted exactly when the window closed.
    assert_eq!(retracted[0].2, 1);
    assert_eq!(retracted[0].0, until, "{updates:?}");
}

//! `CREATE SINK ... INTO POSTGRES` against a real PostgreSQL 15 the test
//! starts: the table Freshet keeps there equals the relation (every type
//! in the same text form; a grouping key that can be NULL), the progress
//! row, a PostgreSQL that goes away and comes back, `kill -9` of Freshet
//! during export while a reader of the upstream table checks that every
//! Freshet transaction arrives whole, and the definitions refused at
//! `CREATE`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::Rng;
use tokio_postgres::Client;

use crate::harness::*;
use crate::pg::PgServer;
use crate::sinks::{crash_cycles, wait_exported};

/// A client of the upstream, in UTC (as Freshet shows timestamptz).
async fn upstream(pg: &PgServer) -> Client {
    let client = crate::postgres_source::upstream(pg).await;
    client
        .batch_execute("SET TimeZone = 'UTC'")
        .await
        .expect("set the time zone");
    client
}

fn connection_sql(pg: &PgServer) -> String {
    format!(
        "CREATE CONNECTION pg TO POSTGRES (HOST '127.0.0.1', PORT {}, USER postgres, DATABASE 'postgres');",
        pg.port()
    )
}

const T: &str = "SELECT k, v, n, amount, b, ts, d, f, ok, doc, u FROM t";

/// Wait until the first test's sinks have exported everything, then
/// compare PostgreSQL's tables with Freshet's relations.
async fn check(c: &Client, up: &Client, label: &str) {
    wait_exported(c, "t_out", "t").await;
    wait_exported(c, "g_out", "t").await;
    let order = " ORDER BY 1";
    assert_eq!(
        rows(
            up,
            &format!("{}{order}", T.replace("FROM t", "FROM t_copy"))
        )
        .await,
        rows(c, &format!("{T}{order}")).await,
        "{label}: t_copy"
    );
    assert_eq!(
        rows(
            up,
            "SELECT v, n FROM sinks.\"Groups\" ORDER BY 1 NULLS FIRST"
        )
        .await,
        rows(c, "SELECT v, n FROM g ORDER BY 1 NULLS FIRST").await,
        "{label}: groups"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sinks_keep_a_table_equal_to_the_relation() {
    let mut pg = PgServer::start_logical();
    let up = upstream(&pg).await;
    up.batch_execute("CREATE SCHEMA sinks").await.unwrap();
    let mut s = Server::start();
    let c = s.connect().await;
    c.batch_execute(&connection_sql(&pg)).await.unwrap();
    c.batch_execute(
        "CREATE TABLE t (k int PRIMARY KEY, v text, n numeric, amount numeric(10,2), b bytea, \
           ts timestamptz, d date, f double precision, ok boolean, doc jsonb, u uuid);
         INSERT INTO t VALUES
           (1, 'a', 1.5, 2.25, '\\x01ff', '2024-01-02 03:04:05.123456+00', '2024-01-02', 0.5, true, '{\"x\": [1]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),
           (2, NULL, 2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
           (3, 'it''s', -0.001, 0, '\\x', '1999-12-31 23:59:59+00', '1999-12-31', -12345.678, false, '[]', NULL);
         CREATE MATERIALIZED VIEW g AS SELECT v, count(*) AS n FROM t GROUP BY v;
         CREATE SINK t_out FROM t INTO POSTGRES CONNECTION pg (TABLE 't_copy');
         CREATE SINK g_out FROM g INTO POSTGRES CONNECTION pg (TABLE 'sinks.\"Groups\"') KEY (v);",
    )
    .await
    .unwrap();
    c.batch_execute(
        "UPDATE t SET v = 'b', n = n * 2 WHERE k = 1;
         DELETE FROM t WHERE k = 3;
         INSERT INTO t (k, v) VALUES (4, NULL), (5, 'b');",
    )
    .await
    .unwrap();
    check(&c, &up, "first").await;
    // The table was made with the relation's types and key; the progress
    // rows sit beside each table.
    assert_eq!(
        value(
            &up,
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute \
             WHERE attrelid = 't_copy'::regclass AND attname = 'amount'"
        )
        .await
        .as_deref(),
        Some("numeric(10,2)")
    );
    assert_eq!(
        value(&up, "SELECT count(*) FROM public._freshet_sink_progress")
            .await
            .as_deref(),
        Some("1")
    );
    assert_eq!(
        value(&up, "SELECT count(*) FROM sinks._freshet_sink_progress")
            .await
            .as_deref(),
        Some("1")
    );
    let create = rows(&c, "SHOW CREATE SINK g_out").await;
    assert_eq!(
        create[0][1].as_deref(),
        Some(
            "CREATE SINK freshet.public.g_out FROM freshet.public.g INTO POSTGRES CONNECTION \
             freshet.public.pg (TABLE 'sinks.\"Groups\"', PROGRESS TABLE 'sinks._freshet_sink_progress') \
             KEY (v) ENVELOPE UPSERT"
        )
    );

    // PostgreSQL goes away: the sinks stall with its error, the server
    // serves, and once it is back they catch up by themselves.
    pg.stop();
    c.batch_execute("INSERT INTO t (k, v) VALUES (6, 'c')")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = rows(
            &c,
            "SELECT status, error FROM freshet_internal.sink_statuses WHERE name LIKE '%.t_out'",
        )
        .await;
        if status[0][0].as_deref() == Some("stalled") {
            assert!(
                status[0][1]
                    .as_deref()
                    .is_some_and(|e| e.contains("PostgreSQL"))
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sink did not stall: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    pg.restart();
    let up = upstream(&pg).await;
    check(&c, &up, "after PostgreSQL came back").await;

    // kill -9 and restart of Freshet: it resumes at the progress rows.
    s.kill_and_restart();
    let c = s.connect().await;
    // The NULL group changes (its key is deleted by a statement of its own).
    c.batch_execute("UPDATE t SET v = 'a' WHERE k = 5; INSERT INTO t (k) VALUES (7)")
        .await
        .unwrap();
    check(&c, &up, "after a restart").await;
    c.batch_execute("DROP SINK t_out").await.unwrap();
    assert_eq!(
        rows(&c, "SELECT name FROM freshet_internal.sink_statuses").await,
        vec![vec![Some("freshet.public.g_out".to_string())]]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sink_definitions_are_checked_at_create() {
    let pg = PgServer::start_logical();
    let up = upstream(&pg).await;
    up.batch_execute("CREATE TABLE narrow (k int PRIMARY KEY)")
        .await
        .unwrap();
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(&connection_sql(&pg)).await.unwrap();
    c.batch_execute(
        "CREATE TABLE t (k int PRIMARY KEY, v text);
         CREATE TABLE arr (k int PRIMARY KEY, xs int[]);
         CREATE TABLE nokey (a int);",
    )
    .await
    .unwrap();
    for (sql, code, text) in [
        (
            "CREATE SINK s FROM t INTO POSTGRES CONNECTION pg (TABLE 'x') ENVELOPE DEBEZIUM",
            "0A000",
            "DEBEZIUM",
        ),
        (
            "CREATE SINK s FROM t INTO POSTGRES CONNECTION pg (TABLE 'x') FORMAT JSON",
            "0A000",
            "FORMAT JSON",
        ),
        (
            "CREATE SINK s FROM arr INTO POSTGRES CONNECTION pg (TABLE 'x')",
            "0A000",
            "integer[]",
        ),
        (
            "CREATE SINK s FROM nokey INTO POSTGRES CONNECTION pg (TABLE 'x')",
            "22023",
            "requires a KEY",
        ),
        (
            "CREATE SINK s FROM t INTO POSTGRES CONNECTION pg (PROGRESS TABLE 'p')",
            "22023",
            "needs TABLE",
        ),
        (
            "CREATE SINK s FROM t INTO POSTGRES CONNECTION pg (TABLE 'a.b.c')",
            "22023",
            "not a table name",
        ),
        (
            "CREATE SINK s FROM t INTO POSTGRES CONNECTION pg (TABLE 'x', PROGRESS TABLE 'public.x')",
            "22023",
            "must differ",
        ),
        (
            "CREATE SINK s FROM t INTO POSTGRES CONNECTION pg (TABLE 'nope.x')",
            "58030",
            "schema \"nope\" does not exist",
        ),
        (
            "CREATE SINK s FROM t INTO POSTGRES CONNECTION pg (TABLE 'narrow')",
            "22023",
            "has no column \"v\"",
        ),
    ] {
        let e = c.batch_execute(sql).await.unwrap_err();
        let message = e
            .as_db_error()
            .map(|d| d.message().to_string())
            .unwrap_or_default();
        assert_eq!(sqlstate(&e), code, "{sql}: {message}");
        assert!(message.contains(text), "{sql}: {message}");
    }
    assert!(rows(&c, "SHOW SINKS").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sinks_survive_kill_9_with_every_transaction_whole() {
    let cycles = crash_cycles();
    const ACCOUNTS: i64 = 10;
    let pg = PgServer::start_logical();
    let up = upstream(&pg).await;
    let mut s = Server::start();
    {
        let c = s.connect().await;
        c.batch_execute(&connection_sql(&pg)).await.unwrap();
        c.batch_execute(&format!(
            "CREATE TABLE acct (k int PRIMARY KEY, bal int NOT NULL);
             INSERT INTO acct SELECT g, 100 FROM generate_series(1, {ACCOUNTS}) AS g;
             CREATE TABLE t (k int PRIMARY KEY, v int);
             CREATE MATERIALIZED VIEW groups AS SELECT v, count(*) AS n FROM t GROUP BY v;
             CREATE SINK acct_out FROM acct INTO POSTGRES CONNECTION pg (TABLE 'acct') \
               WITH (COMMIT INTERVAL = '20ms');
             CREATE SINK groups_out FROM groups INTO POSTGRES CONNECTION pg (TABLE 'groups') KEY (v);"
        ))
        .await
        .unwrap();
        wait_exported(&c, "acct_out", "acct").await;
    }
    // A reader of the upstream table: each Freshet transaction moves money
    // between two accounts, so any state a PostgreSQL transaction of the
    // sink leaves has the same total.
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let up = upstream(&pg).await;
        let done = Arc::clone(&done);
        tokio::spawn(async move {
            let mut reads = 0;
            while !done.load(Ordering::Relaxed) {
                let r = rows(&up, "SELECT count(*), sum(bal) FROM acct").await;
                assert_eq!(
                    r,
                    vec![vec![
                        Some(ACCOUNTS.to_string()),
                        Some((ACCOUNTS * 100).to_string())
                    ]],
                    "a transaction arrived in part"
                );
                reads += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            reads
        })
    };
    let mut rng = rand::rng();
    let mut next = 1;
    for cycle in 0..cycles {
        let kill_after = Duration::from_millis(rng.random_range(200..2500));
        let writer = {
            let c = s.connect().await;
            let start = next;
            tokio::spawn(async move {
                let mut k: i64 = start;
                loop {
                    let (a, b) = (k % ACCOUNTS + 1, (k * 7 + 3) % ACCOUNTS + 1);
                    let sql = if a == b {
                        format!("INSERT INTO t VALUES ({k}, {})", k % 4)
                    } else if k % 5 == 0 {
                        format!("DELETE FROM t WHERE k = {}", k - 3)
                    } else {
                        format!(
                            "BEGIN; UPDATE acct SET bal = bal - {k} WHERE k = {a}; \
                             UPDATE acct SET bal = bal + {k} WHERE k = {b}; \
                             INSERT INTO t VALUES ({k}, {}); COMMIT;",
                            k % 4
                        )
                    };
                    if c.batch_execute(&sql).await.is_err() {
                        return k;
                    }
                    k += 1;
                }
            })
        };
        tokio::time::sleep(kill_after).await;
        s.kill();
        next = writer.await.unwrap() + 1;
        s.kill_and_restart();
        let c = s.connect().await;
        wait_exported(&c, "acct_out", "acct").await;
        wait_exported(&c, "groups_out", "t").await;
        assert_eq!(
            rows(&up, "SELECT k, bal FROM acct ORDER BY k").await,
            rows(&c, "SELECT k, bal FROM acct ORDER BY k").await,
            "cycle {cycle}: acct"
        );
        assert_eq!(
            rows(&up, "SELECT v, n FROM groups ORDER BY v").await,
            rows(&c, "SELECT v, n FROM groups ORDER BY v").await,
            "cycle {cycle}: groups"
        );
    }
    done.store(true, Ordering::Relaxed);
    let reads = reader
        .await
        .expect("the reader saw every transaction whole");
    assert!(reads > 10, "the reader read {reads} times");
}

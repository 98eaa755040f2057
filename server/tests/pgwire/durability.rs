//! Acknowledged writes survive restarts and `kill -9`; a second process
//! on the same data directory fences the first.

use std::time::Duration;

use crate::harness::*;

#[tokio::test(flavor = "multi_thread")]
async fn acknowledged_writes_and_ddl_survive_kill_9() {
    let mut s = Server::start();
    {
        let c = s.connect().await;
        c.batch_execute(
            "CREATE TABLE t (a int, b text DEFAULT 'd');
             CREATE VIEW v AS SELECT a * 2 AS doubled FROM t;
             CREATE SCHEMA s; CREATE TABLE s.u (x int);
             ALTER TABLE s.u RENAME TO w",
        )
        .await
        .unwrap();
        for i in 0..50 {
            c.execute("INSERT INTO t (a) VALUES ($1)", &[&i])
                .await
                .unwrap();
        }
        c.batch_execute("DELETE FROM t WHERE a >= 40; UPDATE t SET b = 'u' WHERE a < 5; INSERT INTO s.w VALUES (1)")
            .await
            .unwrap();
    }
    s.kill_and_restart();
    let c = s.connect().await;
    assert_eq!(
        value(&c, "SELECT count(*) FROM t").await.as_deref(),
        Some("40")
    );
    assert_eq!(
        value(&c, "SELECT count(*) FROM t WHERE b = 'u'")
            .await
            .as_deref(),
        Some("5")
    );
    assert_eq!(
        value(&c, "SELECT sum(doubled) FROM v").await.as_deref(),
        Some("1560")
    );
    assert_eq!(value(&c, "SELECT x FROM s.w").await.as_deref(), Some("1"));
    // Defaults and view definitions came back from the catalog.
    c.batch_execute("INSERT INTO t (a) VALUES (100)")
        .await
        .unwrap();
    assert_eq!(
        value(&c, "SELECT b FROM t WHERE a = 100").await.as_deref(),
        Some("d")
    );
    // Time moves forward across restarts.
    let before: u64 = value(&c, "EXPLAIN TIMESTAMP FOR SELECT * FROM t")
        .await
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    drop(c);
    s.kill_and_restart();
    let c = s.connect().await;
    let after: u64 = value(&c, "EXPLAIN TIMESTAMP FOR SELECT * FROM t")
        .await
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(after > before);
    assert_eq!(
        value(&c, "SELECT count(*) FROM t").await.as_deref(),
        Some("41")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_during_concurrent_writes_keeps_every_acknowledged_row() {
    let mut s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE t (w int, i int)")
        .await
        .unwrap();
    let mut writers = vec![];
    for w in 0..4 {
        let conn = s.connect().await;
        writers.push(tokio::spawn(async move {
            let mut acked = vec![];
            for i in 0.. {
                match conn
                    .execute("INSERT INTO t VALUES ($1, $2)", &[&w, &i])
                    .await
                {
                    Ok(_) => acked.push(i),
                    Err(_) => break,
                }
            }
            acked
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    s.kill();
    let mut acked = vec![];
    for (w, t) in writers.into_iter().enumerate() {
        for i in t.await.unwrap() {
            acked.push((w as i32, i));
        }
    }
    assert!(!acked.is_empty());
    s.kill_and_restart();
    let c = s.connect().await;
    let present = rows(&c, "SELECT w, i FROM t").await;
    let present: std::collections::HashSet<(i32, i32)> = present
        .into_iter()
        .map(|r| {
            (
                r[0].as_ref().unwrap().parse().unwrap(),
                r[1].as_ref().unwrap().parse().unwrap(),
            )
        })
        .collect();
    for row in &acked {
        assert!(present.contains(row), "acknowledged row {row:?} lost");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_process_fences_the_first() {
    let mut first = Server::start();
    let c1 = first.connect().await;
    c1.batch_execute("CREATE TABLE t (a int); INSERT INTO t VALUES (1)")
        .await
        .unwrap();
    let mut second = Server::start_on(&first.data_dir.clone());
    let c2 = second.connect().await;
    assert_eq!(
        value(&c2, "SELECT count(*) FROM t").await.as_deref(),
        Some("1")
    );
    // The first process's next write fails, and it shuts itself down.
    let err = c1.simple_query("INSERT INTO t VALUES (2)").await;
    assert!(err.is_err(), "a fenced process must not acknowledge writes");
    let status = first.wait_exit(Duration::from_secs(20));
    assert!(status.is_some(), "the fenced process should exit");
    c2.batch_execute("INSERT INTO t VALUES (3)").await.unwrap();
    assert_eq!(
        value(&c2, "SELECT count(*) FROM t").await.as_deref(),
        Some("2")
    );
    assert!(second.is_running());
    drop(c2);
    second.kill_and_restart();
    let c = second.connect().await;
    assert_eq!(
        value(&c, "SELECT sum(a) FROM t").await.as_deref(),
        Some("4")
    );
}

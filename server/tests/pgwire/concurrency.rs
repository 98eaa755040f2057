//! Concurrent writers, cancellation, timeouts and read-hold release.

use std::time::{Duration, Instant};

use crate::harness::*;

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_deletes_of_one_row_retract_it_once() {
    let s = Server::start();
    let setup = s.connect().await;
    setup
        .batch_execute("CREATE TABLE t (k int, v int)")
        .await
        .unwrap();
    for round in 0..10 {
        setup
            .batch_execute(&format!("INSERT INTO t VALUES ({round}, 0)"))
            .await
            .unwrap();
        let mut tasks = vec![];
        for _ in 0..4 {
            let conn = s.connect().await;
            tasks.push(tokio::spawn(async move {
                conn.execute(&format!("DELETE FROM t WHERE k = {round}"), &[])
                    .await
                    .unwrap()
            }));
        }
        let mut deleted = 0;
        for t in tasks {
            deleted += t.await.unwrap();
        }
        assert_eq!(
            deleted, 1,
            "round {round}: the row was retracted {deleted} times"
        );
    }
    assert_eq!(
        value(&setup, "SELECT count(*) FROM t").await.as_deref(),
        Some("0")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_increments_lose_no_update() {
    let s = Server::start();
    let setup = s.connect().await;
    setup
        .batch_execute("CREATE TABLE c (id int, n int); INSERT INTO c VALUES (1, 0)")
        .await
        .unwrap();
    let mut tasks = vec![];
    for _ in 0..8 {
        let conn = s.connect().await;
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                conn.execute("UPDATE c SET n = n + 1 WHERE id = 1", &[])
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        value(&setup, "SELECT n FROM c").await.as_deref(),
        Some("40")
    );
    assert_eq!(
        value(&setup, "SELECT count(*) FROM c").await.as_deref(),
        Some("1")
    );
}

/// A query that takes seconds: a large cross join over a table.
const SLOW: &str = "SELECT count(*) FROM big a, big b, big c WHERE a.x + b.x + c.x = -1";

/// A billion combinations for [`SLOW`]: long enough that no machine
/// finishes it within a test's 300 ms timeout (64 million did, on a fast
/// one).
async fn create_big(c: &tokio_postgres::Client) {
    c.batch_execute(
        "CREATE TABLE big (x int); INSERT INTO big SELECT * FROM generate_series(1, 1000)",
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_request_stops_a_query_and_releases_holds() {
    let s = Server::start();
    let c = s.connect().await;
    let observer = s.connect().await;
    create_big(&c).await;
    let token = c.cancel_token();
    let started = Instant::now();
    let query = tokio::spawn(async move {
        let r = c.simple_query(SLOW).await;
        (r, c)
    });
    // The running query holds its input (once it has started: on a busy
    // machine that can take a while).
    let deadline = Instant::now() + Duration::from_secs(20);
    while holds_on(&observer, "big").await != 1 {
        assert!(
            !query.is_finished(),
            "the query ended before it was cancelled"
        );
        assert!(
            Instant::now() < deadline,
            "the running query never held its input"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    token.cancel_query(tokio_postgres::NoTls).await.unwrap();
    let (result, c) = query.await.unwrap();
    assert_eq!(sqlstate(&result.unwrap_err()), "57014");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(holds_on(&observer, "big").await, 0);
    assert_eq!(value(&c, "SELECT 1").await.as_deref(), Some("1"));
}

#[tokio::test(flavor = "multi_thread")]
async fn statement_timeout_cancels_with_57014() {
    let s = Server::start();
    let c = s.connect().await;
    create_big(&c).await;
    c.batch_execute("SET statement_timeout = 300")
        .await
        .unwrap();
    let started = Instant::now();
    let err = c.simple_query(SLOW).await.unwrap_err();
    assert_eq!(sqlstate(&err), "57014");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(holds_on(&c, "big").await, 0);
}

//! `freshet_internal.dataflows` reports what each materialized view's
//! dataflow holds in its arrangements, and forgets dropped views.

use std::time::{Duration, Instant};

use tokio_postgres::Client;

use crate::harness::*;

/// `(arranged_records, arranged_bytes)` of `view`'s dataflow, once workers
/// have reported sizes that satisfy `ready` (they report every second).
async fn arranged(c: &Client, view: &str, ready: impl Fn(i64, i64) -> bool) -> (i64, i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let row = c
            .query_one(
                "SELECT arranged_records, arranged_bytes FROM freshet_internal.dataflows \
                 WHERE object_name = $1",
                &[&format!("freshet.public.{view}")],
            )
            .await
            .expect("dataflow row");
        let (records, bytes): (i64, i64) = (row.get(0), row.get(1));
        if ready(records, bytes) {
            return (records, bytes);
        }
        assert!(
            Instant::now() < deadline,
            "sizes of {view} never satisfied the condition: {records} records, {bytes} bytes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn arrangement_records_and_bytes_follow_the_data() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE t (k int, v text);
         INSERT INTO t SELECT value % 50, repeat('x', 100) || value FROM generate_series(1, 2000);
         CREATE MATERIALIZED VIEW per_key AS SELECT k, count(*) AS n, max(v) AS top FROM t GROUP BY k;
         CREATE MATERIALIZED VIEW plain AS SELECT k + 1 AS k1 FROM t",
    )
    .await
    .unwrap();
    // The reduction arranges every (k, v): about 2,000 updates of more than
    // 100 bytes each.
    let (records, bytes) = arranged(&c, "per_key", |r, b| r >= 2000 && b > 0).await;
    assert!(
        bytes >= records * 100,
        "{bytes} bytes for {records} records of 100+ byte values"
    );
    // A map-only view arranges nothing.
    let plain = arranged(&c, "plain", |_, _| true).await;
    assert_eq!(plain, (0, 0));

    // More distinct rows: more bytes.
    c.batch_execute(
        "INSERT INTO t SELECT value % 50, repeat('y', 100) || value FROM generate_series(1, 2000)",
    )
    .await
    .unwrap();
    let (more_records, more_bytes) =
        arranged(&c, "per_key", |r, b| r >= records + 2000 && b > bytes).await;
    assert!(more_bytes >= more_records * 100);

    // A dropped view's dataflow goes away.
    c.batch_execute("DROP MATERIALIZED VIEW per_key")
        .await
        .unwrap();
    let left = c
        .query("SELECT object_name FROM freshet_internal.dataflows", &[])
        .await
        .unwrap();
    let names: Vec<String> = left.iter().map(|r| r.get(0)).collect();
    assert_eq!(names, vec!["freshet.public.plain".to_string()]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_index_reports_its_errors() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE d (k int);
         INSERT INTO d VALUES (1), (2);
         CREATE VIEW inv AS SELECT k, 10 / k AS q FROM d;
         CREATE INDEX inv_k ON inv (k)",
    )
    .await
    .unwrap();
    let errors = |want: i64| {
        let c = &c;
        async move {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let n: i64 = c
                    .query_one(
                        "SELECT errors FROM freshet_internal.dataflows \
                         WHERE object_name = 'freshet.public.inv_k'",
                        &[],
                    )
                    .await
                    .expect("dataflow row")
                    .get(0);
                if n == want {
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "errors stayed {n}, expected {want}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    errors(0).await;
    c.batch_execute("INSERT INTO d VALUES (0)").await.unwrap();
    errors(1).await;
    c.batch_execute("DELETE FROM d WHERE k = 0").await.unwrap();
    errors(0).await;
}

//! Index reads over the extended protocol: prepared key lookups with `$n`
//! parameters are answered from the index and agree with the general path.

use crate::harness::*;

/// Rows as sorted text, for comparing results.
fn sorted(rows: &[tokio_postgres::Row]) -> Vec<(Option<i32>, Option<String>)> {
    let mut out: Vec<(Option<i32>, Option<String>)> =
        rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn prepared_lookups_on_an_index_agree_with_the_table() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE t (k int, v text);
         INSERT INTO t SELECT value % 20, 'v' || value FROM generate_series(1, 500);
         INSERT INTO t VALUES (NULL, 'null key');
         CREATE VIEW t_copy AS SELECT k, v FROM t;
         CREATE INDEX t_k ON t (k)",
    )
    .await
    .unwrap();
    let indexed = c.prepare("SELECT * FROM t WHERE k = $1").await.unwrap();
    // The view has no index: the general path over the same rows.
    let general = c
        .prepare("SELECT * FROM t_copy WHERE k = $1")
        .await
        .unwrap();
    for key in [Some(0), Some(7), Some(19), Some(20), Some(-1), None] {
        let a = c.query(&indexed, &[&key]).await.unwrap();
        let b = c.query(&general, &[&key]).await.unwrap();
        assert_eq!(sorted(&a), sorted(&b), "key {key:?}");
        if key.is_some_and(|k| (0..20).contains(&k)) {
            assert_eq!(a.len(), 25, "key {key:?}");
        }
    }
    // Writes are visible to the next prepared lookup.
    c.execute("INSERT INTO t VALUES (7, 'late')", &[])
        .await
        .unwrap();
    let rows = c.query(&indexed, &[&Some(7)]).await.unwrap();
    assert_eq!(rows.len(), 26);
    assert!(sorted(&rows).contains(&(Some(7), Some("late".to_string()))));
    // The simple protocol's literal form takes the fast path.
    let plan = value(&c, "EXPLAIN SELECT * FROM t WHERE k = 7").await;
    assert!(
        plan.as_deref().is_some_and(|p| p.starts_with("Fast path")),
        "{plan:?}"
    );
}

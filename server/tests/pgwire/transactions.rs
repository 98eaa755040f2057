//! Explicit transactions.

use crate::harness::*;

#[tokio::test(flavor = "multi_thread")]
async fn writes_commit_atomically_or_not_at_all() {
    let s = Server::start();
    let c = s.connect().await;
    let other = s.connect().await;
    c.batch_execute("CREATE TABLE a (x int); CREATE TABLE b (x int)")
        .await
        .unwrap();
    c.batch_execute("BEGIN; INSERT INTO a VALUES (1); INSERT INTO b VALUES (1)")
        .await
        .unwrap();
    // Not visible before COMMIT.
    assert_eq!(
        value(&other, "SELECT count(*) FROM a").await.as_deref(),
        Some("0")
    );
    c.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        value(&other, "SELECT count(*) FROM a").await.as_deref(),
        Some("1")
    );
    assert_eq!(
        value(&other, "SELECT count(*) FROM b").await.as_deref(),
        Some("1")
    );
    c.batch_execute("BEGIN; INSERT INTO a VALUES (2); ROLLBACK")
        .await
        .unwrap();
    assert_eq!(
        value(&other, "SELECT count(*) FROM a").await.as_deref(),
        Some("1")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_in_a_transaction_see_one_time() {
    let s = Server::start();
    let c = s.connect().await;
    let w = s.connect().await;
    c.batch_execute("CREATE TABLE t (x int); CREATE TABLE u (x int); INSERT INTO t VALUES (1)")
        .await
        .unwrap();
    c.batch_execute("BEGIN").await.unwrap();
    assert_eq!(
        value(&c, "SELECT count(*) FROM t").await.as_deref(),
        Some("1")
    );
    w.batch_execute("INSERT INTO t VALUES (2); INSERT INTO u VALUES (2)")
        .await
        .unwrap();
    // Same timestamp: the concurrent writes are invisible, also in u, which
    // is in the same schema and so in the transaction's read set.
    assert_eq!(
        value(&c, "SELECT count(*) FROM t").await.as_deref(),
        Some("1")
    );
    assert_eq!(
        value(&c, "SELECT count(*) FROM u").await.as_deref(),
        Some("0")
    );
    c.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        value(&c, "SELECT count(*) FROM t").await.as_deref(),
        Some("2")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn unsupported_things_in_transactions_fail_with_25_class_errors() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE t (x int); CREATE SCHEMA other; CREATE TABLE other.o (x int)")
        .await
        .unwrap();
    c.batch_execute("BEGIN").await.unwrap();
    let err = c.simple_query("CREATE TABLE u (x int)").await.unwrap_err();
    assert_eq!(sqlstate(&err), "25001");
    // The failed statement aborted the transaction.
    let err = c.simple_query("SELECT 1").await.unwrap_err();
    assert_eq!(sqlstate(&err), "25P02");
    c.batch_execute("ROLLBACK").await.unwrap();

    c.batch_execute("BEGIN; SELECT * FROM t").await.unwrap();
    let err = c.simple_query("SELECT * FROM other.o").await.unwrap_err();
    assert_eq!(sqlstate(&err), "25000");
    c.batch_execute("ROLLBACK").await.unwrap();

    c.batch_execute("BEGIN; SELECT * FROM t").await.unwrap();
    let err = c
        .simple_query("INSERT INTO t VALUES (1)")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "25000");
    // COMMIT of a failed transaction rolls back.
    c.simple_query("COMMIT").await.unwrap();
    assert_eq!(
        value(&c, "SELECT count(*) FROM t").await.as_deref(),
        Some("0")
    );

    c.batch_execute("BEGIN; INSERT INTO t VALUES (1)")
        .await
        .unwrap();
    let err = c.simple_query("UPDATE t SET x = 2").await.unwrap_err();
    assert_eq!(sqlstate(&err), "25000");
    c.batch_execute("ROLLBACK").await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn set_local_ends_with_the_transaction() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("BEGIN; SET LOCAL application_name = 'inner'")
        .await
        .unwrap();
    assert_eq!(
        value(&c, "SHOW application_name").await.as_deref(),
        Some("inner")
    );
    c.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        value(&c, "SHOW application_name").await.as_deref(),
        Some("")
    );
}

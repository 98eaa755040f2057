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
async fn reads_outside_the_first_schemas_work_while_the_transaction_time_is_readable() {
    let s = Server::start();
    let c = s.connect().await;
    let w = s.connect().await;
    c.batch_execute("CREATE TABLE t (x int); CREATE SCHEMA other; CREATE TABLE other.o (x int)")
        .await
        .unwrap();
    c.batch_execute("BEGIN; SELECT * FROM t").await.unwrap();
    w.batch_execute("INSERT INTO other.o VALUES (1)")
        .await
        .unwrap();
    // Still readable at the transaction's time: read there (the write
    // after it is not seen), and held from now on.
    assert_eq!(
        value(&c, "SELECT count(*) FROM other.o").await.as_deref(),
        Some("0")
    );
    c.batch_execute("COMMIT").await.unwrap();

    c.batch_execute("BEGIN; SELECT * FROM t").await.unwrap();
    // Outside the first query's schemas and nothing holds it: after its
    // compaction window (one second) it is no longer readable there.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let err = c.simple_query("SELECT * FROM other.o").await.unwrap_err();
    assert_eq!(sqlstate(&err), "25000");
    c.batch_execute("ROLLBACK").await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_whose_reads_changed_fails_commit_with_40001() {
    let s = Server::start();
    let a = s.connect().await;
    let b = s.connect().await;
    a.batch_execute(
        "CREATE TABLE acct (id int PRIMARY KEY, bal int); CREATE TABLE log (x int); \
         INSERT INTO acct VALUES (1, 100)",
    )
    .await
    .unwrap();
    // Both read the balance, both write a new one; the second to commit
    // read a value that is no longer current.
    a.batch_execute("BEGIN").await.unwrap();
    b.batch_execute("BEGIN").await.unwrap();
    assert_eq!(
        value(&a, "SELECT bal FROM acct").await.as_deref(),
        Some("100")
    );
    assert_eq!(
        value(&b, "SELECT bal FROM acct").await.as_deref(),
        Some("100")
    );
    a.batch_execute("UPDATE acct SET bal = 90").await.unwrap();
    b.batch_execute("UPDATE acct SET bal = 80").await.unwrap();
    a.batch_execute("COMMIT").await.unwrap();
    let err = b.batch_execute("COMMIT").await.unwrap_err();
    assert_eq!(sqlstate(&err), "40001");
    let db = err.as_db_error().unwrap();
    assert_eq!(
        db.message(),
        "could not serialize access due to concurrent update"
    );
    assert!(db.detail().unwrap().contains("table acct"), "{db:?}");
    assert_eq!(db.hint(), Some("The transaction might succeed if retried."));
    assert_eq!(
        value(&a, "SELECT bal FROM acct").await.as_deref(),
        Some("90")
    );
    // The failed COMMIT ended the transaction.
    b.batch_execute("SELECT 1").await.unwrap();

    // Writes to a table the transaction did not read do not conflict, and
    // blind writes (INSERT ... VALUES) validate nothing.
    a.batch_execute("BEGIN; SELECT bal FROM acct; UPDATE acct SET bal = bal + 1")
        .await
        .unwrap();
    b.batch_execute("INSERT INTO log VALUES (1)").await.unwrap();
    a.batch_execute("COMMIT").await.unwrap();
    a.batch_execute("BEGIN; INSERT INTO log VALUES (2)")
        .await
        .unwrap();
    b.batch_execute("INSERT INTO log VALUES (3)").await.unwrap();
    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        value(&a, "SELECT bal FROM acct").await.as_deref(),
        Some("91")
    );
    assert_eq!(
        value(&a, "SELECT count(*) FROM log").await.as_deref(),
        Some("3")
    );

    // A transaction that read a materialized view conflicts with writes
    // to the tables behind it.
    a.batch_execute("CREATE MATERIALIZED VIEW total AS SELECT sum(bal) AS s FROM acct")
        .await
        .unwrap();
    a.batch_execute("BEGIN").await.unwrap();
    assert_eq!(
        value(&a, "SELECT s FROM total").await.as_deref(),
        Some("91")
    );
    a.batch_execute("INSERT INTO log VALUES (4)").await.unwrap();
    b.batch_execute("UPDATE acct SET bal = 0").await.unwrap();
    let err = a.batch_execute("COMMIT").await.unwrap_err();
    assert_eq!(sqlstate(&err), "40001");
    assert_eq!(
        value(&a, "SELECT count(*) FROM log").await.as_deref(),
        Some("3")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ddl_in_a_block_applies_at_commit_and_conflicts_with_concurrent_ddl() {
    let s = Server::start();
    let a = s.connect().await;
    let b = s.connect().await;
    a.batch_execute("BEGIN; CREATE TABLE x (k int PRIMARY KEY); INSERT INTO x VALUES (1)")
        .await
        .unwrap();
    assert_eq!(
        value(&a, "SELECT count(*) FROM x").await.as_deref(),
        Some("1")
    );
    // Not there for anyone else until COMMIT.
    let err = b.simple_query("SELECT * FROM x").await.unwrap_err();
    assert_eq!(sqlstate(&err), "42P01");
    a.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        value(&b, "SELECT count(*) FROM x").await.as_deref(),
        Some("1")
    );

    // Another session's DDL in between that touches nothing the block
    // named: both commit.
    a.batch_execute("BEGIN; CREATE TABLE w (v int)")
        .await
        .unwrap();
    b.batch_execute("CREATE TABLE z (v int)").await.unwrap();
    a.batch_execute("COMMIT").await.unwrap();
    for t in ["w", "z"] {
        assert_eq!(
            value(&b, &format!("SELECT count(*) FROM {t}"))
                .await
                .as_deref(),
            Some("0")
        );
    }

    // Another session's DDL in between that changes what the block named:
    // the block's DDL was checked against an object that is gone, so its
    // COMMIT fails and applies none of it.
    a.batch_execute("BEGIN; CREATE TABLE y (v int); DROP TABLE x")
        .await
        .unwrap();
    b.batch_execute("ALTER TABLE x RENAME TO x_renamed")
        .await
        .unwrap();
    let err = a.batch_execute("COMMIT").await.unwrap_err();
    assert_eq!(sqlstate(&err), "40001");
    assert_eq!(
        value(&b, "SELECT count(*) FROM x_renamed").await.as_deref(),
        Some("1")
    );
    let err = b.simple_query("SELECT * FROM y").await.unwrap_err();
    assert_eq!(sqlstate(&err), "42P01");
    b.batch_execute("ALTER TABLE x_renamed RENAME TO x")
        .await
        .unwrap();

    // A name clash is reported at the statement, as in PostgreSQL.
    a.batch_execute("BEGIN").await.unwrap();
    let err = a.simple_query("CREATE TABLE x (k int)").await.unwrap_err();
    assert_eq!(sqlstate(&err), "42P07");
    a.batch_execute("ROLLBACK").await.unwrap();
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

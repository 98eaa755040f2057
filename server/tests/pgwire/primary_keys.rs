//! Primary keys under concurrent writers and COPY: however writes race,
//! no key is ever held by two rows, and each refused write reports the
//! key it collided on.

use futures::SinkExt;

use crate::harness::*;

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_writers_never_share_a_key() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE k (id int PRIMARY KEY, writer int)")
        .await
        .unwrap();
    // Eight writers each try every key in 0..200, blind inserts and
    // read-then-write upserts mixed; for each key exactly one insert wins.
    let mut tasks = Vec::new();
    for writer in 0..8 {
        let conn = s.connect().await;
        tasks.push(tokio::spawn(async move {
            let mut won = Vec::new();
            for key in 0..200 {
                let sql = if (key + writer) % 3 == 0 {
                    format!(
                        "INSERT INTO k SELECT {key}, {writer} WHERE NOT EXISTS (SELECT 1 FROM k WHERE id = {key})"
                    )
                } else {
                    format!("INSERT INTO k VALUES ({key}, {writer})")
                };
                match conn.execute(sql.as_str(), &[]).await {
                    Ok(1) => won.push(key),
                    Ok(_) => {}
                    Err(e) => assert_eq!(sqlstate(&e), "23505", "{sql}: {e}"),
                }
            }
            won
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        winners.extend(t.await.unwrap());
    }
    winners.sort();
    assert_eq!(winners, (0..200).collect::<Vec<_>>(), "one winner per key");
    assert_eq!(
        rows(&c, "SELECT count(*), count(DISTINCT id) FROM k").await,
        vec![vec![Some("200".into()), Some("200".into())]]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn copy_and_transactions_are_checked_and_name_the_key() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE k (a int, b text, PRIMARY KEY (a, b)); INSERT INTO k VALUES (1, 'x')",
    )
    .await
    .unwrap();
    let sink = c.copy_in("COPY k FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"2\ty\n1\tx\n"))
        .await
        .unwrap();
    let err = sink.finish().await.unwrap_err();
    assert_eq!(sqlstate(&err), "23505", "{err:?}");
    let db = err.as_db_error().unwrap();
    assert_eq!(
        db.message(),
        "duplicate key value violates unique constraint \"k_pkey\""
    );
    assert_eq!(db.detail(), Some("Key (a, b)=(1, x) already exists."));
    assert_eq!(
        value(&c, "SELECT count(*) FROM k").await.as_deref(),
        Some("1")
    );
    // Key columns are NOT NULL, for COPY too (which once failed on any
    // NOT NULL column, building its row of defaults).
    let sink = c.copy_in("COPY k FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"\\N\ty\n"))
        .await
        .unwrap();
    let err = sink.finish().await.unwrap_err();
    assert_eq!(sqlstate(&err), "23502", "{err:?}");
    // Two transactions inserting one key: the second COMMIT fails.
    let other = s.connect().await;
    c.batch_execute("BEGIN; INSERT INTO k VALUES (5, 'z')")
        .await
        .unwrap();
    other
        .batch_execute("BEGIN; INSERT INTO k VALUES (5, 'z')")
        .await
        .unwrap();
    c.batch_execute("COMMIT").await.unwrap();
    let err = other.batch_execute("COMMIT").await.unwrap_err();
    assert_eq!(sqlstate(&err), "23505");
    assert_eq!(
        value(&c, "SELECT count(*) FROM k").await.as_deref(),
        Some("2")
    );
}

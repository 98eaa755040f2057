//! Scans of stored collections read part by part: filters skip parts by
//! their column bounds, `LIMIT` stops reading, `count(*)` is known without
//! reading, and none of it changes an answer — across retractions in other
//! parts and in unflushed writes, a restart, and a view whose query fails.

use futures::SinkExt;

use crate::harness::*;

/// COPY `data` in one CopyData message.
async fn copy(c: &tokio_postgres::Client, sql: &str, data: String) -> u64 {
    let sink = c.copy_in::<_, bytes::Bytes>(sql).await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from(data)).await.unwrap();
    sink.finish().await.unwrap()
}

/// The answers a table of ids 0..20,000 (stored as many small parts)
/// must give after ids ≡ 7 (mod 1,000) were deleted and ids 5 and 15,005
/// renamed.
async fn check_answers(c: &tokio_postgres::Client) {
    assert_eq!(
        value(c, "SELECT count(*) FROM t").await.as_deref(),
        Some("19980")
    );
    assert_eq!(
        rows(c, "SELECT id, name FROM t WHERE id = 15005").await,
        vec![vec![Some("15005".into()), Some("changed".into())]]
    );
    assert!(rows(c, "SELECT * FROM t WHERE id = 1007").await.is_empty());
    assert_eq!(
        value(c, "SELECT count(*) FROM t WHERE id BETWEEN 1000 AND 1099")
            .await
            .as_deref(),
        Some("99")
    );
    assert_eq!(
        value(c, "SELECT count(*) FROM t WHERE name = 'changed'")
            .await
            .as_deref(),
        Some("2")
    );
    assert_eq!(
        value(c, "SELECT sum(id) FROM t WHERE grp = 3 AND id >= 19000")
            .await
            .as_deref(),
        Some(
            (19_000..20_000)
                .filter(|i| i % 10 == 3)
                .sum::<i64>()
                .to_string()
                .as_str()
        )
    );
    assert_eq!(
        value(c, "SELECT count(*) FROM (SELECT * FROM t LIMIT 5) l")
            .await
            .as_deref(),
        Some("5")
    );
    assert_eq!(
        value(
            c,
            "SELECT count(*) FROM (SELECT * FROM t WHERE id > 19990 LIMIT 100) l"
        )
        .await
        .as_deref(),
        Some("9")
    );
    // A join reads the same table twice: ids 1..49 less 7 (deleted) and
    // 8 (its predecessor deleted).
    assert_eq!(
        value(
            c,
            "SELECT count(*) FROM t a JOIN t b ON a.id = b.id + 1 WHERE a.id < 50"
        )
        .await
        .as_deref(),
        Some("47")
    );
}

#[tokio::test]
async fn filtered_and_limited_scans_agree_with_whole_reads() {
    // Tiny parts: the COPY below stages about thirty, each a range of ids.
    let mut s = Server::start_with(&["--copy-part-size", "16KiB"]);
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE t (id int NOT NULL, grp int, name text)")
        .await
        .unwrap();
    let csv: String = (0..20_000)
        .map(|id| format!("{id},{},name-{id}\n", id % 10))
        .collect();
    assert_eq!(
        copy(&c, "COPY t FROM STDIN WITH (FORMAT csv)", csv).await,
        20_000
    );
    // Retractions of rows in the staged parts, some flushed into parts of
    // their own by the writes after them, the last ones still in memory.
    c.batch_execute("DELETE FROM t WHERE id % 1000 = 7 AND id < 10000")
        .await
        .unwrap();
    c.batch_execute("UPDATE t SET name = 'changed' WHERE id IN (5, 15005)")
        .await
        .unwrap();
    c.batch_execute("DELETE FROM t WHERE id % 1000 = 7 AND id >= 10000")
        .await
        .unwrap();
    check_answers(&c).await;
    // A transaction's own writes are read with the table.
    c.batch_execute("BEGIN; DELETE FROM t WHERE id = 15005")
        .await
        .unwrap();
    assert!(
        rows(&c, "SELECT * FROM t WHERE id = 15005")
            .await
            .is_empty()
    );
    assert_eq!(
        value(&c, "SELECT count(*) FROM t").await.as_deref(),
        Some("19979")
    );
    c.batch_execute("ROLLBACK").await.unwrap();
    // After a restart no part's bounds are known until it is read again.
    drop(c);
    s.kill_and_restart();
    let c = s.connect().await;
    check_answers(&c).await;
    check_answers(&c).await;
}

#[tokio::test]
async fn a_failing_view_fails_every_scan_of_it() {
    let s = Server::start_with(&["--copy-part-size", "16KiB"]);
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE d (a int NOT NULL, b int NOT NULL);
         CREATE MATERIALIZED VIEW q AS SELECT a, 10 / b AS r FROM d",
    )
    .await
    .unwrap();
    let csv: String = (0..5_000).map(|a| format!("{a},1\n")).collect();
    copy(&c, "COPY d FROM STDIN WITH (FORMAT csv)", csv).await;
    let reads = [
        "SELECT * FROM q WHERE a = 3",
        "SELECT * FROM q LIMIT 1",
        "SELECT count(*) FROM q",
    ];
    for sql in reads {
        assert!(!rows(&c, sql).await.is_empty(), "{sql}");
    }
    c.batch_execute("INSERT INTO d VALUES (100000, 0)")
        .await
        .unwrap();
    for sql in reads {
        let err = c.simple_query(sql).await.unwrap_err();
        let db = err.as_db_error().unwrap_or_else(|| panic!("{sql}: {err}"));
        assert_eq!(db.code().code(), "22012", "{sql}: {}", db.message());
    }
    c.batch_execute("DELETE FROM d WHERE b = 0").await.unwrap();
    for sql in reads {
        assert!(!rows(&c, sql).await.is_empty(), "{sql}");
    }
    assert_eq!(
        value(&c, "SELECT count(*) FROM q WHERE r = 10")
            .await
            .as_deref(),
        Some("5000")
    );
}

/// `EXPLAIN VERBOSE` adds the physical plan a read would run now, its scan
/// bound to the read's time: a key range keeps one of the six parts (six
/// COPYs of separate id ranges, each larger than the part size and sent in
/// one message, so each is staged as one part with its bounds; too few to
/// be compacted) and reads only the columns it uses; plain `EXPLAIN` stays
/// the logical plan.
#[tokio::test]
async fn explain_verbose_shows_the_parts_a_scan_reads() {
    let s = Server::start_with(&["--copy-part-size", "16KiB"]);
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE t (id int NOT NULL, grp int, name text)")
        .await
        .unwrap();
    for batch in 0..6 {
        let csv: String = (batch * 1000..(batch + 1) * 1000)
            .map(|id| format!("{id},{},name-{id}\n", id % 10))
            .collect();
        assert_eq!(
            copy(&c, "COPY t FROM STDIN WITH (FORMAT csv)", csv).await,
            1000
        );
    }
    let explain = |sql: String| {
        let c = &c;
        async move {
            rows(c, &sql)
                .await
                .into_iter()
                .map(|r| r[0].clone().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    let query = "SELECT name FROM t WHERE id BETWEEN 2100 AND 2200";
    let plain = explain(format!("EXPLAIN {query}")).await;
    assert!(!plain.contains("Physical plan"), "{plain}");
    for verbose in ["EXPLAIN VERBOSE", "EXPLAIN (VERBOSE)"] {
        let plan = explain(format!("{verbose} {query}")).await;
        let scan = plan
            .lines()
            .find(|l| l.contains("PartScanExec"))
            .unwrap_or_else(|| panic!("no scan in {plan}"));
        assert!(
            scan.contains("parts=1/6"),
            "one part of six is read: {scan}"
        );
        assert!(
            scan.contains("projection=[0, 2]"),
            "id and name only: {scan}"
        );
        assert!(
            scan.contains("freshet.public.t"),
            "the table is named: {scan}"
        );
    }
    let off = explain(format!("EXPLAIN (VERBOSE false) {query}")).await;
    assert!(!off.contains("Physical plan"), "{off}");
    assert_eq!(rows(&c, query).await.len(), 101);
}

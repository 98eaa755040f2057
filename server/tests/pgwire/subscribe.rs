//! SUBSCRIBE over the wire: `COPY (SUBSCRIBE ...) TO STDOUT` streams and
//! cursors, envelopes, progress, AS OF / UP TO, and every way a subscribe
//! ends (completion, cancel, disconnect, a dropped input, a slow client).

use std::pin::Pin;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use tokio_postgres::{Client, CopyOutStream, NoTls, SimpleQueryMessage};

use crate::harness::*;

/// A COPY stream read line by line, split into tab-separated fields.
struct Lines {
    stream: Pin<Box<CopyOutStream>>,
    pending: String,
}

/// How long a test waits for a row that must come.
const PATIENCE: Duration = Duration::from_secs(30);

impl Lines {
    async fn open(client: &Client, sql: &str) -> Lines {
        let stream = client.copy_out(sql).await.expect(sql);
        Lines {
            stream: Box::pin(stream),
            pending: String::new(),
        }
    }

    /// The next line, `Ok(None)` at the end of the stream.
    async fn next(&mut self) -> Result<Option<Vec<String>>, tokio_postgres::Error> {
        loop {
            if let Some(i) = self.pending.find('\n') {
                let line: String = self.pending.drain(..=i).collect();
                return Ok(Some(
                    line.trim_end_matches('\n')
                        .split('\t')
                        .map(str::to_string)
                        .collect(),
                ));
            }
            let chunk: Option<Result<Bytes, _>> =
                tokio::time::timeout(PATIENCE, self.stream.next())
                    .await
                    .expect("a subscribe row within the test's patience");
            match chunk {
                None => return Ok(None),
                Some(chunk) => self
                    .pending
                    .push_str(std::str::from_utf8(&chunk?).expect("utf-8")),
            }
        }
    }

    async fn line(&mut self) -> Vec<String> {
        self.next().await.expect("row").expect("stream still open")
    }

    /// Lines up to and including the next progress row (with PROGRESS,
    /// whose second field is `t`), skipping progress rows with no data
    /// before them; returns the data rows and the progress time.
    async fn until_progress(&mut self) -> (Vec<Vec<String>>, u64) {
        let mut data = Vec::new();
        loop {
            let l = self.line().await;
            if l[1] == "t" {
                if data.is_empty() {
                    continue;
                }
                return (data, l[0].parse().expect("timestamp"));
            }
            data.push(l);
        }
    }
}

/// A failure's message as the server sent it.
fn message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_else(|| e.to_string())
}

/// The error starting a COPY fails with.
async fn copy_error(c: &Client, sql: &str) -> tokio_postgres::Error {
    match c.copy_out(sql).await {
        Ok(_) => panic!("{sql} started"),
        Err(e) => e,
    }
}

/// `(diff, k, v)` of data rows, sorted, for rows of one timestamp.
fn changes(rows: &[Vec<String>], skip: usize) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = rows.iter().map(|r| r[skip..].to_vec()).collect();
    out.sort();
    out
}

fn row(fields: &[&str]) -> Vec<String> {
    fields.iter().map(|s| s.to_string()).collect()
}

/// Wait until `table` has no read holds.
async fn holds_released(c: &Client, table: &str) {
    let deadline = Instant::now() + PATIENCE;
    while holds_on(c, table).await > 0 {
        assert!(
            Instant::now() < deadline,
            "holds on {table} were not released"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn copy_subscribe_streams_the_snapshot_then_each_change() {
    let s = Server::start();
    let c = s.connect().await;
    let writer = s.connect().await;
    c.batch_execute("CREATE TABLE t (k int, v text); INSERT INTO t VALUES (1, 'a'), (2, 'b')")
        .await
        .unwrap();
    let mut lines = Lines::open(&c, "COPY (SUBSCRIBE t WITH (PROGRESS)) TO STDOUT").await;
    let (snapshot, after_snapshot) = lines.until_progress().await;
    assert!(
        snapshot
            .iter()
            .all(|r| r[1] == "f" && r[0] == snapshot[0][0])
    );
    assert_eq!(
        changes(&snapshot, 2),
        [row(&["1", "1", "a"]), row(&["1", "2", "b"])]
    );
    let as_of: u64 = snapshot[0][0].parse().unwrap();
    assert!(after_snapshot > as_of);

    writer
        .batch_execute("INSERT INTO t VALUES (3, 'c')")
        .await
        .unwrap();
    let (insert, p1) = lines.until_progress().await;
    assert_eq!(changes(&insert, 2), [row(&["1", "3", "c"])]);
    let t1: u64 = insert[0][0].parse().unwrap();
    assert!(t1 >= after_snapshot && p1 > t1);

    writer
        .batch_execute("UPDATE t SET v = 'z' WHERE k = 1")
        .await
        .unwrap();
    let (update, _) = lines.until_progress().await;
    // An update is a retraction and an insertion at one time.
    assert_eq!(update[0][0], update[1][0]);
    assert_eq!(
        changes(&update, 2),
        [row(&["-1", "1", "a"]), row(&["1", "1", "z"])]
    );

    writer
        .batch_execute("DELETE FROM t WHERE k = 2")
        .await
        .unwrap();
    let (delete, _) = lines.until_progress().await;
    assert_eq!(changes(&delete, 2), [row(&["-1", "2", "b"])]);

    // A transaction's writes arrive together, at one time.
    writer
        .batch_execute(
            "BEGIN; INSERT INTO t VALUES (4, 'd'); INSERT INTO t VALUES (5, 'e'); COMMIT",
        )
        .await
        .unwrap();
    let (txn, _) = lines.until_progress().await;
    assert_eq!(txn.len(), 2);
    assert_eq!(txn[0][0], txn[1][0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn subscribe_options_snapshot_as_of_and_up_to() {
    let s = Server::start();
    let c = s.connect().await;
    let writer = s.connect().await;
    c.batch_execute("CREATE TABLE t (k int); INSERT INTO t VALUES (1)")
        .await
        .unwrap();

    // Without the snapshot, only changes after the start time come.
    let mut lines = Lines::open(
        &c,
        "COPY (SUBSCRIBE t WITH (SNAPSHOT = false, PROGRESS = true)) TO STDOUT",
    )
    .await;
    writer
        .batch_execute("INSERT INTO t VALUES (2)")
        .await
        .unwrap();
    let (data, _) = lines.until_progress().await;
    assert_eq!(changes(&data, 2), [row(&["1", "2"])]);
    // (A connection streaming a subscribe is busy until it ends, as with
    // any COPY: later statements use other connections.)
    drop(lines);
    let c = s.connect().await;

    // UP TO ends the subscribe by itself once time passes it; every row
    // is before it. (Bare SUBSCRIBE streams like COPY.)
    let other = s.connect().await;
    let mut probe = Lines::open(&other, "COPY (SUBSCRIBE t WITH (PROGRESS)) TO STDOUT").await;
    let now: u64 = probe.line().await[0].parse().unwrap();
    drop(probe);
    let up_to = now + 3_000;
    let mut bounded = Lines::open(
        &c,
        &format!("COPY (SUBSCRIBE t AS OF AT LEAST {now} UP TO {up_to}) TO STDOUT"),
    )
    .await;
    writer
        .batch_execute("INSERT INTO t VALUES (3)")
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Some(l) = bounded.next().await.unwrap() {
        assert!(
            l[0].parse::<u64>().unwrap() < up_to,
            "{l:?} is not before UP TO"
        );
        seen.push(l[2].clone());
    }
    seen.sort();
    assert_eq!(seen, ["1", "2", "3"]);

    // AS OF a time already compacted away is refused, naming the input.
    let err = copy_error(&c, "COPY (SUBSCRIBE t AS OF 5) TO STDOUT").await;
    assert_eq!(sqlstate(&err), "22000");
    assert!(
        message(&err).contains("is not valid for all inputs"),
        "{err}"
    );
    let err = copy_error(
        &c,
        &format!("COPY (SUBSCRIBE t AS OF {up_to} UP TO {now}) TO STDOUT"),
    )
    .await;
    assert_eq!(sqlstate(&err), "22023");
}

#[tokio::test(flavor = "multi_thread")]
async fn envelopes_say_what_each_key_became() {
    let s = Server::start();
    let c = s.connect().await;
    let writer = s.connect().await;
    c.batch_execute("CREATE TABLE t (k int, v text); INSERT INTO t VALUES (1, 'a')")
        .await
        .unwrap();
    let mut upsert = Lines::open(
        &c,
        "COPY (SUBSCRIBE t ENVELOPE UPSERT (KEY (k)) WITH (PROGRESS)) TO STDOUT",
    )
    .await;
    let other = s.connect().await;
    let mut debezium = Lines::open(
        &other,
        "COPY (SUBSCRIBE t ENVELOPE DEBEZIUM (KEY (k)) WITH (PROGRESS)) TO STDOUT",
    )
    .await;
    assert_eq!(
        changes(&upsert.until_progress().await.0, 2),
        [row(&["upsert", "1", "a"])]
    );
    assert_eq!(
        changes(&debezium.until_progress().await.0, 2),
        [row(&["insert", "1", "\\N", "a"])]
    );
    // (write, upsert rows, Debezium rows)
    type Rows = Vec<Vec<String>>;
    let steps: [(&str, Rows, Rows); 4] = [
        (
            "UPDATE t SET v = 'b' WHERE k = 1",
            vec![row(&["upsert", "1", "b"])],
            vec![row(&["upsert", "1", "a", "b"])],
        ),
        (
            "INSERT INTO t VALUES (2, 'x'), (1, 'c')",
            vec![
                row(&["key_violation", "1", "\\N"]),
                row(&["upsert", "2", "x"]),
            ],
            vec![
                row(&["insert", "2", "\\N", "x"]),
                row(&["key_violation", "1", "\\N", "\\N"]),
            ],
        ),
        (
            "DELETE FROM t WHERE v = 'c'",
            vec![row(&["upsert", "1", "b"])],
            vec![row(&["key_violation", "1", "\\N", "\\N"])],
        ),
        (
            "DELETE FROM t WHERE k = 1",
            vec![row(&["delete", "1", "\\N"])],
            vec![row(&["delete", "1", "b", "\\N"])],
        ),
    ];
    for (sql, want_upsert, want_debezium) in steps {
        writer.batch_execute(sql).await.unwrap();
        let mut want_upsert = want_upsert;
        want_upsert.sort();
        let mut want_debezium = want_debezium;
        want_debezium.sort();
        assert_eq!(
            changes(&upsert.until_progress().await.0, 2),
            want_upsert,
            "{sql}"
        );
        assert_eq!(
            changes(&debezium.until_progress().await.0, 2),
            want_debezium,
            "{sql}"
        );
    }
    let fresh = s.connect().await;
    let err = copy_error(
        &fresh,
        "COPY (SUBSCRIBE t ENVELOPE UPSERT (KEY (nope))) TO STDOUT",
    )
    .await;
    assert_eq!(sqlstate(&err), "42703");
}

/// Rows of a simple-protocol `FETCH`.
async fn fetch(c: &Client, sql: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for m in c.simple_query(sql).await.expect(sql) {
        if let SimpleQueryMessage::Row(r) = m {
            out.push(
                (0..r.len())
                    .map(|i| r.get(i).unwrap_or("NULL").to_string())
                    .collect(),
            );
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn cursors_fetch_subscribes_with_timeouts() {
    let s = Server::start();
    let c = s.connect().await;
    let writer = s.connect().await;
    c.batch_execute("CREATE TABLE t (k int); INSERT INTO t VALUES (1), (2)")
        .await
        .unwrap();
    let err = c
        .batch_execute("DECLARE c CURSOR FOR SUBSCRIBE t")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "25P01");

    c.batch_execute("BEGIN; DECLARE c CURSOR FOR SUBSCRIBE t")
        .await
        .unwrap();
    // FETCH without a timeout waits for rows; the snapshot is there.
    let first = fetch(&c, "FETCH 1 c").await;
    assert_eq!(first.len(), 1);
    let rest = fetch(&c, "FETCH ALL c").await;
    let mut snapshot: Vec<String> = first.iter().chain(&rest).map(|r| r[2].clone()).collect();
    snapshot.sort();
    assert_eq!(snapshot, ["1", "2"]);
    assert!(first.iter().chain(&rest).all(|r| r[1] == "1"));

    // Nothing new: a timeout returns no rows instead of waiting.
    assert!(
        fetch(&c, "FETCH ALL c WITH (timeout = '100ms')")
            .await
            .is_empty()
    );
    assert!(fetch(&c, "FETCH 5 c WITH (timeout = 0)").await.is_empty());

    // A FETCH waiting for rows returns as soon as a write lands.
    let waiting = tokio::spawn(async move {
        let got = fetch(&c, "FETCH 10 c WITH (timeout = '30s')").await;
        (got, c)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    writer
        .batch_execute("INSERT INTO t VALUES (3)")
        .await
        .unwrap();
    let (got, c) = waiting.await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0][1..], ["1", "3"]);

    // The column descriptions are the subscribe's, also for the extended
    // protocol.
    let described = c
        .query("FETCH ALL c WITH (timeout = 0)", &[])
        .await
        .unwrap();
    assert!(described.is_empty());
    let stmt = c.prepare("FETCH 1 c WITH (timeout = 0)").await.unwrap();
    let names: Vec<&str> = stmt.columns().iter().map(|c| c.name()).collect();
    assert_eq!(names, ["mz_timestamp", "mz_diff", "k"]);

    c.batch_execute("CLOSE c").await.unwrap();
    let err = c.batch_execute("FETCH 1 c").await.unwrap_err();
    assert_eq!(sqlstate(&err), "34000");
    c.batch_execute("ROLLBACK").await.unwrap();
    holds_released(&writer, "t").await;

    // Cursors over plain queries page through their rows.
    c.batch_execute("BEGIN; DECLARE q CURSOR FOR SELECT k FROM t ORDER BY k")
        .await
        .unwrap();
    assert_eq!(fetch(&c, "FETCH 2 q").await, [row(&["1"]), row(&["2"])]);
    assert_eq!(fetch(&c, "FETCH ALL FROM q").await, [row(&["3"])]);
    assert!(fetch(&c, "FETCH NEXT q").await.is_empty());
    c.batch_execute("COMMIT").await.unwrap();
    // COMMIT closed it.
    c.batch_execute("BEGIN").await.unwrap();
    let err = c.batch_execute("FETCH 1 q").await.unwrap_err();
    assert_eq!(sqlstate(&err), "34000");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_and_disconnect_end_subscribes_and_release_holds() {
    let s = Server::start();
    let observer = s.connect().await;
    observer
        .batch_execute("CREATE TABLE t (k int); INSERT INTO t VALUES (1)")
        .await
        .unwrap();

    // CancelRequest.
    let c = s.connect().await;
    let token = c.cancel_token();
    let mut lines = Lines::open(&c, "COPY (SUBSCRIBE t) TO STDOUT").await;
    assert_eq!(lines.line().await[2], "1");
    assert_eq!(holds_on(&observer, "t").await, 1);
    token.cancel_query(NoTls).await.unwrap();
    let err = loop {
        match lines.next().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("a cancelled subscribe ends with an error"),
            Err(e) => break e,
        }
    };
    assert_eq!(sqlstate(&err), "57014");
    holds_released(&observer, "t").await;
    drop(lines);
    assert_eq!(
        value(&c, "SELECT count(*) FROM t").await.as_deref(),
        Some("1")
    );

    // The client vanishes while nothing is flowing.
    let (client, connection) = tokio_postgres::connect(&s.conn_str("freshet"), NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    let mut quiet = Lines::open(&client, "COPY (SUBSCRIBE t) TO STDOUT").await;
    quiet.line().await;
    assert_eq!(holds_on(&observer, "t").await, 1);
    driver.abort();
    drop(quiet);
    drop(client);
    holds_released(&observer, "t").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_an_input_ends_the_subscribe_with_an_error() {
    let s = Server::start();
    let c = s.connect().await;
    let ddl = s.connect().await;
    // The view is indexed: the subscribe reads the index's arrangement.
    c.batch_execute(
        "CREATE TABLE t (k int); CREATE VIEW v AS SELECT k + 1 AS k1 FROM t; \
         CREATE DEFAULT INDEX ON v; INSERT INTO t VALUES (1)",
    )
    .await
    .unwrap();
    let mut lines = Lines::open(&c, "COPY (SUBSCRIBE v) TO STDOUT").await;
    assert_eq!(lines.line().await[2], "2");
    ddl.batch_execute("INSERT INTO t VALUES (5)").await.unwrap();
    assert_eq!(lines.line().await[1..], ["1", "6"]);
    ddl.batch_execute("DROP VIEW v").await.unwrap();
    let err = lines.next().await.unwrap_err();
    assert!(message(&err).contains("was dropped"), "{err}");
    assert!(message(&err).contains("freshet.public.v"), "{err}");
    holds_released(&ddl, "t").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_client_ends_its_subscribe_without_stalling_writers() {
    let s = Server::start();
    let c = s.connect().await;
    let writer = s.connect().await;
    c.batch_execute("CREATE TABLE t (k int); SET subscribe_buffer_limit = 10")
        .await
        .unwrap();
    c.batch_execute("BEGIN; DECLARE c CURSOR FOR SUBSCRIBE t")
        .await
        .unwrap();
    // The client never reads: writes go on.
    for i in 0..5 {
        writer
            .batch_execute(&format!(
                "INSERT INTO t SELECT * FROM generate_series({}, {})",
                i * 10,
                i * 10 + 9
            ))
            .await
            .unwrap();
    }
    assert_eq!(
        value(&writer, "SELECT count(*) FROM t").await.as_deref(),
        Some("50")
    );
    let err = loop {
        match c.simple_query("FETCH ALL c WITH (timeout = '1s')").await {
            Ok(_) => continue,
            Err(e) => break e,
        }
    };
    assert_eq!(sqlstate(&err), "53400");
    c.batch_execute("ROLLBACK").await.unwrap();
    holds_released(&writer, "t").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn subscribes_over_queries_carry_their_errors_and_refuse_what_cannot_be_maintained() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE t (k int); INSERT INTO t VALUES (1), (0)")
        .await
        .unwrap();
    let mut lines = Lines::open(&c, "COPY (SUBSCRIBE (SELECT 10 / k FROM t)) TO STDOUT").await;
    let err = lines.next().await.unwrap_err();
    assert_eq!(sqlstate(&err), "22012");

    // A query over a materialized view and a join, maintained.
    c.batch_execute(
        "CREATE MATERIALIZED VIEW m AS SELECT k, count(*) AS n FROM t GROUP BY k; \
         CREATE TABLE u (k int)",
    )
    .await
    .unwrap();
    let sub = s.connect().await;
    let mut joined = Lines::open(
        &sub,
        "COPY (SUBSCRIBE (SELECT m.k, m.n FROM m JOIN u ON m.k = u.k) WITH (PROGRESS)) TO STDOUT",
    )
    .await;
    c.batch_execute("INSERT INTO u VALUES (1)").await.unwrap();
    let (data, _) = joined.until_progress().await;
    assert_eq!(changes(&data, 2), [row(&["1", "1", "1"])]);

    for (sql, code) in [
        ("SUBSCRIBE (SELECT now())", "0A000"),
        ("SUBSCRIBE t WITH (BOGUS)", "22023"),
        ("SUBSCRIBE nope", "42P01"),
        ("SUBSCRIBE t AS OF 'soon'", "22023"),
    ] {
        let err = copy_error(&c, sql).await;
        assert_eq!(sqlstate(&err), code, "{sql}: {err}");
    }
    c.batch_execute("CREATE INDEX t_idx ON t (k)")
        .await
        .unwrap();
    let err = copy_error(&c, "SUBSCRIBE t_idx").await;
    assert_eq!(sqlstate(&err), "42809", "{err}");
}

/// Fold a subscribe's rows into the multiset they describe, up to and
/// including time `through` (rows are `mz_timestamp, mz_progressed,
/// mz_diff, columns...`).
fn accumulate(rows: &[Vec<String>], through: u64) -> Vec<Vec<String>> {
    let mut counts: std::collections::BTreeMap<Vec<String>, i64> = Default::default();
    for r in rows {
        if r[1] == "t" || r[0].parse::<u64>().unwrap() > through {
            continue;
        }
        *counts.entry(r[3..].to_vec()).or_default() += r[2].parse::<i64>().unwrap();
    }
    let mut out = Vec::new();
    for (row, n) in counts {
        assert!(n >= 0, "negative multiplicity {n} for {row:?}");
        out.extend(std::iter::repeat_n(row, n as usize));
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscribe_accumulates_to_its_query_at_every_read() {
    let s = Server::start();
    let c = s.connect().await;
    let sub = s.connect().await;
    c.batch_execute(
        "CREATE TABLE a (k int, x int); CREATE TABLE b (k int, label text); \
         INSERT INTO a VALUES (1, 10), (2, 20); INSERT INTO b VALUES (1, 'one')",
    )
    .await
    .unwrap();
    let query = "SELECT b.label, count(*) AS n, sum(a.x) AS total \
                 FROM a JOIN b ON a.k = b.k GROUP BY b.label";
    let mut lines = Lines::open(
        &sub,
        &format!("COPY (SUBSCRIBE ({query}) WITH (PROGRESS)) TO STDOUT"),
    )
    .await;
    let mut seen: Vec<Vec<String>> = Vec::new();
    // A fixed pseudo-random sequence of writes; after each, the query's
    // answer now must equal the subscribe's rows folded up to a time the
    // subscribe has passed that covers the read.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    for step in 0..25 {
        let k = next(5);
        let sql = match next(4) {
            0 => format!("INSERT INTO a VALUES ({k}, {})", next(100)),
            1 => format!("INSERT INTO b VALUES ({k}, 'l{}')", next(3)),
            2 => format!("DELETE FROM a WHERE k = {k}"),
            _ => format!("UPDATE a SET x = x + 1 WHERE k = {k}"),
        };
        c.batch_execute(&sql).await.unwrap();
        // The time a strict-serializable read picks now covers the write.
        let ts: u64 = rows(&c, &format!("EXPLAIN TIMESTAMP FOR {query}"))
            .await
            .iter()
            .find_map(|r| {
                r[0].as_deref()?
                    .trim()
                    .strip_prefix("query timestamp:")
                    .and_then(|v| v.split_whitespace().next()?.parse().ok())
            })
            .expect("EXPLAIN TIMESTAMP names the query timestamp");
        let mut want: Vec<Vec<String>> = rows(&c, query)
            .await
            .into_iter()
            .map(|r| {
                r.into_iter()
                    .map(|v| v.unwrap_or_else(|| "\\N".into()))
                    .collect()
            })
            .collect();
        want.sort();
        // Read the subscribe until it has progressed past `ts`.
        loop {
            let l = lines.line().await;
            let progressed = l[1] == "t" && l[0].parse::<u64>().unwrap() > ts;
            seen.push(l);
            if progressed {
                break;
            }
        }
        let mut got = accumulate(&seen, ts);
        got.sort();
        assert_eq!(got, want, "after step {step}: {sql}");
    }
}

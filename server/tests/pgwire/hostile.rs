//! No client can crash, stall or starve the server (issue 14): each case
//! here once took the process down, froze it, or let one client hold
//! resources without bound.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::bad_input::{query_message, raw_connect, read_messages, startup_message};
use crate::harness::*;

/// A frontend message: type byte, length, body.
fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// Parse of `sql` into the unnamed statement, no parameter types.
fn parse(sql: &str) -> Vec<u8> {
    let mut body = vec![0u8];
    body.extend_from_slice(sql.as_bytes());
    body.extend_from_slice(&[0, 0, 0]);
    message(b'P', &body)
}

/// Bind of the unnamed statement to the unnamed portal, no parameters.
fn bind() -> Vec<u8> {
    message(b'B', &[0, 0, 0, 0, 0, 0, 0, 0])
}

/// Execute of the unnamed portal asking for `max_rows`.
fn execute(max_rows: i32) -> Vec<u8> {
    let mut body = vec![0u8];
    body.extend_from_slice(&max_rows.to_be_bytes());
    message(b'E', &body)
}

fn sync() -> Vec<u8> {
    message(b'S', &[])
}

/// The SQLSTATE of an ErrorResponse body.
fn error_code(body: &[u8]) -> Option<String> {
    body.split(|b| *b == 0)
        .find(|f| f.first() == Some(&b'C'))
        .map(|f| String::from_utf8_lossy(&f[1..]).into_owned())
}

fn kinds(messages: &[(u8, Vec<u8>)]) -> Vec<u8> {
    messages.iter().map(|(k, _)| *k).collect()
}

async fn still_serving(s: &Server) {
    let c = s.connect().await;
    assert_eq!(value(&c, "SELECT 41 + 1").await.as_deref(), Some("42"));
}

#[tokio::test(flavor = "multi_thread")]
async fn execute_may_ask_for_any_number_of_rows() {
    let s = Server::start();
    let sql = "SELECT * FROM generate_series(1, 5)";
    // Asking for 2^31 - 1 rows (pgwire once sized a buffer by it and
    // aborted the process), and a negative count (all rows, as PostgreSQL).
    for max_rows in [i32::MAX, -1, i32::MIN] {
        let mut sock = raw_connect(&s);
        let mut batch = parse(sql);
        batch.extend(bind());
        batch.extend(execute(max_rows));
        batch.extend(sync());
        sock.write_all(&batch).unwrap();
        let seen = kinds(&read_messages(&mut sock));
        assert_eq!(
            seen.iter().filter(|k| **k == b'D').count(),
            5,
            "max_rows {max_rows}: {seen:?}"
        );
        assert!(seen.contains(&b'C'), "max_rows {max_rows}: {seen:?}");
    }
    // A huge request on a suspended portal.
    let mut sock = raw_connect(&s);
    let mut batch = parse(sql);
    batch.extend(bind());
    batch.extend(execute(2));
    batch.extend(execute(i32::MAX));
    batch.extend(sync());
    sock.write_all(&batch).unwrap();
    let seen = kinds(&read_messages(&mut sock));
    assert_eq!(seen.iter().filter(|k| **k == b'D').count(), 5, "{seen:?}");
    assert!(seen.contains(&b's'), "the first Execute suspends: {seen:?}");
    still_serving(&s).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn parameter_numbers_no_bind_could_supply_are_42p02() {
    let s = Server::start();
    let c = s.connect().await;
    for sql in [
        "SELECT $4000000000",
        "SELECT $100000000",
        "SELECT $65536::int",
        "SELECT $0",
    ] {
        let err = c.prepare(sql).await.unwrap_err();
        assert_eq!(sqlstate(&err), "42P02", "{sql}: {err:?}");
    }
    // The highest number a Bind can carry is still accepted.
    let stmt = c.prepare("SELECT $65535::int").await.unwrap();
    assert_eq!(stmt.params().len(), 65535);
    still_serving(&s).await;
}

fn chain(op: &str, n: usize) -> String {
    (1..=n).map(|i| i.to_string()).collect::<Vec<_>>().join(op)
}

#[tokio::test(flavor = "multi_thread")]
async fn long_flat_expressions_plan_or_are_refused_with_54001() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE s (g int); INSERT INTO s SELECT * FROM generate_series(1, 10)")
        .await
        .unwrap();
    // Chains up to the limit (a few thousand terms once overflowed the
    // stack, and took minutes to plan) plan and run.
    let n = 9_000;
    let sum = value(&c, &format!("SELECT {}", chain(" + ", n))).await;
    assert_eq!(sum, Some((n * (n + 1) / 2).to_string()));
    // Over a column, with a step that overflows: the chain is checked at
    // every step, as the nested operators are.
    let terms = vec!["g"; 5_000].join(" + ");
    let total = value(&c, &format!("SELECT sum({terms}) FROM s")).await;
    assert_eq!(total.as_deref(), Some((55 * 5_000).to_string().as_str()));
    let err = c
        .simple_query(&format!("SELECT {terms} + 2147483647 - 2147483647 FROM s"))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22003", "{err:?}");
    let any = value(
        &c,
        &format!(
            "SELECT count(*) FROM s WHERE {}",
            (1..=4_000)
                .map(|i| format!("g = {}", i * 7))
                .collect::<Vec<_>>()
                .join(" OR ")
        ),
    )
    .await;
    assert_eq!(any.as_deref(), Some("1"));
    // Past the limit: refused before any tree is built.
    for (op, n) in [
        (" + ", 10_002),
        (" - ", 50_000),
        (" OR ", 50_000),
        (" || ", 50_000),
    ] {
        let err = c
            .simple_query(&format!("SELECT {}", chain(op, n)))
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&err), "54001", "{op}: {err:?}");
    }
    // An IN list is a list, not a chain.
    let list = (1..=10_000)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let hit = value(
        &c,
        &format!("SELECT count(*) FROM s WHERE g * 1000 IN ({list})"),
    )
    .await;
    assert_eq!(hit.as_deref(), Some("10"));
    still_serving(&s).await;
}

/// Wait until the server has used no more than `budget` of CPU over
/// `window`, i.e. a query it was told to stop has stopped.
async fn assert_goes_idle(s: &Server, what: &str) {
    let window = Duration::from_secs(2);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let before = s.cpu_time();
        tokio::time::sleep(window).await;
        let used = s.cpu_time() - before;
        if used < window / 4 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the server still burns {used:?} of CPU per {window:?}"
        );
    }
}

/// A cross join big enough to run for minutes unless stopped.
const ENDLESS: &str = "SELECT count(*) FROM big a, big b, big c WHERE a.x + b.x + c.x = -1";

async fn with_big_table(s: &Server) -> tokio_postgres::Client {
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE big (x int); INSERT INTO big SELECT * FROM generate_series(1, 2000)",
    )
    .await
    .unwrap();
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn statement_timeout_and_cancel_stop_the_work() {
    let s = Server::start();
    let c = with_big_table(&s).await;
    c.batch_execute("SET statement_timeout = '300ms'")
        .await
        .unwrap();
    let err = c.simple_query(ENDLESS).await.unwrap_err();
    assert_eq!(sqlstate(&err), "57014", "{err:?}");
    assert_goes_idle(&s, "after statement_timeout").await;
    // The session is usable at once.
    assert_eq!(value(&c, "SELECT 1").await.as_deref(), Some("1"));

    c.batch_execute("SET statement_timeout = 0").await.unwrap();
    let cancel = c.cancel_token();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel_query(tokio_postgres::NoTls).await
    });
    let err = c.simple_query(ENDLESS).await.unwrap_err();
    assert_eq!(sqlstate(&err), "57014", "{err:?}");
    canceller.await.unwrap().unwrap();
    assert_goes_idle(&s, "after a CancelRequest").await;
    assert_eq!(value(&c, "SELECT 1").await.as_deref(), Some("1"));

    // A client that goes away mid-query stops its query too.
    let mut sock = raw_connect(&s);
    sock.write_all(&query_message(ENDLESS)).unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(sock);
    assert_goes_idle(&s, "after the client disconnected").await;
    still_serving(&s).await;
}

// A nested-loop join whose filter rejects every pair computes a whole
// probe batch against its build side in one poll, holding its thread for
// seconds; the query runtime has more threads than cores so that the
// operating system, not tokio, shares the cores with other sessions.
#[tokio::test(flavor = "multi_thread")]
async fn a_running_query_does_not_stall_other_sessions() {
    let s = Server::start();
    let c = with_big_table(&s).await;
    let busy: Vec<_> = (0..2)
        .map(|_| {
            let conn = s.conn_str("freshet");
            tokio::spawn(async move {
                let (client, connection) = tokio_postgres::connect(&conn, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                tokio::spawn(connection);
                client
                    .batch_execute("SET statement_timeout = '20s'")
                    .await
                    .unwrap();
                let _ = client.simple_query(ENDLESS).await;
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // With both cores busy running those queries, new connections are
    // accepted and short statements answered (before either query ends).
    for _ in 0..5 {
        let other = s.connect().await;
        assert_eq!(value(&other, "SELECT 1").await.as_deref(), Some("1"));
        assert_eq!(
            value(&c, "SELECT count(*) FROM big").await.as_deref(),
            Some("2000")
        );
    }
    assert!(
        busy.iter().all(|b| !b.is_finished()),
        "the long queries should still be running"
    );
    for b in busy {
        b.abort();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn query_memory_is_bounded_and_sorts_spill() {
    let s = Server::start_with(&["--query-memory-limit", "16MiB"]);
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE big (x int); INSERT INTO big SELECT * FROM generate_series(1, 2000)",
    )
    .await
    .unwrap();
    // 4M rows of result cannot be held: 53200, not an ever-growing server.
    let err = c
        .simple_query("SELECT a.x, b.x FROM big a, big b")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "53200", "{err:?}");
    // Sorting 4M rows needs more than 16 MiB: the sort spills to disk and
    // the answer is right.
    let n = value(
        &c,
        "SELECT count(*) FROM (SELECT a.x * 2001 + b.x AS k FROM big a, big b ORDER BY k DESC LIMIT 3000000) q",
    )
    .await;
    assert_eq!(n.as_deref(), Some("3000000"));
    // COPY FROM STDIN is not bounded by the budget (rows are made and
    // staged as they arrive): 40 MiB of 1 MiB rows load.
    use futures::SinkExt;
    c.batch_execute("CREATE TABLE sink (line text)")
        .await
        .unwrap();
    let line = bytes::Bytes::from(
        vec![b'x'; 1 << 20]
            .into_iter()
            .chain([b'\n'])
            .collect::<Vec<_>>(),
    );
    let copy = c
        .copy_in::<_, bytes::Bytes>("COPY sink FROM STDIN")
        .await
        .unwrap();
    let mut copy = std::pin::pin!(copy);
    for _ in 0..40 {
        copy.send(line.clone()).await.unwrap();
    }
    assert_eq!(copy.finish().await.unwrap(), 40);
    // One row is: a row that outgrows the budget fails the COPY (the
    // rest of its data is discarded as it arrives).
    let copy = c
        .copy_in::<_, bytes::Bytes>("COPY sink FROM STDIN")
        .await
        .unwrap();
    let mut copy = std::pin::pin!(copy);
    let no_newline = bytes::Bytes::from(vec![b'y'; 1 << 20]);
    let mut err = None;
    for _ in 0..40 {
        if let Err(e) = copy.send(no_newline.clone()).await {
            err = Some(e);
            break;
        }
    }
    let err = match err {
        Some(e) => e,
        None => copy.finish().await.unwrap_err(),
    };
    assert_eq!(sqlstate(&err), "53200", "{err:?}");
    assert_eq!(
        value(&c, "SELECT count(*) FROM sink").await.as_deref(),
        Some("40")
    );
    still_serving(&s).await;
}

/// The `failure` of the dataflow maintaining `name`, once it has one.
async fn wait_for_failure(c: &tokio_postgres::Client, name: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let failure = value(
            c,
            &format!(
                "SELECT failure FROM freshet_internal.dataflows \
                 WHERE object_name LIKE '%.{name}' AND failure IS NOT NULL"
            ),
        )
        .await;
        if let Some(f) = failure {
            return f;
        }
        assert!(Instant::now() < deadline, "{name} never failed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn arrangements_beyond_the_server_bound_fail_their_object_not_the_process() {
    let s = Server::start_with(&["--max-arrangement-memory", "4MiB"]);
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE big (k bigint, v text); \
         INSERT INTO big SELECT g, repeat('x', 40) FROM generate_series(1, 200000) AS s(g); \
         CREATE TABLE small (k int); INSERT INTO small VALUES (1), (2), (2); \
         CREATE MATERIALIZED VIEW small_counts AS SELECT k, count(*) AS n FROM small GROUP BY k",
    )
    .await
    .unwrap();
    // 200,000 distinct groups with their text arrange far more than 4 MiB.
    c.batch_execute(
        "CREATE MATERIALIZED VIEW wide AS SELECT k, v, count(*) AS n FROM big GROUP BY k, v",
    )
    .await
    .unwrap();
    let failure = wait_for_failure(&c, "wide").await;
    assert!(failure.starts_with("53200: "), "{failure}");
    let err = c
        .simple_query("SELECT count(*) FROM wide")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "53200", "{err:?}");
    assert!(
        err.as_db_error()
            .is_some_and(|e| e.message().contains("arrangement memory limit")),
        "{err:?}"
    );
    // The eviction released what it held on its input, and the small
    // view goes on being maintained.
    assert_eq!(holds_on(&c, "big").await, 0);
    c.batch_execute("INSERT INTO small VALUES (3)")
        .await
        .unwrap();
    assert_eq!(
        rows(&c, "SELECT k, n FROM small_counts ORDER BY k").await,
        vec![
            vec![Some("1".into()), Some("1".into())],
            vec![Some("2".into()), Some("2".into())],
            vec![Some("3".into()), Some("1".into())],
        ]
    );
    // An index beyond the bound fails its lookups the same way.
    c.batch_execute("CREATE INDEX big_k ON big (k)")
        .await
        .unwrap();
    wait_for_failure(&c, "big_k").await;
    let err = c
        .simple_query("SELECT * FROM big WHERE k = 7")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "53200", "{err:?}");
    // Dropping the objects is the way back.
    c.batch_execute("DROP INDEX big_k; DROP MATERIALIZED VIEW wide")
        .await
        .unwrap();
    assert_eq!(
        value(&c, "SELECT count(*) FROM big WHERE k = 7")
            .await
            .as_deref(),
        Some("1")
    );
    still_serving(&s).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panic_closes_only_its_connection_and_frees_its_socket() {
    let s = Server::start();
    let c = s.connect().await;
    let baseline = s.open_fds();
    // Messages whose length field is smaller than the length field itself
    // made pgwire's decoder panic.
    for bad in [
        b"Q\x00\x00\x00\x00".to_vec(),
        b"Q\x00\x00\x00\x02".to_vec(),
        b"P\x00\x00\x00\x03\x00".to_vec(),
        b"B\x00\x00\x00\x00\x00\x00".to_vec(),
    ] {
        for _ in 0..10 {
            let mut sock = raw_connect(&s);
            sock.write_all(&bad).unwrap();
            let seen = read_messages(&mut sock);
            if let Some((_, body)) = seen.iter().find(|(k, _)| *k == b'E') {
                let code = error_code(body).unwrap_or_default();
                assert!(
                    ["XX000", "08P01"].contains(&code.as_str()),
                    "{bad:?}: {code}"
                );
            }
        }
    }
    // Other sessions are untouched, and every socket was given back.
    assert_eq!(value(&c, "SELECT 1").await.as_deref(), Some("1"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.open_fds() > baseline + 2 {
        assert!(
            Instant::now() < deadline,
            "descriptors leaked: {} open, {} before",
            s.open_fds(),
            baseline
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    still_serving(&s).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_and_subscribe_buffers_are_capped() {
    let s = Server::start_with(&["--max-connections", "3"]);
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(s.connect().await);
    }
    let err = s.connect_db("freshet").await.unwrap_err();
    assert_eq!(sqlstate(&err), "53300", "{err:?}");
    // A raw client is told too, after its startup message.
    let mut sock = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    sock.write_all(&startup_message()).unwrap();
    let seen = read_messages(&mut sock);
    let code = seen
        .iter()
        .find(|(k, _)| *k == b'E')
        .and_then(|(_, b)| error_code(b));
    assert_eq!(code.as_deref(), Some("53300"));
    // A slot frees when a client leaves.
    drop(clients.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    let again = loop {
        match s.connect_db("freshet").await {
            Ok(c) => break c,
            Err(e) => {
                assert!(Instant::now() < deadline, "slot not freed: {e:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let err = again
        .simple_query("SET subscribe_buffer_limit = 9223372036854775807")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22023", "{err:?}");
    again
        .batch_execute("SET subscribe_buffer_limit = 5000")
        .await
        .unwrap();
}

/// The since `freshet_internal.collections` reports for a table.
async fn since_of(c: &tokio_postgres::Client, table: &str) -> u64 {
    value(
        c,
        &format!(
            "SELECT since FROM freshet_internal.collections WHERE object_name = 'freshet.public.{table}'"
        ),
    )
    .await
    .and_then(|v| v.parse().ok())
    .expect("since")
}

#[tokio::test(flavor = "multi_thread")]
async fn since_and_oracle_survive_a_kill() {
    let mut s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE t (a int); INSERT INTO t VALUES (1)")
        .await
        .unwrap();
    // Let the since move well past the table's creation.
    let first = since_of(&c, "t").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let before = loop {
        c.batch_execute("INSERT INTO t VALUES (2)").await.unwrap();
        let since = since_of(&c, "t").await;
        if since > first + 2_000 {
            break since;
        }
        assert!(Instant::now() < deadline, "since did not advance");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // The maintenance tick records it; give it one.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let recorded = since_of(&c, "t").await;
    drop(c);
    s.kill_and_restart();
    let c = s.connect().await;
    let after = since_of(&c, "t").await;
    assert!(
        after >= before,
        "since went back across a restart: {before} before, {after} after (recorded {recorded})"
    );
    let err = c
        .simple_query(&format!("SELECT * FROM t AS OF {}", before - 1))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22000", "{err:?}");

    // Crashes in a row do not push the oracle ahead of the wall clock.
    for _ in 0..4 {
        c.batch_execute("INSERT INTO t VALUES (3)").await.ok();
        s.kill_and_restart();
    }
    let c = s.connect().await;
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    };
    c.batch_execute("INSERT INTO t VALUES (4)").await.unwrap();
    let ts: u64 = value(&c, "SELECT mz_now()")
        .await
        .and_then(|v| v.parse().ok())
        .expect("mz_now");
    let wall = now_ms();
    assert!(
        ts <= wall + 2_000,
        "the oracle is {} ms ahead of the wall clock after four crashes",
        ts.saturating_sub(wall)
    );

    // A REFRESH EVERY view keeps its schedule across another crash: the
    // next refresh is at most one period (plus the oracle's one-block
    // lead) away, and a write shows up by then.
    c.batch_execute(
        "CREATE MATERIALIZED VIEW every2 WITH (REFRESH EVERY '2 seconds') AS SELECT count(*) AS n FROM t",
    )
    .await
    .unwrap();
    drop(c);
    s.kill_and_restart();
    let c = s.connect().await;
    let next: u64 = value(
        &c,
        "SELECT next_refresh FROM freshet_internal.materialized_view_refreshes WHERE object_name = 'freshet.public.every2'",
    )
    .await
    .and_then(|v| v.parse().ok())
    .expect("next_refresh");
    let now: u64 = value(&c, "SELECT mz_now()")
        .await
        .and_then(|v| v.parse().ok())
        .expect("mz_now");
    assert!(
        next <= now + 2_000,
        "next refresh {next} is {} ms after now {now}",
        next.saturating_sub(now)
    );
    let total: u64 = value(&c, "SELECT count(*) FROM t")
        .await
        .and_then(|v| v.parse().ok())
        .expect("count");
    c.batch_execute("INSERT INTO t VALUES (5)").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let n: u64 = value(&c, "SELECT n FROM every2")
            .await
            .and_then(|v| v.parse().ok())
            .expect("n");
        if n == total + 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the view never refreshed after the restart"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

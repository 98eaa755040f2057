//! `CREATE SINK ... INTO KAFKA` against a real Kafka-compatible broker the
//! test starts (tansu): upsert messages with tombstones and Debezium
//! messages, read back from the topic and replayed against the relation;
//! the progress topic; a broker that stops answering (the sink stalls and
//! resumes by itself); `kill -9` of Freshet during export, after which the
//! topic holds every change exactly once; and the definitions refused at
//! `CREATE`.

use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::time::{Duration, Instant};

use rand::Rng;
use rskafka::client::Client;
use rskafka::client::partition::{OffsetAt, UnknownTopicHandling};
use serde_json::Value;
use tokio_postgres::Client as PgClient;

use crate::harness::*;
use crate::kafka::Broker;
use crate::sinks::{churn, contents, crash_cycles, wait_exported};

/// One message of a sink's topic.
#[derive(Clone, Debug)]
struct Message {
    partition: i32,
    offset: i64,
    /// `freshet-time`.
    time: u64,
    key: Value,
    /// `None`: a tombstone.
    value: Option<Value>,
}

/// Every message of `topic`, partition by partition, in offset order.
async fn read_topic(kafka: &Client, topic: &str) -> Vec<Message> {
    let partitions = kafka
        .list_topics()
        .await
        .expect("list topics")
        .into_iter()
        .find(|t| t.name == topic)
        .unwrap_or_else(|| panic!("no topic {topic}"))
        .partitions;
    let mut out = Vec::new();
    let mut partitions: Vec<i32> = partitions.into_iter().collect();
    partitions.sort_unstable();
    for p in partitions {
        let pc = kafka
            .partition_client(topic, p, UnknownTopicHandling::Error)
            .await
            .expect("partition client");
        let end = high_watermark(&pc).await;
        let mut next = 0;
        while next < end {
            let (records, _) = pc
                .fetch_records(next, 1..4_000_000, 100)
                .await
                .expect("fetch");
            for r in records {
                if r.offset < next {
                    continue;
                }
                next = r.offset + 1;
                let header = |name: &str| {
                    String::from_utf8(r.record.headers.get(name).expect(name).clone()).unwrap()
                };
                assert!(header("freshet-sink").starts_with('u'));
                out.push(Message {
                    partition: p,
                    offset: r.offset,
                    time: header("freshet-time").parse().expect("time"),
                    key: serde_json::from_slice(r.record.key.as_ref().expect("a key")).unwrap(),
                    value: r
                        .record
                        .value
                        .as_ref()
                        .map(|v| serde_json::from_slice(v).expect("JSON value")),
                });
            }
        }
    }
    out
}

/// The offset after a partition's last record, as a fetch reports it
/// (tansu's ListOffsets answers the last batch's base offset + 1).
async fn high_watermark(pc: &rskafka::client::partition::PartitionClient) -> i64 {
    let earliest = pc.get_offset(OffsetAt::Earliest).await.expect("offset");
    pc.fetch_records(earliest, 1..2, 0).await.expect("fetch").1
}

/// Check that no change appears twice (a key has one change per time),
/// that each partition's times never go back, and that a key always goes
/// to the same partition.
fn check_once(messages: &[Message]) {
    let mut seen = HashSet::new();
    let mut last: BTreeMap<i32, u64> = BTreeMap::new();
    let mut home: BTreeMap<String, i32> = BTreeMap::new();
    for m in messages {
        if !seen.insert((m.time, m.key.to_string())) {
            let first = messages
                .iter()
                .find(|o| o.time == m.time && o.key == m.key)
                .map(|o| o.offset);
            panic!("{m:?} delivered twice (first at offset {first:?})");
        }
        let before = last.insert(m.partition, m.time).unwrap_or(0);
        assert!(before <= m.time, "{m:?} after time {before}");
        let p = *home.entry(m.key.to_string()).or_insert(m.partition);
        assert_eq!(p, m.partition, "{m:?}: key in two partitions");
    }
}

/// Replay upsert messages: what each key has at the end.
fn replay_upserts(messages: &[Message]) -> BTreeMap<String, Value> {
    let mut sorted = messages.to_vec();
    sorted.sort_by_key(|m| m.time);
    let mut state = BTreeMap::new();
    for m in sorted {
        match m.value {
            Some(v) => state.insert(m.key.to_string(), v),
            None => state.remove(&m.key.to_string()),
        };
    }
    state
}

/// Replay Debezium messages, checking that each one's `before` is what
/// its key had (a lost or repeated change breaks the chain); what each
/// key has at the end.
fn replay_debezium(messages: &[Message]) -> BTreeMap<String, Value> {
    let mut sorted = messages.to_vec();
    sorted.sort_by_key(|m| m.time);
    let mut state: BTreeMap<String, Value> = BTreeMap::new();
    for m in sorted {
        let value = m.value.as_ref().expect("Debezium messages have values");
        let key = m.key.to_string();
        let had = state.get(&key).cloned().unwrap_or(Value::Null);
        assert_eq!(value["before"], had, "{m:?}: before is not what {key} had");
        match &value["after"] {
            Value::Null => state.remove(&key),
            after => state.insert(key, after.clone()),
        };
    }
    state
}

/// Wait until both sinks of the first test delivered everything, and
/// check their topics against the relations.
async fn check(c: &PgClient, kafka: &Client, label: &str) -> (Vec<Message>, Vec<Message>) {
    wait_exported(c, "up", "t").await;
    wait_exported(c, "dbz", "t").await;
    let up = read_topic(kafka, "up").await;
    check_once(&up);
    assert_eq!(
        numbers_as_floats(replay_upserts(&up)),
        numbers_as_floats(expected_t(c).await),
        "{label}: up"
    );
    let dbz = read_topic(kafka, "dbz").await;
    check_once(&dbz);
    assert_eq!(
        replay_debezium(&dbz),
        expected_groups(c, "g").await,
        "{label}: dbz"
    );
    (up, dbz)
}

/// The value of the last record of `topic`'s partition 0, as JSON.
async fn last_record(kafka: &Client, topic: &str) -> Value {
    let pc = kafka
        .partition_client(topic, 0, UnknownTopicHandling::Error)
        .await
        .expect("partition client");
    let end = high_watermark(&pc).await;
    assert!(end > 0, "{topic} is empty");
    let (records, _) = pc
        .fetch_records(end - 1, 1..4_000_000, 100)
        .await
        .expect("fetch");
    let record = records
        .into_iter()
        .find(|r| r.offset == end - 1)
        .expect("the last record");
    serde_json::from_slice(record.record.value.as_ref().expect("a value")).expect("JSON")
}

/// `rows` with every number as a float (`numeric` prints `2` as `2.0`
/// in a `::text` cast and as `2` in JSON; both are the number 2).
fn numbers_as_floats(rows: BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    fn float(v: Value) -> Value {
        match v {
            Value::Number(n) => n
                .as_f64()
                .and_then(serde_json::Number::from_f64)
                .map_or(Value::Null, Value::Number),
            Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, float(v))).collect()),
            Value::Array(a) => Value::Array(a.into_iter().map(float).collect()),
            other => other,
        }
    }
    rows.into_iter().map(|(k, v)| (k, float(v))).collect()
}

/// A JSON number or null from Postgres text.
fn number(text: &Option<String>) -> Value {
    text.as_ref()
        .map(|t| serde_json::from_str(t).expect("a number"))
        .unwrap_or(Value::Null)
}

/// What an upsert sink of `t (k, v, doc, n)` should hold, by key.
async fn expected_t(c: &PgClient) -> BTreeMap<String, Value> {
    rows(c, "SELECT k::text, v, doc::text, n::text FROM t")
        .await
        .into_iter()
        .map(|r| {
            let k = number(&r[0]);
            let doc = r[2]
                .as_ref()
                .map(|d| serde_json::from_str(d).unwrap())
                .unwrap_or(Value::Null);
            let row = serde_json::json!({"k": k, "v": r[1], "doc": doc, "n": number(&r[3])});
            (serde_json::json!({ "k": k }).to_string(), row)
        })
        .collect()
}

/// What a sink of `SELECT v, count(*) AS n ... GROUP BY v` keyed by `v`
/// should hold.
async fn expected_groups(c: &PgClient, view: &str) -> BTreeMap<String, Value> {
    rows(c, &format!("SELECT v::text, n::text FROM {view}"))
        .await
        .into_iter()
        .map(|r| {
            let v = r[0].as_ref().map_or(Value::Null, |v| number_or_text(v));
            let key = serde_json::json!({ "v": v }).to_string();
            (key, serde_json::json!({"v": v, "n": number(&r[1])}))
        })
        .collect()
}

fn number_or_text(v: &str) -> Value {
    serde_json::from_str::<serde_json::Number>(v)
        .map(Value::Number)
        .unwrap_or_else(|_| Value::String(v.to_string()))
}

async fn sink_status(c: &PgClient, sink: &str) -> (Option<String>, Option<String>) {
    let r = rows(
        c,
        &format!(
            "SELECT status, error FROM freshet_internal.sink_statuses WHERE name LIKE '%.{sink}'"
        ),
    )
    .await;
    r.first()
        .map(|r| (r[0].clone(), r[1].clone()))
        .unwrap_or_default()
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_sinks_deliver_upserts_and_debezium_exactly_once() {
    let broker = Broker::start();
    let kafka = broker.client().await;
    let mut s = Server::start();
    let c = s.connect().await;
    c.batch_execute(&format!(
        "CREATE CONNECTION k TO KAFKA (BROKER '{}');
         CREATE TABLE t (k int PRIMARY KEY, v text, doc jsonb, n numeric);
         INSERT INTO t VALUES (1, 'a', '{{\"x\": [1, 2]}}', 1.5), (2, 'b', NULL, 2), (3, 'a', '{{}}', NULL);
         CREATE MATERIALIZED VIEW g AS SELECT v, count(*) AS n FROM t GROUP BY v;",
        broker.address()
    ))
    .await
    .unwrap();
    c.batch_execute(
        "CREATE SINK up FROM t INTO KAFKA CONNECTION k (TOPIC 'up', TOPIC PARTITION COUNT 3) ENVELOPE UPSERT;
         CREATE SINK dbz FROM g INTO KAFKA CONNECTION k (TOPIC 'dbz') KEY (v) FORMAT JSON ENVELOPE DEBEZIUM \
           WITH (COMMIT INTERVAL = '50ms');",
    )
    .await
    .unwrap();
    c.batch_execute(
        "UPDATE t SET v = 'c' WHERE k = 2;
         DELETE FROM t WHERE k = 3;
         INSERT INTO t VALUES (4, 'a', '[true]', 0.25);",
    )
    .await
    .unwrap();
    let (up, _) = check(&c, &kafka, "first").await;
    // The topic was created with 3 partitions; the deleted key's last
    // message is a tombstone.
    assert!(up.iter().any(|m| m.partition > 0));
    let last_of_3 = up
        .iter()
        .filter(|m| m.key == serde_json::json!({"k": 3}))
        .max_by_key(|m| m.time)
        .unwrap();
    assert!(last_of_3.value.is_none(), "{last_of_3:?}");

    // What users see.
    let sinks = rows(&c, "SHOW SINKS").await;
    assert!(sinks.contains(&vec![
        Some("up".into()),
        Some("kafka".into()),
        Some("freshet.public.t".into())
    ]));
    let create = rows(&c, "SHOW CREATE SINK up").await;
    assert_eq!(
        create[0][1].as_deref(),
        Some(
            "CREATE SINK freshet.public.up FROM freshet.public.t INTO KAFKA CONNECTION freshet.public.k \
             (TOPIC 'up', PROGRESS TOPIC '_freshet-progress-up', TOPIC PARTITION COUNT 3, \
             TOPIC REPLICATION FACTOR 1) KEY (k) FORMAT JSON ENVELOPE UPSERT"
        )
    );
    let status = rows(
        &c,
        "SELECT type, status, messages_written > 0, bytes_written > 0 \
         FROM freshet_internal.sink_statuses WHERE name LIKE '%.up'",
    )
    .await;
    assert_eq!(
        status,
        vec![vec![
            Some("kafka".into()),
            Some("running".into()),
            Some("t".into()),
            Some("t".into())
        ]]
    );
    let progress = last_record(&kafka, "_freshet-progress-up").await;
    assert!(progress["frontier"].as_u64().is_some(), "{progress}");
    // `COMMIT INTERVAL` makes the Debezium sink commit more often.
    let commits = rows(
        &c,
        "SELECT name, commits, progress_us <= commit_us FROM freshet_internal.sink_statuses ORDER BY name",
    )
    .await;
    let n = |i: usize| commits[i][1].as_deref().unwrap().parse::<u64>().unwrap();
    assert!(n(0) > n(1), "{commits:?}");
    assert!(
        commits.iter().all(|r| r[2].as_deref() == Some("t")),
        "{commits:?}"
    );
    let e = c.batch_execute("DROP CONNECTION k").await.unwrap_err();
    assert_eq!(sqlstate(&e), "2BP01", "{e}");

    // A restart sends nothing again; changes after it arrive.
    s.kill_and_restart();
    let c2 = s.connect().await;
    wait_exported(&c2, "up", "t").await;
    wait_exported(&c2, "dbz", "t").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(read_topic(&kafka, "up").await.len(), up.len());
    c2.batch_execute("INSERT INTO t VALUES (5, 'b', NULL, 7); UPDATE t SET n = n + 1 WHERE k = 1;")
        .await
        .unwrap();
    drop(c);
    let c = c2;
    check(&c, &kafka, "after restart").await;

    // A broker that stops answering stalls the sinks; they resume by
    // themselves when it is back, and the server serves meanwhile.
    signal(broker.child.id(), "-STOP");
    c.batch_execute("INSERT INTO t VALUES (6, 'z', NULL, NULL)")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (state, error) = sink_status(&c, "up").await;
        if state.as_deref() == Some("stalled") {
            assert!(error.is_some_and(|e| e.contains("Kafka")));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sink did not stall: {state:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        value(&c, "SELECT count(*) FROM t").await.as_deref(),
        Some("5")
    );
    signal(broker.child.id(), "-CONT");
    check(&c, &kafka, "after the broker came back").await;
    assert_eq!(sink_status(&c, "up").await.0.as_deref(), Some("running"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_sink_definitions_are_checked_at_create() {
    let broker = Broker::start();
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(&format!(
        "CREATE CONNECTION k TO KAFKA (BROKER '{}');
         CREATE TABLE t (k int PRIMARY KEY, v text);
         CREATE TABLE nokey (a int);",
        broker.address()
    ))
    .await
    .unwrap();
    for (sql, code, text) in [
        (
            "CREATE SINK s FROM t INTO KAFKA CONNECTION k (TOPIC 'o') ENVELOPE UPSERT FORMAT JSON",
            "42601",
            "",
        ),
        (
            "CREATE SINK s FROM t INTO KAFKA CONNECTION k (TOPIC 'o') FORMAT PARQUET ENVELOPE UPSERT",
            "0A000",
            "FORMAT PARQUET",
        ),
        (
            "CREATE SINK s FROM t INTO KAFKA CONNECTION k (TOPIC 'o')",
            "22023",
            "needs ENVELOPE",
        ),
        (
            "CREATE SINK s FROM t INTO KAFKA CONNECTION nope (TOPIC 'o') ENVELOPE UPSERT",
            "42P01",
            "nope",
        ),
        (
            "CREATE SINK s FROM t INTO KAFKA CONNECTION k (PROGRESS TOPIC 'p') ENVELOPE UPSERT",
            "22023",
            "needs TOPIC",
        ),
        (
            "CREATE SINK s FROM t INTO KAFKA CONNECTION k (TOPIC 'o', PROGRESS TOPIC 'o') ENVELOPE UPSERT",
            "22023",
            "must differ",
        ),
        (
            "CREATE SINK s FROM t INTO KAFKA CONNECTION k (TOPIC 'o', TOPIC PARTITION COUNT 0) ENVELOPE UPSERT",
            "22023",
            "between 1 and",
        ),
        (
            "CREATE SINK s FROM t INTO KAFKA CONNECTION k (TOPIC 'o', TOPIC 'p') ENVELOPE UPSERT",
            "22023",
            "more than once",
        ),
        (
            "CREATE SINK s FROM nokey INTO KAFKA CONNECTION k (TOPIC 'o') ENVELOPE DEBEZIUM",
            "22023",
            "requires a KEY",
        ),
        (
            "CREATE SINK s FROM t INTO KAFKA CONNECTION k (TOPIC 'o') ENVELOPE UPSERT WITH (COMMIT INTERVAL '0ms')",
            "22023",
            "between 1 millisecond and 1 hour",
        ),
        (
            "CREATE SINK s FROM t INTO KAFKA CONNECTION k (TOPIC 'o') ENVELOPE UPSERT WITH (COMMIT INTERVAL = 'soon')",
            "22023",
            "invalid COMMIT INTERVAL",
        ),
        (
            "CREATE SINK s FROM t INTO KAFKA CONNECTION t (TOPIC 'o') ENVELOPE UPSERT",
            "42809",
            "",
        ),
    ] {
        let e = c.batch_execute(sql).await.unwrap_err();
        assert_eq!(sqlstate(&e), code, "{sql}: {e}");
        let message = e
            .as_db_error()
            .map(|d| d.message().to_string())
            .unwrap_or_default();
        assert!(message.contains(text), "{sql}: {message}");
    }
    // A broker that is gone fails CREATE with the reason.
    drop(broker);
    let e = c
        .batch_execute("CREATE SINK s FROM t INTO KAFKA CONNECTION k (TOPIC 'o') ENVELOPE UPSERT")
        .await
        .unwrap_err();
    let message = e
        .as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_default();
    assert!(message.contains("Kafka"), "{message}");
    assert!(rows(&c, "SHOW SINKS").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_sinks_survive_kill_9_without_duplicates_or_gaps() {
    let cycles = crash_cycles();
    let broker = Broker::start();
    let kafka = broker.client().await;
    let mut s = Server::start();
    {
        let c = s.connect().await;
        c.batch_execute(&format!(
            "CREATE CONNECTION k TO KAFKA (BROKER '{}');
             CREATE TABLE t (k int PRIMARY KEY, v int);
             CREATE MATERIALIZED VIEW groups AS SELECT v, count(*) AS n FROM t GROUP BY v;
             CREATE SINK raw FROM t INTO KAFKA CONNECTION k (TOPIC 'raw', TOPIC PARTITION COUNT 3) ENVELOPE DEBEZIUM;
             CREATE SINK agg FROM groups INTO KAFKA CONNECTION k (TOPIC 'agg') KEY (v) ENVELOPE UPSERT;",
            broker.address()
        ))
        .await
        .unwrap();
    }
    let mut rng = rand::rng();
    let mut next = 1;
    for cycle in 0..cycles {
        let kill_after = Duration::from_millis(rng.random_range(200..2500));
        let writer = churn(s.connect().await, next, "v");
        tokio::time::sleep(kill_after).await;
        s.kill();
        next = writer.await.unwrap() + 1;
        s.kill_and_restart();
        let c = s.connect().await;
        wait_exported(&c, "raw", "t").await;
        wait_exported(&c, "agg", "t").await;
        let raw = read_topic(&kafka, "raw").await;
        check_once(&raw);
        let got = replay_debezium(&raw);
        let want: BTreeMap<String, Value> = contents(&c, "SELECT k::text, v::text FROM t")
            .await
            .into_keys()
            .map(|r| {
                let (k, v) = (number(&Some(r[0].clone())), number(&Some(r[1].clone())));
                (
                    serde_json::json!({ "k": k }).to_string(),
                    serde_json::json!({"k": k, "v": v}),
                )
            })
            .collect();
        assert_eq!(got, want, "cycle {cycle}: raw");
        let agg = read_topic(&kafka, "agg").await;
        check_once(&agg);
        assert_eq!(
            replay_upserts(&agg),
            expected_groups(&c, "groups").await,
            "cycle {cycle}: agg"
        );
    }
}

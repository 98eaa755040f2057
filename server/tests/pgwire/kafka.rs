//! Kafka sources against a real Kafka-compatible broker the test starts
//! (tansu, in memory): several partitions, the record metadata columns,
//! `ENVELOPE UPSERT` with updates and tombstones, `kill -9` of Freshet
//! while records arrive (no duplicate, no gap, upsert state intact), a
//! broker that goes away, and the errors a user meets.
//!
//! The broker is `tansu` (`cargo install tansu --features dynostore`),
//! found through `$FRESHET_TANSU_BIN` or in
//! `~/.cache/freshet-tools/tansu/bin/tansu`, where `scripts/test.sh`
//! installs it; a missing broker fails the test.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rskafka::chrono::Utc;
use rskafka::client::partition::{Compression, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record;
use tokio_postgres::Client as PgClient;

use crate::harness::*;

/// A tansu broker on a free loopback port, killed when dropped.
pub(crate) struct Broker {
    port: u16,
    pub(crate) child: Child,
}

impl Broker {
    fn binary() -> PathBuf {
        if let Ok(bin) = std::env::var("FRESHET_TANSU_BIN") {
            return PathBuf::from(bin);
        }
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        PathBuf::from(home).join(".cache/freshet-tools/tansu/bin/tansu")
    }

    pub(crate) fn start() -> Broker {
        let bin = Self::binary();
        assert!(
            bin.exists(),
            "no Kafka broker at {} (scripts/test.sh installs it: cargo install tansu --features dynostore --root ~/.cache/freshet-tools/tansu; or set FRESHET_TANSU_BIN)",
            bin.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let url = format!("tcp://127.0.0.1:{port}");
        let child = Command::new(&bin)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tansu");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "tansu did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Broker { port, child }
    }

    pub(crate) fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub(crate) async fn client(&self) -> Client {
        ClientBuilder::new(vec![self.address()])
            .build()
            .await
            .expect("connect to the broker")
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn create_topic(client: &Client, topic: &str, partitions: i32) {
    client
        .controller_client()
        .expect("controller")
        .create_topic(topic, partitions, 1, 5_000)
        .await
        .expect("create topic");
}

/// Produce `records` (key, value) to one partition.
async fn produce(
    client: &Client,
    topic: &str,
    partition: i32,
    records: &[(Option<&str>, Option<String>)],
) {
    let pc = client
        .partition_client(topic, partition, UnknownTopicHandling::Retry)
        .await
        .expect("partition client");
    let records: Vec<Record> = records
        .iter()
        .map(|(k, v)| Record {
            key: k.map(|k| k.as_bytes().to_vec()),
            value: v.as_ref().map(|v| v.as_bytes().to_vec()),
            headers: Default::default(),
            timestamp: Utc::now(),
        })
        .collect();
    pc.produce(records, Compression::NoCompression)
        .await
        .expect("produce");
}

/// Wait until `sql` answers `want` on Freshet.
async fn wait_for(c: &PgClient, sql: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = value(c, sql).await;
        if got.as_deref() == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{sql}: wanted {want}, still {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn status(c: &PgClient, source: &str) -> (Option<String>, Option<String>) {
    let r = rows(
        c,
        &format!(
            "SELECT status, error FROM freshet_internal.source_statuses WHERE name = 'freshet.public.{source}'"
        ),
    )
    .await;
    r.first()
        .map(|r| (r[0].clone(), r[1].clone()))
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_sources_read_every_partition_and_resume_exactly() {
    let broker = Broker::start();
    let kafka = broker.client().await;
    create_topic(&kafka, "orders", 3).await;
    create_topic(&kafka, "kv", 2).await;
    // 300 numbered JSON records (with a JSON key) over three partitions.
    for p in 0..3 {
        let records: Vec<(Option<&str>, Option<String>)> = (0..100)
            .map(|i| {
                (
                    Some("\"k\""),
                    Some(format!("{{\"n\": {}, \"p\": {p}}}", p * 1000 + i)),
                )
            })
            .collect();
        produce(&kafka, "orders", p, &records).await;
    }
    let mut server = Server::start();
    let c = server.connect().await;
    c.batch_execute(&format!(
        "CREATE CONNECTION k TO KAFKA (BROKER '{}');
         CREATE SOURCE orders FROM KAFKA CONNECTION k (TOPIC 'orders') FORMAT JSON
           INCLUDE KEY, PARTITION, OFFSET AS off, TIMESTAMP AS ts;
         CREATE SOURCE kv FROM KAFKA CONNECTION k (TOPIC 'kv') FORMAT TEXT INCLUDE KEY ENVELOPE UPSERT;
         CREATE MATERIALIZED VIEW per_partition AS SELECT partition, count(*) AS n FROM orders GROUP BY partition;",
        broker.address()
    ))
    .await
    .expect("create the sources");
    wait_for(&c, "SELECT count(*) FROM orders", "300").await;
    assert_eq!(
        rows(
            &c,
            "SELECT partition, count(*), min(off), max(off), count(DISTINCT (data->>'n')), min(key), bool_and(ts IS NOT NULL) \
             FROM orders GROUP BY partition ORDER BY partition"
        )
        .await,
        (0..3)
            .map(|p| vec![
                Some(p.to_string()),
                Some("100".into()),
                Some("0".into()),
                Some("99".into()),
                Some("100".into()),
                Some("\"k\"".into()),
                Some("t".into())
            ])
            .collect::<Vec<_>>()
    );
    assert_eq!(
        rows(
            &c,
            "SELECT partition, \"offset\" FROM orders_progress ORDER BY 1"
        )
        .await,
        (0..3)
            .map(|p| vec![Some(p.to_string()), Some("100".into())])
            .collect::<Vec<_>>()
    );
    assert_eq!(
        value(&c, "SELECT sum(n) FROM per_partition")
            .await
            .as_deref(),
        Some("300")
    );

    // Upsert: the latest value per key; a null value deletes the key.
    produce(
        &kafka,
        "kv",
        0,
        &[
            (Some("a"), Some("1".into())),
            (Some("b"), Some("1".into())),
            (Some("a"), Some("2".into())),
            (Some("c"), Some("1".into())),
            (Some("b"), None),
        ],
    )
    .await;
    produce(&kafka, "kv", 1, &[(Some("d"), Some("1".into()))]).await;
    wait_for(
        &c,
        "SELECT string_agg(key || '=' || text, ',' ORDER BY key) FROM kv",
        "a=2,c=1,d=1",
    )
    .await;
    // The status counts records read (six), not the updates they made.
    assert_eq!(
        value(
            &c,
            "SELECT records_ingested FROM freshet_internal.source_statuses WHERE name = 'freshet.public.kv'"
        )
        .await
        .as_deref(),
        Some("6")
    );

    // kill -9 while records arrive: every record once, upsert state kept.
    let producer = {
        let kafka = broker.client().await;
        tokio::spawn(async move {
            for round in 0..60 {
                let records: Vec<(Option<&str>, Option<String>)> = (0..10)
                    .map(|i| {
                        (
                            Some("\"k\""),
                            Some(format!("{{\"n\": {}}}", 100_000 + round * 10 + i)),
                        )
                    })
                    .collect();
                produce(&kafka, "orders", round % 3, &records).await;
                produce(
                    &kafka,
                    "kv",
                    0,
                    &[(Some("a"), Some(format!("{}", 3 + round)))],
                )
                .await;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    drop(c);
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        server.kill_and_restart();
    }
    producer.await.expect("producer");
    let c = server.connect().await;
    wait_for(&c, "SELECT count(*) FROM orders", "900").await;
    assert_eq!(
        value(&c, "SELECT count(DISTINCT (partition, off)) FROM orders")
            .await
            .as_deref(),
        Some("900"),
        "a record twice"
    );
    assert_eq!(
        value(&c, "SELECT count(DISTINCT (data->>'n')) FROM orders")
            .await
            .as_deref(),
        Some("900")
    );
    wait_for(
        &c,
        "SELECT string_agg(key || '=' || text, ',' ORDER BY key) FROM kv",
        "a=62,c=1,d=1",
    )
    .await;
    assert_eq!(
        value(&c, "SELECT count(*) FROM kv WHERE key = 'a'")
            .await
            .as_deref(),
        Some("1"),
        "one row per key after restarts"
    );

    // The broker goes away: the source stalls with the reason, the
    // server keeps serving.
    drop(kafka);
    drop(broker);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (s, e) = status(&c, "orders").await;
        if s.as_deref() == Some("stalled") {
            assert!(e.is_some());
            break;
        }
        assert!(Instant::now() < deadline, "the source did not stall: {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        value(&c, "SELECT count(*) FROM orders").await.as_deref(),
        Some("900")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_source_errors_are_clear() {
    let broker = Broker::start();
    let kafka = broker.client().await;
    create_topic(&kafka, "t", 1).await;
    let server = Server::start();
    let c = server.connect().await;
    let err = c
        .batch_execute("CREATE CONNECTION down TO KAFKA (BROKER '127.0.0.1:1')")
        .await
        .unwrap_err();
    assert!(
        err.as_db_error()
            .is_some_and(|d| d.message().contains("Kafka")),
        "{err:?}"
    );
    c.batch_execute(&format!(
        "CREATE CONNECTION k TO KAFKA (BROKER '{}')",
        broker.address()
    ))
    .await
    .expect("connection");
    for (sql, expected) in [
        (
            "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 'nope')",
            "topic \"nope\" does not exist",
        ),
        (
            "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 't') ENVELOPE UPSERT",
            "INCLUDE KEY",
        ),
        (
            "CREATE SOURCE s FROM KAFKA CONNECTION k (TOPIC 't') INCLUDE KEY AS data",
            "specified more than once",
        ),
    ] {
        let err = c.batch_execute(sql).await.unwrap_err();
        assert!(
            err.as_db_error()
                .is_some_and(|d| d.message().contains(expected)),
            "{sql}: expected {expected:?}, got {err:?}"
        );
    }
    // A value that does not fit the format fails the source, saying where.
    c.batch_execute("CREATE SOURCE j FROM KAFKA CONNECTION k (TOPIC 't') FORMAT JSON")
        .await
        .expect("source");
    produce(
        &kafka,
        "t",
        0,
        &[
            (None, Some("{\"ok\": 1}".into())),
            (None, Some("not json".into())),
        ],
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (s, e) = status(&c, "j").await;
        if s.as_deref() == Some("failed") {
            assert!(
                e.as_deref()
                    .is_some_and(|e| e.contains("partition 0 offset 1") && e.contains("not JSON")),
                "{e:?}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "the source did not fail: {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

//! `CREATE SINK ... INTO FILES`: every change of the input reaches the
//! files exactly once, in timestamp order, across `kill -9`; the manifest
//! is the record of progress; holds, statuses, envelopes and the errors
//! of bad definitions.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use rand::Rng;
use tokio_postgres::Client;

use crate::harness::*;

/// One change read back from a sink's files: its time, its diff (or
/// envelope state) and its other columns as text.
#[derive(Clone, Debug, PartialEq)]
struct Change {
    time: u64,
    /// `mz_diff` as text, or `mz_state`.
    kind: String,
    columns: Vec<String>,
}

/// The manifest's frontier and the changes of the files it names, in
/// order, after checking that the files' ranges are contiguous and
/// ordered and every change lies in its file's range.
fn read_sink(dir: &Path) -> (u64, Vec<Change>) {
    let text = match std::fs::read_to_string(dir.join("manifest.json")) {
        Ok(t) => t,
        Err(_) => return (0, Vec::new()),
    };
    let manifest: serde_json::Value = serde_json::from_str(&text).expect("manifest parses");
    let frontier = manifest["frontier"].as_u64().expect("frontier");
    let mut changes = Vec::new();
    let mut last_upper = 0;
    for file in manifest["files"].as_array().expect("files") {
        let name = file["name"].as_str().expect("name");
        let (lower, upper) = (
            file["lower"].as_u64().unwrap(),
            file["upper"].as_u64().unwrap(),
        );
        assert!(
            lower < upper && lower >= last_upper,
            "{name}: ranges out of order"
        );
        assert!(upper <= frontier, "{name}: past the frontier");
        last_upper = upper;
        let batches = read_file(&dir.join(name));
        let mut rows = 0;
        for batch in &batches {
            let text = batch_text(batch);
            for row in text {
                let time: u64 = row[0].parse().expect("mz_timestamp");
                assert!(
                    (lower..upper).contains(&time),
                    "{name}: change at {time} outside [{lower}, {upper})"
                );
                changes.push(Change {
                    time,
                    kind: row[1].clone(),
                    columns: row[2..].to_vec(),
                });
                rows += 1;
            }
        }
        assert_eq!(file["rows"].as_u64().unwrap(), rows, "{name}: row count");
    }
    assert!(
        changes.windows(2).all(|w| w[0].time <= w[1].time),
        "changes out of timestamp order"
    );
    // Every file in the directory is named by the manifest (an
    // uncommitted one is deleted when the sink starts; while it runs a
    // newer one may be ahead of the manifest just read).
    (frontier, changes)
}

fn read_file(path: &Path) -> Vec<RecordBatch> {
    let file = std::fs::File::open(path).expect("open sink file");
    match path.extension().and_then(|e| e.to_str()) {
        Some("parquet") => {
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
                .expect("parquet")
                .build()
                .expect("reader")
                .collect::<Result<Vec<_>, _>>()
                .expect("batches")
        }
        _ => panic!("not a parquet file: {}", path.display()),
    }
}

fn batch_text(batch: &RecordBatch) -> Vec<Vec<String>> {
    let options = FormatOptions::default().with_null("NULL");
    let formatters: Vec<ArrayFormatter> = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).expect("format"))
        .collect();
    (0..batch.num_rows())
        .map(|i| formatters.iter().map(|f| f.value(i).to_string()).collect())
        .collect()
}

/// The sink's frontier from its status.
async fn frontier(c: &Client, sink: &str) -> Option<u64> {
    value(
        c,
        &format!("SELECT frontier FROM freshet_internal.sink_statuses WHERE name LIKE '%.{sink}'"),
    )
    .await
    .and_then(|v| v.parse().ok())
}

/// Wait until sink `sink` has exported everything committed before now:
/// its frontier passes the upper `table` has now.
pub(crate) async fn wait_exported(c: &Client, sink: &str, table: &str) {
    let upper: u64 = value(
        c,
        &format!(
            "SELECT upper FROM freshet_internal.collections WHERE object_name LIKE '%.{table}'"
        ),
    )
    .await
    .expect("table upper")
    .parse()
    .expect("upper");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if frontier(c, sink).await.is_some_and(|f| f >= upper) {
            return;
        }
        let status = rows(
            c,
            &format!(
                "SELECT status, error FROM freshet_internal.sink_statuses WHERE name LIKE '%.{sink}'"
            ),
        )
        .await;
        assert!(
            Instant::now() < deadline,
            "sink {sink} did not reach {upper}: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sum each row's diffs: the contents the changes add up to.
fn consolidate(changes: &[Change]) -> BTreeMap<Vec<String>, i64> {
    let mut out: BTreeMap<Vec<String>, i64> = BTreeMap::new();
    for c in changes {
        *out.entry(c.columns.clone()).or_default() += c.kind.parse::<i64>().expect("mz_diff");
    }
    out.retain(|_, n| *n != 0);
    out
}

pub(crate) async fn contents(c: &Client, sql: &str) -> BTreeMap<Vec<String>, i64> {
    let mut out: BTreeMap<Vec<String>, i64> = BTreeMap::new();
    for row in rows(c, sql).await {
        let row: Vec<String> = row
            .into_iter()
            .map(|v| v.unwrap_or_else(|| "NULL".into()))
            .collect();
        *out.entry(row).or_default() += 1;
    }
    out
}

#[tokio::test]
async fn files_sinks_export_each_change_once_with_holds_and_statuses() {
    let s = Server::start();
    let c = s.connect().await;
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("t_changes");
    c.batch_execute(
        "CREATE TABLE t (k int, v text); INSERT INTO t VALUES (1, 'a'), (2, 'b');
         CREATE VIEW big AS SELECT k, v FROM t WHERE k > 1;",
    )
    .await
    .unwrap();
    c.batch_execute(&format!(
        "CREATE SINK s FROM t INTO FILES (PATH '{}') FORMAT PARQUET",
        dir.display()
    ))
    .await
    .unwrap();
    // A sink from a plain view maintains the view for itself; this one
    // starts without the snapshot.
    let big_dir = out.path().join("big");
    c.batch_execute(&format!(
        "CREATE SINK sb FROM big INTO FILES (URL 'file://{}') WITH (SNAPSHOT = false)",
        big_dir.display()
    ))
    .await
    .unwrap();
    for sql in [
        "INSERT INTO t VALUES (3, 'c')",
        "UPDATE t SET v = 'B' WHERE k = 2",
        "DELETE FROM t WHERE k = 1",
        "INSERT INTO t VALUES (4, NULL), (4, NULL)",
    ] {
        c.batch_execute(sql).await.unwrap();
    }
    wait_exported(&c, "s", "t").await;
    wait_exported(&c, "sb", "t").await;
    let (_, changes) = read_sink(&dir);
    assert_eq!(
        consolidate(&changes),
        contents(&c, "SELECT k::text, v FROM t").await
    );
    // The history, not only the end: the snapshot at one time, then each
    // statement's changes at a time of its own.
    let times: std::collections::BTreeSet<u64> = changes.iter().map(|c| c.time).collect();
    assert_eq!(times.len(), 5, "{changes:?}");
    assert_eq!(changes.len(), 2 + 1 + 2 + 1 + 1, "{changes:?}");
    let (_, big) = read_sink(&big_dir);
    let kinds: Vec<(&str, &[String])> = big
        .iter()
        .map(|c| (c.kind.as_str(), c.columns.as_slice()))
        .collect();
    assert!(
        !big.iter()
            .any(|c| c.columns[0] == "2" && c.columns[1] == "b" && c.kind == "1"),
        "the snapshot was exported: {kinds:?}"
    );
    assert_eq!(
        consolidate(&big).into_iter().collect::<Vec<_>>(),
        vec![
            (vec!["2".into(), "B".into()], 1),
            (vec!["2".into(), "b".into()], -1),
            (vec!["3".into(), "c".into()], 1),
            (vec!["4".into(), "NULL".into()], 2),
        ]
    );

    // What users see of it.
    assert_eq!(
        rows(&c, "SHOW SINKS").await,
        vec![
            vec![
                Some("s".to_string()),
                Some("files".into()),
                Some("freshet.public.t".into())
            ],
            vec![
                Some("sb".to_string()),
                Some("files".into()),
                Some("freshet.public.big".into())
            ],
        ]
    );
    let create = rows(&c, "SHOW CREATE SINK s").await;
    assert_eq!(
        create[0][1].as_deref(),
        Some(
            format!(
                "CREATE SINK freshet.public.s FROM freshet.public.t INTO FILES (URL 'file://{}') FORMAT PARQUET",
                dir.display()
            )
            .as_str()
        )
    );
    let status = rows(
        &c,
        "SELECT type, status, error, messages_written > 0, bytes_written > 0, progress + 1 = frontier, lag_ms >= 0 \
         FROM freshet_internal.sink_statuses WHERE name LIKE '%.s'",
    )
    .await;
    assert_eq!(
        status,
        vec![vec![
            Some("files".into()),
            Some("running".into()),
            None,
            Some("t".into()),
            Some("t".into()),
            Some("t".into()),
            Some("t".into())
        ]]
    );
    // A sink is no relation: `\d`'s query over pg_class does not list it.
    assert_eq!(
        rows(
            &c,
            "SELECT relname FROM pg_class WHERE relname IN ('s', 'sb', 't')"
        )
        .await,
        vec![vec![Some("t".to_string())]]
    );
    // The sinks hold their input; dropping the input needs CASCADE.
    assert!(holds_on(&c, "t").await >= 1);
    let e = c.batch_execute("DROP TABLE t").await.unwrap_err();
    assert_eq!(sqlstate(&e), "2BP01", "{e}");
    c.batch_execute("DROP SINK s; DROP SINK sb").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while holds_on(&c, "t").await > 0 {
        assert!(Instant::now() < deadline, "the sinks' holds stayed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(rows(&c, "SHOW SINKS").await.is_empty());
    assert!(
        rows(&c, "SELECT * FROM freshet_internal.sink_statuses")
            .await
            .is_empty()
    );
    // A directory that holds a sink's files is not taken by another.
    let e = c
        .batch_execute(&format!(
            "CREATE SINK again FROM t INTO FILES (PATH '{}')",
            dir.display()
        ))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "22023", "{e}");
}

#[tokio::test]
async fn sink_definitions_are_checked_at_create() {
    let s = Server::start();
    let c = s.connect().await;
    let out = tempfile::tempdir().unwrap();
    let path = |name: &str| out.path().join(name).display().to_string();
    c.batch_execute(
        "CREATE TABLE kv (k int PRIMARY KEY, v text); CREATE TABLE bag (k int, v text);
         CREATE MATERIALIZED VIEW counts AS SELECT k, count(*) AS n FROM bag GROUP BY k;
         CREATE TABLE iv (i interval)",
    )
    .await
    .unwrap();
    for (sql, code) in [
        // No key to upsert by.
        (
            format!(
                "CREATE SINK x FROM bag INTO FILES (PATH '{}') ENVELOPE UPSERT",
                path("a")
            ),
            "22023",
        ),
        // A key nothing makes unique.
        (
            format!(
                "CREATE SINK x FROM bag INTO FILES (PATH '{}') KEY (k) ENVELOPE UPSERT",
                path("a")
            ),
            "22023",
        ),
        (
            format!(
                "CREATE SINK x FROM kv INTO FILES (PATH '{}') KEY (nope) ENVELOPE UPSERT",
                path("a")
            ),
            "42703",
        ),
        (
            format!(
                "CREATE SINK x FROM kv INTO FILES (PATH '{}') KEY (k)",
                path("a")
            ),
            "22023",
        ),
        (
            format!(
                "CREATE SINK x FROM kv INTO FILES (PATH '{}') WITH (SNAP = true)",
                path("a")
            ),
            "22023",
        ),
        (
            "CREATE SINK x FROM kv INTO FILES (URL 's3://bucket/x')".to_string(),
            "0A000",
        ),
        // Parquet has no interval type.
        (
            format!("CREATE SINK x FROM iv INTO FILES (PATH '{}')", path("a")),
            "0A000",
        ),
        (
            format!(
                "CREATE SINK x FROM nothing INTO FILES (PATH '{}')",
                path("a")
            ),
            "42P01",
        ),
        (
            format!(
                "CREATE SINK x FROM kv INTO FILES (PATH '{}') FORMAT AVRO",
                path("a")
            ),
            "42601",
        ),
    ] {
        let e = c.batch_execute(&sql).await.unwrap_err();
        assert_eq!(sqlstate(&e), code, "{sql}: {e}");
    }
    // Keys that are provably unique: a primary key, a GROUP BY; or
    // vouched for.
    for sql in [
        format!(
            "CREATE SINK a FROM kv INTO FILES (PATH '{}') ENVELOPE UPSERT",
            path("b")
        ),
        format!(
            "CREATE SINK b FROM counts INTO FILES (PATH '{}') KEY (k) ENVELOPE DEBEZIUM",
            path("c")
        ),
        format!(
            "CREATE SINK c FROM bag INTO FILES (PATH '{}') KEY (k) NOT ENFORCED ENVELOPE UPSERT",
            path("d")
        ),
    ] {
        c.batch_execute(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let e = c
        .batch_execute(&format!(
            "CREATE SINK a FROM kv INTO FILES (PATH '{}')",
            path("e")
        ))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "42P07", "{e}");
    c.batch_execute(&format!(
        "CREATE SINK IF NOT EXISTS a FROM kv INTO FILES (PATH '{}')",
        path("e")
    ))
    .await
    .unwrap();
    let e = c
        .batch_execute(&format!(
            "BEGIN; CREATE SINK z FROM kv INTO FILES (PATH '{}')",
            path("f")
        ))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "25001", "{e}");
    c.batch_execute("ROLLBACK").await.unwrap();

    // Upserts and deletes by key; a violation of a key vouched for fails
    // the sink with the key in its status, and writes nothing past it.
    c.batch_execute(
        "INSERT INTO kv VALUES (1, 'a'), (2, 'b'); UPDATE kv SET v = 'A' WHERE k = 1;
         DELETE FROM kv WHERE k = 2; INSERT INTO bag VALUES (5, 'x')",
    )
    .await
    .unwrap();
    wait_exported(&c, "a", "kv").await;
    wait_exported(&c, "b", "bag").await;
    let (_, upserts) = read_sink(&out.path().join("b"));
    let shown: Vec<(String, Vec<String>)> = upserts
        .iter()
        .map(|c| (c.kind.clone(), c.columns.clone()))
        .collect();
    let s = |v: &str| v.to_string();
    assert_eq!(
        shown,
        vec![
            (s("upsert"), vec![s("1"), s("a")]),
            (s("upsert"), vec![s("2"), s("b")]),
            (s("upsert"), vec![s("1"), s("A")]),
            (s("delete"), vec![s("2"), s("NULL")]),
        ]
    );
    let (_, debezium) = read_sink(&out.path().join("c"));
    let shown: Vec<(String, Vec<String>)> = debezium
        .iter()
        .map(|c| (c.kind.clone(), c.columns.clone()))
        .collect();
    assert_eq!(shown, vec![(s("insert"), vec![s("5"), s("NULL"), s("1")])]);
    c.batch_execute("INSERT INTO bag VALUES (7, 'y'), (7, 'z')")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = rows(
            &c,
            "SELECT status, error FROM freshet_internal.sink_statuses WHERE name LIKE '%.c'",
        )
        .await;
        if status[0][0].as_deref() == Some("failed") {
            let error = status[0][1].clone().unwrap_or_default();
            assert!(
                error.contains("key violation") && error.contains("(7)"),
                "{error}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "no key violation: {status:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many kill -9 cycles a crash harness runs (`FRESHET_CRASH_CYCLES`,
/// default 4).
pub(crate) fn crash_cycles() -> usize {
    std::env::var("FRESHET_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4)
}

/// Writes to `t (k int PRIMARY KEY, <column> int)` from key `start` on,
/// until the server dies: inserts, with every fifth write a delete and
/// every seventh an update of `column`. Returns the key it stopped at.
pub(crate) fn churn(c: Client, start: i64, column: &'static str) -> tokio::task::JoinHandle<i64> {
    tokio::spawn(async move {
        let mut k = start;
        loop {
            let sql = if k % 5 == 0 {
                format!("DELETE FROM t WHERE k = {}", k - 3)
            } else if k % 7 == 0 {
                format!("UPDATE t SET {column} = {column} + 1 WHERE k = {}", k - 2)
            } else {
                format!("INSERT INTO t VALUES ({k}, {})", k % 4)
            };
            if c.batch_execute(&sql).await.is_err() {
                return k;
            }
            k += 1;
        }
    })
}

/// Whether `changes`, applied one timestamp at a time, keep every row's
/// multiplicity within 0..=1 (what a view with a key holds at every
/// time): a change repeated or lost shows as a count out of range or as
/// contents that differ at the end.
fn check_history(changes: &[Change]) {
    let mut state: BTreeMap<Vec<String>, i64> = BTreeMap::new();
    let mut i = 0;
    while i < changes.len() {
        let time = changes[i].time;
        while i < changes.len() && changes[i].time == time {
            let c = &changes[i];
            *state.entry(c.columns.clone()).or_default() += c.kind.parse::<i64>().unwrap();
            i += 1;
        }
        for (row, n) in &state {
            assert!(
                (0..=1).contains(n),
                "at {time}: {row:?} has multiplicity {n}"
            );
        }
    }
}

#[tokio::test]
async fn files_sinks_survive_kill_9_without_duplicates_or_gaps() {
    let cycles = crash_cycles();
    let mut s = Server::start();
    let out = tempfile::tempdir().unwrap();
    let raw = out.path().join("raw");
    let agg = out.path().join("agg");
    {
        let c = s.connect().await;
        c.batch_execute(
            "CREATE TABLE t (k int PRIMARY KEY, g int);
             CREATE MATERIALIZED VIEW groups AS SELECT g, count(*) AS n FROM t GROUP BY g;",
        )
        .await
        .unwrap();
        c.batch_execute(&format!(
            "CREATE SINK raw FROM t INTO FILES (PATH '{}');
             CREATE SINK agg FROM groups INTO FILES (PATH '{}');",
            raw.display(),
            agg.display()
        ))
        .await
        .unwrap();
    }
    let mut rng = rand::rng();
    let mut next = 1;
    for cycle in 0..cycles {
        let c = s.connect().await;
        // Writes go on while the sinks export; the server dies at a
        // random moment among them.
        let kill_after = Duration::from_millis(rng.random_range(200..2500));
        let writer = churn(s.connect().await, next, "g");
        tokio::time::sleep(kill_after).await;
        s.kill();
        next = writer.await.unwrap() + 1;
        drop(c);
        s.kill_and_restart();
        let c = s.connect().await;
        wait_exported(&c, "raw", "t").await;
        wait_exported(&c, "agg", "t").await;
        let (_, raw_changes) = read_sink(&raw);
        assert_eq!(
            consolidate(&raw_changes),
            contents(&c, "SELECT k::text, g::text FROM t").await,
            "cycle {cycle}: raw"
        );
        check_history(&raw_changes);
        let (_, agg_changes) = read_sink(&agg);
        assert_eq!(
            consolidate(&agg_changes),
            contents(&c, "SELECT g::text, n::text FROM groups").await,
            "cycle {cycle}: agg"
        );
        check_history(&agg_changes);
    }
}

//! Time: `mz_now()` and `AS OF`, `RETAIN HISTORY`, `REFRESH` schedules,
//! and compaction bounded by what materialized views need to resume.

use std::time::{Duration, Instant};

use crate::harness::*;

/// Poll `sql` until `done` holds for its first value (or fail after 20 s).
async fn wait_until(
    c: &tokio_postgres::Client,
    sql: &str,
    done: impl Fn(Option<&str>) -> bool,
) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = value(c, sql).await;
        if done(v.as_deref()) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting on {sql}: {v:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Wait until table `name`'s since has passed `t`.
async fn wait_for_since_past(c: &tokio_postgres::Client, name: &str, t: u64) {
    let sql = format!(
        "SELECT since FROM freshet_internal.collections WHERE object_name = 'freshet.public.{name}'"
    );
    wait_until(c, &sql, |v| {
        v.and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|since| since > t)
    })
    .await;
}

fn num(v: Option<String>) -> u64 {
    v.expect("a value").parse().expect("a number")
}

#[tokio::test(flavor = "multi_thread")]
async fn as_of_reads_history_kept_by_retain_history_and_refuses_below_since() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE kept (k int) WITH (RETAIN HISTORY FOR '1h');
         CREATE TABLE brief (k int);
         INSERT INTO kept VALUES (1), (2); INSERT INTO brief VALUES (1), (2);",
    )
    .await
    .unwrap();
    let t0 = num(value(&c, "SELECT mz_now()").await);
    c.batch_execute("INSERT INTO kept VALUES (3); INSERT INTO brief VALUES (3)")
        .await
        .unwrap();
    // mz_now() is the time the statement reads at.
    let explained = value(&c, "EXPLAIN TIMESTAMP FOR SELECT * FROM kept").await;
    assert!(explained.is_some());
    assert_eq!(
        value(&c, &format!("SELECT count(*) FROM kept AS OF {t0}"))
            .await
            .as_deref(),
        Some("2")
    );
    assert_eq!(
        value(
            &c,
            &format!("SELECT count(*) FROM kept AS OF AT LEAST {t0}")
        )
        .await
        .as_deref(),
        Some("3"),
        "AT LEAST picks the fresh time when it is later"
    );
    // Without RETAIN HISTORY, history goes about a second behind.
    wait_for_since_past(&c, "brief", t0).await;
    let err = c
        .simple_query(&format!("SELECT count(*) FROM brief AS OF {t0}"))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22000");
    let message = err.as_db_error().unwrap().message().to_string();
    assert!(
        message.starts_with(&format!(
            "Timestamp ({t0}) is not valid for all inputs: freshet.public.brief has since "
        )),
        "{message}"
    );
    // The retained table still answers at t0, also joined with itself.
    assert_eq!(
        value(
            &c,
            &format!("SELECT count(*) FROM kept a JOIN kept b ON a.k = b.k AS OF {t0}")
        )
        .await
        .as_deref(),
        Some("2")
    );
    // A future time waits until it is complete.
    let ahead = num(value(&c, "SELECT mz_now() + 1500").await);
    let began = Instant::now();
    assert_eq!(
        value(&c, &format!("SELECT count(*) FROM kept AS OF {ahead}"))
            .await
            .as_deref(),
        Some("3")
    );
    assert!(began.elapsed() >= Duration::from_millis(500));
    // SUBSCRIBE takes time expressions too: exactly t0's contents, ending
    // at UP TO; AT LEAST an hour ago starts at the earliest retained time.
    let s0 = format!("{t0} - (mz_now() - mz_now())");
    let snapshot = subscribe_rows(&c, &format!("SUBSCRIBE kept AS OF {s0} UP TO {t0} + 1")).await;
    assert_eq!(
        snapshot,
        [
            vec![t0.to_string(), "1".into(), "1".into()],
            vec![t0.to_string(), "1".into(), "2".into()]
        ]
    );
    let history = subscribe_rows(
        &c,
        "SUBSCRIBE kept AS OF AT LEAST mz_now() - 3600000 UP TO mz_now()",
    )
    .await;
    let mut keys: Vec<&str> = history.iter().map(|r| r[2].as_str()).collect();
    keys.sort();
    assert_eq!(keys, ["1", "2", "3"], "{history:?}");
    assert!(history.iter().any(|r| num(Some(r[0].clone())) <= t0));
    let err = c
        .simple_query(&format!(
            "BEGIN; DECLARE bad CURSOR FOR SUBSCRIBE kept AS OF {t0} + 10 UP TO {t0}"
        ))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22023", "{err}");
    c.batch_execute("ROLLBACK").await.unwrap();
    // RESET lets history go.
    c.batch_execute("ALTER TABLE kept RESET (RETAIN HISTORY)")
        .await
        .unwrap();
    wait_for_since_past(&c, "kept", t0).await;
    // REFRESH AT a time the inputs no longer hold is refused at CREATE.
    let err = c
        .simple_query(&format!(
            "CREATE MATERIALIZED VIEW late WITH (REFRESH AT {t0}) AS SELECT count(*) FROM kept"
        ))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22023");
}

#[tokio::test(flavor = "multi_thread")]
async fn scheduled_views_change_only_at_refresh_times_and_equal_their_query_there() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE t (g int, v int) WITH (RETAIN HISTORY FOR '1h');
         INSERT INTO t VALUES (1, 10), (2, 20);
         CREATE MATERIALIZED VIEW every2 WITH (REFRESH EVERY '2 seconds', RETAIN HISTORY FOR '1h') AS
           SELECT g, sum(v) AS total, count(*) AS n FROM t GROUP BY g;",
    )
    .await
    .unwrap();
    // The first refresh is at creation: reads wait for it, then see it.
    assert_eq!(
        rows(&c, "SELECT g, total FROM every2 ORDER BY g").await,
        vec![
            vec![Some("1".into()), Some("10".into())],
            vec![Some("2".into()), Some("20".into())]
        ]
    );
    c.batch_execute("INSERT INTO t VALUES (1, 5), (3, 30)")
        .await
        .unwrap();
    let before = rows(&c, "SELECT g, total FROM every2 ORDER BY g").await;
    let next = num(
        value(
            &c,
            "SELECT next_refresh FROM freshet_internal.materialized_view_refreshes WHERE object_name = 'freshet.public.every2'",
        )
        .await,
    );
    let now = num(value(&c, "SELECT mz_now()").await);
    if now < next {
        // Between refreshes the view still shows the previous one.
        assert_eq!(before.len(), 2, "{before:?}");
    }
    let fresh = wait_until(&c, "SELECT count(*) FROM every2", |v| v == Some("3")).await;
    assert_eq!(fresh.as_deref(), Some("3"));
    // At every read, the view equals its query at the last refresh.
    for _ in 0..3 {
        let last = num(
            value(
                &c,
                "SELECT last_completed_refresh FROM freshet_internal.materialized_view_refreshes WHERE object_name = 'freshet.public.every2'",
            )
            .await,
        );
        let view = rows(
            &c,
            &format!("SELECT g, total, n FROM every2 ORDER BY g AS OF {last}"),
        )
        .await;
        let query = rows(
            &c,
            &format!("SELECT g, sum(v), count(*) FROM t GROUP BY g ORDER BY g AS OF {last}"),
        )
        .await;
        assert_eq!(view, query, "at refresh {last}");
        c.batch_execute("INSERT INTO t VALUES (2, 1)")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    // A view whose only refresh is ahead: reads wait for it.
    let at = num(value(&c, "SELECT mz_now() + 1500").await);
    c.batch_execute(&format!(
        "CREATE MATERIALIZED VIEW later WITH (REFRESH AT {at}) AS SELECT count(*) AS n FROM t"
    ))
    .await
    .unwrap();
    let n = value(&c, "SELECT n FROM later").await;
    // The read answered no earlier than the refresh (however long the
    // CREATE took under load, which once left under 500 ms to wait).
    assert!(num(value(&c, "SELECT mz_now()").await) >= at);
    assert_eq!(
        n,
        value(&c, &format!("SELECT count(*) FROM t AS OF {at}")).await
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn compaction_keeps_inputs_resumable_for_views_across_kill_9() {
    let mut s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE a (k int, v int); CREATE TABLE b (k int, w int);
         INSERT INTO a SELECT g, g FROM generate_series(1, 200) AS s(g);
         INSERT INTO b SELECT g % 10, g FROM generate_series(1, 50) AS s(g);
         CREATE MATERIALIZED VIEW j AS SELECT a.k % 10 AS g, sum(v) AS sv, count(*) AS n FROM a JOIN b ON a.k % 10 = b.k GROUP BY 1;
         CREATE MATERIALIZED VIEW once WITH (REFRESH AT CREATION) AS SELECT count(*) AS n FROM a;",
    )
    .await
    .unwrap();
    for i in 0..30 {
        c.batch_execute(&format!(
            "INSERT INTO a VALUES ({i}, {i}); DELETE FROM b WHERE w = {}",
            i + 1
        ))
        .await
        .unwrap();
    }
    // Every input's since stays at or below its permission.
    for row in rows(
        &c,
        "SELECT object_name, since, compaction_permission FROM freshet_internal.collections WHERE compaction_permission IS NOT NULL",
    )
    .await
    {
        let since: u64 = row[1].as_deref().unwrap().parse().unwrap();
        let permitted: u64 = row[2].as_deref().unwrap().parse().unwrap();
        assert!(since <= permitted, "{row:?}");
    }
    let once = value(&c, "SELECT n FROM once").await;
    drop(c);
    s.kill_and_restart();
    let c = s.connect().await;
    let recompute = "SELECT a.k % 10 AS g, sum(v), count(*) FROM a JOIN b ON a.k % 10 = b.k GROUP BY 1 ORDER BY 1";
    assert_eq!(
        rows(&c, "SELECT g, sv, n FROM j ORDER BY g").await,
        rows(&c, recompute).await
    );
    // The view resumed from its own output, not from a later time its
    // inputs were compacted to.
    let resumed = rows(
        &c,
        "SELECT d.as_of, c.upper FROM freshet_internal.dataflows d JOIN freshet_internal.collections c ON c.object_name = d.object_name WHERE d.object_name = 'freshet.public.j'",
    )
    .await;
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert_eq!(value(&c, "SELECT n FROM once").await, once);
    c.batch_execute("INSERT INTO a VALUES (7, 7)")
        .await
        .unwrap();
    assert_eq!(
        rows(&c, "SELECT g, sv, n FROM j ORDER BY g").await,
        rows(&c, recompute).await
    );
    assert_eq!(value(&c, "SELECT n FROM once").await, once);
}

#[tokio::test(flavor = "multi_thread")]
async fn plans_written_by_another_build_are_planned_again_and_written_back() {
    let mut s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE t (g int, v int);
         INSERT INTO t VALUES (1, 10), (2, 20), (1, 5);
         CREATE MATERIALIZED VIEW totals AS SELECT g, sum(v) AS total FROM t GROUP BY g;
         CREATE INDEX totals_g ON totals (g);",
    )
    .await
    .unwrap();
    let formats = "SELECT DISTINCT written_plan_format FROM freshet_internal.dataflows \
                   WHERE object_name IN ('freshet.public.totals', 'freshet.public.totals_g')";
    let ours = rows(&c, formats).await;
    assert_eq!(ours.len(), 1, "{ours:?}");
    let ours = ours[0][0].clone().expect("a written plan format");
    assert!(ours.starts_with("freshet-plan-"), "{ours}");
    drop(c);

    // Pretend an older build wrote the catalog: its plans carry another
    // format, which this build must not decode.
    s.kill();
    let old = "freshet-plan-0/datafusion-0.0.0";
    use freshet_storage::Consensus as _;
    let consensus = freshet_storage::FileConsensus::open(s.data_dir.join("consensus")).unwrap();
    let mut rewritten = 0;
    let entries: Vec<_> = consensus
        .scan("catalog", 0)
        .unwrap()
        .into_iter()
        .map(|mut entry| {
            let text = String::from_utf8(entry.data).unwrap();
            if text.contains(&ours) {
                rewritten += 1;
            }
            entry.data = text.replace(&ours, old).into_bytes();
            entry
        })
        .collect();
    consensus.replace_log("catalog", &entries).unwrap();
    drop(consensus);
    assert!(rewritten > 0, "no catalog entry holds a written plan");
    s.kill_and_restart();
    let c = s.connect().await;

    // Boot planned both again from SQL, runs them, and says so.
    let explained = rows(&c, "EXPLAIN MATERIALIZED VIEW totals").await;
    assert!(
        explained[0][0]
            .as_deref()
            .is_some_and(|l| l.contains("again from its SQL") && l.contains(old)),
        "{explained:?}"
    );
    let explained = rows(&c, "EXPLAIN INDEX totals_g").await;
    assert!(
        explained[0][0]
            .as_deref()
            .is_some_and(|l| l.contains("again from its SQL")),
        "{explained:?}"
    );
    c.batch_execute("INSERT INTO t VALUES (2, 1), (3, 7)")
        .await
        .unwrap();
    let expected = rows(&c, "SELECT g, sum(v) FROM t GROUP BY g ORDER BY g").await;
    assert_eq!(
        rows(&c, "SELECT g, total FROM totals ORDER BY g").await,
        expected
    );
    assert_eq!(
        rows(&c, "SELECT total FROM totals WHERE g = 3").await,
        vec![vec![Some("7".into())]],
        "the index answers from the replanned dataflow"
    );
    // The new plans were committed: the next boot installs them as written.
    assert_eq!(rows(&c, formats).await, vec![vec![Some(ours.clone())]]);
    drop(c);
    s.kill_and_restart();
    let c = s.connect().await;
    assert_eq!(rows(&c, formats).await, vec![vec![Some(ours)]]);
    assert_eq!(
        rows(&c, "SELECT g, total FROM totals ORDER BY g").await,
        expected
    );
}

/// Every row a bounded `SUBSCRIBE` (one with `UP TO`) sends before it
/// ends, read through a cursor, sorted.
async fn subscribe_rows(c: &tokio_postgres::Client, subscribe: &str) -> Vec<Vec<String>> {
    c.batch_execute(&format!("BEGIN; DECLARE sub CURSOR FOR {subscribe}"))
        .await
        .unwrap();
    let mut out = Vec::new();
    loop {
        let fetched = rows(c, "FETCH ALL sub").await;
        if fetched.is_empty() {
            break;
        }
        out.extend(fetched.into_iter().map(|r| {
            r.into_iter()
                .map(|v| v.unwrap_or_default())
                .collect::<Vec<_>>()
        }));
    }
    c.batch_execute("COMMIT").await.unwrap();
    out.sort();
    out
}

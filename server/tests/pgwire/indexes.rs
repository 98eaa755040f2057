//! Index reads over the extended protocol: prepared key lookups with `$n`
//! parameters are answered from the index and agree with the general path.

use crate::harness::*;
use tokio_postgres::types::ToSql;

/// Rows of two integer columns, sorted, for comparing results.
fn pairs(rows: Vec<tokio_postgres::Row>) -> Vec<(i32, i32)> {
    let mut out: Vec<(i32, i32)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    out.sort();
    out
}

/// Rows as sorted text, for comparing results.
fn sorted(rows: &[tokio_postgres::Row]) -> Vec<(Option<i32>, Option<String>)> {
    let mut out: Vec<(Option<i32>, Option<String>)> =
        rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn prepared_lookups_on_an_index_agree_with_the_table() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE t (k int, v text);
         INSERT INTO t SELECT value % 20, 'v' || value FROM generate_series(1, 500);
         INSERT INTO t VALUES (NULL, 'null key');
         CREATE VIEW t_copy AS SELECT k, v FROM t;
         CREATE INDEX t_k ON t (k)",
    )
    .await
    .unwrap();
    let indexed = c.prepare("SELECT * FROM t WHERE k = $1").await.unwrap();
    // The view has no index: the general path over the same rows.
    let general = c
        .prepare("SELECT * FROM t_copy WHERE k = $1")
        .await
        .unwrap();
    for key in [Some(0), Some(7), Some(19), Some(20), Some(-1), None] {
        let a = c.query(&indexed, &[&key]).await.unwrap();
        let b = c.query(&general, &[&key]).await.unwrap();
        assert_eq!(sorted(&a), sorted(&b), "key {key:?}");
        if key.is_some_and(|k| (0..20).contains(&k)) {
            assert_eq!(a.len(), 25, "key {key:?}");
        }
    }
    // Writes are visible to the next prepared lookup.
    c.execute("INSERT INTO t VALUES (7, 'late')", &[])
        .await
        .unwrap();
    let rows = c.query(&indexed, &[&Some(7)]).await.unwrap();
    assert_eq!(rows.len(), 26);
    assert!(sorted(&rows).contains(&(Some(7), Some("late".to_string()))));
    // The simple protocol's literal form takes the fast path.
    let plan = value(&c, "EXPLAIN SELECT * FROM t WHERE k = 7").await;
    assert!(
        plan.as_deref().is_some_and(|p| p.starts_with("Fast path")),
        "{plan:?}"
    );
}

/// Keyed lookups are answered from the batches the index's workers
/// publish after each step, on the session's own thread. Under a stream of
/// writes, a lookup must see every write acknowledged before it (a
/// published list not yet complete at the read's time is not used), and
/// inside a transaction it must read the same time as the general path.
#[tokio::test(flavor = "multi_thread")]
async fn keyed_lookups_under_writes_see_every_acknowledged_write() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE t (k int, v int);
         INSERT INTO t SELECT g % 20, g FROM generate_series(1, 200) AS s(g);
         CREATE VIEW t_copy AS SELECT k, v FROM t;
         CREATE INDEX t_k ON t (k)",
    )
    .await
    .unwrap();
    let writer = s.connect().await;
    let writes = tokio::spawn(async move {
        for g in 1_000..1_400 {
            writer
                .execute(&format!("INSERT INTO t VALUES ({}, {g})", g % 20), &[])
                .await
                .unwrap();
        }
    });
    let indexed = c.prepare("SELECT k, v FROM t WHERE k = $1").await.unwrap();
    let general = c
        .prepare("SELECT k, v FROM t_copy WHERE k = $1")
        .await
        .unwrap();
    for round in 0..200i32 {
        let key = round % 20;
        c.batch_execute("BEGIN").await.unwrap();
        let a = pairs(c.query(&indexed, &[&key]).await.unwrap());
        let b = pairs(c.query(&general, &[&key]).await.unwrap());
        c.batch_execute("COMMIT").await.unwrap();
        assert_eq!(a, b, "round {round}: key {key}");
        // Read-your-write: the row just acknowledged is there.
        let mine = 5_000 + round;
        c.execute(&format!("INSERT INTO t VALUES ({key}, {mine})"), &[])
            .await
            .unwrap();
        let after = pairs(c.query(&indexed, &[&key]).await.unwrap());
        assert!(
            after.contains(&(key, mine)),
            "round {round}: {mine} missing"
        );
        assert!(
            after.len() > a.len(),
            "round {round}: fewer rows than before"
        );
    }
    writes.await.unwrap();
    let total = value(&c, "SELECT count(*) FROM t").await;
    assert_eq!(total.as_deref(), Some("800"));
}

/// A keyed lookup finds its key in each batch of the key's worker through
/// a hash directory once the batch is large (4,096 keys) and has been
/// probed 16 times; the rows of one key spread over several batches
/// (an update's retraction in a later batch than the row) must still sum
/// to what the general path reads, for keys present, updated, deleted
/// and never there.
#[tokio::test(flavor = "multi_thread")]
async fn keyed_lookups_over_large_batches_agree_with_the_general_path() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE t (k int, v int);
         INSERT INTO t SELECT g, g * 10 FROM generate_series(1, 20000) AS s(g);
         CREATE VIEW t_copy AS SELECT k, v FROM t;
         CREATE INDEX t_k ON t (k)",
    )
    .await
    .unwrap();
    let indexed = c.prepare("SELECT k, v FROM t WHERE k = $1").await.unwrap();
    let general = c
        .prepare("SELECT k, v FROM t_copy WHERE k = $1")
        .await
        .unwrap();
    // Enough probes that both workers' large batches build directories.
    for key in (1..=20_000).step_by(97) {
        let rows = pairs(c.query(&indexed, &[&key]).await.unwrap());
        assert_eq!(rows, vec![(key, key * 10)], "key {key}");
    }
    for absent in [0, -5, 20_001, 1 << 30] {
        assert!(c.query(&indexed, &[&absent]).await.unwrap().is_empty());
    }
    // Later batches retract and add rows of keys the large batches hold.
    c.batch_execute(
        "UPDATE t SET v = v + 1 WHERE k % 1000 = 7;
         DELETE FROM t WHERE k % 1000 = 9;
         INSERT INTO t SELECT g, -g FROM generate_series(1, 20000, 500) AS s(g);
         INSERT INTO t VALUES (25000, 1), (-3, 2)",
    )
    .await
    .unwrap();
    let mut keys: Vec<i32> = (0..20).flat_map(|i| [i * 1000 + 7, i * 1000 + 9]).collect();
    keys.extend((1..20_000).step_by(500));
    keys.extend([25_000, -3, 0, 12_345, 20_001]);
    for _ in 0..2 {
        for &key in &keys {
            let a = pairs(c.query(&indexed, &[&key]).await.unwrap());
            let b = pairs(c.query(&general, &[&key]).await.unwrap());
            assert_eq!(a, b, "key {key}");
        }
    }
    let updated = pairs(c.query(&indexed, &[&1007]).await.unwrap());
    assert_eq!(updated, vec![(1007, 10_071)]);
    assert!(c.query(&indexed, &[&1009]).await.unwrap().is_empty());
    let doubled = pairs(c.query(&indexed, &[&501]).await.unwrap());
    assert_eq!(doubled, vec![(501, -501), (501, 5010)]);
}

/// Queries that map, filter, sort and limit one indexed object: each is
/// answered from the index (EXPLAIN says "Fast path") and returns what the
/// same query returns over an identical materialized view without an index
/// (the general DataFusion path), including NULLs, casts, expressions,
/// ORDER BY/LIMIT/OFFSET and keys that match nothing.
#[tokio::test(flavor = "multi_thread")]
async fn peeks_with_expressions_agree_with_the_general_path() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE t (k int, g text, v int);
         INSERT INTO t SELECT value % 50, 'g' || (value % 7), value FROM generate_series(1, 2000);
         INSERT INTO t VALUES (NULL, NULL, 5), (3, NULL, NULL);
         CREATE MATERIALIZED VIEW agg AS
             SELECT k, g, count(*) AS n, sum(v) AS s, max(v) AS m FROM t GROUP BY k, g;
         CREATE MATERIALIZED VIEW plain AS
             SELECT k, g, count(*) AS n, sum(v) AS s, max(v) AS m FROM t GROUP BY k, g;
         CREATE INDEX agg_k ON agg (k);
         CREATE INDEX agg_kg ON agg (k, g);
         CREATE INDEX t_g ON t (g)",
    )
    .await
    .unwrap();
    let queries = [
        "SELECT n FROM {} WHERE k = 7",
        "SELECT k, n FROM {} WHERE k = 7",
        "SELECT n AS cnt, k, n FROM {} WHERE k = 7 AND g = 'g0'",
        "SELECT n * 2 AS twice, s - m, g || '!' FROM {} WHERE k = 7 AND n > 40",
        "SELECT g, s FROM {} WHERE k = 3 AND g = 'g3'",
        "SELECT g, s FROM {} WHERE g = 'g3' AND k = 3",
        "SELECT * FROM {} WHERE k = 7 AND g IS NOT NULL",
        "SELECT k FROM {} WHERE k::bigint = 12",
        "SELECT k FROM {} WHERE k = 7.5",
        "SELECT k FROM {} WHERE k = 7.0",
        "SELECT k FROM {} WHERE k = 99999999999",
        "SELECT k, g FROM {} WHERE k = NULL",
        "SELECT k, g, n FROM {} WHERE k IS NULL",
        "SELECT x.k, x.n FROM {} AS x WHERE x.k = 11",
        "SELECT k, n FROM {} WHERE k IN (1, 2, 49) AND n % 2 = 0",
        "SELECT k, g, s FROM {} ORDER BY s DESC, k, g LIMIT 5",
        "SELECT k, g FROM {} WHERE n > 40 ORDER BY k NULLS FIRST, g OFFSET 3 LIMIT 4",
        "SELECT k, g FROM {} ORDER BY k DESC NULLS LAST, g LIMIT 3 OFFSET 300",
        "SELECT coalesce(g, 'none'), CASE WHEN m > 1000 THEN 'big' ELSE 'small' END FROM {} WHERE k = 3",
        "SELECT k, upper(g), length(g) FROM {} WHERE k = 20 AND g LIKE 'g%'",
        "SELECT k, s::numeric / n AS mean FROM {} WHERE k = 21",
        "SELECT DISTINCT k FROM {} WHERE k < 3",
        "SELECT count(*), sum(n) FROM {} WHERE k = 7",
        // Bounds on the key read a range of the index.
        "SELECT k, g, n FROM {} WHERE k > 45",
        "SELECT k, g FROM {} WHERE k BETWEEN 3 AND 5 AND g = 'g3'",
        "SELECT k, g FROM {} WHERE 10 >= k AND k > 7.5",
        "SELECT k, g FROM {} WHERE k < NULL",
        "SELECT k, g FROM {} WHERE k >= 48 AND k >= 47 AND k < 100 AND k <= 48",
        "SELECT k, g FROM {} WHERE k > 10 AND k < 5",
        "SELECT k, s FROM {} WHERE k::bigint <= 1 ORDER BY k DESC, s LIMIT 3",
    ];
    for template in queries {
        let indexed = template.replace("{}", "agg");
        let general = template.replace("{}", "plain");
        let mut a = rows(&c, &indexed).await;
        let mut b = rows(&c, &general).await;
        if !template.contains("ORDER BY") {
            a.sort();
            b.sort();
        }
        assert_eq!(a, b, "{indexed}");
        let plan = value(&c, &format!("EXPLAIN {indexed}")).await;
        let fast = plan.as_deref().is_some_and(|p| p.starts_with("Fast path"));
        // Aggregates and DISTINCT are DataFusion's, and so is `key IN
        // (...)` (it seeks each key); everything else peeks.
        let expect_fast = !template.contains("count(")
            && !template.contains("DISTINCT")
            && !template.contains(" IN (");
        assert_eq!(fast, expect_fast, "{indexed}: {plan:?}");
    }
    let plan = value(&c, "EXPLAIN SELECT k, n FROM agg WHERE k > 45 AND k <= 47").await;
    assert_eq!(
        plan.as_deref(),
        Some("Fast path: Peek index agg_k on (k) where k > 45 and k <= 47"),
    );
    // A prepared range: its bounds bound per execution (NULL and inexact
    // bounds narrow nothing; the filter decides).
    let ranged = c
        .prepare("SELECT k, g, n FROM agg WHERE k > $1 AND k <= $2 AND k < $1 + 4")
        .await
        .unwrap();
    let ranged_plain = c
        .prepare("SELECT k, g, n FROM plain WHERE k > $1 AND k <= $2 AND k < $1 + 4")
        .await
        .unwrap();
    for (lo, hi) in [
        (Some(40), Some(45)),
        (Some(-5), Some(2)),
        (None, Some(3)),
        (Some(47), None),
        (Some(9), Some(3)),
    ] {
        let read = |st: &tokio_postgres::Statement| {
            let (c, st) = (&c, st.clone());
            async move {
                let mut out: Vec<(Option<i32>, Option<String>, i64)> = c
                    .query(&st, &[&lo, &hi])
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| (r.get(0), r.get(1), r.get(2)))
                    .collect();
                out.sort();
                out
            }
        };
        assert_eq!(
            read(&ranged).await,
            read(&ranged_plain).await,
            "{lo:?}..{hi:?}"
        );
    }
    // EXPLAIN of a statement with parameters takes them (as PostgreSQL).
    let explained = c
        .query("EXPLAIN SELECT n FROM agg WHERE k = $1", &[&7i32])
        .await
        .unwrap();
    let first: &str = explained[0].get(0);
    assert!(first.starts_with("Fast path: Peek index"), "{first}");
    let general: Vec<String> = c
        .query("EXPLAIN SELECT sum(n) FROM agg WHERE k = $1", &[&7i32])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(general[0].contains("logical plan"), "{general:?}");
    // Renamed columns keep their names.
    let renamed = c
        .prepare("SELECT n AS cnt, k FROM agg WHERE k = 7")
        .await
        .unwrap();
    let names: Vec<&str> = renamed.columns().iter().map(|c| c.name()).collect();
    assert_eq!(names, ["cnt", "k"]);
    // A key on every column of a two-column index is a keyed lookup; one
    // column of it alone uses the one-column index.
    let plan = rows(&c, "EXPLAIN SELECT s FROM agg WHERE g = 'g1' AND k = 8").await;
    assert!(
        plan[0][0]
            .as_deref()
            .unwrap_or_default()
            .contains("on (k) = (8)")
            || plan[0][0]
                .as_deref()
                .unwrap_or_default()
                .contains("on (k, g) = (8, g1)"),
        "{plan:?}"
    );
    // An indexed table: expressions over its rows, and the block's own
    // writes shown (the general path takes over once the block wrote).
    let plan = value(&c, "EXPLAIN SELECT v + 1 FROM t WHERE g = 'g2'").await;
    assert!(
        plan.as_deref()
            .is_some_and(|p| p.starts_with("Fast path: Peek index t_g on (g)")),
        "{plan:?}"
    );
    c.batch_execute("BEGIN; INSERT INTO t VALUES (1, 'g2', -1)")
        .await
        .unwrap();
    let in_block = rows(&c, "SELECT v + 1 FROM t WHERE g = 'g2' AND v < 0").await;
    assert_eq!(in_block, vec![vec![Some("0".to_string())]]);
    c.batch_execute("ROLLBACK").await.unwrap();
    // Prepared: the parameter is bound before the peek is decided.
    let prepared = c
        .prepare("SELECT n, s FROM agg WHERE k = $1 AND g = $2")
        .await
        .unwrap();
    let general = c
        .prepare("SELECT n, s FROM plain WHERE k = $1 AND g = $2")
        .await
        .unwrap();
    // The prepared statement's rows for `(k, g)` equal the general path's.
    let agree = |label: &'static str, keys: Vec<(Option<i32>, Option<&'static str>)>| {
        let (c, prepared, general) = (&c, &prepared, &general);
        async move {
            let run = |st: &tokio_postgres::Statement, k: Option<i32>, g: Option<&str>| {
                let st = st.clone();
                let g = g.map(str::to_string);
                async move {
                    c.query(&st, &[&k, &g])
                        .await
                        .unwrap()
                        .iter()
                        .map(|r| (r.get::<_, i64>(0), r.get::<_, Option<i64>>(1)))
                        .collect::<Vec<_>>()
                }
            };
            for (k, g) in keys {
                assert_eq!(
                    run(prepared, k, g).await,
                    run(general, k, g).await,
                    "{label}: k {k:?} g {g:?}"
                );
            }
        }
    };
    agree(
        "indexed",
        vec![
            (Some(3), Some("g3")),
            (Some(3), None),
            (None, Some("g1")),
            (Some(70), Some("g1")),
        ],
    )
    .await;
    // The peek a prepared statement kept at Parse is planned again once
    // the catalog changes under it: without its indexes the statement
    // reads storage, and a new index serves it again.
    let again = || {
        vec![
            (Some(3), Some("g3")),
            (Some(49), Some("g0")),
            (Some(1), None),
        ]
    };
    c.batch_execute("DROP INDEX agg_k; DROP INDEX agg_kg")
        .await
        .unwrap();
    agree("no index", again()).await;
    c.batch_execute("INSERT INTO t VALUES (3, 'g3', 1000); CREATE INDEX agg_gk ON agg (g, k)")
        .await
        .unwrap();
    agree("new index", again()).await;
    // `now()` in a peek kept at Parse is each execution's time.
    let clock = c
        .prepare("SELECT k, now()::text FROM agg WHERE k = $1 AND g = 'g3'")
        .await
        .unwrap();
    let first: String = c.query_one(&clock, &[&Some(3)]).await.unwrap().get(1);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let second: String = c.query_one(&clock, &[&Some(3)]).await.unwrap().get(1);
    assert!(second > first, "{first} then {second}");
    c.batch_execute("SET search_path = pg_catalog")
        .await
        .unwrap();
    let e = c
        .query(&prepared, &[&Some(3), &Some("g3")])
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "42P01", "{e}");
}

/// A keyed lookup decides its key equalities (they are dropped from the
/// steps applied to its rows) only for key types whose encoded equality
/// is SQL's and only when the key's value is known: NULL or inexact keys,
/// float keys (`-0` and `0` encode alike), a second equality on the key
/// column and extra conjuncts still filter. Each query, prepared with
/// parameters and in the simple protocol's literal form, returns what the
/// same query returns over a view without indexes.
#[tokio::test(flavor = "multi_thread")]
async fn key_equalities_decided_by_lookups_agree_with_the_general_path() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE w (i int, b bigint, f float8, d numeric(10,2), t text, v int);
         INSERT INTO w VALUES (1, 10, 0.0, 1.50, 'a', 1), (2, 20, -1.5, 2.25, 'b', 2),
             (3, 30, 'NaN', 3.00, 'ab', 3), (NULL, NULL, NULL, NULL, NULL, 4),
             (1, 10, 2.5, 1.50, 'a', 5), (4, 40, -0.0, 0.00, '', 6);
         CREATE MATERIALIZED VIEW wi AS SELECT * FROM w;
         CREATE MATERIALIZED VIEW wp AS SELECT * FROM w;
         CREATE INDEX wi_i ON wi (i); CREATE INDEX wi_b ON wi (b);
         CREATE INDEX wi_f ON wi (f); CREATE INDEX wi_d ON wi (d);
         CREATE INDEX wi_t ON wi (t); CREATE INDEX wi_it ON wi (i, t)",
    )
    .await
    .unwrap();
    async fn both(c: &tokio_postgres::Client, template: &str, params: &[&(dyn ToSql + Sync)]) {
        let run = |view: &str| {
            let sql = template.replace("{}", view);
            async move {
                let mut out: Vec<Option<i32>> = c
                    .query(sql.as_str(), params)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                out.sort();
                out
            }
        };
        let (indexed, general) = (run("wi").await, run("wp").await);
        assert_eq!(indexed, general, "{template} with {params:?}");
    }
    let ints: [Option<i32>; 4] = [Some(1), Some(4), Some(9), None];
    for i in &ints {
        both(&c, "SELECT v FROM {} WHERE i = $1", &[i]).await;
        both(&c, "SELECT v FROM {} WHERE i = $1 AND v > 1", &[i]).await;
        for j in &ints {
            both(&c, "SELECT v FROM {} WHERE i = $1 AND i = $2", &[i, j]).await;
        }
    }
    for b in [Some(10i64), Some(1 << 40), None] {
        both(&c, "SELECT v FROM {} WHERE b = $1", &[&b]).await;
        both(&c, "SELECT v FROM {} WHERE i::bigint = $1", &[&b]).await;
    }
    for f in [0.0f64, -0.0, f64::NAN, 2.5, -1.5] {
        both(&c, "SELECT v FROM {} WHERE f = $1", &[&f]).await;
    }
    for t in ["a", "ab", "", "A"] {
        both(&c, "SELECT v FROM {} WHERE t = $1", &[&t]).await;
        both(&c, "SELECT v FROM {} WHERE i = $1 AND t = $2", &[&1i32, &t]).await;
    }
    for d in ["1.5", "1.50", "1.505", "0", "-0.00", "3"] {
        both(&c, &format!("SELECT v FROM {{}} WHERE d = {d}"), &[]).await;
    }
    for literal in [
        "i = 1",
        "i = 1 AND i = 2",
        "i = 1 AND v > 1",
        "i::bigint = 1099511627776",
        "f = '-0'::float8",
        "f = 'NaN'",
        "t = 'ab'",
        "i = 1 AND t = 'a'",
    ] {
        let template = format!("SELECT v FROM {{}} WHERE {literal}");
        let mut a = rows(&c, &template.replace("{}", "wi")).await;
        let mut b = rows(&c, &template.replace("{}", "wp")).await;
        a.sort();
        b.sort();
        assert_eq!(a, b, "{template}");
    }
    // EXPLAIN shows what is still filtered: not an integer key's equality
    // the lookup decides, but a float key's, and any other conjunct.
    let explain = |sql: &'static str| {
        let c = &c;
        async move { rows(c, &format!("EXPLAIN {sql}")).await.concat() }
    };
    let plan = explain("SELECT v + 1 FROM wi WHERE i = 1").await;
    assert!(
        !plan.iter().flatten().any(|l| l.contains("Filter")),
        "{plan:?}"
    );
    let plan = explain("SELECT v + 1 FROM wi WHERE i = 1 AND v > 1").await;
    let filters: Vec<&String> = plan
        .iter()
        .flatten()
        .filter(|l| l.contains("Filter"))
        .collect();
    assert!(
        filters.len() == 1 && !filters[0].contains("wi.i"),
        "{plan:?}"
    );
    let plan = explain("SELECT v + 1 FROM wi WHERE f = 2.5::float8").await;
    assert!(
        plan.iter()
            .flatten()
            .any(|l| l.contains("Filter") && l.contains("wi.f")),
        "{plan:?}"
    );
}

/// The EXPLAIN lines that name index seeks.
async fn seeks(c: &tokio_postgres::Client, sql: &str) -> Vec<String> {
    rows(c, &format!("EXPLAIN {sql}"))
        .await
        .into_iter()
        .filter_map(|r| r.into_iter().next().flatten())
        .skip_while(|l| l != "Index seeks:")
        .skip(1)
        .map(|l| l.trim().to_string())
        .collect()
}

/// Queries the fast path cannot answer (joins, aggregates, `IN` lists,
/// subqueries, writes) read an indexed table or view by seeking the keys
/// their filters fix, and return what the same queries return over an
/// identical object without an index; EXPLAIN names the index each input
/// is read through. Writes whose plans seek (UPDATE, DELETE, INSERT ...
/// SELECT) leave the indexed table equal to its unindexed twin, and a
/// transaction that wrote reads its own writes.
#[tokio::test(flavor = "multi_thread")]
async fn key_filters_seek_in_indexes_and_agree_with_storage() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE t (k int, g text, v int);
         CREATE TABLE u (k int, g text, v int);
         INSERT INTO t SELECT value % 50, 'g' || (value % 7), value FROM generate_series(1, 2000);
         INSERT INTO t VALUES (NULL, NULL, 5), (3, NULL, NULL);
         INSERT INTO u SELECT * FROM t;
         CREATE INDEX t_k ON t (k);
         CREATE INDEX t_gk ON t (g, k);
         CREATE MATERIALIZED VIEW agg AS SELECT k, g, count(*) AS n, sum(v) AS s FROM t GROUP BY k, g;
         CREATE MATERIALIZED VIEW plain AS SELECT k, g, count(*) AS n, sum(v) AS s FROM u GROUP BY k, g;
         CREATE INDEX agg_k ON agg (k);
         CREATE VIEW doubled AS SELECT k, g, v * 2 AS w FROM t;
         CREATE VIEW doubled_plain AS SELECT k, g, v * 2 AS w FROM u;
         CREATE INDEX doubled_k ON doubled (k);
         CREATE TABLE dim (id int, name text);
         INSERT INTO dim SELECT value, 'n' || value FROM generate_series(0, 49)",
    )
    .await
    .unwrap();
    // (template over {t}, {agg}, {doubled}; the seeks EXPLAIN names)
    let cases: [(&str, &[&str]); 20] = [
        (
            "SELECT a.n, d.name FROM {agg} a JOIN dim d ON d.id = a.k WHERE a.k = 7",
            &["index agg_k on (k) = (7)"],
        ),
        (
            "SELECT count(*), sum(v) FROM {t} WHERE k = 7",
            &["index t_k on (k) = (7)"],
        ),
        (
            "SELECT k, g, v FROM {t} WHERE k IN (3, 1, 3, 999) AND v > 100",
            &["index t_k on (k) = any of [(1), (3), (999)]"],
        ),
        (
            "SELECT k, count(*) FROM {t} WHERE k = 4 OR k = 5 GROUP BY k",
            &["index t_k on (k) = any of [(4), (5)]"],
        ),
        (
            "SELECT k, v FROM {t} WHERE g = 'g2' AND k IN (1, 2)",
            // The first index whose key the filters fix serves.
            &["index t_k on (k) = any of [(1), (2)]"],
        ),
        // Contradictions and NULL keys: DataFusion reads nothing at all.
        ("SELECT count(*) FROM {t} WHERE k = 1 AND k = 2", &[]),
        ("SELECT count(v) FROM {t} WHERE k = NULL", &[]),
        ("SELECT k, v FROM {t} WHERE k IS NULL", &[]),
        ("SELECT k, v FROM {t} WHERE k = 7.5", &[]),
        (
            "SELECT v FROM {t} WHERE g = 'g2' AND k IN (1, 2) AND g IN ('g2')",
            &["index t_k on (k) = any of [(1), (2)]"],
        ),
        (
            "SELECT max(w) FROM {doubled} WHERE k IN (8, 9)",
            &["index doubled_k on (k) = any of [(8), (9)]"],
        ),
        (
            "SELECT g, (SELECT max(s) FROM {agg} WHERE k = 9) FROM {t} WHERE k = 9",
            &["index agg_k on (k) = (9)", "index t_k on (k) = (9)"],
        ),
        // Bounds on an index's first key column read that range of it
        // (in plans with aggregates; a plain read is a fast-path peek of
        // the range).
        (
            "SELECT k, sum(v) FROM {t} WHERE k >= 47 AND v > 1900 GROUP BY k",
            &["index t_k on (k) where k >= 47"],
        ),
        (
            "SELECT count(*), sum(v) FROM {t} WHERE k BETWEEN 10 AND 12",
            &["index t_k on (k) where k >= 10 and k <= 12"],
        ),
        (
            "SELECT DISTINCT k, g FROM {t} WHERE 5 > k AND k > 2 AND k <= 40",
            &["index t_k on (k) where k > 2 and k < 5"],
        ),
        (
            "SELECT g, count(*) FROM {t} WHERE g >= 'g5' GROUP BY g",
            &["index t_gk on (g, k) where g >= g5"],
        ),
        (
            "SELECT k, sum(n) FROM {agg} WHERE k < 3 AND k >= 0 GROUP BY k",
            &["index agg_k on (k) where k >= 0 and k < 3"],
        ),
        (
            "SELECT max(w), count(*) FROM {doubled} WHERE k > 45",
            &["index doubled_k on (k) where k > 45"],
        ),
        // An empty range reads nothing.
        (
            "SELECT count(*) FROM {t} WHERE k > 10 AND k < 5",
            &["index t_k on (k) where k > 10 and k < 5"],
        ),
        (
            // Over the indexed table this is a keyed peek with a lookup
            // join (no DataFusion plan, so no seeks; peek_joins.slt).
            "SELECT x.v, y.v FROM {t} x JOIN {t} y ON x.v = y.v + 1 WHERE x.k = 2 AND y.k = 1",
            &[],
        ),
    ];
    let fill = |template: &str, indexed: bool| {
        let (t, agg, doubled) = if indexed {
            ("t", "agg", "doubled")
        } else {
            ("u", "plain", "doubled_plain")
        };
        template
            .replace("{t}", t)
            .replace("{agg}", agg)
            .replace("{doubled}", doubled)
    };
    let check = |label: &'static str| {
        let c = &c;
        let fill = &fill;
        async move {
            for (template, expected) in cases {
                let indexed = fill(template, true);
                let mut a = rows(c, &indexed).await;
                let mut b = rows(c, &fill(template, false)).await;
                a.sort();
                b.sort();
                assert_eq!(a, b, "{label}: {indexed}");
                let mut found = seeks(c, &indexed).await;
                let mut expected: Vec<String> = expected.iter().map(|e| e.to_string()).collect();
                // EXPLAIN names each scan's relation before its seek.
                found.iter_mut().for_each(|l| {
                    *l = l.split_once(": ").map_or(l.clone(), |(_, s)| s.to_string())
                });
                found.sort();
                expected.sort();
                assert_eq!(found, expected, "{label}: {indexed}");
            }
        }
    };
    check("after load").await;
    // The same writes to both tables, planned with seeks on the indexed one.
    for template in [
        "UPDATE {t} SET v = v + 1000 WHERE k IN (1, 2)",
        "DELETE FROM {t} WHERE k = 3 AND g = 'g3'",
        "INSERT INTO {t} SELECT k + 100, g, v FROM {t} WHERE k = 4",
        "UPDATE {t} SET k = 5 WHERE k = 6",
    ] {
        assert!(
            !seeks(&c, &fill(template, true)).await.is_empty(),
            "{template}"
        );
        c.batch_execute(&fill(template, true)).await.unwrap();
        c.batch_execute(&fill(template, false)).await.unwrap();
    }
    let all = "SELECT k, g, v FROM {t}";
    let mut a = rows(&c, &fill(all, true)).await;
    let mut b = rows(&c, &fill(all, false)).await;
    a.sort();
    b.sort();
    assert_eq!(a, b);
    check("after writes").await;
    // A transaction that wrote reads its own writes (storage and the
    // block's writes, not the index); another session does not see them.
    c.batch_execute("BEGIN; INSERT INTO t VALUES (7, 'mine', 1)")
        .await
        .unwrap();
    let mine = rows(&c, "SELECT g FROM t WHERE k IN (7, 8) AND g = 'mine'").await;
    assert_eq!(mine, vec![vec![Some("mine".to_string())]]);
    let other = s.connect().await;
    let theirs = rows(&other, "SELECT g FROM t WHERE k IN (7, 8) AND g = 'mine'").await;
    assert!(theirs.is_empty(), "{theirs:?}");
    c.batch_execute("ROLLBACK").await.unwrap();
    // A later write is seen by the next seek (read-your-writes).
    c.batch_execute("INSERT INTO t VALUES (7, 'late', 1)")
        .await
        .unwrap();
    let late = rows(
        &c,
        "SELECT count(*) FROM t WHERE k IN (7, 8) AND g = 'late'",
    )
    .await;
    assert_eq!(late, vec![vec![Some("1".to_string())]]);
}

/// The plan lines of `EXPLAIN sql` with `params`.
async fn explained(
    c: &tokio_postgres::Client,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> String {
    c.query(&format!("EXPLAIN {sql}"), params)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn prepared_joins_through_indexes_agree_with_the_general_path() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE facts (k int, d int, v text);
         INSERT INTO facts SELECT value % 50, value % 13, 'v' || value FROM generate_series(1, 400);
         INSERT INTO facts VALUES (7, NULL, 'null d'), (NULL, 3, 'null k');
         CREATE TABLE dims (id int, name text);
         INSERT INTO dims SELECT value % 11, 'n' || value FROM generate_series(0, 30);
         INSERT INTO dims VALUES (NULL, 'null id');
         CREATE MATERIALIZED VIEW per_k AS SELECT k, count(*) AS n FROM facts GROUP BY k;
         CREATE INDEX facts_k ON facts (k);
         CREATE INDEX dims_id ON dims (id);
         CREATE INDEX per_k_k ON per_k (k);
         CREATE VIEW facts_copy AS SELECT * FROM facts;
         CREATE VIEW dims_copy AS SELECT * FROM dims",
    )
    .await
    .unwrap();
    // The copies are plain views without indexes: the same query over
    // them is a DataFusion plan over the same rows.
    let shape = |facts: &str, dims: &str| {
        format!(
            "SELECT f.v, x.name, p.n FROM {facts} f JOIN {dims} x ON x.id = f.d + $2 \
             JOIN per_k p ON p.k = f.k WHERE f.k = $1 AND x.name <> 'n5'"
        )
    };
    let fast = shape("facts", "dims");
    let general = shape("facts_copy", "dims_copy");
    let plan = explained(&c, &fast, &[&1i32, &0i32]).await;
    assert!(plan.starts_with("Fast path: Peek index facts_k"), "{plan}");
    assert!(plan.contains("Lookup index dims_id"), "{plan}");
    assert!(plan.contains("Lookup index per_k_k"), "{plan}");
    let plan = explained(&c, &general, &[&1i32, &0i32]).await;
    assert!(!plan.contains("Fast path"), "{plan}");
    let (fast, general) = (
        c.prepare(&fast).await.unwrap(),
        c.prepare(&general).await.unwrap(),
    );
    let rows = |rows: Vec<tokio_postgres::Row>| {
        let mut out: Vec<(String, String, i64)> = rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        out.sort();
        out
    };
    let mut nonempty = 0;
    for k in [
        Some(0),
        Some(7),
        Some(12),
        Some(49),
        Some(50),
        Some(-3),
        None,
    ] {
        for shift in [Some(0), Some(1), Some(-13), Some(1000), None] {
            let a = rows(c.query(&fast, &[&k, &shift]).await.unwrap());
            let b = rows(c.query(&general, &[&k, &shift]).await.unwrap());
            assert_eq!(a, b, "k {k:?}, shift {shift:?}");
            nonempty += usize::from(!a.is_empty());
        }
    }
    assert!(nonempty >= 8, "too few keys matched: {nonempty}");
    // The lookups read the indexes at the query's time: a write shows.
    c.execute("INSERT INTO dims VALUES (8, 'new')", &[])
        .await
        .unwrap();
    let a = rows(c.query(&fast, &[&Some(8i32), &Some(0i32)]).await.unwrap());
    let b = rows(
        c.query(&general, &[&Some(8i32), &Some(0i32)])
            .await
            .unwrap(),
    );
    assert_eq!(a, b);
    assert!(a.iter().any(|(_, name, _)| name == "new"), "{a:?}");
}

/// A prepared join whose looked-up index has compacted past the
/// transaction's time falls back to the general path with the
/// execution's parameter values (it once ran the prepared query with its
/// `$n` unbound and failed), and answers at the block's time.
#[tokio::test(flavor = "multi_thread")]
async fn a_prepared_join_past_its_lookup_index_reads_the_general_path_with_its_values() {
    let s = Server::start();
    let c = s.connect().await;
    let writer = s.connect().await;
    c.batch_execute(
        "CREATE TABLE facts (k int, d int, v text);
         INSERT INTO facts SELECT value % 20, value % 7, 'v' || value FROM generate_series(1, 200);
         CREATE TABLE dims (id int, name text);
         INSERT INTO dims SELECT value, 'n' || value FROM generate_series(0, 6);
         CREATE INDEX facts_k ON facts (k) WITH (RETAIN HISTORY FOR '1h');
         CREATE INDEX dims_id ON dims (id);
         CREATE VIEW facts_copy AS SELECT * FROM facts;
         CREATE VIEW dims_copy AS SELECT * FROM dims",
    )
    .await
    .unwrap();
    let shape = |facts: &str, dims: &str| {
        format!("SELECT f.v, x.name FROM {facts} f JOIN {dims} x ON x.id = f.d WHERE f.k = $1")
    };
    let plan = explained(&c, &shape("facts", "dims"), &[&3i32]).await;
    assert!(plan.contains("Lookup index dims_id"), "{plan}");
    let fast = c.prepare(&shape("facts", "dims")).await.unwrap();
    let general = c.prepare(&shape("facts_copy", "dims_copy")).await.unwrap();
    let pairs = |rows: Vec<tokio_postgres::Row>| {
        let mut out: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        out.sort();
        out
    };
    // The block's time is fixed by its first read.
    c.batch_execute("BEGIN").await.unwrap();
    let before = pairs(c.query(&general, &[&3i32]).await.unwrap());
    assert_eq!(before.len(), 10, "{before:?}");
    // Time moves on outside the block, and dims_id (about a second of
    // history) compacts past the block's time; facts_k keeps an hour.
    for round in 0..4 {
        writer
            .execute("UPDATE dims SET name = name || '+' WHERE true", &[])
            .await
            .unwrap();
        if round < 3 {
            tokio::time::sleep(std::time::Duration::from_millis(900)).await;
        }
    }
    for k in [3i32, 4, 25] {
        let a = pairs(c.query(&fast, &[&k]).await.unwrap());
        let b = pairs(c.query(&general, &[&k]).await.unwrap());
        assert_eq!(a, b, "k {k}");
        assert!(a.iter().all(|(_, name)| !name.ends_with('+')), "{a:?}");
    }
    assert_eq!(pairs(c.query(&fast, &[&3i32]).await.unwrap()), before);
    c.batch_execute("COMMIT").await.unwrap();
    let after = pairs(c.query(&fast, &[&3i32]).await.unwrap());
    assert!(
        after.iter().all(|(_, name)| name.ends_with("++++")),
        "{after:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn simple_protocol_reads_through_templates_agree_with_the_general_path() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE facts (k bigint, d int, v text);
         INSERT INTO facts SELECT value % 50, value % 13, 'v' || value FROM generate_series(1, 400);
         INSERT INTO facts VALUES (3000000000, 2, 'big'), (NULL, 3, 'null k');
         CREATE TABLE dims (id int, name text);
         INSERT INTO dims SELECT value % 11, 'n' || value FROM generate_series(0, 30);
         CREATE INDEX facts_k ON facts (k);
         CREATE INDEX dims_id ON dims (id);
         CREATE VIEW facts_copy AS SELECT * FROM facts;
         CREATE VIEW dims_copy AS SELECT * FROM dims",
    )
    .await
    .unwrap();
    // Statements that differ only in the integer literals of their WHERE
    // clause share one template (per literal width); each must still
    // answer as the same query over the plain views does.
    let shapes = [
        // Decided from the statement's text alone (columns and key
        // equalities): its template is kept too.
        "SELECT * FROM {facts} WHERE k = {k}",
        "SELECT v FROM {facts} WHERE k = {k}",
        "SELECT v, d + 1 FROM {facts} WHERE k = {k}",
        "SELECT v FROM {facts} WHERE k = {k} AND d <> {x} ORDER BY 1 LIMIT 2",
        "SELECT f.v, x.name FROM {facts} f JOIN {dims} x ON x.id = f.d + 1 \
         WHERE f.k = {k} AND x.id <> {x}",
        // A literal the template keeps (LIMIT), digits in a string and a
        // comment: texts of one shape that differ there are not bound to
        // the first one's template.
        "SELECT v FROM {facts} WHERE k = {k} ORDER BY 1 LIMIT {x}",
        "SELECT d FROM {facts} WHERE v <> 'v{x}' AND k = {k} -- {x}\n ORDER BY 1",
    ];
    let sorted = |mut rows: Vec<Vec<Option<String>>>| {
        rows.sort();
        rows
    };
    let mut nonempty = 0;
    let round = |shape: &str, k: &str, x: &str| {
        let sql = |facts: &str, dims: &str| {
            shape
                .replace("{facts}", facts)
                .replace("{dims}", dims)
                .replace("{k}", k)
                .replace("{x}", x)
        };
        (sql("facts", "dims"), sql("facts_copy", "dims_copy"))
    };
    for shape in shapes {
        for k in ["0", "7", "49", "50", "-3", "3000000000", "NULL"] {
            for x in ["1", "5", "0"] {
                let (fast, general) = round(shape, k, x);
                let a = sorted(rows(&c, &fast).await);
                assert_eq!(a, sorted(rows(&c, &general).await), "{fast}");
                nonempty += usize::from(!a.is_empty());
            }
        }
    }
    assert!(nonempty >= 20, "too few keys matched: {nonempty}");
    // A kept plan is not used once the catalog changes: the index it
    // looked up is gone.
    c.batch_execute("DROP INDEX dims_id").await.unwrap();
    let (fast, general) = round(shapes[4], "7", "1");
    assert_eq!(
        sorted(rows(&c, &fast).await),
        sorted(rows(&c, &general).await)
    );
    // In a block, the block's own writes show (the kept plan reads only
    // the index).
    c.batch_execute("BEGIN; INSERT INTO facts VALUES (7, 100, 'mine')")
        .await
        .unwrap();
    let (fast, general) = round(shapes[2], "7", "1");
    let a = sorted(rows(&c, &fast).await);
    assert!(a.iter().any(|r| r[0].as_deref() == Some("mine")), "{a:?}");
    assert_eq!(a, sorted(rows(&c, &general).await));
    c.batch_execute("COMMIT").await.unwrap();
    let a = sorted(rows(&c, &fast).await);
    assert!(a.iter().any(|r| r[0].as_deref() == Some("mine")), "{a:?}");
}

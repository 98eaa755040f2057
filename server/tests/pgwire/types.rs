//! Every supported type round-trips in text and binary formats with the
//! OIDs Postgres clients expect.

use tokio_postgres::types::Type;

use crate::harness::*;

#[tokio::test(flavor = "multi_thread")]
async fn every_type_round_trips_in_binary() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE t (
            b boolean, i2 smallint, i4 integer, i8 bigint, f4 real, f8 double precision,
            n numeric(10,2), nu numeric, tx text, vc varchar(5), ch char(3), by bytea,
            d date, tm time, ts timestamp, tz timestamptz, iv interval, u uuid, j jsonb)",
    )
    .await
    .unwrap();
    c.batch_execute(
        "INSERT INTO t VALUES (true, 2, 4, 8, 1.5, 2.25, 12.34, 0.5, 'text', 'vc', 'ab', '\\x0102',
          '2024-02-29', '13:14:15.5', '2024-02-29 13:14:15', '2024-02-29 13:14:15+00', '1 day',
          'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"k\": [1, 2]}')",
    )
    .await
    .unwrap();
    let stmt = c.prepare("SELECT * FROM t").await.unwrap();
    let types: Vec<Type> = stmt.columns().iter().map(|c| c.type_().clone()).collect();
    assert_eq!(
        types,
        vec![
            Type::BOOL,
            Type::INT2,
            Type::INT4,
            Type::INT8,
            Type::FLOAT4,
            Type::FLOAT8,
            Type::NUMERIC,
            Type::NUMERIC,
            Type::TEXT,
            Type::VARCHAR,
            Type::BPCHAR,
            Type::BYTEA,
            Type::DATE,
            Type::TIME,
            Type::TIMESTAMP,
            Type::TIMESTAMPTZ,
            Type::INTERVAL,
            Type::UUID,
            Type::JSONB,
        ]
    );
    let row = c.query_one(&stmt, &[]).await.unwrap();
    assert!(row.get::<_, bool>(0));
    assert_eq!(row.get::<_, i16>(1), 2);
    assert_eq!(row.get::<_, i32>(2), 4);
    assert_eq!(row.get::<_, i64>(3), 8);
    assert_eq!(row.get::<_, f32>(4), 1.5);
    assert_eq!(row.get::<_, f64>(5), 2.25);
    assert_eq!(row.get::<_, rust_decimal::Decimal>(6).to_string(), "12.34");
    assert_eq!(row.get::<_, &str>(8), "text");
    assert_eq!(row.get::<_, &str>(9), "vc");
    assert_eq!(row.get::<_, &str>(10), "ab ");
    assert_eq!(row.get::<_, Vec<u8>>(11), vec![1u8, 2]);
    assert_eq!(
        row.get::<_, chrono::NaiveDate>(12),
        chrono::NaiveDate::from_ymd_opt(2024, 2, 29).unwrap()
    );
    assert_eq!(
        row.get::<_, chrono::NaiveTime>(13),
        chrono::NaiveTime::from_hms_milli_opt(13, 14, 15, 500).unwrap()
    );
    assert_eq!(
        row.get::<_, chrono::NaiveDateTime>(14).to_string(),
        "2024-02-29 13:14:15"
    );
    assert_eq!(
        row.get::<_, chrono::DateTime<chrono::Utc>>(15).to_rfc3339(),
        "2024-02-29T13:14:15+00:00"
    );
    assert_eq!(
        row.get::<_, uuid::Uuid>(17).to_string(),
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    );
    assert_eq!(
        row.get::<_, serde_json::Value>(18),
        serde_json::json!({"k": [1, 2]})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn text_output_matches_postgres() {
    let s = Server::start();
    let c = s.connect().await;
    let cases: &[(&str, &str)] = &[
        ("SELECT true", "t"),
        ("SELECT 1.5::float8", "1.5"),
        ("SELECT 0.1 + 0.2", "0.3"),
        ("SELECT 12.50::numeric(10,2)", "12.50"),
        ("SELECT '\\xdeadbeef'::bytea", "\\xdeadbeef"),
        ("SELECT '2024-01-02'::date", "2024-01-02"),
        (
            "SELECT '2024-01-02 03:04:05.25'::timestamp",
            "2024-01-02 03:04:05.25",
        ),
        (
            "SELECT '2024-01-02 03:04:05+00'::timestamptz",
            "2024-01-02 03:04:05+00",
        ),
        ("SELECT 7 / 2", "3"),
        ("SELECT -7 / 2", "-3"),
        ("SELECT 7 % 3", "1"),
        ("SELECT 'ab' || 'cd'", "abcd"),
        ("SELECT upper('x')", "X"),
        ("SELECT length('héllo')", "5"),
        ("SELECT coalesce(NULL, 3)", "3"),
    ];
    for (sql, want) in cases {
        assert_eq!(value(&c, sql).await.as_deref(), Some(*want), "{sql}");
    }
    // Column names follow Postgres.
    let stmt = c
        .prepare("SELECT 1, count(*), x, x + 1, CAST('1' AS int), upper('a') FROM (VALUES (1)) AS v(x) GROUP BY x")
        .await
        .unwrap();
    let names: Vec<&str> = stmt.columns().iter().map(|c| c.name()).collect();
    assert_eq!(
        names,
        vec!["?column?", "count", "x", "?column?", "int4", "upper"]
    );
    // Integer literals are int4, as in Postgres.
    assert_eq!(stmt.columns()[0].type_(), &Type::INT4);
    assert_eq!(stmt.columns()[1].type_(), &Type::INT8);
}

#[tokio::test(flavor = "multi_thread")]
async fn null_ordering_and_constraints_match_postgres() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE t (a int, s varchar(2) NOT NULL, ch char(2), u uuid, j jsonb)")
        .await
        .unwrap();
    c.batch_execute("INSERT INTO t (a, s) VALUES (1, 'a'), (NULL, 'b'), (3, 'c')")
        .await
        .unwrap();
    let asc: Vec<Option<String>> = rows(&c, "SELECT a FROM t ORDER BY a")
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(asc, vec![Some("1".into()), Some("3".into()), None]);
    let desc: Vec<Option<String>> = rows(&c, "SELECT a FROM t ORDER BY a DESC")
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(desc, vec![None, Some("3".into()), Some("1".into())]);
    let err = c
        .simple_query("INSERT INTO t (a, s) VALUES (1, 'abc')")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22001");
    let err = c
        .simple_query("INSERT INTO t (a) VALUES (1)")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "23502");
    let err = c
        .simple_query("INSERT INTO t (s, u) VALUES ('x', 'not-a-uuid')")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22P02");
    let err = c
        .simple_query("INSERT INTO t (s, j) VALUES ('x', '{bad')")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22P02");
    c.batch_execute("INSERT INTO t (s, ch) VALUES ('x', 'a')")
        .await
        .unwrap();
    assert_eq!(
        value(&c, "SELECT ch FROM t WHERE s = 'x'").await.as_deref(),
        Some("a ")
    );
    assert_eq!(
        value(&c, "SELECT count(*) FROM t").await.as_deref(),
        Some("4")
    );
}

/// `sum` is described as the type its rows carry, in binary too:
/// `bigint` for `smallint` and `integer`, `numeric` for `bigint` (as in
/// PostgreSQL). A driver decoding binary results (tokio-postgres here,
/// asyncpg) fails on any mismatch.
#[tokio::test(flavor = "multi_thread")]
async fn sums_are_described_as_the_type_they_carry() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE nums (s smallint, i int, b bigint);
         INSERT INTO nums VALUES (1, 2147483647, 9223372036854775807), (2, 2147483647, 9223372036854775807)",
    )
    .await
    .unwrap();
    let row = c
        .query_one(
            "SELECT sum(s), sum(i), sum(b)::text, pg_typeof(sum(b))::text FROM nums",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 3);
    assert_eq!(row.get::<_, i64>(1), 4294967294);
    assert_eq!(row.get::<_, String>(2), "18446744073709551614");
    assert_eq!(row.get::<_, String>(3), "numeric");
    let types: Vec<String> = c
        .prepare("SELECT sum(s), sum(i), sum(b) FROM nums")
        .await
        .unwrap()
        .columns()
        .iter()
        .map(|col| col.type_().name().to_string())
        .collect();
    assert_eq!(types, ["int8", "int8", "numeric"]);
    // Grouped, and in a materialized view.
    c.batch_execute(
        "CREATE MATERIALIZED VIEW sums AS SELECT s, sum(i) AS total FROM nums GROUP BY s",
    )
    .await
    .unwrap();
    let rows = c
        .query("SELECT s, total FROM sums ORDER BY s", &[])
        .await
        .unwrap();
    let got: Vec<(i16, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got, [(1, 2147483647), (2, 2147483647)]);
}

//! `INSERT ... VALUES` of constants and parameters, which skips the query
//! planner: every value, error and default must be what the general path
//! (the same statement with `RETURNING`, planned as a query) gives.

use crate::harness::*;

const COLUMNS: &str = "i int, s smallint, b bigint, f float8, f4 real, n numeric(6,2),
    u_n numeric, t text, v varchar(3), c char(3), d date, bo bool, u uuid, j jsonb,
    by bytea, x int DEFAULT -7 NOT NULL, y text DEFAULT 'dflt'";

/// Each case: a column list and one VALUES row for it.
const CASES: &[(&str, &str)] = &[
    ("i", "1"),
    ("i", "-5"),
    ("i", "' 12 '"),
    ("i", "'+5'"),
    ("i", "-2147483648"),
    ("i", "2147483647"),
    ("i", "2147483648"),
    ("i", "3000000000"),
    ("i", "'1.6'"),
    ("i", "'x'"),
    ("i", "NULL"),
    ("s", "32767"),
    ("s", "-32768"),
    ("s", "32768"),
    ("s", "'70000'"),
    ("s", "'-7'"),
    ("b", "9223372036854775807"),
    ("b", "-9223372036854775808"),
    ("b", "'12'"),
    ("f", "4.5"),
    ("f", "-0.0"),
    ("f", "0.1"),
    ("f", "3"),
    ("f", "'1e3'"),
    ("f", "'NaN'"),
    ("f", "'-Infinity'"),
    ("f", "'1e500'"),
    ("f4", "'1.5'"),
    ("f4", "'3.4e38'"),
    ("f4", "'3.5e38'"),
    ("n", "1.235"),
    ("n", "-1.235"),
    ("n", "1.225"),
    ("n", "'1.235'"),
    ("n", "'-0.001'"),
    ("n", "0"),
    ("n", "12345.1"),
    ("n", "9999.995"),
    ("n", "'abc'"),
    ("u_n", "'12345678901234567890.123456789'"),
    ("u_n", "-0.5"),
    ("t", "'abc'"),
    ("t", "''"),
    ("t", "'it''s'"),
    ("v", "'ab'"),
    ("v", "'abcd'"),
    ("v", "'ab   '"),
    ("c", "'a'"),
    ("c", "'ab '"),
    ("d", "'2024-01-02'"),
    ("d", "' 2024-01-02 '"),
    ("d", "'2024-02-30'"),
    ("d", "'x'"),
    ("bo", "true"),
    ("bo", "false"),
    ("bo", "'yes'"),
    ("bo", "'off'"),
    ("bo", "'x'"),
    ("u", "'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'"),
    ("u", "'nope'"),
    ("j", r#"'{"b": 1, "a": [2]}'"#),
    ("j", "'{bad'"),
    ("by", r"'\x0102'"),
    ("by", "'abc'"),
    ("by", r"'\xZZ'"),
    ("x", "DEFAULT"),
    ("x", "NULL"),
    ("x, y", "1, DEFAULT"),
    ("i, i", "1, 2"),
    ("i, t", "1"),
    ("i", "1, 2"),
    ("i, t", "(2), ('two')"),
];

/// What a statement did: its tag's row count, or its SQLSTATE and message.
async fn outcome(c: &tokio_postgres::Client, sql: &str) -> Result<u64, (String, String)> {
    c.execute(sql, &[]).await.map_err(|e| {
        (
            sqlstate(&e),
            e.as_db_error()
                .map(|d| d.message().to_string())
                .unwrap_or_default(),
        )
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn inserted_constants_agree_with_the_general_path() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(&format!(
        "CREATE TABLE direct ({COLUMNS}); CREATE TABLE general ({COLUMNS})"
    ))
    .await
    .unwrap();
    let mut fast = 0;
    for (columns, row) in CASES {
        let direct = format!("INSERT INTO direct ({columns}) VALUES ({row})");
        let general = format!("INSERT INTO general ({columns}) VALUES ({row}) RETURNING 1");
        let a = outcome(&c, &direct).await;
        let b = outcome(&c, &general)
            .await
            .map_err(|(code, message)| (code, message.replace("\"general\"", "\"direct\"")));
        assert_eq!(a, b, "{direct}");
        // Whether the statement took the fast path.
        if let Ok(plan) = c.simple_query(&format!("EXPLAIN {direct}")).await
            && format!("{plan:?}").contains("Fast path: Insert")
        {
            fast += 1;
        }
    }
    // DEFAULT VALUES and a row without a column list fill the rest.
    for sql in [
        "INSERT INTO {} DEFAULT VALUES",
        "INSERT INTO {} VALUES (100, 2)",
        "INSERT INTO {} VALUES (1, 2, 3, 4, '5', 6, 7, 'eight', 'ni', 'ten', '2000-01-01', 't', NULL, '{}', '', 1, 'y')",
    ] {
        let a = outcome(&c, &sql.replacen("{}", "direct", 1)).await;
        let b = outcome(
            &c,
            &format!("{} RETURNING 1", sql.replacen("{}", "general", 1)),
        )
        .await
        .map_err(|(code, message)| (code, message.replace("\"general\"", "\"direct\"")));
        assert_eq!(a, b, "{sql}");
    }
    let all = "SELECT i, s, b, f, f4, n, u_n, t, v, c, d, bo, u, j, by, x, y FROM";
    let order = "ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17";
    let direct = rows(&c, &format!("{all} direct {order}")).await;
    let general = rows(&c, &format!("{all} general {order}")).await;
    assert_eq!(direct, general);
    assert!(direct.len() > 40, "{} rows", direct.len());
    // Most cases are constants the fast path converts itself.
    assert!(fast > 40, "{fast} of {} took the fast path", CASES.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn prepared_inserts_bind_parameters_to_their_columns() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE kv (k bigint PRIMARY KEY, v int NOT NULL, note varchar(4) DEFAULT 'none')",
    )
    .await
    .unwrap();
    let insert = c
        .prepare("INSERT INTO kv (k, v) VALUES ($1, $2)")
        .await
        .unwrap();
    // The parameters take the columns' types.
    assert_eq!(
        insert.params(),
        &[
            tokio_postgres::types::Type::INT8,
            tokio_postgres::types::Type::INT4
        ]
    );
    for k in 0..50i64 {
        assert_eq!(c.execute(&insert, &[&k, &(k as i32 * 2)]).await.unwrap(), 1);
    }
    // Key, NOT NULL and length checks are those of every write.
    let dup = c.execute(&insert, &[&7i64, &1i32]).await.unwrap_err();
    assert_eq!(sqlstate(&dup), "23505", "{dup}");
    let null = c
        .execute(&insert, &[&100i64, &None::<i32>])
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&null), "23502", "{null}");
    let long = c
        .execute(
            "INSERT INTO kv VALUES ($1, $2, $3)",
            &[&101i64, &1i32, &"toolong"],
        )
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&long), "22001", "{long}");
    // A parameter declared wider than its column is cast, in range or not.
    let typed = c
        .prepare_typed(
            "INSERT INTO kv (k, v) VALUES ($1, $2)",
            &[
                tokio_postgres::types::Type::INT8,
                tokio_postgres::types::Type::INT8,
            ],
        )
        .await
        .unwrap();
    c.execute(&typed, &[&200i64, &5i64]).await.unwrap();
    let wide = c.execute(&typed, &[&201i64, &5_000_000_000i64]).await;
    assert!(wide.is_err(), "{wide:?}");
    // In a block, the rows are the block's until it ends.
    c.batch_execute("BEGIN").await.unwrap();
    c.execute(&insert, &[&300i64, &1i32]).await.unwrap();
    assert_eq!(
        value(&c, "SELECT count(*) FROM kv WHERE k = 300").await,
        Some("1".into())
    );
    c.batch_execute("ROLLBACK").await.unwrap();
    c.batch_execute("BEGIN").await.unwrap();
    c.execute(&insert, &[&301i64, &1i32]).await.unwrap();
    c.batch_execute("COMMIT").await.unwrap();
    assert_eq!(
        rows(
            &c,
            "SELECT count(*), sum(v), min(note), count(*) FILTER (WHERE k = 300) FROM kv"
        )
        .await,
        vec![vec![
            Some("52".into()),
            Some(((0..50).map(|k| k * 2).sum::<i32>() + 5 + 1).to_string()),
            Some("none".into()),
            Some("0".into()),
        ]]
    );
    // The plan kept from Prepare follows the catalog: into a table of
    // the same name with another type, the parameter is cast.
    c.batch_execute("DROP TABLE kv; CREATE TABLE kv (k bigint, v text)")
        .await
        .unwrap();
    c.execute(&insert, &[&400i64, &12i32]).await.unwrap();
    assert_eq!(
        rows(&c, "SELECT k, v FROM kv").await,
        vec![vec![Some("400".into()), Some("12".into())]]
    );
    // A simple-protocol `$1` has no value.
    let missing = c
        .simple_query("INSERT INTO kv (k, v) VALUES ($1, '1')")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&missing), "42P02", "{missing}");
}

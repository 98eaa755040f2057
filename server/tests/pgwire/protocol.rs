//! Simple and extended query protocol behaviour.

use futures::{SinkExt, TryStreamExt};
use tokio_postgres::SimpleQueryMessage;

use crate::harness::*;

#[tokio::test(flavor = "multi_thread")]
async fn simple_protocol_runs_several_statements_and_reports_tags() {
    let s = Server::start();
    let c = s.connect().await;
    let msgs = c
        .simple_query("CREATE TABLE t (a int, b text); INSERT INTO t VALUES (1, 'x'), (2, 'y'); SELECT * FROM t ORDER BY a")
        .await
        .unwrap();
    let counts: Vec<u64> = msgs
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::CommandComplete(n) => Some(*n),
            _ => None,
        })
        .collect();
    assert_eq!(counts, vec![0, 2, 2]);
    assert_eq!(
        rows(&c, "SELECT b FROM t WHERE a = 2").await,
        vec![vec![Some("y".into())]]
    );
    // An empty query string is answered with EmptyQueryResponse ('I').
    use std::io::Write;
    let mut sock = crate::bad_input::raw_connect(&s);
    sock.write_all(&crate::bad_input::query_message(""))
        .unwrap();
    assert_eq!(
        crate::bad_input::read_until_ready(&mut sock),
        vec![b'I', b'Z']
    );
    sock.write_all(&crate::bad_input::query_message(" ; "))
        .unwrap();
    assert_eq!(
        crate::bad_input::read_until_ready(&mut sock),
        vec![b'I', b'Z']
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn statements_after_an_error_are_skipped() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE t (a int)").await.unwrap();
    let err = c
        .simple_query("INSERT INTO t VALUES (1); SELECT 1/0; INSERT INTO t VALUES (2)")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22012");
    assert_eq!(
        value(&c, "SELECT count(*) FROM t").await.as_deref(),
        Some("1")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn extended_protocol_with_typed_and_untyped_parameters() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE t (id bigint, name text, score double precision)")
        .await
        .unwrap();
    let n = c
        .execute(
            "INSERT INTO t VALUES ($1, $2, $3)",
            &[&1i64, &"ann", &2.5f64],
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    c.execute(
        "INSERT INTO t VALUES ($1, $2, $3)",
        &[&2i64, &"bob", &3.5f64],
    )
    .await
    .unwrap();
    let rows = c
        .query("SELECT name, score FROM t WHERE id = $1", &[&2i64])
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, &str>(0), "bob");
    assert_eq!(rows[0].get::<_, f64>(1), 3.5);
    // A prepared statement reports parameter and result types.
    let stmt = c
        .prepare("SELECT id, name FROM t WHERE score > $1")
        .await
        .unwrap();
    assert_eq!(stmt.params(), &[tokio_postgres::types::Type::FLOAT8]);
    assert_eq!(
        stmt.columns()[0].type_(),
        &tokio_postgres::types::Type::INT8
    );
    assert_eq!(stmt.columns()[1].name(), "name");
    let rows = c.query(&stmt, &[&3.0f64]).await.unwrap();
    assert_eq!(rows.len(), 1);
    // Explicitly typed parameters through prepare_typed.
    let stmt = c
        .prepare_typed("SELECT $1::int4 + 1", &[tokio_postgres::types::Type::INT4])
        .await
        .unwrap();
    let row = c.query_one(&stmt, &[&41i32]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 42);
    // A cast gives an otherwise untyped parameter its type, as in
    // PostgreSQL.
    let stmt = c
        .prepare("INSERT INTO t SELECT generate_series($1::bigint, $2::bigint), 'g', 0")
        .await
        .unwrap();
    assert_eq!(
        stmt.params(),
        &[
            tokio_postgres::types::Type::INT8,
            tokio_postgres::types::Type::INT8
        ]
    );
    assert_eq!(c.execute(&stmt, &[&10i64, &12i64]).await.unwrap(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn portals_suspend_at_max_rows() {
    let s = Server::start();
    let mut c = s.connect().await;
    let tx = c.transaction().await.unwrap();
    let stmt = tx
        .prepare("SELECT * FROM generate_series(1, 10) AS g(x)")
        .await
        .unwrap();
    let portal = tx.bind(&stmt, &[]).await.unwrap();
    let first = tx.query_portal(&portal, 4).await.unwrap();
    assert_eq!(first.len(), 4);
    let second = tx.query_portal(&portal, 4).await.unwrap();
    assert_eq!(second.len(), 4);
    let rest = tx.query_portal(&portal, 4).await.unwrap();
    assert_eq!(rest.len(), 2);
    tx.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_carry_sqlstate_and_position() {
    let s = Server::start();
    let c = s.connect().await;
    let err = c.simple_query("SELECT 1 FROMM nowhere").await.unwrap_err();
    let db = err.as_db_error().unwrap();
    assert_eq!(db.code().code(), "42601");
    assert!(
        matches!(db.position(), Some(tokio_postgres::error::ErrorPosition::Original(n)) if *n > 0)
    );
    let err = c.simple_query("SELECT * FROM missing").await.unwrap_err();
    assert_eq!(sqlstate(&err), "42P01");
    let err = c
        .simple_query("SELECT nope FROM (VALUES (1)) AS v(a)")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "42703");
    let err = c
        .simple_query("CREATE TABLE t (a int CHECK (a > 0))")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "0A000");
    let err = c.simple_query("SELECT 2147483647 + 1").await.unwrap_err();
    assert_eq!(sqlstate(&err), "22003");
    let err = c
        .simple_query("SELECT 9223372036854775807::int8 * 2")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22003");
    let err = c.simple_query("SET nonsense = 1").await.unwrap_err();
    assert_eq!(sqlstate(&err), "42704");
    // The connection is still usable.
    assert_eq!(value(&c, "SELECT 1").await.as_deref(), Some("1"));
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_database_is_3d000() {
    let s = Server::start();
    let Err(err) = s.connect_db("nope").await else {
        panic!("connecting to a missing database must fail");
    };
    assert_eq!(sqlstate(&err), "3D000");
    let c = s.connect().await;
    c.batch_execute("CREATE DATABASE other").await.unwrap();
    let o = s.connect_db("other").await.unwrap();
    assert_eq!(
        value(&o, "SELECT current_database()").await.as_deref(),
        Some("other")
    );
    o.batch_execute("CREATE TABLE t (a int); INSERT INTO t VALUES (7)")
        .await
        .unwrap();
    // Objects in another database are reachable by qualified name.
    assert_eq!(
        value(&c, "SELECT a FROM other.public.t").await.as_deref(),
        Some("7")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn session_variables_and_functions() {
    let s = Server::start();
    let c = s.connect().await;
    assert_eq!(
        value(&c, "SHOW server_version").await.as_deref(),
        Some(concat!("15.0 (Freshet ", env!("CARGO_PKG_VERSION"), ")"))
    );
    assert_eq!(
        value(&c, "SHOW transaction_isolation").await.as_deref(),
        Some("strict serializable")
    );
    c.batch_execute("SET application_name = 'tests'")
        .await
        .unwrap();
    assert_eq!(
        value(&c, "SHOW application_name").await.as_deref(),
        Some("tests")
    );
    c.batch_execute("RESET application_name").await.unwrap();
    assert_eq!(
        value(&c, "SHOW application_name").await.as_deref(),
        Some("")
    );
    c.batch_execute("CREATE SCHEMA s; CREATE TABLE s.t (a int); INSERT INTO s.t VALUES (1)")
        .await
        .unwrap();
    c.batch_execute("SET search_path = s, public")
        .await
        .unwrap();
    assert_eq!(value(&c, "SELECT a FROM t").await.as_deref(), Some("1"));
    assert_eq!(
        value(&c, "SELECT current_schema()").await.as_deref(),
        Some("s")
    );
    assert_eq!(
        value(&c, "SELECT current_user").await.as_deref(),
        Some("freshet")
    );
    assert!(
        value(&c, "SELECT version()")
            .await
            .unwrap()
            .starts_with("PostgreSQL 15.0")
    );
    c.batch_execute("SET TimeZone = '+02:00'").await.unwrap();
    assert_eq!(
        value(&c, "SELECT '2024-01-01 00:00:00+00'::timestamptz")
            .await
            .as_deref(),
        Some("2024-01-01 02:00:00+02")
    );
    c.batch_execute("SET statement_timeout = '5s'")
        .await
        .unwrap();
    assert_eq!(
        value(&c, "SHOW statement_timeout").await.as_deref(),
        Some("5s")
    );
    let err = c
        .simple_query("SET extra_float_digits = 42")
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22023");
}

#[tokio::test(flavor = "multi_thread")]
async fn copy_in_and_out() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE t (a int, b text, c int DEFAULT 9)")
        .await
        .unwrap();
    let sink = c.copy_in("COPY t (a, b) FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(
        b"1\tone\n2\t\\N\n3\ttab\\there\n",
    ))
    .await
    .unwrap();
    let n = sink.finish().await.unwrap();
    assert_eq!(n, 3);
    let sink = c
        .copy_in("COPY t FROM STDIN WITH (FORMAT csv, HEADER true)")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"a,b,c\n4,\"x,y\",1\n5,,2\n"))
        .await
        .unwrap();
    assert_eq!(sink.finish().await.unwrap(), 2);
    let out = c
        .copy_out("COPY (SELECT a, b, c FROM t ORDER BY a) TO STDOUT")
        .await
        .unwrap();
    let chunks: Vec<bytes::Bytes> = out.try_collect().await.unwrap();
    let text: String = chunks
        .iter()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    assert_eq!(
        text,
        "1\tone\t9\n2\t\\N\t9\n3\ttab\\there\t9\n4\tx,y\t1\n5\t\\N\t2\n"
    );
    let out = c
        .copy_out("COPY (SELECT a, b FROM t WHERE a = 4) TO STDOUT WITH (FORMAT csv)")
        .await
        .unwrap();
    let chunks: Vec<bytes::Bytes> = out.try_collect().await.unwrap();
    let text: String = chunks
        .iter()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    assert_eq!(text, "4,\"x,y\"\n");
    // Bad data fails the whole COPY.
    let sink = c.copy_in("COPY t (a) FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"6\nnot-a-number\n"))
        .await
        .unwrap();
    let err = sink.finish().await.unwrap_err();
    assert_eq!(sqlstate(&err), "22P02");
    assert_eq!(
        value(&c, "SELECT count(*) FROM t").await.as_deref(),
        Some("5")
    );
}

/// A COPY of several chunks (rows are made a few megabytes at a time,
/// two chunks at once): every row arrives once, in order for the
/// sequence that numbers them, and an error in a later chunk names its
/// line counted from the start of the data.
#[tokio::test(flavor = "multi_thread")]
async fn a_copy_of_many_chunks_keeps_every_row_and_numbers_lines_from_the_start() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE big (id int, label text, n serial)")
        .await
        .unwrap();
    let count = 600_000usize;
    // The CSV data with a header, row `short` (if any) missing a field.
    let data = |short: Option<usize>| {
        let mut data = String::from("id,label\n");
        for i in 0..count {
            match short == Some(i) {
                true => data.push_str("17\n"),
                false => data.push_str(&format!("{i},\"label, number {i}\"\n")),
            }
        }
        assert!(data.len() > 12 << 20, "{} bytes", data.len());
        data
    };
    let copy = async |data: String| {
        let sink = c
            .copy_in("COPY big (id, label) FROM STDIN WITH (FORMAT csv, HEADER true)")
            .await
            .unwrap();
        futures::pin_mut!(sink);
        for piece in data.as_bytes().chunks(1 << 16) {
            sink.send(bytes::Bytes::copy_from_slice(piece))
                .await
                .unwrap();
        }
        sink.finish().await
    };
    assert_eq!(copy(data(None)).await.unwrap(), count as u64);
    let check = rows(
        &c,
        "SELECT count(*), sum(id::bigint), count(DISTINCT label), \
         sum(CASE WHEN label = 'label, number ' || id THEN 1 ELSE 0 END), \
         sum(CASE WHEN n = id + 1 THEN 1 ELSE 0 END) FROM big",
    )
    .await;
    let n = count.to_string();
    let sum = (count * (count - 1) / 2).to_string();
    assert_eq!(
        check,
        vec![vec![
            Some(n.clone()),
            Some(sum),
            Some(n.clone()),
            Some(n.clone()),
            Some(n.clone())
        ]]
    );
    // A short row far into the data: its line is counted from the header.
    let short = 550_000;
    let err = copy(data(Some(short))).await.unwrap_err();
    let message = err.as_db_error().map(|e| e.message().to_string());
    let expected = format!(
        "missing data for line {}: expected 2 columns, found 1",
        short + 2
    );
    assert_eq!(message.as_deref(), Some(expected.as_str()), "{err:?}");
    assert_eq!(value(&c, "SELECT count(*) FROM big").await, Some(n));
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_and_explain_timestamp() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE t (a int)").await.unwrap();
    let plan = rows(&c, "EXPLAIN SELECT a FROM t WHERE a > 1").await;
    let text: Vec<String> = plan.into_iter().map(|r| r[0].clone().unwrap()).collect();
    assert!(text.iter().any(|l| l.contains("Filter")), "{text:?}");
    let ts = rows(&c, "EXPLAIN TIMESTAMP FOR SELECT * FROM t").await;
    let text: Vec<String> = ts.into_iter().map(|r| r[0].clone().unwrap()).collect();
    assert!(text[0].contains("query timestamp"), "{text:?}");
    assert!(
        text.iter().any(|l| l.contains("freshet.public.t")),
        "{text:?}"
    );
    assert!(text.iter().any(|l| l.contains("since")), "{text:?}");
}

/// Describe of a statement that returns no rows answers NoData (after its
/// ParameterDescription), as PostgreSQL does; pgJDBC counts a batch's
/// updates from it.
#[tokio::test(flavor = "multi_thread")]
async fn describe_of_a_rowless_statement_is_nodata() {
    use std::io::Write;
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE nd (a int, b text)")
        .await
        .unwrap();
    let mut sock = crate::bad_input::raw_connect(&s);
    let frame = |kind: u8, body: &[u8]| {
        let mut m = vec![kind];
        m.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
        m.extend_from_slice(body);
        m
    };
    let mut parse = b"s1\0INSERT INTO nd VALUES ($1, $2)\0".to_vec();
    parse.extend_from_slice(&0i16.to_be_bytes());
    let mut out = frame(b'P', &parse);
    out.extend(frame(b'D', b"Ss1\0"));
    out.extend(frame(b'S', b""));
    sock.write_all(&out).unwrap();
    let kinds = crate::bad_input::read_until_ready(&mut sock);
    // ParseComplete, ParameterDescription, NoData, ReadyForQuery.
    assert_eq!(kinds, vec![b'1', b't', b'n', b'Z']);
}

/// A prepared statement whose answer cannot change (no table, no
/// parameter, only immutable functions: a pool's `SELECT 1`) is answered
/// from what its Prepare found, without planning each Execute; anything
/// that may change is still computed per execution, errors surface at
/// each Execute, and a catalog change makes it plan again.
#[tokio::test(flavor = "multi_thread")]
async fn prepared_constant_queries_answer_as_planned_ones() {
    let s = Server::start();
    let c = s.connect().await;
    let one = c
        .prepare("SELECT 1 AS one, 'a' || 'b' AS ab")
        .await
        .unwrap();
    for _ in 0..3 {
        let rows = c.query(&one, &[]).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].get::<_, i32>(0), 1);
        assert_eq!(rows[0].get::<_, String>(1), "ab");
    }
    let values = c
        .prepare("SELECT x * 2 FROM (VALUES (1), (2), (3)) AS v(x) ORDER BY 1 DESC")
        .await
        .unwrap();
    let doubled: Vec<i32> = c
        .query(&values, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(doubled, vec![6, 4, 2]);
    // `random()` and `now()` differ between executions: never kept.
    let varying = c.prepare("SELECT random(), now()::text").await.unwrap();
    let first = c.query_one(&varying, &[]).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let second = c.query_one(&varying, &[]).await.unwrap();
    assert_ne!(first.get::<_, f64>(0), second.get::<_, f64>(0));
    assert_ne!(first.get::<_, String>(1), second.get::<_, String>(1));
    // An error is raised by every execution.
    if let Ok(zero) = c.prepare("SELECT 1 / 0").await {
        for _ in 0..2 {
            let e = c.query(&zero, &[]).await.unwrap_err();
            assert_eq!(sqlstate(&e), "22012");
        }
    }
    // After a catalog change the statement is planned again (and its
    // answer kept anew for the executions after).
    c.batch_execute("CREATE TABLE one (x int)").await.unwrap();
    for _ in 0..3 {
        let rows = c.query(&one, &[]).await.unwrap();
        assert_eq!(rows[0].get::<_, i32>(0), 1);
        assert_eq!(rows[0].get::<_, String>(1), "ab");
    }
    // A query reading a table is not constant: it sees new rows.
    let count = c.prepare("SELECT count(*) FROM one").await.unwrap();
    assert_eq!(c.query_one(&count, &[]).await.unwrap().get::<_, i64>(0), 0);
    c.batch_execute("INSERT INTO one VALUES (1)").await.unwrap();
    assert_eq!(c.query_one(&count, &[]).await.unwrap().get::<_, i64>(0), 1);
}

/// Over the simple protocol a constant query's answer is kept by its
/// text for the session, as a prepared one's is: the same answers, errors
/// at every run, nothing kept that may change, and a failed transaction
/// block still refuses it.
#[tokio::test(flavor = "multi_thread")]
async fn simple_constant_queries_answer_as_planned_ones() {
    let s = Server::start();
    let c = s.connect().await;
    for _ in 0..3 {
        assert_eq!(value(&c, "SELECT 1 + 1 AS two").await.as_deref(), Some("2"));
        assert_eq!(value(&c, "VALUES ('x')").await.as_deref(), Some("x"));
    }
    let first = value(&c, "SELECT random()").await;
    let second = value(&c, "SELECT random()").await;
    assert_ne!(first, second);
    for _ in 0..2 {
        let e = c.simple_query("SELECT 1 / 0").await.unwrap_err();
        assert_eq!(sqlstate(&e), "22012");
    }
    c.batch_execute("BEGIN").await.unwrap();
    assert!(c.simple_query("SELECT 1 / 0").await.is_err());
    let e = c.simple_query("SELECT 1 + 1 AS two").await.unwrap_err();
    assert_eq!(sqlstate(&e), "25P02");
    c.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(value(&c, "SELECT 1 + 1 AS two").await.as_deref(), Some("2"));
}

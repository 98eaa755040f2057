//! Every built-in relation (`pg_catalog`, `information_schema`,
//! `freshet_internal`) can be read, with objects of every kind present:
//! the SQL views among them plan, and the rows the server computes fit the
//! declared columns.

use crate::harness::*;

#[tokio::test(flavor = "multi_thread")]
async fn every_builtin_relation_is_readable() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE t (id int PRIMARY KEY, code text UNIQUE, n numeric(8,2) DEFAULT 1, tags text[]);
         CREATE INDEX t_code ON t (code);
         CREATE VIEW v AS SELECT id, code FROM t;
         CREATE MATERIALIZED VIEW m AS SELECT code, count(*) AS c FROM t GROUP BY code;
         CREATE INDEX m_code ON m (code);
         INSERT INTO t VALUES (1, 'a', 2.5, '{x,y}');",
    )
    .await
    .expect("set up objects");
    let relations = c
        .query(
            "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname IN ('pg_catalog', 'information_schema', 'freshet_internal') \
             ORDER BY 1, 2",
            &[],
        )
        .await
        .expect("list built-in relations");
    assert!(relations.len() > 40, "only {} built-ins", relations.len());
    for row in relations {
        let (schema, name): (String, String) = (row.get(0), row.get(1));
        let sql = format!("SELECT * FROM {schema}.{name}");
        if let Err(e) = c.simple_query(&sql).await {
            panic!("{sql}: {e:?}");
        }
    }
    // What tools read most: each kind where Postgres keeps it.
    let kinds = c
        .query(
            "SELECT relname, relkind FROM pg_class WHERE relname IN \
             ('t', 't_pkey', 't_code_key', 't_code', 'v', 'm', 'm_code') ORDER BY 1",
            &[],
        )
        .await
        .expect("read pg_class");
    let kinds: Vec<(String, String)> = kinds.iter().map(|r| (r.get(0), r.get(1))).collect();
    let expected = [
        ("m", "m"),
        ("m_code", "i"),
        ("t", "r"),
        ("t_code", "i"),
        ("t_code_key", "i"),
        ("t_pkey", "i"),
        ("v", "v"),
    ];
    assert_eq!(
        kinds,
        expected
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    );
}

/// A parameter's `regclass` name is only known at bind time: it is
/// resolved then (in the names the statement was planned against), not
/// compared as text with an oid; other `reg*` parameters are refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_parameter_cast_to_regclass_resolves_at_bind_time() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE t (a int PRIMARY KEY)")
        .await
        .expect("create a table");
    for name in ["t", "public.t", "freshet.public.t"] {
        let rows = c
            .query(
                "SELECT relname FROM pg_class WHERE oid = $1::regclass",
                &[&name],
            )
            .await
            .expect("a parameter cast to regclass");
        assert_eq!(rows.len(), 1, "{name}");
        assert_eq!(rows[0].get::<_, String>(0), "t");
    }
    let rows = c
        .query(
            "SELECT relname FROM pg_class WHERE oid = $1::regclass",
            &[&"t_pkey"],
        )
        .await
        .expect("a key's index by name");
    assert_eq!(rows[0].get::<_, String>(0), "t_pkey");
    let err = c
        .query("SELECT $1::regclass", &[&"nope"])
        .await
        .expect_err("an unknown relation");
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE),
        "{err:?}"
    );
    let err = c
        .query("SELECT $1::regtype", &[&"int4"])
        .await
        .expect_err("a parameter cast to regtype");
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::FEATURE_NOT_SUPPORTED),
        "{err:?}"
    );
    // The literal form resolves.
    let rows = c
        .query(
            "SELECT relname FROM pg_class WHERE oid = 't'::regclass",
            &[],
        )
        .await
        .expect("a literal regclass");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, String>(0), "t");
}

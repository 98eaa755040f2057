//! PostgreSQL change data capture against a real PostgreSQL 15 the test
//! starts (`wal_level = logical`): the snapshot, mixed transactions applied
//! whole, `kill -9` of Freshet and a restart of the upstream with no
//! duplicate and no gap, the replication slot's life, and the errors a
//! user meets (no logical WAL, no publication, no replica identity, a
//! type Freshet lacks, a schema change, a TRUNCATE).

use std::time::{Duration, Instant};

use tokio_postgres::{Client, NoTls};

use crate::harness::*;
use crate::pg::PgServer;

/// A client of the upstream PostgreSQL.
pub(crate) async fn upstream(pg: &PgServer) -> Client {
    let (client, connection) = tokio_postgres::connect(&pg.conn_str(), NoTls)
        .await
        .expect("connect to PostgreSQL");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// Rows of `sql` on a client, as text, for comparing the two sides.
async fn text_rows(c: &Client, sql: &str) -> Vec<Vec<Option<String>>> {
    rows(c, sql).await
}

/// Wait until `sql` answers the same on Freshet and upstream.
async fn converge(freshet: &Client, pg: &Client, sql: &str) -> Vec<Vec<Option<String>>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let want = text_rows(pg, sql).await;
        let got = text_rows(freshet, sql).await;
        if got == want {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "Freshet did not catch up on {sql}:\nFreshet:  {got:?}\nupstream: {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait until the source's status is `want`; returns its error.
async fn status_becomes(c: &Client, source: &str, want: &str) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = rows(
            c,
            &format!(
                "SELECT status, error FROM freshet_internal.source_statuses WHERE name = 'freshet.public.{source}'"
            ),
        )
        .await;
        if r.first().and_then(|r| r[0].as_deref()) == Some(want) {
            return r[0][1].clone();
        }
        assert!(
            Instant::now() < deadline,
            "source {source} did not become {want}: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn slots(pg: &Client) -> i64 {
    pg.query_one("SELECT count(*) FROM pg_replication_slots", &[])
        .await
        .expect("count slots")
        .get(0)
}

const UPSTREAM_SCHEMA: &str = "
    CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
    CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance numeric(12,2), opened timestamptz,
                           active boolean, tags jsonb, mood mood, note varchar(20), born date, photo bytea);
    ALTER TABLE accounts REPLICA IDENTITY FULL;
    CREATE TABLE events (k bigint, payload text);
    ALTER TABLE events REPLICA IDENTITY FULL;
    CREATE TABLE unpublished (x int);
    INSERT INTO accounts SELECT g, 'owner ' || g, g * 100.25, '2024-01-01 00:00:00+00'::timestamptz + g * interval '1 hour',
                                g % 2 = 0, jsonb_build_object('g', g, 'tags', jsonb_build_array('a', g)),
                                (ARRAY['sad','ok','happy']::mood[])[1 + g % 3], 'note ' || g,
                                '2000-01-01'::date + g, decode(lpad(to_hex(g), 4, '0'), 'hex')
                           FROM generate_series(1, 100) g;
    INSERT INTO accounts VALUES (0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    INSERT INTO events SELECT g, repeat('x', g % 50) FROM generate_series(1, 1000) g;
    CREATE PUBLICATION shop FOR TABLE accounts, events;
";

/// What both sides are compared on: every column in its text form.
const ACCOUNTS: &str = "SELECT id, owner, balance, opened, active, tags, mood, note, born, photo FROM accounts ORDER BY id";
const EVENTS: &str = "SELECT count(*), count(DISTINCT k), sum(k), sum(length(payload)) FROM events";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_source_snapshots_streams_and_survives_restarts() {
    let mut pg = PgServer::start_logical();
    let up = upstream(&pg).await;
    up.batch_execute(UPSTREAM_SCHEMA)
        .await
        .expect("upstream schema");
    let mut server = Server::start();
    let c = server.connect().await;
    c.batch_execute(&format!(
        "CREATE SECRET pgpass AS 'unused with trust auth';
         CREATE CONNECTION pg TO POSTGRES (HOST '127.0.0.1', PORT {}, USER postgres, PASSWORD SECRET pgpass, DATABASE 'postgres');
         CREATE SOURCE shop FROM POSTGRES CONNECTION pg (PUBLICATION 'shop', TEXT COLUMNS (accounts.mood)) FOR ALL TABLES;
         CREATE MATERIALIZED VIEW by_activity AS SELECT active, count(*) AS n, sum(balance) AS total FROM accounts GROUP BY active;",
        pg.port()
    ))
    .await
    .expect("create the source");
    // The snapshot, whole, with every type in the same text form.
    assert_eq!(slots(&up).await, 1, "the source made its slot");
    let snapshot = converge(&c, &up, ACCOUNTS).await;
    assert_eq!(snapshot.len(), 101);
    converge(&c, &up, EVENTS).await;
    let subsources = rows(&c, "SHOW SOURCES").await;
    let names: Vec<&str> = subsources.iter().filter_map(|r| r[0].as_deref()).collect();
    assert!(
        names.contains(&"accounts") && names.contains(&"events") && !names.contains(&"unpublished"),
        "{subsources:?}"
    );
    let err = c
        .batch_execute("INSERT INTO accounts (id) VALUES (1000)")
        .await
        .unwrap_err();
    assert!(!sqlstate(&err).is_empty(), "a subsource is read-only");

    // Mixed transactions: inserts, updates, deletes, each applied whole.
    up.batch_execute(
        "BEGIN;
         INSERT INTO accounts (id, owner, balance, active) VALUES (200, 'new', 5, true);
         UPDATE accounts SET balance = balance + 1, tags = tags || '{\"seen\": true}' WHERE id % 10 = 0;
         DELETE FROM accounts WHERE id BETWEEN 50 AND 59;
         COMMIT;
         UPDATE accounts SET owner = owner || ' (renamed)', mood = 'happy' WHERE id = 7;
         DELETE FROM events WHERE k > 900;",
    )
    .await
    .expect("upstream changes");
    converge(&c, &up, ACCOUNTS).await;
    converge(&c, &up, EVENTS).await;
    converge(
        &c,
        &up,
        "SELECT active, count(*), sum(balance) FROM accounts GROUP BY active ORDER BY active",
    )
    .await;
    let mv = rows(
        &c,
        "SELECT active, n, total FROM by_activity ORDER BY active",
    )
    .await;
    let adhoc = rows(
        &c,
        "SELECT active, count(*), sum(balance) FROM accounts GROUP BY active ORDER BY active",
    )
    .await;
    assert_eq!(mv, adhoc, "the view equals its query");

    // Atomicity: transfers between accounts keep the total; no read in
    // Freshet ever sees half of one.
    let total = value(&c, "SELECT sum(balance) FROM accounts").await;
    let transfers = {
        let up2 = upstream(&pg).await;
        tokio::spawn(async move {
            for i in 0..200 {
                let (a, b) = (1 + i % 40, 60 + i % 40);
                up2.batch_execute(&format!(
                    "BEGIN; UPDATE accounts SET balance = balance - 1.5 WHERE id = {a};
                     UPDATE accounts SET balance = balance + 1.5 WHERE id = {b}; COMMIT;"
                ))
                .await
                .expect("transfer");
            }
        })
    };
    while !transfers.is_finished() {
        assert_eq!(
            value(&c, "SELECT sum(balance) FROM accounts").await,
            total,
            "a read saw half a transaction"
        );
    }
    transfers.await.expect("transfers");
    converge(&c, &up, ACCOUNTS).await;

    // kill -9 while upstream writes: after each restart, events holds
    // exactly what upstream holds once caught up (no duplicate, no gap).
    let writer = {
        let up2 = upstream(&pg).await;
        tokio::spawn(async move {
            for k in 10_000..10_600 {
                up2.batch_execute(&format!(
                    "INSERT INTO events VALUES ({k}, 'w'); UPDATE events SET payload = payload || 'u' WHERE k = {};",
                    k - 9_000
                ))
                .await
                .expect("write events");
            }
        })
    };
    drop(c);
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.kill_and_restart();
    }
    writer.await.expect("writer");
    let c = server.connect().await;
    let events = converge(&c, &up, EVENTS).await;
    assert_eq!(events[0][0], events[0][1], "a duplicate: {events:?}");
    converge(&c, &up, "SELECT k, payload FROM events ORDER BY k").await;
    assert_eq!(slots(&up).await, 1, "resuming reuses the slot");

    // The upstream goes away: the source stalls with the error, the
    // server goes on serving, and the source recovers by itself.
    drop(up);
    pg.stop();
    let error = status_becomes(&c, "shop", "stalled").await;
    assert!(error.is_some(), "a stalled source says why");
    assert_eq!(
        value(&c, "SELECT count(*) FROM accounts").await.as_deref(),
        Some("92")
    );
    pg.restart();
    let up = upstream(&pg).await;
    up.batch_execute("INSERT INTO events VALUES (-1, 'after the outage')")
        .await
        .expect("write after restart");
    status_becomes(&c, "shop", "running").await;
    converge(&c, &up, "SELECT k, payload FROM events ORDER BY k").await;
    let lsn = value(&c, "SELECT lsn FROM shop_progress").await;
    assert!(lsn.is_some_and(|l| l.parse::<i64>().unwrap_or(0) > 0));

    // DROP SOURCE drops the slot upstream.
    c.batch_execute("DROP SOURCE shop CASCADE")
        .await
        .expect("drop");
    let deadline = Instant::now() + Duration::from_secs(30);
    while slots(&up).await != 0 {
        assert!(Instant::now() < deadline, "the slot outlived its source");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_source_errors_are_clear() {
    // Without logical WAL.
    let plain = PgServer::start();
    let server = Server::start();
    let c = server.connect().await;
    let connect = |port: u16, extra: &str| {
        format!(
            "CREATE CONNECTION {extra}pg{port} TO POSTGRES (HOST '127.0.0.1', PORT {port}, USER postgres)"
        )
    };
    let err = c
        .batch_execute(&connect(plain.port(), ""))
        .await
        .unwrap_err();
    assert!(
        err.as_db_error()
            .is_some_and(|d| d.message().contains("wal_level")),
        "{err:?}"
    );
    c.batch_execute(&format!(
        "{} WITH (VALIDATE = false)",
        connect(plain.port(), "")
    ))
    .await
    .expect("VALIDATE = false skips the check");
    let err = c
        .batch_execute(&format!(
            "CREATE SOURCE s FROM POSTGRES CONNECTION pg{} (PUBLICATION 'p') FOR ALL TABLES",
            plain.port()
        ))
        .await
        .unwrap_err();
    assert!(
        err.as_db_error()
            .is_some_and(|d| d.message().contains("wal_level")),
        "{err:?}"
    );
    // Unreachable.
    let err = c.batch_execute(&connect(1, "bad_")).await.unwrap_err();
    assert!(
        err.as_db_error()
            .is_some_and(|d| d.message().contains("connecting")),
        "{err:?}"
    );
    drop(plain);

    let pg = PgServer::start_logical();
    let up = upstream(&pg).await;
    up.batch_execute(
        "CREATE TYPE mood AS ENUM ('sad', 'happy');
         CREATE TABLE plain_identity (id int PRIMARY KEY, v text);
         CREATE TABLE odd (id int, at point, m mood);
         ALTER TABLE odd REPLICA IDENTITY FULL;
         CREATE TABLE t (id int, v text, w int);
         ALTER TABLE t REPLICA IDENTITY FULL;
         CREATE TABLE tr (id int);
         ALTER TABLE tr REPLICA IDENTITY FULL;
         INSERT INTO t VALUES (1, 'one', 1);
         CREATE PUBLICATION p_plain FOR TABLE plain_identity;
         CREATE PUBLICATION p_odd FOR TABLE odd;
         CREATE PUBLICATION p_t FOR TABLE t;
         CREATE PUBLICATION p_tr FOR TABLE tr;",
    )
    .await
    .expect("upstream schema");
    c.batch_execute(&connect(pg.port(), ""))
        .await
        .expect("connection");
    let create = |publication: &str, extra: &str| {
        format!(
            "CREATE SOURCE src_{publication} FROM POSTGRES CONNECTION pg{} (PUBLICATION '{publication}'{extra}) FOR ALL TABLES",
            pg.port()
        )
    };
    for (sql, expected) in [
        (create("nope", ""), "publication \"nope\" does not exist"),
        (create("p_plain", ""), "REPLICA IDENTITY FULL"),
        (create("p_odd", ""), "TEXT COLUMNS"),
        (
            create("p_odd", ", TEXT COLUMNS (odd.at)"),
            "column public.odd.m",
        ),
        (create("p_t", ", TEXT COLUMNS (t.nope)"), "names no column"),
    ] {
        let err = c.batch_execute(&sql).await.unwrap_err();
        let message = err.as_db_error().map(|d| d.message().to_string());
        assert!(
            message.as_deref().is_some_and(|m| m.contains(expected)),
            "{sql}: expected {expected:?}, got {err:?}"
        );
    }
    assert_eq!(slots(&up).await, 0, "a refused source leaves no slot");
    c.batch_execute(&create("p_odd", ", TEXT COLUMNS (odd.at, public.odd.m)"))
        .await
        .expect("TEXT COLUMNS make the types ingestible");
    up.batch_execute("INSERT INTO odd VALUES (1, point(1, 2), 'happy')")
        .await
        .unwrap();
    converge(&c, &up, "SELECT id, at::text, m::text FROM odd").await;

    // A schema change the source cannot follow fails it, with the reason;
    // an added column is ignored.
    c.batch_execute(&create("p_t", ""))
        .await
        .expect("source on t");
    converge(&c, &up, "SELECT id, v, w FROM t").await;
    up.batch_execute("ALTER TABLE t ADD COLUMN extra int; INSERT INTO t VALUES (2, 'two', 2, 99)")
        .await
        .unwrap();
    converge(&c, &up, "SELECT id, v, w FROM t ORDER BY id").await;
    up.batch_execute("ALTER TABLE t DROP COLUMN w; INSERT INTO t VALUES (3, 'three')")
        .await
        .unwrap();
    let error = status_becomes(&c, "src_p_t", "failed").await;
    assert!(
        error
            .as_deref()
            .is_some_and(|e| e.contains("incompatible schema change")),
        "{error:?}"
    );
    // The rows from before the change are still served.
    assert_eq!(
        value(&c, "SELECT count(*) FROM t").await.as_deref(),
        Some("2")
    );

    // TRUNCATE fails the source rather than keeping rows that are gone.
    c.batch_execute(&create("p_tr", ""))
        .await
        .expect("source on tr");
    up.batch_execute("INSERT INTO tr VALUES (1); TRUNCATE tr;")
        .await
        .unwrap();
    let error = status_becomes(&c, "src_p_tr", "failed").await;
    assert!(
        error.as_deref().is_some_and(|e| e.contains("truncated")),
        "{error:?}"
    );
    // Dropping a connection a source uses needs CASCADE.
    let err = c
        .batch_execute(&format!("DROP CONNECTION pg{}", pg.port()))
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "2BP01", "{err:?}");
    c.batch_execute(&format!("DROP CONNECTION pg{} CASCADE", pg.port()))
        .await
        .expect("drop with cascade");
    let deadline = Instant::now() + Duration::from_secs(30);
    while slots(&up).await != 0 {
        assert!(Instant::now() < deadline, "slots outlived their sources");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

//! `UPDATE` and `DELETE` by primary key, which read the one row their key
//! names instead of the table: results, errors and contents must be what
//! the general path gives, under concurrency with every other kind of
//! write, across restarts and through prepared statements.

use futures::SinkExt;

use crate::harness::*;

/// Each case: a statement with `{t}` for the table and `{k}` for the
/// start of its key predicate (`k = ` on the fast path, `k + 0 = ` on the
/// general path, which no key lookup serves).
const CASES: &[&str] = &[
    "UPDATE {t} SET v = v + 1 WHERE {k}3",
    "UPDATE {t} SET v = v * 2, s = s || '!' WHERE {k}4 AND v > 10",
    "UPDATE {t} SET v = v * 2 WHERE {k}4 AND v > 10000",
    "UPDATE {t} SET n = 1234.567 WHERE {k}5",
    "UPDATE {t} SET n = 99999 WHERE {k}5",
    "UPDATE {t} SET v = 2147483647 WHERE {k}6",
    "UPDATE {t} SET v = v + 1 WHERE {k}6",
    "UPDATE {t} SET v = v / 0 WHERE {k}7",
    "UPDATE {t} SET v = v / (v - v) WHERE {k}99999",
    "UPDATE {t} SET s = NULL WHERE {k}8",
    "UPDATE {t} SET v = NULL, s = DEFAULT WHERE {k}9",
    "UPDATE {t} SET k = k + 100 WHERE {k}10",
    "UPDATE {t} SET k = 12 WHERE {k}11",
    "UPDATE {t} SET k = NULL WHERE {k}13",
    "UPDATE {t} SET s = 'abcdefghijk' WHERE {k}14",
    "UPDATE {t} SET v = '17' WHERE {k}'15'",
    "UPDATE {t} SET v = 1 WHERE {k}16.0",
    "UPDATE {t} SET v = 1 WHERE {k}16.5",
    "UPDATE {t} SET v = 1 WHERE {k}NULL",
    "UPDATE {t} SET v = 1 WHERE {k}CAST(17 AS bigint)",
    "UPDATE {t} SET v = v + 1 WHERE {k}18 AND s LIKE 'x%'",
    "UPDATE {t} SET v = v + 1 WHERE {k}18 AND {k}19",
    "DELETE FROM {t} WHERE {k}18 AND {k}18",
    "UPDATE {t} SET v = length(s) + k WHERE {k}19",
    "DELETE FROM {t} WHERE {k}20",
    "DELETE FROM {t} WHERE {k}20",
    "DELETE FROM {t} WHERE {k}21 AND v < 0",
    "DELETE FROM {t} WHERE {k}22 AND v > 0",
    "UPDATE {t} SET v = v + 1 WHERE {k}23 RETURNING k, v, s",
    "DELETE FROM {t} WHERE {k}24 RETURNING *",
    "UPDATE {t} SET v = v + 1 WHERE {k}2147483648",
    "UPDATE {t} SET v = (SELECT max(v) FROM {t}) WHERE {k}25",
];

/// What a statement did: its rows and tag, or its SQLSTATE and message
/// (with the table's name made the same for both tables).
async fn outcome(
    c: &tokio_postgres::Client,
    sql: &str,
    table: &str,
) -> Result<Vec<String>, (String, String)> {
    match c.simple_query(sql).await {
        Ok(messages) => Ok(messages
            .into_iter()
            .map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => {
                    format!("{:?}", (0..r.len()).map(|i| r.get(i)).collect::<Vec<_>>())
                }
                tokio_postgres::SimpleQueryMessage::CommandComplete(n) => format!("tag {n}"),
                _ => String::new(),
            })
            .collect()),
        Err(e) => Err((
            sqlstate(&e),
            e.as_db_error()
                .map(|d| {
                    format!("{} {:?}", d.message(), d.detail()).replace(&format!("{table}_"), "t_")
                })
                .unwrap_or_default()
                .replace(&format!("\"{table}\""), "\"t\""),
        )),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn keyed_writes_agree_with_the_general_path() {
    let s = Server::start();
    let c = s.connect().await;
    for t in ["fast", "general"] {
        c.batch_execute(&format!(
            "CREATE TABLE {t} (k int PRIMARY KEY, v int, s varchar(10) DEFAULT 'd', n numeric(6,2));
             INSERT INTO {t} SELECT g, g * 10, 'x' || g, g / 4.0 FROM generate_series(1, 40) g;"
        ))
        .await
        .unwrap();
    }
    let mut fast_path = 0;
    for case in CASES {
        let fast = case.replace("{t}", "fast").replace("{k}", "k = ");
        let general = case.replace("{t}", "general").replace("{k}", "k + 0 = ");
        let a = outcome(&c, &fast, "fast").await;
        let b = outcome(&c, &general, "general").await;
        assert_eq!(a, b, "{fast}");
        let explain = format!("{:?}", c.simple_query(&format!("EXPLAIN {fast}")).await);
        if explain.contains("Fast path: Read fast by primary key") {
            fast_path += 1;
        }
        let general_plan = format!("{:?}", c.simple_query(&format!("EXPLAIN {general}")).await);
        assert!(
            !general_plan.contains("Fast path"),
            "{general}: {general_plan}"
        );
        let contents = "SELECT k, v, s, n FROM {} ORDER BY k";
        assert_eq!(
            rows(&c, &contents.replace("{}", "fast")).await,
            rows(&c, &contents.replace("{}", "general")).await,
            "after {fast}"
        );
    }
    // All but the cases whose key is not a plain constant of the key's
    // type (16.5, NULL, 2147483648) or that read a subquery.
    assert!(
        fast_path >= CASES.len() - 5,
        "{fast_path} of {} took the fast path",
        CASES.len()
    );
}

/// Simple-protocol statements that differ only in their integer literals
/// share one plan (the literals bound as parameters): every value must
/// still be what the general path gives, overflows and misses included.
#[tokio::test(flavor = "multi_thread")]
async fn repeated_statements_with_other_literals_agree_with_the_general_path() {
    let s = Server::start();
    let c = s.connect().await;
    for t in ["fast", "general"] {
        c.batch_execute(&format!(
            "CREATE TABLE {t} (k int PRIMARY KEY, v int, b bigint, s text);
             INSERT INTO {t} SELECT g, g, g * 1000, 'r' || g FROM generate_series(1, 20) g;"
        ))
        .await
        .unwrap();
    }
    let shapes = [
        "UPDATE {t} SET v = v + {n} WHERE {k}{m}",
        "UPDATE {t} SET b = b * {n}, s = s || {n} WHERE {k}{m} AND v < 1000000",
        "UPDATE {t} SET v = {n} / (v - {m}) WHERE {k}{m}",
        "DELETE FROM {t} WHERE {k}{m} AND v > {n}",
    ];
    let values = [
        (1i64, 3i64),
        (7, 3),
        // The same `{n}` with other keys (its expressions made once),
        // then another `{n}` for a key seen before.
        (7, 8),
        (7, 9),
        (8, 8),
        (2147483647, 4),
        (3000000000, 5),
        (-2, 6),
        (1, 99),
        (0, 7),
        (5, 2147483648),
    ];
    for shape in shapes {
        for (n, m) in values {
            let fill = |t: &str, k: &str| {
                shape
                    .replace("{t}", t)
                    .replace("{k}", k)
                    .replace("{n}", &n.to_string())
                    .replace("{m}", &m.to_string())
            };
            let fast = fill("fast", "k = ");
            let a = outcome(&c, &fast, "fast").await;
            let b = outcome(&c, &fill("general", "k + 0 = "), "general").await;
            assert_eq!(a, b, "{fast}");
        }
    }
    let contents = "SELECT k, v, b, s FROM {} ORDER BY k";
    assert_eq!(
        rows(&c, &contents.replace("{}", "fast")).await,
        rows(&c, &contents.replace("{}", "general")).await
    );
    // The kept plan follows the catalog: the table re-created with the
    // key's type changed.
    c.batch_execute(
        "DROP TABLE fast; CREATE TABLE fast (k bigint PRIMARY KEY, v int, b bigint, s text);
         INSERT INTO fast VALUES (3000000000, 1, 1, 'x')",
    )
    .await
    .unwrap();
    assert_eq!(
        outcome(&c, "UPDATE fast SET v = v + 1 WHERE k = 3000000000", "fast").await,
        Ok(vec!["tag 1".to_string()])
    );
    assert_eq!(value(&c, "SELECT v FROM fast").await, Some("2".into()));
}

#[tokio::test(flavor = "multi_thread")]
async fn composite_keys_and_prepared_keyed_writes() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE ab (a int, b text, v bigint NOT NULL, PRIMARY KEY (a, b));
         INSERT INTO ab SELECT g % 5, 'b' || (g / 5), g FROM generate_series(0, 49) g;",
    )
    .await
    .unwrap();
    let update = c
        .prepare("UPDATE ab SET v = v + $3 WHERE a = $1 AND b = $2")
        .await
        .unwrap();
    assert_eq!(
        update.params(),
        &[
            tokio_postgres::types::Type::INT4,
            tokio_postgres::types::Type::TEXT,
            tokio_postgres::types::Type::INT8
        ]
    );
    let plan = rows(&c, "EXPLAIN UPDATE ab SET v = 0 WHERE b = 'b1' AND a = 2").await;
    assert!(
        format!("{plan:?}").contains("Read ab by primary key (a, b) = (2, b1)"),
        "{plan:?}"
    );
    for _ in 0..10 {
        assert_eq!(c.execute(&update, &[&3i32, &"b4", &5i64]).await.unwrap(), 1);
    }
    assert_eq!(
        c.execute(&update, &[&3i32, &"b99", &5i64]).await.unwrap(),
        0
    );
    // A NULL key matches nothing (planned again with its values).
    assert_eq!(
        c.execute(&update, &[&None::<i32>, &"b4", &5i64])
            .await
            .unwrap(),
        0
    );
    // NOT NULL and overflow errors are those of every write.
    let null = c
        .execute(&update, &[&3i32, &"b4", &None::<i64>])
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&null), "23502", "{null}");
    let overflow = c
        .execute(&update, &[&3i32, &"b4", &i64::MAX])
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&overflow), "22003", "{overflow}");
    assert_eq!(
        value(&c, "SELECT v FROM ab WHERE a = 3 AND b = 'b4'").await,
        Some((23 + 50).to_string())
    );
    // In a block the write sees the block's own writes, and a rollback
    // undoes it.
    c.batch_execute("BEGIN; INSERT INTO ab VALUES (9, 'z', 1)")
        .await
        .unwrap();
    assert_eq!(c.execute(&update, &[&9i32, &"z", &1i64]).await.unwrap(), 1);
    assert_eq!(
        value(&c, "SELECT v FROM ab WHERE a = 9").await,
        Some("2".into())
    );
    c.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        value(&c, "SELECT count(*) FROM ab WHERE a = 9").await,
        Some("0".into())
    );
    // A prepared DELETE, and the plan kept from Prepare following the
    // catalog (the table re-created: the new table's rows).
    let delete = c
        .prepare("DELETE FROM ab WHERE a = $1 AND b = $2")
        .await
        .unwrap();
    assert_eq!(c.execute(&delete, &[&3i32, &"b4"]).await.unwrap(), 1);
    assert_eq!(c.execute(&delete, &[&3i32, &"b4"]).await.unwrap(), 0);
    c.batch_execute(
        "DROP TABLE ab; CREATE TABLE ab (a int, b text, v bigint NOT NULL, PRIMARY KEY (a, b));
         INSERT INTO ab VALUES (3, 'b4', 1)",
    )
    .await
    .unwrap();
    assert_eq!(c.execute(&update, &[&3i32, &"b4", &5i64]).await.unwrap(), 1);
    assert_eq!(value(&c, "SELECT v FROM ab").await, Some("6".into()));
    // `now()` in a prepared keyed write is each execution's own time.
    c.batch_execute("CREATE TABLE seen (k int PRIMARY KEY, at timestamptz, n int); INSERT INTO seen VALUES (1, NULL, 0)")
        .await
        .unwrap();
    let touch = c
        .prepare("UPDATE seen SET at = now(), n = n + 1 WHERE k = $1")
        .await
        .unwrap();
    let mut times = Vec::new();
    for _ in 0..2 {
        assert_eq!(c.execute(&touch, &[&1i32]).await.unwrap(), 1);
        times.push(value(&c, "SELECT extract(epoch FROM at)::float8 FROM seen").await);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let times: Vec<f64> = times
        .into_iter()
        .map(|t| t.unwrap().parse().unwrap())
        .collect();
    assert!(times[1] >= times[0] + 0.015, "{times:?}");
}

/// Keyed writes follow every other write to their table (inserts, COPY,
/// the general path's updates and deletes, TRUNCATE, transaction blocks)
/// and a restart.
#[tokio::test(flavor = "multi_thread")]
async fn keyed_writes_see_every_other_write() {
    let mut s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE kv (k bigint PRIMARY KEY, v int);
         INSERT INTO kv SELECT g, 0 FROM generate_series(1, 100) g;",
    )
    .await
    .unwrap();
    let bump = c
        .prepare("UPDATE kv SET v = v + 1 WHERE k = $1")
        .await
        .unwrap();
    // The first keyed write builds the table's rows by key.
    assert_eq!(c.execute(&bump, &[&1i64]).await.unwrap(), 1);
    c.batch_execute("INSERT INTO kv VALUES (200, 5)")
        .await
        .unwrap();
    assert_eq!(c.execute(&bump, &[&200i64]).await.unwrap(), 1);
    c.batch_execute("INSERT INTO kv SELECT k + 1000, v FROM kv WHERE k <= 3")
        .await
        .unwrap();
    assert_eq!(c.execute(&bump, &[&1001i64]).await.unwrap(), 1);
    let sink = c
        .copy_in::<_, bytes::Bytes>("COPY kv FROM STDIN")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"300\t7\n301\t8\n"))
        .await
        .unwrap();
    sink.finish().await.unwrap();
    assert_eq!(c.execute(&bump, &[&301i64]).await.unwrap(), 1);
    // General-path updates and deletes, then keyed writes of those rows.
    c.batch_execute(
        "UPDATE kv SET v = v + 100 WHERE v >= 0 AND k < 5; DELETE FROM kv WHERE k = 2 OR k = 3",
    )
    .await
    .unwrap();
    assert_eq!(c.execute(&bump, &[&2i64]).await.unwrap(), 0);
    assert_eq!(c.execute(&bump, &[&4i64]).await.unwrap(), 1);
    // A block: its writes land at COMMIT; the keyed write after sees them.
    c.batch_execute(
        "BEGIN; DELETE FROM kv WHERE k = 5; INSERT INTO kv VALUES (5, 50), (2, 20); COMMIT",
    )
    .await
    .unwrap();
    assert_eq!(c.execute(&bump, &[&5i64]).await.unwrap(), 1);
    assert_eq!(c.execute(&bump, &[&2i64]).await.unwrap(), 1);
    // A keyed DELETE, then an INSERT of the same key.
    c.batch_execute("DELETE FROM kv WHERE k = 6; INSERT INTO kv VALUES (6, 60)")
        .await
        .unwrap();
    assert_eq!(c.execute(&bump, &[&6i64]).await.unwrap(), 1);
    let expected = [
        (1, 101),
        (2, 21),
        (4, 101),
        (5, 51),
        (6, 61),
        (200, 6),
        (301, 9),
        (1001, 2),
    ];
    let check = |rows: Vec<Vec<Option<String>>>| {
        let got: Vec<(i64, i64)> = rows
            .into_iter()
            .map(|r| {
                (
                    r[0].as_deref().unwrap().parse().unwrap(),
                    r[1].as_deref().unwrap().parse().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, expected);
    };
    let probe = "SELECT k, v FROM kv WHERE k IN (1, 2, 3, 4, 5, 6, 200, 301, 1001) ORDER BY k";
    check(rows(&c, probe).await);
    // After a restart the rows by key are built again from the table.
    drop(c);
    s.kill_and_restart();
    let c = s.connect().await;
    let bump = c
        .prepare("UPDATE kv SET v = v + 1 WHERE k = $1")
        .await
        .unwrap();
    assert_eq!(c.execute(&bump, &[&7i64]).await.unwrap(), 1);
    assert_eq!(
        value(&c, "SELECT v FROM kv WHERE k = 7").await,
        Some("1".into())
    );
    check(rows(&c, probe).await);
    // TRUNCATE empties them.
    c.batch_execute("TRUNCATE kv").await.unwrap();
    assert_eq!(c.execute(&bump, &[&7i64]).await.unwrap(), 0);
    c.batch_execute("INSERT INTO kv VALUES (7, 70)")
        .await
        .unwrap();
    assert_eq!(c.execute(&bump, &[&7i64]).await.unwrap(), 1);
    assert_eq!(value(&c, "SELECT v FROM kv").await, Some("71".into()));
}

/// Clients updating a few hot keys by key, while others update the
/// whole table, run blocks and insert and delete other keys: no update is
/// lost and no row is doubled or dropped.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_keyed_writes_lose_no_update() {
    const KEYS: i64 = 4;
    const CLIENTS: usize = 6;
    const ROUNDS: i64 = 60;
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(&format!(
        "CREATE TABLE hot (k bigint PRIMARY KEY, v bigint NOT NULL);
         INSERT INTO hot SELECT g, 0 FROM generate_series(1, {KEYS}) g;"
    ))
    .await
    .unwrap();
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let c = s.connect().await;
        tasks.push(tokio::spawn(async move {
            let bump = c
                .prepare("UPDATE hot SET v = v + 1 WHERE k = $1")
                .await
                .unwrap();
            let mut added = 0i64;
            for round in 0..ROUNDS {
                let k = 1 + (round + client as i64) % KEYS;
                match client % 3 {
                    // Keyed, prepared.
                    0 | 1 => {
                        assert_eq!(c.execute(&bump, &[&k]).await.unwrap(), 1);
                        added += 1;
                    }
                    // The general path over the whole table, or a block
                    // (which may lose its race: 40001, nothing applied).
                    _ if round % 2 == 0 => {
                        let n = c
                            .execute(
                                &format!("UPDATE hot SET v = v + 1 WHERE v >= 0 AND k <= {KEYS}"),
                                &[],
                            )
                            .await
                            .unwrap();
                        added += n as i64;
                    }
                    _ => {
                        let block = format!(
                            "BEGIN; UPDATE hot SET v = v + 1 WHERE k = {k}; \
                             INSERT INTO hot VALUES ({}, 1); COMMIT",
                            1000 + client as i64 * ROUNDS + round
                        );
                        match c.batch_execute(&block).await {
                            Ok(()) => added += 1,
                            Err(e) => {
                                assert_eq!(sqlstate(&e), "40001", "{e}");
                                c.batch_execute("ROLLBACK").await.unwrap();
                            }
                        }
                    }
                }
            }
            added
        }));
    }
    // Meanwhile: inserts and keyed deletes of other keys.
    let churn = {
        let c = s.connect().await;
        tokio::spawn(async move {
            for i in 0..100i64 {
                c.execute("INSERT INTO hot VALUES ($1, 0)", &[&(100 + i)])
                    .await
                    .unwrap();
                if i % 2 == 0 {
                    assert_eq!(
                        c.execute("DELETE FROM hot WHERE k = $1", &[&(100 + i)])
                            .await
                            .unwrap(),
                        1
                    );
                }
            }
        })
    };
    let mut added = 0;
    for t in tasks {
        added += t.await.unwrap();
    }
    churn.await.unwrap();
    assert_eq!(
        value(&c, &format!("SELECT sum(v) FROM hot WHERE k <= {KEYS}")).await,
        Some(added.to_string())
    );
    assert_eq!(
        value(&c, "SELECT count(*) FROM hot WHERE k BETWEEN 100 AND 199").await,
        Some("50".into())
    );
    assert_eq!(
        value(&c, "SELECT count(*) - count(DISTINCT k) FROM hot").await,
        Some("0".into())
    );
}

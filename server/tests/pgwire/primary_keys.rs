//! Primary keys under concurrent writers and COPY: however writes race,
//! no key is ever held by two rows, and each refused write reports the
//! key it collided on.

use futures::SinkExt;

use crate::harness::*;

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_writers_never_share_a_key() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE k (id int PRIMARY KEY, writer int)")
        .await
        .unwrap();
    // Eight writers each try every key in 0..200, blind inserts and
    // read-then-write upserts mixed; for each key exactly one insert wins.
    let mut tasks = Vec::new();
    for writer in 0..8 {
        let conn = s.connect().await;
        tasks.push(tokio::spawn(async move {
            let mut won = Vec::new();
            for key in 0..200 {
                let sql = if (key + writer) % 3 == 0 {
                    format!(
                        "INSERT INTO k SELECT {key}, {writer} WHERE NOT EXISTS (SELECT 1 FROM k WHERE id = {key})"
                    )
                } else {
                    format!("INSERT INTO k VALUES ({key}, {writer})")
                };
                match conn.execute(sql.as_str(), &[]).await {
                    Ok(1) => won.push(key),
                    Ok(_) => {}
                    Err(e) => assert_eq!(sqlstate(&e), "23505", "{sql}: {e}"),
                }
            }
            won
        }));
    }
    let mut winners = Vec::new();
    for t in tasks {
        winners.extend(t.await.unwrap());
    }
    winners.sort();
    assert_eq!(winners, (0..200).collect::<Vec<_>>(), "one winner per key");
    assert_eq!(
        rows(&c, "SELECT count(*), count(DISTINCT id) FROM k").await,
        vec![vec![Some("200".into()), Some("200".into())]]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn copy_and_transactions_are_checked_and_name_the_key() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE k (a int, b text, PRIMARY KEY (a, b)); INSERT INTO k VALUES (1, 'x')",
    )
    .await
    .unwrap();
    let sink = c.copy_in("COPY k FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"2\ty\n1\tx\n"))
        .await
        .unwrap();
    let err = sink.finish().await.unwrap_err();
    assert_eq!(sqlstate(&err), "23505", "{err:?}");
    let db = err.as_db_error().unwrap();
    assert_eq!(
        db.message(),
        "duplicate key value violates unique constraint \"k_pkey\""
    );
    assert_eq!(db.detail(), Some("Key (a, b)=(1, x) already exists."));
    assert_eq!(
        value(&c, "SELECT count(*) FROM k").await.as_deref(),
        Some("1")
    );
    // The key the failed COPY took before its duplicate is free again.
    c.batch_execute("INSERT INTO k VALUES (2, 'y')")
        .await
        .unwrap();
    // A COPY that passes the primary key but not a UNIQUE: the primary
    // keys it had taken are given back too.
    c.batch_execute("CREATE TABLE ku (a int PRIMARY KEY, b int UNIQUE)")
        .await
        .unwrap();
    let sink = c.copy_in("COPY ku FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"1\t1\n2\t2\n3\t1\n"))
        .await
        .unwrap();
    let err = sink.finish().await.unwrap_err();
    assert_eq!(sqlstate(&err), "23505", "{err:?}");
    assert_eq!(
        err.as_db_error().unwrap().message(),
        "duplicate key value violates unique constraint \"ku_b_key\""
    );
    c.batch_execute("INSERT INTO ku VALUES (1, 10), (2, 20), (3, 30)")
        .await
        .unwrap();
    c.batch_execute("DELETE FROM k WHERE a = 2").await.unwrap();
    // Key columns are NOT NULL, for COPY too (which once failed on any
    // NOT NULL column, building its row of defaults).
    let sink = c.copy_in("COPY k FROM STDIN").await.unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(b"\\N\ty\n"))
        .await
        .unwrap();
    let err = sink.finish().await.unwrap_err();
    assert_eq!(sqlstate(&err), "23502", "{err:?}");
    // Two transactions inserting one key: the second COMMIT fails.
    let other = s.connect().await;
    c.batch_execute("BEGIN; INSERT INTO k VALUES (5, 'z')")
        .await
        .unwrap();
    other
        .batch_execute("BEGIN; INSERT INTO k VALUES (5, 'z')")
        .await
        .unwrap();
    c.batch_execute("COMMIT").await.unwrap();
    let err = other.batch_execute("COMMIT").await.unwrap_err();
    assert_eq!(sqlstate(&err), "23505");
    assert_eq!(
        value(&c, "SELECT count(*) FROM k").await.as_deref(),
        Some("2")
    );
}

/// Aggregates that pin down the contents of `big` (count, ids, and the
/// exact text of every name and note through their lengths and hashes).
const BIG_SUMMARY: &str = "SELECT count(*), sum(id), sum(length(name)), \
     count(*) FILTER (WHERE name LIKE '%' || chr(10) || '%'), max(md5(name || note)) FROM big";

/// Send `data` as CopyData messages of `chunk` bytes (cutting rows,
/// quoted fields and multi-byte characters apart) and end the COPY.
async fn copy_chunked(
    c: &tokio_postgres::Client,
    sql: &str,
    data: &[u8],
    chunk: usize,
) -> Result<u64, tokio_postgres::Error> {
    let sink = c.copy_in(sql).await?;
    futures::pin_mut!(sink);
    for piece in data.chunks(chunk) {
        sink.send(bytes::Bytes::copy_from_slice(piece)).await?;
    }
    sink.finish().await
}

#[tokio::test(flavor = "multi_thread")]
async fn copy_streams_rows_into_staged_parts_and_commits_them_whole() {
    // Tiny parts: every COPY below stages many of them.
    let mut s = Server::start_with(&["--copy-part-size", "64KiB"]);
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE big (id int PRIMARY KEY, name text NOT NULL, note text);
         CREATE MATERIALIZED VIEW big_stats AS SELECT count(*) AS n, sum(id) AS ids FROM big",
    )
    .await
    .unwrap();
    // CSV with a header, quoted delimiters, quotes, newlines inside
    // quotes and multi-byte characters, sent in pieces of 1,777 bytes.
    let mut csv = String::from("id,name,note\n");
    let mut expect_newlines = 0;
    for id in 0..20_000 {
        let name = if id % 7 == 0 {
            expect_newlines += 1;
            format!("\"línea {id}\nsegunda, \"\"citada\"\"\"")
        } else {
            format!("nombre-{id}-é")
        };
        let note = if id % 11 == 0 {
            String::new()
        } else {
            format!("n{id}")
        };
        csv.push_str(&format!("{id},{name},{note}\n"));
    }
    let n = copy_chunked(
        &c,
        "COPY big FROM STDIN WITH (FORMAT csv, HEADER true)",
        csv.as_bytes(),
        1_777,
    )
    .await
    .unwrap();
    assert_eq!(n, 20_000);
    let summary = rows(&c, BIG_SUMMARY).await;
    assert_eq!(summary[0][0].as_deref(), Some("20000"));
    assert_eq!(summary[0][1].as_deref(), Some("199990000"));
    assert_eq!(
        summary[0][3].as_deref(),
        Some(&*expect_newlines.to_string())
    );
    assert_eq!(
        value(&c, "SELECT name FROM big WHERE id = 14")
            .await
            .as_deref(),
        Some("línea 14\nsegunda, \"citada\"")
    );
    assert_eq!(
        value(&c, "SELECT note IS NULL FROM big WHERE id = 22")
            .await
            .as_deref(),
        Some("t"),
        "an unquoted empty CSV field is NULL"
    );

    // A COPY whose last row repeats a key fails whole, after staging
    // parts: nothing of it is visible.
    let mut text = String::new();
    for id in 30_000..40_000 {
        text.push_str(&format!("{id}\tt{id}\t\\N\n"));
    }
    text.push_str("5\tagain\t\\N\n");
    let err = copy_chunked(&c, "COPY big FROM STDIN", text.as_bytes(), 4_096)
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "23505", "{err:?}");
    assert_eq!(
        err.as_db_error().unwrap().detail(),
        Some("Key (id)=(5) already exists.")
    );
    assert_eq!(
        rows(&c, BIG_SUMMARY).await,
        summary,
        "the failed COPY left nothing"
    );
    // Nor did it keep the keys it had checked before the duplicate.
    c.batch_execute(
        "INSERT INTO big VALUES (30000, 'after', NULL); DELETE FROM big WHERE id = 30000",
    )
    .await
    .unwrap();

    // A bad field in the middle fails with its line number.
    let mut bad = String::new();
    for id in 50_000..50_100 {
        bad.push_str(&format!("{id}\tt\t\\N\n"));
    }
    bad.push_str("nope\tt\t\\N\n");
    let err = copy_chunked(&c, "COPY big FROM STDIN", bad.as_bytes(), 333)
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&err), "22P02", "{err:?}");

    // Binary COPY in pieces that cut its length words apart.
    let mut bin = freshet_server::copy::BINARY_HEADER.to_vec();
    for id in 60_000i32..61_000 {
        bin.extend_from_slice(&3i16.to_be_bytes());
        bin.extend_from_slice(&4i32.to_be_bytes());
        bin.extend_from_slice(&id.to_be_bytes());
        let name = format!("bin-{id}");
        bin.extend_from_slice(&(name.len() as i32).to_be_bytes());
        bin.extend_from_slice(name.as_bytes());
        bin.extend_from_slice(&(-1i32).to_be_bytes());
    }
    bin.extend_from_slice(&(-1i16).to_be_bytes());
    let n = copy_chunked(&c, "COPY big FROM STDIN WITH (FORMAT binary)", &bin, 333)
        .await
        .unwrap();
    assert_eq!(n, 1_000);

    let summary = rows(&c, BIG_SUMMARY).await;
    assert_eq!(summary[0][0].as_deref(), Some("21000"));
    assert_eq!(
        rows(&c, "SELECT n, ids FROM big_stats").await,
        rows(&c, "SELECT count(*), sum(id) FROM big").await,
        "the view saw every staged row"
    );
    // The commits name the parts; a crash loses none of them.
    s.kill_and_restart();
    let c = s.connect().await;
    assert_eq!(rows(&c, BIG_SUMMARY).await, summary);
    assert_eq!(
        value(&c, "SELECT count(*) FROM big WHERE name = 'bin-60999'")
            .await
            .as_deref(),
        Some("1")
    );
}

//! Bad input never takes the server down: garbage, truncated and huge
//! messages, and clients that vanish mid-query.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::harness::*;

/// A startup message for user/database `freshet`.
pub fn startup_message() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&196608i32.to_be_bytes());
    for s in ["user", "freshet", "database", "freshet"] {
        body.extend_from_slice(s.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut msg = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    msg.extend(body);
    msg
}

/// A simple Query message.
pub fn query_message(sql: &str) -> Vec<u8> {
    let mut msg = vec![b'Q'];
    msg.extend_from_slice(&((sql.len() + 5) as i32).to_be_bytes());
    msg.extend_from_slice(sql.as_bytes());
    msg.push(0);
    msg
}

/// Connect and finish startup on a raw socket.
pub fn raw_connect(s: &Server) -> TcpStream {
    let mut sock = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    sock.write_all(&startup_message()).unwrap();
    read_until_ready(&mut sock);
    sock
}

/// Read backend messages until ReadyForQuery (or EOF): their type bytes.
pub fn read_until_ready(sock: &mut TcpStream) -> Vec<u8> {
    read_messages(sock)
        .into_iter()
        .map(|(kind, _)| kind)
        .collect()
}

/// Backend messages until ReadyForQuery (or EOF), with their bodies.
pub fn read_messages(sock: &mut TcpStream) -> Vec<(u8, Vec<u8>)> {
    let mut seen = Vec::new();
    loop {
        let mut header = [0u8; 5];
        if sock.read_exact(&mut header).is_err() {
            return seen;
        }
        let len = i32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        let mut body = vec![0u8; len.saturating_sub(4)];
        if sock.read_exact(&mut body).is_err() {
            return seen;
        }
        let kind = header[0];
        seen.push((kind, body));
        if kind == b'Z' {
            return seen;
        }
    }
}

async fn still_serving(s: &Server) {
    let c = s.connect().await;
    assert_eq!(value(&c, "SELECT 41 + 1").await.as_deref(), Some("42"));
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_before_startup_is_rejected_and_server_survives() {
    let s = Server::start();
    for garbage in [
        b"\x00\x00\x00\x08\xde\xad\xbe\xef".to_vec(),
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        vec![0xff; 64],
        vec![0x00, 0x00],
    ] {
        let mut sock = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = sock.write_all(&garbage);
        let _ = sock.shutdown(std::net::Shutdown::Write);
        let mut buf = Vec::new();
        let _ = sock.read_to_end(&mut buf);
    }
    still_serving(&s).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_and_truncated_messages_after_startup() {
    let s = Server::start();
    // Unknown message type.
    let mut sock = raw_connect(&s);
    sock.write_all(b"\x01\x00\x00\x00\x04").unwrap();
    let _ = read_until_ready(&mut sock);
    drop(sock);
    // A Query whose length claims more than is sent, then disconnect.
    let mut sock = raw_connect(&s);
    sock.write_all(b"Q\x00\x00\x10\x00SELECT").unwrap();
    drop(sock);
    // A message claiming to be far larger than any allowed (2 GiB).
    let mut sock = raw_connect(&s);
    sock.write_all(b"Q\x7f\xff\xff\xff").unwrap();
    let _ = read_until_ready(&mut sock);
    drop(sock);
    // A Bind for a statement that does not exist, then Sync.
    let mut sock = raw_connect(&s);
    let mut bind = vec![b'B'];
    let body = b"\0nosuch\0\0\0\0\0\0\0";
    bind.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
    bind.extend_from_slice(body);
    sock.write_all(&bind).unwrap();
    sock.write_all(b"S\x00\x00\x00\x04").unwrap();
    let seen = read_until_ready(&mut sock);
    assert!(
        seen.contains(&b'E'),
        "expected an ErrorResponse, saw {seen:?}"
    );
    drop(sock);
    still_serving(&s).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unsupported_syntax_names_the_construct() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute("CREATE TABLE t (a int)").await.unwrap();
    for (sql, code) in [
        ("CREATE TEMPORARY TABLE x (a int) ON COMMIT DROP", "0A000"),
        ("INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING", "0A000"),
        ("ALTER TABLE t ADD COLUMN b int", "0A000"),
        ("GRANT SELECT ON t TO someone", "0A000"),
        // PostgreSQL types the literal as integer (22P02); Freshet types
        // it text, and no operator adds text and integer.
        ("SELECT 'abc' + 1", "42883"),
    ] {
        let err = c.simple_query(sql).await.unwrap_err();
        assert_eq!(sqlstate(&err), code, "{sql}: {err:?}");
        let msg = err.as_db_error().unwrap().message().to_string();
        assert!(!msg.is_empty());
    }
    still_serving(&s).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn deeply_nested_and_huge_statements_are_refused_cleanly() {
    let s = Server::start();
    let c = s.connect().await;
    let nested = format!("SELECT {}1{}", "(".repeat(10_000), ")".repeat(10_000));
    assert!(c.simple_query(&nested).await.is_err());
    let long = format!("SELECT '{}'", "x".repeat(8 << 20));
    let n = value(&c, &format!("SELECT length(({}))", &long[7..])).await;
    assert_eq!(n.as_deref(), Some("8388608"));
    still_serving(&s).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_vanishing_mid_query_releases_holds() {
    let s = Server::start();
    let c = s.connect().await;
    c.batch_execute(
        "CREATE TABLE big (x int); INSERT INTO big SELECT * FROM generate_series(1, 400)",
    )
    .await
    .unwrap();
    let mut sock = raw_connect(&s);
    sock.write_all(&query_message(
        "SELECT count(*) FROM big a, big b, big c WHERE a.x + b.x + c.x = -1",
    ))
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = rows(
            &c,
            "SELECT count FROM freshet_internal.read_holds WHERE object_name LIKE '%.big'",
        )
        .await
        .len();
        if n == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "query never took its hold");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(sock);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let n = rows(
            &c,
            "SELECT count FROM freshet_internal.read_holds WHERE object_name LIKE '%.big'",
        )
        .await
        .len();
        if n == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "hold not released after the client vanished"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    still_serving(&s).await;
}

//! Webhook sources over real HTTP: every answer code, the CHECK with a
//! secret (and `ALTER SECRET` taking effect), and durability: every
//! request answered 200 is there after a `kill -9`, once.

use std::collections::BTreeSet;
use std::time::Duration;

use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::*;

/// POST `body` to `path` with `headers`; the status code and the
/// response body. A minimal HTTP/1.1 client (one request per
/// connection): enough for a test, and it lets a test send what a
/// library would refuse to. Status 0: no answer (the server is gone).
async fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let Ok(mut sock) = TcpStream::connect(("127.0.0.1", port)).await else {
        return (0, String::new());
    };
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    // A server refusing a large body may close before reading it all.
    let _ = sock.write_all(&bytes).await;
    let mut response = Vec::new();
    let _ = sock.read_to_end(&mut response).await;
    let text = String::from_utf8_lossy(&response).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_answer_every_code_and_check_signatures_with_secrets() {
    let server = Server::start_with(&["--webhook-body-limit", "64KiB"]);
    let c = server.connect().await;
    c.batch_execute(
        "CREATE SECRET hook_key AS 'hunter2'; \
         CREATE SOURCE signed FROM WEBHOOK BODY FORMAT JSON \
           INCLUDE HEADERS (NOT 'x-signature') INCLUDE HEADER 'x-event' AS event \
           CHECK (WITH (BODY AS b, SECRET hook_key AS k) \
             constant_time_eq(encode(hmac(b, k, 'sha256'), 'hex'), headers->>'x-signature')); \
         CREATE SOURCE texts FROM WEBHOOK BODY FORMAT TEXT; \
         CREATE SOURCE raw FROM WEBHOOK BODY FORMAT BYTES; \
         CREATE SOURCE batch FROM WEBHOOK BODY FORMAT JSON ARRAY;",
    )
    .await
    .expect("setup");
    let port = server.http_port;
    let sign = |body: &str| {
        let c = &c;
        let body = body.replace('\'', "''");
        async move {
            value(
                c,
                &format!("SELECT encode(hmac('{body}', 'hunter2', 'sha256'), 'hex')"),
            )
            .await
            .expect("a signature")
        }
    };
    let url = "/api/webhook/freshet/public/signed";
    let body = r#"{"order": 1, "total": 9.5}"#;
    let sig = sign(body).await;
    let ok = post(
        port,
        url,
        &[
            ("x-signature", &sig),
            ("x-event", "created"),
            ("Content-Type", "application/json"),
        ],
        body.as_bytes(),
    )
    .await;
    assert_eq!(ok.0, 200, "{ok:?}");
    // Read right after the 200: the row is there.
    let r = rows(
        &c,
        "SELECT body->>'order', event, headers->>'content-type', headers->>'x-signature' FROM signed",
    )
    .await;
    assert_eq!(
        r,
        vec![vec![
            Some("1".into()),
            Some("created".into()),
            Some("application/json".into()),
            None
        ]]
    );
    // A wrong signature, or none: 401, nothing appended.
    let bad = post(port, url, &[("x-signature", "00")], body.as_bytes()).await;
    assert_eq!(bad.0, 401, "{bad:?}");
    assert_eq!(post(port, url, &[], body.as_bytes()).await.0, 401);
    // Not JSON: 400 with the reason.
    let broken = post(port, url, &[("x-signature", &sig)], b"{\"order\":").await;
    assert_eq!(broken.0, 400, "{broken:?}");
    assert!(broken.1.contains("not valid JSON"), "{broken:?}");
    // Unknown source, schema, database: 404.
    for path in [
        "/api/webhook/freshet/public/nope",
        "/api/webhook/freshet/nope/signed",
        "/api/webhook/nope/public/signed",
    ] {
        assert_eq!(post(port, path, &[], b"{}").await.0, 404, "{path}");
    }
    // Over the body limit: 413.
    let huge = vec![b'x'; 100 * 1024];
    assert_eq!(
        post(port, "/api/webhook/freshet/public/raw", &[], &huge)
            .await
            .0,
        413
    );
    // TEXT refuses bytes that are not UTF-8; BYTES keeps them.
    let (status, reason) = post(port, "/api/webhook/freshet/public/texts", &[], b"\xff\xfe").await;
    assert_eq!(status, 400);
    assert!(reason.contains("UTF-8"), "{reason}");
    assert_eq!(
        post(
            port,
            "/api/webhook/freshet/public/texts",
            &[],
            "héllo".as_bytes()
        )
        .await
        .0,
        200
    );
    assert_eq!(
        post(port, "/api/webhook/freshet/public/raw", &[], b"\xff\x00")
            .await
            .0,
        200
    );
    // JSON ARRAY: one row per element.
    assert_eq!(
        post(
            port,
            "/api/webhook/freshet/public/batch",
            &[],
            br#"[{"a":1},{"a":2},3]"#
        )
        .await
        .0,
        200
    );
    assert_eq!(
        rows(&c, "SELECT (SELECT body FROM texts), (SELECT encode(body, 'hex') FROM raw), (SELECT count(*) FROM batch), (SELECT \"offset\" FROM batch_progress)").await,
        vec![vec![Some("héllo".into()), Some("ff00".into()), Some("3".into()), Some("1".into())]]
    );
    // ALTER SECRET: the next request is checked against the new value.
    c.batch_execute("ALTER SECRET hook_key AS 'rotated'")
        .await
        .unwrap();
    assert_eq!(
        post(port, url, &[("x-signature", &sig)], body.as_bytes())
            .await
            .0,
        401
    );
    let rotated: String = value(
        &c,
        &format!("SELECT encode(hmac('{body}', 'rotated', 'sha256'), 'hex')"),
    )
    .await
    .unwrap();
    assert_eq!(
        post(port, url, &[("x-signature", &rotated)], body.as_bytes())
            .await
            .0,
        200
    );
    // The value shows nowhere.
    let shown = rows(&c, "SHOW CREATE SOURCE signed").await;
    assert!(!format!("{shown:?}").contains("hunter2"), "{shown:?}");
    let shown = rows(&c, "SHOW SECRETS").await;
    assert_eq!(shown, vec![vec![Some("hook_key".into())]]);
    // The source depends on its secret.
    let e = c.batch_execute("DROP SECRET hook_key").await.unwrap_err();
    assert_eq!(sqlstate(&e), "2BP01");
    c.batch_execute("DROP SECRET hook_key CASCADE")
        .await
        .unwrap();
    assert_eq!(
        post(port, url, &[("x-signature", &rotated)], body.as_bytes())
            .await
            .0,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_request_survives_kill_9_once() {
    let mut server = Server::start();
    let c = server.connect().await;
    c.batch_execute("CREATE SOURCE events FROM WEBHOOK BODY FORMAT JSON")
        .await
        .expect("setup");
    drop(c);
    let mut acknowledged: BTreeSet<u64> = BTreeSet::new();
    let mut next = 0u64;
    for cycle in 0..3 {
        // Eight clients post numbered events until the server dies.
        let port = server.http_port;
        let acks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut clients = Vec::new();
        for client in 0..8u64 {
            let first = next + client * 1_000_000;
            let acks = std::sync::Arc::clone(&acks);
            clients.push(tokio::spawn(async move {
                let mut acked = Vec::new();
                for n in first.. {
                    let body = format!(r#"{{"n": {n}}}"#);
                    let (status, _) = post(
                        port,
                        "/api/webhook/freshet/public/events",
                        &[],
                        body.as_bytes(),
                    )
                    .await;
                    match status {
                        200 => {
                            acked.push(n);
                            acks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        0 => break,
                        other => panic!("unexpected status {other}"),
                    }
                }
                acked
            }));
        }
        // Kill at a random moment once requests flow (a loaded machine
        // may take a while to answer the first).
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while acks.load(std::sync::atomic::Ordering::Relaxed) < 20 {
            assert!(
                std::time::Instant::now() < deadline,
                "cycle {cycle}: no request acknowledged"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let wait = rand::rng().random_range(0..500);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        server.kill();
        for client in clients {
            acknowledged.extend(client.await.expect("client"));
        }
        next += 8_000_000;
        server.kill_and_restart();
        let c = server.connect().await;
        let r = rows(
            &c,
            "SELECT count(*), count(DISTINCT body->>'n'), (SELECT \"offset\" FROM events_progress) FROM events",
        )
        .await;
        let v: Vec<u64> = r[0]
            .iter()
            .map(|x| x.as_deref().unwrap_or("0").parse().unwrap())
            .collect();
        assert_eq!(v[0], v[1], "cycle {cycle}: an event twice: {v:?}");
        assert_eq!(
            v[0], v[2],
            "cycle {cycle}: progress and data disagree: {v:?}"
        );
        let present: BTreeSet<u64> = rows(&c, "SELECT body->>'n' FROM events")
            .await
            .into_iter()
            .map(|r| r[0].as_deref().unwrap().parse().unwrap())
            .collect();
        let lost: Vec<&u64> = acknowledged.difference(&present).collect();
        assert!(
            lost.is_empty(),
            "cycle {cycle}: acknowledged but lost: {lost:?}"
        );
        assert!(
            !acknowledged.is_empty(),
            "cycle {cycle}: nothing was acknowledged"
        );
    }
}

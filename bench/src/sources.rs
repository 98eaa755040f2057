//! Source ingest rates (issue 17): how fast each load generator's
//! snapshot becomes durable and readable, and how fast a webhook source
//! takes requests from concurrent clients.
//!
//! Each case creates one source whose snapshot holds about a million
//! updates (`AS OF n, UP TO n + 1`, or a scale). `CREATE SOURCE` answers
//! once the snapshot is appended (one group commit through the
//! transaction log), so its wall time is generation + encoding + the
//! durable append; the rows are then counted to check them. Generation
//! runs on one thread (the ingestion's), so the rate is a one-core figure
//! for making the rows, plus the commit path.

use std::time::Instant;

use tokio_postgres::{Client, SimpleQueryMessage};

use crate::error::{Context, Result, failed};
use crate::freshet::FreshetServer;
use crate::report::thousands;

/// One generator's case.
struct Case {
    name: &'static str,
    create: &'static str,
    /// What counts the updates it wrote.
    count: &'static str,
}

const CASES: &[Case] = &[
    Case {
        name: "COUNTER",
        create: "CREATE SOURCE c FROM LOAD GENERATOR COUNTER (AS OF 999999, UP TO 1000000)",
        count: "SELECT count(*) FROM c",
    },
    Case {
        name: "AUCTION",
        create: "CREATE SOURCE a FROM LOAD GENERATOR AUCTION (AS OF 1000000, UP TO 1000001) FOR ALL TABLES",
        count: "SELECT (SELECT count(*) FROM auctions) + (SELECT count(*) FROM bids) + (SELECT count(*) FROM users)",
    },
    Case {
        name: "MARKETING",
        create: "CREATE SOURCE m FROM LOAD GENERATOR MARKETING (AS OF 250000, UP TO 250001) FOR ALL TABLES",
        count: "SELECT (SELECT count(*) FROM impressions) + (SELECT count(*) FROM clicks) + (SELECT count(*) FROM leads) \
                + (SELECT count(*) FROM coupons) + (SELECT count(*) FROM conversion_predictions)",
    },
    Case {
        name: "TPCH (SF 0.1)",
        create: "CREATE SOURCE t FROM LOAD GENERATOR TPCH (SCALE FACTOR 0.1) FOR ALL TABLES",
        count: "SELECT (SELECT count(*) FROM lineitem) + (SELECT count(*) FROM orders) + (SELECT count(*) FROM partsupp) \
                + (SELECT count(*) FROM part) + (SELECT count(*) FROM customer) + (SELECT count(*) FROM supplier) + 30",
    },
    Case {
        name: "KEY VALUE (64-byte values)",
        create: "CREATE SOURCE kv FROM LOAD GENERATOR KEY VALUE (KEYS 1000000, PARTITIONS 4, VALUE SIZE 64, BATCH SIZE 1000)",
        count: "SELECT count(*) FROM kv",
    },
    Case {
        name: "NEXMARK",
        create: "CREATE SOURCE n FROM LOAD GENERATOR NEXMARK (EVENTS PER SECOND 10000000, TOTAL EVENTS 1000000) FOR ALL TABLES",
        count: "SELECT (SELECT count(*) FROM person) + (SELECT count(*) FROM auction) + (SELECT count(*) FROM bid)",
    },
];

/// One case's measurement.
pub struct Row {
    name: &'static str,
    updates: u64,
    seconds: f64,
}

async fn count(client: &Client, sql: &str) -> Result<u64> {
    for msg in client.simple_query(sql).await.context(sql)? {
        if let SimpleQueryMessage::Row(r) = msg {
            return match r.get(0).and_then(|v| v.parse().ok()) {
                Some(n) => Ok(n),
                None => failed(format!("{sql}: not a count")),
            };
        }
    }
    failed(format!("{sql}: no row"))
}

/// Clients posting to a webhook source at once.
const WEBHOOK_CLIENTS: usize = 32;

/// Requests each client posts.
const WEBHOOK_REQUESTS_PER_CLIENT: usize = 1_000;

/// One HTTP/1.1 keep-alive connection posting to a webhook.
struct HttpClient {
    sock: tokio::net::TcpStream,
    buf: Vec<u8>,
}

impl HttpClient {
    async fn connect(port: u16) -> Result<HttpClient> {
        Ok(HttpClient {
            sock: tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .context("connect to the HTTP port")?,
            buf: Vec::new(),
        })
    }

    /// Read what the server sent next into the buffer.
    async fn read_more(&mut self) -> Result<()> {
        use tokio::io::AsyncReadExt;
        let mut chunk = [0u8; 4096];
        let n = self
            .sock
            .read(&mut chunk)
            .await
            .context("read a response")?;
        if n == 0 {
            return failed("the server closed the connection");
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// POST `body` to `path`; the status code.
    async fn post(&mut self, path: &str, body: &[u8]) -> Result<u16> {
        use tokio::io::AsyncWriteExt;
        let mut req = format!(
            "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        self.sock.write_all(&req).await.context("send a request")?;
        // Read the head, then as many body bytes as it says.
        let head_end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            self.read_more().await?;
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).to_ascii_lowercase();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while self.buf.len() < head_end + length {
            self.read_more().await?;
        }
        self.buf.drain(..head_end + length);
        Ok(status)
    }
}

/// A webhook source fed by [`WEBHOOK_CLIENTS`] clients, each posting
/// [`WEBHOOK_REQUESTS_PER_CLIENT`] requests of `rows_per_request` JSON
/// objects, one after another (each waits for its 200, which comes once
/// the rows are durable): from the first request to the last answer.
async fn webhook_case(
    bin: &std::path::Path,
    workers: Option<u32>,
    name: &'static str,
    rows_per_request: usize,
) -> Result<Row> {
    let server = FreshetServer::start(bin, workers).await?;
    let client = server.connect().await?;
    eprintln!("sources: {name}");
    client
        .batch_execute("CREATE SOURCE w FROM WEBHOOK BODY FORMAT JSON ARRAY")
        .await
        .context("create the webhook source")?;
    let port = server.http_port();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..WEBHOOK_CLIENTS {
        tasks.push(tokio::spawn(async move {
            let mut http = HttpClient::connect(port).await?;
            for r in 0..WEBHOOK_REQUESTS_PER_CLIENT {
                let items: Vec<String> = (0..rows_per_request)
                    .map(|i| {
                        format!(
                            r#"{{"client": {c}, "request": {r}, "item": {i}, "kind": "click", "amount": {}.25}}"#,
                            (r * 7 + i) % 1000
                        )
                    })
                    .collect();
                let body = format!("[{}]", items.join(","));
                let status = http.post("/api/webhook/freshet/public/w", body.as_bytes()).await?;
                if status != 200 {
                    return failed(format!("webhook answered {status}"));
                }
            }
            Ok(())
        }));
    }
    for t in tasks {
        match t.await {
            Ok(result) => result?,
            Err(e) => return failed(format!("a webhook client panicked: {e}")),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let updates = count(&client, "SELECT count(*) FROM w").await?;
    let expected = (WEBHOOK_CLIENTS * WEBHOOK_REQUESTS_PER_CLIENT * rows_per_request) as u64;
    if updates != expected {
        return failed(format!(
            "webhook source holds {updates} rows, not {expected}"
        ));
    }
    Ok(Row {
        name,
        updates,
        seconds,
    })
}

/// Create each source on a fresh server and time its snapshot.
pub async fn run(bin: &std::path::Path, workers: Option<u32>) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    rows.push(
        webhook_case(
            bin,
            workers,
            "WEBHOOK (JSON, 1 row per request, 32 clients)",
            1,
        )
        .await?,
    );
    rows.push(
        webhook_case(
            bin,
            workers,
            "WEBHOOK (JSON ARRAY, 100 rows per request, 32 clients)",
            100,
        )
        .await?,
    );
    for case in CASES {
        let server = FreshetServer::start(bin, workers).await?;
        let client = server.connect().await?;
        eprintln!("sources: {}", case.name);
        let started = Instant::now();
        client
            .batch_execute(case.create)
            .await
            .context(case.create)?;
        let seconds = started.elapsed().as_secs_f64();
        let updates = count(&client, case.count).await?;
        rows.push(Row {
            name: case.name,
            updates,
            seconds,
        });
    }
    Ok(rows)
}

/// The report section.
pub fn render(rows: &[Row]) -> String {
    let mut out =
        String::from("| source | updates | until durable | updates/s |\n|---|---:|---:|---:|\n");
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {:.2} s | {} |\n",
            r.name,
            thousands(r.updates as f64),
            r.seconds,
            thousands(r.updates as f64 / r.seconds.max(1e-9)),
        ));
    }
    out
}

//! Source ingest rates (issue 17): how fast each load generator's
//! snapshot becomes durable and readable.
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

/// Create each source on a fresh server and time its snapshot.
pub async fn run(bin: &std::path::Path, workers: Option<u32>) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
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
    let mut out = String::from(
        "| generator | updates in the snapshot | CREATE SOURCE → durable | updates/s |\n|---|---:|---:|---:|\n",
    );
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

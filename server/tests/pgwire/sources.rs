//! Sources under `kill -9` at random moments: after every restart each
//! generator's data is exactly what its durable progress says was made —
//! no tick twice, none missing — and ingestion goes on from there.

use std::time::Duration;

use rand::Rng;
use tokio_postgres::Client;

use crate::harness::*;

/// Whether the counter holds 1..=n once each, with n its progress.
async fn check_counter(c: &Client, cycle: usize) -> u64 {
    let r = rows(
        c,
        "SELECT count(*), count(DISTINCT counter), min(counter), max(counter), \
         (SELECT \"offset\" FROM k_progress) FROM k",
    )
    .await;
    let v: Vec<u64> = r[0]
        .iter()
        .map(|x| x.as_deref().unwrap_or("0").parse().unwrap_or(0))
        .collect();
    let (n, distinct, min, max, offset) = (v[0], v[1], v[2], v[3], v[4]);
    assert_eq!(n, distinct, "cycle {cycle}: a value twice: {v:?}");
    assert!(
        n == 0 || min == 1,
        "cycle {cycle}: does not start at 1: {v:?}"
    );
    assert_eq!(max, n, "cycle {cycle}: a gap: {v:?}");
    assert_eq!(
        offset, n,
        "cycle {cycle}: progress and data disagree: {v:?}"
    );
    n
}

/// Whether the auction source made one row per tick after its snapshot,
/// each once, with its progress saying how many ticks.
async fn check_auction(c: &Client, cycle: usize) -> u64 {
    let r = rows(
        c,
        "SELECT (SELECT \"offset\" FROM house_progress), \
                (SELECT count(*) FROM auctions), (SELECT count(DISTINCT id) FROM auctions), \
                (SELECT max(id) FROM auctions), \
                (SELECT count(*) FROM bids), (SELECT count(DISTINCT id) FROM bids), \
                (SELECT count(*) FROM users)",
    )
    .await;
    let v: Vec<u64> = r[0]
        .iter()
        .map(|x| x.as_deref().unwrap_or("0").parse().unwrap_or(0))
        .collect();
    let (offset, auctions, distinct_auctions, max_auction, bids, distinct_bids, users) =
        (v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
    assert_eq!(users, 4_076, "cycle {cycle}: snapshot: {v:?}");
    assert_eq!(auctions, distinct_auctions, "cycle {cycle}: {v:?}");
    assert_eq!(bids, distinct_bids, "cycle {cycle}: {v:?}");
    assert_eq!(
        max_auction, auctions,
        "cycle {cycle}: an auction missing: {v:?}"
    );
    assert_eq!(offset, 1 + auctions + bids, "cycle {cycle}: {v:?}");
    offset
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generators_resume_after_kill_9_with_no_duplicate_and_no_gap() {
    let mut server = Server::start();
    let c = server.connect().await;
    c.batch_execute(
        "CREATE SOURCE k FROM LOAD GENERATOR COUNTER (TICK INTERVAL '2ms'); \
         CREATE SOURCE house FROM LOAD GENERATOR AUCTION (TICK INTERVAL '2ms') FOR ALL TABLES; \
         CREATE MATERIALIZED VIEW bid_totals AS SELECT auction_id, count(*) AS n, sum(amount) AS total FROM bids GROUP BY auction_id;",
    )
    .await
    .expect("setup");
    drop(c);
    let mut rng = rand::rng();
    let (mut counted, mut ticks) = (0, 0);
    for cycle in 0..4 {
        tokio::time::sleep(Duration::from_millis(rng.random_range(50..400))).await;
        server.kill_and_restart();
        let c = server.connect().await;
        let n = check_counter(&c, cycle).await;
        let t = check_auction(&c, cycle).await;
        assert!(n >= counted, "cycle {cycle}: the counter went back");
        assert!(t >= ticks, "cycle {cycle}: the auction went back");
        (counted, ticks) = (n, t);
        // The materialized view over a subsource equals its query (one
        // query: one time for both while the source ticks).
        let differ = rows(
            &c,
            "SELECT count(*), (SELECT count(*) FROM bid_totals) FROM bid_totals v \
             FULL JOIN (SELECT auction_id, count(*) AS n, sum(amount) AS total FROM bids GROUP BY auction_id) a \
             ON v.auction_id = a.auction_id AND v.n = a.n AND v.total = a.total \
             WHERE v.auction_id IS NULL OR a.auction_id IS NULL",
        )
        .await;
        assert_eq!(
            differ[0][0].as_deref(),
            Some("0"),
            "cycle {cycle}: {differ:?}"
        );
        assert_ne!(
            differ[0][1].as_deref(),
            Some("0"),
            "cycle {cycle}: {differ:?}"
        );
    }
    // Ingestion goes on after the last restart, and says so.
    let c = server.connect().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let n = check_counter(&c, 99).await;
        let status = rows(
            &c,
            "SELECT status, error FROM freshet_internal.source_statuses WHERE name = 'freshet.public.k'",
        )
        .await;
        if n > counted && status[0][0].as_deref() == Some("running") {
            assert_eq!(status[0][1], None);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the counter stopped: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

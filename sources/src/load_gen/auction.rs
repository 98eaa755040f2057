//! `AUCTION`, shaped like Materialize's: a snapshot of organizations,
//! users and accounts, then one row per tick: an auction (ending 10 s
//! after it starts), then each of its 2 to 9 bids (one second apart), then
//! the next auction. Nothing is ever retracted.
//!
//! Tick `k` is found without replaying earlier ticks' output: where each
//! auction starts depends only on the bid counts of earlier auctions,
//! which are drawn from per-auction random streams and remembered.

use freshet_catalog::LoadGeneratorSpec;
use freshet_repr::{PgType, RelationDesc};
use parking_lot::Mutex;
use rand::Rng;

use super::names::{COMPANIES, ITEMS, person_name};
use super::{Generator, Schedule, column, rng_for, ts};
use crate::datum::{Datum, Update};

const ORGANIZATIONS: u64 = 75;
const USERS: u64 = 4_076;
/// How long an auction runs.
const AUCTION_MS: u64 = 10_000;

pub(super) fn relations() -> Vec<(String, RelationDesc)> {
    let id = |name: &str| column(name, PgType::Int8, false);
    vec![
        (
            "organizations".into(),
            RelationDesc::new(vec![id("id"), column("name", PgType::Text, false)]),
        ),
        (
            "users".into(),
            RelationDesc::new(vec![
                id("id"),
                id("org_id"),
                column("name", PgType::Text, false),
            ]),
        ),
        (
            "accounts".into(),
            RelationDesc::new(vec![id("id"), id("org_id"), id("balance")]),
        ),
        (
            "auctions".into(),
            RelationDesc::new(vec![
                id("id"),
                id("seller"),
                column("item", PgType::Text, false),
                column("end_time", PgType::TimestampTz, false),
            ]),
        ),
        (
            "bids".into(),
            RelationDesc::new(vec![
                id("id"),
                id("buyer"),
                id("auction_id"),
                column("amount", PgType::Int4, false),
                column("bid_time", PgType::TimestampTz, false),
            ]),
        ),
    ]
}

pub(super) struct Auction {
    seed: u64,
    schedule: Schedule,
    /// The tick each auction (1-based, at index `id - 1`) starts at, as
    /// far as computed.
    starts: Mutex<Vec<u64>>,
}

/// One auction's random choices.
struct Drawn {
    seller: u64,
    item: &'static str,
    bids: u64,
}

impl Auction {
    pub(super) fn new(spec: &LoadGeneratorSpec, schedule: Schedule) -> Self {
        Auction {
            seed: spec.seed,
            schedule,
            starts: Mutex::new(vec![1]),
        }
    }

    fn drawn(&self, id: u64) -> Drawn {
        let mut rng = rng_for(self.seed, &[1, id]);
        Drawn {
            seller: rng.random_range(1..=USERS),
            item: ITEMS[rng.random_range(0..ITEMS.len())],
            bids: rng.random_range(2..=9),
        }
    }

    /// The auction running at tick `k` (≥ 1) and its start tick.
    fn auction_at(&self, k: u64) -> (u64, u64) {
        let mut starts = self.starts.lock();
        loop {
            let last = starts.len() as u64;
            let last_start = starts[starts.len() - 1];
            let next_start = last_start + 1 + self.drawn(last).bids;
            if k < next_start {
                // The start ticks increase: find the latest start ≤ k.
                let i = starts.partition_point(|s| *s <= k);
                return (i as u64, starts[i - 1]);
            }
            starts.push(next_start);
        }
    }
}

impl Generator for Auction {
    fn tick(&self, tick: u64, out: &mut [Vec<Update>]) {
        if tick == 0 {
            for org in 1..=ORGANIZATIONS {
                let name = COMPANIES[((org - 1) % COMPANIES.len() as u64) as usize];
                let name = if org as usize > COMPANIES.len() {
                    format!("{name} {}", (org - 1) / COMPANIES.len() as u64 + 1)
                } else {
                    name.to_string()
                };
                out[0].push((vec![Datum::Int64(org as i64), Datum::Text(name)], 1));
                out[2].push((
                    vec![
                        Datum::Int64(org as i64 + 42),
                        Datum::Int64(org as i64),
                        Datum::Int64(10_000),
                    ],
                    1,
                ));
            }
            for user in 1..=USERS {
                out[1].push((
                    vec![
                        Datum::Int64(user as i64),
                        Datum::Int64(((user - 1) % ORGANIZATIONS + 1) as i64),
                        Datum::Text(person_name(user)),
                    ],
                    1,
                ));
            }
            return;
        }
        let (id, start) = self.auction_at(tick);
        let drawn = self.drawn(id);
        let started = self.schedule.at(start);
        if tick == start {
            out[3].push((
                vec![
                    Datum::Int64(id as i64),
                    Datum::Int64(drawn.seller as i64),
                    Datum::Text(drawn.item.to_string()),
                    ts(started + AUCTION_MS),
                ],
                1,
            ));
        } else {
            let i = tick - start - 1;
            let mut rng = rng_for(self.seed, &[2, id, i]);
            out[4].push((
                vec![
                    Datum::Int64((id * 10 + i) as i64),
                    Datum::Int64(rng.random_range(1..=USERS) as i64),
                    Datum::Int64(id as i64),
                    Datum::Int32(rng.random_range(1..=99)),
                    ts(started + i * 1_000),
                ],
                1,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generator() -> Auction {
        Auction::new(
            &LoadGeneratorSpec::new(freshet_catalog::LoadGenerator::Auction),
            Schedule {
                created_at: 1_000_000,
                as_of: 0,
                tick_ms: Some(1_000),
            },
        )
    }

    #[test]
    fn each_auction_is_followed_by_two_to_nine_bids_before_the_end() {
        let g = generator();
        let mut out = vec![Vec::new(); 5];
        for k in 0..500 {
            g.tick(k, &mut out);
        }
        assert_eq!(out[0].len(), 75);
        assert_eq!(out[1].len(), 4_076);
        let auctions = &out[3];
        let bids = &out[4];
        assert!(auctions.len() > 40, "{}", auctions.len());
        for (auction, _) in auctions {
            let Datum::Int64(id) = auction[0] else {
                panic!()
            };
            let Datum::Timestamp(end) = auction[3] else {
                panic!()
            };
            let mine: Vec<_> = bids
                .iter()
                .filter(|(b, _)| b[2] == Datum::Int64(id))
                .collect();
            if id < auctions.len() as i64 {
                assert!(
                    (2..=9).contains(&mine.len()),
                    "auction {id}: {}",
                    mine.len()
                );
            }
            for (b, _) in mine {
                let Datum::Timestamp(at) = b[4] else { panic!() };
                assert!(at < end);
            }
        }
        // Any tick alone gives what it gave in sequence.
        let fresh = generator();
        let mut again = vec![Vec::new(); 5];
        fresh.tick(321, &mut again);
        let mut seq = vec![Vec::new(); 5];
        g.tick(321, &mut seq);
        assert_eq!(again, seq);
    }
}

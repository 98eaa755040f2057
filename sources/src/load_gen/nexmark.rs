//! `NEXMARK`: the persons, auctions and bids of the Nexmark benchmark, in
//! its 1 : 3 : 46 mix, made by the `nexmark` crate (RisingWave's port of
//! the benchmark's generator), with the columns RisingWave and Flink give
//! them. `EVENTS PER SECOND` (default 1000) sets the rate, spread over
//! ticks of `TICK INTERVAL` (default 100 ms); `TOTAL EVENTS` ends it.
//!
//! Nexmark makes event `n` from a random stream seeded by `n` and dates it
//! `base + n / rate`; with the base fixed at the source's creation, every
//! event is the same after a restart. (So the generator takes no `SEED`.)

use freshet_catalog::LoadGeneratorSpec;
use freshet_repr::{PgType, RelationDesc};
use nexmark::EventGenerator;
use nexmark::config::{NexmarkConfig, RateShape};
use nexmark::event::Event;

use super::{Generator, Schedule, column, ts};
use crate::datum::{Datum, Update};

const DEFAULT_EVENTS_PER_SECOND: u64 = 1_000;

pub(super) fn relations() -> Vec<(String, RelationDesc)> {
    let int = |n: &str| column(n, PgType::Int8, false);
    let varchar = |n: &str| column(n, PgType::Varchar { max_len: None }, false);
    let time = |n: &str| column(n, PgType::Timestamp, false);
    vec![
        (
            "person".into(),
            RelationDesc::new(vec![
                int("id"),
                varchar("name"),
                varchar("email_address"),
                varchar("credit_card"),
                varchar("city"),
                varchar("state"),
                time("date_time"),
                varchar("extra"),
            ]),
        ),
        (
            "auction".into(),
            RelationDesc::new(vec![
                int("id"),
                varchar("item_name"),
                varchar("description"),
                int("initial_bid"),
                int("reserve"),
                time("date_time"),
                time("expires"),
                int("seller"),
                int("category"),
                varchar("extra"),
            ]),
        ),
        (
            "bid".into(),
            RelationDesc::new(vec![
                int("auction"),
                int("bidder"),
                int("price"),
                varchar("channel"),
                varchar("url"),
                time("date_time"),
                varchar("extra"),
            ]),
        ),
    ]
}

pub(super) struct Nexmark {
    events: EventGenerator,
    per_tick: u64,
    total: Option<u64>,
}

fn int(v: usize) -> Datum {
    Datum::Int64(i64::try_from(v).unwrap_or(i64::MAX))
}

impl Nexmark {
    pub(super) fn new(spec: &LoadGeneratorSpec, schedule: Schedule) -> Self {
        let rate = spec
            .events_per_second
            .unwrap_or(DEFAULT_EVENTS_PER_SECOND)
            .max(1);
        let tick_ms = schedule.tick_ms.unwrap_or(100).max(1);
        let per_tick = (rate.saturating_mul(tick_ms) / 1_000).max(1);
        // Tick k's events are dated in the tick interval before it is due.
        let base_time = schedule
            .created_at
            .saturating_sub(schedule.as_of.saturating_add(1).saturating_mul(tick_ms));
        let rate = usize::try_from(rate).unwrap_or(usize::MAX);
        let config = NexmarkConfig {
            base_time,
            rate_shape: RateShape::Square,
            first_rate: rate,
            next_rate: rate,
            ..NexmarkConfig::default()
        };
        Nexmark {
            events: EventGenerator::new(config),
            per_tick,
            total: spec.total_events,
        }
    }
}

impl Generator for Nexmark {
    fn tick(&self, tick: u64, out: &mut [Vec<Update>]) {
        let first = tick.saturating_mul(self.per_tick);
        let mut count = self.per_tick;
        if let Some(total) = self.total {
            count = count.min(total.saturating_sub(first));
        }
        let events = self.events.clone().with_offset(first);
        for event in events.take(usize::try_from(count).unwrap_or(usize::MAX)) {
            match event {
                Event::Person(p) => out[0].push((
                    vec![
                        int(p.id),
                        Datum::Text(p.name),
                        Datum::Text(p.email_address),
                        Datum::Text(p.credit_card),
                        Datum::Text(p.city),
                        Datum::Text(p.state),
                        ts(p.date_time),
                        Datum::Text(p.extra),
                    ],
                    1,
                )),
                Event::Auction(a) => out[1].push((
                    vec![
                        int(a.id),
                        Datum::Text(a.item_name),
                        Datum::Text(a.description),
                        int(a.initial_bid),
                        int(a.reserve),
                        ts(a.date_time),
                        ts(a.expires),
                        int(a.seller),
                        int(a.category),
                        Datum::Text(a.extra),
                    ],
                    1,
                )),
                Event::Bid(b) => out[2].push((
                    vec![
                        int(b.auction),
                        int(b.bidder),
                        int(b.price),
                        Datum::Text(b.channel),
                        Datum::Text(b.url),
                        ts(b.date_time),
                        Datum::Text(b.extra),
                    ],
                    1,
                )),
            }
        }
    }

    fn end(&self) -> Option<u64> {
        self.total.map(|t| t.div_ceil(self.per_tick))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_in_the_nexmark_mix_and_are_the_same_every_time() {
        let mut spec = LoadGeneratorSpec::new(freshet_catalog::LoadGenerator::Nexmark);
        spec.events_per_second = Some(5_000);
        spec.total_events = Some(1_234);
        let schedule = Schedule {
            created_at: 1_700_000_000_000,
            as_of: 0,
            tick_ms: Some(100),
        };
        let g = Nexmark::new(&spec, schedule);
        assert_eq!(g.end(), Some(3));
        let mut out = vec![Vec::new(); 3];
        for k in 0..3 {
            g.tick(k, &mut out);
        }
        let counts: Vec<usize> = out.iter().map(Vec::len).collect();
        assert_eq!(counts.iter().sum::<usize>(), 1_234);
        // 1 : 3 : 46 of every 50 events.
        assert!((24..=26).contains(&counts[0]), "{counts:?}");
        assert!((72..=76).contains(&counts[1]), "{counts:?}");
        let again = Nexmark::new(&spec, schedule);
        let mut second = vec![Vec::new(); 3];
        again.tick(1, &mut second);
        let mut first = vec![Vec::new(); 3];
        g.tick(1, &mut first);
        assert_eq!(first, second);
    }
}

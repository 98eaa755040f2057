//! `MARKETING`, shaped like Materialize's: 50 customers in the snapshot;
//! then per tick an impression (a tenth of them clicked 20 to 40 seconds
//! later), a lead with its conversion prediction, for some a coupon, and
//! the conversion of the previous tick's lead if it converts (the lead's
//! row is retracted and inserted again with `converted_at` and
//! `conversion_amount`).
//!
//! Tick `k`'s ids are `3k` (impression), `3k + 1` (lead) and `3k + 2`
//! (coupon), and its choices come from its own random stream, so any
//! earlier tick's lead can be made again to retract it.

use freshet_catalog::LoadGeneratorSpec;
use freshet_repr::{PgType, RelationDesc};
use rand::Rng;
use rand::rngs::StdRng;

use super::names::{FIRST_NAMES, LAST_NAMES};
use super::{Generator, Schedule, column, rng_for, ts};
use crate::datum::{Datum, Update};

const CUSTOMERS: u64 = 50;
const CAMPAIGNS: u64 = 20;

pub(super) fn relations() -> Vec<(String, RelationDesc)> {
    let id = |name: &str| column(name, PgType::Int8, false);
    let time = |name: &str| column(name, PgType::TimestampTz, false);
    vec![
        (
            "customers".into(),
            RelationDesc::new(vec![
                id("id"),
                column("email", PgType::Text, false),
                id("income"),
            ]),
        ),
        (
            "impressions".into(),
            RelationDesc::new(vec![
                id("id"),
                id("customer_id"),
                id("campaign_id"),
                time("impression_time"),
            ]),
        ),
        (
            "clicks".into(),
            RelationDesc::new(vec![id("impression_id"), time("click_time")]),
        ),
        (
            "leads".into(),
            RelationDesc::new(vec![
                id("id"),
                id("customer_id"),
                time("created_at"),
                column("converted_at", PgType::TimestampTz, true),
                column("conversion_amount", PgType::Int8, true),
            ]),
        ),
        (
            "coupons".into(),
            RelationDesc::new(vec![
                id("id"),
                id("lead_id"),
                time("created_at"),
                id("amount"),
            ]),
        ),
        (
            "conversion_predictions".into(),
            RelationDesc::new(vec![
                id("lead_id"),
                column("experiment_bucket", PgType::Text, false),
                time("predicted_at"),
                column("score", PgType::Float8, false),
            ]),
        ),
    ]
}

pub(super) struct Marketing {
    seed: u64,
    schedule: Schedule,
}

/// What tick `k` decides about its lead.
struct Lead {
    id: u64,
    customer: u64,
    created_at: u64,
    bucket: &'static str,
    score: f64,
    coupon: Option<i64>,
    /// When it converts (ms after creation) and for how much.
    conversion: Option<(u64, i64)>,
}

impl Marketing {
    pub(super) fn new(spec: &LoadGeneratorSpec, schedule: Schedule) -> Self {
        Marketing {
            seed: spec.seed,
            schedule,
        }
    }

    fn rng(&self, tick: u64, part: u64) -> StdRng {
        rng_for(self.seed, &[part, tick])
    }

    fn lead(&self, tick: u64) -> Lead {
        let mut rng = self.rng(tick, 2);
        let id = 3 * tick + 1;
        let customer = rng.random_range(0..CUSTOMERS);
        let score: f64 = rng.random();
        let bucket = if id % 10 <= 1 {
            "control"
        } else {
            "experiment"
        };
        let coupon =
            (bucket == "experiment" && score <= 0.5).then(|| rng.random_range(500i64..5000));
        let mut converted = rng.random::<f64>() < score;
        if !converted && coupon.is_some() {
            converted = rng.random::<f64>() < score;
        }
        let conversion =
            converted.then(|| (rng.random_range(1..30), rng.random_range(1000..25000)));
        Lead {
            id,
            customer,
            created_at: self.schedule.at(tick),
            bucket,
            score,
            coupon,
            conversion,
        }
    }

    fn lead_row(lead: &Lead, converted: bool) -> Vec<Datum> {
        let (converted_at, amount) = match lead.conversion {
            Some((after, amount)) if converted => {
                (ts(lead.created_at + after), Datum::Int64(amount))
            }
            _ => (Datum::Null, Datum::Null),
        };
        vec![
            Datum::Int64(lead.id as i64),
            Datum::Int64(lead.customer as i64),
            ts(lead.created_at),
            converted_at,
            amount,
        ]
    }
}

impl Generator for Marketing {
    fn tick(&self, tick: u64, out: &mut [Vec<Update>]) {
        if tick == 0 {
            let mut rng = self.rng(0, 0);
            for c in 0..CUSTOMERS {
                let first = FIRST_NAMES[(c % FIRST_NAMES.len() as u64) as usize];
                let last = LAST_NAMES[((c * 7) % LAST_NAMES.len() as u64) as usize];
                let email = format!("{}.{}@email.com", first.to_lowercase(), last.to_lowercase());
                out[0].push((
                    vec![
                        Datum::Int64(c as i64),
                        Datum::Text(email),
                        Datum::Int64(rng.random_range(5_000_000..10_000_000)),
                    ],
                    1,
                ));
            }
            return;
        }
        let now = self.schedule.at(tick);
        let mut rng = self.rng(tick, 1);
        let impression = 3 * tick;
        out[1].push((
            vec![
                Datum::Int64(impression as i64),
                Datum::Int64(rng.random_range(0..CUSTOMERS) as i64),
                Datum::Int64(rng.random_range(0..CAMPAIGNS) as i64),
                ts(now),
            ],
            1,
        ));
        if rng.random_range(0..10) == 0 {
            let later = rng.random_range(20_000..40_000);
            out[2].push((vec![Datum::Int64(impression as i64), ts(now + later)], 1));
        }
        let lead = self.lead(tick);
        out[3].push((Self::lead_row(&lead, false), 1));
        out[5].push((
            vec![
                Datum::Int64(lead.id as i64),
                Datum::Text(lead.bucket.into()),
                ts(now),
                Datum::Float64(lead.score),
            ],
            1,
        ));
        if let Some(amount) = lead.coupon {
            out[4].push((
                vec![
                    Datum::Int64((3 * tick + 2) as i64),
                    Datum::Int64(lead.id as i64),
                    ts(now),
                    Datum::Int64(amount),
                ],
                1,
            ));
        }
        // The previous tick's lead converts now, if it does.
        if tick >= 2 {
            let previous = self.lead(tick - 1);
            if previous.conversion.is_some() {
                out[3].push((Self::lead_row(&previous, false), -1));
                out[3].push((Self::lead_row(&previous, true), 1));
            }
        }
    }
}

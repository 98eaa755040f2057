//! The schema, the generated data and an in-memory model of the view.
//!
//! The benchmark keeps every order in memory and maintains the expected
//! contents of `region_stats` itself. "The change is visible" then means
//! "the view returns exactly the model's numbers", which detects a change
//! that is never applied or applied twice, and works without assuming
//! anything about how the server maintains the view.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::RangeInclusive;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::{Result, failed};

/// Rows in `customers` at every size.
pub const CUSTOMERS: i32 = 10_000;
/// Distinct `customers.region` values (`region = id % REGIONS`), so the
/// view has this many rows.
pub const REGIONS: i32 = 10;

/// Table definitions, identical on both systems. No keys or indexes: Freshet
/// has none yet, and giving only PostgreSQL an index would make the
/// single-row UPDATE/DELETE comparison meaningless.
pub const CREATE_TABLES: [&str; 2] = [
    "CREATE TABLE customers (id integer, name text, region integer)",
    "CREATE TABLE orders (id bigint, customer_id integer, amount numeric(12,2), status integer)",
];

/// The query of the view, identical on both systems.
pub const VIEW_QUERY: &str = "SELECT c.region, count(*) AS orders, sum(o.amount) AS revenue \
     FROM orders o JOIN customers c ON o.customer_id = c.id GROUP BY c.region";

/// One row of the view.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionStat {
    pub orders: i64,
    pub revenue_cents: i64,
}

/// View contents by region (regions without orders are absent, as in SQL).
pub type Stats = BTreeMap<i32, RegionStat>;

/// The single-row changes whose freshness is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    Insert,
    Update,
    Delete,
}

impl ChangeKind {
    pub const ALL: [ChangeKind; 3] = [ChangeKind::Insert, ChangeKind::Update, ChangeKind::Delete];

    pub fn name(self) -> &'static str {
        match self {
            ChangeKind::Insert => "INSERT",
            ChangeKind::Update => "UPDATE",
            ChangeKind::Delete => "DELETE",
        }
    }
}

/// A generated single-row write and the view row it affects.
pub struct Change {
    pub sql: String,
    pub region: i32,
}

#[derive(Clone, Copy)]
struct Order {
    customer_id: i32,
    amount_cents: i64,
}

/// Every order (index = id - 1; `None` = deleted) and the view it implies.
#[derive(Clone)]
pub struct Model {
    orders: Vec<Option<Order>>,
    live: usize,
    stats: [RegionStat; REGIONS as usize],
}

/// A size's initial data: the model and the COPY payloads for both tables.
pub struct Dataset {
    pub model: Model,
    pub customers_copy: Bytes,
    pub orders_copy: Bytes,
}

/// The region of a customer.
fn region_of(customer_id: i32) -> i32 {
    customer_id % REGIONS
}

/// `12.34` for 1234 cents, as COPY and SQL literals want it.
fn format_cents(cents: i64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// Generate `orders` orders deterministically from `seed`, so both systems
/// (and reruns) load identical data.
pub fn generate(orders: usize, seed: u64) -> Dataset {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut customers = String::with_capacity(CUSTOMERS as usize * 24);
    for id in 1..=CUSTOMERS {
        let _ = writeln!(customers, "{id}\tcustomer_{id}\t{}", region_of(id));
    }
    let mut model = Model {
        orders: Vec::with_capacity(orders),
        live: 0,
        stats: [RegionStat::default(); REGIONS as usize],
    };
    let mut copy = String::with_capacity(orders * 32);
    for _ in 0..orders {
        model.push_random(&mut rng, &mut copy);
    }
    Dataset {
        model,
        customers_copy: Bytes::from(customers),
        orders_copy: Bytes::from(copy),
    }
}

impl Model {
    /// Append a random new order and its COPY text line.
    fn push_random(&mut self, rng: &mut StdRng, copy: &mut String) -> i32 {
        let id = self.orders.len() as i64 + 1;
        let order = Order {
            customer_id: rng.random_range(1..=CUSTOMERS),
            amount_cents: rng.random_range(1..=100_000),
        };
        let status: i32 = rng.random_range(0..5);
        let _ = writeln!(
            copy,
            "{id}\t{}\t{}\t{status}",
            order.customer_id,
            format_cents(order.amount_cents)
        );
        self.orders.push(Some(order));
        self.account(order, 1);
        region_of(order.customer_id)
    }

    /// Add (`sign` 1) or remove (`sign` -1) an order's contribution.
    fn account(&mut self, order: Order, sign: i64) {
        let stat = &mut self.stats[region_of(order.customer_id) as usize];
        stat.orders += sign;
        stat.revenue_cents += sign * order.amount_cents;
        self.live = (self.live as i64 + sign) as usize;
    }

    /// The id (1-based) of a random order that still exists.
    fn random_live(&self, rng: &mut StdRng) -> Result<usize> {
        if self.live == 0 {
            return failed("no orders left to update or delete; use larger --sizes");
        }
        loop {
            let index = rng.random_range(0..self.orders.len());
            if self.orders[index].is_some() {
                return Ok(index + 1);
            }
        }
    }

    /// Generate one single-row write of `kind` and apply it to the model.
    pub fn change(&mut self, kind: ChangeKind, rng: &mut StdRng) -> Result<Change> {
        match kind {
            ChangeKind::Insert => {
                let mut line = String::new();
                let region = self.push_random(rng, &mut line);
                let values = line.trim_end().replace('\t', ", ");
                Ok(Change {
                    sql: format!("INSERT INTO orders VALUES ({values})"),
                    region,
                })
            }
            ChangeKind::Update => self.update_random(rng),
            ChangeKind::Delete => self.delete_random(rng),
        }
    }

    /// Change the amount of a random order to a different random amount
    /// (an unchanged amount would never become "visible").
    fn update_random(&mut self, rng: &mut StdRng) -> Result<Change> {
        let id = self.random_live(rng)?;
        let old = self.orders[id - 1].expect("random_live returns live orders");
        let mut new = old;
        while new.amount_cents == old.amount_cents {
            new.amount_cents = rng.random_range(1..=100_000);
        }
        self.account(old, -1);
        self.account(new, 1);
        self.orders[id - 1] = Some(new);
        Ok(Change {
            sql: format!(
                "UPDATE orders SET amount = {} WHERE id = {id}",
                format_cents(new.amount_cents)
            ),
            region: region_of(old.customer_id),
        })
    }

    fn delete_random(&mut self, rng: &mut StdRng) -> Result<Change> {
        let id = self.random_live(rng)?;
        let old = self.orders[id - 1]
            .take()
            .expect("random_live returns live orders");
        self.account(old, -1);
        Ok(Change {
            sql: format!("DELETE FROM orders WHERE id = {id}"),
            region: region_of(old.customer_id),
        })
    }

    /// `n` new orders with consecutive ids: their COPY text and id range.
    pub fn insert_batch(&mut self, rng: &mut StdRng, n: usize) -> (Bytes, RangeInclusive<i64>) {
        let first = self.orders.len() as i64 + 1;
        let mut copy = String::with_capacity(n * 32);
        for _ in 0..n {
            self.push_random(rng, &mut copy);
        }
        (Bytes::from(copy), first..=self.orders.len() as i64)
    }

    /// Delete every order with an id in `ids`; returns the statement and
    /// how many orders it deletes.
    pub fn delete_range(&mut self, ids: RangeInclusive<i64>) -> (String, usize) {
        let mut deleted = 0;
        for id in ids.clone() {
            if let Some(old) = self.orders[id as usize - 1].take() {
                self.account(old, -1);
                deleted += 1;
            }
        }
        let sql = format!(
            "DELETE FROM orders WHERE id BETWEEN {} AND {}",
            ids.start(),
            ids.end()
        );
        (sql, deleted)
    }

    /// The expected contents of the whole view.
    pub fn stats(&self) -> Stats {
        (0..REGIONS)
            .map(|r| (r, self.stats[r as usize]))
            .filter(|(_, s)| s.orders > 0)
            .collect()
    }

    /// The expected view row of one region, as a one-entry (or empty) map.
    pub fn region_stats(&self, region: i32) -> Stats {
        self.stats()
            .into_iter()
            .filter(|(r, _)| *r == region)
            .collect()
    }
}

/// Parse `(region, orders, revenue)` rows into [`Stats`].
pub fn parse_stats(rows: &[Vec<Option<String>>]) -> Result<Stats> {
    let mut stats = Stats::new();
    for row in rows {
        let field = |i: usize| row.get(i).and_then(|v| v.as_deref()).unwrap_or("NULL");
        let parsed = (
            field(0).parse::<i32>().ok(),
            field(1).parse::<i64>().ok(),
            parse_cents(field(2)),
        );
        let (Some(region), Some(orders), Some(revenue_cents)) = parsed else {
            return failed(format!("unexpected region_stats row {row:?}"));
        };
        stats.insert(
            region,
            RegionStat {
                orders,
                revenue_cents,
            },
        );
    }
    Ok(stats)
}

/// Cents of a decimal text such as `-12.3`, `12.34` or `12.340000`; `None`
/// for anything that is not a whole number of cents.
pub fn parse_cents(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(int) || !all_digits(frac) || (int.is_empty() && frac.is_empty()) {
        return None;
    }
    if frac.len() > 2 && frac[2..].bytes().any(|b| b != b'0') {
        return None;
    }
    let whole: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let frac2: String = frac.chars().chain("00".chars()).take(2).collect();
    let cents = whole
        .checked_mul(100)?
        .checked_add(frac2.parse::<i64>().ok()?)?;
    Some(if negative { -cents } else { cents })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cents() {
        assert_eq!(parse_cents("12.34"), Some(1234));
        assert_eq!(parse_cents("12.3"), Some(1230));
        assert_eq!(parse_cents("12"), Some(1200));
        assert_eq!(parse_cents("-0.05"), Some(-5));
        assert_eq!(parse_cents("12.340000"), Some(1234));
        assert_eq!(parse_cents(".5"), Some(50));
        assert_eq!(parse_cents("12.345"), None);
        assert_eq!(parse_cents("NULL"), None);
        assert_eq!(parse_cents(""), None);
        assert_eq!(format_cents(1205), "12.05");
    }

    #[test]
    fn model_tracks_changes() {
        let mut data = generate(1000, 7);
        let total = |m: &Model| m.stats().values().map(|s| s.orders).sum::<i64>();
        assert_eq!(total(&data.model), 1000);
        let mut rng = StdRng::seed_from_u64(1);
        data.model.change(ChangeKind::Insert, &mut rng).unwrap();
        data.model.change(ChangeKind::Update, &mut rng).unwrap();
        data.model.change(ChangeKind::Delete, &mut rng).unwrap();
        assert_eq!(total(&data.model), 1000);
        let (copy, ids) = data.model.insert_batch(&mut rng, 50);
        assert_eq!(copy.iter().filter(|&&b| b == b'\n').count(), 50);
        assert_eq!(ids, 1002..=1051);
        assert_eq!(data.model.delete_range(ids).1, 50);
        assert_eq!(total(&data.model), 1000);
    }
}

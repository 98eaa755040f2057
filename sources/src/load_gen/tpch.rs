//! `TPCH`: the eight TPC-H relations at `SCALE FACTOR`, as the `tpchgen`
//! crate makes them (byte for byte what TPC-H's `dbgen` makes), in the
//! snapshot. With a `TICK INTERVAL`, each tick then changes one order and
//! its lineitems (a new customer and new quantities, prices following):
//! the old rows are retracted and the new ones inserted.
//!
//! The orders that change are the first thousand, in turn; version `v` of
//! an order is a function of the seed, the order and `v` (version 0 is
//! TPC-H's), so a tick makes the version it replaces again to retract it.

use freshet_catalog::LoadGeneratorSpec;
use freshet_repr::{PgType, RelationDesc};
use rand::Rng;
use tpchgen::generators::{
    CustomerGenerator, LineItem, LineItemGenerator, NationGenerator, Order, OrderGenerator,
    PartGenerator, PartSuppGenerator, RegionGenerator, SupplierGenerator,
};

use super::{Generator, column, rng_for};
use crate::datum::{Datum, Update};
use crate::error::{Result, SourceError};

/// How many of the first orders take turns changing.
const CHANGING_ORDERS: usize = 1_000;

fn money() -> PgType {
    PgType::Numeric {
        typmod: Some((15, 2)),
    }
}

pub(super) fn relations() -> Vec<(String, RelationDesc)> {
    let key = |n: &str| column(n, PgType::Int8, false);
    let text = |n: &str| column(n, PgType::Text, false);
    let int = |n: &str| column(n, PgType::Int4, false);
    let dec = |n: &str| column(n, money(), false);
    let date = |n: &str| column(n, PgType::Date, false);
    vec![
        (
            "supplier".into(),
            RelationDesc::new(vec![
                key("s_suppkey"),
                text("s_name"),
                text("s_address"),
                key("s_nationkey"),
                text("s_phone"),
                dec("s_acctbal"),
                text("s_comment"),
            ]),
        ),
        (
            "part".into(),
            RelationDesc::new(vec![
                key("p_partkey"),
                text("p_name"),
                text("p_mfgr"),
                text("p_brand"),
                text("p_type"),
                int("p_size"),
                text("p_container"),
                dec("p_retailprice"),
                text("p_comment"),
            ]),
        ),
        (
            "partsupp".into(),
            RelationDesc::new(vec![
                key("ps_partkey"),
                key("ps_suppkey"),
                int("ps_availqty"),
                dec("ps_supplycost"),
                text("ps_comment"),
            ]),
        ),
        (
            "customer".into(),
            RelationDesc::new(vec![
                key("c_custkey"),
                text("c_name"),
                text("c_address"),
                key("c_nationkey"),
                text("c_phone"),
                dec("c_acctbal"),
                text("c_mktsegment"),
                text("c_comment"),
            ]),
        ),
        (
            "orders".into(),
            RelationDesc::new(vec![
                key("o_orderkey"),
                key("o_custkey"),
                text("o_orderstatus"),
                dec("o_totalprice"),
                date("o_orderdate"),
                text("o_orderpriority"),
                text("o_clerk"),
                int("o_shippriority"),
                text("o_comment"),
            ]),
        ),
        (
            "lineitem".into(),
            RelationDesc::new(vec![
                key("l_orderkey"),
                key("l_partkey"),
                key("l_suppkey"),
                int("l_linenumber"),
                dec("l_quantity"),
                dec("l_extendedprice"),
                dec("l_discount"),
                dec("l_tax"),
                text("l_returnflag"),
                text("l_linestatus"),
                date("l_shipdate"),
                date("l_commitdate"),
                date("l_receiptdate"),
                text("l_shipinstruct"),
                text("l_shipmode"),
                text("l_comment"),
            ]),
        ),
        (
            "nation".into(),
            RelationDesc::new(vec![
                key("n_nationkey"),
                text("n_name"),
                key("n_regionkey"),
                text("n_comment"),
            ]),
        ),
        (
            "region".into(),
            RelationDesc::new(vec![key("r_regionkey"), text("r_name"), text("r_comment")]),
        ),
    ]
}

// Output positions, in the order of `relations`.
const SUPPLIER: usize = 0;
const PART: usize = 1;
const PARTSUPP: usize = 2;
const CUSTOMER: usize = 3;
const ORDERS: usize = 4;
const LINEITEM: usize = 5;
const NATION: usize = 6;
const REGION: usize = 7;

fn text(v: impl ToString) -> Datum {
    Datum::Text(v.to_string())
}

fn cents(v: i64) -> Datum {
    Datum::Numeric(i128::from(v))
}

/// One of the orders that change, as TPC-H made it.
struct ChangingOrder {
    row: Vec<Datum>,
    lines: Vec<Line>,
}

/// A lineitem's row and the numbers a new version recomputes.
struct Line {
    row: Vec<Datum>,
    price: i64,
    discount: i64,
    tax: i64,
}

pub(super) struct Tpch {
    scale_factor: f64,
    seed: u64,
    customers: i64,
    changing: Vec<ChangingOrder>,
}

fn order_row(o: &Order) -> Vec<Datum> {
    vec![
        Datum::Int64(o.o_orderkey),
        Datum::Int64(o.o_custkey),
        text(o.o_orderstatus.as_str()),
        cents(o.o_totalprice.0),
        Datum::Date(o.o_orderdate.to_unix_epoch()),
        text(o.o_orderpriority),
        text(o.o_clerk),
        Datum::Int32(o.o_shippriority),
        text(o.o_comment),
    ]
}

fn line(l: &LineItem) -> Line {
    Line {
        row: vec![
            Datum::Int64(l.l_orderkey),
            Datum::Int64(l.l_partkey),
            Datum::Int64(l.l_suppkey),
            Datum::Int32(l.l_linenumber),
            cents(l.l_quantity * 100),
            cents(l.l_extendedprice.0),
            cents(l.l_discount.0),
            cents(l.l_tax.0),
            text(l.l_returnflag),
            text(l.l_linestatus),
            Datum::Date(l.l_shipdate.to_unix_epoch()),
            Datum::Date(l.l_commitdate.to_unix_epoch()),
            Datum::Date(l.l_receiptdate.to_unix_epoch()),
            text(l.l_shipinstruct),
            text(l.l_shipmode),
            text(l.l_comment),
        ],
        price: l.l_extendedprice.0 / l.l_quantity.max(1),
        discount: l.l_discount.0,
        tax: l.l_tax.0,
    }
}

impl Tpch {
    pub(super) fn new(spec: &LoadGeneratorSpec) -> Result<Self> {
        let scale_factor: f64 = spec
            .scale_factor
            .as_deref()
            .unwrap_or("0.01")
            .parse()
            .map_err(|_| SourceError::Invalid("invalid SCALE FACTOR".into()))?;
        let orders: Vec<Order> = OrderGenerator::new(scale_factor, 1, 1)
            .iter()
            .take(CHANGING_ORDERS)
            .collect();
        let last_key = orders.last().map_or(0, |o| o.o_orderkey);
        let mut lines: Vec<Line> = LineItemGenerator::new(scale_factor, 1, 1)
            .iter()
            .take_while(|l| l.l_orderkey <= last_key)
            .map(|l| line(&l))
            .collect();
        let changing = orders
            .iter()
            .map(|o| {
                let key = Datum::Int64(o.o_orderkey);
                let split = lines.iter().take_while(|l| l.row[0] == key).count();
                ChangingOrder {
                    row: order_row(o),
                    lines: lines.drain(..split).collect(),
                }
            })
            .collect();
        let customers = CustomerGenerator::new(scale_factor, 1, 1).iter().count() as i64;
        Ok(Tpch {
            scale_factor,
            seed: spec.seed,
            customers,
            changing,
        })
    }

    /// Version `version` of changing order `i`: its row and its lines.
    fn version(&self, i: usize, version: u64) -> (Vec<Datum>, Vec<Vec<Datum>>) {
        let order = &self.changing[i];
        if version == 0 {
            return (
                order.row.clone(),
                order.lines.iter().map(|l| l.row.clone()).collect(),
            );
        }
        let mut rng = rng_for(self.seed, &[i as u64, version]);
        let mut total: i128 = 0;
        let lines = order
            .lines
            .iter()
            .map(|l| {
                let quantity: i64 = rng.random_range(1..=50);
                let extended = l.price * quantity;
                // Cents of extended · (1 + tax) · (1 - discount), rounded.
                let charged =
                    i128::from(extended) * i128::from(100 + l.tax) * i128::from(100 - l.discount);
                total += (charged + 5_000) / 10_000;
                let mut row = l.row.clone();
                row[4] = cents(quantity * 100);
                row[5] = cents(extended);
                row
            })
            .collect();
        let mut row = order.row.clone();
        row[1] = Datum::Int64(rng.random_range(1..=self.customers.max(1)));
        row[3] = Datum::Numeric(total);
        (row, lines)
    }

    fn snapshot(&self, out: &mut [Vec<Update>]) {
        let sf = self.scale_factor;
        for s in SupplierGenerator::new(sf, 1, 1).iter() {
            out[SUPPLIER].push((
                vec![
                    Datum::Int64(s.s_suppkey),
                    text(s.s_name),
                    text(&s.s_address),
                    Datum::Int64(s.s_nationkey),
                    text(&s.s_phone),
                    cents(s.s_acctbal.0),
                    text(&s.s_comment),
                ],
                1,
            ));
        }
        for p in PartGenerator::new(sf, 1, 1).iter() {
            out[PART].push((
                vec![
                    Datum::Int64(p.p_partkey),
                    text(&p.p_name),
                    text(p.p_mfgr),
                    text(p.p_brand),
                    text(p.p_type),
                    Datum::Int32(p.p_size),
                    text(p.p_container),
                    cents(p.p_retailprice.0),
                    text(p.p_comment),
                ],
                1,
            ));
        }
        for ps in PartSuppGenerator::new(sf, 1, 1).iter() {
            out[PARTSUPP].push((
                vec![
                    Datum::Int64(ps.ps_partkey),
                    Datum::Int64(ps.ps_suppkey),
                    Datum::Int32(ps.ps_availqty),
                    cents(ps.ps_supplycost.0),
                    text(ps.ps_comment),
                ],
                1,
            ));
        }
        for c in CustomerGenerator::new(sf, 1, 1).iter() {
            out[CUSTOMER].push((
                vec![
                    Datum::Int64(c.c_custkey),
                    text(c.c_name),
                    text(&c.c_address),
                    Datum::Int64(c.c_nationkey),
                    text(&c.c_phone),
                    cents(c.c_acctbal.0),
                    text(c.c_mktsegment),
                    text(c.c_comment),
                ],
                1,
            ));
        }
        for o in OrderGenerator::new(sf, 1, 1).iter() {
            out[ORDERS].push((order_row(&o), 1));
        }
        for l in LineItemGenerator::new(sf, 1, 1).iter() {
            out[LINEITEM].push((line(&l).row, 1));
        }
        for n in NationGenerator::new(sf, 1, 1).iter() {
            out[NATION].push((
                vec![
                    Datum::Int64(n.n_nationkey),
                    text(n.n_name),
                    Datum::Int64(n.n_regionkey),
                    text(n.n_comment),
                ],
                1,
            ));
        }
        for r in RegionGenerator::new(sf, 1, 1).iter() {
            out[REGION].push((
                vec![
                    Datum::Int64(r.r_regionkey),
                    text(r.r_name),
                    text(r.r_comment),
                ],
                1,
            ));
        }
    }
}

impl Generator for Tpch {
    fn tick(&self, tick: u64, out: &mut [Vec<Update>]) {
        if tick == 0 {
            self.snapshot(out);
            return;
        }
        if self.changing.is_empty() {
            return;
        }
        let n = self.changing.len() as u64;
        let i = ((tick - 1) % n) as usize;
        let version = (tick - 1) / n + 1;
        let (old_order, old_lines) = self.version(i, version - 1);
        let (new_order, new_lines) = self.version(i, version);
        out[LINEITEM].extend(old_lines.into_iter().map(|r| (r, -1)));
        out[LINEITEM].extend(new_lines.into_iter().map(|r| (r, 1)));
        out[ORDERS].push((old_order, -1));
        out[ORDERS].push((new_order, 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_retracts_exactly_the_version_it_replaces() {
        let mut spec = LoadGeneratorSpec::new(freshet_catalog::LoadGenerator::Tpch);
        spec.scale_factor = Some("0.001".into());
        let g = Tpch::new(&spec).unwrap();
        let mut out = vec![Vec::new(); 8];
        g.tick(0, &mut out);
        assert_eq!(out[NATION].len(), 25);
        assert_eq!(out[REGION].len(), 5);
        assert_eq!(out[ORDERS].len(), 1_500);
        let n = g.changing.len() as u64;
        // Two rounds over the changing orders: everything nets to one
        // version per order, never a negative count.
        for k in 1..=2 * n {
            g.tick(k, &mut out);
        }
        let mut counts = std::collections::HashMap::new();
        for (row, diff) in &out[ORDERS] {
            *counts.entry(format!("{row:?}")).or_insert(0i64) += diff;
        }
        assert!(counts.values().all(|c| *c == 0 || *c == 1));
        assert_eq!(counts.values().sum::<i64>(), 1_500);
    }
}

//! `COUNTER`: tick `k` inserts `k + 1`; with `MAX CARDINALITY n` it also
//! retracts the value that falls out of the newest `n`.

use freshet_catalog::LoadGeneratorSpec;
use freshet_repr::{PgType, RelationDesc};

use super::{Generator, column};
use crate::datum::{Datum, Update};

pub(super) fn relations() -> Vec<(String, RelationDesc)> {
    vec![(
        "counter".into(),
        RelationDesc::new(vec![column("counter", PgType::Int8, false)]),
    )]
}

pub(super) struct Counter {
    max_cardinality: Option<u64>,
}

impl Counter {
    pub(super) fn new(spec: &LoadGeneratorSpec) -> Self {
        Counter {
            max_cardinality: spec.max_cardinality,
        }
    }
}

fn value(n: u64) -> Datum {
    Datum::Int64(i64::try_from(n).unwrap_or(i64::MAX))
}

impl Generator for Counter {
    fn tick(&self, tick: u64, out: &mut [Vec<Update>]) {
        let v = tick + 1;
        out[0].push((vec![value(v)], 1));
        if let Some(max) = self.max_cardinality
            && v > max
        {
            out[0].push((vec![value(v - max)], -1));
        }
    }
}

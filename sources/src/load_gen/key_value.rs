//! `KEY VALUE`: `KEYS` keys spread over `PARTITIONS` (key `k` is in
//! partition `k % PARTITIONS`), each holding a `VALUE SIZE`-byte value.
//! The snapshot holds every key's value after `SNAPSHOT ROUNDS` rounds;
//! each later tick gives `BATCH SIZE` keys of every partition a new value
//! (the old one is retracted), walking each partition's keys in order.
//!
//! The relation holds each key's current value, as Materialize's does
//! under `ENVELOPE UPSERT`. A value is a function of the seed, the key and
//! its round, so an old value is made again to retract it.

use freshet_catalog::LoadGeneratorSpec;
use freshet_repr::{PgType, RelationDesc};
use rand::RngCore;

use super::{Generator, column, rng_for};
use crate::datum::{Datum, Update};

pub(super) fn relations() -> Vec<(String, RelationDesc)> {
    vec![(
        "key_value".into(),
        RelationDesc::new(vec![
            column("key", PgType::Int8, false),
            column("partition", PgType::Int8, false),
            column("value", PgType::Bytea, false),
        ]),
    )]
}

pub(super) struct KeyValue {
    seed: u64,
    keys: u64,
    partitions: u64,
    batch: u64,
    value_size: usize,
    rounds: u64,
}

impl KeyValue {
    pub(super) fn new(spec: &LoadGeneratorSpec) -> Self {
        KeyValue {
            seed: spec.seed,
            keys: spec.keys.unwrap_or(1).max(1),
            partitions: spec.partitions.unwrap_or(1).max(1),
            batch: spec.batch_size.unwrap_or(1).max(1),
            value_size: usize::try_from(spec.value_size.unwrap_or(1)).unwrap_or(1),
            rounds: spec.snapshot_rounds.unwrap_or(1).max(1),
        }
    }

    fn row(&self, key: u64, round: u64) -> Vec<Datum> {
        let mut value = vec![0u8; self.value_size];
        rng_for(self.seed, &[key, round]).fill_bytes(&mut value);
        vec![
            Datum::Int64(key as i64),
            Datum::Int64((key % self.partitions) as i64),
            Datum::Bytes(value),
        ]
    }
}

impl Generator for KeyValue {
    fn tick(&self, tick: u64, out: &mut [Vec<Update>]) {
        if tick == 0 {
            for key in 0..self.keys {
                out[0].push((self.row(key, self.rounds - 1), 1));
            }
            return;
        }
        let per_partition = self.keys / self.partitions;
        let batches = (per_partition / self.batch).max(1);
        let update = tick - 1;
        let round = self.rounds + update / batches;
        let first = (update % batches) * self.batch;
        for partition in 0..self.partitions {
            for j in first..first + self.batch {
                let key = partition + self.partitions * j;
                out[0].push((self.row(key, round - 1), -1));
                out[0].push((self.row(key, round), 1));
            }
        }
    }
}

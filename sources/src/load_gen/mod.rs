//! Load generators: sources whose data Freshet makes up, deterministically.
//!
//! A generator is a pure function of its options, the source's creation
//! time and a tick number: tick `k` is due at `created_at + (k - AS OF) *
//! TICK INTERVAL`, and what it inserts and retracts depends on nothing
//! else (its random choices come from a generator seeded by `SEED` and
//! `k`). So the progress relation needs to record only the next tick
//! (`offset`): after a restart the generator goes on from there, and a
//! retraction always matches the row inserted earlier. Ticks that fell
//! due while the server was down are made up at once (several per append)
//! until the generator has caught up with its schedule.
//!
//! The first append (the *snapshot*) holds ticks `0..=AS OF` together.

mod auction;
mod counter;
mod key_value;
mod marketing;
mod names;
mod nexmark;
mod tpch;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use freshet_catalog::{LoadGenerator, LoadGeneratorSpec, SourceShape};
use freshet_repr::{ColumnDesc, PgType, RelationDesc};
use freshet_storage::{Storage, TableWrite};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::sync::watch;

use crate::datum::{Datum, Update, write_updates};
use crate::error::{Result, SourceError};
use crate::status::{SourceState, StatusCell};
use crate::{IngestionTarget, progress, supervise};

/// When each tick is due.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Schedule {
    /// The source's creation time (wall-clock milliseconds).
    pub created_at: u64,
    /// `AS OF`: ticks up to this one are all due at creation.
    pub as_of: u64,
    /// `TICK INTERVAL` (`None`: only the snapshot is ever due).
    pub tick_ms: Option<u64>,
}

impl Schedule {
    /// When tick `k` is due (wall-clock milliseconds).
    pub(crate) fn at(&self, k: u64) -> u64 {
        self.created_at.saturating_add(
            k.saturating_sub(self.as_of)
                .saturating_mul(self.tick_ms.unwrap_or(0)),
        )
    }
}

/// What every generator is: the relations it writes, and each tick's
/// updates to them.
pub(crate) trait Generator: Send + Sync + 'static {
    /// The updates of tick `tick` appended to `out` (one list per
    /// relation, in the order of [`relations`]).
    fn tick(&self, tick: u64, out: &mut [Vec<Update>]);

    /// The first tick this generator never makes (its natural end, e.g.
    /// `TOTAL EVENTS` reached), if it has one.
    fn end(&self) -> Option<u64> {
        None
    }
}

/// The relations a generator writes, by name, in output order.
pub(crate) fn relations(spec: &LoadGeneratorSpec) -> Vec<(String, RelationDesc)> {
    match spec.generator {
        LoadGenerator::Counter => counter::relations(),
        LoadGenerator::Auction => auction::relations(),
        LoadGenerator::Marketing => marketing::relations(),
        LoadGenerator::Tpch => tpch::relations(),
        LoadGenerator::KeyValue => key_value::relations(),
        LoadGenerator::Nexmark => nexmark::relations(),
    }
}

/// What a generator source writes: its relations and its progress
/// relation (`offset`: the next tick).
pub(crate) fn shape(spec: &LoadGeneratorSpec) -> SourceShape {
    SourceShape {
        outputs: relations(spec),
        progress: RelationDesc::new(vec![column("offset", PgType::Int8, false)]),
    }
}

fn generator(spec: &LoadGeneratorSpec, schedule: Schedule) -> Result<Arc<dyn Generator>> {
    Ok(match spec.generator {
        LoadGenerator::Counter => Arc::new(counter::Counter::new(spec)),
        LoadGenerator::Auction => Arc::new(auction::Auction::new(spec, schedule)),
        LoadGenerator::Marketing => Arc::new(marketing::Marketing::new(spec, schedule)),
        LoadGenerator::Tpch => Arc::new(tpch::Tpch::new(spec)?),
        LoadGenerator::KeyValue => Arc::new(key_value::KeyValue::new(spec)),
        LoadGenerator::Nexmark => Arc::new(nexmark::Nexmark::new(spec, schedule)),
    })
}

/// A column description (for the generators' relation tables).
pub(crate) fn column(name: &str, ty: PgType, nullable: bool) -> ColumnDesc {
    ColumnDesc {
        name: name.into(),
        ty,
        nullable,
    }
}

/// The random choices of one tick (or one part of one): the same for the
/// same seed and key, whatever happened before.
pub(crate) fn rng_for(seed: u64, key: &[u64]) -> StdRng {
    // FNV-1a over the seed and key, then SplitMix64 to spread the bits.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in std::iter::once(seed).chain(key.iter().copied()) {
        for b in v.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = h;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    StdRng::seed_from_u64(z ^ (z >> 31))
}

/// Milliseconds to a `timestamp[tz]` datum.
pub(crate) fn ts(ms: u64) -> Datum {
    Datum::Timestamp(i64::try_from(ms).unwrap_or(i64::MAX).saturating_mul(1_000))
}

/// `outputs` in the order of the generator's relations (what `tick`
/// indexes by); the name of a relation none is for, if any.
fn in_relation_order(
    spec: &LoadGeneratorSpec,
    mut outputs: Vec<crate::OutputTarget>,
) -> std::result::Result<Vec<crate::OutputTarget>, String> {
    let names = relations(spec);
    if let ([_], [only]) = (names.as_slice(), outputs.as_slice())
        && only.upstream.is_empty()
    {
        return Ok(outputs);
    }
    names
        .into_iter()
        .map(|(name, _)| {
            let i = outputs
                .iter()
                .position(|o| o.upstream == name)
                .ok_or_else(|| name.clone())?;
            Ok(outputs.swap_remove(i))
        })
        .collect()
}

/// Most updates one append carries while catching up.
const MAX_UPDATES_PER_APPEND: usize = 100_000;

/// Longest wait before retrying a failed append.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The task of a generator source.
pub(crate) fn run(
    storage: Arc<Storage>,
    target: IngestionTarget,
    spec: LoadGeneratorSpec,
    status: StatusCell,
    stopped: watch::Receiver<bool>,
) -> Result<impl Future<Output = ()> + Send + 'static> {
    let schedule = Schedule {
        created_at: target.ingestion.created_at,
        as_of: spec.as_of,
        tick_ms: spec.tick_ms,
    };
    let generator = generator(&spec, schedule)?;
    let mut target = target;
    target.outputs =
        in_relation_order(&spec, std::mem::take(&mut target.outputs)).map_err(|missing| {
            SourceError::Internal(format!(
                "source {} has no relation for {missing}",
                target.source
            ))
        })?;
    Ok(async move {
        let runner = Runner {
            storage,
            target,
            spec,
            schedule,
            generator,
            status,
            stopped,
        };
        runner.run().await
    })
}

struct Runner {
    storage: Arc<Storage>,
    target: IngestionTarget,
    spec: LoadGeneratorSpec,
    schedule: Schedule,
    generator: Arc<dyn Generator>,
    status: StatusCell,
    stopped: watch::Receiver<bool>,
}

/// How an append attempt ended.
enum Outcome {
    /// Keep going.
    Continue,
    /// Stop the task (stopped, dropped, fenced, or finished).
    Stop,
}

impl Runner {
    async fn run(mut self) {
        let source = self.target.source;
        let mut backoff = Duration::from_millis(250);
        // How far the source durably came: the next tick to make.
        let mut next = loop {
            match self.resume_point().await {
                Ok(next) => break next,
                Err(e) => {
                    if self.fatal(&e) || self.pause(backoff).await {
                        return;
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        };
        if let Some(n) = next {
            self.status.resumed_at(n.to_string());
        }
        loop {
            if *self.stopped.borrow() {
                return;
            }
            let end = self.end();
            let first = next.unwrap_or(0);
            // Everything up to AS OF is stamped AS OF, so with `UP TO` at
            // or below it nothing is ever made (as in Materialize).
            let nothing = next.is_none() && end.is_some_and(|e| e <= self.spec.as_of);
            if nothing || end.is_some_and(|e| first >= e) {
                self.status.set_state(SourceState::Completed, None);
                tracing::info!(%source, tick = first, "load generator reached its end");
                return;
            }
            // The snapshot covers ticks 0..=AS OF; each later tick is due
            // on the schedule from the creation time. Without a tick
            // interval nothing follows the snapshot.
            if next.is_some() && self.spec.tick_ms.is_none() {
                self.status.set_state(SourceState::Running, None);
                let _ = self.stopped.changed().await;
                return;
            }
            let now = freshet_storage::wall_clock_ms();
            let due = self.schedule.at(first);
            if next.is_some() && due > now {
                if self.pause(Duration::from_millis(due - now)).await {
                    return;
                }
                continue;
            }
            let last = match next {
                None => self.spec.as_of,
                Some(_) => first,
            };
            match self.append(next, last).await {
                Ok((after, Outcome::Continue)) => {
                    next = Some(after);
                    backoff = Duration::from_millis(250);
                }
                Ok((_, Outcome::Stop)) => return,
                Err(e) => {
                    if self.fatal(&e) || self.pause(backoff).await {
                        return;
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// The first tick not to make: `UP TO` or the generator's own end.
    fn end(&self) -> Option<u64> {
        match (self.spec.up_to, self.generator.end()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next tick recorded in the progress relation (`None`: nothing
    /// was ever appended).
    async fn resume_point(&self) -> Result<Option<u64>> {
        progress::read_offset(&self.storage, &self.target.progress).await
    }

    /// Append ticks from `next` (or the snapshot, `0..=last`, when `None`)
    /// through at least `last`, and as many more as are due (within one
    /// append's size), with the progress row; returns the next tick.
    async fn append(&mut self, next: Option<u64>, last: u64) -> Result<(u64, Outcome)> {
        let first = next.unwrap_or(0);
        let end = self.end();
        let generator = Arc::clone(&self.generator);
        let n_outputs = self.target.outputs.len();
        let now = freshet_storage::wall_clock_ms();
        let schedule = self.schedule;
        let ticking = self.spec.tick_ms.is_some();
        let due_ticks: Vec<u64> = {
            let mut ticks = Vec::new();
            let mut k = first;
            while k <= last || (ticking && schedule.at(k) <= now && ticks.len() < 10_000) {
                if end.is_some_and(|e| k >= e) {
                    break;
                }
                ticks.push(k);
                k += 1;
            }
            ticks
        };
        // Generating can take a while (a TPC-H snapshot): off the async
        // threads.
        let (updates, after) = tokio::task::spawn_blocking(move || {
            let mut out: Vec<Vec<Update>> = vec![Vec::new(); n_outputs];
            let mut after = first;
            for k in due_ticks {
                generator.tick(k, &mut out);
                after = k + 1;
                if after > last && out.iter().map(Vec::len).sum::<usize>() >= MAX_UPDATES_PER_APPEND
                {
                    break;
                }
            }
            (out, after)
        })
        .await
        .map_err(|e| SourceError::Internal(format!("generating ticks failed: {e}")))?;
        if after == first {
            // Nothing was due after all (the end was reached).
            return Ok((first, Outcome::Continue));
        }
        let mut writes = Vec::with_capacity(n_outputs + 1);
        let mut records = 0u64;
        let mut bytes = 0u64;
        for (target, updates) in self.target.outputs.iter().zip(&updates) {
            if updates.is_empty() {
                continue;
            }
            let batch = write_updates(&target.schema, updates)?;
            records += updates.len() as u64;
            bytes += batch.get_array_memory_size() as u64;
            writes.push(TableWrite {
                id: target.id,
                updates: batch,
                staged: Vec::new(),
            });
        }
        let old = next.map(|n| vec![Datum::Int64(i64::try_from(n).unwrap_or(i64::MAX))]);
        let new = vec![Datum::Int64(i64::try_from(after).unwrap_or(i64::MAX))];
        writes.push(TableWrite {
            id: self.target.progress.id,
            updates: write_updates(
                &self.target.progress.schema,
                &progress::replace(old.as_deref(), new),
            )?,
            staged: Vec::new(),
        });
        if *self.stopped.borrow() {
            return Ok((first, Outcome::Stop));
        }
        self.storage.commit(writes).await?;
        self.status.ingested(records, bytes, after.to_string());
        self.status.set_state(SourceState::Running, None);
        Ok((after, Outcome::Continue))
    }

    /// Whether `e` ends the task ([`supervise::fatal`]).
    fn fatal(&self, e: &SourceError) -> bool {
        supervise::fatal(&self.status, e)
    }

    /// Wait `d`, or until stopped (then `true`).
    async fn pause(&mut self, d: Duration) -> bool {
        supervise::pause(&mut self.stopped, d).await
    }
}

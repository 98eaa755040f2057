//! Timestamp selection and read holds: the time a read, a write's source
//! query or a new dataflow reads at, held so compaction cannot pass it.

use std::collections::BTreeSet;

use freshet_catalog::ItemKind;
use freshet_repr::sqlstate;
use freshet_repr::{GlobalId, Timestamp};
use freshet_storage::ReadHold;

use super::Coordinator;
use crate::error::{AdapterError, Result};
use crate::session::{Session, TxnRead, TxnStatus};
use crate::vars::Isolation;

impl Coordinator {
    /// Evaluate a time expression (`AS OF`, `REFRESH AT`) with `mz_now()`
    /// bound to `now`: milliseconds from an integer or `numeric`
    /// (`mz_timestamp`), a `timestamp[tz]`, or text holding either.
    pub(super) async fn eval_time(
        &self,
        session: &Session,
        time: &freshet_planner::statements::options::TimeExpr,
        now: Timestamp,
    ) -> Result<Timestamp> {
        let batches = self.run_at(session, &time.query, now).await?;
        let value = batches
            .iter()
            .find(|b| b.num_rows() > 0)
            .map(|b| datafusion::common::ScalarValue::try_from_array(b.column(0), 0))
            .transpose()?;
        freshet_planner::statements::options::timestamp_of(value.as_ref()).map_err(|why| {
            AdapterError::data(
                sqlstate::INVALID_PARAMETER_VALUE,
                format!("{} is not a valid time: {why}", time.text),
            )
        })
    }

    /// Resolve a `REFRESH` plan for a view created at `created`: its
    /// schedule with concrete times, and the time its inputs must be read
    /// at (`created`, or an earlier `REFRESH AT` time they still hold).
    pub(super) async fn refresh_schedule(
        &self,
        session: &Session,
        refresh: &freshet_planner::statements::options::RefreshPlan,
        inputs: &BTreeSet<GlobalId>,
        created: Timestamp,
    ) -> Result<(freshet_repr::RefreshSchedule, Timestamp)> {
        let mut at = Vec::new();
        for t in &refresh.at {
            at.push(self.eval_time(session, t, created).await?);
        }
        let mut every = Vec::new();
        for (interval, aligned) in &refresh.every {
            let aligned = match aligned {
                Some(a) => Some(self.eval_time(session, a, created).await?),
                None => None,
            };
            every.push((*interval, aligned));
        }
        let readable = self.readable_at_least(inputs, 0)?;
        if let Some(early) = at.iter().find(|t| **t < readable) {
            return Err(AdapterError::data(
                sqlstate::INVALID_PARAMETER_VALUE,
                format!(
                    "REFRESH AT {early} is earlier than the inputs can still be read at ({readable}): {}",
                    self.unreadable_inputs(inputs, *early)
                ),
            ));
        }
        let start = at
            .iter()
            .copied()
            .filter(|t| *t < created)
            .min()
            .unwrap_or(created);
        Ok((
            freshet_planner::statements::options::schedule(created, at, every, refresh.at_creation),
            start,
        ))
    }

    /// Which of `inputs` cannot be read at `ts`, with their sinces.
    pub(super) fn unreadable_inputs(&self, inputs: &BTreeSet<GlobalId>, ts: Timestamp) -> String {
        let mut parts = Vec::new();
        for id in inputs {
            if let Ok((since, _)) = self.storage.frontiers(*id)
                && since.as_option().is_some_and(|s| *s > ts)
            {
                parts.push(format!(
                    "{} has since {}",
                    self.describe(*id),
                    since.as_option().map_or("[]".into(), |s| s.to_string())
                ));
            }
        }
        parts.join(", ")
    }

    /// The time a new dataflow reads its inputs at: the strict-serializable
    /// read time (so the view reflects every write acknowledged before its
    /// CREATE), or later where an input has compacted past it; with holds
    /// there, taken before the catalog transaction commits.
    pub(super) fn choose_as_of(
        &self,
        inputs: &BTreeSet<GlobalId>,
    ) -> Result<(Timestamp, Vec<ReadHold>)> {
        self.hold_at_least(inputs, self.storage.read_ts())
    }

    /// Holds on `inputs` at the earliest time at or after `ts` they are all
    /// readable at. An input's since can advance between reading it and
    /// taking the hold; then the choice is made again from the new sinces.
    pub(super) fn hold_at_least(
        &self,
        inputs: &BTreeSet<GlobalId>,
        ts: Timestamp,
    ) -> Result<(Timestamp, Vec<ReadHold>)> {
        let mut attempts = 0;
        loop {
            let at = self.readable_at_least(inputs, ts)?;
            match self.hold_at(inputs, at) {
                Ok(holds) => return Ok((at, holds)),
                // An input's since moved past `at` after it was read.
                Err(AdapterError::InvalidReadTime(_)) if attempts < 8 => attempts += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// The earliest time at or after `ts` at which every input is still
    /// readable (no input has compacted past it).
    pub(super) fn readable_at_least(
        &self,
        inputs: &BTreeSet<GlobalId>,
        ts: Timestamp,
    ) -> Result<Timestamp> {
        let mut at = ts;
        for id in inputs {
            let (since, _) = self.storage.frontiers(*id)?;
            if let Some(s) = since.as_option() {
                at = at.max(*s);
            }
        }
        Ok(at)
    }

    /// Wait until every materialized view among `inputs` is complete at
    /// `ts`, then fail if one holds an error (its read would be wrong).
    pub(super) async fn await_views(
        &self,
        inputs: &BTreeSet<GlobalId>,
        ts: Timestamp,
    ) -> Result<()> {
        for id in inputs {
            let Some(state) = self.compute.dataflow(*id) else {
                // A table read at a time it has not reached yet (a query
                // that also reads a view whose next refresh is ahead).
                self.storage.wait_for_upper(*id, ts).await?;
                continue;
            };
            loop {
                if let Some(failure) = state.failure() {
                    return Err(AdapterError::Dataflow(failure));
                }
                let (_, upper) = self.storage.frontiers(*id)?;
                if upper.as_option().is_none_or(|u| *u > ts) {
                    break;
                }
                // The upper watch wakes us; the timer re-checks for failure.
                let _ = tokio::time::timeout(
                    std::time::Duration::from_millis(100),
                    self.storage.wait_for_upper(*id, ts),
                )
                .await;
            }
        }
        // Errors of the view at `ts` are in its shard: reading it fails.
        Ok(())
    }

    /// Pick a read time for `inputs` and hold them there.
    pub(super) fn choose_and_hold(
        &self,
        inputs: &BTreeSet<GlobalId>,
        isolation: Isolation,
    ) -> Result<(Timestamp, Vec<ReadHold>)> {
        let mut ts = self.storage.read_ts();
        if isolation == Isolation::Serializable {
            // Any readable time will do: the freshest every input has
            // already completed, so the read never waits.
            for id in inputs {
                let (_, upper) = self.storage.frontiers(*id)?;
                if let Some(u) = upper.as_option() {
                    ts = ts.min(u.saturating_sub(1));
                }
            }
        }
        // Never below an input's since (a scheduled view has no contents
        // before its first refresh: such a read waits for it).
        self.hold_at_least(inputs, ts)
    }

    /// Hold `inputs` readable at `ts`, or say which one no longer is.
    pub(super) fn hold_at(
        &self,
        inputs: &BTreeSet<GlobalId>,
        ts: Timestamp,
    ) -> Result<Vec<ReadHold>> {
        let mut holds = Vec::with_capacity(inputs.len());
        for id in inputs {
            match self.storage.acquire_read_hold(*id, ts) {
                Ok(h) => holds.push(h),
                Err(freshet_storage::StorageError::InvalidReadTime { .. }) => {
                    return Err(AdapterError::InvalidReadTime(format!(
                        "Timestamp ({ts}) is not valid for all inputs: {}",
                        self.unreadable_inputs(inputs, ts)
                    )));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(holds)
    }

    /// Every collection in the schemas `inputs` live in: what a
    /// transaction may read after its first query.
    pub(super) fn timedomain(&self, inputs: &BTreeSet<GlobalId>) -> BTreeSet<GlobalId> {
        let catalog = self.catalog_state();
        let schemas: BTreeSet<GlobalId> = inputs
            .iter()
            .filter_map(|id| catalog.item(*id).map(|i| i.schema_id))
            .collect();
        let mut out: BTreeSet<GlobalId> = catalog
            .items()
            .filter(|i| schemas.contains(&i.schema_id) && i.has_collection())
            .map(|i| i.id)
            .collect();
        out.extend(inputs);
        out
    }

    /// The time a read of `inputs` runs at, with holds protecting them
    /// there: the transaction's time (its holds live with it), or a new
    /// time whose holds the caller releases when done.
    ///
    /// In a transaction block the read also joins the set of tables
    /// COMMIT validates. `overlaid` says whether the read sees the
    /// transaction's buffered writes (a DataFusion plan over snapshots
    /// does); a read that cannot (an index peek, a materialized view's
    /// shard) of something the transaction wrote fails instead of
    /// answering without the transaction's own writes.
    pub(super) fn read_time(
        &self,
        session: &mut Session,
        inputs: &BTreeSet<GlobalId>,
        overlaid: bool,
    ) -> Result<(Timestamp, Vec<ReadHold>)> {
        if session.status != TxnStatus::InBlock {
            return self.choose_and_hold(inputs, session.isolation());
        }
        // Tables the block created have no collection to hold or validate
        // yet: they read as the block's own writes.
        let created = session.txn.created();
        let inputs: &BTreeSet<GlobalId> = &inputs.difference(&created).copied().collect();
        if inputs.is_empty() && session.txn.read.is_none() {
            // Only the catalog's relations (or constants): nothing to pin
            // the transaction's time to yet. ORMs reflect, then read.
            return Ok((self.storage.read_ts(), Vec::new()));
        }
        let catalog = self.catalog_for(session);
        let tables_behind = |id: &GlobalId| -> Vec<GlobalId> {
            match catalog.item(*id) {
                Some(item) if item.kind == ItemKind::Table => vec![*id],
                _ => catalog
                    .collections_behind(*id)
                    .into_iter()
                    .filter(|c| catalog.item(*c).is_some_and(|i| i.kind == ItemKind::Table))
                    .collect(),
            }
        };
        if !session.txn.writes.is_empty() {
            let written: BTreeSet<GlobalId> = session.txn.writes.iter().map(|w| w.id).collect();
            for input in inputs {
                let is_table = catalog
                    .item(*input)
                    .is_some_and(|i| i.kind == ItemKind::Table);
                if overlaid && is_table {
                    continue;
                }
                if let Some(t) = tables_behind(input)
                    .into_iter()
                    .find(|t| written.contains(t))
                {
                    return Err(AdapterError::Unsupported(format!(
                        "{} cannot be read in this transaction after it wrote to {}: {} reflects only committed writes; COMMIT first",
                        catalog.describe(*input),
                        catalog.describe(t),
                        if overlaid {
                            "a materialized view"
                        } else {
                            "an index"
                        },
                    )));
                }
            }
        }
        let ts = match &mut session.txn.read {
            Some(read) => {
                let outside: BTreeSet<GlobalId> = inputs
                    .iter()
                    .filter(|i| !read.read_set.contains(i))
                    .copied()
                    .collect();
                if let Some(first) = outside.first().copied() {
                    // Readable at the transaction's time still: hold them
                    // there for the rest of the transaction.
                    let holds = self.hold_at(&outside, read.ts).map_err(|_| {
                        AdapterError::InvalidTransactionState(format!(
                            "transactions can only read objects in the schemas of their first query, or objects still readable at its time; {} is neither",
                            self.describe(first)
                        ))
                    })?;
                    read.read_set.extend(outside);
                    read.holds.extend(holds);
                }
                read.ts
            }
            None => {
                let read_set = self.timedomain(inputs);
                let (ts, holds) = self.choose_and_hold(&read_set, session.isolation())?;
                session.txn.read = Some(TxnRead {
                    ts,
                    read_set,
                    holds,
                });
                ts
            }
        };
        for input in inputs {
            session.txn.validate.extend(tables_behind(input));
        }
        Ok((ts, Vec::new()))
    }
}

//! Sequence values for `serial` and identity columns and for `CREATE
//! SEQUENCE`'s sequences: handed out from blocks reserved durably in the
//! catalog (the table's [`Serial`], the sequence's [`SequenceDef`] records
//! the first value not yet reserved), so a value is never handed out twice,
//! across restarts too; what a restart leaves of a block is skipped, as
//! with PostgreSQL's sequence cache. Values are not transactional: a
//! rolled-back insert's values are gone, as in PostgreSQL.

use std::collections::{HashMap, VecDeque};
use std::sync::{OnceLock, Weak};

use datafusion::common::{DataFusionError, Result as DfResult};
use freshet_catalog::{ItemDetails, ItemKind, Op, SequenceDef, Serial};
use freshet_planner::builtins::serial_sequence_oid;
use freshet_planner::query::sequences::SequenceSource;
use freshet_repr::sqlstate;

use super::Coordinator;
use super::ddl::Prepared;
use crate::error::{AdapterError, Result};

/// How many values one catalog transaction reserves at least.
const BLOCK: usize = 64;

/// The sequences' reserved blocks not yet handed out, by sequence oid.
#[derive(Debug, Default)]
pub struct Sequences {
    /// The coordinator, set once it exists (the function that draws values
    /// is registered before).
    pub(super) coord: OnceLock<Weak<Coordinator>>,
    /// Reserved values not yet handed out, in order, per sequence.
    reserved: parking_lot::Mutex<HashMap<u32, VecDeque<i64>>>,
}

impl Sequences {
    fn coordinator(&self) -> DfResult<std::sync::Arc<Coordinator>> {
        self.coord
            .get()
            .and_then(Weak::upgrade)
            .ok_or_else(|| DataFusionError::Execution("the server is shutting down".into()))
    }
}

impl SequenceSource for Sequences {
    fn next_values(&self, oid: u32, n: usize) -> DfResult<Vec<i64>> {
        let mut reserved = self.reserved.lock();
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let queue = reserved.entry(oid).or_default();
            if !queue.is_empty() {
                let take = (n - out.len()).min(queue.len());
                out.extend(queue.drain(..take));
                continue;
            }
            let want = (n - out.len()).max(BLOCK);
            let block =
                crate::query_exec::wait_here(self.coordinator()?.reserve_sequence(oid, want))
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
            queue.extend(block);
        }
        Ok(out)
    }

    fn set_value(&self, oid: u32, value: i64, is_called: bool) -> DfResult<()> {
        // Holding the lock keeps other sessions from drawing from a block
        // this replaces.
        let mut reserved = self.reserved.lock();
        crate::query_exec::wait_here(self.coordinator()?.set_sequence(oid, value, is_called))
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        reserved.remove(&oid);
        Ok(())
    }

    fn name(&self, oid: u32) -> String {
        self.coordinator()
            .ok()
            .and_then(|c| {
                let state = c.catalog_state();
                let (item, place) = state
                    .items()
                    .find_map(|i| Some((i, sequence_of(i, oid)?)))?;
                Some(match (&item.details, place) {
                    (ItemDetails::Table { serials, .. }, Some(k)) => serials[k].sequence.clone(),
                    _ => item.name.clone(),
                })
            })
            .unwrap_or_else(|| oid.to_string())
    }
}

/// Where in an item the sequence `oid` lives: the position of a table's
/// serial, or the item itself (`None` inside: a `CREATE SEQUENCE` one).
fn sequence_of(item: &freshet_catalog::Item, oid: u32) -> Option<Option<usize>> {
    match &item.details {
        ItemDetails::Table { serials, .. } => serials
            .iter()
            .position(|s| serial_sequence_oid(item.oid, s.column) == oid)
            .map(Some),
        ItemDetails::Sequence(_) if item.oid == oid && item.kind == ItemKind::Sequence => {
            Some(None)
        }
        _ => None,
    }
}

/// A sequence's state, to change in a copy of its item's details.
enum SequenceMut<'a> {
    /// A `serial`/identity column's.
    Serial(&'a mut Serial),
    /// A `CREATE SEQUENCE` sequence's, with its name.
    Standalone(&'a str, &'a mut SequenceDef),
}

/// The sequence `oid` within `details` (a copy of `item`'s).
fn sequence_in<'a>(
    details: &'a mut ItemDetails,
    item: &'a freshet_catalog::Item,
    oid: u32,
) -> Option<SequenceMut<'a>> {
    let place = sequence_of(item, oid)?;
    match (details, place) {
        (ItemDetails::Table { serials, .. }, Some(k)) => {
            serials.get_mut(k).map(SequenceMut::Serial)
        }
        (ItemDetails::Sequence(def), None) => Some(SequenceMut::Standalone(&item.name, def)),
        _ => None,
    }
}

impl Coordinator {
    /// Change the sequence `oid` with `change` and commit the change as
    /// one catalog transaction; `change`'s error commits nothing.
    async fn change_sequence<T>(
        &self,
        oid: u32,
        change: impl FnOnce(SequenceMut<'_>) -> Result<T>,
    ) -> Result<T> {
        let catalog = self.catalog.lock().await;
        let state = catalog.state();
        let Some(item) = state.items().find(|i| sequence_of(i, oid).is_some()) else {
            return Err(AdapterError::data(
                sqlstate::UNDEFINED_OBJECT,
                format!(
                    "sequence with oid {oid} does not exist (a table or sequence created in an open transaction block is usable only after COMMIT)"
                ),
            ));
        };
        let mut details = item.details.clone();
        let sequence = sequence_in(&mut details, item, oid)
            .ok_or_else(|| AdapterError::Internal(format!("sequence {oid} not in its item")))?;
        let out = change(sequence)?;
        self.transact_locked(
            catalog,
            vec![Op::UpdateDetails {
                id: item.id,
                details,
            }],
            Vec::new(),
            Prepared::new(),
        )?;
        Ok(out)
    }

    /// Reserve at least `n` values of the sequence `oid` (fewer only where
    /// a sequence ends): one catalog transaction advancing the table's
    /// [`Serial`] or the sequence's [`SequenceDef`]. Returns the values in
    /// the order they are to be handed out.
    pub(super) async fn reserve_sequence(&self, oid: u32, n: usize) -> Result<Vec<i64>> {
        self.change_sequence(oid, |sequence| match sequence {
            SequenceMut::Serial(Serial {
                sequence,
                next,
                max,
                ..
            }) => {
                let start = *next;
                if start > *max {
                    return Err(AdapterError::data(
                        sqlstate::SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
                        format!(
                            "nextval: reached maximum value of sequence \"{sequence}\" ({max})"
                        ),
                    ));
                }
                let end = start
                    .saturating_add(i64::try_from(n).unwrap_or(i64::MAX))
                    .min(max.saturating_add(1));
                *next = end;
                Ok((start..end).collect())
            }
            SequenceMut::Standalone(name, def) => {
                let values = def.reserve(n);
                if values.is_empty() {
                    let (which, bound) = if def.increment > 0 {
                        ("maximum", def.max)
                    } else {
                        ("minimum", def.min)
                    };
                    return Err(AdapterError::data(
                        sqlstate::SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
                        format!("nextval: reached {which} value of sequence \"{name}\" ({bound})"),
                    ));
                }
                Ok(values)
            }
        })
        .await
    }

    /// `setval`: the sequence `oid` goes on from `value` (the one after it
    /// when `is_called`), durably; 22003 outside its bounds.
    pub(super) async fn set_sequence(&self, oid: u32, value: i64, is_called: bool) -> Result<()> {
        let out_of_bounds = |name: &str, min: i64, max: i64| {
            AdapterError::data(
                sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                format!(
                    "setval: value {value} is out of bounds for sequence \"{name}\" ({min}..{max})"
                ),
            )
        };
        self.change_sequence(oid, |sequence| {
            match sequence {
                SequenceMut::Serial(serial) => {
                    if !(1..=serial.max).contains(&value) {
                        return Err(out_of_bounds(&serial.sequence, 1, serial.max));
                    }
                    serial.next = if is_called {
                        value.saturating_add(1)
                    } else {
                        value
                    };
                }
                SequenceMut::Standalone(name, def) => {
                    if !(def.min..=def.max).contains(&value) {
                        return Err(out_of_bounds(name, def.min, def.max));
                    }
                    def.next = Some(value);
                    def.called = is_called;
                    if is_called {
                        // The set value counts as handed out.
                        let _ = def.reserve(1);
                    }
                }
            }
            Ok(())
        })
        .await
    }
}

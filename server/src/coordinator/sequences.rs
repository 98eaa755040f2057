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
                find_sequence(&state, oid).map(|found| match found {
                    Found::Serial(k, item) => match &item.details {
                        ItemDetails::Table { serials, .. } => serials[k].sequence.clone(),
                        _ => item.name.clone(),
                    },
                    Found::Standalone(item) => item.name.clone(),
                })
            })
            .unwrap_or_else(|| oid.to_string())
    }
}

/// A sequence by oid: a table column's or a standalone one.
enum Found<'a> {
    /// The `k`-th serial of a table.
    Serial(usize, &'a freshet_catalog::Item),
    /// A `CREATE SEQUENCE` sequence.
    Standalone(&'a freshet_catalog::Item),
}

fn find_sequence(state: &freshet_catalog::CatalogState, oid: u32) -> Option<Found<'_>> {
    state.items().find_map(|item| match &item.details {
        ItemDetails::Table { serials, .. } => serials
            .iter()
            .position(|s| serial_sequence_oid(item.oid, s.column) == oid)
            .map(|k| Found::Serial(k, item)),
        ItemDetails::Sequence(_) if item.oid == oid && item.kind == ItemKind::Sequence => {
            Some(Found::Standalone(item))
        }
        _ => None,
    })
}

fn no_such_sequence(oid: u32) -> AdapterError {
    AdapterError::data(
        sqlstate::UNDEFINED_OBJECT,
        format!(
            "sequence with oid {oid} does not exist (a table or sequence created in an open transaction block is usable only after COMMIT)"
        ),
    )
}

impl Coordinator {
    /// Reserve at least `n` values of the sequence `oid` (fewer only where
    /// a sequence ends): one catalog transaction advancing the table's
    /// [`Serial`] or the sequence's [`SequenceDef`]. Returns the values in
    /// the order they are to be handed out.
    pub(super) async fn reserve_sequence(&self, oid: u32, n: usize) -> Result<Vec<i64>> {
        let catalog = self.catalog.lock().await;
        let state = catalog.state();
        let Some(found) = find_sequence(&state, oid) else {
            return Err(no_such_sequence(oid));
        };
        let (id, details, values) = match found {
            Found::Serial(k, item) => {
                let mut details = item.details.clone();
                let ItemDetails::Table { serials, .. } = &mut details else {
                    return Err(AdapterError::Internal("a serial outside a table".into()));
                };
                let Serial {
                    sequence,
                    next,
                    max,
                    ..
                } = &mut serials[k];
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
                (item.id, details, (start..end).collect())
            }
            Found::Standalone(item) => {
                let ItemDetails::Sequence(def) = &item.details else {
                    return Err(AdapterError::Internal("a sequence without options".into()));
                };
                let mut def: SequenceDef = def.as_ref().clone();
                let values = def.reserve(n);
                if values.is_empty() {
                    let (which, bound) = if def.increment > 0 {
                        ("maximum", def.max)
                    } else {
                        ("minimum", def.min)
                    };
                    return Err(AdapterError::data(
                        sqlstate::SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
                        format!(
                            "nextval: reached {which} value of sequence \"{}\" ({bound})",
                            item.name
                        ),
                    ));
                }
                (item.id, ItemDetails::Sequence(Box::new(def)), values)
            }
        };
        self.transact_locked(
            catalog,
            vec![Op::UpdateDetails { id, details }],
            Vec::new(),
            Prepared::new(),
        )?;
        Ok(values)
    }

    /// `setval`: the sequence `oid` goes on from `value` (the one after it
    /// when `is_called`), durably; 22003 outside its bounds.
    pub(super) async fn set_sequence(&self, oid: u32, value: i64, is_called: bool) -> Result<()> {
        let catalog = self.catalog.lock().await;
        let state = catalog.state();
        let Some(found) = find_sequence(&state, oid) else {
            return Err(no_such_sequence(oid));
        };
        let out_of_bounds = |name: &str, min: i64, max: i64| {
            AdapterError::data(
                sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                format!(
                    "setval: value {value} is out of bounds for sequence \"{name}\" ({min}..{max})"
                ),
            )
        };
        let (id, details) = match found {
            Found::Serial(k, item) => {
                let mut details = item.details.clone();
                let ItemDetails::Table { serials, .. } = &mut details else {
                    return Err(AdapterError::Internal("a serial outside a table".into()));
                };
                let serial = &mut serials[k];
                if !(1..=serial.max).contains(&value) {
                    return Err(out_of_bounds(&serial.sequence, 1, serial.max));
                }
                serial.next = if is_called {
                    value.saturating_add(1)
                } else {
                    value
                };
                (item.id, details)
            }
            Found::Standalone(item) => {
                let ItemDetails::Sequence(def) = &item.details else {
                    return Err(AdapterError::Internal("a sequence without options".into()));
                };
                let mut def: SequenceDef = def.as_ref().clone();
                if !(def.min..=def.max).contains(&value) {
                    return Err(out_of_bounds(&item.name, def.min, def.max));
                }
                def.next = Some(value);
                def.called = is_called;
                if is_called {
                    // The set value counts as handed out.
                    let _ = def.reserve(1);
                }
                (item.id, ItemDetails::Sequence(Box::new(def)))
            }
        };
        self.transact_locked(
            catalog,
            vec![Op::UpdateDetails { id, details }],
            Vec::new(),
            Prepared::new(),
        )?;
        Ok(())
    }
}

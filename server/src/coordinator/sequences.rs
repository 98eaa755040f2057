//! Sequence values for `serial` and identity columns: handed out from
//! blocks reserved durably in the catalog (the table's [`Serial`] records
//! the first value not yet reserved), so a value is never handed out twice,
//! across restarts too; what a restart leaves of a block is skipped, as
//! with PostgreSQL's sequence cache. Values are not transactional: a
//! rolled-back insert's values are gone, as in PostgreSQL.

use std::collections::HashMap;
use std::sync::{OnceLock, Weak};

use datafusion::common::{DataFusionError, Result as DfResult};
use freshet_catalog::{ItemDetails, Op, Serial};
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
    /// `[next, end)` per sequence.
    ranges: parking_lot::Mutex<HashMap<u32, (i64, i64)>>,
}

impl SequenceSource for Sequences {
    fn next_values(&self, oid: u32, n: usize) -> DfResult<Vec<i64>> {
        let mut ranges = self.ranges.lock();
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let (next, end) = ranges.entry(oid).or_insert((0, 0));
            if *next < *end {
                let take = (n - out.len()).min(usize::try_from(*end - *next).unwrap_or(n));
                out.extend(*next..*next + take as i64);
                *next += take as i64;
                continue;
            }
            let coord =
                self.coord.get().and_then(Weak::upgrade).ok_or_else(|| {
                    DataFusionError::Execution("the server is shutting down".into())
                })?;
            let want = (n - out.len()).max(BLOCK);
            let reserved = crate::query_exec::wait_here(coord.reserve_sequence(oid, want))
                .map_err(|e| DataFusionError::External(Box::new(e)))?;
            ranges.insert(oid, reserved);
        }
        Ok(out)
    }
}

impl Coordinator {
    /// Reserve at least `n` values of the sequence `oid` (fewer only at its
    /// type's end): one catalog transaction advancing the table's
    /// [`Serial`]. Returns `[first, end)`.
    pub(super) async fn reserve_sequence(&self, oid: u32, n: usize) -> Result<(i64, i64)> {
        let catalog = self.catalog.lock().await;
        let state = catalog.state();
        let found = state.items().find_map(|item| match &item.details {
            ItemDetails::Table { serials, .. } => serials
                .iter()
                .position(|s| serial_sequence_oid(item.oid, s.column) == oid)
                .map(|k| (item, k)),
            _ => None,
        });
        let Some((item, k)) = found else {
            return Err(AdapterError::data(
                sqlstate::UNDEFINED_OBJECT,
                format!(
                    "sequence with oid {oid} does not exist (a table created in an open transaction block numbers its rows only after COMMIT)"
                ),
            ));
        };
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
                format!("nextval: reached maximum value of sequence \"{sequence}\" ({max})"),
            ));
        }
        let end = start
            .saturating_add(i64::try_from(n).unwrap_or(i64::MAX))
            .min(max.saturating_add(1));
        *next = end;
        let id = item.id;
        self.transact_locked(
            catalog,
            vec![Op::UpdateDetails { id, details }],
            Vec::new(),
            Prepared::new(),
        )?;
        Ok((start, end))
    }
}

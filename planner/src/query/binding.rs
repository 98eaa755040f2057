//! What a planned query reads, fixed after planning: the read time the
//! sequencer chose (with its holds taken) and the reader that serves
//! snapshots, built-in relations and index rows at that time.
//!
//! Planning needs only the binding's handle; scans and `mz_now()` read it
//! at execution, so one plan can be planned before its time is chosen.

use std::fmt;
use std::sync::{Arc, OnceLock};

use arrow::array::RecordBatch;
use datafusion::common::{Result as DfResult, ScalarValue, plan_datafusion_err};
use freshet_repr::{GlobalId, Timestamp};

use crate::builtins::Builtin;
use crate::query::part_scan::{CollectionScan, WholeScan};

/// Reads collections and built-in relations for a query.
pub trait CollectionReader: Send + Sync + fmt::Debug {
    /// The consolidated contents of a collection at `as_of`.
    fn snapshot(&self, id: GlobalId, as_of: Timestamp) -> DfResult<Vec<RecordBatch>>;
    /// The contents of a collection at `as_of`, to be read part by part;
    /// by default its whole snapshot as one part.
    fn scan(&self, id: GlobalId, as_of: Timestamp) -> DfResult<Box<dyn CollectionScan>> {
        Ok(Box::new(WholeScan::new(self.snapshot(id, as_of)?)))
    }
    /// The rows of a built-in relation, as the query's catalog version and
    /// the system's state show it.
    fn builtin_rows(&self, builtin: Builtin) -> DfResult<Vec<RecordBatch>>;
    /// The rows index `index` holds at `as_of`.
    fn index_rows(&self, index: GlobalId, as_of: Timestamp) -> DfResult<Vec<RecordBatch>>;
    /// The rows index `index` holds whose key is one of `keys`, at
    /// `as_of`; `None` when the index cannot serve this read (the reading
    /// transaction wrote to a collection behind it, or the index no
    /// longer holds `as_of`), so the caller reads the whole object.
    fn index_seek(
        &self,
        index: GlobalId,
        as_of: Timestamp,
        keys: &[Vec<ScalarValue>],
    ) -> DfResult<Option<Vec<RecordBatch>>>;
    /// The rows index `index` holds whose first key column lies in
    /// `range`, at `as_of`; `None` as for [`Self::index_seek`].
    fn index_range(
        &self,
        index: GlobalId,
        as_of: Timestamp,
        range: &crate::query::index_scan::KeyRange,
    ) -> DfResult<Option<Vec<RecordBatch>>>;
}

/// The time a query reads at and where it reads from, fixed once the
/// sequencer has chosen the time and taken read holds.
#[derive(Debug)]
pub struct ReadContext {
    /// The query's timestamp.
    pub as_of: Timestamp,
    /// The reader.
    pub reader: Arc<dyn CollectionReader>,
}

/// Shared by every scan of one planned statement; set before execution.
#[derive(Debug, Default)]
pub struct QueryBinding {
    read: OnceLock<ReadContext>,
    rows: OnceLock<Vec<RecordBatch>>,
}

impl QueryBinding {
    /// Fix the read time and reader. Fails if already bound.
    pub fn bind(&self, ctx: ReadContext) -> Result<(), String> {
        self.read
            .set(ctx)
            .map_err(|_| "query is already bound to a read time".to_string())
    }

    /// Provide the rows a RETURNING clause reads.
    pub fn bind_rows(&self, rows: Vec<RecordBatch>) -> Result<(), String> {
        self.rows
            .set(rows)
            .map_err(|_| "rows are already bound".to_string())
    }

    /// The rows bound for RETURNING (none if nothing was bound).
    pub(crate) fn rows(&self) -> Vec<RecordBatch> {
        self.rows.get().cloned().unwrap_or_default()
    }

    /// The bound read time, if any.
    pub fn as_of(&self) -> Option<Timestamp> {
        self.read.get().map(|r| r.as_of)
    }

    pub(crate) fn read(&self) -> DfResult<&ReadContext> {
        self.read.get().ok_or_else(|| {
            plan_datafusion_err!("internal error: query executed without a read time")
        })
    }
}

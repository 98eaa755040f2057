//! Reading a collection at one time part by part, so a query holds one
//! part decoded at a time instead of the whole collection.
//!
//! A [`SnapshotScan`] fixes the parts (and the in-memory table writes not
//! yet flushed) that make up the collection when it starts, with what is
//! known of each: rows, whether it holds retractions, and column bounds
//! ([`PartStats`]) to skip it under a filter. Its reader may drop parts it
//! does not need ([`SnapshotScan::retain`]), then reads each remaining part
//! on its own ([`SnapshotScan::read`]), from any thread, in any order.
//!
//! Retractions: a row's insertion and its retraction may sit in different
//! parts. Before the first part is read, the scan reads the (few) parts
//! that hold retractions and counts what they retract at the read's time;
//! every part read then skips that many copies of each retracted row. A
//! part dropped by a filter cannot matter: the rows its retractions cancel
//! have the same values, so the filter drops them too.
//!
//! Parts a compaction replaces while a scan runs stay on disk until the
//! scan ends (a [`PartLease`]), so the scan reads the collection exactly as
//! it was when it started.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, UInt32Array, UInt64Array};
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, Rows, SortField};
use freshet_repr::{GlobalId, Timestamp};
use parking_lot::Mutex;

use crate::batch::{data_columns, diffs, retag, times};
use crate::collection::Collection;
use crate::consolidate::{split, take_batch};
use crate::error::{Result, StorageError};
use crate::part_stats::PartStats;
use crate::shard::{PartMeta, PartWriter};

/// Where a part's updates are.
#[derive(Clone, Debug)]
pub(crate) enum PartSource {
    /// A part file of the shard (read through the part cache).
    Stored(PartMeta),
    /// Committed table writes not yet flushed to the shard.
    Memory(Arc<RecordBatch>),
}

/// One part of a scan and what is known of it without reading it.
#[derive(Clone, Debug)]
pub(crate) struct ScanPart {
    pub source: PartSource,
    pub rows: usize,
    /// Every diff positive: the part retracts nothing.
    pub positive: bool,
    /// Every diff exactly one.
    pub unit: bool,
    pub max_time: Timestamp,
    pub stats: Option<Arc<PartStats>>,
}

/// Rows in Arrow's row format, with a count.
type RowCounts = HashMap<Box<[u8]>, i128>;

/// How many copies of each row (in Arrow's row format) the retractions at
/// or before the read's time cancel: those no part has taken yet, and
/// those each part read took, so a part read again (a plan may execute a
/// scan more than once) cancels the same rows.
struct Retractions {
    converter: RowConverter,
    owed: RowCounts,
    taken: HashMap<usize, RowCounts>,
}

/// A read of one collection at one time, part by part (see the module
/// documentation).
pub struct SnapshotScan {
    collection: Arc<Collection>,
    as_of: Timestamp,
    parts: Vec<ScanPart>,
    /// Parts still to be read (the rest were dropped by [`Self::retain`]).
    kept: Vec<bool>,
    writer: PartWriter,
    /// `None` until the first read counts them; then `None` inside when
    /// no kept part retracts anything.
    retractions: Mutex<Option<Option<Retractions>>>,
    _lease: PartLease,
}

impl fmt::Debug for SnapshotScan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotScan")
            .field("collection", &self.collection.id)
            .field("as_of", &self.as_of)
            .field("parts", &self.parts.len())
            .finish_non_exhaustive()
    }
}

impl SnapshotScan {
    pub(crate) fn new(
        collection: Arc<Collection>,
        as_of: Timestamp,
        parts: Vec<ScanPart>,
        writer: PartWriter,
        lease: PartLease,
    ) -> Self {
        SnapshotScan {
            collection,
            as_of,
            kept: vec![true; parts.len()],
            parts,
            writer,
            retractions: Mutex::new(None),
            _lease: lease,
        }
    }

    /// The collection read.
    pub fn id(&self) -> GlobalId {
        self.collection.id
    }

    /// The time read at.
    pub fn as_of(&self) -> Timestamp {
        self.as_of
    }

    /// The schema of the batches [`Self::read`] returns.
    pub fn schema(&self) -> &SchemaRef {
        &self.collection.data_schema
    }

    /// How many parts the scan has (dropped ones included: indexes stay).
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Whether the collection had no parts at all.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Updates in part `i` (an upper bound on the rows it yields).
    pub fn part_rows(&self, i: usize) -> usize {
        self.parts.get(i).map_or(0, |p| p.rows)
    }

    /// Column bounds of part `i`, if known (a part not read since this
    /// process started has none yet).
    pub fn part_stats(&self, i: usize) -> Option<&Arc<PartStats>> {
        self.parts.get(i).and_then(|p| p.stats.as_ref())
    }

    /// The rows the scan yields, when that is known without reading: every
    /// part free of retractions, every diff one, every update at or before
    /// the read's time.
    pub fn exact_rows(&self) -> Option<usize> {
        let mut rows = 0;
        for (p, kept) in self.parts.iter().zip(&self.kept) {
            if !kept {
                continue;
            }
            if !(p.positive && p.unit && p.max_time <= self.as_of) {
                return None;
            }
            rows += p.rows;
        }
        Some(rows)
    }

    /// Drop the parts for which `keep` is false: their rows will not be
    /// read (a filter rules them out). Only before the first read.
    pub fn retain(&mut self, keep: impl Fn(usize) -> bool) {
        for (i, k) in self.kept.iter_mut().enumerate() {
            *k = *k && keep(i);
        }
    }

    /// Whether part `i` is still to be read.
    pub fn is_kept(&self, i: usize) -> bool {
        self.kept.get(i).copied().unwrap_or(false)
    }

    /// Data columns `columns` of a part's updates with its time and diff,
    /// decoded (through the part cache).
    fn load(&self, part: &ScanPart, columns: &[usize]) -> Result<RecordBatch> {
        match &part.source {
            PartSource::Memory(batch) => {
                let n = self.collection.data_schema.fields().len();
                let mut projection = columns.to_vec();
                projection.extend([n, n + 1]);
                Ok(batch.project(&projection)?)
            }
            PartSource::Stored(meta) => self.collection.load_part(meta, &self.writer, columns),
        }
    }

    /// Every data column's index.
    fn all_columns(&self) -> Vec<usize> {
        (0..self.collection.data_schema.fields().len()).collect()
    }

    /// The updates of `updates` at or before the read's time.
    fn visible(&self, part: &ScanPart, updates: &RecordBatch) -> Result<RecordBatch> {
        if part.max_time <= self.as_of {
            return Ok(updates.clone());
        }
        let keep = arrow::compute::kernels::cmp::lt_eq(
            times(updates)?,
            &UInt64Array::new_scalar(self.as_of),
        )?;
        Ok(filter_record_batch(updates, &keep)?)
    }

    fn count_retractions(&self) -> Result<Option<Retractions>> {
        let mut retractions: Option<Retractions> = None;
        for (part, _) in self
            .parts
            .iter()
            .zip(&self.kept)
            .filter(|(p, k)| **k && !p.positive)
        {
            let updates = self.visible(part, &self.load(part, &self.all_columns())?)?;
            let negative = arrow::compute::kernels::cmp::lt(
                diffs(&updates)?,
                &arrow::array::Int64Array::new_scalar(0),
            )?;
            let negative = filter_record_batch(&updates, &negative)?;
            if negative.num_rows() == 0 {
                continue;
            }
            let r = match &mut retractions {
                Some(r) => r,
                None => retractions.insert(Retractions {
                    converter: row_converter(&self.collection.data_schema)?,
                    owed: HashMap::new(),
                    taken: HashMap::new(),
                }),
            };
            let data = data_columns(&negative)?;
            let rows = r.converter.convert_columns(data.columns())?;
            for (i, d) in diffs(&negative)?.values().iter().enumerate() {
                *r.owed.entry(rows.row(i).as_ref().into()).or_default() += -(*d as i128);
            }
        }
        Ok(retractions)
    }

    /// The rows of part `i` at the read's time, each repeated by its
    /// multiplicity, less what retractions in other parts cancel; batches
    /// of data columns `columns` (all if `None`) of [`Self::schema`], in
    /// that order, split into batches of at most 64Ki rows. Only those
    /// columns are decoded, unless the scan cancels retractions: telling
    /// which rows they cancel takes every column.
    pub fn read(&self, i: usize, columns: Option<&[usize]>) -> Result<Vec<RecordBatch>> {
        let Some(part) = self.parts.get(i).filter(|_| self.is_kept(i)) else {
            return Ok(vec![]);
        };
        let all = self.all_columns();
        let columns = columns.unwrap_or(&all);
        let schema = Arc::new(self.schema().project(columns)?);
        let cancelling = {
            let mut retractions = self.retractions.lock();
            if retractions.is_none() {
                *retractions = Some(self.count_retractions()?);
            }
            matches!(*retractions, Some(Some(_)))
        };
        if !cancelling {
            let updates = self.load(part, columns)?;
            if part.positive && part.unit && part.max_time <= self.as_of {
                return Ok(split(retag(data_columns(&updates)?, &schema)?));
            }
            let out = expand(&self.visible(part, &updates)?, None)?;
            return Ok(split(retag(out, &schema)?));
        }
        let updates = self.visible(part, &self.load(part, &all)?)?;
        let data = data_columns(&updates)?;
        let mut retractions = self.retractions.lock();
        let budget = match retractions.as_mut().and_then(Option::as_mut) {
            Some(r) => Some(self.cancelled_by(r, i, &data, diffs(&updates)?)?),
            None => None,
        };
        drop(retractions);
        let out = expand(&updates, budget)?;
        Ok(split(retag(out.project(columns)?, &schema)?))
    }

    /// What part `i` (its visible `data` and diffs `d`) cancels: taken
    /// from what is owed on its first read, the same on every later one.
    fn cancelled_by(
        &self,
        r: &mut Retractions,
        i: usize,
        data: &RecordBatch,
        d: &Int64Array,
    ) -> Result<(Rows, RowCounts)> {
        let rows = r.converter.convert_columns(data.columns())?;
        if let Some(taken) = r.taken.get(&i) {
            return Ok((rows, taken.clone()));
        }
        let mut taken = RowCounts::new();
        for (row, diff) in d.values().iter().enumerate() {
            let key = rows.row(row);
            if *diff > 0
                && let Some(owed) = r.owed.get_mut(key.as_ref())
                && *owed > 0
            {
                let n = (*owed).min(*diff as i128);
                *owed -= n;
                *taken.entry(key.as_ref().into()).or_default() += n;
            }
        }
        r.taken.insert(i, taken.clone());
        Ok((rows, taken))
    }

    /// After every part was read: fail if retractions were left that no
    /// row cancelled (the collection's history retracts more copies of a
    /// row than it ever inserted).
    pub fn check_complete(&self) -> Result<()> {
        let retractions = self.retractions.lock();
        if let Some(Some(r)) = retractions.as_ref()
            && let Some(owed) = r.owed.values().find(|owed| **owed > 0)
        {
            return Err(StorageError::NegativeMultiplicity {
                id: self.collection.id,
                as_of: self.as_of,
                diff: -(*owed as i64),
            });
        }
        Ok(())
    }

    /// Every row, consolidated: what [`crate::Storage::snapshot`] returns.
    pub(crate) fn read_all(&self) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        for i in 0..self.len() {
            out.extend(self.read(i, None)?);
        }
        self.check_complete()?;
        Ok(out)
    }
}

/// The data rows of `updates` (those visible at a read's time), each
/// repeated by its multiplicity, less the copies `cancel` counts (rows in
/// Arrow's row format, indexed as `updates`).
fn expand(updates: &RecordBatch, mut cancel: Option<(Rows, RowCounts)>) -> Result<RecordBatch> {
    let d = diffs(updates)?.values();
    let data = data_columns(updates)?;
    let mut keep: Vec<u32> = Vec::with_capacity(updates.num_rows());
    for (row, diff) in d.iter().enumerate() {
        if *diff <= 0 {
            continue;
        }
        let mut copies = *diff as i128;
        if let Some((rows, budget)) = cancel.as_mut()
            && let Some(left) = budget.get_mut(rows.row(row).as_ref())
        {
            let n = (*left).min(copies);
            *left -= n;
            copies -= n;
        }
        for _ in 0..copies {
            keep.push(row as u32);
        }
    }
    if keep.len() == data.num_rows() && d.iter().all(|x| *x == 1) {
        return Ok(data);
    }
    take_batch(&data, &UInt32Array::from(keep))
}

fn row_converter(schema: &SchemaRef) -> Result<RowConverter> {
    Ok(RowConverter::new(
        schema
            .fields()
            .iter()
            .map(|f| SortField::new(f.data_type().clone()))
            .collect(),
    )?)
}

/// Part files a compaction replaced while scans were reading them: deleted
/// once the last such scan ends.
#[derive(Debug, Default)]
pub(crate) struct PartLeases {
    inner: Mutex<LeaseState>,
}

#[derive(Debug, Default)]
struct LeaseState {
    active: usize,
    retired: Vec<String>,
}

impl PartLeases {
    /// Keep every part file that exists now until the lease is dropped.
    pub fn acquire(self: &Arc<Self>, writer: PartWriter) -> PartLease {
        self.inner.lock().active += 1;
        PartLease {
            leases: Arc::clone(self),
            writer,
        }
    }

    /// Delete `keys` (no longer named by the shard) now, or when the scans
    /// running now have ended.
    pub fn retire(&self, writer: &PartWriter, keys: Vec<String>) {
        {
            let mut state = self.inner.lock();
            if state.active > 0 {
                state.retired.extend(keys);
                return;
            }
        }
        writer.delete(&keys);
    }
}

/// Held by a scan: part files stay while it lives.
pub(crate) struct PartLease {
    leases: Arc<PartLeases>,
    writer: PartWriter,
}

impl Drop for PartLease {
    fn drop(&mut self) {
        let retired = {
            let mut state = self.leases.inner.lock();
            state.active -= 1;
            if state.active > 0 {
                return;
            }
            std::mem::take(&mut state.retired)
        };
        if !retired.is_empty() {
            self.writer.delete(&retired);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retired_parts_wait_for_the_last_lease() {
        let dir = tempfile::tempdir().unwrap();
        let (blob, fence) = crate::open_local(dir.path()).unwrap();
        let writer = PartWriter::for_tests(GlobalId::User(1), Arc::clone(&blob), fence);
        for k in ["a", "b"] {
            blob.set(k, b"x").unwrap();
        }
        let leases = Arc::new(PartLeases::default());
        let first = leases.acquire(writer.clone());
        let second = leases.acquire(writer.clone());
        leases.retire(&writer, vec!["a".into()]);
        drop(first);
        assert!(blob.get("a").unwrap().is_some(), "a scan still reads it");
        drop(second);
        assert!(
            blob.get("a").unwrap().is_none(),
            "deleted with the last lease"
        );
        leases.retire(&writer, vec!["b".into()]);
        assert!(blob.get("b").unwrap().is_none(), "no scan: deleted at once");
    }
}

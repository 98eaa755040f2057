//! Consolidation: summing the diffs of equal rows.
//!
//! Rows are compared through Arrow's row format (`arrow::row`), which turns
//! any tuple of columns into bytes whose order and equality match the
//! columns'. Snapshots cancel retractions by hashing those bytes (linear
//! time); compaction, which must also group by time, sorts them.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, UInt32Array, UInt64Array};
use arrow::compute::{concat_batches, take};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, Rows, SortField};
use freshet_repr::{GlobalId, Timestamp};

use crate::batch::{data_columns, diffs, times};
use crate::error::{Result, StorageError};

/// Largest batch a snapshot returns; bigger results are split (zero-copy).
pub(crate) const SNAPSHOT_BATCH_ROWS: usize = 64 * 1024;

/// A stored batch of updates together with what is known about it.
#[derive(Clone, Debug)]
pub(crate) struct PartView {
    /// Updates: data columns, time, diff.
    pub updates: Arc<RecordBatch>,
    /// The largest time in the part.
    pub max_time: Timestamp,
}

fn converter(updates_schema: &SchemaRef) -> Result<RowConverter> {
    let n = updates_schema.fields().len();
    let fields = updates_schema.fields()[..n - 2]
        .iter()
        .map(|f| SortField::new(f.data_type().clone()))
        .collect();
    Ok(RowConverter::new(fields)?)
}

fn row_data(updates: &RecordBatch, converter: &RowConverter) -> Result<Rows> {
    let n = updates.num_columns();
    Ok(converter.convert_columns(&updates.columns()[..n - 2])?)
}

/// Consolidate updates for compaction: times advanced to at least `since`,
/// diffs summed per `(row, time)`, zeros dropped. Returns the batch and
/// whether it is in snapshot form (every time equals `since`, every diff
/// positive).
pub(crate) fn compact(
    id: GlobalId,
    updates_schema: &SchemaRef,
    parts: &[PartView],
    since: Timestamp,
) -> Result<(RecordBatch, bool)> {
    let batches: Vec<RecordBatch> = parts.iter().map(|p| p.updates.as_ref().clone()).collect();
    let all = concat_batches(updates_schema, &batches)?;
    let conv = converter(updates_schema)?;
    let rows = row_data(&all, &conv)?;
    let t: Vec<Timestamp> = times(&all)?
        .values()
        .iter()
        .map(|t| (*t).max(since))
        .collect();
    let d = diffs(&all)?.values();
    let mut order: Vec<u32> = (0..all.num_rows() as u32).collect();
    order.sort_unstable_by(|a, b| {
        let (a, b) = (*a as usize, *b as usize);
        rows.row(a).cmp(&rows.row(b)).then(t[a].cmp(&t[b]))
    });
    let mut keep_idx = Vec::new();
    let mut keep_time = Vec::new();
    let mut keep_diff = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let first = order[i] as usize;
        let mut sum: i64 = 0;
        let mut j = i;
        while j < order.len()
            && t[order[j] as usize] == t[first]
            && rows.row(order[j] as usize) == rows.row(first)
        {
            sum = sum.checked_add(d[order[j] as usize]).ok_or_else(|| {
                StorageError::Corruption(format!("diff overflow compacting {id}"))
            })?;
            j += 1;
        }
        if sum != 0 {
            keep_idx.push(first as u32);
            keep_time.push(t[first]);
            keep_diff.push(sum);
        }
        i = j;
    }
    let consolidated = keep_time.iter().all(|t| *t == since) && keep_diff.iter().all(|d| *d > 0);
    let data = data_columns(&all)?;
    let data = take_batch(&data, &UInt32Array::from(keep_idx))?;
    let mut columns: Vec<ArrayRef> = data.columns().to_vec();
    columns.push(Arc::new(UInt64Array::from(keep_time)));
    columns.push(Arc::new(Int64Array::from(keep_diff)));
    Ok((
        RecordBatch::try_new(Arc::clone(updates_schema), columns)?,
        consolidated,
    ))
}

pub(crate) fn take_batch(batch: &RecordBatch, idx: &UInt32Array) -> Result<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .map(|c| take(c.as_ref(), idx, None))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new_with_options(
        batch.schema(),
        columns,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(idx.len())),
    )?)
}

pub(crate) fn split(batch: RecordBatch) -> Vec<RecordBatch> {
    let n = batch.num_rows();
    if n == 0 {
        return vec![];
    }
    (0..n)
        .step_by(SNAPSHOT_BATCH_ROWS)
        .map(|off| batch.slice(off, SNAPSHOT_BATCH_ROWS.min(n - off)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::updates_schema;
    use arrow::array::{Array, Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::collections::HashMap;

    fn data_schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Utf8, true),
        ]))
    }

    fn part(rows: &[(Option<i32>, Option<&str>, u64, i64)]) -> PartView {
        let us = updates_schema(&data_schema());
        let batch = RecordBatch::try_new(
            us,
            vec![
                Arc::new(Int32Array::from(
                    rows.iter().map(|r| r.0).collect::<Vec<_>>(),
                )),
                Arc::new(StringArray::from(
                    rows.iter().map(|r| r.1).collect::<Vec<_>>(),
                )),
                Arc::new(UInt64Array::from(
                    rows.iter().map(|r| r.2).collect::<Vec<_>>(),
                )),
                Arc::new(Int64Array::from(
                    rows.iter().map(|r| r.3).collect::<Vec<_>>(),
                )),
            ],
        )
        .unwrap();
        PartView {
            max_time: rows.iter().map(|r| r.2).max().unwrap_or(0),
            updates: Arc::new(batch),
        }
    }

    fn rows_unsorted(batches: &[RecordBatch]) -> Vec<(Option<i32>, Option<String>)> {
        let mut out = vec![];
        for b in batches {
            let a = b.column(0).as_any().downcast_ref::<Int32Array>().unwrap();
            let s = b.column(1).as_any().downcast_ref::<StringArray>().unwrap();
            for i in 0..b.num_rows() {
                out.push((
                    a.is_valid(i).then(|| a.value(i)),
                    s.is_valid(i).then(|| s.value(i).to_string()),
                ));
            }
        }
        out
    }

    /// The multiset `parts` hold at `t`, computed the obvious way.
    fn naive(parts: &[PartView], t: Timestamp) -> Vec<(Option<i32>, Option<String>)> {
        let mut counts: HashMap<(Option<i32>, Option<String>), i64> = HashMap::new();
        for p in parts {
            let b = &p.updates;
            let rows = rows_unsorted(std::slice::from_ref(b));
            let ts = times(b).unwrap().values();
            let ds = diffs(b).unwrap().values();
            for (i, row) in rows.into_iter().enumerate() {
                if ts[i] <= t {
                    *counts.entry(row).or_default() += ds[i];
                }
            }
        }
        let mut out = vec![];
        for (row, n) in counts {
            assert!(n >= 0);
            for _ in 0..n {
                out.push(row.clone());
            }
        }
        out.sort();
        out
    }

    #[test]
    fn compaction_advances_times_and_preserves_later_snapshots() {
        let us = updates_schema(&data_schema());
        let parts = vec![
            part(&[(Some(1), Some("x"), 1, 1), (Some(2), None, 2, 1)]),
            part(&[(Some(1), Some("x"), 3, -1), (Some(3), None, 7, 1)]),
        ];
        let (batch, consolidated) = compact(GlobalId::User(1), &us, &parts, 4).unwrap();
        assert!(!consolidated, "time 7 is beyond since");
        assert_eq!(batch.num_rows(), 2);
        let compacted = vec![PartView {
            max_time: 7,
            updates: Arc::new(batch),
        }];
        for t in [4, 6, 7, 10] {
            assert_eq!(naive(&compacted, t), naive(&parts, t), "at {t}");
        }
    }
}

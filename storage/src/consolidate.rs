//! Consolidation: summing the diffs of equal rows.
//!
//! Rows are compared through Arrow's row format (`arrow::row`), which turns
//! any tuple of columns into bytes whose order and equality match the
//! columns'. Snapshots cancel retractions by hashing those bytes (linear
//! time); compaction, which must also group by time, sorts them.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, UInt32Array, UInt64Array};
use arrow::compute::{concat_batches, filter_record_batch, take};
use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, Rows, SortField};
use freshet_repr::{GlobalId, Timestamp};

use crate::batch::{data_columns, diffs, retag, times};
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
    /// Rows are distinct and every diff is positive.
    pub consolidated: bool,
    /// Additionally every diff is exactly one.
    pub unit_diffs: bool,
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

/// Contents of `parts` as of `as_of`: each distinct row repeated by its net
/// multiplicity, as batches of `data_schema`.
pub(crate) fn snapshot(
    id: GlobalId,
    data_schema: &SchemaRef,
    updates_schema: &SchemaRef,
    parts: &[PartView],
    as_of: Timestamp,
) -> Result<Vec<RecordBatch>> {
    // Fast path: one consolidated part entirely at or before `as_of`.
    if let [part] = parts
        && part.consolidated
        && part.max_time <= as_of
    {
        let data = data_columns(&part.updates)?;
        let data = if part.unit_diffs {
            data
        } else {
            let idx = repeat_indices(diffs(&part.updates)?.values().iter().copied())?;
            take_batch(&data, &idx)?
        };
        return Ok(split(retag(data, data_schema)?));
    }

    let mut selected = Vec::with_capacity(parts.len());
    for part in parts {
        if part.max_time <= as_of {
            selected.push(part.updates.as_ref().clone());
        } else {
            let keep = arrow::compute::kernels::cmp::lt_eq(
                times(&part.updates)?,
                &UInt64Array::new_scalar(as_of),
            )?;
            selected.push(filter_record_batch(&part.updates, &keep)?);
        }
    }
    // Without retractions nothing can cancel: each row is repeated by its
    // diff, part by part, without copying the parts together (the common
    // case for tables that mostly grow, and a bulk load's staged parts).
    let mut positive = true;
    for b in &selected {
        positive &= diffs(b)?.values().iter().all(|x| *x > 0);
    }
    if positive {
        let mut out = Vec::new();
        for b in selected.iter().filter(|b| b.num_rows() > 0) {
            let d = diffs(b)?.values();
            let data = data_columns(b)?;
            let data = if d.iter().all(|x| *x == 1) {
                data
            } else {
                take_batch(&data, &repeat_indices(d.iter().copied())?)?
            };
            out.extend(split(retag(data, data_schema)?));
        }
        return Ok(out);
    }
    let all = concat_batches(updates_schema, &selected)?;
    drop(selected);
    let d = diffs(&all)?.values();
    let data = data_columns(&all)?;
    // Otherwise cancel retractions against insertions by hashing rows in
    // Arrow's row format: linear in the input, no sort.
    let conv = converter(updates_schema)?;
    let rows = row_data(&all, &conv)?;
    let mut retracted: HashMap<arrow::row::Row<'_>, i128> = HashMap::new();
    for (i, diff) in d.iter().enumerate() {
        if *diff < 0 {
            *retracted.entry(rows.row(i)).or_default() += -(*diff as i128);
        }
    }
    let mut out: Vec<u32> = Vec::with_capacity(all.num_rows());
    for (i, diff) in d.iter().enumerate() {
        if *diff <= 0 {
            continue;
        }
        let mut keep = *diff as i128;
        if let Some(owed) = retracted.get_mut(&rows.row(i)) {
            let cancel = (*owed).min(keep);
            *owed -= cancel;
            keep -= cancel;
        }
        for _ in 0..keep {
            out.push(i as u32);
        }
    }
    if let Some(owed) = retracted.values().find(|owed| **owed > 0) {
        return Err(StorageError::NegativeMultiplicity {
            id,
            as_of,
            diff: -(*owed as i64),
        });
    }
    let result = take_batch(&data, &UInt32Array::from(out))?;
    Ok(split(retag(result, data_schema)?))
}

/// Consolidate updates for compaction: times advanced to at least `since`,
/// diffs summed per `(row, time)`, zeros dropped. Returns the batch and
/// whether it is in snapshot form (every time equals `since`, every diff
/// positive) and whether every diff is one.
pub(crate) fn compact(
    id: GlobalId,
    updates_schema: &SchemaRef,
    parts: &[PartView],
    since: Timestamp,
) -> Result<(RecordBatch, bool, bool)> {
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
    let unit = keep_diff.iter().all(|d| *d == 1);
    let data = data_columns(&all)?;
    let data = take_batch(&data, &UInt32Array::from(keep_idx))?;
    let mut columns: Vec<ArrayRef> = data.columns().to_vec();
    columns.push(Arc::new(UInt64Array::from(keep_time)));
    columns.push(Arc::new(Int64Array::from(keep_diff)));
    Ok((
        RecordBatch::try_new(Arc::clone(updates_schema), columns)?,
        consolidated,
        unit,
    ))
}

fn repeat_indices(diffs: impl Iterator<Item = i64>) -> Result<UInt32Array> {
    let mut out = Vec::new();
    for (i, d) in diffs.enumerate() {
        for _ in 0..d.max(0) {
            out.push(i as u32);
        }
    }
    Ok(UInt32Array::from(out))
}

fn take_batch(batch: &RecordBatch, idx: &UInt32Array) -> Result<RecordBatch> {
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

fn split(batch: RecordBatch) -> Vec<RecordBatch> {
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
            consolidated: false,
            unit_diffs: false,
        }
    }

    fn rows_of(batches: &[RecordBatch]) -> Vec<(Option<i32>, Option<String>)> {
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
        out.sort();
        out
    }

    #[test]
    fn snapshot_sums_diffs_and_respects_as_of() {
        let ds = data_schema();
        let us = updates_schema(&ds);
        let parts = vec![
            part(&[(Some(1), Some("x"), 1, 1), (Some(2), None, 1, 2)]),
            part(&[(Some(1), Some("x"), 3, -1), (None, Some("y"), 5, 1)]),
        ];
        let at = |t| rows_of(&snapshot(GlobalId::User(1), &ds, &us, &parts, t).unwrap());
        assert_eq!(at(0), vec![]);
        assert_eq!(
            at(2),
            vec![
                (Some(1), Some("x".into())),
                (Some(2), None),
                (Some(2), None)
            ]
        );
        assert_eq!(at(4), vec![(Some(2), None), (Some(2), None)]);
        assert_eq!(
            at(9),
            vec![(None, Some("y".into())), (Some(2), None), (Some(2), None)]
        );
    }

    #[test]
    fn negative_multiplicity_is_an_error() {
        let ds = data_schema();
        let us = updates_schema(&ds);
        let parts = vec![part(&[(Some(1), Some("x"), 1, -1)])];
        let err = snapshot(GlobalId::User(1), &ds, &us, &parts, 5).unwrap_err();
        assert!(matches!(
            err,
            StorageError::NegativeMultiplicity { diff: -1, .. }
        ));
    }

    #[test]
    fn compaction_advances_times_and_preserves_later_snapshots() {
        let ds = data_schema();
        let us = updates_schema(&ds);
        let parts = vec![
            part(&[(Some(1), Some("x"), 1, 1), (Some(2), None, 2, 1)]),
            part(&[(Some(1), Some("x"), 3, -1), (Some(3), None, 7, 1)]),
        ];
        let (batch, consolidated, _) = compact(GlobalId::User(1), &us, &parts, 4).unwrap();
        assert!(!consolidated, "time 7 is beyond since");
        assert_eq!(batch.num_rows(), 2);
        let compacted = vec![PartView {
            max_time: 7,
            updates: Arc::new(batch),
            consolidated,
            unit_diffs: false,
        }];
        for t in [4, 6, 7, 10] {
            assert_eq!(
                rows_of(&snapshot(GlobalId::User(1), &ds, &us, &compacted, t).unwrap()),
                rows_of(&snapshot(GlobalId::User(1), &ds, &us, &parts, t).unwrap()),
                "at {t}"
            );
        }
    }
}

//! A transaction's own writes, seen by its reads: a table's snapshot at
//! the transaction's read time with the transaction's buffered changes
//! applied, as PostgreSQL shows a transaction its uncommitted rows.

use std::collections::HashMap;

use arrow::array::{Array, BooleanArray, Int64Array, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::row::{OwnedRow, RowConverter, SortField};

/// `base` (a snapshot: each row repeated by its multiplicity) changed by
/// `pending` (batches of data columns plus a trailing `diff` column, as
/// buffered for COMMIT): retracted rows removed, inserted rows added.
pub fn apply(
    schema: &SchemaRef,
    base: Vec<RecordBatch>,
    pending: &[RecordBatch],
) -> Result<Vec<RecordBatch>, ArrowError> {
    if pending.iter().all(|b| b.num_rows() == 0) {
        return Ok(base);
    }
    let fields = schema
        .fields()
        .iter()
        .map(|f| SortField::new(f.data_type().clone()))
        .collect();
    let converter = RowConverter::new(fields)?;
    let mut net: HashMap<OwnedRow, i64> = HashMap::new();
    for batch in pending.iter().filter(|b| b.num_rows() > 0) {
        let n = batch.num_columns() - 1;
        let diffs = batch
            .column(n)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| ArrowError::SchemaError("a write's diff column is not int8".into()))?;
        let rows = converter.convert_columns(&batch.columns()[..n])?;
        for (i, row) in rows.iter().enumerate() {
            *net.entry(row.owned()).or_default() += diffs.value(i);
        }
    }
    net.retain(|_, d| *d != 0);
    let mut out = Vec::with_capacity(base.len() + 1);
    let retracts = net.values().any(|d| *d < 0);
    for batch in base {
        if !retracts || batch.num_rows() == 0 {
            out.push(batch);
            continue;
        }
        let rows = converter.convert_columns(batch.columns())?;
        let keep: BooleanArray = rows
            .iter()
            .map(|row| match net.get_mut(&row.owned()) {
                Some(d) if *d < 0 => {
                    *d += 1;
                    Some(false)
                }
                _ => Some(true),
            })
            .collect();
        out.push(filter_record_batch(&batch, &keep)?);
    }
    let added: Vec<&OwnedRow> = net
        .iter()
        .filter(|(_, d)| **d > 0)
        .flat_map(|(row, d)| std::iter::repeat_n(row, usize::try_from(*d).unwrap_or(0)))
        .collect();
    if !added.is_empty() {
        let columns = converter.convert_rows(added.iter().map(|r| r.row()))?;
        out.push(RecordBatch::try_new(schema.clone(), columns)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int32Array};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("a", DataType::Int32, true)]))
    }

    fn data(values: &[i32]) -> RecordBatch {
        let a: ArrayRef = Arc::new(Int32Array::from(values.to_vec()));
        RecordBatch::try_new(schema(), vec![a]).unwrap()
    }

    fn change(values: &[i32], diff: i64) -> RecordBatch {
        let s = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("diff", DataType::Int64, false),
        ]));
        let a: ArrayRef = Arc::new(Int32Array::from(values.to_vec()));
        let d: ArrayRef = Arc::new(Int64Array::from(vec![diff; values.len()]));
        RecordBatch::try_new(s, vec![a, d]).unwrap()
    }

    fn sorted(batches: Vec<RecordBatch>) -> Vec<i32> {
        let mut out: Vec<i32> = batches
            .iter()
            .flat_map(|b| {
                let a = b.column(0).as_any().downcast_ref::<Int32Array>().unwrap();
                a.values().to_vec()
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn inserts_and_retractions_apply_to_the_snapshot() {
        let base = vec![data(&[1, 2, 2, 3])];
        let pending = [change(&[2, 3], -1), change(&[4, 4], 1)];
        let out = apply(&schema(), base, &pending).unwrap();
        assert_eq!(sorted(out), vec![1, 2, 4, 4]);
    }

    #[test]
    fn an_insert_then_its_delete_leaves_nothing() {
        let pending = [change(&[7], 1), change(&[7], -1)];
        let out = apply(&schema(), vec![data(&[1])], &pending).unwrap();
        assert_eq!(sorted(out), vec![1]);
    }

    #[test]
    fn an_update_replaces_the_old_row() {
        let pending = [change(&[1], -1), change(&[10], 1)];
        let out = apply(&schema(), vec![data(&[1, 5])], &pending).unwrap();
        assert_eq!(sorted(out), vec![5, 10]);
    }
}

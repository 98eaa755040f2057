//! How a maintained view's output lies in its shard: the view's columns,
//! then one error column.
//!
//! A row whose error column is NULL is a row of the view; a row whose
//! error column is set stands for an error the defining query raises at
//! that time (its other columns are NULL). Keeping errors in the shard,
//! beside the rows and under the same times, means a read at any readable
//! time sees exactly the errors of that time (right after a restart, as of
//! an earlier time, through a view over the view), and a dataflow reading
//! the view inherits them as errors of its own.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;

use crate::error::DataflowError;

/// The name of the error column.
pub const ERROR_COLUMN: &str = "__freshet_error";

/// Field metadata marking the error column (a table may have a column of
/// any name; only a view's shard has this mark).
const ROLE_KEY: &str = "freshet.role";
const ROLE_ERRORS: &str = "errors";

/// The shard schema of a view with `columns`.
pub fn shard_schema(columns: &Schema) -> SchemaRef {
    let mut fields: Vec<Arc<Field>> = columns.fields().iter().cloned().collect();
    let errors = Field::new(ERROR_COLUMN, DataType::Utf8, true)
        .with_metadata([(ROLE_KEY.to_string(), ROLE_ERRORS.to_string())].into());
    fields.push(Arc::new(errors));
    Arc::new(Schema::new_with_metadata(
        fields,
        columns.metadata().clone(),
    ))
}

/// The position of the error column among `schema`'s fields, if it has one
/// (tables do not). Updates batches end with time and diff after it.
pub fn error_column(schema: &Schema) -> Option<usize> {
    schema
        .fields()
        .iter()
        .rposition(|f| f.metadata().get(ROLE_KEY).is_some_and(|r| r == ROLE_ERRORS))
}

/// The error an error-column value stands for.
pub(crate) fn decode_error(value: &str) -> DataflowError {
    match value.split_once(':') {
        Some((code, message)) => DataflowError {
            code: code.to_string(),
            message: message.to_string(),
        },
        None => DataflowError::internal(value),
    }
}

/// The error-column value of `e`.
pub(crate) fn encode_error(e: &DataflowError) -> String {
    format!("{}:{}", e.code, e.message)
}

/// The errors of `batch` by row (`None`: a row of the view), if it has an
/// error column at `index`.
pub(crate) fn row_errors(
    batch: &RecordBatch,
    index: usize,
) -> Result<Vec<Option<DataflowError>>, ArrowError> {
    let errors = batch
        .column(index)
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| ArrowError::SchemaError(format!("{ERROR_COLUMN} is not text")))?;
    Ok((0..batch.num_rows())
        .map(|i| (!errors.is_null(i)).then(|| decode_error(errors.value(i))))
        .collect())
}

/// A view's snapshot as the query sees it: the first error present at the
/// snapshot's time, or the rows without the error column.
pub fn checked_snapshot(
    batches: Vec<RecordBatch>,
) -> Result<Vec<RecordBatch>, CheckedSnapshotError> {
    let mut out = Vec::with_capacity(batches.len());
    for batch in batches {
        let Some(index) = error_column(batch.schema_ref()) else {
            out.push(batch);
            continue;
        };
        let errors = batch
            .column(index)
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| {
                CheckedSnapshotError::Arrow(ArrowError::SchemaError(format!(
                    "{ERROR_COLUMN} is not text"
                )))
            })?;
        if let Some(i) = (0..errors.len()).find(|&i| errors.is_valid(i)) {
            return Err(CheckedSnapshotError::Query(decode_error(errors.value(i))));
        }
        let mut batch = batch;
        batch.remove_column(index);
        out.push(batch);
    }
    Ok(out)
}

/// Why a view's snapshot cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum CheckedSnapshotError {
    /// The view's query fails at that time.
    #[error("{}", .0.message)]
    Query(DataflowError),
    /// The shard's contents are malformed.
    #[error(transparent)]
    Arrow(#[from] ArrowError),
}

/// The error column of a batch of `rows` data rows then `errors`: NULL for
/// each row, then each error.
pub(crate) fn error_values(rows: usize, errors: &[&DataflowError]) -> ArrayRef {
    let values =
        std::iter::repeat_n(None, rows).chain(errors.iter().map(|e| Some(encode_error(e))));
    Arc::new(values.collect::<StringArray>())
}

#[cfg(test)]
mod tests {
    use arrow::array::Int32Array;

    use super::*;

    fn view_batch(values: Vec<Option<i32>>, errors: Vec<Option<&str>>) -> RecordBatch {
        let schema = shard_schema(&Schema::new(vec![Field::new("a", DataType::Int32, true)]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(values)),
                Arc::new(StringArray::from(errors)),
            ],
        )
        .expect("batch")
    }

    #[test]
    fn snapshots_without_errors_lose_the_error_column() {
        let out = checked_snapshot(vec![view_batch(vec![Some(1), None], vec![None, None])])
            .expect("no errors");
        assert_eq!(out[0].num_columns(), 1);
        assert_eq!(out[0].num_rows(), 2);
    }

    #[test]
    fn an_error_row_fails_the_snapshot_with_its_sqlstate() {
        let e = DataflowError {
            code: freshet_repr::sqlstate::DIVISION_BY_ZERO.into(),
            message: "division by zero: a: b".into(),
        };
        let encoded = encode_error(&e);
        let batch = view_batch(vec![Some(1), None], vec![None, Some(&encoded)]);
        match checked_snapshot(vec![batch]) {
            Err(CheckedSnapshotError::Query(got)) => assert_eq!(got, e),
            other => panic!("expected the error, got {other:?}"),
        }
    }
}

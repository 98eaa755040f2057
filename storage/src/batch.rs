//! Batches of updates as Arrow record batches, and their file encodings.
//!
//! An *updates* batch has the collection's data columns followed by
//! [`TIME_COLUMN`] (`UInt64`) and [`DIFF_COLUMN`] (`Int64`). Table writers
//! hand storage data columns plus a diff column; storage adds the time.

use std::io::Cursor;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::ipc::reader::{FileReader, StreamReader};
use arrow::ipc::writer::{FileWriter, StreamWriter};
use freshet_repr::{DIFF_COLUMN, TIME_COLUMN, Timestamp};

use crate::error::{Result, StorageError};

/// The schema of updates to a collection with `data` columns.
pub fn updates_schema(data: &Schema) -> SchemaRef {
    let mut fields: Vec<Field> = data.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(TIME_COLUMN, DataType::UInt64, false));
    fields.push(Field::new(DIFF_COLUMN, DataType::Int64, false));
    Arc::new(Schema::new(fields))
}

/// The schema of a table write: data columns plus a diff column.
pub fn write_schema(data: &Schema) -> SchemaRef {
    let mut fields: Vec<Field> = data.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(DIFF_COLUMN, DataType::Int64, false));
    Arc::new(Schema::new(fields))
}

/// Build a table write from data rows that all carry the same `diff`.
pub fn write_batch(data: &RecordBatch, diff: i64) -> Result<RecordBatch> {
    let mut columns: Vec<ArrayRef> = data.columns().to_vec();
    columns.push(Arc::new(Int64Array::from_value(diff, data.num_rows())));
    Ok(RecordBatch::try_new(write_schema(&data.schema()), columns)?)
}

/// Stamp a table write (data + diff) with its commit time.
pub(crate) fn stamp(write: &RecordBatch, ts: Timestamp) -> Result<RecordBatch> {
    let n = write.num_columns();
    if n == 0 || write.schema().field(n - 1).name() != DIFF_COLUMN {
        return Err(StorageError::InvalidUsage(
            "table write must end with a diff column".into(),
        ));
    }
    let data_fields: Vec<Field> = write.schema().fields()[..n - 1]
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let schema = updates_schema(&Schema::new(data_fields));
    let mut columns: Vec<ArrayRef> = write.columns()[..n - 1].to_vec();
    columns.push(Arc::new(UInt64Array::from_value(ts, write.num_rows())));
    columns.push(Arc::clone(write.column(n - 1)));
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// The time column of an updates batch.
pub(crate) fn times(updates: &RecordBatch) -> Result<&UInt64Array> {
    let n = updates.num_columns();
    updates
        .column(n.checked_sub(2).ok_or_else(bad_updates)?)
        .as_any()
        .downcast_ref::<UInt64Array>()
        .ok_or_else(bad_updates)
}

/// The diff column of an updates batch.
pub(crate) fn diffs(updates: &RecordBatch) -> Result<&Int64Array> {
    let n = updates.num_columns();
    updates
        .column(n.checked_sub(1).ok_or_else(bad_updates)?)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(bad_updates)
}

fn bad_updates() -> StorageError {
    StorageError::InvalidUsage("not an updates batch".into())
}

/// The data columns of an updates batch (time and diff removed).
pub fn data_columns(updates: &RecordBatch) -> Result<RecordBatch> {
    let n = updates.num_columns();
    if n < 2 {
        return Err(bad_updates());
    }
    Ok(updates.project(&(0..n - 2).collect::<Vec<_>>())?)
}

/// Give a batch exactly `schema` (same columns; field names and metadata
/// as the collection declares them).
pub(crate) fn retag(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    if batch.schema() == *schema {
        return Ok(batch);
    }
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        batch.columns().to_vec(),
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )?)
}

/// Encode batches as an Arrow IPC file (the on-disk format of shard parts).
pub(crate) fn encode_file(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    {
        let mut w = FileWriter::try_new(&mut buf, schema)?;
        for b in batches {
            w.write(b)?;
        }
        w.finish()?;
    }
    Ok(buf)
}

/// Decode an Arrow IPC file.
pub(crate) fn decode_file(data: &[u8]) -> Result<Vec<RecordBatch>> {
    let reader = FileReader::try_new(Cursor::new(data), None)?;
    Ok(reader.collect::<Result<Vec<_>, _>>()?)
}

/// Encode one batch as an Arrow IPC stream (the format inside log records).
pub(crate) fn encode_stream(batch: &RecordBatch) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    {
        let mut w = StreamWriter::try_new(&mut buf, &batch.schema())?;
        w.write(batch)?;
        w.finish()?;
    }
    Ok(buf)
}

/// Decode an Arrow IPC stream holding one or more batches of one schema.
pub(crate) fn decode_stream(data: &[u8]) -> Result<Vec<RecordBatch>> {
    let reader = StreamReader::try_new(Cursor::new(data), None)?;
    Ok(reader.collect::<Result<Vec<_>, _>>()?)
}

/// Approximate in-memory size of batches.
pub(crate) fn total_bytes(batches: &[RecordBatch]) -> usize {
    batches
        .iter()
        .map(|b| {
            b.columns()
                .iter()
                .map(|c| c.get_array_memory_size())
                .sum::<usize>()
        })
        .sum()
}

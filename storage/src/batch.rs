//! Batches of updates as Arrow record batches, and their file encodings.
//!
//! An *updates* batch has the collection's data columns followed by
//! [`TIME_COLUMN`] (`UInt64`) and [`DIFF_COLUMN`] (`Int64`). Table writers
//! hand storage data columns plus a diff column; storage adds the time.

use std::fmt;
use std::io::Cursor;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayData, ArrayRef, Int64Array, MutableArrayData, RecordBatch, UInt64Array, make_array,
    new_empty_array,
};
use arrow::buffer::Buffer;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::ipc::convert::fb_to_schema;
use arrow::ipc::reader::{FileDecoder, FileReader, StreamReader, read_footer_length};
use arrow::ipc::writer::{FileWriter, StreamWriter};
use arrow::ipc::{Block, Footer, MetadataVersion, root_as_footer};
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

/// Encode batches as an Arrow IPC file (the on-disk format of shard
/// parts), with `metadata` in its footer.
pub(crate) fn encode_file(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    metadata: &[(&str, String)],
) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    {
        let mut w = FileWriter::try_new(&mut buf, schema)?;
        for (key, value) in metadata {
            w.write_metadata(*key, value.clone());
        }
        for b in batches {
            w.write(b)?;
        }
        w.finish()?;
    }
    Ok(buf)
}

/// How many bytes at the end of an Arrow IPC file hold its footer (with
/// its length and the closing magic), from the file's last 10 bytes.
pub(crate) fn footer_span(end: &[u8]) -> Result<usize> {
    let trailer: [u8; 10] = end
        .len()
        .checked_sub(10)
        .and_then(|start| end.get(start..))
        .and_then(|t| t.try_into().ok())
        .ok_or_else(|| corrupt_file("too short"))?;
    read_footer_length(trailer)?
        .checked_add(10)
        .ok_or_else(|| corrupt_file("bad footer length"))
}

/// The footer of an Arrow IPC file, from (at least) its last
/// [`footer_span`] bytes.
fn footer(end: &[u8]) -> Result<Footer<'_>> {
    let span = footer_span(end)?;
    let start = end
        .len()
        .checked_sub(span)
        .ok_or_else(|| corrupt_file("footer longer than the file"))?;
    root_as_footer(&end[start..end.len() - 10]).map_err(corrupt_file)
}

/// The value under `key` in the footer metadata of an Arrow IPC file,
/// from (at least) its last [`footer_span`] bytes: what a reader learns of
/// a part without reading its batches.
pub(crate) fn footer_value(end: &[u8], key: &str) -> Result<Option<String>> {
    let footer = footer(end)?;
    Ok(footer.custom_metadata().and_then(|kvs| {
        kvs.iter()
            .find(|kv| kv.key() == Some(key))
            .and_then(|kv| kv.value().map(str::to_string))
    }))
}

/// Decode an Arrow IPC file.
pub(crate) fn decode_file(data: &[u8]) -> Result<Vec<RecordBatch>> {
    let reader = FileReader::try_new(Cursor::new(data), None)?;
    Ok(reader.collect::<Result<Vec<_>, _>>()?)
}

/// An Arrow IPC file held in memory, read column by column: only the
/// columns asked for are decoded, straight out of the file's bytes, then
/// copied into buffers of their own, so a column kept (in the part cache)
/// does not keep the whole file alive.
pub(crate) struct IpcFile {
    bytes: Buffer,
    schema: SchemaRef,
    version: MetadataVersion,
    dictionaries: Vec<Block>,
    batches: Vec<Block>,
}

fn corrupt_file(what: impl fmt::Display) -> StorageError {
    StorageError::Corruption(format!("not a readable Arrow IPC file: {what}"))
}

impl IpcFile {
    /// Parse the file's footer (its schema and where its batches are).
    pub fn open(bytes: Buffer) -> Result<Self> {
        let footer = footer(&bytes)?;
        let schema = Arc::new(fb_to_schema(
            footer.schema().ok_or_else(|| corrupt_file("no schema"))?,
        ));
        Ok(IpcFile {
            schema,
            version: footer.version(),
            dictionaries: footer
                .dictionaries()
                .map(|b| b.iter().copied().collect())
                .unwrap_or_default(),
            batches: footer
                .recordBatches()
                .map(|b| b.iter().copied().collect())
                .unwrap_or_default(),
            bytes: bytes.clone(),
        })
    }

    /// The file's schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The bytes of a block (its message and body).
    fn block(&self, block: &Block) -> Result<Buffer> {
        let start = usize::try_from(block.offset()).map_err(corrupt_file)?;
        let len = usize::try_from(block.metaDataLength())
            .ok()
            .zip(usize::try_from(block.bodyLength()).ok())
            .and_then(|(meta, body)| meta.checked_add(body))
            .ok_or_else(|| corrupt_file("bad block length"))?;
        if start
            .checked_add(len)
            .is_none_or(|end| end > self.bytes.len())
        {
            return Err(corrupt_file("block beyond the end of the file"));
        }
        Ok(self.bytes.slice_with_length(start, len))
    }

    /// Columns `projection` (indices of [`Self::schema`]) over every batch
    /// of the file, each one array; and the file's row count.
    pub fn read_columns(&self, projection: &[usize]) -> Result<(Vec<ArrayRef>, usize)> {
        if let Some(bad) = projection
            .iter()
            .find(|c| **c >= self.schema.fields().len())
        {
            return Err(corrupt_file(format!("no column {bad}")));
        }
        let mut decoder = FileDecoder::new(Arc::clone(&self.schema), self.version)
            .with_projection(projection.to_vec());
        for block in &self.dictionaries {
            decoder.read_dictionary(block, &self.block(block)?)?;
        }
        let mut pieces: Vec<Vec<ArrayRef>> = vec![Vec::new(); projection.len()];
        let mut rows = 0;
        for block in &self.batches {
            if let Some(batch) = decoder.read_record_batch(block, &self.block(block)?)? {
                rows += batch.num_rows();
                for (piece, column) in pieces.iter_mut().zip(batch.columns()) {
                    piece.push(Arc::clone(column));
                }
            }
        }
        let columns = pieces
            .iter()
            .zip(projection)
            .map(|(piece, c)| compact(piece, self.schema.field(*c).data_type()))
            .collect::<Result<_>>()?;
        Ok((columns, rows))
    }
}

/// One array holding `pieces` in order, in buffers of its own.
fn compact(pieces: &[ArrayRef], data_type: &DataType) -> Result<ArrayRef> {
    let data: Vec<ArrayData> = pieces.iter().map(|p| p.to_data()).collect();
    if data.is_empty() {
        return Ok(new_empty_array(data_type));
    }
    let len = data.iter().map(ArrayData::len).sum();
    let mut out = MutableArrayData::new(data.iter().collect(), false, len);
    for (i, d) in data.iter().enumerate() {
        out.try_extend(i, 0, d.len())?;
    }
    Ok(make_array(out.freeze()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::StringArray;

    fn file() -> (RecordBatch, Vec<u8>) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3])),
                Arc::new(StringArray::from(vec![Some("a"), None, Some("c")])),
            ],
        )
        .expect("batch");
        let bytes = encode_file(
            &schema,
            &[batch.slice(0, 2), batch.slice(2, 1)],
            &[("note", "kept".into())],
        )
        .expect("encode");
        (batch, bytes)
    }

    #[test]
    fn columns_read_alone_equal_the_whole_file_and_own_their_buffers() {
        let (batch, bytes) = file();
        let len = bytes.len();
        let file = IpcFile::open(Buffer::from(bytes.as_slice())).expect("open");
        let (columns, rows) = file.read_columns(&[1]).expect("read");
        assert_eq!(rows, 3);
        assert_eq!(columns.len(), 1);
        assert_eq!(columns[0].as_ref(), batch.column(1).as_ref());
        // Two batches made one array, in buffers sized to it, not views
        // of the file's bytes.
        assert!(columns[0].get_array_memory_size() < len);
        // The footer's metadata, from the whole file and from its end.
        let span = footer_span(&bytes[len - 10..]).expect("span");
        assert!(span < len);
        for end in [&bytes[..], &bytes[len - span..]] {
            assert_eq!(
                footer_value(end, "note").expect("footer"),
                Some("kept".to_string())
            );
            assert_eq!(footer_value(end, "other").expect("footer"), None);
        }
        assert!(footer_value(&bytes[len - span + 1..], "note").is_err());
    }

    #[test]
    fn damaged_files_are_errors() {
        let (_, bytes) = file();
        for damaged in [
            Vec::new(),
            bytes[..bytes.len() / 2].to_vec(),
            bytes[bytes.len() - 12..].to_vec(),
            vec![0xff; bytes.len()],
        ] {
            let read = IpcFile::open(Buffer::from_vec(damaged)).and_then(|f| f.read_columns(&[0]));
            assert!(read.is_err());
        }
        let file = IpcFile::open(Buffer::from_vec(bytes)).expect("open");
        assert!(file.read_columns(&[2]).is_err(), "no third column");
    }
}

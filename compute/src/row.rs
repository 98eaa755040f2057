//! The owned record type dataflows move: a row in Arrow's row format.
//!
//! Arrow's row format encodes a tuple of columns as bytes whose equality
//! and order match the columns', and encodes each column independently, so
//! the concatenation of two rows' bytes is the row of the concatenated
//! schemas. That makes rows cheap to hash, compare, arrange and join, while
//! every computation on values converts a whole batch of rows back to Arrow
//! at once and runs DataFusion kernels over it.

use std::fmt;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::row::{RowConverter, SortField};
use serde::{Deserialize, Serialize};

/// One record: a tuple of values in Arrow's row format.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct Row(Vec<u8>);

impl Row {
    /// The encoded bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The row of this row's columns followed by `other`'s.
    pub fn concat(&self, other: &Row) -> Row {
        let mut bytes = Vec::with_capacity(self.0.len() + other.0.len());
        bytes.extend_from_slice(&self.0);
        bytes.extend_from_slice(&other.0);
        Row(bytes)
    }

    /// A row of these bytes, for tests that need rows of a known order.
    #[cfg(test)]
    pub(crate) fn from_bytes(bytes: Vec<u8>) -> Row {
        Row(bytes)
    }
}

impl fmt::Debug for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Row({} bytes)", self.0.len())
    }
}

/// Converts between Arrow batches of one schema and [`Row`]s.
pub struct RowCodec {
    schema: SchemaRef,
    converter: RowConverter,
}

impl fmt::Debug for RowCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowCodec")
            .field("schema", &self.schema)
            .finish()
    }
}

impl RowCodec {
    /// A codec for rows of `schema`.
    pub fn new(schema: SchemaRef) -> Result<Self, ArrowError> {
        let fields = schema
            .fields()
            .iter()
            .map(|f| SortField::new(f.data_type().clone()))
            .collect();
        Ok(RowCodec {
            converter: RowConverter::new(fields)?,
            schema,
        })
    }

    /// The schema rows decode to.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Encode every row of a batch.
    pub fn encode(&self, batch: &RecordBatch) -> Result<Vec<Row>, ArrowError> {
        self.encode_columns(batch.columns(), batch.num_rows())
    }

    /// Encode `num_rows` rows from columns of this codec's types (the
    /// count matters for relations without columns).
    pub fn encode_columns(
        &self,
        columns: &[arrow::array::ArrayRef],
        num_rows: usize,
    ) -> Result<Vec<Row>, ArrowError> {
        if columns.is_empty() {
            return Ok(vec![Row::default(); num_rows]);
        }
        let normalized;
        let columns = if columns.iter().any(|c| is_float(c.data_type())) {
            normalized = columns.iter().map(normalize_float).collect::<Vec<_>>();
            &normalized[..]
        } else {
            columns
        };
        let rows = self.converter.convert_columns(columns)?;
        Ok((0..rows.num_rows())
            .map(|i| Row(rows.row(i).as_ref().to_vec()))
            .collect())
    }

    /// The row whose every column is NULL (the padding of outer joins).
    pub fn null_row(&self) -> Result<Row, ArrowError> {
        let columns: Vec<arrow::array::ArrayRef> = self
            .schema
            .fields()
            .iter()
            .map(|f| arrow::array::new_null_array(f.data_type(), 1))
            .collect();
        let mut rows = self.encode_columns(&columns, 1)?;
        rows.pop()
            .ok_or_else(|| ArrowError::ComputeError("no row encoded".into()))
    }

    /// Decode rows into one batch.
    pub fn decode<'a>(
        &self,
        rows: impl IntoIterator<Item = &'a Row>,
    ) -> Result<RecordBatch, ArrowError> {
        let parser = self.converter.parser();
        let rows: Vec<&Row> = rows.into_iter().collect();
        let n = rows.len();
        let columns = self
            .converter
            .convert_rows(rows.into_iter().map(|r| parser.parse(&r.0)))?;
        RecordBatch::try_new_with_options(
            std::sync::Arc::clone(&self.schema),
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(n)),
        )
    }
}

fn is_float(t: &arrow::datatypes::DataType) -> bool {
    use arrow::datatypes::DataType;
    matches!(t, DataType::Float16 | DataType::Float32 | DataType::Float64)
}

/// SQL compares `-0.0` equal to `0.0` and every NaN equal to every other,
/// but Arrow's row format orders floats bitwise (`total_cmp`). Rows carry
/// one spelling of each, so joins, grouping and DISTINCT see them as SQL
/// does (a view stores `-0` as `0`).
fn normalize_float(column: &arrow::array::ArrayRef) -> arrow::array::ArrayRef {
    use arrow::array::AsArray;
    use arrow::compute::kernels::arity::unary;
    use arrow::datatypes::{DataType, Float32Type, Float64Type};
    match column.data_type() {
        DataType::Float64 => std::sync::Arc::new(unary::<_, _, Float64Type>(
            column.as_primitive::<Float64Type>(),
            |v| {
                if v == 0.0 {
                    0.0
                } else if v.is_nan() {
                    f64::NAN
                } else {
                    v
                }
            },
        )),
        DataType::Float32 => std::sync::Arc::new(unary::<_, _, Float32Type>(
            column.as_primitive::<Float32Type>(),
            |v| {
                if v == 0.0 {
                    0.0
                } else if v.is_nan() {
                    f32::NAN
                } else {
                    v
                }
            },
        )),
        _ => std::sync::Arc::clone(column),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int32Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    #[test]
    fn negative_zero_and_nans_encode_as_sql_compares_them() {
        use arrow::array::Float64Array;
        let s = Arc::new(Schema::new(vec![Field::new("f", DataType::Float64, true)]));
        let c = RowCodec::new(s.clone()).unwrap();
        let nan_a = f64::from_bits(0x7ff8_0000_0000_0001);
        let rows = c
            .encode(
                &RecordBatch::try_new(
                    s,
                    vec![Arc::new(Float64Array::from(vec![
                        0.0,
                        -0.0,
                        f64::NAN,
                        nan_a,
                        1.5,
                    ]))],
                )
                .unwrap(),
            )
            .unwrap();
        assert_eq!(rows[0], rows[1]);
        assert_eq!(rows[2], rows[3]);
        assert_ne!(rows[0], rows[4]);
    }

    #[test]
    fn round_trips_and_concatenates() {
        let a = Arc::new(Schema::new(vec![Field::new("a", DataType::Int32, true)]));
        let b = Arc::new(Schema::new(vec![Field::new("b", DataType::Utf8, true)]));
        let ab = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Utf8, true),
        ]));
        let ca = RowCodec::new(a.clone()).unwrap();
        let cb = RowCodec::new(b.clone()).unwrap();
        let cab = RowCodec::new(ab).unwrap();
        let ra = ca
            .encode(
                &RecordBatch::try_new(a, vec![Arc::new(Int32Array::from(vec![Some(1), None]))])
                    .unwrap(),
            )
            .unwrap();
        let rb = cb
            .encode(
                &RecordBatch::try_new(
                    b,
                    vec![Arc::new(StringArray::from(vec![Some("x"), Some("")]))],
                )
                .unwrap(),
            )
            .unwrap();
        let joined: Vec<Row> = ra.iter().zip(&rb).map(|(x, y)| x.concat(y)).collect();
        let batch = cab.decode(&joined).unwrap();
        let ints = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int32Array>()
            .unwrap();
        let strs = batch
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(ints.value(0), 1);
        assert!(ints.is_null(1));
        assert_eq!(strs.value(0), "x");
        assert_eq!(strs.value(1), "");
        assert_eq!(cab.encode(&batch).unwrap(), joined);
    }
}

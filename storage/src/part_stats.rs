//! Per-part column bounds: the least and greatest value of each column in
//! a part, so a scan whose filter no value in those bounds can pass skips
//! the part without reading it.
//!
//! Bounds are computed when a part is written and stored in its file's
//! footer (as an Arrow IPC stream of the bounds themselves, so every Arrow
//! type keeps its exact values), not in the shard's state, which is
//! rewritten on every commit. A read after a restart takes them from the
//! footers of the parts it scans (a read of the file's last bytes) and
//! keeps them in memory; a part written before bounds were stored gets
//! them when it is first decoded whole.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, BooleanArray, LargeStringArray, PrimitiveArray,
    RecordBatch, StringArray, downcast_primitive_array, new_null_array,
};
use arrow::datatypes::{DataType, Field, Schema};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::batch::{decode_stream, encode_stream};

/// The key of a part file's footer metadata under which its bounds are
/// stored.
pub(crate) const FOOTER_KEY: &str = "freshet.part_stats";

/// Strings longer than this are not kept as bounds (a column of long
/// texts is rarely filtered by range, and each bound is held per part).
const MAX_STRING_BOUND: usize = 256;

/// The bounds of one column in one part.
#[derive(Clone, Debug)]
pub struct ColumnBounds {
    /// The least non-null value (an array of one element).
    pub min: ArrayRef,
    /// The greatest non-null value (an array of one element).
    pub max: ArrayRef,
}

/// What is known about the values of a part's data columns.
#[derive(Clone, Debug)]
pub struct PartStats {
    /// Updates in the part (retractions and updates after a read's time
    /// included: bounds cover every row, so they are safe for any read).
    pub rows: usize,
    /// Per data column: its bounds (`None` for a type without an order
    /// kept here, floats among them, or a column entirely null), and how
    /// many of its values are null.
    pub columns: Vec<(Option<ColumnBounds>, usize)>,
}

impl PartStats {
    /// The stats of the first `data_columns` columns of `updates`.
    pub(crate) fn compute(updates: &RecordBatch, data_columns: usize) -> Arc<PartStats> {
        let columns = updates.columns()[..data_columns.min(updates.num_columns())]
            .iter()
            .map(|c| (bounds(c.as_ref()), c.null_count()))
            .collect();
        Arc::new(PartStats {
            rows: updates.num_rows(),
            columns,
        })
    }
}

impl PartStats {
    /// The stats of the first `data_columns` columns of a part written as
    /// several batches: what [`Self::compute`] of their concatenation
    /// gives, without concatenating them.
    pub(crate) fn compute_batches(batches: &[RecordBatch], data_columns: usize) -> Arc<PartStats> {
        let columns = (0..data_columns)
            .map(|c| {
                let arrays: Vec<&ArrayRef> =
                    batches.iter().filter_map(|b| b.columns().get(c)).collect();
                let nulls = arrays.iter().map(|a| a.null_count()).sum();
                // Each batch's bounds, then the bounds of those; a batch
                // entirely null bounds nothing, one without bounds (a long
                // string) leaves the column without.
                let each: Option<Vec<ColumnBounds>> = arrays
                    .iter()
                    .filter(|a| a.null_count() < a.len())
                    .map(|a| bounds(a.as_ref()))
                    .collect();
                let merged = each.filter(|b| !b.is_empty()).and_then(|each| {
                    let of = |pick: fn(&ColumnBounds) -> &ArrayRef| {
                        let parts: Vec<&dyn Array> =
                            each.iter().map(|b| pick(b).as_ref()).collect();
                        arrow::compute::concat(&parts)
                            .ok()
                            .and_then(|a| bounds(a.as_ref()))
                    };
                    Some(ColumnBounds {
                        min: of(|b| &b.min)?.min,
                        max: of(|b| &b.max)?.max,
                    })
                });
                (merged, nulls)
            })
            .collect();
        Arc::new(PartStats {
            rows: batches.iter().map(RecordBatch::num_rows).sum(),
            columns,
        })
    }
}

impl PartStats {
    /// These stats as a part file's footer value: an Arrow IPC stream of
    /// one batch with a column per data column of `data` (row 0 its least
    /// value, row 1 its greatest, both null when unbounded), the null
    /// counts and row count in the batch's schema metadata, in base64
    /// (footer metadata is text). `None` when they cannot be encoded (the
    /// part is then read whole once to compute them).
    pub(crate) fn to_footer(&self, data: &[Arc<Field>]) -> Option<String> {
        if data.len() != self.columns.len() {
            return None;
        }
        let mut fields = Vec::with_capacity(data.len());
        let mut arrays = Vec::with_capacity(data.len());
        for (field, (bounds, _)) in data.iter().zip(&self.columns) {
            let pair = match bounds {
                Some(b) => arrow::compute::concat(&[b.min.as_ref(), b.max.as_ref()]).ok()?,
                None => new_null_array(field.data_type(), 2),
            };
            if pair.data_type() != field.data_type() {
                return None;
            }
            fields.push(Field::new(field.name(), field.data_type().clone(), true));
            arrays.push(pair);
        }
        let nulls: Vec<String> = self.columns.iter().map(|(_, n)| n.to_string()).collect();
        let metadata = HashMap::from([
            ("rows".to_string(), self.rows.to_string()),
            ("nulls".to_string(), nulls.join(",")),
        ]);
        let schema = Arc::new(Schema::new_with_metadata(fields, metadata));
        let batch = RecordBatch::try_new(schema, arrays).ok()?;
        Some(BASE64.encode(encode_stream(&batch).ok()?))
    }

    /// Stats read back from a footer value written by [`Self::to_footer`]
    /// for a part whose data columns are `data`; `None` when the value does
    /// not describe those columns (bounds are then computed on a read).
    pub(crate) fn from_footer(value: &str, data: &[Arc<Field>]) -> Option<Arc<PartStats>> {
        let bytes = BASE64.decode(value).ok()?;
        let batch = decode_stream(&bytes).ok()?.into_iter().next()?;
        let schema = batch.schema();
        let rows = schema.metadata().get("rows")?.parse().ok()?;
        let nulls: Vec<usize> = schema
            .metadata()
            .get("nulls")?
            .split(',')
            .filter(|n| !n.is_empty())
            .map(|n| n.parse().ok())
            .collect::<Option<_>>()?;
        if batch.num_rows() != 2 || batch.num_columns() != data.len() || nulls.len() != data.len() {
            return None;
        }
        let mut columns = Vec::with_capacity(data.len());
        for ((field, pair), nulls) in data.iter().zip(batch.columns()).zip(nulls) {
            if pair.data_type() != field.data_type() {
                return None;
            }
            let bounds = (pair.null_count() == 0).then(|| ColumnBounds {
                min: pair.slice(0, 1),
                max: pair.slice(1, 1),
            });
            columns.push((bounds, nulls));
        }
        Some(Arc::new(PartStats { rows, columns }))
    }
}

fn one<A: Array + 'static>(a: A) -> ArrayRef {
    Arc::new(a)
}

fn primitive<T: ArrowPrimitiveType>(a: &PrimitiveArray<T>) -> Option<ColumnBounds> {
    let min = arrow::compute::min(a)?;
    let max = arrow::compute::max(a)?;
    let dt = a.data_type().clone();
    Some(ColumnBounds {
        min: one(PrimitiveArray::<T>::from_iter_values([min]).with_data_type(dt.clone())),
        max: one(PrimitiveArray::<T>::from_iter_values([max]).with_data_type(dt)),
    })
}

fn strings(min: Option<&str>, max: Option<&str>) -> Option<ColumnBounds> {
    let (min, max) = (min?, max?);
    if min.len() > MAX_STRING_BOUND || max.len() > MAX_STRING_BOUND {
        return None;
    }
    Some(ColumnBounds {
        min: one(StringArray::from(vec![min])),
        max: one(StringArray::from(vec![max])),
    })
}

/// The bounds of `array`, for the types whose order Arrow's kernels and
/// DataFusion's pruning agree on.
fn bounds(array: &dyn Array) -> Option<ColumnBounds> {
    if array.null_count() == array.len() {
        return None;
    }
    match array.data_type() {
        // NaN and signed zeros: leave floats unpruned rather than reason
        // about two orders.
        DataType::Float16 | DataType::Float32 | DataType::Float64 => None,
        DataType::Utf8 => {
            let a = array.as_any().downcast_ref::<StringArray>()?;
            strings(arrow::compute::min_string(a), arrow::compute::max_string(a))
        }
        DataType::LargeUtf8 => {
            let a = array.as_any().downcast_ref::<LargeStringArray>()?;
            let (min, max) = (
                arrow::compute::min_string(a)?,
                arrow::compute::max_string(a)?,
            );
            if min.len() > MAX_STRING_BOUND || max.len() > MAX_STRING_BOUND {
                return None;
            }
            Some(ColumnBounds {
                min: one(LargeStringArray::from(vec![min])),
                max: one(LargeStringArray::from(vec![max])),
            })
        }
        DataType::Boolean => {
            let a = array.as_any().downcast_ref::<BooleanArray>()?;
            Some(ColumnBounds {
                min: one(BooleanArray::from(vec![arrow::compute::min_boolean(a)?])),
                max: one(BooleanArray::from(vec![arrow::compute::max_boolean(a)?])),
            })
        }
        _ => downcast_primitive_array!(
            array => primitive(array),
            _ => None
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Date32Array, Float64Array, Int64Array};
    use arrow::datatypes::{Field, Schema};

    #[test]
    fn bounds_cover_each_column_and_skip_floats_and_all_null_columns() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("d", DataType::Date32, true),
            Field::new("f", DataType::Float64, true),
            Field::new("n", DataType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![Some(5), None, Some(-3)])),
                Arc::new(StringArray::from(vec![Some("pear"), Some("apple"), None])),
                Arc::new(Date32Array::from(vec![10, 2, 7])),
                Arc::new(Float64Array::from(vec![1.0, f64::NAN, 0.5])),
                Arc::new(Int64Array::from(vec![None::<i64>, None, None])),
            ],
        )
        .unwrap();
        let stats = PartStats::compute(&batch, 5);
        assert_eq!(stats.rows, 3);
        let b = |i: usize| stats.columns[i].0.clone().unwrap();
        let ints = b(0);
        assert_eq!(ints.min.as_ref(), &Int64Array::from(vec![-3]) as &dyn Array);
        assert_eq!(ints.max.as_ref(), &Int64Array::from(vec![5]) as &dyn Array);
        assert_eq!(stats.columns[0].1, 1);
        let s = b(1);
        assert_eq!(
            s.min.as_ref(),
            &StringArray::from(vec!["apple"]) as &dyn Array
        );
        assert_eq!(
            s.max.as_ref(),
            &StringArray::from(vec!["pear"]) as &dyn Array
        );
        let d = b(2);
        assert_eq!(d.min.data_type(), &DataType::Date32);
        assert_eq!(d.max.as_ref(), &Date32Array::from(vec![10]) as &dyn Array);
        assert!(stats.columns[3].0.is_none(), "floats are not bounded");
        assert!(
            stats.columns[4].0.is_none(),
            "an all-null column has no bounds"
        );
        assert_eq!(stats.columns[4].1, 3);
    }

    #[test]
    fn bounds_of_several_batches_are_those_of_their_concatenation() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("f", DataType::Float64, true),
        ]));
        let batch = |a: Vec<Option<i64>>, s: Vec<Option<&str>>| {
            let n = a.len();
            RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(Int64Array::from(a)),
                    Arc::new(StringArray::from(s)),
                    Arc::new(Float64Array::from(vec![1.0; n])),
                ],
            )
            .expect("batch")
        };
        let batches = [
            batch(vec![Some(5), None], vec![Some("m"), Some("q")]),
            batch(vec![None, None], vec![Some("b"), None]),
            batch(vec![Some(-3), Some(9)], vec![Some("z"), Some("c")]),
        ];
        let whole = arrow::compute::concat_batches(&schema, &batches).expect("concat");
        let (apart, together) = (
            PartStats::compute_batches(&batches, 3),
            PartStats::compute(&whole, 3),
        );
        assert_eq!(apart.rows, together.rows);
        for (c, (a, t)) in apart.columns.iter().zip(&together.columns).enumerate() {
            assert_eq!(a.1, t.1, "nulls of column {c}");
            match (&a.0, &t.0) {
                (Some(a), Some(t)) => {
                    assert_eq!(a.min.as_ref(), t.min.as_ref(), "min of column {c}");
                    assert_eq!(a.max.as_ref(), t.max.as_ref(), "max of column {c}");
                }
                (None, None) => {}
                other => panic!("column {c}: {other:?}"),
            }
        }
        assert!(apart.columns[2].0.is_none(), "floats stay unbounded");
    }

    #[test]
    fn stats_survive_their_footer_encoding_for_every_kind_of_column() {
        use arrow::array::{Decimal128Array, TimestampMicrosecondArray};
        let fields: Vec<Arc<Field>> = vec![
            Arc::new(Field::new("a", DataType::Int64, true)),
            Arc::new(Field::new("s", DataType::Utf8, true)),
            Arc::new(Field::new("d", DataType::Decimal128(15, 2), true)),
            Arc::new(Field::new(
                "t",
                DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, Some("UTC".into())),
                true,
            )),
            Arc::new(Field::new("f", DataType::Float64, true)),
            Arc::new(Field::new("n", DataType::Int64, true)),
        ];
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(fields.clone())),
            vec![
                Arc::new(Int64Array::from(vec![Some(5), None, Some(-3)])),
                Arc::new(StringArray::from(vec![Some("pear"), Some("apple"), None])),
                Arc::new(
                    Decimal128Array::from(vec![1050, -20, 7])
                        .with_precision_and_scale(15, 2)
                        .unwrap(),
                ),
                Arc::new(TimestampMicrosecondArray::from(vec![3, 1, 2]).with_timezone("UTC")),
                Arc::new(Float64Array::from(vec![1.0, 2.0, 0.5])),
                Arc::new(Int64Array::from(vec![None::<i64>, None, None])),
            ],
        )
        .unwrap();
        let stats = PartStats::compute(&batch, fields.len());
        let value = stats.to_footer(&fields).expect("encodable");
        let back = PartStats::from_footer(&value, &fields).expect("decodable");
        assert_eq!(back.rows, stats.rows);
        for (c, (a, b)) in stats.columns.iter().zip(&back.columns).enumerate() {
            assert_eq!(a.1, b.1, "nulls of column {c}");
            match (&a.0, &b.0) {
                (Some(a), Some(b)) => {
                    assert_eq!(a.min.as_ref(), b.min.as_ref(), "min of column {c}");
                    assert_eq!(a.max.as_ref(), b.max.as_ref(), "max of column {c}");
                }
                (None, None) => {}
                other => panic!("column {c}: {other:?}"),
            }
        }
        // Bounds written for other columns (a changed type, a missing
        // column) are not taken.
        let mut other = fields.clone();
        other[0] = Arc::new(Field::new("a", DataType::Int32, true));
        assert!(PartStats::from_footer(&value, &other).is_none());
        assert!(PartStats::from_footer(&value, &fields[..5]).is_none());
        assert!(PartStats::from_footer("not base64!", &fields).is_none());
    }
}

//! Per-part column bounds: the least and greatest value of each column in
//! a part, so a scan whose filter no value in those bounds can pass skips
//! the part without reading it.
//!
//! Bounds are kept in memory, computed whenever a part is decoded (the
//! first read after a restart reads every part it cannot rule out), not
//! stored in the shard's state: that state is rewritten on every flush, and
//! a stable encoding of every Arrow type's values is more than a cache of
//! bounds is worth.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, BooleanArray, LargeStringArray, PrimitiveArray,
    RecordBatch, StringArray, downcast_primitive_array,
};
use arrow::datatypes::DataType;

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
}

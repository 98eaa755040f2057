//! Rows as ingestion builds them, and their conversion into the Arrow
//! batches storage writes (data columns plus a `diff` column).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder,
    Float64Builder, Int16Builder, Int32Builder, Int64Array, Int64Builder,
    IntervalMonthDayNanoBuilder, RecordBatch, StringBuilder, Time64MicrosecondBuilder,
    TimestampMicrosecondBuilder, UInt32Builder,
};
use arrow::datatypes::{DataType, IntervalMonthDayNano, IntervalUnit, SchemaRef, TimeUnit};
use freshet_storage::write_schema;

use crate::error::{Result, SourceError};

/// One value of a generated or decoded row.
#[derive(Clone, Debug, PartialEq)]
pub enum Datum {
    /// SQL NULL.
    Null,
    /// `boolean`.
    Bool(bool),
    /// `smallint`.
    Int16(i16),
    /// `integer`.
    Int32(i32),
    /// `bigint`.
    Int64(i64),
    /// `real`.
    Float32(f32),
    /// `double precision`.
    Float64(f64),
    /// `text` (and `varchar`, `jsonb`, `uuid`, which Freshet stores as
    /// text).
    Text(String),
    /// `bytea`.
    Bytes(Vec<u8>),
    /// `numeric(p, s)`: the unscaled value at the column's scale.
    Numeric(i128),
    /// `date`: days since 1970-01-01.
    Date(i32),
    /// `timestamp [with time zone]`: microseconds since the epoch.
    Timestamp(i64),
    /// `time`: microseconds since midnight.
    Time(i64),
    /// `interval`: its three independent parts, as Postgres keeps them
    /// (a month is not a fixed number of days, nor a day of seconds).
    Interval {
        /// Months (years count twelve).
        months: i32,
        /// Days.
        days: i32,
        /// Nanoseconds (Postgres itself resolves microseconds).
        nanos: i64,
    },
    /// `oid`.
    UInt32(u32),
}

/// A row with its multiplicity change.
pub type Update = (Vec<Datum>, i64);

/// Build a write batch (data columns of `schema`, then `diff`) from
/// updates. Each datum must suit its column's Arrow type.
pub fn write_updates(schema: &SchemaRef, updates: &[Update]) -> Result<RecordBatch> {
    let columns = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, field)| column(field.data_type(), updates.iter().map(|(row, _)| row.get(i))))
        .collect::<Result<Vec<ArrayRef>>>()?;
    let mut columns = columns;
    columns.push(Arc::new(Int64Array::from_iter_values(
        updates.iter().map(|(_, d)| *d),
    )));
    Ok(RecordBatch::try_new(write_schema(schema), columns)?)
}

fn mismatch(data_type: &DataType, datum: &Datum) -> SourceError {
    SourceError::Internal(format!(
        "a {datum:?} does not fit a column of type {data_type}"
    ))
}

/// One column of `data_type` from each row's datum (missing: NULL).
fn column<'a>(
    data_type: &DataType,
    values: impl Iterator<Item = Option<&'a Datum>>,
) -> Result<ArrayRef> {
    macro_rules! build {
        ($builder:expr, $($pat:pat => $val:expr),+) => {{
            let mut b = $builder;
            for v in values {
                match v {
                    None | Some(Datum::Null) => b.append_null(),
                    $(Some($pat) => b.append_value($val),)+
                    Some(other) => return Err(mismatch(data_type, other)),
                }
            }
            Arc::new(b.finish()) as ArrayRef
        }};
    }
    Ok(match data_type {
        DataType::Boolean => build!(BooleanBuilder::new(), Datum::Bool(b) => *b),
        DataType::Int16 => build!(Int16Builder::new(), Datum::Int16(v) => *v),
        DataType::Int32 => build!(Int32Builder::new(), Datum::Int32(v) => *v),
        DataType::Int64 => build!(Int64Builder::new(), Datum::Int64(v) => *v),
        DataType::UInt32 => build!(UInt32Builder::new(), Datum::UInt32(v) => *v),
        DataType::Float32 => build!(Float32Builder::new(), Datum::Float32(v) => *v),
        DataType::Float64 => build!(Float64Builder::new(), Datum::Float64(v) => *v),
        DataType::Utf8 => build!(StringBuilder::new(), Datum::Text(s) => s),
        DataType::Binary => build!(BinaryBuilder::new(), Datum::Bytes(b) => b),
        DataType::Date32 => build!(Date32Builder::new(), Datum::Date(d) => *d),
        DataType::Decimal128(p, s) => {
            let b = Decimal128Builder::new().with_precision_and_scale(*p, *s)?;
            build!(b, Datum::Numeric(v) => *v)
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let b = TimestampMicrosecondBuilder::new().with_timezone_opt(tz.clone());
            build!(b, Datum::Timestamp(t) => *t)
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            build!(Time64MicrosecondBuilder::new(), Datum::Time(t) => *t)
        }
        DataType::Interval(IntervalUnit::MonthDayNano) => build!(
            IntervalMonthDayNanoBuilder::new(),
            Datum::Interval { months, days, nanos } =>
                IntervalMonthDayNano::new(*months, *days, *nanos)
        ),
        other => {
            return Err(SourceError::Internal(format!(
                "sources cannot write columns of type {other}"
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use freshet_repr::{ColumnDesc, PgType, RelationDesc};

    #[test]
    fn builds_batches_with_a_diff_column() {
        let desc = RelationDesc::new(vec![
            ColumnDesc {
                name: "id".into(),
                ty: PgType::Int8,
                nullable: false,
            },
            ColumnDesc {
                name: "amount".into(),
                ty: PgType::Numeric {
                    typmod: Some((12, 2)),
                },
                nullable: true,
            },
            ColumnDesc {
                name: "at".into(),
                ty: PgType::TimestampTz,
                nullable: true,
            },
        ]);
        let schema = desc.arrow_schema();
        let batch = write_updates(
            &schema,
            &[
                (
                    vec![Datum::Int64(1), Datum::Numeric(1250), Datum::Timestamp(0)],
                    1,
                ),
                (vec![Datum::Int64(2), Datum::Null, Datum::Null], -1),
            ],
        )
        .unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(batch.num_columns(), 4);
        let err = write_updates(&schema, &[(vec![Datum::Text("x".into())], 1)]).unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
    }

    #[test]
    fn builds_small_int_real_time_interval_and_oid_columns() {
        use arrow::array::{
            Array, Float32Array, Int16Array, IntervalMonthDayNanoArray, Time64MicrosecondArray,
            UInt32Array,
        };
        let column = |name: &str, ty: PgType| ColumnDesc {
            name: name.into(),
            ty,
            nullable: true,
        };
        let desc = RelationDesc::new(vec![
            column("s", PgType::Int2),
            column("r", PgType::Float4),
            column("t", PgType::Time),
            column("i", PgType::Interval),
            column("o", PgType::Oid),
        ]);
        let schema = desc.arrow_schema();
        let interval = Datum::Interval {
            months: 14,
            days: -3,
            nanos: 4_005_006_789_000,
        };
        let batch = write_updates(
            &schema,
            &[
                (
                    vec![
                        Datum::Int16(-7),
                        Datum::Float32(1.5),
                        Datum::Time(3_723_000_100),
                        interval,
                        Datum::UInt32(4_000_000_000),
                    ],
                    1,
                ),
                (vec![Datum::Null; 5], -1),
            ],
        )
        .unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(batch.num_columns(), 6);
        let col = |i: usize| batch.column(i).as_any();
        let s = col(0).downcast_ref::<Int16Array>().unwrap();
        assert_eq!((s.value(0), s.is_null(1)), (-7, true));
        let r = col(1).downcast_ref::<Float32Array>().unwrap();
        assert_eq!((r.value(0), r.is_null(1)), (1.5, true));
        let t = col(2).downcast_ref::<Time64MicrosecondArray>().unwrap();
        assert_eq!((t.value(0), t.is_null(1)), (3_723_000_100, true));
        let i = col(3).downcast_ref::<IntervalMonthDayNanoArray>().unwrap();
        assert_eq!(
            i.value(0),
            IntervalMonthDayNano::new(14, -3, 4_005_006_789_000)
        );
        assert!(i.is_null(1));
        let o = col(4).downcast_ref::<UInt32Array>().unwrap();
        assert_eq!((o.value(0), o.is_null(1)), (4_000_000_000, true));
        // A datum of the wrong kind is still refused.
        let err = write_updates(&schema, &[(vec![Datum::Int32(1)], 1)]).unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
    }
}

//! `jsonb_agg(value)` and `jsonb_object_agg(key, value)`: a group's values
//! as a `jsonb` array, and its key/value pairs as a `jsonb` object (a key
//! given twice keeps its last value), in the order of the call's `ORDER
//! BY` when it has one. A group without rows gives NULL.
//!
//! Each value becomes what Postgres's `to_jsonb` makes of it ([`to_json`]):
//! numbers and booleans as such, text as a string, SQL NULL as `null`,
//! `jsonb` nested as it is, arrays as arrays, and dates, times and
//! timestamps as their ISO 8601 strings.
//!
//! DataFusion hands the accumulator the `ORDER BY` values after the
//! arguments and may split a group's rows across partial accumulators, so
//! the accumulator keeps each element's ordering values, carries them in
//! its state (one list per `ORDER BY` expression) and sorts when it
//! finishes; the dataflow of a materialized view recomputes a changed
//! group with the same accumulator, so it gets the same order.

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, ListArray, StringArray};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use datafusion::common::utils::compare_rows;
use datafusion::common::{Result, ScalarValue, exec_datafusion_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::{AggregateOrderSensitivity, format_state_name};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};
use freshet_repr::{PgType, sqlstate};
use serde_json::{Map, Number, Value};

use crate::query::jsonb_ops::parse_jsonb;

/// Both aggregates, for registration in the session (where dataflow plans
/// of materialized views also find them by name).
pub fn udafs() -> Vec<Arc<AggregateUDF>> {
    [false, true]
        .into_iter()
        .map(|object| {
            Arc::new(AggregateUDF::new_from_impl(JsonbAgg {
                object,
                signature: Signature::any(if object { 2 } else { 1 }, Volatility::Immutable),
            }))
        })
        .collect()
}

/// `jsonb_agg` (or, when `object`, `jsonb_object_agg`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct JsonbAgg {
    object: bool,
    signature: Signature,
}

impl AggregateUDFImpl for JsonbAgg {
    fn name(&self) -> &str {
        if self.object {
            "jsonb_object_agg"
        } else {
            "jsonb_agg"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    /// The result is `jsonb`, so it prints (and chains) as `jsonb`.
    fn return_field(&self, _arg_fields: &[FieldRef]) -> Result<FieldRef> {
        Ok(Arc::new(PgType::Jsonb.field(self.name(), true)))
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let args = acc_args.expr_fields.to_vec();
        let (ordering_types, options, implicit) =
            if acc_args.order_bys.is_empty() && acc_args.is_distinct {
                // `DISTINCT` without `ORDER BY`: Postgres sorts by the
                // arguments to find the duplicates, so that is the order.
                let types = args.iter().map(|f| f.data_type().clone()).collect();
                let options = vec![
                    SortOptions {
                        descending: false,
                        nulls_first: false,
                    };
                    args.len()
                ];
                (types, options, true)
            } else {
                let types = acc_args
                    .order_bys
                    .iter()
                    .map(|s| s.expr.data_type(acc_args.schema))
                    .collect::<Result<Vec<_>>>()?;
                let options = acc_args.order_bys.iter().map(|s| s.options).collect();
                (types, options, false)
            };
        Ok(Box::new(JsonbAggAccumulator {
            object: self.object,
            args,
            items: Vec::new(),
            orderings: Vec::new(),
            ordering_types,
            options,
            implicit,
            distinct: acc_args.is_distinct,
        }))
    }

    /// The elements' JSON texts, then one list per ordering expression.
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let list = |name: String, t: &DataType| {
            Arc::new(Field::new_list(
                name,
                Field::new_list_field(t.clone(), true),
                true,
            ))
        };
        let mut fields = vec![list(format_state_name(args.name, "items"), &DataType::Utf8)];
        let ordering: Vec<DataType> = if args.ordering_fields.is_empty() && args.is_distinct {
            args.input_fields
                .iter()
                .map(|f| f.data_type().clone())
                .collect()
        } else {
            args.ordering_fields
                .iter()
                .map(|f| f.data_type().clone())
                .collect()
        };
        for (i, t) in ordering.iter().enumerate() {
            fields.push(list(format_state_name(args.name, &format!("order{i}")), t));
        }
        Ok(fields)
    }

    /// The accumulator sorts by itself; input already in order only saves
    /// it work.
    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        AggregateOrderSensitivity::SoftRequirement
    }

    fn with_beneficial_ordering(
        self: Arc<Self>,
        _beneficial_ordering: bool,
    ) -> Result<Option<Arc<dyn AggregateUDFImpl>>> {
        Ok(Some(self))
    }
}

/// A group's elements so far.
#[derive(Debug)]
struct JsonbAggAccumulator {
    object: bool,
    /// The arguments' fields (whose Postgres types say how to convert).
    args: Vec<FieldRef>,
    /// Each element: the value, or for `jsonb_object_agg` a `[key, value]`
    /// pair.
    items: Vec<Value>,
    /// Each element's ordering values.
    orderings: Vec<Vec<ScalarValue>>,
    ordering_types: Vec<DataType>,
    options: Vec<SortOptions>,
    /// The ordering values are the arguments (`DISTINCT` without `ORDER
    /// BY`).
    implicit: bool,
    distinct: bool,
}

impl JsonbAggAccumulator {
    /// The elements in their final order (duplicates dropped for
    /// `DISTINCT`).
    fn ordered(&self) -> Result<Vec<&Value>> {
        let mut order: Vec<usize> = (0..self.items.len()).collect();
        if !self.options.is_empty() {
            let mut failed = None;
            order.sort_by(|&a, &b| {
                compare_rows(&self.orderings[a], &self.orderings[b], &self.options).unwrap_or_else(
                    |e| {
                        failed = Some(e);
                        Ordering::Equal
                    },
                )
            });
            if let Some(e) = failed {
                return Err(e);
            }
        }
        let mut items: Vec<&Value> = order.into_iter().map(|i| &self.items[i]).collect();
        if self.distinct {
            let mut seen = std::collections::HashSet::new();
            items.retain(|v| seen.insert(crate::pg::text::jsonb_text(v)));
        }
        Ok(items)
    }
}

impl Accumulator for JsonbAggAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let n_args = self.args.len();
        let (args, order) = values.split_at(n_args.min(values.len()));
        let Some(first) = args.first() else {
            return Ok(());
        };
        for row in 0..first.len() {
            let item = if self.object {
                let (Some(k), Some(v)) = (args.first(), args.get(1)) else {
                    return Err(exec_datafusion_err!("jsonb_object_agg takes two arguments"));
                };
                Value::Array(vec![
                    Value::String(json_key(k, &self.args[0], row)?),
                    to_json(v, &self.args[1], row)?,
                ])
            } else {
                to_json(first, &self.args[0], row)?
            };
            let source = if self.implicit { args } else { order };
            let ordering = source
                .iter()
                .map(|a| ScalarValue::try_from_array(a, row).map(|v| v.compacted()))
                .collect::<Result<Vec<_>>>()?;
            self.items.push(item);
            self.orderings.push(ordering);
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        if self.items.is_empty() {
            return Ok(ScalarValue::Utf8(None));
        }
        let items = self.ordered()?;
        let result = if self.object {
            let mut object = Map::new();
            for pair in items {
                if let Value::Array(kv) = pair
                    && let [Value::String(k), v] = kv.as_slice()
                {
                    object.insert(k.clone(), v.clone());
                }
            }
            Value::Object(object)
        } else {
            Value::Array(items.into_iter().cloned().collect())
        };
        Ok(ScalarValue::Utf8(Some(crate::pg::text::jsonb_text(
            &result,
        ))))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
            + self.items.capacity() * std::mem::size_of::<Value>()
            + self
                .orderings
                .iter()
                .map(ScalarValue::size_of_vec)
                .sum::<usize>()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let texts = self
            .items
            .iter()
            .map(|v| ScalarValue::Utf8(Some(v.to_string())));
        let mut state = vec![ScalarValue::List(ScalarValue::new_list_from_iter(
            texts,
            &DataType::Utf8,
            true,
        ))];
        for (i, t) in self.ordering_types.iter().enumerate() {
            let column = self
                .orderings
                .iter()
                .map(|o| o.get(i).cloned().unwrap_or(ScalarValue::Null));
            state.push(ScalarValue::List(ScalarValue::new_list_from_iter(
                column, t, true,
            )));
        }
        Ok(state)
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let Some((items, orderings)) = states.split_first() else {
            return Ok(());
        };
        let lists = |a: &ArrayRef| -> Result<ListArray> {
            a.as_list_opt::<i32>()
                .cloned()
                .ok_or_else(|| exec_datafusion_err!("jsonb aggregate state is not a list"))
        };
        let items = lists(items)?;
        let orderings = orderings.iter().map(lists).collect::<Result<Vec<_>>>()?;
        for row in 0..items.len() {
            if items.is_null(row) {
                continue;
            }
            let texts = items.value(row);
            let texts = texts
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or_else(|| exec_datafusion_err!("jsonb aggregate items are not text"))?;
            let columns: Vec<ArrayRef> = orderings.iter().map(|o| o.value(row)).collect();
            for i in 0..texts.len() {
                self.items.push(parse_jsonb(texts.value(i))?);
                self.orderings.push(
                    columns
                        .iter()
                        .map(|c| ScalarValue::try_from_array(c, i))
                        .collect::<Result<_>>()?,
                );
            }
        }
        Ok(())
    }
}

/// A 22023 error, as Postgres raises for a bad object key.
fn key_error(message: &str) -> datafusion::error::DataFusionError {
    crate::error::sqlstate_error(sqlstate::INVALID_PARAMETER_VALUE, message)
}

/// Row `row` of `a` as a `jsonb_object_agg` key: a scalar's text (a
/// string's contents); NULL, arrays and `jsonb` are refused, as Postgres
/// refuses them.
fn json_key(a: &ArrayRef, field: &Field, row: usize) -> Result<String> {
    if a.is_null(row) || a.data_type() == &DataType::Null {
        return Err(key_error("field name must not be null"));
    }
    let refused = || key_error("key value must be scalar, not array, composite, or json");
    if PgType::of_field(field) == PgType::Jsonb {
        return Err(refused());
    }
    match to_json(a, field, row)? {
        Value::String(s) => Ok(s),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => Err(refused()),
    }
}

/// A JSON number from its decimal text (as a string if it does not parse).
fn number(text: String) -> Value {
    serde_json::from_str::<Number>(&text)
        .map(Value::Number)
        .unwrap_or(Value::String(text))
}

/// A float as Postgres's `to_jsonb` gives it: a number, or the strings
/// `NaN`, `Infinity` and `-Infinity`.
fn float(v: f64, text: String) -> Value {
    if v.is_nan() {
        Value::String("NaN".into())
    } else if v.is_infinite() {
        Value::String(if v > 0.0 { "Infinity" } else { "-Infinity" }.into())
    } else {
        number(text)
    }
}

/// The exact decimal text of an unscaled `value` at `scale`.
fn decimal_text(value: i128, scale: i8) -> String {
    let negative = value < 0;
    let digits = value.unsigned_abs().to_string();
    let mut s = if scale > 0 {
        let scale = scale as usize;
        let padded = if digits.len() <= scale {
            format!("{}{digits}", "0".repeat(scale - digits.len() + 1))
        } else {
            digits
        };
        let (int, frac) = padded.split_at(padded.len() - scale);
        format!("{int}.{frac}")
    } else {
        format!("{digits}{}", "0".repeat(scale.unsigned_abs() as usize))
    };
    if negative {
        s.insert(0, '-');
    }
    s
}

/// Fractional seconds as Postgres prints them: only when non-zero,
/// trailing zeros dropped.
fn fraction(micros: u32) -> String {
    if micros == 0 {
        String::new()
    } else {
        format!(".{micros:06}").trim_end_matches('0').to_string()
    }
}

/// Microseconds since the epoch as `YYYY-MM-DDTHH:MM:SS[.ffffff]`.
fn iso_timestamp(micros: i64) -> Option<String> {
    use chrono::{Datelike, Timelike};
    let t = chrono::DateTime::from_timestamp_micros(micros)?.naive_utc();
    Some(format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{}",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        fraction(t.nanosecond() / 1000)
    ))
}

/// Microseconds of a timestamp in `unit`.
fn to_micros(v: i64, unit: &TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => v.saturating_mul(1_000_000),
        TimeUnit::Millisecond => v.saturating_mul(1_000),
        TimeUnit::Microsecond => v,
        TimeUnit::Nanosecond => v.div_euclid(1_000),
    }
}

/// An interval in Postgres's default output style (`1 year 2 mons 3 days
/// 04:05:06.5`).
fn interval_text(months: i32, days: i32, nanos: i64) -> String {
    let mut out = String::new();
    let mut is_zero = true;
    let mut is_before = false;
    let mut part = |value: i64, unit: &str, out: &mut String| {
        if value == 0 {
            return;
        }
        if !is_zero {
            out.push(' ');
        }
        if is_before && value > 0 {
            out.push('+');
        }
        out.push_str(&format!(
            "{value} {unit}{}",
            if value != 1 { "s" } else { "" }
        ));
        is_before = value < 0;
        is_zero = false;
    };
    part(i64::from(months / 12), "year", &mut out);
    part(i64::from(months % 12), "mon", &mut out);
    part(i64::from(days), "day", &mut out);
    let micros = nanos / 1_000;
    if is_zero || micros != 0 {
        let minus = micros < 0;
        let abs = micros.unsigned_abs();
        let secs = abs / 1_000_000;
        if !is_zero {
            out.push(' ');
        }
        out.push_str(if minus {
            "-"
        } else if is_before {
            "+"
        } else {
            ""
        });
        out.push_str(&format!(
            "{:02}:{:02}:{:02}{}",
            secs / 3600,
            (secs % 3600) / 60,
            secs % 60,
            fraction((abs % 1_000_000) as u32)
        ));
    }
    out
}

/// Row `row` of `a` (of field `field`) as Postgres's `to_jsonb` gives it.
pub(crate) fn to_json(a: &ArrayRef, field: &Field, row: usize) -> Result<Value> {
    if a.is_null(row) {
        return Ok(Value::Null);
    }
    let pg = PgType::of_field(field);
    let scalar = ScalarValue::try_from_array(a, row)?;
    Ok(match scalar {
        ScalarValue::Null => Value::Null,
        ScalarValue::Boolean(Some(b)) => Value::Bool(b),
        ScalarValue::Int8(Some(v)) => Value::from(v),
        ScalarValue::Int16(Some(v)) => Value::from(v),
        ScalarValue::Int32(Some(v)) => Value::from(v),
        ScalarValue::Int64(Some(v)) => Value::from(v),
        ScalarValue::UInt8(Some(v)) => Value::from(v),
        ScalarValue::UInt16(Some(v)) => Value::from(v),
        ScalarValue::UInt32(Some(v)) => Value::from(v),
        ScalarValue::UInt64(Some(v)) => Value::from(v),
        ScalarValue::Float32(Some(v)) => float(f64::from(v), v.to_string()),
        ScalarValue::Float64(Some(v)) => float(v, v.to_string()),
        ScalarValue::Decimal128(Some(v), _, scale) => number(decimal_text(v, scale)),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => {
            if pg == PgType::Jsonb {
                parse_jsonb(&s)?
            } else {
                Value::String(s)
            }
        }
        ScalarValue::Date32(Some(days)) => {
            let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1);
            match epoch.and_then(|e| e.checked_add_signed(chrono::Duration::days(days.into()))) {
                Some(d) => Value::String(d.format("%Y-%m-%d").to_string()),
                None => Value::String(days.to_string()),
            }
        }
        ScalarValue::TimestampSecond(Some(v), ref tz)
        | ScalarValue::TimestampMillisecond(Some(v), ref tz)
        | ScalarValue::TimestampMicrosecond(Some(v), ref tz)
        | ScalarValue::TimestampNanosecond(Some(v), ref tz) => {
            let DataType::Timestamp(unit, _) = scalar.data_type() else {
                return Ok(Value::String(scalar.to_string()));
            };
            // `timestamptz` is stored in UTC, Freshet's session time zone.
            match iso_timestamp(to_micros(v, &unit)) {
                Some(text) if tz.is_some() => Value::String(format!("{text}+00:00")),
                Some(text) => Value::String(text),
                None => Value::String(scalar.to_string()),
            }
        }
        ScalarValue::Time64Microsecond(Some(micros)) => {
            let secs = micros.div_euclid(1_000_000);
            Value::String(format!(
                "{:02}:{:02}:{:02}{}",
                secs / 3600,
                (secs % 3600) / 60,
                secs % 60,
                fraction(micros.rem_euclid(1_000_000) as u32)
            ))
        }
        ScalarValue::IntervalMonthDayNano(Some(v)) => {
            Value::String(interval_text(v.months, v.days, v.nanoseconds))
        }
        ScalarValue::Binary(Some(bytes)) | ScalarValue::LargeBinary(Some(bytes)) => {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            Value::String(format!("\\x{hex}"))
        }
        ScalarValue::List(list) => {
            let item = match list.data_type() {
                DataType::List(item) => Arc::clone(item),
                _ => Arc::new(Field::new_list_field(DataType::Null, true)),
            };
            let values = list.value(0);
            let items = (0..values.len())
                .map(|i| to_json(&values, &item, i))
                .collect::<Result<Vec<_>>>()?;
            Value::Array(items)
        }
        // Interval units Freshet does not store, and anything else: the
        // value's text as a string.
        other => Value::String(other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_print_like_postgres() {
        assert_eq!(interval_text(0, 1, 7_200_000_000_000), "1 day 02:00:00");
        assert_eq!(interval_text(14, -3, 0), "1 year 2 mons -3 days");
        assert_eq!(interval_text(0, 0, 0), "00:00:00");
        assert_eq!(interval_text(0, -1, 3_600_000_000_000), "-1 days +01:00:00");
        assert_eq!(interval_text(0, 0, -1_500_000_000), "-00:00:01.5");
    }

    #[test]
    fn decimals_keep_their_digits() {
        assert_eq!(decimal_text(150, 2), "1.50");
        assert_eq!(decimal_text(-5, 2), "-0.05");
        assert_eq!(decimal_text(12, -2), "1200");
    }
}

#[cfg(test)]
mod merge_tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::prelude::SessionContext;
    use freshet_repr::PgType;

    /// Partial aggregates over several partitions merge in `ORDER BY`
    /// order.
    #[tokio::test]
    async fn partitions_merge_in_order() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("g", DataType::Utf8, false),
            PgType::Jsonb.field("b", true),
        ]));
        let part = |ids: Vec<i64>| {
            let groups: Vec<&str> = ids
                .iter()
                .map(|i| if i % 2 == 0 { "e" } else { "o" })
                .collect();
            let docs: Vec<String> = ids.iter().map(|i| format!(r#"{{"i": {i}}}"#)).collect();
            vec![
                RecordBatch::try_new(
                    Arc::clone(&schema),
                    vec![
                        Arc::new(Int64Array::from(ids)),
                        Arc::new(StringArray::from(groups)),
                        Arc::new(StringArray::from(docs)),
                    ],
                )
                .unwrap(),
            ]
        };
        let table = MemTable::try_new(
            Arc::clone(&schema),
            vec![part(vec![5, 2, 8]), part(vec![1, 4]), part(vec![7, 6, 3])],
        )
        .unwrap();
        use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider};
        let ctx = SessionContext::new_with_state(crate::query::engine::new_session_state(4));
        let catalog = MemoryCatalogProvider::new();
        catalog
            .register_schema("public", Arc::new(MemorySchemaProvider::new()))
            .unwrap();
        ctx.register_catalog("datafusion", Arc::new(catalog));
        ctx.register_table("t", Arc::new(table)).unwrap();
        let batches = ctx
            .sql(
                "SELECT g, jsonb_agg(id ORDER BY id DESC) AS a, jsonb_agg(b->'i' ORDER BY id) AS b, \
                 jsonb_object_agg(g, id ORDER BY id) AS c FROM t GROUP BY g ORDER BY g",
            )
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let text = arrow::util::pretty::pretty_format_batches(&batches)
            .unwrap()
            .to_string();
        assert!(
            text.contains("| e | [8, 6, 4, 2] | [2, 4, 6, 8] | {\"e\": 8} |"),
            "{text}"
        );
        assert!(
            text.contains("| o | [7, 5, 3, 1] | [1, 3, 5, 7] | {\"o\": 7} |"),
            "{text}"
        );
    }
}

//! Casts from text as Postgres parses them where Arrow differs: `bytea`
//! (the `\\x` hex and escape formats), `uuid` and `jsonb` canonical forms,
//! timestamps with Postgres's rounding and precision, and numeric to
//! integer rounding half away from zero.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use freshet_repr::sqlstate;

use crate::rewrites::checked_arithmetic::is_int;
use crate::rewrites::expr_rewrite::rewrite_expressions_up;
use crate::udf;

/// Casts from text that Postgres parses differently from Arrow: text to
/// `bytea` reads the `\x` hex and escape formats instead of taking the
/// characters' bytes.
#[derive(Debug)]
pub struct PostgresTextCasts {
    bytea_in: Arc<ScalarUDF>,
    uuid_in: Arc<ScalarUDF>,
    jsonb_in: Arc<ScalarUDF>,
    round_to_int: Arc<ScalarUDF>,
    timestamp_in: Arc<ScalarUDF>,
    timestamptz_in: Arc<ScalarUDF>,
    array_in: Arc<ScalarUDF>,
    array_out: Arc<ScalarUDF>,
    date_in: Arc<ScalarUDF>,
}

impl Default for PostgresTextCasts {
    fn default() -> Self {
        let text_in = |kind| {
            Arc::new(ScalarUDF::new_from_impl(TextIn {
                kind,
                signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
            }))
        };
        PostgresTextCasts {
            bytea_in: Arc::new(ScalarUDF::new_from_impl(ByteaIn {
                signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
            })),
            uuid_in: text_in(TextKind::Uuid),
            jsonb_in: text_in(TextKind::Jsonb),
            round_to_int: Arc::new(ScalarUDF::new_from_impl(RoundToInt {
                signature: Signature::any(1, Volatility::Immutable),
            })),
            timestamp_in: Arc::new(ScalarUDF::new_from_impl(TimestampIn {
                zoned: false,
                signature: Signature::exact(vec![DataType::Utf8], Volatility::Stable),
            })),
            timestamptz_in: Arc::new(ScalarUDF::new_from_impl(TimestampIn {
                zoned: true,
                signature: Signature::exact(vec![DataType::Utf8], Volatility::Stable),
            })),
            // Element casts are Arrow's, which read no session setting.
            date_in: Arc::new(ScalarUDF::new_from_impl(DateIn {
                signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
            })),
            array_out: Arc::new(ScalarUDF::new_from_impl(ArrayOut {
                signature: Signature::any(1, Volatility::Immutable),
            })),
            array_in: Arc::new(ScalarUDF::new_from_impl(ArrayIn {
                signature: Signature::any(2, Volatility::Immutable),
            })),
        }
    }
}

impl PostgresTextCasts {
    /// The functions this rule introduces, for registration.
    pub fn functions(&self) -> Vec<Arc<ScalarUDF>> {
        vec![
            Arc::clone(&self.bytea_in),
            Arc::clone(&self.uuid_in),
            Arc::clone(&self.jsonb_in),
            Arc::clone(&self.round_to_int),
            Arc::clone(&self.timestamp_in),
            Arc::clone(&self.timestamptz_in),
            Arc::clone(&self.array_in),
            Arc::clone(&self.array_out),
            Arc::clone(&self.date_in),
        ]
    }

    fn rewrite(&self, e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
        let (inner, field) = match &e {
            Expr::Cast(c) => (c.expr.as_ref(), &c.field),
            Expr::TryCast(c) => (c.expr.as_ref(), &c.field),
            _ => return Ok(Transformed::no(e)),
        };
        let Ok(source) = inner.get_type(schema) else {
            return Ok(Transformed::no(e));
        };
        let target = field.data_type();
        let text_source = matches!(
            source,
            DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
        );
        let call = |udf: &Arc<ScalarUDF>, arg: Expr| {
            Expr::ScalarFunction(ScalarFunction::new_udf(Arc::clone(udf), vec![arg]))
        };
        let call_with = |udf: Arc<ScalarUDF>, args: Vec<Expr>| {
            Expr::ScalarFunction(ScalarFunction::new_udf(udf, args))
        };
        let with_input = |e: &Expr, input: Expr| {
            let mut cast = e.clone();
            match &mut cast {
                Expr::Cast(c) => *c.expr = input,
                Expr::TryCast(c) => *c.expr = input,
                _ => {}
            }
            cast
        };
        // text -> bytea parses the \x and escape formats.
        if text_source && matches!(target, DataType::Binary) {
            let arg = inner.clone().cast_to(&DataType::Utf8, schema)?;
            return Ok(Transformed::yes(call(&self.bytea_in, arg)));
        }
        // text -> uuid / jsonb validates and canonicalizes.
        let pg = freshet_repr::PgType::of_field(field);
        let already = matches!(inner, Expr::ScalarFunction(f)
            if f.func.name() == "uuid_in" || f.func.name() == "jsonb_in");
        if text_source
            && !already
            && matches!(pg, freshet_repr::PgType::Uuid | freshet_repr::PgType::Jsonb)
        {
            let udf = if pg == freshet_repr::PgType::Uuid {
                &self.uuid_in
            } else {
                &self.jsonb_in
            };
            let arg = inner.clone().cast_to(&DataType::Utf8, schema)?;
            return Ok(Transformed::yes(with_input(&e, call(udf, arg))));
        }
        // text -> timestamp[tz] reads Postgres's forms (HH:MM without
        // seconds, +HH offsets) and, for timestamptz without an offset,
        // the session time zone.
        let already_ts = matches!(inner, Expr::ScalarFunction(f)
            if f.func.name() == "timestamp_in" || f.func.name() == "timestamptz_in");
        if text_source
            && !already_ts
            && let DataType::Timestamp(_, tz) = target
        {
            let udf = if tz.is_some() {
                &self.timestamptz_in
            } else {
                &self.timestamp_in
            };
            let arg = inner.clone().cast_to(&DataType::Utf8, schema)?;
            return Ok(Transformed::yes(with_input(&e, call(udf, arg))));
        }
        // text -> date ignores a trailing time and zone.
        if text_source
            && matches!(target, DataType::Date32)
            && !matches!(inner, Expr::ScalarFunction(f) if f.func.name() == "date_in")
        {
            let arg = inner.clone().cast_to(&DataType::Utf8, schema)?;
            return Ok(Transformed::yes(with_input(&e, call(&self.date_in, arg))));
        }
        // text -> array reads PostgreSQL's `{a,"b",NULL}` form; the
        // second argument (a NULL of the target type) carries the type.
        if text_source
            && !matches!(inner, Expr::ScalarFunction(f) if f.func.name() == "array_in")
            && let DataType::List(element) = target
            && !matches!(element.data_type(), DataType::List(_))
        {
            let arg = inner.clone().cast_to(&DataType::Utf8, schema)?;
            let typed_null = Expr::Literal(ScalarValue::try_from(target)?, None);
            return Ok(Transformed::yes(with_input(
                &e,
                call_with(Arc::clone(&self.array_in), vec![arg, typed_null]),
            )));
        }
        // array -> text prints PostgreSQL's `{a,"b c",NULL}` form (Arrow
        // would print its list display, `[a, b c, ]`).
        if matches!(target, DataType::Utf8)
            && let DataType::List(element) = &source
            && !matches!(element.data_type(), DataType::List(_))
        {
            return Ok(Transformed::yes(call(&self.array_out, inner.clone())));
        }
        // text -> varchar(n) truncates; text -> char(n) truncates and drops
        // trailing blanks (Freshet's form of bpchar values).
        let already_len = matches!(inner, Expr::ScalarFunction(f)
            if f.func.name() == "left" || f.func.name() == "rtrim");
        if text_source && !already_len {
            let limited = |n: u32| {
                call_with(
                    datafusion::functions::unicode::left(),
                    vec![
                        inner.clone(),
                        Expr::Literal(ScalarValue::Int64(Some(n as i64)), None),
                    ],
                )
            };
            match pg {
                freshet_repr::PgType::Varchar { max_len: Some(n) } => {
                    return Ok(Transformed::yes(with_input(&e, limited(n))));
                }
                freshet_repr::PgType::Char { len: Some(n) } => {
                    let trimmed =
                        call_with(datafusion::functions::string::rtrim(), vec![limited(n)]);
                    return Ok(Transformed::yes(with_input(&e, trimmed)));
                }
                _ => {}
            }
        }
        // numeric/float -> integer rounds (Arrow truncates).
        let rounds = matches!(
            source,
            DataType::Decimal128(..) | DataType::Float64 | DataType::Float32
        ) && is_int(target);
        if rounds {
            return Ok(Transformed::yes(with_input(
                &e,
                call(&self.round_to_int, inner.clone()),
            )));
        }
        Ok(Transformed::no(e))
    }
}

impl AnalyzerRule for PostgresTextCasts {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        rewrite_expressions_up(plan, |e, schema| self.rewrite(e, schema))
    }

    fn name(&self) -> &str {
        "freshet_postgres_text_casts"
    }
}

/// `bytea` input from text.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ByteaIn {
    signature: Signature,
}

impl ScalarUDFImpl for ByteaIn {
    fn name(&self) -> &str {
        "bytea_in"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Binary)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        use arrow::array::BinaryArray;
        let out = udf::map_text(&args, "bytea_in", |s| {
            crate::pg::text::parse_bytea(s).ok_or_else(|| {
                crate::error::sqlstate_error(
                    sqlstate::INVALID_TEXT_REPRESENTATION,
                    format!("invalid input syntax for type bytea: \"{s}\""),
                )
            })
        })?;
        let result = udf::array(BinaryArray::from_iter(out.iter().map(|v| v.as_deref())));
        udf::to_columnar(result, udf::all_scalar(&args))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum TextKind {
    Uuid,
    Jsonb,
}

/// `uuid` / `jsonb` input from text: validates and canonicalizes.
#[derive(Debug, PartialEq, Eq, Hash)]
struct TextIn {
    kind: TextKind,
    signature: Signature,
}

impl ScalarUDFImpl for TextIn {
    fn name(&self) -> &str {
        match self.kind {
            TextKind::Uuid => "uuid_in",
            TextKind::Jsonb => "jsonb_in",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        use arrow::array::StringArray;
        let out = udf::map_text(&args, self.name(), |s| {
            let parsed = match self.kind {
                TextKind::Uuid => crate::pg::text::canonical_uuid(s),
                TextKind::Jsonb => crate::pg::text::canonical_jsonb(s),
            };
            parsed.ok_or_else(|| {
                let ty = match self.kind {
                    TextKind::Uuid => "uuid",
                    TextKind::Jsonb => "json",
                };
                crate::error::sqlstate_error(
                    sqlstate::INVALID_TEXT_REPRESENTATION,
                    format!("invalid input syntax for type {ty}: \"{s}\""),
                )
            })
        })?;
        udf::to_columnar(udf::array(StringArray::from(out)), udf::all_scalar(&args))
    }
}

/// `date` input from text ([`crate::pg::text::parse_date`]).
#[derive(Debug, PartialEq, Eq, Hash)]
struct DateIn {
    signature: Signature,
}

impl ScalarUDFImpl for DateIn {
    fn name(&self) -> &str {
        "date_in"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Date32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let out = udf::map_text(&args, "date_in", |s| {
            crate::pg::text::parse_date(s).ok_or_else(|| {
                crate::error::sqlstate_error(
                    sqlstate::INVALID_DATETIME_FORMAT,
                    format!("invalid input syntax for type date: \"{s}\""),
                )
            })
        })?;
        udf::to_columnar(
            udf::array(arrow::array::Date32Array::from(out)),
            udf::all_scalar(&args),
        )
    }
}

/// `array_in(text, NULL::elem[])`: an array from its text form
/// ([`freshet_repr::array_text`]), each element cast from text to the
/// element type (an element that does not parse is 22P02 naming it).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ArrayIn {
    signature: Signature,
}

impl ScalarUDFImpl for ArrayIn {
    fn name(&self) -> &str {
        "array_in"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types.get(1) {
            Some(t @ DataType::List(_)) => Ok(t.clone()),
            _ => datafusion::common::plan_err!("array_in takes text and a NULL of the array type"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        use arrow::array::{Array, ListArray, StringArray};
        let DataType::List(element) = args.return_field.data_type() else {
            return datafusion::common::exec_err!("array_in returns an array");
        };
        let texts = udf::string_arg(&args, 0, "array_in")?;
        let split = freshet_repr::array_text::split_arrays(texts.iter())
            .map_err(|m| crate::error::sqlstate_error(sqlstate::INVALID_TEXT_REPRESENTATION, m))?;
        let strings = StringArray::from(split.elements);
        let options = arrow::compute::CastOptions {
            safe: false,
            format_options: Default::default(),
        };
        let values = arrow::compute::cast_with_options(&strings, element.data_type(), &options)
            .map_err(|_| {
                let bad = (0..strings.len())
                    .filter(|i| !strings.is_null(*i))
                    .map(|i| strings.value(i))
                    .find(|v| {
                        let one = StringArray::from(vec![*v]);
                        arrow::compute::cast_with_options(&one, element.data_type(), &options)
                            .is_err()
                    })
                    .unwrap_or_default();
                let ty = freshet_repr::PgType::of_field(element);
                crate::error::sqlstate_error(
                    sqlstate::INVALID_TEXT_REPRESENTATION,
                    format!("invalid input syntax for type {}: \"{bad}\"", ty.sql_name()),
                )
            })?;
        let list = ListArray::try_new(
            Arc::clone(element),
            arrow::buffer::OffsetBuffer::new(split.offsets.into()),
            values,
            Some(arrow::buffer::NullBuffer::from(split.valid)),
        )?;
        udf::to_columnar(udf::array(list), udf::all_scalar(&args))
    }
}

/// `array_out(array)`: an array's text form, as PostgreSQL prints it
/// ([`freshet_repr::array_text::list_literals`]).
#[derive(Debug, PartialEq, Eq, Hash)]
struct ArrayOut {
    signature: Signature,
}

impl ScalarUDFImpl for ArrayOut {
    fn name(&self) -> &str {
        "array_out"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types.first() {
            Some(DataType::List(_) | DataType::Null) => Ok(DataType::Utf8),
            _ => datafusion::common::plan_err!("array_out takes an array"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        use arrow::array::{Array, ListArray, StringArray};
        let input = udf::arg_array(&args, 0)?;
        let out = match input.as_any().downcast_ref::<ListArray>() {
            Some(lists) => StringArray::from(freshet_repr::array_text::list_literals(lists)?),
            None => StringArray::new_null(input.len()),
        };
        udf::to_columnar(udf::array(out), udf::all_scalar(&args))
    }
}

/// Rounding before a cast to integer: numeric rounds half away from zero,
/// floating point half to even (`rint`), as Postgres does. The result is
/// `bigint`; the enclosing cast narrows it (and reports overflow).
#[derive(Debug, PartialEq, Eq, Hash)]
struct RoundToInt {
    signature: Signature,
}

impl ScalarUDFImpl for RoundToInt {
    fn name(&self) -> &str {
        "round_to_int"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        use arrow::array::{Array, Decimal128Array, Float32Array, Float64Array, Int64Array};
        let array = udf::arg_array(&args, 0)?;
        let overflow = || {
            crate::error::sqlstate_error(
                sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                "bigint out of range",
            )
        };
        let out: Int64Array = match array.data_type() {
            DataType::Decimal128(_, scale) => {
                let a = array
                    .as_any()
                    .downcast_ref::<Decimal128Array>()
                    .ok_or_else(overflow)?;
                let div = 10i128
                    .checked_pow(*scale.max(&0) as u32)
                    .ok_or_else(overflow)?;
                a.iter()
                    .map(|v| {
                        v.map(|v| {
                            let q = v / div;
                            let r = (v % div).abs();
                            let q = if r * 2 >= div { q + v.signum() } else { q };
                            i64::try_from(q).map_err(|_| overflow())
                        })
                        .transpose()
                    })
                    .collect::<Result<_>>()?
            }
            DataType::Float64 | DataType::Float32 => {
                let values: Vec<Option<f64>> =
                    if let Some(a) = array.as_any().downcast_ref::<Float64Array>() {
                        a.iter().collect()
                    } else if let Some(a) = array.as_any().downcast_ref::<Float32Array>() {
                        a.iter().map(|v| v.map(f64::from)).collect()
                    } else {
                        vec![]
                    };
                values
                    .into_iter()
                    .map(|v| {
                        v.map(|v| {
                            let r = v.round_ties_even();
                            if r.is_finite() && r >= i64::MIN as f64 && r < i64::MAX as f64 {
                                Ok(r as i64)
                            } else {
                                Err(overflow())
                            }
                        })
                        .transpose()
                    })
                    .collect::<Result<_>>()?
            }
            other => {
                return datafusion::common::exec_err!("round_to_int does not take {other}");
            }
        };
        udf::to_columnar(udf::array(out), udf::all_scalar(&args))
    }
}

/// `timestamp` / `timestamptz` input from text in Postgres's forms.
#[derive(Debug, PartialEq, Eq, Hash)]
struct TimestampIn {
    zoned: bool,
    signature: Signature,
}

impl ScalarUDFImpl for TimestampIn {
    fn name(&self) -> &str {
        if self.zoned {
            "timestamptz_in"
        } else {
            "timestamp_in"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Timestamp(
            arrow::datatypes::TimeUnit::Microsecond,
            self.zoned.then(|| freshet_repr::UTC_TZ.into()),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        use crate::pg::text::{TimestampInput, parse_timestamp};
        use arrow::array::TimestampMicrosecondArray;
        let strings = udf::string_arg(&args, 0, self.name())?;
        let session_tz = crate::pg::time_zone::session_tz(&args.config_options);
        // A skipped or repeated local time is read as PostgreSQL reads it.
        let offset_of = |naive: chrono::NaiveDateTime| {
            Some(crate::pg::time_zone::local_offset(&session_tz, naive))
        };
        let out = strings
            .iter()
            .map(|v| {
                v.map(|s| {
                    let mode = if self.zoned {
                        TimestampInput::Zoned(&offset_of)
                    } else {
                        TimestampInput::Naive
                    };
                    parse_timestamp(s, mode).ok_or_else(|| {
                        crate::error::sqlstate_error(
                            sqlstate::INVALID_DATETIME_FORMAT,
                            format!(
                                "invalid input syntax for type {}: \"{s}\"",
                                if self.zoned {
                                    "timestamp with time zone"
                                } else {
                                    "timestamp"
                                }
                            ),
                        )
                    })
                })
                .transpose()
            })
            .collect::<Result<TimestampMicrosecondArray>>()?;
        let out = if self.zoned {
            out.with_timezone(freshet_repr::UTC_TZ)
        } else {
            out
        };
        udf::to_columnar(udf::array(out), udf::all_scalar(&args))
    }
}

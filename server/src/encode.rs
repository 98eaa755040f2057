//! Query results on the wire: field descriptions and rows in text or binary
//! format, following each column's Postgres type.
//!
//! Most values are encoded by `arrow-pg`; Freshet encodes itself the types
//! Arrow has no native form for (`uuid`, `jsonb`, `oid`) and `numeric`
//! text, which it prints exactly (and trims for unconstrained `numeric`).

use std::error::Error;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Decimal128Array, Float32Array, Float64Array, RecordBatch, StringArray,
    UInt32Array,
};
use arrow::datatypes::{DataType, Field, TimeUnit};
use arrow_pg::encoder::{Encoder, encode_value};
use bytes::{BufMut, BytesMut};
use freshet_repr::{PgType, RelationDesc};
use pgwire::api::Type;
use pgwire::api::portal::Format;
use pgwire::api::results::{FieldFormat, FieldInfo};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::types::ToSqlText;
use pgwire::types::format::FormatOptions;
use postgres_types::{IsNull, ToSql};

/// The `postgres_types::Type` for a Postgres type.
pub fn wire_type(ty: &PgType) -> Type {
    Type::from_oid(ty.oid()).unwrap_or(Type::TEXT)
}

/// Field descriptions for a result.
pub fn field_infos(
    desc: &RelationDesc,
    format: &Format,
    options: &Arc<FormatOptions>,
) -> Vec<FieldInfo> {
    desc.columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            FieldInfo::new(
                c.name.clone(),
                None,
                None,
                wire_type(&c.ty),
                format.format_for(i),
            )
            .with_type_modifier(c.ty.typmod())
            .with_type_size(c.ty.typlen())
            .with_format_options(Arc::clone(options))
        })
        .collect()
}

/// A value already rendered in both formats.
#[derive(Debug)]
struct Raw<'a> {
    text: &'a str,
    binary: &'a [u8],
}

impl ToSql for Raw<'_> {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.put_slice(self.binary);
        Ok(IsNull::No)
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    postgres_types::to_sql_checked!();
}

impl ToSqlText for Raw<'_> {
    fn to_sql_text(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
        _options: &FormatOptions,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.put_slice(self.text.as_bytes());
        Ok(IsNull::No)
    }
}

/// Exact text of a decimal, trimming trailing zeros when `trim`.
pub fn decimal_text(value: i128, scale: i8, trim: bool) -> String {
    let negative = value < 0;
    let digits = value.unsigned_abs().to_string();
    let mut s = if scale > 0 {
        let scale = scale as usize;
        let padded = if digits.len() <= scale {
            format!("{}{}", "0".repeat(scale - digits.len() + 1), digits)
        } else {
            digits
        };
        let (int, frac) = padded.split_at(padded.len() - scale);
        let frac = if trim {
            frac.trim_end_matches('0')
        } else {
            frac
        };
        if frac.is_empty() {
            int.to_string()
        } else {
            format!("{int}.{frac}")
        }
    } else {
        format!("{digits}{}", "0".repeat((-scale) as usize))
    };
    if negative && s.chars().any(|c| c != '0' && c != '.') {
        s.insert(0, '-');
    }
    s
}

/// Columns of a batch prepared for encoding: `timestamptz` converted to the
/// session time zone so it prints in it.
pub fn prepare_columns(
    batch: &RecordBatch,
    desc: &RelationDesc,
    time_zone: &str,
) -> PgWireResult<Vec<(ArrayRef, Field)>> {
    batch
        .columns()
        .iter()
        .zip(batch.schema().fields())
        .zip(&desc.columns)
        .map(|((array, field), col)| {
            if col.ty == PgType::TimestampTz
                && let DataType::Timestamp(unit, _) = array.data_type()
            {
                let target = DataType::Timestamp(*unit, Some(time_zone.into()));
                let cast = arrow::compute::cast(array, &target)
                    .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
                let f = field.as_ref().clone().with_data_type(target);
                return Ok((cast, f));
            }
            if let DataType::Timestamp(TimeUnit::Nanosecond, tz) = array.data_type() {
                // Postgres has microseconds.
                let target = DataType::Timestamp(TimeUnit::Microsecond, tz.clone());
                let cast = arrow::compute::cast(array, &target)
                    .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
                return Ok((cast, field.as_ref().clone().with_data_type(target)));
            }
            Ok((Arc::clone(array), field.as_ref().clone()))
        })
        .collect()
}

/// Encode every row of `batches` with `encoder`, calling `emit` after each
/// row to take it out of the encoder.
pub fn encode_batches<E: Encoder>(
    encoder: &mut E,
    desc: &RelationDesc,
    fields: &[FieldInfo],
    batches: &[RecordBatch],
    time_zone: &str,
    mut emit: impl FnMut(&mut E),
) -> PgWireResult<()> {
    for batch in batches {
        let columns = prepare_columns(batch, desc, time_zone)?;
        for row in 0..batch.num_rows() {
            for (i, (array, field)) in columns.iter().enumerate() {
                encode_cell(encoder, array, field, &desc.columns[i].ty, &fields[i], row)?;
            }
            emit(encoder);
        }
    }
    Ok(())
}

/// Encode one value of row `idx`.
pub fn encode_cell<E: Encoder>(
    encoder: &mut E,
    array: &ArrayRef,
    field: &Field,
    ty: &PgType,
    pg_field: &FieldInfo,
    idx: usize,
) -> PgWireResult<()> {
    let binary = pg_field.format() == FieldFormat::Binary;
    if array.is_null(idx) {
        return encoder.encode_field(&None::<i32>, pg_field);
    }
    match (ty, array.data_type()) {
        (PgType::Uuid, DataType::Utf8) if binary => {
            let s = array
                .as_any()
                .downcast_ref::<StringArray>()
                .map(|a| a.value(idx))
                .unwrap_or_default();
            let u = uuid::Uuid::parse_str(s).map_err(|e| PgWireError::ApiError(Box::new(e)))?;
            encoder.encode_field(
                &Raw {
                    text: s,
                    binary: u.as_bytes(),
                },
                pg_field,
            )
        }
        (PgType::Jsonb, DataType::Utf8) if binary => {
            let s = array
                .as_any()
                .downcast_ref::<StringArray>()
                .map(|a| a.value(idx))
                .unwrap_or_default();
            let mut b = Vec::with_capacity(s.len() + 1);
            b.push(1u8);
            b.extend_from_slice(s.as_bytes());
            encoder.encode_field(
                &Raw {
                    text: s,
                    binary: &b,
                },
                pg_field,
            )
        }
        (PgType::Uuid | PgType::Jsonb, DataType::Utf8) => {
            let s = array
                .as_any()
                .downcast_ref::<StringArray>()
                .map(|a| a.value(idx))
                .unwrap_or_default();
            encoder.encode_field(
                &Raw {
                    text: s,
                    binary: s.as_bytes(),
                },
                pg_field,
            )
        }
        (_, DataType::UInt32) => {
            let v = array
                .as_any()
                .downcast_ref::<UInt32Array>()
                .map(|a| a.value(idx))
                .unwrap_or_default();
            encoder.encode_field(
                &Raw {
                    text: &v.to_string(),
                    binary: &v.to_be_bytes(),
                },
                pg_field,
            )
        }
        (PgType::Timestamp | PgType::TimestampTz | PgType::Time, _)
            if !binary
                && pg_field
                    .format_options()
                    .date_style
                    .to_uppercase()
                    .starts_with("ISO") =>
        {
            match iso_datetime_text(array, idx)? {
                Some(text) => encoder.encode_field(
                    &Raw {
                        text: &text,
                        binary: text.as_bytes(),
                    },
                    pg_field,
                ),
                None => encode_value(encoder, array, idx, field, pg_field),
            }
        }
        (_, DataType::Float64 | DataType::Float32) if !binary => {
            let digits = pg_field.format_options().extra_float_digits;
            let text = match array.data_type() {
                DataType::Float64 => {
                    let v = array
                        .as_any()
                        .downcast_ref::<Float64Array>()
                        .map(|a| a.value(idx))
                        .unwrap_or_default();
                    float_text(v, digits, false)
                }
                _ => {
                    let v = array
                        .as_any()
                        .downcast_ref::<Float32Array>()
                        .map(|a| a.value(idx))
                        .unwrap_or_default();
                    float_text(v as f64, digits, true)
                }
            };
            encoder.encode_field(
                &Raw {
                    text: &text,
                    binary: text.as_bytes(),
                },
                pg_field,
            )
        }
        (PgType::Char { len: Some(n) }, DataType::Utf8) => {
            // Stored without trailing blanks; shown padded, as Postgres does.
            let s = array
                .as_any()
                .downcast_ref::<StringArray>()
                .map(|a| a.value(idx))
                .unwrap_or_default();
            let pad = (*n as usize).saturating_sub(s.chars().count());
            let text = format!("{s}{}", " ".repeat(pad));
            encoder.encode_field(
                &Raw {
                    text: &text,
                    binary: text.as_bytes(),
                },
                pg_field,
            )
        }
        (_, DataType::Decimal128(_, scale)) if !binary => {
            let v = array
                .as_any()
                .downcast_ref::<Decimal128Array>()
                .map(|a| a.value(idx))
                .unwrap_or_default();
            // Only values of unconstrained `numeric` columns (stored at a
            // fixed scale) drop trailing zeros; others keep their scale.
            let trim = field
                .metadata()
                .get(freshet_repr::PG_TYPE_METADATA_KEY)
                .map(String::as_str)
                == Some("numeric");
            let text = decimal_text(v, *scale, trim);
            encoder.encode_field(
                &Raw {
                    text: &text,
                    binary: text.as_bytes(),
                },
                pg_field,
            )
        }
        // Unconstrained `numeric` elements are held at a fixed scale;
        // like unconstrained `numeric` columns they print without the
        // padding zeros (`{1.5,2}`, not `{1.5000000000,2.0000000000}`).
        (_, DataType::List(element))
            if !binary && is_unconstrained_numeric(element.data_type()) =>
        {
            let row = array.slice(idx, 1);
            let text = row
                .as_any()
                .downcast_ref::<arrow::array::ListArray>()
                .map(freshet_repr::array_text::list_literals)
                .transpose()
                .map_err(|e| PgWireError::ApiError(Box::new(e)))?
                .and_then(|mut texts| texts.pop().flatten())
                .unwrap_or_default();
            encoder.encode_field(
                &Raw {
                    text: &text,
                    binary: text.as_bytes(),
                },
                pg_field,
            )
        }
        (PgType::Int2Vector | PgType::OidVector, DataType::List(_)) if !binary => {
            let list = array
                .as_any()
                .downcast_ref::<arrow::array::ListArray>()
                .map(|a| a.value(idx));
            let text = match list {
                Some(values) => {
                    let ints = arrow::compute::cast(&values, &DataType::Int64)
                        .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
                    let ints = ints
                        .as_any()
                        .downcast_ref::<arrow::array::Int64Array>()
                        .map(|a| a.iter().map(|v| v.unwrap_or(0).to_string()).collect())
                        .unwrap_or_else(Vec::new);
                    ints.join(" ")
                }
                None => String::new(),
            };
            encoder.encode_field(
                &Raw {
                    text: &text,
                    binary: text.as_bytes(),
                },
                pg_field,
            )
        }
        _ => encode_value(encoder, array, idx, field, pg_field),
    }
}

/// Whether `t` is unconstrained `numeric`'s Arrow type.
fn is_unconstrained_numeric(t: &DataType) -> bool {
    let (p, s) = freshet_repr::UNCONSTRAINED_NUMERIC;
    *t == DataType::Decimal128(p, s)
}

/// Postgres's text for `float8` (and `float4` when `single`):
/// shortest-precise digits when `extra_float_digits > 0` (fixed notation
/// for decimal exponents in `[-4, 15)` — `[-4, 6)` for float4 — else
/// `1e+20` style), `%g` with `15 + extra_float_digits` (float4: 6 + ...)
/// significant digits otherwise; `Infinity`, `-Infinity`, `NaN`.
pub fn float_text(v: f64, extra_float_digits: i8, single: bool) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let (digits, exp) = if extra_float_digits > 0 {
        let sci = if single {
            format!("{:e}", v as f32)
        } else {
            format!("{v:e}")
        };
        split_sci(&sci)
    } else {
        let precision = (if single { 6 } else { 15 } + extra_float_digits as i32).max(1) as usize;
        let sci = format!("{:.*e}", precision - 1, v);
        let (d, e) = split_sci(&sci);
        (d.trim_end_matches('0').to_string(), e)
    };
    let negative = digits.starts_with('-');
    let digits = digits.trim_start_matches('-').replace('.', "");
    let digits = if digits.is_empty() {
        "0".to_string()
    } else {
        digits
    };
    let upper = if extra_float_digits > 0 {
        if single { 6 } else { 15 }
    } else {
        (if single { 6 } else { 15 } + extra_float_digits as i32).max(1)
    };
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if exp >= -4 && exp < upper {
        if exp < 0 {
            out.push_str("0.");
            out.push_str(&"0".repeat((-exp - 1) as usize));
            out.push_str(&digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.push_str(&"0".repeat(int_len - digits.len()));
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.abs()));
    }
    out
}

/// Split Rust's `{:e}` output into mantissa digits and decimal exponent.
fn split_sci(s: &str) -> (String, i32) {
    match s.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse().unwrap_or(0)),
        None => (s.to_string(), 0),
    }
}

/// Postgres's ISO text for timestamps and times: fractional seconds only
/// when non-zero (trailing zeros trimmed), offsets as `+HH[:MM]`, BC years.
fn iso_datetime_text(array: &ArrayRef, idx: usize) -> PgWireResult<Option<String>> {
    use arrow::array::{Time64MicrosecondArray, TimestampMicrosecondArray};
    use chrono::{Datelike, Offset, TimeZone, Timelike};
    let fraction = |micros: u32| {
        if micros == 0 {
            String::new()
        } else {
            format!(".{micros:06}").trim_end_matches('0').to_string()
        }
    };
    match array.data_type() {
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let Some(a) = array.as_any().downcast_ref::<TimestampMicrosecondArray>() else {
                return Ok(None);
            };
            let micros = a.value(idx);
            let Some(utc) = chrono::DateTime::from_timestamp_micros(micros) else {
                return Ok(None);
            };
            let (local, offset) = match tz {
                Some(tz) => {
                    let tz: arrow::array::timezone::Tz =
                        tz.parse().map_err(|e| PgWireError::ApiError(Box::new(e)))?;
                    let dt = tz.from_utc_datetime(&utc.naive_utc());
                    let off = dt.offset().fix().local_minus_utc();
                    (dt.naive_local(), Some(off))
                }
                None => (utc.naive_utc(), None),
            };
            let (year, bc) = if local.year() <= 0 {
                (1 - local.year(), " BC")
            } else {
                (local.year(), "")
            };
            let mut s = format!(
                "{year:04}-{:02}-{:02} {:02}:{:02}:{:02}{}",
                local.month(),
                local.day(),
                local.hour(),
                local.minute(),
                local.second(),
                fraction(local.nanosecond() / 1000)
            );
            if let Some(off) = offset {
                let sign = if off < 0 { '-' } else { '+' };
                let off = off.abs();
                s.push_str(&format!("{sign}{:02}", off / 3600));
                if off % 3600 != 0 {
                    s.push_str(&format!(":{:02}", (off % 3600) / 60));
                }
                if off % 60 != 0 {
                    s.push_str(&format!(":{:02}", off % 60));
                }
            }
            s.push_str(bc);
            Ok(Some(s))
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let Some(a) = array.as_any().downcast_ref::<Time64MicrosecondArray>() else {
                return Ok(None);
            };
            let micros = a.value(idx);
            let secs = micros / 1_000_000;
            Ok(Some(format!(
                "{:02}:{:02}:{:02}{}",
                secs / 3600,
                (secs % 3600) / 60,
                secs % 60,
                fraction((micros % 1_000_000) as u32)
            )))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_print_like_postgres() {
        use arrow::array::{Time64MicrosecondArray, TimestampMicrosecondArray};
        let utc: ArrayRef = Arc::new(
            TimestampMicrosecondArray::from(vec![1_704_110_400_000_000, 1_704_110_400_500_000])
                .with_timezone("+00:00"),
        );
        assert_eq!(
            iso_datetime_text(&utc, 0).unwrap().unwrap(),
            "2024-01-01 12:00:00+00"
        );
        assert_eq!(
            iso_datetime_text(&utc, 1).unwrap().unwrap(),
            "2024-01-01 12:00:00.5+00"
        );
        let ist: ArrayRef = Arc::new(
            TimestampMicrosecondArray::from(vec![1_704_110_400_000_000]).with_timezone("+05:30"),
        );
        assert_eq!(
            iso_datetime_text(&ist, 0).unwrap().unwrap(),
            "2024-01-01 17:30:00+05:30"
        );
        let naive: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![0]));
        assert_eq!(
            iso_datetime_text(&naive, 0).unwrap().unwrap(),
            "1970-01-01 00:00:00"
        );
        let t: ArrayRef = Arc::new(Time64MicrosecondArray::from(vec![3_723_000_100]));
        assert_eq!(iso_datetime_text(&t, 0).unwrap().unwrap(), "01:02:03.0001");
    }

    #[test]
    fn floats_print_like_postgres() {
        let cases: &[(f64, &str)] = &[
            (2.0, "2"),
            (1e20, "1e+20"),
            (1.25e-5, "1.25e-05"),
            (1e10, "10000000000"),
            (0.1 + 0.2, "0.30000000000000004"),
            (-1.5, "-1.5"),
            (123456789012345.0, "123456789012345"),
            (1234567890123456.0, "1.234567890123456e+15"),
            (0.0001, "0.0001"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (f64::NAN, "NaN"),
        ];
        for (v, want) in cases {
            assert_eq!(float_text(*v, 1, false), *want, "{v}");
        }
        assert_eq!(float_text(1.5, 1, true), "1.5");
        assert_eq!(float_text(1234567.0, 1, true), "1.234567e+06");
        assert_eq!(float_text(0.1 + 0.2, 0, false), "0.3");
        assert_eq!(float_text(2.5, 0, false), "2.5");
    }

    #[test]
    fn decimals_print_exactly() {
        assert_eq!(decimal_text(12345, 2, false), "123.45");
        assert_eq!(decimal_text(-5, 2, false), "-0.05");
        assert_eq!(decimal_text(1500000000, 10, true), "0.15");
        assert_eq!(decimal_text(10000000000, 10, true), "1");
        assert_eq!(decimal_text(7, 0, false), "7");
        assert_eq!(decimal_text(0, 2, false), "0.00");
        assert_eq!(decimal_text(-100, 2, true), "-1");
        assert_eq!(decimal_text(i128::MAX, 0, false), i128::MAX.to_string());
    }
}

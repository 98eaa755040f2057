//! Decoding `Bind` parameters into DataFusion values.

use arrow::datatypes::{DataType, FieldRef};
use bytes::Bytes;
use datafusion::common::{ParamValues, ScalarValue};
use freshet_repr::PgType;
use freshet_repr::sqlstate;
use pgwire::api::Type;
use pgwire::api::portal::Format;
use postgres_types::FromSql;

use crate::error::{AdapterError, Result};
use crate::values::parse_text_array;

fn bad(ty: &Type, e: impl std::fmt::Display) -> AdapterError {
    AdapterError::data(
        sqlstate::INVALID_BINARY_REPRESENTATION,
        format!(
            "incorrect binary data format in bind parameter of type {}: {e}",
            ty.name()
        ),
    )
}

/// One value in `ty`'s binary send format (a parameter, a binary COPY
/// field).
pub(crate) fn decode_binary(ty: &Type, raw: &[u8]) -> Result<ScalarValue> {
    macro_rules! get {
        ($t:ty) => {
            <$t as FromSql>::from_sql(ty, raw).map_err(|e| bad(ty, e))?
        };
    }
    Ok(match *ty {
        Type::BOOL => ScalarValue::Boolean(Some(get!(bool))),
        Type::INT2 => ScalarValue::Int16(Some(get!(i16))),
        Type::INT4 => ScalarValue::Int32(Some(get!(i32))),
        Type::INT8 => ScalarValue::Int64(Some(get!(i64))),
        Type::OID => ScalarValue::UInt32(Some(get!(u32))),
        Type::FLOAT4 => ScalarValue::Float32(Some(get!(f32))),
        Type::FLOAT8 => ScalarValue::Float64(Some(get!(f64))),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
            ScalarValue::Utf8(Some(get!(String)))
        }
        Type::BYTEA => ScalarValue::Binary(Some(get!(Vec<u8>))),
        Type::DATE => {
            let d = get!(chrono::NaiveDate);
            let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
            ScalarValue::Date32(Some((d - epoch).num_days() as i32))
        }
        Type::TIME => {
            let t = get!(chrono::NaiveTime);
            let micros = t
                .signed_duration_since(chrono::NaiveTime::MIN)
                .num_microseconds()
                .unwrap_or(0);
            ScalarValue::Time64Microsecond(Some(micros))
        }
        Type::TIMESTAMP => {
            let t = get!(chrono::NaiveDateTime);
            ScalarValue::TimestampMicrosecond(Some(t.and_utc().timestamp_micros()), None)
        }
        Type::TIMESTAMPTZ => {
            let t = get!(chrono::DateTime<chrono::Utc>);
            ScalarValue::TimestampMicrosecond(Some(t.timestamp_micros()), Some("+00:00".into()))
        }
        Type::NUMERIC => {
            let d = get!(rust_decimal::Decimal);
            ScalarValue::Decimal128(Some(d.mantissa()), 38, d.scale() as i8)
        }
        Type::UUID => {
            let bytes: [u8; 16] = raw.try_into().map_err(|_| bad(ty, "expected 16 bytes"))?;
            ScalarValue::Utf8(Some(uuid::Uuid::from_bytes(bytes).hyphenated().to_string()))
        }
        Type::JSONB => {
            let text = raw.get(1..).ok_or_else(|| bad(ty, "empty"))?;
            ScalarValue::Utf8(Some(String::from_utf8_lossy(text).into_owned()))
        }
        Type::JSON => ScalarValue::Utf8(Some(String::from_utf8_lossy(raw).into_owned())),
        Type::INTERVAL => {
            // Microseconds, days, months.
            let bytes: [u8; 16] = raw.try_into().map_err(|_| bad(ty, "expected 16 bytes"))?;
            let micros = i64::from_be_bytes(bytes[..8].try_into().unwrap_or_default());
            let days = i32::from_be_bytes(bytes[8..12].try_into().unwrap_or_default());
            let months = i32::from_be_bytes(bytes[12..].try_into().unwrap_or_default());
            ScalarValue::IntervalMonthDayNano(Some(arrow::datatypes::IntervalMonthDayNano::new(
                months,
                days,
                micros.saturating_mul(1000),
            )))
        }
        _ if matches!(ty.kind(), postgres_types::Kind::Array(_)) => decode_binary_array(ty, raw)?,
        _ => {
            return Err(AdapterError::Unsupported(format!(
                "binary parameters of type {} are not supported",
                ty.name()
            )));
        }
    })
}

/// A one-dimensional array in PostgreSQL's binary array format: the
/// number of dimensions, a has-NULLs flag, the element type's oid, each
/// dimension's length and lower bound, then each element as a length
/// (-1: NULL) and its bytes.
fn decode_binary_array(ty: &Type, raw: &[u8]) -> Result<ScalarValue> {
    let postgres_types::Kind::Array(elem) = ty.kind() else {
        return Err(bad(ty, "not an array type"));
    };
    let mut rest = raw;
    let int = |rest: &mut &[u8]| -> Result<i32> {
        let (head, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| bad(ty, "truncated array"))?;
        *rest = tail;
        Ok(i32::from_be_bytes(*head))
    };
    let ndim = int(&mut rest)?;
    let _has_nulls = int(&mut rest)?;
    let elem_oid = int(&mut rest)? as u32;
    if elem_oid != elem.oid() {
        return Err(bad(
            ty,
            format!("array of element type {elem_oid}, expected {}", elem.oid()),
        ));
    }
    let elem_arrow = arrow_of(elem).ok_or_else(|| {
        AdapterError::Unsupported(format!(
            "binary parameters of type {} are not supported",
            ty.name()
        ))
    })?;
    let len = match ndim {
        0 => 0,
        1 => {
            let len = int(&mut rest)?;
            let _lower_bound = int(&mut rest)?;
            usize::try_from(len).map_err(|_| bad(ty, "negative array length"))?
        }
        _ => {
            return Err(AdapterError::Unsupported(
                "multidimensional array parameters are not supported".into(),
            ));
        }
    };
    // Each element takes at least its 4-byte length: a length beyond what
    // the message holds is malformed, not an allocation to attempt.
    if len > rest.len() / 4 {
        return Err(bad(ty, "array longer than its data"));
    }
    let mut values = Vec::with_capacity(len);
    for _ in 0..len {
        let n = int(&mut rest)?;
        if n < 0 {
            values.push(ScalarValue::try_from(&elem_arrow).map_err(AdapterError::DataFusion)?);
            continue;
        }
        let n = n as usize;
        if n > rest.len() {
            return Err(bad(ty, "truncated array element"));
        }
        let (bytes, tail) = rest.split_at(n);
        rest = tail;
        values.push(
            decode_binary(elem, bytes)?
                .cast_to(&elem_arrow)
                .map_err(AdapterError::DataFusion)?,
        );
    }
    Ok(ScalarValue::List(ScalarValue::new_list_nullable(
        &values,
        &elem_arrow,
    )))
}

/// The Arrow type of a client-declared parameter type (arrays included:
/// pgJDBC declares `text[]` and sends its binary form).
fn arrow_of(ty: &Type) -> Option<DataType> {
    PgType::from_oid(ty.oid(), -1).map(|t| t.arrow_type())
}

/// `text` as an integer of type `pg`, when it is one (the common case of
/// a key parameter): what the general parse (an Arrow cast of the trimmed
/// text) gives for it, without building arrays. `None` for other types and
/// for text that does not parse, which the general parse then reports.
fn parse_integer(text: &str, pg: &PgType) -> Option<ScalarValue> {
    let text = text.trim();
    match pg {
        PgType::Int2 => text
            .parse::<i16>()
            .ok()
            .map(|v| ScalarValue::Int16(Some(v))),
        PgType::Int4 => text
            .parse::<i32>()
            .ok()
            .map(|v| ScalarValue::Int32(Some(v))),
        PgType::Int8 => text
            .parse::<i64>()
            .ok()
            .map(|v| ScalarValue::Int64(Some(v))),
        _ => None,
    }
}

/// Decode every parameter: `raw[i]` in `formats`, declared as `declared[i]`
/// by the client (if it declared one), planned as `inferred[i]`.
pub fn decode(
    raw: &[Option<Bytes>],
    formats: &Format,
    declared: &[Option<Type>],
    inferred: &[Option<FieldRef>],
) -> Result<Option<ParamValues>> {
    if raw.is_empty() {
        return Ok(None);
    }
    let mut values = Vec::with_capacity(raw.len());
    for (i, value) in raw.iter().enumerate() {
        let declared = declared
            .get(i)
            .cloned()
            .flatten()
            .filter(|t| *t != Type::UNKNOWN);
        let inferred = inferred.get(i).cloned().flatten();
        // The Postgres type the client was told (for a value in its
        // binary format) and its text is parsed as.
        let inferred_pg = inferred.as_deref().map(PgType::of_field);
        let target = inferred
            .map(|f| f.data_type().clone())
            .or_else(|| declared.as_ref().and_then(arrow_of))
            .unwrap_or(DataType::Utf8);
        let read_as = inferred_pg.or_else(|| PgType::from_arrow(&target));
        let scalar = match value {
            None => ScalarValue::try_from(&target).map_err(AdapterError::DataFusion)?,
            Some(bytes) if formats.is_binary(i) => {
                // Without a declared type the client encodes with the type
                // our ParameterDescription reported.
                let ty = declared.clone().unwrap_or_else(|| {
                    read_as
                        .as_ref()
                        .map(crate::encode::wire_type)
                        .unwrap_or(Type::TEXT)
                });
                decode_binary(&ty, bytes)?
                    .cast_to(&target)
                    .map_err(AdapterError::DataFusion)?
            }
            Some(bytes) => {
                let text = std::str::from_utf8(bytes).map_err(|_| {
                    AdapterError::data(
                        sqlstate::CHARACTER_NOT_IN_REPERTOIRE,
                        "invalid byte sequence for encoding \"UTF8\"",
                    )
                })?;
                let pg = read_as.clone().unwrap_or(PgType::Text);
                // Field names and nullability inside a list type do not
                // matter (the final cast fixes them up); a differing type
                // does.
                let pg = if pg.arrow_type().equals_datatype(&target) {
                    pg
                } else {
                    PgType::Text
                };
                let scalar = match parse_integer(text, &pg) {
                    Some(scalar) => scalar,
                    None => {
                        let array = parse_text_array(&[Some(text)], &pg)?;
                        ScalarValue::try_from_array(&array, 0).map_err(AdapterError::DataFusion)?
                    }
                };
                scalar.cast_to(&target).map_err(AdapterError::DataFusion)?
            }
        };
        values.push(scalar);
    }
    Ok(Some(ParamValues::List(
        values.into_iter().map(Into::into).collect(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct integer parse gives what the general parse gives, and
    /// leaves what it cannot parse to it (which reports the error).
    #[test]
    fn integers_parse_as_the_general_path_does() {
        let inputs = [
            "0",
            "7",
            " 42 ",
            "+5",
            "-32768",
            "32767",
            "32768",
            "-2147483648",
            "2147483647",
            "2147483648",
            "9223372036854775807",
            "9223372036854775808",
            "",
            "1.5",
            "1e3",
            "x",
            "0x10",
            "- 1",
        ];
        for pg in [PgType::Int2, PgType::Int4, PgType::Int8] {
            for text in inputs {
                let general = parse_text_array(&[Some(text)], &pg)
                    .ok()
                    .and_then(|a| ScalarValue::try_from_array(&a, 0).ok());
                match parse_integer(text, &pg) {
                    Some(direct) => assert_eq!(Some(direct), general, "{pg:?} {text:?}"),
                    None => assert!(general.is_none(), "{pg:?} {text:?}: {general:?}"),
                }
            }
        }
        assert_eq!(parse_integer("1", &PgType::Text), None);
    }
}

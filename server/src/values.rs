//! Values from text (COPY data, text-format parameters) and the checks every
//! written row passes: NOT NULL, length limits, and the canonical forms of
//! `char(n)`, `uuid` and `jsonb`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BinaryArray, BooleanArray, RecordBatch, StringArray};
use arrow::compute::CastOptions;
use arrow::datatypes::DataType;
use arrow::util::display::FormatOptions;
use freshet_repr::sqlstate;
use freshet_repr::{PgType, RelationDesc};

use crate::error::{AdapterError, Result};
pub use freshet_planner::pg::text::{canonical_jsonb, canonical_uuid, parse_bool, parse_bytea};

fn invalid_input(ty: &PgType, value: &str) -> AdapterError {
    AdapterError::data(
        sqlstate::INVALID_TEXT_REPRESENTATION,
        format!(
            "invalid input syntax for type {}: \"{value}\"",
            ty.sql_name()
        ),
    )
}

/// Parse text values into an array of `ty`.
pub fn parse_text_array(values: &[Option<&str>], ty: &PgType) -> Result<ArrayRef> {
    Ok(match ty {
        PgType::Bool => Arc::new(
            values
                .iter()
                .map(|v| match v {
                    None => Ok(None),
                    Some(s) => parse_bool(s).map(Some).ok_or_else(|| invalid_input(ty, s)),
                })
                .collect::<Result<BooleanArray>>()?,
        ),
        PgType::Date => Arc::new(
            values
                .iter()
                .map(|v| match v {
                    None => Ok(None),
                    Some(s) => freshet_planner::pg::text::parse_date(s)
                        .map(Some)
                        .ok_or_else(|| {
                            AdapterError::data(
                                sqlstate::INVALID_DATETIME_FORMAT,
                                format!("invalid input syntax for type date: \"{s}\""),
                            )
                        }),
                })
                .collect::<Result<arrow::array::Date32Array>>()?,
        ),
        PgType::Bytea => {
            let parsed: Vec<Option<Vec<u8>>> = values
                .iter()
                .map(|v| match v {
                    None => Ok(None),
                    Some(s) => parse_bytea(s).map(Some).ok_or_else(|| invalid_input(ty, s)),
                })
                .collect::<Result<_>>()?;
            Arc::new(BinaryArray::from_iter(parsed.iter().map(|v| v.as_deref())))
        }
        // Canonical (lower-case, hyphenated) as stored, so a parameter in
        // any spelling compares equal to the column's value.
        PgType::Uuid => Arc::new(
            values
                .iter()
                .map(|v| match v {
                    None => Ok(None),
                    Some(s) => uuid::Uuid::parse_str(s.trim())
                        .map(|u| Some(u.hyphenated().to_string()))
                        .map_err(|_| invalid_input(ty, s)),
                })
                .collect::<Result<StringArray>>()?,
        ),
        PgType::Text | PgType::Varchar { .. } | PgType::Char { .. } | PgType::Jsonb => {
            Arc::new(StringArray::from(values.to_vec()))
        }
        PgType::Array(elem) => {
            // Each value's elements, parsed together as the element type.
            let split = freshet_repr::array_text::split_arrays(values.iter().copied())
                .map_err(|m| AdapterError::data(sqlstate::INVALID_TEXT_REPRESENTATION, m))?;
            let refs: Vec<Option<&str>> = split.elements.iter().map(|e| e.as_deref()).collect();
            let items = parse_text_array(&refs, elem)?;
            Arc::new(arrow::array::ListArray::try_new(
                Arc::new(arrow::datatypes::Field::new_list_field(
                    elem.arrow_type(),
                    true,
                )),
                arrow::buffer::OffsetBuffer::new(split.offsets.into()),
                items,
                Some(arrow::buffer::NullBuffer::from(split.valid)),
            )?)
        }
        other => {
            let strings: ArrayRef = Arc::new(StringArray::from(
                values.iter().map(|v| v.map(str::trim)).collect::<Vec<_>>(),
            ));
            let options = CastOptions {
                safe: false,
                format_options: FormatOptions::default(),
            };
            match arrow::compute::cast_with_options(&strings, &other.arrow_type(), &options) {
                Ok(a) => a,
                Err(_) => {
                    // Find the offending value for the message.
                    for v in values.iter().flatten() {
                        let one: ArrayRef = Arc::new(StringArray::from(vec![v.trim()]));
                        if arrow::compute::cast_with_options(&one, &other.arrow_type(), &options)
                            .is_err()
                        {
                            return Err(invalid_input(other, v));
                        }
                    }
                    return Err(invalid_input(other, ""));
                }
            }
        }
    })
}

/// `desc`'s Arrow schema with every column nullable: for rows not yet
/// checked by [`check_rows`] (which reports NULLs in NOT NULL columns as
/// 23502 rather than failing to build the batch).
pub fn unchecked_schema(desc: &RelationDesc) -> arrow::datatypes::SchemaRef {
    let schema = desc.arrow_schema();
    let fields: Vec<arrow::datatypes::Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    std::sync::Arc::new(arrow::datatypes::Schema::new(fields))
}

/// Check rows against a table's columns and bring values into canonical
/// form: NOT NULL (23502), `varchar(n)`/`char(n)` length (22001), `char(n)`
/// padding, `uuid` and `jsonb` syntax (22P02).
pub fn check_rows(table: &str, desc: &RelationDesc, batch: RecordBatch) -> Result<RecordBatch> {
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(batch.num_columns());
    for (array, col) in batch.columns().iter().zip(&desc.columns) {
        if !col.nullable && array.null_count() > 0 {
            return Err(AdapterError::Data {
                code: sqlstate::NOT_NULL_VIOLATION,
                message: format!(
                    "null value in column \"{}\" of relation \"{table}\" violates not-null constraint",
                    col.name
                ),
                detail: None,
            });
        }
        let fixed: ArrayRef = match (&col.ty, array.data_type()) {
            (PgType::Varchar { max_len: Some(n) }, DataType::Utf8)
            | (PgType::Char { len: Some(n) }, DataType::Utf8) => {
                // Postgres silently drops trailing blanks beyond the length;
                // anything else that does not fit is an error. `char(n)`
                // values are stored without trailing blanks (they are not
                // significant) and padded when shown.
                let n = *n as usize;
                let is_char = matches!(col.ty, PgType::Char { .. });
                let a = array.as_string::<i32>();
                let out = a
                    .iter()
                    .map(|v| {
                        v.map(|s| {
                            let kept = if s.chars().count() > n {
                                if s.chars().skip(n).all(|c| c == ' ') {
                                    s.chars().take(n).collect::<String>()
                                } else {
                                    return Err(AdapterError::data(
                                        sqlstate::STRING_DATA_RIGHT_TRUNCATION,
                                        format!("value too long for type {}", col.ty.sql_name()),
                                    ));
                                }
                            } else {
                                s.to_string()
                            };
                            Ok(if is_char {
                                kept.trim_end_matches(' ').to_string()
                            } else {
                                kept
                            })
                        })
                        .transpose()
                    })
                    .collect::<Result<StringArray>>()?;
                Arc::new(out)
            }
            (PgType::Uuid, DataType::Utf8) => {
                let a = array.as_string::<i32>();
                Arc::new(
                    a.iter()
                        .map(|v| {
                            v.map(|s| canonical_uuid(s).ok_or_else(|| invalid_input(&col.ty, s)))
                                .transpose()
                        })
                        .collect::<Result<StringArray>>()?,
                )
            }
            (PgType::Jsonb, DataType::Utf8) => {
                let a = array.as_string::<i32>();
                Arc::new(
                    a.iter()
                        .map(|v| {
                            v.map(|s| {
                                canonical_jsonb(s).ok_or_else(|| {
                                    AdapterError::data(
                                        sqlstate::INVALID_TEXT_REPRESENTATION,
                                        format!("invalid input syntax for type json: \"{s}\""),
                                    )
                                })
                            })
                            .transpose()
                        })
                        .collect::<Result<StringArray>>()?,
                )
            }
            // A decimal of another precision (`CREATE TABLE AS` of
            // `sum(numeric(10,2))` into a `numeric` column), a narrower
            // integer: converted to the column's type, failing on
            // overflow rather than wrapping.
            (_, from)
                if *from != col.ty.arrow_type()
                    && from.is_numeric()
                    && col.ty.arrow_type().is_numeric() =>
            {
                let options = arrow::compute::CastOptions {
                    safe: false,
                    ..Default::default()
                };
                arrow::compute::cast_with_options(array, &col.ty.arrow_type(), &options).map_err(
                    |e| {
                        AdapterError::data(
                            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                            format!("value out of range for column \"{}\": {e}", col.name),
                        )
                    },
                )?
            }
            _ => Arc::clone(array),
        };
        columns.push(fixed);
    }
    RecordBatch::try_new_with_options(
        desc.arrow_schema(),
        columns,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
    .map_err(|e| AdapterError::Internal(e.to_string()))
}

//! `json_build_object(k1, v1, ...)` and `jsonb_build_object`: an object of
//! the key/value pairs given (SQLAlchemy's column reflection reads a
//! column's identity options with it). Both return `jsonb` (Freshet has no
//! separate `json` type), printed canonically.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, StringArray};
use arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use freshet_repr::{PgType, sqlstate};

/// Both functions.
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    ["json_build_object", "jsonb_build_object"]
        .into_iter()
        .map(|name| {
            Arc::new(ScalarUDF::new_from_impl(BuildObject {
                name,
                signature: Signature::variadic_any(Volatility::Immutable),
            }))
        })
        .collect()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct BuildObject {
    name: &'static str,
    signature: Signature,
}

/// The JSON form of row `i` of `a` (of PostgreSQL type `pg`).
fn json_value(a: &ArrayRef, pg: &PgType, i: usize) -> Result<serde_json::Value> {
    use serde_json::Value;
    if a.is_null(i) || a.data_type() == &DataType::Null {
        return Ok(Value::Null);
    }
    let scalar = ScalarValue::try_from_array(a, i)?;
    Ok(match (&scalar, pg) {
        (ScalarValue::Boolean(Some(b)), _) => Value::Bool(*b),
        (ScalarValue::Utf8(Some(s)), PgType::Jsonb) => {
            serde_json::from_str(s).unwrap_or(Value::String(s.clone()))
        }
        (ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)), _) => {
            Value::String(s.clone())
        }
        _ if a.data_type().is_numeric() => {
            let text = scalar.to_string();
            serde_json::from_str::<serde_json::Number>(&text)
                .map(Value::Number)
                .unwrap_or(Value::String(text))
        }
        _ => Value::String(scalar.to_string()),
    })
}

impl ScalarUDFImpl for BuildObject {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        if !args.arg_fields.len().is_multiple_of(2) {
            return Err(crate::error::sqlstate_error(
                sqlstate::INVALID_PARAMETER_VALUE,
                "argument list must have even number of elements",
            ));
        }
        Ok(Arc::new(PgType::Jsonb.field(self.name, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays: Vec<ArrayRef> = args
            .args
            .iter()
            .map(|a| a.to_array(rows))
            .collect::<Result<_>>()?;
        let types: Vec<PgType> = args
            .arg_fields
            .iter()
            .map(|f| PgType::of_field(f))
            .collect();
        let mut out = Vec::with_capacity(rows);
        for row in 0..rows {
            let mut object = serde_json::Map::new();
            for (pair, chunk) in arrays.chunks(2).enumerate() {
                let [key, value] = chunk else { break };
                if key.is_null(row) || key.data_type() == &DataType::Null {
                    return Err(crate::error::sqlstate_error(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        format!("argument {}: key must not be null", 2 * pair + 1),
                    ));
                }
                let key = ScalarValue::try_from_array(key, row)?;
                let key = match key {
                    ScalarValue::Utf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => s,
                    other => other.to_string(),
                };
                object.insert(key, json_value(value, &types[2 * pair + 1], row)?);
            }
            out.push(Some(crate::pg::text::jsonb_text(
                &serde_json::Value::Object(object),
            )));
        }
        Ok(ColumnarValue::Array(
            Arc::new(StringArray::from(out)) as ArrayRef
        ))
    }
}

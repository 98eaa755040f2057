//! Postgres functions DataFusion lacks.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use freshet_repr::PgType;
use freshet_repr::sqlstate;

/// Every function this module provides.
pub fn all() -> Vec<Arc<ScalarUDF>> {
    let mut out = vec![
        Arc::new(ScalarUDF::new_from_impl(PgTypeof {
            signature: Signature::any(1, Volatility::Immutable),
        })),
        Arc::new(ScalarUDF::new_from_impl(Mod {
            signature: Signature::user_defined(Volatility::Immutable),
        })),
        Arc::new(ScalarUDF::new_from_impl(EncodingToChar {
            signature: Signature::any(1, Volatility::Immutable),
        })),
    ];
    out.extend(crate::query::json_build::functions());
    out.extend(crate::query::jsonb_ops::functions());
    out.extend(crate::query::jsonb_functions::functions());
    out.extend(crate::query::crypto::functions());
    out.extend(crate::query::array_functions::functions());
    out
}

/// `pg_encoding_to_char(encoding)`: the name of an encoding number. Freshet
/// stores and speaks only UTF-8 (Postgres's number 6); other numbers have
/// no name, which Postgres answers with an empty string.
#[derive(Debug, PartialEq, Eq, Hash)]
struct EncodingToChar {
    signature: Signature,
}

/// Postgres's number for UTF-8 (`pg_database.encoding`).
pub const UTF8_ENCODING: i64 = 6;

impl ScalarUDFImpl for EncodingToChar {
    fn name(&self) -> &str {
        "pg_encoding_to_char"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = crate::udf::all_scalar(&args);
        let input = crate::udf::arg_array(&args, 0)?;
        let numbers = arrow::compute::cast(&input, &DataType::Int64)?;
        let numbers = numbers
            .as_any()
            .downcast_ref::<arrow::array::Int64Array>()
            .ok_or_else(|| {
                datafusion::common::internal_datafusion_err!(
                    "pg_encoding_to_char: numbers not cast to Int64"
                )
            })?;
        let names: arrow::array::StringArray = numbers
            .iter()
            .map(|n| n.map(|n| if n == UTF8_ENCODING { "UTF8" } else { "" }))
            .collect();
        crate::udf::to_columnar(Arc::new(names), scalar)
    }
}

/// `ceil`, `floor` and `trunc` that return `numeric` with scale 0 for
/// `numeric` input, as Postgres does (DataFusion keeps the input scale and
/// prints `3.0`). Other inputs go to DataFusion's implementation.
pub fn decimal_rounding(
    existing: &std::collections::HashMap<String, Arc<ScalarUDF>>,
) -> Vec<Arc<ScalarUDF>> {
    ["ceil", "floor", "trunc"]
        .into_iter()
        .filter_map(|name| {
            let inner = existing.get(name)?;
            Some(Arc::new(ScalarUDF::new_from_impl(DecimalRounding {
                name,
                inner: Arc::clone(inner),
            })))
        })
        .collect()
}

#[derive(Debug)]
struct DecimalRounding {
    name: &'static str,
    inner: Arc<ScalarUDF>,
}

impl PartialEq for DecimalRounding {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for DecimalRounding {}

impl std::hash::Hash for DecimalRounding {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state)
    }
}

impl ScalarUDFImpl for DecimalRounding {
    fn name(&self) -> &str {
        self.name
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [DataType::Decimal128(p, _)] => Ok(DataType::Decimal128(*p, 0)),
            _ => self.inner.return_type(arg_types),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [arg] = args.args.as_slice() else {
            return self.inner.invoke_with_args(args);
        };
        let DataType::Decimal128(p, s) = arg.data_type() else {
            return self.inner.invoke_with_args(args);
        };
        use arrow::array::{Array, Decimal128Array};
        let array = arg.to_array(args.number_rows.max(1))?;
        let a = array
            .as_any()
            .downcast_ref::<Decimal128Array>()
            .ok_or_else(|| {
                datafusion::error::DataFusionError::Internal("decimal expected".into())
            })?;
        let div = 10i128.pow(s.max(0) as u32);
        let out: Decimal128Array = a
            .iter()
            .map(|v| {
                v.map(|v| {
                    let (q, r) = (v / div, v % div);
                    match self.name {
                        "ceil" if r > 0 => q + 1,
                        "floor" if r < 0 => q - 1,
                        _ => q,
                    }
                })
            })
            .collect::<Decimal128Array>()
            .with_precision_and_scale(p, 0)?;
        crate::udf::to_columnar(crate::udf::array(out), crate::udf::all_scalar(&args))
    }
}

/// `pg_typeof(x)`: the Postgres name of the argument's type.
#[derive(Debug, PartialEq, Eq, Hash)]
struct PgTypeof {
    signature: Signature,
}

impl ScalarUDFImpl for PgTypeof {
    fn name(&self) -> &str {
        "pg_typeof"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = args
            .arg_fields
            .first()
            .map(|f| PgType::of_field(f).sql_name())
            .unwrap_or_else(|| "unknown".into());
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(name))))
    }
}

/// `mod(a, b)`: the remainder, raising 22012 on a zero divisor.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Mod {
    signature: Signature,
}

fn rank(t: &DataType) -> Option<u8> {
    Some(match t {
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => 1,
        DataType::Int32 | DataType::UInt16 => 2,
        DataType::Int64 | DataType::UInt32 => 3,
        DataType::Decimal128(..) => 4,
        DataType::Float32 | DataType::Float64 => 5,
        DataType::Null => 0,
        _ => return None,
    })
}

impl ScalarUDFImpl for Mod {
    fn name(&self) -> &str {
        "mod"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [a, b] = arg_types else {
            return datafusion::common::plan_err!("mod takes two arguments");
        };
        let (Some(ra), Some(rb)) = (rank(a), rank(b)) else {
            return datafusion::common::plan_err!("No function matches mod({a}, {b})");
        };
        let t = match ra.max(rb) {
            0..=2 => DataType::Int32,
            3 => DataType::Int64,
            4 => {
                // Keep the scale of a decimal operand.
                let scale = [a, b]
                    .iter()
                    .filter_map(|t| match t {
                        DataType::Decimal128(_, s) => Some(*s),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(0);
                DataType::Decimal128(38, scale)
            }
            _ => DataType::Float64,
        };
        Ok(vec![t.clone(), t])
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows.max(1);
        let a = args.args[0].to_array(n)?;
        let b = args.args[1].to_array(n)?;
        let zero = ScalarValue::new_zero(b.data_type())?.to_scalar()?;
        if arrow::compute::kernels::cmp::eq(&b, &zero)?.true_count() > 0 {
            return Err(crate::error::sqlstate_error(
                sqlstate::DIVISION_BY_ZERO,
                "division by zero",
            ));
        }
        let result = arrow::compute::kernels::numeric::rem(&a, &b)?;
        crate::udf::to_columnar(result, crate::udf::all_scalar(&args))
    }
}

/// `mz_now()`: the logical time the statement reads at, as Materialize's
/// `mz_timestamp` (milliseconds; shown as `numeric(20,0)`). A user can
/// note it and come back with `AS OF`. Bound per statement, so each
/// planning context makes its own.
#[derive(Debug)]
pub struct MzNow {
    signature: Signature,
    binding: Arc<crate::query::binding::QueryBinding>,
}

impl MzNow {
    /// `mz_now()` reading the time `binding` is bound to.
    pub fn udf(binding: Arc<crate::query::binding::QueryBinding>) -> Arc<ScalarUDF> {
        Arc::new(ScalarUDF::new_from_impl(MzNow {
            // Stable: one value per statement, never folded at planning
            // (and refused in maintained definitions, like `now()`).
            signature: Signature::exact(vec![], Volatility::Stable),
            binding,
        }))
    }
}

impl PartialEq for MzNow {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.binding, &other.binding)
    }
}

impl Eq for MzNow {}

impl std::hash::Hash for MzNow {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        "mz_now".hash(state)
    }
}

impl ScalarUDFImpl for MzNow {
    fn name(&self) -> &str {
        "mz_now"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Decimal128(20, 0))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let t = self.binding.as_of().ok_or_else(|| {
            datafusion::common::exec_datafusion_err!("mz_now() is evaluated outside a query")
        })?;
        Ok(ColumnarValue::Scalar(ScalarValue::Decimal128(
            Some(i128::from(t)),
            20,
            0,
        )))
    }
}

//! A scalar function defined by a Rust closure over its argument arrays:
//! the shape of Postgres's catalog and compatibility functions, most of
//! which answer from a table fixed when the statement is planned.

use std::fmt;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::udf;

/// The body: argument arrays (each of the batch's length) to the result.
pub type Body = dyn Fn(&[ArrayRef]) -> Result<ArrayRef> + Send + Sync;

/// A function whose body is a closure.
pub struct BoundFunction {
    name: String,
    signature: Signature,
    returns: DataType,
    body: Arc<Body>,
}

impl BoundFunction {
    /// A function `name` taking any `arities` (argument counts) of any
    /// types, returning `returns`.
    pub fn udf(
        name: &str,
        arities: &[usize],
        returns: DataType,
        body: impl Fn(&[ArrayRef]) -> Result<ArrayRef> + Send + Sync + 'static,
    ) -> Arc<ScalarUDF> {
        let signature = Signature::one_of(
            arities
                .iter()
                .map(|n| match n {
                    0 => datafusion::logical_expr::TypeSignature::Nullary,
                    n => datafusion::logical_expr::TypeSignature::Any(*n),
                })
                .collect(),
            Volatility::Stable,
        );
        Arc::new(ScalarUDF::new_from_impl(BoundFunction {
            name: name.to_string(),
            signature,
            returns,
            body: Arc::new(body),
        }))
    }
}

impl fmt::Debug for BoundFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundFunction")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl PartialEq for BoundFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && Arc::ptr_eq(&self.body, &other.body)
    }
}

impl Eq for BoundFunction {}

impl std::hash::Hash for BoundFunction {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state)
    }
}

impl ScalarUDFImpl for BoundFunction {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(self.returns.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = udf::all_scalar(&args);
        let arrays = (0..args.args.len())
            .map(|i| udf::arg_array(&args, i))
            .collect::<Result<Vec<_>>>()?;
        let rows = if arrays.is_empty() {
            args.number_rows.max(1)
        } else {
            arrays[0].len()
        };
        let out = (self.body)(&arrays)?;
        if out.len() != rows {
            return Err(datafusion::common::internal_datafusion_err!(
                "{}: {} results for {rows} rows",
                self.name,
                out.len()
            ));
        }
        udf::to_columnar(out, scalar)
    }
}

/// Argument `i` as oids (any integer type; other values NULL).
pub fn oids(args: &[ArrayRef], i: usize) -> Result<Vec<Option<u32>>> {
    Ok(ints(args, i, rows(args))?
        .into_iter()
        .map(|v| v.and_then(|v| u32::try_from(v).ok()))
        .collect())
}

/// Argument `i` as integers (NULL where not an integer), or NULLs when
/// absent.
pub fn ints(args: &[ArrayRef], i: usize, rows: usize) -> Result<Vec<Option<i64>>> {
    let Some(a) = args.get(i) else {
        return Ok(vec![None; rows]);
    };
    let cast = arrow::compute::cast_with_options(
        a,
        &DataType::Int64,
        &arrow::compute::CastOptions {
            safe: true,
            ..Default::default()
        },
    )?;
    let ints = cast
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .ok_or_else(|| datafusion::common::internal_datafusion_err!("not cast to Int64"))?;
    Ok(ints.iter().collect())
}

/// Argument `i` as text (values of other types in their Arrow text form).
pub fn texts(args: &[ArrayRef], i: usize) -> Result<Vec<Option<String>>> {
    let Some(a) = args.get(i) else {
        return Ok(vec![]);
    };
    let cast = arrow::compute::cast(a, &DataType::Utf8)?;
    let strings = cast
        .as_any()
        .downcast_ref::<arrow::array::StringArray>()
        .ok_or_else(|| datafusion::common::internal_datafusion_err!("not cast to Utf8"))?;
    Ok(strings.iter().map(|s| s.map(str::to_string)).collect())
}

/// The number of rows a call covers.
pub fn rows(args: &[ArrayRef]) -> usize {
    args.first().map_or(1, |a| a.len())
}

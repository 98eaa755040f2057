//! Helpers shared by Freshet's scalar functions.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, StringArray};
use datafusion::common::{Result, ScalarValue, exec_datafusion_err};
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs};

/// Whether every argument is a scalar (the result is then a scalar too).
pub fn all_scalar(args: &ScalarFunctionArgs) -> bool {
    args.args
        .iter()
        .all(|a| matches!(a, ColumnarValue::Scalar(_)))
}

/// Argument `i` as an array of the batch's length.
pub fn arg_array(args: &ScalarFunctionArgs, i: usize) -> Result<ArrayRef> {
    args.args
        .get(i)
        .ok_or_else(|| exec_datafusion_err!("missing argument {i}"))?
        .to_array(args.number_rows.max(1))
}

/// Argument `i` as text.
pub fn string_arg(args: &ScalarFunctionArgs, i: usize, function: &str) -> Result<StringArray> {
    let array = arg_array(args, i)?;
    array
        .as_any()
        .downcast_ref::<StringArray>()
        .cloned()
        .ok_or_else(|| exec_datafusion_err!("{function} takes text"))
}

/// Wrap a result array: a scalar when every argument was a scalar.
pub fn to_columnar(result: ArrayRef, scalar: bool) -> Result<ColumnarValue> {
    if scalar {
        Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
            &result, 0,
        )?))
    } else {
        Ok(ColumnarValue::Array(result))
    }
}

/// Apply `f` to every non-NULL text value of argument 0.
pub fn map_text<T, F>(args: &ScalarFunctionArgs, function: &str, mut f: F) -> Result<Vec<Option<T>>>
where
    F: FnMut(&str) -> Result<T>,
{
    string_arg(args, 0, function)?
        .iter()
        .map(|v| v.map(&mut f).transpose())
        .collect()
}

/// Shorthand for an `Arc`'d array.
pub fn array<A: Array + 'static>(a: A) -> ArrayRef {
    Arc::new(a)
}

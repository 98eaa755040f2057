//! Array functions with PostgreSQL's semantics where DataFusion's
//! same-named functions differ:
//!
//! | function | DataFusion | PostgreSQL (here) |
//! |---|---|---|
//! | `array_length(a, 1)` of `'{}'` | 0 | NULL (an empty array has no dimensions) |
//! | `array_remove(a, x)` | the first match | every element `IS NOT DISTINCT FROM x` (so NULLs too) |
//! | `array_replace(a, x, y)` | the first match | every element `IS NOT DISTINCT FROM x` |
//!
//! They are registered under DataFusion's names, so the session's registry
//! (which dataflow plans decode against too) resolves them for ad hoc
//! queries and materialized views alike. `array_or_empty` is what
//! `ARRAY(subquery)` wraps its `array_agg` in: over zero rows PostgreSQL's
//! answer is `{}`, not NULL.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int32Array, ListArray, Scalar, new_empty_array};
use arrow::buffer::OffsetBuffer;
use arrow::compute::kernels::cmp::{distinct, not_distinct};
use arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::udf;

/// The name `ARRAY(subquery)` calls (`rewrites::pg_syntax`).
pub const ARRAY_OR_EMPTY: &str = "array_or_empty";

/// Which function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Length,
    Remove,
    Replace,
    OrEmpty,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Length => "array_length",
            Kind::Remove => "array_remove",
            Kind::Replace => "array_replace",
            Kind::OrEmpty => ARRAY_OR_EMPTY,
        }
    }

    fn arity(self) -> usize {
        match self {
            Kind::OrEmpty => 1,
            Kind::Length | Kind::Remove => 2,
            Kind::Replace => 3,
        }
    }
}

/// One of the functions of this module.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ArrayFunction {
    kind: Kind,
    signature: Signature,
}

/// The functions, for registration in the session.
pub fn functions() -> Vec<Arc<ScalarUDF>> {
    [Kind::Length, Kind::Remove, Kind::Replace, Kind::OrEmpty]
        .into_iter()
        .map(|kind| {
            Arc::new(ScalarUDF::new_from_impl(ArrayFunction {
                kind,
                signature: Signature::any(kind.arity(), Volatility::Immutable),
            }))
        })
        .collect()
}

impl ScalarUDFImpl for ArrayFunction {
    fn name(&self) -> &str {
        self.kind.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match (self.kind, arg_types.first()) {
            (Kind::Length, _) => Ok(DataType::Int32),
            (_, Some(t @ DataType::List(_))) => Ok(t.clone()),
            // `array_remove(NULL, 1)`: PostgreSQL cannot type it either
            // without a cast; NULL of an int array is a fair reading.
            (_, Some(DataType::Null)) => Ok(DataType::new_list(DataType::Int64, true)),
            (kind, _) => plan_err!("function {}(...) takes an array first", kind.name()),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scalar = udf::all_scalar(&args);
        let n = args.number_rows.max(1);
        let arrays = args
            .args
            .iter()
            .map(|a| a.to_array(n))
            .collect::<Result<Vec<_>>>()?;
        let Some(lists) = as_lists(&arrays[0])? else {
            let nulls = arrow::array::new_null_array(args.return_field.data_type(), n);
            return udf::to_columnar(nulls, scalar);
        };
        let DataType::List(element) = lists.data_type().clone() else {
            return exec_err!("{} takes an array", self.kind.name());
        };
        let out = match self.kind {
            Kind::Length => lengths(&lists, &arrays[1])?,
            Kind::OrEmpty => map_lists(&lists, &element, true, |_, values| Ok(Arc::clone(values)))?,
            Kind::Remove => {
                let needles = arrow::compute::cast(&arrays[1], element.data_type())?;
                map_lists(&lists, &element, false, |row, values| {
                    let needle = Scalar::new(needles.slice(row, 1));
                    let keep = distinct(values, &needle)?;
                    Ok(arrow::compute::filter(values, &keep)?)
                })?
            }
            Kind::Replace => {
                let from = arrow::compute::cast(&arrays[1], element.data_type())?;
                let to = arrow::compute::cast(&arrays[2], element.data_type())?;
                map_lists(&lists, &element, false, |row, values| {
                    let matches = not_distinct(values, &Scalar::new(from.slice(row, 1)))?;
                    Ok(arrow::compute::kernels::zip::zip(
                        &matches,
                        &Scalar::new(to.slice(row, 1)),
                        values,
                    )?)
                })?
            }
        };
        udf::to_columnar(out, scalar)
    }
}

/// `array_length(a, dim)` of one-dimensional arrays: the length of a
/// non-empty array in dimension 1, else NULL.
fn lengths(lists: &ListArray, dims: &ArrayRef) -> Result<ArrayRef> {
    let dims = arrow::compute::cast(dims, &DataType::Int64)?;
    let dims = dims.as_primitive::<arrow::datatypes::Int64Type>();
    let out: Int32Array = (0..lists.len())
        .map(|i| {
            let len = lists.value_length(i);
            (lists.is_valid(i) && dims.is_valid(i) && dims.value(i) == 1 && len > 0).then_some(len)
        })
        .collect();
    Ok(Arc::new(out))
}

/// The argument as a list array; `None` for an untyped NULL.
fn as_lists(array: &ArrayRef) -> Result<Option<ListArray>> {
    match array.data_type() {
        DataType::List(_) => Ok(Some(array.as_list::<i32>().clone())),
        DataType::Null => Ok(None),
        other => exec_err!("expected an array, got {other}"),
    }
}

/// Each non-NULL list's values through `f` (given the row and the values);
/// NULL lists stay NULL, or become empty lists when `null_to_empty`.
fn map_lists(
    lists: &ListArray,
    element: &FieldRef,
    null_to_empty: bool,
    mut f: impl FnMut(usize, &ArrayRef) -> Result<ArrayRef>,
) -> Result<ArrayRef> {
    let mut parts: Vec<ArrayRef> = Vec::with_capacity(lists.len());
    let mut offsets = Vec::with_capacity(lists.len() + 1);
    offsets.push(0i32);
    let mut total = 0i32;
    for row in 0..lists.len() {
        if lists.is_valid(row) {
            let part = f(row, &lists.value(row))?;
            total += i32::try_from(part.len()).unwrap_or(i32::MAX);
            parts.push(part);
        }
        offsets.push(total);
    }
    let values = if parts.is_empty() {
        new_empty_array(element.data_type())
    } else {
        let refs: Vec<&dyn Array> = parts.iter().map(|p| p.as_ref()).collect();
        arrow::compute::concat(&refs)?
    };
    Ok(Arc::new(ListArray::try_new(
        Arc::clone(element),
        OffsetBuffer::new(offsets.into()),
        values,
        if null_to_empty {
            None
        } else {
            lists.nulls().cloned()
        },
    )?))
}

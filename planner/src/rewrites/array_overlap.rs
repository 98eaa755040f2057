//! `a && b` on arrays: whether they share a non-NULL element.
//!
//! DataFusion parses PostgreSQL's overlap operator but has no operator for
//! it ("Unsupported binary operator: PGOverlap"), and its `array_has_any`
//! counts two NULL elements as shared, where PostgreSQL never matches a
//! NULL. This planner turns `&&` into [`ArraysOverlap`] when either side
//! is an array, casting an untyped string literal on the other side (`xs
//! && '{5}'`) to that array's type, as PostgreSQL resolves the operator's
//! unknown operand. A NULL array gives NULL. `@>` and `<@` with such an
//! untyped operand get the same cast (between two arrays DataFusion plans
//! them itself).

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanBuilder};
use arrow::datatypes::DataType;
use datafusion::common::{DFSchema, Result, ScalarValue, exec_err};
use datafusion::functions_nested::expr_fn::{array_has_all, array_position};
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility, cast, when,
};
use datafusion::sql::sqlparser::ast::BinaryOperator;

/// Plans `&&` on arrays (see the module documentation).
#[derive(Debug)]
pub struct ArrayOverlapPlanner;

fn is_list(t: &DataType) -> bool {
    matches!(t, DataType::List(_) | DataType::LargeList(_))
}

/// `e` as an array of type `like`, when it is untyped text.
fn as_array(e: Expr, own: &DataType, like: &DataType) -> Expr {
    if matches!(
        own,
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
    ) {
        cast(e, like.clone())
    } else {
        e
    }
}

impl ExprPlanner for ArrayOverlapPlanner {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> Result<PlannerResult<RawBinaryExpr>> {
        if !matches!(
            expr.op,
            BinaryOperator::PGOverlap | BinaryOperator::AtArrow | BinaryOperator::ArrowAt
        ) {
            return Ok(PlannerResult::Original(expr));
        }
        let RawBinaryExpr { op, left, right } = expr;
        let (lt, rt) = (left.get_type(schema)?, right.get_type(schema)?);
        if op != BinaryOperator::PGOverlap {
            // `xs @> '{1}'`: the untyped side becomes the array's type;
            // DataFusion plans the operator between two arrays.
            let (left, right) = match (is_list(&lt), is_list(&rt)) {
                (true, true) => (left, right),
                (true, false) => (left, as_array(right, &rt, &lt)),
                (false, true) => (as_array(left, &lt, &rt), right),
                _ => return Ok(PlannerResult::Original(RawBinaryExpr { op, left, right })),
            };
            let (outer, inner) = if op == BinaryOperator::AtArrow {
                (left, right)
            } else {
                (right, left)
            };
            return Ok(PlannerResult::Planned(contains(outer, inner)?));
        }
        let (left, right) = match (is_list(&lt), is_list(&rt)) {
            (true, _) => (left, as_array(right, &rt, &lt)),
            (false, true) => (as_array(left, &lt, &rt), right),
            (false, false) => {
                return Ok(PlannerResult::Original(RawBinaryExpr { op, left, right }));
            }
        };
        Ok(PlannerResult::Planned(udf().call(vec![left, right])))
    }
}

/// `outer @> inner` as PostgreSQL answers it: every element of `inner`
/// equals some element of `outer`, where a NULL element equals nothing
/// (so `ARRAY[NULL] <@ ARRAY[NULL]` is false, where DataFusion's
/// `array_has_all` matched the NULLs); NULL when either array is NULL.
fn contains(outer: Expr, inner: Expr) -> Result<Expr> {
    let inner_has_no_null = array_position(
        inner.clone(),
        datafusion::logical_expr::lit(ScalarValue::Null),
        datafusion::logical_expr::lit(1i64),
    )
    .is_null();
    when(
        outer.clone().is_null().or(inner.clone().is_null()),
        datafusion::logical_expr::lit(ScalarValue::Boolean(None)),
    )
    .otherwise(array_has_all(outer, inner).and(inner_has_no_null))
}

/// The function `&&` is planned as (registered so views' dataflow plans
/// find it by name).
pub fn udf() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(ArraysOverlap {
        signature: Signature::any(2, Volatility::Immutable),
    }))
}

/// `arrays_overlap(a, b)` with PostgreSQL's `&&` semantics.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ArraysOverlap {
    signature: Signature,
}

impl ScalarUDFImpl for ArraysOverlap {
    fn name(&self) -> &str {
        "pg_arrays_overlap"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [a, b] = arrays.as_slice() else {
            return exec_err!("&& takes two arrays");
        };
        let mut out = BooleanBuilder::with_capacity(rows);
        for i in 0..rows {
            match (element_values(a, i)?, element_values(b, i)?) {
                (Some(x), Some(y)) => {
                    let x: HashSet<ScalarValue> = x.into_iter().collect();
                    out.append_value(y.iter().any(|v| x.contains(v)));
                }
                _ => out.append_null(),
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// The non-NULL elements of row `i`'s array (None for a NULL array).
fn element_values(list: &ArrayRef, i: usize) -> Result<Option<Vec<ScalarValue>>> {
    if list.is_null(i) {
        return Ok(None);
    }
    let values: ArrayRef = match list.data_type() {
        DataType::List(_) => list.as_list::<i32>().value(i),
        DataType::LargeList(_) => list.as_list::<i64>().value(i),
        DataType::Null => return Ok(None),
        other => return exec_err!("&& needs arrays, not {other}"),
    };
    let mut out = Vec::with_capacity(values.len());
    for j in 0..values.len() {
        if values.is_valid(j) {
            out.push(ScalarValue::try_from_array(&values, j)?);
        }
    }
    Ok(Some(out))
}

//! Analyzer rules and functions that give DataFusion plans Postgres
//! semantics where DataFusion differs.
//!
//! * `+`, `-` and `*` on two integers of the same type raise 22003 on
//!   overflow instead of wrapping: after type coercion they become the
//!   `checked_add` / `checked_sub` / `checked_mul` functions, whose kernels
//!   are Arrow's checked arithmetic. Constant folding evaluates them too, so
//!   `SELECT 2147483647 + 1` fails like it does in Postgres.

use std::sync::Arc;

use arrow::array::Datum;
use arrow::datatypes::DataType;
use arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use crate::error::SqlStateError;

/// Rewrites integer `+ - *` into overflow-checked functions.
#[derive(Debug)]
pub struct CheckedIntegerArithmetic {
    add: Arc<ScalarUDF>,
    sub: Arc<ScalarUDF>,
    mul: Arc<ScalarUDF>,
}

impl Default for CheckedIntegerArithmetic {
    fn default() -> Self {
        CheckedIntegerArithmetic {
            add: Arc::new(ScalarUDF::new_from_impl(CheckedArith::new(ArithOp::Add))),
            sub: Arc::new(ScalarUDF::new_from_impl(CheckedArith::new(ArithOp::Sub))),
            mul: Arc::new(ScalarUDF::new_from_impl(CheckedArith::new(ArithOp::Mul))),
        }
    }
}

fn is_int(t: &DataType) -> bool {
    matches!(t, DataType::Int16 | DataType::Int32 | DataType::Int64)
}

impl CheckedIntegerArithmetic {
    /// The functions this rule introduces, for registration.
    pub fn functions(&self) -> Vec<Arc<ScalarUDF>> {
        vec![
            Arc::clone(&self.add),
            Arc::clone(&self.sub),
            Arc::clone(&self.mul),
        ]
    }

    fn rewrite(&self, e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &e else {
            return Ok(Transformed::no(e));
        };
        let udf = match op {
            Operator::Plus => &self.add,
            Operator::Minus => &self.sub,
            Operator::Multiply => &self.mul,
            _ => return Ok(Transformed::no(e)),
        };
        let (Ok(lt), Ok(rt)) = (left.get_type(schema), right.get_type(schema)) else {
            return Ok(Transformed::no(e));
        };
        if !(is_int(&lt) && lt == rt) {
            return Ok(Transformed::no(e));
        }
        Ok(Transformed::yes(Expr::ScalarFunction(
            ScalarFunction::new_udf(
                Arc::clone(udf),
                vec![left.as_ref().clone(), right.as_ref().clone()],
            ),
        )))
    }
}

impl AnalyzerRule for CheckedIntegerArithmetic {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let out = plan.transform_up_with_subqueries(|node| {
            let mut schema = DFSchema::empty();
            for input in node.inputs() {
                schema.merge(input.schema());
            }
            let preserver = NamePreserver::new(&node);
            node.map_expressions(|e| {
                let saved = preserver.save(&e);
                Ok(e.transform_up(|e| self.rewrite(e, &schema))?
                    .update_data(|e| saved.restore(e)))
            })
        })?;
        Ok(out.data)
    }

    fn name(&self) -> &str {
        "freshet_checked_integer_arithmetic"
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ArithOp {
    Add,
    Sub,
    Mul,
}

/// Integer arithmetic that fails with 22003 instead of wrapping.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedArith {
    op: ArithOp,
    signature: Signature,
}

impl CheckedArith {
    fn new(op: ArithOp) -> Self {
        CheckedArith {
            op,
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

fn out_of_range(t: &DataType) -> datafusion::error::DataFusionError {
    let what = match t {
        DataType::Int16 => "smallint",
        DataType::Int32 => "integer",
        _ => "bigint",
    };
    SqlStateError::into_datafusion("22003", format!("{what} out of range"))
}

impl ScalarUDFImpl for CheckedArith {
    fn name(&self) -> &str {
        match self.op {
            ArithOp::Add => "checked_add",
            ArithOp::Sub => "checked_sub",
            ArithOp::Mul => "checked_mul",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        Ok(arg_types[0].clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [l, r] = args.args.as_slice() else {
            return datafusion::common::exec_err!("{} takes two arguments", self.name());
        };
        let ty = l.data_type();
        let scalar = matches!((l, r), (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_)));
        let to_datum = |v: &ColumnarValue| -> Result<Box<dyn Datum>> {
            Ok(match v {
                ColumnarValue::Array(a) => Box::new(Arc::clone(a)),
                ColumnarValue::Scalar(s) => Box::new(s.to_scalar()?),
            })
        };
        let (ld, rd) = (to_datum(l)?, to_datum(r)?);
        use arrow::compute::kernels::numeric;
        let result = match self.op {
            ArithOp::Add => numeric::add(ld.as_ref(), rd.as_ref()),
            ArithOp::Sub => numeric::sub(ld.as_ref(), rd.as_ref()),
            ArithOp::Mul => numeric::mul(ld.as_ref(), rd.as_ref()),
        };
        let array = match result {
            Ok(a) => a,
            Err(ArrowError::ArithmeticOverflow(_)) => return Err(out_of_range(&ty)),
            Err(e) => return Err(e.into()),
        };
        if scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
                &array, 0,
            )?))
        } else {
            Ok(ColumnarValue::Array(array))
        }
    }
}

/// Casts from text that Postgres parses differently from Arrow: text to
/// `bytea` reads the `\x` hex and escape formats instead of taking the
/// characters' bytes.
#[derive(Debug)]
pub struct PostgresTextCasts {
    bytea_in: Arc<ScalarUDF>,
}

impl Default for PostgresTextCasts {
    fn default() -> Self {
        PostgresTextCasts {
            bytea_in: Arc::new(ScalarUDF::new_from_impl(ByteaIn {
                signature: Signature::exact(vec![DataType::Utf8], Volatility::Immutable),
            })),
        }
    }
}

impl PostgresTextCasts {
    /// The functions this rule introduces, for registration.
    pub fn functions(&self) -> Vec<Arc<ScalarUDF>> {
        vec![Arc::clone(&self.bytea_in)]
    }

    fn rewrite(&self, e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
        let (inner, target) = match &e {
            Expr::Cast(c) => (c.expr.as_ref(), c.field.data_type()),
            Expr::TryCast(c) => (c.expr.as_ref(), c.field.data_type()),
            _ => return Ok(Transformed::no(e)),
        };
        if !matches!(target, DataType::Binary) {
            return Ok(Transformed::no(e));
        }
        match inner.get_type(schema) {
            Ok(DataType::Utf8) => {}
            Ok(DataType::Utf8View | DataType::LargeUtf8) => {}
            _ => return Ok(Transformed::no(e)),
        }
        let arg = inner.clone().cast_to(&DataType::Utf8, schema)?;
        Ok(Transformed::yes(Expr::ScalarFunction(
            ScalarFunction::new_udf(Arc::clone(&self.bytea_in), vec![arg]),
        )))
    }
}

impl AnalyzerRule for PostgresTextCasts {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        let out = plan.transform_up_with_subqueries(|node| {
            let mut schema = DFSchema::empty();
            for input in node.inputs() {
                schema.merge(input.schema());
            }
            let preserver = NamePreserver::new(&node);
            node.map_expressions(|e| {
                let saved = preserver.save(&e);
                Ok(e.transform_up(|e| self.rewrite(e, &schema))?
                    .update_data(|e| saved.restore(e)))
            })
        })?;
        Ok(out.data)
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
        use arrow::array::{Array, BinaryArray, StringArray};
        let scalar = matches!(args.args[0], ColumnarValue::Scalar(_));
        let array = args.args[0].to_array(args.number_rows.max(1))?;
        let strings = array
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| {
                datafusion::error::DataFusionError::Internal("bytea_in takes text".into())
            })?;
        let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(strings.len());
        for v in strings.iter() {
            out.push(match v {
                None => None,
                Some(s) => Some(crate::pgtext::parse_bytea(s).ok_or_else(|| {
                    SqlStateError::into_datafusion(
                        "22P02",
                        format!("invalid input syntax for type bytea: \"{s}\""),
                    )
                })?),
            });
        }
        let result: Arc<dyn Array> =
            Arc::new(BinaryArray::from_iter(out.iter().map(|v| v.as_deref())));
        if scalar {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
                &result, 0,
            )?))
        } else {
            Ok(ColumnarValue::Array(result))
        }
    }
}

//! Arithmetic with PostgreSQL's errors, planned in time linear in its length.
//!
//! `+`, `-` and `*` on two integers of the same type raise 22003 on
//! overflow instead of wrapping, and `/` and `%` on floats raise 22012 for
//! a zero divisor instead of giving infinity. After type coercion the
//! analyzer rule here turns such operators into functions whose kernels are
//! Arrow's checked arithmetic. Constant folding evaluates them too, so
//! `SELECT 2147483647 + 1` fails as it does in PostgreSQL.
//!
//! A chain of arithmetic operators along a left spine (`a + b - c * d + e`
//! parses as `((a + b) - (c * d)) + e`) becomes one call,
//! `checked_arith('+-+', a, b, c * d, e)`, which folds its operands left to
//! right exactly as the nested operators would: at each step DataFusion's
//! own coercion picks the operand types and the result type, then the
//! step is checked as above or evaluated by DataFusion's own kernel. So the
//! same intermediate results, the same overflow at the same step. Nested
//! calls would be as deep as the chain is long, and DataFusion names a call
//! by formatting its whole subtree every time it asks for the call's type,
//! so planning a chain of n nested calls costs about n³; one flat call
//! costs about n. A single operator stays a two-argument call
//! (`checked_add(a, b)`), which reads better in EXPLAIN.
//!
//! Very long chains never reach DataFusion nested at all:
//! [`crate::rewrites::long_chains`] writes them as `checked_arith` calls in the
//! statement's syntax tree, because typing a nested chain is quadratic in
//! DataFusion's type coercion too.

use std::sync::Arc;

use arrow::array::Datum;
use arrow::datatypes::DataType;
use arrow::datatypes::FieldRef;
use arrow::error::ArrowError;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue, exec_err, internal_err, plan_err};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::type_coercion::binary::BinaryTypeCoercer;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator, ReturnFieldArgs,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::physical_expr::expressions as physical;
use freshet_repr::sqlstate;

use crate::rewrites::expr_rewrite::rewrite_expressions_up;
use crate::udf;

/// The name of the flat chain function.
pub(crate) const CHAIN: &str = "checked_arith";

/// Rewrites integer `+ - *` (and float `/ %`) into checked functions.
#[derive(Debug)]
pub struct CheckedIntegerArithmetic {
    add: Arc<ScalarUDF>,
    sub: Arc<ScalarUDF>,
    mul: Arc<ScalarUDF>,
    div: Arc<ScalarUDF>,
    rem: Arc<ScalarUDF>,
    chain: Arc<ScalarUDF>,
}

impl Default for CheckedIntegerArithmetic {
    fn default() -> Self {
        let binary = |op| Arc::new(ScalarUDF::new_from_impl(CheckedArith::new(op)));
        CheckedIntegerArithmetic {
            add: binary(ArithOp::Add),
            sub: binary(ArithOp::Sub),
            mul: binary(ArithOp::Mul),
            div: binary(ArithOp::Div),
            rem: binary(ArithOp::Rem),
            chain: Arc::new(ScalarUDF::new_from_impl(CheckedChain {
                signature: Signature::variadic_any(Volatility::Immutable),
            })),
        }
    }
}

pub(crate) fn is_int(t: &DataType) -> bool {
    matches!(t, DataType::Int16 | DataType::Int32 | DataType::Int64)
}

impl CheckedIntegerArithmetic {
    /// The functions this rule introduces, for registration.
    pub fn functions(&self) -> Vec<Arc<ScalarUDF>> {
        vec![
            Arc::clone(&self.add),
            Arc::clone(&self.sub),
            Arc::clone(&self.mul),
            Arc::clone(&self.div),
            Arc::clone(&self.rem),
            Arc::clone(&self.chain),
        ]
    }

    fn binary(&self, op: ArithOp) -> &Arc<ScalarUDF> {
        match op {
            ArithOp::Add => &self.add,
            ArithOp::Sub => &self.sub,
            ArithOp::Mul => &self.mul,
            ArithOp::Div => &self.div,
            ArithOp::Rem => &self.rem,
        }
    }

    /// The operator of one of this rule's two-argument functions.
    fn binary_op(&self, func: &Arc<ScalarUDF>) -> Option<ArithOp> {
        ArithOp::ALL
            .into_iter()
            .find(|op| Arc::ptr_eq(self.binary(*op), func))
    }

    /// The type of `e`, without asking DataFusion for the type of a
    /// two-argument call this rule made (that would format the call's
    /// whole subtree): both operands have the call's type, so the first
    /// one says.
    fn type_of(&self, e: &Expr, schema: &DFSchema) -> Result<DataType> {
        let mut e = e;
        loop {
            match e {
                Expr::ScalarFunction(f) if self.binary_op(&f.func).is_some() => e = &f.args[0],
                _ => return e.get_type(schema),
            }
        }
    }

    fn is_chain(&self, e: &Expr) -> bool {
        matches!(e, Expr::ScalarFunction(f) if Arc::ptr_eq(&f.func, &self.chain))
    }

    fn rewrite(&self, e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
        // -x on an integer overflows for the smallest value.
        if let Expr::Negative(inner) = &e
            && let Ok(t) = self.type_of(inner, schema)
            && is_int(&t)
        {
            let zero = Expr::Literal(ScalarValue::new_zero(&t)?, None);
            return Ok(Transformed::yes(Expr::ScalarFunction(
                ScalarFunction::new_udf(Arc::clone(&self.sub), vec![zero, inner.as_ref().clone()]),
            )));
        }
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = &e else {
            return Ok(Transformed::no(e));
        };
        // A chain grows by any arithmetic operator: it types and evaluates
        // each step as the operator would, whatever the operands' types.
        if let Some(op) = ArithOp::of(op)
            && self.is_chain(left)
        {
            let Expr::BinaryExpr(BinaryExpr { left, right, .. }) = e else {
                unreachable!("matched as a binary expression above");
            };
            return Ok(Transformed::yes(self.extend(*left, op, *right)));
        }
        let (Ok(lt), Ok(rt)) = (self.type_of(left, schema), self.type_of(right, schema)) else {
            return Ok(Transformed::no(e));
        };
        if lt != rt {
            return Ok(Transformed::no(e));
        }
        let is_float = matches!(lt, DataType::Float32 | DataType::Float64);
        let op = match op {
            Operator::Plus if is_int(&lt) => ArithOp::Add,
            Operator::Minus if is_int(&lt) => ArithOp::Sub,
            Operator::Multiply if is_int(&lt) => ArithOp::Mul,
            // Arrow divides floats by zero to infinity; Postgres raises.
            Operator::Divide if is_float => ArithOp::Div,
            Operator::Modulo if is_float => ArithOp::Rem,
            _ => return Ok(Transformed::no(e)),
        };
        let Expr::BinaryExpr(BinaryExpr { left, right, .. }) = e else {
            unreachable!("matched as a binary expression above");
        };
        Ok(Transformed::yes(self.extend(*left, op, *right)))
    }

    /// `left op right`, where `left` may already be a checked call of the
    /// same type: the spine grows by one operand instead of one level.
    fn extend(&self, left: Expr, op: ArithOp, right: Expr) -> Expr {
        let call = |func: &Arc<ScalarUDF>, args| {
            Expr::ScalarFunction(ScalarFunction::new_udf(Arc::clone(func), args))
        };
        let two_operand = match &left {
            Expr::ScalarFunction(f) if f.args.len() == 2 => self.binary_op(&f.func),
            _ => None,
        };
        match (left, two_operand) {
            (Expr::ScalarFunction(ScalarFunction { func, mut args }), _)
                if Arc::ptr_eq(&func, &self.chain) =>
            {
                if let Some(Expr::Literal(ScalarValue::Utf8(Some(ops)), _)) = args.first_mut() {
                    ops.push(op.symbol());
                    args.push(right);
                    call(&func, args)
                } else {
                    // Not a chain this rule built; leave it an operand.
                    let left = call(&func, args);
                    call(self.binary(op), vec![left, right])
                }
            }
            (Expr::ScalarFunction(ScalarFunction { args, .. }), Some(first)) => {
                let ops: String = [first.symbol(), op.symbol()].into_iter().collect();
                let mut chain = vec![Expr::Literal(ScalarValue::Utf8(Some(ops)), None)];
                chain.extend(args);
                chain.push(right);
                call(&self.chain, chain)
            }
            (left, _) => call(self.binary(op), vec![left, right]),
        }
    }
}

impl AnalyzerRule for CheckedIntegerArithmetic {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        rewrite_expressions_up(plan, |e, schema| self.rewrite(e, schema))
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
    Div,
    Rem,
}

impl ArithOp {
    const ALL: [ArithOp; 5] = [
        ArithOp::Add,
        ArithOp::Sub,
        ArithOp::Mul,
        ArithOp::Div,
        ArithOp::Rem,
    ];

    /// How a chain spells the operator.
    fn symbol(self) -> char {
        match self {
            ArithOp::Add => '+',
            ArithOp::Sub => '-',
            ArithOp::Mul => '*',
            ArithOp::Div => '/',
            ArithOp::Rem => '%',
        }
    }

    fn from_symbol(c: char) -> Option<ArithOp> {
        ArithOp::ALL.into_iter().find(|op| op.symbol() == c)
    }

    fn of(op: &Operator) -> Option<ArithOp> {
        ArithOp::ALL.into_iter().find(|a| a.operator() == *op)
    }

    fn operator(self) -> Operator {
        match self {
            ArithOp::Add => Operator::Plus,
            ArithOp::Sub => Operator::Minus,
            ArithOp::Mul => Operator::Multiply,
            ArithOp::Div => Operator::Divide,
            ArithOp::Rem => Operator::Modulo,
        }
    }

    /// Whether `l op r` on operands of type `t` (both) needs the checks
    /// DataFusion's kernel lacks.
    fn is_checked_for(self, t: &DataType) -> bool {
        let is_float = matches!(t, DataType::Float32 | DataType::Float64);
        match self {
            ArithOp::Add | ArithOp::Sub | ArithOp::Mul => is_int(t),
            ArithOp::Div | ArithOp::Rem => is_float,
        }
    }
}

/// One step of a chain: `l op r` with the operand types and result type
/// DataFusion's coercion gives the operator, checked where PostgreSQL
/// raises and DataFusion's kernel would not.
fn step(op: ArithOp, l: &ColumnarValue, r: &ColumnarValue, rows: usize) -> Result<ColumnarValue> {
    let (lt, rt) =
        BinaryTypeCoercer::new(&l.data_type(), &op.operator(), &r.data_type()).get_input_types()?;
    let (l, r) = (l.cast_to(&lt, None)?, r.cast_to(&rt, None)?);
    if lt == rt && op.is_checked_for(&lt) {
        return apply(op, &l, &r, rows);
    }
    let scalar = matches!(
        (&l, &r),
        (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_))
    );
    let rows = if scalar { 1 } else { rows };
    let schema = Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("l", lt, true),
        arrow::datatypes::Field::new("r", rt, true),
    ]));
    let kernel = physical::binary(
        Arc::new(physical::Column::new("l", 0)),
        op.operator(),
        Arc::new(physical::Column::new("r", 1)),
        &schema,
    )?;
    let batch =
        arrow::array::RecordBatch::try_new(schema, vec![l.to_array(rows)?, r.to_array(rows)?])?;
    let out = kernel.evaluate(&batch)?;
    match out {
        ColumnarValue::Array(a) if scalar => udf::to_columnar(a, true),
        out => Ok(out),
    }
}

fn out_of_range(t: &DataType) -> datafusion::error::DataFusionError {
    let what = match t {
        DataType::Int16 => "smallint",
        DataType::Int32 => "integer",
        _ => "bigint",
    };
    crate::error::sqlstate_error(
        sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
        format!("{what} out of range"),
    )
}

/// `l op r` with PostgreSQL's errors, on arrays or scalars.
fn apply(op: ArithOp, l: &ColumnarValue, r: &ColumnarValue, rows: usize) -> Result<ColumnarValue> {
    let ty = l.data_type();
    let scalar = matches!((l, r), (ColumnarValue::Scalar(_), ColumnarValue::Scalar(_)));
    let to_datum = |v: &ColumnarValue| -> Result<Box<dyn Datum>> {
        Ok(match v {
            ColumnarValue::Array(a) => Box::new(Arc::clone(a)),
            ColumnarValue::Scalar(s) => Box::new(s.to_scalar()?),
        })
    };
    if matches!(op, ArithOp::Div | ArithOp::Rem) {
        // Both operands as arrays of one length: the batch's (possibly
        // empty), or one row for two scalars.
        let rows = if scalar { 1 } else { rows };
        let divisor = r.to_array(rows)?;
        let zero = ScalarValue::new_zero(&divisor.data_type().clone())?.to_scalar()?;
        let is_zero = arrow::compute::kernels::cmp::eq(&divisor, &zero)?;
        // A NULL dividend makes the quotient NULL before anything divides
        // (PostgreSQL's operators are strict): `NULL / 0` is NULL.
        let dividend = l.to_array(rows)?;
        let is_zero = arrow::compute::and(&is_zero, &arrow::compute::is_not_null(&dividend)?)?;
        if is_zero.true_count() > 0 {
            return Err(crate::error::sqlstate_error(
                sqlstate::DIVISION_BY_ZERO,
                "division by zero",
            ));
        }
    }
    let (ld, rd) = (to_datum(l)?, to_datum(r)?);
    use arrow::compute::kernels::numeric;
    let result = match op {
        ArithOp::Add => numeric::add(ld.as_ref(), rd.as_ref()),
        ArithOp::Sub => numeric::sub(ld.as_ref(), rd.as_ref()),
        ArithOp::Mul => numeric::mul(ld.as_ref(), rd.as_ref()),
        ArithOp::Div => numeric::div(ld.as_ref(), rd.as_ref()),
        ArithOp::Rem => numeric::rem(ld.as_ref(), rd.as_ref()),
    };
    let array = match result {
        Ok(a) => a,
        Err(ArrowError::ArithmeticOverflow(_)) => return Err(out_of_range(&ty)),
        Err(e) => return Err(e.into()),
    };
    udf::to_columnar(array, scalar)
}

/// One checked operator on two operands of the same type.
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

impl ScalarUDFImpl for CheckedArith {
    fn name(&self) -> &str {
        match self.op {
            ArithOp::Add => "checked_add",
            ArithOp::Sub => "checked_sub",
            ArithOp::Mul => "checked_mul",
            ArithOp::Div => "checked_div",
            ArithOp::Rem => "checked_mod",
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
            return exec_err!("{} takes two arguments", self.name());
        };
        apply(self.op, l, r, args.number_rows)
    }
}

/// `checked_arith(ops, x0, x1, ..., xn)`: `((x0 op1 x1) op2 x2) ... opn xn`
/// with PostgreSQL's errors, where `ops` spells op1..opn (`+-*/%`) and
/// every operand has the same type.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedChain {
    signature: Signature,
}

/// The operators `spelled` names (`+-*/%`), which must number one fewer
/// than the `operands`.
fn parse_ops(spelled: &str, operands: usize) -> Result<Vec<ArithOp>> {
    let ops: Option<Vec<ArithOp>> = spelled.chars().map(ArithOp::from_symbol).collect();
    match ops {
        Some(ops) if !ops.is_empty() && ops.len() + 1 == operands => Ok(ops),
        _ => plan_err!("{CHAIN}: operators '{spelled}' do not fit {operands} operands"),
    }
}

impl CheckedChain {
    /// The operators and operands of a call, checked against each other.
    fn parse(args: &[ColumnarValue]) -> Result<(Vec<ArithOp>, &[ColumnarValue])> {
        let Some((ColumnarValue::Scalar(ScalarValue::Utf8(Some(spelled))), operands)) =
            args.split_first()
        else {
            return exec_err!("{CHAIN} takes its operators as a text constant first");
        };
        Ok((parse_ops(spelled, operands.len())?, operands))
    }
}

impl ScalarUDFImpl for CheckedChain {
    fn name(&self) -> &str {
        CHAIN
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        internal_err!("{CHAIN} is typed by return_field_from_args")
    }

    /// The type the nested operators would have: DataFusion's coercion of
    /// each step, left to right (the operators are the constant first
    /// argument).
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let spelled = match args.scalar_arguments.first() {
            Some(Some(ScalarValue::Utf8(Some(spelled)))) => spelled,
            _ => return plan_err!("{CHAIN} takes its operators as a text constant first"),
        };
        let ops = parse_ops(spelled, args.arg_fields.len().saturating_sub(1))?;
        let [_, first, rest @ ..] = args.arg_fields else {
            return plan_err!("{CHAIN} takes operators and at least two operands");
        };
        let mut t = first.data_type().clone();
        let mut nullable = first.is_nullable();
        for (op, operand) in ops.into_iter().zip(rest) {
            t = BinaryTypeCoercer::new(&t, &op.operator(), operand.data_type())
                .get_result_type()?;
            nullable |= operand.is_nullable();
        }
        Ok(Arc::new(arrow::datatypes::Field::new(CHAIN, t, nullable)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (ops, operands) = CheckedChain::parse(&args.args)?;
        let mut acc = operands[0].clone();
        for (op, operand) in ops.into_iter().zip(&operands[1..]) {
            acc = step(op, &acc, operand, args.number_rows)?;
        }
        Ok(acc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::common::tree_node::TreeNode;
    use datafusion::logical_expr::col;

    fn schema() -> DFSchema {
        use arrow::datatypes::{Field, Schema};
        let fields = vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Int32, true),
            Field::new("c", DataType::Int32, true),
        ];
        DFSchema::try_from(Schema::new(fields)).unwrap()
    }

    fn rewrite_all(rule: &CheckedIntegerArithmetic, e: Expr) -> Expr {
        let schema = schema();
        e.transform_up(|e| rule.rewrite(e, &schema)).unwrap().data
    }

    #[test]
    fn one_operator_is_a_two_argument_call() {
        let rule = CheckedIntegerArithmetic::default();
        let e = rewrite_all(&rule, col("a") + col("b"));
        assert_eq!(e.to_string(), "checked_add(a, b)");
    }

    #[test]
    fn a_left_spine_is_one_flat_call() {
        let rule = CheckedIntegerArithmetic::default();
        // ((a + b) - (b * c)) + c
        let e = rewrite_all(&rule, col("a") + col("b") - col("b") * col("c") + col("c"));
        assert_eq!(
            e.to_string(),
            r#"checked_arith(Utf8("+-+"), a, b, checked_mul(b, c), c)"#
        );
    }

    #[test]
    fn a_long_chain_stays_flat() {
        let rule = CheckedIntegerArithmetic::default();
        let mut e = col("a");
        for _ in 0..5_000 {
            e = e + col("b");
        }
        let Expr::ScalarFunction(f) = rewrite_all(&rule, e) else {
            panic!("not a call");
        };
        assert_eq!(f.func.name(), CHAIN);
        assert_eq!(f.args.len(), 5_002);
    }

    fn eval_scalars(ops: &str, operands: Vec<ScalarValue>) -> Result<ColumnarValue> {
        use arrow::datatypes::Field;
        let mut args = vec![ColumnarValue::Scalar(ScalarValue::Utf8(Some(ops.into())))];
        args.extend(operands.into_iter().map(ColumnarValue::Scalar));
        let arg_fields = args
            .iter()
            .map(|a| Arc::new(Field::new("x", a.data_type(), true)))
            .collect();
        let chain = CheckedChain {
            signature: Signature::variadic_any(Volatility::Immutable),
        };
        chain.invoke_with_args(ScalarFunctionArgs {
            args,
            arg_fields,
            number_rows: 1,
            return_field: Arc::new(Field::new("r", DataType::Int32, true)),
            config_options: Arc::new(ConfigOptions::default()),
        })
    }

    fn eval(ops: &str, operands: &[Option<i32>]) -> Result<ColumnarValue> {
        eval_scalars(
            ops,
            operands.iter().map(|v| ScalarValue::Int32(*v)).collect(),
        )
    }

    #[test]
    fn a_chain_types_each_step_as_its_operator_would() {
        // (1 + 0.5) * 4: int + double is double, double * bigint is double.
        let out = eval_scalars(
            "+*",
            vec![
                ScalarValue::Int32(Some(1)),
                ScalarValue::Float64(Some(0.5)),
                ScalarValue::Int64(Some(4)),
            ],
        )
        .unwrap();
        assert_eq!(scalar(out), ScalarValue::Float64(Some(6.0)));
        // int + bigint is bigint, checked at bigint's range.
        let out = eval_scalars(
            "+",
            vec![
                ScalarValue::Int32(Some(i32::MAX)),
                ScalarValue::Int64(Some(1)),
            ],
        )
        .unwrap();
        assert_eq!(scalar(out), ScalarValue::Int64(Some(i32::MAX as i64 + 1)));
        // NULL divided by zero is NULL, as in PostgreSQL.
        let out = eval_scalars(
            "/",
            vec![ScalarValue::Int64(None), ScalarValue::Int64(Some(0))],
        )
        .unwrap();
        assert_eq!(scalar(out), ScalarValue::Int64(None));
        // A double divided by zero raises, as PostgreSQL does.
        let err = eval_scalars(
            "*/",
            vec![
                ScalarValue::Float64(Some(1.0)),
                ScalarValue::Int32(Some(2)),
                ScalarValue::Float64(Some(0.0)),
            ],
        )
        .unwrap_err();
        assert!(err.to_string().contains("division by zero"), "{err}");
    }

    fn scalar(v: ColumnarValue) -> ScalarValue {
        match v {
            ColumnarValue::Scalar(s) => s,
            ColumnarValue::Array(_) => panic!("scalar arguments give a scalar"),
        }
    }

    #[test]
    fn a_chain_folds_left_to_right_with_postgres_errors() {
        assert_eq!(
            scalar(eval("+-*", &[Some(1), Some(2), Some(4), Some(3)]).unwrap()),
            ScalarValue::Int32(Some(-3))
        );
        // (max + 1) - 1 overflows at its first step, as PostgreSQL's does.
        let err = eval("+-", &[Some(i32::MAX), Some(1), Some(1)]).unwrap_err();
        assert!(err.to_string().contains("integer out of range"), "{err}");
        // (max - 1) + 1 does not.
        assert_eq!(
            scalar(eval("-+", &[Some(i32::MAX), Some(1), Some(1)]).unwrap()),
            ScalarValue::Int32(Some(i32::MAX))
        );
        assert_eq!(
            scalar(eval("+", &[None, Some(1)]).unwrap()),
            ScalarValue::Int32(None)
        );
        assert!(eval("++", &[Some(1), Some(2)]).is_err());
        assert!(eval("+x", &[Some(1), Some(2), Some(3)]).is_err());
    }
}

//! PostgreSQL's error for a call no function matches: `function
//! foo(integer, text) does not exist` (42883), which names the argument
//! types.
//!
//! DataFusion refuses an unknown name before it plans the arguments, so
//! its error (`Invalid function 'foo'`) cannot say what they were. When
//! planning fails that way, [`mark_calls`] renames the calls to
//! [`UNDEFINED_FUNCTION`] with the original name as a first argument and
//! the statement is planned again: DataFusion then types the arguments and
//! asks this function for its result type, which is where the error is
//! raised with their Postgres names. Only the error path pays for the
//! second planning.

use std::ops::ControlFlow;
use std::sync::Arc;

use arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectName, ObjectNamePart,
    Value, VisitMut, VisitorMut,
};
use freshet_repr::{PgType, SqlStateError, sqlstate};

/// The name calls to an unknown function are planned under on the second
/// attempt.
pub const UNDEFINED_FUNCTION: &str = "freshet_undefined_function";

/// The HINT PostgreSQL gives with the error.
pub const HINT: &str = "No function matches the given name and argument types. You might need to add explicit type casts.";

/// The name of the unknown function in DataFusion's `Invalid function
/// 'name'` planning error, if that is what `e` is.
pub fn unknown_function_name(e: &DataFusionError) -> Option<String> {
    match e {
        DataFusionError::Plan(m) => {
            let rest = m.strip_prefix("Invalid function '")?;
            let (name, _) = rest.split_once('\'')?;
            Some(name.to_owned())
        }
        DataFusionError::Diagnostic(_, inner) | DataFusionError::Context(_, inner) => {
            unknown_function_name(inner)
        }
        _ => None,
    }
}

/// Rename every call of `name` in `node` to [`UNDEFINED_FUNCTION`], the
/// name (as written) its first argument. Returns whether any call was
/// found.
pub fn mark_calls<V: VisitMut>(node: &mut V, name: &str) -> bool {
    struct Marker<'a> {
        name: &'a str,
        found: bool,
    }
    impl VisitorMut for Marker<'_> {
        type Break = ();
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            let Expr::Function(f) = expr else {
                return ControlFlow::Continue(());
            };
            let Some(last) = f.name.0.last().and_then(|p| p.as_ident()) else {
                return ControlFlow::Continue(());
            };
            let written = last.value.clone();
            let called = f.name.to_string();
            let matches = written.eq_ignore_ascii_case(self.name)
                || called.eq_ignore_ascii_case(self.name)
                || called
                    .to_lowercase()
                    .strip_prefix("pg_catalog.")
                    .is_some_and(|n| n == self.name.to_lowercase());
            if !matches {
                return ControlFlow::Continue(());
            }
            let FunctionArguments::List(list) = &mut f.args else {
                return ControlFlow::Continue(());
            };
            list.args.insert(
                0,
                FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::value(
                    Value::SingleQuotedString(written.to_lowercase()),
                ))),
            );
            f.name = ObjectName(vec![ObjectNamePart::Identifier(Ident::new(
                UNDEFINED_FUNCTION,
            ))]);
            self.found = true;
            ControlFlow::Continue(())
        }
    }
    let mut marker = Marker { name, found: false };
    let _ = node.visit(&mut marker);
    marker.found
}

/// The function calls of an unknown name are planned as (see the module
/// docs): it fails as soon as its result type is asked for.
pub fn udf() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(UndefinedFunction {
        signature: Signature::variadic_any(Volatility::Volatile),
    }))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct UndefinedFunction {
    signature: Signature,
}

impl UndefinedFunction {
    fn error(args: &ReturnFieldArgs) -> DataFusionError {
        let name = match args.scalar_arguments.first() {
            Some(Some(ScalarValue::Utf8(Some(n)))) => n.clone(),
            _ => "?".to_owned(),
        };
        let types: Vec<String> = args
            .arg_fields
            .iter()
            .skip(1)
            .map(|f| {
                if f.data_type() == &DataType::Null {
                    "unknown".to_owned()
                } else {
                    PgType::of_field(f).sql_name()
                }
            })
            .collect();
        DataFusionError::External(Box::new(SqlStateError {
            code: sqlstate::UNDEFINED_FUNCTION,
            message: format!("function {name}({}) does not exist", types.join(", ")),
        }))
    }
}

impl ScalarUDFImpl for UndefinedFunction {
    fn name(&self) -> &str {
        UNDEFINED_FUNCTION
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Err(DataFusionError::Internal(format!(
            "{UNDEFINED_FUNCTION} has no result type"
        )))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        Err(Self::error(&args))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Err(DataFusionError::Internal(format!(
            "{UNDEFINED_FUNCTION} is never evaluated"
        )))
    }
}

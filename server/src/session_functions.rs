//! Functions whose value comes from the session: constants fixed for the
//! session (`current_user`, `version()`, ...), `current_setting`, and
//! `set_config`, the one function that changes session state.
//!
//! They are registered in each session's DataFusion state and re-registered
//! whenever a variable changes ([`crate::session::Session::refresh_df`]), so
//! a plan always sees the values of the statement that plans it.

use std::sync::{Arc, Mutex};

use datafusion::arrow::array::{Array, BooleanArray, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result as DfResult, ScalarValue, exec_datafusion_err};
use datafusion::execution::SessionState;
use datafusion::logical_expr::registry::FunctionRegistry;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use freshet_planner::SetValue;
use freshet_planner::error::sqlstate_error;
use freshet_planner::udf;
use freshet_repr::sqlstate;

use crate::vars::Vars;

/// One `set_config(name, value, is_local)` a statement evaluated.
///
/// A query cannot change its session while it runs (its plan holds a copy
/// of the session's functions), so the call is recorded and the session
/// applies it once the statement succeeds, as PostgreSQL keeps a
/// `set_config` only if its statement does not fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingSetting {
    /// The variable, lower-cased.
    pub name: String,
    /// Its new value (`Default` for a NULL value, as PostgreSQL resets).
    pub value: SetValue,
    /// `is_local`: like `SET LOCAL`, only until the transaction ends.
    pub local: bool,
}

/// Where a session's `set_config` calls wait for their statement to end.
pub type PendingSettings = Arc<Mutex<Vec<PendingSetting>>>;

/// Take the settings recorded by the statement that just ended.
pub fn take_pending(pending: &PendingSettings) -> Vec<PendingSetting> {
    // A poisoned lock only means a panicking statement; its list is still
    // a list.
    let mut guard = pending.lock().unwrap_or_else(|e| e.into_inner());
    std::mem::take(&mut *guard)
}

/// Register the session functions in `df` for a session with `vars`.
pub fn register(
    df: &mut SessionState,
    vars: &Vars,
    constants: Vec<(&str, ScalarValue)>,
    pending: &PendingSettings,
) {
    let _ = df.register_udf(Arc::new(ScalarUDF::new_from_impl(CurrentSetting::new(
        vars.all(),
    ))));
    let _ = df.register_udf(Arc::new(ScalarUDF::new_from_impl(SetConfig {
        vars: vars.clone(),
        pending: Arc::clone(pending),
        signature: Signature::exact(
            vec![DataType::Utf8, DataType::Utf8, DataType::Boolean],
            Volatility::Volatile,
        ),
    })));
    for (name, value) in constants {
        let _ = df.register_udf(Arc::new(ScalarUDF::new_from_impl(SessionConstant::new(
            name, value,
        ))));
    }
}

/// A function whose value is fixed for the session (`current_user`, ...).
#[derive(Debug, PartialEq, Eq, Hash)]
struct SessionConstant {
    name: String,
    value: ScalarValue,
    signature: Signature,
}

impl SessionConstant {
    fn new(name: &str, value: ScalarValue) -> Self {
        SessionConstant {
            name: name.into(),
            value,
            signature: Signature::nullary(Volatility::Stable),
        }
    }
}

impl ScalarUDFImpl for SessionConstant {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(self.value.data_type())
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Ok(ColumnarValue::Scalar(self.value.clone()))
    }
}

/// `current_setting(name [, missing_ok])`: the session's value of a
/// variable; an unknown one is 42704, or NULL with `missing_ok`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CurrentSetting {
    values: Vec<(String, String)>,
    signature: Signature,
}

impl CurrentSetting {
    fn new(values: Vec<(&'static str, String)>) -> Self {
        CurrentSetting {
            values: values
                .into_iter()
                .map(|(k, v)| (k.to_lowercase(), v))
                .collect(),
            signature: Signature::one_of(
                vec![
                    TypeSignature::Exact(vec![DataType::Utf8]),
                    TypeSignature::Exact(vec![DataType::Utf8, DataType::Boolean]),
                ],
                Volatility::Stable,
            ),
        }
    }
}

impl ScalarUDFImpl for CurrentSetting {
    fn name(&self) -> &str {
        "current_setting"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let names = udf::string_arg(&args, 0, "current_setting")?;
        let missing_ok = match args.args.len() {
            1 => None,
            _ => Some(boolean_arg(&args, 1, "current_setting")?),
        };
        let mut out = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            let Some(name) = name else {
                out.push(None);
                continue;
            };
            let found = self
                .values
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone());
            let tolerate = missing_ok
                .as_ref()
                .is_some_and(|m| !m.is_null(i) && m.value(i));
            match found {
                Some(v) => out.push(Some(v)),
                None if tolerate => out.push(None),
                None => return Err(unrecognized(name)),
            }
        }
        udf::to_columnar(udf::array(StringArray::from(out)), udf::all_scalar(&args))
    }
}

/// `set_config(name, value, is_local)`: `SET` as a function, returning the
/// variable's new value. The value is checked when the call is evaluated
/// (so a bad one fails the statement) and applied when the statement
/// succeeds ([`PendingSetting`]).
#[derive(Debug)]
struct SetConfig {
    vars: Vars,
    pending: PendingSettings,
    signature: Signature,
}

impl PartialEq for SetConfig {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.pending, &other.pending)
    }
}

impl Eq for SetConfig {}

impl std::hash::Hash for SetConfig {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        "set_config".hash(state);
    }
}

impl ScalarUDFImpl for SetConfig {
    fn name(&self) -> &str {
        "set_config"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let names = udf::string_arg(&args, 0, "set_config")?;
        let values = udf::string_arg(&args, 1, "set_config")?;
        let local = boolean_arg(&args, 2, "set_config")?;
        // Each row sees the settings of the rows before it, as PostgreSQL
        // applies each call at once.
        let mut vars = self.vars.clone();
        let defaults = Vars::default();
        let mut calls = Vec::new();
        let mut out = Vec::with_capacity(names.len());
        for i in 0..names.len() {
            if names.is_null(i) {
                return Err(sqlstate_error(
                    sqlstate::NULL_VALUE_NOT_ALLOWED,
                    "SET requires parameter name",
                ));
            }
            let name = names.value(i).to_lowercase();
            // PostgreSQL: a NULL value means the variable's default.
            let value = if values.is_null(i) {
                SetValue::Default
            } else {
                SetValue::Values(vec![values.value(i).to_string()])
            };
            vars.set(&name, &value, &defaults).map_err(|e| {
                let (code, message) = e.code_and_message();
                sqlstate_error(code, message)
            })?;
            let shown = vars.get(&name).ok_or_else(|| unrecognized(&name))?;
            calls.push(PendingSetting {
                name,
                value,
                local: !local.is_null(i) && local.value(i),
            });
            out.push(Some(shown));
        }
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(calls);
        udf::to_columnar(udf::array(StringArray::from(out)), udf::all_scalar(&args))
    }
}

fn boolean_arg(args: &ScalarFunctionArgs, i: usize, function: &str) -> DfResult<BooleanArray> {
    udf::arg_array(args, i)?
        .as_any()
        .downcast_ref::<BooleanArray>()
        .cloned()
        .ok_or_else(|| exec_datafusion_err!("{function} takes a boolean"))
}

fn unrecognized(name: &str) -> datafusion::error::DataFusionError {
    sqlstate_error(
        sqlstate::UNDEFINED_OBJECT,
        format!("unrecognized configuration parameter \"{name}\""),
    )
}

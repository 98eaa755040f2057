//! Sessions: variables, transaction state, and the DataFusion state each
//! connection plans with.

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::execution::SessionState;
use datafusion::logical_expr::registry::FunctionRegistry;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use freshet_planner::SessionInfo;
use freshet_repr::sqlstate;
use freshet_repr::{GlobalId, Timestamp};
use freshet_storage::{ReadHold, TableWrite};

use crate::vars::{Isolation, SERVER_VERSION, Vars};

/// Where a session is with respect to transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnStatus {
    /// Each statement runs and commits on its own.
    Idle,
    /// Inside `BEGIN ... COMMIT`.
    InBlock,
    /// A statement in the block failed; only COMMIT/ROLLBACK are accepted.
    Failed,
}

/// The read side of an explicit transaction: one time for every read.
#[derive(Debug)]
pub struct TxnRead {
    /// The time every read in the transaction uses.
    pub ts: Timestamp,
    /// Collections held at `ts` (the transaction's read set).
    pub read_set: BTreeSet<GlobalId>,
    /// The holds themselves, released when the transaction ends.
    pub holds: Vec<ReadHold>,
}

/// An explicit transaction's state.
#[derive(Debug, Default)]
pub struct Transaction {
    /// Set after the first read.
    pub read: Option<TxnRead>,
    /// Writes buffered until COMMIT.
    pub writes: Vec<TableWrite>,
    /// Isolation requested with `BEGIN ISOLATION LEVEL` / `SET TRANSACTION`.
    pub isolation: Option<Isolation>,
    /// Variables as they were at `BEGIN`, restored by `ROLLBACK`.
    pub begin_vars: Option<Vars>,
    /// Session-level values while `SET LOCAL` overrides are in effect;
    /// they take over at `COMMIT`.
    pub session_vars: Option<Vars>,
    /// Open cursors, closed when the transaction ends.
    pub cursors: std::collections::BTreeMap<String, Cursor>,
}

/// An open cursor (`DECLARE ... CURSOR FOR`).
#[derive(Debug)]
pub struct Cursor {
    /// Its columns.
    pub desc: freshet_repr::RelationDesc,
    /// Rows computed and not yet fetched.
    pub rows: std::collections::VecDeque<arrow::array::RecordBatch>,
    /// For a cursor over `SUBSCRIBE`: where further rows come from.
    pub subscribe: Option<crate::subscribe::SubscribeStream>,
}

/// One client connection's state.
pub struct Session {
    /// The user name from the startup message.
    pub user: String,
    /// The database connected to.
    pub database: String,
    /// Session variables.
    pub vars: Vars,
    /// What `RESET` returns to: defaults plus startup parameters.
    pub reset_vars: Vars,
    /// Transaction status.
    pub status: TxnStatus,
    /// The open transaction, if any.
    pub txn: Transaction,
    /// The session's DataFusion state (time zone, session functions),
    /// shared with the thread planning the current statement.
    pub df: Arc<SessionState>,
    /// A `COPY ... FROM STDIN` waiting for its data.
    pub copy_in: Option<PendingCopy>,
}

/// A COPY FROM STDIN in progress: its plan and the data received so far.
#[derive(Debug)]
pub struct PendingCopy {
    /// The planned COPY.
    pub plan: freshet_planner::CopyFromPlan,
    /// Raw data received so far.
    pub data: Vec<u8>,
    /// Set (to the limit) once the data outgrew the memory a query may
    /// use: the rest of the stream is discarded and the COPY fails.
    pub too_large: Option<usize>,
}

impl PendingCopy {
    /// A COPY waiting for its first data.
    pub fn new(plan: freshet_planner::CopyFromPlan) -> Self {
        PendingCopy {
            plan,
            data: Vec::new(),
            too_large: None,
        }
    }

    /// Buffer `bytes`, unless the data would exceed `limit` bytes.
    pub fn push(&mut self, bytes: &[u8], limit: usize) {
        if self.too_large.is_some() {
            return;
        }
        if self.data.len().saturating_add(bytes.len()) > limit {
            self.data = Vec::new();
            self.too_large = Some(limit);
        } else {
            self.data.extend_from_slice(bytes);
        }
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("user", &self.user)
            .field("database", &self.database)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A new session planning with a copy of `base`.
    pub fn new(user: String, database: String, base: &SessionState) -> Self {
        let mut s = Session {
            user,
            database,
            vars: Vars::default(),
            reset_vars: Vars::default(),
            status: TxnStatus::Idle,
            txn: Transaction::default(),
            df: Arc::new(base.clone()),
            copy_in: None,
        };
        s.refresh_df();
        s
    }

    /// What planning needs to know about the session.
    pub fn info(&self) -> SessionInfo {
        SessionInfo {
            database: self.database.clone(),
            search_path: self.search_path(),
            user: self.user.clone(),
        }
    }

    /// The search path with `$user` expanded.
    pub fn search_path(&self) -> Vec<String> {
        self.vars
            .search_path
            .iter()
            .map(|s| {
                if s == "$user" {
                    self.user.clone()
                } else {
                    s.clone()
                }
            })
            .collect()
    }

    /// Start a transaction block.
    pub fn begin(&mut self) {
        self.status = TxnStatus::InBlock;
        self.txn = Transaction {
            begin_vars: Some(self.vars.clone()),
            ..Default::default()
        };
    }

    /// End the transaction block, keeping session-level variable changes
    /// when `committed`, restoring the variables of `BEGIN` otherwise.
    pub fn end_transaction(&mut self, committed: bool) -> Transaction {
        let txn = std::mem::take(&mut self.txn);
        self.status = TxnStatus::Idle;
        let restored = if committed {
            txn.session_vars.clone()
        } else {
            txn.begin_vars.clone()
        };
        if let Some(vars) = restored {
            self.vars = vars;
            self.refresh_df();
        }
        txn
    }

    /// `SET [LOCAL] name = value` (or `RESET name`). A `SET LOCAL`
    /// outside a transaction block does nothing (the sequencer warns).
    pub fn set_var(
        &mut self,
        name: &str,
        value: &freshet_planner::SetValue,
        local: bool,
    ) -> crate::error::Result<()> {
        if local && self.status == TxnStatus::Idle {
            return Ok(());
        }
        let reset = self.reset_vars.clone();
        if local {
            if self.txn.session_vars.is_none() {
                self.txn.session_vars = Some(self.vars.clone());
            }
        } else if let Some(session_vars) = self.txn.session_vars.as_mut() {
            session_vars.set(name, value, &reset)?;
        }
        self.vars.set(name, value, &reset)?;
        self.refresh_df();
        Ok(())
    }

    /// `RESET ALL` / `DISCARD ALL`.
    pub fn reset_all(&mut self) {
        self.vars = self.reset_vars.clone();
        if let Some(v) = self.txn.session_vars.as_mut() {
            *v = self.reset_vars.clone();
        }
        self.refresh_df();
    }

    /// The isolation level of the current statement.
    pub fn isolation(&self) -> Isolation {
        self.txn
            .isolation
            .unwrap_or(self.vars.transaction_isolation)
    }

    /// Re-derive DataFusion settings and session functions from variables.
    pub fn refresh_df(&mut self) {
        let tz = match self.vars.timezone.as_str() {
            "UTC" | "utc" | "Etc/UTC" | "GMT" => "+00:00".to_string(),
            other => other.to_string(),
        };
        let df = Arc::make_mut(&mut self.df);
        df.config_mut().options_mut().execution.time_zone = Some(tz);
        let current_schema = self
            .vars
            .search_path
            .iter()
            .find(|s| s.as_str() != "$user")
            .cloned();
        let functions: Vec<(&str, ScalarValue)> = vec![
            (
                "version",
                ScalarValue::Utf8(Some(format!(
                    "PostgreSQL {SERVER_VERSION} on {}, compiled by rustc",
                    std::env::consts::ARCH
                ))),
            ),
            (
                "current_database",
                ScalarValue::Utf8(Some(self.database.clone())),
            ),
            (
                "current_catalog",
                ScalarValue::Utf8(Some(self.database.clone())),
            ),
            ("current_schema", ScalarValue::Utf8(current_schema)),
            ("current_user", ScalarValue::Utf8(Some(self.user.clone()))),
            ("session_user", ScalarValue::Utf8(Some(self.user.clone()))),
            ("user", ScalarValue::Utf8(Some(self.user.clone()))),
        ];
        let _ = df.register_udf(Arc::new(ScalarUDF::new_from_impl(CurrentSetting::new(
            self.vars.all(),
        ))));
        for (name, value) in functions {
            let _ = df.register_udf(Arc::new(ScalarUDF::new_from_impl(SessionConstant::new(
                name, value,
            ))));
        }
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

/// `current_setting(name)`: the session's value of a variable.
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
            signature: Signature::exact(vec![DataType::Utf8], Volatility::Stable),
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
        use freshet_planner::udf;
        let out = udf::map_text(&args, "current_setting", |n| {
            self.values
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
                .ok_or_else(|| {
                    freshet_planner::error::sqlstate_error(
                        sqlstate::UNDEFINED_OBJECT,
                        format!("unrecognized configuration parameter \"{n}\""),
                    )
                })
        })?;
        let out = datafusion::arrow::array::StringArray::from(out);
        udf::to_columnar(udf::array(out), udf::all_scalar(&args))
    }
}

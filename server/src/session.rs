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
    /// Variables to restore when the transaction ends (`SET LOCAL`).
    pub saved_vars: Option<Vars>,
}

/// One client connection's state.
pub struct Session {
    /// The user name from the startup message.
    pub user: String,
    /// The database connected to.
    pub database: String,
    /// Session variables.
    pub vars: Vars,
    /// Transaction status.
    pub status: TxnStatus,
    /// The open transaction, if any.
    pub txn: Transaction,
    /// The session's DataFusion state (time zone, session functions).
    pub df: SessionState,
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
            status: TxnStatus::Idle,
            txn: Transaction::default(),
            df: base.clone(),
            copy_in: None,
        };
        s.refresh_df();
        s
    }

    /// What planning needs to know about the session.
    pub fn info(&self) -> SessionInfo {
        SessionInfo {
            database: self.database.clone(),
            search_path: self.vars.search_path.clone(),
            user: self.user.clone(),
        }
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
        self.df.config_mut().options_mut().execution.time_zone = Some(tz);
        let current_schema = self.vars.search_path.first().cloned();
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
        for (name, value) in functions {
            let _ = self
                .df
                .register_udf(Arc::new(ScalarUDF::new_from_impl(SessionConstant::new(
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

//! Sessions: variables, transaction state, and the DataFusion state each
//! connection plans with.

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::execution::SessionState;
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
///
/// Reads run at one time (`read`), and see the transaction's own buffered
/// writes. COMMIT applies the writes at one timestamp only if no table in
/// `validate` changed after the read time: optimistic concurrency control,
/// which makes a read-then-write transaction serializable and lets
/// clients retry on 40001 as they do with PostgreSQL's `SERIALIZABLE`.
#[derive(Debug, Default)]
pub struct Transaction {
    /// Set after the first read.
    pub read: Option<TxnRead>,
    /// The tables whatever the transaction read depends on (through views
    /// and materialized views): if one changed after `read.ts`, COMMIT of
    /// the writes fails.
    pub validate: BTreeSet<GlobalId>,
    /// Writes buffered until COMMIT.
    pub writes: Vec<TableWrite>,
    /// `SAVEPOINT`s, innermost last.
    pub savepoints: Vec<Savepoint>,
    /// DDL run in the block, committed as one catalog transaction at
    /// COMMIT; later statements in the block plan against its result.
    pub ddl: Option<PendingDdl>,
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

impl Transaction {
    /// Objects the block's DDL created (none without DDL): they have no
    /// storage collection until COMMIT.
    pub fn created(&self) -> BTreeSet<GlobalId> {
        self.ddl
            .as_ref()
            .map(PendingDdl::created)
            .unwrap_or_default()
    }
}

/// The DDL of a transaction block, not yet committed.
#[derive(Debug)]
pub struct PendingDdl {
    /// The catalog when the block ran its first DDL statement. COMMIT
    /// fails with 40001 if another session changed what the block's
    /// statements name.
    pub base: Arc<freshet_catalog::CatalogState>,
    /// One step per statement, in order.
    pub steps: Vec<DdlStep>,
}

/// One DDL statement of a transaction block.
#[derive(Debug)]
pub struct DdlStep {
    /// Its catalog operations.
    pub ops: Vec<freshet_catalog::Op>,
    /// Holds on the inputs of the dataflow it creates, at its `as_of`.
    pub holds: Vec<ReadHold>,
    /// The dataflow of the materialized view or index it creates, by the
    /// id the catalog gives that object.
    pub dataflow: Option<(GlobalId, freshet_planner::ItemDataflow)>,
    /// The catalog after this step (and every earlier one).
    pub state: Arc<freshet_catalog::CatalogState>,
    /// Objects this step created.
    pub created: Vec<GlobalId>,
}

impl PendingDdl {
    /// The catalog as the block sees it.
    pub fn state(&self) -> Arc<freshet_catalog::CatalogState> {
        self.steps
            .last()
            .map_or_else(|| Arc::clone(&self.base), |s| Arc::clone(&s.state))
    }

    /// Every operation, in order.
    pub fn ops(&self) -> Vec<freshet_catalog::Op> {
        self.steps
            .iter()
            .flat_map(|s| s.ops.iter().cloned())
            .collect()
    }

    /// Objects the block created (no storage collection exists for them
    /// until COMMIT).
    pub fn created(&self) -> BTreeSet<GlobalId> {
        self.steps
            .iter()
            .flat_map(|s| s.created.iter().copied())
            .collect()
    }
}

/// A `SAVEPOINT`: what `ROLLBACK TO` returns the transaction to.
#[derive(Debug)]
pub struct Savepoint {
    /// Its name (PostgreSQL's rules: a later savepoint of the same name
    /// hides an earlier one until released).
    pub name: String,
    /// How many buffered writes there were.
    pub writes: usize,
    /// How many DDL steps there were.
    pub ddl_steps: usize,
    /// The variables at the savepoint.
    pub vars: Vars,
}

/// A statement prepared with SQL `PREPARE name AS ...`, run by `EXECUTE`.
#[derive(Debug, Clone)]
pub struct SqlPrepared {
    /// The statement.
    pub stmt: freshet_planner::parser::Statement,
    /// The type of each parameter (declared, or inferred from the
    /// statement); `None` where neither says.
    pub param_types: Vec<Option<DataType>>,
}

/// An open cursor (`DECLARE ... CURSOR FOR`).
#[derive(Debug)]
pub struct Cursor {
    /// The `DECLARE` statement, as `pg_cursors.statement` shows it.
    pub statement: String,
    /// When it was declared (`pg_cursors.creation_time`).
    pub created: std::time::SystemTime,
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
    /// Statements prepared with SQL `PREPARE`, by name.
    pub prepared: std::collections::HashMap<String, SqlPrepared>,
    /// Kept plans of simple-protocol statement templates (integer
    /// literals made parameters), and the text shapes that find them
    /// without a parse (see `Coordinator::templated_plan`).
    pub templates: crate::coordinator::Templates,
    /// Answers of simple-protocol constant queries (`SELECT 1`), kept
    /// with the state they were planned against.
    pub constants: crate::coordinator::ConstantAnswers,
    /// `set_config` calls of the running statement, applied when it
    /// succeeds.
    pub pending_settings: crate::session_functions::PendingSettings,
    /// The backend process id the client was given (`pg_backend_pid()`,
    /// and what its CancelRequest names).
    pub pid: i32,
    /// The name of the session's schema for temporary tables
    /// (`pg_temp_<pid>`), once it has a backend pid.
    pub temp_schema: Option<String>,
    /// Drops that schema when the session ends.
    pub temp_guard: Option<crate::coordinator::TempSchemaGuard>,
}

/// A COPY FROM STDIN in progress: its plan, the data received but not
/// yet made into rows, and the rows made so far (in memory, or staged in
/// part files once they add up to a part).
#[derive(Debug)]
pub struct PendingCopy {
    /// The planned COPY.
    pub plan: freshet_planner::CopyFromPlan,
    /// The data stream, cut into whole rows.
    pub stream: crate::copy::CopyStream,
    /// The defaults row and numbered columns, once the first rows came.
    pub fill: Option<crate::coordinator::CopyFill>,
    /// Checked rows not yet staged.
    pub batches: Vec<arrow::array::RecordBatch>,
    /// Their size in memory.
    pub batch_bytes: usize,
    /// Rows staged in part files, deleted when the COPY is dropped
    /// without committing them (a failure, CopyFail, a client that went
    /// away); the commit takes them out first.
    pub staged: Vec<freshet_storage::StagedPart>,
    /// Where they are (set with the first).
    pub storage: Option<std::sync::Arc<freshet_storage::Storage>>,
    /// The part being written while the next one's rows are made (at most
    /// one at a time).
    pub staging: Option<StagingPart>,
    /// Chunks whose rows are being made, oldest first.
    pub making: std::collections::VecDeque<crate::coordinator::MakingChunk>,
    /// Chunks taken from the stream so far.
    pub chunks: usize,
    /// Rows made so far (for the command tag).
    pub rows: usize,
    /// Lines of data consumed so far (for error messages).
    pub lines: usize,
    /// The data ended (an end marker); the rest is ignored.
    pub ended: bool,
    /// The first error: the rest of the stream is discarded and the COPY
    /// fails with it when the client ends the data.
    pub failed: Option<crate::error::AdapterError>,
}

impl PendingCopy {
    /// A COPY waiting for its first data.
    pub fn new(plan: freshet_planner::CopyFromPlan) -> Self {
        PendingCopy {
            stream: crate::copy::CopyStream::new(&plan.options),
            plan,
            fill: None,
            batches: Vec::new(),
            batch_bytes: 0,
            staged: Vec::new(),
            storage: None,
            staging: None,
            making: std::collections::VecDeque::new(),
            chunks: 0,
            rows: 0,
            lines: 0,
            ended: false,
            failed: None,
        }
    }
}

/// A staged part being written on a blocking thread.
pub type StagingPart =
    tokio::task::JoinHandle<freshet_storage::Result<freshet_storage::StagedPart>>;

impl PendingCopy {
    /// Delete the part being written once it is written (the COPY failed
    /// or went away meanwhile).
    pub fn abandon_staging(&mut self) {
        let (Some(staging), Some(storage)) = (self.staging.take(), self.storage.clone()) else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Ok(Ok(part)) = staging.await {
                    storage.discard_staged(&[part]);
                }
            });
        }
    }
}

impl Drop for PendingCopy {
    fn drop(&mut self) {
        self.abandon_staging();
        if let Some(storage) = &self.storage
            && !self.staged.is_empty()
        {
            storage.discard_staged(&self.staged);
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
            prepared: std::collections::HashMap::new(),
            templates: Default::default(),
            constants: Default::default(),
            pending_settings: Default::default(),
            pid: 0,
            temp_schema: None,
            temp_guard: None,
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
            temp_schema: self.temp_schema.clone(),
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

    /// `SAVEPOINT name`.
    pub fn savepoint(&mut self, name: String) {
        let savepoint = Savepoint {
            name,
            writes: self.txn.writes.len(),
            ddl_steps: self.txn.ddl.as_ref().map_or(0, |d| d.steps.len()),
            vars: self.vars.clone(),
        };
        self.txn.savepoints.push(savepoint);
    }

    /// `ROLLBACK TO [SAVEPOINT] name`: undo the writes and variable
    /// changes made since, keep the savepoint, and leave a failed state.
    /// False if there is no such savepoint.
    pub fn rollback_to(&mut self, name: &str) -> bool {
        let Some(at) = self.txn.savepoints.iter().rposition(|s| s.name == name) else {
            return false;
        };
        self.txn.savepoints.truncate(at + 1);
        let sp = &self.txn.savepoints[at];
        self.txn.writes.truncate(sp.writes);
        let ddl_steps = sp.ddl_steps;
        self.vars = sp.vars.clone();
        if let Some(ddl) = self.txn.ddl.as_mut() {
            ddl.steps.truncate(ddl_steps);
        }
        self.status = TxnStatus::InBlock;
        self.refresh_df();
        true
    }

    /// `RELEASE [SAVEPOINT] name`: forget it and every later savepoint,
    /// keeping their work. False if there is no such savepoint.
    pub fn release(&mut self, name: &str) -> bool {
        let Some(at) = self.txn.savepoints.iter().rposition(|s| s.name == name) else {
            return false;
        };
        self.txn.savepoints.truncate(at);
        true
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

    /// Apply (when the statement succeeded) or forget the `set_config`
    /// calls the statement that just ended evaluated.
    pub fn settle_settings(&mut self, succeeded: bool) -> crate::error::Result<()> {
        let calls = crate::session_functions::take_pending(&self.pending_settings);
        if !succeeded {
            return Ok(());
        }
        for call in calls {
            self.set_var(&call.name, &call.value, call.local)?;
        }
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

    /// Register functions of this session's own (they stay through
    /// `RESET ALL`).
    pub fn add_functions(&mut self, functions: Vec<datafusion::logical_expr::ScalarUDF>) {
        use datafusion::logical_expr::registry::FunctionRegistry;
        let df = Arc::make_mut(&mut self.df);
        for f in functions {
            let _ = df.register_udf(Arc::new(f));
        }
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
            ("pg_backend_pid", ScalarValue::Int32(Some(self.pid))),
        ];
        crate::session_functions::register(df, &self.vars, functions, &self.pending_settings);
    }
}

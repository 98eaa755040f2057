//! What executing a statement returns to the front end: results, notices
//! and command tags.

use arrow::array::RecordBatch;
use freshet_planner::parser::Statement;
use freshet_repr::RelationDesc;
use freshet_repr::sqlstate;

/// What executing a statement produced.
#[derive(Debug)]
pub enum ExecuteResponse {
    /// Rows, with the command tag (`SELECT`, `SHOW`, `INSERT 0`, ...).
    Rows {
        /// Columns.
        desc: RelationDesc,
        /// Data.
        batches: Vec<RecordBatch>,
        /// Tag; the row count is appended.
        tag: String,
    },
    /// A command with its complete tag (`CREATE TABLE`, `INSERT 0 3`).
    Command(String),
    /// `BEGIN` / `START TRANSACTION`.
    TransactionStart(String),
    /// `COMMIT` / `ROLLBACK`.
    TransactionEnd(String),
    /// COPY FROM STDIN is waiting for data (the plan is in the session).
    CopyIn {
        /// Number of columns in the data.
        columns: usize,
        /// Whether the data is in the binary COPY format.
        binary: bool,
    },
    /// A running subscribe, streamed as COPY data in `options`' format.
    Subscribe {
        /// The subscribe.
        stream: Box<crate::subscribe::SubscribeStream>,
        /// COPY format options.
        options: freshet_planner::CopyOptions,
    },
    /// `DEALLOCATE name` (`None`: `ALL`), done for statements prepared
    /// with SQL; the front end forgets protocol-level statements of the
    /// name (one namespace, as in PostgreSQL) and fails if neither knew
    /// it.
    Deallocate {
        /// The statement; `None` for all.
        name: Option<String>,
        /// Whether a SQL-prepared statement of that name existed.
        known: bool,
    },
    /// COPY TO STDOUT data.
    CopyOut {
        /// Columns.
        desc: RelationDesc,
        /// Data.
        batches: Vec<RecordBatch>,
        /// Format options.
        options: freshet_planner::CopyOptions,
    },
}

/// A message sent to the client alongside a result.
#[derive(Debug, Clone)]
pub struct Notice {
    /// `NOTICE` or `WARNING`.
    pub severity: &'static str,
    /// SQLSTATE.
    pub code: &'static str,
    /// The message.
    pub message: String,
}

/// Per-statement context the handler passes in.
#[derive(Debug, Default)]
pub struct ExecCtx {
    /// Notices to send before the statement's result.
    pub notices: Vec<Notice>,
    /// The peek a prepared statement decided at Prepare: used instead of
    /// planning while what it was planned against still holds.
    pub prepared_plan: Option<std::sync::Arc<super::PreparedPlan>>,
}

impl ExecCtx {
    pub(super) fn notice(&mut self, message: impl Into<String>) {
        self.notices.push(Notice {
            severity: "NOTICE",
            code: sqlstate::SUCCESSFUL_COMPLETION,
            message: message.into(),
        });
    }

    pub(super) fn warning(&mut self, code: &'static str, message: impl Into<String>) {
        self.notices.push(Notice {
            severity: "WARNING",
            code,
            message: message.into(),
        });
    }
}

/// The tag Postgres sends for a DDL or utility statement.
pub fn command_tag(stmt: &Statement) -> String {
    use datafusion::sql::sqlparser::ast::Statement as S;
    match stmt {
        Statement::Sql(s) => match s.as_ref() {
            // The commonest statements are named without printing them.
            S::Query(_) => "SELECT".into(),
            S::Insert(_) => "INSERT".into(),
            S::Update { .. } => "UPDATE".into(),
            S::Delete(_) => "DELETE".into(),
            S::CreateTable(_) => "CREATE TABLE".into(),
            S::CreateSequence { .. } => "CREATE SEQUENCE".into(),
            S::CreateView(v) if v.materialized => "CREATE MATERIALIZED VIEW".into(),
            S::CreateView(_) => "CREATE VIEW".into(),
            S::CreateIndex(_) => "CREATE INDEX".into(),
            S::CreateSchema { .. } => "CREATE SCHEMA".into(),
            S::CreateDatabase { .. } => "CREATE DATABASE".into(),
            S::Drop { object_type, .. } => {
                format!("DROP {}", object_type.to_string().to_uppercase())
            }
            S::AlterTable(_) => "ALTER TABLE".into(),
            S::Set(_) => "SET".into(),
            S::Reset(_) => "RESET".into(),
            S::Discard { .. } => "DISCARD ALL".into(),
            S::StartTransaction { begin: true, .. } => "BEGIN".into(),
            S::StartTransaction { .. } => "START TRANSACTION".into(),
            S::Commit { .. } => "COMMIT".into(),
            S::Rollback { .. } => "ROLLBACK".into(),
            other => other
                .to_string()
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_uppercase(),
        },
        Statement::AlterRename { kind, .. } | Statement::AlterOptions { kind, .. } => {
            format!("ALTER {}", kind.keyword())
        }
        Statement::CreateWithOptions { stmt, .. } => command_tag(stmt),
        Statement::RefreshMaterializedView { .. } => "REFRESH MATERIALIZED VIEW".into(),
        Statement::Maintenance { kind, .. } => match kind {
            freshet_planner::parser::MaintenanceKind::Vacuum => "VACUUM".into(),
            freshet_planner::parser::MaintenanceKind::Analyze => "ANALYZE".into(),
        },
        Statement::SelectAsOf { .. } => "SELECT".into(),
        Statement::ExplainTimestamp(_) | Statement::ExplainMaterializedView(_) => "EXPLAIN".into(),
        Statement::ShowCreate(..)
        | Statement::ShowSources(_)
        | Statement::ShowSinks(_)
        | Statement::ShowSecrets(_)
        | Statement::ShowConnections(_) => "SHOW".into(),
        Statement::CreateSource(_) => "CREATE SOURCE".into(),
        Statement::CreateSink(_) => "CREATE SINK".into(),
        Statement::CreateSecret(_) => "CREATE SECRET".into(),
        Statement::CreateConnection(_) => "CREATE CONNECTION".into(),
        Statement::AlterSecret(_) => "ALTER SECRET".into(),
        Statement::DropObjects { kind, .. } => format!("DROP {}", kind.keyword()),
        Statement::CreateDefaultIndex { .. } => "CREATE INDEX".into(),
        Statement::ExplainIndex(_) => "EXPLAIN".into(),
        Statement::ShowIndexes(_) => "SHOW".into(),
        Statement::Subscribe(_) => "SUBSCRIBE".into(),
        Statement::CopySubscribe { .. } => "COPY".into(),
        Statement::Declare { .. } => "DECLARE CURSOR".into(),
        Statement::Fetch { .. } => "FETCH".into(),
    }
}

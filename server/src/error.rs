//! Every error a client can see, mapped once to a SQLSTATE.

use datafusion::error::DataFusionError;
use freshet_catalog::CatalogError;
use freshet_planner::PlanError;
use freshet_planner::error_position::{Subject, position_of};
use freshet_planner::parser::Statement;
use freshet_repr::TypeError;
use freshet_repr::sqlstate;
use freshet_storage::StorageError;
use pgwire::error::{ErrorInfo, PgWireError};

/// An error from executing a statement.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// From planning.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// From the catalog.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// From storage.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// From DataFusion (planning or execution).
    #[error(transparent)]
    DataFusion(#[from] DataFusionError),
    /// A row violates a column's constraint or type.
    #[error("{message}")]
    Data {
        /// SQLSTATE.
        code: &'static str,
        /// Message.
        message: String,
        /// Optional DETAIL.
        detail: Option<String>,
    },
    /// A statement in a transaction that already failed.
    #[error("current transaction is aborted, commands ignored until end of transaction block")]
    TransactionAborted,
    /// A read time some input has compacted past (or a hold there lost a
    /// race with compaction; choosing again may succeed).
    #[error("{0}")]
    InvalidReadTime(String),
    /// A statement that may not run inside a transaction block.
    #[error("{0} cannot run inside a transaction block")]
    InTransactionBlock(String),
    /// A transaction mixing what Freshet keeps apart.
    #[error("{0}")]
    InvalidTransactionState(String),
    /// COMMIT of a transaction that read a table someone else wrote
    /// after the transaction's read time: nothing was applied.
    #[error("could not serialize access due to concurrent update")]
    SerializationFailure {
        /// What changed, in users' names.
        detail: String,
    },
    /// The statement ran longer than `statement_timeout`.
    #[error("canceling statement due to statement timeout")]
    StatementTimeout,
    /// A CancelRequest arrived.
    #[error("canceling statement due to user request")]
    Canceled,
    /// A bad value for a parameter or option.
    #[error("{0}")]
    InvalidParameterValue(String),
    /// Unknown session variable.
    #[error("unrecognized configuration parameter \"{0}\"")]
    UnknownVariable(String),
    /// A read-only session variable.
    #[error("parameter \"{0}\" cannot be changed")]
    ReadOnlyVariable(String),
    /// Not supported.
    #[error("{0}")]
    Unsupported(String),
    /// Malformed COPY data.
    #[error("{0}")]
    BadCopyData(String),
    /// A protocol-level problem.
    #[error("{0}")]
    Protocol(String),
    /// The client went away.
    #[error("connection closed by client")]
    ConnectionClosed,
    /// From compute (installing or dropping a dataflow).
    #[error(transparent)]
    Compute(#[from] freshet_compute::ComputeError),
    /// A materialized view's dataflow holds an error for some input row
    /// (its read fails with the error the query would raise ad hoc).
    #[error("{}", .0.message)]
    Dataflow(freshet_compute::DataflowError),
    /// From a source's connector (describing what it writes, starting
    /// its ingestion).
    #[error(transparent)]
    Source(#[from] freshet_sources::SourceError),
    /// From a sink's target (checking it at `CREATE SINK`).
    #[error(transparent)]
    Sink(#[from] freshet_sinks::SinkError),
    /// Arrow refused a conversion (a bug, or a value it cannot hold).
    #[error(transparent)]
    Arrow(#[from] arrow::error::ArrowError),
    /// A cursor that is not open.
    #[error("cursor \"{0}\" does not exist")]
    UnknownCursor(String),
    /// A cursor name already in use.
    #[error("cursor \"{0}\" already exists")]
    DuplicateCursor(String),
    /// A bug or unexpected state.
    #[error("internal error: {0}")]
    Internal(String),
    /// An error with the place in the query text it is about (see
    /// [`AdapterError::at`]).
    #[error("{error}")]
    Located {
        /// The error.
        error: Box<AdapterError>,
        /// 1-based character position in the query text.
        position: usize,
    },
}

/// Result alias for execution.
pub type Result<T, E = AdapterError> = std::result::Result<T, E>;

impl AdapterError {
    /// A data error with a SQLSTATE.
    pub fn data(code: &'static str, message: impl Into<String>) -> Self {
        AdapterError::Data {
            code,
            message: message.into(),
            detail: None,
        }
    }

    /// This error with a DETAIL line (for data errors).
    pub fn with_detail(self, detail: impl Into<String>) -> Self {
        match self {
            AdapterError::Data { code, message, .. } => AdapterError::Data {
                code,
                message,
                detail: Some(detail.into()),
            },
            other => other,
        }
    }

    /// This error with the position in `sql` of what it names (the
    /// missing relation, column or function, the operator nothing
    /// matches), where it has no position of its own and `stmt`, parsed
    /// from `sql`, mentions it.
    pub fn at(self, sql: &str, stmt: &Statement) -> AdapterError {
        if self.position().is_some() {
            return self;
        }
        match self
            .subject()
            .and_then(|subject| position_of(sql, stmt, &subject))
        {
            Some(position) => AdapterError::Located {
                error: Box::new(self),
                position,
            },
            None => self,
        }
    }

    /// What a "does not exist" error names, read off its PostgreSQL text
    /// (several layers raise these; the text is the one form they share).
    fn subject(&self) -> Option<Subject> {
        let (code, message) = self.code_and_message();
        let quoted = |prefix: &str| {
            let rest = message.strip_prefix(prefix)?;
            let (name, _) = rest.split_once('"')?;
            Some(name.to_owned())
        };
        match code {
            sqlstate::UNDEFINED_TABLE => quoted("relation \"").map(Subject::Relation),
            sqlstate::UNDEFINED_COLUMN => quoted("column \"").map(Subject::Column),
            sqlstate::UNDEFINED_FUNCTION => {
                if let Some(operands) = message.strip_prefix("operator does not exist: ") {
                    operands
                        .split_whitespace()
                        .find(|t| t.chars().all(|c| "+-*/<>=~!@#%^&|`?".contains(c)))
                        .map(|op| Subject::Operator(op.to_owned()))
                } else {
                    let rest = message.strip_prefix("function ")?;
                    let (name, _) = rest.split_once('(')?;
                    Some(Subject::Function(name.to_owned()))
                }
            }
            _ => None,
        }
    }

    /// The SQLSTATE and message a client sees.
    pub fn code_and_message(&self) -> (&'static str, String) {
        match self {
            AdapterError::Located { error, .. } => error.code_and_message(),
            AdapterError::Plan(e) => plan_code(e),
            AdapterError::Catalog(e) => (catalog_code(e), e.to_string()),
            AdapterError::Storage(e) => (storage_code(e), e.to_string()),
            AdapterError::DataFusion(e) => freshet_compute::sqlstate::datafusion_sqlstate(e),
            AdapterError::Data { code, message, .. } => (code, message.clone()),
            AdapterError::InvalidReadTime(_) => (sqlstate::DATA_EXCEPTION, self.to_string()),
            AdapterError::TransactionAborted => {
                (sqlstate::IN_FAILED_SQL_TRANSACTION, self.to_string())
            }
            AdapterError::InTransactionBlock(_) => {
                (sqlstate::ACTIVE_SQL_TRANSACTION, self.to_string())
            }
            AdapterError::InvalidTransactionState(_) => {
                (sqlstate::INVALID_TRANSACTION_STATE, self.to_string())
            }
            AdapterError::SerializationFailure { .. } => {
                (sqlstate::SERIALIZATION_FAILURE, self.to_string())
            }
            AdapterError::StatementTimeout | AdapterError::Canceled => {
                (sqlstate::QUERY_CANCELED, self.to_string())
            }
            AdapterError::InvalidParameterValue(_) => {
                (sqlstate::INVALID_PARAMETER_VALUE, self.to_string())
            }
            AdapterError::UnknownVariable(_) => (sqlstate::UNDEFINED_OBJECT, self.to_string()),
            AdapterError::ReadOnlyVariable(_) => {
                (sqlstate::CANT_CHANGE_RUNTIME_PARAM, self.to_string())
            }
            AdapterError::Unsupported(_) => (sqlstate::FEATURE_NOT_SUPPORTED, self.to_string()),
            AdapterError::BadCopyData(_) => (sqlstate::BAD_COPY_FILE_FORMAT, self.to_string()),
            AdapterError::Protocol(_) => (sqlstate::PROTOCOL_VIOLATION, self.to_string()),
            AdapterError::ConnectionClosed => (sqlstate::CONNECTION_FAILURE, self.to_string()),
            AdapterError::Compute(freshet_compute::ComputeError::Render(e)) => {
                freshet_compute::sqlstate::datafusion_sqlstate(e)
            }
            AdapterError::Compute(freshet_compute::ComputeError::Storage(e)) => {
                (storage_code(e), e.to_string())
            }
            AdapterError::Compute(freshet_compute::ComputeError::Failed(e)) => {
                (e.sqlstate(), e.message.clone())
            }
            AdapterError::Compute(_) => (sqlstate::INTERNAL_ERROR, self.to_string()),
            AdapterError::Dataflow(e) => (e.sqlstate(), e.message.clone()),
            AdapterError::Arrow(_) => (sqlstate::INTERNAL_ERROR, self.to_string()),
            AdapterError::Source(e) => (source_code(e), e.to_string()),
            AdapterError::Sink(e) => (sink_code(e), e.to_string()),
            AdapterError::UnknownCursor(_) => (sqlstate::INVALID_CURSOR_NAME, self.to_string()),
            AdapterError::DuplicateCursor(_) => (sqlstate::DUPLICATE_CURSOR, self.to_string()),
            AdapterError::Internal(_) => (sqlstate::INTERNAL_ERROR, self.to_string()),
        }
    }

    fn detail(&self) -> Option<String> {
        match self {
            AdapterError::Located { error, .. } => error.detail(),
            AdapterError::Data { detail, .. } => detail.clone(),
            AdapterError::SerializationFailure { detail } => Some(detail.clone()),
            AdapterError::Catalog(CatalogError::DependentObjects { detail, .. }) => {
                Some(detail.clone())
            }
            AdapterError::Plan(PlanError::Catalog(CatalogError::DependentObjects {
                detail,
                ..
            })) => Some(detail.clone()),
            AdapterError::Plan(PlanError::Parse { detail, .. }) => detail.clone(),
            _ => None,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            AdapterError::Located { error, .. } => error.hint(),
            AdapterError::Catalog(CatalogError::DependentObjects { .. })
            | AdapterError::Plan(PlanError::Catalog(CatalogError::DependentObjects { .. })) => {
                Some("Use DROP ... CASCADE to drop the dependent objects too.".into())
            }
            AdapterError::SerializationFailure { .. } => {
                Some("The transaction might succeed if retried.".into())
            }
            _ => {
                // PostgreSQL's hints for calls nothing matches, whichever
                // layer found them (the planner, DataFusion's coercion).
                let (code, message) = self.code_and_message();
                if code != sqlstate::UNDEFINED_FUNCTION {
                    None
                } else if message.starts_with("function ") && message.ends_with(" does not exist") {
                    Some(freshet_planner::query::undefined_function::HINT.into())
                } else if message.starts_with("operator does not exist: ") {
                    Some(
                        "No operator matches the given name and argument types. \
                         You might need to add explicit type casts."
                            .into(),
                    )
                } else {
                    None
                }
            }
        }
    }

    fn position(&self) -> Option<usize> {
        match self {
            AdapterError::Plan(PlanError::Parse { position, .. }) => *position,
            AdapterError::Located { position, .. } => Some(*position),
            _ => None,
        }
    }

    /// Whether this error means a newer process took over.
    pub fn is_fenced(&self) -> bool {
        match self {
            AdapterError::Storage(e) => e.is_fenced(),
            AdapterError::Catalog(e) => e.is_fenced(),
            AdapterError::Located { error, .. } => error.is_fenced(),
            _ => false,
        }
    }

    /// The `ErrorResponse` for this error.
    pub fn to_error_info(&self) -> ErrorInfo {
        let (code, message) = self.code_and_message();
        let mut info = ErrorInfo::new("ERROR".to_owned(), code.to_owned(), message);
        info.detail = self.detail();
        info.hint = self.hint();
        info.position = self.position().map(|p| p.to_string());
        info
    }
}

impl From<PgWireError> for AdapterError {
    fn from(e: PgWireError) -> Self {
        match e {
            PgWireError::UserError(info) => AdapterError::Data {
                code: sqlstate::INTERNAL_ERROR,
                message: info.message,
                detail: info.detail,
            },
            other => AdapterError::Internal(other.to_string()),
        }
    }
}

impl From<AdapterError> for PgWireError {
    fn from(e: AdapterError) -> Self {
        PgWireError::UserError(Box::new(e.to_error_info()))
    }
}

fn source_code(e: &freshet_sources::SourceError) -> &'static str {
    use freshet_sources::SourceError as E;
    match e {
        E::Storage(e) => storage_code(e),
        // PostgreSQL's class for a foreign data source that cannot be
        // reached or answers wrongly (08 would say the client's own
        // connection failed).
        E::Upstream(_) => sqlstate::FDW_UNABLE_TO_ESTABLISH_CONNECTION,
        E::Invalid(_) => sqlstate::INVALID_PARAMETER_VALUE,
        E::Arrow(_) | E::Internal(_) => sqlstate::INTERNAL_ERROR,
    }
}

fn plan_code(e: &PlanError) -> (&'static str, String) {
    let code = match e {
        PlanError::Parse { .. } | PlanError::Syntax(_) => sqlstate::SYNTAX_ERROR,
        PlanError::Unsupported(_) => sqlstate::FEATURE_NOT_SUPPORTED,
        PlanError::UndefinedParameter(_) => sqlstate::UNDEFINED_PARAMETER,
        PlanError::TooComplex(_) => sqlstate::STATEMENT_TOO_COMPLEX,
        PlanError::UnknownRelation(_) => sqlstate::UNDEFINED_TABLE,
        PlanError::UnknownSchema(_) => sqlstate::INVALID_SCHEMA_NAME,
        PlanError::UnknownDatabase(_) => sqlstate::INVALID_CATALOG_NAME,
        PlanError::UnknownColumn(_) | PlanError::UnknownColumnOf { .. } => {
            sqlstate::UNDEFINED_COLUMN
        }
        PlanError::WrongObjectType { .. } | PlanError::NotWritable { .. } => {
            sqlstate::WRONG_OBJECT_TYPE
        }
        PlanError::DuplicateColumn(_) => sqlstate::DUPLICATE_COLUMN,
        PlanError::UnknownVariable(_) => sqlstate::UNDEFINED_OBJECT,
        PlanError::InvalidParameter(_) => sqlstate::INVALID_PARAMETER_VALUE,
        PlanError::InvalidDefinition(_) => sqlstate::INVALID_TABLE_DEFINITION,
        PlanError::DatatypeMismatch(_) => sqlstate::DATATYPE_MISMATCH,
        PlanError::Type(TypeError::UnknownType(_)) => sqlstate::UNDEFINED_OBJECT,
        PlanError::Type(TypeError::InvalidModifier(_)) => sqlstate::INVALID_PARAMETER_VALUE,
        PlanError::DataFusion(df) => return freshet_compute::sqlstate::datafusion_sqlstate(df),
        PlanError::Catalog(c) => catalog_code(c),
        PlanError::Internal(_) => sqlstate::INTERNAL_ERROR,
    };
    (code, e.to_string())
}

fn sink_code(e: &freshet_sinks::SinkError) -> &'static str {
    use freshet_sinks::SinkError;
    match e {
        SinkError::Encode(_) => sqlstate::FEATURE_NOT_SUPPORTED,
        SinkError::Target(_) => sqlstate::IO_ERROR,
        SinkError::Fatal(_) => sqlstate::INVALID_PARAMETER_VALUE,
        SinkError::Dataflow(_) | SinkError::Internal(_) => sqlstate::INTERNAL_ERROR,
    }
}

fn catalog_code(e: &CatalogError) -> &'static str {
    match e {
        CatalogError::UnknownDatabase(_) => sqlstate::INVALID_CATALOG_NAME,
        CatalogError::UnknownSchema(_) => sqlstate::INVALID_SCHEMA_NAME,
        CatalogError::UnknownItem { .. } | CatalogError::UnknownId(_) => sqlstate::UNDEFINED_TABLE,
        CatalogError::AlreadyExists {
            kind: "database", ..
        } => sqlstate::DUPLICATE_DATABASE,
        CatalogError::AlreadyExists { kind: "schema", .. } => sqlstate::DUPLICATE_SCHEMA,
        CatalogError::AlreadyExists { .. } => sqlstate::DUPLICATE_TABLE,
        CatalogError::DependentObjects { .. } | CatalogError::MaintainedDependent { .. } => {
            sqlstate::DEPENDENT_OBJECTS_STILL_EXIST
        }
        CatalogError::InvalidDefinition(_) => sqlstate::INVALID_TABLE_DEFINITION,
        CatalogError::SystemObject(_) => sqlstate::INSUFFICIENT_PRIVILEGE,
        CatalogError::Storage(s) => storage_code(s),
        CatalogError::Corruption(_) => sqlstate::DATA_CORRUPTED,
    }
}

fn storage_code(e: &StorageError) -> &'static str {
    match e {
        StorageError::Fenced { .. } | StorageError::ShutDown => sqlstate::ADMIN_SHUTDOWN,
        StorageError::InvalidReadTime { .. } => sqlstate::DATA_EXCEPTION,
        StorageError::Corruption(_) => sqlstate::DATA_CORRUPTED,
        StorageError::Io(_) => sqlstate::IO_ERROR,
        _ => sqlstate::INTERNAL_ERROR,
    }
}

/// The message of a caught panic, when it carries one.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::error::ArrowError;

    #[test]
    fn maps_common_errors() {
        let e = AdapterError::DataFusion(DataFusionError::ArrowError(
            Box::new(ArrowError::DivideByZero),
            None,
        ));
        assert_eq!(
            e.code_and_message(),
            (sqlstate::DIVISION_BY_ZERO, "division by zero".into())
        );
        let e = AdapterError::DataFusion(freshet_planner::error::sqlstate_error(
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            "integer out of range",
        ));
        assert_eq!(e.code_and_message().0, sqlstate::NUMERIC_VALUE_OUT_OF_RANGE);
        let e = AdapterError::Plan(PlanError::UnknownRelation("t".into()));
        assert_eq!(
            e.code_and_message(),
            (
                sqlstate::UNDEFINED_TABLE,
                "relation \"t\" does not exist".into()
            )
        );
    }
}

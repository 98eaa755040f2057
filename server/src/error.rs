//! Every error a client can see, mapped once to a SQLSTATE.

use datafusion::arrow::error::ArrowError;
use datafusion::common::SchemaError;
use datafusion::error::DataFusionError;
use freshet_catalog::CatalogError;
use freshet_planner::{PlanError, SqlStateError};
use freshet_repr::TypeError;
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
    /// A statement that may not run inside a transaction block.
    #[error("{0} cannot run inside a transaction block")]
    InTransactionBlock(String),
    /// A transaction mixing what Freshet keeps apart.
    #[error("{0}")]
    InvalidTransactionState(String),
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
    /// A bug or unexpected state.
    #[error("internal error: {0}")]
    Internal(String),
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

    /// The SQLSTATE and message a client sees.
    pub fn code_and_message(&self) -> (&'static str, String) {
        match self {
            AdapterError::Plan(e) => plan_code(e),
            AdapterError::Catalog(e) => (catalog_code(e), e.to_string()),
            AdapterError::Storage(e) => (storage_code(e), e.to_string()),
            AdapterError::DataFusion(e) => datafusion_code(e),
            AdapterError::Data { code, message, .. } => (code, message.clone()),
            AdapterError::TransactionAborted => ("25P02", self.to_string()),
            AdapterError::InTransactionBlock(_) => ("25001", self.to_string()),
            AdapterError::InvalidTransactionState(_) => ("25000", self.to_string()),
            AdapterError::StatementTimeout | AdapterError::Canceled => ("57014", self.to_string()),
            AdapterError::InvalidParameterValue(_) => ("22023", self.to_string()),
            AdapterError::UnknownVariable(_) => ("42704", self.to_string()),
            AdapterError::ReadOnlyVariable(_) => ("55P02", self.to_string()),
            AdapterError::Unsupported(_) => ("0A000", self.to_string()),
            AdapterError::BadCopyData(_) => ("22P04", self.to_string()),
            AdapterError::Protocol(_) => ("08P01", self.to_string()),
            AdapterError::ConnectionClosed => ("08006", self.to_string()),
            AdapterError::Internal(_) => ("XX000", self.to_string()),
        }
    }

    fn detail(&self) -> Option<String> {
        match self {
            AdapterError::Data { detail, .. } => detail.clone(),
            AdapterError::Catalog(CatalogError::DependentObjects { detail, .. }) => {
                Some(detail.clone())
            }
            AdapterError::Plan(PlanError::Catalog(CatalogError::DependentObjects {
                detail,
                ..
            })) => Some(detail.clone()),
            _ => None,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            AdapterError::Catalog(CatalogError::DependentObjects { .. })
            | AdapterError::Plan(PlanError::Catalog(CatalogError::DependentObjects { .. })) => {
                Some("Use DROP ... CASCADE to drop the dependent objects too.".into())
            }
            _ => None,
        }
    }

    fn position(&self) -> Option<usize> {
        match self {
            AdapterError::Plan(PlanError::Parse { position, .. }) => *position,
            _ => None,
        }
    }

    /// Whether this error means a newer process took over.
    pub fn is_fenced(&self) -> bool {
        match self {
            AdapterError::Storage(e) => e.is_fenced(),
            AdapterError::Catalog(e) => e.is_fenced(),
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
                code: "XX000",
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

fn plan_code(e: &PlanError) -> (&'static str, String) {
    let code = match e {
        PlanError::Parse { .. } | PlanError::Syntax(_) => "42601",
        PlanError::Unsupported(_) => "0A000",
        PlanError::UnknownRelation(_) => "42P01",
        PlanError::UnknownSchema(_) => "3F000",
        PlanError::UnknownDatabase(_) => "3D000",
        PlanError::UnknownColumn(_) => "42703",
        PlanError::WrongObjectType { .. } => "42809",
        PlanError::DuplicateColumn(_) => "42701",
        PlanError::UnknownVariable(_) => "42704",
        PlanError::InvalidParameter(_) => "22023",
        PlanError::InvalidDefinition(_) => "42P16",
        PlanError::DatatypeMismatch(_) => "42804",
        PlanError::Type(TypeError::UnknownType(_)) => "42704",
        PlanError::Type(TypeError::InvalidModifier(_)) => "22023",
        PlanError::DataFusion(df) => return datafusion_code(df),
        PlanError::Catalog(c) => catalog_code(c),
        PlanError::Internal(_) => "XX000",
    };
    (code, e.to_string())
}

fn catalog_code(e: &CatalogError) -> &'static str {
    match e {
        CatalogError::UnknownDatabase(_) => "3D000",
        CatalogError::UnknownSchema(_) => "3F000",
        CatalogError::UnknownItem { .. } | CatalogError::UnknownId(_) => "42P01",
        CatalogError::AlreadyExists {
            kind: "database", ..
        } => "42P04",
        CatalogError::AlreadyExists { kind: "schema", .. } => "42P06",
        CatalogError::AlreadyExists { .. } => "42P07",
        CatalogError::DependentObjects { .. } => "2BP01",
        CatalogError::InvalidDefinition(_) => "42P16",
        CatalogError::SystemObject(_) => "42501",
        CatalogError::Storage(s) => storage_code(s),
        CatalogError::Corruption(_) => "XX001",
    }
}

fn storage_code(e: &StorageError) -> &'static str {
    match e {
        StorageError::Fenced { .. } | StorageError::ShutDown => "57P01",
        StorageError::InvalidReadTime { .. } => "22000",
        StorageError::Corruption(_) => "XX001",
        StorageError::Io(_) => "58030",
        _ => "XX000",
    }
}

/// Classify a DataFusion error as Postgres would report the same failure.
pub fn datafusion_code(e: &DataFusionError) -> (&'static str, String) {
    match e {
        DataFusionError::External(inner) => {
            if let Some(s) = inner.downcast_ref::<SqlStateError>() {
                return (s.code, s.message.clone());
            }
            if let Some(d) = inner.downcast_ref::<DataFusionError>() {
                return datafusion_code(d);
            }
            if let Some(a) = inner.downcast_ref::<ArrowError>() {
                return arrow_code(a);
            }
            ("XX000", inner.to_string())
        }
        DataFusionError::ArrowError(a, _) => arrow_code(a),
        DataFusionError::Context(_, inner) => datafusion_code(inner),
        DataFusionError::Diagnostic(_, inner) => datafusion_code(inner),
        DataFusionError::Shared(inner) => datafusion_code(inner),
        DataFusionError::Collection(errors) => errors
            .first()
            .map(datafusion_code)
            .unwrap_or(("XX000", "unknown error".into())),
        DataFusionError::SchemaError(s, _) => match s.as_ref() {
            SchemaError::FieldNotFound { field, .. } => {
                ("42703", format!("column \"{}\" does not exist", field.name))
            }
            SchemaError::AmbiguousReference { field } => (
                "42702",
                format!("column reference \"{}\" is ambiguous", field.name),
            ),
            SchemaError::DuplicateQualifiedField { .. }
            | SchemaError::DuplicateUnqualifiedField { .. } => ("42712", strip(&s.to_string())),
        },
        DataFusionError::NotImplemented(m) => ("0A000", format!("{} is not supported", strip(m))),
        DataFusionError::Plan(m) => {
            let m = strip(m);
            let code = if m.contains("does not exist") || m.contains("not found") {
                if m.starts_with("relation") || m.starts_with("table") {
                    "42P01"
                } else {
                    "42883"
                }
            } else if m.contains("Invalid function") || m.contains("No function matches") {
                "42883"
            } else if m.contains("coerc") || m.contains("Cannot infer") || m.contains("type") {
                "42804"
            } else if m.contains("must appear in the GROUP BY") || m.contains("GROUP BY") {
                "42803"
            } else {
                "42000"
            };
            (code, m)
        }
        DataFusionError::Execution(m) => {
            let m = strip(m);
            if m.contains("Divide by zero") || m.contains("divide by zero") {
                ("22012", "division by zero".into())
            } else if let Some(i) = m
                .find("Can't cast value")
                .or_else(|| m.find("Cannot cast string"))
            {
                cast_error(&m[i..])
            } else if m.to_lowercase().contains("cast") {
                cast_error(&m)
            } else {
                ("XX000", m)
            }
        }
        DataFusionError::ResourcesExhausted(m) => ("53200", strip(m)),
        other => ("XX000", strip(&other.to_string())),
    }
}

/// The Postgres name for an Arrow type named in an Arrow error message.
fn pg_type_name(arrow: &str) -> &str {
    match arrow.trim() {
        "Int16" => "smallint",
        "Int32" => "integer",
        "Int64" => "bigint",
        "Float32" => "real",
        "Float64" => "double precision",
        "Boolean" => "boolean",
        "Date32" => "date",
        t if t.starts_with("Decimal") => "numeric",
        t if t.starts_with("Timestamp") => "timestamp",
        t if t.starts_with("Time") => "time",
        t if t.starts_with("Interval") => "interval",
        other => other,
    }
}

/// Turn Arrow cast messages into Postgres's.
fn cast_error(m: &str) -> (&'static str, String) {
    // "Can't cast value 40000 to type Int16"
    if let Some(rest) = m.strip_prefix("Can't cast value ")
        && let Some((_, ty)) = rest.split_once(" to type ")
    {
        return ("22003", format!("{} out of range", pg_type_name(ty)));
    }
    // "Cannot cast string 'abc' to value of Int32 type"
    if let Some(rest) = m.strip_prefix("Cannot cast string '")
        && let Some((value, tail)) = rest.split_once("' to value of ")
    {
        let ty = tail.trim_end_matches(" type");
        return (
            "22P02",
            format!(
                "invalid input syntax for type {}: \"{value}\"",
                pg_type_name(ty)
            ),
        );
    }
    if m.contains("too large to store in a Decimal") || m.contains("Overflowing") {
        return ("22003", "numeric field overflow".into());
    }
    if m.contains("Overflow") || m.contains("out of range") {
        return ("22003", m.to_string());
    }
    ("22P02", m.to_string())
}

fn arrow_code(a: &ArrowError) -> (&'static str, String) {
    match a {
        ArrowError::DivideByZero => ("22012", "division by zero".into()),
        ArrowError::ArithmeticOverflow(_) => ("22003", "value out of range".into()),
        ArrowError::CastError(m) | ArrowError::ParseError(m) => cast_error(m),
        ArrowError::InvalidArgumentError(m) if m.contains("too large to store") => {
            ("22003", "numeric field overflow".into())
        }
        ArrowError::InvalidArgumentError(m) => ("22023", m.clone()),
        other => ("XX000", other.to_string()),
    }
}

/// Drop DataFusion's "Error during planning: " style prefixes.
fn strip(m: &str) -> String {
    let mut s = m.trim();
    for prefix in [
        "Error during planning: ",
        "Execution error: ",
        "This feature is not implemented: ",
        "Arrow error: ",
        "Schema error: ",
        "Invalid argument error: ",
        "Cast error: ",
    ] {
        if let Some(rest) = s.strip_prefix(prefix) {
            s = rest;
        }
    }
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_common_errors() {
        let e = AdapterError::DataFusion(DataFusionError::ArrowError(
            Box::new(ArrowError::DivideByZero),
            None,
        ));
        assert_eq!(e.code_and_message(), ("22012", "division by zero".into()));
        let e = AdapterError::DataFusion(freshet_planner::error::sqlstate_error(
            "22003",
            "integer out of range",
        ));
        assert_eq!(e.code_and_message().0, "22003");
        assert_eq!(
            cast_error("Can't cast value 40000 to type Int16"),
            ("22003", "smallint out of range".into())
        );
        assert_eq!(
            cast_error("Cannot cast string 'abc' to value of Int32 type"),
            (
                "22P02",
                "invalid input syntax for type integer: \"abc\"".into()
            )
        );
        assert_eq!(
            cast_error("123.40 is too large to store in a Decimal128 of precision 4. Max is 99.99")
                .0,
            "22003"
        );
        let e = AdapterError::Plan(PlanError::UnknownRelation("t".into()));
        assert_eq!(
            e.code_and_message(),
            ("42P01", "relation \"t\" does not exist".into())
        );
    }
}

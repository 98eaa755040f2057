//! Planning errors.

use datafusion::error::DataFusionError;
use freshet_catalog::CatalogError;
use freshet_repr::TypeError;

pub use freshet_repr::SqlStateError;

/// Raise a [`SqlStateError`] from inside DataFusion evaluation (carried as
/// `DataFusionError::External`), so that the server reports its SQLSTATE,
/// e.g. 22003 for integer overflow.
pub fn sqlstate_error(code: &'static str, message: impl Into<String>) -> DataFusionError {
    DataFusionError::External(Box::new(SqlStateError {
        code,
        message: message.into(),
    }))
}

/// Why a statement could not be planned.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The SQL does not parse.
    #[error("{message}")]
    Parse {
        /// Parser message.
        message: String,
        /// 1-based character position in the query, if known.
        position: Option<usize>,
        /// What the parser expected there, if it said.
        detail: Option<String>,
    },
    /// `$n` names a parameter that cannot exist (`$0`, or above
    /// [`crate::parser::complexity::MAX_PARAMETERS`]).
    #[error("there is no parameter ${0}")]
    UndefinedParameter(String),
    /// The statement nests expressions deeper than planning allows
    /// (PostgreSQL's "stack depth limit exceeded").
    #[error("{0}")]
    TooComplex(String),
    /// A syntax-level problem found after parsing.
    #[error("{0}")]
    Syntax(String),
    /// The construct is valid SQL that Freshet does not support.
    #[error("{0}")]
    Unsupported(String),
    /// No relation of that name.
    #[error("relation \"{0}\" does not exist")]
    UnknownRelation(String),
    /// No schema of that name.
    #[error("schema \"{0}\" does not exist")]
    UnknownSchema(String),
    /// No database of that name.
    #[error("database \"{0}\" does not exist")]
    UnknownDatabase(String),
    /// No column of that name.
    #[error("column \"{0}\" does not exist")]
    UnknownColumn(String),
    /// No column of that name in the relation named.
    #[error("column \"{column}\" of relation \"{relation}\" does not exist")]
    UnknownColumnOf {
        /// The column.
        column: String,
        /// The relation.
        relation: String,
    },
    /// The object exists but is of another kind.
    #[error("\"{name}\" is not {expected}")]
    WrongObjectType {
        /// The name.
        name: String,
        /// "a table", "a view", ...
        expected: &'static str,
    },
    /// A write to a relation that is not a table (a view, a source):
    /// PostgreSQL's `cannot insert into view "v"`.
    #[error("cannot {verb} {kind} \"{name}\"")]
    NotWritable {
        /// What the statement does (`insert into`, `delete from`, ...).
        verb: String,
        /// The relation's kind (`view`, `source`, ...).
        kind: &'static str,
        /// Its name.
        name: String,
    },
    /// A column is listed twice.
    #[error("column \"{0}\" specified more than once")]
    DuplicateColumn(String),
    /// Unknown session variable.
    #[error("unrecognized configuration parameter \"{0}\"")]
    UnknownVariable(String),
    /// A bad value for a parameter or option.
    #[error("{0}")]
    InvalidParameter(String),
    /// A definition that Postgres would also refuse.
    #[error("{0}")]
    InvalidDefinition(String),
    /// Types that do not fit together.
    #[error("{0}")]
    DatatypeMismatch(String),
    /// A type name or modifier problem.
    #[error(transparent)]
    Type(#[from] TypeError),
    /// From DataFusion's planner or optimizer.
    #[error(transparent)]
    DataFusion(#[from] DataFusionError),
    /// From the catalog.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A bug.
    #[error("internal error: {0}")]
    Internal(String),
}

impl PlanError {
    /// "X is not supported" (SQLSTATE 0A000).
    pub fn unsupported(what: impl std::fmt::Display) -> Self {
        PlanError::Unsupported(format!("{what} is not supported"))
    }
}

/// Result alias for planning.
pub type Result<T, E = PlanError> = std::result::Result<T, E>;

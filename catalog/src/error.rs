use freshet_repr::GlobalId;

/// Why a catalog transaction or lookup failed.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A database of that name does not exist.
    #[error("database \"{0}\" does not exist")]
    UnknownDatabase(String),
    /// A schema of that name does not exist.
    #[error("schema \"{0}\" does not exist")]
    UnknownSchema(String),
    /// No item of that name exists.
    #[error("{kind} \"{name}\" does not exist")]
    UnknownItem {
        /// What was looked for ("relation", "view", ...).
        kind: String,
        /// The name as written.
        name: String,
    },
    /// The id names no object (a concurrent DDL removed it).
    #[error("catalog object {0} does not exist")]
    UnknownId(GlobalId),
    /// The name is taken.
    #[error("{kind} \"{name}\" already exists")]
    AlreadyExists {
        /// "database", "schema" or "relation".
        kind: &'static str,
        /// The name.
        name: String,
    },
    /// Something depends on an object being dropped without CASCADE.
    #[error("cannot drop {what} because other objects depend on it")]
    DependentObjects {
        /// Description of the object.
        what: String,
        /// One line per dependent, like Postgres's DETAIL.
        detail: String,
    },
    /// `CREATE OR REPLACE` of an object a materialized view or index is
    /// maintained from: they keep the definition they were created with.
    #[error("cannot replace {what} because {dependent} is maintained from it")]
    MaintainedDependent {
        /// The object being replaced.
        what: String,
        /// The materialized view or index reading it.
        dependent: String,
    },
    /// A definition is invalid for the catalog (e.g. a view lost columns).
    #[error("{0}")]
    InvalidDefinition(String),
    /// The object is built in and cannot be changed.
    #[error("{0} is a system object and cannot be modified")]
    SystemObject(String),
    /// Reading or writing the durable log failed.
    #[error(transparent)]
    Storage(#[from] freshet_storage::StorageError),
    /// The durable log holds something unreadable.
    #[error("catalog corruption: {0}")]
    Corruption(String),
}

impl CatalogError {
    /// Whether the failure means this process was fenced.
    pub fn is_fenced(&self) -> bool {
        matches!(self, CatalogError::Storage(e) if e.is_fenced())
    }
}

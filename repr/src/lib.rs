//! Types shared by every Freshet crate.
//!
//! `repr` sits at the bottom of the dependency graph: storage, catalog, planner,
//! compute and server all speak in terms of [`GlobalId`], [`Timestamp`],
//! [`PgType`] and [`RelationDesc`], so none of them has to depend on another
//! merely to name a collection or a column type.

pub mod array_text;
mod error;
mod frontier;
mod id;
pub mod jsonb;
pub mod refresh;
mod relation;
pub mod sqlstate;
mod types;

pub use error::SqlStateError;
pub use frontier::Frontier;
pub use id::GlobalId;
pub use refresh::{RefreshEvery, RefreshSchedule};
pub use relation::{ColumnDesc, RelationDesc, nullable_schema};
pub use types::{PG_TYPE_METADATA_KEY, PgType, TypeError, UNCONSTRAINED_NUMERIC, UTC_TZ};

/// A point in logical time: milliseconds handed out by the timestamp oracle.
pub type Timestamp = u64;

/// A change in multiplicity of a row at a time.
pub type Diff = i64;

/// Name of the column that carries an update's time in storage batches.
pub const TIME_COLUMN: &str = "_freshet_time";
/// Name of the column that carries an update's diff in storage batches.
pub const DIFF_COLUMN: &str = "_freshet_diff";

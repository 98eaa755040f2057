//! Planning for Freshet: SQL text to statement plans.
//!
//! The planner is layered; each layer uses only the ones listed before it:
//!
//! 1. [`parser`]: SQL text to [`parser::Statement`]s (sqlparser's Postgres
//!    dialect plus Freshet's statements, dispatched on the leading keyword).
//! 2. [`pg`], [`builtins`], [`udf`], [`interrupt`]: Postgres types, column
//!    naming and text input; the built-in relations; function helpers;
//!    stopping planning nobody waits for.
//! 3. [`rewrites`]: the Postgres rewrites, one rule per file.
//! 4. [`query`]: name resolution and DataFusion planning over the catalog.
//! 5. [`plan`]: what a statement plans to (the payload types).
//! 6. [`lower`]: optimized DataFusion plans to compute's dataflow IR.
//! 7. [`statements`]: one file per statement family, turning parsed
//!    statements into [`Plan`]s.

pub mod builtins;
pub mod decorrelate;
pub mod error;
pub mod error_position;
pub mod interrupt;
pub mod lower;
pub mod parser;
pub mod pg;
pub mod plan;
pub mod query;
pub mod rewrites;
pub mod statements;
pub mod udf;

pub use error::{PlanError, Result, SqlStateError};
pub use plan::{
    CopyFormat, CopyFromPlan, CopyOptions, CreateIndexPlan, CreateMaterializedViewPlan,
    ExplainDataflowPlan, ExplainKind, ItemDataflow, KeyedWrite, PeekFinish, PeekLookup, Plan,
    QueryPlan, SetValue, WriteKind, WritePlan,
};
pub use query::binding::{CollectionReader, QueryBinding, ReadContext};
pub use query::resolve::SessionInfo;
pub use statements::context::StatementContext;
pub use statements::plan_statement;

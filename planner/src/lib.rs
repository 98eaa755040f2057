//! Planning for Freshet: SQL text to statement plans.
//!
//! Statements are parsed with sqlparser ([`parse`]), their relation names
//! resolved to catalog ids ([`resolve`]), and queries planned by DataFusion
//! over [`provider::PlanningContext`] with a Postgres type layer
//! ([`freshet_repr::PgType`], [`rules`]).

pub mod checked_arithmetic;
pub mod complexity;
pub mod engine;
pub mod error;
mod expr_rewrite;
pub mod functions;
pub mod index;
pub mod interrupt;
pub mod literal_sets;
pub mod long_chains;
pub mod lower;
pub mod materialized;
pub mod parse;
pub mod parse_options;
mod parse_subscribe;
pub mod pgsql;
pub mod pgtext;
pub mod plan_codec;
pub mod provider;
pub mod resolve;
pub mod rules;
pub mod scalar_subquery;
pub mod set_all;
pub mod system;
pub mod types;
pub mod udf;
pub mod written_plan;

pub use error::{PlanError, Result, SqlStateError};
pub use provider::{CollectionReader, QueryBinding, ReadContext};
pub use resolve::SessionInfo;
pub mod ddl;
pub mod dml;
pub mod misc;
pub mod naming;
pub mod options;
pub mod plan;
pub mod query;
pub mod statement;
pub mod subscribe;

pub use plan::{
    CopyFormat, CopyFromPlan, CopyOptions, CreateIndexPlan, CreateMaterializedViewPlan,
    ExplainDataflowPlan, ExplainKind, ItemDataflow, Plan, QueryPlan, SetValue, WriteKind,
    WritePlan,
};
pub use query::StatementContext;
pub use statement::plan_statement;

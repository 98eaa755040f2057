//! The contract between the planner and compute: the dataflow plan IR
//! ([`RelPlan`], [`DataflowDesc`]) and its wire form ([`PlanCodec`]).
//!
//! It lives apart from the renderer so the planner can lower and encode
//! plans without linking timely or differential dataflow, and so the
//! catalog's written plans name one format both sides share.

pub mod error;
mod plan;
pub mod wire;

pub use error::WireError;
pub use plan::{DataflowDesc, Export, JoinKind, RelPlan, TimeBound, TimeOp};
pub use wire::{PlanCodec, format_version};

//! Incremental maintenance of materialized views on differential dataflow.
//!
//! The planner lowers a view's DataFusion plan to a [`RelPlan`]; the
//! [`ComputeController`] renders it on timely workers, reading inputs only
//! through storage's `snapshot` + `listen`, and writes the output to the
//! view's shard through a self-correcting sink. Scalar expressions and
//! aggregates are evaluated by DataFusion over Arrow batches of updates,
//! so a view computes exactly what its query computes ad hoc.

mod arrangements;
pub mod controller;
pub mod error;
pub mod output;
mod protocol;
mod render;
pub mod row;
pub mod sqlstate;
pub mod state;
pub mod subscribe;
mod subscribe_queue;
mod worker;

pub use controller::ComputeController;
pub use error::{ComputeError, DataflowError};
pub use row::{Row, RowCodec};
pub use state::{DataflowState, IndexHold};
pub use subscribe::{SubscribeBatch, Subscription};

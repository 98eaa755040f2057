//! How dataflow plans name the functions the planner creates without
//! registering them, so a plan's wire form decodes anywhere.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::TableReference;
use datafusion::common::{Result, not_impl_err};
use datafusion::datasource::TableProvider;
use datafusion::execution::{SessionState, TaskContext};
use datafusion::logical_expr::{Extension, LogicalPlan, ScalarUDF};
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use freshet_compute_types::PlanCodec;

/// The codec for plans planned in `state`: functions resolve in its
/// registry, then in [`FreshetExtensions`].
pub fn plan_codec(state: &SessionState) -> PlanCodec {
    PlanCodec::new(state.task_ctx(), Arc::new(FreshetExtensions))
}

/// Resolves the functions the planner creates for its own rewrites (which
/// users cannot call, so they are not in the session's registry).
#[derive(Debug, Default)]
pub struct FreshetExtensions;

impl LogicalExtensionCodec for FreshetExtensions {
    fn try_decode(
        &self,
        _buf: &[u8],
        _inputs: &[LogicalPlan],
        _ctx: &TaskContext,
    ) -> Result<Extension> {
        not_impl_err!("Freshet plans have no extension nodes")
    }

    fn try_encode(&self, _node: &Extension, _buf: &mut Vec<u8>) -> Result<()> {
        not_impl_err!("Freshet plans have no extension nodes")
    }

    fn try_decode_table_provider(
        &self,
        _buf: &[u8],
        _table_ref: &TableReference,
        _schema: SchemaRef,
        _ctx: &TaskContext,
    ) -> Result<Arc<dyn TableProvider>> {
        not_impl_err!("dataflow plans read collections by id, not tables")
    }

    fn try_encode_table_provider(
        &self,
        _table_ref: &TableReference,
        _node: Arc<dyn TableProvider>,
        _buf: &mut Vec<u8>,
    ) -> Result<()> {
        not_impl_err!("dataflow plans read collections by id, not tables")
    }

    fn try_decode_udf(&self, name: &str, _buf: &[u8]) -> Result<Arc<ScalarUDF>> {
        match name {
            crate::lower::scalar_subquery::SINGLE_ROW => {
                Ok(crate::lower::scalar_subquery::single_row_udf())
            }
            _ => not_impl_err!("unknown function {name} in a dataflow plan"),
        }
    }
}

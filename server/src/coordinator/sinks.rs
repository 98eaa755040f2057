//! Sinks: `CREATE SINK` (choose the time the input is first read at,
//! hold it there, commit), and starting a sink's export when its catalog
//! item is applied — at creation and at every boot.

use std::sync::Arc;

use datafusion::execution::SessionState;
use freshet_catalog::{CatalogState, ItemDetails, Op, SinkConnector};
use freshet_compute::ComputeController;
use freshet_compute_types::{DataflowDesc, Export};
use freshet_planner::statements::sink::{CreateSinkPlan, sink_dataflow, target_desc};
use freshet_repr::{GlobalId, Timestamp};
use freshet_sinks::{DataflowStarter, SinkEndpoint, SinkError, SinkTarget, Started};
use freshet_storage::Storage;

use super::{Coordinator, ExecCtx, ExecuteResponse};
use crate::error::{AdapterError, Result};
use crate::session::{Session, TxnStatus};
use crate::vars::MAX_SUBSCRIBE_BUFFER_LIMIT;

impl Coordinator {
    /// `CREATE SINK`: check the target, choose the time the input is
    /// first read at (the read time now), hold the inputs there, and
    /// commit the sink with that `as_of`; applying the commit starts it.
    pub(super) async fn create_sink(
        &self,
        session: &Session,
        tag: String,
        plan: CreateSinkPlan,
        ctx: &mut ExecCtx,
    ) -> Result<ExecuteResponse> {
        if session.status != TxnStatus::Idle {
            // As in Materialize: a sink starts exporting when it is
            // created, which a block could not undo.
            return Err(AdapterError::InTransactionBlock(tag));
        }
        let CreateSinkPlan {
            mut def,
            if_not_exists,
            inputs,
        } = plan;
        if if_not_exists
            && self
                .catalog_state()
                .item_by_name(def.schema_id, &def.name)
                .is_some()
        {
            ctx.notice(format!("sink \"{}\" already exists, skipping", def.name));
            return Ok(ExecuteResponse::Command(tag));
        }
        let ItemDetails::Sink(details) = &mut def.details else {
            return Err(AdapterError::Internal("a sink without sink details".into()));
        };
        let schema = target_desc(details).arrow_schema();
        let endpoint = sink_endpoint(&self.catalog_state(), &details.connector)?;
        match (&details.connector, &endpoint) {
            (SinkConnector::Files(spec), _) => freshet_sinks::check_target(spec, &schema).await?,
            (SinkConnector::Kafka(spec), SinkEndpoint::Kafka(brokers)) => {
                freshet_sinks::kafka::check_target(spec, brokers).await?
            }
            (SinkConnector::Postgres(spec), SinkEndpoint::Postgres(config)) => {
                freshet_sinks::postgres::check_target(details, spec, config).await?
            }
            _ => {
                return Err(AdapterError::Internal(
                    "a sink's endpoint does not match its target".into(),
                ));
            }
        }
        let (as_of, holds) = self.choose_as_of(&inputs)?;
        details.as_of = as_of;
        self.transact_holding(vec![Op::CreateItem(def)], holds, None)
            .await?;
        Ok(ExecuteResponse::Command(tag))
    }

    /// Start sink `id`'s export: admit its claim on its inputs' history
    /// (from its `as_of` until it reports its target's progress), then
    /// hand it to the sinks runtime, which reads the target's progress and
    /// starts the dataflow from there.
    pub(super) fn start_sink(&self, id: GlobalId) -> Result<()> {
        let catalog = self.catalog_state();
        let item = catalog.get_item(id)?;
        let details = item
            .sink_details()
            .ok_or_else(|| AdapterError::Internal(format!("{id} is not a sink")))?;
        self.storage
            .admit_dependent(id, details.as_of, catalog.collections_behind(id));
        let endpoint = sink_endpoint(&catalog, &details.connector)?;
        let target = SinkTarget {
            id,
            details: details.clone(),
            schema: target_desc(details).arrow_schema(),
            endpoint,
        };
        let starter = SinkStarter {
            id,
            catalog: Arc::clone(&catalog),
            base_df: self.base_df.clone(),
            storage: Arc::clone(&self.storage),
            compute: Arc::clone(&self.compute),
        };
        self.sinks.start(target, Arc::new(starter));
        Ok(())
    }
}

/// How a sink with `connector` reaches its system: its connection
/// resolved now (a PostgreSQL password read from its secret).
fn sink_endpoint(catalog: &CatalogState, connector: &SinkConnector) -> Result<SinkEndpoint> {
    Ok(match connector {
        SinkConnector::Files(_) => SinkEndpoint::None,
        SinkConnector::Kafka(spec) => {
            SinkEndpoint::Kafka(super::connections::kafka_brokers(catalog, spec.connection)?)
        }
        SinkConnector::Postgres(spec) => {
            let e = super::connections::postgres_endpoint(catalog, spec.connection)?;
            SinkEndpoint::postgres(&e.host, e.port, &e.user, e.password.as_deref(), &e.database)
        }
    })
}

/// Starts a sink's dataflow, planned from the catalog as it was when the
/// sink was applied (nothing a sink reads can change while it exists:
/// changing it means dropping the sink).
struct SinkStarter {
    id: GlobalId,
    catalog: Arc<CatalogState>,
    base_df: SessionState,
    storage: Arc<Storage>,
    compute: Arc<ComputeController>,
}

impl DataflowStarter for SinkStarter {
    fn start(&self, as_of: Timestamp, snapshot: bool) -> freshet_sinks::Result<Started> {
        let dataflow = sink_dataflow(&self.base_df, &self.catalog, self.id)
            .map_err(|e| SinkError::Fatal(format!("cannot plan the sink's dataflow: {e}")))?;
        let hold = |purpose: &str| {
            dataflow
                .inputs
                .iter()
                .map(|input| {
                    self.storage.acquire_read_hold(*input, as_of).map_err(|e| {
                        SinkError::Dataflow(format!(
                            "cannot hold {input} at {as_of} for the sink's {purpose}: {e}"
                        ))
                    })
                })
                .collect::<freshet_sinks::Result<Vec<_>>>()
        };
        let holds = hold("progress")?;
        let dataflow_holds = hold("dataflow")?;
        let desc = DataflowDesc {
            id: self.id,
            plan: dataflow.plan,
            export: Export::Subscribe {
                snapshot,
                up_to: None,
            },
            as_of,
            start: as_of,
            refresh: None,
        };
        let subscription = self
            .compute
            .subscribe(
                desc,
                dataflow_holds,
                dataflow.from_storage,
                MAX_SUBSCRIBE_BUFFER_LIMIT,
            )
            .map_err(|e| SinkError::Dataflow(format!("cannot start the sink's dataflow: {e}")))?;
        Ok(Started {
            subscription,
            holds,
        })
    }
}

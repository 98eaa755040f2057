//! Applying what a committed catalog diff implies: storage collections,
//! dataflows (from their written plans) and read policies, in order. Boot
//! runs the same code over the whole catalog.

use freshet_catalog::{
    CatalogDiff, Implication, ItemDetails, ItemKind, Op, SourceConnector, SourceDetails,
    implications,
};
use freshet_compute_types::DataflowDesc;
use freshet_planner::ItemDataflow;
use freshet_planner::statements::written_plan;
use freshet_repr::GlobalId;
use freshet_sources::{IngestionTarget, OutputTarget};
use freshet_storage::{CollectionKind, ReadHold, ReadPolicy};

use super::Coordinator;
use super::ddl::Prepared;
use crate::error::{AdapterError, Result};

impl Coordinator {
    /// Commit the plans boot had to make again from SQL, with the notice
    /// saying why, so the next boot installs them as written and `EXPLAIN`
    /// shows that they were planned again. (The change implies nothing:
    /// the dataflows already run these plans.)
    pub(super) fn write_back_plans(&mut self) -> Result<()> {
        let plans = std::mem::take(&mut *self.replanned.lock());
        if plans.is_empty() {
            return Ok(());
        }
        let catalog = self.catalog.get_mut();
        let state = catalog.state();
        let ops: Vec<Op> = plans
            .into_iter()
            .filter_map(|(id, written)| {
                let item = state.item(id)?;
                Some(Op::UpdateDetails {
                    id,
                    details: freshet_planner::statements::written_plan::with_plan(
                        &item.details,
                        written,
                    ),
                })
            })
            .collect();
        let count = ops.len();
        let (diff, _) = catalog.transact(ops)?;
        *self.state.write() = catalog.state();
        self.apply(&diff, Vec::new(), Prepared::new(), true)?;
        tracing::info!(count, "wrote back plans made again at boot");
        Ok(())
    }

    /// Apply what a committed diff implies, in order. `holds` protect the
    /// inputs of dataflows the diff installs at their chosen `as_of`; at
    /// boot (`booting`) a dataflow that cannot be installed is logged and
    /// skipped rather than keeping the server down.
    ///
    /// A dataflow in `prepared` installs as given (the written plan its
    /// transaction committed, decoded); any other is read from its item's
    /// written plan.
    pub(super) fn apply(
        &self,
        diff: &CatalogDiff,
        mut holds: Vec<ReadHold>,
        mut prepared: Prepared,
        booting: bool,
    ) -> Result<()> {
        for imp in implications(diff) {
            tracing::debug!(?imp, "applying implication");
            match imp {
                Implication::CreateTableCollection { id, desc } => self.storage.create_collection(
                    id,
                    desc.arrow_schema(),
                    CollectionKind::Table,
                )?,
                Implication::CreateMaterializedCollection { id, desc } => {
                    self.storage.create_collection(
                        id,
                        freshet_compute::output::shard_schema(&desc.arrow_schema()),
                        CollectionKind::Materialized,
                    )?
                }
                Implication::DropCollection(id) => {
                    self.storage.drop_collection(id)?;
                    self.table_locks.lock().remove(&id);
                    self.keys.forget(id);
                    self.keyed_rows.forget(id);
                }
                Implication::InitReadPolicy(id) => self.init_read_policy(id)?,
                Implication::InstallDataflow(id) => {
                    if let Err(e) =
                        self.install_dataflow(id, &mut holds, prepared.remove(&id), booting)
                    {
                        if !booting {
                            return Err(e);
                        }
                        tracing::error!(dataflow = %id, error = %e, "cannot install dataflow at boot; reads of it will fail");
                    }
                }
                Implication::DropDataflow(id) => self.compute.drop_dataflow(id)?,
                Implication::StartIngestion(id) => {
                    if let Err(e) = self.start_ingestion(id) {
                        if !booting {
                            return Err(e);
                        }
                        tracing::error!(source = %id, error = %e, "cannot start ingestion at boot; the source stays as it is");
                    }
                }
                Implication::StopIngestion(id) => self.sources.stop(id),
                Implication::ExportSink(id) => {
                    if let Err(e) = self.start_sink(id) {
                        if !booting {
                            return Err(e);
                        }
                        tracing::error!(sink = %id, error = %e, "cannot start sink at boot");
                    }
                }
                Implication::DropSinkExport(id) => self.sinks.stop(id),
            }
        }
        Ok(())
    }

    /// Start the ingestion of source `id`, writing the collections of
    /// its group: its own (a single-output source), its subsources', its
    /// progress relation's.
    fn start_ingestion(&self, id: GlobalId) -> Result<()> {
        let catalog = self.catalog_state();
        let item = catalog.get_item(id)?;
        let Some(SourceDetails::Ingestion(ingestion)) = item.source_details() else {
            return Err(AdapterError::Internal(format!("{id} is not a source")));
        };
        let target = |upstream: &str, part: &freshet_catalog::Item| OutputTarget {
            upstream: upstream.to_string(),
            id: part.id,
            schema: part.desc.clone().unwrap_or_default().arrow_schema(),
        };
        // What the catalog holds says where everything goes (the
        // connector is not asked again: an upstream may be unreachable).
        let parts = catalog.source_parts(id);
        let mut outputs: Vec<OutputTarget> = parts
            .iter()
            .filter_map(|p| match p.source_details() {
                Some(SourceDetails::Output { upstream, .. }) => Some(target(upstream, p)),
                _ => None,
            })
            .collect();
        if item.has_collection() {
            // A single-relation source writes its rows itself.
            outputs.push(target("", item));
        }
        let progress = parts
            .iter()
            .find(|p| matches!(p.source_details(), Some(SourceDetails::Progress { .. })))
            .ok_or_else(|| {
                AdapterError::Internal(format!("source {id} has no progress relation"))
            })?;
        let postgres = match &ingestion.connector {
            SourceConnector::Postgres(spec) => Some(super::connections::postgres_endpoint(
                &catalog,
                spec.connection,
            )?),
            _ => None,
        };
        let kafka = match &ingestion.connector {
            SourceConnector::Kafka(spec) => Some(super::connections::kafka_brokers(
                &catalog,
                spec.connection,
            )?),
            _ => None,
        };
        self.sources.start(IngestionTarget {
            source: id,
            ingestion: ingestion.as_ref().clone(),
            outputs,
            progress: target("progress", progress),
            postgres,
            kafka,
        })?;
        Ok(())
    }

    /// Apply an item's options to how its history is kept: `RETAIN
    /// HISTORY` (or the default) for a collection's since or an index's
    /// trace, and, for a scheduled view, no reads before its first refresh.
    pub(super) fn init_read_policy(&self, id: GlobalId) -> Result<()> {
        let catalog = self.catalog_state();
        let item = catalog.get_item(id)?;
        let ReadPolicy::LagBehindUpper(default_lag) = ReadPolicy::default();
        let lag = item.options.retain_history.unwrap_or(default_lag);
        if item.kind == ItemKind::Index {
            if let Some(d) = self.compute.dataflow(id) {
                d.set_history(lag);
            }
            return Ok(());
        }
        self.storage
            .set_read_policy(id, ReadPolicy::LagBehindUpper(lag))?;
        if let (Some(schedule), ItemDetails::MaterializedView { as_of: Some(t), .. }) =
            (&item.options.refresh, &item.details)
            && let Some(first) = schedule.round_up(*t)
        {
            self.storage.raise_since(id, first)?;
        }
        Ok(())
    }

    /// Install the dataflow of `id`: `prepared` (its just-committed written
    /// plan, decoded) or else the written plan in its catalog entry, handing
    /// it the holds taken for its inputs (if any). A plan boot (`booting`)
    /// has to make again is queued to be written back.
    fn install_dataflow(
        &self,
        id: GlobalId,
        holds: &mut Vec<ReadHold>,
        prepared: Option<ItemDataflow>,
        booting: bool,
    ) -> Result<()> {
        let catalog = self.catalog_state();
        let item = catalog.get_item(id)?;
        // A materialized view's claim on its inputs' history is admitted
        // before anything else can fail: even a view that cannot be
        // planned at boot keeps its inputs resumable.
        if let ItemDetails::MaterializedView { as_of: Some(t), .. } = &item.details {
            self.storage
                .admit_dependent(id, *t, catalog.collections_behind(id));
        }
        // Boot installs the plan committed with the item; only a plan of
        // another format is planned again from the SQL.
        let (dataflow, replanned) = match prepared {
            Some(dataflow) => (dataflow, None),
            None => written_plan::read_or_plan(&self.base_df, &catalog, id)?,
        };
        if let Some(notice) = replanned {
            tracing::warn!(dataflow = %id, "{notice}");
            if booting {
                let written = written_plan::write(&self.base_df, id, &dataflow)?;
                self.replanned.lock().push((id, written));
            }
        }
        let ItemDataflow {
            plan,
            export,
            from_storage,
            ..
        } = dataflow;
        let as_of = match &item.details {
            ItemDetails::MaterializedView { as_of: Some(t), .. } => *t,
            _ => self.storage.read_ts(),
        };
        let inputs = plan.inputs();
        let (mine, rest): (Vec<ReadHold>, Vec<ReadHold>) = std::mem::take(holds)
            .into_iter()
            .partition(|h| inputs.contains(&h.id()));
        *holds = rest;
        self.compute.install(
            DataflowDesc {
                id,
                export,
                plan,
                as_of,
                start: as_of,
                refresh: item.options.refresh.clone(),
            },
            mine,
            from_storage,
        )?;
        Ok(())
    }
}

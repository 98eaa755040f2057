//! DDL: committing a catalog transaction (with the written plans of the
//! dataflows it creates) and answering `IF NOT EXISTS`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use freshet_catalog::{CatalogError, ItemDetails, ItemKind, Op};

use freshet_compute::ComputeController;
use freshet_compute_types::DataflowDesc;
use freshet_planner::statements::written_plan;
use freshet_planner::{CreateMaterializedViewPlan, ItemDataflow};
use freshet_repr::GlobalId;
use freshet_storage::ReadHold;

use super::{Coordinator, ExecCtx, ExecuteResponse};
use crate::error::{AdapterError, Result};
use crate::session::{DdlStep, PendingDdl, Session, TxnStatus};

impl Coordinator {
    /// Commit a catalog transaction and apply its implications, handing
    /// `holds` to the dataflows it installs; `dataflow` is the plan of the
    /// materialized view or index it creates, if it creates one.
    pub(super) async fn transact_holding(
        &self,
        ops: Vec<Op>,
        holds: Vec<ReadHold>,
        dataflow: Option<ItemDataflow>,
    ) -> Result<Vec<GlobalId>> {
        let catalog = self.catalog.lock().await;
        let mut dataflows = Prepared::new();
        if let Some(dataflow) = dataflow {
            let (next, created) = catalog.preview(ops.clone())?;
            if let Some(id) = dataflow_object(&next, &created) {
                dataflows.insert(id, dataflow);
            }
        }
        self.transact_locked(catalog, ops, holds, dataflows)
    }

    /// [`transact_holding`](Self::transact_holding) with the catalog
    /// locked and the dataflows of the objects created given by id.
    pub(super) fn transact_locked(
        &self,
        mut catalog: tokio::sync::MutexGuard<'_, freshet_catalog::Catalog>,
        ops: Vec<Op>,
        holds: Vec<ReadHold>,
        dataflows: Prepared,
    ) -> Result<Vec<GlobalId>> {
        let before = self.catalog_state();
        let (ops, prepared) = self.with_written_plans(&catalog, ops, dataflows)?;
        let (diff, ids) = catalog.transact(ops)?;
        *self.state.write() = catalog.state();
        // Subscribes reading a dropped object end before its collection
        // goes away (which they could not tell from completion).
        let removed: Vec<GlobalId> = diff
            .changes
            .iter()
            .filter_map(|c| match c {
                freshet_catalog::Change::Removed(o) => Some(o.id()),
                _ => None,
            })
            .collect();
        if !removed.is_empty() {
            self.subscribes.end_dependents(&removed, |id| {
                before
                    .full_name(id)
                    .map(|(d, s, i)| format!("\"{d}.{s}.{i}\""))
                    .unwrap_or_else(|| id.to_string())
            });
        }
        if let Err(e) = self.apply(&diff, holds, prepared, false) {
            tracing::error!(error = %e, "applying a committed catalog change failed; it will be retried at boot");
            return Err(e);
        }
        Ok(ids)
    }

    /// `ops` plus the written plans of the materialized views and indexes
    /// they create, so the plans commit in the same transaction as their
    /// objects; and, by id, the dataflows to install, which are the written
    /// plans decoded (what runs is exactly what the catalog holds).
    ///
    /// The plans are `planned`, made once by the statements' planning, by
    /// the id of the object each is for; each must render before it is
    /// committed.
    fn with_written_plans(
        &self,
        catalog: &freshet_catalog::Catalog,
        ops: Vec<Op>,
        mut planned: Prepared,
    ) -> Result<(Vec<Op>, Prepared)> {
        let creates = ops.iter().any(|op| {
            matches!(op, Op::CreateItem(def)
                if matches!(def.kind, ItemKind::MaterializedView | ItemKind::Index))
        });
        if !creates {
            return Ok((ops, Prepared::new()));
        }
        let (next, created) = catalog.preview(ops.clone())?;
        let mut ops = ops;
        let mut prepared = Prepared::new();
        for id in created {
            let Some(item) = next.item(id) else { continue };
            if !matches!(item.kind, ItemKind::MaterializedView | ItemKind::Index) {
                continue;
            }
            // The statement that creates a view or index planned its
            // dataflow; there is no second way to plan one here.
            let dataflow = planned.remove(&id).ok_or_else(|| {
                AdapterError::Internal(format!("{id} is created without a dataflow plan"))
            })?;
            let written = written_plan::write(&self.base_df, id, &dataflow)?;
            let installed = written_plan::decode(&self.base_df, &written).map_err(|e| {
                AdapterError::Internal(format!("the plan written for {id} does not read back: {e}"))
            })?;
            validate(id, &installed)?;
            ops.push(Op::UpdateDetails {
                id,
                details: written_plan::with_plan(&item.details, written),
            });
            prepared.insert(id, installed);
        }
        Ok((ops, prepared))
    }

    /// Run a DDL statement's catalog transaction, answering `IF NOT
    /// EXISTS` with a notice. In a transaction block the statement joins
    /// the block's DDL, committed at COMMIT.
    pub(super) async fn ddl(
        &self,
        session: &mut Session,
        ddl: Ddl,
        ctx: &mut ExecCtx,
    ) -> Result<ExecuteResponse> {
        if session.status == TxnStatus::InBlock {
            return self.ddl_in_block(session, ddl, ctx).await;
        }
        let Ddl {
            tag,
            ops,
            holds,
            dataflow,
            if_not_exists,
        } = ddl;
        match self.transact_holding(ops, holds, dataflow).await {
            Ok(_) => Ok(ExecuteResponse::Command(tag)),
            Err(AdapterError::Catalog(CatalogError::AlreadyExists { .. }))
                if let Some(IfNotExists { name, kind }) = if_not_exists =>
            {
                ctx.notice(format!("{kind} \"{name}\" already exists, skipping"));
                Ok(ExecuteResponse::Command(tag))
            }
            Err(e) => Err(e),
        }
    }

    /// A DDL statement inside a transaction block: checked against the
    /// catalog as the block has changed it so far (so a name clash or a
    /// missing object fails here, as in PostgreSQL) and kept for COMMIT.
    async fn ddl_in_block(
        &self,
        session: &mut Session,
        ddl: Ddl,
        ctx: &mut ExecCtx,
    ) -> Result<ExecuteResponse> {
        let Ddl {
            tag,
            ops,
            holds,
            dataflow,
            if_not_exists,
        } = ddl;
        let mut catalog = self.catalog.lock().await;
        let current = catalog.state();
        let pending = session.txn.ddl.get_or_insert_with(|| PendingDdl {
            base: Arc::clone(&current),
            steps: Vec::new(),
        });
        // Checked against the catalog as the block sees it; other
        // sessions' changes meanwhile are checked at COMMIT.
        let (state, created, ops) = match catalog.preview_step(&pending.state(), ops) {
            Ok(preview) => preview,
            Err(CatalogError::AlreadyExists { .. })
                if let Some(IfNotExists { name, kind }) = if_not_exists =>
            {
                ctx.notice(format!("{kind} \"{name}\" already exists, skipping"));
                return Ok(ExecuteResponse::Command(tag));
            }
            Err(e) => return Err(e.into()),
        };
        let dataflow = match dataflow {
            Some(dataflow) => {
                let id = dataflow_object(&state, &created).ok_or_else(|| {
                    AdapterError::Internal("a dataflow without the object it is for".into())
                })?;
                Some((id, dataflow))
            }
            None => None,
        };
        pending.steps.push(DdlStep {
            ops,
            holds,
            dataflow,
            state: Arc::new(state),
            created,
        });
        Ok(ExecuteResponse::Command(tag))
    }

    /// `CREATE TABLE name AS query`: the query runs first (at the time any
    /// read would use, in a block the block's), then the table is created
    /// and the rows written. Outside a block these are two commits; if the
    /// rows fail to commit, the table is dropped again.
    pub(super) async fn create_table_as(
        &self,
        session: &mut Session,
        def: freshet_catalog::ItemDef,
        query: freshet_planner::QueryPlan,
        if_not_exists: bool,
        ctx: &mut ExecCtx,
    ) -> Result<ExecuteResponse> {
        let name = def.name.clone();
        let desc = def.desc.clone().unwrap_or_default();
        let rows = self.read(session, &query).await?;
        let ddl = Ddl::new("CREATE TABLE", vec![Op::CreateItem(def)]).if_not_exists(
            if_not_exists,
            &name,
            "relation",
        );
        let count = |rows: &[arrow::array::RecordBatch]| -> usize {
            rows.iter().map(|b| b.num_rows()).sum()
        };
        if session.status == TxnStatus::InBlock {
            let steps = session.txn.ddl.as_ref().map_or(0, |d| d.steps.len());
            let response = self.ddl_in_block(session, ddl, ctx).await?;
            let created = session
                .txn
                .ddl
                .as_ref()
                .filter(|d| d.steps.len() > steps)
                .and_then(|d| d.steps.last())
                .and_then(|s| s.created.first().copied());
            let Some(id) = created else {
                return Ok(response); // IF NOT EXISTS, and it existed
            };
            let rows = self.table_rows(id, &desc, rows)?;
            let n = count(&rows);
            session
                .txn
                .writes
                .extend(super::write::table_writes(id, &rows, 1)?);
            return Ok(ExecuteResponse::Command(format!("SELECT {n}")));
        }
        let ids = match self.transact_holding(ddl.ops, Vec::new(), None).await {
            Ok(ids) => ids,
            Err(AdapterError::Catalog(CatalogError::AlreadyExists { .. })) if if_not_exists => {
                ctx.notice(format!("relation \"{name}\" already exists, skipping"));
                return Ok(ExecuteResponse::Command("CREATE TABLE AS".into()));
            }
            Err(e) => return Err(e),
        };
        let Some(id) = ids.first().copied() else {
            return Err(AdapterError::Internal(
                "CREATE TABLE AS created nothing".into(),
            ));
        };
        let rows = self.table_rows(id, &desc, rows)?;
        let n = count(&rows);
        let writes = super::write::table_writes(id, &rows, 1)?;
        if !writes.is_empty()
            && let Err(e) = self.commit_writes(writes, (), Vec::new()).await
        {
            if let Err(drop_error) = self
                .transact_holding(vec![Op::Drop(vec![id])], Vec::new(), None)
                .await
            {
                tracing::error!(error = %drop_error, "dropping the table of a failed CREATE TABLE AS");
            }
            return Err(e);
        }
        Ok(ExecuteResponse::Command(format!("SELECT {n}")))
    }

    /// COMMIT of a block's DDL: one catalog transaction, under the ids
    /// its statements reserved. Other sessions may have changed the
    /// catalog since the block's first DDL statement; that is fine unless
    /// they changed something the block's statements name or depend on
    /// (40001 then, as PostgreSQL's serializable), or took a name the
    /// block creates (the catalog's own error).
    pub(super) async fn commit_ddl(&self, pending: PendingDdl) -> Result<()> {
        let catalog = self.catalog.lock().await;
        let current = catalog.state();
        if !Arc::ptr_eq(&pending.base, &current) {
            unchanged_since(&pending.base, &current, &pending.ops())?;
        }
        let mut ops = Vec::new();
        let mut holds = Vec::new();
        let mut dataflows = Prepared::new();
        for step in pending.steps {
            ops.extend(step.ops);
            holds.extend(step.holds);
            if let Some((id, dataflow)) = step.dataflow {
                dataflows.insert(id, dataflow);
            }
        }
        if ops.is_empty() {
            return Ok(());
        }
        self.transact_locked(catalog, ops, holds, dataflows)?;
        Ok(())
    }

    /// `CREATE SOURCE`: learn what its connector writes, then commit the
    /// source with its subsources and progress relation; applying that
    /// starts its ingestion.
    pub(super) async fn create_source(
        &self,
        tag: String,
        plan: freshet_planner::statements::source::CreateSourcePlan,
        ctx: &mut ExecCtx,
    ) -> Result<ExecuteResponse> {
        if plan.if_not_exists
            && self
                .catalog_state()
                .item_by_name(plan.schema_id, &plan.name)
                .is_some()
        {
            ctx.notice(format!("source \"{}\" already exists, skipping", plan.name));
            return Ok(ExecuteResponse::Command(tag));
        }
        let mut plan = plan;
        let shape = match (&mut plan.connector, &plan.postgres) {
            (freshet_catalog::SourceConnector::Postgres(spec), Some(request)) => {
                let endpoint =
                    super::connections::postgres_endpoint(&self.catalog_state(), spec.connection)?;
                let request = freshet_sources::TableRequest {
                    tables: request.tables.clone(),
                    text_columns: request.text_columns.clone(),
                };
                let (tables, shape) =
                    freshet_sources::purify(&endpoint, &spec.publication, &request).await?;
                spec.tables = tables;
                spec.slot = freshet_sources::new_slot_name();
                shape
            }
            (freshet_catalog::SourceConnector::Kafka(spec), _) => {
                let brokers =
                    super::connections::kafka_brokers(&self.catalog_state(), spec.connection)?;
                freshet_sources::check_topic(&brokers, &spec.topic).await?;
                freshet_sources::shape(&plan.connector)?
            }
            (connector, _) => freshet_sources::shape(connector)?,
        };
        let op = freshet_planner::statements::source::source_ops(
            &plan,
            shape,
            freshet_storage::wall_clock_ms(),
        )?;
        let ids = self.transact_holding(vec![op], Vec::new(), None).await?;
        // Answer once the snapshot is durable (or the source stalled), so
        // that a read right after sees it.
        if let Some(id) = ids.first() {
            let state = self.sources.wait_started(*id).await;
            if state == freshet_sources::SourceState::Stalled {
                ctx.notice(format!(
                    "source \"{}\" is stalled; see freshet_internal.source_statuses",
                    plan.name
                ));
            }
        }
        Ok(ExecuteResponse::Command(tag))
    }

    /// `CREATE MATERIALIZED VIEW`: choose the time its inputs are read at
    /// (the strict-serializable read time, or an earlier `REFRESH AT`),
    /// hold them there, and commit the view with that `as_of`.
    pub(super) async fn create_materialized_view(
        &self,
        session: &mut Session,
        tag: String,
        plan: CreateMaterializedViewPlan,
        ctx: &mut ExecCtx,
    ) -> Result<ExecuteResponse> {
        let CreateMaterializedViewPlan {
            mut def,
            if_not_exists,
            replace,
            inputs,
            refresh,
            dataflow,
        } = plan;
        if let Some(ddl) = &session.txn.ddl
            && let Some(input) = ddl.created().intersection(&inputs).next()
        {
            return Err(AdapterError::Unsupported(format!(
                "a materialized view cannot read {}, created in the same transaction block; COMMIT first",
                ddl.state().describe(*input)
            )));
        }
        let (mut as_of, mut holds) = self.choose_as_of(&inputs)?;
        if let Some(refresh) = refresh {
            let (schedule, start) = self
                .refresh_schedule(session, &refresh, &inputs, as_of)
                .await?;
            if start < as_of {
                // A refresh before now: the inputs are read there.
                holds = self.hold_at(&inputs, start)?;
                as_of = start;
            }
            def.options.refresh = Some(schedule);
        }
        def.details = ItemDetails::MaterializedView {
            plan: None,
            as_of: Some(as_of),
        };
        let name = def.name.clone();
        let mut ops: Vec<Op> = replace.map(|id| Op::Drop(vec![id])).into_iter().collect();
        ops.push(Op::CreateItem(def));
        let ddl = Ddl {
            tag,
            ops,
            holds,
            dataflow: Some(dataflow),
            if_not_exists: if_not_exists.then_some(IfNotExists {
                name,
                kind: "materialized view",
            }),
        };
        self.ddl(session, ddl, ctx).await
    }
}

/// A DDL statement's catalog transaction.
pub(super) struct Ddl {
    /// The command tag it answers with.
    pub tag: String,
    /// The catalog operations, committed together.
    pub ops: Vec<Op>,
    /// Holds on the inputs of the dataflows it installs, at their `as_of`.
    pub holds: Vec<ReadHold>,
    /// The dataflow planned for the materialized view or index it
    /// creates: committed as its written plan and installed.
    pub dataflow: Option<ItemDataflow>,
    /// With `IF NOT EXISTS`, what to name in the notice when the object
    /// already exists.
    pub if_not_exists: Option<IfNotExists>,
}

impl Ddl {
    /// Operations that install no dataflow, failing if the object exists.
    pub fn new(tag: &str, ops: Vec<Op>) -> Self {
        Ddl {
            tag: tag.to_string(),
            ops,
            holds: Vec::new(),
            dataflow: None,
            if_not_exists: None,
        }
    }

    /// With `if_not_exists`, an existing `kind` named `name` is a notice.
    pub fn if_not_exists(mut self, if_not_exists: bool, name: &str, kind: &'static str) -> Self {
        self.if_not_exists = if_not_exists.then(|| IfNotExists {
            name: name.to_string(),
            kind,
        });
        self
    }
}

/// The object an `IF NOT EXISTS` notice names.
pub(super) struct IfNotExists {
    name: String,
    kind: &'static str,
}

/// Dataflows a transaction creates, ready to install, by id.
pub(super) type Prepared = BTreeMap<GlobalId, ItemDataflow>;

/// The first of `created` that a dataflow maintains (a materialized view
/// or an index): the object a statement's planned dataflow is for.
fn dataflow_object(
    state: &freshet_catalog::CatalogState,
    created: &[GlobalId],
) -> Option<GlobalId> {
    created.iter().copied().find(|id| {
        state
            .item(*id)
            .is_some_and(|i| matches!(i.kind, ItemKind::MaterializedView | ItemKind::Index))
    })
}

/// 40001 if an object `ops` name (other than those they create) differs
/// between `base` and `current`: the block's statements were planned
/// against `base`.
fn unchanged_since(
    base: &freshet_catalog::CatalogState,
    current: &freshet_catalog::CatalogState,
    ops: &[Op],
) -> Result<()> {
    let mut named: BTreeSet<GlobalId> = BTreeSet::new();
    for op in ops {
        match op {
            Op::CreateItem(def) => named.extend(def.references.iter().copied()),
            // Refused in blocks; what it names is only what it creates.
            Op::CreateSource { .. } => {}
            Op::ReplaceItem { id, def } => {
                named.insert(*id);
                named.extend(def.references.iter().copied());
            }
            Op::Drop(ids) => named.extend(ids.iter().copied()),
            Op::RenameItem { id, .. }
            | Op::SetOptions { id, .. }
            | Op::UpdateDetails { id, .. } => {
                named.insert(*id);
            }
            Op::CreateDatabase { .. } | Op::CreateSchema { .. } | Op::AllocateAfter(_) => {}
        }
    }
    // What the block names may itself depend on something that changed
    // (a view it reads replaced): all of it must be as it was.
    let mut pending: Vec<GlobalId> = named.iter().copied().collect();
    while let Some(id) = pending.pop() {
        let Some(before) = base.item(id) else {
            continue; // created in the block
        };
        if current.item(id) != Some(before) {
            return Err(AdapterError::SerializationFailure {
                detail: format!(
                    "Another session changed {} after this transaction's DDL named it.",
                    base.describe(id)
                ),
            });
        }
        for r in &before.references {
            if named.insert(*r) {
                pending.push(*r);
            }
        }
    }
    Ok(())
}

/// 40001: the catalog moved on under a statement planned against it.
pub(super) fn catalog_changed() -> AdapterError {
    AdapterError::SerializationFailure {
        detail: "Another session changed the catalog after this transaction's first DDL statement."
            .into(),
    }
}

/// Check that compute can build `dataflow` (and its from-storage twin),
/// so that a committed view or index installs.
fn validate(id: GlobalId, dataflow: &ItemDataflow) -> Result<()> {
    for plan in std::iter::once(&dataflow.plan).chain(&dataflow.from_storage) {
        ComputeController::validate(&DataflowDesc::unscheduled(
            id,
            plan.clone(),
            dataflow.export.clone(),
        ))?;
    }
    Ok(())
}

//! The sequencer: plans statements, commits catalog transactions and
//! applies their implications, runs queries under read holds, and
//! serialises read-then-write statements per table.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use arrow::array::RecordBatch;
use datafusion::common::ParamValues;
use freshet_catalog::{
    Catalog, CatalogDiff, CatalogError, CatalogState, Implication, ItemDetails, ItemKind, Op,
    implications,
};
use freshet_compute::plan::Export;
use freshet_compute::{ComputeController, DataflowDesc};
use freshet_planner::index::PeekPlan;
use freshet_planner::parse::Statement;
use freshet_planner::{
    CopyFromPlan, ExplainKind, Plan, QueryPlan, ReadContext, StatementContext, WriteKind,
    WritePlan, plan_statement,
};
use freshet_repr::{GlobalId, RelationDesc, Timestamp};
use freshet_storage::{
    CollectionKind, ReadHold, ReadPolicy, Storage, StorageConfig, TableWrite, open_local,
    write_batch,
};
use parking_lot::{Mutex, RwLock};
use pgwire::api::ConnectionManager;

use crate::error::{AdapterError, Result};
use crate::introspection::QueryReader;
use crate::query_exec::{AbortOnDrop, QueryExecutor};
use crate::session::{Cursor, PendingCopy, Session, TxnRead, TxnStatus};
use crate::subscribe::{SubscribeStream, Subscribes};
use crate::values::check_rows;
use crate::vars::Isolation;

/// What executing a statement produced.
#[derive(Debug)]
pub enum ExecuteResponse {
    /// Rows, with the command tag (`SELECT`, `SHOW`, `INSERT 0`, ...).
    Rows {
        /// Columns.
        desc: RelationDesc,
        /// Data.
        batches: Vec<RecordBatch>,
        /// Tag; the row count is appended.
        tag: String,
    },
    /// A command with its complete tag (`CREATE TABLE`, `INSERT 0 3`).
    Command(String),
    /// `BEGIN` / `START TRANSACTION`.
    TransactionStart(String),
    /// `COMMIT` / `ROLLBACK`.
    TransactionEnd(String),
    /// COPY FROM STDIN is waiting for data (the plan is in the session).
    CopyIn {
        /// Number of columns in the data.
        columns: usize,
    },
    /// A running subscribe, streamed as COPY data in `options`' format.
    Subscribe {
        /// The subscribe.
        stream: Box<crate::subscribe::SubscribeStream>,
        /// COPY format options.
        options: freshet_planner::CopyOptions,
    },
    /// COPY TO STDOUT data.
    CopyOut {
        /// Columns.
        desc: RelationDesc,
        /// Data.
        batches: Vec<RecordBatch>,
        /// Format options.
        options: freshet_planner::CopyOptions,
    },
}

/// A message sent to the client alongside a result.
#[derive(Debug, Clone)]
pub struct Notice {
    /// `NOTICE` or `WARNING`.
    pub severity: &'static str,
    /// SQLSTATE.
    pub code: &'static str,
    /// The message.
    pub message: String,
}

/// Per-statement context the handler passes in.
#[derive(Debug, Default)]
pub struct ExecCtx {
    /// Notices to send before the statement's result.
    pub notices: Vec<Notice>,
}

impl ExecCtx {
    fn notice(&mut self, message: impl Into<String>) {
        self.notices.push(Notice {
            severity: "NOTICE",
            code: "00000",
            message: message.into(),
        });
    }

    fn warning(&mut self, code: &'static str, message: impl Into<String>) {
        self.notices.push(Notice {
            severity: "WARNING",
            code,
            message: message.into(),
        });
    }
}

/// Shared server state.
pub struct Coordinator {
    catalog: tokio::sync::Mutex<Catalog>,
    state: RwLock<Arc<CatalogState>>,
    /// Storage.
    pub storage: Arc<Storage>,
    /// Compute: the timely workers maintaining materialized views.
    pub compute: Arc<ComputeController>,
    base_df: datafusion::execution::SessionState,
    table_locks: Mutex<HashMap<GlobalId, Arc<tokio::sync::Mutex<()>>>>,
    /// Cancel-request registry (pgwire).
    pub connections: Arc<ConnectionManager>,
    /// Running subscribes, ended when an input is dropped.
    pub subscribes: Arc<Subscribes>,
    /// The next transient (subscribe) dataflow id.
    next_transient: std::sync::atomic::AtomicU64,
    /// Plans boot made again from SQL (their written format was another
    /// build's), committed back to the catalog once boot has applied it.
    replanned: Mutex<Vec<(GlobalId, freshet_catalog::WrittenPlan)>>,
    /// Key sets of tables with a primary key, checked by every commit.
    keys: Arc<crate::keys::KeySets>,
    /// Where queries' physical plans run, and their memory budget.
    pub queries: QueryExecutor,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator").finish_non_exhaustive()
    }
}

/// The tag Postgres sends for a DDL or utility statement.
pub fn command_tag(stmt: &Statement) -> String {
    use datafusion::sql::sqlparser::ast::Statement as S;
    match stmt {
        Statement::Sql(s) => match s.as_ref() {
            S::CreateTable(_) => "CREATE TABLE".into(),
            S::CreateView(v) if v.materialized => "CREATE MATERIALIZED VIEW".into(),
            S::CreateView(_) => "CREATE VIEW".into(),
            S::CreateIndex(_) => "CREATE INDEX".into(),
            S::CreateSchema { .. } => "CREATE SCHEMA".into(),
            S::CreateDatabase { .. } => "CREATE DATABASE".into(),
            S::Drop { object_type, .. } => {
                format!("DROP {}", object_type.to_string().to_uppercase())
            }
            S::AlterTable(_) => "ALTER TABLE".into(),
            S::Set(_) => "SET".into(),
            S::Reset(_) => "RESET".into(),
            S::Discard { .. } => "DISCARD ALL".into(),
            S::StartTransaction { begin: true, .. } => "BEGIN".into(),
            S::StartTransaction { .. } => "START TRANSACTION".into(),
            S::Commit { .. } => "COMMIT".into(),
            S::Rollback { .. } => "ROLLBACK".into(),
            other => other
                .to_string()
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_uppercase(),
        },
        Statement::AlterRename { kind, .. } | Statement::AlterOptions { kind, .. } => {
            format!("ALTER {}", kind.keyword())
        }
        Statement::CreateWithOptions { stmt, .. } => command_tag(stmt),
        Statement::SelectAsOf { .. } => "SELECT".into(),
        Statement::ExplainTimestamp(_) | Statement::ExplainMaterializedView(_) => "EXPLAIN".into(),
        Statement::ShowCreateMaterializedView(_) => "SHOW".into(),
        Statement::CreateDefaultIndex { .. } => "CREATE INDEX".into(),
        Statement::ExplainIndex(_) => "EXPLAIN".into(),
        Statement::ShowIndexes(_) => "SHOW".into(),
        Statement::Subscribe(_) => "SUBSCRIBE".into(),
        Statement::CopySubscribe { .. } => "COPY".into(),
        Statement::Declare { .. } => "DECLARE CURSOR".into(),
        Statement::Fetch { .. } => "FETCH".into(),
    }
}

impl Coordinator {
    /// Open the data directory (fencing any earlier process), open storage
    /// and the catalog, and apply the whole catalog through `implications`.
    ///
    /// `workers` timely worker threads maintain materialized views.
    pub fn open(
        data_dir: &Path,
        storage_config: Option<StorageConfig>,
        workers: usize,
        queries: QueryExecutor,
    ) -> Result<Arc<Self>> {
        let (blob, fence) = open_local(data_dir)?;
        let config = storage_config.unwrap_or_else(|| StorageConfig::new(data_dir));
        let storage = Arc::new(Storage::open(blob, fence.clone(), config)?);
        let parallelism = std::thread::available_parallelism().map_or(2, |n| n.get());
        let base_df = freshet_planner::engine::new_session_state(parallelism);
        let compute = Arc::new(ComputeController::start(
            workers,
            Arc::clone(&storage),
            freshet_planner::plan_codec::plan_codec(&base_df),
        )?);
        let catalog = Catalog::open(fence)?;
        let state = catalog.state();
        let coord = Coordinator {
            catalog: tokio::sync::Mutex::new(catalog),
            state: RwLock::new(Arc::clone(&state)),
            storage,
            compute,
            base_df,
            table_locks: Mutex::new(HashMap::new()),
            connections: Arc::new(ConnectionManager::new()),
            subscribes: Arc::new(Subscribes::default()),
            next_transient: std::sync::atomic::AtomicU64::new(1),
            replanned: Mutex::new(Vec::new()),
            keys: Arc::default(),
            queries,
        };
        // Boot is the same function as DDL: the whole catalog as one diff.
        coord.apply(&state.as_diff_from_empty(), Vec::new(), true)?;
        coord.storage.finish_boot()?;
        let mut coord = coord;
        coord.write_back_plans()?;
        tracing::info!(
            items = state.items().count(),
            epoch = coord.storage.epoch(),
            "catalog applied; ready"
        );
        Ok(Arc::new(coord))
    }

    /// Commit the plans boot had to make again from SQL, with the notice
    /// saying why, so the next boot installs them as written and `EXPLAIN`
    /// shows that they were planned again. (The change implies nothing:
    /// the dataflows already run these plans.)
    fn write_back_plans(&mut self) -> Result<()> {
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
                    details: freshet_planner::written_plan::with_plan(&item.details, written),
                })
            })
            .collect();
        let count = ops.len();
        let (diff, _) = catalog.transact(ops)?;
        *self.state.write() = catalog.state();
        self.apply(&diff, Vec::new(), true)?;
        tracing::info!(count, "wrote back plans made again at boot");
        Ok(())
    }

    /// The current catalog version.
    pub fn catalog_state(&self) -> Arc<CatalogState> {
        Arc::clone(&self.state.read())
    }

    /// The DataFusion state new sessions start from.
    pub fn base_session_state(&self) -> &datafusion::execution::SessionState {
        &self.base_df
    }

    /// Apply what a committed diff implies, in order. `holds` protect the
    /// inputs of dataflows the diff installs at their chosen `as_of`; at
    /// boot (`booting`) a dataflow that cannot be installed is logged and
    /// skipped rather than keeping the server down.
    fn apply(&self, diff: &CatalogDiff, mut holds: Vec<ReadHold>, booting: bool) -> Result<()> {
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
                }
                Implication::InitReadPolicy(id) => self.init_read_policy(id)?,
                Implication::InstallDataflow(id) => {
                    if let Err(e) = self.install_dataflow(id, &mut holds, booting) {
                        if !booting {
                            return Err(e);
                        }
                        tracing::error!(dataflow = %id, error = %e, "cannot install dataflow at boot; reads of it will fail");
                    }
                }
                Implication::DropDataflow(id) => self.compute.drop_dataflow(id)?,
                Implication::ExportSink(id) | Implication::DropSinkExport(id) => {
                    return Err(AdapterError::Internal(format!(
                        "implication for {id} requires sinks, which this build does not run"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Apply an item's options to how its history is kept: `RETAIN
    /// HISTORY` (or the default) for a collection's since or an index's
    /// trace, and, for a scheduled view, no reads before its first refresh.
    fn init_read_policy(&self, id: GlobalId) -> Result<()> {
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

    /// Install the dataflow of `id` from its written plan, handing it the
    /// holds taken for its inputs (if any). A plan boot (`booting`) has to
    /// make again is queued to be written back.
    fn install_dataflow(
        &self,
        id: GlobalId,
        holds: &mut Vec<ReadHold>,
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
        let (dataflow, replanned) =
            freshet_planner::written_plan::read_or_plan(&self.base_df, &catalog, id)?;
        if let Some(notice) = replanned {
            tracing::warn!(dataflow = %id, "{notice}");
            if booting {
                let written = freshet_planner::written_plan::write(&self.base_df, id, &dataflow)?;
                self.replanned.lock().push((id, written));
            }
        }
        let freshet_planner::written_plan::ItemDataflow {
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

    /// Commit a catalog transaction and apply its implications, handing
    /// `holds` to the dataflows it installs.
    async fn transact_holding(&self, ops: Vec<Op>, holds: Vec<ReadHold>) -> Result<Vec<GlobalId>> {
        let mut catalog = self.catalog.lock().await;
        let before = self.catalog_state();
        let ops = self.with_written_plans(&catalog, ops)?;
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
        if let Err(e) = self.apply(&diff, holds, false) {
            tracing::error!(error = %e, "applying a committed catalog change failed; it will be retried at boot");
            return Err(e);
        }
        Ok(ids)
    }

    /// `ops` plus the written plans of the materialized views and indexes
    /// they create, planned against the catalog as `ops` will leave it, so
    /// the plans commit in the same transaction as their objects.
    fn with_written_plans(
        &self,
        catalog: &freshet_catalog::Catalog,
        ops: Vec<Op>,
    ) -> Result<Vec<Op>> {
        let creates = ops.iter().any(|op| {
            matches!(op, Op::CreateItem(def)
                if matches!(def.kind, ItemKind::MaterializedView | ItemKind::Index))
        });
        if !creates {
            return Ok(ops);
        }
        let (next, created) = catalog.preview(ops.clone())?;
        let mut ops = ops;
        for id in created {
            let Some(item) = next.item(id) else { continue };
            if !matches!(item.kind, ItemKind::MaterializedView | ItemKind::Index) {
                continue;
            }
            let dataflow = freshet_planner::written_plan::plan_item(&self.base_df, &next, id)?;
            let written = freshet_planner::written_plan::write(&self.base_df, id, &dataflow)?;
            ops.push(Op::UpdateDetails {
                id,
                details: freshet_planner::written_plan::with_plan(&item.details, written),
            });
        }
        Ok(ops)
    }

    /// Commit table writes, checking the keys of the tables they write,
    /// then release `lock` (a table's write lock, if the statement holds
    /// it) — in a task of its own, so a cancelled or timed-out statement
    /// can neither release the lock nor stop the key bookkeeping while the
    /// commit is still in flight.
    async fn commit_writes(
        &self,
        writes: Vec<TableWrite>,
        lock: Option<tokio::sync::OwnedMutexGuard<()>>,
    ) -> Result<Timestamp> {
        let storage = Arc::clone(&self.storage);
        let keys = Arc::clone(&self.keys);
        let specs = self.key_specs(&writes);
        tokio::spawn(async move {
            let result = keys.commit(&storage, specs, writes).await;
            drop(lock);
            result
        })
        .await
        .map_err(|e| AdapterError::Internal(format!("commit task failed: {e}")))?
    }

    /// The keys (primary and `UNIQUE`) of the tables `writes` write.
    fn key_specs(&self, writes: &[TableWrite]) -> Vec<crate::keys::KeySpec> {
        let catalog = self.catalog_state();
        let ids: BTreeSet<GlobalId> = writes.iter().map(|w| w.id).collect();
        let mut specs = Vec::new();
        for id in ids {
            let Some(item) = catalog.item(id) else {
                continue;
            };
            let (
                ItemDetails::Table {
                    keys: table_keys, ..
                },
                Some(desc),
            ) = (&item.details, item.desc.as_ref())
            else {
                continue;
            };
            let mut keys = Vec::new();
            if !table_keys.primary_key.is_empty() {
                keys.push((
                    0,
                    format!("{}_pkey", item.name),
                    &table_keys.primary_key,
                    false,
                ));
            }
            for (i, u) in table_keys.unique.iter().enumerate() {
                keys.push((i + 1, u.name.clone(), &u.columns, !u.nulls_not_distinct));
            }
            for (slot, constraint, positions, nulls_distinct) in keys {
                let Some(columns) = positions
                    .iter()
                    .map(|&i| desc.columns.get(i))
                    .collect::<Option<Vec<_>>>()
                else {
                    continue;
                };
                specs.push(crate::keys::KeySpec {
                    id,
                    slot,
                    table: item.name.clone(),
                    constraint,
                    nulls_distinct,
                    columns: positions.clone(),
                    names: columns.iter().map(|c| c.name.clone()).collect(),
                    types: columns.iter().map(|c| c.ty.arrow_type()).collect(),
                });
            }
        }
        specs
    }

    fn table_lock(&self, id: GlobalId) -> Arc<tokio::sync::Mutex<()>> {
        Arc::clone(self.table_locks.lock().entry(id).or_default())
    }

    /// Execute one statement for a session.
    pub async fn execute(
        &self,
        session: &mut Session,
        stmt: &Statement,
        params: Option<&ParamValues>,
        ctx: &mut ExecCtx,
    ) -> Result<ExecuteResponse> {
        let result = self.execute_inner(session, stmt, params, ctx).await;
        if result.is_err() && session.status == TxnStatus::InBlock {
            session.status = TxnStatus::Failed;
        }
        result
    }

    /// Plan a statement for the session (also used to describe prepared
    /// statements).
    ///
    /// Planning is CPU-bound and cannot yield, so it runs on a blocking
    /// thread (with a stack sized for the deepest expression the parser
    /// admits) while this future waits: other sessions keep running, and a
    /// timeout, CancelRequest or disconnect answers the client at once,
    /// and the abandoned plan stops at its next optimizer rule
    /// ([`freshet_planner::interrupt`]).
    pub async fn plan(
        &self,
        session: &Session,
        stmt: &Statement,
        params: Option<&ParamValues>,
    ) -> Result<Plan> {
        let catalog = self.catalog_state();
        let info = session.info();
        let state = Arc::clone(&session.df);
        let stmt = stmt.clone();
        let params = params.cloned();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let planning = tokio::task::spawn_blocking(move || {
            let cx = StatementContext {
                state: &state,
                catalog: &catalog,
                session: &info,
                params: params.as_ref(),
            };
            freshet_planner::interrupt::sync_scope(flag, || plan_statement(&cx, &stmt))
        });
        // Dropped unfinished (timeout, cancel, disconnect): the stop flag
        // ends the abandoned plan at its next rule.
        let mut planning = AbortOnDrop(planning, stop);
        match (&mut planning.0).await {
            Ok(plan) => Ok(plan?),
            Err(e) if e.is_panic() => Err(AdapterError::Internal(format!(
                "planning panicked: {}",
                crate::connection::panic_message(&e.into_panic())
            ))),
            Err(e) => Err(AdapterError::Internal(format!("planning failed: {e}"))),
        }
    }

    async fn execute_inner(
        &self,
        session: &mut Session,
        stmt: &Statement,
        params: Option<&ParamValues>,
        ctx: &mut ExecCtx,
    ) -> Result<ExecuteResponse> {
        if session.status == TxnStatus::Failed && !is_txn_end(stmt) {
            return Err(AdapterError::TransactionAborted);
        }
        // `now()` and friends take their value from the statement's start.
        Arc::make_mut(&mut session.df).mark_start_execution();
        let plan = self.plan(session, stmt, params).await?;
        let tag = command_tag(stmt);
        match plan {
            Plan::Empty => Ok(ExecuteResponse::Command(tag)),
            Plan::CreateDatabase {
                name,
                if_not_exists,
            } => {
                self.ddl(
                    session,
                    &tag,
                    vec![Op::CreateDatabase { name: name.clone() }],
                    if_not_exists,
                    ctx,
                    &name,
                    "database",
                )
                .await
            }
            Plan::CreateSchema {
                database_id,
                name,
                if_not_exists,
            } => {
                let op = Op::CreateSchema {
                    database_id,
                    name: name.clone(),
                };
                self.ddl(session, &tag, vec![op], if_not_exists, ctx, &name, "schema")
                    .await
            }
            Plan::CreateItem {
                def,
                if_not_exists,
                replace,
            } => {
                let name = def.name.clone();
                let op = match replace {
                    Some(id) => Op::ReplaceItem { id, def },
                    None => Op::CreateItem(def),
                };
                self.ddl(
                    session,
                    &tag,
                    vec![op],
                    if_not_exists,
                    ctx,
                    &name,
                    "relation",
                )
                .await
            }
            Plan::CreateMaterializedView {
                def,
                if_not_exists,
                replace,
                inputs,
                refresh,
            } => {
                if session.status != TxnStatus::Idle {
                    return Err(AdapterError::InTransactionBlock(tag));
                }
                let (mut as_of, mut holds) = self.choose_as_of(&inputs)?;
                let mut def = def;
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
                self.ddl_holding(
                    session,
                    &tag,
                    ops,
                    holds,
                    if_not_exists,
                    ctx,
                    &name,
                    "materialized view",
                )
                .await
            }
            Plan::Drop { ids, notices } => {
                for n in notices {
                    ctx.notice(n);
                }
                if ids.is_empty() {
                    return Ok(ExecuteResponse::Command(tag));
                }
                self.ddl(session, &tag, vec![Op::Drop(ids)], false, ctx, "", "")
                    .await
            }
            Plan::Rename { id, new_name } => {
                self.ddl(
                    session,
                    &tag,
                    vec![Op::RenameItem { id, new_name }],
                    false,
                    ctx,
                    "",
                    "",
                )
                .await
            }
            Plan::Select(q) => {
                let batches = self.read(session, &q).await?;
                Ok(ExecuteResponse::Rows {
                    desc: q.desc,
                    batches,
                    tag: "SELECT".into(),
                })
            }
            Plan::SelectAt {
                query,
                at_least,
                time,
            } => {
                let batches = self.read_as_of(session, &query, at_least, &time).await?;
                Ok(ExecuteResponse::Rows {
                    desc: query.desc,
                    batches,
                    tag: "SELECT".into(),
                })
            }
            Plan::SetOptions { id, options } => {
                self.ddl(
                    session,
                    &tag,
                    vec![Op::SetOptions { id, options }],
                    false,
                    ctx,
                    "",
                    "",
                )
                .await
            }
            Plan::Explain(kind, q) => self.explain(session, kind, &q).await,
            Plan::Peek(peek) => {
                let batch = self.peek(session, &peek).await?;
                Ok(ExecuteResponse::Rows {
                    desc: peek.desc,
                    batches: vec![batch],
                    tag: "SELECT".into(),
                })
            }
            Plan::ExplainPeek(peek) => query_plan_rows(vec![
                format!("Fast path: {}", self.humanize_ids(&peek.explain)),
                "  (answered from the index's arrangement, without a DataFusion plan)".into(),
            ]),
            Plan::Write(w) => self.write(session, *w).await,
            Plan::CopyFrom(plan) => {
                let columns = plan.columns.len();
                session.copy_in = Some(PendingCopy::new(*plan));
                Ok(ExecuteResponse::CopyIn { columns })
            }
            Plan::CopyTo(q, options) => {
                let batches = self.read(session, &q).await?;
                Ok(ExecuteResponse::CopyOut {
                    desc: q.desc,
                    batches,
                    options,
                })
            }
            Plan::Rows { desc, batch } => Ok(ExecuteResponse::Rows {
                desc,
                batches: vec![batch],
                tag: "SHOW".into(),
            }),
            Plan::SetVariable { name, value, local } => {
                session.set_var(&name, &value, local, ctx)?;
                Ok(ExecuteResponse::Command(tag))
            }
            Plan::ResetAll => {
                session.reset_all();
                Ok(ExecuteResponse::Command(tag))
            }
            Plan::ShowVariable(name) => show_variable(session, &name),
            Plan::StartTransaction { isolation } => {
                if session.status != TxnStatus::Idle {
                    ctx.warning("25001", "there is already a transaction in progress");
                } else {
                    session.begin();
                }
                if let Some(level) = isolation {
                    session.txn.isolation = Some(parse_isolation(&level));
                }
                Ok(ExecuteResponse::TransactionStart(tag))
            }
            Plan::SetTransaction { isolation } => {
                if session.status == TxnStatus::Idle {
                    ctx.warning(
                        "25P01",
                        "SET TRANSACTION can only be used in transaction blocks",
                    );
                } else if let Some(level) = isolation {
                    session.txn.isolation = Some(parse_isolation(&level));
                }
                Ok(ExecuteResponse::Command(tag))
            }
            Plan::Commit => self.end_transaction(session, true, ctx).await,
            Plan::Rollback => self.end_transaction(session, false, ctx).await,
            Plan::Subscribe(plan, options) => Ok(ExecuteResponse::Subscribe {
                stream: Box::new(self.subscribe(session, *plan).await?),
                options,
            }),
            Plan::Declare { name, plan } => self.declare(session, name, *plan).await,
            Plan::Fetch {
                name,
                count,
                timeout,
            } => self.fetch(session, &name, count, timeout).await,
            Plan::Close(None) => {
                session.txn.cursors.clear();
                Ok(ExecuteResponse::Command("CLOSE CURSOR ALL".into()))
            }
            Plan::Close(Some(name)) => match session.txn.cursors.remove(&name) {
                Some(_) => Ok(ExecuteResponse::Command("CLOSE CURSOR".into())),
                None => Err(AdapterError::UnknownCursor(name)),
            },
        }
    }

    /// Start a subscribe for `session`: at `AS OF`, or at the time a
    /// query would read at now, with holds on its inputs that follow its
    /// progress. `AS OF` and `UP TO` are evaluated with `mz_now()` bound
    /// to the current read time.
    async fn subscribe(
        &self,
        session: &Session,
        plan: freshet_planner::subscribe::SubscribePlan,
    ) -> Result<SubscribeStream> {
        let now = self.storage.read_ts();
        let up_to = match &plan.up_to {
            Some(t) => Some(self.eval_time(session, t, now).await?),
            None => None,
        };
        let requested = match &plan.as_of {
            Some(a) => Some((a.at_least, self.eval_time(session, &a.time, now).await?)),
            None => None,
        };
        if let (Some((_, a)), Some(u)) = (requested, up_to)
            && u < a
        {
            return Err(AdapterError::data(
                "22023",
                format!("UP TO ({u}) must not be earlier than AS OF ({a})"),
            ));
        }
        let (as_of, holds) = match requested {
            Some((false, t)) => (t, self.hold_at(&plan.inputs, t)?),
            Some((true, t)) => self.hold_at_least(&plan.inputs, t)?,
            None => self.choose_and_hold(&plan.inputs, session.isolation())?,
        };
        let id = GlobalId::Transient(
            self.next_transient
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        );
        let desc = DataflowDesc {
            id,
            plan: plan.plan,
            export: Export::Subscribe {
                snapshot: plan.snapshot,
                up_to,
            },
            as_of,
            start: as_of,
            refresh: None,
        };
        let subscription = self.compute.subscribe(
            desc,
            holds,
            plan.from_storage,
            session.vars.subscribe_buffer_limit,
        )?;
        let registration = self
            .subscribes
            .register(plan.depends_on.clone(), Arc::clone(subscription.state()));
        // An input dropped while this started was not seen by the drop.
        let catalog = self.catalog_state();
        if let Some(gone) = plan
            .depends_on
            .iter()
            .find(|id| catalog.item(**id).is_none())
        {
            return Err(AdapterError::data(
                "57014",
                format!(
                    "subscribe has been terminated because underlying relation {gone} was dropped"
                ),
            ));
        }
        tracing::debug!(subscribe = %id, as_of, "subscribe started");
        SubscribeStream::new(
            subscription,
            registration,
            &plan.relation,
            plan.output,
            plan.envelope,
            plan.progress,
        )
    }

    /// `DECLARE name CURSOR FOR ...`: a query's rows computed now, or a
    /// subscribe started now, fetched later in the transaction.
    async fn declare(
        &self,
        session: &mut Session,
        name: String,
        plan: Plan,
    ) -> Result<ExecuteResponse> {
        if session.status != TxnStatus::InBlock {
            return Err(AdapterError::data(
                "25P01",
                "DECLARE CURSOR can only be used in transaction blocks",
            ));
        }
        if session.txn.cursors.contains_key(&name) {
            return Err(AdapterError::DuplicateCursor(name));
        }
        let cursor = match plan {
            Plan::Select(q) => Cursor {
                rows: self.read(session, &q).await?.into(),
                desc: q.desc,
                subscribe: None,
            },
            Plan::Peek(p) => Cursor {
                rows: vec![self.peek(session, &p).await?].into(),
                desc: p.desc,
                subscribe: None,
            },
            Plan::Subscribe(plan, _) => {
                let stream = self.subscribe(session, *plan).await?;
                Cursor {
                    desc: stream.desc().clone(),
                    rows: Default::default(),
                    subscribe: Some(stream),
                }
            }
            _ => {
                return Err(AdapterError::Internal(
                    "a cursor over something other than a query".into(),
                ));
            }
        };
        session.txn.cursors.insert(name, cursor);
        Ok(ExecuteResponse::Command("DECLARE CURSOR".into()))
    }

    /// `FETCH`: up to `count` rows of a cursor. A subscribe's cursor waits
    /// (up to `timeout`, if given) until at least one row is available,
    /// then returns what is available without waiting further.
    async fn fetch(
        &self,
        session: &mut Session,
        name: &str,
        count: Option<u64>,
        timeout: Option<std::time::Duration>,
    ) -> Result<ExecuteResponse> {
        let cursor = session
            .txn
            .cursors
            .get_mut(name)
            .ok_or_else(|| AdapterError::UnknownCursor(name.to_string()))?;
        let want = count.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
        let mut out = Vec::new();
        let have = take_rows(&mut cursor.rows, want, &mut out);
        if let Some(stream) = cursor.subscribe.as_mut() {
            if have == 0 && want > 0 && !stream.is_done() && cursor.rows.is_empty() {
                let first = async {
                    loop {
                        match stream.next().await {
                            Some(Ok(b)) if b.num_rows() == 0 => continue,
                            other => return other,
                        }
                    }
                };
                let first = match timeout {
                    Some(t) => tokio::time::timeout(t, first).await.unwrap_or(None),
                    None => first.await,
                };
                if let Some(batch) = first {
                    cursor.rows.push_back(batch?);
                }
            }
            while have + cursor.rows.iter().map(|b| b.num_rows()).sum::<usize>() < want {
                match stream.try_next() {
                    Some(batch) => cursor.rows.push_back(batch?),
                    None => break,
                }
            }
            take_rows(&mut cursor.rows, want - have, &mut out);
        }
        Ok(ExecuteResponse::Rows {
            desc: cursor.desc.clone(),
            batches: out,
            tag: "FETCH".into(),
        })
    }

    #[allow(clippy::too_many_arguments)]
    async fn ddl(
        &self,
        session: &Session,
        tag: &str,
        ops: Vec<Op>,
        if_not_exists: bool,
        ctx: &mut ExecCtx,
        name: &str,
        kind: &str,
    ) -> Result<ExecuteResponse> {
        self.ddl_holding(
            session,
            tag,
            ops,
            Vec::new(),
            if_not_exists,
            ctx,
            name,
            kind,
        )
        .await
    }

    /// [`Self::ddl`], handing `holds` to the dataflows it installs.
    #[allow(clippy::too_many_arguments)]
    async fn ddl_holding(
        &self,
        session: &Session,
        tag: &str,
        ops: Vec<Op>,
        holds: Vec<ReadHold>,
        if_not_exists: bool,
        ctx: &mut ExecCtx,
        name: &str,
        kind: &str,
    ) -> Result<ExecuteResponse> {
        if session.status != TxnStatus::Idle {
            return Err(AdapterError::InTransactionBlock(tag.to_string()));
        }
        match self.transact_holding(ops, holds).await {
            Ok(_) => Ok(ExecuteResponse::Command(tag.to_string())),
            Err(AdapterError::Catalog(CatalogError::AlreadyExists { .. })) if if_not_exists => {
                ctx.notice(format!("{kind} \"{name}\" already exists, skipping"));
                Ok(ExecuteResponse::Command(tag.to_string()))
            }
            Err(e) => Err(e),
        }
    }

    async fn end_transaction(
        &self,
        session: &mut Session,
        commit: bool,
        ctx: &mut ExecCtx,
    ) -> Result<ExecuteResponse> {
        let status = session.status;
        let txn = session.end_transaction(commit && status == TxnStatus::InBlock);
        match status {
            TxnStatus::Idle => {
                ctx.warning("25P01", "there is no transaction in progress");
                Ok(ExecuteResponse::TransactionEnd(
                    if commit { "COMMIT" } else { "ROLLBACK" }.into(),
                ))
            }
            TxnStatus::Failed => Ok(ExecuteResponse::TransactionEnd("ROLLBACK".into())),
            TxnStatus::InBlock => {
                if commit && !txn.writes.is_empty() {
                    self.commit_writes(txn.writes, None).await?;
                }
                drop(txn.read);
                Ok(ExecuteResponse::TransactionEnd(
                    if commit { "COMMIT" } else { "ROLLBACK" }.into(),
                ))
            }
        }
    }

    /// Evaluate a time expression (`AS OF`, `REFRESH AT`) with `mz_now()`
    /// bound to `now`: milliseconds from an integer or `numeric`
    /// (`mz_timestamp`), a `timestamp[tz]`, or text holding either.
    async fn eval_time(
        &self,
        session: &Session,
        time: &freshet_planner::options::TimeExpr,
        now: Timestamp,
    ) -> Result<Timestamp> {
        let batches = self.run_at(session, &time.query, now).await?;
        let value = batches
            .iter()
            .find(|b| b.num_rows() > 0)
            .map(|b| datafusion::common::ScalarValue::try_from_array(b.column(0), 0))
            .transpose()?;
        freshet_planner::options::timestamp_of(value.as_ref()).map_err(|why| {
            AdapterError::data("22023", format!("{} is not a valid time: {why}", time.text))
        })
    }

    /// Resolve a `REFRESH` plan for a view created at `created`: its
    /// schedule with concrete times, and the time its inputs must be read
    /// at (`created`, or an earlier `REFRESH AT` time they still hold).
    async fn refresh_schedule(
        &self,
        session: &Session,
        refresh: &freshet_planner::options::RefreshPlan,
        inputs: &BTreeSet<GlobalId>,
        created: Timestamp,
    ) -> Result<(freshet_repr::RefreshSchedule, Timestamp)> {
        let mut at = Vec::new();
        for t in &refresh.at {
            at.push(self.eval_time(session, t, created).await?);
        }
        let mut every = Vec::new();
        for (interval, aligned) in &refresh.every {
            let aligned = match aligned {
                Some(a) => Some(self.eval_time(session, a, created).await?),
                None => None,
            };
            every.push((*interval, aligned));
        }
        let readable = self.readable_at_least(inputs, 0)?;
        if let Some(early) = at.iter().find(|t| **t < readable) {
            return Err(AdapterError::data(
                "22023",
                format!(
                    "REFRESH AT {early} is earlier than the inputs can still be read at ({readable}): {}",
                    self.unreadable_inputs(inputs, *early)
                ),
            ));
        }
        let start = at
            .iter()
            .copied()
            .filter(|t| *t < created)
            .min()
            .unwrap_or(created);
        Ok((
            freshet_planner::options::schedule(created, at, every, refresh.at_creation),
            start,
        ))
    }

    /// Run `q` at the time its `AS OF` names (or, `AT LEAST`, at any
    /// readable time not before it), waiting for the inputs to get there.
    async fn read_as_of(
        &self,
        session: &mut Session,
        q: &QueryPlan,
        at_least: bool,
        time: &freshet_planner::options::TimeExpr,
    ) -> Result<Vec<RecordBatch>> {
        if session.status == TxnStatus::InBlock {
            return Err(AdapterError::InvalidTransactionState(
                "AS OF is not allowed in a transaction block".into(),
            ));
        }
        let now = self.storage.read_ts();
        let t = self.eval_time(session, time, now).await?;
        let (t, holds) = if at_least {
            let (chosen, holds) = self.choose_and_hold(&q.inputs, session.isolation())?;
            if chosen >= t {
                (chosen, holds)
            } else {
                (t, self.hold_at(&q.inputs, t)?)
            }
        } else {
            (t, self.hold_at(&q.inputs, t)?)
        };
        // `run_at` waits for every input to complete `t` (a future time).
        let result = self.run_at(session, q, t).await;
        drop(holds);
        result
    }

    /// Which of `inputs` cannot be read at `ts`, with their sinces.
    fn unreadable_inputs(&self, inputs: &BTreeSet<GlobalId>, ts: Timestamp) -> String {
        let mut parts = Vec::new();
        for id in inputs {
            if let Ok((since, _)) = self.storage.frontiers(*id)
                && since.as_option().is_some_and(|s| *s > ts)
            {
                parts.push(format!(
                    "{} has since {}",
                    self.describe(*id),
                    since.as_option().map_or("[]".into(), |s| s.to_string())
                ));
            }
        }
        parts.join(", ")
    }

    /// The time a new dataflow reads its inputs at: the strict-serializable
    /// read time (so the view reflects every write acknowledged before its
    /// CREATE), or later where an input has compacted past it; with holds
    /// there, taken before the catalog transaction commits.
    fn choose_as_of(&self, inputs: &BTreeSet<GlobalId>) -> Result<(Timestamp, Vec<ReadHold>)> {
        self.hold_at_least(inputs, self.storage.read_ts())
    }

    /// Holds on `inputs` at the earliest time at or after `ts` they are all
    /// readable at. An input's since can advance between reading it and
    /// taking the hold; then the choice is made again from the new sinces.
    fn hold_at_least(
        &self,
        inputs: &BTreeSet<GlobalId>,
        ts: Timestamp,
    ) -> Result<(Timestamp, Vec<ReadHold>)> {
        let mut attempts = 0;
        loop {
            let at = self.readable_at_least(inputs, ts)?;
            match self.hold_at(inputs, at) {
                Ok(holds) => return Ok((at, holds)),
                // An input's since moved past `at` after it was read.
                Err(AdapterError::Data { code: "22000", .. }) if attempts < 8 => attempts += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// The earliest time at or after `ts` at which every input is still
    /// readable (no input has compacted past it).
    fn readable_at_least(&self, inputs: &BTreeSet<GlobalId>, ts: Timestamp) -> Result<Timestamp> {
        let mut at = ts;
        for id in inputs {
            let (since, _) = self.storage.frontiers(*id)?;
            if let Some(s) = since.as_option() {
                at = at.max(*s);
            }
        }
        Ok(at)
    }

    /// Wait until every materialized view among `inputs` is complete at
    /// `ts`, then fail if one holds an error (its read would be wrong).
    async fn await_views(&self, inputs: &BTreeSet<GlobalId>, ts: Timestamp) -> Result<()> {
        for id in inputs {
            let Some(state) = self.compute.dataflow(*id) else {
                // A table read at a time it has not reached yet (a query
                // that also reads a view whose next refresh is ahead).
                self.storage.wait_for_upper(*id, ts).await?;
                continue;
            };
            loop {
                if let Some(failure) = state.failure() {
                    return Err(AdapterError::Dataflow(failure));
                }
                let (_, upper) = self.storage.frontiers(*id)?;
                if upper.as_option().is_none_or(|u| *u > ts) {
                    break;
                }
                // The upper watch wakes us; the timer re-checks for failure.
                let _ = tokio::time::timeout(
                    std::time::Duration::from_millis(100),
                    self.storage.wait_for_upper(*id, ts),
                )
                .await;
            }
        }
        // Errors of the view at `ts` are in its shard: reading it fails.
        Ok(())
    }

    /// Pick a read time for `inputs` and hold them there.
    fn choose_and_hold(
        &self,
        inputs: &BTreeSet<GlobalId>,
        isolation: Isolation,
    ) -> Result<(Timestamp, Vec<ReadHold>)> {
        let mut ts = self.storage.read_ts();
        if isolation == Isolation::Serializable {
            // Any readable time will do: the freshest every input has
            // already completed, so the read never waits.
            for id in inputs {
                let (_, upper) = self.storage.frontiers(*id)?;
                if let Some(u) = upper.as_option() {
                    ts = ts.min(u.saturating_sub(1));
                }
            }
        }
        // Never below an input's since (a scheduled view has no contents
        // before its first refresh: such a read waits for it).
        self.hold_at_least(inputs, ts)
    }

    /// Hold `inputs` readable at `ts`, or say which one no longer is.
    fn hold_at(&self, inputs: &BTreeSet<GlobalId>, ts: Timestamp) -> Result<Vec<ReadHold>> {
        let mut holds = Vec::with_capacity(inputs.len());
        for id in inputs {
            match self.storage.acquire_read_hold(*id, ts) {
                Ok(h) => holds.push(h),
                Err(freshet_storage::StorageError::InvalidReadTime { .. }) => {
                    return Err(AdapterError::data(
                        "22000",
                        format!(
                            "Timestamp ({ts}) is not valid for all inputs: {}",
                            self.unreadable_inputs(inputs, ts)
                        ),
                    ));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(holds)
    }

    fn describe(&self, id: GlobalId) -> String {
        self.catalog_state()
            .full_name(id)
            .map(|(d, s, i)| format!("{d}.{s}.{i}"))
            .unwrap_or_else(|| id.to_string())
    }

    /// Every collection in the schemas `inputs` live in: what a
    /// transaction may read after its first query.
    fn timedomain(&self, inputs: &BTreeSet<GlobalId>) -> BTreeSet<GlobalId> {
        let catalog = self.catalog_state();
        let schemas: BTreeSet<GlobalId> = inputs
            .iter()
            .filter_map(|id| catalog.item(*id).map(|i| i.schema_id))
            .collect();
        let mut out: BTreeSet<GlobalId> = catalog
            .items()
            .filter(|i| schemas.contains(&i.schema_id) && i.kind.has_collection())
            .map(|i| i.id)
            .collect();
        out.extend(inputs);
        out
    }

    fn reader(&self, session: &Session) -> Arc<QueryReader> {
        Arc::new(QueryReader {
            storage: Arc::clone(&self.storage),
            compute: Arc::clone(&self.compute),
            catalog: self.catalog_state(),
            database: session.database.clone(),
        })
    }

    /// Run a planned query at `ts` (holds must already protect its inputs).
    async fn run_at(
        &self,
        session: &Session,
        q: &QueryPlan,
        ts: Timestamp,
    ) -> Result<Vec<RecordBatch>> {
        self.await_views(&q.inputs, ts).await?;
        q.binding
            .bind(ReadContext {
                as_of: ts,
                reader: self.reader(session),
            })
            .map_err(AdapterError::Internal)?;
        Ok(self.queries.collect(&session.df, q.logical.clone()).await?)
    }

    /// Run a query for a session, inside its transaction if it has one.
    async fn read(&self, session: &mut Session, q: &QueryPlan) -> Result<Vec<RecordBatch>> {
        let (ts, holds) = self.read_time(session, &q.inputs)?;
        let result = self.run_at(session, q, ts).await;
        drop(holds);
        result
    }

    /// The time a read of `inputs` runs at, with holds protecting them
    /// there: the transaction's time (its holds live with it), or a new
    /// time whose holds the caller releases when done.
    fn read_time(
        &self,
        session: &mut Session,
        inputs: &BTreeSet<GlobalId>,
    ) -> Result<(Timestamp, Vec<ReadHold>)> {
        if session.status != TxnStatus::InBlock {
            return self.choose_and_hold(inputs, session.isolation());
        }
        if !session.txn.writes.is_empty() {
            return Err(AdapterError::InvalidTransactionState(
                "a transaction that has written may not read; commit the writes first".into(),
            ));
        }
        let ts = match &session.txn.read {
            Some(read) => {
                if let Some(outside) = inputs.iter().find(|i| !read.read_set.contains(i)) {
                    return Err(AdapterError::InvalidTransactionState(format!(
                        "transactions can only read objects in the schemas of their first query; {} is outside them",
                        self.describe(*outside)
                    )));
                }
                read.ts
            }
            None => {
                let read_set = self.timedomain(inputs);
                let (ts, holds) = self.choose_and_hold(&read_set, session.isolation())?;
                session.txn.read = Some(TxnRead {
                    ts,
                    read_set,
                    holds,
                });
                ts
            }
        };
        Ok((ts, Vec::new()))
    }

    /// Answer a query from an index: at the time (and under the holds) any
    /// read of its object would use, once the index is complete there.
    async fn peek(&self, session: &mut Session, peek: &PeekPlan) -> Result<RecordBatch> {
        let (ts, holds) = self.read_time(session, &peek.inputs)?;
        tracing::debug!(index = %peek.index, ts, keyed = peek.key.is_some(), "peek");
        let pending = match self.compute.peek(peek.index, ts, peek.key.clone()) {
            // A serializable read may pick a time the index has compacted
            // past; outside a transaction any later time serves it (the
            // inputs' holds at `ts` protect later times too).
            Err(freshet_compute::ComputeError::NotReadable { since, .. })
                if session.status != TxnStatus::InBlock =>
            {
                self.compute.peek(peek.index, since, peek.key.clone())?
            }
            other => other?,
        };
        let answer = tokio::time::timeout(PEEK_TIMEOUT, pending.wait())
            .await
            .map_err(|_| AdapterError::Compute(freshet_compute::ComputeError::PeekTimeout))??;
        drop(holds);
        answer.map_err(AdapterError::Dataflow)
    }

    async fn explain(
        &self,
        session: &mut Session,
        kind: ExplainKind,
        q: &QueryPlan,
    ) -> Result<ExecuteResponse> {
        let lines: Vec<String> = match kind {
            ExplainKind::Plan => {
                let optimized = session.df.optimize(&q.logical)?;
                let text = self.humanize_ids(&optimized.display_indent().to_string());
                let mut lines = vec!["Optimized logical plan:".to_string()];
                lines.extend(text.lines().map(|l| format!("  {l}")));
                lines
            }
            ExplainKind::Timestamp => {
                let isolation = session.isolation();
                let (ts, holds) = match &session.txn.read {
                    Some(r) if session.status == TxnStatus::InBlock => (r.ts, vec![]),
                    _ => self.choose_and_hold(&q.inputs, isolation)?,
                };
                let mut lines = vec![
                    format!("                query timestamp: {ts}"),
                    format!("                      isolation: {}", isolation.name()),
                    format!(
                        "          oracle read timestamp: {}",
                        self.storage.read_ts()
                    ),
                ];
                let all_holds = self.storage.read_holds();
                for id in &q.inputs {
                    let (since, upper) = self.storage.frontiers(*id)?;
                    let held: Vec<String> = all_holds
                        .iter()
                        .filter(|h| h.id == *id)
                        .map(|h| format!("{}x{}", h.count, h.time))
                        .collect();
                    lines.push(format!("input {} ({id}):", self.describe(*id)));
                    lines.push(format!(
                        "                          since: {:?}",
                        since.elements()
                    ));
                    lines.push(format!(
                        "                          upper: {:?}",
                        upper.elements()
                    ));
                    lines.push(format!(
                        "                     read holds: [{}]",
                        held.join(", ")
                    ));
                }
                drop(holds);
                lines
            }
        };
        Ok(ExecuteResponse::Rows {
            desc: RelationDesc::new(vec![freshet_repr::ColumnDesc {
                name: "QUERY PLAN".into(),
                ty: freshet_repr::PgType::Text,
                nullable: false,
            }]),
            batches: vec![
                RecordBatch::try_new(
                    RelationDesc::new(vec![freshet_repr::ColumnDesc {
                        name: "QUERY PLAN".into(),
                        ty: freshet_repr::PgType::Text,
                        nullable: false,
                    }])
                    .arrow_schema(),
                    vec![Arc::new(arrow::array::StringArray::from(lines))],
                )
                .map_err(|e| AdapterError::Internal(e.to_string()))?,
            ],
            tag: "EXPLAIN".into(),
        })
    }

    /// Replace id-form references (`[id].u5`) in plan text by names.
    fn humanize_ids(&self, text: &str) -> String {
        freshet_planner::resolve::humanize_ids(&self.catalog_state(), text)
    }

    fn table_name(&self, id: GlobalId) -> String {
        self.catalog_state()
            .item(id)
            .map(|i| i.name.clone())
            .unwrap_or_else(|| id.to_string())
    }

    /// Rows as batches of the table's exact schema, checked.
    fn table_rows(
        &self,
        table: GlobalId,
        desc: &RelationDesc,
        batches: Vec<RecordBatch>,
    ) -> Result<Vec<RecordBatch>> {
        let name = self.table_name(table);
        batches
            .into_iter()
            .filter(|b| b.num_rows() > 0)
            .map(|b| check_rows(&name, desc, b))
            .collect()
    }

    async fn write(&self, session: &mut Session, w: WritePlan) -> Result<ExecuteResponse> {
        if session.status == TxnStatus::InBlock {
            if w.kind != WriteKind::Insert || w.read_then_write {
                return Err(AdapterError::InvalidTransactionState(
                    "only INSERT ... VALUES may run inside a transaction block; UPDATE, DELETE and INSERT ... SELECT run on their own".into(),
                ));
            }
            if session.txn.read.is_some() {
                return Err(AdapterError::InvalidTransactionState(
                    "a transaction that has read may not write".into(),
                ));
            }
            let ts = self.storage.read_ts();
            let rows = self.run_at(session, &w.source, ts).await?;
            let rows = self.table_rows(w.table, &w.table_desc, rows)?;
            let count: usize = rows.iter().map(|b| b.num_rows()).sum();
            for b in &rows {
                session.txn.writes.push(TableWrite {
                    id: w.table,
                    updates: write_batch(b, 1)?,
                });
            }
            return self.finish_write(session, &w, rows, ts, count).await;
        }
        let lock = if w.read_then_write {
            Some(self.table_lock(w.table).lock_owned().await)
        } else {
            None
        };
        let (ts, holds) = self.choose_and_hold(&w.source.inputs, Isolation::StrictSerializable)?;
        let rows = self.run_at(session, &w.source, ts).await?;
        drop(holds);
        let n = w.table_desc.arity();
        let (writes, written, count) = match w.kind {
            WriteKind::Insert => {
                let rows = self.table_rows(w.table, &w.table_desc, rows)?;
                let writes = rows
                    .iter()
                    .map(|b| {
                        Ok(TableWrite {
                            id: w.table,
                            updates: write_batch(b, 1)?,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                let count = rows.iter().map(|b| b.num_rows()).sum();
                (writes, rows, count)
            }
            WriteKind::Delete => {
                let rows = self.table_rows(w.table, &w.table_desc, rows)?;
                let writes = rows
                    .iter()
                    .map(|b| {
                        Ok(TableWrite {
                            id: w.table,
                            updates: write_batch(b, -1)?,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                let count = rows.iter().map(|b| b.num_rows()).sum();
                (writes, rows, count)
            }
            WriteKind::Update => {
                let mut old = Vec::new();
                let mut new = Vec::new();
                for b in rows.into_iter().filter(|b| b.num_rows() > 0) {
                    old.push(
                        b.project(&(0..n).collect::<Vec<_>>())
                            .map_err(|e| AdapterError::Internal(e.to_string()))?,
                    );
                    new.push(
                        b.project(&(n..2 * n).collect::<Vec<_>>())
                            .map_err(|e| AdapterError::Internal(e.to_string()))?,
                    );
                }
                let old = self.table_rows(w.table, &w.table_desc, old)?;
                let new = self.table_rows(w.table, &w.table_desc, new)?;
                let mut writes = Vec::new();
                for b in &old {
                    writes.push(TableWrite {
                        id: w.table,
                        updates: write_batch(b, -1)?,
                    });
                }
                for b in &new {
                    writes.push(TableWrite {
                        id: w.table,
                        updates: write_batch(b, 1)?,
                    });
                }
                let count = new.iter().map(|b| b.num_rows()).sum();
                (writes, new, count)
            }
        };
        let commit_ts = if writes.is_empty() {
            ts
        } else {
            self.commit_writes(writes, lock).await?
        };
        self.finish_write(session, &w, written, commit_ts, count)
            .await
    }

    async fn finish_write(
        &self,
        session: &Session,
        w: &WritePlan,
        written: Vec<RecordBatch>,
        ts: Timestamp,
        count: usize,
    ) -> Result<ExecuteResponse> {
        let (tag_prefix, tag) = match w.kind {
            WriteKind::Insert => ("INSERT 0", format!("INSERT 0 {count}")),
            WriteKind::Update => ("UPDATE", format!("UPDATE {count}")),
            WriteKind::Delete => ("DELETE", format!("DELETE {count}")),
        };
        match &w.returning {
            None => Ok(ExecuteResponse::Command(tag)),
            Some(r) => {
                r.binding
                    .bind_rows(written)
                    .map_err(AdapterError::Internal)?;
                let (_, holds) = self.choose_and_hold(&r.inputs, Isolation::StrictSerializable)?;
                let batches = self
                    .run_at(session, r, ts.max(self.storage.read_ts()))
                    .await?;
                drop(holds);
                Ok(ExecuteResponse::Rows {
                    desc: r.desc.clone(),
                    batches,
                    tag: tag_prefix.into(),
                })
            }
        }
    }

    /// Finish a `COPY ... FROM STDIN` with the data received.
    pub async fn copy_in(&self, session: &mut Session, copy: PendingCopy) -> Result<usize> {
        let result = self.copy_in_inner(session, copy).await;
        if result.is_err() && session.status == TxnStatus::InBlock {
            session.status = TxnStatus::Failed;
        }
        result
    }

    async fn copy_in_inner(&self, session: &mut Session, copy: PendingCopy) -> Result<usize> {
        let PendingCopy {
            plan,
            data,
            too_large,
        } = copy;
        if let Some(limit) = too_large {
            return Err(AdapterError::data(
                "53200",
                format!(
                    "COPY data exceeds the memory limit of {} (--query-memory-limit)",
                    crate::query_exec::human_bytes(limit)
                ),
            ));
        }
        let CopyFromPlan {
            table,
            table_desc,
            columns,
            defaults,
            options,
        } = plan;
        let rows = crate::copy::parse_rows(&data, &options, columns.len())?;
        drop(data);
        let default_row = self
            .run_at(session, &defaults, self.storage.read_ts())
            .await?;
        let default_row = match default_row.into_iter().find(|b| b.num_rows() > 0) {
            Some(b) => check_rows_unchecked(&table_desc, b)?,
            None => RecordBatch::new_empty(crate::values::unchecked_schema(&table_desc)),
        };
        let mut writes = Vec::new();
        let mut count = 0;
        for chunk in rows.chunks(64 * 1024) {
            let batch = crate::copy::rows_to_batch(chunk, &table_desc, &columns, &default_row)?;
            let batch = check_rows(&self.table_name(table), &table_desc, batch)?;
            count += batch.num_rows();
            writes.push(TableWrite {
                id: table,
                updates: write_batch(&batch, 1)?,
            });
        }
        if session.status == TxnStatus::InBlock {
            if session.txn.read.is_some() {
                return Err(AdapterError::InvalidTransactionState(
                    "a transaction that has read may not write".into(),
                ));
            }
            session.txn.writes.extend(writes);
        } else if !writes.is_empty() {
            self.commit_writes(writes, None).await?;
        }
        Ok(count)
    }
}

/// The defaults row already has the table's types; give it the table's
/// schema, every column nullable: a column without a default is NULL there
/// even when it is NOT NULL (the rows built from it are checked after).
fn check_rows_unchecked(desc: &RelationDesc, batch: RecordBatch) -> Result<RecordBatch> {
    RecordBatch::try_new(
        crate::values::unchecked_schema(desc),
        batch.columns().to_vec(),
    )
    .map_err(|e| AdapterError::Internal(e.to_string()))
}

/// Move up to `want` rows from the front of `rows` into `out`; returns how
/// many moved.
fn take_rows(
    rows: &mut std::collections::VecDeque<RecordBatch>,
    want: usize,
    out: &mut Vec<RecordBatch>,
) -> usize {
    let mut moved = 0;
    while moved < want {
        let Some(batch) = rows.pop_front() else {
            break;
        };
        let n = batch.num_rows();
        if moved + n <= want {
            moved += n;
            out.push(batch);
        } else {
            let k = want - moved;
            out.push(batch.slice(0, k));
            rows.push_front(batch.slice(k, n - k));
            moved = want;
        }
    }
    moved
}

fn is_txn_end(stmt: &Statement) -> bool {
    use datafusion::sql::sqlparser::ast::Statement as S;
    matches!(stmt, Statement::Sql(s) if matches!(s.as_ref(), S::Commit { .. } | S::Rollback { .. }))
}

fn parse_isolation(level: &str) -> Isolation {
    match level {
        "strict serializable" => Isolation::StrictSerializable,
        _ => Isolation::Serializable,
    }
}

fn show_variable(session: &Session, name: &str) -> Result<ExecuteResponse> {
    use freshet_repr::{ColumnDesc, PgType};
    let text = |n: &str| ColumnDesc {
        name: n.into(),
        ty: PgType::Text,
        nullable: false,
    };
    if name == "all" {
        let all = session.vars.all();
        let desc = RelationDesc::new(vec![text("name"), text("setting")]);
        let batch = RecordBatch::try_new(
            desc.arrow_schema(),
            vec![
                Arc::new(arrow::array::StringArray::from(
                    all.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>(),
                )),
                Arc::new(arrow::array::StringArray::from(
                    all.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>(),
                )),
            ],
        )
        .map_err(|e| AdapterError::Internal(e.to_string()))?;
        return Ok(ExecuteResponse::Rows {
            desc,
            batches: vec![batch],
            tag: "SHOW".into(),
        });
    }
    let value = session
        .vars
        .get(name)
        .ok_or_else(|| AdapterError::UnknownVariable(name.to_string()))?;
    let display = session
        .vars
        .all()
        .into_iter()
        .map(|(n, _)| n)
        .find(|n| n.eq_ignore_ascii_case(name))
        .unwrap_or(name)
        .to_string();
    let desc = RelationDesc::new(vec![text(&display)]);
    let batch = RecordBatch::try_new(
        desc.arrow_schema(),
        vec![Arc::new(arrow::array::StringArray::from(vec![value]))],
    )
    .map_err(|e| AdapterError::Internal(e.to_string()))?;
    Ok(ExecuteResponse::Rows {
        desc,
        batches: vec![batch],
        tag: "SHOW".into(),
    })
}

/// A one-column `QUERY PLAN` result of `lines`.
fn query_plan_rows(lines: Vec<String>) -> Result<ExecuteResponse> {
    let desc = RelationDesc::new(vec![freshet_repr::ColumnDesc {
        name: "QUERY PLAN".into(),
        ty: freshet_repr::PgType::Text,
        nullable: false,
    }]);
    let batch = RecordBatch::try_new(
        desc.arrow_schema(),
        vec![Arc::new(arrow::array::StringArray::from(lines))],
    )
    .map_err(|e| AdapterError::Internal(e.to_string()))?;
    Ok(ExecuteResponse::Rows {
        desc,
        batches: vec![batch],
        tag: "EXPLAIN".into(),
    })
}

/// How long a peek waits for the workers before failing (statement_timeout
/// usually ends it sooner).
pub(crate) const PEEK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

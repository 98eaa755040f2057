//! The coordinator: the one place a statement is planned and carried out.
//!
//! [`Coordinator`] owns the catalog, storage and compute handles; this file
//! opens them (boot applies the whole catalog) and plans statements. The
//! rest is one room per concern, as in Materialize's `adapter/coord`:
//!
//! - `sequence`: sends each planned statement to the code for its kind;
//! - `ddl`: catalog transactions, with the written plans they commit;
//!   `add_key`: a key added to a table that holds rows;
//! - `implications`: what a committed diff installs (boot runs the same);
//! - `timestamps`: choosing read times and taking read holds;
//! - `read`: queries, `AS OF` and index peeks; `explain`: EXPLAIN, SHOW;
//! - `write`: INSERT/UPDATE/DELETE, key checks and the hand-off to group
//!   commit; `copy_from`: COPY FROM STDIN;
//! - `cursors`: SUBSCRIBE, DECLARE and FETCH;
//! - `temp`: each session's schema of temporary tables;
//! - `response`: what the front end gets back.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use datafusion::common::ParamValues;
use freshet_catalog::{Catalog, CatalogState};
use freshet_compute::ComputeController;
use freshet_planner::parser::Statement;
use freshet_planner::{Plan, StatementContext, plan_statement};
use freshet_repr::GlobalId;
use freshet_storage::{Storage, StorageConfig, open_local};
use parking_lot::{Mutex, RwLock};
use pgwire::api::ConnectionManager;

use self::ddl::Prepared;
use crate::error::{AdapterError, Result};
use crate::introspection::QueryReader;
use crate::query_exec::{AbortOnDrop, QueryExecutor};
use crate::session::{Session, TxnStatus};
use crate::subscribe::Subscribes;

mod add_key;
mod connections;
mod copy_from;
mod cursors;
mod ddl;
mod explain;
mod implications;
mod read;
mod response;
mod sequence;
mod sequences;
mod sinks;
mod temp;
mod templates;
mod timestamps;
mod write;

pub use copy_from::{CopyFill, MakingChunk};
pub use read::{ConstantAnswers, PreparedPlan};
pub use response::{ExecCtx, ExecuteResponse, Notice, command_tag};
pub use temp::TempSchemaGuard;
pub use templates::Templates;

/// Shared server state.
pub struct Coordinator {
    catalog: tokio::sync::Mutex<Catalog>,
    state: RwLock<Arc<CatalogState>>,
    /// Storage.
    pub storage: Arc<Storage>,
    /// Compute: the timely workers maintaining materialized views.
    pub compute: Arc<ComputeController>,
    /// The ingestions of sources (started and stopped by implications).
    pub sources: Arc<freshet_sources::Sources>,
    /// The exports of sinks (started and stopped by implications).
    pub sinks: Arc<freshet_sinks::Sinks>,
    base_df: datafusion::execution::SessionState,
    /// Per table: held alone by writes that read the table before they
    /// write it (from the read to the commit), shared by keyed writes
    /// (which lock their key's stripe besides).
    table_locks: Mutex<HashMap<GlobalId, Arc<tokio::sync::RwLock<()>>>>,
    /// Cancel-request registry (pgwire).
    pub connections: Arc<ConnectionManager>,
    /// Running subscribes, ended when an input is dropped.
    pub subscribes: Arc<Subscribes>,
    /// The next transient (subscribe) dataflow id.
    next_transient: std::sync::atomic::AtomicU64,
    /// The number of the next session's temporary schema.
    temp_sessions: std::sync::atomic::AtomicU64,
    /// Plans boot made again from SQL (their written format was another
    /// build's), committed back to the catalog once boot has applied it.
    replanned: Mutex<Vec<(GlobalId, freshet_catalog::WrittenPlan)>>,
    /// Key sets of tables with a primary key, checked by every commit.
    keys: Arc<crate::keys::KeySets>,
    /// Rows of tables with a primary key, by key, for keyed writes.
    keyed_rows: crate::keyed_rows::KeyedRows,
    /// Where queries' physical plans run, and their memory budget.
    pub queries: QueryExecutor,
    /// Values of sequences (`serial` and identity columns', `CREATE
    /// SEQUENCE`'s).
    sequences: Arc<sequences::Sequences>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator").finish_non_exhaustive()
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
        let mut base_df = freshet_planner::query::engine::new_session_state(parallelism);
        let sequences = Arc::new(sequences::Sequences::default());
        {
            use datafusion::logical_expr::registry::FunctionRegistry;
            base_df.register_udf(Arc::new(freshet_planner::query::sequences::nextval(
                Arc::clone(&sequences) as _,
            )))?;
        }
        let compute = Arc::new(ComputeController::start(workers, Arc::clone(&storage))?);
        let catalog = Catalog::open(fence)?;
        let state = catalog.state();
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            AdapterError::Internal("the coordinator must open inside a tokio runtime".into())
        })?;
        let sources = Arc::new(freshet_sources::Sources::new(
            Arc::clone(&storage),
            runtime.clone(),
        ));
        let sinks = Arc::new(freshet_sinks::Sinks::new(
            Arc::clone(&storage),
            runtime,
            freshet_sinks::SinkConfig::default(),
        ));
        let coord = Coordinator {
            catalog: tokio::sync::Mutex::new(catalog),
            state: RwLock::new(Arc::clone(&state)),
            storage,
            compute,
            sources,
            sinks,
            base_df,
            table_locks: Mutex::new(HashMap::new()),
            connections: Arc::new(ConnectionManager::new()),
            subscribes: Arc::new(Subscribes::default()),
            next_transient: std::sync::atomic::AtomicU64::new(1),
            temp_sessions: std::sync::atomic::AtomicU64::new(1),
            replanned: Mutex::new(Vec::new()),
            keys: Arc::default(),
            keyed_rows: Default::default(),
            queries,
            sequences: Arc::clone(&sequences),
        };
        // Boot is the same function as DDL: the whole catalog as one diff.
        coord.apply(
            &state.as_diff_from_empty(),
            Vec::new(),
            Prepared::new(),
            true,
        )?;
        coord.storage.finish_boot()?;
        let mut coord = coord;
        coord.write_back_plans()?;
        tracing::info!(
            items = state.items().count(),
            epoch = coord.storage.epoch(),
            "catalog applied; ready"
        );
        let coord = Arc::new(coord);
        let _ = sequences.coord.set(Arc::downgrade(&coord));
        Ok(coord)
    }

    /// The current catalog version.
    pub fn catalog_state(&self) -> Arc<CatalogState> {
        Arc::clone(&self.state.read())
    }

    /// The catalog as `session` sees it: with its transaction block's DDL
    /// applied, if it has run any.
    pub fn catalog_for(&self, session: &Session) -> Arc<CatalogState> {
        match &session.txn.ddl {
            Some(ddl) => ddl.state(),
            None => self.catalog_state(),
        }
    }

    /// The DataFusion state new sessions start from.
    pub fn base_session_state(&self) -> &datafusion::execution::SessionState {
        &self.base_df
    }

    /// A new session's own sequence functions (`nextval` remembering what
    /// it returned, `currval`, `lastval`, `setval`).
    pub fn session_sequence_functions(&self) -> Vec<datafusion::logical_expr::ScalarUDF> {
        freshet_planner::query::sequences::session_functions(
            Arc::clone(&self.sequences) as _,
            Arc::default(),
        )
    }

    /// Execute one statement for a session.
    pub async fn execute(
        &self,
        session: &mut Session,
        stmt: &Statement,
        params: Option<&ParamValues>,
        ctx: &mut ExecCtx,
    ) -> Result<ExecuteResponse> {
        let mut result = self.execute_inner(session, stmt, params, ctx).await;
        if let Err(e) = session.settle_settings(result.is_ok()) {
            result = Err(e);
        }
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
    /// ([`freshet_planner::interrupt`]). A short `INSERT ... VALUES` of
    /// constants is planned here: its plan is cheaper than the hand-off.
    pub async fn plan(
        &self,
        session: &Session,
        stmt: &Statement,
        params: Option<&ParamValues>,
    ) -> Result<Plan> {
        if freshet_planner::statements::insert_values::plans_inline(stmt) {
            let catalog = self.catalog_for(session);
            let info = session.info();
            let cx = StatementContext {
                state: &session.df,
                catalog: &catalog,
                session: &info,
                params,
            };
            return Ok(plan_statement(&cx, stmt)?);
        }
        let stmt = stmt.clone();
        self.plan_blocking(session, params, move |cx| plan_statement(cx, &stmt))
            .await
    }

    /// Run `planning` for `session` on a blocking thread (see
    /// [`Coordinator::plan`]), stopped at its next optimizer rule if this
    /// future is dropped.
    pub(super) async fn plan_blocking<T: Send + 'static>(
        &self,
        session: &Session,
        params: Option<&ParamValues>,
        planning: impl FnOnce(&StatementContext) -> freshet_planner::error::Result<T> + Send + 'static,
    ) -> Result<T> {
        let catalog = self.catalog_for(session);
        let info = session.info();
        let state = Arc::clone(&session.df);
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
            freshet_planner::interrupt::sync_scope(flag, || planning(&cx))
        });
        // Dropped unfinished (timeout, cancel, disconnect): the stop flag
        // ends the abandoned plan at its next rule.
        let mut planning = AbortOnDrop(planning, stop);
        match (&mut planning.0).await {
            Ok(plan) => Ok(plan?),
            Err(e) if e.is_panic() => Err(AdapterError::Internal(format!(
                "planning panicked: {}",
                crate::error::panic_message(&e.into_panic())
            ))),
            Err(e) => Err(AdapterError::Internal(format!("planning failed: {e}"))),
        }
    }

    fn describe(&self, id: GlobalId) -> String {
        self.catalog_state()
            .full_name(id)
            .map(|(d, s, i)| format!("{d}.{s}.{i}"))
            .unwrap_or_else(|| id.to_string())
    }

    fn reader(&self, session: &Session) -> Arc<QueryReader> {
        Arc::new(QueryReader {
            storage: Arc::clone(&self.storage),
            compute: Arc::clone(&self.compute),
            sources: Arc::clone(&self.sources),
            sinks: Arc::clone(&self.sinks),
            catalog: self.catalog_for(session),
            database: session.database.clone(),
            vars: (session.vars.clone(), session.reset_vars.clone()),
            cursors: session
                .txn
                .cursors
                .iter()
                .map(|(name, c)| {
                    let micros = c
                        .created
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
                    (name.clone(), c.statement.clone(), micros)
                })
                .collect(),
            created: session.txn.created(),
            pending: session.txn.writes.iter().fold(
                std::collections::BTreeMap::new(),
                |mut by_table, w| {
                    by_table
                        .entry(w.id)
                        .or_insert_with(Vec::new)
                        .push(w.updates.clone());
                    by_table
                },
            ),
        })
    }

    /// Replace id-form references (`[id].u5`) in plan text by names.
    fn humanize_ids(&self, text: &str) -> String {
        freshet_planner::query::resolve::humanize_ids(&self.catalog_state(), text)
    }

    fn table_name(&self, id: GlobalId) -> String {
        self.catalog_state()
            .item(id)
            .map(|i| i.name.clone())
            .unwrap_or_else(|| id.to_string())
    }
}

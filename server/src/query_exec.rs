//! Running DataFusion plans where they cannot starve the front end, within
//! a memory budget, and only for as long as somebody waits for them.
//!
//! A query's operators are CPU-bound and yield rarely; run on the runtime
//! that serves connections, one large sort would delay every other
//! session's statements, new connections and even CancelRequests. Plans
//! therefore run on a runtime of their own (as DataFusion recommends for
//! servers), and the statement awaits them there: dropping that wait (a
//! `statement_timeout`, a CancelRequest, a client that went away) aborts the
//! query's task, which drops its streams and stops the operators at their
//! next batch.
//!
//! Memory is bounded twice: each query draws from its own pool of
//! `per_query` bytes, which draws from one server-wide pool for all
//! queries. Operators that can spill (sorts, aggregations) spill to disk
//! when a pool refuses them; others, and a result that outgrows the
//! budget, fail with 53200 (`ResourcesExhausted`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use arrow::array::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::memory_pool::{
    GreedyMemoryPool, MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::execution::{SessionState, TaskContext};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use freshet_planner::interrupt;
use futures::StreamExt;

/// How much memory queries may use.
#[derive(Clone, Copy, Debug)]
pub struct QueryLimits {
    /// Bytes one query may hold (operators' state and its result).
    pub per_query: usize,
    /// Bytes all running queries together may hold.
    pub total: usize,
    /// Bytes of rows a `COPY FROM STDIN` holds before writing them to a
    /// staged part (the size of the parts a load writes).
    pub copy_part: usize,
}

impl Default for QueryLimits {
    fn default() -> Self {
        QueryLimits {
            per_query: 2 << 30,
            total: 8 << 30,
            copy_part: 64 << 20,
        }
    }
}

/// Runs queries' physical plans (see the module documentation).
pub struct QueryExecutor {
    handle: tokio::runtime::Handle,
    _runtime: BackgroundRuntime,
    server_pool: Arc<dyn MemoryPool>,
    per_query: usize,
    copy_part: usize,
}

impl std::fmt::Debug for QueryExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryExecutor")
            .field("per_query", &self.per_query)
            .field("reserved", &self.server_pool.reserved())
            .finish_non_exhaustive()
    }
}

impl QueryExecutor {
    /// A runtime of `threads` threads (each with a stack of `stack_bytes`)
    /// and memory pools sized by `limits`.
    pub fn new(limits: QueryLimits, threads: usize, stack_bytes: usize) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("freshet-query")
            .thread_stack_size(stack_bytes)
            .enable_all()
            .build()?;
        Ok(QueryExecutor {
            handle: runtime.handle().clone(),
            _runtime: BackgroundRuntime(Some(runtime)),
            server_pool: Arc::new(GreedyMemoryPool::new(limits.total)),
            per_query: limits.per_query.min(limits.total),
            copy_part: limits.copy_part.max(1),
        })
    }

    /// Bytes one query may use.
    pub fn per_query(&self) -> usize {
        self.per_query
    }

    /// Bytes of rows a `COPY` holds before staging them (see
    /// [`QueryLimits::copy_part`]).
    pub fn copy_part(&self) -> usize {
        self.copy_part
    }

    /// Bytes all running queries hold now.
    pub fn reserved(&self) -> usize {
        self.server_pool.reserved()
    }

    /// Plan `logical` physically, execute it to completion and return its
    /// batches, all on the query runtime (DataFusion's optimizers and
    /// physical planner can take seconds over a large statement). Dropping
    /// the returned future stops the query, planning included
    /// ([`freshet_planner::interrupt`]).
    pub async fn collect(
        &self,
        state: &Arc<SessionState>,
        logical: LogicalPlan,
    ) -> Result<Vec<RecordBatch>> {
        let (runner, pool) = self.runner(state);
        let stop = Arc::clone(&runner.stop);
        let handle = self.handle.spawn(async move {
            let plan = runner.physical(runner.rewritten(logical)?).await?;
            let plan = stoppable(plan, &runner.stop)?;
            let result = MemoryConsumer::new("query result").register(&pool);
            let mut stream = datafusion::physical_plan::execute_stream(plan, runner.task)?;
            let mut batches = Vec::new();
            while let Some(batch) = stream.next().await {
                let batch = batch?;
                reserve_result(&result, &batch)?;
                batches.push(batch);
            }
            Ok(batches)
        });
        finish(AbortOnDrop(handle, stop)).await
    }

    /// The physical plan [`Self::collect`] would run for `logical`, as
    /// `EXPLAIN` shows it: the scans it names are bound to the query's
    /// time, so each says how many of its collection's parts it reads.
    /// (Subqueries the optimizer could not decorrelate are evaluated, as
    /// planning needs their values.)
    pub async fn explain(&self, state: &Arc<SessionState>, logical: LogicalPlan) -> Result<String> {
        let (runner, _pool) = self.runner(state);
        let stop = Arc::clone(&runner.stop);
        let handle = self.handle.spawn(async move {
            let plan = runner.physical(runner.rewritten(logical)?).await?;
            Ok(datafusion::physical_plan::displayable(plan.as_ref())
                .indent(false)
                .to_string())
        });
        finish(AbortOnDrop(handle, stop)).await
    }

    /// A plan runner with a pool of its own, drawing from the server's.
    fn runner(&self, state: &Arc<SessionState>) -> (PlanRunner, Arc<dyn MemoryPool>) {
        let pool: Arc<dyn MemoryPool> = Arc::new(QueryPool {
            server: Arc::clone(&self.server_pool),
            limit: self.per_query,
            used: AtomicUsize::new(0),
        });
        let base = state.runtime_env();
        let env = Arc::new(RuntimeEnv {
            memory_pool: Arc::clone(&pool),
            disk_manager: Arc::clone(&base.disk_manager),
            cache_manager: Arc::clone(&base.cache_manager),
            object_store_registry: Arc::clone(&base.object_store_registry),
        });
        let runner = PlanRunner {
            task: Arc::new(TaskContext::from(state.as_ref()).with_runtime(env)),
            state: Arc::clone(state),
            stop: Arc::new(AtomicBool::new(false)),
        };
        (runner, pool)
    }
}

/// The outcome of a task on the query runtime, a panic included.
async fn finish<T>(mut task: AbortOnDrop<Result<T>>) -> Result<T> {
    match (&mut task.0).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => Err(DataFusionError::Internal(format!(
            "query panicked: {}",
            crate::error::panic_message(&e.into_panic())
        ))),
        Err(e) => Err(DataFusionError::Internal(format!("query task failed: {e}"))),
    }
}

/// What a query's plan, and every subquery evaluated for it, runs with.
struct PlanRunner {
    state: Arc<SessionState>,
    task: Arc<TaskContext>,
    stop: Arc<AtomicBool>,
}

impl PlanRunner {
    /// `logical` with long literal lists rewritten (see
    /// [`freshet_planner::rewrites::literal_sets`]).
    fn rewritten(&self, logical: LogicalPlan) -> Result<LogicalPlan> {
        interrupt::sync_scope(Arc::clone(&self.stop), || {
            freshet_planner::rewrites::literal_sets::literal_sets(logical)
        })
    }

    /// Optimize `logical`, evaluate the correlated subqueries the
    /// optimizer could not decorrelate ([`crate::correlated`]), and plan
    /// the result physically.
    async fn physical(&self, logical: LogicalPlan) -> Result<Arc<dyn ExecutionPlan>> {
        use crate::correlated::{Which, evaluate};
        let logical = evaluate(self, logical, Which::Recursive).await?;
        let optimized =
            interrupt::sync_scope(Arc::clone(&self.stop), || self.state.optimize(&logical))?;
        let optimized = evaluate(self, optimized, Which::All).await?;
        let planning = self
            .state
            .query_planner()
            .create_physical_plan(&optimized, self.state.as_ref());
        interrupt::scope(Arc::clone(&self.stop), planning).await
    }
}

impl crate::correlated::RunPlan for PlanRunner {
    fn run(&self, plan: LogicalPlan) -> futures::future::BoxFuture<'_, Result<Vec<RecordBatch>>> {
        Box::pin(async move {
            let physical = stoppable(self.physical(plan).await?, &self.stop)?;
            datafusion::physical_plan::collect(physical, Arc::clone(&self.task)).await
        })
    }
}

/// Count a result batch against the query's budget.
fn reserve_result(reservation: &MemoryReservation, batch: &RecordBatch) -> Result<()> {
    reservation
        .try_grow(batch.get_array_memory_size())
        .map_err(|e| match e {
            DataFusionError::ResourcesExhausted(m) => DataFusionError::ResourcesExhausted(format!(
                "the query's result does not fit in its memory budget: {m}"
            )),
            other => other,
        })
}

/// A runtime that may be dropped from async code (it shuts down in the
/// background instead of blocking).
struct BackgroundRuntime(Option<tokio::runtime::Runtime>);

impl Drop for BackgroundRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// Stops a query when the future waiting for it is dropped: raises its
/// stop flag (seen by every operator at its next batch, even one that never
/// yields) and aborts its task (effective at its next yield).
pub(crate) struct AbortOnDrop<T>(pub tokio::task::JoinHandle<T>, pub Arc<AtomicBool>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.1.store(true, Ordering::Relaxed);
        self.0.abort();
    }
}

/// `plan` with every operator's output checked against `stop`.
///
/// Aborting a task only takes effect when it yields, and a CPU-bound
/// operator may not yield for as long as its input keeps producing (an
/// aggregate over a cross join of small in-memory tables pulls billions of
/// rows without ever waiting). A check between every pair of operators
/// stops such a query within one batch of work.
fn stoppable(
    plan: Arc<dyn ExecutionPlan>,
    stop: &Arc<AtomicBool>,
) -> Result<Arc<dyn ExecutionPlan>> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    Ok(plan
        .transform_up(|node| {
            Ok(Transformed::yes(Arc::new(StopOnFlag {
                input: node,
                stop: Arc::clone(stop),
            }) as Arc<dyn ExecutionPlan>))
        })?
        .data)
}

/// Passes its input's batches through until the stop flag is raised (see
/// [`stoppable`]), yielding now and then. Invisible to plan inspection
/// ([`downcast_delegate`]).
///
/// [`downcast_delegate`]: ExecutionPlan::downcast_delegate
#[derive(Debug)]
struct StopOnFlag {
    input: Arc<dyn ExecutionPlan>,
    stop: Arc<AtomicBool>,
}

impl DisplayAs for StopOnFlag {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "StopOnFlag")
    }
}

impl ExecutionPlan for StopOnFlag {
    fn name(&self) -> &str {
        "StopOnFlag"
    }

    fn downcast_delegate(&self) -> Option<&dyn ExecutionPlan> {
        Some(self.input.as_ref())
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        match (children.pop(), children.is_empty()) {
            (Some(input), true) => Ok(Arc::new(StopOnFlag {
                input,
                stop: Arc::clone(&self.stop),
            })),
            _ => Err(DataFusionError::Internal(
                "StopOnFlag takes exactly one input".into(),
            )),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let mut input = self.input.execute(partition, context)?;
        let schema = input.schema();
        let stop = Arc::clone(&self.stop);
        let mut stopped = false;
        let stream = futures::stream::poll_fn(move |cx| {
            if stopped {
                return std::task::Poll::Ready(None);
            }
            if stop.load(Ordering::Relaxed) {
                stopped = true;
                return std::task::Poll::Ready(Some(Err(DataFusionError::Execution(
                    "query stopped: canceled, timed out, or its client went away".into(),
                ))));
            }
            // Spend the task's cooperative budget per batch, so that a
            // CPU-bound query yields its worker to other queries (and to
            // its own abort) every so many batches.
            let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
            let next = input.poll_next_unpin(cx);
            if next.is_ready() {
                coop.made_progress();
            }
            next
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// One query's memory: at most `limit` bytes, each also drawn from the
/// server-wide pool.
#[derive(Debug)]
struct QueryPool {
    server: Arc<dyn MemoryPool>,
    limit: usize,
    used: AtomicUsize,
}

impl std::fmt::Display for QueryPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "query pool: {} of {} in use",
            human_bytes(self.reserved()),
            human_bytes(self.limit)
        )
    }
}

impl MemoryPool for QueryPool {
    fn name(&self) -> &str {
        "freshet_query"
    }

    fn register(&self, consumer: &MemoryConsumer) {
        self.server.register(consumer);
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        self.server.unregister(consumer);
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        self.used.fetch_add(additional, Ordering::Relaxed);
        self.server.grow(reservation, additional);
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.used.fetch_sub(shrink, Ordering::Relaxed);
        self.server.shrink(reservation, shrink);
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        let before = self.used.fetch_add(additional, Ordering::Relaxed);
        if before.saturating_add(additional) > self.limit {
            self.used.fetch_sub(additional, Ordering::Relaxed);
            return Err(DataFusionError::ResourcesExhausted(format!(
                "query memory limit of {} exceeded: {} requested by {} with {} in use",
                human_bytes(self.limit),
                human_bytes(additional),
                reservation.consumer().name(),
                human_bytes(before),
            )));
        }
        if let Err(e) = self.server.try_grow(reservation, additional) {
            self.used.fetch_sub(additional, Ordering::Relaxed);
            return Err(match e {
                DataFusionError::ResourcesExhausted(_) => {
                    DataFusionError::ResourcesExhausted(format!(
                        "the server's memory for queries ({}) is in use by running queries",
                        match self.server.memory_limit() {
                            MemoryLimit::Finite(n) => human_bytes(n),
                            _ => "unbounded".into(),
                        }
                    ))
                }
                other => other,
            });
        }
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.limit)
    }
}

/// `1.5 GiB`-style sizes for messages.
/// Wait for `f` from synchronous code running on a runtime thread (a scan
/// or a function executing inside a query), without starving the
/// runtime's other tasks where the runtime allows it.
pub fn wait_here<F: std::future::Future>(f: F) -> F::Output {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
            tokio::task::block_in_place(|| futures::executor::block_on(f))
        }
        _ => futures::executor::block_on(f),
    }
}

pub fn human_bytes(n: usize) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} bytes")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Parse a size such as `512MiB`, `2GB`, `1g` or a plain number of bytes.
pub fn parse_size(s: &str) -> std::result::Result<usize, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("invalid size {s:?}: expected a number with an optional unit"))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        other => return Err(format!("invalid size {s:?}: unknown unit {other:?}")),
    };
    let bytes = n * scale;
    if !bytes.is_finite() || bytes < 1.0 || bytes > usize::MAX as f64 {
        return Err(format!("invalid size {s:?}"));
    }
    Ok(bytes as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("2g").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5 GB").unwrap(), 3 << 29);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("3 parsecs").is_err());
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(human_bytes(12), "12 bytes");
    }

    #[test]
    fn a_query_pool_refuses_past_its_limit_and_returns_what_it_took() {
        let server: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1000));
        let pool: Arc<dyn MemoryPool> = Arc::new(QueryPool {
            server: Arc::clone(&server),
            limit: 600,
            used: AtomicUsize::new(0),
        });
        let a = MemoryConsumer::new("a").register(&pool);
        a.try_grow(500).unwrap();
        let err = a.try_grow(200).unwrap_err();
        assert!(
            matches!(err, DataFusionError::ResourcesExhausted(_)),
            "{err}"
        );
        assert_eq!(server.reserved(), 500);
        // A second query shares the server-wide pool.
        let other: Arc<dyn MemoryPool> = Arc::new(QueryPool {
            server: Arc::clone(&server),
            limit: 600,
            used: AtomicUsize::new(0),
        });
        let b = MemoryConsumer::new("b").register(&other);
        let err = b.try_grow(600).unwrap_err();
        assert!(err.to_string().contains("server's memory"), "{err}");
        drop(a);
        assert_eq!(server.reserved(), 0);
        b.try_grow(600).unwrap();
    }
}

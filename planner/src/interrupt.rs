//! Stopping a statement's planning once nobody waits for it.
//!
//! DataFusion's analyzer, optimizer and physical optimizer run to the end
//! once started, and a long statement (a 100,000-item `IN` list, a join of
//! many tables) can spend seconds there. When the statement's client
//! cancels, times out or goes away, the server stops waiting at once, but
//! the CPU would keep burning. Every rule of the session is therefore
//! wrapped by [`Interruptible`], which first looks at the stop flag of the
//! statement being planned (a tokio task-local, set by [`scope`] or
//! [`sync_scope`]) and fails with [`PlanningStopped`] once it is raised.
//! Rules applied node by node look at it for every node, so planning stops
//! within one node's rewrite of its deadline.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::Transformed;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::SessionState;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::optimizer::analyzer::AnalyzerRule;
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};
use datafusion::physical_optimizer::{PhysicalOptimizerContext, PhysicalOptimizerRule};
use datafusion::physical_plan::ExecutionPlan;

tokio::task_local! {
    /// The stop flag of the statement this task (or thread) is planning.
    static STOP: Arc<AtomicBool>;
}

/// Run `planning` with `stop` as its stop flag.
pub async fn scope<F: Future>(stop: Arc<AtomicBool>, planning: F) -> F::Output {
    STOP.scope(stop, planning).await
}

/// Run the synchronous `planning` with `stop` as its stop flag.
pub fn sync_scope<R>(stop: Arc<AtomicBool>, planning: impl FnOnce() -> R) -> R {
    STOP.sync_scope(stop, planning)
}

/// Fail if the statement being planned was stopped (outside a scope,
/// planning is never stopped).
pub fn check() -> Result<()> {
    let stopped = STOP
        .try_with(|stop| stop.load(Ordering::Relaxed))
        .unwrap_or(false);
    if stopped {
        Err(DataFusionError::External(Box::new(PlanningStopped)))
    } else {
        Ok(())
    }
}

/// Planning was abandoned by the statement's waiter (cancel, timeout,
/// disconnect); nobody reads this error but the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanningStopped;

impl fmt::Display for PlanningStopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("planning was stopped: the statement was canceled")
    }
}

impl std::error::Error for PlanningStopped {}

/// `state` with every analyzer, optimizer and physical optimizer rule
/// made [`Interruptible`].
pub fn interruptible(state: SessionState) -> SessionState {
    let analyzer: Vec<Arc<dyn AnalyzerRule + Send + Sync>> = state
        .analyzer()
        .rules
        .iter()
        .map(|rule| Arc::new(Interruptible(Arc::clone(rule))) as _)
        .collect();
    let optimizer: Vec<Arc<dyn OptimizerRule + Send + Sync>> = state
        .optimizers()
        .iter()
        .map(|rule| Arc::new(Interruptible(Arc::clone(rule))) as _)
        .collect();
    let physical: Vec<Arc<dyn PhysicalOptimizerRule + Send + Sync>> = state
        .physical_optimizers()
        .iter()
        .map(|rule| Arc::new(Interruptible(Arc::clone(rule))) as _)
        .collect();
    SessionStateBuilder::new_from_existing(state)
        .with_analyzer_rules(analyzer)
        .with_optimizer_rules(optimizer)
        .with_physical_optimizer_rules(physical)
        .build()
}

/// A rule that first checks the statement's stop flag (see the module
/// documentation); otherwise it is the rule it wraps.
#[derive(Debug)]
pub struct Interruptible<R: ?Sized>(pub Arc<R>);

impl AnalyzerRule for Interruptible<dyn AnalyzerRule + Send + Sync> {
    fn analyze(&self, plan: LogicalPlan, config: &ConfigOptions) -> Result<LogicalPlan> {
        check()?;
        self.0.analyze(plan, config)
    }

    fn name(&self) -> &str {
        self.0.name()
    }
}

impl OptimizerRule for Interruptible<dyn OptimizerRule + Send + Sync> {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        self.0.apply_order()
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        check()?;
        self.0.rewrite(plan, config)
    }
}

impl PhysicalOptimizerRule for Interruptible<dyn PhysicalOptimizerRule + Send + Sync> {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        check()?;
        self.0.optimize(plan, config)
    }

    fn optimize_with_context(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        context: &dyn PhysicalOptimizerContext,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        check()?;
        self.0.optimize_with_context(plan, context)
    }

    fn name(&self) -> &str {
        self.0.name()
    }

    fn schema_check(&self) -> bool {
        self.0.schema_check()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_scope_planning_is_never_stopped() {
        assert!(check().is_ok());
    }

    #[test]
    fn a_raised_flag_stops_planning_in_its_scope_only() {
        let stop = Arc::new(AtomicBool::new(false));
        sync_scope(Arc::clone(&stop), || assert!(check().is_ok()));
        stop.store(true, Ordering::Relaxed);
        let err = sync_scope(Arc::clone(&stop), check).unwrap_err();
        assert!(err.to_string().contains("planning was stopped"), "{err}");
        assert!(check().is_ok());
    }

    #[test]
    fn wrapping_keeps_every_rule_in_order() {
        let state = crate::query::engine::new_session_state(1);
        let names = |s: &SessionState| {
            (
                s.analyzer()
                    .rules
                    .iter()
                    .map(|r| r.name().to_owned())
                    .collect::<Vec<_>>(),
                s.optimizers()
                    .iter()
                    .map(|r| r.name().to_owned())
                    .collect::<Vec<_>>(),
                s.physical_optimizers()
                    .iter()
                    .map(|r| r.name().to_owned())
                    .collect::<Vec<_>>(),
            )
        };
        let before = names(&state);
        let wrapped = interruptible(state);
        assert_eq!(names(&wrapped), before);
        assert!(!before.1.is_empty() && !before.2.is_empty());
    }

    #[tokio::test]
    async fn a_stopped_statement_fails_to_plan_with_planning_stopped() {
        let state = crate::query::engine::new_session_state(1);
        let plan = state
            .create_logical_plan("SELECT 1 + 2 AS x")
            .await
            .expect("plans");
        let stop = Arc::new(AtomicBool::new(true));
        let err = scope(Arc::clone(&stop), state.create_physical_plan(&plan))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("planning was stopped"), "{err}");
        stop.store(false, Ordering::Relaxed);
        scope(stop, state.create_physical_plan(&plan))
            .await
            .expect("an unstopped statement plans");
    }
}

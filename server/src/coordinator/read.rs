//! Reads: running a planned query at a held time (after the views it
//! reads have caught up), `AS OF`, and peeks answered from an index.

use arrow::array::RecordBatch;
use freshet_planner::statements::index::PeekPlan;
use freshet_planner::{QueryPlan, ReadContext};
use freshet_repr::Timestamp;

use super::Coordinator;
use crate::error::{AdapterError, Result};
use crate::session::{Session, TxnStatus};

impl Coordinator {
    /// Run `q` at the time its `AS OF` names (or, `AT LEAST`, at any
    /// readable time not before it), waiting for the inputs to get there.
    pub(super) async fn read_as_of(
        &self,
        session: &mut Session,
        q: &QueryPlan,
        at_least: bool,
        time: &freshet_planner::statements::options::TimeExpr,
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

    /// Run a planned query at `ts` (holds must already protect its inputs).
    pub(super) async fn run_at(
        &self,
        session: &Session,
        q: &QueryPlan,
        ts: Timestamp,
    ) -> Result<Vec<RecordBatch>> {
        // Tables created in the block have no upper to wait for.
        let created = session.txn.created();
        let inputs = q.inputs.difference(&created).copied().collect();
        self.await_views(&inputs, ts).await?;
        q.binding
            .bind(ReadContext {
                as_of: ts,
                reader: self.reader(session),
            })
            .map_err(AdapterError::Internal)?;
        Ok(self.queries.collect(&session.df, q.logical.clone()).await?)
    }

    /// Run a query for a session, inside its transaction if it has one.
    pub(super) async fn read(
        &self,
        session: &mut Session,
        q: &QueryPlan,
    ) -> Result<Vec<RecordBatch>> {
        let (ts, holds) = self.read_time(session, &q.inputs, true)?;
        let result = self.run_at(session, q, ts).await;
        drop(holds);
        result
    }

    /// Answer a query from an index: at the time (and under the holds) any
    /// read of its object would use, once the index is complete there.
    pub(super) async fn peek(&self, session: &mut Session, peek: &PeekPlan) -> Result<RecordBatch> {
        let (ts, holds) = self.read_time(session, &peek.inputs, false)?;
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
}

/// How long a peek waits for the workers before failing (statement_timeout
/// usually ends it sooner).
pub(crate) const PEEK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

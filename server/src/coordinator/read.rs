//! Reads: running a planned query at a held time (after the views it
//! reads have caught up), `AS OF`, and peeks answered from an index.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::common::ParamValues;
use freshet_catalog::CatalogState;
use freshet_planner::parser::Statement;
use freshet_planner::statements::index::PeekPlan;
use freshet_planner::statements::insert_values::InsertValuesPlan;
use freshet_planner::{PeekFinish, Plan, QueryPlan, ReadContext, SessionInfo, WritePlan};
use freshet_repr::Timestamp;

use super::Coordinator;
use crate::error::{AdapterError, Result};
use crate::session::{Session, TxnStatus};
use crate::vars::Vars;

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
        self.bind_at(session, q, ts).await?;
        Ok(self.queries.collect(&session.df, q.logical.clone()).await?)
    }

    /// Wait until `q`'s inputs are complete at `ts` and bind its reads
    /// there (holds must already protect them).
    pub(super) async fn bind_at(
        &self,
        session: &Session,
        q: &QueryPlan,
        ts: Timestamp,
    ) -> Result<()> {
        // Tables created in the block have no upper to wait for.
        let created = session.txn.created();
        let inputs = q.inputs.difference(&created).copied().collect();
        self.await_views(&inputs, ts).await?;
        q.binding
            .bind(ReadContext {
                as_of: ts,
                reader: self.reader(session),
            })
            .map_err(AdapterError::Internal)
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
    pub(super) async fn peek(
        &self,
        session: &mut Session,
        peek: &PeekPlan,
    ) -> Result<Vec<RecordBatch>> {
        if let Some(finish) = &peek.finish
            && !session.txn.writes.is_empty()
        {
            // The block's own writes are not in any index: the general
            // path shows them (or says why it cannot).
            let query = self.general_query(session, finish).await?;
            return self.read(session, &query).await;
        }
        let (ts, holds) = self.read_time(session, &peek.inputs, false)?;
        tracing::debug!(index = %peek.index, ts, keyed = peek.key.is_some(), "peek");
        let start = |time| match &peek.range {
            Some(range) => {
                self.compute
                    .peek_range(peek.index, time, range.lower.clone(), range.upper.clone())
            }
            None => self.compute.peek(peek.index, time, peek.key.clone()),
        };
        let (pending, read_at) = match start(ts) {
            // A serializable read may pick a time the index has compacted
            // past; outside a transaction any later time serves it (the
            // inputs' holds at `ts` protect later times too).
            Err(freshet_compute::ComputeError::NotReadable { since, .. })
                if session.status != TxnStatus::InBlock =>
            {
                (start(since)?, since)
            }
            other => (other?, ts),
        };
        let answer = tokio::time::timeout(PEEK_TIMEOUT, pending.wait())
            .await
            .map_err(|_| AdapterError::Compute(freshet_compute::ComputeError::PeekTimeout))??;
        let mut rows = answer.map_err(AdapterError::Dataflow)?;
        if let Some(finish) = &peek.finish
            && !finish.lookups.is_empty()
        {
            match self.lookups(session, finish, rows, read_at).await? {
                Some(joined) => rows = joined,
                // An index that cannot be read at the peek's time: the
                // general path reads the objects themselves.
                None => {
                    drop(holds);
                    let query = self.general_query(session, finish).await?;
                    return self.read(session, &query).await;
                }
            }
        }
        drop(holds);
        let Some(finish) = &peek.finish else {
            return Ok(vec![match &peek.columns {
                Some(columns) => rows.project(columns)?,
                None => rows,
            }]);
        };
        // `mz_now()` reads the peek's time. (Such a peek is planned for
        // one execution: prepared statements do not keep it.)
        if finish.reads_binding() {
            finish
                .query
                .binding
                .bind(ReadContext {
                    as_of: ts,
                    reader: self.reader(session),
                })
                .map_err(AdapterError::Internal)?;
        }
        Ok(vec![finish.apply(&session.df, rows)?])
    }
}

impl Coordinator {
    /// A peek's lookup joins (see `freshet_planner::statements::peek_join`)
    /// applied to the peeked `rows`, reading every index at `ts`; `None`
    /// when one cannot be read there.
    /// The query a peek answers, for the general path: a peek bound to
    /// one execution's parameters shares its query's plan with the kept
    /// plan's other executions, and a plan reads at one time only, so
    /// its query is planned again from its text with those values.
    async fn general_query(
        &self,
        session: &Session,
        finish: &PeekFinish,
    ) -> Result<Arc<QueryPlan>> {
        let Some(params) = &finish.params else {
            return Ok(Arc::clone(&finish.query));
        };
        let Some(source) = finish.source.clone() else {
            return Err(AdapterError::Internal(
                "a bound peek without its query's text".into(),
            ));
        };
        let planned = self
            .plan_blocking(session, Some(params), move |cx| {
                freshet_planner::statements::context::plan_query(cx, &source)
            })
            .await?;
        Ok(Arc::new(planned))
    }

    async fn lookups(
        &self,
        session: &Session,
        finish: &PeekFinish,
        rows: RecordBatch,
        ts: Timestamp,
    ) -> Result<Option<RecordBatch>> {
        let mut rows = finish.lookup_base(&rows)?;
        for (i, lookup) in finish.lookups.iter().enumerate() {
            let keys = lookup.keys(&finish.lookup_key(&session.df, i)?, &rows)?;
            // Every key's read is sent before any is awaited.
            let mut pending = Vec::with_capacity(keys.distinct.len());
            for key in &keys.distinct {
                match self.compute.peek(lookup.index, ts, Some(key.clone())) {
                    Ok(p) => pending.push(p.wait()),
                    Err(freshet_compute::ComputeError::NotReadable { .. }) => return Ok(None),
                    Err(e) => return Err(e.into()),
                }
            }
            let answers = tokio::time::timeout(PEEK_TIMEOUT, futures::future::join_all(pending))
                .await
                .map_err(|_| AdapterError::Compute(freshet_compute::ComputeError::PeekTimeout))?;
            let found = answers
                .into_iter()
                .map(|answer| answer?.map_err(AdapterError::Dataflow))
                .collect::<Result<Vec<_>>>()?;
            rows = lookup.join(&rows, &keys, &found)?;
        }
        Ok(Some(rows))
    }
}

/// A prepared statement's plan, decided once at Prepare (so Execute skips
/// planning) and bound to each Execute's parameters, as long as the
/// catalog and the session's settings are those it was planned with.
#[derive(Debug)]
pub struct PreparedPlan {
    plan: Reusable,
    stamp: PlanStamp,
}

impl PreparedPlan {
    /// Whether this is a constant query's kept answer.
    pub(super) fn is_constant(&self) -> bool {
        matches!(self.plan, Reusable::Constant { .. })
    }

    /// A constant query's answer kept with the stamp taken before it was
    /// planned; `None` when it is larger than [`MAX_CONSTANT_BYTES`].
    fn constant(
        query: &QueryPlan,
        batches: Vec<RecordBatch>,
        stamp: PlanStamp,
    ) -> Option<Arc<PreparedPlan>> {
        let bytes: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
        (bytes <= MAX_CONSTANT_BYTES).then(|| {
            Arc::new(PreparedPlan {
                plan: Reusable::Constant {
                    desc: query.desc.clone(),
                    batches,
                },
                stamp,
            })
        })
    }
}

/// A session's kept answers of simple-protocol constant queries (see
/// [`QueryPlan::is_constant`]), by the statement's text: a pool's
/// `SELECT 1` over the simple protocol is planned once per session and
/// settings, as a prepared one is.
#[derive(Debug, Default)]
pub struct ConstantAnswers(HashMap<String, Arc<PreparedPlan>>);

/// How many constant answers a session keeps (then it starts over).
const MAX_CONSTANT_ANSWERS: usize = 64;

impl ConstantAnswers {
    /// Keep `query`'s answer for `text`, if it is constant and small.
    pub(super) fn keep(
        &mut self,
        text: String,
        query: &QueryPlan,
        batches: &[RecordBatch],
        stamp: PlanStamp,
    ) {
        if !query.is_constant() {
            return;
        }
        if let Some(kept) = PreparedPlan::constant(query, batches.to_vec(), stamp) {
            if self.0.len() >= MAX_CONSTANT_ANSWERS {
                self.0.clear();
            }
            self.0.insert(text, kept);
        }
    }

    /// The answer kept for `text`.
    pub(super) fn get(&self, text: &str) -> Option<&Arc<PreparedPlan>> {
        self.0.get(text)
    }
}

/// The text a simple-protocol statement's constant answer is kept under:
/// only a query without `FROM` or `WITH` can be constant (a cheap test
/// before the plan says), and its text as parsed names it.
pub(super) fn constant_candidate(stmt: &Statement) -> Option<String> {
    use datafusion::sql::sqlparser::ast::{self, SetExpr};
    let Statement::Sql(sql) = stmt else {
        return None;
    };
    let ast::Statement::Query(query) = sql.as_ref() else {
        return None;
    };
    let without_from = match query.body.as_ref() {
        SetExpr::Select(select) => select.from.is_empty(),
        SetExpr::Values(_) => true,
        _ => false,
    };
    (query.with.is_none() && without_from).then(|| stmt.to_string())
}

/// What a plan was made against: the catalog version, the session's
/// identity and its settings. A plan kept for later executions serves
/// them only while all three are unchanged.
#[derive(Debug)]
pub struct PlanStamp {
    catalog: Arc<CatalogState>,
    info: SessionInfo,
    vars: Vars,
}

impl PlanStamp {
    /// Whether `session` would plan against the same state now.
    pub(super) fn current(&self, coord: &Coordinator, session: &Session) -> bool {
        // `session.info()` is made of the fields compared here and the
        // settings (its search path is the setting's, `$user` expanded):
        // compared without making it, as this runs at every execution.
        Arc::ptr_eq(&self.catalog, &coord.catalog_for(session))
            && self.vars == session.vars
            && self.info.database == session.database
            && self.info.user == session.user
            && self.info.temp_schema == session.temp_schema
    }
}

/// The plans that can be bound again.
#[derive(Debug)]
enum Reusable {
    /// A constant query's answer (see [`QueryPlan::is_constant`]), found
    /// at Prepare.
    Constant {
        desc: freshet_repr::RelationDesc,
        batches: Vec<RecordBatch>,
    },
    /// A query answered from an index.
    Peek(Box<PeekPlan>),
    /// An `INSERT ... VALUES` of constants and parameters.
    Insert(Arc<InsertValuesPlan>),
    /// An `UPDATE` or `DELETE` by primary key.
    KeyedWrite(Box<WritePlan>),
}

impl Coordinator {
    /// What a plan made for `session` now is made against.
    pub(super) fn stamp(&self, session: &Session) -> PlanStamp {
        PlanStamp {
            catalog: self.catalog_for(session),
            info: session.info(),
            vars: session.vars.clone(),
        }
    }

    /// Keep `plan` (a statement's plan at Prepare) for its executions, if
    /// it can be bound again.
    pub fn prepare_plan(&self, session: &Session, plan: &Plan) -> Option<Arc<PreparedPlan>> {
        let plan = match plan {
            Plan::Peek(peek) if peek.reusable() => Reusable::Peek(Box::new(peek.clone())),
            Plan::InsertValues(insert) => Reusable::Insert(Arc::clone(insert)),
            Plan::Write(w) if w.reusable() => Reusable::KeyedWrite(w.clone()),
            _ => return None,
        };
        Some(Arc::new(PreparedPlan {
            plan,
            stamp: self.stamp(session),
        }))
    }

    /// Keep a constant query's answer for the executions of a prepared
    /// statement: run once here, it is given again by every Execute
    /// without planning while the stamp holds (a pool's `SELECT 1` took
    /// a DataFusion plan per execution: ~6,000 a second on two cores).
    /// `None` when the query is not constant, fails (each Execute then
    /// plans it and reports the error), or answers more than
    /// [`MAX_CONSTANT_BYTES`].
    pub async fn prepare_constant(
        &self,
        session: &Session,
        query: &QueryPlan,
    ) -> Option<Arc<PreparedPlan>> {
        if !query.is_constant() {
            return None;
        }
        let stamp = self.stamp(session);
        let batches = self
            .run_at(session, query, self.storage.read_ts())
            .await
            .ok()?;
        PreparedPlan::constant(query, batches, stamp)
    }

    /// A prepared constant query's kept answer, if the catalog and the
    /// session's settings are still those it was found with.
    pub(super) fn prepared_answer(
        &self,
        session: &Session,
        prepared: &PreparedPlan,
    ) -> Option<(freshet_repr::RelationDesc, Vec<RecordBatch>)> {
        match &prepared.plan {
            Reusable::Constant { desc, batches } if prepared.stamp.current(self, session) => {
                Some((desc.clone(), batches.clone()))
            }
            _ => None,
        }
    }

    /// The prepared plan bound to `params`, or `None` when it must be
    /// planned again: the catalog or a setting changed since Prepare, or
    /// (for a peek) the transaction block wrote (its writes are in no
    /// index).
    pub(super) fn prepared_plan(
        &self,
        session: &Session,
        prepared: &PreparedPlan,
        params: Option<&ParamValues>,
    ) -> Option<Result<Plan>> {
        if !prepared.stamp.current(self, session) {
            return None;
        }
        match &prepared.plan {
            Reusable::Peek(peek) => session.txn.writes.is_empty().then(|| {
                Ok(Plan::Peek(
                    peek.bind(&session.df, params)
                        .map_err(AdapterError::DataFusion)?,
                ))
            }),
            Reusable::Insert(insert) => Some(Ok(Plan::InsertValues(Arc::clone(insert)))),
            // Answered by `prepared_answer` before planning.
            Reusable::Constant { .. } => None,
            // In a block the write reads the block's own writes: the
            // general path, planned with the values.
            Reusable::KeyedWrite(w) => (session.status != TxnStatus::InBlock)
                .then(|| w.bind_keyed(&session.df, params).transpose())
                .flatten()
                .map(|bound| Ok(Plan::Write(Box::new(bound?)))),
        }
    }
}

/// The largest constant answer a prepared statement keeps (Arrow bytes).
const MAX_CONSTANT_BYTES: usize = 64 * 1024;

/// How long a peek waits for the workers before failing (statement_timeout
/// usually ends it sooner).
pub(crate) const PEEK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

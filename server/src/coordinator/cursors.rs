//! SUBSCRIBE and cursors: starting a subscribe under read holds that
//! follow its progress, `DECLARE`, and `FETCH`.

use std::sync::Arc;

use arrow::array::RecordBatch;
use freshet_compute_types::DataflowDesc;
use freshet_compute_types::Export;
use freshet_planner::Plan;
use freshet_repr::GlobalId;
use freshet_repr::sqlstate;

use super::{Coordinator, ExecuteResponse};
use crate::error::{AdapterError, Result};
use crate::session::{Cursor, Session, TxnStatus};
use crate::subscribe::SubscribeStream;

impl Coordinator {
    /// Start a subscribe for `session`: at `AS OF`, or at the time a
    /// query would read at now, with holds on its inputs that follow its
    /// progress. `AS OF` and `UP TO` are evaluated with `mz_now()` bound
    /// to the current read time.
    pub(super) async fn subscribe(
        &self,
        session: &Session,
        plan: freshet_planner::statements::subscribe::SubscribePlan,
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
                sqlstate::INVALID_PARAMETER_VALUE,
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
                sqlstate::QUERY_CANCELED,
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
    pub(super) async fn declare(
        &self,
        session: &mut Session,
        name: String,
        plan: Plan,
        statement: String,
    ) -> Result<ExecuteResponse> {
        if session.status != TxnStatus::InBlock {
            return Err(AdapterError::data(
                sqlstate::NO_ACTIVE_SQL_TRANSACTION,
                "DECLARE CURSOR can only be used in transaction blocks",
            ));
        }
        if session.txn.cursors.contains_key(&name) {
            return Err(AdapterError::DuplicateCursor(name));
        }
        let cursor = match plan {
            Plan::Select(q) => Cursor {
                statement,
                created: std::time::SystemTime::now(),
                rows: self.read(session, &q).await?.into(),
                desc: q.desc,
                subscribe: None,
            },
            Plan::Peek(p) => Cursor {
                statement,
                created: std::time::SystemTime::now(),
                rows: self.peek(session, &p).await?.into(),
                desc: p.desc,
                subscribe: None,
            },
            Plan::Subscribe(plan, _) => {
                let stream = self.subscribe(session, *plan).await?;
                Cursor {
                    statement,
                    created: std::time::SystemTime::now(),
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
    pub(super) async fn fetch(
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

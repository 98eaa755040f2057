//! One sink's task: read the target's progress, start the dataflow after
//! it, and commit completed ranges of timestamps; on a transient error,
//! stall, wait, and start over from the target's progress.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{BooleanArray, Int64Array, RecordBatch};
use arrow::datatypes::SchemaRef;
use freshet_catalog::{SinkConnector, SinkEnvelope};
use freshet_compute::SubscribeBatch;
use freshet_repr::Timestamp;
use freshet_storage::{ReadHold, Storage};

use crate::envelope::{KeyedState, rebatch, timestamps};
use crate::error::{Result, SinkError};
use crate::files::FilesTarget;
use crate::kafka::KafkaTarget;
use crate::postgres::PostgresTarget;
use crate::status::{SinkState, StatusCell};
use crate::{Committed, DataflowStarter, SinkConfig, SinkEndpoint, SinkTarget};

const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Run sink `target` until it fails for good, completes, or is aborted.
pub(crate) async fn run(
    target: SinkTarget,
    starter: Arc<dyn DataflowStarter>,
    storage: Arc<Storage>,
    status: StatusCell,
    config: SinkConfig,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let started = Instant::now();
        match run_once(&target, starter.as_ref(), &storage, &status, config).await {
            Ok(()) => {
                status.set_state(SinkState::Completed, None);
                return;
            }
            Err(e) if e.is_transient() => {
                status.set_state(SinkState::Stalled, Some(e.to_string()));
                if started.elapsed() > MAX_BACKOFF {
                    backoff = FIRST_BACKOFF;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(e) => {
                status.set_state(SinkState::Failed, Some(e.to_string()));
                return;
            }
        }
    }
}

/// One attempt: from the target's progress until an error (or the end).
async fn run_once(
    target: &SinkTarget,
    starter: &dyn DataflowStarter,
    storage: &Storage,
    status: &StatusCell,
    config: SinkConfig,
) -> Result<()> {
    let details = &target.details;
    let mut config = config;
    if let Some(ms) = details.commit_interval_ms {
        config.commit_interval = Duration::from_millis(ms);
    }
    let mut to = Target::open(target).await?;
    let frontier = to.recover().await?;
    status.resumed_at(frontier);
    let keyed = details.envelope != SinkEnvelope::Diffs;
    // Resume after what the target holds; the first start reads the
    // input at the sink's `as_of`. An envelope needs every key's rows at
    // the start to say what a change did, so its dataflow starts with a
    // snapshot, which is not exported when already at the target (or
    // when the sink was created `SNAPSHOT = false`).
    let (as_of, emit_from) = match frontier {
        Some(f) => (f.saturating_sub(1), f),
        None if details.snapshot => (details.as_of, details.as_of),
        None => (details.as_of, details.as_of + 1),
    };
    let snapshot = keyed || (frontier.is_none() && details.snapshot);
    storage.advance_dependent(target.id, as_of);
    let started = starter.start(as_of, snapshot)?;
    let mut subscription = started.subscription;
    let mut holds = started.holds;
    let mut shaper = Shaper::new(target, emit_from)?;
    status.set_state(SinkState::Running, None);
    tracing::info!(sink = %target.id, as_of, emit_from, "sink exporting");

    let mut lower = emit_from;
    let mut upper = emit_from;
    let mut pending: Vec<RecordBatch> = Vec::new();
    let mut pending_rows = 0usize;
    let mut last_commit = Instant::now();
    loop {
        let wait = config.commit_interval.saturating_sub(last_commit.elapsed());
        let mut complete = false;
        match tokio::time::timeout(wait, subscription.next()).await {
            Ok(Some(Ok(batch))) => {
                let rows = shaper.shape(&batch)?;
                pending_rows += rows.num_rows();
                if rows.num_rows() > 0 {
                    pending.push(rows);
                }
                upper = upper.max(batch.upper);
                complete = batch.complete;
            }
            Ok(Some(Err(e))) => {
                return Err(SinkError::Dataflow(format!(
                    "{} (the sink restarts from its target's progress)",
                    e.message
                )));
            }
            Ok(None) => complete = true,
            Err(_) => {}
        }
        let due = last_commit.elapsed() >= config.commit_interval
            || pending_rows >= config.max_rows
            || complete;
        if due && upper > lower {
            let began = Instant::now();
            let committed = to.commit(lower, upper, &pending).await?;
            status.exported(pending_rows as u64, &committed, began.elapsed(), upper);
            tracing::debug!(sink = %target.id, lower, upper, rows = pending_rows, "sink committed");
            lower = upper;
            pending.clear();
            pending_rows = 0;
            last_commit = Instant::now();
            advance(storage, target, &mut holds, upper - 1);
        } else if due {
            last_commit = Instant::now();
        }
        if complete {
            return Ok(());
        }
    }
}

/// Where a sink writes, opened.
enum Target {
    Files(FilesTarget),
    Kafka(Box<KafkaTarget>),
    Postgres(Box<PostgresTarget>),
}

impl Target {
    async fn open(target: &SinkTarget) -> Result<Self> {
        Ok(match &target.details.connector {
            SinkConnector::Files(spec) => Target::Files(FilesTarget::open(
                target.id,
                spec,
                Arc::clone(&target.schema),
            )?),
            SinkConnector::Kafka(spec) => {
                let SinkEndpoint::Kafka(brokers) = &target.endpoint else {
                    return Err(no_endpoint("Kafka"));
                };
                Target::Kafka(Box::new(KafkaTarget::open(target, spec, brokers).await?))
            }
            SinkConnector::Postgres(spec) => {
                let SinkEndpoint::Postgres(config) = &target.endpoint else {
                    return Err(no_endpoint("PostgreSQL"));
                };
                Target::Postgres(Box::new(PostgresTarget::open(target, spec, config).await?))
            }
        })
    }

    /// The frontier the target has everything below (`None`: nothing
    /// was ever committed).
    async fn recover(&mut self) -> Result<Option<Timestamp>> {
        match self {
            Target::Files(t) => t.recover().await,
            Target::Kafka(t) => t.recover().await,
            Target::Postgres(t) => t.recover().await,
        }
    }

    /// Deliver the changes at times in `[lower, upper)` and record `upper`
    /// as the frontier, atomically as far as a reader of the target can
    /// tell.
    async fn commit(
        &mut self,
        lower: Timestamp,
        upper: Timestamp,
        batches: &[RecordBatch],
    ) -> Result<Committed> {
        match self {
            Target::Files(t) => t.commit(lower, upper, batches).await,
            Target::Kafka(t) => t.commit(lower, upper, batches).await,
            Target::Postgres(t) => t.commit(lower, upper, batches).await,
        }
    }
}

fn no_endpoint(what: &str) -> SinkError {
    SinkError::Internal(format!("a {what} sink started without its connection"))
}

/// The target holds every change up to `resume`: let the inputs compact
/// up to it.
fn advance(storage: &Storage, target: &SinkTarget, holds: &mut [ReadHold], resume: Timestamp) {
    storage.advance_dependent(target.id, resume);
    for hold in holds.iter_mut() {
        if hold.time() < resume
            && let Err(e) = hold.downgrade(resume)
        {
            tracing::warn!(sink = %target.id, error = %e, "cannot move a sink's read hold");
        }
    }
}

/// Turns the dataflow's changes into the target's rows, leaving out
/// those before `emit_from` (already at the target, or the snapshot of a
/// sink created without one).
struct Shaper {
    envelope: SinkEnvelope,
    keyed: Option<KeyedState>,
    schema: SchemaRef,
    emit_from: Timestamp,
}

impl Shaper {
    fn new(target: &SinkTarget, emit_from: Timestamp) -> Result<Self> {
        let details = &target.details;
        let keyed = match details.envelope {
            SinkEnvelope::Diffs => None,
            _ => Some(KeyedState::new(&details.relation, &details.key)?),
        };
        Ok(Shaper {
            envelope: details.envelope,
            keyed,
            schema: Arc::clone(&target.schema),
            emit_from,
        })
    }

    fn shape(&mut self, batch: &SubscribeBatch) -> Result<RecordBatch> {
        let debezium = self.envelope == SinkEnvelope::Debezium;
        let Some(keyed) = self.keyed.as_mut() else {
            let mut columns = vec![
                timestamps(&batch.times)?,
                Arc::new(Int64Array::from(batch.diffs.clone())) as _,
            ];
            columns.extend(batch.rows.columns().iter().cloned());
            let rows = rebatch(&self.schema, columns)?;
            if batch.times.iter().all(|t| *t >= self.emit_from) {
                return Ok(rows);
            }
            let keep = BooleanArray::from(
                batch
                    .times
                    .iter()
                    .map(|t| *t >= self.emit_from)
                    .collect::<Vec<_>>(),
            );
            return Ok(arrow::compute::filter_record_batch(&rows, &keep)?);
        };
        let mut changes = keyed.apply(batch, debezium)?;
        changes.retain(|c| c.time >= self.emit_from);
        if let Some(v) = changes.iter().find(|c| c.state == "key_violation") {
            return Err(SinkError::Fatal(format!(
                "key violation at time {}: key {} has more than one row; the sink's KEY is not unique",
                v.time,
                keyed.describe_key(v)
            )));
        }
        Ok(keyed.rows(&changes, debezium, false, &self.schema)?)
    }
}

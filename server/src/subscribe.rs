//! Running subscribes for sessions: turning compute's consolidated
//! updates into the rows clients see (`mz_timestamp`, `mz_progressed`,
//! `mz_diff` or an envelope's `mz_state`), and ending subscribes whose
//! inputs are dropped.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, new_null_array};
use arrow::datatypes::SchemaRef;
use freshet_compute::{DataflowError, DataflowState, SubscribeBatch, Subscription};
use freshet_planner::statements::subscribe::SubscribeEnvelope;
use freshet_repr::sqlstate;
use freshet_repr::{GlobalId, RelationDesc, Timestamp};
use freshet_sinks::envelope::{KeyedState, rebatch, timestamps};
use parking_lot::Mutex;

use crate::error::{AdapterError, Result};

/// The subscribes running on this server, with what each depends on, so
/// that dropping an object ends the subscribes reading it.
#[derive(Debug, Default)]
pub struct Subscribes {
    active: Mutex<HashMap<GlobalId, Active>>,
}

#[derive(Debug)]
struct Active {
    depends_on: BTreeSet<GlobalId>,
    state: Arc<DataflowState>,
}

impl Subscribes {
    /// Track a started subscribe until the returned registration drops.
    pub fn register(
        self: &Arc<Self>,
        depends_on: BTreeSet<GlobalId>,
        state: Arc<DataflowState>,
    ) -> Registration {
        let id = state.id;
        self.active.lock().insert(id, Active { depends_on, state });
        Registration {
            registry: Arc::clone(self),
            id,
        }
    }

    /// End every subscribe that depends on one of `dropped` with an error
    /// naming it (`describe` names an id). Called before the objects'
    /// collections go away, so the subscribe never mistakes a dropped
    /// input for one that is complete.
    pub fn end_dependents(&self, dropped: &[GlobalId], describe: impl Fn(GlobalId) -> String) {
        for active in self.active.lock().values() {
            if let Some(id) = dropped.iter().find(|d| active.depends_on.contains(d)) {
                active.state.end_subscribe(DataflowError {
                    code: sqlstate::QUERY_CANCELED.into(),
                    message: format!(
                        "subscribe has been terminated because underlying relation {} was dropped",
                        describe(*id)
                    ),
                });
            }
        }
    }
}

/// Keeps a subscribe listed in [`Subscribes`]; dropping it unlists it.
#[derive(Debug)]
pub struct Registration {
    registry: Arc<Subscribes>,
    id: GlobalId,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.active.lock().remove(&self.id);
    }
}

/// A session's running subscribe, producing the rows its client sees.
/// Dropping it ends the subscribe and releases its holds.
pub struct SubscribeStream {
    // Declared first so the dataflow is dropped before it is unlisted.
    subscription: Subscription,
    _registration: Registration,
    output: RelationDesc,
    output_schema: SchemaRef,
    envelope: SubscribeEnvelope,
    progress: bool,
    /// The last progress row's time.
    progressed: Timestamp,
    /// Per key, the rows it has (envelopes only).
    keyed: Option<KeyedState>,
    done: bool,
}

impl std::fmt::Debug for SubscribeStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscribeStream")
            .field("id", &self.subscription.id())
            .finish_non_exhaustive()
    }
}

impl SubscribeStream {
    /// Wrap a started subscription.
    pub fn new(
        subscription: Subscription,
        registration: Registration,
        relation: &RelationDesc,
        output: RelationDesc,
        envelope: SubscribeEnvelope,
        progress: bool,
    ) -> Result<Self> {
        let keyed = match &envelope {
            SubscribeEnvelope::Diffs => None,
            SubscribeEnvelope::Upsert { key } | SubscribeEnvelope::Debezium { key } => {
                Some(KeyedState::new(relation, key)?)
            }
        };
        Ok(SubscribeStream {
            progressed: subscription.as_of(),
            subscription,
            _registration: registration,
            output_schema: output.arrow_schema(),
            output,
            envelope,
            progress,
            keyed,
            done: false,
        })
    }

    /// The columns of the rows.
    pub fn desc(&self) -> &RelationDesc {
        &self.output
    }

    /// The next rows, waiting for them (possibly none, when time advanced
    /// without changes); `None` once the subscribe has delivered
    /// everything.
    pub async fn next(&mut self) -> Option<Result<RecordBatch>> {
        if self.done {
            return None;
        }
        let event = self.subscription.next().await;
        self.handle(event)
    }

    /// The next rows if some are ready, without waiting.
    pub fn try_next(&mut self) -> Option<Result<RecordBatch>> {
        if self.done {
            return None;
        }
        let event = self.subscription.try_next()?;
        self.handle(Some(event))
    }

    /// Whether the subscribe has delivered everything.
    pub fn is_done(&self) -> bool {
        self.done
    }

    fn handle(
        &mut self,
        event: Option<std::result::Result<SubscribeBatch, DataflowError>>,
    ) -> Option<Result<RecordBatch>> {
        match event {
            None => {
                self.done = true;
                None
            }
            Some(Err(e)) => {
                self.done = true;
                Some(Err(AdapterError::Dataflow(e)))
            }
            Some(Ok(batch)) => {
                if batch.complete {
                    self.done = true;
                }
                Some(self.format(batch))
            }
        }
    }

    fn format(&mut self, batch: SubscribeBatch) -> Result<RecordBatch> {
        let rows = match &self.envelope {
            SubscribeEnvelope::Diffs => self.diff_rows(&batch)?,
            SubscribeEnvelope::Upsert { .. } | SubscribeEnvelope::Debezium { .. } => {
                let debezium = matches!(self.envelope, SubscribeEnvelope::Debezium { .. });
                let keyed = self
                    .keyed
                    .as_mut()
                    .ok_or_else(|| AdapterError::Internal("envelope without key state".into()))?;
                let changes = keyed.apply(&batch, debezium)?;
                keyed.rows(&changes, debezium, self.progress, &self.output_schema)?
            }
        };
        if self.progress && !batch.complete && batch.upper > self.progressed {
            self.progressed = batch.upper;
            let progress = self.progress_row(batch.upper)?;
            return Ok(arrow::compute::concat_batches(
                &self.output_schema,
                [&rows, &progress],
            )?);
        }
        Ok(rows)
    }

    /// `mz_diff` rows: each update as it came.
    fn diff_rows(&self, batch: &SubscribeBatch) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = vec![timestamps(&batch.times)?];
        if self.progress {
            columns.push(Arc::new(BooleanArray::from(vec![false; batch.times.len()])));
        }
        columns.push(Arc::new(Int64Array::from(batch.diffs.clone())));
        columns.extend(batch.rows.columns().iter().cloned());
        Ok(rebatch(&self.output_schema, columns)?)
    }

    /// The row saying every update before `upper` has been sent.
    fn progress_row(&self, upper: Timestamp) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = vec![
            timestamps(&[upper])?,
            Arc::new(BooleanArray::from(vec![true])),
        ];
        for field in self.output_schema.fields().iter().skip(2) {
            columns.push(new_null_array(field.data_type(), 1));
        }
        Ok(rebatch(&self.output_schema, columns)?)
    }
}

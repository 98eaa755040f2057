//! Running subscribes for sessions: turning compute's consolidated
//! updates into the rows clients see (`mz_timestamp`, `mz_progressed`,
//! `mz_diff` or an envelope's `mz_state`), and ending subscribes whose
//! inputs are dropped.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Decimal128Array, Int64Array, RecordBatch, StringArray, UInt32Array,
    new_null_array,
};
use arrow::datatypes::SchemaRef;
use arrow::row::{OwnedRow, RowConverter, SortField};
use freshet_compute::{DataflowError, DataflowState, SubscribeBatch, Subscription};
use freshet_planner::statements::subscribe::SubscribeEnvelope;
use freshet_repr::sqlstate;
use freshet_repr::{GlobalId, RelationDesc, Timestamp};
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
        rebatch(&self.output_schema, columns)
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
        rebatch(&self.output_schema, columns)
    }
}

/// `mz_timestamp` values.
fn timestamps(times: &[Timestamp]) -> Result<ArrayRef> {
    let array = Decimal128Array::from(times.iter().map(|t| i128::from(*t)).collect::<Vec<_>>())
        .with_precision_and_scale(20, 0)?;
    Ok(Arc::new(array))
}

/// `columns` as a batch of `schema`, casting where the dataflow's types
/// differ only in representation.
fn rebatch(schema: &SchemaRef, columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    let columns = columns
        .into_iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c)
            } else {
                arrow::compute::cast(&c, f.data_type())
            }
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(Arc::clone(schema), columns)?)
}

/// What one key did at one time.
struct KeyChange {
    time: Timestamp,
    state: &'static str,
    key: OwnedRow,
    before: Option<OwnedRow>,
    after: Option<OwnedRow>,
}

/// The rows of each key, for the upsert and Debezium envelopes.
struct KeyedState {
    key: Vec<usize>,
    values: Vec<usize>,
    keys: RowConverter,
    rows: RowConverter,
    /// Per key: its distinct rows with multiplicities.
    current: HashMap<OwnedRow, Vec<(OwnedRow, i64)>>,
}

impl KeyedState {
    fn new(relation: &RelationDesc, key: &[usize]) -> Result<Self> {
        let schema = relation.arrow_schema();
        let field = |i: usize| SortField::new(schema.field(i).data_type().clone());
        Ok(KeyedState {
            key: key.to_vec(),
            values: (0..schema.fields().len())
                .filter(|i| !key.contains(i))
                .collect(),
            keys: RowConverter::new(key.iter().map(|&i| field(i)).collect())?,
            rows: RowConverter::new((0..schema.fields().len()).map(field).collect())?,
            current: HashMap::new(),
        })
    }

    /// Apply `batch` and say, per time and changed key, what it became.
    fn apply(&mut self, batch: &SubscribeBatch, debezium: bool) -> Result<Vec<KeyChange>> {
        let key_columns: Vec<ArrayRef> = self
            .key
            .iter()
            .map(|&i| Arc::clone(batch.rows.column(i)))
            .collect();
        let key_rows = self.keys.convert_columns(&key_columns)?;
        let full_rows = self.rows.convert_columns(batch.rows.columns())?;
        let mut changes = Vec::new();
        let mut start = 0;
        while start < batch.times.len() {
            let time = batch.times[start];
            let end = batch.times[start..]
                .iter()
                .position(|t| *t != time)
                .map_or(batch.times.len(), |n| start + n);
            let mut before: HashMap<OwnedRow, Vec<(OwnedRow, i64)>> = HashMap::new();
            let mut touched = Vec::new();
            for i in start..end {
                let key = key_rows.row(i).owned();
                let rows = self.current.entry(key.clone()).or_default();
                if !before.contains_key(&key) {
                    before.insert(key.clone(), rows.clone());
                    touched.push(key);
                }
                let row = full_rows.row(i);
                match rows.iter_mut().find(|(r, _)| r.row() == row) {
                    Some((_, n)) => *n += batch.diffs[i],
                    None => rows.push((row.owned(), batch.diffs[i])),
                }
                rows.retain(|(_, n)| *n != 0);
            }
            for key in touched {
                let after = self.current.get(&key).cloned().unwrap_or_default();
                if after.is_empty() {
                    self.current.remove(&key);
                }
                let was = before.remove(&key).unwrap_or_default();
                let count = |rows: &[(OwnedRow, i64)]| rows.iter().map(|(_, n)| *n).sum::<i64>();
                let single = |rows: &[(OwnedRow, i64)]| match rows {
                    [(r, 1)] => Some(r.clone()),
                    _ => None,
                };
                let (n_before, n_after) = (count(&was), count(&after));
                let state = if (debezium && n_before > 1) || n_after > 1 {
                    "key_violation"
                } else if n_after == 0 {
                    if n_before == 0 {
                        continue;
                    }
                    "delete"
                } else if debezium && n_before == 0 {
                    "insert"
                } else {
                    "upsert"
                };
                let violation = state == "key_violation";
                changes.push(KeyChange {
                    time,
                    state,
                    key,
                    before: if violation { None } else { single(&was) },
                    after: if violation { None } else { single(&after) },
                });
            }
            start = end;
        }
        Ok(changes)
    }

    /// The envelope's rows for `changes`.
    fn rows(
        &self,
        changes: &[KeyChange],
        debezium: bool,
        progress: bool,
        schema: &SchemaRef,
    ) -> Result<RecordBatch> {
        let times: Vec<Timestamp> = changes.iter().map(|c| c.time).collect();
        let mut columns: Vec<ArrayRef> = vec![timestamps(&times)?];
        if progress {
            columns.push(Arc::new(BooleanArray::from(vec![false; changes.len()])));
        }
        columns.push(Arc::new(StringArray::from(
            changes.iter().map(|c| Some(c.state)).collect::<Vec<_>>(),
        )));
        columns.extend(
            self.keys
                .convert_rows(changes.iter().map(|c| c.key.row()))?,
        );
        if debezium {
            columns.extend(self.value_columns(changes.iter().map(|c| c.before.as_ref()))?);
        }
        columns.extend(self.value_columns(changes.iter().map(|c| c.after.as_ref()))?);
        rebatch(schema, columns)
    }

    /// The value columns of `rows`, NULL where a row is absent.
    fn value_columns<'a>(
        &self,
        rows: impl Iterator<Item = Option<&'a OwnedRow>>,
    ) -> Result<Vec<ArrayRef>> {
        let rows: Vec<Option<&OwnedRow>> = rows.collect();
        let present: Vec<_> = rows.iter().flatten().map(|r| r.row()).collect();
        let mut next = 0u32;
        let indices = UInt32Array::from(
            rows.iter()
                .map(|r| {
                    r.map(|_| {
                        next += 1;
                        next - 1
                    })
                })
                .collect::<Vec<_>>(),
        );
        let full = self.rows.convert_rows(present)?;
        self.values
            .iter()
            .map(|&v| {
                if next == 0 {
                    Ok(new_null_array(full[v].data_type(), rows.len()))
                } else {
                    Ok(arrow::compute::take(full[v].as_ref(), &indices, None)?)
                }
            })
            .collect()
    }
}

//! Writing a dataflow's output to its storage shard.
//!
//! The sink is self-correcting: it writes the difference between what the
//! dataflow says the output is and what the shard holds. At install the
//! dataflow restates the whole output at `start` and the sink subtracts the
//! shard's contents at `start - 1`, so a restart (or a retry after a
//! failed write) never duplicates rows.
//!
//! Errors are written beside the rows, in the shard's error column (see
//! [`crate::output`]), and subtracted and restated like them.
//!
//! Every update goes to worker 0, which hands each completed span of
//! times to storage (`Storage::append_in_background`): readers and
//! subscribers of the view see it at once, and storage's appender thread
//! makes it durable (one part and commit for the spans queued meanwhile)
//! while the worker goes on computing. Once an append is durable, its
//! callback advances the dataflow's upper, which lets the inputs' read
//! holds follow it: a crash loses only output that the restarted dataflow
//! computes again from inputs still held.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, UInt64Array};
use differential_dataflow::consolidation::consolidate_updates;
use freshet_repr::Frontier;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;

use super::{Context, Diff, Rendered, Time};
use crate::error::DataflowError;
use crate::output::{error_column, error_values, row_errors};
use crate::row::{Row, RowCodec};

type Update = (Result<Row, DataflowError>, Time, Diff);

/// Attach the sink for `ctx.desc.id` to `rendered`.
pub(crate) fn render_sink(rendered: Rendered<'_>, ctx: Arc<Context>) {
    let is_writer = rendered.ok.scope().index() == 0;
    let updates = rendered
        .ok
        .map(Ok::<Row, DataflowError>)
        .concat(rendered.err.map(Err));
    let mut writer = if is_writer {
        match Writer::new(Arc::clone(&ctx)) {
            Ok(w) => Some(w),
            Err(e) => {
                ctx.state.fail(format!("starting the sink: {e}"));
                None
            }
        }
    } else {
        None
    };
    updates.inner.sink(
        Exchange::new(|_: &Update| 0u64),
        &format!("Sink {}", ctx.desc.id),
        move |(input, frontier)| {
            let Some(w) = writer.as_mut() else {
                input.for_each(|_, data| data.clear());
                return;
            };
            input.for_each(|_, data| w.pending.append(data));
            // A background append failed (the dataflow is stopped): the
            // appends after it cannot continue the shard's upper.
            if w.ctx.state.failure().is_some() {
                writer = None;
                return;
            }
            // Time is totally ordered: the input frontier has at most one element.
            let frontier = Frontier::from(frontier.frontier().iter().min().copied());
            match w.write_through(&frontier) {
                Ok(()) => {}
                // The process is stopping: what is durable is where a
                // restart resumes.
                Err(freshet_storage::StorageError::ShutDown) => writer = None,
                Err(e) => {
                    w.ctx.state.fail(format!("writing output: {e}"));
                    writer = None;
                }
            }
        },
    );
}

/// The sink's state on worker 0.
struct Writer {
    ctx: Arc<Context>,
    codec: RowCodec,
    updates_schema: arrow::datatypes::SchemaRef,
    /// The shard's upper: everything before it is written.
    upper: Frontier,
    pending: Vec<Update>,
    began: Instant,
}

impl Writer {
    fn new(ctx: Arc<Context>) -> Result<Self, freshet_storage::StorageError> {
        let id = ctx.desc.id;
        let data_schema = ctx.storage.schema(id)?;
        let errors_at = error_column(&data_schema).ok_or_else(|| {
            freshet_storage::StorageError::InvalidUsage(format!("{id} has no error column"))
        })?;
        let codec = RowCodec::new(Arc::new(
            data_schema.project(&(0..errors_at).collect::<Vec<_>>())?,
        ))?;
        // Appends of an earlier incarnation in this process land first.
        ctx.storage.flush_appends()?;
        let (_, upper) = ctx.storage.frontiers(id)?;
        let mut pending = Vec::new();
        // Subtract what an earlier incarnation already wrote.
        if let Some(&u) = upper.as_option()
            && u > 0
        {
            let start = ctx.desc.start;
            let mut persisted_errors = Vec::new();
            for b in ctx.storage.snapshot(id, u - 1)? {
                let errors = row_errors(&b, errors_at)?;
                let rows = codec.encode_columns(&b.columns()[..errors_at], b.num_rows())?;
                for (row, error) in rows.into_iter().zip(errors) {
                    match error {
                        None => pending.push((Ok(row), start, -1)),
                        Some(e) => {
                            persisted_errors.push((e.clone(), 1));
                            pending.push((Err(e), start, -1));
                        }
                    }
                }
            }
            // The shard holds these errors until the dataflow retracts them.
            ctx.state.record_errors(persisted_errors);
        }
        Ok(Writer {
            updates_schema: freshet_storage::updates_schema(&data_schema),
            codec,
            upper,
            pending,
            began: Instant::now(),
            ctx,
        })
    }

    /// Append every pending update at a time the input `frontier` has
    /// passed, advancing the shard's upper to the frontier.
    fn write_through(&mut self, frontier: &Frontier) -> Result<(), freshet_storage::StorageError> {
        // A scheduled view changes only at refresh times: each update
        // moves to the first refresh at or after it (or, past the last
        // refresh, nowhere), and the output is complete up to the refresh
        // after the input frontier.
        let rounded;
        let frontier = match &self.ctx.desc.refresh {
            None => frontier,
            Some(schedule) => {
                self.pending
                    .retain_mut(|(_, t, _)| match schedule.round_up(*t) {
                        Some(r) => {
                            *t = r;
                            true
                        }
                        None => false,
                    });
                rounded = match frontier.as_option().and_then(|f| schedule.round_up(*f)) {
                    Some(r) => Frontier::at(r),
                    None => Frontier::closed(),
                };
                &rounded
            }
        };
        if self.upper >= *frontier {
            return Ok(());
        }
        let (mut ready, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(_, t, _)| !frontier.less_equal(t));
        self.pending = rest;
        consolidate_updates(&mut ready);
        // Rows first, then errors: their times and diffs in that order.
        let (rows, errors): (Vec<_>, Vec<_>) = ready.into_iter().partition(|(d, _, _)| d.is_ok());
        let times: Vec<Time> = rows.iter().chain(&errors).map(|(_, t, _)| *t).collect();
        let diffs: Vec<Diff> = rows.iter().chain(&errors).map(|(_, _, d)| *d).collect();
        let rows: Vec<&Row> = rows
            .iter()
            .filter_map(|(r, _, _)| r.as_ref().ok())
            .collect();
        let errors: Vec<(&DataflowError, Diff)> = errors
            .iter()
            .filter_map(|(e, _, d)| e.as_ref().err().map(|e| (e, *d)))
            .collect();
        let data = self.codec.decode(rows.iter().copied())?;
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(data.num_columns() + 3);
        if errors.is_empty() {
            columns.extend(data.columns().iter().cloned());
        } else {
            // Error rows carry NULL in every column of the view.
            for (column, field) in data.columns().iter().zip(data.schema().fields()) {
                let padding = arrow::array::new_null_array(field.data_type(), errors.len());
                columns.push(arrow::compute::concat(&[
                    column.as_ref(),
                    padding.as_ref(),
                ])?);
            }
        }
        let error_refs: Vec<&DataflowError> = errors.iter().map(|(e, _)| *e).collect();
        columns.push(error_values(rows.len(), &error_refs));
        columns.push(Arc::new(UInt64Array::from(times)));
        columns.push(Arc::new(Int64Array::from(diffs)));
        let errors: Vec<(DataflowError, Diff)> =
            errors.into_iter().map(|(e, d)| (e.clone(), d)).collect();
        let batch = RecordBatch::try_new(Arc::clone(&self.updates_schema), columns)?;
        let upper = frontier.as_option().copied().unwrap_or(Time::MAX);
        let (state, id, as_of, began) = (
            Arc::clone(&self.ctx.state),
            self.ctx.desc.id,
            self.ctx.desc.as_of,
            self.began,
        );
        self.ctx.storage.append_in_background(
            id,
            vec![batch],
            self.upper.clone(),
            frontier.clone(),
            Box::new(move |written| match written {
                Ok(()) => {
                    if state.advance(upper, errors) {
                        tracing::info!(
                            dataflow = %id,
                            as_of,
                            elapsed_ms = began.elapsed().as_millis() as u64,
                            "dataflow hydrated"
                        );
                    }
                }
                // Later appends of this sink expected this one's upper:
                // they fail too, and the first failure is what is kept.
                Err(e) => state.fail(format!("writing output: {e}")),
            }),
        )?;
        self.upper = frontier.clone();
        Ok(())
    }
}

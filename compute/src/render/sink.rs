//! Writing a dataflow's output to its storage shard.
//!
//! The sink is self-correcting: it writes the difference between what the
//! dataflow says the output is and what the shard holds. At install the
//! dataflow restates the whole output at `start` and the sink subtracts the
//! shard's contents at `start - 1`, so a restart (or a retry after a
//! failed write) never duplicates rows.
//!
//! Every update goes to worker 0, which appends each completed span of
//! times with one `compare_and_append` and then lets the inputs' read
//! holds follow the new upper.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, UInt64Array};
use differential_dataflow::consolidation::consolidate_updates;
use timely::PartialOrder;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;
use timely::progress::Antichain;

use super::{Context, Diff, Rendered, Time};
use crate::error::DataflowError;
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
            if let Err(e) = w.write_through(&frontier.frontier().to_owned()) {
                w.ctx.state.fail(format!("writing output: {e}"));
                writer = None;
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
    upper: Antichain<Time>,
    pending: Vec<Update>,
    began: Instant,
}

impl Writer {
    fn new(ctx: Arc<Context>) -> Result<Self, freshet_storage::StorageError> {
        let id = ctx.desc.id;
        let data_schema = ctx.storage.schema(id)?;
        let codec = RowCodec::new(Arc::clone(&data_schema))?;
        let (_, upper) = ctx.storage.frontiers(id)?;
        let mut pending = Vec::new();
        // Subtract what an earlier incarnation already wrote.
        if let Some(&u) = upper.as_option()
            && u > 0
        {
            let start = ctx.desc.start;
            for b in ctx.storage.snapshot(id, u - 1)? {
                for row in codec.encode_columns(b.columns(), b.num_rows())? {
                    pending.push((Ok(row), start, -1));
                }
            }
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
    fn write_through(
        &mut self,
        frontier: &Antichain<Time>,
    ) -> Result<(), freshet_storage::StorageError> {
        if !PartialOrder::less_than(&self.upper, frontier) {
            return Ok(());
        }
        let (mut ready, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|(_, t, _)| !frontier.less_equal(t));
        self.pending = rest;
        consolidate_updates(&mut ready);
        let mut rows = Vec::new();
        let mut times = Vec::new();
        let mut diffs = Vec::new();
        let mut errors = Vec::new();
        for (data, t, d) in ready {
            match data {
                Ok(row) => {
                    rows.push(row);
                    times.push(t);
                    diffs.push(d);
                }
                Err(e) => errors.push((e, d)),
            }
        }
        let data = self.codec.decode(&rows)?;
        let mut columns: Vec<ArrayRef> = data.columns().to_vec();
        columns.push(Arc::new(UInt64Array::from(times)));
        columns.push(Arc::new(Int64Array::from(diffs)));
        let batch = RecordBatch::try_new(Arc::clone(&self.updates_schema), columns)?;
        self.ctx.storage.compare_and_append(
            self.ctx.desc.id,
            &[batch],
            &self.upper,
            frontier.clone(),
        )?;
        self.upper = frontier.clone();
        let upper = frontier.as_option().copied().unwrap_or(Time::MAX);
        let newly_hydrated = self.ctx.state.advance(upper, errors);
        if newly_hydrated {
            tracing::info!(
                dataflow = %self.ctx.desc.id,
                as_of = self.ctx.desc.as_of,
                elapsed_ms = self.began.elapsed().as_millis() as u64,
                "dataflow hydrated"
            );
        }
        Ok(())
    }
}

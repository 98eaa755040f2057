//! Importing storage collections (and constants) into a dataflow.
//!
//! A collection enters as its `snapshot(as_of)` followed by `listen(as_of)`:
//! the only two ways anything reads storage. Updates at times before the
//! dataflow's `start` are advanced to `start`, so the output begins there.
//! A view's input carries its errors (see [`crate::output`]); they become
//! errors of this dataflow.

use std::sync::Arc;
use std::time::Instant;

use differential_dataflow::AsCollection;
use differential_dataflow::hashable::Hashable;
use freshet_repr::GlobalId;
use freshet_storage::{ListenEvent, Notify};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::Scope;
use timely::dataflow::operators::core::{Exchange, OkErr};
use timely::dataflow::operators::generic::operator::source;

use super::{Coll, Context, Diff, Rendered, Time};
use crate::error::DataflowError;
use crate::output::{error_column, row_errors};
use crate::row::{Row, RowCodec};

/// The collection `id`, read on worker 0 and spread across workers by
/// row hash.
pub(crate) fn render_get<'s>(
    scope: Scope<'s, Time>,
    ctx: &Arc<Context>,
    id: GlobalId,
    codec: Arc<RowCodec>,
) -> Rendered<'s> {
    let ctx = Arc::clone(ctx);
    let start = ctx.desc.start;
    let as_of = ctx.desc.as_of;
    let stream = source::<_, CapacityContainerBuilder<Vec<(Imported, Time, Diff)>>, _, _>(
        scope,
        &format!("Get {id}"),
        move |cap, info| {
            let mut cap = (scope.index() == 0).then(|| cap.delayed(&start));
            let activator = scope.worker().sync_activator_for(info.address.to_vec());
            let notify: Notify = Arc::new(move || {
                let _ = activator.activate();
            });
            let mut listen = None;
            let mut snapshotted = false;
            move |output| {
                let Some(c) = cap.as_mut() else { return };
                if listen.is_none() {
                    // Listen first: an input view may not have reached
                    // `as_of` yet, and its progress says when it has.
                    match ctx.storage.listen(id, as_of, Some(Arc::clone(&notify))) {
                        Ok(l) => listen = Some(l),
                        Err(e) => {
                            ctx.state.fail(format!("reading {id}: {e}"));
                            cap = None;
                            return;
                        }
                    }
                }
                let Some(l) = listen.as_mut() else { return };
                loop {
                    match l.try_next() {
                        Ok(ListenEvent::Updates(batch)) => {
                            if let Err(e) = give_updates(&codec, &batch, as_of, start, c, output) {
                                ctx.state.fail(format!("reading {id}: {e}"));
                                cap = None;
                                return;
                            }
                        }
                        Ok(ListenEvent::Progress(frontier)) => {
                            let complete = frontier.as_option().is_none_or(|t| *t > as_of);
                            if !snapshotted && complete {
                                // The input is complete at `as_of`: read it.
                                let began = Instant::now();
                                let result = ctx.storage.snapshot(id, as_of).and_then(|batches| {
                                    let mut rows = 0usize;
                                    let mut session = output.session(&*c);
                                    for b in &batches {
                                        let imported = import(&codec, b, b.num_columns())?;
                                        rows += imported.len();
                                        session.give_iterator(
                                            imported.into_iter().map(|r| (r, start, 1)),
                                        );
                                    }
                                    Ok(rows)
                                });
                                match result {
                                    Ok(rows) => {
                                        tracing::info!(dataflow = %ctx.desc.id, input = %id,
                                        rows, as_of, elapsed_ms = began.elapsed().as_millis() as u64,
                                        "input snapshot loaded")
                                    }
                                    Err(e) => {
                                        ctx.state.fail(format!("reading {id}: {e}"));
                                        cap = None;
                                        return;
                                    }
                                }
                                snapshotted = true;
                            }
                            if !snapshotted {
                                continue;
                            }
                            match frontier.as_option() {
                                Some(t) => c.downgrade(&(*t).max(start)),
                                None => {
                                    cap = None;
                                    return;
                                }
                            }
                        }
                        Err(false) => return,
                        Err(true) => {
                            cap = None;
                            return;
                        }
                    }
                }
            }
        },
    );
    let (ok, err) = stream.ok_err::<Vec<_>, _, Vec<_>, _, _>(|(d, t, r)| match d {
        Ok(row) => Ok((row, t, r)),
        Err(e) => Err((e, t, r)),
    });
    Rendered {
        ok: ok
            .exchange(|(row, _, _): &(Row, Time, Diff)| row.hashed())
            .as_collection(),
        err: err.as_collection(),
    }
}

/// A row of an input, or an error a view input holds.
type Imported = Result<Row, DataflowError>;

/// The first `data_end` columns of `batch` as rows; a view's error column
/// (among them, last) turns its rows into errors.
fn import(
    codec: &RowCodec,
    batch: &arrow::array::RecordBatch,
    data_end: usize,
) -> Result<Vec<Imported>, freshet_storage::StorageError> {
    let columns = &batch.columns()[..data_end];
    match error_column(batch.schema_ref()).filter(|&i| i < data_end) {
        None => Ok(codec
            .encode_columns(columns, batch.num_rows())?
            .into_iter()
            .map(Ok)
            .collect()),
        Some(i) => {
            let errors = row_errors(batch, i)?;
            let rows = codec.encode_columns(&columns[..i], batch.num_rows())?;
            Ok(rows
                .into_iter()
                .zip(errors)
                .map(|(row, e)| match e {
                    None => Ok(row),
                    Some(e) => Err(e),
                })
                .collect())
        }
    }
}

/// The output handle of an import operator.
type UpdateOutput<'a> = timely::dataflow::operators::generic::OutputBuilderSession<
    'a,
    Time,
    CapacityContainerBuilder<Vec<(Imported, Time, Diff)>>,
>;

/// Send a listen batch (data columns, time, diff) as updates. Updates at
/// or before `as_of` are the snapshot's (a listen opened before its
/// collection reached `as_of` also hears the appends that got it there).
fn give_updates(
    codec: &RowCodec,
    batch: &arrow::array::RecordBatch,
    as_of: Time,
    start: Time,
    cap: &timely::dataflow::operators::Capability<Time>,
    output: &mut UpdateOutput<'_>,
) -> Result<(), freshet_storage::StorageError> {
    let n = batch.num_columns();
    let times = batch
        .column(n - 2)
        .as_any()
        .downcast_ref::<arrow::array::UInt64Array>()
        .ok_or_else(|| {
            freshet_storage::StorageError::InvalidUsage("listen batch without times".into())
        })?;
    let diffs = batch
        .column(n - 1)
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .ok_or_else(|| {
            freshet_storage::StorageError::InvalidUsage("listen batch without diffs".into())
        })?;
    let rows = import(codec, batch, n - 2)?;
    let mut session = output.session(cap);
    for (i, row) in rows.into_iter().enumerate() {
        let time = times.value(i);
        if time > as_of {
            session.give((row, time.max(start), diffs.value(i)));
        }
    }
    Ok(())
}

/// A collection of fixed `items` at `time`, each with multiplicity one
/// (on worker 0).
pub(crate) fn render_constant<'s, D>(
    scope: Scope<'s, Time>,
    time: Time,
    items: Vec<D>,
) -> Coll<'s, D>
where
    D: differential_dataflow::Data,
{
    source::<_, CapacityContainerBuilder<Vec<(D, Time, Diff)>>, _, _>(
        scope,
        "Constant",
        move |cap, _| {
            let mut cap = (scope.index() == 0).then(|| cap.delayed(&time));
            let mut items = Some(items);
            move |output| {
                if let (Some(c), Some(items)) = (cap.take(), items.take()) {
                    output
                        .session(&c)
                        .give_iterator(items.into_iter().map(|d| (d, time, 1)));
                }
            }
        },
    )
    .as_collection()
}

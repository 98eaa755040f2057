//! The export of a subscribe: every update, consolidated per time, handed
//! to the session once its time is complete.
//!
//! All updates go to worker 0 (as for a materialized view's sink), which
//! buffers them until the frontier passes their time and then queues them
//! in time order, with the new frontier, for the consumer. A positive error
//! at a completed time ends the subscribe with that error.

use std::sync::Arc;

use differential_dataflow::consolidation::consolidate_updates;
use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::Operator;

use super::{Context, Diff, Rendered, Time};
use crate::error::DataflowError;
use crate::row::Row;

type Update = (Result<Row, DataflowError>, Time, Diff);

/// Attach the subscribe export for `ctx.desc.id` to `rendered`: without
/// `snapshot`, updates at the dataflow's start (the contents as of it) are
/// left out; updates at or after `up_to` are never sent, and reaching it
/// completes the subscribe.
pub(crate) fn render_subscribe(
    rendered: Rendered<'_>,
    ctx: Arc<Context>,
    snapshot: bool,
    up_to: Option<Time>,
) {
    let is_writer = rendered.ok.scope().index() == 0;
    let updates = rendered
        .ok
        .map(Ok::<Row, DataflowError>)
        .concat(rendered.err.map(Err));
    let start = ctx.desc.start;
    let mut pending: Vec<Update> = Vec::new();
    let mut upper: Time = start;
    let mut done = !is_writer;
    updates.inner.sink(
        Exchange::new(|_: &Update| 0u64),
        &format!("Subscribe {}", ctx.desc.id),
        move |(input, frontier)| {
            if done {
                input.for_each(|_, data| data.clear());
                return;
            }
            input.for_each(|_, data| {
                pending.extend(
                    data.drain(..).filter(|(_, t, _)| {
                        (snapshot || *t > start) && up_to.is_none_or(|u| *t < u)
                    }),
                )
            });
            let frontier = frontier.frontier();
            let reached = frontier.iter().next().copied();
            let mut new_upper = reached.unwrap_or(Time::MAX);
            if let Some(u) = up_to {
                new_upper = new_upper.min(u);
            }
            let complete = reached.is_none() || up_to.is_some_and(|u| new_upper >= u);
            if new_upper <= upper && !complete {
                return;
            }
            let Some(queue) = ctx.state.subscribe_queue() else {
                done = true;
                return;
            };
            let (mut ready, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut pending)
                .into_iter()
                .partition(|(_, t, _)| *t < new_upper);
            pending = rest;
            consolidate_updates(&mut ready);
            ready.sort_by_key(|(_, t, _)| *t);
            let mut rows = Vec::with_capacity(ready.len());
            for (data, time, diff) in ready {
                match data {
                    Ok(row) => rows.push((row, time, diff)),
                    Err(e) if diff > 0 => {
                        queue.fail(e);
                        done = true;
                        return;
                    }
                    Err(_) => {}
                }
            }
            upper = new_upper;
            done = !queue.push(rows, upper, complete);
            // The inputs need not stay readable before what was delivered.
            ctx.state.advance(upper, Vec::new());
        },
    );
}

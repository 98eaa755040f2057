//! Rendering compiled plans as timely/differential dataflows.
//!
//! Every operator produces two collections: its rows, and the errors
//! evaluating it raised for particular rows ([`DataflowError`]). Errors
//! flow to the sink beside the rows, so a bad row fails reads of the view
//! without stopping the dataflow, and retracting the row retracts the
//! error.

mod accumulable;
mod arranged;
mod compile;
mod hierarchical;
mod index;
mod join;
mod key_directory;
mod ordered;
mod reduce;
mod shared_batch;
mod sink;
mod source;
mod subscribe;
mod temporal;

use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::common::Result as DfResult;
use datafusion::error::DataFusionError;
use differential_dataflow::{AsCollection, VecCollection};
use freshet_repr::Timestamp;
use freshet_storage::Storage;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::Scope;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::core::OkErr;
use timely::dataflow::operators::generic::Operator;
use timely::worker::Worker;

pub(crate) use arranged::SizeProbe;
use compile::AsRow;
pub(crate) use compile::{KeyEval, Node, compile, compile_index_key};
pub(crate) use index::KeySelect;
pub(crate) use index::{IndexImport, IndexTraces, PeekPart, PublishedRows, error_worker};

use crate::error::DataflowError;
use crate::row::{Row, RowCodec};
use crate::state::DataflowState;
use freshet_compute_types::{DataflowDesc, Export};

/// Dataflow time: storage timestamps.
pub(crate) type Time = Timestamp;
/// Multiplicity changes.
pub(crate) type Diff = i64;
/// A collection of `D` at [`Time`] with [`Diff`]s.
pub(crate) type Coll<'s, D> = VecCollection<'s, Time, D, Diff>;

/// An operator's outputs: rows and errors.
pub(crate) struct Rendered<'s> {
    pub ok: Coll<'s, Row>,
    pub err: Coll<'s, DataflowError>,
}

/// What every operator of one dataflow may need.
pub(crate) struct Context {
    pub storage: Arc<Storage>,
    pub desc: Arc<DataflowDesc>,
    pub state: Arc<DataflowState>,
}

/// Build the dataflow for `desc` on this worker, exporting to its shard or,
/// given an index key, to an index. Returns probes for the bytes its
/// arrangements hold, and this worker's part of the index.
///
/// `imports` holds this worker's handles on the indexes the plan reads by
/// arrangement ([`Node::ArrangedGet`]).
pub(crate) fn build_dataflow(
    worker: &mut Worker,
    node: &Node,
    index_key: Option<Arc<KeyEval>>,
    ctx: Arc<Context>,
    imports: &mut std::collections::BTreeMap<freshet_repr::GlobalId, IndexImport>,
) -> (Vec<SizeProbe>, Option<IndexTraces>) {
    let name = format!("{}", ctx.desc.id);
    let mut index = None;
    let probes = arranged::collect_probes(|| {
        worker.dataflow_named::<Time, _, _>(&name, |scope| {
            let rendered = render(scope, node, &ctx, imports);
            match (index_key, &ctx.desc.export) {
                (Some(key), _) => index = Some(index::render_index(rendered, key)),
                (None, Export::Subscribe { snapshot, up_to }) => {
                    subscribe::render_subscribe(rendered, Arc::clone(&ctx), *snapshot, *up_to)
                }
                (None, _) => sink::render_sink(rendered, Arc::clone(&ctx)),
            }
        })
    });
    (probes, index)
}

fn render<'s>(
    scope: Scope<'s, Time>,
    node: &Node,
    ctx: &Arc<Context>,
    imports: &mut Imports,
) -> Rendered<'s> {
    match node {
        Node::Get { id, codec } => source::render_get(scope, ctx, *id, Arc::clone(codec)),
        Node::ArrangedGet { index } => match imports.get_mut(index) {
            Some(import) => import.render(scope, &index.to_string(), ctx.desc.start),
            None => {
                ctx.state
                    .fail(format!("index {index} is not installed on this worker"));
                Rendered {
                    ok: source::render_constant(scope, ctx.desc.start, Vec::new()),
                    err: source::render_constant(scope, ctx.desc.start, Vec::new()),
                }
            }
        },
        Node::Constant { rows } => Rendered {
            ok: source::render_constant(scope, ctx.desc.start, rows.clone()),
            err: source::render_constant(scope, ctx.desc.start, Vec::new()),
        },
        Node::Mfp { input, eval } => {
            let input = render(scope, input, ctx, imports);
            let eval = Arc::clone(eval);
            let (ok, err) = eval_op(
                input.ok,
                "Map/Filter",
                Arc::clone(&eval.input),
                move |b, _| eval.apply(b),
            );
            Rendered {
                ok,
                err: input.err.concat(err),
            }
        }
        Node::TemporalFilter { input, eval } => {
            let input = render(scope, input, ctx, imports);
            let eval = Arc::clone(eval);
            let (valid, err) = eval_op(
                input.ok,
                "TemporalFilter",
                Arc::clone(&eval.input),
                move |b, rows: &[Row]| {
                    Ok(eval
                        .validity(b)?
                        .into_iter()
                        .zip(rows)
                        .map(|(v, row)| v.map(|v| (row.clone(), v)))
                        .collect())
                },
            );
            Rendered {
                ok: temporal::delay(valid),
                err: input.err.concat(err),
            }
        }
        Node::Join { left, right, spec } => {
            let left = render(scope, left, ctx, imports);
            let right = render(scope, right, ctx, imports);
            join::render_join(left, right, Arc::clone(spec))
        }
        Node::Reduce { input, spec } => {
            let input = render(scope, input, ctx, imports);
            reduce::render_reduce(scope, input, Arc::clone(spec), ctx.desc.start)
        }
        Node::Distinct { input } => {
            let input = render(scope, input, ctx, imports);
            Rendered {
                ok: arranged::threshold(input.ok, "Distinct", |_, r| Diff::from(*r > 0)),
                err: input.err,
            }
        }
        Node::Window { input, spec } => {
            ordered::render_window(render(scope, input, ctx, imports), Arc::clone(spec))
        }
        Node::TopK { input, spec } => {
            ordered::render_topk(render(scope, input, ctx, imports), Arc::clone(spec))
        }
        Node::Union { inputs } => {
            let mut parts = inputs
                .iter()
                .map(|i| render(scope, i, ctx, imports))
                .collect::<Vec<_>>()
                .into_iter();
            let first = parts.next().unwrap_or_else(|| Rendered {
                ok: source::render_constant(scope, ctx.desc.start, Vec::new()),
                err: source::render_constant(scope, ctx.desc.start, Vec::new()),
            });
            let (oks, errs): (Vec<_>, Vec<_>) = parts.map(|r| (r.ok, r.err)).unzip();
            Rendered {
                ok: first.ok.concatenate(oks),
                err: first.err.concatenate(errs),
            }
        }
    }
}

/// This worker's handles on imported indexes, by index.
type Imports = std::collections::BTreeMap<freshet_repr::GlobalId, IndexImport>;

/// A group's rows, each repeated by its multiplicity; a negative one is a
/// bug upstream and becomes an error of the view.
pub(crate) fn expand<'a>(
    values: impl Iterator<Item = (&'a Row, Diff)>,
) -> Result<Vec<&'a Row>, DataflowError> {
    let mut rows = Vec::new();
    for (row, diff) in values {
        if diff < 0 {
            return Err(DataflowError::internal(format!(
                "negative multiplicity {diff} in a group"
            )));
        }
        rows.extend(std::iter::repeat_n(row, diff as usize));
    }
    Ok(rows)
}

/// An operator that decodes each container of updates into one Arrow
/// batch, runs `logic` over it (one output per input row, `None` to drop
/// the row), and re-attaches times and diffs.
///
/// If `logic` fails for the batch, it is retried row by row, so only the
/// rows that fail become errors (with their own times and diffs, so
/// retracting the row retracts its error).
pub(crate) fn eval_op<'s, D, O, L>(
    input: Coll<'s, D>,
    name: &str,
    codec: Arc<RowCodec>,
    mut logic: L,
) -> (Coll<'s, O>, Coll<'s, DataflowError>)
where
    D: AsRow + differential_dataflow::Data,
    O: differential_dataflow::Data,
    L: FnMut(&RecordBatch, &[D]) -> DfResult<Vec<Option<O>>> + 'static,
{
    let mut items: Vec<D> = Vec::new();
    let mut stamps: Vec<(Time, Diff)> = Vec::new();
    let stream = input
        .inner
        .unary::<CapacityContainerBuilder<Vec<(Result<O, DataflowError>, Time, Diff)>>, _, _, _>(
            Pipeline,
            name,
            move |_, _| {
                move |input, output| {
                    input.for_each(|cap, data| {
                        items.clear();
                        stamps.clear();
                        for (d, t, r) in data.drain(..) {
                            items.push(d);
                            stamps.push((t, r));
                        }
                        let results = evaluate_rows(&codec, &mut logic, &items);
                        let mut session = output.session(&cap);
                        for (res, (t, r)) in results.into_iter().zip(stamps.drain(..)) {
                            match res {
                                Ok(Some(o)) => session.give((Ok(o), t, r)),
                                Ok(None) => {}
                                Err(e) => session.give((Err(e), t, r)),
                            }
                        }
                    });
                }
            },
        );
    let (ok, err) = stream.ok_err::<Vec<_>, _, Vec<_>, _, _>(|(res, t, r)| match res {
        Ok(o) => Ok((o, t, r)),
        Err(e) => Err((e, t, r)),
    });
    (ok.as_collection(), err.as_collection())
}

/// `logic` over all of `items`, or row by row if that fails.
/// Logic evaluating a batch of decoded items: one optional output per item.
type BatchLogic<'a, D, O> = dyn FnMut(&RecordBatch, &[D]) -> DfResult<Vec<Option<O>>> + 'a;

fn evaluate_rows<D: AsRow, O>(
    codec: &RowCodec,
    logic: &mut impl FnMut(&RecordBatch, &[D]) -> DfResult<Vec<Option<O>>>,
    items: &[D],
) -> Vec<Result<Option<O>, DataflowError>> {
    let run = |logic: &mut BatchLogic<'_, D, O>, items: &[D]| -> DfResult<Vec<Option<O>>> {
        let rows: Vec<_> = items.iter().map(AsRow::as_row).collect();
        let batch = codec
            .decode(rows.iter().map(|r| r.as_ref()))
            .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))?;
        let out = logic(&batch, items)?;
        if out.len() != items.len() {
            return Err(DataFusionError::Internal(format!(
                "evaluation returned {} rows for {}",
                out.len(),
                items.len()
            )));
        }
        Ok(out)
    };
    match run(logic, items) {
        Ok(out) => out.into_iter().map(Ok).collect(),
        Err(e) if items.len() <= 1 => items
            .iter()
            .map(|_| Err(DataflowError::from_datafusion(&e)))
            .collect(),
        Err(_) => items
            .iter()
            .map(|item| match run(logic, std::slice::from_ref(item)) {
                Ok(mut out) => Ok(out.pop().flatten()),
                Err(e) => Err(DataflowError::from_datafusion(&e)),
            })
            .collect(),
    }
}

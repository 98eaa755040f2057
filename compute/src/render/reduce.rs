//! GROUP BY and aggregates.
//!
//! When every aggregate is accumulable (see [`super::accumulable`]) a
//! group's state rides in the differences and a change costs O(1) per
//! group; min/max are hierarchical (see [`super::hierarchical`]); a mix of
//! the two is collated. Otherwise the reduction recomputes a changed
//! group's aggregates from the group's rows with DataFusion's own
//! accumulators, which costs O(group) per change but computes any
//! aggregate exactly as ad hoc. Every class gives a global aggregate its
//! empty-input row the same way ([`split_output`]).

use std::rc::Rc;
use std::sync::Arc;

use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::error::DataFusionError;
use differential_dataflow::AsCollection;
use timely::dataflow::Scope;
use timely::dataflow::operators::core::OkErr;

use super::accumulable::{Accum, Accumulable};
use super::arranged::{arrange_by_key, reduce};
use super::compile::{Collation, ReduceSpec, encode_values};
use super::source::render_constant;
use super::{Coll, Diff, Rendered, Time, eval_op, expand};
use crate::error::DataflowError;
use crate::row::{Row, RowCodec};

/// Render a reduction of `input`.
pub(crate) fn render_reduce<'s>(
    scope: Scope<'s, Time>,
    input: Rendered<'s>,
    spec: Arc<ReduceSpec>,
    start: Time,
) -> Rendered<'s> {
    if spec.accumulable.is_some() {
        let finish = finish_rows(&spec);
        let (ok, err) = accumulate(
            scope,
            input.ok,
            spec,
            |s| s.accumulable.as_ref(),
            start,
            finish,
        );
        return Rendered {
            ok,
            err: input.err.concat(err),
        };
    }
    if spec.min_max.is_some() {
        let finish = finish_rows(&spec);
        let (ok, err) = super::hierarchical::min_max(
            scope,
            input.ok,
            spec,
            |s| s.min_max.as_ref(),
            start,
            finish,
        );
        return Rendered {
            ok,
            err: input.err.concat(err),
        };
    }
    if spec.collation.is_some() {
        return render_collated(scope, input, spec, start);
    }
    let key_spec = Arc::clone(&spec);
    let (keyed, key_errs) = eval_op(
        input.ok,
        "GroupKey",
        Arc::clone(&spec.input),
        move |batch, rows: &[Row]| key_spec.key.pair(batch, rows.iter().cloned()),
    );
    let group_spec = Arc::clone(&spec);
    let reduced = reduce::<_, _, Result<Row, DataflowError>, _, Diff, _>(
        keyed,
        "Reduce",
        move |key: &Row, values: &[(&Row, Diff)], output| {
            let result = expand(values.iter().map(|(r, d)| (*r, *d))).and_then(|rows| {
                group_spec
                    .aggregate(&rows)
                    .map(|aggs| key.concat(&aggs))
                    .map_err(|e| DataflowError::from_datafusion(&e))
            });
            output.push((result, 1));
        },
    )
    .map(|(_key, result)| result);
    // A global aggregate over no rows: the aggregates of the empty group.
    let empty = spec
        .global
        .then(|| spec.aggregate(&[]).map(|aggs| Row::default().concat(&aggs)));
    let (ok, err) = split_output(scope, start, reduced, empty);
    Rendered {
        ok,
        err: input.err.concat(key_errs).concat(err),
    }
}

/// How a reduction's output is formed from a group's key and aggregate
/// values: final rows, or (for collated reductions) partial rows by key.
pub(crate) type Finish<O> = Rc<dyn Fn(&Row, Vec<ScalarValue>) -> DfResult<O>>;

/// The rows a reduction class produces, and the errors it raised.
pub(crate) type Output<'s, O> = (Coll<'s, O>, Coll<'s, DataflowError>);

/// Final rows: the key followed by the aggregate values.
fn finish_rows(spec: &Arc<ReduceSpec>) -> Finish<Row> {
    let spec = Arc::clone(spec);
    Rc::new(move |key: &Row, values| spec.encode_aggregates(values).map(|a| key.concat(&a)))
}

/// Split results into rows and errors; a global aggregate gets the
/// empty-input row (`empty`) exactly while the reduction has no group.
pub(crate) fn split_output<'s, O>(
    scope: Scope<'s, Time>,
    start: Time,
    reduced: Coll<'s, Result<O, DataflowError>>,
    empty: Option<DfResult<O>>,
) -> Output<'s, O>
where
    O: differential_dataflow::Data + super::arranged::HeapSize,
{
    let mut errs = render_constant(scope, start, Vec::new());
    let reduced = match empty {
        Some(Ok(row)) => {
            let marker = row.clone();
            let present = reduced.clone().map(move |_| Ok(marker.clone())).negate();
            reduced
                .concat(render_constant(scope, start, vec![Ok(row)]))
                .concat(present)
        }
        Some(Err(e)) => {
            errs = render_constant(scope, start, vec![DataflowError::from_datafusion(&e)]);
            reduced
        }
        None => reduced,
    };
    let (ok, err) =
        reduced
            .inner
            .ok_err::<Vec<_>, _, Vec<_>, _, _>(|(result, t, r)| match result {
                Ok(row) => Ok((row, t, r)),
                Err(e) => Err((e, t, r)),
            });
    (ok.as_collection(), errs.concat(err.as_collection()))
}

/// A reduction whose aggregates (those of `class(spec)`) are all
/// accumulable: each row contributes its share of the aggregate state as
/// the diff of one `(key, ())` update.
pub(crate) fn accumulate<'s, O>(
    scope: Scope<'s, Time>,
    input: Coll<'s, Row>,
    spec: Arc<ReduceSpec>,
    class: fn(&ReduceSpec) -> Option<&Accumulable>,
    start: Time,
    finish: Finish<O>,
) -> Output<'s, O>
where
    O: differential_dataflow::Data + super::arranged::HeapSize,
{
    let contrib_spec = Arc::clone(&spec);
    let (keyed, key_errs) = eval_op(
        input,
        "AggregateContributions",
        Arc::clone(&spec.input),
        move |batch, _rows: &[Row]| {
            let Some(acc) = class(&contrib_spec) else {
                return Ok(vec![]);
            };
            contrib_spec.key.pair(batch, acc.contributions(batch)?)
        },
    );
    let exploded = keyed.explode(|(key, accum): (Row, Accum)| Some(((key, ()), accum)));
    let finish_spec = Arc::clone(&spec);
    let group_finish = Rc::clone(&finish);
    let reduced = reduce::<_, _, Result<O, DataflowError>, _, Diff, _>(
        exploded,
        "AccumulableReduce",
        move |key: &Row, values: &[(&(), Accum)], output| {
            let Some(acc) = class(&finish_spec) else {
                return;
            };
            let accum = &values[0].1;
            if accum.rows < 0 {
                let e = DataflowError::internal(format!(
                    "negative row count {} in a group",
                    accum.rows
                ));
                output.push((Err(e), 1));
                return;
            }
            if accum.rows == 0 {
                // An emptied group (float sums may leave rounding dust).
                return;
            }
            let result = acc
                .finish(accum)
                .and_then(|values| group_finish(key, values))
                .map_err(|e| DataflowError::from_datafusion(&e));
            output.push((result, 1));
        },
    )
    .map(|(_key, result)| result);
    let empty = spec.global.then(|| match class(&spec) {
        Some(acc) => acc
            .finish(&Accum::default())
            .and_then(|values| finish(&Row::default(), values)),
        None => Err(DataFusionError::Internal("not accumulable".into())),
    });
    let (ok, err) = split_output(scope, start, reduced, empty);
    (ok, key_errs.concat(err))
}

/// A reduction mixing accumulable and min/max aggregates: each class is
/// reduced its own cheap way to partial rows by key, and the partial rows
/// are joined on the key and put back in the query's aggregate order.
fn render_collated<'s>(
    scope: Scope<'s, Time>,
    input: Rendered<'s>,
    spec: Arc<ReduceSpec>,
    start: Time,
) -> Rendered<'s> {
    let partial = |codec: fn(&Collation) -> &Arc<RowCodec>| -> Finish<(Row, Row)> {
        let spec = Arc::clone(&spec);
        Rc::new(move |key: &Row, values| {
            let Some(c) = &spec.collation else {
                return Err(DataFusionError::Internal("not collated".into()));
            };
            Ok((key.clone(), encode_values(codec(c), values)?))
        })
    };
    let (a, a_err) = accumulate(
        scope,
        input.ok.clone(),
        Arc::clone(&spec),
        |s| s.collation.as_ref().map(|c| &c.accum),
        start,
        partial(|c| &c.accum_codec),
    );
    let (m, m_err) = super::hierarchical::min_max(
        scope,
        input.ok,
        Arc::clone(&spec),
        |s| s.collation.as_ref().map(|c| &c.min_max),
        start,
        partial(|c| &c.min_max_codec),
    );
    let assemble_spec = Arc::clone(&spec);
    let assembled = arrange_by_key(a, "CollateAccumulable")
        .join_core(
            arrange_by_key(m, "CollateMinMax"),
            |k: &Row, ra: &Row, rm: &Row| Some((k.clone(), (ra.clone(), rm.clone()))),
        )
        .map(move |(key, (ra, rm)): (Row, (Row, Row))| {
            assemble_spec
                .collation
                .as_ref()
                .ok_or_else(|| DataFusionError::Internal("not collated".into()))
                .and_then(|c| c.assemble(&ra, &rm))
                .and_then(|values| assemble_spec.encode_aggregates(values))
                .map(|aggs| key.concat(&aggs))
                .map_err(|e| DataflowError::from_datafusion(&e))
        });
    let (ok, err) = split_output(scope, start, assembled, None);
    Rendered {
        ok,
        err: input.err.concat(a_err).concat(m_err).concat(err),
    }
}

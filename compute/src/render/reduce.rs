//! GROUP BY and aggregates.
//!
//! When every aggregate is accumulable (see [`super::accumulable`]) a
//! group's state rides in the differences and a change costs O(1) per
//! group. Otherwise the reduction recomputes a changed group's aggregates
//! from the group's rows with DataFusion's own accumulators, which costs
//! O(group) per change but computes any aggregate exactly as ad hoc.

use std::sync::Arc;

use differential_dataflow::AsCollection;
use timely::dataflow::Scope;
use timely::dataflow::operators::core::OkErr;

use super::accumulable::Accum;
use super::compile::ReduceSpec;
use super::source::render_constant;
use super::{Diff, Rendered, Time, eval_op};
use crate::error::DataflowError;
use crate::row::Row;

/// Render a reduction of `input`.
pub(crate) fn render_reduce<'s>(
    scope: Scope<'s, Time>,
    input: Rendered<'s>,
    spec: Arc<ReduceSpec>,
    start: Time,
) -> Rendered<'s> {
    if spec.accumulable.is_some() {
        return render_accumulable(scope, input, spec, start);
    }
    if spec.min_max.is_some() {
        return super::hierarchical::render_min_max(scope, input, spec, start);
    }
    let key_spec = Arc::clone(&spec);
    let (keyed, key_errs) = eval_op(
        input.ok,
        "GroupKey",
        Arc::clone(&spec.input),
        move |batch, rows: &[Row]| {
            Ok(key_spec
                .key
                .keys(batch)?
                .into_iter()
                .zip(rows)
                .map(|(k, r)| k.map(|k| (k, Some(r.clone()))))
                .collect())
        },
    );
    // A global aggregate has one row even over no input: a marker value
    // keeps its group present.
    let keyed = if spec.global {
        keyed.concat(render_constant(scope, start, vec![(Row::default(), None)]))
    } else {
        keyed
    };
    let reduced = keyed.reduce_named::<_, Result<Row, DataflowError>, Diff>(
        "Reduce",
        move |key: &Row, values: &[(&Option<Row>, Diff)], output| {
            let mut rows: Vec<&Row> = Vec::new();
            for (value, diff) in values {
                let Some(row) = value else { continue };
                if *diff < 0 {
                    let e =
                        DataflowError::internal(format!("negative multiplicity {diff} in a group"));
                    output.push((Err(e), 1));
                    return;
                }
                for _ in 0..*diff {
                    rows.push(row);
                }
            }
            let result = spec
                .aggregate(&rows)
                .map(|aggs| key.concat(&aggs))
                .map_err(|e| DataflowError::from_datafusion(&e));
            output.push((result, 1));
        },
    );
    let (ok, err) = reduced
        .inner
        .ok_err::<Vec<_>, _, Vec<_>, _, _>(|((_key, result), t, r)| match result {
            Ok(row) => Ok((row, t, r)),
            Err(e) => Err((e, t, r)),
        });
    Rendered {
        ok: ok.as_collection(),
        err: input.err.concat(key_errs).concat(err.as_collection()),
    }
}

/// A reduction whose aggregates are all accumulable: each row contributes
/// its share of the aggregate state as the diff of one `(key, ())` update.
fn render_accumulable<'s>(
    scope: Scope<'s, Time>,
    input: Rendered<'s>,
    spec: Arc<ReduceSpec>,
    start: Time,
) -> Rendered<'s> {
    let contrib_spec = Arc::clone(&spec);
    let (keyed, key_errs) = eval_op(
        input.ok,
        "AggregateContributions",
        Arc::clone(&spec.input),
        move |batch, _rows: &[Row]| {
            let Some(acc) = &contrib_spec.accumulable else {
                return Ok(vec![]);
            };
            let keys = contrib_spec.key.keys(batch)?;
            let contributions = acc.contributions(batch)?;
            Ok(keys
                .into_iter()
                .zip(contributions)
                .map(|(k, c)| k.map(|k| (k, c)))
                .collect())
        },
    );
    let exploded = keyed.explode(|(key, accum): (Row, Accum)| Some(((key, ()), accum)));
    let finish_spec = Arc::clone(&spec);
    let reduced = exploded.reduce_named::<_, Result<Row, DataflowError>, Diff>(
        "AccumulableReduce",
        move |key: &Row, values: &[(&(), Accum)], output| {
            let Some(acc) = &finish_spec.accumulable else {
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
                .and_then(|values| finish_spec.encode_aggregates(values))
                .map(|aggs| key.concat(&aggs))
                .map_err(|e| DataflowError::from_datafusion(&e));
            output.push((result, 1));
        },
    );
    let mut errs = input.err.concat(key_errs);
    let reduced = reduced.map(|(_key, result)| result);
    // A global aggregate has one row even over no input: the empty-input
    // row, present exactly while the reduction has no group.
    let reduced = if spec.global {
        let empty = spec
            .accumulable
            .as_ref()
            .map(|acc| {
                acc.finish(&Accum::default())
                    .and_then(|values| spec.encode_aggregates(values))
            })
            .unwrap_or_else(|| {
                Err(datafusion::error::DataFusionError::Internal(
                    "not accumulable".into(),
                ))
            });
        match empty {
            Ok(row) => {
                let marker = row.clone();
                let present = reduced.clone().map(move |_| Ok(marker.clone())).negate();
                reduced
                    .concat(render_constant(scope, start, vec![Ok(row)]))
                    .concat(present)
            }
            Err(e) => {
                errs = errs.concat(render_constant(
                    scope,
                    start,
                    vec![DataflowError::from_datafusion(&e)],
                ));
                reduced
            }
        }
    } else {
        reduced
    };
    let (ok, err) =
        reduced
            .inner
            .ok_err::<Vec<_>, _, Vec<_>, _, _>(|(result, t, r)| match result {
                Ok(row) => Ok((row, t, r)),
                Err(e) => Err((e, t, r)),
            });
    Rendered {
        ok: ok.as_collection(),
        err: errs.concat(err.as_collection()),
    }
}

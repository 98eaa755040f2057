//! GROUP BY and aggregates.
//!
//! This rendering recomputes a group's aggregates from the group's rows
//! whenever the group changes, with DataFusion's own accumulators, so the
//! result is exactly what the query computes ad hoc. It costs O(group) per
//! change.

use std::sync::Arc;

use differential_dataflow::AsCollection;
use timely::dataflow::Scope;
use timely::dataflow::operators::core::OkErr;

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

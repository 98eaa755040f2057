//! Joins: both inputs arranged by key, matched with `join_core`.
//!
//! Rows whose key has a NULL never match (unless the join compares with
//! `IS NOT DISTINCT FROM`): differential dataflow would match NULL to
//! NULL, so keys with NULLs are dropped from the arrangements here. Outer,
//! semi and anti joins are built from the inner join: the rows of a side
//! that have a match are found by a semijoin, and the rest are that side
//! minus them.

use std::sync::Arc;

use super::arranged::{arrange_by_key, arrange_by_self, threshold};
use super::compile::{JoinSpec, KeyEval};
use super::{Coll, Diff, Rendered, eval_op};
use crate::error::DataflowError;
use crate::row::Row;
use freshet_compute_types::JoinKind;

/// Render a join of `left` and `right`.
pub(crate) fn render_join<'s>(
    left: Rendered<'s>,
    right: Rendered<'s>,
    spec: Arc<JoinSpec>,
) -> Rendered<'s> {
    let mut errs = vec![left.err, right.err];
    let (left_keyed, e) = key_by(left.ok.clone(), &spec, Side::Left);
    errs.push(e);
    let (right_keyed, e) = key_by(right.ok.clone(), &spec, Side::Right);
    errs.push(e);
    let left_arranged = arrange_by_key(left_keyed, "JoinLeft");
    let right_arranged = arrange_by_key(right_keyed, "JoinRight");

    // Matching pairs, with the residual predicate applied.
    let pairs = left_arranged
        .clone()
        .join_core(right_arranged.clone(), |_k, l: &Row, r: &Row| {
            Some((l.clone(), r.clone()))
        });
    let pairs = match &spec.filter {
        None => pairs,
        Some(_) => {
            let spec2 = Arc::clone(&spec);
            let codec = spec
                .filter
                .as_ref()
                .map(|f| Arc::clone(&f.codec))
                .unwrap_or_else(|| Arc::clone(&spec.left_key.input));
            let (kept, e) = eval_op(
                pairs,
                "JoinFilter",
                codec,
                move |batch, items: &[(Row, Row)]| {
                    let Some(f) = &spec2.filter else {
                        return Ok(items.iter().map(|p| Some(p.clone())).collect());
                    };
                    Ok(f.apply(batch)?
                        .into_iter()
                        .zip(items)
                        .map(|(keep, p)| keep.then(|| p.clone()))
                        .collect())
                },
            );
            errs.push(e);
            kept
        }
    };

    // The rows of one side that have at least one (filtered) match.
    let matched_left = |pairs: &Coll<'s, (Row, Row)>| -> Coll<'s, Row> {
        if spec.filter.is_none() {
            let keys = right_arranged
                .clone()
                .as_collection(|k: &Row, _v: &Row| k.clone());
            let keys = arrange_by_self(
                threshold(keys, "JoinKeys", |_, r| Diff::from(*r > 0)),
                "JoinKeys",
            );
            left_arranged
                .clone()
                .join_core(keys, |_k, l: &Row, _: &()| Some(l.clone()))
        } else {
            semijoin_rows(left.ok.clone(), pairs.clone().map(|(l, _)| l))
        }
    };
    let matched_right = |pairs: &Coll<'s, (Row, Row)>| -> Coll<'s, Row> {
        if spec.filter.is_none() {
            let keys = left_arranged
                .clone()
                .as_collection(|k: &Row, _v: &Row| k.clone());
            let keys = arrange_by_self(
                threshold(keys, "JoinKeys", |_, r| Diff::from(*r > 0)),
                "JoinKeys",
            );
            right_arranged
                .clone()
                .join_core(keys, |_k, r: &Row, _: &()| Some(r.clone()))
        } else {
            semijoin_rows(right.ok.clone(), pairs.clone().map(|(_, r)| r))
        }
    };

    let concat = |pairs: Coll<'s, (Row, Row)>| pairs.map(|(l, r)| l.concat(&r));
    let ok = match spec.kind {
        JoinKind::Inner => concat(pairs),
        JoinKind::LeftSemi => matched_left(&pairs),
        JoinKind::LeftAnti => left.ok.clone().concat(matched_left(&pairs).negate()),
        JoinKind::LeftOuter => {
            let right_null = spec.right_null.clone();
            let unmatched = left.ok.clone().concat(matched_left(&pairs).negate());
            concat(pairs).concat(unmatched.map(move |l| l.concat(&right_null)))
        }
        JoinKind::RightOuter => {
            let left_null = spec.left_null.clone();
            let unmatched = right.ok.clone().concat(matched_right(&pairs).negate());
            concat(pairs).concat(unmatched.map(move |r| left_null.concat(&r)))
        }
        JoinKind::FullOuter => {
            let right_null = spec.right_null.clone();
            let left_null = spec.left_null.clone();
            let unmatched_left = left.ok.clone().concat(matched_left(&pairs).negate());
            let unmatched_right = right.ok.clone().concat(matched_right(&pairs).negate());
            concat(pairs)
                .concat(unmatched_left.map(move |l| l.concat(&right_null)))
                .concat(unmatched_right.map(move |r| left_null.concat(&r)))
        }
    };
    let mut errs = errs.into_iter();
    let first = errs.next().expect("errors of the inputs");
    Rendered {
        ok,
        err: first.concatenate(errs),
    }
}

#[derive(Clone, Copy)]
enum Side {
    Left,
    Right,
}

impl Side {
    fn keys(self, spec: &JoinSpec) -> &KeyEval {
        match self {
            Side::Left => &spec.left_key,
            Side::Right => &spec.right_key,
        }
    }
}

/// `(key, row)` for every row whose key can match.
fn key_by<'s>(
    rows: Coll<'s, Row>,
    spec: &Arc<JoinSpec>,
    side: Side,
) -> (Coll<'s, (Row, Row)>, Coll<'s, DataflowError>) {
    let spec = Arc::clone(spec);
    let codec = Arc::clone(&side.keys(&spec).input);
    eval_op(rows, "JoinKey", codec, move |batch, rows: &[Row]| {
        side.keys(&spec).pair(batch, rows.iter().cloned())
    })
}

/// The rows of `side` equal to some row of `matched`, with `side`'s
/// multiplicities.
fn semijoin_rows<'s>(side: Coll<'s, Row>, matched: Coll<'s, Row>) -> Coll<'s, Row> {
    let matched = arrange_by_self(
        threshold(matched, "Matched", |_, r| Diff::from(*r > 0)),
        "Matched",
    );
    arrange_by_key(side.map(|r| (r, ())), "SemijoinRows")
        .join_core(matched, |k: &Row, _: &(), _: &()| Some(k.clone()))
}

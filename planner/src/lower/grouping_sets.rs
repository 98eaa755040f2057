//! `GROUPING SETS`, `ROLLUP` and `CUBE` in a materialized view.
//!
//! A grouping-set aggregate is the union of one ordinary aggregate per
//! set: each groups by its set's columns, yields NULL for the grouping
//! columns outside it, and tags its rows with the grouping id
//! DataFusion's `GROUPING()` reads (one bit per grouping column, set where
//! the column is absent, first column most significant; a repeated set
//! also carries its occurrence above those bits, so its rows stay apart).
//! Expanded so before lowering, every set is maintained by the reduction
//! its aggregates take anyway; a change costs one update per set.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    Aggregate, Expr, GroupingSet, LogicalPlan, LogicalPlanBuilder, Projection, cast, lit,
};

/// The sets of `group` (a single grouping-set expression), in order.
fn sets(group: &GroupingSet) -> Vec<Vec<Expr>> {
    match group {
        GroupingSet::GroupingSets(sets) => sets.clone(),
        GroupingSet::Rollup(exprs) => (0..=exprs.len())
            .rev()
            .map(|n| exprs[..n].to_vec())
            .collect(),
        GroupingSet::Cube(exprs) => {
            let n = exprs.len();
            (0..1usize << n)
                .map(|mask| {
                    (0..n)
                        .filter(|i| mask & (1 << (n - 1 - i)) == 0)
                        .map(|i| exprs[i].clone())
                        .collect()
                })
                .collect()
        }
    }
}

/// `a` as a union of one aggregate per grouping set, with `a`'s schema;
/// `None` when `a` has no grouping set.
pub fn expand(a: &Aggregate) -> Result<Option<LogicalPlan>> {
    let [Expr::GroupingSet(group)] = a.group_expr.as_slice() else {
        return Ok(None);
    };
    let all: Vec<Expr> = group.distinct_expr().into_iter().cloned().collect();
    let n = all.len();
    let id_index = n;
    let (_, id_field) = a.schema.qualified_field(id_index);
    let mut seen: HashMap<Vec<Expr>, u64> = HashMap::new();
    let mut branches = Vec::new();
    for set in sets(group) {
        let ordinal = {
            let count = seen.entry(set.clone()).or_insert(0);
            let ordinal = *count;
            *count += 1;
            ordinal
        };
        let inner = LogicalPlan::Aggregate(Aggregate::try_new(
            Arc::clone(&a.input),
            set.clone(),
            a.aggr_expr.clone(),
        )?);
        let mut exprs = Vec::with_capacity(a.schema.fields().len());
        let mut id: u64 = 0;
        for (i, e) in all.iter().enumerate() {
            let (q, field) = a.schema.qualified_field(i);
            let absent = !set.contains(e);
            id = (id << 1) | u64::from(absent);
            let value = match set.iter().position(|s| s == e) {
                Some(at) => {
                    let (iq, inner_field) = inner.schema().qualified_field(at);
                    Expr::Column(datafusion::common::Column::new(
                        iq.cloned(),
                        inner_field.name(),
                    ))
                }
                None => cast(lit(ScalarValue::Null), field.data_type().clone()),
            };
            exprs.push(value.alias_qualified(q.cloned(), field.name()));
        }
        id |= ordinal << n;
        let id_value = cast(lit(id), id_field.data_type().clone());
        exprs.push(id_value.alias(id_field.name()));
        for i in 0..a.aggr_expr.len() {
            let (q, field) = a.schema.qualified_field(id_index + 1 + i);
            let (iq, inner_field) = inner.schema().qualified_field(set.len() + i);
            exprs.push(
                Expr::Column(datafusion::common::Column::new(
                    iq.cloned(),
                    inner_field.name(),
                ))
                .alias_qualified(q.cloned(), field.name()),
            );
        }
        branches.push(LogicalPlan::Projection(Projection::try_new(
            exprs,
            Arc::new(inner),
        )?));
    }
    let mut branches = branches.into_iter();
    let Some(first) = branches.next() else {
        return Ok(None);
    };
    let mut builder = LogicalPlanBuilder::from(first);
    for b in branches {
        builder = builder.union(b)?;
    }
    Ok(Some(builder.build()?))
}

//! Pushing a dependent join down a subquery's plan.
//!
//! `push(P, D)` computes, for every row `d` of the domain `D`, the rows of
//! `P` with its outer references bound to `d`, with `d`'s columns carried
//! alongside: the dependent join `D ⋈ P` of Neumann & Kemper's "Unnesting
//! Arbitrary Queries". It moves down `P` operator by operator; where a
//! subtree reads no outer column it becomes a plain cross join with `D`,
//! and every outer reference above it becomes a reference to the domain
//! column carried up from there. Each operator gains the domain columns
//! in the way that keeps its meaning per `d`: a filter substitutes them,
//! a projection passes them through, an aggregate and a window partition
//! by them, a `LIMIT` becomes a row number per `d`, and an aggregate with
//! no `GROUP BY` (one row even over no input) is left-joined back to `D`
//! so that every `d` keeps its row, with `count` of nothing 0 (the "count
//! bug").
//!
//! The output of `push(P, D)` has `P`'s columns (same names and
//! qualifiers) and then `D`'s, found by name ([`Domain::columns_in`]).
//! `None` means an operator the rewrite does not cover reads the outer
//! columns; the caller then leaves the subquery as it was.

use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, NullEquality, Result, ScalarValue};
use datafusion::functions::core::expr_fn::coalesce;
use datafusion::functions_window::expr_fn::row_number;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{
    Aggregate, Distinct, Expr, ExprFunctionExt, FetchType, Filter, Join, JoinConstraint, JoinType,
    LogicalPlan, LogicalPlanBuilder, Projection, SkipType, SortExpr, SubqueryAlias, Union, Window,
    lit,
};

use super::domain::{Domain, Names, is_not_distinct_from};

/// The dependent-join pushdown over one plan.
pub struct Push<'a> {
    /// Where fresh column names come from.
    pub names: &'a Names,
}

impl Push<'_> {
    /// `plan`'s rows for every row of `dom` (see the module documentation).
    pub fn push(&self, plan: &LogicalPlan, dom: &Domain) -> Result<Option<LogicalPlan>> {
        if !dom.referenced_in(plan) {
            return cross(plan, dom).map(Some);
        }
        if own_subquery_refers(plan, dom) {
            return Ok(None);
        }
        match plan {
            LogicalPlan::Filter(f) => {
                let Some(input) = self.push(&f.input, dom)? else {
                    return Ok(None);
                };
                let Some(cols) = dom.columns_in(input.schema()) else {
                    return Ok(None);
                };
                let predicate = dom.substitute(f.predicate.clone(), &cols)?.data;
                Ok(Some(LogicalPlan::Filter(Filter::try_new(
                    predicate,
                    Arc::new(input),
                )?)))
            }
            LogicalPlan::Projection(p) => {
                let Some(input) = self.push(&p.input, dom)? else {
                    return Ok(None);
                };
                let Some(cols) = dom.columns_in(input.schema()) else {
                    return Ok(None);
                };
                let mut exprs = substitute_named(dom, &p.expr, &p.schema, &cols)?;
                exprs.extend(cols.iter().cloned().map(Expr::Column));
                Ok(Some(LogicalPlan::Projection(Projection::try_new(
                    exprs,
                    Arc::new(input),
                )?)))
            }
            LogicalPlan::Aggregate(a) => self.aggregate(a, dom),
            LogicalPlan::Join(j) => self.join(j, dom),
            LogicalPlan::SubqueryAlias(s) => {
                let Some(input) = self.push(&s.input, dom)? else {
                    return Ok(None);
                };
                Ok(Some(LogicalPlan::SubqueryAlias(SubqueryAlias::try_new(
                    Arc::new(input),
                    s.alias.clone(),
                )?)))
            }
            LogicalPlan::Subquery(s) => self.push(&s.subquery, dom),
            // Order inside a subquery means nothing without a LIMIT.
            LogicalPlan::Sort(s) if s.fetch.is_none() => self.push(&s.input, dom),
            LogicalPlan::Sort(s) => {
                let fetch = s.fetch;
                self.per_domain_limit(plan, &s.input, &s.expr, 0, fetch, dom)
            }
            LogicalPlan::Limit(l) => {
                let (SkipType::Literal(skip), FetchType::Literal(fetch)) =
                    (l.get_skip_type()?, l.get_fetch_type()?)
                else {
                    return Ok(None);
                };
                match l.input.as_ref() {
                    LogicalPlan::Sort(s) if s.fetch.is_none() => {
                        self.per_domain_limit(plan, &s.input, &s.expr, skip, fetch, dom)
                    }
                    // `SELECT v ... ORDER BY w LIMIT n` is planned as a limit
                    // over a projection over the sort; a projection keeps the
                    // row count, so the limit moves under it, onto the sort
                    // whose order it takes.
                    LogicalPlan::Projection(p) => {
                        let limit = LogicalPlan::Limit(datafusion::logical_expr::Limit {
                            skip: l.skip.clone(),
                            fetch: l.fetch.clone(),
                            input: Arc::clone(&p.input),
                        });
                        let swapped = LogicalPlan::Projection(Projection::try_new_with_schema(
                            p.expr.clone(),
                            Arc::new(limit),
                            Arc::clone(&p.schema),
                        )?);
                        self.push(&swapped, dom)
                    }
                    input => self.per_domain_limit(plan, input, &[], skip, fetch, dom),
                }
            }
            LogicalPlan::Distinct(Distinct::All(input)) => {
                let Some(input) = self.push(input, dom)? else {
                    return Ok(None);
                };
                let all = columns_of(input.schema());
                Ok(Some(
                    LogicalPlanBuilder::from(input)
                        .aggregate(all, Vec::<Expr>::new())?
                        .build()?,
                ))
            }
            LogicalPlan::Union(u) => {
                let mut inputs = Vec::with_capacity(u.inputs.len());
                for input in &u.inputs {
                    let Some(pushed) = self.push(input, dom)? else {
                        return Ok(None);
                    };
                    let Some(ordered) = reorder(&pushed, input.schema(), dom)? else {
                        return Ok(None);
                    };
                    inputs.push(Arc::new(ordered));
                }
                Ok(Some(LogicalPlan::Union(Union::try_new_with_loose_types(
                    inputs,
                )?)))
            }
            LogicalPlan::Window(w) => {
                let Some(input) = self.push(&w.input, dom)? else {
                    return Ok(None);
                };
                let Some(cols) = dom.columns_in(input.schema()) else {
                    return Ok(None);
                };
                let first = w.input.schema().fields().len();
                let mut exprs = Vec::with_capacity(w.window_expr.len());
                for (i, e) in w.window_expr.iter().enumerate() {
                    let (q, field) = w.schema.qualified_field(first + i);
                    let Some(partitioned) =
                        partition_by(dom.substitute(e.clone(), &cols)?.data, &cols)
                    else {
                        return Ok(None);
                    };
                    exprs.push(partitioned.alias_qualified(q.cloned(), field.name()));
                }
                Ok(Some(LogicalPlan::Window(Window::try_new(
                    exprs,
                    Arc::new(input),
                )?)))
            }
            _ => Ok(None),
        }
    }

    /// An aggregate per domain row: `GROUP BY` gains the domain columns;
    /// without a `GROUP BY` the result is left-joined back to the domain
    /// (an empty group still has its row, `count` 0).
    fn aggregate(&self, a: &Aggregate, dom: &Domain) -> Result<Option<LogicalPlan>> {
        if a.group_expr
            .iter()
            .any(|e| matches!(e, Expr::GroupingSet(_)))
        {
            return Ok(None);
        }
        let Some(input) = self.push(&a.input, dom)? else {
            return Ok(None);
        };
        let Some(cols) = dom.columns_in(input.schema()) else {
            return Ok(None);
        };
        let groups = a.group_expr.len();
        let group = a
            .group_expr
            .iter()
            .enumerate()
            .map(|(i, e)| named(dom, e, &a.schema, i, &cols))
            .collect::<Result<Vec<_>>>()?;
        let aggs = a
            .aggr_expr
            .iter()
            .enumerate()
            .map(|(i, e)| named(dom, e, &a.schema, groups + i, &cols))
            .collect::<Result<Vec<_>>>()?;
        if !a.group_expr.is_empty() || dom.is_empty() {
            let mut group = group;
            group.extend(cols.iter().cloned().map(Expr::Column));
            return Ok(Some(LogicalPlan::Aggregate(Aggregate::try_new(
                Arc::new(input),
                group,
                aggs,
            )?)));
        }
        // One row per domain value, even where the input has none.
        let inner_names: Vec<String> = dom.names.iter().map(|_| self.names.fresh("g")).collect();
        let inner_group = cols
            .iter()
            .zip(&inner_names)
            .map(|(c, n)| Expr::Column(c.clone()).alias(n))
            .collect::<Vec<_>>();
        let inner = LogicalPlan::Aggregate(Aggregate::try_new(Arc::new(input), inner_group, aggs)?);
        let on = dom
            .names
            .iter()
            .zip(&inner_names)
            .map(|(d, g)| {
                (
                    Expr::Column(Column::new_unqualified(d)),
                    Expr::Column(Column::new_unqualified(g)),
                )
            })
            .collect();
        let joined = LogicalPlan::Join(Join::try_new(
            Arc::new(dom.plan.clone()),
            Arc::new(inner),
            on,
            None,
            JoinType::Left,
            JoinConstraint::On,
            NullEquality::NullEqualsNull,
            false,
        )?);
        let mut exprs = Vec::with_capacity(a.aggr_expr.len() + dom.names.len());
        for (i, e) in a.aggr_expr.iter().enumerate() {
            let (q, field) = a.schema.qualified_field(groups + i);
            let c = Expr::Column(Column::new(q.cloned(), field.name()));
            let value = if counts(e) {
                coalesce(vec![c, lit(ScalarValue::Int64(Some(0)))])
            } else {
                c
            };
            exprs.push(value.alias_qualified(q.cloned(), field.name()));
        }
        exprs.extend(
            dom.names
                .iter()
                .map(|d| Expr::Column(Column::new_unqualified(d))),
        );
        Ok(Some(LogicalPlan::Projection(Projection::try_new(
            exprs,
            Arc::new(joined),
        )?)))
    }

    /// A join: the domain goes to the side(s) that read it; when both
    /// sides (or an outer join's preserved side and its condition) need
    /// it, each side gets its own copy and the join matches them.
    fn join(&self, j: &Join, dom: &Domain) -> Result<Option<LogicalPlan>> {
        let left_refs = dom.referenced_in(&j.left);
        let right_refs = dom.referenced_in(&j.right);
        let cond_refs =
            j.on.iter()
                .any(|(l, r)| dom.referenced_by(l) || dom.referenced_by(r))
                || j.filter.as_ref().is_some_and(|f| dom.referenced_by(f));
        if j.null_aware && (right_refs || cond_refs) {
            return Ok(None);
        }
        let (into_left, into_right) = match j.join_type {
            JoinType::Inner => match (left_refs, right_refs) {
                (false, true) => (false, true),
                (true, true) => (true, true),
                _ => (true, false),
            },
            JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => {
                (true, right_refs || cond_refs)
            }
            JoinType::Right | JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark => {
                (left_refs || cond_refs, true)
            }
            JoinType::Full => (true, true),
        };
        let right_dom = if into_left && into_right {
            dom.renamed(self.names)?
        } else {
            dom.clone()
        };
        let Some((left, left_cols)) = self.side(&j.left, into_left, dom)? else {
            return Ok(None);
        };
        let Some((right, right_cols)) = self.side(&j.right, into_right, &right_dom)? else {
            return Ok(None);
        };
        // Outer references in the condition read whichever copy is there.
        let Some(cond_cols) = left_cols.clone().or_else(|| right_cols.clone()) else {
            return Ok(None);
        };
        let subst = |e: &Expr| dom.substitute(e.clone(), &cond_cols).map(|t| t.data);
        let on =
            j.on.iter()
                .map(|(l, r)| Ok((subst(l)?, subst(r)?)))
                .collect::<Result<Vec<_>>>()?;
        let filter = j.filter.as_ref().map(subst).transpose()?;
        let pairs: Vec<(Column, Column)> = match (&left_cols, &right_cols) {
            (Some(lc), Some(rc)) => lc.iter().cloned().zip(rc.iter().cloned()).collect(),
            _ => vec![],
        };
        let (on, filter, null_equality) = matching_domains(on, filter, j.null_equality, pairs);
        let joined = LogicalPlan::Join(Join::try_new(
            Arc::new(left),
            Arc::new(right),
            on,
            filter,
            j.join_type,
            j.join_constraint,
            null_equality,
            j.null_aware,
        )?);
        // The join's own columns, then the domain's from the side that
        // keeps them (both for a full join: whichever matched).
        let mut exprs = columns_of(&j.schema);
        let left_out = matches!(
            j.join_type,
            JoinType::Inner
                | JoinType::Left
                | JoinType::LeftSemi
                | JoinType::LeftAnti
                | JoinType::LeftMark
        );
        for (i, name) in dom.names.iter().enumerate() {
            let l = left_cols.as_ref().map(|c| Expr::Column(c[i].clone()));
            let r = right_cols.as_ref().map(|c| Expr::Column(c[i].clone()));
            let value = match (j.join_type, l, r) {
                (JoinType::Full, Some(l), Some(r)) => coalesce(vec![l, r]),
                (_, Some(l), _) if left_out => l,
                (_, _, Some(r)) if !left_out => r,
                (_, Some(l), None) => l,
                (_, None, Some(r)) => r,
                _ => return Ok(None),
            };
            exprs.push(value.alias(name));
        }
        Ok(Some(LogicalPlan::Projection(Projection::try_new(
            exprs,
            Arc::new(joined),
        )?)))
    }

    /// One side of a join: pushed down with `dom` (and its domain columns)
    /// when it needs the domain, as it was otherwise. `None` when it
    /// cannot be pushed.
    fn side(
        &self,
        plan: &LogicalPlan,
        pushed: bool,
        dom: &Domain,
    ) -> Result<Option<(LogicalPlan, Option<Vec<Column>>)>> {
        if !pushed {
            return Ok(Some((plan.clone(), None)));
        }
        let Some(p) = self.push(plan, dom)? else {
            return Ok(None);
        };
        Ok(dom.columns_in(p.schema()).map(|cols| (p, Some(cols))))
    }

    /// `ORDER BY ... LIMIT n OFFSET m` per domain row: a row number over
    /// each domain value's rows, kept where it falls in the window.
    fn per_domain_limit(
        &self,
        plan: &LogicalPlan,
        input: &LogicalPlan,
        order: &[SortExpr],
        skip: usize,
        fetch: Option<usize>,
        dom: &Domain,
    ) -> Result<Option<LogicalPlan>> {
        let Some(pushed) = self.push(input, dom)? else {
            return Ok(None);
        };
        let Some(cols) = dom.columns_in(pushed.schema()) else {
            return Ok(None);
        };
        let order = order
            .iter()
            .map(|s| {
                Ok(SortExpr {
                    expr: dom.substitute(s.expr.clone(), &cols)?.data,
                    ..s.clone()
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let rn = self.names.fresh("row");
        let number = row_number()
            .partition_by(cols.iter().cloned().map(Expr::Column).collect())
            .order_by(order)
            .build()?
            .alias(&rn);
        let numbered = LogicalPlanBuilder::from(pushed)
            .window(vec![number])?
            .build()?;
        let rn_col = Expr::Column(Column::new_unqualified(&rn));
        let low = u64::try_from(skip).unwrap_or(u64::MAX);
        let mut keep = rn_col.clone().gt(lit(low));
        if let Some(fetch) = fetch {
            let high = low.saturating_add(u64::try_from(fetch).unwrap_or(u64::MAX));
            keep = keep.and(rn_col.lt_eq(lit(high)));
        }
        let filtered = LogicalPlan::Filter(Filter::try_new(keep, Arc::new(numbered))?);
        reorder(&filtered, plan.schema(), dom)
    }
}

/// `plan × dom` (just `plan` for a domain of no columns).
fn cross(plan: &LogicalPlan, dom: &Domain) -> Result<LogicalPlan> {
    if dom.is_empty() {
        return Ok(plan.clone());
    }
    LogicalPlanBuilder::from(plan.clone())
        .cross_join(dom.plan.clone())?
        .build()
}

/// Whether a subquery expression of `plan` itself (not one of its
/// inputs) reads the domain: one the rewrite left in place, whose outer
/// references it cannot reach.
fn own_subquery_refers(plan: &LogicalPlan, dom: &Domain) -> bool {
    let mut found = false;
    let _ = plan.apply_expressions(|e| {
        e.apply(|e| {
            let sub = match e {
                Expr::ScalarSubquery(s) => Some(&s.subquery),
                Expr::Exists(x) => Some(&x.subquery.subquery),
                Expr::InSubquery(x) => Some(&x.subquery.subquery),
                _ => None,
            };
            if sub.is_some_and(|s| dom.referenced_in(s)) {
                found = true;
                return Ok(TreeNodeRecursion::Stop);
            }
            Ok(TreeNodeRecursion::Continue)
        })
    });
    found
}

/// Every column of `schema`, qualified.
pub(super) fn columns_of(schema: &DFSchema) -> Vec<Expr> {
    schema
        .iter()
        .map(|(q, f)| Expr::Column(Column::new(q.cloned(), f.name())))
        .collect()
}

/// `plan` projected to `original`'s columns followed by the domain's.
fn reorder(plan: &LogicalPlan, original: &DFSchema, dom: &Domain) -> Result<Option<LogicalPlan>> {
    let Some(cols) = dom.columns_in(plan.schema()) else {
        return Ok(None);
    };
    let mut exprs = columns_of(original);
    exprs.extend(cols.into_iter().map(Expr::Column));
    Ok(Some(LogicalPlan::Projection(Projection::try_new(
        exprs,
        Arc::new(plan.clone()),
    )?)))
}

/// `exprs` with the domain substituted, each keeping the name `schema`
/// gives it.
fn substitute_named(
    dom: &Domain,
    exprs: &[Expr],
    schema: &DFSchema,
    cols: &[Column],
) -> Result<Vec<Expr>> {
    exprs
        .iter()
        .enumerate()
        .map(|(i, e)| named(dom, e, schema, i, cols))
        .collect()
}

/// `e` with the domain substituted, keeping the name of field `i` of
/// `schema` when the substitution changed it.
fn named(dom: &Domain, e: &Expr, schema: &DFSchema, i: usize, cols: &[Column]) -> Result<Expr> {
    let t = dom.substitute(e.clone(), cols)?;
    if !t.transformed || matches!(t.data, Expr::Alias(_)) {
        return Ok(t.data);
    }
    let (q, field) = schema.qualified_field(i);
    Ok(t.data.alias_qualified(q.cloned(), field.name()))
}

/// Whether an aggregate counts (its value over no rows is 0, not NULL).
fn counts(e: &Expr) -> bool {
    match e {
        Expr::Alias(a) => counts(&a.expr),
        Expr::AggregateFunction(AggregateFunction { func, .. }) => {
            matches!(func.name(), "count" | "regr_count")
        }
        _ => false,
    }
}

/// A window function partitioned by the domain columns as well.
fn partition_by(e: Expr, cols: &[Column]) -> Option<Expr> {
    match e {
        Expr::Alias(a) => partition_by(*a.expr, cols),
        Expr::WindowFunction(mut w) => {
            w.params
                .partition_by
                .extend(cols.iter().cloned().map(Expr::Column));
            Some(Expr::WindowFunction(w))
        }
        _ => None,
    }
}

/// A join condition that also matches domain values (`pairs`, left and
/// right column of each): as equi-join keys with NULLs equal when the
/// join's own keys allow that (or it has none), otherwise as `IS NOT
/// DISTINCT FROM` conjuncts of the filter.
pub(super) fn matching_domains(
    mut on: Vec<(Expr, Expr)>,
    filter: Option<Expr>,
    null_equality: NullEquality,
    pairs: Vec<(Column, Column)>,
) -> (Vec<(Expr, Expr)>, Option<Expr>, NullEquality) {
    if pairs.is_empty() {
        return (on, filter, null_equality);
    }
    let pairs = pairs
        .into_iter()
        .map(|(l, r)| (Expr::Column(l), Expr::Column(r)));
    if on.is_empty() || null_equality == NullEquality::NullEqualsNull {
        on.extend(pairs);
        (on, filter, NullEquality::NullEqualsNull)
    } else {
        let same = pairs.map(|(l, r)| is_not_distinct_from(l, r));
        (
            on,
            conjunction(filter.into_iter().chain(same)),
            null_equality,
        )
    }
}

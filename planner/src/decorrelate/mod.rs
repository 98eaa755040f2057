//! Unnesting arbitrary correlated subqueries.
//!
//! DataFusion decorrelates the subqueries whose correlation it can pull
//! up as equalities. The rest (`(SELECT count(*) FROM t AS x WHERE x.b <
//! t.b)`, `b > ALL (SELECT ... WHERE k <> a)`, a `LATERAL` subquery with
//! `ORDER BY ... LIMIT`, correlation two levels deep) survive its rules
//! and cannot be executed or maintained. This optimizer rule, placed right
//! after DataFusion's own decorrelation rules, unnests each one that is
//! left, following Neumann & Kemper, "Unnesting Arbitrary Queries" (BTW
//! 2015):
//!
//! 1. the **domain** `D`: the distinct values of the outer columns the
//!    subquery reads, from the plan it is evaluated against
//!    ([`domain`]);
//! 2. the **dependent join** `D ⋈ subquery` pushed down the subquery's
//!    plan until no operator below reads an outer column ([`push`]);
//! 3. the outer plan **left-joined** with the result on the domain
//!    columns (`IS NOT DISTINCT FROM`: a NULL outer value is a value too),
//!    and the subquery expression replaced by a column of it.
//!
//! What the join yields per kind of subquery:
//! - scalar: its value, NULL where it has no row; a subquery that may
//!   yield more than one row is aggregated with `single_value`, which
//!   raises PostgreSQL's 21000 for a second row;
//! - `[NOT] EXISTS`: whether the domain value has a row;
//! - `x [NOT] IN (SELECT v ...)`: `x` joins the domain, and per domain
//!   row `max(CASE WHEN v = x THEN 1 WHEN v IS NULL OR x IS NULL THEN 0
//!   ELSE -1 END)` gives SQL's three-valued answer (1 true, 0 NULL, -1 or
//!   no row false); `ANY`/`ALL` arrive here as `EXISTS` forms
//!   (DataFusion's `RewriteSetComparison`).
//!
//! The rewrite is a logical-plan rule, so ad hoc queries (DataFusion's
//! physical plan) and materialized views (lowered to dataflow) share it.
//! Subqueries are unnested innermost first; a reference two levels out
//! stays an outer reference through the inner unnesting and is unnested
//! with the level it belongs to. An operator the pushdown does not cover
//! leaves its subquery as it was, for the row-by-row fallback of ad hoc
//! queries and a clear 0A000 in a view.

pub mod domain;
pub mod push;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, NullEquality, Result, ScalarValue};
use datafusion::functions_aggregate::count::count_all;
use datafusion::functions_aggregate::expr_fn::max;
use datafusion::logical_expr::expr::{Exists, InSubquery};
use datafusion::logical_expr::{
    Aggregate, Expr, Filter, Join, JoinConstraint, JoinType, LogicalPlan, Projection, Subquery,
    SubqueryAlias, lit, when,
};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use domain::{Domain, Names, find};
use push::{Push, columns_of};

/// The optimizer rule (see the module documentation).
#[derive(Debug, Default)]
pub struct UnnestSubqueries;

impl UnnestSubqueries {
    /// The name of DataFusion's decorrelation rule this one follows.
    const AFTER: &'static str = "decorrelate_lateral_join";

    /// `rules` with this rule right after DataFusion's own decorrelation
    /// rules, so the rest of the pipeline (equijoin extraction, filter
    /// pushdown) optimizes what it produces in the same pass.
    pub fn placed_in(
        mut rules: Vec<Arc<dyn OptimizerRule + Send + Sync>>,
    ) -> Vec<Arc<dyn OptimizerRule + Send + Sync>> {
        let at = rules
            .iter()
            .position(|r| r.name() == Self::AFTER)
            .map_or(rules.len(), |i| i + 1);
        rules.insert(at, Arc::new(UnnestSubqueries));
        rules
    }
}

impl OptimizerRule for UnnestSubqueries {
    fn name(&self) -> &str {
        "unnest_subqueries"
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        if !has_subquery(&plan) {
            return Ok(Transformed::no(plan));
        }
        let names = Names::after(&plan);
        let unnest = Unnest { names: &names };
        plan.transform_up_with_subqueries(|node| unnest.node(node))
    }
}

/// Whether any node of `plan` holds a subquery (expression or lateral)
/// or a correlated `NOT IN` join.
fn has_subquery(plan: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        let not_in = matches!(node, LogicalPlan::Join(j) if j.null_aware && j.filter.is_some());
        if not_in || matches!(node, LogicalPlan::Subquery(_)) || node_has_subquery_expr(node) {
            found = true;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    found
}

fn node_has_subquery_expr(node: &LogicalPlan) -> bool {
    node.expressions().iter().any(is_or_has_subquery)
}

fn is_or_has_subquery(e: &Expr) -> bool {
    e.exists(|e| {
        Ok(matches!(
            e,
            Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_)
        ))
    })
    .unwrap_or(false)
}

/// One unnesting pass's state.
struct Unnest<'a> {
    names: &'a Names,
}

/// What a subquery expression asks of its rows.
enum Kind {
    Scalar,
    Exists { negated: bool },
    In { expr: Expr, negated: bool },
}

impl Unnest<'_> {
    /// Unnest the subqueries held by `node`'s own expressions, or a
    /// lateral join's right side.
    fn node(&self, node: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
        match &node {
            LogicalPlan::Projection(p) if node_has_subquery_expr(&node) => {
                let Some((input, exprs)) = self.exprs(&p.input, &p.expr)? else {
                    return Ok(Transformed::no(node));
                };
                let exprs = keep_names(exprs, &p.expr, &p.schema);
                Ok(Transformed::yes(LogicalPlan::Projection(
                    Projection::try_new(exprs, Arc::new(input))?,
                )))
            }
            LogicalPlan::Filter(f) if node_has_subquery_expr(&node) => {
                let Some((input, mut exprs)) =
                    self.exprs(&f.input, std::slice::from_ref(&f.predicate))?
                else {
                    return Ok(Transformed::no(node));
                };
                let predicate = exprs.remove(0);
                let filtered = LogicalPlan::Filter(Filter::try_new(predicate, Arc::new(input))?);
                Ok(Transformed::yes(restore(filtered, f.input.schema())?))
            }
            LogicalPlan::Aggregate(a)
                if node_has_subquery_expr(&node)
                    && !a
                        .group_expr
                        .iter()
                        .any(|e| matches!(e, Expr::GroupingSet(_))) =>
            {
                let all: Vec<Expr> = a.group_expr.iter().chain(&a.aggr_expr).cloned().collect();
                let Some((input, exprs)) = self.exprs(&a.input, &all)? else {
                    return Ok(Transformed::no(node));
                };
                let mut exprs = keep_names(exprs, &all, &a.schema);
                let aggs = exprs.split_off(a.group_expr.len());
                Ok(Transformed::yes(LogicalPlan::Aggregate(
                    Aggregate::try_new(Arc::new(input), exprs, aggs)?,
                )))
            }
            LogicalPlan::Join(j) if j.null_aware => match correlated_not_in(j)? {
                Some(plan) => Ok(Transformed::yes(plan)),
                None => Ok(Transformed::no(node)),
            },
            LogicalPlan::Join(j) => match self.lateral(j)? {
                Some(plan) => Ok(Transformed::yes(plan)),
                None => Ok(Transformed::no(node)),
            },
            _ => Ok(Transformed::no(node)),
        }
    }

    /// Unnest the subqueries in `exprs` (evaluated over `input`): the new
    /// input (with the subqueries' results joined on) and the expressions
    /// reading them. `None` when none could be unnested.
    fn exprs(
        &self,
        input: &LogicalPlan,
        exprs: &[Expr],
    ) -> Result<Option<(LogicalPlan, Vec<Expr>)>> {
        let mut current = input.clone();
        let mut changed = false;
        let mut out = Vec::with_capacity(exprs.len());
        for e in exprs {
            let rewritten = e.clone().transform_down(|e| {
                let (subquery, kind) = match &e {
                    Expr::ScalarSubquery(s) => (s, Kind::Scalar),
                    Expr::Exists(Exists { subquery, negated }) => {
                        (subquery, Kind::Exists { negated: *negated })
                    }
                    Expr::InSubquery(InSubquery {
                        expr,
                        subquery,
                        negated,
                    }) => (
                        subquery,
                        Kind::In {
                            expr: expr.as_ref().clone(),
                            negated: *negated,
                        },
                    ),
                    _ => return Ok(Transformed::no(e)),
                };
                match self.subquery(&current, subquery, kind)? {
                    Some((joined, value)) => {
                        current = joined;
                        changed = true;
                        Ok(Transformed::new(value, true, TreeNodeRecursion::Jump))
                    }
                    None => Ok(Transformed::new(e, false, TreeNodeRecursion::Jump)),
                }
            })?;
            out.push(rewritten.data);
        }
        Ok(changed.then_some((current, out)))
    }

    /// `input` left-joined with the unnested `subquery`, and the
    /// expression standing for the subquery's value over the join.
    fn subquery(
        &self,
        input: &LogicalPlan,
        subquery: &Subquery,
        kind: Kind,
    ) -> Result<Option<(LogicalPlan, Expr)>> {
        let body = subquery.subquery.as_ref();
        let outer = outer_columns(body, input.schema());
        let carried: Vec<Expr> = match &kind {
            Kind::In { expr, .. } => vec![expr.clone()],
            _ => vec![],
        };
        // The left operand of IN joins as a column of the input.
        let (input, carried_cols) = if carried.is_empty() {
            (input.clone(), vec![])
        } else {
            let name = self.names.fresh("arg");
            let mut exprs = columns_of(input.schema());
            exprs.push(carried[0].clone().alias(&name));
            (
                LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(input.clone()))?),
                vec![Column::new_unqualified(name)],
            )
        };
        let carried_exprs: Vec<Expr> = carried_cols.iter().cloned().map(Expr::Column).collect();
        let dom = Domain::of(&input, &outer, &carried_exprs, self.names)?;
        let push = Push { names: self.names };
        let Some(pushed) = push.push(body, &dom)? else {
            return Ok(None);
        };
        let Some(cols) = dom.columns_in(pushed.schema()) else {
            return Ok(None);
        };
        let group: Vec<Expr> = cols
            .iter()
            .zip(&dom.names)
            .map(|(c, n)| Expr::Column(c.clone()).alias(n))
            .collect();
        let value_name = self.names.fresh("value");
        let mark_name = self.names.fresh("mark");
        let (right, value) = match &kind {
            Kind::Scalar => {
                let (q, f) = body.schema().qualified_field(0);
                let v = Expr::Column(Column::new(q.cloned(), f.name()));
                let right = if at_most_one_row(body) {
                    let mut exprs = vec![v.alias(&value_name)];
                    exprs.extend(group);
                    LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(pushed))?)
                } else {
                    let one = crate::query::single_value::udaf().call(vec![v]);
                    LogicalPlan::Aggregate(Aggregate::try_new(
                        Arc::new(pushed),
                        group,
                        vec![one.alias(&value_name)],
                    )?)
                };
                (right, Expr::Column(Column::new_unqualified(&value_name)))
            }
            Kind::Exists { negated } if dom.is_empty() => {
                let counted = LogicalPlan::Aggregate(Aggregate::try_new(
                    Arc::new(pushed),
                    vec![],
                    vec![count_all().alias(&value_name)],
                )?);
                let right = LogicalPlan::Projection(Projection::try_new(
                    vec![
                        Expr::Column(Column::new_unqualified(&value_name))
                            .gt(lit(0i64))
                            .alias(&mark_name),
                    ],
                    Arc::new(counted),
                )?);
                let mark = Expr::Column(Column::new_unqualified(&mark_name));
                (right, if *negated { !mark } else { mark })
            }
            Kind::Exists { negated } => {
                let distinct =
                    LogicalPlan::Aggregate(Aggregate::try_new(Arc::new(pushed), group, vec![])?);
                let mut exprs = columns_of(distinct.schema());
                exprs.push(lit(true).alias(&mark_name));
                let right =
                    LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(distinct))?);
                let mark = Expr::Column(Column::new_unqualified(&mark_name));
                (
                    right,
                    if *negated {
                        mark.is_null()
                    } else {
                        mark.is_not_null()
                    },
                )
            }
            Kind::In { negated, .. } => {
                let (q, f) = body.schema().qualified_field(0);
                let v = Expr::Column(Column::new(q.cloned(), f.name()));
                let Some(x) = cols.last().cloned().map(Expr::Column) else {
                    return Ok(None);
                };
                let compared = when(v.clone().eq(x.clone()), lit(1i32))
                    .when(v.is_null().or(x.is_null()), lit(0i32))
                    .otherwise(lit(-1i32))?;
                let found = LogicalPlan::Aggregate(Aggregate::try_new(
                    Arc::new(pushed),
                    group,
                    vec![max(compared).alias(&value_name)],
                )?);
                let mut exprs = columns_of(found.schema());
                exprs.push(lit(true).alias(&mark_name));
                let right = LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(found))?);
                let found = Expr::Column(Column::new_unqualified(&value_name));
                let answer = when(
                    Expr::Column(Column::new_unqualified(&mark_name)).is_null(),
                    lit(false),
                )
                .when(found.clone().eq(lit(1i32)), lit(true))
                .when(found.eq(lit(0i32)), lit(ScalarValue::Boolean(None)))
                .otherwise(lit(false))?;
                (right, if *negated { !answer } else { answer })
            }
        };
        // Requalify the right side so its columns cannot collide with the
        // input's, whatever the subquery's tables are called.
        let alias = self.names.fresh("sq");
        let right =
            LogicalPlan::SubqueryAlias(SubqueryAlias::try_new(Arc::new(right), alias.as_str())?);
        let value = value.transform_up(|e| match e {
            Expr::Column(c) if c.relation.is_none() => Ok(Transformed::yes(Expr::Column(
                Column::new(Some(alias.as_str()), c.name),
            ))),
            e => Ok(Transformed::no(e)),
        })?;
        let mut on = Vec::with_capacity(dom.names.len());
        for (i, name) in dom.names.iter().enumerate() {
            let left_key = match &dom.outer[i] {
                Some(c) => Expr::Column(c.clone()),
                None => match carried_cols.first() {
                    Some(c) => Expr::Column(c.clone()),
                    None => return Ok(None),
                },
            };
            let Some(right_key) = find(right.schema(), name) else {
                return Ok(None);
            };
            on.push((left_key, Expr::Column(right_key)));
        }
        let joined = LogicalPlan::Join(Join::try_new(
            Arc::new(input),
            Arc::new(right),
            on,
            None,
            JoinType::Left,
            JoinConstraint::On,
            NullEquality::NullEqualsNull,
            false,
        )?);
        Ok(Some((joined, value.data)))
    }

    /// A join whose right side reads the left's columns (`LATERAL`):
    /// the right side pushed down with the left's domain and joined back
    /// on it.
    fn lateral(&self, j: &Join) -> Result<Option<LogicalPlan>> {
        if !matches!(j.join_type, JoinType::Inner | JoinType::Left) {
            return Ok(None);
        }
        let outer = outer_columns(&j.right, j.left.schema());
        if outer.is_empty() {
            return Ok(None);
        }
        let dom = Domain::of(&j.left, &outer, &[], self.names)?;
        let push = Push { names: self.names };
        let Some(right) = push.push(&j.right, &dom)? else {
            return Ok(None);
        };
        let Some(cols) = dom.columns_in(right.schema()) else {
            return Ok(None);
        };
        let pairs = outer.iter().cloned().zip(cols).collect();
        let (on, filter, null_equality) =
            push::matching_domains(j.on.clone(), j.filter.clone(), j.null_equality, pairs);
        let joined = LogicalPlan::Join(Join::try_new(
            Arc::clone(&j.left),
            Arc::new(right),
            on,
            filter,
            j.join_type,
            j.join_constraint,
            null_equality,
            false,
        )?);
        Ok(Some(restore(joined, &j.schema)?))
    }
}

/// A correlated `x NOT IN (SELECT y ... WHERE <correlation>)`, which
/// DataFusion decorrelates into a null-aware anti join whose filter holds
/// the correlation, as a plain anti join. Which rows form the set depends
/// on the left row, so a NULL `y` makes only the rows whose set holds it
/// unknown (DataFusion's null-aware join lets any NULL `y` drop every
/// row): a left row stays when no row of its set equals it or is unknown
/// against it. Used by this rule and by lowering, one rewrite for both.
pub fn correlated_not_in(j: &Join) -> Result<Option<LogicalPlan>> {
    let (Some(filter), [(x, y)], JoinType::LeftAnti, true) =
        (&j.filter, j.on.as_slice(), j.join_type, j.null_aware)
    else {
        return Ok(None);
    };
    let unknown_or_equal = x
        .clone()
        .eq(y.clone())
        .or(x.clone().is_null())
        .or(y.clone().is_null());
    Ok(Some(LogicalPlan::Join(Join::try_new(
        Arc::clone(&j.left),
        Arc::clone(&j.right),
        vec![],
        Some(filter.clone().and(unknown_or_equal)),
        JoinType::LeftAnti,
        j.join_constraint,
        j.null_equality,
        false,
    )?)))
}

/// The outer columns `plan` reads (anywhere, nested subqueries included)
/// that `schema` provides, each once, in order of appearance.
fn outer_columns(plan: &LogicalPlan, schema: &DFSchema) -> Vec<Column> {
    let mut found: Vec<Column> = Vec::new();
    let _ = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                if let Expr::OuterReferenceColumn(_, c) = e
                    && schema.has_column(c)
                    && !found.contains(c)
                {
                    found.push(c.clone());
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
    found
}

/// Whether `plan` yields at most one row (so a scalar subquery over it
/// needs no cardinality check).
fn at_most_one_row(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::Aggregate(a) => a.group_expr.is_empty(),
        LogicalPlan::Projection(p) => at_most_one_row(&p.input),
        LogicalPlan::SubqueryAlias(s) => at_most_one_row(&s.input),
        LogicalPlan::Filter(f) => at_most_one_row(&f.input),
        LogicalPlan::Sort(s) => s.fetch.is_some_and(|f| f <= 1) || at_most_one_row(&s.input),
        LogicalPlan::Window(w) => at_most_one_row(&w.input),
        LogicalPlan::Limit(l) => {
            matches!(
                l.get_fetch_type(),
                Ok(datafusion::logical_expr::FetchType::Literal(Some(n))) if n <= 1
            ) || at_most_one_row(&l.input)
        }
        LogicalPlan::EmptyRelation(_) => true,
        LogicalPlan::Values(v) => v.values.len() <= 1,
        _ => false,
    }
}

/// `plan` projected back to `schema`'s columns.
fn restore(plan: LogicalPlan, schema: &DFSchema) -> Result<LogicalPlan> {
    Ok(LogicalPlan::Projection(Projection::try_new(
        columns_of(schema),
        Arc::new(plan),
    )?))
}

/// `exprs` named as `original` were in `schema` (a replaced subquery
/// changes an expression's generated name, which the nodes above use).
fn keep_names(exprs: Vec<Expr>, original: &[Expr], schema: &DFSchema) -> Vec<Expr> {
    exprs
        .into_iter()
        .zip(original)
        .enumerate()
        .map(|(i, (new, old))| {
            if &new == old || matches!(new, Expr::Alias(_)) {
                return new;
            }
            let (q, f) = schema.qualified_field(i);
            new.alias_qualified(q.cloned(), f.name())
        })
        .collect()
}

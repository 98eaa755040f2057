//! The domain of a dependent join: the distinct values of the outer
//! columns a subquery reads, and how to name them.
//!
//! Unnesting evaluates a correlated subquery once per distinct outer
//! value rather than once per outer row: the domain `D` is
//! `SELECT DISTINCT <outer columns> FROM <outer input>`, and the subquery
//! is rewritten to compute its result *for every row of D at once*, with
//! D's columns carried alongside (see [`super::push`]). Its columns get
//! names no user can write (`__fd<n>`), so they never collide with the
//! query's own and can be found again by name after any alias requalifies
//! them.

use std::cell::Cell;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, Result};
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, Projection};

/// The prefix of every column the rewrite invents.
pub const PREFIX: &str = "__fd";

/// Hands out column names unique within one plan.
#[derive(Debug)]
pub struct Names {
    next: Cell<usize>,
}

impl Names {
    /// Names starting after every invented name already in `plan` (the
    /// optimizer runs its rules more than once over the same plan).
    pub fn after(plan: &LogicalPlan) -> Self {
        let mut next = 0;
        let _ = plan.apply_with_subqueries(|node| {
            for field in node.schema().fields() {
                if let Some(n) = field
                    .name()
                    .strip_prefix(PREFIX)
                    .and_then(|rest| rest.split('_').next())
                    .and_then(|n| n.parse::<usize>().ok())
                {
                    next = next.max(n + 1);
                }
            }
            Ok(TreeNodeRecursion::Continue)
        });
        Names {
            next: Cell::new(next),
        }
    }

    /// A fresh name; `what` says what the column holds, for EXPLAIN.
    pub fn fresh(&self, what: &str) -> String {
        let n = self.next.get();
        self.next.set(n + 1);
        format!("{PREFIX}{n}_{what}")
    }
}

/// A domain: a plan producing the distinct outer values, one column per
/// outer column the subquery reads (plus any carried value, such as the
/// left operand of `IN`, which no outer reference names).
#[derive(Clone, Debug)]
pub struct Domain {
    /// `SELECT DISTINCT ...`: columns named `names`, in order.
    pub plan: LogicalPlan,
    /// The domain's column names.
    pub names: Vec<String>,
    /// For each column, the outer column it stands for (None for a
    /// carried value).
    pub outer: Vec<Option<Column>>,
}

impl Domain {
    /// The domain of `outer` (columns of `input`) plus `carried`
    /// expressions over `input`.
    pub fn of(
        input: &LogicalPlan,
        outer: &[Column],
        carried: &[Expr],
        names: &Names,
    ) -> Result<Self> {
        let mut exprs = Vec::new();
        let mut col_names = Vec::new();
        let mut outer_cols = Vec::new();
        for c in outer {
            let name = names.fresh(&c.name);
            exprs.push(Expr::Column(c.clone()).alias(&name));
            col_names.push(name);
            outer_cols.push(Some(c.clone()));
        }
        for e in carried {
            let name = names.fresh("arg");
            exprs.push(e.clone().alias(&name));
            col_names.push(name);
            outer_cols.push(None);
        }
        let plan = if exprs.is_empty() {
            LogicalPlanBuilder::empty(true).build()?
        } else {
            LogicalPlanBuilder::from(input.clone())
                .aggregate(exprs, Vec::<Expr>::new())?
                .build()?
        };
        Ok(Domain {
            plan,
            names: col_names,
            outer: outer_cols,
        })
    }

    /// Whether the domain has no columns (a subquery reading nothing of
    /// the input it is unnested against: one row, nothing to join on).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The same domain under fresh names, for a second copy inside one
    /// plan (both sides of a join).
    pub fn renamed(&self, names: &Names) -> Result<Self> {
        let new: Vec<String> = self
            .names
            .iter()
            .map(|n| names.fresh(n.trim_start_matches(PREFIX)))
            .collect();
        let exprs = self
            .names
            .iter()
            .zip(&new)
            .map(|(old, new)| Expr::Column(Column::new_unqualified(old)).alias(new))
            .collect::<Vec<_>>();
        let plan = if exprs.is_empty() {
            self.plan.clone()
        } else {
            LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(self.plan.clone()))?)
        };
        Ok(Domain {
            plan,
            names: new,
            outer: self.outer.clone(),
        })
    }

    /// Index of the domain column standing for `outer`.
    pub fn index_of(&self, outer: &Column) -> Option<usize> {
        self.outer.iter().position(|c| c.as_ref() == Some(outer))
    }

    /// Whether `e` reads an outer column of this domain.
    pub fn referenced_by(&self, e: &Expr) -> bool {
        e.exists(|e| {
            Ok(matches!(e, Expr::OuterReferenceColumn(_, c) if self.index_of(c).is_some()))
        })
        .unwrap_or(false)
    }

    /// Whether `plan` (any node, any nested subquery) reads an outer
    /// column of this domain.
    pub fn referenced_in(&self, plan: &LogicalPlan) -> bool {
        let mut found = false;
        let _ = plan.apply_with_subqueries(|node| {
            node.apply_expressions(|e| {
                if self.referenced_by(e) {
                    found = true;
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            })
        });
        found
    }

    /// The domain's columns as `schema` names them (qualified by whatever
    /// alias sits above them), in order.
    pub fn columns_in(&self, schema: &DFSchema) -> Option<Vec<Column>> {
        self.names.iter().map(|n| find(schema, n)).collect()
    }

    /// `e` with this domain's outer references replaced by `columns`.
    pub fn substitute(&self, e: Expr, columns: &[Column]) -> Result<Transformed<Expr>> {
        e.transform_up(|e| match &e {
            Expr::OuterReferenceColumn(_, c) => match self.index_of(c) {
                Some(i) => Ok(Transformed::yes(Expr::Column(columns[i].clone()))),
                None => Ok(Transformed::no(e)),
            },
            _ => Ok(Transformed::no(e)),
        })
    }
}

/// The column of `schema` named `name`, with its qualifier.
pub fn find(schema: &DFSchema, name: &str) -> Option<Column> {
    schema
        .iter()
        .find(|(_, f)| f.name() == name)
        .map(|(q, f)| Column::new(q.cloned(), f.name()))
}

/// `l IS NOT DISTINCT FROM r`: how domain values match (NULL is a value).
pub fn is_not_distinct_from(l: Expr, r: Expr) -> Expr {
    Expr::BinaryExpr(datafusion::logical_expr::BinaryExpr::new(
        Box::new(l),
        datafusion::logical_expr::Operator::IsNotDistinctFrom,
        Box::new(r),
    ))
}

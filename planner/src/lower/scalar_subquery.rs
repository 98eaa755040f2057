//! Uncorrelated scalar subqueries in materialized views.
//!
//! DataFusion evaluates an uncorrelated `(SELECT ...)` once, at physical
//! planning time, which a maintained view cannot do: the subquery's value
//! changes with its inputs. Before lowering, each one is rewritten into a
//! cross join with a relation of exactly one row holding its value:
//!
//! ```text
//! input × (SELECT single_row(count(*), min(v)) AS value FROM (subquery))
//! ```
//!
//! The global aggregate always has one row (NULL value over an empty
//! subquery, as in SQL); `single_row` raises Postgres's cardinality error
//! (21000) when the subquery returns more than one row, which the dataflow
//! keeps as an error of the view until the extra rows go away.
//! Correlated scalar subqueries are unnested into joins before this point
//! (by DataFusion's rules, or else by [`crate::decorrelate`]).

use std::sync::Arc;

use arrow::array::{Array, Int64Array};
use arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, Result as DfResult};
use datafusion::functions_aggregate::expr_fn::{count, min};
use datafusion::logical_expr::{
    ColumnarValue, Expr, Filter, LogicalPlan, LogicalPlanBuilder, Projection, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility, lit,
};
use freshet_repr::sqlstate;

use crate::error::{PlanError, Result, sqlstate_error};

/// Whether any of `exprs` holds a scalar subquery.
pub fn has_scalar_subquery<'a>(exprs: impl IntoIterator<Item = &'a Expr>) -> bool {
    exprs.into_iter().any(|e| {
        e.exists(|e| Ok(matches!(e, Expr::ScalarSubquery(_))))
            .unwrap_or(false)
    })
}

/// Rewrite a Projection or Filter whose expressions hold uncorrelated
/// scalar subqueries into the same node over `input × one-row relations`.
pub fn rewrite(plan: &LogicalPlan) -> Result<LogicalPlan> {
    match plan {
        LogicalPlan::Projection(p) => {
            let (joined, exprs) = attach(&p.input, &p.expr)?;
            let exprs = exprs
                .into_iter()
                .zip(&p.expr)
                .map(|(new, old)| new.alias_if_changed(old.schema_name().to_string()))
                .collect::<DfResult<Vec<_>>>()?;
            Ok(LogicalPlan::Projection(Projection::try_new(
                exprs,
                Arc::new(joined),
            )?))
        }
        LogicalPlan::Filter(f) => {
            let (joined, mut exprs) = attach(&f.input, std::slice::from_ref(&f.predicate))?;
            let predicate = exprs
                .pop()
                .ok_or_else(|| PlanError::Internal("filter without predicate".into()))?;
            let filtered = LogicalPlan::Filter(Filter::try_new(predicate, Arc::new(joined))?);
            // Keep only the filter input's columns.
            let columns: Vec<Expr> = f
                .input
                .schema()
                .columns()
                .into_iter()
                .map(Expr::Column)
                .collect();
            Ok(LogicalPlanBuilder::from(filtered)
                .project(columns)?
                .build()?)
        }
        other => Err(PlanError::Internal(format!(
            "no scalar subqueries to rewrite in {}",
            other.display()
        ))),
    }
}

/// Cross join `input` with one single-row relation per scalar subquery in
/// `exprs`, and point the expressions at their values.
fn attach(input: &LogicalPlan, exprs: &[Expr]) -> Result<(LogicalPlan, Vec<Expr>)> {
    let mut joined = input.clone();
    let mut n = 0usize;
    let mut out = Vec::with_capacity(exprs.len());
    for e in exprs {
        let rewritten = e
            .clone()
            .transform_up(|e| {
                let Expr::ScalarSubquery(sq) = &e else {
                    return Ok(Transformed::no(e));
                };
                if !sq.outer_ref_columns.is_empty() {
                    return Err(datafusion::error::DataFusionError::NotImplemented(
                        "a correlated scalar subquery that cannot be decorrelated".into(),
                    ));
                }
                n += 1;
                let alias = format!("__scalar_subquery_{n}");
                let value = single_row(sq.subquery.as_ref().clone(), &alias)?;
                joined = LogicalPlanBuilder::from(joined.clone())
                    .cross_join(value)?
                    .build()?;
                Ok(Transformed::yes(Expr::Column(Column::new(
                    Some(alias),
                    "value",
                ))))
            })?
            .data;
        out.push(rewritten);
    }
    Ok((joined, out))
}

/// `SELECT single_row(count(*), min(v)) AS value FROM (subquery)`, aliased.
fn single_row(subquery: LogicalPlan, alias: &str) -> DfResult<LogicalPlan> {
    let column = Expr::Column(Column::from(subquery.schema().qualified_field(0)));
    let check = single_row_udf();
    LogicalPlanBuilder::from(subquery)
        .aggregate(
            Vec::<Expr>::new(),
            vec![count(lit(1)).alias("__rows"), min(column).alias("__value")],
        )?
        .project(vec![
            check
                .call(vec![
                    Expr::Column(Column::from_name("__rows")),
                    Expr::Column(Column::from_name("__value")),
                ])
                .alias("value"),
        ])?
        .alias(alias)?
        .build()
}

/// The name of the cardinality check, as plans refer to it.
pub(crate) const SINGLE_ROW: &str = "single_row";

/// The cardinality check as a function (not registered: users cannot call
/// it; plans that do are decoded by [`crate::lower::plan_codec`]).
pub(crate) fn single_row_udf() -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::new_from_impl(SingleRow {
        signature: Signature::any(2, Volatility::Immutable),
    }))
}

/// `single_row(rows, value)`: `value`, or Postgres's cardinality error if
/// the subquery produced more than one row.
#[derive(Debug, PartialEq, Eq, Hash)]
struct SingleRow {
    signature: Signature,
}

impl ScalarUDFImpl for SingleRow {
    fn name(&self) -> &str {
        SINGLE_ROW
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(arg_types.get(1).cloned().unwrap_or(DataType::Null))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let rows = args.args[0].to_array(args.number_rows.max(1))?;
        let too_many = rows
            .as_any()
            .downcast_ref::<Int64Array>()
            .is_some_and(|a| a.iter().any(|n| n.is_some_and(|n| n > 1)));
        if too_many {
            return Err(sqlstate_error(
                sqlstate::CARDINALITY_VIOLATION,
                "more than one row returned by a subquery used as an expression",
            ));
        }
        Ok(args.args[1].clone())
    }
}

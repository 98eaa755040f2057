//! `sum(bigint)` as `numeric`, as Postgres returns it (see
//! [`SumBigintAsNumeric`]).

use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan};
use datafusion::optimizer::AnalyzerRule;

/// `sum` of `bigint` returns `numeric` in Postgres, so it cannot overflow;
/// DataFusion sums into `bigint` and wraps. Runs before type coercion: the
/// argument is cast to `numeric(38,0)` and every schema above is
/// recomputed. `sum` of `smallint` and `integer` stays `bigint`, as in
/// Postgres: their argument is `bigint` only by the cast type coercion
/// adds, which this rule leaves alone when an analyzed plan is analyzed
/// again (as DataFusion does before running it). Rewriting it there made
/// the rows `numeric` while the statement was described as `bigint`.
#[derive(Debug, Default)]
pub struct SumBigintAsNumeric;

/// Whether `e` is a narrower integer cast to `bigint` (type coercion's
/// promotion of `sum(integer)`'s argument).
fn widened_integer(e: &Expr, schema: &DFSchema) -> bool {
    let Expr::Cast(cast) = e else {
        return false;
    };
    matches!(
        cast.expr.get_type(schema),
        Ok(DataType::Int8 | DataType::Int16 | DataType::Int32)
    )
}

impl AnalyzerRule for SumBigintAsNumeric {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        use datafusion::logical_expr::expr::AggregateFunction;
        let out = plan.transform_up_with_subqueries(|node| {
            let mut schema = DFSchema::empty();
            for input in node.inputs() {
                schema.merge(input.schema());
            }
            let preserver = NamePreserver::new(&node);
            let t = node.map_expressions(|e| {
                let saved = preserver.save(&e);
                Ok(e.transform_up(|e| match e {
                    Expr::AggregateFunction(AggregateFunction { func, mut params })
                        if func.name() == "sum"
                            && params.args.len() == 1
                            && matches!(params.args[0].get_type(&schema), Ok(DataType::Int64))
                            && !widened_integer(&params.args[0], &schema) =>
                    {
                        params.args[0] = params.args[0]
                            .clone()
                            .cast_to(&DataType::Decimal128(38, 0), &schema)?;
                        Ok(Transformed::yes(Expr::AggregateFunction(
                            AggregateFunction { func, params },
                        )))
                    }
                    other => Ok(Transformed::no(other)),
                })?
                .update_data(|e| saved.restore(e)))
            })?;
            let changed = t.transformed;
            Ok(Transformed::new_transformed(
                t.data.recompute_schema()?,
                changed,
            ))
        })?;
        Ok(out.data)
    }

    fn name(&self) -> &str {
        "freshet_sum_bigint_as_numeric"
    }
}

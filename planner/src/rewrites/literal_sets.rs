//! Long `IN` lists of constants as one set, so that planning them costs
//! one pass, not one per optimizer rule.
//!
//! `x IN (1, 2, ..., 100000)` is 100,000 expressions in a logical plan,
//! and each of DataFusion's two dozen optimizer passes, its physical
//! planner and its physical optimizer visits (and often copies, hashes or
//! names) every one of them: seconds of planning for a list that
//! execution answers from one hash set anyway. Before an ad hoc query is
//! optimized, [`literal_sets`] turns every analyzed `IN` list longer than
//! [`LONG_IN_LIST`] whose items are all constants into a call of a
//! function that holds the list as one Arrow array and answers with
//! DataFusion's own `InListExpr` built once from it, so the answers
//! (three-valued logic, `NOT IN` with a NULL in the list) are exactly the
//! `IN` list's.
//!
//! Only the query path uses it: maintained dataflows lower `IN` lists
//! themselves, and their plans are written down by name, which a set held
//! in a function instance could not survive.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::expr::{Cast, InList, ScalarFunction};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::utils::merge_schema;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature, Volatility,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{Column, InListExpr};

/// Lists up to this long stay `IN` lists (cheap to plan, and they read
/// better in EXPLAIN).
pub const LONG_IN_LIST: usize = 64;

/// `plan` with its long constant `IN` lists as sets (see the module
/// documentation). `plan` must be analyzed: the list's items then have
/// the type of the tested expression.
pub fn literal_sets(plan: LogicalPlan) -> Result<LogicalPlan> {
    let rewritten = plan.transform_up_with_subqueries(|node| {
        crate::interrupt::check()?;
        if !has_long_list(&node) {
            return Ok(Transformed::no(node));
        }
        // The schema the node's expressions are typed against (as type
        // coercion does).
        let inputs = node.inputs();
        let schema = if inputs.is_empty() {
            node.schema().as_ref().clone()
        } else {
            merge_schema(&inputs)
        };
        let names = NamePreserver::new(&node);
        node.map_expressions(|expr| {
            let name = names.save(&expr);
            // Top down, so that a list's items are not visited one by one.
            let rewritten = expr.transform_down(|e| match e {
                Expr::InList(list) if list.list.len() > LONG_IN_LIST => {
                    match as_set(list, &schema)? {
                        Ok(set) => Ok(Transformed::new(set, true, TreeNodeRecursion::Jump)),
                        Err(list) => Ok(Transformed::no(Expr::InList(list))),
                    }
                }
                other => Ok(Transformed::no(other)),
            })?;
            Ok(rewritten.update_data(|e| name.restore(e)))
        })
    })?;
    Ok(rewritten.data)
}

/// Whether one of `node`'s expressions holds a long `IN` list (checked
/// first, so that names are computed only for nodes that change).
fn has_long_list(node: &LogicalPlan) -> bool {
    let mut found = false;
    let _ = node.apply_expressions(|expr| {
        found =
            expr.exists(|e| Ok(matches!(e, Expr::InList(list) if list.list.len() > LONG_IN_LIST)))?;
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    found
}

/// `list` as a set call if every item is a constant of the tested
/// expression's type, or else `list` as it was.
fn as_set(
    list: InList,
    schema: &datafusion::common::DFSchema,
) -> Result<std::result::Result<Expr, InList>> {
    let ty = list.expr.get_type(schema)?;
    let values: Option<Vec<ScalarValue>> = list.list.iter().map(|i| constant(i, &ty)).collect();
    let Some(values) = values else {
        return Ok(Err(list));
    };
    let array = ScalarValue::iter_to_array(values)?;
    if array.data_type() != &ty {
        return Ok(Err(list));
    }
    let set = LiteralSet::new(array, list.negated);
    Ok(Ok(Expr::ScalarFunction(ScalarFunction::new_udf(
        Arc::new(ScalarUDF::new_from_impl(set)),
        vec![*list.expr],
    ))))
}

/// The value of a constant item, of type `ty`: a literal, possibly
/// negated or cast (as type coercion leaves them). A cast that fails is no
/// constant here: the list then stays a list, and fails as it would have.
fn constant(item: &Expr, ty: &DataType) -> Option<ScalarValue> {
    let value = match item {
        Expr::Literal(v, _) => v.clone(),
        Expr::Negative(inner) => match inner.as_ref() {
            Expr::Literal(v, _) => v.arithmetic_negate().ok()?,
            _ => return None,
        },
        Expr::Cast(Cast { expr, field }) => constant(expr, field.data_type())?,
        _ => return None,
    };
    if value.data_type() == *ty {
        Some(value)
    } else {
        value.cast_to(ty).ok()
    }
}

/// `x IN (<set>)` (or `NOT IN`), the set held as one array.
#[derive(Debug)]
struct LiteralSet {
    values: ArrayRef,
    negated: bool,
    signature: Signature,
    /// DataFusion's `IN` evaluation over the set, built at first use.
    filter: OnceLock<Arc<InListExpr>>,
    /// The one-column batch schema `filter` evaluates against.
    schema: Arc<Schema>,
}

impl LiteralSet {
    fn new(values: ArrayRef, negated: bool) -> Self {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "x",
            values.data_type().clone(),
            true,
        )]));
        LiteralSet {
            values,
            negated,
            signature: Signature::any(1, Volatility::Immutable),
            filter: OnceLock::new(),
            schema,
        }
    }

    fn filter(&self) -> Result<&Arc<InListExpr>> {
        if let Some(filter) = self.filter.get() {
            return Ok(filter);
        }
        let built = InListExpr::try_new_from_array(
            Arc::new(Column::new("x", 0)),
            Arc::clone(&self.values),
            self.negated,
            &self.schema,
        )?;
        Ok(self.filter.get_or_init(|| Arc::new(built)))
    }
}

/// Two sets are the same function only if they are the same array: equal
/// lists written twice stay two calls (comparing contents would cost what
/// the set saves).
impl PartialEq for LiteralSet {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.values, &other.values) && self.negated == other.negated
    }
}

impl Eq for LiteralSet {}

impl Hash for LiteralSet {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (Arc::as_ptr(&self.values) as *const () as usize).hash(state);
        self.negated.hash(state);
    }
}

impl ScalarUDFImpl for LiteralSet {
    fn name(&self) -> &str {
        if self.negated { "not_in_set" } else { "in_set" }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [x] = args.args.as_slice() else {
            return exec_err!("{} takes one argument", self.name());
        };
        let (array, scalar) = match x {
            ColumnarValue::Array(a) => (Arc::clone(a), false),
            ColumnarValue::Scalar(s) => (s.to_array()?, true),
        };
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), vec![array])?;
        let out = self.filter()?.evaluate(&batch)?;
        if scalar {
            let array = out.into_array(1)?;
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
                array.as_ref(),
                0,
            )?))
        } else {
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sql` planned, analyzed and rewritten as the query path does, and
    /// whether the rewrite made a set.
    async fn rewritten(
        state: &datafusion::execution::SessionState,
        sql: &str,
    ) -> (LogicalPlan, bool) {
        let logical = state.create_logical_plan(sql).await.expect("plans");
        let analyzed = state
            .analyzer()
            .execute_and_check(logical, state.config_options(), |_, _| {})
            .expect("analyzes");
        let rewritten = literal_sets(analyzed).expect("rewrites");
        let has_set = format!("{}", rewritten.display_indent()).contains("in_set");
        (rewritten, has_set)
    }

    /// The query's boolean results, column by column.
    async fn run(sql: &str) -> Vec<Vec<Option<bool>>> {
        use arrow::array::{Array, BooleanArray};
        let state = crate::query::engine::new_session_state(1);
        let (rewritten, has_set) = rewritten(&state, sql).await;
        assert!(has_set, "{}", rewritten.display_indent());
        let physical = state.create_physical_plan(&rewritten).await.expect("plans");
        let task = Arc::new(datafusion::execution::TaskContext::from(&state));
        let batches = datafusion::physical_plan::collect(physical, task)
            .await
            .expect("runs");
        let mut out = vec![vec![]; batches.first().map_or(0, |b| b.num_columns())];
        for b in batches {
            for (c, column) in out.iter_mut().enumerate() {
                let col = b
                    .column(c)
                    .as_any()
                    .downcast_ref::<BooleanArray>()
                    .expect("boolean");
                for i in 0..col.len() {
                    column.push(col.is_valid(i).then(|| col.value(i)));
                }
            }
        }
        out
    }

    fn list(n: i64, extra: &str) -> String {
        let mut items: Vec<String> = (1..=n).map(|i| (i * 10).to_string()).collect();
        if !extra.is_empty() {
            items.push(extra.to_owned());
        }
        items.join(", ")
    }

    #[tokio::test]
    async fn a_long_list_answers_like_the_list_in_three_valued_logic() {
        let items = list(100, "NULL");
        let sql = format!(
            "SELECT x IN ({items}), x NOT IN ({items}) FROM (VALUES (10), (15), (CAST(NULL AS BIGINT))) t(x)"
        );
        // 10 is in the list; 15 is not, but the list holds a NULL; NULL.
        let got = run(&sql).await;
        assert_eq!(got[0], vec![Some(true), None, None]);
        assert_eq!(got[1], vec![Some(false), None, None]);
    }

    #[tokio::test]
    async fn items_take_the_tested_type_and_negatives_count() {
        let items = format!("{}, -7", list(100, ""));
        let sql =
            format!("SELECT CAST(x AS INT) IN ({items}) FROM (VALUES (-7), (7), (1000)) t(x)");
        assert_eq!(
            run(&sql).await[0],
            vec![Some(true), Some(false), Some(true)]
        );
    }

    #[tokio::test]
    async fn short_lists_and_lists_with_columns_stay_lists() {
        let state = crate::query::engine::new_session_state(1);
        for sql in [
            "SELECT x IN (1, 2, 3) FROM (VALUES (1)) t(x)".to_owned(),
            format!("SELECT x IN ({}, x) FROM (VALUES (1)) t(x)", list(100, "")),
        ] {
            let (plan, has_set) = rewritten(&state, &sql).await;
            assert!(!has_set, "{}", plan.display_indent());
        }
    }
}

//! Planning queries.

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::common::ParamValues;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::execution::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::sqlparser::ast;
use freshet_catalog::CatalogState;
use freshet_repr::{ColumnDesc, GlobalId, PgType, RelationDesc};

use crate::error::{PlanError, Result};
use crate::pg::naming;
use crate::plan::QueryPlan;
use crate::query::provider::PlanningContext;
use crate::query::resolve::{NameResolver, References, SessionInfo};

/// Everything planning one statement needs.
#[derive(Clone, Copy)]
pub struct StatementContext<'a> {
    /// The session's DataFusion state.
    pub state: &'a SessionState,
    /// The catalog version planned against.
    pub catalog: &'a CatalogState,
    /// The session.
    pub session: &'a SessionInfo,
    /// Values for `$n` parameters, if the statement has them bound.
    pub params: Option<&'a ParamValues>,
}

impl<'a> StatementContext<'a> {
    /// A resolver for this session and catalog.
    pub fn resolver(&self) -> NameResolver<'a> {
        NameResolver::new(self.catalog, self.session)
    }

    /// A DataFusion planning context.
    pub fn planning(&self) -> PlanningContext<'a> {
        PlanningContext::new(self.state, self.resolver())
    }
}

/// Plan a query.
pub fn plan_query(cx: &StatementContext, query: &ast::Query) -> Result<QueryPlan> {
    plan_query_in(cx, cx.planning(), query)
}

/// Plan a query that will become a dataflow: views are inlined even when
/// indexed (the dataflow reads only storage collections).
pub fn plan_maintained_query(cx: &StatementContext, query: &ast::Query) -> Result<QueryPlan> {
    plan_query_in(cx, cx.planning().inlining_views(), query)
}

/// [`plan_maintained_query`], or with `reuse`, reading indexed views from
/// their indexes' arrangements instead of recomputing them.
pub fn plan_dataflow_query(
    cx: &StatementContext,
    query: &ast::Query,
    reuse: bool,
) -> Result<QueryPlan> {
    if reuse {
        plan_query_in(cx, cx.planning(), query)
    } else {
        plan_maintained_query(cx, query)
    }
}

fn plan_query_in(
    cx: &StatementContext,
    pc: PlanningContext<'_>,
    query: &ast::Query,
) -> Result<QueryPlan> {
    let mut query = query.clone();
    let refs = cx.resolver().rewrite(&mut query)?;
    let logical = pc.plan_sql_statement(ast::Statement::Query(Box::new(query.clone())))?;
    finish_query(cx, &pc, logical, Some(&query), &refs)
}

/// Parameter types a query's `$n` placeholders take, by position.
pub fn parameter_types(
    cx: &StatementContext,
    query: &ast::Query,
) -> Result<Vec<Option<arrow::datatypes::FieldRef>>> {
    let mut query = query.clone();
    cx.resolver().rewrite(&mut query)?;
    let pc = cx.planning();
    let logical = pc.plan_sql_statement(ast::Statement::Query(Box::new(query)))?;
    placeholder_types(&logical)
}

/// Positional placeholder types of a logical plan, as fields: the Arrow
/// type a value is bound as, and (in the field's metadata, see
/// [`freshet_repr::PgType::of_field`]) the Postgres type a client is told
/// to send, so a parameter compared with or inserted into a `uuid` or
/// `jsonb` column is described as one.
pub fn placeholder_types(plan: &LogicalPlan) -> Result<Vec<Option<arrow::datatypes::FieldRef>>> {
    let fields = plan.get_parameter_fields()?;
    let casts = placeholder_casts(plan)?;
    let mut out = Vec::new();
    for (name, field) in fields {
        // As in PostgreSQL, `$n::type` gives a parameter its type when
        // nothing else does.
        let field = field.or_else(|| casts.get(&name).cloned());
        let idx: usize = name
            .trim_start_matches('$')
            .parse()
            .map_err(|_| PlanError::Syntax(format!("invalid parameter {name}")))?;
        if idx == 0 || idx > crate::parser::complexity::MAX_PARAMETERS {
            return Err(PlanError::UndefinedParameter(idx.to_string()));
        }
        if out.len() < idx {
            out.resize(idx, None);
        }
        out[idx - 1] = field;
    }
    Ok(out)
}

/// The type each placeholder is first cast to (`$1::bigint`).
fn placeholder_casts(
    plan: &LogicalPlan,
) -> Result<std::collections::HashMap<String, arrow::datatypes::FieldRef>> {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::logical_expr::Expr;
    let mut casts = std::collections::HashMap::new();
    plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                let cast = match e {
                    Expr::Cast(c) => Some((c.expr.as_ref(), &c.field)),
                    Expr::TryCast(c) => Some((c.expr.as_ref(), &c.field)),
                    _ => None,
                };
                if let Some((Expr::Placeholder(p), field)) = cast {
                    casts
                        .entry(p.id.clone())
                        .or_insert_with(|| std::sync::Arc::clone(field));
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    })?;
    Ok(casts)
}

/// `params` as values of the types planning gave their placeholders. A
/// prepared statement's values are decoded as the types it was prepared
/// with; planned again after a catalog change (its table re-created with
/// another column type), a placeholder may have another type now, and its
/// value is cast to it as PostgreSQL's re-planned statement casts it.
fn fit_params(plan: &LogicalPlan, params: &ParamValues) -> Result<ParamValues> {
    let ParamValues::List(values) = params else {
        return Ok(params.clone());
    };
    let Ok(types) = placeholder_types(plan) else {
        return Ok(params.clone());
    };
    let fitted = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let Some(field) = types.get(i).cloned().flatten() else {
                return Ok(v.clone());
            };
            let ty = field.data_type();
            if v.value.data_type() == *ty {
                return Ok(v.clone());
            }
            let value = if v.value.is_null() {
                datafusion::common::ScalarValue::try_from(ty)?
            } else {
                v.value.cast_to(ty)?
            };
            Ok(datafusion::common::metadata::ScalarAndMetadata::new(
                value,
                v.metadata.clone(),
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ParamValues::List(fitted))
}

/// Bind parameters, run the analyzer (Postgres literal types, type
/// coercion, checked arithmetic) and describe the output.
pub(crate) fn finish_query(
    cx: &StatementContext,
    pc: &PlanningContext,
    logical: LogicalPlan,
    names_from: Option<&ast::Query>,
    refs: &References,
) -> Result<QueryPlan> {
    let logical = infer_array_placeholders(logical)?;
    let logical = match cx.params {
        Some(params) => {
            let params = fit_params(&logical, params)?;
            logical.with_param_values(params)?
        }
        None => logical,
    };
    let volatile = is_volatile(&logical);
    let analyzed =
        cx.state
            .analyzer()
            .execute_and_check(logical, cx.state.config_options(), |_, _| {})?;
    let df_names: Vec<String> = analyzed
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let names = match names_from {
        Some(q) => naming::output_names(q, &df_names),
        None => df_names,
    };
    let desc = RelationDesc::new(
        analyzed
            .schema()
            .fields()
            .iter()
            .zip(names)
            .map(|(f, name)| ColumnDesc {
                name,
                ty: PgType::of_field(f),
                nullable: f.is_nullable(),
            })
            .collect(),
    );
    Ok(QueryPlan {
        logical: analyzed,
        binding: Arc::clone(&pc.binding),
        references: refs.items.clone(),
        inputs: pc.resolver.collection_inputs(&refs.items),
        desc,
        volatile,
    })
}

/// Give `x = ANY($n)`'s untyped placeholder the type of an array of
/// `x`'s type, as PostgreSQL infers it (DataFusion plans the comparison
/// as `array_has($n, x)` and leaves `$n` untyped, so a driver would be
/// told to send text and the bound value would not be an array).
fn infer_array_placeholders(plan: LogicalPlan) -> Result<LogicalPlan> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::logical_expr::expr::{Placeholder, ScalarFunction};
    use datafusion::logical_expr::{Expr, ExprSchemable};
    let rewritten = plan.transform_up_with_subqueries(|node| {
        let inputs = node.inputs();
        let [input] = inputs.as_slice() else {
            return Ok(Transformed::no(node));
        };
        let schema = std::sync::Arc::clone(input.schema());
        node.map_expressions(|e| {
            e.transform_up(|e| match e {
                Expr::ScalarFunction(ScalarFunction { func, args })
                    if func.name() == "array_has"
                        && matches!(
                            args.first(),
                            Some(Expr::Placeholder(Placeholder { field: None, .. }))
                        ) =>
                {
                    let element = args.get(1).map(|a| a.get_type(&schema)).transpose();
                    let mut args = args;
                    if let (Ok(Some(element)), Some(Expr::Placeholder(p))) =
                        (element, args.first_mut())
                    {
                        p.field = Some(std::sync::Arc::new(arrow::datatypes::Field::new(
                            "",
                            arrow::datatypes::DataType::List(std::sync::Arc::new(
                                arrow::datatypes::Field::new_list_field(element, true),
                            )),
                            true,
                        )));
                        return Ok(Transformed::yes(Expr::ScalarFunction(ScalarFunction {
                            func,
                            args,
                        })));
                    }
                    Ok(Transformed::no(Expr::ScalarFunction(ScalarFunction {
                        func,
                        args,
                    })))
                }
                other => Ok(Transformed::no(other)),
            })
        })
    })?;
    Ok(rewritten.data)
}

/// Whether a plan calls a volatile function (checked before optimization,
/// which folds `now()` into a constant).
pub fn is_volatile(plan: &LogicalPlan) -> bool {
    let mut volatile = false;
    let _ = plan.apply_with_subqueries(|node| {
        for e in node.expressions() {
            if e.is_volatile() {
                volatile = true;
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    volatile
}

/// The collections a set of direct references reads.
pub fn inputs_of(cx: &StatementContext, direct: &BTreeSet<GlobalId>) -> BTreeSet<GlobalId> {
    cx.resolver().collection_inputs(direct)
}

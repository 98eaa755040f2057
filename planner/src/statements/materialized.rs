//! Planning materialized views: `CREATE MATERIALIZED VIEW`, the dataflow
//! plan of a stored view (at install and at boot), and `EXPLAIN`.
//!
//! A view's dataflow is always planned from its stored, id-resolved
//! definition, so CREATE, boot and EXPLAIN agree on what runs.

use arrow::datatypes::DataType;
use datafusion::execution::SessionState;
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::sqlparser::ast::{self, CreateView};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use freshet_catalog::{CatalogState, ItemDef, ItemDetails, ItemKind};
use freshet_compute_types::{Export, RelPlan};
use freshet_repr::{GlobalId, PgType, RelationDesc};

use crate::error::{PlanError, Result};
use crate::lower::{cast_to, check_deterministic, lower};
use crate::plan::{CreateMaterializedViewPlan, ExplainDataflowPlan, ItemDataflow, Plan, QueryPlan};
use crate::query::resolve::SessionInfo;
use crate::statements::context::StatementContext;
use crate::statements::ddl::{ViewDefinition, view_definition};

/// `CREATE [OR REPLACE] MATERIALIZED VIEW [IF NOT EXISTS] name [(cols)] AS q`.
///
/// The query is planned and lowered here, once: a construct the dataflow
/// cannot maintain fails before anything is committed, and the lowered
/// plan is what the catalog commits and compute installs.
pub fn create_materialized_view(cx: &StatementContext, cv: &CreateView) -> Result<Plan> {
    let defined = define(cx, cv)?;
    let existing = cx
        .catalog
        .item_by_name(defined.def.schema_id, &defined.def.name);
    let replace = match existing {
        Some(item) if cv.or_replace => {
            if item.kind != ItemKind::MaterializedView {
                return Err(PlanError::WrongObjectType {
                    name: item.name.clone(),
                    expected: "a materialized view",
                });
            }
            Some(item.id)
        }
        _ => None,
    };
    Ok(Plan::CreateMaterializedView(Box::new(
        CreateMaterializedViewPlan {
            def: defined.def,
            if_not_exists: cv.if_not_exists,
            replace,
            inputs: defined.inputs,
            refresh: None,
            dataflow: defined.dataflow,
        },
    )))
}

/// A materialized view as its CREATE defines it.
struct Defined {
    /// Its catalog entry.
    def: ItemDef,
    /// The storage collections its dataflow reads.
    inputs: std::collections::BTreeSet<GlobalId>,
    /// Its dataflow.
    dataflow: ItemDataflow,
}

/// The catalog definition of a materialized view and its dataflow: the
/// query planned reading indexed views from their indexes, and, only when
/// that plan imports an index, planned again from storage alone (the
/// twin installed when an index cannot serve the view's start).
fn define(cx: &StatementContext, cv: &CreateView) -> Result<Defined> {
    if cv.temporary {
        return Err(PlanError::unsupported("CREATE TEMPORARY MATERIALIZED VIEW"));
    }
    let ViewDefinition {
        schema_id,
        name,
        desc,
        references,
        create_sql,
        query,
        plan,
    } = view_definition(cx, cv, "MATERIALIZED VIEW", true)?;
    let optimized = optimize(cx.state, &plan)?;
    let desc = stored_types(nullable(desc), &optimized);
    let rel = lower_optimized(&optimized, &desc)?;
    let (inputs, from_storage) = if rel.imported_indexes().is_empty() {
        (plan.inputs, None)
    } else {
        let maintained = crate::statements::context::plan_maintained_query(cx, &query)?;
        let from_storage = lower_view(cx.state, &maintained, &desc)?;
        (maintained.inputs, Some(from_storage))
    };
    let dataflow = ItemDataflow {
        plan: rel,
        export: Export::Shard,
        from_storage,
        notices: Vec::new(),
    };
    let def = ItemDef {
        schema_id,
        name,
        kind: ItemKind::MaterializedView,
        create_sql,
        desc: Some(desc),
        references,
        details: ItemDetails::MaterializedView {
            plan: None,
            as_of: None,
        },
        options: Default::default(),
    };
    Ok(Defined {
        def,
        inputs,
        dataflow,
    })
}

/// Like PostgreSQL's, a materialized view's columns carry no NOT NULL
/// constraints; this also keeps the stored shard's schema valid for every
/// row the query can produce.
fn nullable(mut desc: RelationDesc) -> RelationDesc {
    for c in &mut desc.columns {
        c.nullable = true;
    }
    desc
}

/// Numeric results keep the scale the query computes them at (an
/// unconstrained `numeric` is stored at a fixed scale and would lose how
/// `sum(numeric(10,2))` prints).
fn stored_types(mut desc: RelationDesc, optimized: &LogicalPlan) -> RelationDesc {
    for (c, f) in desc.columns.iter_mut().zip(optimized.schema().fields()) {
        if let (PgType::Numeric { typmod: None }, DataType::Decimal128(p, s)) =
            (&c.ty, f.data_type())
            && c.ty.arrow_type() != *f.data_type()
        {
            c.ty = PgType::Numeric {
                typmod: Some((*p, *s)),
            };
        }
    }
    desc
}

/// Check a planned view query and optimize it (DataFusion decorrelates
/// subqueries and pushes projections and filters down here).
fn optimize(state: &SessionState, plan: &QueryPlan) -> Result<LogicalPlan> {
    check_deterministic(&plan.logical)?;
    if !crate::lower::temporal::plan_calls_mz_now(&plan.logical) {
        return Ok(state.optimize(&plan.logical)?);
    }
    // Common subexpression elimination would move a temporal filter's
    // repeated `mz_now() * 1000` into a projection below it, out of the
    // conjuncts lowering turns into time bounds.
    let rules = state
        .optimizer()
        .rules
        .iter()
        .filter(|r| r.name() != "common_sub_expression_eliminate")
        .cloned()
        .collect();
    let optimizer = datafusion::optimizer::Optimizer::with_rules(rules);
    Ok(optimizer.optimize(plan.logical.clone(), state, |_, _| {})?)
}

/// Lower a planned view query to the dataflow that maintains it, emitting
/// rows of exactly the types its shard stores.
fn lower_view(state: &SessionState, plan: &QueryPlan, desc: &RelationDesc) -> Result<RelPlan> {
    lower_optimized(&optimize(state, plan)?, desc)
}

/// Lowering only: whether compute can render the plan, and whether it
/// survives its wire form, is checked where it is committed
/// (the coordinator's DDL path), once.
fn lower_optimized(optimized: &LogicalPlan, desc: &RelationDesc) -> Result<RelPlan> {
    let rel = lower(optimized)?;
    cast_to(rel, optimized.schema(), &desc.arrow_schema())
}

/// The dataflow plan of the stored materialized view `id`, planned from its
/// id-resolved definition (names are never re-resolved). With `reuse`,
/// indexed views it reads come from their indexes' arrangements.
pub fn dataflow_plan(
    state: &SessionState,
    catalog: &CatalogState,
    id: GlobalId,
    reuse: bool,
) -> Result<RelPlan> {
    let (plan, desc) = planned_definition(state, catalog, id, reuse)?;
    lower_view(state, &plan, &desc)
}

/// The dataflow of the stored plain view `id` (for an index on it), and
/// the columns it produces: the view's, with numeric results at the scale
/// the query computes them (as a materialized view stores them).
pub fn view_dataflow(
    state: &SessionState,
    catalog: &CatalogState,
    id: GlobalId,
    reuse: bool,
) -> Result<(RelPlan, RelationDesc)> {
    let (plan, desc) = planned_definition(state, catalog, id, reuse)?;
    let optimized = optimize(state, &plan)?;
    let desc = stored_types(nullable(desc), &optimized);
    let rel = lower_optimized(&optimized, &desc)?;
    Ok((rel, desc))
}

/// The dataflow computing `query` (planned in `cx`; views inlined, or
/// with `reuse` indexed views read from their indexes), the columns it
/// produces (numeric results at the scale the query computes them), and
/// the planned query: what a subscribe runs.
pub(crate) fn query_dataflow(
    cx: &StatementContext,
    query: &ast::Query,
    reuse: bool,
) -> Result<(RelPlan, RelationDesc, QueryPlan)> {
    let plan = crate::statements::context::plan_dataflow_query(cx, query, reuse)?;
    let optimized = optimize(cx.state, &plan)?;
    let desc = stored_types(nullable(plan.desc.clone()), &optimized);
    let rel = lower_optimized(&optimized, &desc)?;
    Ok((rel, desc, plan))
}

/// The stored, id-resolved definition of view `id`, planned, with its
/// columns.
pub(crate) fn planned_definition(
    state: &SessionState,
    catalog: &CatalogState,
    id: GlobalId,
    reuse: bool,
) -> Result<(QueryPlan, RelationDesc)> {
    let item = catalog.get_item(id)?;
    let stmt = Parser::parse_sql(&PostgreSqlDialect {}, &item.create_sql)
        .map_err(|e| PlanError::Internal(format!("stored definition of {id} does not parse: {e}")))?
        .pop();
    let Some(ast::Statement::CreateView(cv)) = stmt else {
        return Err(PlanError::Internal(format!(
            "stored definition of {id} is not a view"
        )));
    };
    let desc = item
        .desc
        .clone()
        .ok_or_else(|| PlanError::Internal(format!("view {id} has no columns")))?;
    let plan = with_stored_context(state, catalog, id, |cx| {
        crate::statements::context::plan_dataflow_query(cx, &cv.query, reuse)
    })?;
    Ok((plan, desc))
}

/// Run `f` in the context stored definitions are planned in: the
/// database of item `id`, no search path (stored SQL names objects by id).
pub(crate) fn with_stored_context<T>(
    state: &SessionState,
    catalog: &CatalogState,
    id: GlobalId,
    f: impl FnOnce(&StatementContext) -> Result<T>,
) -> Result<T> {
    let database = catalog
        .full_name(id)
        .map(|(db, _, _)| db.to_string())
        .unwrap_or_default();
    let session = SessionInfo {
        database,
        search_path: vec![],
        user: "freshet".into(),
        temp_schema: None,
    };
    let cx = StatementContext {
        state,
        catalog,
        session: &session,
        params: None,
    };
    f(&cx)
}

/// `EXPLAIN CREATE MATERIALIZED VIEW ...`: the dataflow it would install.
pub fn explain_create(cx: &StatementContext, cv: &CreateView) -> Result<Plan> {
    let defined = define(cx, cv)?;
    Ok(Plan::ExplainDataflow(Box::new(ExplainDataflowPlan {
        plan: defined.dataflow.plan,
        head: None,
    })))
}

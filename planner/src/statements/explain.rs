//! `EXPLAIN` of maintained objects: the dataflow a materialized view or
//! index runs (its written plan), and the text and rows `EXPLAIN` shows
//! for a dataflow plan, with ids named. (`EXPLAIN CREATE MATERIALIZED
//! VIEW` plans the view: [`crate::statements::materialized::explain_create`].)

use arrow::array::RecordBatch;
use datafusion::sql::sqlparser::ast::ObjectName;
use freshet_catalog::{CatalogState, ItemKind};
use freshet_compute_types::RelPlan;
use freshet_repr::{PgType, RelationDesc};

use crate::error::{PlanError, Result};
use crate::plan::{ExplainDataflowPlan, Plan};
use crate::query::resolve::humanize_ids;
use crate::statements::context::StatementContext;
use crate::statements::misc::text_batch;
use crate::statements::written_plan::read_or_plan;

/// `EXPLAIN MATERIALIZED VIEW name`: the dataflow that maintains it.
pub fn explain_materialized_view(cx: &StatementContext, name: &ObjectName) -> Result<Plan> {
    let item = cx.resolver().resolve_item(name)?;
    if item.kind != ItemKind::MaterializedView {
        return Err(PlanError::WrongObjectType {
            name: item.name.clone(),
            expected: "a materialized view",
        });
    }
    // The plan committed with the view, which is what runs.
    let (dataflow, _) = read_or_plan(cx.state, cx.catalog, item.id)?;
    let head = (!dataflow.notices.is_empty()).then(|| {
        dataflow
            .notices
            .iter()
            .map(|n| format!("({n})"))
            .collect::<Vec<_>>()
            .join(" ")
    });
    Ok(Plan::ExplainDataflow(Box::new(ExplainDataflowPlan {
        plan: dataflow.plan,
        head,
    })))
}

/// `EXPLAIN INDEX name`: the dataflow that maintains it.
pub fn explain_index(cx: &StatementContext, name: &ObjectName) -> Result<Plan> {
    let item = cx.resolver().resolve_item(name)?;
    if item.kind != ItemKind::Index {
        return Err(PlanError::WrongObjectType {
            name: item.name.clone(),
            expected: "an index",
        });
    }
    let (on, keys) = crate::statements::index::index_parts(cx.catalog, item.id)?;
    // The plan committed with the index, which is what runs.
    let (dataflow, _) = read_or_plan(cx.state, cx.catalog, item.id)?;
    let plan = dataflow.plan;
    let on_name = cx
        .catalog
        .full_name(on.id)
        .map(|(db, schema, name)| format!("{db}.{schema}.{name}"))
        .unwrap_or_else(|| on.name.clone());
    let mut head = format!(
        "Arrange {on_name} by ({}) in memory (index {})",
        keys.join(", "),
        item.name
    );
    for n in &dataflow.notices {
        head.push_str(&format!(" ({n})"));
    }
    Ok(Plan::ExplainDataflow(Box::new(ExplainDataflowPlan {
        plan,
        head: Some(head),
    })))
}

/// `EXPLAIN`'s rows for `plan`, given compute's rendering of it
/// (`explained`: the plan's text with each reduction's strategy), with
/// ids named and indented under `head` if given.
pub fn explain_dataflow_rows(
    catalog: &CatalogState,
    plan: &RelPlan,
    explained: &str,
    head: Option<String>,
) -> Result<(RelationDesc, RecordBatch)> {
    let text = explain_dataflow_text(catalog, plan, explained);
    let indent = if head.is_some() { "  " } else { "" };
    let lines = head
        .into_iter()
        .chain(text.lines().map(|l| format!("{indent}{l}")));
    text_batch(
        &[("Dataflow Plan", PgType::Text)],
        lines.map(|l| vec![Some(l)]).collect(),
    )
}

/// `explained` (the text of `plan`) with every id a user could not read
/// named: id-form references, imported indexes and inputs.
pub fn explain_dataflow_text(catalog: &CatalogState, plan: &RelPlan, explained: &str) -> String {
    let mut text = humanize_ids(catalog, explained);
    for index in plan.imported_indexes() {
        if let Some((db, schema, item)) = catalog.full_name(index) {
            text = text.replace(
                &format!("Get {index} ("),
                &format!("Get {db}.{schema}.{item} ("),
            );
        }
    }
    for id in plan.inputs() {
        if let Some((db, schema, item)) = catalog.full_name(id) {
            text = text.replace(
                &format!("Get {id}\n"),
                &format!("Get {db}.{schema}.{item}\n"),
            );
        }
    }
    text
}

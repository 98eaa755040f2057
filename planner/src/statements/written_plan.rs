//! Written plans: the dataflow a materialized view or index was created
//! with, committed in its catalog entry.
//!
//! `CREATE` plans the dataflow once ([`ItemDataflow`]); the coordinator
//! commits its encoded form with the object and installs what that form
//! decodes to. Boot and `EXPLAIN` read it back. Only a plan of another
//! format version (a different Freshet message version or DataFusion
//! release) is planned again from the stored SQL.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use datafusion::execution::SessionState;
use freshet_catalog::{CatalogState, ItemDetails, ItemKind, WrittenPlan};
use freshet_compute_types::{DataflowDesc, Export, RelPlan, WireError, format_version};
use freshet_repr::GlobalId;

use crate::error::{PlanError, Result};
pub use crate::plan::ItemDataflow;

/// Plan the dataflow of materialized view or index `id` from its stored
/// SQL in `catalog`.
pub fn plan_item(
    state: &SessionState,
    catalog: &CatalogState,
    id: GlobalId,
) -> Result<ItemDataflow> {
    let item = catalog.get_item(id)?;
    let plan_for = |reuse: bool| -> Result<(RelPlan, Export)> {
        Ok(match item.kind {
            ItemKind::MaterializedView => (
                crate::statements::materialized::dataflow_plan(state, catalog, id, reuse)?,
                Export::Shard,
            ),
            ItemKind::Index => {
                let (plan, keys, schema) =
                    crate::statements::index::dataflow_plan(state, catalog, id, reuse)?;
                (plan, Export::Index { keys, schema })
            }
            other => {
                return Err(PlanError::unsupported(format!(
                    "dataflows for {}s",
                    other.name()
                )));
            }
        })
    };
    let (plan, export) = plan_for(true)?;
    let from_storage = if plan.imported_indexes().is_empty() {
        None
    } else {
        Some(plan_for(false)?.0)
    };
    Ok(ItemDataflow {
        plan,
        export,
        from_storage,
        notices: Vec::new(),
    })
}

/// Encode a planned dataflow for the catalog. An expression without a
/// wire form could not be installed at the next boot, so it is refused as
/// unsupported in a dataflow.
pub fn write(state: &SessionState, id: GlobalId, dataflow: &ItemDataflow) -> Result<WrittenPlan> {
    let codec = crate::lower::plan_codec::plan_codec(state);
    let encode = |plan: &RelPlan| -> Result<String> {
        let bytes = codec
            .encode(&DataflowDesc::unscheduled(
                id,
                plan.clone(),
                dataflow.export.clone(),
            ))
            .map_err(|e| match e {
                WireError::Encode(what) => PlanError::unsupported(format!(
                    "in {}, {what}",
                    match dataflow.export {
                        Export::Index { .. } => "an index key",
                        _ => "a materialized view",
                    }
                )),
                other => PlanError::Internal(format!("encoding the plan of {id}: {other}")),
            })?;
        Ok(STANDARD.encode(bytes))
    };
    Ok(WrittenPlan {
        format: format_version(),
        plan: encode(&dataflow.plan)?,
        from_storage: dataflow.from_storage.as_ref().map(encode).transpose()?,
        notices: dataflow.notices.clone(),
    })
}

/// Why a written plan could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ReadPlanError {
    /// The item has no written plan (created before plans were written).
    #[error("no written plan")]
    Missing,
    /// Written in another format version.
    #[error("plan format {found} differs from this build's {expected}")]
    Format {
        /// The plan's format.
        found: String,
        /// This build's.
        expected: String,
    },
    /// It does not decode.
    #[error("the written plan does not decode: {0}")]
    Corrupt(String),
}

/// The written plan of item `id`, decoded.
pub fn read(
    state: &SessionState,
    catalog: &CatalogState,
    id: GlobalId,
) -> Result<ItemDataflow, ReadPlanError> {
    let item = catalog
        .get_item(id)
        .map_err(|e| ReadPlanError::Corrupt(e.to_string()))?;
    let written = match &item.details {
        ItemDetails::MaterializedView { plan, .. } | ItemDetails::Index { plan, .. } => {
            plan.as_deref().ok_or(ReadPlanError::Missing)?
        }
        _ => return Err(ReadPlanError::Missing),
    };
    decode(state, written)
}

/// What `written` decodes to: the dataflow compute installs, exactly as
/// committed.
pub fn decode(state: &SessionState, written: &WrittenPlan) -> Result<ItemDataflow, ReadPlanError> {
    let expected = format_version();
    if written.format != expected {
        return Err(ReadPlanError::Format {
            found: written.format.clone(),
            expected,
        });
    }
    let codec = crate::lower::plan_codec::plan_codec(state);
    let decode = |text: &str| -> Result<DataflowDesc, ReadPlanError> {
        let bytes = STANDARD
            .decode(text)
            .map_err(|e| ReadPlanError::Corrupt(e.to_string()))?;
        codec
            .decode(&bytes)
            .map_err(|e| ReadPlanError::Corrupt(e.to_string()))
    };
    let desc = decode(&written.plan)?;
    let from_storage = written
        .from_storage
        .as_deref()
        .map(decode)
        .transpose()?
        .map(|d| d.plan);
    Ok(ItemDataflow {
        plan: desc.plan,
        export: desc.export,
        from_storage,
        notices: written.notices.clone(),
    })
}

/// The written plan of `id` if it is usable, else the plan made from its
/// SQL now, with a notice saying why (also added to the plan's notices, so
/// writing it back records that it was planned again).
pub fn read_or_plan(
    state: &SessionState,
    catalog: &CatalogState,
    id: GlobalId,
) -> Result<(ItemDataflow, Option<String>)> {
    match read(state, catalog, id) {
        Ok(d) => Ok((d, None)),
        Err(why) => {
            let notice = format!("planned {} again from its SQL: {why}", catalog.describe(id));
            let mut dataflow = plan_item(state, catalog, id)?;
            dataflow.notices.push(notice.clone());
            Ok((dataflow, Some(notice)))
        }
    }
}

/// The format of `id`'s written plan, if it has one.
pub fn format_of(catalog: &CatalogState, id: GlobalId) -> Option<String> {
    match &catalog.item(id)?.details {
        ItemDetails::MaterializedView { plan, .. } | ItemDetails::Index { plan, .. } => {
            plan.as_ref().map(|p| p.format.clone())
        }
        _ => None,
    }
}

/// `details` with `written` recorded in it.
pub fn with_plan(details: &ItemDetails, written: WrittenPlan) -> ItemDetails {
    match details.clone() {
        ItemDetails::MaterializedView { as_of, .. } => ItemDetails::MaterializedView {
            plan: Some(Box::new(written)),
            as_of,
        },
        ItemDetails::Index { on, keys, .. } => ItemDetails::Index {
            on,
            keys,
            plan: Some(Box::new(written)),
        },
        other => other,
    }
}

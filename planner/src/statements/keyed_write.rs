//! Keyed writes: an `UPDATE` or `DELETE` whose `WHERE` fixes every column
//! of its table's primary key reads the one row that key names, not the
//! whole table.
//!
//! The statement is planned as any write is (its source query typed and
//! coerced as the general path runs it); then the source's analyzed plan
//! is matched as a peek's is ([`super::peek`]): a chain of projections and
//! filters over one scan of the written table, with equality conjuncts
//! (`k = 7`, `k = $1`, `a = 1 AND b = $2`) on every primary-key column.
//! The sequencer looks the key up in the table's rows by key and applies
//! the chain (the whole `WHERE`, then the new values) to what it finds, so
//! the key only narrows the rows, never decides them: results and errors
//! are the general path's. A NULL key, or a constant that is not exactly a
//! value of its key column's type, leaves the key unbound and the general
//! path runs.

use std::sync::Arc;

use datafusion::common::ParamValues;
use datafusion::common::Result as DfResult;
use datafusion::execution::SessionState;
use freshet_catalog::{Item, ItemDetails};

use super::peek::{
    ChainOverScan, KeyBinding, chain_over_bound_scan, key_values, parameters_typed, projected,
    scan_equalities, simplify_steps, steps_decided_by_key, steps_of,
};
use crate::error::Result;
use crate::plan::{KeyConstants, KeyedWrite, PeekFinish, QueryPlan, WritePlan};
use crate::query::index_scan::carries_types;
use crate::query::provider::BoundTable;
use crate::statements::context::StatementContext;

/// The keyed access of a write to `table` whose rows come from `source`
/// (an `UPDATE`'s or `DELETE`'s), if `source` filters the table by its
/// whole primary key and does nothing a row-at-a-time evaluation cannot.
pub fn plan(cx: &StatementContext, table: &Item, source: &QueryPlan) -> Result<Option<KeyedWrite>> {
    let ItemDetails::Table { keys, .. } = &table.details else {
        return Ok(None);
    };
    let Some(desc) = &table.desc else {
        return Ok(None);
    };
    if keys.primary_key.is_empty() {
        return Ok(None);
    }
    if !parameters_typed(&source.logical)? {
        return Ok(None);
    }
    let params = source.logical.get_parameter_fields()?;
    let Some(ChainOverScan {
        chain,
        scan,
        provider,
    }) = chain_over_bound_scan(&source.logical)?
    else {
        return Ok(None);
    };
    let any: &dyn std::any::Any = provider.as_ref();
    if any
        .downcast_ref::<BoundTable>()
        .and_then(BoundTable::collection)
        != Some(table.id)
    {
        return Ok(None);
    }
    let source_schema = provider.schema();
    if !carries_types(desc, &source_schema) {
        return Ok(None);
    }
    let scan_schema = projected(&source_schema, scan.projection.as_ref())?;
    let Some(steps) = steps_of(&chain)? else {
        return Ok(None);
    };
    let steps = simplify_steps(cx.state, steps, !params.is_empty())?;
    let (equalities, _) = scan_equalities(&steps, scan, &source_schema);
    // Each key column's name, with the constant it equals and its type.
    let named_key: Option<Vec<_>> = keys
        .primary_key
        .iter()
        .map(|&i| {
            let column = desc.columns.get(i)?;
            let (_, constant) = equalities.iter().find(|(c, _)| *c == column.name)?;
            Some((
                column.name.clone(),
                (constant.clone(), column.ty.arrow_type()),
            ))
        })
        .collect();
    let Some(named_key) = named_key else {
        return Ok(None);
    };
    let (key_names, key): (Vec<String>, KeyConstants) = named_key.into_iter().unzip();
    // The rows are found by their primary key's encoding, as an index's
    // lookup finds them: the equalities it decides need not be checked.
    let keyed = steps_decided_by_key(&steps, scan, &source_schema, &key_names, &key);
    let mut finish = PeekFinish::new(
        source,
        scan.projection.clone(),
        scan_schema,
        steps,
        Some(key),
        Vec::new(),
    );
    if finish.reads_binding() {
        return Ok(None);
    }
    let bound = if params.is_empty() {
        finish
            .key
            .as_ref()
            .and_then(|k| key_values(cx.state, k, None))
    } else {
        None
    };
    finish.keyed = keyed;
    // A key known now: the lookup decides its equalities.
    if bound.is_some() {
        finish.take_keyed_steps();
    }
    Ok(Some(KeyedWrite {
        key: bound,
        key_columns: keys.primary_key.clone(),
        finish,
    }))
}

impl WritePlan {
    /// Whether a prepared statement can keep this plan from Prepare and
    /// bind it at each Execute ([`WritePlan::bind_keyed`]): a keyed write
    /// with `$n` parameters and no `RETURNING`.
    pub fn reusable(&self) -> bool {
        self.returning.is_none() && self.keyed.as_ref().is_some_and(KeyedWrite::reusable)
    }

    /// This keyed write for one execution, `params` in place of its `$n`;
    /// `None` when the bound key is not one a lookup can serve (plan the
    /// statement again with its values). The source query keeps its `$n`:
    /// a write with a bound key never runs it.
    pub fn bind_keyed(
        &self,
        state: &SessionState,
        params: Option<&ParamValues>,
    ) -> Result<Option<WritePlan>> {
        let Some(keyed) = &self.keyed else {
            return Ok(None);
        };
        let keyed = keyed.bind(state, params)?;
        if keyed.key.is_none() {
            return Ok(None);
        }
        Ok(Some(WritePlan {
            table: self.table,
            table_desc: self.table_desc.clone(),
            kind: self.kind,
            source: Arc::clone(&self.source),
            read_then_write: self.read_then_write,
            returning: None,
            keyed: Some(keyed),
        }))
    }
}

impl KeyedWrite {
    /// Whether a prepared statement can keep this access from Prepare and
    /// bind it at each Execute: its `$n` are still open (so `now()` is
    /// fixed per execution, when the steps are simplified).
    pub fn reusable(&self) -> bool {
        self.finish
            .query
            .logical
            .get_parameter_fields()
            .is_ok_and(|p| !p.is_empty())
    }

    /// This access for one execution: `params` in place of its `$n`, and
    /// the key computed from them.
    pub fn bind(&self, state: &SessionState, params: Option<&ParamValues>) -> DfResult<KeyedWrite> {
        let KeyBinding { finish, key, .. } = self.finish.bind(state, params)?;
        Ok(KeyedWrite {
            key,
            key_columns: self.key_columns.clone(),
            finish,
        })
    }

    /// `EXPLAIN`'s line: the key looked up.
    pub fn explain(&self, table: &str, key_names: &[String]) -> String {
        let values = match &self.key {
            Some(values) => values.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
            None => self
                .finish
                .key
                .iter()
                .flatten()
                .map(|(e, _)| e.to_string())
                .collect(),
        };
        format!(
            "Read {table} by primary key ({}) = ({})",
            key_names.join(", "),
            values.join(", ")
        )
    }
}

//! `ALTER TABLE ... ADD PRIMARY KEY / UNIQUE` on a table that may hold
//! rows: the rows are checked against the new key with the table's writes
//! held back, and the key commits before they may go on.

use freshet_catalog::{ItemDetails, Op};
use freshet_planner::statements::alter_table::AddKeyPlan;

use super::ddl::{Prepared, catalog_changed};
use super::write::table_key_specs;
use super::{Coordinator, ExecuteResponse};
use crate::error::{AdapterError, Result};
use crate::session::{Session, TxnStatus};

impl Coordinator {
    /// Add a key to a table. Outside transaction blocks only: the check
    /// reads the table as committed, which a block's own writes are not.
    pub(super) async fn add_key(
        &self,
        session: &Session,
        tag: String,
        plan: AddKeyPlan,
    ) -> Result<ExecuteResponse> {
        if session.status == TxnStatus::InBlock {
            return Err(AdapterError::InTransactionBlock(
                "ALTER TABLE ... ADD PRIMARY KEY / UNIQUE".into(),
            ));
        }
        let AddKeyPlan {
            table,
            before,
            after,
            slot,
        } = plan;
        let catalog = self.catalog.lock().await;
        let state = catalog.state();
        let Some(item) = state.item(table) else {
            return Err(catalog_changed());
        };
        let ItemDetails::Table {
            defaults,
            keys,
            serials,
        } = &item.details
        else {
            return Err(catalog_changed());
        };
        if **keys != before {
            return Err(catalog_changed());
        }
        let spec = table_key_specs(item, &after)
            .into_iter()
            .find(|s| s.slot == slot)
            .ok_or_else(|| AdapterError::Internal(format!("no key {slot} for {table}")))?;
        let details = ItemDetails::Table {
            defaults: defaults.clone(),
            keys: Box::new(after),
            serials: serials.clone(),
        };
        // Every commit that read the table's keys before this change has
        // ended once the gate is ours; the rows are then all visible.
        let _gate = self.keys.exclude_writes(table).await;
        // The check scans the table: off the async workers.
        let keys = std::sync::Arc::clone(&self.keys);
        let storage = std::sync::Arc::clone(&self.storage);
        tokio::task::spawn_blocking(move || keys.install(&storage, &spec))
            .await
            .map_err(|e| AdapterError::Internal(format!("key check task failed: {e}")))??;
        let ops = vec![Op::UpdateDetails { id: table, details }];
        match self.transact_locked(catalog, ops, Vec::new(), Prepared::new()) {
            Ok(_) => Ok(ExecuteResponse::Command(tag)),
            Err(e) => {
                self.keys.forget_key(table, slot);
                Err(e)
            }
        }
    }
}

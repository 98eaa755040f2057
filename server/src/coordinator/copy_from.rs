//! `COPY ... FROM STDIN`: parse the data, fill defaults, and commit (or
//! add to the transaction's writes).

use arrow::array::RecordBatch;
use freshet_planner::CopyFromPlan;
use freshet_repr::RelationDesc;
use freshet_repr::sqlstate;

use super::Coordinator;
use super::write::table_writes;
use crate::error::{AdapterError, Result};
use crate::session::{PendingCopy, Session, TxnStatus};
use crate::values::check_rows;

impl Coordinator {
    /// Finish a `COPY ... FROM STDIN` with the data received.
    pub async fn copy_in(&self, session: &mut Session, copy: PendingCopy) -> Result<usize> {
        let result = self.copy_in_inner(session, copy).await;
        if result.is_err() && session.status == TxnStatus::InBlock {
            session.status = TxnStatus::Failed;
        }
        result
    }

    pub(super) async fn copy_in_inner(
        &self,
        session: &mut Session,
        copy: PendingCopy,
    ) -> Result<usize> {
        let PendingCopy {
            plan,
            data,
            too_large,
        } = copy;
        if let Some(limit) = too_large {
            return Err(AdapterError::data(
                sqlstate::OUT_OF_MEMORY,
                format!(
                    "COPY data exceeds the memory limit of {} (--query-memory-limit)",
                    crate::query_exec::human_bytes(limit)
                ),
            ));
        }
        let CopyFromPlan {
            table,
            table_desc,
            columns,
            defaults,
            options,
        } = plan;
        let rows = crate::copy::parse(&data, &options, columns.len())?;
        let default_row = self
            .run_at(session, &defaults, self.storage.read_ts())
            .await?;
        let default_row = match default_row.into_iter().find(|b| b.num_rows() > 0) {
            Some(b) => check_rows_unchecked(&table_desc, b)?,
            None => RecordBatch::new_empty(crate::values::unchecked_schema(&table_desc)),
        };
        // Sequence-numbered columns the data leaves out take a value per
        // row (the defaults row holds one).
        let numbered: Vec<(usize, u32)> = match self.catalog_for(session).item(table) {
            Some(item) => match &item.details {
                freshet_catalog::ItemDetails::Table { serials, .. } => serials
                    .iter()
                    .filter(|s| !columns.contains(&s.column))
                    .map(|s| {
                        (
                            s.column,
                            freshet_planner::builtins::serial_sequence_oid(item.oid, s.column),
                        )
                    })
                    .collect(),
                _ => Vec::new(),
            },
            None => Vec::new(),
        };
        let mut writes = Vec::new();
        let mut count = 0;
        const CHUNK: usize = 64 * 1024;
        for start in (0..rows.len()).step_by(CHUNK) {
            let range = start..(start + CHUNK).min(rows.len());
            let mut batch =
                crate::copy::rows_to_batch(&rows, range, &table_desc, &columns, &default_row)?;
            for &(column, oid) in &numbered {
                batch = self.number_column(batch, column, oid)?;
            }
            let batch = check_rows(&self.table_name(table), &table_desc, batch)?;
            count += batch.num_rows();
            writes.extend(table_writes(table, &[batch], 1)?);
        }
        drop(rows);
        drop(data);
        if session.status == TxnStatus::InBlock {
            session.txn.writes.extend(writes);
        } else if !writes.is_empty() {
            self.commit_writes(writes, (), Vec::new()).await?;
        }
        Ok(count)
    }
}

impl Coordinator {
    /// `batch` with column `column` replaced by fresh values of sequence
    /// `oid`, one per row.
    fn number_column(&self, batch: RecordBatch, column: usize, oid: u32) -> Result<RecordBatch> {
        use freshet_planner::query::sequences::SequenceSource;
        let values = self
            .sequences
            .next_values(oid, batch.num_rows())
            .map_err(AdapterError::DataFusion)?;
        let array: arrow::array::ArrayRef =
            std::sync::Arc::new(arrow::array::Int64Array::from(values));
        let mut columns = batch.columns().to_vec();
        let Some(slot) = columns.get_mut(column) else {
            return Ok(batch);
        };
        *slot = arrow::compute::cast(&array, slot.data_type())?;
        Ok(RecordBatch::try_new(batch.schema(), columns)?)
    }
}

/// The defaults row already has the table's types; give it the table's
/// schema, every column nullable: a column without a default is NULL there
/// even when it is NOT NULL (the rows built from it are checked after).
fn check_rows_unchecked(desc: &RelationDesc, batch: RecordBatch) -> Result<RecordBatch> {
    RecordBatch::try_new(
        crate::values::unchecked_schema(desc),
        batch.columns().to_vec(),
    )
    .map_err(|e| AdapterError::Internal(e.to_string()))
}

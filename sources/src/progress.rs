//! A source's progress relation: one row saying how far ingestion came,
//! replaced in every append that brings new data.

use arrow::array::RecordBatch;
use freshet_storage::Storage;

use crate::OutputTarget;
use crate::datum::{Datum, Update};
use crate::error::{Result, SourceError};

/// The progress row as durably recorded now (`None` before the first
/// append), read under a hold at the latest readable time.
pub(crate) async fn read(
    storage: &Storage,
    progress: &OutputTarget,
) -> Result<Option<RecordBatch>> {
    let at = storage.read_ts();
    let _hold = storage.acquire_read_hold(progress.id, at)?;
    storage.wait_for_upper(progress.id, at).await?;
    let rows: Vec<RecordBatch> = storage
        .snapshot(progress.id, at)?
        .into_iter()
        .filter(|b| b.num_rows() > 0)
        .collect();
    match rows.as_slice() {
        [] => Ok(None),
        [row] if row.num_rows() == 1 => Ok(Some(row.clone())),
        _ => Err(SourceError::Internal(format!(
            "progress relation {} holds more than one row",
            progress.id
        ))),
    }
}

/// The updates that replace progress row `old` (if any) by `new`.
pub(crate) fn replace(old: Option<&[Datum]>, new: Vec<Datum>) -> Vec<Update> {
    let mut out = Vec::with_capacity(2);
    if let Some(old) = old {
        out.push((old.to_vec(), -1));
    }
    out.push((new, 1));
    out
}

//! A source's progress relation: one row saying how far ingestion came,
//! replaced in every append that brings new data.

use arrow::array::{Array, Int64Array, RecordBatch};
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

/// The `offset` (a `bigint` first column) of the progress row as durably
/// recorded now; `None` before the first append.
pub(crate) async fn read_offset(storage: &Storage, progress: &OutputTarget) -> Result<Option<u64>> {
    let Some(row) = read(storage, progress).await? else {
        return Ok(None);
    };
    let offsets = row
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .filter(|a| !a.is_null(0))
        .ok_or_else(|| SourceError::Internal("progress offset is not a bigint".into()))?;
    Ok(Some(u64::try_from(offsets.value(0)).unwrap_or(0)))
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

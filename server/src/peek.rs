//! Turning an index's answer to a peek into rows of a result.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use freshet_compute::{Row, RowCodec};
use freshet_repr::GlobalId;

/// How long a peek waits for workers before failing (statement_timeout
/// usually ends it sooner).
pub const PEEK_TIMEOUT_SECS: u64 = 300;

/// The rows `index` answered, each repeated by its multiplicity, as one
/// batch of `schema` (the index's row columns, all nullable).
pub fn rows_to_batch(
    index: GlobalId,
    rows: &[(Row, i64)],
    schema: SchemaRef,
) -> Result<RecordBatch, String> {
    let codec = RowCodec::new(Arc::clone(&schema)).map_err(|e| e.to_string())?;
    let mut expanded = Vec::with_capacity(rows.len());
    for (row, n) in rows {
        let n = usize::try_from(*n)
            .map_err(|_| format!("index {index} holds a row with multiplicity {n}"))?;
        expanded.extend(std::iter::repeat_n(row, n));
    }
    codec.decode(expanded).map_err(|e| e.to_string())
}

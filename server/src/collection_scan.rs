//! A query's part-by-part read of a stored collection: storage's
//! [`SnapshotScan`] as the planner's [`CollectionScan`].
//!
//! A view's shard has an error column (see
//! [`freshet_compute::output`]): a read of a time at which the view's
//! query fails must fail, whatever the query's filters and `LIMIT`. A
//! view is streamed only when every part is known (from its column
//! bounds) to hold no error; otherwise the whole snapshot is read and
//! checked, which also notes the bounds of every part for the next read.

use arrow::array::{ArrayRef, RecordBatch};
use datafusion::common::{DataFusionError, Result as DfResult};
use freshet_planner::query::part_scan::CollectionScan;
use freshet_storage::SnapshotScan;

/// Storage's scan, less a view's (error-free) error column.
#[derive(Debug)]
pub struct StorageScan {
    scan: SnapshotScan,
    /// A view's error column, dropped from every batch read.
    error_column: Option<usize>,
}

impl StorageScan {
    /// `scan` of a collection whose shard has `error_column` (a view), or
    /// `None` if a view's part may hold an error the scan would need to
    /// find (the caller then reads and checks the whole snapshot).
    pub fn new(scan: SnapshotScan, error_column: Option<usize>) -> Option<Self> {
        if let Some(index) = error_column {
            let error_free = (0..scan.len()).all(|part| {
                scan.part_stats(part)
                    .and_then(|s| s.columns.get(index).map(|(_, nulls)| *nulls == s.rows))
                    .unwrap_or(false)
            });
            if !error_free {
                return None;
            }
        }
        Some(StorageScan { scan, error_column })
    }
}

fn external(e: freshet_storage::StorageError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

impl CollectionScan for StorageScan {
    fn parts(&self) -> usize {
        self.scan.len()
    }

    fn part_rows(&self, part: usize) -> usize {
        self.scan.part_rows(part)
    }

    fn column_bounds(&self, part: usize, column: usize) -> Option<(ArrayRef, ArrayRef, usize)> {
        let (bounds, nulls) = self.scan.part_stats(part)?.columns.get(column)?.clone();
        let bounds = bounds?;
        Some((bounds.min, bounds.max, nulls))
    }

    fn exact_rows(&self) -> Option<usize> {
        self.scan.exact_rows()
    }

    fn retain(&mut self, keep: &dyn Fn(usize) -> bool) {
        self.scan.retain(keep);
    }

    fn is_kept(&self, part: usize) -> bool {
        self.scan.is_kept(part)
    }

    fn read(&self, part: usize, projection: Option<&[usize]>) -> DfResult<Vec<RecordBatch>> {
        // The plan's columns are the shard's less a view's error column.
        let error = self.error_column.unwrap_or(usize::MAX);
        let visible = self.scan.schema().fields().len() - usize::from(self.error_column.is_some());
        let all: Vec<usize> = (0..visible).collect();
        let columns: Vec<usize> = projection
            .unwrap_or(&all)
            .iter()
            .map(|c| if *c >= error { c + 1 } else { *c })
            .collect();
        self.scan.read(part, Some(&columns)).map_err(external)
    }
}

//! Scanning a stored collection part by part.
//!
//! [`PartScanExec`] is the physical plan of a scan of a table, materialized
//! view or source: it asks the reader for a [`CollectionScan`] at the
//! query's time, drops the parts whose column bounds rule out the scan's
//! filters (DataFusion's [`PruningPredicate`], the pruning Parquet scans
//! use), and streams the rest one part at a time on blocking threads, each
//! output partition reading every n-th part. Memory holds the parts being
//! read (and what the part cache keeps), not the collection; `LIMIT`
//! stops the reads; a row count known without reading (no retractions)
//! is reported as exact, so `count(*)` is answered from it.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, UInt64Array};
use arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{
    Column, ColumnStatistics, DFSchema, Result as DfResult, ScalarValue, Statistics,
};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::utils::conjunction;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchReceiverStreamBuilder;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use freshet_repr::GlobalId;

/// A collection read at one time, part by part (implemented by the server
/// over storage's scan, and by [`WholeScan`] for rows already in memory).
pub trait CollectionScan: Send + Sync + fmt::Debug {
    /// How many parts there are.
    fn parts(&self) -> usize;
    /// Updates in part `part`: an upper bound on the rows it yields.
    fn part_rows(&self, part: usize) -> usize;
    /// The least and greatest value of column `column` in `part` (arrays
    /// of one element) and its count of nulls, if known.
    fn column_bounds(&self, part: usize, column: usize) -> Option<(ArrayRef, ArrayRef, usize)>;
    /// The rows the kept parts yield, if known without reading them.
    fn exact_rows(&self) -> Option<usize>;
    /// Drop the parts for which `keep` is false (before any read).
    fn retain(&mut self, keep: &dyn Fn(usize) -> bool);
    /// Whether `part` is still to be read.
    fn is_kept(&self, part: usize) -> bool;
    /// The rows of `part` at the scan's time (see the storage scan), as
    /// batches of the columns `projection` (all if `None`): a reader
    /// decodes only those where it can.
    fn read(&self, part: usize, projection: Option<&[usize]>) -> DfResult<Vec<RecordBatch>>;
}

/// Rows already in memory as a scan of one part without bounds.
#[derive(Debug)]
pub struct WholeScan {
    batches: Vec<RecordBatch>,
    kept: bool,
}

impl WholeScan {
    /// A scan yielding `batches`.
    pub fn new(batches: Vec<RecordBatch>) -> Self {
        WholeScan {
            batches,
            kept: true,
        }
    }
}

impl CollectionScan for WholeScan {
    fn parts(&self) -> usize {
        1
    }

    fn part_rows(&self, _part: usize) -> usize {
        self.batches.iter().map(|b| b.num_rows()).sum()
    }

    fn column_bounds(&self, _: usize, _: usize) -> Option<(ArrayRef, ArrayRef, usize)> {
        None
    }

    fn exact_rows(&self) -> Option<usize> {
        Some(if self.kept { self.part_rows(0) } else { 0 })
    }

    fn retain(&mut self, keep: &dyn Fn(usize) -> bool) {
        self.kept &= keep(0);
    }

    fn is_kept(&self, part: usize) -> bool {
        part == 0 && self.kept
    }

    fn read(&self, part: usize, projection: Option<&[usize]>) -> DfResult<Vec<RecordBatch>> {
        if !self.is_kept(part) {
            return Ok(vec![]);
        }
        match projection {
            Some(p) => Ok(self
                .batches
                .iter()
                .map(|b| b.project(p))
                .collect::<Result<_, _>>()?),
            None => Ok(self.batches.clone()),
        }
    }
}

/// Column bounds of a scan's parts, as DataFusion's pruning asks for them.
struct PartBounds<'a> {
    scan: &'a dyn CollectionScan,
    schema: &'a SchemaRef,
}

impl PartBounds<'_> {
    fn bound(
        &self,
        column: &Column,
        pick: impl Fn(ArrayRef, ArrayRef) -> ArrayRef,
    ) -> Option<ArrayRef> {
        let index = self.schema.index_of(column.name()).ok()?;
        let dt = self.schema.field(index).data_type();
        let values = (0..self.scan.parts())
            .map(|part| match self.scan.column_bounds(part, index) {
                Some((min, max, _)) => ScalarValue::try_from_array(&pick(min, max), 0),
                None => ScalarValue::try_from(dt),
            })
            .collect::<DfResult<Vec<_>>>()
            .ok()?;
        ScalarValue::iter_to_array(values).ok()
    }
}

impl PruningStatistics for PartBounds<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bound(column, |min, _| min)
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.bound(column, |_, max| max)
    }

    fn num_containers(&self) -> usize {
        self.scan.parts()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let index = self.schema.index_of(column.name()).ok()?;
        let counts: UInt64Array = (0..self.scan.parts())
            .map(|part| {
                self.scan
                    .column_bounds(part, index)
                    .map(|(_, _, nulls)| nulls as u64)
            })
            .collect();
        Some(Arc::new(counts))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        let counts: UInt64Array = (0..self.scan.parts())
            .map(|part| Some(self.scan.part_rows(part) as u64))
            .collect();
        Some(Arc::new(counts))
    }

    #[allow(clippy::mutable_key_type)]
    fn contained(&self, _: &Column, _: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

/// Drop the parts of `scan` that no row passing `filters` can be in. A
/// filter that cannot be turned into a pruning predicate (a parameter, a
/// subquery) prunes nothing; the plan still applies every filter.
pub(crate) fn prune(
    scan: &mut dyn CollectionScan,
    state: &dyn Session,
    schema: &SchemaRef,
    filters: &[Expr],
) {
    let Some(predicate) = conjunction(filters.iter().cloned()) else {
        return;
    };
    let Ok(df_schema) = DFSchema::try_from(Arc::clone(schema)) else {
        return;
    };
    let Ok(physical) = state.create_physical_expr(predicate, &df_schema) else {
        return;
    };
    let Some(pruning) = PruningPredicateBuilder::new()
        .with_file_schema(Arc::clone(schema))
        .build(physical)
    else {
        return;
    };
    let keep = match pruning.prune(&PartBounds {
        scan: &*scan,
        schema,
    }) {
        Ok(keep) => keep,
        Err(e) => {
            tracing::debug!(error = %e, "part pruning failed; reading every part");
            return;
        }
    };
    scan.retain(&|part| keep.get(part).copied().unwrap_or(true));
}

impl PartScanExec {
    /// Column `index`'s bounds and nulls over the kept parts, when every
    /// kept part knows them: what DataFusion estimates a filter's
    /// selectivity from, and so which side of a join to build. Inexact:
    /// bounds cover rows a later retraction removed.
    fn column_statistics(&self, index: usize, column: &mut ColumnStatistics) {
        let mut min: Option<ScalarValue> = None;
        let mut max: Option<ScalarValue> = None;
        let mut nulls = 0;
        for part in self.kept_parts() {
            let Some((lo, hi, n)) = self.scan.column_bounds(part, index) else {
                return;
            };
            let (Ok(lo), Ok(hi)) = (
                ScalarValue::try_from_array(&lo, 0),
                ScalarValue::try_from_array(&hi, 0),
            ) else {
                return;
            };
            nulls += n;
            if min
                .as_ref()
                .is_none_or(|m| lo.partial_cmp(m) == Some(Ordering::Less))
            {
                min = Some(lo);
            }
            if max
                .as_ref()
                .is_none_or(|m| hi.partial_cmp(m) == Some(Ordering::Greater))
            {
                max = Some(hi);
            }
        }
        column.null_count = Precision::Inexact(nulls);
        if let (Some(min), Some(max)) = (min, max) {
            column.min_value = Precision::Inexact(min);
            column.max_value = Precision::Inexact(max);
        }
    }
}

/// Reads a collection's parts, `partitions` ways (see the module
/// documentation).
pub struct PartScanExec {
    collection: GlobalId,
    scan: Arc<dyn CollectionScan>,
    projection: Option<Vec<usize>>,
    /// Stop after this many rows (per output partition).
    limit: Option<usize>,
    properties: Arc<PlanProperties>,
}

impl fmt::Debug for PartScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PartScanExec")
            .field("collection", &self.collection)
            .field("scan", &self.scan)
            .field("projection", &self.projection)
            .field("limit", &self.limit)
            .finish()
    }
}

impl PartScanExec {
    /// A scan of `scan` (already pruned), yielding `projection` of
    /// `schema`.
    pub fn new(
        collection: GlobalId,
        scan: Arc<dyn CollectionScan>,
        schema: SchemaRef,
        projection: Option<Vec<usize>>,
        limit: Option<usize>,
        partitions: usize,
    ) -> DfResult<Self> {
        let projected = match &projection {
            Some(p) => Arc::new(schema.project(p)?),
            None => Arc::clone(&schema),
        };
        let kept = (0..scan.parts()).filter(|p| scan.is_kept(*p)).count();
        let partitions = partitions.clamp(1, kept.max(1));
        let properties = PlanProperties::new(
            EquivalenceProperties::new(projected),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(PartScanExec {
            collection,
            scan,
            projection,
            limit,
            properties: Arc::new(properties),
        })
    }

    fn kept_parts(&self) -> Vec<usize> {
        (0..self.scan.parts())
            .filter(|p| self.scan.is_kept(*p))
            .collect()
    }
}

impl DisplayAs for PartScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let kept = self.kept_parts().len();
        // Named as plans name collections, so EXPLAIN shows its name.
        write!(
            f,
            "PartScanExec: collection={}.{}, parts={kept}/{}",
            crate::query::resolve::ID_SCHEMA,
            self.collection,
            self.scan.parts()
        )?;
        if let Some(p) = &self.projection {
            write!(f, ", projection={p:?}")?;
        }
        if let Some(limit) = self.limit {
            write!(f, ", limit={limit}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for PartScanExec {
    fn name(&self) -> &str {
        "PartScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> DfResult<Arc<Statistics>> {
        let schema = self.schema();
        let mut stats = Statistics::new_unknown(&schema);
        if args.partition().is_none() {
            stats.num_rows = match self.scan.exact_rows() {
                Some(rows) => Precision::Exact(rows),
                None => Precision::Inexact(
                    self.kept_parts()
                        .into_iter()
                        .map(|p| self.scan.part_rows(p))
                        .sum(),
                ),
            };
            if let (Some(limit), Precision::Exact(rows)) = (self.limit, stats.num_rows)
                && self.properties.partitioning.partition_count() == 1
            {
                stats.num_rows = Precision::Exact(rows.min(limit));
            }
            for (i, column) in stats.column_statistics.iter_mut().enumerate() {
                let index = match &self.projection {
                    Some(p) => p.get(i).copied(),
                    None => Some(i),
                };
                if let Some(index) = index {
                    self.column_statistics(index, column);
                }
            }
        }
        Ok(Arc::new(stats))
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let partitions = self.properties.partitioning.partition_count();
        let mine: Vec<usize> = self
            .kept_parts()
            .into_iter()
            .skip(partition)
            .step_by(partitions.max(1))
            .collect();
        let out_schema = self.schema();
        let mut builder = RecordBatchReceiverStreamBuilder::new(Arc::clone(&out_schema), 2);
        let tx = builder.tx();
        let scan = Arc::clone(&self.scan);
        let projection = self.projection.clone();
        let mut remaining = self.limit.unwrap_or(usize::MAX);
        builder.spawn_blocking(move || {
            for part in mine {
                if remaining == 0 {
                    break;
                }
                for batch in scan.read(part, projection.as_deref())? {
                    // Storage keeps NOT NULL and a view's own names; the
                    // plan types every column nullable.
                    let batch = RecordBatch::try_new_with_options(
                        Arc::clone(&out_schema),
                        batch.columns().to_vec(),
                        &arrow::array::RecordBatchOptions::new()
                            .with_row_count(Some(batch.num_rows())),
                    )?;
                    let batch = if batch.num_rows() > remaining {
                        batch.slice(0, remaining)
                    } else {
                        batch
                    };
                    remaining -= batch.num_rows();
                    if batch.num_rows() > 0 && tx.blocking_send(Ok(batch)).is_err() {
                        // The query stopped reading.
                        return Ok(());
                    }
                    if remaining == 0 {
                        break;
                    }
                }
            }
            Ok(())
        });
        Ok(builder.build())
    }
}

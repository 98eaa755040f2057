//! `COPY ... FROM STDIN`: rows are made from the data as it arrives, a
//! few megabytes at a time on blocking threads (two chunks at once, so a
//! load parses on both cores while the connection keeps receiving), and
//! staged in part files once they add up to a part (written on a blocking
//! thread while the next part is made), so a load of any size holds
//! about two parts in memory; the end of the data commits them (or adds
//! them to the transaction's writes).

use std::sync::Arc;

use arrow::array::RecordBatch;
use freshet_planner::CopyOptions;
use freshet_repr::RelationDesc;
use freshet_repr::sqlstate;

use super::Coordinator;
use super::write::table_writes;
use crate::error::{AdapterError, Result};
use crate::session::{PendingCopy, Session, TxnStatus};
use crate::values::check_rows;

/// Received rows are made into columns once this much whole-row data has
/// arrived.
const CHUNK_BYTES: usize = 4 << 20;

/// Rows of at most this many are made at a time.
const BATCH_ROWS: usize = 64 * 1024;

/// Chunks whose rows are being made at once.
const CHUNKS_IN_FLIGHT: usize = 2;

/// What fills the columns a COPY's data leaves out: the defaults row
/// (evaluated once, at the first rows) and the sequence-numbered columns,
/// which take a value per row.
#[derive(Debug)]
pub struct CopyFill {
    maker: Arc<RowMaker>,
    numbered: Vec<(usize, u32)>,
}

/// Makes one chunk of COPY data into checked rows of the table, on any
/// thread: everything it needs is fixed when the first data arrives.
#[derive(Debug)]
struct RowMaker {
    options: CopyOptions,
    /// For each field of the data, the table column it fills.
    columns: Vec<usize>,
    desc: RelationDesc,
    /// The table's name, for messages.
    table: String,
    default_row: RecordBatch,
    /// Whether the rows are checked as made; `false` when sequences
    /// number a column (in order, as the chunks are taken), so they are
    /// checked after.
    check: bool,
}

/// One chunk's rows, made.
#[derive(Debug)]
pub struct MadeChunk {
    batches: Vec<RecordBatch>,
    /// Lines of data it held (its header included).
    lines: usize,
    /// An end marker ended the data in it.
    ended: bool,
}

/// A chunk's rows being made on a blocking thread: the rows, or the
/// error with the chunk (made again in order for the error its line
/// numbers give: the lines before it were not known when it started).
pub type MakingChunk =
    tokio::task::JoinHandle<std::result::Result<MadeChunk, (AdapterError, Vec<u8>)>>;

impl RowMaker {
    /// The rows of `data` (whole rows), its first line being line
    /// `first_line` of the whole data; `header`: that line is the header.
    fn make(&self, data: &[u8], first_line: usize, header: bool) -> Result<MadeChunk> {
        let (rows, ended) =
            crate::copy::parse_chunk(data, &self.options, self.columns.len(), first_line, header)?;
        let mut batches = Vec::with_capacity(rows.len().div_ceil(BATCH_ROWS));
        for start in (0..rows.len()).step_by(BATCH_ROWS) {
            let range = start..(start + BATCH_ROWS).min(rows.len());
            let batch = crate::copy::rows_to_batch(
                &rows,
                range,
                &self.desc,
                &self.columns,
                &self.default_row,
            )?;
            batches.push(match self.check {
                true => check_rows(&self.table, &self.desc, batch)?,
                false => batch,
            });
        }
        Ok(MadeChunk {
            lines: rows.len() + usize::from(header),
            batches,
            ended,
        })
    }
}

impl Coordinator {
    /// Take CopyData: make the whole rows received into checked rows,
    /// staging them once they add up to a part. An error is kept and
    /// reported when the data ends (the rest is discarded meanwhile), as
    /// PostgreSQL does.
    pub async fn copy_data(&self, session: &mut Session, bytes: &[u8]) {
        let Some(mut copy) = session.copy_in.take() else {
            return;
        };
        if copy.failed.is_none()
            && !copy.ended
            && let Err(e) = self.copy_take(session, &mut copy, bytes).await
        {
            self.copy_fail(&mut copy, e);
        }
        session.copy_in = Some(copy);
    }

    async fn copy_take(
        &self,
        session: &Session,
        copy: &mut PendingCopy,
        bytes: &[u8],
    ) -> Result<()> {
        copy.stream.push(bytes)?;
        let limit = self.queries.per_query();
        if copy.stream.partial_bytes() > limit {
            return Err(AdapterError::data(
                sqlstate::OUT_OF_MEMORY,
                format!(
                    "a COPY row exceeds the memory limit of {} (--query-memory-limit)",
                    crate::query_exec::human_bytes(limit)
                ),
            ));
        }
        while !copy.ended
            && let Some(rows) = copy.stream.take_rows(CHUNK_BYTES)
        {
            self.copy_rows(session, copy, rows).await?;
        }
        Ok(())
    }

    fn copy_fail(&self, copy: &mut PendingCopy, e: AdapterError) {
        // Chunks still being made finish on their own; their rows are
        // dropped with their handles.
        copy.making.clear();
        copy.abandon_staging();
        self.storage.discard_staged(&copy.staged);
        copy.staged.clear();
        copy.batches.clear();
        copy.batch_bytes = 0;
        copy.failed = Some(e);
    }

    /// Start making one chunk of whole rows into checked rows of the
    /// table, on a blocking thread; once more chunks are in flight than
    /// [`CHUNKS_IN_FLIGHT`], take the oldest one's rows.
    async fn copy_rows(
        &self,
        session: &Session,
        copy: &mut PendingCopy,
        data: Vec<u8>,
    ) -> Result<()> {
        if copy.fill.is_none() {
            copy.fill = Some(self.copy_fill(session, &copy.plan).await?);
        }
        let maker = copy
            .fill
            .as_ref()
            .map(|f| Arc::clone(&f.maker))
            .ok_or_else(|| AdapterError::Internal("COPY defaults missing".into()))?;
        let header = copy.plan.options.header && copy.chunks == 0;
        copy.chunks += 1;
        copy.making.push_back(tokio::task::spawn_blocking(move || {
            // Lines are numbered from this chunk's start; an error is made
            // again with the right numbers when its turn comes.
            maker.make(&data, 1, header).map_err(|e| (e, data))
        }));
        while copy.making.len() > CHUNKS_IN_FLIGHT {
            self.copy_made(session, copy).await?;
        }
        Ok(())
    }

    /// Take the oldest chunk's rows: number what the sequences fill, keep
    /// them, and stage them once they add up to a part.
    async fn copy_made(&self, session: &Session, copy: &mut PendingCopy) -> Result<()> {
        let Some(making) = copy.making.pop_front() else {
            return Ok(());
        };
        let made = making
            .await
            .map_err(|e| AdapterError::Internal(format!("making COPY rows failed: {e}")))?;
        if copy.ended {
            // Data after the end marker is ignored.
            return Ok(());
        }
        let fill = copy
            .fill
            .as_ref()
            .ok_or_else(|| AdapterError::Internal("COPY defaults missing".into()))?;
        let made = match made {
            Ok(made) => made,
            Err((e, data)) => {
                // The same error, its lines counted from the data's start.
                let header = copy.plan.options.header && copy.lines == 0;
                let maker = Arc::clone(&fill.maker);
                let first_line = copy.lines + 1;
                return Err(tokio::task::spawn_blocking(move || {
                    maker.make(&data, first_line, header).err()
                })
                .await
                .ok()
                .flatten()
                .unwrap_or(e));
            }
        };
        copy.lines += made.lines;
        copy.ended = made.ended;
        for mut batch in made.batches {
            if !fill.numbered.is_empty() {
                for &(column, oid) in &fill.numbered {
                    batch = self.number_column(batch, column, oid)?;
                }
                batch = check_rows(&fill.maker.table, &fill.maker.desc, batch)?;
            }
            copy.rows += batch.num_rows();
            copy.batch_bytes += batch.get_array_memory_size();
            copy.batches.push(batch);
        }
        // Inside a transaction block the rows stay in memory: the block's
        // own reads see its writes, and they read them from there.
        if copy.batch_bytes >= self.queries.copy_part() && session.status != TxnStatus::InBlock {
            self.copy_stage(copy).await?;
        }
        Ok(())
    }

    /// Write the rows held to a staged part, on a blocking thread while
    /// the next part's rows are made from the data (the load uses a core
    /// for each); the part before it is waited for first, so at most two
    /// parts' rows are in memory.
    async fn copy_stage(&self, copy: &mut PendingCopy) -> Result<()> {
        Self::copy_staged(copy).await?;
        let writes: Vec<RecordBatch> = table_writes(copy.plan.table, &copy.batches, 1)?
            .into_iter()
            .map(|w| w.updates)
            .collect();
        let storage = std::sync::Arc::clone(&self.storage);
        let table = copy.plan.table;
        copy.storage = Some(std::sync::Arc::clone(&self.storage));
        copy.staging = Some(tokio::task::spawn_blocking(move || {
            storage.stage(table, &writes)
        }));
        // An empty batch stays: the write that names the parts takes its
        // schema from it.
        let empty = copy.batches.last().map(|b| b.slice(0, 0));
        copy.batches.clear();
        copy.batches.extend(empty);
        copy.batch_bytes = 0;
        Ok(())
    }

    /// Wait for the part being staged, if any, and keep it.
    async fn copy_staged(copy: &mut PendingCopy) -> Result<()> {
        if let Some(staging) = copy.staging.take() {
            let part = staging
                .await
                .map_err(|e| AdapterError::Internal(format!("staging COPY rows failed: {e}")))??;
            copy.staged.push(part);
        }
        Ok(())
    }

    async fn copy_fill(
        &self,
        session: &Session,
        plan: &freshet_planner::CopyFromPlan,
    ) -> Result<CopyFill> {
        let default_row = self
            .run_at(session, &plan.defaults, self.storage.read_ts())
            .await?;
        let default_row = match default_row.into_iter().find(|b| b.num_rows() > 0) {
            Some(b) => check_rows_unchecked(&plan.table_desc, b)?,
            None => RecordBatch::new_empty(crate::values::unchecked_schema(&plan.table_desc)),
        };
        // Sequence-numbered columns the data leaves out take a value per
        // row (the defaults row holds one).
        let numbered: Vec<(usize, u32)> = match self.catalog_for(session).item(plan.table) {
            Some(item) => match &item.details {
                freshet_catalog::ItemDetails::Table { serials, .. } => serials
                    .iter()
                    .filter(|s| !plan.columns.contains(&s.column))
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
        Ok(CopyFill {
            maker: Arc::new(RowMaker {
                options: plan.options.clone(),
                columns: plan.columns.clone(),
                desc: plan.table_desc.clone(),
                table: self.table_name(plan.table),
                default_row,
                check: numbered.is_empty(),
            }),
            numbered,
        })
    }

    /// Finish a `COPY ... FROM STDIN` at the end of its data.
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
        mut copy: PendingCopy,
    ) -> Result<usize> {
        if copy.failed.is_none() && !copy.ended {
            let rest = copy.stream.finish();
            let mut made = match rest {
                Ok(rest) if !rest.is_empty() => self.copy_rows(session, &mut copy, rest).await,
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            };
            while made.is_ok() && !copy.making.is_empty() {
                made = self.copy_made(session, &mut copy).await;
            }
            if let Err(e) = made {
                self.copy_fail(&mut copy, e);
            }
        }
        if copy.failed.is_none()
            && let Err(e) = Self::copy_staged(&mut copy).await
        {
            self.copy_fail(&mut copy, e);
        }
        if let Some(e) = copy.failed.take() {
            return Err(e);
        }
        let mut writes = table_writes(copy.plan.table, &copy.batches, 1)?;
        // From here the commit decides what becomes of the parts.
        let staged = std::mem::take(&mut copy.staged);
        if !staged.is_empty() {
            // Staging leaves an empty batch behind, so there is a write.
            let Some(first) = writes.first_mut() else {
                self.storage.discard_staged(&staged);
                return Err(AdapterError::Internal(
                    "staged COPY rows without a write".into(),
                ));
            };
            first.staged = staged.clone();
        }
        if session.status == TxnStatus::InBlock {
            session.txn.writes.extend(writes);
        } else if !writes.is_empty() {
            let result = self.commit_writes(writes, (), Vec::new()).await;
            // Parts of a commit refused before it reached storage (a key
            // violation) belong to nothing; after that, a failed commit's
            // log record may name them, and a restart collects the rest.
            if let Err(e) = &result
                && !matches!(e, AdapterError::Storage(_))
            {
                self.storage.discard_staged(&staged);
            }
            result?;
        }
        Ok(copy.rows)
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

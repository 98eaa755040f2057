//! The durable half of a collection: parts in `Blob`, state in `Consensus`.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, UInt64Array};
use arrow::datatypes::{FieldRef, SchemaRef};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use freshet_repr::Frontier;
use freshet_repr::{GlobalId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::batch::{
    IpcFile, decode_file, diffs, encode_file, footer_span, footer_value, stamp, times, total_bytes,
};
use crate::blob::{Blob, Bytes};
use crate::consensus::{CasResult, SeqNo, VersionedData};
use crate::epoch::{CLAIM_ATTEMPTS, Fence};
use crate::error::{Result, StorageError};
use crate::part_stats::{FOOTER_KEY, PartStats};

/// How many bytes at a part file's end are read first to find its footer
/// (most footers fit; a larger one takes a second read).
const FOOTER_GUESS: usize = 16 << 10;

/// How many state versions accumulate before old ones are truncated.
const TRUNCATE_EVERY: u64 = 32;

/// Largest part kept inline in the shard's state rather than in a file
/// (see [`PartMeta::inline`]).
const INLINE_PART_BYTES: usize = 8 << 10;

/// Most bytes of inline parts one shard's state holds: an append that
/// would pass it writes them, with its own updates, to one part file.
/// Every commit writes the whole state, so this bounds what a commit
/// writes for them, while a view appending a row or two at a time writes
/// a part file only every dozen or so appends.
const INLINE_BUDGET_BYTES: usize = 24 << 10;

/// Most inline parts one shard's state holds (each is a part every read
/// of the shard visits).
const INLINE_MAX_PARTS: usize = 16;

/// Key prefix of inline parts: not a blob key, so nothing looks for a
/// file of that name.
const INLINE_PREFIX: &str = "inline:";

/// Whether `key` names an inline part.
pub(crate) fn is_inline(key: &str) -> bool {
    key.starts_with(INLINE_PREFIX)
}

/// Consensus key of a collection's shard state.
pub(crate) fn shard_key(id: GlobalId) -> String {
    format!("shard/{id}")
}

/// Blob key prefix of a collection's parts.
pub(crate) fn part_prefix(id: GlobalId) -> String {
    format!("parts/{id}/")
}

/// Metadata of one immutable part (a batch file of updates).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct PartMeta {
    pub key: String,
    pub rows: usize,
    pub bytes: usize,
    pub max_time: Timestamp,
    /// Rows distinct, diffs positive, times all ≤ the shard's since.
    pub consolidated: bool,
    pub unit_diffs: bool,
    /// Every diff is positive (no retractions): a scan need not read the
    /// part to learn what it cancels. Parts written before this was
    /// recorded read as `false`.
    #[serde(default)]
    pub positive: bool,
    /// Set for a part written ahead of its commit (a staged part, see
    /// [`StagedPart`]): every update in it is at this time, and the file
    /// holds table writes (data and diff) without a time column, because
    /// the time was not known when it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Timestamp>,
    /// A small part's file bytes, kept in the shard's state itself: no
    /// file is created for it (and none unlinked when it is merged away),
    /// which for a view appending a few rows hundreds of times a second
    /// takes file creations, renames and directory fsyncs — file-system
    /// journal commits that stall every sync in the process — off its
    /// path. See [`INLINE_BUDGET_BYTES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline: Option<InlineBytes>,
}

/// The bytes of an inline part, in its state's JSON as base64.
#[derive(Clone, Debug)]
pub(crate) struct InlineBytes(pub Bytes);

impl Serialize for InlineBytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&BASE64.encode(self.0.as_slice()))
    }
}

impl<'de> Deserialize<'de> for InlineBytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        BASE64
            .decode(text)
            .map(|bytes| InlineBytes(Bytes::from_vec(bytes)))
            .map_err(serde::de::Error::custom)
    }
}

/// Table writes written to a part file before their commit, so a large
/// write (a `COPY`) holds at most one part's worth of rows in memory: the
/// commit records only the part's name, and the part joins the table's
/// shard at the commit's time. Until then the file belongs to nothing and
/// [`Storage::discard_staged`](crate::Storage::discard_staged) (or a
/// restart's orphan collection) removes it.
#[derive(Clone, Debug)]
pub struct StagedPart {
    pub(crate) id: GlobalId,
    pub(crate) meta: PartMeta,
}

impl StagedPart {
    /// The table the part was written for.
    pub fn table(&self) -> GlobalId {
        self.id
    }

    /// How many updates it holds.
    pub fn rows(&self) -> usize {
        self.meta.rows
    }

    /// Its size decoded, in bytes.
    pub fn bytes(&self) -> usize {
        self.meta.bytes
    }
}

/// The durable state of a shard, versioned in consensus.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ShardState {
    /// Epoch of the last process that wrote this state.
    pub epoch: u64,
    pub since: Frontier,
    pub upper: Frontier,
    pub parts: Vec<PartMeta>,
}

/// A shard as seen by the one process allowed to write it.
#[derive(Debug)]
pub(crate) struct DurableShard {
    id: GlobalId,
    key: String,
    blob: Arc<dyn Blob>,
    fence: Fence,
    seqno: SeqNo,
    state: ShardState,
    /// The upper as of the last state written to consensus (`state.upper`
    /// may be ahead of it; see [`LAZY_UPPER`]).
    durable_upper: Frontier,
    /// When `state` was last written to consensus. An append of no
    /// updates only advances the upper in memory unless this is older than
    /// [`LAZY_UPPER`] (see [`DurableShard::compare_and_append`]).
    last_durable: std::time::Instant,
    /// A compaction is merging parts it chose (perhaps inline ones):
    /// appends meanwhile must not write the inline parts out.
    merging: bool,
}

/// How long an upper advanced by empty appends may stay in memory only.
/// Readers in this process see the new upper at once; after a crash the
/// shard reopens at its durable upper and its writer (a self-correcting
/// sink) recomputes from there, so nothing is lost but the work.
const LAZY_UPPER: std::time::Duration = std::time::Duration::from_secs(1);

impl DurableShard {
    /// Open the shard, creating it if new, and claim it for this epoch.
    ///
    /// An older process may still commit to the shard until it sees the
    /// claim (it is busy writing while this one takes over): then the claim
    /// reads the shard again and retries.
    pub fn open(id: GlobalId, blob: Arc<dyn Blob>, fence: Fence) -> Result<Self> {
        let key = shard_key(id);
        let consensus = Arc::clone(fence.consensus());
        for _ in 0..CLAIM_ATTEMPTS {
            let head = consensus.head(&key)?;
            let (seqno, state) = match head {
                Some(v) => (v.seqno, decode_state(&v.data)?),
                None => (
                    0,
                    ShardState {
                        epoch: fence.epoch(),
                        since: Frontier::at(0),
                        upper: Frontier::at(0),
                        parts: vec![],
                    },
                ),
            };
            if state.epoch > fence.epoch() {
                return Err(StorageError::Fenced {
                    mine: fence.epoch(),
                    current: state.epoch,
                });
            }
            let mut shard = DurableShard {
                id,
                key: key.clone(),
                blob: Arc::clone(&blob),
                fence: fence.clone(),
                seqno,
                durable_upper: state.upper.clone(),
                state: state.clone(),
                last_durable: std::time::Instant::now(),
                merging: false,
            };
            // Record our epoch so an older process's next write fails.
            if (seqno == 0 || state.epoch < shard.fence.epoch()) && !shard.try_commit(state)? {
                continue;
            }
            return Ok(shard);
        }
        Err(StorageError::Corruption(format!(
            "shard {id} kept changing while epoch {} claimed it",
            fence.epoch()
        )))
    }

    pub fn upper(&self) -> &Frontier {
        &self.state.upper
    }

    /// The upper a restart would find.
    pub fn durable_upper(&self) -> &Frontier {
        &self.durable_upper
    }

    pub fn since(&self) -> &Frontier {
        &self.state.since
    }

    pub fn parts(&self) -> &[PartMeta] {
        &self.state.parts
    }

    /// Say whether a compaction is merging parts it chose (see
    /// [`PartWriter::write_append`]).
    pub fn set_merging(&mut self, merging: bool) {
        self.merging = merging;
    }

    fn commit(&mut self, next: ShardState) -> Result<()> {
        if self.try_commit(next)? {
            Ok(())
        } else {
            Err(changed_under(self.id, &self.fence))
        }
    }

    /// Commit `next` if the shard is still at this handle's seqno. `false`:
    /// a process of an older epoch (or, wrongly, of ours) changed it first.
    fn try_commit(&mut self, next: ShardState) -> Result<bool> {
        match commit_state(&self.part_writer(), &self.key, self.seqno, next)? {
            Some(committed) => {
                self.install(committed);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Durably append `updates` (times in `[expected, new_upper)`) and advance
    /// the upper to `new_upper`. Returns the new part, if one was written.
    ///
    /// `staged` parts (already written, their `time` set) join the shard in
    /// the same commit.
    pub fn compare_and_append(
        &mut self,
        schema: &SchemaRef,
        updates: &[RecordBatch],
        staged: &[PartMeta],
        expected: &Frontier,
        new_upper: Frontier,
    ) -> Result<Option<WrittenPart>> {
        match self.plan_append(updates, staged, expected, new_upper)? {
            None => Ok(None),
            Some(plan) => {
                let (written, committed) = plan.write(schema, updates)?;
                self.install(committed);
                Ok(written)
            }
        }
    }

    /// Check an append as [`Self::compare_and_append`] does, without
    /// writing anything: `None` when it only moves the upper in memory
    /// (done here; see [`LAZY_UPPER`]), else what [`AppendPlan::write`]
    /// writes — without the lock around this shard, provided nothing else
    /// commits to it meanwhile — for [`Self::install`] to take in.
    pub fn plan_append(
        &mut self,
        updates: &[RecordBatch],
        staged: &[PartMeta],
        expected: &Frontier,
        new_upper: Frontier,
    ) -> Result<Option<AppendPlan>> {
        if &self.state.upper != expected {
            return Err(StorageError::UpperMismatch {
                id: self.id,
                expected: expected.clone(),
                actual: self.state.upper.clone(),
            });
        }
        let max_time = check_append(self.id, updates, expected, &new_upper)?;
        for part in staged {
            let t = part.time.ok_or_else(|| {
                StorageError::InvalidUsage(format!("staged part {} has no commit time", part.key))
            })?;
            if !expected.less_equal(&t) || new_upper.less_equal(&t) {
                return Err(StorageError::InvalidUsage(format!(
                    "staged part at {t} outside [{expected:?}, {new_upper:?}) for {}",
                    self.id
                )));
            }
        }
        // Advancing the upper of an idle collection (every group commit
        // advances every input, so every view appends) need not cost an
        // fsync each time.
        if max_time.is_none()
            && staged.is_empty()
            && new_upper.as_option().is_some()
            && self.last_durable.elapsed() < LAZY_UPPER
        {
            self.state.upper = new_upper;
            return Ok(None);
        }
        let mut next = self.state.clone();
        next.upper = new_upper;
        next.parts.extend(staged.iter().cloned());
        Ok(Some(AppendPlan {
            next,
            max_time,
            writer: self.part_writer(),
            key: self.key.clone(),
            seqno: self.seqno,
            may_spill: !self.merging,
        }))
    }

    /// Take in a commit an [`AppendPlan`] wrote.
    pub fn install(&mut self, committed: Committed) {
        self.seqno = committed.seqno;
        self.durable_upper = committed.state.upper.clone();
        self.state = committed.state;
        self.last_durable = std::time::Instant::now();
    }

    /// What writes this shard's part files: usable without the shard (and
    /// the lock around it), since a part is only a file until a commit
    /// names it.
    pub fn part_writer(&self) -> PartWriter {
        PartWriter {
            id: self.id,
            blob: Arc::clone(&self.blob),
            fence: self.fence.clone(),
        }
    }

    /// Replace `replaced` parts by `merged` (their consolidation at `since`,
    /// already written by [`DurableShard::part_writer`]) and advance the
    /// durable since; `merged` is deleted if the commit fails. The caller
    /// deletes the replaced files afterwards ([`PartWriter::delete`]), or
    /// a restart collects them as orphans.
    ///
    /// `false` (and `merged` deleted): some replaced part is no longer in
    /// the state, so `merged` would hold its updates a second time. Not
    /// expected — appends do not write inline parts out while a merge runs
    /// ([`DurableShard::set_merging`]) — but checked, since the cost of
    /// being wrong is duplicated rows; the next compaction starts again.
    pub fn compact(
        &mut self,
        replaced: &[String],
        merged: Vec<PartMeta>,
        since: Frontier,
    ) -> Result<bool> {
        let present = |key: &String| self.state.parts.iter().any(|p| &p.key == key);
        if !replaced.iter().all(present) {
            let keys: Vec<String> = merged.into_iter().map(|m| m.key).collect();
            self.part_writer().delete(&keys);
            return Ok(false);
        }
        let mut next = self.state.clone();
        next.parts.retain(|p| !replaced.contains(&p.key));
        // Keep parts ordered by time: the merged parts hold the oldest data.
        next.parts.splice(0..0, merged.iter().cloned());
        if next.since < since {
            next.since = since;
        }
        if let Err(e) = self.commit(next) {
            for meta in &merged {
                let _ = self.blob.delete(&meta.key);
            }
            return Err(e);
        }
        Ok(true)
    }

    /// Read a part's updates from blob storage.
    pub fn load_part(&self, meta: &PartMeta) -> Result<Vec<RecordBatch>> {
        self.part_writer().read(meta)
    }
}

/// An append checked under the shard's lock, to be written (part file and
/// consensus commit) by [`AppendPlan::write`] without it.
pub(crate) struct AppendPlan {
    next: ShardState,
    max_time: Option<Timestamp>,
    writer: PartWriter,
    key: String,
    /// The shard's seqno when planned: the commit expects it unchanged.
    seqno: SeqNo,
    /// Whether the append may write the state's inline parts out (no
    /// compaction is merging them).
    may_spill: bool,
}

/// A state an [`AppendPlan`] committed, for [`DurableShard::install`].
pub(crate) struct Committed {
    seqno: SeqNo,
    state: ShardState,
}

impl AppendPlan {
    /// Write the append's part (if it has updates) and commit the shard's
    /// next state, expecting the seqno it was planned at; the part is
    /// deleted if the commit fails.
    pub fn write(
        self,
        schema: &SchemaRef,
        updates: &[RecordBatch],
    ) -> Result<(Option<WrittenPart>, Committed)> {
        let AppendPlan {
            mut next,
            max_time,
            writer,
            key,
            seqno,
            may_spill,
        } = self;
        let written = match max_time {
            Some(max_time) => {
                let batch = arrow::compute::concat_batches(schema, updates)?;
                Some(writer.write_append(schema, batch, max_time, &mut next.parts, may_spill)?)
            }
            None => None,
        };
        let committed = commit_state(&writer, &key, seqno, next)
            .and_then(|c| c.ok_or_else(|| changed_under(writer.id, &writer.fence)));
        match committed {
            Ok(committed) => Ok((written, committed)),
            Err(e) => {
                if let Some(part) = &written {
                    writer.delete(std::slice::from_ref(&part.meta.key));
                }
                Err(e)
            }
        }
    }
}

/// The latest time of `updates`, an append to `id` moving its upper from
/// `expected` to `new_upper`, after checking that the upper does not
/// regress and every update is in `[expected, new_upper)`.
pub(crate) fn check_append(
    id: GlobalId,
    updates: &[RecordBatch],
    expected: &Frontier,
    new_upper: &Frontier,
) -> Result<Option<Timestamp>> {
    if expected > new_upper {
        return Err(StorageError::InvalidUsage(format!(
            "upper of {id} may not regress from {expected:?} to {new_upper:?}"
        )));
    }
    let mut max_time = None;
    for b in updates {
        for &t in times(b)?.values() {
            if !expected.less_equal(&t) || new_upper.less_equal(&t) {
                return Err(StorageError::InvalidUsage(format!(
                    "update at {t} outside [{expected:?}, {new_upper:?}) for {id}"
                )));
            }
            max_time = max_time.max(Some(t));
        }
    }
    Ok(max_time)
}

/// One process commits to a shard at a time: another commit came first.
fn changed_under(id: GlobalId, fence: &Fence) -> StorageError {
    StorageError::Corruption(format!("shard {id} changed under epoch {}", fence.epoch()))
}

/// Commit `next` as the shard's state after `seqno`. `None`: the shard
/// changed first, by a process of an older epoch (or, wrongly, of ours);
/// fenced if a newer epoch took it.
fn commit_state(
    writer: &PartWriter,
    key: &str,
    seqno: SeqNo,
    mut next: ShardState,
) -> Result<Option<Committed>> {
    next.epoch = writer.fence.epoch();
    let data = serde_json::to_vec(&next).map_err(|e| StorageError::Corruption(e.to_string()))?;
    let consensus = writer.fence.consensus();
    match consensus.compare_and_set(
        key,
        (seqno > 0).then_some(seqno),
        VersionedData {
            seqno: seqno + 1,
            data,
        },
    )? {
        CasResult::Committed => {
            if (seqno + 1).is_multiple_of(TRUNCATE_EVERY) {
                consensus.truncate(key, seqno + 1)?;
            }
            Ok(Some(Committed {
                seqno: seqno + 1,
                state: next,
            }))
        }
        CasResult::Mismatch(_) => {
            if let Some(v) = consensus.head(key)? {
                let theirs = decode_state(&v.data)?;
                if theirs.epoch > writer.fence.epoch() {
                    return Err(StorageError::Fenced {
                        mine: writer.fence.epoch(),
                        current: theirs.epoch,
                    });
                }
            }
            writer.fence.check()?;
            Ok(None)
        }
    }
}

/// A part an append wrote: what the shard records of it, its updates (for
/// the cache), its column bounds, the append's own updates (for
/// listeners: the part may also hold earlier appends' inline parts), and
/// the inline parts it replaced.
pub(crate) struct WrittenPart {
    pub meta: PartMeta,
    pub batch: Arc<RecordBatch>,
    pub stats: Arc<PartStats>,
    pub appended: Arc<RecordBatch>,
    pub replaced: Vec<String>,
}

/// Writes a shard's part files (see [`DurableShard::part_writer`]).
#[derive(Clone)]
pub(crate) struct PartWriter {
    id: GlobalId,
    blob: Arc<dyn Blob>,
    fence: Fence,
}

impl PartWriter {
    #[cfg(test)]
    pub(crate) fn for_tests(id: GlobalId, blob: Arc<dyn Blob>, fence: Fence) -> Self {
        PartWriter { id, blob, fence }
    }

    /// `e`, unless a newer process has taken over the data directory: then
    /// that is the cause (it collects the files this process was writing
    /// and compacts away parts this process still lists).
    fn fenced_or(&self, e: StorageError) -> StorageError {
        match self.fence.check() {
            Err(fenced) => fenced,
            Ok(()) => e,
        }
    }

    /// Delete part files no state names any more (replaced by a
    /// compaction); one that cannot be deleted is left for a restart's
    /// orphan collection.
    pub fn delete(&self, keys: &[String]) {
        for key in keys.iter().filter(|k| !is_inline(k)) {
            if let Err(e) = self.blob.delete(key) {
                tracing::warn!(%key, error = %e, "could not delete compacted part");
            }
        }
    }

    /// Read a part's updates (for a staged part whose commit time is not
    /// set yet: its table writes, data and diff).
    pub fn read(&self, meta: &PartMeta) -> Result<Vec<RecordBatch>> {
        let batches = decode_file(&self.bytes(meta)?)?;
        match meta.time {
            Some(t) => batches.iter().map(|b| stamp(b, t)).collect(),
            None => Ok(batches),
        }
    }

    /// A part file's bytes.
    fn bytes(&self, meta: &PartMeta) -> Result<Bytes> {
        if let Some(inline) = &meta.inline {
            return Ok(inline.0.clone());
        }
        self.blob
            .get(&meta.key)
            .map_err(|e| self.fenced_or(e))?
            .ok_or_else(|| {
                self.fenced_or(StorageError::Corruption(format!(
                    "part {} of {} is missing",
                    meta.key, self.id
                )))
            })
    }

    /// Columns `want` of a part's updates, decoding only those, and its
    /// row count. `want` indexes the updates schema of a collection with
    /// `data` data columns (data, then time, then diff). A staged part's
    /// file has no time column: its commit time is filled in (asking for
    /// the time of one not committed yet is an error).
    pub fn read_columns(
        &self,
        meta: &PartMeta,
        data: usize,
        want: &[usize],
    ) -> Result<(Vec<ArrayRef>, usize)> {
        let file = IpcFile::open(self.bytes(meta)?)?;
        let stored_time = match file.schema().fields().len() {
            n if n == data + 2 => true,
            // A staged part: its time is its commit's, if it has one yet.
            n if n == data + 1 => false,
            n => {
                return Err(StorageError::Corruption(format!(
                    "part {} of {} has {n} columns, expected {}",
                    meta.key,
                    self.id,
                    data + 2
                )));
            }
        };
        // Where each wanted column is among the columns decoded (`None`:
        // the commit time, not stored).
        let mut projection = Vec::new();
        let mut slots = Vec::with_capacity(want.len());
        for &c in want {
            let stored = match c {
                c if c < data => Some(c),
                c if c == data => stored_time.then_some(data),
                _ => Some(if stored_time { data + 1 } else { data }),
            };
            slots.push(stored.map(|f| {
                projection.push(f);
                projection.len() - 1
            }));
        }
        let (decoded, rows) = file.read_columns(&projection)?;
        let columns = slots
            .into_iter()
            .map(|slot| match slot {
                Some(i) => Ok(Arc::clone(&decoded[i])),
                // Only a staged part lacks the time column.
                None => match meta.time {
                    Some(t) => Ok(Arc::new(UInt64Array::from_value(t, rows)) as ArrayRef),
                    None => Err(StorageError::InvalidUsage(format!(
                        "part {} of {} is staged and not committed: it has no time",
                        meta.key, self.id
                    ))),
                },
            })
            .collect::<Result<_>>()?;
        Ok((columns, rows))
    }

    /// Write table writes (data and diff) as a part whose time the commit
    /// that names it will set (see [`StagedPart`]), with its column bounds
    /// (stored in its footer too).
    pub fn write_staged(
        &self,
        schema: &SchemaRef,
        batches: &[RecordBatch],
    ) -> Result<(PartMeta, Arc<PartStats>)> {
        let data = &schema.fields()[..schema.fields().len().saturating_sub(1)];
        let stats = PartStats::compute_batches(batches, data.len());
        let key = self.write_file(schema, batches, data, &stats)?;
        // A staged part holds table writes: its diff is the last column.
        let (positive, unit_diffs) = diff_signs(batches.iter().map(|b| {
            b.columns()
                .last()
                .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
                .map(|d| d.values().as_ref())
        }));
        let meta = PartMeta {
            key,
            rows: batches.iter().map(|b| b.num_rows()).sum(),
            bytes: total_bytes(batches),
            max_time: 0,
            consolidated: false,
            unit_diffs,
            positive,
            time: None,
            inline: None,
        };
        Ok((meta, stats))
    }

    /// Write `batch` (updates) as a new part file, returning what a commit
    /// records of it and its column bounds (stored in its footer too).
    pub fn write(
        &self,
        schema: &SchemaRef,
        batch: &RecordBatch,
        max_time: Timestamp,
        consolidated: bool,
    ) -> Result<(PartMeta, Arc<PartStats>)> {
        let data = &schema.fields()[..schema.fields().len().saturating_sub(2)];
        let stats = PartStats::compute(batch, data.len());
        let key = self.write_file(schema, std::slice::from_ref(batch), data, &stats)?;
        let meta = PartMeta {
            consolidated,
            ..self.meta_of(key, batch, max_time)?
        };
        Ok((meta, stats))
    }

    /// Write an append's `batch` (updates up to `max_time`) as a part of
    /// the shard whose next state's parts are `parts`, adding it there:
    /// inline if it is small and the state's inline parts have room,
    /// else as a file — together with the state's inline parts, which it
    /// then replaces, if there are any and `may_spill` (no compaction is
    /// merging them meanwhile).
    pub fn write_append(
        &self,
        schema: &SchemaRef,
        batch: RecordBatch,
        max_time: Timestamp,
        parts: &mut Vec<PartMeta>,
        may_spill: bool,
    ) -> Result<WrittenPart> {
        let data = &schema.fields()[..schema.fields().len().saturating_sub(2)];
        let stats = PartStats::compute(&batch, data.len());
        let bytes = encode_file(schema, std::slice::from_ref(&batch), &footer(&stats, data))?;
        let inline: Vec<usize> = parts
            .iter()
            .filter_map(|p| p.inline.as_ref())
            .map(|b| b.0.len())
            .collect();
        let inline_bytes: usize = inline.iter().sum();
        let batch = Arc::new(batch);
        let fits_inline = bytes.len() <= INLINE_PART_BYTES
            && inline_bytes + bytes.len() <= INLINE_BUDGET_BYTES
            && inline.len() < INLINE_MAX_PARTS;
        if fits_inline || inline.is_empty() || !may_spill {
            let meta = if fits_inline {
                PartMeta {
                    inline: Some(InlineBytes(Bytes::from_vec(bytes))),
                    ..self.meta_of(
                        format!("{INLINE_PREFIX}{}", uuid::Uuid::new_v4()),
                        &batch,
                        max_time,
                    )?
                }
            } else {
                let key = self.new_key();
                self.blob.set(&key, &bytes).map_err(|e| self.fenced_or(e))?;
                self.meta_of(key, &batch, max_time)?
            };
            parts.push(meta.clone());
            return Ok(WrittenPart {
                meta,
                batch: Arc::clone(&batch),
                stats,
                appended: batch,
                replaced: Vec::new(),
            });
        }
        // One file for the inline parts and this append.
        let mut batches = Vec::new();
        let mut replaced = Vec::new();
        let mut latest = max_time;
        for meta in parts.iter().filter(|p| p.inline.is_some()) {
            batches.extend(self.read(meta)?);
            replaced.push(meta.key.clone());
            latest = latest.max(meta.max_time);
        }
        batches.push(batch.as_ref().clone());
        let combined = arrow::compute::concat_batches(schema, &batches)?;
        let (meta, stats) = self.write(schema, &combined, latest, false)?;
        parts.retain(|p| p.inline.is_none());
        parts.push(meta.clone());
        Ok(WrittenPart {
            meta,
            batch: Arc::new(combined),
            stats,
            appended: batch,
            replaced,
        })
    }

    /// A fresh part file's key.
    fn new_key(&self) -> String {
        format!("{}{}", part_prefix(self.id), uuid::Uuid::new_v4())
    }

    /// What a state records of a part `key` holding updates `batch`.
    fn meta_of(&self, key: String, batch: &RecordBatch, max_time: Timestamp) -> Result<PartMeta> {
        let (positive, unit_diffs) = diff_signs([Some(diffs(batch)?.values().as_ref())]);
        Ok(PartMeta {
            key,
            rows: batch.num_rows(),
            bytes: total_bytes(std::slice::from_ref(batch)),
            max_time,
            consolidated: false,
            unit_diffs,
            positive,
            time: None,
            inline: None,
        })
    }

    /// Write a new part file of `batches` whose data columns are `data`,
    /// with `stats` in its footer; returns its key.
    fn write_file(
        &self,
        schema: &SchemaRef,
        batches: &[RecordBatch],
        data: &[FieldRef],
        stats: &PartStats,
    ) -> Result<String> {
        let key = self.new_key();
        let bytes = encode_file(schema, batches, &footer(stats, data))?;
        self.blob.set(&key, &bytes).map_err(|e| self.fenced_or(e))?;
        Ok(key)
    }

    /// The column bounds stored in a part file's footer, for a collection
    /// whose data columns are `data`, read without its batches. `None` for
    /// a part written before bounds were stored.
    pub fn stored_stats(
        &self,
        meta: &PartMeta,
        data: &[FieldRef],
    ) -> Result<Option<Arc<PartStats>>> {
        if let Some(inline) = &meta.inline {
            return Ok(footer_value(inline.0.as_slice(), FOOTER_KEY)?
                .and_then(|v| PartStats::from_footer(&v, data)));
        }
        let missing = || {
            self.fenced_or(StorageError::Corruption(format!(
                "part {} of {} is missing",
                meta.key, self.id
            )))
        };
        let tail = |len| {
            self.blob
                .get_tail(&meta.key, len)
                .map_err(|e| self.fenced_or(e))?
                .ok_or_else(missing)
        };
        let mut end = tail(FOOTER_GUESS)?;
        let span = footer_span(&end)?;
        if span > end.len() {
            end = tail(span)?;
        }
        Ok(footer_value(&end, FOOTER_KEY)?.and_then(|v| PartStats::from_footer(&v, data)))
    }
}

/// A part file's footer metadata: its column bounds.
fn footer(stats: &PartStats, data: &[FieldRef]) -> Vec<(&'static str, String)> {
    stats
        .to_footer(data)
        .map(|value| (FOOTER_KEY, value))
        .into_iter()
        .collect()
}

/// Whether every diff in `columns` is positive, and whether every one is
/// exactly one.
fn diff_signs<'a>(diffs: impl IntoIterator<Item = Option<&'a [i64]>>) -> (bool, bool) {
    let (mut positive, mut unit) = (true, true);
    for d in diffs {
        let Some(d) = d else {
            return (false, false);
        };
        positive &= d.iter().all(|x| *x > 0);
        unit &= d.iter().all(|x| *x == 1);
    }
    (positive, unit && positive)
}

/// Delete everything stored for a shard.
pub(crate) fn delete_shard(id: GlobalId, blob: &Arc<dyn Blob>, fence: &Fence) -> Result<()> {
    fence.check()?;
    fence.consensus().delete_key(&shard_key(id))?;
    for key in blob.list_keys(&part_prefix(id))? {
        blob.delete(&key)?;
    }
    Ok(())
}

/// Decode a shard state.
pub(crate) fn decode_state(data: &[u8]) -> Result<ShardState> {
    serde_json::from_slice(data).map_err(|e| StorageError::Corruption(format!("shard state: {e}")))
}

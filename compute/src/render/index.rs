//! Indexes: a dataflow's output arranged in memory by key, read by peeks.
//!
//! Each worker holds the part of the arrangement whose keys hash to it, so
//! a peek of every row asks every worker and unions their answers, and a
//! peek of one key asks the key's worker. Errors are arranged beside the
//! rows, all on one worker ([`error_worker`]), which every peek also asks:
//! a peek at a time where any error exists fails with it.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use differential_dataflow::operators::arrange::TraceAgent;
use differential_dataflow::trace::cursor::{Cursor, CursorList, cursor_list};
use differential_dataflow::trace::implementations::ValSpine;
use differential_dataflow::trace::{Navigable, TraceReader};
use timely::progress::Antichain;

use super::arranged::{HeapSize, SharedValSpine, ValBatch, arrange_by_key, arrange_by_key_shared};
use super::compile::KeyEval;
use super::key_directory::LazyDirectory;
use super::shared_batch::Shared;
use super::{Diff, Rendered, Time, eval_op};
use crate::error::DataflowError;
use crate::row::Row;

/// The rows of an index by key, in batches other threads may read.
type RowTrace = TraceAgent<SharedValSpine<Row, Row, Diff>>;
/// One batch of an index's rows.
type RowBatch = Shared<ValBatch<Row, Row, Diff>>;
/// The errors of an index, all under the key `()`.
type ErrorTrace = TraceAgent<ValSpine<(), DataflowError, Time, Diff>>;

/// The worker that holds every error of an index (of `workers`): the one
/// timely's exchange sends the key `()` to.
pub(crate) fn error_worker(workers: usize) -> usize {
    (differential_dataflow::Hashable::hashed(&()) % workers.max(1) as u64) as usize
}

impl HeapSize for DataflowError {
    fn heap_size(&self) -> usize {
        self.code.len() + self.message.len()
    }
}

/// One worker's part of an index.
pub(crate) struct IndexTraces {
    rows: RowTrace,
    errors: ErrorTrace,
    /// The time compaction was last allowed to.
    since: Time,
    /// The rows' upper when they were last published (see
    /// [`IndexTraces::publish`]); `None` before the first.
    published: Option<Option<Time>>,
    /// The last publication's batches with their key directories, so a
    /// batch published again keeps its directory (the batch is held here
    /// so that its address cannot name another batch meanwhile).
    directories: Vec<(RowBatch, Arc<LazyDirectory>)>,
}

/// One worker's part of an index's rows as of one step: its batches and
/// the upper they are complete to. Sessions seek keys in it on their own
/// threads ([`PublishedRows::peek`]) instead of asking the worker.
pub(crate) struct PublishedRows {
    /// Times before this are complete (`None`: complete forever).
    upper: Option<Time>,
    batches: Vec<RowBatch>,
    /// Each batch's key directory (same order), shared with the next
    /// publication that still holds the batch.
    directories: Vec<Arc<LazyDirectory>>,
}

impl PublishedRows {
    /// Whether every update at `time` is in these batches.
    pub(crate) fn complete_at(&self, time: Time) -> bool {
        self.upper.is_none_or(|upper| time < upper)
    }

    /// The rows at `time` that `select` picks. The caller ensures
    /// [`PublishedRows::complete_at`] and, by a hold, that the
    /// index's compaction has not passed `time`.
    pub(crate) fn peek(&self, time: Time, select: &KeySelect) -> Vec<(Row, Diff)> {
        match select {
            KeySelect::Equal(key) => key_rows(
                self.batches.iter().map(|b| &**b).zip(&self.directories),
                time,
                key,
            ),
            _ => rows_at(&self.batches, time, select),
        }
    }

    /// Bytes the batches' key directories hold.
    pub(crate) fn directory_bytes(&self) -> usize {
        self.directories.iter().map(|d| d.heap_size()).sum()
    }
}

impl std::fmt::Debug for PublishedRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublishedRows")
            .field("upper", &self.upper)
            .field("batches", &self.batches.len())
            .field("directory_bytes", &self.directory_bytes())
            .finish()
    }
}

/// Which of an index's rows a peek reads, by their key.
#[derive(Debug, Clone)]
pub enum KeySelect {
    /// Every row.
    All,
    /// The rows whose key is this one.
    Equal(Row),
    /// The rows whose key's first column lies within the bounds, each
    /// bound the first column's value encoded alone. Arrow's row format
    /// orders keys as their values and encodes each column by itself,
    /// prefix-free, so a key's first column compares with a bound as the
    /// key's bytes compare with the bound's over the bound's length.
    Range {
        /// The least first-column value read.
        lower: Bound<Row>,
        /// The greatest.
        upper: Bound<Row>,
    },
}

impl KeySelect {
    /// Whether `key` lies past this selection's end (every later key does
    /// too).
    fn past_end(&self, key: &Row) -> bool {
        match self {
            KeySelect::All => false,
            KeySelect::Equal(wanted) => key != wanted,
            KeySelect::Range { upper, .. } => match upper {
                Bound::Unbounded => false,
                Bound::Included(b) => first_column_cmp(key, b) == Ordering::Greater,
                Bound::Excluded(b) => first_column_cmp(key, b) != Ordering::Less,
            },
        }
    }

    /// Whether `key` lies before this selection's start (a seek lands on
    /// the least key at or after an inclusive start: only an exclusive
    /// lower bound's own value is skipped).
    fn before_start(&self, key: &Row) -> bool {
        match self {
            KeySelect::Range {
                lower: Bound::Excluded(b),
                ..
            } => first_column_cmp(key, b) != Ordering::Greater,
            _ => false,
        }
    }

    /// The key a cursor seeks first (`None`: the first key).
    fn start(&self) -> Option<&Row> {
        match self {
            KeySelect::All => None,
            KeySelect::Equal(key) => Some(key),
            KeySelect::Range { lower, .. } => match lower {
                Bound::Included(b) | Bound::Excluded(b) => Some(b),
                Bound::Unbounded => None,
            },
        }
    }
}

/// How `key`'s first column compares with `bound`, a first-column value
/// encoded alone: `key`'s bytes over `bound`'s length against `bound`
/// (encodings are prefix-free, so they differ within that length unless
/// the values are equal).
fn first_column_cmp(key: &Row, bound: &Row) -> Ordering {
    let (key, bound) = (key.as_bytes(), bound.as_bytes());
    key[..key.len().min(bound.len())].cmp(bound)
}

/// The rows of `batches` at `time` that `select` picks, with their
/// multiplicities: what one worker answers to a peek.
// A `Vec`, not a slice: a cursor list reads its batches from one.
#[allow(clippy::ptr_arg)]
fn rows_at(batches: &Vec<RowBatch>, time: Time, select: &KeySelect) -> Vec<(Row, Diff)> {
    let mut out = Vec::new();
    let cursors = batches.iter().map(Navigable::cursor).collect();
    let mut cursor = CursorList::new(cursors, batches);
    if let Some(start) = select.start() {
        cursor.seek_key(batches, start);
    }
    while let Some(k) = cursor.get_key(batches) {
        if select.past_end(k) {
            break;
        }
        if select.before_start(k) {
            cursor.step_key(batches);
            continue;
        }
        while let Some(row) = cursor.get_val(batches) {
            let mut count = 0;
            cursor.map_times(batches, |t, d| {
                if *t <= time {
                    count += *d;
                }
            });
            if count != 0 {
                out.push((row.clone(), count));
            }
            cursor.step_val(batches);
        }
        cursor.step_key(batches);
    }
    out
}

/// The rows of `batches` at `time` whose key is `key`, with their
/// multiplicities: what [`rows_at`] answers for [`KeySelect::Equal`],
/// found in each batch by its directory instead of by a cursor's
/// galloping seek through all of them together.
fn key_rows<'a>(
    batches: impl Iterator<Item = (&'a ValBatch<Row, Row, Diff>, &'a Arc<LazyDirectory>)>,
    time: Time,
    key: &Row,
) -> Vec<(Row, Diff)> {
    let mut out: Vec<(Row, Diff)> = Vec::new();
    let mut found_in = 0;
    for (batch, directory) in batches {
        let storage = &batch.storage;
        let Some(position) = directory.find(&storage.keys, key) else {
            continue;
        };
        found_in += 1;
        let (first, end) = storage.vals.bounds(position);
        for val in first..end {
            let (lower, upper) = storage.upds.bounds(val);
            let mut count = 0;
            for update in lower..upper {
                let (t, d) = storage.upds.get_abs(update);
                if *t <= time {
                    count += *d;
                }
            }
            if count != 0 {
                out.push((storage.vals.get_abs(val).clone(), count));
            }
        }
    }
    // A row with updates in several batches counts once, with their sum,
    // in the rows' order (as the cursor over all batches reads them).
    if found_in > 1 {
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.dedup_by(|later, kept| {
            if later.0 == kept.0 {
                kept.1 += later.1;
                true
            } else {
                false
            }
        });
        out.retain(|(_, n)| *n != 0);
    }
    out
}

/// What one worker answers to a peek: its rows with multiplicities, or an
/// error the index holds at the peek's time.
pub(crate) type PeekPart = Result<Vec<(Row, Diff)>, DataflowError>;

/// Arrange `rendered` by `key` on every worker.
pub(crate) fn render_index(rendered: Rendered<'_>, key: Arc<KeyEval>) -> IndexTraces {
    let key_eval = Arc::clone(&key);
    let (keyed, key_errors) = eval_op(
        rendered.ok,
        "IndexKey",
        Arc::clone(&key.input),
        move |batch, rows: &[Row]| key_eval.pair(batch, rows.iter().cloned()),
    );
    let rows = arrange_by_key_shared(keyed, "Index");
    let errors = arrange_by_key(
        rendered.err.concat(key_errors).map(|e| ((), e)),
        "IndexErrors",
    );
    IndexTraces {
        rows: rows.trace,
        errors: errors.trace,
        since: 0,
        published: None,
        directories: Vec::new(),
    }
}

/// Handles on one worker's part of an index, for another dataflow to
/// import (each import gets its own handle, so it never holds back the
/// index's compaction once built).
pub(crate) struct IndexImport {
    rows: RowTrace,
    errors: ErrorTrace,
}

impl IndexImport {
    /// The index's rows and errors as collections of the dataflow being
    /// built in `scope`, times before `start` advanced to it (the index
    /// is readable at `start`: the controller holds it there).
    pub(crate) fn render<'s>(
        &mut self,
        scope: timely::dataflow::Scope<'s, Time>,
        name: &str,
        start: Time,
    ) -> Rendered<'s> {
        let ok = self
            .rows
            .import_named(scope, &format!("Import {name}"))
            .as_collection(|_key, row: &Row| row.clone());
        let err = self
            .errors
            .import_named(scope, &format!("Import {name} errors"))
            .as_collection(|_key, e: &DataflowError| e.clone());
        Rendered {
            ok: ok.delay(move |t| (*t).max(start)),
            err: err.delay(move |t| (*t).max(start)),
        }
    }
}

impl IndexTraces {
    /// Handles for a dataflow importing this part of the index.
    pub(crate) fn import(&self) -> IndexImport {
        IndexImport {
            rows: self.rows.clone(),
            errors: self.errors.clone(),
        }
    }

    /// Times before this are complete on this worker.
    pub fn upper(&mut self) -> Option<Time> {
        let mut rows = Antichain::new();
        self.rows.read_upper(&mut rows);
        let mut errors = Antichain::new();
        self.errors.read_upper(&mut errors);
        match (rows.as_option(), errors.as_option()) {
            (Some(a), Some(b)) => Some(*a.min(b)),
            (Some(t), None) | (None, Some(t)) => Some(*t),
            (None, None) => None,
        }
    }

    /// `Some(upper)` of the error arrangement if it holds no update at all
    /// (so the index has no error at any time before `upper`); `None` if
    /// it holds some (or is closed).
    pub fn errors_absent_through(&mut self) -> Option<Time> {
        let mut upper = Antichain::new();
        self.errors.read_upper(&mut upper);
        let mut any = false;
        self.errors.map_spans(|span| any |= span.inner.is_some());
        if any {
            None
        } else {
            upper.as_option().copied()
        }
    }

    /// Distinct errors the index holds at its latest complete time.
    pub fn error_count(&mut self) -> usize {
        let mut upper = Antichain::new();
        self.errors.read_upper(&mut upper);
        let Some(batches) = self.errors.batches_through(upper.borrow()) else {
            return 0;
        };
        let (mut cursor, storage) = cursor_list(batches);
        let mut count = 0;
        while cursor.key_valid(&storage) {
            while cursor.val_valid(&storage) {
                let mut total = 0;
                cursor.map_times(&storage, |_, d| total += *d);
                count += usize::from(total > 0);
                cursor.step_val(&storage);
            }
            cursor.step_key(&storage);
        }
        count
    }

    /// Allow compaction up to `since`: peeks must read at or after it.
    pub fn compact_to(&mut self, since: Time) {
        if since <= self.since {
            return;
        }
        self.since = since;
        let frontier = Antichain::from_elem(since);
        self.rows.set_logical_compaction(frontier.borrow());
        self.rows.set_physical_compaction(frontier.borrow());
        self.errors.set_logical_compaction(frontier.borrow());
        self.errors.set_physical_compaction(frontier.borrow());
    }

    /// The rows at `time` that `select` picks. The caller ensures
    /// `since <= time < upper`.
    pub fn peek(&mut self, time: Time, select: &KeySelect) -> PeekPart {
        let mut upper = Antichain::new();
        self.errors.read_upper(&mut upper);
        if let Some(batches) = self.errors.batches_through(upper.borrow()) {
            let (mut cursor, storage) = cursor_list(batches);
            while cursor.key_valid(&storage) {
                while let Some(error) = cursor.get_val(&storage) {
                    let mut count = 0;
                    cursor.map_times(&storage, |t, d| {
                        if *t <= time {
                            count += *d;
                        }
                    });
                    if count > 0 {
                        return Err(error.clone());
                    }
                    cursor.step_val(&storage);
                }
                cursor.step_key(&storage);
            }
        }
        self.rows.read_upper(&mut upper);
        let Some(batches) = self.rows.batches_through(upper.borrow()) else {
            return Ok(Vec::new());
        };
        Ok(rows_at(&batches, time, select))
    }

    /// This worker's rows as they are now, if their upper moved since the
    /// last time they were published (batches merged meanwhile are
    /// published with the next move; the older list reads the same).
    pub fn publish(&mut self) -> Option<PublishedRows> {
        let mut frontier = Antichain::new();
        self.rows.read_upper(&mut frontier);
        let upper = frontier.as_option().copied();
        if self.published == Some(upper) {
            return None;
        }
        let batches = self.rows.batches_through(frontier.borrow())?;
        self.published = Some(upper);
        let directories: Vec<(RowBatch, Arc<LazyDirectory>)> = batches
            .iter()
            .map(|batch| {
                let kept = self
                    .directories
                    .iter()
                    .find(|(old, _)| old.ptr_eq(batch))
                    .map(|(_, directory)| Arc::clone(directory));
                (batch.clone(), kept.unwrap_or_default())
            })
            .collect();
        let shared = directories.iter().map(|(_, d)| Arc::clone(d)).collect();
        self.directories = directories;
        Some(PublishedRows {
            upper,
            batches,
            directories: shared,
        })
    }
}

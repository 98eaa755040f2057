//! Arrangement batches behind an `Arc`, for indexes read from other
//! threads.
//!
//! Differential's spines keep their batches behind an `Rc`, so only the
//! worker that maintains an arrangement can read it, and a peek must ask
//! that worker and wait for it to wake. An index arranges its rows in a
//! spine of [`Shared`] batches instead: batches are immutable, so after
//! each step the worker can hand the list of the index's current batches
//! (a few `Arc` clones) to the server, whose sessions then seek a key in
//! them on their own threads (see [`super::index::PublishedRows`]). The
//! wrappers only forward to the batch they hold.

use std::ops::Deref;
use std::sync::Arc;

use differential_dataflow::trace::implementations::spine_fueled::{Merger, SpineBatch};
use differential_dataflow::trace::{Cursor, Navigable};
use timely::progress::frontier::AntichainRef;

use super::arranged::TrackedBatch;

/// A batch shared between the worker maintaining it and readers on other
/// threads.
pub(crate) struct Shared<B>(Arc<B>);

/// Size probes recognise a shared batch by its allocation, as they do an
/// `Rc` one.
impl<B: 'static> TrackedBatch for Shared<B> {
    type Batch = B;
    type Weak = std::sync::Weak<B>;
    fn batch(&self) -> &B {
        &self.0
    }
    fn address(&self) -> *const B {
        Arc::as_ptr(&self.0)
    }
    fn weak(&self) -> std::sync::Weak<B> {
        Arc::downgrade(&self.0)
    }
}

impl<B> Shared<B> {
    /// Whether both hold the same batch.
    pub(crate) fn ptr_eq(&self, other: &Shared<B>) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<B> Clone for Shared<B> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<B> From<B> for Shared<B> {
    fn from(batch: B) -> Self {
        Shared(Arc::new(batch))
    }
}

impl<B> Deref for Shared<B> {
    type Target = B;
    fn deref(&self) -> &B {
        &self.0
    }
}

impl<B: SpineBatch> SpineBatch for Shared<B> {
    type Time = B::Time;
    type Merger = SharedMerger<B>;
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// Merges two shared batches with their batch type's merger.
pub(crate) struct SharedMerger<B: SpineBatch>(B::Merger);

impl<B: SpineBatch> Merger<Shared<B>> for SharedMerger<B> {
    fn new(
        source1: &Shared<B>,
        source2: &Shared<B>,
        compaction_frontier: AntichainRef<B::Time>,
    ) -> Self {
        SharedMerger(B::Merger::new(source1, source2, compaction_frontier))
    }

    fn work(&mut self, source1: &Shared<B>, source2: &Shared<B>, fuel: &mut isize) {
        self.0.work(source1, source2, fuel)
    }

    fn done(self) -> Option<Shared<B>> {
        self.0.done().map(Shared::from)
    }
}

impl<B: Navigable> Navigable for Shared<B> {
    type Cursor = SharedCursor<B::Cursor>;
    fn cursor(&self) -> Self::Cursor {
        SharedCursor(self.0.cursor())
    }
}

/// A cursor over a shared batch: the batch's own cursor.
pub(crate) struct SharedCursor<C>(C);

impl<C: Cursor> Cursor for SharedCursor<C> {
    type Storage = Shared<C::Storage>;

    type Key<'a> = C::Key<'a>;
    type ValOwn = C::ValOwn;
    type Val<'a> = C::Val<'a>;
    type Time = C::Time;
    type TimeGat<'a> = C::TimeGat<'a>;
    type Diff = C::Diff;
    type DiffGat<'a> = C::DiffGat<'a>;
    type KeyContainer = C::KeyContainer;
    type ValContainer = C::ValContainer;
    type TimeContainer = C::TimeContainer;
    type DiffContainer = C::DiffContainer;

    fn key_valid(&self, storage: &Self::Storage) -> bool {
        self.0.key_valid(storage)
    }
    fn val_valid(&self, storage: &Self::Storage) -> bool {
        self.0.val_valid(storage)
    }
    fn key<'a>(&self, storage: &'a Self::Storage) -> Self::Key<'a> {
        self.0.key(storage)
    }
    fn val<'a>(&self, storage: &'a Self::Storage) -> Self::Val<'a> {
        self.0.val(storage)
    }
    fn get_key<'a>(&self, storage: &'a Self::Storage) -> Option<Self::Key<'a>> {
        self.0.get_key(storage)
    }
    fn get_val<'a>(&self, storage: &'a Self::Storage) -> Option<Self::Val<'a>> {
        self.0.get_val(storage)
    }
    fn map_times<L: FnMut(Self::TimeGat<'_>, Self::DiffGat<'_>)>(
        &mut self,
        storage: &Self::Storage,
        logic: L,
    ) {
        self.0.map_times(storage, logic)
    }
    fn step_key(&mut self, storage: &Self::Storage) {
        self.0.step_key(storage)
    }
    fn seek_key(&mut self, storage: &Self::Storage, key: Self::Key<'_>) {
        self.0.seek_key(storage, key)
    }
    fn step_val(&mut self, storage: &Self::Storage) {
        self.0.step_val(storage)
    }
    fn seek_val(&mut self, storage: &Self::Storage, val: Self::Val<'_>) {
        self.0.seek_val(storage, val)
    }
    fn rewind_keys(&mut self, storage: &Self::Storage) {
        self.0.rewind_keys(storage)
    }
    fn rewind_vals(&mut self, storage: &Self::Storage) {
        self.0.rewind_vals(storage)
    }
}

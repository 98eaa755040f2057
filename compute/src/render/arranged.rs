//! The arrangements the renderer builds, and the bytes they hold.
//!
//! Differential dataflow logs how many updates each trace gains and loses
//! (see [`crate::arrangements`]) but not how large they are. Every
//! arrangement the renderer builds is made here and, while a dataflow is
//! being built, registered with it as a [`SizeProbe`]. Once a second the
//! worker asks each probe for its bytes; a probe walks only the batches it
//! has not seen before. Batches are immutable, and building or merging one
//! cost as much as walking it, so accounting adds a constant factor to work
//! already done, never a pass over the whole trace.

use std::cell::RefCell;
use std::collections::HashMap;
use std::mem::size_of;
use std::rc::{Rc, Weak};

use differential_dataflow::difference::{Abelian, Semigroup};
use differential_dataflow::operators::arrange::{Arranged, TraceAgent};
use differential_dataflow::trace::implementations::ord_neu::{OrdKeyBatch, OrdValBatch};
use differential_dataflow::trace::implementations::spine_fueled::Spine;
use differential_dataflow::trace::implementations::{
    KeyBuilder, KeySpine, OffsetList, ValBatcher, ValBuilder, ValSpine, Vector,
};
use differential_dataflow::trace::{Trace, TraceReader};
use differential_dataflow::{ExchangeData, Hashable, VecCollection};

use super::Time;
use super::shared_batch::Shared;
use crate::error::DataflowError;
use crate::row::Row;

/// Heap bytes owned by a value, beyond its inline size.
pub(crate) trait HeapSize {
    /// Bytes this value owns on the heap.
    fn heap_size(&self) -> usize;
}

impl HeapSize for Row {
    fn heap_size(&self) -> usize {
        self.as_bytes().len()
    }
}

impl HeapSize for () {
    fn heap_size(&self) -> usize {
        0
    }
}

impl HeapSize for u64 {
    fn heap_size(&self) -> usize {
        0
    }
}

impl HeapSize for i64 {
    fn heap_size(&self) -> usize {
        0
    }
}

impl<A: HeapSize, B: HeapSize> HeapSize for (A, B) {
    fn heap_size(&self) -> usize {
        self.0.heap_size() + self.1.heap_size()
    }
}

impl<T: HeapSize> HeapSize for Result<T, DataflowError> {
    fn heap_size(&self) -> usize {
        match self {
            Ok(v) => v.heap_size(),
            Err(e) => e.code.len() + e.message.len(),
        }
    }
}

/// Reports the bytes one arrangement holds.
pub(crate) struct SizeProbe(Box<dyn FnMut() -> usize>);

impl SizeProbe {
    /// The arrangement's current size in bytes.
    pub fn bytes(&mut self) -> usize {
        (self.0)()
    }
}

thread_local! {
    /// Probes of the dataflow this worker thread is building, if any.
    static BUILDING: RefCell<Option<Vec<SizeProbe>>> = const { RefCell::new(None) };
}

/// Run `build` (which builds one dataflow) and return probes for the
/// arrangements it made.
pub(crate) fn collect_probes(build: impl FnOnce()) -> Vec<SizeProbe> {
    let outer = BUILDING.with(|b| b.borrow_mut().replace(Vec::new()));
    build();
    BUILDING
        .with(|b| std::mem::replace(&mut *b.borrow_mut(), outer))
        .unwrap_or_default()
}

fn register(probe: SizeProbe) {
    BUILDING.with(|b| {
        if let Some(probes) = b.borrow_mut().as_mut() {
            probes.push(probe);
        }
    });
}

/// A handle on a batch that a size probe can recognise on later passes
/// without keeping the batch alive: spines hold `Rc` batches, indexes
/// [`Shared`] ones.
pub(crate) trait TrackedBatch: 'static {
    /// The batch behind the handle.
    type Batch: 'static;
    /// A reference keeping the batch's allocation, not its contents.
    type Weak: 'static;
    /// The batch.
    fn batch(&self) -> &Self::Batch;
    /// Where it lives.
    fn address(&self) -> *const Self::Batch;
    /// A weak reference to it.
    fn weak(&self) -> Self::Weak;
}

impl<B: 'static> TrackedBatch for Rc<B> {
    type Batch = B;
    type Weak = Weak<B>;
    fn batch(&self) -> &B {
        self
    }
    fn address(&self) -> *const B {
        Rc::as_ptr(self)
    }
    fn weak(&self) -> Weak<B> {
        Rc::downgrade(self)
    }
}

/// A probe over `trace` measuring each batch with `measure` once.
///
/// The probe holds the trace's box, not a trace handle: it reads batches
/// for accounting only, so it must not hold back compaction (a handle
/// would) nor ask for a cursor (the trace may have closed).
fn track<Tr>(trace: &TraceAgent<Tr>, measure: fn(&<Tr::Batch as TrackedBatch>::Batch) -> usize)
where
    Tr: TraceReader<Time = Time> + Trace + 'static,
    Tr::Batch: TrackedBatch,
{
    type Seen<H> = HashMap<*const <H as TrackedBatch>::Batch, (<H as TrackedBatch>::Weak, usize)>;
    let trace = trace.trace_box_unstable();
    // Batches measured on the previous pass. The weak reference keeps a
    // dropped batch's allocation (not its contents), so its address cannot
    // be reused by a new batch while we remember it.
    let mut seen: Seen<Tr::Batch> = HashMap::new();
    register(SizeProbe(Box::new(move || {
        let mut now = HashMap::with_capacity(seen.len());
        trace.borrow().trace().map_spans(|span| {
            if let Some(batch) = &span.inner {
                let ptr = batch.address();
                let bytes = match seen.get(&ptr) {
                    Some((_, bytes)) => *bytes,
                    None => measure(batch.batch()),
                };
                now.insert(ptr, (batch.weak(), bytes));
            }
        });
        seen = now;
        seen.values().map(|(_, bytes)| bytes).sum()
    })));
}

fn offsets(list: &OffsetList) -> usize {
    list.smol.len() * size_of::<u32>() + list.chonk.len() * size_of::<u64>()
}

fn sized<T: HeapSize>(items: &[T]) -> usize {
    items.iter().map(|i| size_of::<T>() + i.heap_size()).sum()
}

/// A batch of a [`ValSpine`].
pub(crate) type ValBatch<K, V, R> = OrdValBatch<Vector<((K, V), Time, R)>>;
/// A spine of [`Shared`] `(key, value)` batches.
pub(crate) type SharedValSpine<K, V, R> = Spine<Shared<ValBatch<K, V, R>>>;
/// A batch of a [`KeySpine`].
type KeyBatch<K, R> = OrdKeyBatch<Vector<((K, ()), Time, R)>>;

fn val_batch_bytes<K, V, R>(batch: &ValBatch<K, V, R>) -> usize
where
    K: HeapSize + Ord + Clone + 'static,
    V: HeapSize + Ord + Clone + 'static,
    R: HeapSize + Semigroup + Ord + Clone + 'static,
{
    let s = &batch.storage;
    sized(&s.keys)
        + sized(&s.vals.vals)
        + offsets(&s.vals.offs)
        + s.upds.times.len() * size_of::<Time>()
        + sized(&s.upds.diffs)
        + offsets(&s.upds.offs)
}

fn key_batch_bytes<K, R>(batch: &KeyBatch<K, R>) -> usize
where
    K: HeapSize + Ord + Clone + 'static,
    R: HeapSize + Semigroup + Ord + Clone + 'static,
{
    let s = &batch.storage;
    sized(&s.keys)
        + s.upds.times.len() * size_of::<Time>()
        + sized(&s.upds.diffs)
        + offsets(&s.upds.offs)
}

/// `(key, value)` rows arranged by key, measured.
pub(crate) fn arrange_by_key<'s, K, V, R>(
    coll: VecCollection<'s, Time, (K, V), R>,
    name: &str,
) -> Arranged<'s, TraceAgent<ValSpine<K, V, Time, R>>>
where
    K: ExchangeData + Hashable + HeapSize,
    V: ExchangeData + HeapSize,
    R: ExchangeData + Semigroup + HeapSize,
{
    let arranged = coll.arrange_by_key_named(name);
    track(&arranged.trace, val_batch_bytes::<K, V, R>);
    arranged
}

/// `(key, value)` rows arranged by key in [`Shared`] batches, measured:
/// the arrangement of an index, whose batches sessions read directly.
pub(crate) fn arrange_by_key_shared<'s, K, V, R>(
    coll: VecCollection<'s, Time, (K, V), R>,
    name: &str,
) -> Arranged<'s, TraceAgent<SharedValSpine<K, V, R>>>
where
    K: ExchangeData + Hashable + HeapSize,
    V: ExchangeData + HeapSize,
    R: ExchangeData + Semigroup + HeapSize,
{
    let arranged = coll
        .arrange_named::<ValBatcher<K, V, Time, R>, SharedValSpine<K, V, R>>(name, ValBatcher::new);
    track(&arranged.trace, val_batch_bytes::<K, V, R>);
    arranged
}

/// Rows arranged by themselves, measured.
pub(crate) fn arrange_by_self<'s, K, R>(
    coll: VecCollection<'s, Time, K, R>,
    name: &str,
) -> Arranged<'s, TraceAgent<KeySpine<K, Time, R>>>
where
    K: ExchangeData + Hashable + HeapSize,
    R: ExchangeData + Semigroup + HeapSize,
{
    let arranged = coll.arrange_by_self_named(name);
    track(&arranged.trace, key_batch_bytes::<K, R>);
    arranged
}

/// `reduce_named`, with its input and output arrangements measured.
pub(crate) fn reduce<'s, K, V, V2, R, R2, L>(
    coll: VecCollection<'s, Time, (K, V), R>,
    name: &str,
    logic: L,
) -> VecCollection<'s, Time, (K, V2), R2>
where
    K: ExchangeData + Hashable + HeapSize,
    V: ExchangeData + HeapSize,
    R: ExchangeData + Semigroup + HeapSize,
    V2: differential_dataflow::Data + HeapSize,
    R2: Ord + Abelian + HeapSize + 'static,
    L: FnMut(&K, &[(&V, R)], &mut Vec<(V2, R2)>) + 'static,
{
    let arranged = arrange_by_key(coll, &format!("Arrange: {name}"));
    let reduced = arranged
        .reduce_abelian::<_, ValBuilder<K, V2, Time, R2>, ValSpine<K, V2, Time, R2>, _, _>(
            name,
            logic,
            |out, key, upds| {
                out.clear();
                out.extend(upds.drain(..).map(|(v, t, r)| ((key.clone(), v), t, r)));
            },
        );
    track(&reduced.trace, val_batch_bytes::<K, V2, R2>);
    reduced.as_collection(|k, v| (k.clone(), v.clone()))
}

/// `threshold_named`, with its input and output arrangements measured.
pub(crate) fn threshold<'s, K, R1, R2, F>(
    coll: VecCollection<'s, Time, K, R1>,
    name: &str,
    mut thresh: F,
) -> VecCollection<'s, Time, K, R2>
where
    K: ExchangeData + Hashable + HeapSize,
    R1: ExchangeData + Semigroup + HeapSize,
    R2: Ord + Abelian + HeapSize + 'static,
    F: FnMut(&K, &R1) -> R2 + 'static,
{
    let arranged = arrange_by_self(coll, &format!("Arrange: {name}"));
    let reduced = arranged
        .reduce_abelian::<_, KeyBuilder<K, Time, R2>, KeySpine<K, Time, R2>, _, _>(
            name,
            move |k, s, t| t.push(((), thresh(k, &s[0].1))),
            |out, key, upds| {
                out.clear();
                out.extend(upds.drain(..).map(|(v, t, r)| ((key.clone(), v), t, r)));
            },
        );
    track(&reduced.trace, key_batch_bytes::<K, R2>);
    reduced.as_collection(|k, _| k.clone())
}

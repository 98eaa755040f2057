//! The decoded-part cache: columns of parts read from blob storage are
//! kept decoded for the next read, up to a byte budget shared by every
//! collection; past it, the least recently used are dropped (and read from
//! their files again when next needed). Memory then holds what is hot, not
//! every part ever read, so a data directory larger than memory can be
//! served.
//!
//! The unit is one column of one part, not the part: a query reads only
//! the columns it uses, so a scan of four columns of a sixteen-column
//! table neither decodes nor keeps the other twelve, and the columns
//! queries do use stay cached when the whole table would not fit.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch};
use parking_lot::Mutex;

/// A part's blob key and a column index (of the updates schema).
type ColumnKey = (String, usize);

/// A decoded column and when it was last used.
struct Entry {
    array: ArrayRef,
    bytes: usize,
    tick: u64,
}

#[derive(Default)]
struct Inner {
    entries: BTreeMap<ColumnKey, Entry>,
    /// Columns by last use, oldest first.
    order: BTreeMap<u64, ColumnKey>,
    bytes: usize,
    next_tick: u64,
}

/// Decoded part columns by blob key and column, least recently used
/// dropped past `capacity` bytes. An array handed out stays alive while
/// its reader holds it, even if the cache drops it meanwhile.
pub(crate) struct PartCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for PartCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.lock();
        f.debug_struct("PartCache")
            .field("capacity", &self.capacity)
            .field("bytes", &inner.bytes)
            .field("columns", &inner.entries.len())
            .finish()
    }
}

impl PartCache {
    /// A cache holding at most `capacity` bytes of decoded columns.
    pub fn new(capacity: usize) -> Self {
        PartCache {
            capacity,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Column `column` of part `key`, if cached (it becomes the most
    /// recently used).
    pub fn get(&self, key: &str, column: usize) -> Option<ArrayRef> {
        let mut inner = self.inner.lock();
        let tick = inner.next_tick;
        let id = (key.to_string(), column);
        let entry = inner.entries.get_mut(&id)?;
        let old = std::mem::replace(&mut entry.tick, tick);
        let array = Arc::clone(&entry.array);
        inner.next_tick += 1;
        inner.order.remove(&old);
        inner.order.insert(tick, id);
        Some(array)
    }

    /// Keep column `column` of part `key` decoded, dropping the least
    /// recently used columns beyond the capacity. A column larger than the
    /// whole capacity is not kept.
    pub fn insert(&self, key: &str, column: usize, array: ArrayRef) {
        let bytes = array.get_array_memory_size();
        let id = (key.to_string(), column);
        let mut inner = self.inner.lock();
        remove_locked(&mut inner, &id);
        if bytes > self.capacity {
            return;
        }
        while inner.bytes + bytes > self.capacity {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            if let Some(e) = inner.entries.remove(&oldest) {
                inner.bytes -= e.bytes;
            }
        }
        let tick = inner.next_tick;
        inner.next_tick += 1;
        inner.order.insert(tick, id.clone());
        inner.bytes += bytes;
        inner.entries.insert(id, Entry { array, bytes, tick });
    }

    /// Keep every column of a part just written (its batch of updates).
    pub fn insert_batch(&self, key: &str, batch: &RecordBatch) {
        for (column, array) in batch.columns().iter().enumerate() {
            self.insert(key, column, Arc::clone(array));
        }
    }

    /// Forget every column of part `key` (it was compacted away or its
    /// shard dropped).
    pub fn remove(&self, key: &str) {
        let mut inner = self.inner.lock();
        let ids: Vec<ColumnKey> = inner
            .entries
            .range((key.to_string(), 0)..=(key.to_string(), usize::MAX))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            remove_locked(&mut inner, &id);
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }
}

fn remove_locked(inner: &mut Inner, id: &ColumnKey) {
    if let Some(e) = inner.entries.remove(id) {
        inner.order.remove(&e.tick);
        inner.bytes -= e.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;

    fn column(rows: usize) -> ArrayRef {
        Arc::new(Int64Array::from(vec![0i64; rows]))
    }

    #[test]
    fn least_recently_used_columns_go_first_and_bytes_stay_within_capacity() {
        let one = column(1_000).get_array_memory_size();
        let cache = PartCache::new(3 * one);
        for k in ["a", "b", "c"] {
            cache.insert(k, 0, column(1_000));
        }
        assert!(cache.get("a", 0).is_some(), "a is now the most recent");
        cache.insert("d", 0, column(1_000));
        assert!(cache.get("b", 0).is_none(), "b was the least recently used");
        for k in ["a", "c", "d"] {
            assert!(cache.get(k, 0).is_some(), "{k} stays");
        }
        assert_eq!(cache.bytes(), 3 * one);
        // Replacing a column does not count it twice; removing frees it.
        cache.insert("d", 0, column(1_000));
        assert_eq!(cache.bytes(), 3 * one);
        cache.remove("c");
        assert_eq!(cache.bytes(), 2 * one);
        // A column larger than the capacity is never kept.
        cache.insert("huge", 0, column(10_000));
        assert!(cache.get("huge", 0).is_none());
        assert_eq!(cache.bytes(), 2 * one);
    }

    #[test]
    fn columns_of_a_part_are_kept_and_removed_together_but_used_apart() {
        let one = column(100).get_array_memory_size();
        let cache = PartCache::new(10 * one);
        for c in 0..3 {
            cache.insert("p", c, column(100));
        }
        cache.insert("pq", 0, column(100));
        assert!(cache.get("p", 1).is_some());
        assert!(
            cache.get("p", 3).is_none(),
            "a column never read is not cached"
        );
        // Removing a part takes all its columns, not a part whose key it
        // prefixes.
        cache.remove("p");
        assert!((0..3).all(|c| cache.get("p", c).is_none()));
        assert!(cache.get("pq", 0).is_some());
        assert_eq!(cache.bytes(), one);
    }
}

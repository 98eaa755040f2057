//! The decoded-part cache: parts read from blob storage are kept decoded
//! for the next read, up to a byte budget shared by every collection; past
//! it, the least recently used are dropped (and read from their files
//! again when next needed). Memory then holds what is hot, not every part
//! ever read, so a data directory larger than memory can be served.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::RecordBatch;
use parking_lot::Mutex;

/// A decoded part and when it was last used.
struct Entry {
    batch: Arc<RecordBatch>,
    bytes: usize,
    tick: u64,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    /// Part keys by last use, oldest first.
    order: BTreeMap<u64, String>,
    bytes: usize,
    next_tick: u64,
}

/// Decoded parts by blob key, least recently used dropped past `capacity`
/// bytes. A batch handed out stays alive while its reader holds it, even
/// if the cache drops it meanwhile.
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
            .field("parts", &inner.entries.len())
            .finish()
    }
}

impl PartCache {
    /// A cache holding at most `capacity` bytes of decoded parts.
    pub fn new(capacity: usize) -> Self {
        PartCache {
            capacity,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The part `key`, if cached (it becomes the most recently used).
    pub fn get(&self, key: &str) -> Option<Arc<RecordBatch>> {
        let mut inner = self.inner.lock();
        let tick = inner.next_tick;
        let entry = inner.entries.get_mut(key)?;
        let old = std::mem::replace(&mut entry.tick, tick);
        let batch = Arc::clone(&entry.batch);
        inner.next_tick += 1;
        inner.order.remove(&old);
        inner.order.insert(tick, key.to_string());
        Some(batch)
    }

    /// Keep part `key` decoded, dropping the least recently used parts
    /// beyond the capacity. A part larger than the whole capacity is not
    /// kept.
    pub fn insert(&self, key: &str, batch: Arc<RecordBatch>) {
        let bytes = batch.get_array_memory_size();
        let mut inner = self.inner.lock();
        remove_locked(&mut inner, key);
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
        inner.order.insert(tick, key.to_string());
        inner.bytes += bytes;
        inner
            .entries
            .insert(key.to_string(), Entry { batch, bytes, tick });
    }

    /// Forget part `key` (it was compacted away or its shard dropped).
    pub fn remove(&self, key: &str) {
        remove_locked(&mut self.inner.lock(), key);
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }
}

fn remove_locked(inner: &mut Inner, key: &str) {
    if let Some(e) = inner.entries.remove(key) {
        inner.order.remove(&e.tick);
        inner.bytes -= e.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};

    fn batch(rows: usize) -> Arc<RecordBatch> {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        Arc::new(
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![0i64; rows]))])
                .expect("batch"),
        )
    }

    #[test]
    fn least_recently_used_parts_go_first_and_bytes_stay_within_capacity() {
        let one = batch(1_000).get_array_memory_size();
        let cache = PartCache::new(3 * one);
        for k in ["a", "b", "c"] {
            cache.insert(k, batch(1_000));
        }
        assert!(cache.get("a").is_some(), "a is now the most recent");
        cache.insert("d", batch(1_000));
        assert!(cache.get("b").is_none(), "b was the least recently used");
        for k in ["a", "c", "d"] {
            assert!(cache.get(k).is_some(), "{k} stays");
        }
        assert_eq!(cache.bytes(), 3 * one);
        // Replacing a key does not count it twice; removing frees it.
        cache.insert("d", batch(1_000));
        assert_eq!(cache.bytes(), 3 * one);
        cache.remove("c");
        assert_eq!(cache.bytes(), 2 * one);
        // A part larger than the capacity is never kept.
        cache.insert("huge", batch(10_000));
        assert!(cache.get("huge").is_none());
        assert_eq!(cache.bytes(), 2 * one);
    }
}

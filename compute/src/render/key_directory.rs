//! Hash directories over the keys of an index's published batches.
//!
//! A keyed peek finds its key in each of the key's worker's batches. A
//! batch keeps its keys sorted in one vector of separately allocated rows,
//! so a binary search over a large batch touches two cold cache lines per
//! probe (the vector's slot, then the row's bytes) for most of its
//! `log2(keys)` probes: in a profile of prepared lookups at 8 clients
//! over an index of 100,000 keys, the seek was the largest piece of the
//! server's own work. A [`KeyDirectory`] is an open-addressing table from
//! a key's hash to its position, which finds a key in about one and a half
//! probes.
//!
//! Batches are immutable, so a directory is built once per batch and
//! stays right for the batch's life. It is built lazily, by the session
//! whose probe of the batch is the [`BUILD_AFTER_PROBES`]th
//! ([`LazyDirectory`]): batches only probed a few times before a merge
//! replaces them never pay for one, and the worker that maintains the
//! index never does. Small batches are searched as they are (their keys
//! stay in cache).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use differential_dataflow::Hashable;

use crate::row::Row;

/// Batches with fewer keys are binary-searched: their probes hit cache.
pub(crate) const MIN_KEYS: usize = 4096;

/// Probes of a batch before a session builds its directory.
pub(crate) const BUILD_AFTER_PROBES: u32 = 16;

/// An open-addressing table of a sorted key slice's positions, by hash.
pub(crate) struct KeyDirectory {
    /// Each slot is a key's position plus one; zero is empty. At most half
    /// the slots are full.
    slots: Box<[u32]>,
    /// The hash's top bits index the table: timely's exchange routes keys
    /// to workers by the low bits, so within one worker's batches those
    /// are all alike.
    shift: u32,
}

impl KeyDirectory {
    /// The directory of `keys` (`None` when there are too many keys to
    /// number in 32 bits).
    pub(crate) fn build(keys: &[Row]) -> Option<KeyDirectory> {
        if keys.len() >= u32::MAX as usize {
            return None;
        }
        let size = (keys.len().max(1) * 2).next_power_of_two();
        let mut slots = vec![0u32; size].into_boxed_slice();
        let shift = 64 - size.trailing_zeros();
        let mask = size - 1;
        for (position, key) in keys.iter().enumerate() {
            let mut slot = Self::home(key, shift);
            while slots[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            // `position < keys.len() < u32::MAX` (checked above).
            slots[slot] = position as u32 + 1;
        }
        Some(KeyDirectory { slots, shift })
    }

    /// The first slot `key` may sit in.
    fn home(key: &Row, shift: u32) -> usize {
        // `shift` is at least 1 (the table has at least two slots), and the
        // result is below the table's size.
        (key.hashed() >> shift) as usize
    }

    /// Where `key` is in `keys` (the slice this directory was built from).
    pub(crate) fn find(&self, keys: &[Row], key: &Row) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let mut slot = Self::home(key, self.shift);
        loop {
            let entry = self.slots[slot];
            if entry == 0 {
                return None;
            }
            let position = entry as usize - 1;
            if keys.get(position) == Some(key) {
                return Some(position);
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Bytes the directory holds.
    pub(crate) fn heap_size(&self) -> usize {
        self.slots.len() * size_of::<u32>()
    }
}

/// A batch's directory, built by the session whose probe makes it worth
/// having (see the module's documentation).
#[derive(Default)]
pub(crate) struct LazyDirectory {
    probes: AtomicU32,
    directory: OnceLock<Option<KeyDirectory>>,
}

impl LazyDirectory {
    /// Where `key` is in `keys`, the sorted keys of the batch this
    /// directory belongs to.
    pub(crate) fn find(&self, keys: &[Row], key: &Row) -> Option<usize> {
        if let Some(built) = self.directory.get() {
            return match built {
                Some(directory) => directory.find(keys, key),
                None => keys.binary_search(key).ok(),
            };
        }
        if keys.len() >= MIN_KEYS
            && self.probes.fetch_add(1, Ordering::Relaxed) + 1 >= BUILD_AFTER_PROBES
        {
            let built = self.directory.get_or_init(|| {
                let start = std::time::Instant::now();
                let directory = KeyDirectory::build(keys);
                tracing::debug!(
                    keys = keys.len(),
                    bytes = directory.as_ref().map_or(0, KeyDirectory::heap_size),
                    elapsed = ?start.elapsed(),
                    "built an index batch's key directory"
                );
                directory
            });
            if let Some(directory) = built {
                return directory.find(keys, key);
            }
        }
        keys.binary_search(key).ok()
    }

    /// Bytes the directory holds once built.
    pub(crate) fn heap_size(&self) -> usize {
        self.directory
            .get()
            .and_then(Option::as_ref)
            .map_or(0, KeyDirectory::heap_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(i: u64) -> Row {
        Row::from_bytes(i.to_be_bytes().to_vec())
    }

    #[test]
    fn finds_every_key_and_no_other() {
        for n in [0usize, 1, 2, 3, 100, 5000] {
            // Even numbers only, sorted: odd ones are absent.
            let keys: Vec<Row> = (0..n as u64).map(|i| row(i * 2)).collect();
            let directory = KeyDirectory::build(&keys).expect("small enough");
            for (i, key) in keys.iter().enumerate() {
                assert_eq!(directory.find(&keys, key), Some(i), "n = {n}");
            }
            for i in 0..n as u64 {
                assert_eq!(directory.find(&keys, &row(i * 2 + 1)), None);
            }
            assert!(directory.heap_size() >= 2 * n * size_of::<u32>());
        }
    }

    #[test]
    fn lazy_directory_answers_as_a_binary_search_before_and_after_building() {
        let keys: Vec<Row> = (0..MIN_KEYS as u64 * 2).map(|i| row(i * 3)).collect();
        let lazy = LazyDirectory::default();
        for probe in 0..(BUILD_AFTER_PROBES as u64 * 3) {
            let present = row(probe * 3);
            let absent = row(probe * 3 + 1);
            assert_eq!(lazy.find(&keys, &present), Some(probe as usize));
            assert_eq!(lazy.find(&keys, &absent), None);
        }
        assert!(lazy.heap_size() > 0, "built after enough probes");
        let small: Vec<Row> = (0..10).map(row).collect();
        let lazy = LazyDirectory::default();
        for _ in 0..BUILD_AFTER_PROBES * 2 {
            assert_eq!(lazy.find(&small, &row(7)), Some(7));
        }
        assert_eq!(
            lazy.heap_size(),
            0,
            "small batches are searched as they are"
        );
    }
}

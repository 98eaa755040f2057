//! A linearizable log of versioned values per key, changed only by
//! compare-and-set.

mod file;
mod log;

use crate::error::Result;

pub use file::FileConsensus;

/// Sequence number of an entry in a [`Consensus`] key's log.
pub type SeqNo = u64;

/// One entry of a key's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionedData {
    /// Position in the key's log; strictly increasing by one per write.
    pub seqno: SeqNo,
    /// The entry's payload.
    pub data: Vec<u8>,
}

/// Outcome of [`Consensus::compare_and_set`].
#[derive(Debug, PartialEq, Eq)]
pub enum CasResult {
    /// The entry was appended.
    Committed,
    /// Another writer got there first; this is the current head.
    Mismatch(Option<SeqNo>),
}

/// Durable metadata for shards, the catalog, the oracle and the epoch.
///
/// Each key holds a log of entries. A write names the seqno it expects as the
/// current head and appends `head + 1` only if nobody else did first; this
/// single primitive is what makes fencing and every metadata change safe when
/// two processes share a data directory.
pub trait Consensus: Send + Sync + std::fmt::Debug {
    /// The newest entry of `key`, if any.
    fn head(&self, key: &str) -> Result<Option<VersionedData>>;
    /// Append `new` if the head of `key` is `expected` (`None`: empty log).
    /// `new.seqno` must be `expected + 1` (or 1 for an empty log).
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<SeqNo>,
        new: VersionedData,
    ) -> Result<CasResult>;
    /// Entries of `key` with seqno ≥ `from`, oldest first.
    fn scan(&self, key: &str, from: SeqNo) -> Result<Vec<VersionedData>>;
    /// Drop entries older than `seqno`; the head is never removed.
    fn truncate(&self, key: &str, seqno: SeqNo) -> Result<usize>;
    /// Whether `key`'s head may no longer be `seqno`: never `false` once
    /// it has moved on, and cheaper than [`Consensus::head`], for checks
    /// made on every commit (a `true` costs the caller a full read).
    fn may_have_moved(&self, key: &str, seqno: SeqNo) -> Result<bool> {
        Ok(self.head(key)?.is_none_or(|h| h.seqno != seqno))
    }
    /// Every key that starts with `prefix`.
    fn list_keys(&self, prefix: &str) -> Result<Vec<String>>;
    /// Remove a key and its whole log (for dropped collections).
    fn delete_key(&self, key: &str) -> Result<()>;
}

/// An entry holding `data`'s bytes, for tests.
#[cfg(test)]
fn vd(seqno: SeqNo, data: &str) -> VersionedData {
    VersionedData {
        seqno,
        data: data.as_bytes().to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn compare_and_set_appends_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let c = FileConsensus::open(dir.path()).unwrap();
        assert_eq!(c.head("k").unwrap(), None);
        assert_eq!(
            c.compare_and_set("k", None, vd(1, "a")).unwrap(),
            CasResult::Committed
        );
        assert_eq!(
            c.compare_and_set("k", None, vd(1, "b")).unwrap(),
            CasResult::Mismatch(Some(1))
        );
        assert_eq!(
            c.compare_and_set("k", Some(1), vd(2, "c")).unwrap(),
            CasResult::Committed
        );
        assert!(c.compare_and_set("k", Some(2), vd(5, "x")).is_err());
        assert_eq!(c.head("k").unwrap(), Some(vd(2, "c")));
        assert_eq!(c.scan("k", 0).unwrap(), vec![vd(1, "a"), vd(2, "c")]);
        assert_eq!(c.truncate("k", 2).unwrap(), 1);
        assert_eq!(c.scan("k", 0).unwrap(), vec![vd(2, "c")]);
        assert!(c.truncate("k", 3).is_err());
        // An empty-log CAS must not succeed after truncation removed seqno 1.
        assert_eq!(
            c.compare_and_set("k", None, vd(1, "z")).unwrap(),
            CasResult::Mismatch(Some(2))
        );
    }

    #[test]
    fn list_and_delete_keys() {
        let dir = tempfile::tempdir().unwrap();
        let c = FileConsensus::open(dir.path()).unwrap();
        c.compare_and_set("shard/u1", None, vd(1, "a")).unwrap();
        c.compare_and_set("shard/u2", None, vd(1, "a")).unwrap();
        c.compare_and_set("epoch", None, vd(1, "a")).unwrap();
        assert_eq!(c.list_keys("shard/").unwrap(), vec!["shard/u1", "shard/u2"]);
        c.delete_key("shard/u1").unwrap();
        assert_eq!(c.list_keys("shard/").unwrap(), vec!["shard/u2"]);
    }

    #[test]
    fn concurrent_writers_never_both_win() {
        let dir = tempfile::tempdir().unwrap();
        let c = Arc::new(FileConsensus::open(dir.path()).unwrap());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let c = Arc::clone(&c);
                std::thread::spawn(move || {
                    let mut wins = 0;
                    for _ in 0..50 {
                        let head = c.head("race").unwrap().map(|v| v.seqno);
                        let next = head.map_or(1, |s| s + 1);
                        if c.compare_and_set("race", head, vd(next, &format!("{t}")))
                            .unwrap()
                            == CasResult::Committed
                        {
                            wins += 1;
                        }
                    }
                    wins
                })
            })
            .collect();
        let wins: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        let entries = c.scan("race", 0).unwrap();
        assert_eq!(entries.len(), wins);
        for (i, e) in entries.iter().enumerate() {
            assert_eq!(e.seqno, i as u64 + 1);
        }
    }

    #[test]
    fn two_stores_on_one_directory_see_each_others_writes() {
        // As an old process and the one fencing it do.
        let dir = tempfile::tempdir().unwrap();
        let a = FileConsensus::open(dir.path()).unwrap();
        let b = FileConsensus::open(dir.path()).unwrap();
        a.compare_and_set("k", None, vd(1, "a")).unwrap();
        assert!(!a.may_have_moved("k", 1).unwrap());
        assert_eq!(b.head("k").unwrap(), Some(vd(1, "a")));
        assert_eq!(
            b.compare_and_set("k", Some(1), vd(2, "b")).unwrap(),
            CasResult::Committed
        );
        assert!(a.may_have_moved("k", 1).unwrap());
        assert_eq!(
            a.compare_and_set("k", Some(1), vd(2, "c")).unwrap(),
            CasResult::Mismatch(Some(2))
        );
        // A truncation by one (and the rewrite it may bring) is seen by the
        // other.
        for s in 3..200 {
            b.compare_and_set("k", Some(s - 1), vd(s, &"x".repeat(1000)))
                .unwrap();
            b.truncate("k", s).unwrap();
        }
        assert_eq!(a.scan("k", 0).unwrap().len(), 1);
        assert_eq!(a.head("k").unwrap().map(|v| v.seqno), Some(199));
        b.delete_key("k").unwrap();
        assert_eq!(a.head("k").unwrap(), None);
        assert!(a.list_keys("").unwrap().is_empty());
        // And made again by the other.
        assert_eq!(
            a.compare_and_set("k", None, vd(1, "again")).unwrap(),
            CasResult::Committed
        );
        assert_eq!(b.head("k").unwrap(), Some(vd(1, "again")));
    }

    #[test]
    fn a_directory_of_entry_files_is_converted_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("shard").join("u1");
        std::fs::create_dir_all(&key).unwrap();
        for (seqno, data) in [(4, "d"), (5, "e"), (6, "f")] {
            std::fs::write(key.join(format!("e-{seqno:020}")), data).unwrap();
        }
        std::fs::write(key.join(".tmp-leftover"), "junk").unwrap();
        let c = FileConsensus::open(dir.path()).unwrap();
        assert_eq!(c.list_keys("shard/").unwrap(), vec!["shard/u1"]);
        assert_eq!(
            c.scan("shard/u1", 0).unwrap(),
            vec![vd(4, "d"), vd(5, "e"), vd(6, "f")]
        );
        assert_eq!(
            c.compare_and_set("shard/u1", Some(6), vd(7, "g")).unwrap(),
            CasResult::Committed
        );
        let mut names: Vec<String> = std::fs::read_dir(&key)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, vec![".lock", "log"]);
    }

    #[test]
    fn a_replaced_log_holds_exactly_the_entries_given() {
        let dir = tempfile::tempdir().unwrap();
        let c = FileConsensus::open(dir.path()).unwrap();
        c.compare_and_set("k", None, vd(1, "a")).unwrap();
        c.compare_and_set("k", Some(1), vd(2, "b")).unwrap();
        c.replace_log("k", &[vd(1, "A"), vd(2, "B")]).unwrap();
        let other = FileConsensus::open(dir.path()).unwrap();
        assert_eq!(other.scan("k", 0).unwrap(), vec![vd(1, "A"), vd(2, "B")]);
        assert!(c.replace_log("k", &[vd(1, "A"), vd(3, "C")]).is_err());
    }
}

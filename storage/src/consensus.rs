//! A linearizable log of versioned values per key, changed only by
//! compare-and-set.

use std::fs;
use std::io::ErrorKind;
use std::path::PathBuf;

use crate::blob::validate_key;
use crate::error::{Result, StorageError};
use crate::fsutil::{remove_temps, sync_dir, write_temp};

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

/// [`Consensus`] on a local directory.
///
/// Each key is a directory and each entry a file named by its zero-padded
/// seqno. Writers hold an exclusive `flock` on the key while they check the
/// head and append; an entry is written to a temporary file, fsynced, then
/// *hard-linked* to its final name (`link(2)` never overwrites), so readers,
/// who take no lock, only ever see complete entries.
#[derive(Debug)]
pub struct FileConsensus {
    root: PathBuf,
}

impl FileConsensus {
    /// Open (creating if needed) a consensus store rooted at `root`.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        fs::create_dir_all(&root)?;
        Ok(FileConsensus { root })
    }

    fn dir(&self, key: &str) -> Result<PathBuf> {
        validate_key(key)?;
        Ok(self.root.join(key))
    }

    fn seqnos(&self, key: &str) -> Result<Vec<SeqNo>> {
        let dir = self.dir(key)?;
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(e.into()),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if let Some(n) = name
                .strip_prefix("e-")
                .and_then(|n| n.parse::<SeqNo>().ok())
            {
                out.push(n);
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Serialize writers of one key across threads and processes: the check
    /// of the head and the append happen under an exclusive `flock`, and so
    /// does truncation (which would otherwise free a seqno a slow writer could
    /// then claim out of order).
    fn lock(&self, dir: &std::path::Path) -> Result<fs::File> {
        fs::create_dir_all(dir)?;
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(".lock"))?;
        file.lock()?;
        Ok(file)
    }

    fn read_entry(&self, key: &str, seqno: SeqNo) -> Result<Option<VersionedData>> {
        let path = self.dir(key)?.join(entry_name(seqno));
        match fs::read(path) {
            Ok(data) => Ok(Some(VersionedData { seqno, data })),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

fn entry_name(seqno: SeqNo) -> String {
    format!("e-{seqno:020}")
}

impl Consensus for FileConsensus {
    fn head(&self, key: &str) -> Result<Option<VersionedData>> {
        // An entry listed may be truncated before we read it, but the head is
        // never truncated, so retrying converges.
        loop {
            let Some(&last) = self.seqnos(key)?.last() else {
                return Ok(None);
            };
            if let Some(entry) = self.read_entry(key, last)? {
                return Ok(Some(entry));
            }
        }
    }

    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<SeqNo>,
        new: VersionedData,
    ) -> Result<CasResult> {
        let want = expected.map_or(1, |s| s + 1);
        if new.seqno != want {
            return Err(StorageError::InvalidUsage(format!(
                "compare_and_set on {key}: new seqno {} must follow expected {expected:?}",
                new.seqno
            )));
        }
        let dir = self.dir(key)?;
        let _lock = self.lock(&dir)?;
        let current = self.seqnos(key)?.last().copied();
        if current != expected {
            return Ok(CasResult::Mismatch(current));
        }
        let tmp = write_temp(&dir, &new.data)?;
        let result = fs::hard_link(&tmp, dir.join(entry_name(new.seqno)));
        let _ = fs::remove_file(&tmp);
        match result {
            Ok(()) => {
                sync_dir(&dir)?;
                Ok(CasResult::Committed)
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                Ok(CasResult::Mismatch(self.seqnos(key)?.last().copied()))
            }
            Err(e) => Err(e.into()),
        }
    }

    fn scan(&self, key: &str, from: SeqNo) -> Result<Vec<VersionedData>> {
        let mut out = Vec::new();
        for seqno in self.seqnos(key)?.into_iter().filter(|s| *s >= from) {
            if let Some(entry) = self.read_entry(key, seqno)? {
                out.push(entry);
            }
        }
        Ok(out)
    }

    /// Two existence checks instead of a listing: an entry is linked in
    /// before any older one is removed, and truncation removes in
    /// ascending order, so while `seqno` is the head its entry exists and
    /// the next does not, and once it has moved on, either the next exists
    /// or `seqno`'s is gone.
    fn may_have_moved(&self, key: &str, seqno: SeqNo) -> Result<bool> {
        let dir = self.dir(key)?;
        Ok(!dir.join(entry_name(seqno)).try_exists()?
            || dir.join(entry_name(seqno + 1)).try_exists()?)
    }

    fn truncate(&self, key: &str, seqno: SeqNo) -> Result<usize> {
        let seqnos = self.seqnos(key)?;
        let head = seqnos.last().copied().unwrap_or(0);
        if seqno > head {
            return Err(StorageError::InvalidUsage(format!(
                "truncate {key} to {seqno} past head {head}"
            )));
        }
        let dir = self.dir(key)?;
        let _lock = self.lock(&dir)?;
        let mut removed = 0;
        for s in seqnos.into_iter().filter(|s| *s < seqno) {
            match fs::remove_file(dir.join(entry_name(s))) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        remove_temps(&dir)?;
        Ok(removed)
    }

    fn list_keys(&self, prefix: &str) -> Result<Vec<String>> {
        // A key is a directory holding at least one entry file.
        let mut out = Vec::new();
        let mut stack = vec![(self.root.clone(), String::new())];
        while let Some((dir, rel)) = stack.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            let mut has_entries = false;
            for entry in entries {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if entry.file_type()?.is_dir() {
                    let child = if rel.is_empty() {
                        name
                    } else {
                        format!("{rel}/{name}")
                    };
                    stack.push((entry.path(), child));
                } else if name.starts_with("e-") {
                    has_entries = true;
                }
            }
            if has_entries && !rel.is_empty() && rel.starts_with(prefix) {
                out.push(rel);
            }
        }
        out.sort();
        Ok(out)
    }

    fn delete_key(&self, key: &str) -> Result<()> {
        let dir = self.dir(key)?;
        let lock = self.lock(&dir)?;
        for s in self.seqnos(key)? {
            match fs::remove_file(dir.join(entry_name(s))) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        remove_temps(&dir)?;
        let _ = fs::remove_file(dir.join(".lock"));
        drop(lock);
        let _ = fs::remove_dir(&dir);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn vd(seqno: SeqNo, data: &str) -> VersionedData {
        VersionedData {
            seqno,
            data: data.as_bytes().to_vec(),
        }
    }

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
}

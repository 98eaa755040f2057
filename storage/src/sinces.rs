//! The durable record of every collection's logical since.
//!
//! A collection's logical since (the earliest time reads may use) moves on
//! every maintenance tick, far more often than compaction rewrites its
//! shard, so the shard's own durable since trails it. Were a restart to
//! start from the shard's since, the since would go back and `AS OF` would
//! accept times it had refused before the crash. One consensus entry holds
//! the sinces of all collections, written once per tick in which any moved
//! (one small fsync a tick, however many collections there are); boot
//! starts each collection at the larger of this record and its shard's
//! since.

use std::collections::BTreeMap;

use freshet_repr::{GlobalId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::consensus::{CasResult, SeqNo, VersionedData};
use crate::epoch::{CLAIM_ATTEMPTS, Fence};
use crate::error::{Result, StorageError};

/// Consensus key holding the record.
pub const SINCES_KEY: &str = "sinces";

#[derive(Serialize, Deserialize)]
struct PersistedSinces {
    epoch: u64,
    sinces: Vec<(GlobalId, Timestamp)>,
}

/// The record as this process last read or wrote it.
#[derive(Debug)]
pub(crate) struct SinceLog {
    fence: Fence,
    seqno: Option<SeqNo>,
    recorded: BTreeMap<GlobalId, Timestamp>,
}

impl SinceLog {
    /// Read the record (an older process's, or empty).
    pub fn open(fence: Fence) -> Result<Self> {
        let mut log = SinceLog {
            fence,
            seqno: None,
            recorded: BTreeMap::new(),
        };
        log.reload()?;
        Ok(log)
    }

    fn reload(&mut self) -> Result<()> {
        let head = self.fence.consensus().head(SINCES_KEY)?;
        let Some(head) = head else {
            self.seqno = None;
            return Ok(());
        };
        let persisted: PersistedSinces = serde_json::from_slice(&head.data)
            .map_err(|e| StorageError::Corruption(format!("recorded sinces: {e}")))?;
        if persisted.epoch > self.fence.epoch() {
            return Err(StorageError::Fenced {
                mine: self.fence.epoch(),
                current: persisted.epoch,
            });
        }
        for (id, since) in persisted.sinces {
            let t = self.recorded.entry(id).or_insert(since);
            *t = (*t).max(since);
        }
        self.seqno = Some(head.seqno);
        Ok(())
    }

    /// The since recorded for `id`, if any.
    pub fn recorded(&self, id: GlobalId) -> Option<Timestamp> {
        self.recorded.get(&id).copied()
    }

    /// Record the sinces of the live collections (others are forgotten).
    /// A since never goes back: a smaller value than the one recorded
    /// keeps the recorded one. Writes only when something changed.
    pub fn record(&mut self, current: BTreeMap<GlobalId, Timestamp>) -> Result<()> {
        for _ in 0..CLAIM_ATTEMPTS {
            let mut next = current.clone();
            for (id, t) in next.iter_mut() {
                if let Some(r) = self.recorded.get(id) {
                    *t = (*t).max(*r);
                }
            }
            if next == self.recorded && self.seqno.is_some() {
                return Ok(());
            }
            let data = serde_json::to_vec(&PersistedSinces {
                epoch: self.fence.epoch(),
                sinces: next.iter().map(|(id, t)| (*id, *t)).collect(),
            })
            .map_err(|e| StorageError::Corruption(e.to_string()))?;
            let seqno = self.seqno.map_or(1, |s| s + 1);
            let consensus = self.fence.consensus();
            match consensus.compare_and_set(
                SINCES_KEY,
                self.seqno,
                VersionedData { seqno, data },
            )? {
                CasResult::Committed => {
                    if let Some(s) = self.seqno {
                        consensus.truncate(SINCES_KEY, s + 1)?;
                    }
                    self.seqno = Some(seqno);
                    self.recorded = next;
                    return Ok(());
                }
                CasResult::Mismatch(_) => {
                    // An older process wrote since we read: unless it
                    // fenced us, take its values in (never going back) and
                    // try again.
                    self.fence.check()?;
                    self.reload()?;
                }
            }
        }
        Err(StorageError::Corruption(
            "the recorded sinces kept changing under this epoch".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consensus::{Consensus, FileConsensus};
    use std::sync::Arc;

    #[test]
    fn sinces_survive_a_restart_and_never_go_back() {
        let dir = tempfile::tempdir().unwrap();
        let c: Arc<dyn Consensus> = Arc::new(FileConsensus::open(dir.path()).unwrap());
        let a = GlobalId::User(1);
        let b = GlobalId::User(2);
        let mut log = SinceLog::open(Fence::acquire(Arc::clone(&c)).unwrap()).unwrap();
        assert_eq!(log.recorded(a), None);
        log.record(BTreeMap::from([(a, 100), (b, 50)])).unwrap();
        // A smaller since is not recorded over a larger one.
        log.record(BTreeMap::from([(a, 90), (b, 60)])).unwrap();

        let mut next = SinceLog::open(Fence::acquire(Arc::clone(&c)).unwrap()).unwrap();
        assert_eq!(next.recorded(a), Some(100));
        assert_eq!(next.recorded(b), Some(60));
        // Dropped collections are forgotten at the next write.
        next.record(BTreeMap::from([(a, 100)])).unwrap();
        let last = SinceLog::open(Fence::acquire(Arc::clone(&c)).unwrap()).unwrap();
        assert_eq!(last.recorded(b), None);
    }

    #[test]
    fn an_older_process_is_fenced_off_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let c: Arc<dyn Consensus> = Arc::new(FileConsensus::open(dir.path()).unwrap());
        let a = GlobalId::User(1);
        let mut old = SinceLog::open(Fence::acquire(Arc::clone(&c)).unwrap()).unwrap();
        old.record(BTreeMap::from([(a, 10)])).unwrap();
        let mut new = SinceLog::open(Fence::acquire(Arc::clone(&c)).unwrap()).unwrap();
        new.record(BTreeMap::from([(a, 20)])).unwrap();
        let err = old.record(BTreeMap::from([(a, 30)])).unwrap_err();
        assert!(err.is_fenced(), "{err}");
    }
}

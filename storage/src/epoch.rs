//! Fencing: which process owns the data directory.

use std::sync::Arc;

use crate::consensus::{CasResult, Consensus, SeqNo, VersionedData};
use crate::error::{Result, StorageError};

/// Consensus key holding the current epoch.
pub const EPOCH_KEY: &str = "epoch";

/// How many times a newly fenced process re-reads a key (a shard, the
/// oracle, the catalog log) it claims when an older process changed it
/// between the read and the claim. Each retry follows one change by that
/// process, which stops at its first write after the claim, so a few
/// suffice.
pub const CLAIM_ATTEMPTS: usize = 1000;

/// A process's claim on the data directory.
///
/// Opening a data directory takes the next epoch by compare-and-set; every
/// durable write this process makes afterwards is checked against it, so once
/// a newer process has taken over, the older one's next catalog or storage
/// write fails with [`StorageError::Fenced`] instead of corrupting anything.
#[derive(Debug, Clone)]
pub struct Fence {
    consensus: Arc<dyn Consensus>,
    epoch: u64,
    /// The consensus entry that recorded this epoch: while it is the
    /// head, no newer process exists.
    seqno: SeqNo,
}

impl Fence {
    /// Take the next epoch, fencing out every earlier holder.
    pub fn acquire(consensus: Arc<dyn Consensus>) -> Result<Fence> {
        loop {
            let head = consensus.head(EPOCH_KEY)?;
            let (seqno, current) = match &head {
                Some(v) => (Some(v.seqno), parse_epoch(&v.data)?),
                None => (None, 0),
            };
            let epoch = current + 1;
            let new = VersionedData {
                seqno: seqno.map_or(1, |s| s + 1),
                data: epoch.to_string().into_bytes(),
            };
            let mine = new.seqno;
            if consensus.compare_and_set(EPOCH_KEY, seqno, new)? == CasResult::Committed {
                if let Some(s) = seqno {
                    consensus.truncate(EPOCH_KEY, s + 1)?;
                }
                tracing::info!(epoch, "acquired data directory epoch");
                return Ok(Fence {
                    consensus,
                    epoch,
                    seqno: mine,
                });
            }
        }
    }

    /// The epoch this process holds.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The current epoch recorded in consensus.
    pub fn current(&self) -> Result<u64> {
        match self.consensus.head(EPOCH_KEY)? {
            Some(v) => parse_epoch(&v.data),
            None => Ok(0),
        }
    }

    /// Fail with [`StorageError::Fenced`] if a newer process has taken over.
    /// Called after every group commit's fsync, so it first asks consensus
    /// the cheap question (is this epoch's entry still the head?) and
    /// reads the current epoch only when it may not be.
    pub fn check(&self) -> Result<()> {
        if !self.consensus.may_have_moved(EPOCH_KEY, self.seqno)? {
            return Ok(());
        }
        let current = self.current()?;
        if current > self.epoch {
            Err(StorageError::Fenced {
                mine: self.epoch,
                current,
            })
        } else {
            Ok(())
        }
    }

    /// The consensus store this fence lives in.
    pub fn consensus(&self) -> &Arc<dyn Consensus> {
        &self.consensus
    }
}

fn parse_epoch(data: &[u8]) -> Result<u64> {
    std::str::from_utf8(data)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| StorageError::Corruption("unreadable epoch".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consensus::FileConsensus;

    #[test]
    fn newer_epoch_fences_older() {
        let dir = tempfile::tempdir().unwrap();
        let c: Arc<dyn Consensus> = Arc::new(FileConsensus::open(dir.path()).unwrap());
        let a = Fence::acquire(Arc::clone(&c)).unwrap();
        a.check().unwrap();
        let b = Fence::acquire(Arc::clone(&c)).unwrap();
        assert!(b.epoch() > a.epoch());
        assert!(a.check().unwrap_err().is_fenced());
        b.check().unwrap();
    }

    #[test]
    fn fenced_after_takeovers_whose_entries_were_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let c: Arc<dyn Consensus> = Arc::new(FileConsensus::open(dir.path()).unwrap());
        let a = Fence::acquire(Arc::clone(&c)).unwrap();
        let b = Fence::acquire(Arc::clone(&c)).unwrap();
        let d = Fence::acquire(Arc::clone(&c)).unwrap();
        // Only the newest entry is left: `a`'s and `b`'s were truncated.
        assert_eq!(c.scan(EPOCH_KEY, 0).unwrap().len(), 1);
        assert!(a.check().unwrap_err().is_fenced());
        assert!(b.check().unwrap_err().is_fenced());
        d.check().unwrap();
        assert!(!c.may_have_moved(EPOCH_KEY, d.seqno).unwrap());
        assert!(c.may_have_moved(EPOCH_KEY, a.seqno).unwrap());
    }
}

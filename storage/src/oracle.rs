//! The durable timestamp oracle.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use freshet_repr::Timestamp;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::consensus::{CasResult, SeqNo, VersionedData};
use crate::epoch::{CLAIM_ATTEMPTS, Fence};
use crate::error::{Result, StorageError};

/// Consensus key holding the oracle's persisted upper bound.
pub const ORACLE_KEY: &str = "oracle";

/// How far ahead of the timestamp it hands out the oracle persists its
/// upper bound (its lease), so that only about one write timestamp per this
/// many milliseconds needs an fsync. A restart resumes at the persisted
/// bound, so this is also the most the oracle can run ahead of the wall
/// clock after a crash (once the clock passes the last timestamp handed
/// out before it).
pub const ALLOCATION_BLOCK_MS: u64 = 1_000;

#[derive(Serialize, Deserialize)]
struct PersistedOracle {
    epoch: u64,
    /// No timestamp at or above this was ever handed out.
    upper: Timestamp,
}

#[derive(Debug)]
struct OracleState {
    last_write: Timestamp,
    read_ts: Timestamp,
    persisted_upper: Timestamp,
    seqno: Option<SeqNo>,
}

/// Hands out write timestamps (milliseconds, strictly increasing, never
/// reused across restarts) and tracks the read timestamp at which every
/// acknowledged write is visible.
///
/// Timestamps are allocated ahead in blocks: before handing out a write
/// timestamp at or above its persisted upper bound, the oracle durably
/// records a new bound `ALLOCATION_BLOCK_MS` past that timestamp, so a
/// restart resumes above anything handed out before, even if the wall
/// clock went backwards. Opening only claims the persisted bound (it does
/// not extend it): a bound is always within one block of a timestamp that
/// was really handed out, so crashes in a row do not add up leaps ahead of
/// the wall clock.
pub struct TimestampOracle {
    fence: Fence,
    state: Mutex<OracleState>,
    now: Arc<dyn Fn() -> Timestamp + Send + Sync>,
}

/// Milliseconds since the Unix epoch.
pub fn wall_clock_ms() -> Timestamp {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as Timestamp)
        .unwrap_or(0)
}

impl std::fmt::Debug for TimestampOracle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimestampOracle")
            .field("state", &*self.state.lock())
            .finish_non_exhaustive()
    }
}

impl TimestampOracle {
    /// Open the oracle, resuming at or above `max(persisted, min_ts, now)`.
    pub fn open(
        fence: Fence,
        min_ts: Timestamp,
        now: Arc<dyn Fn() -> Timestamp + Send + Sync>,
    ) -> Result<Self> {
        let consensus = Arc::clone(fence.consensus());
        // An older process may still persist a block until it sees this
        // one's claim: then read its upper again and retry.
        for _ in 0..CLAIM_ATTEMPTS {
            let head = consensus.head(ORACLE_KEY)?;
            let persisted = match &head {
                Some(v) => {
                    let p: PersistedOracle = serde_json::from_slice(&v.data)
                        .map_err(|e| StorageError::Corruption(format!("oracle state: {e}")))?;
                    if p.epoch > fence.epoch() {
                        return Err(StorageError::Fenced {
                            mine: fence.epoch(),
                            current: p.epoch,
                        });
                    }
                    p.upper
                }
                None => 0,
            };
            let start = persisted.max(min_ts).max(now());
            let oracle = TimestampOracle {
                fence: fence.clone(),
                state: Mutex::new(OracleState {
                    last_write: start,
                    read_ts: start,
                    persisted_upper: 0,
                    seqno: head.map(|v| v.seqno),
                }),
                now: Arc::clone(&now),
            };
            // Claim the oracle for this epoch without extending the bound:
            // the first write timestamp (above `start`) extends it.
            if oracle.try_persist(&mut oracle.state.lock(), start)? {
                tracing::info!(start, persisted, min_ts, "timestamp oracle resumed");
                return Ok(oracle);
            }
        }
        Err(StorageError::Corruption(format!(
            "the oracle state kept changing while epoch {} claimed it",
            fence.epoch()
        )))
    }

    fn persist(&self, state: &mut OracleState, upper: Timestamp) -> Result<()> {
        if self.try_persist(state, upper)? {
            Ok(())
        } else {
            Err(StorageError::Corruption(
                "oracle state changed under the same epoch".into(),
            ))
        }
    }

    /// Persist `upper` if the state is still at `state.seqno`. `false`: a
    /// process of an older epoch (or, wrongly, of ours) persisted first.
    fn try_persist(&self, state: &mut OracleState, upper: Timestamp) -> Result<bool> {
        let consensus = self.fence.consensus();
        let data = serde_json::to_vec(&PersistedOracle {
            epoch: self.fence.epoch(),
            upper,
        })
        .map_err(|e| StorageError::Corruption(e.to_string()))?;
        let next = state.seqno.map_or(1, |s| s + 1);
        match consensus.compare_and_set(
            ORACLE_KEY,
            state.seqno,
            VersionedData { seqno: next, data },
        )? {
            CasResult::Committed => {
                if let Some(s) = state.seqno {
                    consensus.truncate(ORACLE_KEY, s + 1)?;
                }
                state.seqno = Some(next);
                state.persisted_upper = upper;
                Ok(true)
            }
            CasResult::Mismatch(_) => {
                self.fence.check()?;
                Ok(false)
            }
        }
    }

    /// A new write timestamp, greater than every one handed out before.
    pub fn allocate_write_ts(&self) -> Result<Timestamp> {
        let mut state = self.state.lock();
        let ts = (self.now)().max(state.last_write + 1);
        if ts >= state.persisted_upper {
            self.persist(&mut state, ts + ALLOCATION_BLOCK_MS)?;
        }
        state.last_write = ts;
        Ok(ts)
    }

    /// Record that the write at `ts` is durable and visible.
    pub fn apply_write(&self, ts: Timestamp) {
        let mut state = self.state.lock();
        state.read_ts = state.read_ts.max(ts);
    }

    /// The strict-serializable read timestamp: every acknowledged write is
    /// visible at it.
    pub fn read_ts(&self) -> Timestamp {
        self.state.lock().read_ts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consensus::{Consensus, FileConsensus};
    use std::sync::atomic::{AtomicU64, Ordering};

    type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

    /// A consensus store in a temp dir and a settable clock starting at
    /// `start` milliseconds.
    fn test_clock(start: u64) -> (tempfile::TempDir, Arc<dyn Consensus>, Arc<AtomicU64>, Clock) {
        let dir = tempfile::tempdir().unwrap();
        let c: Arc<dyn Consensus> = Arc::new(FileConsensus::open(dir.path()).unwrap());
        let clock = Arc::new(AtomicU64::new(start));
        let now = {
            let clock = Arc::clone(&clock);
            Arc::new(move || clock.load(Ordering::SeqCst)) as Clock
        };
        (dir, c, clock, now)
    }

    #[test]
    fn monotonic_across_restarts_even_when_clock_goes_back() {
        let (_dir, c, clock, now) = test_clock(1_000_000);
        let mut last = 0;
        for round in 0..3 {
            let fence = Fence::acquire(Arc::clone(&c)).unwrap();
            let oracle = TimestampOracle::open(fence, 0, Arc::clone(&now)).unwrap();
            for _ in 0..100 {
                let ts = oracle.allocate_write_ts().unwrap();
                assert!(ts > last, "round {round}: {ts} <= {last}");
                last = ts;
                oracle.apply_write(ts);
                assert_eq!(oracle.read_ts(), ts);
            }
            // The wall clock jumps back an hour before the next start.
            clock.fetch_sub(3_600_000, Ordering::SeqCst);
        }
    }

    #[test]
    fn restarts_in_a_row_stay_within_one_block_of_the_clock() {
        let (_dir, c, clock, now) = test_clock(1_000_000);
        let mut last = 0;
        for round in 0..10 {
            let fence = Fence::acquire(Arc::clone(&c)).unwrap();
            let oracle = TimestampOracle::open(fence, 0, Arc::clone(&now)).unwrap();
            let start = oracle.read_ts();
            // The wall clock has passed everything handed out before: the
            // oracle may be ahead of it by at most one block.
            let wall = clock.load(Ordering::SeqCst);
            assert!(
                start <= wall + ALLOCATION_BLOCK_MS,
                "round {round}: resumed at {start}, {} ahead of the clock",
                start - wall
            );
            let ts = oracle.allocate_write_ts().unwrap();
            assert!(ts > last);
            last = ts;
            // A crash right after; the next process starts 1 ms after the
            // last timestamp, a restart far quicker than a block.
            clock.store(ts + 1, Ordering::SeqCst);
        }
        // Opening without writing does not extend the lease.
        let first =
            TimestampOracle::open(Fence::acquire(Arc::clone(&c)).unwrap(), 0, Arc::clone(&now))
                .unwrap()
                .read_ts();
        let second =
            TimestampOracle::open(Fence::acquire(Arc::clone(&c)).unwrap(), 0, Arc::clone(&now))
                .unwrap()
                .read_ts();
        assert_eq!(first, second);
    }

    #[test]
    fn fenced_oracle_stops_allocating_new_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let c: Arc<dyn Consensus> = Arc::new(FileConsensus::open(dir.path()).unwrap());
        let clock = Arc::new(AtomicU64::new(1_000));
        let now = {
            let clock = Arc::clone(&clock);
            Arc::new(move || clock.load(Ordering::SeqCst)) as Arc<dyn Fn() -> u64 + Send + Sync>
        };
        let old =
            TimestampOracle::open(Fence::acquire(Arc::clone(&c)).unwrap(), 0, Arc::clone(&now))
                .unwrap();
        let _new =
            TimestampOracle::open(Fence::acquire(Arc::clone(&c)).unwrap(), 0, Arc::clone(&now))
                .unwrap();
        clock.fetch_add(10 * ALLOCATION_BLOCK_MS, Ordering::SeqCst);
        assert!(old.allocate_write_ts().unwrap_err().is_fenced());
    }
}

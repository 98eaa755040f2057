//! When a materialized view with a `REFRESH` schedule changes.
//!
//! A scheduled view's output moves only at refresh times: every update is
//! advanced to the first refresh at or after its time, and the view's
//! upper jumps to the next refresh once the inputs pass the previous one.
//! The schedule is committed in the catalog with concrete times (an
//! `AT CREATION` or an unaligned `EVERY` is resolved at `CREATE`), so a
//! restart refreshes at exactly the times the first process would have.

use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// A periodic refresh: at `aligned_to + k * interval` for every integer
/// `k` (times before the view's creation simply never occur).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshEvery {
    /// Milliseconds between refreshes (> 0).
    pub interval: Timestamp,
    /// One refresh time of the series.
    pub aligned_to: Timestamp,
}

/// A view's refresh times: the union of `at` and the `every` series.
/// `ON COMMIT` views have no schedule at all.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshSchedule {
    /// One-off refresh times (`REFRESH AT`, `REFRESH AT CREATION`).
    pub at: Vec<Timestamp>,
    /// Periodic refreshes (`REFRESH EVERY`).
    pub every: Vec<RefreshEvery>,
}

impl RefreshSchedule {
    /// The first refresh at or after `t`; `None` if there is none (the
    /// view will never change again).
    pub fn round_up(&self, t: Timestamp) -> Option<Timestamp> {
        let at = self.at.iter().copied().filter(|&a| a >= t).min();
        let every = self
            .every
            .iter()
            .filter_map(|e| {
                if e.interval == 0 {
                    return None;
                }
                if t <= e.aligned_to {
                    // Earlier members of the series count too.
                    let back = (e.aligned_to - t) / e.interval;
                    return Some(e.aligned_to - back * e.interval);
                }
                let steps = (t - e.aligned_to).div_ceil(e.interval);
                e.aligned_to.checked_add(steps.checked_mul(e.interval)?)
            })
            .min();
        match (at, every) {
            (Some(a), Some(e)) => Some(a.min(e)),
            (a, e) => a.or(e),
        }
    }

    /// The last refresh at or before `t`, if any.
    pub fn round_down(&self, t: Timestamp) -> Option<Timestamp> {
        let at = self.at.iter().copied().filter(|&a| a <= t).max();
        let every = self
            .every
            .iter()
            .filter_map(|e| {
                if e.interval == 0 {
                    return None;
                }
                if t >= e.aligned_to {
                    let steps = (t - e.aligned_to) / e.interval;
                    return Some(e.aligned_to + steps * e.interval);
                }
                let back = (e.aligned_to - t).div_ceil(e.interval);
                e.aligned_to.checked_sub(back.checked_mul(e.interval)?)
            })
            .max();
        at.max(every)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_to_the_union_of_series_and_points() {
        let s = RefreshSchedule {
            at: vec![105],
            every: vec![RefreshEvery {
                interval: 10,
                aligned_to: 100,
            }],
        };
        assert_eq!(s.round_up(100), Some(100));
        assert_eq!(s.round_up(101), Some(105));
        assert_eq!(s.round_up(106), Some(110));
        assert_eq!(s.round_up(95), Some(100), "the series extends backwards");
        assert_eq!(s.round_down(104), Some(100));
        assert_eq!(s.round_down(107), Some(105));
        assert_eq!(s.round_down(99), Some(90));
        let once = RefreshSchedule {
            at: vec![50],
            every: vec![],
        };
        assert_eq!(once.round_up(50), Some(50));
        assert_eq!(once.round_up(51), None, "after the last refresh, none");
        assert_eq!(once.round_down(49), None);
    }
}

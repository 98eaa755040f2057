//! Percentiles and medians, computed here rather than with a crate: the
//! nearest-rank definition is ten lines and makes it obvious what "p99 of
//! 200 samples" means (the 198th smallest).

use std::time::{Duration, Instant};

/// p50, p99 and max, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// `later - earlier` in milliseconds, negative if `later` came first (an
/// upstream clock read before a local one).
pub fn signed_ms(later: Instant, earlier: Instant) -> f64 {
    if later >= earlier {
        (later - earlier).as_secs_f64() * 1e3
    } else {
        -((earlier - later).as_secs_f64() * 1e3)
    }
}

/// Nearest-rank percentile `p` of millisecond `values` (sorted in place);
/// NaN when there are none.
pub fn percentile_ms(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    if values.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0 * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

/// p50, p99 and max of millisecond `values` (sorted in place).
pub fn latency(values: &mut [f64]) -> Latency {
    Latency {
        p50: percentile_ms(values, 50.0),
        p99: percentile_ms(values, 99.0),
        max: values.last().copied().unwrap_or(f64::NAN),
    }
}

/// p50 and p99 of a set of latencies.
#[derive(Clone, Copy, Debug)]
pub struct Summary {
    pub p50: Duration,
    pub p99: Duration,
    pub samples: usize,
}

/// The nearest-rank percentile `p` (0 < p <= 100) of sorted samples: the
/// smallest sample such that at least p% of samples are at or below it.
pub fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// p50 and p99 of unsorted samples, `None` when there are none.
pub fn summarize(samples: &[Duration]) -> Option<Summary> {
    let mut sorted = samples.to_vec();
    sorted.sort();
    Some(Summary {
        p50: percentile(&sorted, 50.0)?,
        p99: percentile(&sorted, 99.0)?,
        samples: sorted.len(),
    })
}

/// The median (nearest-rank p50) of unsorted samples.
pub fn median(samples: &[Duration]) -> Option<Duration> {
    summarize(samples).map(|s| s.p50)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn nearest_rank() {
        let s = ms(&(1..=200).collect::<Vec<_>>());
        let sum = summarize(&s).unwrap();
        assert_eq!(sum.p50, Duration::from_millis(100));
        assert_eq!(sum.p99, Duration::from_millis(198));
        assert_eq!(median(&ms(&[3, 1, 2])), Some(Duration::from_millis(2)));
        assert_eq!(percentile(&ms(&[7]), 99.0), Some(Duration::from_millis(7)));
        assert!(summarize(&[]).is_none());
    }
}

//! The session's `TimeZone` as PostgreSQL applies it when a local
//! (wall-clock) time becomes an instant.
//!
//! A local time that occurs twice (the hour a fall-back transition
//! repeats) takes the offset in force after the transition; one that does
//! not occur (the hour a spring-forward transition skips) takes the offset
//! in force before it, so `2024-03-10 02:30` in America/New_York is
//! `03:30-04` — PostgreSQL's documented reading of ambiguous and invalid
//! local times.

use arrow::array::timezone::Tz;
use chrono::{Duration, NaiveDateTime, Offset, TimeZone};
use datafusion::common::config::ConfigOptions;

/// The session time zone DataFusion was configured with (Freshet sets
/// `execution.time_zone` from `TimeZone`); UTC if unset or unreadable.
/// Materialized views are maintained under UTC.
pub fn session_tz(config: &ConfigOptions) -> Tz {
    config
        .execution
        .time_zone
        .as_deref()
        .and_then(|tz| tz.parse().ok())
        .unwrap_or_else(|| freshet_repr::UTC_TZ.parse().expect("UTC parses"))
}

/// The UTC offset, in seconds east, that `tz` gives the local time
/// `local` by PostgreSQL's rules (see the module documentation).
pub fn local_offset(tz: &Tz, local: NaiveDateTime) -> i32 {
    match tz.offset_from_local_datetime(&local) {
        chrono::LocalResult::Single(o) => o.fix().local_minus_utc(),
        chrono::LocalResult::Ambiguous(_, later) => later.fix().local_minus_utc(),
        chrono::LocalResult::None => {
            // In a gap: the offset of the last local time before it.
            let mut probe = local;
            for _ in 0..96 {
                probe -= Duration::minutes(30);
                if let Some(o) = tz.offset_from_local_datetime(&probe).latest() {
                    return o.fix().local_minus_utc();
                }
            }
            0
        }
    }
}

/// Microseconds since the epoch of the instant the local time
/// `local_micros` (microseconds since the epoch, read as wall-clock time
/// in `tz`) denotes.
pub fn local_to_utc_micros(tz: &Tz, local_micros: i64) -> Option<i64> {
    let local = chrono::DateTime::from_timestamp_micros(local_micros)?.naive_utc();
    local_micros.checked_sub(i64::from(local_offset(tz, local)) * 1_000_000)
}

/// The wall-clock time in `tz` (as microseconds since the epoch) of the
/// instant `utc_micros`.
pub fn utc_to_local_micros(tz: &Tz, utc_micros: i64) -> Option<i64> {
    let instant = chrono::DateTime::from_timestamp_micros(utc_micros)?.naive_utc();
    let offset = tz
        .offset_from_utc_datetime(&instant)
        .fix()
        .local_minus_utc();
    utc_micros.checked_add(i64::from(offset) * 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn micros(s: &str) -> i64 {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S")
            .unwrap()
            .and_utc()
            .timestamp_micros()
    }

    #[test]
    fn gaps_take_the_earlier_offset_and_repeats_the_later() {
        let ny: Tz = "America/New_York".parse().unwrap();
        // Spring forward: 02:30 does not exist; read at -05 it is 07:30Z.
        assert_eq!(
            local_to_utc_micros(&ny, micros("2024-03-10 02:30:00")),
            Some(micros("2024-03-10 07:30:00"))
        );
        // Fall back: 01:30 happens twice; the later (-05) is taken.
        assert_eq!(
            local_to_utc_micros(&ny, micros("2024-11-03 01:30:00")),
            Some(micros("2024-11-03 06:30:00"))
        );
        assert_eq!(
            utc_to_local_micros(&ny, micros("2024-06-01 02:00:00")),
            Some(micros("2024-05-31 22:00:00"))
        );
    }
}

//! Postgres text input for types Arrow parses differently: `boolean`,
//! `bytea` (hex and escape formats), `uuid` and `jsonb` canonical forms.

/// Parse a Postgres boolean literal.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_lowercase().as_str() {
        "t" | "true" | "y" | "yes" | "on" | "1" => Some(true),
        "f" | "false" | "n" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// Parse `bytea` input: `\x` hex, or the escape format.
pub fn parse_bytea(s: &str) -> Option<Vec<u8>> {
    if let Some(hex) = s.strip_prefix("\\x") {
        let hex: Vec<u8> = hex.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        if !hex.len().is_multiple_of(2) {
            return None;
        }
        return hex
            .chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
            .collect();
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if bytes.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                i += 2;
            } else {
                let oct = bytes.get(i + 1..i + 4)?;
                let v = u8::from_str_radix(std::str::from_utf8(oct).ok()?, 8).ok()?;
                out.push(v);
                i += 4;
            }
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Canonical `uuid` text (lower case, hyphenated).
pub fn canonical_uuid(s: &str) -> Option<String> {
    uuid::Uuid::parse_str(s.trim())
        .ok()
        .map(|u| u.hyphenated().to_string())
}

pub use freshet_repr::jsonb::{canonical_jsonb, jsonb_text};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytea_forms() {
        assert_eq!(parse_bytea("\\x00ff").unwrap(), vec![0, 255]);
        assert_eq!(parse_bytea("ab\\\\c\\001").unwrap(), b"ab\\c\x01".to_vec());
        assert!(parse_bytea("\\x0").is_none());
    }

    #[test]
    fn dates_ignore_a_trailing_time_and_zone() {
        assert_eq!(parse_date("1970-01-02"), Some(1));
        assert_eq!(parse_date(" 1970-01-02 +00 "), Some(1));
        assert_eq!(parse_date("1970-01-02 23:59:59.9-05"), Some(1));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(parse_date("1970-02-30"), None);
        assert_eq!(parse_date("soon"), None);
    }

    #[test]
    fn uuids_are_canonical() {
        assert_eq!(
            canonical_uuid("A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11").unwrap(),
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
        );
        assert!(canonical_uuid("nope").is_none());
    }
}

/// Parse Postgres date input: `YYYY-MM-DD`, optionally followed by a time
/// and a zone, which are ignored as PostgreSQL's `date_in` ignores them
/// (pgJDBC's `setDate` sends `2024-02-01 +00`). Returns days since the
/// epoch.
pub fn parse_date(s: &str) -> Option<i32> {
    use chrono::NaiveDate;
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    let s = s.trim();
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return i32::try_from((d - epoch).num_days()).ok();
    }
    let micros = parse_timestamp(s, TimestampInput::Naive)?;
    i32::try_from(micros.div_euclid(86_400_000_000)).ok()
}

/// How timestamp input without an explicit zone is read.
pub enum TimestampInput<'a> {
    /// `timestamp`: the local date and time as written; a zone is ignored.
    Naive,
    /// `timestamptz`: an instant; input without a zone is local time with
    /// the offset (seconds east of UTC) this function gives for it.
    Zoned(&'a dyn Fn(chrono::NaiveDateTime) -> Option<i32>),
}

/// Parse Postgres timestamp input: `YYYY-MM-DD[( |T)HH:MM[:SS[.ffffff]]][zone]`
/// where the zone is `Z`, `UTC`, `+HH`, `+HHMM` or `+HH:MM`. Returns
/// microseconds since the epoch.
pub fn parse_timestamp(s: &str, mode: TimestampInput<'_>) -> Option<i64> {
    use chrono::{NaiveDate, NaiveDateTime, NaiveTime};
    let s = s.trim();
    let (date_part, rest) = match s.find([' ', 'T']) {
        Some(i) => (&s[..i], s[i + 1..].trim()),
        None => (s, ""),
    };
    let date = NaiveDate::parse_from_str(date_part, "%Y-%m-%d").ok()?;
    // Split the time from a trailing zone.
    let (time_part, zone) = match rest.find(['+', '-', 'Z', 'U', 'z', ' ']) {
        Some(i) if !rest.is_empty() => (&rest[..i], rest[i..].trim()),
        _ => (rest, ""),
    };
    let time = if time_part.is_empty() {
        NaiveTime::MIN
    } else {
        let mut parts = time_part.splitn(3, ':');
        let h: u32 = parts.next()?.parse().ok()?;
        let m: u32 = parts.next()?.parse().ok()?;
        let (sec, micros) = match parts.next() {
            None => (0, 0),
            Some(sec) => {
                let (whole, frac) = sec.split_once('.').unwrap_or((sec, ""));
                let whole: u32 = whole.parse().ok()?;
                let frac = if frac.is_empty() {
                    0
                } else {
                    let digits: String = frac.chars().take(6).collect();
                    if !digits.chars().all(|c| c.is_ascii_digit()) {
                        return None;
                    }
                    digits.parse::<u32>().ok()? * 10u32.pow(6 - digits.len() as u32)
                };
                (whole, frac)
            }
        };
        NaiveTime::from_hms_micro_opt(h, m, sec, micros)?
    };
    let naive = NaiveDateTime::new(date, time);
    let offset_secs: Option<i32> = match zone.to_ascii_uppercase().as_str() {
        "" => None,
        "Z" | "UTC" | "GMT" => Some(0),
        z => {
            let sign = match z.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let digits: String = z[1..].chars().filter(|c| *c != ':').collect();
            if !digits.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let (h, m) = match digits.len() {
                1 | 2 => (digits.parse::<i32>().ok()?, 0),
                4 => (
                    digits[..2].parse::<i32>().ok()?,
                    digits[2..].parse::<i32>().ok()?,
                ),
                _ => return None,
            };
            Some(sign * (h * 3600 + m * 60))
        }
    };
    let local = naive.and_utc().timestamp_micros();
    match (mode, offset_secs) {
        (TimestampInput::Naive, _) => Some(local),
        (TimestampInput::Zoned(_), Some(off)) => Some(local - off as i64 * 1_000_000),
        (TimestampInput::Zoned(offset_of), None) => {
            Some(local - offset_of(naive)? as i64 * 1_000_000)
        }
    }
}

#[cfg(test)]
mod timestamp_tests {
    use super::*;

    #[test]
    fn postgres_timestamp_forms() {
        let utc = |_| Some(0);
        let t = |s| parse_timestamp(s, TimestampInput::Zoned(&utc));
        let base = t("2024-03-01 10:00:00").unwrap();
        assert_eq!(t("2024-03-01 10:00"), Some(base));
        assert_eq!(t("2024-03-01T10:00:00"), Some(base));
        assert_eq!(t("2024-03-01 10:00+00"), Some(base));
        assert_eq!(t("2024-03-01 12:00+02"), Some(base));
        assert_eq!(t("2024-03-01 12:30:00+02:30"), Some(base));
        assert_eq!(t("2024-03-01 05:00:00-0500"), Some(base));
        assert_eq!(t("2024-03-01 10:00:00Z"), Some(base));
        assert_eq!(t("2024-03-01 10:00:00 UTC"), Some(base));
        assert_eq!(t("2024-03-01 10:00:00.5"), Some(base + 500_000));
        assert_eq!(t("2024-03-01"), Some(base - 10 * 3_600_000_000));
        assert_eq!(
            parse_timestamp("2024-03-01 12:00", TimestampInput::Zoned(&|_| Some(7200))),
            Some(base)
        );
        assert_eq!(
            parse_timestamp("2024-03-01 10:00+05", TimestampInput::Naive),
            Some(base)
        );
        assert_eq!(t("nope"), None);
        assert_eq!(t("2024-13-01"), None);
        assert_eq!(t("2024-03-01 25:00"), None);
    }
}

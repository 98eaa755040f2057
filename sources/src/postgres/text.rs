//! Values in PostgreSQL's text output format, as logical replication and
//! `COPY ... TO STDOUT` deliver them, turned into the [`Datum`]s Freshet
//! stores for a column's [`PgType`].
//!
//! The upstream session is set up so that the forms are fixed: `DateStyle
//! = ISO`, `IntervalStyle = postgres`, `TimeZone = UTC`,
//! `extra_float_digits = 3` (floats round-trip exactly) and `bytea_output =
//! hex`. Text that is not in such a form is malformed upstream data
//! ([`SourceError::Upstream`]); a well-formed value Freshet cannot store
//! (a `NaN` numeric, an infinite date, a number too wide for the column)
//! is [`SourceError::Invalid`].

use std::str::FromStr;

use arrow::datatypes::DataType;
use freshet_repr::PgType;
use freshet_repr::jsonb::canonical_jsonb;

use crate::datum::Datum;
use crate::error::{Result, SourceError};

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

/// Parse `text` (a value in PostgreSQL's text output format, with the
/// upstream session set to DateStyle=ISO, IntervalStyle=postgres,
/// TimeZone=UTC, extra_float_digits=3, bytea_output=hex) as a value of
/// Freshet type `ty`.
pub(crate) fn parse(ty: &PgType, text: &str) -> Result<Datum> {
    datum(ty, text).map_err(|bad| bad.into_error(ty, text))
}

/// Why a text could not become a datum.
#[derive(Debug)]
enum Bad {
    /// Not the type's output form: upstream sent something unexpected.
    Syntax,
    /// Well-formed, but beyond what the Freshet column holds.
    OutOfRange,
    /// Well-formed, but a value Freshet has no representation for.
    Unrepresentable(&'static str),
}

type Parsed<T> = std::result::Result<T, Bad>;

impl Bad {
    fn into_error(self, ty: &PgType, text: &str) -> SourceError {
        let name = type_name(ty);
        let text = shown(text);
        match self {
            Bad::Syntax => {
                SourceError::Upstream(format!("malformed {name} value from upstream: \"{text}\""))
            }
            Bad::OutOfRange => {
                SourceError::Invalid(format!("value \"{text}\" is out of range for type {name}"))
            }
            Bad::Unrepresentable(why) => {
                SourceError::Invalid(format!("cannot store \"{text}\" as {name}: {why}"))
            }
        }
    }
}

/// The type's name for messages; unconstrained numeric says the fixed
/// precision and scale Freshet stores it at.
fn type_name(ty: &PgType) -> String {
    match (ty, ty.arrow_type()) {
        (PgType::Numeric { typmod: None }, DataType::Decimal128(p, s)) => {
            format!("numeric (stored as numeric({p},{s}))")
        }
        _ => ty.sql_name(),
    }
}

/// At most 100 characters of a value, for an error message.
fn shown(text: &str) -> String {
    match text.char_indices().nth(100) {
        Some((end, _)) => format!("{}...", text.get(..end).unwrap_or_default()),
        None => text.to_string(),
    }
}

fn datum(ty: &PgType, text: &str) -> Parsed<Datum> {
    Ok(match ty {
        PgType::Bool => Datum::Bool(boolean(text)?),
        PgType::Int2 => Datum::Int16(integer(text)?),
        PgType::Int4 => Datum::Int32(integer(text)?),
        PgType::Int8 => Datum::Int64(integer(text)?),
        PgType::Oid => Datum::UInt32(integer(text)?),
        PgType::Float4 => Datum::Float32(float(text, f32::NAN, f32::INFINITY)?),
        PgType::Float8 => Datum::Float64(float(text, f64::NAN, f64::INFINITY)?),
        PgType::Numeric { .. } => Datum::Numeric(numeric(ty, text)?),
        PgType::Text | PgType::Varchar { .. } | PgType::Char { .. } => {
            Datum::Text(text.to_string())
        }
        PgType::Uuid => Datum::Text(uuid(text)?),
        PgType::Jsonb => Datum::Text(canonical_jsonb(text).ok_or(Bad::Syntax)?),
        PgType::Bytea => Datum::Bytes(bytea(text)?),
        PgType::Date => Datum::Date(date(text)?),
        PgType::Time => Datum::Time(time(text)?),
        PgType::Timestamp => Datum::Timestamp(timestamp(text, false)?),
        PgType::TimestampTz => Datum::Timestamp(timestamp(text, true)?),
        PgType::Interval => interval(text)?,
        PgType::Array(_) | PgType::Int2Vector | PgType::OidVector => {
            return Err(Bad::Unrepresentable(
                "array columns are not supported yet by PostgreSQL sources",
            ));
        }
    })
}

fn boolean(text: &str) -> Parsed<bool> {
    match text {
        "t" | "true" => Ok(true),
        "f" | "false" => Ok(false),
        _ => Err(Bad::Syntax),
    }
}

/// An integer; digits that only overflow the type are out of range.
fn integer<T: FromStr>(text: &str) -> Parsed<T> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Bad::Syntax);
    }
    text.parse().map_err(|_| Bad::OutOfRange)
}

/// A float in the shortest exact form `extra_float_digits = 3` prints, or
/// `NaN`, `Infinity`, `-Infinity`.
fn float<T: FromStr + std::ops::Neg<Output = T>>(text: &str, nan: T, inf: T) -> Parsed<T> {
    match text {
        "NaN" => Ok(nan),
        "Infinity" => Ok(inf),
        "-Infinity" => Ok(-inf),
        // Rust would also take `inf`, `nan`, ...: Postgres never prints
        // those, so they are malformed.
        _ if text.bytes().any(|b| b.is_ascii_alphabetic() && b != b'e') => Err(Bad::Syntax),
        _ => text.parse().map_err(|_| Bad::Syntax),
    }
}

/// A numeric as the unscaled value at the column's scale, rounded half
/// away from zero as Postgres's cast to `numeric(p,s)` does.
fn numeric(ty: &PgType, text: &str) -> Parsed<i128> {
    let DataType::Decimal128(precision, scale) = ty.arrow_type() else {
        return Err(Bad::Unrepresentable("not stored as a decimal"));
    };
    if matches!(text, "NaN" | "Infinity" | "-Infinity") {
        return Err(Bad::Unrepresentable(
            "Freshet's numeric has no NaN or infinity",
        ));
    }
    let (negative, int, frac) = decimal_parts(text).ok_or(Bad::Syntax)?;
    let magnitude = rescale(int, frac, scale).ok_or(Bad::OutOfRange)?;
    let limit = 10i128.checked_pow(u32::from(precision));
    if limit.is_some_and(|limit| magnitude >= limit) {
        return Err(Bad::OutOfRange);
    }
    Ok(if negative { -magnitude } else { magnitude })
}

/// `[-]digits[.digits]` as its sign, integer digits and fraction digits.
fn decimal_parts(text: &str) -> Option<(bool, &str, &str)> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let well_formed = !(int.is_empty() && frac.is_empty()) && all_digits(int) && all_digits(frac);
    well_formed.then_some((negative, int, frac))
}

/// The magnitude `int.frac` scaled by `10^scale` and rounded half away
/// from zero; `None` if it overflows.
fn rescale(int: &str, frac: &str, scale: i8) -> Option<i128> {
    let digits: Vec<u8> = int.bytes().chain(frac.bytes()).map(|b| b - b'0').collect();
    // How many of the digits stay in front of the decimal point once
    // scaled (negative: the value rounds to a power of ten or zero).
    let kept = int.len() as i64 + i64::from(scale);
    let mut value: i128 = 0;
    for digit in digits.iter().take(usize::try_from(kept).unwrap_or(0)) {
        value = value.checked_mul(10)?.checked_add(i128::from(*digit))?;
    }
    match usize::try_from(kept) {
        Ok(kept) if kept >= digits.len() => {
            for _ in digits.len()..kept {
                value = value.checked_mul(10)?;
            }
            Some(value)
        }
        Ok(kept) => {
            let round_up = digits.get(kept).is_some_and(|d| *d >= 5);
            value.checked_add(i128::from(round_up))
        }
        // Even the first digit is below half of the last kept place.
        Err(_) => Some(0),
    }
}

/// A canonical `8-4-4-4-12` hex uuid, lower-cased.
fn uuid(text: &str) -> Parsed<String> {
    let well_formed = text.len() == 36
        && text.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    if !well_formed {
        return Err(Bad::Syntax);
    }
    Ok(text.to_ascii_lowercase())
}

/// `bytea` in hex form (`\x0a1b`), or the legacy escape form (`a\\b\000`).
fn bytea(text: &str) -> Parsed<Vec<u8>> {
    match text.strip_prefix("\\x") {
        Some(hex) => hex_bytes(hex),
        None => escaped_bytes(text),
    }
    .ok_or(Bad::Syntax)
}

fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    let pairs = hex.as_bytes().chunks_exact(2);
    if !pairs.remainder().is_empty() {
        return None;
    }
    pairs
        .map(|pair| match pair {
            [high, low] => Some(hex_digit(*high)? << 4 | hex_digit(*low)?),
            _ => None,
        })
        .collect()
}

fn hex_digit(c: u8) -> Option<u8> {
    char::from(c)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// The escape form: `\\` is a backslash, `\ooo` an octal byte, anything
/// else itself.
fn escaped_bytes(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b != b'\\' {
            out.push(b);
            rest = tail;
        } else if let Some(tail) = tail.strip_prefix(b"\\") {
            out.push(b'\\');
            rest = tail;
        } else {
            let (octal, tail) = tail.split_first_chunk::<3>()?;
            let octal = std::str::from_utf8(octal).ok()?;
            let well_formed = octal.bytes().all(|d| matches!(d, b'0'..=b'7'));
            out.push(u8::from_str_radix(octal, 8).ok().filter(|_| well_formed)?);
            rest = tail;
        }
    }
    Some(out)
}

/// A date (`YYYY-MM-DD`, ` BC` for years before 1 AD) as days since
/// 1970-01-01.
fn date(text: &str) -> Parsed<i32> {
    no_infinity(text)?;
    let (text, bc) = strip_bc(text);
    let days = civil_date(text, bc)?;
    i32::try_from(days).map_err(|_| Bad::OutOfRange)
}

/// Freshet's dates and timestamps have no infinities.
fn no_infinity(text: &str) -> Parsed<()> {
    match text {
        "infinity" | "-infinity" => Err(Bad::Unrepresentable(
            "Freshet's dates and timestamps have no infinity",
        )),
        _ => Ok(()),
    }
}

fn strip_bc(text: &str) -> (&str, bool) {
    match text.strip_suffix(" BC") {
        Some(rest) => (rest, true),
        None => (text, false),
    }
}

/// `YYYY-MM-DD` (the year may have more digits) as days since
/// 1970-01-01; `bc` years count back from 1 BC, which is year 0.
fn civil_date(text: &str, bc: bool) -> Parsed<i64> {
    let mut parts = text.split('-');
    let (Some(year), Some(month), Some(day), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Bad::Syntax);
    };
    if year.len() < 4 || year.len() > 9 || month.len() != 2 || day.len() != 2 {
        return Err(Bad::Syntax);
    }
    let year: i64 = unsigned(year)?;
    let (month, day) = (unsigned(month)?, unsigned(day)?);
    if year == 0 {
        return Err(Bad::Syntax);
    }
    let year = if bc { 1 - year } else { year };
    if !(1..=12).contains(&month) || !(1..=days_in_month(year, month)).contains(&day) {
        return Err(Bad::Syntax);
    }
    Ok(days_from_civil(year, month, day))
}

/// ASCII digits only (no sign), as a number.
fn unsigned<T: FromStr>(digits: &str) -> Parsed<T> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Bad::Syntax);
    }
    digits.parse().map_err(|_| Bad::Syntax)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (astronomical
/// years: 0 is 1 BC), after Howard Hinnant's `days_from_civil`.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let shifted_month = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// A time of day (`HH:MM:SS[.ffffff]`, `24:00:00` included) as
/// microseconds since midnight.
fn time(text: &str) -> Parsed<i64> {
    let micros = clock(text, 2)?;
    if micros > MICROS_PER_DAY {
        return Err(Bad::Syntax);
    }
    Ok(micros)
}

/// `H:MM:SS[.ffffff]` as microseconds, the hours having at least two and
/// at most `max_hour_digits` digits. Minutes and seconds are below 60.
fn clock(text: &str, max_hour_digits: usize) -> Parsed<i64> {
    let mut parts = text.split(':');
    let (Some(hours), Some(minutes), Some(seconds), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Bad::Syntax);
    };
    if hours.len() < 2 || hours.len() > max_hour_digits || minutes.len() != 2 {
        return Err(Bad::Syntax);
    }
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
    if whole.len() != 2 || (seconds.contains('.') && fraction.is_empty()) {
        return Err(Bad::Syntax);
    }
    let fraction = fraction_micros(fraction).ok_or(Bad::Syntax)?;
    let hours: i64 = unsigned(hours)?;
    let (minutes, whole): (i64, i64) = (unsigned(minutes)?, unsigned(whole)?);
    if minutes >= 60 || whole >= 60 {
        return Err(Bad::Syntax);
    }
    let seconds = hours
        .checked_mul(3600)
        .and_then(|s| s.checked_add(minutes * 60 + whole))
        .ok_or(Bad::OutOfRange)?;
    seconds
        .checked_mul(MICROS_PER_SECOND)
        .and_then(|m| m.checked_add(fraction))
        .ok_or(Bad::OutOfRange)
}

/// Fraction-of-second digits as microseconds, rounded half up past the
/// sixth digit (Postgres prints at most six).
fn fraction_micros(digits: &str) -> Option<i64> {
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut micros = 0;
    for i in 0..6 {
        let digit = digits.as_bytes().get(i).map_or(0, |b| b - b'0');
        micros = micros * 10 + i64::from(digit);
    }
    let round_up = digits.as_bytes().get(6).is_some_and(|b| *b >= b'5');
    Some(micros + i64::from(round_up))
}

/// A timestamp (`YYYY-MM-DD HH:MM:SS[.ffffff]`, then for `timestamptz`
/// an offset `+HH[:MM[:SS]]`, then ` BC` if before 1 AD) as microseconds
/// since the epoch, in UTC.
fn timestamp(text: &str, with_offset: bool) -> Parsed<i64> {
    no_infinity(text)?;
    let (text, bc) = strip_bc(text);
    let (date, rest) = text.split_once(' ').ok_or(Bad::Syntax)?;
    let (clock_text, offset) = if with_offset {
        let at = rest.rfind(['+', '-']).ok_or(Bad::Syntax)?;
        let (clock_text, offset) = rest.split_at(at);
        (clock_text, utc_offset(offset)?)
    } else {
        (rest, 0)
    };
    let days = civil_date(date, bc)?;
    let micros = clock(clock_text, 2)?;
    if micros >= MICROS_PER_DAY {
        return Err(Bad::Syntax);
    }
    days.checked_mul(MICROS_PER_DAY)
        .and_then(|m| m.checked_add(micros))
        .and_then(|m| m.checked_sub(offset.checked_mul(MICROS_PER_SECOND)?))
        .ok_or(Bad::OutOfRange)
}

/// `+HH`, `-HH:MM` or `+HH:MM:SS` as seconds east of UTC.
fn utc_offset(text: &str) -> Parsed<i64> {
    let (negative, rest) = match text.split_at_checked(1) {
        Some(("+", rest)) => (false, rest),
        Some(("-", rest)) => (true, rest),
        _ => return Err(Bad::Syntax),
    };
    let mut seconds = 0;
    let mut count = 0;
    for (part, unit) in rest.split(':').zip([3600, 60, 1]) {
        if part.len() != 2 {
            return Err(Bad::Syntax);
        }
        seconds += unsigned::<i64>(part)? * unit;
        count += 1;
    }
    if count != rest.split(':').count() || seconds > 16 * 3600 {
        return Err(Bad::Syntax);
    }
    Ok(if negative { -seconds } else { seconds })
}

/// An interval in `IntervalStyle = postgres` form (`1 year 2 mons 3 days
/// 04:05:06.789`, `-1 days +02:00:00`, `00:00:00`) as Arrow's
/// month/day/nanosecond parts.
fn interval(text: &str) -> Parsed<Datum> {
    let (mut months, mut days, mut nanos) = (0i32, 0i32, 0i64);
    let mut tokens = text.split(' ').peekable();
    if tokens.peek().is_none_or(|t| t.is_empty()) {
        return Err(Bad::Syntax);
    }
    while let Some(token) = tokens.next() {
        if token.contains(':') {
            // The time part comes last.
            if tokens.next().is_some() {
                return Err(Bad::Syntax);
            }
            nanos = interval_clock(token)?;
            break;
        }
        let count: i32 = signed(token)?;
        let (field, per) = match tokens.next().ok_or(Bad::Syntax)? {
            "year" | "years" => (&mut months, 12),
            "mon" | "mons" => (&mut months, 1),
            "day" | "days" => (&mut days, 1),
            _ => return Err(Bad::Syntax),
        };
        *field = count
            .checked_mul(per)
            .and_then(|n| field.checked_add(n))
            .ok_or(Bad::OutOfRange)?;
    }
    Ok(Datum::Interval {
        months,
        days,
        nanos,
    })
}

/// An interval's `[+-]H:MM:SS[.ffffff]` (hours unbounded) as nanoseconds.
fn interval_clock(token: &str) -> Parsed<i64> {
    let (negative, unsigned_clock) = match token.split_at_checked(1) {
        Some(("-", rest)) => (true, rest),
        Some(("+", rest)) => (false, rest),
        _ => (false, token),
    };
    let micros = clock(unsigned_clock, 10)?;
    let nanos = micros.checked_mul(1000).ok_or(Bad::OutOfRange)?;
    Ok(if negative { -nanos } else { nanos })
}

/// An optionally signed integer.
fn signed<T: FromStr>(text: &str) -> Parsed<T> {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    unsigned::<u64>(digits)?;
    text.parse().map_err(|_| Bad::OutOfRange)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(ty: PgType, text: &str) -> Datum {
        parse(&ty, text).unwrap_or_else(|e| panic!("{ty} {text:?}: {e}"))
    }

    /// The error for `text`, which must be upstream's fault.
    fn malformed(ty: PgType, text: &str) -> String {
        match parse(&ty, text) {
            Err(e @ SourceError::Upstream(_)) => e.to_string(),
            other => panic!("{ty} {text:?}: expected an upstream error, got {other:?}"),
        }
    }

    /// The error for `text`, which must be a value Freshet cannot store.
    fn invalid(ty: PgType, text: &str) -> String {
        match parse(&ty, text) {
            Err(e @ SourceError::Invalid(_)) => e.to_string(),
            other => panic!("{ty} {text:?}: expected an invalid error, got {other:?}"),
        }
    }

    fn numeric_type(p: u8, s: i8) -> PgType {
        PgType::Numeric {
            typmod: Some((p, s)),
        }
    }

    #[test]
    fn booleans() {
        assert_eq!(ok(PgType::Bool, "t"), Datum::Bool(true));
        assert_eq!(ok(PgType::Bool, "f"), Datum::Bool(false));
        for bad in ["", "T", "yes", "1", "t "] {
            malformed(PgType::Bool, bad);
        }
    }

    #[test]
    fn integers_at_their_limits() {
        assert_eq!(ok(PgType::Int2, "32767"), Datum::Int16(32767));
        assert_eq!(ok(PgType::Int2, "-32768"), Datum::Int16(-32768));
        assert_eq!(ok(PgType::Int4, "-2147483648"), Datum::Int32(i32::MIN));
        assert_eq!(
            ok(PgType::Int8, "9223372036854775807"),
            Datum::Int64(i64::MAX)
        );
        assert_eq!(
            ok(PgType::Int8, "-9223372036854775808"),
            Datum::Int64(i64::MIN)
        );
        assert_eq!(ok(PgType::Oid, "4000000000"), Datum::UInt32(4_000_000_000));
        assert_eq!(ok(PgType::Int4, "0"), Datum::Int32(0));
        let err = invalid(PgType::Int2, "32768");
        assert!(
            err.contains("\"32768\" is out of range for type smallint"),
            "{err}"
        );
        invalid(PgType::Oid, "-1");
        invalid(PgType::Int4, "99999999999999999999999999999999999999999");
        for bad in ["", "-", "1.0", " 1", "1e3", "+", "0x10", "١"] {
            malformed(PgType::Int4, bad);
        }
    }

    #[test]
    fn floats_as_extra_float_digits_3_prints_them() {
        assert_eq!(ok(PgType::Float4, "1.1"), Datum::Float32(1.1));
        assert_eq!(
            ok(PgType::Float4, "3.4028235e+38"),
            Datum::Float32(f32::MAX)
        );
        assert_eq!(
            ok(PgType::Float4, "1e-45"),
            Datum::Float32(f32::from_bits(1))
        );
        assert_eq!(
            ok(PgType::Float8, "0.30000000000000004"),
            Datum::Float64(0.1 + 0.2)
        );
        assert_eq!(ok(PgType::Float8, "1e+20"), Datum::Float64(1e20));
        assert_eq!(ok(PgType::Float8, "1.25e-05"), Datum::Float64(1.25e-5));
        assert_eq!(
            ok(PgType::Float8, "Infinity"),
            Datum::Float64(f64::INFINITY)
        );
        assert_eq!(
            ok(PgType::Float8, "-Infinity"),
            Datum::Float64(f64::NEG_INFINITY)
        );
        assert_eq!(
            ok(PgType::Float4, "Infinity"),
            Datum::Float32(f32::INFINITY)
        );
        let Datum::Float64(nan) = ok(PgType::Float8, "NaN") else {
            panic!("not a float");
        };
        assert!(nan.is_nan());
        let Datum::Float32(nan) = ok(PgType::Float4, "NaN") else {
            panic!("not a float");
        };
        assert!(nan.is_nan());
        let Datum::Float64(zero) = ok(PgType::Float8, "-0") else {
            panic!("not a float");
        };
        assert!(zero == 0.0 && zero.is_sign_negative());
        for bad in ["", "inf", "nan", "infinity", "1.5x", "e", "--1"] {
            malformed(PgType::Float8, bad);
        }
    }

    #[test]
    fn numerics_at_the_column_scale() {
        let money = numeric_type(12, 2);
        assert_eq!(ok(money.clone(), "12.50"), Datum::Numeric(1250));
        assert_eq!(ok(money.clone(), "-0.05"), Datum::Numeric(-5));
        assert_eq!(ok(money.clone(), "7"), Datum::Numeric(700));
        assert_eq!(ok(money.clone(), "0"), Datum::Numeric(0));
        assert_eq!(
            ok(money.clone(), "9999999999.99"),
            Datum::Numeric(999_999_999_999)
        );
        let err = invalid(money.clone(), "10000000000.00");
        assert!(
            err.contains("\"10000000000.00\"") && err.contains("numeric(12,2)"),
            "{err}"
        );
        // Upstream's column may be unconstrained: round half away from zero.
        assert_eq!(ok(money.clone(), "1.005"), Datum::Numeric(101));
        assert_eq!(ok(money.clone(), "1.00499999"), Datum::Numeric(100));
        assert_eq!(ok(money.clone(), "-1.005"), Datum::Numeric(-101));
        assert_eq!(ok(money.clone(), "-0.004"), Datum::Numeric(0));
        // Rounding that carries into a new digit can overflow.
        assert_eq!(ok(numeric_type(3, 1), "99.94"), Datum::Numeric(999));
        invalid(numeric_type(3, 1), "99.95");
        // Postgres prints `numeric(10,1)` values at their scale.
        assert_eq!(ok(numeric_type(10, 1), "123.5"), Datum::Numeric(1235));
        // A negative scale rounds to tens, hundreds, ...
        assert_eq!(ok(numeric_type(5, -2), "12300"), Datum::Numeric(123));
        assert_eq!(ok(numeric_type(5, -2), "12351.7"), Datum::Numeric(124));
        assert_eq!(ok(numeric_type(5, -2), "49"), Datum::Numeric(0));
        assert_eq!(ok(numeric_type(5, -2), "50"), Datum::Numeric(1));
        assert_eq!(ok(numeric_type(5, -2), "5"), Datum::Numeric(0));
        assert_eq!(
            ok(numeric_type(38, 0), &"9".repeat(38)),
            Datum::Numeric(10i128.pow(38) - 1)
        );
        invalid(numeric_type(38, 0), &"9".repeat(39));
        invalid(numeric_type(38, 0), &format!("1{}", "0".repeat(60)));
        // Digits far past the scale only round.
        let long = format!("0.{}", "3".repeat(500));
        assert_eq!(ok(money, &long), Datum::Numeric(33));
    }

    #[test]
    fn unconstrained_numerics_use_freshets_fixed_scale() {
        let DataType::Decimal128(p, s) = (PgType::Numeric { typmod: None }).arrow_type() else {
            panic!("numeric is not a decimal");
        };
        assert_eq!((p, s), (38, 10));
        let any = || PgType::Numeric { typmod: None };
        assert_eq!(ok(any(), "12.345"), Datum::Numeric(123_450_000_000));
        assert_eq!(ok(any(), "0.000001"), Datum::Numeric(10_000));
        assert_eq!(ok(any(), "0.00000000005"), Datum::Numeric(1));
        assert_eq!(
            ok(any(), "1000000000000000000000000000"),
            Datum::Numeric(10i128.pow(37))
        );
        let err = invalid(any(), "1000000000000000000000000000000");
        assert!(err.contains("stored as numeric(38,10)"), "{err}");
    }

    #[test]
    fn numeric_special_values_and_garbage() {
        for special in ["NaN", "Infinity", "-Infinity"] {
            let err = invalid(numeric_type(10, 2), special);
            assert!(
                err.contains(special) && err.contains("numeric(10,2)"),
                "{err}"
            );
            assert!(err.contains("no NaN or infinity"), "{err}");
        }
        for bad in ["", "-", ".", "1.2.3", "1e5", "+-1", " 1", "1,5", "abc"] {
            malformed(numeric_type(10, 2), bad);
        }
        // `.5` and `5.` are not what Postgres prints, but they are numbers.
        assert_eq!(ok(numeric_type(10, 2), ".5"), Datum::Numeric(50));
        assert_eq!(ok(numeric_type(10, 2), "5."), Datum::Numeric(500));
    }

    #[test]
    fn character_types_are_kept_as_sent() {
        assert_eq!(ok(PgType::Text, "héllo\n"), Datum::Text("héllo\n".into()));
        assert_eq!(ok(PgType::Text, ""), Datum::Text(String::new()));
        assert_eq!(
            ok(PgType::Char { len: Some(5) }, "abc  "),
            Datum::Text("abc  ".into())
        );
        assert_eq!(
            ok(PgType::Varchar { max_len: Some(3) }, "x"),
            Datum::Text("x".into())
        );
    }

    #[test]
    fn uuids_are_canonical_lower_case() {
        let want = Datum::Text("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into());
        assert_eq!(
            ok(PgType::Uuid, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
            want
        );
        assert_eq!(
            ok(PgType::Uuid, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"),
            want
        );
        for bad in [
            "",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g",
            "a0eebc99-9c0b-4ef8-bb6d6-bb9bd380a11",
        ] {
            malformed(PgType::Uuid, bad);
        }
    }

    #[test]
    fn jsonb_becomes_freshets_canonical_text() {
        // What Postgres 15 prints for
        // '{"b": 1, "a": [1, 2.50, null, true], "aa": {"x": "y\u00e9\n"}}'.
        let text = r#"{"a": [1, 2.50, null, true], "b": 1, "aa": {"x": "yé\n"}}"#;
        let Datum::Text(got) = ok(PgType::Jsonb, text) else {
            panic!("not text");
        };
        assert_eq!(
            Some(got.clone()),
            canonical_jsonb(text),
            "uses the canonical form"
        );
        assert!(got.starts_with(r#"{"a": [1, 2.5"#), "{got}");
        assert!(got.contains(r#""aa": {"x": "yé\n"}"#), "{got}");
        assert_eq!(
            ok(PgType::Jsonb, r#""str""#),
            Datum::Text(r#""str""#.into())
        );
        assert_eq!(ok(PgType::Jsonb, "100"), Datum::Text("100".into()));
        assert_eq!(ok(PgType::Jsonb, "null"), Datum::Text("null".into()));
        for bad in ["", "{", "{'a': 1}", "[1,]"] {
            malformed(PgType::Jsonb, bad);
        }
    }

    #[test]
    fn bytea_in_hex_and_escape_forms() {
        assert_eq!(
            ok(PgType::Bytea, "\\xdeadbeef"),
            Datum::Bytes(vec![0xde, 0xad, 0xbe, 0xef])
        );
        assert_eq!(ok(PgType::Bytea, "\\xDEAD"), Datum::Bytes(vec![0xde, 0xad]));
        assert_eq!(ok(PgType::Bytea, "\\x"), Datum::Bytes(vec![]));
        // `bytea_output = escape` prints '\x00015c41ff'::bytea so.
        assert_eq!(
            ok(PgType::Bytea, "\\000\\001\\\\A\\377"),
            Datum::Bytes(vec![0, 1, b'\\', b'A', 0xff])
        );
        assert_eq!(ok(PgType::Bytea, "abc"), Datum::Bytes(b"abc".to_vec()));
        assert_eq!(ok(PgType::Bytea, ""), Datum::Bytes(vec![]));
        for bad in [
            "\\xabc", "\\xzz", "\\x+1", "\\x é", "\\", "\\12", "\\400", "\\9aa",
        ] {
            malformed(PgType::Bytea, bad);
        }
    }

    #[test]
    fn dates_as_days_since_1970() {
        assert_eq!(ok(PgType::Date, "1970-01-01"), Datum::Date(0));
        assert_eq!(ok(PgType::Date, "1969-12-31"), Datum::Date(-1));
        assert_eq!(ok(PgType::Date, "2024-02-29"), Datum::Date(19_782));
        assert_eq!(ok(PgType::Date, "2000-03-01"), Datum::Date(11_017));
        assert_eq!(ok(PgType::Date, "0001-01-01"), Datum::Date(-719_162));
        // 1 BC is year 0, a leap year; 44 BC is year -43.
        assert_eq!(ok(PgType::Date, "0001-12-31 BC"), Datum::Date(-719_163));
        assert_eq!(
            ok(PgType::Date, "0001-02-29 BC"),
            Datum::Date(-719_162 - 307)
        );
        assert_eq!(ok(PgType::Date, "0044-03-15 BC"), Datum::Date(-735_160));
        // Postgres's extremes (expected days from Postgres 15 itself).
        assert_eq!(ok(PgType::Date, "4713-01-01 BC"), Datum::Date(-2_440_550));
        assert_eq!(
            ok(PgType::Date, "5874897-12-31"),
            Datum::Date(2_145_042_905)
        );
        assert_eq!(ok(PgType::Date, "10000-01-01"), Datum::Date(2_932_897));
        for inf in ["infinity", "-infinity"] {
            let err = invalid(PgType::Date, inf);
            assert!(err.contains("no infinity") && err.contains("date"), "{err}");
        }
        invalid(PgType::Date, "999999999-01-01");
        for bad in [
            "",
            "2024-2-29",
            "24-02-29",
            "2023-02-29",
            "1900-02-29",
            "2024-13-01",
            "2024-00-10",
            "2024-04-31",
            "2024-01-01 AD",
            "0000-01-01",
            "0000-01-01 BC",
            "2024-01-01 00:00:00",
            "2024/01/01",
            "-2024-01-01",
            "+2024-01-01",
        ] {
            malformed(PgType::Date, bad);
        }
    }

    #[test]
    fn days_from_civil_agrees_with_counting() {
        let mut days = 0i64;
        for year in 1970..2100 {
            for month in 1..=12 {
                for day in 1..=days_in_month(year, month) {
                    assert_eq!(
                        days_from_civil(year, month, day),
                        days,
                        "{year}-{month}-{day}"
                    );
                    days += 1;
                }
            }
        }
        let mut days = 0i64;
        for year in (-500..1970).rev() {
            for month in (1..=12).rev() {
                for day in (1..=days_in_month(year, month)).rev() {
                    days -= 1;
                    assert_eq!(
                        days_from_civil(year, month, day),
                        days,
                        "{year}-{month}-{day}"
                    );
                }
            }
        }
    }

    #[test]
    fn times_as_micros_since_midnight() {
        assert_eq!(ok(PgType::Time, "00:00:00"), Datum::Time(0));
        assert_eq!(
            ok(PgType::Time, "23:59:59.999999"),
            Datum::Time(MICROS_PER_DAY - 1)
        );
        assert_eq!(ok(PgType::Time, "24:00:00"), Datum::Time(MICROS_PER_DAY));
        assert_eq!(ok(PgType::Time, "12:34:56.5"), Datum::Time(45_296_500_000));
        assert_eq!(
            ok(PgType::Time, "01:02:03.0001"),
            Datum::Time(3_723_000_100)
        );
        // Postgres prints at most six digits; more are rounded.
        assert_eq!(ok(PgType::Time, "00:00:00.0000006"), Datum::Time(1));
        assert_eq!(ok(PgType::Time, "00:00:00.0000004"), Datum::Time(0));
        for bad in [
            "",
            "24:00:00.000001",
            "25:00:00",
            "12:60:00",
            "12:00:60",
            "1:00:00",
            "12:00",
            "12:00:00.",
            "12:00:00.5x",
            "12:00:00+00",
            "-01:00:00",
            "12:00:00:00",
        ] {
            malformed(PgType::Time, bad);
        }
    }

    #[test]
    fn timestamps_as_micros_since_the_epoch() {
        assert_eq!(
            ok(PgType::Timestamp, "1970-01-01 00:00:00"),
            Datum::Timestamp(0)
        );
        assert_eq!(
            ok(PgType::Timestamp, "2024-01-01 12:00:00"),
            Datum::Timestamp(1_704_110_400_000_000)
        );
        assert_eq!(
            ok(PgType::Timestamp, "2024-01-01 12:00:00.123456"),
            Datum::Timestamp(1_704_110_400_123_456)
        );
        assert_eq!(
            ok(PgType::Timestamp, "1969-12-31 23:59:59.999999"),
            Datum::Timestamp(-1)
        );
        assert_eq!(
            ok(PgType::Timestamp, "0044-03-15 10:00:00 BC"),
            Datum::Timestamp(-735_160 * MICROS_PER_DAY + 10 * 3_600_000_000)
        );
        // The latest instant Arrow's microseconds since 1970 hold; Postgres
        // goes on to 294276 AD.
        assert_eq!(
            ok(PgType::Timestamp, "294247-01-10 04:00:54.775807"),
            Datum::Timestamp(i64::MAX)
        );
        invalid(PgType::Timestamp, "294247-01-10 04:00:54.775808");
        let err = invalid(PgType::Timestamp, "294276-12-31 23:59:59.999999");
        assert!(err.contains("out of range for type timestamp"), "{err}");
        for inf in ["infinity", "-infinity"] {
            invalid(PgType::Timestamp, inf);
        }
        for bad in [
            "",
            "2024-01-01",
            "2024-01-01T12:00:00",
            "2024-01-01 24:00:00",
            "2024-01-01 12:00:00+00",
            "2024-01-01  12:00:00",
            "2024-02-30 12:00:00",
        ] {
            malformed(PgType::Timestamp, bad);
        }
    }

    #[test]
    fn timestamptz_offsets_normalize_to_utc() {
        let noon = 1_704_110_400_000_000;
        for (text, want) in [
            ("2024-01-01 12:00:00+00", noon),
            ("2024-01-01 12:00:00.5+00", noon + 500_000),
            ("2024-01-01 17:30:00+05:30", noon),
            ("2024-01-01 04:00:00-08", noon),
            ("2024-01-01 04:00:00-08:00", noon),
            ("1900-01-01 12:19:32+00:19:32", -2_208_945_600_000_000),
            ("1970-01-01 00:00:00+00", 0),
            (
                "0044-03-15 10:00:00+00 BC",
                -735_160 * MICROS_PER_DAY + 10 * 3_600_000_000,
            ),
        ] {
            assert_eq!(
                ok(PgType::TimestampTz, text),
                Datum::Timestamp(want),
                "{text}"
            );
        }
        for inf in ["infinity", "-infinity"] {
            invalid(PgType::TimestampTz, inf);
        }
        for bad in [
            "",
            "2024-01-01 12:00:00",
            "2024-01-01 12:00:00Z",
            "2024-01-01 12:00:00+5",
            "2024-01-01 12:00:00+05:3",
            "2024-01-01 12:00:00+05:30:00:00",
            "2024-01-01 12:00:00+",
            "2024-01-01 12:00:00+99",
            "2024-01-01 12:00:00 UTC",
            "2024-01-01 12:00:00+00 AD",
        ] {
            malformed(PgType::TimestampTz, bad);
        }
    }

    fn iv(months: i32, days: i32, nanos: i64) -> Datum {
        Datum::Interval {
            months,
            days,
            nanos,
        }
    }

    #[test]
    fn intervals_in_postgres_style() {
        let hour = 3_600_000_000_000i64;
        for (text, want) in [
            (
                "1 year 2 mons 3 days 04:05:06.789",
                iv(14, 3, 4 * hour + 306_789_000_000),
            ),
            ("-1 days +02:00:00", iv(0, -1, 2 * hour)),
            ("00:00:00", iv(0, 0, 0)),
            ("1 day", iv(0, 1, 0)),
            (
                "-1 years -2 mons +3 days -04:05:06",
                iv(-14, 3, -(4 * hour + 306_000_000_000)),
            ),
            ("100:00:00", iv(0, 0, 100 * hour)),
            ("-00:00:00.000001", iv(0, 0, -1000)),
            ("178000000 years", iv(2_136_000_000, 0, 0)),
            ("-178000000 years", iv(-2_136_000_000, 0, 0)),
            ("1 mon -1 days", iv(1, -1, 0)),
            ("-2 mons", iv(-2, 0, 0)),
            ("2562047:47:16.854775", iv(0, 0, 9_223_372_036_854_775_000)),
        ] {
            assert_eq!(ok(PgType::Interval, text), want, "{text}");
        }
    }

    #[test]
    fn intervals_freshet_cannot_hold_or_postgres_would_not_print() {
        // Postgres keeps microseconds in an i64; Arrow keeps nanoseconds.
        let err = invalid(PgType::Interval, "2562047788:00:54.775807");
        assert!(err.contains("out of range for type interval"), "{err}");
        invalid(PgType::Interval, "2000000000 years");
        invalid(PgType::Interval, "2147483647 mons 1 year");
        for bad in [
            "",
            " ",
            "1",
            "1 week",
            "1 days 2 days 00:00:00 1 day",
            "00:00:00 1 day",
            "@ 1 day",
            "P1Y2M",
            "1.5 days",
            "1  day",
            "1 day ",
            "01:00",
            "--01:00:00",
        ] {
            malformed(PgType::Interval, bad);
        }
    }

    #[test]
    fn arrays_are_not_supported_yet() {
        for ty in [
            PgType::Array(Box::new(PgType::Int4)),
            PgType::Int2Vector,
            PgType::OidVector,
        ] {
            let err = invalid(ty, "{1,2}");
            assert!(err.contains("array columns are not supported yet"), "{err}");
        }
    }

    #[test]
    fn random_text_never_panics() {
        // A deterministic xorshift generator over characters the forms
        // are made of, so failures reproduce.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet: Vec<char> = "0123456789-+:. eE\\xBCADaNInfity{}\"é".chars().collect();
        let mut types = PgType::scalar_types().to_vec();
        types.extend([
            numeric_type(5, 2),
            numeric_type(3, -2),
            numeric_type(38, 38),
        ]);
        for _ in 0..20_000 {
            let len = (next() % 32) as usize;
            let text: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            for ty in &types {
                let _ = parse(ty, &text);
            }
        }
    }

    #[test]
    fn long_values_are_shortened_in_messages() {
        let err = malformed(PgType::Int4, &"x".repeat(1000));
        assert!(err.len() < 200, "{err}");
        assert!(err.ends_with("...\""), "{err}");
    }
}

//! Session variables: what `SET`, `SHOW` and `RESET` act on.

use std::time::Duration;

use freshet_planner::SetValue;

use crate::error::{AdapterError, Result};

/// The `server_version` Freshet reports (a Postgres version clients accept).
pub const SERVER_VERSION: &str = concat!("15.0 (Freshet ", env!("CARGO_PKG_VERSION"), ")");
/// `server_version_num`.
pub const SERVER_VERSION_NUM: &str = "150000";

/// Transaction isolation levels Freshet offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Reads see every write acknowledged before they began.
    StrictSerializable,
    /// Reads may use any readable time (possibly stale, never blocking).
    Serializable,
}

impl Isolation {
    fn parse(v: &str) -> Result<Self> {
        match v.trim().to_lowercase().as_str() {
            "strict serializable" => Ok(Isolation::StrictSerializable),
            // Like Materialize, weaker Postgres levels run as serializable.
            "serializable" | "repeatable read" | "read committed" | "read uncommitted" => {
                Ok(Isolation::Serializable)
            }
            other => Err(AdapterError::InvalidParameterValue(format!(
                "invalid value for parameter \"transaction_isolation\": \"{other}\""
            ))),
        }
    }

    /// The name `SHOW TRANSACTION ISOLATION LEVEL` prints: PostgreSQL's
    /// level whose guarantee this one meets. Drivers read that spelling
    /// and accept only PostgreSQL's four names; both of Freshet's levels
    /// are serializable (strict serializable is serializable with reads
    /// that also see every earlier-acknowledged write).
    pub fn postgres_name(&self) -> &'static str {
        "serializable"
    }

    /// The name `SHOW transaction_isolation` prints.
    pub fn name(&self) -> &'static str {
        match self {
            Isolation::StrictSerializable => "strict serializable",
            Isolation::Serializable => "serializable",
        }
    }
}

/// The spelling of `SHOW TRANSACTION ISOLATION LEVEL` as planned.
pub const SHOW_ISOLATION_LEVEL: &str = "transaction isolation level";

/// A session's variables.
#[derive(Clone, Debug, PartialEq)]
pub struct Vars {
    /// `application_name`
    pub application_name: String,
    /// `client_encoding` (only UTF8 is supported)
    pub client_encoding: String,
    /// `DateStyle`
    pub datestyle: String,
    /// `IntervalStyle`
    pub intervalstyle: String,
    /// `TimeZone`
    pub timezone: String,
    /// `extra_float_digits`
    pub extra_float_digits: i8,
    /// `statement_timeout` (zero: none)
    pub statement_timeout: Duration,
    /// `search_path`
    pub search_path: Vec<String>,
    /// `transaction_isolation`
    pub transaction_isolation: Isolation,
    /// `subscribe_buffer_limit`: most updates a subscribe may hold for a
    /// client that reads slower than they come before it ends with an
    /// error (so a slow consumer never stalls writers).
    pub subscribe_buffer_limit: usize,
}

/// One row of `pg_settings`.
#[derive(Clone, Debug)]
pub struct Setting {
    /// The name, as PostgreSQL spells it (`DateStyle`).
    pub name: &'static str,
    /// The current value (in `unit`, if it has one).
    pub setting: String,
    /// `ms` for durations.
    pub unit: Option<&'static str>,
    /// `bool`, `integer`, `enum` or `string`.
    pub vartype: &'static str,
    /// `user` (a session may set it) or `internal` (read-only).
    pub context: &'static str,
    /// What `RESET` returns to.
    pub reset_val: String,
    /// The server's built-in value.
    pub boot_val: String,
}

/// The default `subscribe_buffer_limit`.
pub const DEFAULT_SUBSCRIBE_BUFFER_LIMIT: usize = 1_000_000;
/// The most a session may raise `subscribe_buffer_limit` to: a subscribe
/// buffers this many updates in the server's memory for one slow client.
pub const MAX_SUBSCRIBE_BUFFER_LIMIT: usize = 10_000_000;

impl Default for Vars {
    fn default() -> Self {
        Vars {
            application_name: String::new(),
            client_encoding: "UTF8".into(),
            datestyle: "ISO, MDY".into(),
            intervalstyle: "postgres".into(),
            timezone: "UTC".into(),
            extra_float_digits: 1,
            statement_timeout: Duration::ZERO,
            search_path: vec!["$user".into(), "public".into()],
            transaction_isolation: Isolation::StrictSerializable,
            subscribe_buffer_limit: DEFAULT_SUBSCRIBE_BUFFER_LIMIT,
        }
    }
}

fn one(name: &str, value: &SetValue) -> Result<Option<String>> {
    match value {
        SetValue::Default => Ok(None),
        SetValue::Values(v) if v.len() == 1 => Ok(Some(v[0].clone())),
        SetValue::Values(_) => Err(AdapterError::InvalidParameterValue(format!(
            "SET {name} takes only one argument"
        ))),
    }
}

/// Parse a Postgres duration setting: a number of milliseconds or a number
/// with a unit (`us`, `ms`, `s`, `min`, `h`, `d`).
pub fn parse_duration(name: &str, v: &str) -> Result<Duration> {
    let s = v.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let bad = || {
        AdapterError::InvalidParameterValue(format!(
            "invalid value for parameter \"{name}\": \"{v}\""
        ))
    };
    let n: f64 = num.parse().map_err(|_| bad())?;
    let ms = match unit.trim().to_lowercase().as_str() {
        "" | "ms" => n,
        "us" => n / 1000.0,
        "s" => n * 1000.0,
        "min" => n * 60_000.0,
        "h" => n * 3_600_000.0,
        "d" => n * 86_400_000.0,
        _ => return Err(bad()),
    };
    if !(0.0..=i32::MAX as f64).contains(&ms) {
        return Err(bad());
    }
    Ok(Duration::from_micros((ms * 1000.0) as u64))
}

/// Whether Arrow/DataFusion understand a time zone name.
pub fn valid_timezone(tz: &str) -> bool {
    tz.parse::<arrow::array::timezone::Tz>().is_ok()
}

impl Vars {
    /// Apply `SET name = value`, or `RESET` (to `defaults`) when `value`
    /// is `Default`.
    pub fn set(&mut self, name: &str, value: &SetValue, defaults: &Vars) -> Result<()> {
        let defaults = defaults.clone();
        match name {
            "application_name" => {
                self.application_name = one(name, value)?.unwrap_or(defaults.application_name)
            }
            "client_encoding" | "names" => {
                let v = one(name, value)?.unwrap_or(defaults.client_encoding);
                // PostgreSQL compares encoding names with everything but
                // letters and digits removed (`clean_encoding_name`), which
                // is why asyncpg's quoted `'utf-8'` start-up value works.
                let norm: String = v
                    .chars()
                    .filter(char::is_ascii_alphanumeric)
                    .map(|c| c.to_ascii_uppercase())
                    .collect();
                if norm != "UTF8" && norm != "UNICODE" {
                    return Err(AdapterError::InvalidParameterValue(format!(
                        "invalid value for parameter \"client_encoding\": \"{v}\" (only UTF8 is supported)"
                    )));
                }
                self.client_encoding = "UTF8".into();
            }
            "datestyle" => {
                let v = match value {
                    SetValue::Default => defaults.datestyle,
                    SetValue::Values(v) => v.join(", "),
                };
                let upper = v.to_uppercase();
                if !upper.split(',').all(|p| {
                    matches!(
                        p.trim(),
                        "ISO"
                            | "SQL"
                            | "POSTGRES"
                            | "GERMAN"
                            | "MDY"
                            | "DMY"
                            | "YMD"
                            | "US"
                            | "EURO"
                            | "EUROPEAN"
                            | "NONEURO"
                            | "NONEUROPEAN"
                    )
                }) {
                    return Err(AdapterError::InvalidParameterValue(format!(
                        "invalid value for parameter \"DateStyle\": \"{v}\""
                    )));
                }
                self.datestyle = v;
            }
            "intervalstyle" => {
                let v = one(name, value)?.unwrap_or(defaults.intervalstyle);
                match v.to_lowercase().as_str() {
                    "postgres" | "postgres_verbose" | "sql_standard" | "iso_8601" => {
                        self.intervalstyle = v.to_lowercase()
                    }
                    _ => {
                        return Err(AdapterError::InvalidParameterValue(format!(
                            "invalid value for parameter \"IntervalStyle\": \"{v}\""
                        )));
                    }
                }
            }
            "timezone" | "time_zone" => {
                let v = one(name, value)?.unwrap_or(defaults.timezone);
                if !valid_timezone(&v) {
                    return Err(AdapterError::InvalidParameterValue(format!(
                        "invalid value for parameter \"TimeZone\": \"{v}\""
                    )));
                }
                self.timezone = v;
            }
            "extra_float_digits" => {
                let v = one(name, value)?;
                self.extra_float_digits = match v {
                    None => defaults.extra_float_digits,
                    Some(v) => v
                        .trim()
                        .parse::<i8>()
                        .ok()
                        .filter(|n| (-15..=3).contains(n))
                        .ok_or_else(|| {
                            AdapterError::InvalidParameterValue(format!(
                                "invalid value for parameter \"extra_float_digits\": \"{v}\""
                            ))
                        })?,
                };
            }
            "statement_timeout" => {
                self.statement_timeout = match one(name, value)? {
                    None => defaults.statement_timeout,
                    Some(v) => parse_duration(name, &v)?,
                };
            }
            "subscribe_buffer_limit" => {
                self.subscribe_buffer_limit = match one(name, value)? {
                    None => defaults.subscribe_buffer_limit,
                    Some(v) => {
                        let n = v.trim().parse::<u64>().map_err(|_| {
                            AdapterError::InvalidParameterValue(format!(
                                "invalid value for parameter \"subscribe_buffer_limit\": \"{v}\""
                            ))
                        })?;
                        if !(1..=MAX_SUBSCRIBE_BUFFER_LIMIT as u64).contains(&n) {
                            return Err(AdapterError::InvalidParameterValue(format!(
                                "{n} is outside the valid range for parameter \"subscribe_buffer_limit\" (1 .. {MAX_SUBSCRIBE_BUFFER_LIMIT})"
                            )));
                        }
                        n as usize
                    }
                };
            }
            "search_path" => {
                self.search_path = match value {
                    SetValue::Default => defaults.search_path,
                    SetValue::Values(v) => v
                        .iter()
                        .flat_map(|s| s.split(','))
                        .map(|s| s.trim().trim_matches('"').to_string())
                        .filter(|s| !s.is_empty())
                        .collect(),
                };
            }
            "transaction_isolation" | "default_transaction_isolation" => {
                self.transaction_isolation = match one(name, value)? {
                    None => defaults.transaction_isolation,
                    Some(v) => Isolation::parse(&v)?,
                };
            }
            "server_version"
            | "server_version_num"
            | "server_encoding"
            | "integer_datetimes"
            | "standard_conforming_strings"
            | "is_superuser"
            | "max_identifier_length" => {
                return Err(AdapterError::ReadOnlyVariable(name.to_string()));
            }
            other => return Err(AdapterError::UnknownVariable(other.to_string())),
        }
        Ok(())
    }

    /// The value `SHOW name` prints, if `name` is a variable.
    pub fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            "application_name" => self.application_name.clone(),
            "client_encoding" => self.client_encoding.clone(),
            "datestyle" => self.datestyle.clone(),
            "intervalstyle" => self.intervalstyle.clone(),
            "timezone" | "time_zone" => self.timezone.clone(),
            "extra_float_digits" => self.extra_float_digits.to_string(),
            "statement_timeout" => {
                let ms = self.statement_timeout.as_millis();
                if ms == 0 {
                    "0".into()
                } else if ms.is_multiple_of(1000) {
                    format!("{}s", ms / 1000)
                } else {
                    format!("{ms}ms")
                }
            }
            "search_path" => self
                .search_path
                .iter()
                .map(|s| {
                    if s == "$user"
                        || s.chars()
                            .any(|c| !(c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit()))
                    {
                        format!("\"{s}\"")
                    } else {
                        s.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(", "),
            "transaction_isolation" | "default_transaction_isolation" => {
                self.transaction_isolation.name().into()
            }
            "subscribe_buffer_limit" => self.subscribe_buffer_limit.to_string(),
            "server_version" => SERVER_VERSION.into(),
            "server_version_num" => SERVER_VERSION_NUM.into(),
            "server_encoding" => "UTF8".into(),
            "integer_datetimes" | "standard_conforming_strings" => "on".into(),
            "is_superuser" => "off".into(),
            "max_identifier_length" => "63".into(),
            "max_index_keys" => "32".into(),
            "block_size" => "8192".into(),
            "lc_collate" | "lc_ctype" => "C".into(),
            "transaction_read_only" | "default_transaction_read_only" => "off".into(),
            _ => return None,
        })
    }

    /// The rows of `pg_settings`: every variable `SHOW ALL` lists and the
    /// read-only facts tools look up there (`max_index_keys`, ...), each
    /// with its type, unit and whether a session may set it; `defaults`
    /// are the values `RESET` returns to.
    pub fn pg_settings(&self, defaults: &Vars) -> Vec<Setting> {
        const READ_ONLY: &[&str] = &[
            "block_size",
            "integer_datetimes",
            "is_superuser",
            "lc_collate",
            "lc_ctype",
            "max_identifier_length",
            "max_index_keys",
            "server_encoding",
            "server_version",
            "server_version_num",
        ];
        let mut names: Vec<&'static str> = self.all().into_iter().map(|(n, _)| n).collect();
        names.extend(["block_size", "lc_collate", "lc_ctype", "max_index_keys"]);
        names.extend(["default_transaction_read_only", "transaction_read_only"]);
        names.sort_by_key(|n| n.to_lowercase());
        let boot = Vars::default();
        let value = |vars: &Vars, name: &str| match name {
            "statement_timeout" => vars.statement_timeout.as_millis().to_string(),
            _ => vars.get(&name.to_lowercase()).unwrap_or_default(),
        };
        names
            .into_iter()
            .map(|name| {
                let lower = name.to_lowercase();
                let vartype = match lower.as_str() {
                    "extra_float_digits"
                    | "max_identifier_length"
                    | "max_index_keys"
                    | "block_size"
                    | "server_version_num"
                    | "statement_timeout"
                    | "subscribe_buffer_limit" => "integer",
                    "integer_datetimes"
                    | "is_superuser"
                    | "standard_conforming_strings"
                    | "transaction_read_only"
                    | "default_transaction_read_only" => "bool",
                    "transaction_isolation" | "intervalstyle" => "enum",
                    _ => "string",
                };
                Setting {
                    name,
                    setting: value(self, name),
                    unit: (lower == "statement_timeout").then_some("ms"),
                    vartype,
                    context: if READ_ONLY.contains(&lower.as_str()) {
                        "internal"
                    } else {
                        "user"
                    },
                    reset_val: value(defaults, name),
                    boot_val: value(&boot, name),
                }
            })
            .collect()
    }

    /// Every variable `SHOW ALL` lists, with its value.
    pub fn all(&self) -> Vec<(&'static str, String)> {
        [
            "application_name",
            "client_encoding",
            "DateStyle",
            "extra_float_digits",
            "integer_datetimes",
            "IntervalStyle",
            "is_superuser",
            "max_identifier_length",
            "search_path",
            "server_encoding",
            "server_version",
            "server_version_num",
            "standard_conforming_strings",
            "statement_timeout",
            "subscribe_buffer_limit",
            "TimeZone",
            "transaction_isolation",
        ]
        .into_iter()
        .map(|n| (n, self.get(&n.to_lowercase()).unwrap_or_default()))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vals(v: &[&str]) -> SetValue {
        SetValue::Values(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn set_show_reset() {
        let mut v = Vars::default();
        let d = Vars::default();
        v.set("search_path", &vals(&["a", "b"]), &d).unwrap();
        assert_eq!(v.get("search_path").unwrap(), "a, b");
        v.set("search_path", &SetValue::Default, &d).unwrap();
        assert_eq!(v.get("search_path").unwrap(), "\"$user\", public");
        v.set("statement_timeout", &vals(&["1500"]), &d).unwrap();
        assert_eq!(v.statement_timeout, Duration::from_millis(1500));
        v.set("statement_timeout", &vals(&["2s"]), &d).unwrap();
        assert_eq!(v.get("statement_timeout").unwrap(), "2s");
        assert!(v.set("statement_timeout", &vals(&["soon"]), &d).is_err());
        v.set("transaction_isolation", &vals(&["serializable"]), &d)
            .unwrap();
        assert_eq!(v.get("transaction_isolation").unwrap(), "serializable");
        assert!(v.set("timezone", &vals(&["Not/AZone"]), &d).is_err());
        v.set("timezone", &vals(&["+05:00"]), &d).unwrap();
        assert!(matches!(
            v.set("nonsense", &vals(&["1"]), &d),
            Err(AdapterError::UnknownVariable(_))
        ));
        assert!(v.set("extra_float_digits", &vals(&["9"]), &d).is_err());
        assert!(v.set("client_encoding", &vals(&["LATIN1"]), &d).is_err());
        v.set("client_encoding", &vals(&["utf-8"]), &d).unwrap();
    }
}

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The stable identity of every catalog object and storage collection.
///
/// Names change (`ALTER ... RENAME`), ids never do; stored definitions refer
/// to ids so that boot never re-resolves names. `System` ids belong to objects
/// Freshet creates itself, `User` ids to objects users create.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum GlobalId {
    /// An object created by Freshet itself (databases and schemas it ships with).
    System(u64),
    /// An object created by a user.
    User(u64),
    /// A session-owned dataflow that is not a catalog object (a
    /// `SUBSCRIBE`); never stored.
    Transient(u64),
}

impl GlobalId {
    /// The numeric part of the id.
    pub fn inner(&self) -> u64 {
        match self {
            GlobalId::System(n) | GlobalId::User(n) | GlobalId::Transient(n) => *n,
        }
    }
}

impl fmt::Display for GlobalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobalId::System(n) => write!(f, "s{n}"),
            GlobalId::User(n) => write!(f, "u{n}"),
            GlobalId::Transient(n) => write!(f, "t{n}"),
        }
    }
}

impl FromStr for GlobalId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("invalid id: {s:?}");
        let (kind, num) = s.split_at_checked(1).ok_or_else(bad)?;
        let n: u64 = num.parse().map_err(|_| bad())?;
        match kind {
            "s" => Ok(GlobalId::System(n)),
            "u" => Ok(GlobalId::User(n)),
            "t" => Ok(GlobalId::Transient(n)),
            _ => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_text() {
        for id in [
            GlobalId::System(3),
            GlobalId::User(42),
            GlobalId::Transient(7),
        ] {
            assert_eq!(id.to_string().parse::<GlobalId>().unwrap(), id);
        }
        assert!("x1".parse::<GlobalId>().is_err());
        assert!("u".parse::<GlobalId>().is_err());
        assert!("".parse::<GlobalId>().is_err());
    }
}

//! The frontier of a collection over totally ordered time.
//!
//! Storage, the catalog and the coordinator only ever need frontiers of
//! [`Timestamp`]s, which are totally ordered: such a frontier is either one
//! time (every update at or beyond it may still come) or *closed* (no update
//! will ever come). Owning that type here, rather than borrowing timely's
//! general `Antichain`, keeps the dataflow runtime out of every crate but
//! compute; compute converts at its edge (`Frontier::elements`).
//!
//! The serialized form is timely's (`{"elements":[t]}` or `{"elements":[]}`),
//! so shard states written by earlier builds read back unchanged.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// A lower bound on the times of updates still to come; see the module doc.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "Elements", into = "Elements")]
pub struct Frontier(Option<Timestamp>);

impl Frontier {
    /// The frontier at `time`: updates at `time` or later may still come.
    pub const fn at(time: Timestamp) -> Self {
        Frontier(Some(time))
    }

    /// The closed frontier: the collection is complete.
    pub const fn closed() -> Self {
        Frontier(None)
    }

    /// The frontier's time, or `None` when it is closed.
    pub fn as_option(&self) -> Option<&Timestamp> {
        self.0.as_ref()
    }

    /// The frontier as an antichain's elements (none when closed), the form
    /// a timely `Antichain` is built from.
    pub fn elements(&self) -> &[Timestamp] {
        self.0.as_slice()
    }

    /// Whether the frontier is closed.
    pub fn is_closed(&self) -> bool {
        self.0.is_none()
    }

    /// Whether an update at `time` may still come (`time` is at or beyond
    /// the frontier).
    pub fn less_equal(&self, time: &Timestamp) -> bool {
        self.0.is_some_and(|f| f <= *time)
    }

    /// Whether the frontier is strictly before `time`.
    pub fn less_than(&self, time: &Timestamp) -> bool {
        self.0.is_some_and(|f| f < *time)
    }
}

/// Frontiers are ordered as bounds: a closed frontier is beyond every time.
impl Ord for Frontier {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.0, other.0) {
            (Some(a), Some(b)) => a.cmp(&b),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        }
    }
}

impl PartialOrd for Frontier {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl From<Option<Timestamp>> for Frontier {
    fn from(time: Option<Timestamp>) -> Self {
        Frontier(time)
    }
}

/// The serialized shape, shared with timely's `Antichain`.
#[derive(Serialize, Deserialize)]
struct Elements {
    elements: Vec<Timestamp>,
}

impl TryFrom<Elements> for Frontier {
    type Error = String;

    fn try_from(e: Elements) -> Result<Self, String> {
        match e.elements.as_slice() {
            [] => Ok(Frontier::closed()),
            [t] => Ok(Frontier::at(*t)),
            many => Err(format!(
                "a frontier of totally ordered time has at most one element, found {}",
                many.len()
            )),
        }
    }
}

impl From<Frontier> for Elements {
    fn from(f: Frontier) -> Self {
        Elements {
            elements: f.0.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_is_beyond_every_time() {
        assert!(Frontier::at(u64::MAX) < Frontier::closed());
        assert!(Frontier::at(3) < Frontier::at(4));
        assert!(!Frontier::closed().less_equal(&u64::MAX));
        assert!(Frontier::at(3).less_equal(&3));
        assert!(!Frontier::at(3).less_than(&3));
    }

    #[test]
    fn serialized_form_is_timelys() {
        let json = |f: &Frontier| serde_json::to_string(f).unwrap();
        assert_eq!(json(&Frontier::at(7)), r#"{"elements":[7]}"#);
        assert_eq!(json(&Frontier::closed()), r#"{"elements":[]}"#);
        let back: Frontier = serde_json::from_str(r#"{"elements":[9]}"#).unwrap();
        assert_eq!(back, Frontier::at(9));
        assert!(serde_json::from_str::<Frontier>(r#"{"elements":[1,2]}"#).is_err());
    }
}

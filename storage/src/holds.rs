//! Read holds: counted claims that keep a collection readable at a time.

use std::collections::BTreeMap;
use std::sync::Weak;

use freshet_repr::{GlobalId, Timestamp};

use crate::collection::Collection;
use crate::error::{Result, StorageError};

/// Counted holds on one collection, by time.
#[derive(Debug, Default)]
pub(crate) struct HoldSet {
    holds: BTreeMap<Timestamp, usize>,
}

impl HoldSet {
    pub fn add(&mut self, t: Timestamp) {
        *self.holds.entry(t).or_default() += 1;
    }

    pub fn remove(&mut self, t: Timestamp) {
        if let Some(n) = self.holds.get_mut(&t) {
            *n -= 1;
            if *n == 0 {
                self.holds.remove(&t);
            }
        }
    }

    /// The earliest held time, which `since` may not pass.
    pub fn min(&self) -> Option<Timestamp> {
        self.holds.keys().next().copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (Timestamp, usize)> + '_ {
        self.holds.iter().map(|(t, n)| (*t, *n))
    }
}

/// A claim that a collection stays readable at `time` (its `since` will not
/// pass it) for as long as this value lives.
///
/// Dropping the hold releases it, so a query that errors, is cancelled or
/// whose client vanishes releases its holds by unwinding. Dataflows keep one
/// per input and [`downgrade`](ReadHold::downgrade) it as their output
/// becomes durable.
#[derive(Debug)]
pub struct ReadHold {
    id: GlobalId,
    time: Timestamp,
    collection: Weak<Collection>,
}

impl ReadHold {
    pub(crate) fn new(id: GlobalId, time: Timestamp, collection: Weak<Collection>) -> Self {
        ReadHold {
            id,
            time,
            collection,
        }
    }

    /// The collection held.
    pub fn id(&self) -> GlobalId {
        self.id
    }

    /// The time held.
    pub fn time(&self) -> Timestamp {
        self.time
    }

    /// Move the hold forward to `time` (never backward).
    pub fn downgrade(&mut self, time: Timestamp) -> Result<()> {
        if time < self.time {
            return Err(StorageError::InvalidUsage(format!(
                "read hold on {} may not move back from {} to {time}",
                self.id, self.time
            )));
        }
        if time == self.time {
            return Ok(());
        }
        if let Some(c) = self.collection.upgrade() {
            c.move_hold(self.time, time);
        }
        self.time = time;
        Ok(())
    }

    /// Another hold on the same collection at the same time.
    pub fn try_clone(&self) -> Result<ReadHold> {
        match self.collection.upgrade() {
            Some(c) => {
                c.add_hold_unchecked(self.time);
                Ok(ReadHold::new(
                    self.id,
                    self.time,
                    Weak::clone(&self.collection),
                ))
            }
            None => Err(StorageError::UnknownCollection(self.id)),
        }
    }
}

impl Drop for ReadHold {
    fn drop(&mut self) {
        if let Some(c) = self.collection.upgrade() {
            c.release_hold(self.time);
        }
    }
}

/// One row of the read-hold introspection: `count` holds on `id` at `time`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoldInfo {
    /// The collection held.
    pub id: GlobalId,
    /// The time held.
    pub time: Timestamp,
    /// How many holds are at that time.
    pub count: usize,
}

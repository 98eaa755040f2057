//! Committed diffs: what one catalog transaction changed.

use serde::{Deserialize, Serialize};

use crate::objects::CatalogObject;

/// One change to one object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Change {
    /// The object now exists.
    Added(CatalogObject),
    /// The object no longer exists.
    Removed(CatalogObject),
    /// The object changed in place (rename, `CREATE OR REPLACE`); its id
    /// stays the same.
    Updated {
        /// Before.
        old: CatalogObject,
        /// After.
        new: CatalogObject,
    },
}

/// Everything one catalog transaction changed, in the order it must be
/// applied: removals of dependents before what they depend on, additions of
/// what is depended on before its dependents.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogDiff {
    /// The changes, in application order.
    pub changes: Vec<Change>,
}

impl CatalogDiff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}

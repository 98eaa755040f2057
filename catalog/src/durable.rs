//! The catalog: state plus its durable log of committed diffs.

use std::sync::Arc;

use freshet_repr::GlobalId;
use freshet_storage::{
    CLAIM_ATTEMPTS, CasResult, Consensus, Fence, SeqNo, StorageError, VersionedData,
};
use serde::{Deserialize, Serialize};

use crate::diff::{CatalogDiff, Change};
use crate::error::CatalogError;
use crate::objects::CatalogObject;
use crate::state::CatalogState;
use crate::transact::{Op, transact};

/// Consensus key of the catalog log.
pub const CATALOG_KEY: &str = "catalog";

/// Name of the database every fresh data directory starts with.
pub const DEFAULT_DATABASE: &str = "freshet";

/// Rewrite the log as one snapshot once it holds this many entries.
const SNAPSHOT_AFTER: usize = 256;

#[derive(Serialize, Deserialize)]
enum LogEntry {
    /// A process took over the catalog at this epoch.
    Fence { epoch: u64 },
    /// A committed transaction.
    Diff {
        epoch: u64,
        next_id: u64,
        diff: CatalogDiff,
    },
    /// The whole catalog (entries before it were truncated).
    Snapshot {
        epoch: u64,
        next_id: u64,
        objects: Vec<CatalogObject>,
    },
}

impl LogEntry {
    fn epoch(&self) -> u64 {
        match self {
            LogEntry::Fence { epoch }
            | LogEntry::Diff { epoch, .. }
            | LogEntry::Snapshot { epoch, .. } => *epoch,
        }
    }
}

/// The catalog: the single authority on what exists.
///
/// Every change is a transaction ([`Catalog::transact`]) whose committed
/// diff is appended to a log in [`Consensus`] by compare-and-set before the
/// transaction returns; opening the catalog replays that log and appends a
/// fence entry, so an older process's next commit fails.
#[derive(Debug)]
pub struct Catalog {
    consensus: Arc<dyn Consensus>,
    fence: Fence,
    seqno: Option<SeqNo>,
    state: Arc<CatalogState>,
    /// The highest id handed to a transaction block's statement (in
    /// memory only: blocks end with the process). Other transactions
    /// allocate above it.
    reserved: u64,
}

fn encode(entry: &LogEntry) -> Result<Vec<u8>, CatalogError> {
    serde_json::to_vec(entry).map_err(|e| CatalogError::Corruption(e.to_string()))
}

fn decode(data: &[u8]) -> Result<LogEntry, CatalogError> {
    serde_json::from_slice(data).map_err(|e| CatalogError::Corruption(e.to_string()))
}

impl Catalog {
    /// Open the catalog for the process holding `fence`: fence older
    /// processes, replay the log, and on first boot create the default
    /// database `freshet` with schema `public`.
    ///
    /// The fence entry is appended before the replay: an older process may
    /// still be committing DDL during a takeover, and once the fence is in
    /// the log every entry before it is final (the older process's next
    /// append fails as fenced), so one replay up to it is complete.
    pub fn open(fence: Fence) -> Result<Catalog, CatalogError> {
        let consensus = Arc::clone(fence.consensus());
        let epoch = fence.epoch();
        let mut claimed = None;
        for _ in 0..CLAIM_ATTEMPTS {
            let head = consensus.head(CATALOG_KEY)?.map(|v| v.seqno);
            let next = head.map_or(1, |s| s + 1);
            let entry = VersionedData {
                seqno: next,
                data: encode(&LogEntry::Fence { epoch })?,
            };
            match consensus.compare_and_set(CATALOG_KEY, head, entry)? {
                CasResult::Committed => {
                    claimed = Some(next);
                    break;
                }
                // A newer epoch appended: replaying says so. An older one
                // did: read the new head and try again.
                CasResult::Mismatch(_) => fence.check()?,
            }
        }
        let Some(fence_seqno) = claimed else {
            return Err(CatalogError::Corruption(format!(
                "the catalog log kept changing while epoch {epoch} claimed it"
            )));
        };
        let mut state = CatalogState::default();
        let mut n_entries = 0;
        for v in consensus.scan(CATALOG_KEY, 0)? {
            let entry = decode(&v.data)?;
            if entry.epoch() > epoch {
                return Err(StorageError::Fenced {
                    mine: epoch,
                    current: entry.epoch(),
                }
                .into());
            }
            if v.seqno >= fence_seqno {
                continue;
            }
            n_entries += 1;
            match entry {
                LogEntry::Fence { .. } => {}
                LogEntry::Diff { next_id, diff, .. } => {
                    state.apply(&diff)?;
                    state.next_id = next_id;
                }
                LogEntry::Snapshot {
                    next_id, objects, ..
                } => {
                    state = CatalogState::default();
                    state.apply(&CatalogDiff {
                        changes: objects.into_iter().map(Change::Added).collect(),
                    })?;
                    state.next_id = next_id;
                }
            }
        }
        let mut catalog = Catalog {
            consensus,
            fence,
            seqno: Some(fence_seqno),
            state: Arc::new(state),
            reserved: 0,
        };
        if n_entries >= SNAPSHOT_AFTER {
            catalog.write_snapshot()?;
        }
        if n_entries == 0 {
            catalog.transact(vec![Op::CreateDatabase {
                name: DEFAULT_DATABASE.into(),
            }])?;
            tracing::info!("initialized a new catalog with database \"{DEFAULT_DATABASE}\"");
        }
        tracing::info!(
            entries = n_entries,
            items = catalog.state.items().count(),
            "catalog opened"
        );
        Ok(catalog)
    }

    /// Replace the log by one snapshot entry.
    fn write_snapshot(&mut self) -> Result<(), CatalogError> {
        let objects = self
            .state
            .as_diff_from_empty()
            .changes
            .into_iter()
            .filter_map(|c| match c {
                Change::Added(o) => Some(o),
                _ => None,
            })
            .collect();
        let entry = LogEntry::Snapshot {
            epoch: self.fence.epoch(),
            next_id: self.state.next_id,
            objects,
        };
        self.append(entry)?;
        if let Some(s) = self.seqno {
            self.consensus.truncate(CATALOG_KEY, s)?;
        }
        Ok(())
    }

    fn append(&mut self, entry: LogEntry) -> Result<(), CatalogError> {
        // A newer process may be claiming the log: stop appending as soon
        // as its epoch exists. Without this check a process committing DDL
        // in a loop can win every race for the log's head against the
        // claimer (both take turns on the consensus store's lock), and the
        // takeover gives up after `CLAIM_ATTEMPTS`.
        self.fence.check()?;
        let next = self.seqno.map_or(1, |s| s + 1);
        match self.consensus.compare_and_set(
            CATALOG_KEY,
            self.seqno,
            VersionedData {
                seqno: next,
                data: encode(&entry)?,
            },
        )? {
            CasResult::Committed => {
                self.seqno = Some(next);
                Ok(())
            }
            CasResult::Mismatch(_) => {
                // Someone else appended: only a newer epoch may do that.
                for v in self.consensus.scan(CATALOG_KEY, next)? {
                    let theirs = decode(&v.data)?.epoch();
                    if theirs > self.fence.epoch() {
                        return Err(StorageError::Fenced {
                            mine: self.fence.epoch(),
                            current: theirs,
                        }
                        .into());
                    }
                }
                self.fence.check()?;
                Err(CatalogError::Corruption(
                    "catalog log changed under this process's epoch".into(),
                ))
            }
        }
    }

    /// The current state (cheap to clone and hold while planning).
    pub fn state(&self) -> Arc<CatalogState> {
        Arc::clone(&self.state)
    }

    /// The epoch this catalog writes under.
    pub fn epoch(&self) -> u64 {
        self.fence.epoch()
    }

    /// The state `ops` would produce and the ids they would create, without
    /// committing anything: what a caller plans against before adding the
    /// results (written plans) to the same transaction.
    pub fn preview(&self, ops: Vec<Op>) -> Result<(CatalogState, Vec<GlobalId>), CatalogError> {
        let (next, _, created) = transact(&self.state, self.past_reserved(ops))?;
        Ok((next, created))
    }

    /// Check a transaction block's statement against `base` (the catalog
    /// as the block sees it), reserving the ids its objects get. Returns
    /// the catalog after it, the ids created and the ops to commit (led by
    /// the [`Op::AllocateAfter`] that gives COMMIT the same ids).
    #[allow(clippy::type_complexity)]
    pub fn preview_step(
        &mut self,
        base: &CatalogState,
        ops: Vec<Op>,
    ) -> Result<(CatalogState, Vec<GlobalId>, Vec<Op>), CatalogError> {
        let after = base.next_id.max(self.state.next_id).max(self.reserved);
        let ops: Vec<Op> = std::iter::once(Op::AllocateAfter(after))
            .chain(ops)
            .collect();
        let (next, _, created) = transact(base, ops.clone())?;
        self.reserved = self.reserved.max(next.next_id);
        Ok((next, created, ops))
    }

    /// `ops`, allocating above the ids reserved for transaction blocks.
    fn past_reserved(&self, ops: Vec<Op>) -> Vec<Op> {
        if self.reserved <= self.state.next_id {
            return ops;
        }
        std::iter::once(Op::AllocateAfter(self.reserved))
            .chain(ops)
            .collect()
    }

    /// Validate and durably commit `ops` as one transaction. Returns the
    /// committed diff and the ids of objects created, in order. Nothing is
    /// changed if any op fails or the log append fails.
    pub fn transact(&mut self, ops: Vec<Op>) -> Result<(CatalogDiff, Vec<GlobalId>), CatalogError> {
        let (next, diff, created) = transact(&self.state, self.past_reserved(ops))?;
        if diff.is_empty() {
            return Ok((diff, created));
        }
        self.append(LogEntry::Diff {
            epoch: self.fence.epoch(),
            next_id: next.next_id,
            diff: diff.clone(),
        })?;
        self.state = Arc::new(next);
        Ok((diff, created))
    }
}

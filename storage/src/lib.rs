//! Durable storage for Freshet.
//!
//! Every collection (a table, and later a source or a materialized view's
//! output) is a **shard**: a multiset of `(row, time, diff)` updates with
//! `since` and `upper` frontiers. Its updates live in immutable batch files
//! behind [`Blob`]; which files are live, and the frontiers, live in
//! [`Consensus`], which changes only by compare-and-set under the current
//! [`Fence`] epoch.
//!
//! Table writes go through one transaction log ([`Storage::commit`]): one
//! fsync per group commit, atomic across tables, at a timestamp from the
//! durable [`TimestampOracle`]; they are flushed into the tables' shards in
//! the background. Readers use [`Storage::snapshot`] and
//! [`Storage::listen`] under a [`ReadHold`], and never see a time outside
//! `[since, upper)`.

mod appender;
mod batch;
mod blob;
mod collection;
mod consensus;
mod consolidate;
mod controller;
mod epoch;
mod error;
mod fsutil;
mod holds;
mod listen;
mod oracle;
mod part_cache;
mod part_stats;
mod scan;
mod shard;
mod sinces;
mod txn_log;

pub use appender::AppendDone;
pub use batch::{data_columns, updates_schema, write_batch, write_schema};
pub use blob::{Blob, Bytes, FileBlob};
pub use collection::{CollectionKind, ReadPolicy};
pub use consensus::{CasResult, Consensus, FileConsensus, SeqNo, VersionedData};
pub use controller::{CollectionInfo, Storage, StorageConfig, TableWrite};
pub use epoch::{CLAIM_ATTEMPTS, EPOCH_KEY, Fence};
pub use error::{Result, StorageError};
pub use holds::{HoldInfo, ReadHold};
pub use listen::{Listen, ListenEvent, Notify};
pub use oracle::{ALLOCATION_BLOCK_MS, TimestampOracle, wall_clock_ms};
pub use part_stats::{ColumnBounds, PartStats};
pub use scan::SnapshotScan;
pub use shard::StagedPart;

use std::path::Path;
use std::sync::Arc;

/// Open the embedded local-directory storage under `data_dir`: take the
/// next epoch (fencing any earlier process) and return the pieces the
/// catalog and [`Storage`] share.
pub fn open_local(data_dir: &Path) -> Result<(Arc<dyn Blob>, Fence)> {
    std::fs::create_dir_all(data_dir)?;
    let blob = FileBlob::open(data_dir.join("blob"))?;
    let consensus: Arc<dyn Consensus> = Arc::new(FileConsensus::open(data_dir.join("consensus"))?);
    // Fence first: until then an older process may still be writing the
    // temporary files this removes (it sees the fence when its write fails).
    let fence = Fence::acquire(consensus)?;
    blob.remove_leftover_temps()?;
    Ok((Arc::new(blob), fence))
}

//! PostgreSQL change data capture: an initial snapshot taken at a
//! replication slot's consistent point, then the slot's logical
//! replication stream (`pgoutput`), each upstream transaction applied in
//! one atomic append with the log position it ends at.
//!
//! The replication protocol is spoken by `pgwire-replication` (transport,
//! keepalives, feedback, SCRAM); ordinary queries (checks, the snapshot's
//! `COPY`) by `tokio-postgres`. Decoding `pgoutput` messages and the
//! upstream's text forms into Freshet's values is ours ([`pgoutput`],
//! [`text`], [`copy_text`]).

mod copy_text;
mod ingest;
mod pgoutput;
mod text;
mod upstream;

pub(crate) use ingest::run;
pub use upstream::{PostgresEndpoint, TableRequest, drop_slot, new_slot_name, purify, validate};

//! End-to-end tests of the `freshet` binary over the Postgres wire
//! protocol, with tokio-postgres as the client. One test binary, because
//! every binary that links DataFusion is slow to link.

mod bad_input;
mod catalog;
mod concurrency;
mod crash;
mod dataflows;
mod differential;
mod durability;
mod endpoint;
mod error_texts;
mod harness;
mod hostile;
mod indexes;
mod inserts;
mod kafka;
mod kafka_sinks;
mod keyed_writes;
mod mv_property;
mod pg;
mod postgres_sinks;
mod postgres_source;
mod primary_keys;
mod protocol;
mod protocol_fuzz;
mod psql_smoke;
mod scans;
mod sinks;
mod sources;
mod subscribe;
mod temporal;
mod time_travel;
mod transactions;
mod types;
mod webhook;

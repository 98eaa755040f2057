//! The Freshet server: the pgwire front end, sessions, and the sequencer
//! that turns statements into catalog transactions, reads and writes.

pub mod collection_scan;
pub mod config;
pub mod connection;
pub mod coordinator;
pub mod copy;
pub mod correlated;
pub mod encode;
pub mod error;
pub mod handler;
pub mod http;
pub mod introspection;
pub mod keyed_rows;
pub mod keys;
pub mod overlay;
pub mod params;
pub mod query_exec;
pub mod server;
pub mod session;
pub mod session_functions;
pub mod subscribe;
pub mod values;
pub mod vars;
pub mod watch;
pub mod webhook;

pub use config::Config;
pub use server::serve;

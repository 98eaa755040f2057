//! Postgres semantics every layer shares: SQL type names to Postgres types,
//! output column names as Postgres gives them, and Postgres text input.

pub mod naming;
pub mod text;
pub mod time_zone;
pub mod types;

//! Planning queries with DataFusion over the catalog: names resolved to
//! catalog ids, the table providers that read collections at a query's
//! timestamp, Freshet's functions, and the session state with its rules.

pub mod array_functions;
pub mod binding;
pub mod bound_function;
pub mod catalog_functions;
pub mod crypto;
pub mod engine;
pub mod functions;
pub mod index_scan;
pub mod json_build;
pub mod jsonb_aggregates;
pub mod jsonb_functions;
pub mod jsonb_ops;
pub mod jsonb_table_functions;
pub mod keywords;
pub mod part_scan;
pub mod pg_functions;
pub mod provider;
pub mod resolve;
pub mod sequences;
pub mod single_value;
pub mod text_functions;
pub mod undefined_function;

//! The catalog: the single authority for every object Freshet maintains.
//!
//! Objects (databases, schemas, and items such as tables and views) have
//! stable [`GlobalId`](freshet_repr::GlobalId)s; stored definitions refer to
//! other objects by id. Each DDL statement is one [`Catalog::transact`] call
//! whose [`CatalogDiff`] is durably logged before it returns, and
//! [`implications`] turns a diff into the ordered actions storage and compute
//! take. Boot applies [`CatalogState::as_diff_from_empty`] through the same
//! function.

mod connections;
mod diff;
mod durable;
mod error;
mod implications;
mod objects;
mod sinks;
mod sources;
mod state;
mod transact;

pub use connections::{ConnectionSpec, KafkaConnection, PostgresConnection};
pub use diff::{CatalogDiff, Change};
pub use durable::{CATALOG_KEY, Catalog, DEFAULT_DATABASE};
pub use error::CatalogError;
pub use implications::{Implication, implications};
pub use objects::{
    CatalogObject, Database, DefaultExpr, Identity, Item, ItemDetails, ItemKind, ItemOptions,
    Schema, SecretValue, SequenceDef, Serial, TableKeys, UniqueKey, WrittenPlan,
};
pub use sinks::{
    FileFormat, FilesSinkSpec, KafkaSinkSpec, PostgresSinkSpec, SinkConnector, SinkDetails,
    SinkEnvelope,
};
pub use sources::{
    Ingestion, KafkaFormat, KafkaSourceSpec, LoadGenerator, LoadGeneratorSpec, PostgresSourceSpec,
    PostgresSourceTable, PostgresUpstreamColumn, SourceConnector, SourceDetails, SourceShape,
    WebhookBodyFormat, WebhookCheck, WebhookCheckInput, WebhookHeaderColumn, WebhookHeaderFilter,
    WebhookSpec,
};
pub use state::{CatalogState, FIRST_USER_OID};
pub use transact::{ItemDef, Op};

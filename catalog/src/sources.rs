//! What the catalog records of a source: how its data arrives and which
//! relations it writes.
//!
//! A source is a group of items created by one `CREATE SOURCE`: the
//! source itself (whose details say how data is ingested), the relations
//! it writes when it has several (`FOR ALL TABLES`: one item per output,
//! Materialize's *subsources*), and its progress relation (the offset,
//! counter or log position the ingestion has durably reached). The parts
//! reference the source, so they are its dependents and go with it.

use freshet_repr::{GlobalId, RelationDesc};
use serde::{Deserialize, Serialize};

/// The role of a source item within its group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SourceDetails {
    /// The source itself: what it ingests from. It holds rows only if it
    /// has a single output (its `desc` is then that output's columns).
    Ingestion(Box<Ingestion>),
    /// One relation a multi-output source writes.
    Output {
        /// The source that writes it.
        source: GlobalId,
        /// The upstream relation's name (a generator's relation, an
        /// upstream table), which the ingestion knows it by.
        upstream: String,
    },
    /// The source's progress relation: one row saying how far ingestion
    /// has durably come, written in the same atomic append as the data.
    Progress {
        /// The source it tracks.
        source: GlobalId,
    },
}

impl SourceDetails {
    /// The source the item belongs to (itself, for the source).
    pub fn source(&self, own: GlobalId) -> GlobalId {
        match self {
            SourceDetails::Ingestion(_) => own,
            SourceDetails::Output { source, .. } | SourceDetails::Progress { source } => *source,
        }
    }

    /// Record the source's id in a part created with it (its id is known
    /// only once the catalog transaction allocates it).
    pub(crate) fn set_source(&mut self, id: GlobalId) {
        match self {
            SourceDetails::Ingestion(_) => {}
            SourceDetails::Output { source, .. } | SourceDetails::Progress { source } => {
                *source = id
            }
        }
    }

    /// The word `SHOW SOURCES` uses for the item's type.
    pub fn type_name(&self) -> &'static str {
        match self {
            SourceDetails::Ingestion(i) => i.connector.type_name(),
            SourceDetails::Output { .. } => "subsource",
            SourceDetails::Progress { .. } => "progress",
        }
    }
}

/// How a source ingests, and when it was created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ingestion {
    /// Where the data comes from.
    pub connector: SourceConnector,
    /// Wall-clock milliseconds at creation: generators date what they
    /// generate from it, so a restart regenerates the same rows.
    pub created_at: u64,
}

/// Where a source's data comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SourceConnector {
    /// `FROM LOAD GENERATOR ...`: data made up by Freshet.
    LoadGenerator(LoadGeneratorSpec),
    /// `FROM WEBHOOK ...`: rows posted to Freshet's HTTP endpoint.
    Webhook(WebhookSpec),
    /// `FROM POSTGRES CONNECTION ...`: a PostgreSQL publication's tables,
    /// by logical replication.
    Postgres(PostgresSourceSpec),
    /// `FROM KAFKA CONNECTION ...`: the records of a Kafka topic.
    Kafka(KafkaSourceSpec),
}

impl SourceConnector {
    /// The source type as `SHOW SOURCES` and `source_statuses` name it.
    pub fn type_name(&self) -> &'static str {
        match self {
            SourceConnector::LoadGenerator(_) => "load-generator",
            SourceConnector::Webhook(_) => "webhook",
            SourceConnector::Postgres(_) => "postgres",
            SourceConnector::Kafka(_) => "kafka",
        }
    }
}

/// The load generators Freshet has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LoadGenerator {
    /// `COUNTER`: one `bigint` counting up per tick.
    Counter,
    /// `AUCTION`: organizations, users, accounts, auctions and bids.
    Auction,
    /// `MARKETING`: customers, impressions, clicks, leads, coupons,
    /// conversion predictions.
    Marketing,
    /// `TPCH`: the eight TPC-H relations at a scale factor, then orders
    /// changing.
    Tpch,
    /// `KEY VALUE`: keyed `bytea` values updated in rounds.
    KeyValue,
    /// `NEXMARK`: persons, auctions and bids of the Nexmark benchmark.
    Nexmark,
}

impl LoadGenerator {
    /// The generator's name in SQL.
    pub fn sql_name(&self) -> &'static str {
        match self {
            LoadGenerator::Counter => "COUNTER",
            LoadGenerator::Auction => "AUCTION",
            LoadGenerator::Marketing => "MARKETING",
            LoadGenerator::Tpch => "TPCH",
            LoadGenerator::KeyValue => "KEY VALUE",
            LoadGenerator::Nexmark => "NEXMARK",
        }
    }
}

/// A load generator and its options (already checked and defaulted by
/// the planner).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadGeneratorSpec {
    /// Which generator.
    pub generator: LoadGenerator,
    /// `TICK INTERVAL`, in milliseconds; `None`: nothing changes after
    /// the snapshot (TPCH's and KEY VALUE's default, as Materialize's).
    pub tick_ms: Option<u64>,
    /// `AS OF`: the first tick to produce (earlier ticks are skipped).
    pub as_of: u64,
    /// `UP TO`: produce ticks before this one only.
    pub up_to: Option<u64>,
    /// `SEED`: what every random choice derives from.
    pub seed: u64,
    /// `MAX CARDINALITY` (COUNTER): keep only the newest values.
    pub max_cardinality: Option<u64>,
    /// `SCALE FACTOR` (TPCH), as written (a decimal).
    pub scale_factor: Option<String>,
    /// `KEYS` (KEY VALUE).
    pub keys: Option<u64>,
    /// `VALUE SIZE` in bytes (KEY VALUE).
    pub value_size: Option<u64>,
    /// `PARTITIONS` (KEY VALUE).
    pub partitions: Option<u64>,
    /// `BATCH SIZE`: keys updated per tick (KEY VALUE).
    pub batch_size: Option<u64>,
    /// `SNAPSHOT ROUNDS` (KEY VALUE): rounds over every key in the
    /// snapshot (its last round's values are what the snapshot holds).
    pub snapshot_rounds: Option<u64>,
    /// `EVENTS PER SECOND` (NEXMARK).
    pub events_per_second: Option<u64>,
    /// `TOTAL EVENTS` (NEXMARK): stop after this many events.
    pub total_events: Option<u64>,
}

impl LoadGeneratorSpec {
    /// A spec with every option at its default.
    pub fn new(generator: LoadGenerator) -> Self {
        LoadGeneratorSpec {
            generator,
            tick_ms: match generator {
                LoadGenerator::Tpch | LoadGenerator::KeyValue => None,
                LoadGenerator::Nexmark => Some(100),
                _ => Some(1_000),
            },
            as_of: 0,
            up_to: None,
            seed: 0,
            max_cardinality: None,
            scale_factor: None,
            keys: None,
            value_size: None,
            partitions: None,
            batch_size: None,
            snapshot_rounds: None,
            events_per_second: None,
            total_events: None,
        }
    }
}

/// A webhook source: what each posted request becomes, and the check it
/// must pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookSpec {
    /// How the body is read (and so the `body` column's type).
    pub body_format: WebhookBodyFormat,
    /// `INCLUDE HEADERS [(...)]`: a `headers` column holding the
    /// request's headers; `None` without it.
    pub include_headers: Option<WebhookHeaderFilter>,
    /// `INCLUDE HEADER 'name' AS column [BYTES]`, in order.
    pub header_columns: Vec<WebhookHeaderColumn>,
    /// `CHECK (...)`: requests it does not accept are refused (401).
    pub check: Option<WebhookCheck>,
}

/// How a webhook reads a request's body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WebhookBodyFormat {
    /// `TEXT`: UTF-8 text, one row.
    Text,
    /// `JSON`: one JSON value, one `jsonb` row.
    Json,
    /// `JSON ARRAY`: a JSON array, one `jsonb` row per element (any other
    /// value is one row).
    JsonArray,
    /// `BYTES`: the bytes as they came, one `bytea` row.
    Bytes,
}

impl WebhookBodyFormat {
    /// The format as SQL writes it.
    pub fn sql_name(&self) -> &'static str {
        match self {
            WebhookBodyFormat::Text => "TEXT",
            WebhookBodyFormat::Json => "JSON",
            WebhookBodyFormat::JsonArray => "JSON ARRAY",
            WebhookBodyFormat::Bytes => "BYTES",
        }
    }
}

/// Which headers `INCLUDE HEADERS` keeps: those named in `allow` (all if
/// it is empty), minus those in `block`. Names are lower case, as HTTP
/// header names compare.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookHeaderFilter {
    /// `'name'` entries: keep only these.
    pub allow: Vec<String>,
    /// `NOT 'name'` entries: never keep these.
    pub block: Vec<String>,
}

impl WebhookHeaderFilter {
    /// Whether header `name` (lower case) is kept.
    pub fn keeps(&self, name: &str) -> bool {
        (self.allow.is_empty() || self.allow.iter().any(|a| a == name))
            && !self.block.iter().any(|b| b == name)
    }
}

/// `INCLUDE HEADER 'name' AS column [BYTES]`: one header in a column of
/// its own (NULL when the request lacks it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookHeaderColumn {
    /// The header, lower case.
    pub header: String,
    /// The column.
    pub column: String,
    /// `bytea` rather than `text`.
    pub bytes: bool,
}

/// `CHECK (WITH (...) expression)`: a boolean SQL expression over the
/// request that must be true for it to be accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookCheck {
    /// The expression, as SQL text.
    pub expr: String,
    /// What the expression calls the headers (`jsonb`); `headers` unless
    /// `HEADERS AS` renames it.
    pub headers: WebhookCheckInput,
    /// What it calls the body; `body` unless `BODY AS` renames it.
    pub body: WebhookCheckInput,
    /// The secrets it reads, by the name it uses for each.
    pub secrets: Vec<(GlobalId, WebhookCheckInput)>,
}

/// One input of a webhook check: its name in the expression and whether
/// it is `bytea` (`BYTES`) rather than text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookCheckInput {
    /// The name the expression uses.
    pub name: String,
    /// `BYTES`.
    pub bytes: bool,
}

/// A PostgreSQL source: the publication it follows, the replication slot
/// it owns, and each upstream table it ingests as its columns were when
/// the source was created (a later change upstream that does not fit
/// them fails the source rather than writing wrong rows).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostgresSourceSpec {
    /// The connection (`CREATE CONNECTION ... TO POSTGRES`).
    pub connection: GlobalId,
    /// `PUBLICATION 'p'`.
    pub publication: String,
    /// The replication slot, named at `CREATE SOURCE` so that two Freshet
    /// processes (or a recreated source) never share one.
    pub slot: String,
    /// The upstream tables ingested, each into its own subsource.
    pub tables: Vec<PostgresSourceTable>,
}

/// A Kafka source: the topic it reads, how records become rows, and which
/// record metadata become columns. Offsets are Freshet's own (its
/// progress relation), not a consumer group's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaSourceSpec {
    /// The connection (`CREATE CONNECTION ... TO KAFKA`).
    pub connection: GlobalId,
    /// `TOPIC 't'`.
    pub topic: String,
    /// `FORMAT ...`: how keys and values are read.
    pub format: KafkaFormat,
    /// `INCLUDE KEY [AS name]`: the key's column.
    pub key_column: Option<String>,
    /// `INCLUDE PARTITION [AS name]`.
    pub partition_column: Option<String>,
    /// `INCLUDE OFFSET [AS name]`.
    pub offset_column: Option<String>,
    /// `INCLUDE TIMESTAMP [AS name]`.
    pub timestamp_column: Option<String>,
    /// `ENVELOPE UPSERT`: the latest value per key, a null value deleting
    /// it; otherwise (`NONE`) every record is a row.
    pub upsert: bool,
}

/// How a Kafka record's key and value are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KafkaFormat {
    /// `TEXT`: UTF-8 text (column `text`).
    Text,
    /// `BYTES`: the bytes (column `data bytea`).
    Bytes,
    /// `JSON`: one JSON value (column `data jsonb`).
    Json,
}

impl KafkaFormat {
    /// The format as SQL writes it.
    pub fn sql_name(&self) -> &'static str {
        match self {
            KafkaFormat::Text => "TEXT",
            KafkaFormat::Bytes => "BYTES",
            KafkaFormat::Json => "JSON",
        }
    }
}

/// One upstream table of a PostgreSQL source.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostgresSourceTable {
    /// Its oid upstream (what replication messages name it by).
    pub oid: u32,
    /// Its schema upstream.
    pub schema: String,
    /// Its name upstream.
    pub name: String,
    /// The subsource it is written to (its `SourceDetails::Output`
    /// upstream name).
    pub output: String,
    /// Its columns, in order.
    pub columns: Vec<PostgresUpstreamColumn>,
}

impl PostgresSourceTable {
    /// `schema.name`, quoted where needed, for messages and upstream SQL.
    pub fn qualified(&self) -> String {
        format!("{}.{}", quote_ident(&self.schema), quote_ident(&self.name))
    }
}

/// Quote a PostgreSQL identifier when it needs it.
fn quote_ident(s: &str) -> String {
    let plain = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        s.to_string()
    } else {
        format!("\"{}\"", s.replace('"', "\"\""))
    }
}

/// One column of an upstream table, as it was at `CREATE SOURCE`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostgresUpstreamColumn {
    /// Its name.
    pub name: String,
    /// Its type's oid upstream.
    pub type_oid: u32,
    /// Its type modifier upstream (`-1`: none).
    pub type_modifier: i32,
    /// `TEXT COLUMNS`: ingested as `text` (the upstream's text form), for
    /// types Freshet does not have (enums, domains over them, ...).
    pub as_text: bool,
}

/// What a connector writes: its relations, by the names upstream knows
/// them by, and the columns of its progress relation. The connector says
/// (for an upstream database, after asking it); the catalog items of a
/// new source are made from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceShape {
    /// Each relation written, by upstream name, in order.
    pub outputs: Vec<(String, RelationDesc)>,
    /// The progress relation's columns.
    pub progress: RelationDesc,
}

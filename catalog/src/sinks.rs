//! What the catalog keeps about a sink: where its changes go, in which
//! envelope and format, and the time it first read its input.
//!
//! A sink's progress is *not* kept here: it lives at the target (a files
//! sink's manifest, a Kafka topic's messages, a PostgreSQL progress row),
//! written in the same atomic step as the changes it covers, so the
//! target and the record of what reached it can never disagree.

use freshet_repr::{GlobalId, RelationDesc, Timestamp};
use serde::{Deserialize, Serialize};

/// A sink's definition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkDetails {
    /// The relation whose changes it exports (a table, source, view or
    /// materialized view).
    pub from: GlobalId,
    /// The relation's columns when the sink was created: what the
    /// target's rows hold.
    pub relation: RelationDesc,
    /// Where the changes go.
    pub connector: SinkConnector,
    /// How each change is shaped.
    pub envelope: SinkEnvelope,
    /// `KEY (...)`: column positions in `relation` (empty: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key: Vec<usize>,
    /// `KEY ... NOT ENFORCED`: the user vouches that the key is unique.
    #[serde(default)]
    pub key_not_enforced: bool,
    /// `WITH (SNAPSHOT = ...)`: whether the input's contents at `as_of`
    /// are exported first (default true), or only changes after it.
    pub snapshot: bool,
    /// The time the sink first read its input at (chosen at `CREATE`).
    pub as_of: Timestamp,
    /// `WITH (COMMIT INTERVAL = ...)`: how long changes gather before a
    /// commit at the target (default: the server's, 1 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_interval_ms: Option<u64>,
}

/// Where a sink writes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SinkConnector {
    /// `INTO FILES (PATH 'dir' | URL 'file:///dir')`: one immutable file
    /// per completed range of timestamps, and a manifest naming them.
    Files(FilesSinkSpec),
    /// `INTO KAFKA CONNECTION k (TOPIC 't')`: one JSON message per key
    /// and change, and a progress topic recording what reached it.
    Kafka(KafkaSinkSpec),
    /// `INTO POSTGRES CONNECTION pg (TABLE 'schema.table')`: each key's
    /// row upserted or deleted, one upstream transaction per commit, with
    /// the progress row in the same transaction.
    Postgres(PostgresSinkSpec),
}

impl SinkConnector {
    /// The word `SHOW SINKS` shows.
    pub fn type_name(&self) -> &'static str {
        match self {
            SinkConnector::Files(_) => "files",
            SinkConnector::Kafka(_) => "kafka",
            SinkConnector::Postgres(_) => "postgres",
        }
    }

    /// The connection it writes through, if any (dropping it needs
    /// `CASCADE`).
    pub fn connection(&self) -> Option<GlobalId> {
        match self {
            SinkConnector::Files(_) => None,
            SinkConnector::Kafka(k) => Some(k.connection),
            SinkConnector::Postgres(p) => Some(p.connection),
        }
    }
}

/// A Kafka sink's target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaSinkSpec {
    /// The connection (`CREATE CONNECTION ... TO KAFKA`).
    pub connection: GlobalId,
    /// `TOPIC 't'`: where the changes go (created if missing).
    pub topic: String,
    /// `PROGRESS TOPIC 'p'`: where the sink records, after each commit,
    /// the frontier below which every change is in `topic` (created if
    /// missing, one partition).
    pub progress_topic: String,
    /// `TOPIC PARTITION COUNT n`: partitions of a topic the sink creates.
    pub partitions: i32,
    /// `TOPIC REPLICATION FACTOR n`: replicas of a topic the sink creates.
    pub replication_factor: i16,
}

/// A PostgreSQL sink's target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostgresSinkSpec {
    /// The connection (`CREATE CONNECTION ... TO POSTGRES`).
    pub connection: GlobalId,
    /// `TABLE 'schema.table'`: schema (default `public`) and table,
    /// created with the relation's columns and the key if missing.
    pub table: (String, String),
    /// `PROGRESS TABLE 'schema.table'`: one row per sink, `(sink,
    /// frontier)`, written in the same transaction as the changes
    /// (default `_freshet_sink_progress` in the table's schema).
    pub progress_table: (String, String),
}

/// A files sink's target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesSinkSpec {
    /// The directory, as an absolute `file://` URL (an object store URL
    /// later).
    pub url: String,
    /// The files' format.
    pub format: FileFormat,
}

/// A files sink's file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileFormat {
    /// Apache Parquet.
    Parquet,
    /// CSV with a header line.
    Csv,
    /// Newline-delimited JSON objects.
    Json,
}

impl FileFormat {
    /// The files' extension (and the keyword, upper-cased).
    pub fn extension(&self) -> &'static str {
        match self {
            FileFormat::Parquet => "parquet",
            FileFormat::Csv => "csv",
            FileFormat::Json => "json",
        }
    }
}

/// How a sink shapes each change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SinkEnvelope {
    /// Each update as it is: its row and its diff (files only).
    Diffs,
    /// Per key, the row it now has, or a delete (a tombstone).
    Upsert,
    /// Per key, what it was and what it became (`before`/`after`).
    Debezium,
}

impl SinkEnvelope {
    /// The keyword (`ENVELOPE ...`); `None` for plain diffs.
    pub fn keyword(&self) -> Option<&'static str> {
        match self {
            SinkEnvelope::Diffs => None,
            SinkEnvelope::Upsert => Some("UPSERT"),
            SinkEnvelope::Debezium => Some("DEBEZIUM"),
        }
    }
}

//! The objects the catalog keeps.

use freshet_repr::{GlobalId, RefreshSchedule, RelationDesc};
use serde::{Deserialize, Serialize};

/// A database: a namespace of schemas.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Database {
    /// Stable id.
    pub id: GlobalId,
    /// Postgres-visible object id.
    pub oid: u32,
    /// Name, unique among databases.
    pub name: String,
}

/// A schema: a namespace of items inside a database.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    /// Stable id.
    pub id: GlobalId,
    /// Postgres-visible object id.
    pub oid: u32,
    /// The database it belongs to.
    pub database_id: GlobalId,
    /// Name, unique within the database.
    pub name: String,
}

/// What kind of relation or object an item is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ItemKind {
    /// A table written with INSERT/UPDATE/DELETE/COPY.
    Table,
    /// A named query, inlined where used.
    View,
    /// A query whose results are maintained incrementally and persisted.
    MaterializedView,
    /// An in-memory arrangement of a relation.
    Index,
    /// Data ingested from outside.
    Source,
    /// Data exported to outside.
    Sink,
    /// A standalone sequence (`CREATE SEQUENCE`): numbers handed out by
    /// `nextval`, kept in the catalog, with no collection.
    Sequence,
    /// A secret (`CREATE SECRET`): a value connections and webhook checks
    /// use, never shown.
    Secret,
    /// A connection (`CREATE CONNECTION`): how to reach an external
    /// system, used by sources; no collection.
    Connection,
}

impl ItemKind {
    /// The word users see (`SHOW`, error messages).
    pub fn name(&self) -> &'static str {
        match self {
            ItemKind::Table => "table",
            ItemKind::View => "view",
            ItemKind::MaterializedView => "materialized view",
            ItemKind::Index => "index",
            ItemKind::Source => "source",
            ItemKind::Sink => "sink",
            ItemKind::Sequence => "sequence",
            ItemKind::Secret => "secret",
            ItemKind::Connection => "connection",
        }
    }

    /// Whether items of this kind may have a storage collection of their
    /// own ([`Item::has_collection`] says whether one does).
    pub fn has_collection(&self) -> bool {
        matches!(
            self,
            ItemKind::Table | ItemKind::MaterializedView | ItemKind::Source
        )
    }
}

/// A table column's default, as SQL text (e.g. `0`, `'x'`, `now()`).
pub type DefaultExpr = Option<String>;

/// A catalog item: a relation or other named object inside a schema.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// Stable id; storage and compute know the item only by it.
    pub id: GlobalId,
    /// Postgres-visible object id.
    pub oid: u32,
    /// The schema the item lives in.
    pub schema_id: GlobalId,
    /// Name, unique among the schema's items.
    pub name: String,
    /// What the item is.
    pub kind: ItemKind,
    /// The definition, with every relation reference resolved to an id (the
    /// planner's canonical form), so boot never re-resolves names.
    pub create_sql: String,
    /// The relation's columns, for items that are relations.
    pub desc: Option<RelationDesc>,
    /// Items this one reads from directly (its dependencies).
    pub references: Vec<GlobalId>,
    /// Kind-specific details.
    pub details: ItemDetails,
    /// `WITH (...)` options: history retention, refresh schedule.
    #[serde(default)]
    pub options: Box<ItemOptions>,
}

impl Item {
    /// Whether the item has a storage collection: tables, materialized
    /// views, and sources that hold rows (a source with several outputs
    /// writes them to its subsources and holds none itself).
    pub fn has_collection(&self) -> bool {
        self.kind.has_collection() && self.desc.is_some()
    }

    /// The item's sink details, if it is a sink.
    pub fn sink_details(&self) -> Option<&crate::sinks::SinkDetails> {
        match &self.details {
            ItemDetails::Sink(d) => Some(d),
            _ => None,
        }
    }

    /// The item's source details, if it is a source or part of one.
    pub fn source_details(&self) -> Option<&crate::sources::SourceDetails> {
        match &self.details {
            ItemDetails::Source(d) => Some(d),
            _ => None,
        }
    }
}

/// Options a table, materialized view or index is created with (and that
/// `ALTER ... SET/RESET` changes).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemOptions {
    /// `RETAIN HISTORY FOR`: how much history (ms) stays readable behind
    /// the upper; `None` keeps the default (about one second).
    pub retain_history: Option<u64>,
    /// A materialized view's `REFRESH` schedule, with concrete times;
    /// `None` refreshes on every commit.
    pub refresh: Option<RefreshSchedule>,
}

/// A table's key constraints. Writes that would give two rows one key fail
/// with 23505.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableKeys {
    /// Column positions of the primary key (empty: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub primary_key: Vec<usize>,
    /// `UNIQUE` constraints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unique: Vec<UniqueKey>,
}

impl TableKeys {
    /// No key constraints at all.
    pub fn is_empty(&self) -> bool {
        self.primary_key.is_empty() && self.unique.is_empty()
    }
}

/// A table's `UNIQUE` constraint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UniqueKey {
    /// The constraint's name (PostgreSQL's default: `<table>_<cols>_key`).
    pub name: String,
    /// Key column positions.
    pub columns: Vec<usize>,
    /// `NULLS NOT DISTINCT`: rows with NULL keys conflict too (by default
    /// a key with a NULL in it conflicts with nothing).
    pub nulls_not_distinct: bool,
}

/// A sequence that numbers a table column (PostgreSQL's sequence owned by
/// the column). The catalog holds how far it has been handed out: values
/// are reserved here in blocks, durably, before any is used, so a restart
/// never hands out a value twice (it may skip the rest of a block, as
/// PostgreSQL's sequence cache does).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Serial {
    /// The column's position.
    pub column: usize,
    /// The sequence's name (`<table>_<column>_seq`).
    pub sequence: String,
    /// `GENERATED ALWAYS` / `BY DEFAULT AS IDENTITY`; `None` for `serial`.
    pub identity: Option<Identity>,
    /// The first value not yet reserved.
    pub next: i64,
    /// The largest value the column's type holds.
    pub max: i64,
}

/// How an identity column takes explicit values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Identity {
    /// `GENERATED ALWAYS`: explicit values are refused.
    Always,
    /// `GENERATED BY DEFAULT`: explicit values are taken.
    ByDefault,
}

/// Kind-specific parts of an item's definition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ItemDetails {
    /// Table column defaults, by column position.
    Table {
        /// Default expression per column.
        defaults: Vec<DefaultExpr>,
        /// Primary key and `UNIQUE` constraints (boxed: most tables have
        /// none).
        #[serde(default, skip_serializing_if = "TableKeys::is_empty")]
        keys: Box<TableKeys>,
        /// Columns numbered by a sequence (`serial`, `GENERATED ... AS
        /// IDENTITY`); their default in `defaults` calls `nextval`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        serials: Vec<Serial>,
    },
    /// Nothing beyond the SQL.
    View,
    /// A materialized view's written plan and the time its dataflow starts.
    MaterializedView {
        /// The dataflow plan committed with the view (boot installs it).
        plan: Option<Box<WrittenPlan>>,
        /// The committed `as_of` of its first hydration.
        as_of: Option<u64>,
    },
    /// The indexed relation and its key expressions (SQL text).
    Index {
        /// The relation indexed.
        on: GlobalId,
        /// Key expressions.
        keys: Vec<String>,
        /// The dataflow plan committed with the index (boot installs it).
        #[serde(default)]
        plan: Option<Box<WrittenPlan>>,
    },
    /// A standalone sequence's options and how far it is handed out.
    Sequence(Box<SequenceDef>),
    /// A source, or one of the relations a source writes.
    Source(Box<crate::sources::SourceDetails>),
    /// A secret's value.
    Secret(SecretValue),
    /// A connection's parameters.
    Connection(Box<crate::connections::ConnectionSpec>),
    /// A sink's target, envelope and start.
    Sink(Box<crate::sinks::SinkDetails>),
    /// Nothing kind-specific (kept so older catalogs still read).
    Other,
}

/// A standalone sequence (`CREATE SEQUENCE`). Like a [`Serial`], values
/// are reserved in blocks, durably, before any is used (`next` is the
/// first value not yet reserved), so a restart never hands one out twice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceDef {
    /// `AS smallint | integer | bigint`: 2, 4 or 8 bytes.
    pub width: u8,
    /// `INCREMENT BY` (never 0; negative counts down).
    pub increment: i64,
    /// `MINVALUE`.
    pub min: i64,
    /// `MAXVALUE`.
    pub max: i64,
    /// `START WITH` (where `RESTART` goes back to).
    pub start: i64,
    /// `CACHE` (shown in `pg_sequences`; Freshet reserves its own blocks).
    pub cache: i64,
    /// `CYCLE`: wrap around at the end instead of failing.
    pub cycle: bool,
    /// The first value not yet reserved; `None` once a non-cycling
    /// sequence has reserved its last value.
    pub next: Option<i64>,
    /// Whether any value was ever handed out or set (`pg_sequences`
    /// shows `last_value` only then).
    pub called: bool,
}

impl SequenceDef {
    /// The PostgreSQL type name of its values.
    pub fn type_name(&self) -> &'static str {
        match self.width {
            2 => "smallint",
            4 => "integer",
            _ => "bigint",
        }
    }

    /// The last value reserved (`pg_sequences.last_value`): it may run
    /// ahead of the last one handed out, as PostgreSQL's does with a
    /// cache. `None` until a value is handed out or set.
    pub fn last_value(&self) -> Option<i64> {
        if !self.called {
            return None;
        }
        let bound = if self.increment > 0 {
            self.max
        } else {
            self.min
        };
        match self.next {
            // Past the end of a non-cycling sequence: its bound was last.
            None => Some(bound),
            Some(next) => match next.checked_sub(self.increment) {
                Some(v) if (self.min..=self.max).contains(&v) => Some(v),
                // Just wrapped around.
                _ => Some(bound),
            },
        }
    }

    /// Reserve up to `n` values from `next` on, in order, wrapping at the
    /// end when the sequence cycles; fewer (possibly none) only where a
    /// non-cycling sequence ends.
    pub fn reserve(&mut self, n: usize) -> Vec<i64> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let Some(v) = self.next else { break };
            out.push(v);
            self.called = true;
            self.next = match v.checked_add(self.increment) {
                Some(w) if (self.min..=self.max).contains(&w) => Some(w),
                _ if self.cycle => Some(if self.increment > 0 {
                    self.min
                } else {
                    self.max
                }),
                _ => None,
            };
        }
        out
    }
}

/// A dataflow plan as committed with the object it maintains, so boot
/// installs exactly what `CREATE` planned (and `EXPLAIN` shows it) rather
/// than planning the SQL again with whatever the optimizer does today.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenPlan {
    /// The plan format: Freshet's message version and the DataFusion
    /// release whose expression encoding it embeds. A reader of another
    /// format re-plans from the SQL.
    pub format: String,
    /// The encoded dataflow (base64 of its wire form).
    pub plan: String,
    /// The same dataflow reading storage instead of indexes' arrangements,
    /// if it reuses any (installed when an index cannot serve it).
    pub from_storage: Option<String>,
    /// Notices planning raised, replayed to whoever explains the plan.
    pub notices: Vec<String>,
}

/// Any object the catalog holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CatalogObject {
    /// A database.
    Database(Database),
    /// A schema.
    Schema(Schema),
    /// An item.
    Item(Item),
}

impl CatalogObject {
    /// The object's id.
    pub fn id(&self) -> GlobalId {
        match self {
            CatalogObject::Database(d) => d.id,
            CatalogObject::Schema(s) => s.id,
            CatalogObject::Item(i) => i.id,
        }
    }
}

/// A secret's value. The catalog is the one place it is kept: creating,
/// altering and dropping a secret are catalog transactions like any other
/// DDL, so the value is durable exactly when the statement returns. It is
/// never printed: `Debug` redacts it (diffs and items are logged), and the
/// stored `CREATE SECRET` text holds a placeholder, not the value.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretValue(Vec<u8>);

impl SecretValue {
    /// A secret holding `bytes`.
    pub fn new(bytes: Vec<u8>) -> Self {
        SecretValue(bytes)
    }

    /// The value, for the code that uses it (a connection, a check).
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretValue(<redacted>)")
    }
}

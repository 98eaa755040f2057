//! Built-in relations: Freshet introspection (`freshet_internal`) and the
//! parts of `pg_catalog` and `information_schema` that tools read.
//!
//! Each one is a [`BuiltinRelation`] in [`BUILTINS`]: its schema, name and
//! columns (PostgreSQL 15's names and types, in its order), and where its
//! rows come from ([`BuiltinSource`]):
//!
//! - **rows** the server computes from the catalog and storage when a query
//!   reads it ([`Builtin`], answered by
//!   [`crate::CollectionReader::builtin_rows`]); these are the few base
//!   relations everything else derives from, so the catalog stays the one
//!   source of truth;
//! - **views** written in SQL over those (`pg_tables`, `pg_matviews`,
//!   `information_schema.tables`, `pg_roles`, ...), planned and inlined like
//!   user views;
//! - **empty** relations for Postgres features Freshet does not have
//!   (policies, publications, inheritance, ...), so tools that look for them
//!   find none. They plan as an empty relation, so the optimizer removes
//!   the (often correlated) expressions tools compute over them.

pub mod keys;
mod relations;

use freshet_repr::{ColumnDesc, PgType, RelationDesc};

pub use relations::BUILTINS;

/// Schemas that exist in every database and hold only built-in relations.
pub const SYSTEM_SCHEMAS: &[&str] = &["pg_catalog", "information_schema", "freshet_internal"];

/// The built-in relations whose rows the server computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Builtin {
    /// `freshet_internal.read_holds`
    ReadHolds,
    /// `freshet_internal.collections`
    Collections,
    /// `freshet_internal.materialized_view_refreshes`
    MaterializedViewRefreshes,
    /// `freshet_internal.dataflows`
    Dataflows,
    /// `pg_catalog.pg_namespace`
    PgNamespace,
    /// `pg_catalog.pg_database`
    PgDatabase,
    /// `pg_catalog.pg_class`
    PgClass,
    /// `pg_catalog.pg_attribute`
    PgAttribute,
    /// `pg_catalog.pg_type`
    PgType,
    /// `information_schema.key_column_usage`
    KeyColumnUsage,
    /// `pg_catalog.pg_am`
    PgAm,
    /// `pg_catalog.pg_index`
    PgIndex,
    /// `pg_catalog.pg_cursors`: the session's open cursors
    PgCursors,
    /// `pg_catalog.pg_attrdef`
    PgAttrdef,
    /// `pg_catalog.pg_constraint`
    PgConstraint,
    /// `pg_catalog.pg_settings`: the session's settings
    PgSettings,
    /// `pg_catalog.pg_rewrite`: views' `_RETURN` rules
    PgRewrite,
    /// `pg_catalog.pg_depend`: what views and indexes depend on
    PgDepend,
    /// `pg_catalog.pg_sequence`: `CREATE SEQUENCE`'s sequences
    PgSequence,
    /// `freshet_internal.source_statuses`: each source's ingestion
    SourceStatuses,
    /// `freshet_internal.sink_statuses`: each sink's export
    SinkStatuses,
}

/// Where a built-in relation's rows come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinSource {
    /// Computed by the server when read.
    Rows(Builtin),
    /// A SQL query over other built-in relations, its output columns in
    /// the relation's column order.
    View(&'static str),
    /// Always empty: a Postgres feature Freshet does not have.
    Empty,
}

/// The oid of the one role Freshet has, which owns every object: Postgres's
/// bootstrap superuser's oid, so `pg_get_userbyid(relowner)` names it.
pub const BUILTIN_OWNER_OID: u32 = 10;

/// The access method oids `pg_class.relam` reports: Postgres's `heap` for
/// tables and materialized views (Freshet's shards), `btree` for indexes
/// (Freshet's arrangements), so tools that expect the defaults read them.
pub const HEAP_AM_OID: u32 = 2;
/// See [`HEAP_AM_OID`].
pub const BTREE_AM_OID: u32 = 403;

/// `pg_catalog`'s namespace oid (Postgres's).
pub const PG_CATALOG_OID: u32 = 11;
/// `information_schema`'s namespace oid.
pub const INFORMATION_SCHEMA_OID: u32 = 12;
/// `freshet_internal`'s namespace oid.
pub const FRESHET_INTERNAL_OID: u32 = 13;

/// The namespace oid of a system schema.
pub fn system_schema_oid(name: &str) -> u32 {
    match name {
        "pg_catalog" => PG_CATALOG_OID,
        "information_schema" => INFORMATION_SCHEMA_OID,
        _ => FRESHET_INTERNAL_OID,
    }
}

/// The oid of a table's `k`-th key constraint (0: the primary key, then
/// its `UNIQUE` constraints in order), which is also the oid of the index
/// Postgres would build for it. Freshet enforces keys without a separate
/// catalog object, so the oid is derived from the table's: user oids count
/// up from 16384, these live in the upper half of the oid space.
pub fn key_constraint_oid(table_oid: u32, k: usize) -> u32 {
    0x8000_0000 | (table_oid.wrapping_sub(16_384) << 6) | (k as u32 & 0x3f)
}

/// The oid of the sequence numbering column `column` of a table (its
/// `serial` or identity), derived like [`key_constraint_oid`]'s, in the
/// quarter of the oid space above those.
pub fn serial_sequence_oid(table_oid: u32, column: usize) -> u32 {
    0xC000_0000 | (table_oid.wrapping_sub(16_384) << 8) | (column as u32 & 0xff)
}

impl Builtin {
    /// Its description.
    pub fn relation(self) -> &'static BuiltinRelation {
        BUILTINS
            .iter()
            .find(|r| r.source == BuiltinSource::Rows(self))
            .unwrap_or(&BUILTINS[0])
    }
}

/// A built-in relation's description.
#[derive(Debug)]
pub struct BuiltinRelation {
    /// Its schema (one of [`SYSTEM_SCHEMAS`]).
    pub schema: &'static str,
    /// Its name.
    pub name: &'static str,
    /// Its columns.
    pub columns: &'static [(&'static str, SysType)],
    /// Where its rows come from.
    pub source: BuiltinSource,
}

/// Column types used by built-in relations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SysType {
    /// `text` (also Postgres's `name`, `"char"` and `regproc` columns)
    Text,
    /// `bigint`
    Int8,
    /// `integer`
    Int4,
    /// `smallint`
    Int2,
    /// `oid`
    Oid,
    /// `boolean`
    Bool,
    /// `real`
    Float4,
    /// `numeric` (timestamps: they exceed what clients expect of int8 text)
    Numeric,
    /// `text[]`
    TextArray,
    /// `smallint[]`
    Int2Array,
    /// `oid[]`
    OidArray,
    /// `int2vector` (`pg_index.indkey`): an `int2` array clients read as
    /// its own type, printed `1 2`
    Int2Vector,
    /// `oidvector` (`pg_index.indclass`)
    OidVector,
    /// `timestamp with time zone`
    TimestampTz,
}

impl SysType {
    /// The Postgres type of the column.
    pub fn pg(self) -> PgType {
        match self {
            SysType::Text => PgType::Text,
            SysType::Int8 => PgType::Int8,
            SysType::Int4 => PgType::Int4,
            SysType::Int2 => PgType::Int2,
            SysType::Oid => PgType::Oid,
            SysType::Bool => PgType::Bool,
            SysType::Float4 => PgType::Float4,
            SysType::Numeric => PgType::Numeric {
                typmod: Some((20, 0)),
            },
            SysType::TextArray => PgType::Array(Box::new(PgType::Text)),
            SysType::Int2Array => PgType::Array(Box::new(PgType::Int2)),
            SysType::OidArray => PgType::Array(Box::new(PgType::Oid)),
            SysType::Int2Vector => PgType::Int2Vector,
            SysType::OidVector => PgType::OidVector,
            SysType::TimestampTz => PgType::TimestampTz,
        }
    }
}

impl BuiltinRelation {
    /// Its oid in `pg_class`: fixed by its position in [`BUILTINS`] (new
    /// relations are appended), below every user object's.
    pub fn oid(&self) -> u32 {
        let position = BUILTINS
            .iter()
            .position(|r| std::ptr::eq(r, self))
            .unwrap_or(0);
        1000 + position as u32
    }

    /// `schema.name`.
    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }

    /// Its columns as a relation description.
    pub fn desc(&self) -> RelationDesc {
        RelationDesc::new(
            self.columns
                .iter()
                .map(|(name, ty)| ColumnDesc {
                    name: name.to_string(),
                    ty: ty.pg(),
                    nullable: true,
                })
                .collect(),
        )
    }
}

/// The built-in relation `schema.name`.
pub fn lookup(schema: &str, name: &str) -> Option<&'static BuiltinRelation> {
    BUILTINS
        .iter()
        .find(|r| r.schema == schema && r.name == name)
}

/// The built-in relation with this qualified name.
pub fn lookup_qualified(qualified: &str) -> Option<&'static BuiltinRelation> {
    let (schema, name) = qualified.split_once('.')?;
    lookup(schema, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every [`Builtin`] is described exactly once, names are unique for
    /// lookups to find them, and oids are unique.
    #[test]
    fn each_relation_is_described_once() {
        let all = [
            Builtin::ReadHolds,
            Builtin::Collections,
            Builtin::MaterializedViewRefreshes,
            Builtin::Dataflows,
            Builtin::PgNamespace,
            Builtin::PgDatabase,
            Builtin::PgClass,
            Builtin::PgAttribute,
            Builtin::PgType,
            Builtin::KeyColumnUsage,
            Builtin::PgAm,
            Builtin::PgIndex,
            Builtin::PgCursors,
            Builtin::PgAttrdef,
            Builtin::PgConstraint,
            Builtin::PgSettings,
            Builtin::PgRewrite,
            Builtin::PgDepend,
            Builtin::PgSequence,
        ];
        for b in all {
            let described = BUILTINS
                .iter()
                .filter(|r| r.source == BuiltinSource::Rows(b))
                .count();
            assert_eq!(described, 1, "{b:?}");
            assert_eq!(b.relation().source, BuiltinSource::Rows(b));
        }
        let mut oids = std::collections::HashSet::new();
        for rel in BUILTINS {
            assert!(
                std::ptr::eq(lookup(rel.schema, rel.name).unwrap(), rel),
                "{} is found by name",
                rel.qualified_name()
            );
            assert!(SYSTEM_SCHEMAS.contains(&rel.schema));
            assert!(oids.insert(rel.oid()));
        }
    }

    /// Derived key-constraint oids never meet user oids and differ per
    /// table and constraint.
    #[test]
    fn key_constraint_oids_are_distinct() {
        let a = key_constraint_oid(16_385, 0);
        assert!(a >= 0x8000_0000);
        assert_ne!(a, key_constraint_oid(16_385, 1));
        assert_ne!(a, key_constraint_oid(16_386, 0));
    }
}

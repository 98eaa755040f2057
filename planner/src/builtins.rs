//! Built-in relations: Freshet introspection (`freshet_internal`) and the
//! parts of `pg_catalog` and `information_schema` that tools expect.
//!
//! Each one is a [`Builtin`] with one [`BuiltinRelation`] description (its
//! schema, name and columns) in [`BUILTINS`]. The planner resolves names to
//! them; the server fills each with rows at query time by matching on the
//! [`Builtin`] ([`crate::CollectionReader::builtin_rows`]), so adding a
//! relation is a variant, its description, and the rows the compiler then
//! asks the server for.

use freshet_repr::{ColumnDesc, PgType, RelationDesc};

/// Schemas that exist in every database and hold only built-in relations.
pub const SYSTEM_SCHEMAS: &[&str] = &["pg_catalog", "information_schema", "freshet_internal"];

/// Every built-in relation, in the order of [`BUILTINS`].
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
    /// `pg_catalog.pg_tables`
    PgTables,
    /// `pg_catalog.pg_views`
    PgViews,
    /// `information_schema.schemata`
    Schemata,
    /// `information_schema.tables`
    Tables,
    /// `information_schema.columns`
    Columns,
    /// `pg_catalog.pg_am`
    PgAm,
    /// `pg_catalog.pg_index`
    PgIndex,
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

impl Builtin {
    /// Its description.
    pub fn relation(self) -> &'static BuiltinRelation {
        &BUILTINS[self as usize]
    }
}

/// A built-in relation's description.
#[derive(Debug)]
pub struct BuiltinRelation {
    /// Which one it is.
    pub id: Builtin,
    /// Its schema (one of [`SYSTEM_SCHEMAS`]).
    pub schema: &'static str,
    /// Its name.
    pub name: &'static str,
    /// Its columns.
    pub columns: &'static [(&'static str, SysType)],
}

/// Column types used by built-in relations.
#[derive(Debug, Clone, Copy)]
pub enum SysType {
    /// `text`
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
    /// `numeric` (timestamps: they exceed what clients expect of int8 text)
    Numeric,
    /// `text[]`
    TextArray,
}

impl SysType {
    fn pg(self) -> PgType {
        match self {
            SysType::Text => PgType::Text,
            SysType::Int8 => PgType::Int8,
            SysType::Int4 => PgType::Int4,
            SysType::Int2 => PgType::Int2,
            SysType::Oid => PgType::Oid,
            SysType::Bool => PgType::Bool,
            SysType::Numeric => PgType::Numeric {
                typmod: Some((20, 0)),
            },
            SysType::TextArray => PgType::Array(Box::new(PgType::Text)),
        }
    }
}

impl BuiltinRelation {
    /// Its oid in `pg_class`: fixed by its position, below every user
    /// object's.
    pub fn oid(&self) -> u32 {
        1000 + self.id as u32
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

use SysType::*;

/// Every built-in relation, indexed by [`Builtin`].
pub static BUILTINS: &[BuiltinRelation] = &[
    BuiltinRelation {
        id: Builtin::ReadHolds,
        schema: "freshet_internal",
        name: "read_holds",
        columns: &[
            ("object_id", Text),
            ("object_name", Text),
            ("time", Numeric),
            ("count", Int8),
        ],
    },
    BuiltinRelation {
        id: Builtin::Collections,
        schema: "freshet_internal",
        name: "collections",
        columns: &[
            ("object_id", Text),
            ("object_name", Text),
            ("kind", Text),
            ("since", Numeric),
            ("upper", Numeric),
            ("parts", Int8),
            ("compaction_permission", Numeric),
        ],
    },
    BuiltinRelation {
        id: Builtin::MaterializedViewRefreshes,
        schema: "freshet_internal",
        name: "materialized_view_refreshes",
        columns: &[
            ("object_id", Text),
            ("object_name", Text),
            ("strategy", Text),
            ("last_completed_refresh", Numeric),
            ("next_refresh", Numeric),
        ],
    },
    BuiltinRelation {
        id: Builtin::Dataflows,
        schema: "freshet_internal",
        name: "dataflows",
        columns: &[
            ("object_id", Text),
            ("object_name", Text),
            ("as_of", Numeric),
            ("upper", Numeric),
            ("hydrated", Bool),
            ("errors", Int8),
            ("workers", Int8),
            ("arranged_records", Int8),
            ("arranged_bytes", Int8),
            ("written_plan_format", Text),
            ("failure", Text),
        ],
    },
    BuiltinRelation {
        id: Builtin::PgNamespace,
        schema: "pg_catalog",
        name: "pg_namespace",
        columns: &[("oid", Oid), ("nspname", Text), ("nspowner", Oid)],
    },
    BuiltinRelation {
        id: Builtin::PgDatabase,
        schema: "pg_catalog",
        name: "pg_database",
        columns: &[
            ("oid", Oid),
            ("datname", Text),
            ("datdba", Oid),
            ("encoding", Int4),
            ("datcollate", Text),
            ("datctype", Text),
            ("daticulocale", Text),
            ("datlocprovider", Text),
            ("datacl", TextArray),
        ],
    },
    BuiltinRelation {
        id: Builtin::PgClass,
        schema: "pg_catalog",
        name: "pg_class",
        columns: &[
            ("oid", Oid),
            ("relname", Text),
            ("relnamespace", Oid),
            ("relkind", Text),
            ("relnatts", Int2),
            ("relowner", Oid),
            ("relam", Oid),
        ],
    },
    BuiltinRelation {
        id: Builtin::PgAttribute,
        schema: "pg_catalog",
        name: "pg_attribute",
        columns: &[
            ("attrelid", Oid),
            ("attname", Text),
            ("atttypid", Oid),
            ("attnum", Int2),
            ("atttypmod", Int4),
            ("attnotnull", Bool),
            ("attisdropped", Bool),
        ],
    },
    BuiltinRelation {
        id: Builtin::PgType,
        schema: "pg_catalog",
        name: "pg_type",
        columns: &[("oid", Oid), ("typname", Text), ("typlen", Int2)],
    },
    BuiltinRelation {
        id: Builtin::PgTables,
        schema: "pg_catalog",
        name: "pg_tables",
        columns: &[("schemaname", Text), ("tablename", Text)],
    },
    BuiltinRelation {
        id: Builtin::PgViews,
        schema: "pg_catalog",
        name: "pg_views",
        columns: &[
            ("schemaname", Text),
            ("viewname", Text),
            ("definition", Text),
        ],
    },
    BuiltinRelation {
        id: Builtin::Schemata,
        schema: "information_schema",
        name: "schemata",
        columns: &[("catalog_name", Text), ("schema_name", Text)],
    },
    BuiltinRelation {
        id: Builtin::Tables,
        schema: "information_schema",
        name: "tables",
        columns: &[
            ("table_catalog", Text),
            ("table_schema", Text),
            ("table_name", Text),
            ("table_type", Text),
        ],
    },
    BuiltinRelation {
        id: Builtin::Columns,
        schema: "information_schema",
        name: "columns",
        columns: &[
            ("table_catalog", Text),
            ("table_schema", Text),
            ("table_name", Text),
            ("column_name", Text),
            ("ordinal_position", Int4),
            ("column_default", Text),
            ("is_nullable", Text),
            ("data_type", Text),
        ],
    },
    BuiltinRelation {
        id: Builtin::PgAm,
        schema: "pg_catalog",
        name: "pg_am",
        columns: &[("oid", Oid), ("amname", Text), ("amtype", Text)],
    },
    BuiltinRelation {
        id: Builtin::PgIndex,
        schema: "pg_catalog",
        name: "pg_index",
        columns: &[
            ("indexrelid", Oid),
            ("indrelid", Oid),
            ("indnatts", Int2),
            ("indisunique", Bool),
            ("indisprimary", Bool),
        ],
    },
];

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

    /// [`Builtin::relation`] indexes [`BUILTINS`] by the variant, so each
    /// description must sit at its variant's position, and names must be
    /// unique for lookups to find it.
    #[test]
    fn each_description_sits_at_its_variant() {
        for (i, rel) in BUILTINS.iter().enumerate() {
            assert_eq!(rel.id as usize, i, "{}", rel.qualified_name());
            assert_eq!(rel.id.relation().qualified_name(), rel.qualified_name());
            assert_eq!(
                lookup(rel.schema, rel.name).map(|r| r.id),
                Some(rel.id),
                "{} is found by name",
                rel.qualified_name()
            );
            assert!(SYSTEM_SCHEMAS.contains(&rel.schema));
        }
    }
}

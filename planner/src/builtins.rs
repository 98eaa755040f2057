//! Built-in relations: Freshet introspection (`freshet_internal`) and the
//! parts of `pg_catalog` and `information_schema` that tools expect.
//!
//! The planner knows their names and columns; the server fills them with
//! rows at query time (see [`crate::CollectionReader::system_table`]).

use freshet_repr::{ColumnDesc, PgType, RelationDesc};

/// Schemas that exist in every database and hold only built-in relations.
pub const SYSTEM_SCHEMAS: &[&str] = &["pg_catalog", "information_schema", "freshet_internal"];

/// A built-in relation.
#[derive(Debug)]
pub struct SystemRelation {
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
        }
    }
}

impl SystemRelation {
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

/// Every built-in relation.
pub static SYSTEM_RELATIONS: &[SystemRelation] = &[
    SystemRelation {
        schema: "freshet_internal",
        name: "read_holds",
        columns: &[
            ("object_id", Text),
            ("object_name", Text),
            ("time", Numeric),
            ("count", Int8),
        ],
    },
    SystemRelation {
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
    SystemRelation {
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
    SystemRelation {
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
    SystemRelation {
        schema: "pg_catalog",
        name: "pg_namespace",
        columns: &[("oid", Oid), ("nspname", Text), ("nspowner", Oid)],
    },
    SystemRelation {
        schema: "pg_catalog",
        name: "pg_database",
        columns: &[("oid", Oid), ("datname", Text)],
    },
    SystemRelation {
        schema: "pg_catalog",
        name: "pg_class",
        columns: &[
            ("oid", Oid),
            ("relname", Text),
            ("relnamespace", Oid),
            ("relkind", Text),
            ("relnatts", Int2),
        ],
    },
    SystemRelation {
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
    SystemRelation {
        schema: "pg_catalog",
        name: "pg_type",
        columns: &[("oid", Oid), ("typname", Text), ("typlen", Int2)],
    },
    SystemRelation {
        schema: "pg_catalog",
        name: "pg_tables",
        columns: &[("schemaname", Text), ("tablename", Text)],
    },
    SystemRelation {
        schema: "pg_catalog",
        name: "pg_views",
        columns: &[
            ("schemaname", Text),
            ("viewname", Text),
            ("definition", Text),
        ],
    },
    SystemRelation {
        schema: "information_schema",
        name: "schemata",
        columns: &[("catalog_name", Text), ("schema_name", Text)],
    },
    SystemRelation {
        schema: "information_schema",
        name: "tables",
        columns: &[
            ("table_catalog", Text),
            ("table_schema", Text),
            ("table_name", Text),
            ("table_type", Text),
        ],
    },
    SystemRelation {
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
];

/// The built-in relation `schema.name`.
pub fn lookup(schema: &str, name: &str) -> Option<&'static SystemRelation> {
    SYSTEM_RELATIONS
        .iter()
        .find(|r| r.schema == schema && r.name == name)
}

/// The built-in relation with this qualified name.
pub fn lookup_qualified(qualified: &str) -> Option<&'static SystemRelation> {
    let (schema, name) = qualified.split_once('.')?;
    lookup(schema, name)
}

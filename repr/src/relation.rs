use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use serde::{Deserialize, Serialize};

use crate::PgType;

/// One column of a relation: its name, Postgres type and nullability.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ColumnDesc {
    /// Column name as users see it.
    pub name: String,
    /// The column's Postgres type.
    pub ty: PgType,
    /// Whether the column admits NULL.
    pub nullable: bool,
}

/// The shape of a relation (table, view, materialized view, query result).
///
/// The catalog stores a `RelationDesc` per object; storage and DataFusion see
/// it as an Arrow schema whose fields record their Postgres types.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RelationDesc {
    /// The columns, in order.
    pub columns: Vec<ColumnDesc>,
}

impl RelationDesc {
    /// A description from its columns.
    pub fn new(columns: Vec<ColumnDesc>) -> Self {
        RelationDesc { columns }
    }

    /// The Arrow schema whose fields carry each column's Postgres type.
    pub fn arrow_schema(&self) -> SchemaRef {
        Arc::new(Schema::new(
            self.columns
                .iter()
                .map(|c| c.ty.field(&c.name, c.nullable))
                .collect::<Vec<_>>(),
        ))
    }

    /// The description of an Arrow schema (types from metadata where present).
    pub fn from_arrow(schema: &Schema) -> Self {
        RelationDesc {
            columns: schema
                .fields()
                .iter()
                .map(|f| ColumnDesc {
                    name: f.name().clone(),
                    ty: PgType::of_field(f),
                    nullable: f.is_nullable(),
                })
                .collect(),
        }
    }

    /// Number of columns.
    pub fn arity(&self) -> usize {
        self.columns.len()
    }

    /// Position of the column with this name, if any.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }
}

/// `schema` with every field nullable (names, types and metadata kept):
/// what computed rows may hold wherever nullability analysis is optimistic
/// (outer-join padding, aggregates of empty groups), and what DataFusion
/// sees of stored columns (NOT NULL is enforced on writes).
pub fn nullable_schema(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new_with_metadata(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
        schema.metadata().clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrow_round_trip_keeps_pg_types() {
        let desc = RelationDesc::new(vec![
            ColumnDesc {
                name: "id".into(),
                ty: PgType::Uuid,
                nullable: false,
            },
            ColumnDesc {
                name: "name".into(),
                ty: PgType::Varchar { max_len: Some(20) },
                nullable: true,
            },
        ]);
        assert_eq!(RelationDesc::from_arrow(&desc.arrow_schema()), desc);
    }
}

//! How Freshet's key constraints and indexes look as Postgres catalog
//! objects, shared by the `pg_catalog` rows and the catalog functions that
//! describe them (`pg_get_indexdef`, `pg_get_constraintdef`).

use freshet_catalog::{Item, ItemDetails, TableKeys};
use freshet_repr::PgType;

use super::key_constraint_oid;
use crate::parser::quote_if_needed;

/// A table's key constraints as Postgres shows them: name, the oid of
/// the constraint and of its index, whether it is the primary key, its
/// columns (positions from 0), and `NULLS NOT DISTINCT`.
pub struct KeyConstraint {
    /// Its name (Postgres's default for a primary key: `<table>_pkey`).
    pub name: String,
    /// The constraint's oid, also its index's.
    pub oid: u32,
    /// Whether it is the primary key.
    pub primary: bool,
    /// Key column positions (from 0).
    pub columns: Vec<usize>,
    /// `NULLS NOT DISTINCT`.
    pub nulls_not_distinct: bool,
}

/// The key constraints of a table item.
pub fn key_constraints(item: &Item) -> Vec<KeyConstraint> {
    let ItemDetails::Table { keys, .. } = &item.details else {
        return vec![];
    };
    let TableKeys {
        primary_key,
        unique,
    } = keys.as_ref();
    let mut out = Vec::new();
    if !primary_key.is_empty() {
        out.push(KeyConstraint {
            name: format!("{}_pkey", item.name),
            oid: key_constraint_oid(item.oid, 0),
            primary: true,
            columns: primary_key.clone(),
            nulls_not_distinct: false,
        });
    }
    for (k, u) in unique.iter().enumerate() {
        out.push(KeyConstraint {
            name: u.name.clone(),
            oid: key_constraint_oid(item.oid, k + 1),
            primary: false,
            columns: u.columns.clone(),
            nulls_not_distinct: u.nulls_not_distinct,
        });
    }
    out
}

/// An index item's key columns: for each key, its attribute number in the
/// indexed relation (0 for an expression), its name and its type.
pub fn index_keys(on: &Item, keys: &[String]) -> Vec<(usize, String, PgType)> {
    let columns = on
        .desc
        .as_ref()
        .map(|d| d.columns.as_slice())
        .unwrap_or(&[]);
    keys.iter()
        .map(|k| {
            match columns
                .iter()
                .position(|c| quote_if_needed(&c.name).to_string() == *k)
            {
                Some(i) => (i + 1, columns[i].name.clone(), columns[i].ty.clone()),
                None => (0, "expr".to_string(), PgType::Text),
            }
        })
        .collect()
}

//! `pg_sequence`: `CREATE SEQUENCE`'s sequences with their options, as
//! PostgreSQL lists them (psql's `\d seq` reads it; `pg_sequences` is
//! PostgreSQL's view over it).

use freshet_catalog::{ItemDetails, SequenceDef};

use super::{QueryReader, Row};

fn text(v: impl ToString) -> Option<String> {
    Some(v.to_string())
}

fn boolean(v: bool) -> Option<String> {
    text(if v { "t" } else { "f" })
}

/// The oid of the sequence's value type.
fn type_oid(def: &SequenceDef) -> u32 {
    match def.width {
        2 => 21,
        4 => 23,
        _ => 20,
    }
}

impl QueryReader {
    /// The session database's sequences.
    fn sequences(&self) -> Vec<(&freshet_catalog::Item, &SequenceDef)> {
        let schemas = self.schemas_in_db();
        self.catalog
            .items()
            .filter_map(|item| {
                let ItemDetails::Sequence(def) = &item.details else {
                    return None;
                };
                schemas.iter().find(|s| s.id == item.schema_id)?;
                Some((item, def.as_ref()))
            })
            .collect()
    }

    pub(super) fn pg_sequence(&self) -> Vec<Row> {
        self.sequences()
            .into_iter()
            .map(|(item, def)| {
                vec![
                    text(item.oid),
                    text(type_oid(def)),
                    text(def.start),
                    text(def.increment),
                    text(def.max),
                    text(def.min),
                    text(def.cache),
                    boolean(def.cycle),
                ]
            })
            .collect()
    }
}

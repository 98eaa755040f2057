//! Identifiers as Postgres reads and writes them: unquoted names fold to
//! lower case, and a name is quoted back only when it must be.

use datafusion::sql::sqlparser::ast::{Ident, ObjectName};

use crate::error::{PlanError, Result};

/// Normalize an identifier as Postgres does: unquoted names fold to lower
/// case, quoted names are kept exactly.
pub fn normalize_ident(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

/// The identifiers of an object name, normalized.
pub fn normalize_name(name: &ObjectName) -> Result<Vec<String>> {
    name.0
        .iter()
        .map(|part| {
            part.as_ident()
                .map(normalize_ident)
                .ok_or_else(|| PlanError::Syntax(format!("invalid name: {name}")))
        })
        .collect()
}

/// Quote an identifier when Postgres would need quotes to read it back.
pub fn quote_if_needed(name: &str) -> Ident {
    let plain = !name.is_empty()
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        Ident::new(name)
    } else {
        Ident::with_quote('"', name)
    }
}

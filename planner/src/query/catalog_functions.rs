//! Postgres's catalog inquiry functions that tools call on `pg_catalog`
//! rows: psql's `\d` asks `pg_table_is_visible(c.oid)`,
//! `pg_get_userbyid(c.relowner)`, `pg_get_indexdef(...)`; GUI tools and
//! ORMs ask `current_schemas(true)` and the `reg*` output functions. Each
//! is answered from the catalog version and the session a statement is
//! planned against, fixed into the function when the statement is planned
//! (as a Postgres snapshot fixes what the catalog looks like to one
//! statement).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, ListArray, StringArray};
use arrow::datatypes::{DataType, Field};
use datafusion::logical_expr::ScalarUDF;
use freshet_catalog::{ItemDetails, ItemKind};

use crate::builtins::keys::{KeyConstraint, index_keys, key_constraints};
use crate::builtins::{BUILTIN_OWNER_OID, BUILTINS, SYSTEM_SCHEMAS, system_schema_oid};
use crate::parser::quote_if_needed;
use crate::query::bound_function::{BoundFunction, ints, oids, rows, texts};
use crate::query::resolve::NameResolver;

/// The catalog function `name` (unqualified), bound to what `resolver`
/// sees, if `name` is one.
pub fn catalog_function(name: &str, resolver: &NameResolver) -> Option<Arc<ScalarUDF>> {
    Some(match name {
        "pg_table_is_visible" => {
            let visible = visible_relations(resolver);
            BoundFunction::udf(name, &[1], DataType::Boolean, move |args| {
                let out: BooleanArray = oids(args, 0)?
                    .into_iter()
                    .map(|o| o.map(|o| visible.contains(&o)))
                    .collect();
                Ok(Arc::new(out))
            })
        }
        "pg_get_serial_sequence" => {
            // (table text, column text) -> the `schema.sequence` numbering
            // that column, NULL for a column without one.
            let by_name = relation_oids(resolver);
            let mut serials: HashMap<(u32, String), String> = HashMap::new();
            for item in resolver.catalog.items() {
                let (ItemDetails::Table { serials: list, .. }, Some(desc)) =
                    (&item.details, &item.desc)
                else {
                    continue;
                };
                let Some((_, schema, _)) = resolver.catalog.full_name(item.id) else {
                    continue;
                };
                for serial in list {
                    if let Some(column) = desc.columns.get(serial.column) {
                        serials.insert(
                            (item.oid, column.name.clone()),
                            format!(
                                "{}.{}",
                                quote_if_needed(&schema),
                                quote_if_needed(&serial.sequence)
                            ),
                        );
                    }
                }
            }
            BoundFunction::udf(name, &[2], DataType::Utf8, move |args| {
                let tables = texts(args, 0)?;
                let columns = texts(args, 1)?;
                let out: StringArray = tables
                    .iter()
                    .zip(&columns)
                    .map(|(t, c)| {
                        let oid = lookup_relation(&by_name, t.as_deref()?).ok()?;
                        // The column is an identifier: unquoted is folded.
                        let c = c.as_deref()?;
                        let column = match c.strip_prefix('"').and_then(|c| c.strip_suffix('"')) {
                            Some(quoted) => quoted.replace("\"\"", "\""),
                            None => c.to_lowercase(),
                        };
                        serials.get(&(oid, column)).cloned()
                    })
                    .collect();
                Ok(Arc::new(out))
            })
        }
        "pg_sequence_last_value" => {
            let last: HashMap<u32, i64> = resolver
                .catalog
                .items()
                .filter_map(|item| match &item.details {
                    ItemDetails::Sequence(def) => Some((item.oid, def.last_value()?)),
                    _ => None,
                })
                .collect();
            BoundFunction::udf(name, &[1], DataType::Int64, move |args| {
                let out: arrow::array::Int64Array = oids(args, 0)?
                    .into_iter()
                    .map(|o| o.and_then(|o| last.get(&o).copied()))
                    .collect();
                Ok(Arc::new(out))
            })
        }
        "pg_get_userbyid" => {
            let user = resolver.session.user.clone();
            BoundFunction::udf(name, &[1], DataType::Utf8, move |args| {
                let out: StringArray = oids(args, 0)?
                    .into_iter()
                    .map(|o| {
                        o.map(|o| match o {
                            BUILTIN_OWNER_OID => user.clone(),
                            o => format!("unknown (OID={o})"),
                        })
                    })
                    .collect();
                Ok(Arc::new(out))
            })
        }
        "pg_get_viewdef" => oid_text(name, view_definitions(resolver)),
        "pg_get_constraintdef" => oid_text(name, constraint_definitions(resolver)),
        "regclassout" => oid_text(name, relation_names(resolver)),
        crate::rewrites::pg_syntax::REGCLASS_IN => {
            let by_name = relation_oids(resolver);
            BoundFunction::udf(name, &[1], DataType::UInt32, move |args| {
                let out = texts(args, 0)?
                    .into_iter()
                    .map(|t| match t {
                        None => Ok(None),
                        Some(t) => lookup_relation(&by_name, &t).map(Some),
                    })
                    .collect::<datafusion::common::Result<Vec<_>>>()?;
                Ok(Arc::new(arrow::array::UInt32Array::from(out)) as ArrayRef)
            })
        }
        "regnamespaceout" => oid_text(name, namespace_names(resolver)),
        "regroleout" => oid_text(
            name,
            HashMap::from([(BUILTIN_OWNER_OID, resolver.session.user.clone())]),
        ),
        "pg_get_indexdef" => {
            let defs = index_definitions(resolver);
            BoundFunction::udf(name, &[1, 3], DataType::Utf8, move |args| {
                let n = rows(args);
                let columns = ints(args, 1, n)?;
                let out: StringArray = oids(args, 0)?
                    .into_iter()
                    .zip(columns)
                    .map(|(o, col)| {
                        let (def, keys) = defs.get(&o?)?;
                        match col.unwrap_or(0) {
                            0 => Some(def.clone()),
                            c => keys.get(usize::try_from(c).ok()? - 1).cloned(),
                        }
                    })
                    .collect();
                Ok(Arc::new(out))
            })
        }
        "current_schemas" => {
            let schemas = existing_search_path(resolver);
            BoundFunction::udf(
                name,
                &[1],
                DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true))),
                move |args| {
                    let implicit = arrow::compute::cast(&args[0], &DataType::Boolean)?;
                    let implicit = implicit
                        .as_any()
                        .downcast_ref::<BooleanArray>()
                        .cloned()
                        .unwrap_or_else(|| BooleanArray::from(vec![false; args[0].len()]));
                    let lists = implicit.iter().map(|with_implicit| {
                        let mut names: Vec<Option<String>> = Vec::new();
                        if with_implicit == Some(true) {
                            names.push(Some("pg_catalog".into()));
                        }
                        names.extend(schemas.iter().cloned().map(Some));
                        Some(names)
                    });
                    Ok(Arc::new(ListArray::from_iter_primitive_strings(lists)))
                },
            )
        }
        _ => return None,
    })
}

/// A text list column from optional strings.
trait FromStrings {
    fn from_iter_primitive_strings(
        lists: impl IntoIterator<Item = Option<Vec<Option<String>>>>,
    ) -> ListArray;
}

impl FromStrings for ListArray {
    fn from_iter_primitive_strings(
        lists: impl IntoIterator<Item = Option<Vec<Option<String>>>>,
    ) -> ListArray {
        let mut builder = arrow::array::ListBuilder::new(arrow::array::StringBuilder::new());
        for list in lists {
            match list {
                Some(items) => {
                    for item in items {
                        builder.values().append_option(item);
                    }
                    builder.append(true);
                }
                None => builder.append(false),
            }
        }
        builder.finish()
    }
}

/// A function of one oid (and optional further arguments it ignores, such
/// as `pretty`) answered from a table; oids not in it are NULL.
fn oid_text(name: &str, table: HashMap<u32, String>) -> Arc<ScalarUDF> {
    // The `reg*` output functions print an oid nothing has as the number.
    let number_if_missing = name.starts_with("reg");
    BoundFunction::udf(name, &[1, 2, 3], DataType::Utf8, move |args| {
        let out: StringArray = oids(args, 0)?
            .into_iter()
            .map(|o| {
                let o = o?;
                table
                    .get(&o)
                    .cloned()
                    .or_else(|| number_if_missing.then(|| o.to_string()))
            })
            .collect();
        Ok(Arc::new(out) as ArrayRef)
    })
}

/// The oids of the relations an unqualified name can reach, as Postgres
/// decides it: `pg_catalog` first, then the search path in order, a name
/// found earlier hiding the same name later.
fn visible_relations(resolver: &NameResolver) -> HashSet<u32> {
    let catalog = resolver.catalog;
    let session = resolver.session;
    let mut seen: HashSet<String> = HashSet::new();
    let mut visible = HashSet::new();
    for rel in BUILTINS.iter().filter(|r| r.schema == "pg_catalog") {
        seen.insert(rel.name.to_string());
        visible.insert(rel.oid());
    }
    let Some(db) = catalog.database_by_name(&session.database) else {
        return visible;
    };
    for schema_name in &session.search_path {
        let Some(schema) = catalog.schema_by_name(db.id, schema_name) else {
            continue;
        };
        for item in catalog.items().filter(|i| i.schema_id == schema.id) {
            if seen.insert(item.name.clone()) {
                visible.insert(item.oid);
            }
            for key in key_constraints(item) {
                if seen.insert(key.name.clone()) {
                    visible.insert(key.oid);
                }
            }
            if let ItemDetails::Table { serials, .. } = &item.details {
                for serial in serials {
                    if seen.insert(serial.sequence.clone()) {
                        visible.insert(crate::builtins::serial_sequence_oid(
                            item.oid,
                            serial.column,
                        ));
                    }
                }
            }
        }
    }
    visible
}

/// The schemas of the search path that exist, in order.
fn existing_search_path(resolver: &NameResolver) -> Vec<String> {
    let catalog = resolver.catalog;
    let Some(db) = catalog.database_by_name(&resolver.session.database) else {
        return vec![];
    };
    resolver
        .session
        .search_path
        .iter()
        .filter(|s| {
            catalog.schema_by_name(db.id, s).is_some() || SYSTEM_SCHEMAS.contains(&s.as_str())
        })
        .cloned()
        .collect()
}

/// `schema.name` of every relation of the session's database, quoted where
/// needed; unqualified where the name is visible (as `regclass` prints).
fn relation_names(resolver: &NameResolver) -> HashMap<u32, String> {
    let visible = visible_relations(resolver);
    let display = |oid: u32, schema: &str, name: &str| {
        let name = quote_if_needed(name).to_string();
        if visible.contains(&oid) {
            name
        } else {
            format!("{}.{name}", quote_if_needed(schema))
        }
    };
    let mut out = HashMap::new();
    for rel in BUILTINS {
        out.insert(rel.oid(), display(rel.oid(), rel.schema, rel.name));
    }
    for item in resolver.catalog.items() {
        let Some((_, schema, _)) = resolver.catalog.full_name(item.id) else {
            continue;
        };
        out.insert(item.oid, display(item.oid, &schema, &item.name));
        for key in key_constraints(item) {
            out.insert(key.oid, display(key.oid, &schema, &key.name));
        }
        if let ItemDetails::Table { serials, .. } = &item.details {
            for serial in serials {
                let oid = crate::builtins::serial_sequence_oid(item.oid, serial.column);
                out.insert(oid, display(oid, &schema, &serial.sequence));
            }
        }
    }
    out
}

/// Relation oids by every name that denotes them: `schema.name` and
/// `database.schema.name` always, `name` alone where the search path finds
/// it (the first schema on the path that has it).
pub(crate) fn relation_oids(resolver: &NameResolver) -> HashMap<String, u32> {
    let visible = visible_relations(resolver);
    let mut out = HashMap::new();
    let session_db = resolver.session.database.as_str();
    let mut add = |oid: u32, database: Option<&str>, schema: &str, name: &str| {
        // Two parts name a schema of the session's database.
        if database.is_none_or(|db| db == session_db) {
            out.insert(format!("{schema}.{name}"), oid);
        }
        if let Some(db) = database {
            out.insert(format!("{db}.{schema}.{name}"), oid);
        }
        if visible.contains(&oid) {
            out.insert(name.to_string(), oid);
        }
    };
    for rel in BUILTINS {
        add(rel.oid(), None, rel.schema, rel.name);
    }
    for item in resolver.catalog.items() {
        let Some((db, schema, _)) = resolver.catalog.full_name(item.id) else {
            continue;
        };
        add(item.oid, Some(&db), &schema, &item.name);
        for key in key_constraints(item) {
            add(key.oid, Some(&db), &schema, &key.name);
        }
        if let ItemDetails::Table { serials, .. } = &item.details {
            for serial in serials {
                let oid = crate::builtins::serial_sequence_oid(item.oid, serial.column);
                add(oid, Some(&db), &schema, &serial.sequence);
            }
        }
    }
    out
}

/// The oid `text::regclass` gives: a number is the oid itself; a name is
/// looked up (42P01 if nothing has it).
pub(crate) fn lookup_relation(
    by_name: &HashMap<String, u32>,
    text: &str,
) -> datafusion::common::Result<u32> {
    let text = text.trim();
    if let Ok(oid) = text.parse::<u32>() {
        return Ok(oid);
    }
    let unknown = || {
        crate::error::sqlstate_error(
            freshet_repr::sqlstate::UNDEFINED_TABLE,
            format!("relation \"{text}\" does not exist"),
        )
    };
    let parts = datafusion::sql::sqlparser::parser::Parser::new(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
    )
    .try_with_sql(text)
    .and_then(|mut p| p.parse_object_name(false))
    .map_err(|_| unknown())?;
    let key = crate::parser::normalize_name(&parts)
        .map_err(|_| unknown())?
        .join(".");
    by_name.get(&key).copied().ok_or_else(unknown)
}

/// Namespace oids to names.
fn namespace_names(resolver: &NameResolver) -> HashMap<u32, String> {
    let mut out: HashMap<u32, String> = SYSTEM_SCHEMAS
        .iter()
        .map(|s| (system_schema_oid(s), s.to_string()))
        .collect();
    for schema in resolver.catalog.schemas() {
        out.insert(schema.oid, quote_if_needed(&schema.name).to_string());
    }
    out
}

/// `schema.name`, quoted where needed, of an item.
fn qualified(resolver: &NameResolver, id: freshet_repr::GlobalId) -> Option<String> {
    let (_, schema, name) = resolver.catalog.full_name(id)?;
    Some(format!(
        "{}.{}",
        quote_if_needed(&schema),
        quote_if_needed(&name)
    ))
}

/// The defining query of every view and materialized view, in current
/// names, as `pg_get_viewdef` shows it.
fn view_definitions(resolver: &NameResolver) -> HashMap<u32, String> {
    use datafusion::sql::sqlparser::{ast, dialect::PostgreSqlDialect, parser::Parser};
    let mut out = HashMap::new();
    for item in resolver.catalog.items() {
        if !matches!(item.kind, ItemKind::View | ItemKind::MaterializedView) {
            continue;
        }
        let Ok(mut stmts) = Parser::parse_sql(&PostgreSqlDialect {}, &item.create_sql) else {
            continue;
        };
        let query = match stmts.pop() {
            Some(ast::Statement::CreateView(v)) => v.query,
            _ => continue,
        };
        let mut query = *query;
        resolver.humanize(&mut query);
        out.insert(item.oid, format!(" {query};"));
    }
    out
}

/// A key constraint's column names, quoted where needed.
fn key_column_names(item: &freshet_catalog::Item, key: &KeyConstraint) -> Vec<String> {
    let columns = item
        .desc
        .as_ref()
        .map(|d| d.columns.as_slice())
        .unwrap_or(&[]);
    key.columns
        .iter()
        .filter_map(|c| columns.get(*c))
        .map(|c| quote_if_needed(&c.name).to_string())
        .collect()
}

/// `PRIMARY KEY (a)` / `UNIQUE (b)` by constraint oid.
fn constraint_definitions(resolver: &NameResolver) -> HashMap<u32, String> {
    let mut out = HashMap::new();
    for item in resolver.catalog.items() {
        for key in key_constraints(item) {
            let names = key_column_names(item, &key);
            let kind = match (key.primary, key.nulls_not_distinct) {
                (true, _) => "PRIMARY KEY",
                (false, false) => "UNIQUE",
                (false, true) => "UNIQUE NULLS NOT DISTINCT",
            };
            out.insert(key.oid, format!("{kind} ({})", names.join(", ")));
        }
    }
    out
}

/// `CREATE [UNIQUE] INDEX ... USING btree (...)` and each key's text, by
/// index oid.
fn index_definitions(resolver: &NameResolver) -> HashMap<u32, (String, Vec<String>)> {
    let mut out = HashMap::new();
    for item in resolver.catalog.items() {
        match &item.details {
            ItemDetails::Index { on, keys, .. } => {
                let (Some(on_item), Some(on_name)) =
                    (resolver.catalog.item(*on), qualified(resolver, *on))
                else {
                    continue;
                };
                let texts: Vec<String> = index_keys(on_item, keys)
                    .into_iter()
                    .zip(keys)
                    .map(|((attnum, name, _), key)| {
                        if attnum > 0 {
                            quote_if_needed(&name).to_string()
                        } else {
                            key.clone()
                        }
                    })
                    .collect();
                let def = format!(
                    "CREATE INDEX {} ON {on_name} USING btree ({})",
                    quote_if_needed(&item.name),
                    texts.join(", ")
                );
                out.insert(item.oid, (def, texts));
            }
            ItemDetails::Table { .. } => {
                let Some(table) = qualified(resolver, item.id) else {
                    continue;
                };
                for key in key_constraints(item) {
                    let texts = key_column_names(item, &key);
                    let nnd = if key.nulls_not_distinct {
                        " NULLS NOT DISTINCT"
                    } else {
                        ""
                    };
                    let def = format!(
                        "CREATE UNIQUE INDEX {} ON {table} USING btree ({}){nnd}",
                        quote_if_needed(&key.name),
                        texts.join(", ")
                    );
                    out.insert(key.oid, (def, texts));
                }
            }
            _ => {}
        }
    }
    out
}

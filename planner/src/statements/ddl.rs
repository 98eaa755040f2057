//! Planning DDL: CREATE, DROP, ALTER ... RENAME.

use std::collections::BTreeSet;

use datafusion::logical_expr::ExprSchemable;
use datafusion::sql::sqlparser::ast::{
    self, ColumnOption, CreateTable, CreateView, ObjectName, ObjectType, SchemaName,
    TableConstraint,
};
use freshet_catalog::{Identity, ItemDef, ItemDetails, ItemKind, Serial, TableKeys, UniqueKey};
use freshet_repr::{ColumnDesc, GlobalId, PgType, RelationDesc};

use crate::error::{PlanError, Result};
use crate::parser::quote_if_needed;
use crate::parser::{ObjectKind, normalize_ident, normalize_name};
use crate::pg::types::pg_type_of;
use crate::plan::Plan;
use crate::query::resolve::key_positions;
use crate::statements::context::StatementContext;
use crate::statements::lookup::{expected_kind, lookup_kind, missing_message};

/// `CREATE DATABASE`.
pub fn create_database(name: &ObjectName, if_not_exists: bool) -> Result<Plan> {
    let parts = normalize_name(name)?;
    let [name] = parts.as_slice() else {
        return Err(PlanError::Syntax(format!("improper database name: {name}")));
    };
    Ok(Plan::CreateDatabase {
        name: name.clone(),
        if_not_exists,
    })
}

/// `CREATE SCHEMA`.
pub fn create_schema(
    cx: &StatementContext,
    name: &SchemaName,
    if_not_exists: bool,
) -> Result<Plan> {
    let SchemaName::Simple(name) = name else {
        return Err(PlanError::unsupported("CREATE SCHEMA ... AUTHORIZATION"));
    };
    let parts = normalize_name(name)?;
    let resolver = cx.resolver();
    let (db, schema) = match parts.as_slice() {
        [schema] => (resolver.database()?, schema.clone()),
        [db, schema] => (
            cx.catalog
                .database_by_name(db)
                .ok_or_else(|| PlanError::UnknownDatabase(db.clone()))?,
            schema.clone(),
        ),
        _ => return Err(PlanError::Syntax(format!("improper schema name: {name}"))),
    };
    if crate::builtins::SYSTEM_SCHEMAS.contains(&schema.as_str()) || schema.starts_with("pg_") {
        return Err(PlanError::InvalidParameter(format!(
            "unacceptable schema name \"{schema}\": the prefix \"pg_\" and built-in schema names are reserved"
        )));
    }
    Ok(Plan::CreateSchema {
        database_id: db.id,
        name: schema,
        if_not_exists,
    })
}

/// `CREATE TABLE`.
pub fn create_table(cx: &StatementContext, ct: &CreateTable) -> Result<Plan> {
    match ct.on_commit {
        None | Some(ast::OnCommit::PreserveRows) => {}
        Some(ast::OnCommit::DeleteRows) => {
            return Err(PlanError::unsupported("ON COMMIT DELETE ROWS"));
        }
        Some(ast::OnCommit::Drop) => return Err(PlanError::unsupported("ON COMMIT DROP")),
    }
    if let Some(query) = &ct.query {
        return create_table_as(cx, ct, query);
    }
    if ct.like.is_some() || ct.clone.is_some() {
        return Err(PlanError::unsupported("CREATE TABLE ... LIKE"));
    }
    if ct.or_replace {
        return Err(PlanError::unsupported("CREATE OR REPLACE TABLE"));
    }
    let mut key_names: Option<Vec<String>> = None;
    // UNIQUE constraints: explicit name, columns, NULLS NOT DISTINCT.
    let mut unique_names: Vec<(Option<String>, Vec<String>, bool)> = Vec::new();
    for c in &ct.constraints {
        match c {
            TableConstraint::PrimaryKey(pk) if pk.characteristics.is_none() => {
                set_primary_key(&mut key_names, key_columns(&pk.columns)?)?;
            }
            TableConstraint::Unique(u) if u.characteristics.is_none() => {
                unique_names.push((
                    u.name.as_ref().map(normalize_ident),
                    key_columns(&u.columns)?,
                    matches!(u.nulls_distinct, ast::NullsDistinctOption::NotDistinct),
                ));
            }
            other => return Err(PlanError::unsupported(format!("table constraint {other}"))),
        }
    }
    if ct.columns.is_empty() {
        return Err(PlanError::unsupported("a table without columns"));
    }
    let (schema, name) = table_target(cx, ct)?;
    let mut columns = Vec::new();
    let mut defaults = Vec::new();
    let mut serials = Vec::new();
    let mut seen = BTreeSet::new();
    let pc = cx.planning();
    for def in &ct.columns {
        let col_name = normalize_ident(&def.name);
        if !seen.insert(col_name.clone()) {
            return Err(PlanError::DuplicateColumn(col_name));
        }
        let serial_type = serial_type(&def.data_type);
        let ty = match &serial_type {
            Some(ty) => ty.clone(),
            None => pg_type_of(&def.data_type)?,
        };
        let mut nullable = serial_type.is_none();
        let mut default = None;
        let mut identity = None;
        for opt in &def.options {
            match &opt.option {
                ColumnOption::Generated {
                    generated_as,
                    generation_expr: None,
                    ..
                } => {
                    if !matches!(ty, PgType::Int2 | PgType::Int4 | PgType::Int8) {
                        return Err(PlanError::DatatypeMismatch(format!(
                            "identity column type must be smallint, integer, or bigint (column \"{col_name}\")"
                        )));
                    }
                    identity = Some(match generated_as {
                        ast::GeneratedAs::Always => Identity::Always,
                        _ => Identity::ByDefault,
                    });
                    nullable = false;
                }
                ColumnOption::Null => nullable = true,
                ColumnOption::NotNull => nullable = false,
                ColumnOption::Default(expr) => {
                    // The default must plan and cast to the column's type.
                    let sql = expr.to_string();
                    let planned = pc.plan_scalar_sql(&sql)?;
                    planned
                        .cast_to(&ty.arrow_type(), &datafusion::common::DFSchema::empty())
                        .map_err(|_| {
                            PlanError::DatatypeMismatch(format!(
                                "column \"{col_name}\" is of type {} but default expression is not",
                                ty.sql_name()
                            ))
                        })?;
                    default = Some(sql);
                }
                ColumnOption::PrimaryKey(pk) if pk.characteristics.is_none() => {
                    set_primary_key(&mut key_names, vec![col_name.clone()])?;
                }
                ColumnOption::Unique(u) if u.characteristics.is_none() => {
                    unique_names.push((
                        u.name.as_ref().map(normalize_ident),
                        vec![col_name.clone()],
                        matches!(u.nulls_distinct, ast::NullsDistinctOption::NotDistinct),
                    ));
                }
                other => {
                    return Err(PlanError::unsupported(format!("column option {other}")));
                }
            }
        }
        if serial_type.is_some() || identity.is_some() {
            if default.is_some() {
                return Err(PlanError::Syntax(format!(
                    "multiple default values specified for column \"{col_name}\" of table \"{name}\""
                )));
            }
            let sequence = format!("{name}_{col_name}_seq");
            // Qualified, so the default resolves whatever the search path
            // of the statement that fills it (or of a dataflow's planning).
            let quoted = format!(
                "{}.{}",
                quote_if_needed(&schema.name),
                quote_if_needed(&sequence)
            )
            .replace('\'', "''");
            default = Some(format!("nextval('{quoted}'::regclass)"));
            serials.push(Serial {
                column: columns.len(),
                sequence,
                identity,
                next: 1,
                max: match ty {
                    PgType::Int2 => i16::MAX.into(),
                    PgType::Int4 => i32::MAX.into(),
                    _ => i64::MAX,
                },
            });
        }
        columns.push(ColumnDesc {
            name: col_name,
            ty,
            nullable,
        });
        defaults.push(default);
    }
    // Key columns are NOT NULL, as in PostgreSQL.
    let primary_key = key_positions(&columns, key_names.unwrap_or_default())?;
    for &i in &primary_key {
        columns[i].nullable = false;
    }
    let mut unique = Vec::new();
    for (constraint, names, nulls_not_distinct) in unique_names {
        let positions = key_positions(&columns, names.clone())?;
        let name = constraint.unwrap_or_else(|| default_unique_name(&name, &names));
        unique.push(UniqueKey {
            name,
            columns: positions,
            nulls_not_distinct,
        });
    }
    let desc = RelationDesc::new(columns);
    let keys = TableKeys {
        primary_key,
        unique,
    };
    Ok(Plan::CreateItem {
        def: table_def(schema.id, name, desc, defaults, keys, serials),
        if_not_exists: ct.if_not_exists,
        replace: None,
    })
}

/// A table's definition, its `create_sql` written from its parts.
fn table_def(
    schema_id: GlobalId,
    name: String,
    desc: RelationDesc,
    defaults: Vec<Option<String>>,
    keys: TableKeys,
    serials: Vec<Serial>,
) -> ItemDef {
    let create_sql = table_sql(
        &name,
        &desc,
        &defaults,
        &keys.primary_key,
        &keys.unique,
        &serials,
    );
    ItemDef {
        schema_id,
        name,
        kind: ItemKind::Table,
        create_sql,
        desc: Some(desc),
        references: vec![],
        details: ItemDetails::Table {
            defaults,
            keys: Box::new(keys),
            serials,
        },
        options: Default::default(),
    }
}

/// `CREATE TABLE name AS query`: a table whose columns are the query's
/// (names and types; nullable, as in PostgreSQL), filled with its rows.
fn create_table_as(cx: &StatementContext, ct: &CreateTable, query: &ast::Query) -> Result<Plan> {
    if !ct.columns.is_empty() || !ct.constraints.is_empty() {
        return Err(PlanError::unsupported(
            "column definitions or constraints in CREATE TABLE ... AS",
        ));
    }
    let planned = crate::statements::context::plan_query(cx, query)?;
    let mut seen = BTreeSet::new();
    let mut columns = Vec::new();
    for c in &planned.desc.columns {
        if !seen.insert(c.name.clone()) {
            return Err(PlanError::DuplicateColumn(c.name.clone()));
        }
        columns.push(ColumnDesc {
            name: c.name.clone(),
            ty: c.ty.clone(),
            nullable: true,
        });
    }
    let (schema, name) = table_target(cx, ct)?;
    let desc = RelationDesc::new(columns);
    let defaults = vec![None; desc.arity()];
    Ok(Plan::CreateTableAs {
        def: Box::new(table_def(
            schema.id,
            name,
            desc,
            defaults,
            TableKeys::default(),
            vec![],
        )),
        query: Box::new(planned),
        if_not_exists: ct.if_not_exists,
    })
}

/// The schema a `CREATE [TEMPORARY] TABLE` creates in, and the name.
fn table_target<'a>(
    cx: &StatementContext<'a>,
    ct: &CreateTable,
) -> Result<(&'a freshet_catalog::Schema, String)> {
    let resolver = cx.resolver();
    if ct.temporary {
        resolver.create_temp_target(&ct.name)
    } else {
        resolver.create_target(&ct.name)
    }
}

/// The integer type of `serial`, `bigserial` and `smallserial` (and their
/// `serial4/8/2` spellings).
fn serial_type(data_type: &ast::DataType) -> Option<PgType> {
    let ast::DataType::Custom(name, mods) = data_type else {
        return None;
    };
    if !mods.is_empty() || name.0.len() != 1 {
        return None;
    }
    match name.0[0].as_ident()?.value.to_lowercase().as_str() {
        "serial" | "serial4" => Some(PgType::Int4),
        "bigserial" | "serial8" => Some(PgType::Int8),
        "smallserial" | "serial2" => Some(PgType::Int2),
        _ => None,
    }
}

/// The column names a key constraint lists (plain columns only).
pub(crate) fn key_columns(columns: &[ast::IndexColumn]) -> Result<Vec<String>> {
    columns
        .iter()
        .map(|c| match &c.column.expr {
            ast::Expr::Identifier(i) => Ok(normalize_ident(i)),
            other => Err(PlanError::unsupported(format!(
                "a key on the expression {other}"
            ))),
        })
        .collect()
}

/// PostgreSQL's name for a `UNIQUE` constraint not named in its
/// definition: `<table>_<columns>_key`.
pub(crate) fn default_unique_name(table: &str, columns: &[impl AsRef<str>]) -> String {
    let columns: Vec<&str> = columns.iter().map(|c| c.as_ref()).collect();
    format!("{table}_{}_key", columns.join("_"))
}

/// A table's primary key, given once (as a column option or a table
/// constraint).
fn set_primary_key(key: &mut Option<Vec<String>>, names: Vec<String>) -> Result<()> {
    if key.is_some() {
        return Err(PlanError::InvalidDefinition(
            "multiple primary keys for a table are not allowed".into(),
        ));
    }
    *key = Some(names);
    Ok(())
}

/// Canonical `CREATE TABLE` text for a table.
pub fn table_sql(
    name: &str,
    desc: &RelationDesc,
    defaults: &[Option<String>],
    primary_key: &[usize],
    unique: &[UniqueKey],
    serials: &[Serial],
) -> String {
    let cols: Vec<String> = desc
        .columns
        .iter()
        .zip(defaults.iter().chain(std::iter::repeat(&None)))
        .enumerate()
        .map(|(i, (c, d))| {
            let mut s = format!("{} {}", quote_if_needed(&c.name), c.ty.sql_name());
            let identity = serials
                .iter()
                .find(|s| s.column == i)
                .and_then(|s| s.identity);
            match (identity, d) {
                (Some(Identity::Always), _) => s.push_str(" GENERATED ALWAYS AS IDENTITY"),
                (Some(Identity::ByDefault), _) => s.push_str(" GENERATED BY DEFAULT AS IDENTITY"),
                (None, Some(d)) => s.push_str(&format!(" DEFAULT {d}")),
                (None, None) => {}
            }
            if !c.nullable {
                s.push_str(" NOT NULL");
            }
            s
        })
        .collect();
    let key_list = |positions: &[usize]| -> String {
        positions
            .iter()
            .filter_map(|&i| desc.columns.get(i))
            .map(|c| quote_if_needed(&c.name).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut key = String::new();
    if !primary_key.is_empty() {
        key.push_str(&format!(", PRIMARY KEY ({})", key_list(primary_key)));
    }
    for u in unique {
        let nulls = if u.nulls_not_distinct {
            " NULLS NOT DISTINCT"
        } else {
            ""
        };
        // A name other than the default one is part of the definition.
        let names: Vec<&str> = u
            .columns
            .iter()
            .filter_map(|&i| desc.columns.get(i))
            .map(|c| c.name.as_str())
            .collect();
        let named = if u.name == default_unique_name(name, &names) {
            String::new()
        } else {
            format!(" CONSTRAINT {}", quote_if_needed(&u.name))
        };
        key.push_str(&format!(
            ",{named} UNIQUE{nulls} ({})",
            key_list(&u.columns)
        ));
    }
    format!(
        "CREATE TABLE {} ({}{key})",
        quote_if_needed(name),
        cols.join(", ")
    )
}

/// `CREATE [OR REPLACE] VIEW` (the dispatcher sends materialized views to
/// [`crate::statements::materialized`]).
pub fn create_view(cx: &StatementContext, cv: &CreateView) -> Result<Plan> {
    if cv.temporary {
        return Err(PlanError::unsupported("CREATE TEMPORARY VIEW"));
    }
    let ViewDefinition {
        schema_id,
        name,
        desc,
        references,
        create_sql,
        ..
    } = view_definition(cx, cv, "VIEW", false)?;
    let existing = cx.catalog.item_by_name(schema_id, &name);
    let replace = match existing {
        Some(item) if cv.or_replace => {
            if item.kind != ItemKind::View {
                return Err(PlanError::WrongObjectType {
                    name: name.clone(),
                    expected: "a view",
                });
            }
            check_view_replacement(item.desc.as_ref(), &desc)?;
            Some(item.id)
        }
        _ => None,
    };
    Ok(Plan::CreateItem {
        def: ItemDef {
            schema_id,
            name,
            kind: ItemKind::View,
            create_sql,
            desc: Some(desc),
            references,
            details: ItemDetails::View,
            options: Default::default(),
        },
        if_not_exists: cv.if_not_exists,
        replace,
    })
}

/// What `CREATE [MATERIALIZED] VIEW` defines, before kind-specific checks.
pub(crate) struct ViewDefinition {
    pub schema_id: GlobalId,
    pub name: String,
    /// Columns, named by the column list if there is one.
    pub desc: RelationDesc,
    /// Items the query names directly.
    pub references: Vec<GlobalId>,
    /// The canonical definition (references in id form).
    pub create_sql: String,
    /// The query with references in id form.
    pub query: ast::Query,
    /// The planned query.
    pub plan: crate::plan::QueryPlan,
}

/// Resolve, plan and name a view's query; `keyword` is `VIEW` or
/// `MATERIALIZED VIEW`. With `reuse`, indexed views it reads are read from
/// their indexes (as a materialized view's dataflow does); otherwise every
/// view is inlined down to storage collections.
pub(crate) fn view_definition(
    cx: &StatementContext,
    cv: &CreateView,
    keyword: &str,
    reuse: bool,
) -> Result<ViewDefinition> {
    let resolver = cx.resolver();
    let (schema, name) = resolver.create_target(&cv.name)?;
    let mut query = (*cv.query).clone();
    let refs = resolver.rewrite(&mut query)?;
    let plan = crate::statements::context::plan_dataflow_query(cx, &query, reuse)?;
    let (names, desc) = named_columns(&plan.desc, &cv.columns, &format!("CREATE {keyword}"))?;
    let create_sql = format!(
        "CREATE {keyword} {} ({}) AS {query}",
        quote_if_needed(&name),
        names
            .iter()
            .map(|n| quote_if_needed(n).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(ViewDefinition {
        schema_id: schema.id,
        name,
        desc,
        references: refs.items.into_iter().collect(),
        create_sql,
        query,
        plan,
    })
}

/// A view's columns: the query's, renamed by an explicit column list.
fn named_columns(
    query: &RelationDesc,
    columns: &[ast::ViewColumnDef],
    statement: &str,
) -> Result<(Vec<String>, RelationDesc)> {
    let mut names: Vec<String> = query.columns.iter().map(|c| c.name.clone()).collect();
    if columns.len() > names.len() {
        return Err(PlanError::InvalidDefinition(format!(
            "{statement} specifies more column names than columns"
        )));
    }
    for (slot, c) in names.iter_mut().zip(columns) {
        *slot = normalize_ident(&c.name);
    }
    let mut seen = BTreeSet::new();
    for n in &names {
        if !seen.insert(n) {
            return Err(PlanError::DuplicateColumn(n.clone()));
        }
    }
    let desc = RelationDesc::new(
        query
            .columns
            .iter()
            .zip(&names)
            .map(|(c, n)| ColumnDesc {
                name: n.clone(),
                ty: c.ty.clone(),
                nullable: c.nullable,
            })
            .collect(),
    );
    Ok((names, desc))
}

/// Postgres's rule for `CREATE OR REPLACE VIEW`: existing columns keep
/// their names and types; new columns may only be added at the end.
fn check_view_replacement(old: Option<&RelationDesc>, new: &RelationDesc) -> Result<()> {
    let Some(old) = old else { return Ok(()) };
    if new.arity() < old.arity() {
        return Err(PlanError::InvalidDefinition(
            "cannot drop columns from view".into(),
        ));
    }
    for (o, n) in old.columns.iter().zip(&new.columns) {
        if o.name != n.name {
            return Err(PlanError::InvalidDefinition(format!(
                "cannot change name of view column \"{}\" to \"{}\"",
                o.name, n.name
            )));
        }
        if o.ty != n.ty {
            return Err(PlanError::InvalidDefinition(format!(
                "cannot change data type of view column \"{}\" from {} to {}",
                o.name,
                o.ty.sql_name(),
                n.ty.sql_name()
            )));
        }
    }
    Ok(())
}

/// `DROP ...`.
pub fn drop_objects(
    cx: &StatementContext,
    object_type: &ObjectType,
    names: &[ObjectName],
    if_exists: bool,
    cascade: bool,
) -> Result<Plan> {
    let mut ids = Vec::new();
    let mut notices = Vec::new();
    match object_type {
        ObjectType::Database => {
            for name in names {
                let parts = normalize_name(name)?;
                match cx.catalog.database_by_name(&parts.join(".")) {
                    Some(db) if db.name == cx.session.database => {
                        return Err(PlanError::InvalidParameter(
                            "cannot drop the currently open database".into(),
                        ));
                    }
                    // Dropping a database drops everything in it.
                    Some(db) => ids.extend(cx.catalog.transitive_dependents(&[db.id])),
                    None if if_exists => notices.push(format!(
                        "database \"{}\" does not exist, skipping",
                        parts.join(".")
                    )),
                    None => return Err(PlanError::UnknownDatabase(parts.join("."))),
                }
            }
        }
        ObjectType::Schema => {
            for name in names {
                match cx.resolver().resolve_schema(name) {
                    Ok(s) => ids.push(s.id),
                    Err(PlanError::UnknownSchema(n)) if if_exists => {
                        notices.push(format!("schema \"{n}\" does not exist, skipping"))
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        other => {
            let kind = match other {
                ObjectType::Table => ObjectKind::Table,
                ObjectType::View => ObjectKind::View,
                ObjectType::MaterializedView => ObjectKind::MaterializedView,
                ObjectType::Index => ObjectKind::Index,
                ObjectType::Sequence => ObjectKind::Sequence,
                other => return Err(PlanError::unsupported(format!("DROP {other}"))),
            };
            return drop_items(cx, kind, names, if_exists, cascade);
        }
    }
    drop_plan(cx, ids, notices, cascade)
}

/// `DROP <kind> ...` of items (tables, views, sources, ...).
pub fn drop_items(
    cx: &StatementContext,
    kind: ObjectKind,
    names: &[ObjectName],
    if_exists: bool,
    cascade: bool,
) -> Result<Plan> {
    let mut ids = Vec::new();
    let mut notices = Vec::new();
    for name in names {
        match lookup_kind(cx, name, kind)? {
            Some(id) => ids.push(id),
            None if if_exists => notices.push(format!(
                "{} \"{name}\" does not exist, skipping",
                expected_kind(kind)
                    .1
                    .trim_start_matches("a ")
                    .trim_start_matches("an ")
            )),
            None => return Err(missing_message(kind, name)),
        }
    }
    // A source goes with its subsources and progress relation, which
    // cannot be dropped alone.
    for id in ids.clone() {
        let item = cx.catalog.get_item(id)?;
        match item.source_details() {
            Some(freshet_catalog::SourceDetails::Ingestion(_)) => ids.extend(
                cx.catalog
                    .source_parts(id)
                    .into_iter()
                    .map(|p| p.id)
                    .filter(|p| !ids.contains(p))
                    .collect::<Vec<_>>(),
            ),
            Some(part) => {
                let source = part.source(id);
                if !ids.contains(&source) {
                    return Err(PlanError::InvalidParameter(format!(
                        "cannot drop {} \"{}\" alone: it is written by source \"{}\"; drop that source instead",
                        part.type_name(),
                        item.name,
                        cx.catalog.item(source).map_or("?", |s| s.name.as_str())
                    )));
                }
            }
            None => {}
        }
    }
    drop_plan(cx, ids, notices, cascade)
}

/// The plan of a `DROP` of `ids`: with everything depending on them
/// (`CASCADE`) or with just their indexes.
fn drop_plan(
    cx: &StatementContext,
    ids: Vec<GlobalId>,
    notices: Vec<String>,
    cascade: bool,
) -> Result<Plan> {
    let ids = if cascade {
        cx.catalog.transitive_dependents(&ids).into_iter().collect()
    } else {
        // An object's indexes go with it (as in PostgreSQL and
        // Materialize): they never make RESTRICT refuse.
        let mut with_indexes = ids.clone();
        for id in &ids {
            with_indexes.extend(
                cx.catalog
                    .indexes_on(*id)
                    .map(|i| i.id)
                    .filter(|i| !ids.contains(i)),
            );
        }
        with_indexes
    };
    crate::statements::sequence::check_sequence_drop(cx, &ids, cascade)?;
    Ok(Plan::Drop { ids, notices })
}

/// `ALTER <kind> name RENAME TO new`.
pub fn rename(
    cx: &StatementContext,
    kind: ObjectKind,
    name: &ObjectName,
    new_name: &ast::Ident,
    if_exists: bool,
) -> Result<Plan> {
    // As in PostgreSQL, `ALTER TABLE` renames any relation (dbt renames
    // the views it builds so); the other kinds rename only their own.
    let found = if kind == ObjectKind::Table {
        match cx.resolver().lookup_relation(name) {
            Ok(Some(crate::query::resolve::Resolved::Item(id))) => Some(id),
            Ok(None) | Err(PlanError::UnknownSchema(_)) | Err(PlanError::UnknownDatabase(_)) => {
                if if_exists {
                    return Ok(Plan::Empty);
                }
                return Err(PlanError::UnknownRelation(name.to_string()));
            }
            Ok(Some(crate::query::resolve::Resolved::System(_))) => lookup_kind(cx, name, kind)?,
            Err(e) => return Err(e),
        }
    } else {
        lookup_kind(cx, name, kind)?
    };
    match found {
        Some(id) => Ok(Plan::Rename {
            id,
            new_name: normalize_ident(new_name),
        }),
        None if if_exists => Ok(Plan::Empty),
        None => Err(missing_message(kind, name)),
    }
}

/// The `CREATE` statement that recreates an item, with current names
/// and its options (`WITH (RETAIN HISTORY ..., REFRESH ...)`).
pub fn show_create_sql(cx: &StatementContext, id: GlobalId) -> Result<String> {
    let sql = show_create_bare(cx, id)?;
    let item = cx.catalog.get_item(id)?;
    let Some(with) = crate::statements::options::display_item_options(&item.options) else {
        return Ok(sql);
    };
    Ok(match sql.find(" AS ") {
        Some(i) if item.kind == ItemKind::MaterializedView => {
            format!("{} {with}{}", &sql[..i], &sql[i..])
        }
        _ => format!("{sql} {with}"),
    })
}

fn show_create_bare(cx: &StatementContext, id: GlobalId) -> Result<String> {
    let resolver = cx.resolver();
    let item = cx.catalog.get_item(id)?;
    let qualified = resolver.display_name(id);
    match item.kind {
        ItemKind::Table => {
            let desc = item.desc.clone().unwrap_or_default();
            let (defaults, keys, serials) = match &item.details {
                ItemDetails::Table {
                    defaults,
                    keys,
                    serials,
                } => (defaults.clone(), keys.as_ref().clone(), serials.clone()),
                _ => (vec![], TableKeys::default(), vec![]),
            };
            let sql = table_sql(
                &item.name,
                &desc,
                &defaults,
                &keys.primary_key,
                &keys.unique,
                &serials,
            );
            Ok(sql.replacen(
                &format!("CREATE TABLE {}", quote_if_needed(&item.name)),
                &format!("CREATE TABLE {qualified}"),
                1,
            ))
        }
        ItemKind::Source => crate::statements::source::show_create_source(cx, item),
        ItemKind::Sink => crate::statements::sink::show_create_sink(cx, item),
        // The stored text, whose value is a placeholder.
        ItemKind::Secret | ItemKind::Connection => Ok(item.create_sql.clone()),
        _ => {
            let mut stmts = datafusion::sql::sqlparser::parser::Parser::parse_sql(
                &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
                &item.create_sql,
            )
            .map_err(|e| PlanError::Internal(format!("stored definition does not parse: {e}")))?;
            let mut stmt = stmts
                .pop()
                .ok_or_else(|| PlanError::Internal("empty definition".into()))?;
            if let ast::Statement::CreateView(v) = &mut stmt {
                v.name = qualified;
            }
            resolver.humanize(&mut stmt);
            Ok(stmt.to_string())
        }
    }
}

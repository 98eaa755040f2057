//! `CREATE SINK`, `SHOW SINKS`, `SHOW CREATE SINK`, and the dataflow a
//! sink runs.
//!
//! A sink exports the changes of one relation. Its dataflow is planned
//! exactly as a subscribe's (`SELECT <its columns> FROM <relation>`, views
//! inlined and every construct checked to be maintainable), from the
//! catalog item each time the sink starts, so a restart needs nothing but
//! the catalog. The columns are named explicitly (as the relation had
//! them at `CREATE`), so that a later change to the relation cannot
//! silently change what the target receives.

use std::collections::BTreeSet;

use datafusion::common::Dependency;
use datafusion::execution::SessionState;
use datafusion::sql::sqlparser::ast::{self, ObjectName};
use freshet_catalog::{
    CatalogState, ConnectionSpec, FileFormat, FilesSinkSpec, ItemDef, ItemDetails, ItemKind,
    KafkaSinkSpec, PostgresSinkSpec, SinkConnector, SinkDetails, SinkEnvelope,
};
use freshet_compute_types::RelPlan;
use freshet_repr::{ColumnDesc, GlobalId, PgType, RelationDesc};

use crate::error::{PlanError, Result};
use crate::parser::ObjectKind;
use crate::parser::sink::{CreateSinkStatement, SinkOptionValue, SinkTargetStatement};
use crate::parser::{normalize_ident, quote_if_needed};
use crate::plan::{Plan, QueryPlan};
use crate::query::resolve::id_name;
use crate::statements::context::StatementContext;
use crate::statements::lookup::{lookup_kind, missing_message};
use crate::statements::misc::{schema_to_show, text_rows};

/// A checked `CREATE SINK`: its catalog item (with `as_of` still to be
/// chosen) and what it reads.
#[derive(Debug, Clone)]
pub struct CreateSinkPlan {
    /// The sink's catalog item.
    pub def: ItemDef,
    /// Skip (with a notice) if the name exists.
    pub if_not_exists: bool,
    /// The storage collections its dataflow reads: held at the chosen
    /// `as_of` while the sink is committed.
    pub inputs: BTreeSet<GlobalId>,
}

/// The dataflow a sink runs, planned from its catalog item.
#[derive(Debug, Clone)]
pub struct SinkDataflow {
    /// What to compute (reading indexes' arrangements where it can).
    pub plan: RelPlan,
    /// The same read from storage, when `plan` imports indexes.
    pub from_storage: Option<RelPlan>,
    /// The storage collections it reads (held while it runs).
    pub inputs: BTreeSet<GlobalId>,
}

/// Plan `CREATE SINK`.
pub fn create_sink(cx: &StatementContext, stmt: &CreateSinkStatement) -> Result<Plan> {
    let resolver = cx.resolver();
    let (schema, name) = resolver.create_target(&stmt.name)?;
    let from = resolver.resolve_readable_item(&stmt.from)?;
    let relation = from
        .desc
        .clone()
        .ok_or_else(|| PlanError::Internal(format!("{} has no columns", from.name)))?;
    let planned = plan_dataflow(cx, from.id, &relation)?;
    let (_, relation, query) = &planned;
    let connector = match &stmt.target {
        SinkTargetStatement::Kafka {
            connection,
            options,
        } => SinkConnector::Kafka(kafka_sink(cx, connection, options, stmt)?),
        SinkTargetStatement::Postgres {
            connection,
            options,
        } => SinkConnector::Postgres(postgres_sink(cx, connection, options, stmt, relation)?),
        SinkTargetStatement::Files { option, value } => SinkConnector::Files(FilesSinkSpec {
            url: files_url(option, value)?,
            format: match stmt.format.as_deref() {
                None | Some("PARQUET") => FileFormat::Parquet,
                Some("CSV") => FileFormat::Csv,
                Some("JSON") => FileFormat::Json,
                Some(other) => {
                    return Err(PlanError::Unsupported(format!("FORMAT {other} for files")));
                }
            },
        }),
    };
    let envelope = match stmt.envelope.as_deref() {
        None if matches!(connector, SinkConnector::Postgres(_)) => SinkEnvelope::Upsert,
        None => SinkEnvelope::Diffs,
        Some("UPSERT") => SinkEnvelope::Upsert,
        Some("DEBEZIUM") => SinkEnvelope::Debezium,
        Some(other) => return Err(PlanError::Unsupported(format!("ENVELOPE {other}"))),
    };
    let key = if stmt.key.is_empty() {
        match (envelope, table_primary_key(from)) {
            (SinkEnvelope::Diffs, _) => Vec::new(),
            (_, Some(pk)) => pk,
            (e, None) => {
                return Err(PlanError::InvalidParameter(format!(
                    "ENVELOPE {} requires a KEY: {} has no primary key to use",
                    e.keyword().unwrap_or_default(),
                    from.name
                )));
            }
        }
    } else {
        if envelope == SinkEnvelope::Diffs {
            return Err(PlanError::InvalidParameter(
                "KEY requires ENVELOPE UPSERT or ENVELOPE DEBEZIUM".into(),
            ));
        }
        crate::query::resolve::key_positions(
            &relation.columns,
            stmt.key.iter().map(normalize_ident),
        )?
    };
    if !key.is_empty() && !stmt.key_not_enforced && !provably_unique(cx, from, query, &key) {
        let names: Vec<&str> = key
            .iter()
            .map(|&i| relation.columns[i].name.as_str())
            .collect();
        return Err(PlanError::InvalidParameter(format!(
            "upsert key could not be validated as unique: ({}) is not a primary key or \
             unique constraint of {}, nor the grouping key of its query; if it is unique, \
             say KEY ({}) NOT ENFORCED",
            names.join(", "),
            from.name,
            names.join(", ")
        )));
    }
    let mut snapshot = true;
    let mut commit_interval_ms = None;
    for (option, value) in &stmt.options {
        match option.as_str() {
            "COMMIT INTERVAL" => {
                let Some(value) = value else {
                    return Err(PlanError::InvalidParameter(
                        "COMMIT INTERVAL needs a value such as '100ms'".into(),
                    ));
                };
                let ms = crate::statements::options::interval_ms("COMMIT INTERVAL", value)?;
                if !(1..=3_600_000).contains(&ms) {
                    return Err(PlanError::InvalidParameter(format!(
                        "COMMIT INTERVAL must be between 1 millisecond and 1 hour, not {ms} ms"
                    )));
                }
                commit_interval_ms = Some(ms);
            }
            "SNAPSHOT" => {
                snapshot = match value {
                    None => true,
                    Some(v) => crate::statements::subscribe::bool_option("CREATE SINK", option, v)?,
                }
            }
            other => {
                return Err(PlanError::InvalidParameter(format!(
                    "unrecognized CREATE SINK option \"{other}\""
                )));
            }
        }
    }
    let mut canonical = stmt.clone();
    canonical.if_not_exists = false;
    canonical.from = id_name(from.id);
    canonical.format = Some(
        match &connector {
            SinkConnector::Files(f) => f.format.extension(),
            SinkConnector::Kafka(_) => "json",
            SinkConnector::Postgres(_) => "",
        }
        .to_uppercase(),
    )
    .filter(|f| !f.is_empty());
    canonical.envelope = envelope.keyword().map(str::to_string);
    canonical.key = key
        .iter()
        .map(|&i| quote_if_needed(&relation.columns[i].name))
        .collect();
    canonical.target = match &connector {
        SinkConnector::Files(files) => SinkTargetStatement::Files {
            option: "URL".into(),
            value: files.url.clone(),
        },
        SinkConnector::Kafka(k) => SinkTargetStatement::Kafka {
            connection: id_name(k.connection),
            options: vec![
                ("TOPIC".into(), SinkOptionValue::Text(k.topic.clone())),
                (
                    "PROGRESS TOPIC".into(),
                    SinkOptionValue::Text(k.progress_topic.clone()),
                ),
                (
                    "TOPIC PARTITION COUNT".into(),
                    SinkOptionValue::Number(k.partitions.to_string()),
                ),
                (
                    "TOPIC REPLICATION FACTOR".into(),
                    SinkOptionValue::Number(k.replication_factor.to_string()),
                ),
            ],
        },
        SinkConnector::Postgres(p) => SinkTargetStatement::Postgres {
            connection: id_name(p.connection),
            options: vec![
                ("TABLE".into(), SinkOptionValue::Text(qualified(&p.table))),
                (
                    "PROGRESS TABLE".into(),
                    SinkOptionValue::Text(qualified(&p.progress_table)),
                ),
            ],
        },
    };
    let mut references = vec![from.id];
    references.extend(connector.connection());
    let details = SinkDetails {
        from: from.id,
        relation: relation.clone(),
        connector,
        envelope,
        key,
        key_not_enforced: stmt.key_not_enforced,
        snapshot,
        as_of: 0,
        commit_interval_ms,
    };
    Ok(Plan::CreateSink(Box::new(CreateSinkPlan {
        def: ItemDef {
            schema_id: schema.id,
            name,
            kind: ItemKind::Sink,
            create_sql: canonical.to_string(),
            desc: None,
            references,
            details: ItemDetails::Sink(Box::new(details)),
            options: Default::default(),
        },
        if_not_exists: stmt.if_not_exists,
        inputs: query.inputs.clone(),
    })))
}

/// The dataflow of sink `id`, planned from its catalog item (as the
/// catalog is now) in the context stored definitions are planned in.
pub fn sink_dataflow(
    state: &SessionState,
    catalog: &CatalogState,
    id: GlobalId,
) -> Result<SinkDataflow> {
    let item = catalog.get_item(id)?;
    let details = item
        .sink_details()
        .ok_or_else(|| PlanError::Internal(format!("{id} is not a sink")))?;
    crate::statements::materialized::with_stored_context(state, catalog, id, |cx| {
        let (plan, relation, query) = plan_dataflow(cx, details.from, &details.relation)?;
        if relation.columns.len() != details.relation.columns.len() {
            return Err(PlanError::InvalidDefinition(format!(
                "the columns of {} changed since the sink was created",
                catalog.describe(details.from)
            )));
        }
        let from_storage = if plan.imported_indexes().is_empty() {
            None
        } else {
            let query = select_columns(details.from, &details.relation)?;
            Some(crate::statements::materialized::query_dataflow(cx, &query, false)?.0)
        };
        Ok(SinkDataflow {
            plan,
            from_storage,
            inputs: query.inputs,
        })
    })
}

/// The columns a sink's target rows have: `mz_timestamp` (bigint), then
/// `mz_diff` and the relation's columns, or for an envelope `mz_state`,
/// the key columns and the value columns (`before_`/`after_` for
/// Debezium) — a subscribe's columns, with the timestamp as a plain
/// integer for the readers of files.
pub fn target_desc(details: &SinkDetails) -> RelationDesc {
    use crate::statements::subscribe::{SubscribeEnvelope, output_desc};
    let envelope = match details.envelope {
        SinkEnvelope::Diffs => SubscribeEnvelope::Diffs,
        SinkEnvelope::Upsert => SubscribeEnvelope::Upsert {
            key: details.key.clone(),
        },
        SinkEnvelope::Debezium => SubscribeEnvelope::Debezium {
            key: details.key.clone(),
        },
    };
    let mut desc = output_desc(&details.relation, &envelope, false);
    desc.columns[0] = ColumnDesc {
        name: "mz_timestamp".into(),
        ty: PgType::Int8,
        nullable: false,
    };
    desc
}

/// `SHOW SINKS [{FROM | IN} schema]`.
pub fn show_sinks(cx: &StatementContext, schema: Option<&ObjectName>) -> Result<Plan> {
    let schema = schema_to_show(cx, schema)?;
    let mut rows: Vec<Vec<Option<String>>> = cx
        .catalog
        .items()
        .filter(|i| i.schema_id == schema && i.kind == ItemKind::Sink)
        .map(|i| {
            let details = i.sink_details();
            vec![
                Some(i.name.clone()),
                details.map(|d| d.connector.type_name().to_string()),
                details.map(|d| cx.resolver().display_name(d.from).to_string()),
            ]
        })
        .collect();
    rows.sort();
    text_rows(
        &[
            ("name", PgType::Text),
            ("type", PgType::Text),
            ("from", PgType::Text),
        ],
        rows,
    )
}

/// `SHOW CREATE SINK`: the stored statement with the sink and its
/// relation named as users name them.
pub fn show_create_sink(cx: &StatementContext, item: &freshet_catalog::Item) -> Result<String> {
    let mut stmts = crate::parser::parse(&item.create_sql)?;
    let Some(crate::parser::Statement::CreateSink(mut stmt)) = stmts.pop() else {
        return Err(PlanError::Internal(format!(
            "stored definition of sink {} is not CREATE SINK",
            item.name
        )));
    };
    stmt.name = cx.resolver().display_name(item.id);
    if let Some(d) = item.sink_details() {
        stmt.from = cx.resolver().display_name(d.from);
        if let (
            SinkTargetStatement::Kafka { connection, .. }
            | SinkTargetStatement::Postgres { connection, .. },
            Some(id),
        ) = (&mut stmt.target, d.connector.connection())
        {
            *connection = cx.resolver().display_name(id);
        }
    }
    Ok(stmt.to_string())
}

/// The dataflow of `SELECT <relation's columns> FROM <from>`, reusing
/// indexes, with its output columns and planned query.
fn plan_dataflow(
    cx: &StatementContext,
    from: GlobalId,
    relation: &RelationDesc,
) -> Result<(RelPlan, RelationDesc, QueryPlan)> {
    let query = select_columns(from, relation)?;
    crate::statements::materialized::query_dataflow(cx, &query, true)
}

fn select_columns(from: GlobalId, relation: &RelationDesc) -> Result<Box<ast::Query>> {
    let columns: Vec<String> = relation
        .columns
        .iter()
        .map(|c| quote_if_needed(&c.name).to_string())
        .collect();
    let sql = format!("SELECT {} FROM {}", columns.join(", "), id_name(from));
    match datafusion::sql::sqlparser::parser::Parser::parse_sql(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
        &sql,
    )
    .map_err(|e| PlanError::Internal(format!("{sql}: {e}")))?
    .pop()
    {
        Some(ast::Statement::Query(q)) => Ok(q),
        _ => Err(PlanError::Internal(format!("{sql} is not a query"))),
    }
}

/// The progress topic of a Kafka sink writing to `topic`, unless named.
pub fn default_progress_topic(topic: &str) -> String {
    format!("_freshet-progress-{topic}")
}

/// The name of the progress table, in the target table's schema, unless
/// named.
pub const DEFAULT_PROGRESS_TABLE: &str = "_freshet_sink_progress";

/// Check a PostgreSQL sink's connection, options, format, envelope and
/// column types.
fn postgres_sink(
    cx: &StatementContext,
    connection: &ObjectName,
    options: &[(String, SinkOptionValue)],
    stmt: &CreateSinkStatement,
    relation: &RelationDesc,
) -> Result<PostgresSinkSpec> {
    let id = connection_of(cx, connection, "POSTGRES", |c| {
        matches!(c, ConnectionSpec::Postgres(_))
    })?;
    if let Some(format) = &stmt.format {
        return Err(PlanError::Unsupported(format!(
            "FORMAT {format} for a PostgreSQL sink (it writes rows of a table)"
        )));
    }
    if stmt.envelope.as_deref() == Some("DEBEZIUM") {
        return Err(PlanError::Unsupported(
            "ENVELOPE DEBEZIUM for a PostgreSQL sink (its table holds each key's row: ENVELOPE UPSERT)"
                .into(),
        ));
    }
    if let Some(c) = relation.columns.iter().find(|c| {
        matches!(
            c.ty,
            PgType::Array(_) | PgType::Int2Vector | PgType::OidVector
        )
    }) {
        return Err(PlanError::Unsupported(format!(
            "column \"{}\" of type {} in a PostgreSQL sink",
            c.name,
            c.ty.sql_name()
        )));
    }
    let mut table = None;
    let mut progress = None;
    let mut seen = BTreeSet::new();
    for (name, value) in options {
        if !seen.insert(name.as_str()) {
            return Err(PlanError::InvalidParameter(format!(
                "{name} specified more than once"
            )));
        }
        let SinkOptionValue::Text(text) = value else {
            return Err(PlanError::InvalidParameter(format!(
                "{name} must be a string"
            )));
        };
        let parsed = table_name(name, text)?;
        match name.as_str() {
            "TABLE" => table = Some(parsed),
            _ => progress = Some(parsed),
        }
    }
    let table = table.ok_or_else(|| {
        PlanError::InvalidParameter("a PostgreSQL sink needs TABLE 'schema.table'".into())
    })?;
    let progress_table =
        progress.unwrap_or_else(|| (table.0.clone(), DEFAULT_PROGRESS_TABLE.to_string()));
    if progress_table == table {
        return Err(PlanError::InvalidParameter(
            "a PostgreSQL sink's PROGRESS TABLE must differ from its TABLE".into(),
        ));
    }
    Ok(PostgresSinkSpec {
        connection: id,
        table,
        progress_table,
    })
}

/// `'schema.table'` or `'table'` (in `public`), read as PostgreSQL reads
/// a name: unquoted parts folded to lower case.
fn table_name(option: &str, text: &str) -> Result<(String, String)> {
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    let bad = || PlanError::InvalidParameter(format!("{option} '{text}' is not a table name"));
    let name = datafusion::sql::sqlparser::parser::Parser::new(&PostgreSqlDialect {})
        .try_with_sql(text)
        .and_then(|mut p| {
            let name = p.parse_object_name(false)?;
            p.expect_token(&datafusion::sql::sqlparser::tokenizer::Token::EOF)?;
            Ok(name)
        })
        .map_err(|_| bad())?;
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| p.as_ident().map(normalize_ident).ok_or_else(bad))
        .collect::<Result<_>>()?;
    match parts.as_slice() {
        [table] => Ok(("public".into(), table.clone())),
        [schema, table] => Ok((schema.clone(), table.clone())),
        _ => Err(bad()),
    }
}

/// `schema.table`, each part quoted where PostgreSQL needs it.
fn qualified((schema, table): &(String, String)) -> String {
    format!("{}.{}", quote_if_needed(schema), quote_if_needed(table))
}

/// The connection `name` names, which must be of `kind`.
fn connection_of(
    cx: &StatementContext,
    name: &ObjectName,
    kind: &str,
    is_kind: impl Fn(&ConnectionSpec) -> bool,
) -> Result<GlobalId> {
    let Some(id) = lookup_kind(cx, name, ObjectKind::Connection)? else {
        return Err(missing_message(ObjectKind::Connection, name));
    };
    let item = cx.catalog.get_item(id)?;
    if !matches!(&item.details, ItemDetails::Connection(c) if is_kind(c)) {
        return Err(PlanError::InvalidParameter(format!(
            "connection \"{}\" is not a {kind} connection",
            item.name
        )));
    }
    Ok(id)
}

/// Check a Kafka sink's connection, options, format and envelope.
fn kafka_sink(
    cx: &StatementContext,
    connection: &ObjectName,
    options: &[(String, SinkOptionValue)],
    stmt: &CreateSinkStatement,
) -> Result<KafkaSinkSpec> {
    let id = connection_of(cx, connection, "KAFKA", |c| {
        matches!(c, ConnectionSpec::Kafka(_))
    })?;
    match stmt.format.as_deref() {
        None | Some("JSON") => {}
        Some(other) => {
            return Err(PlanError::Unsupported(format!(
                "FORMAT {other} for a Kafka sink (it writes FORMAT JSON)"
            )));
        }
    }
    if stmt.envelope.is_none() {
        return Err(PlanError::InvalidParameter(
            "a Kafka sink needs ENVELOPE UPSERT or ENVELOPE DEBEZIUM".into(),
        ));
    }
    let mut spec = KafkaSinkSpec {
        connection: id,
        topic: String::new(),
        progress_topic: String::new(),
        partitions: 1,
        replication_factor: 1,
    };
    let mut seen = BTreeSet::new();
    for (name, value) in options {
        if !seen.insert(name.as_str()) {
            return Err(PlanError::InvalidParameter(format!(
                "{name} specified more than once"
            )));
        }
        let text = || match value {
            SinkOptionValue::Text(t) if !t.is_empty() => Ok(t.clone()),
            _ => Err(PlanError::InvalidParameter(format!(
                "{name} must be a non-empty string"
            ))),
        };
        let number = |max: i64| match value {
            SinkOptionValue::Number(n) => n
                .parse::<i64>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| {
                    PlanError::InvalidParameter(format!("{name} must be between 1 and {max}"))
                }),
            SinkOptionValue::Text(_) => Err(PlanError::InvalidParameter(format!(
                "{name} must be a number"
            ))),
        };
        match name.as_str() {
            "TOPIC" => spec.topic = text()?,
            "PROGRESS TOPIC" => spec.progress_topic = text()?,
            "TOPIC PARTITION COUNT" => spec.partitions = number(i64::from(i32::MAX))? as i32,
            _ => spec.replication_factor = number(i64::from(i16::MAX))? as i16,
        }
    }
    if spec.topic.is_empty() {
        return Err(PlanError::InvalidParameter(
            "a Kafka sink needs TOPIC 'name'".into(),
        ));
    }
    if spec.progress_topic.is_empty() {
        spec.progress_topic = default_progress_topic(&spec.topic);
    }
    if spec.progress_topic == spec.topic {
        return Err(PlanError::InvalidParameter(
            "a Kafka sink's PROGRESS TOPIC must differ from its TOPIC".into(),
        ));
    }
    Ok(spec)
}

/// `PATH 'dir'` (relative to the server's working directory) or `URL
/// 'file:///dir'`, as an absolute `file://` URL.
fn files_url(option: &str, value: &str) -> Result<String> {
    let path = match option {
        "URL" => match value.strip_prefix("file://") {
            Some(path) => std::path::PathBuf::from(path),
            None => {
                return Err(PlanError::Unsupported(format!(
                    "sink URL \"{value}\": only file:// URLs are supported"
                )));
            }
        },
        _ => std::path::PathBuf::from(value),
    };
    if path.as_os_str().is_empty() {
        return Err(PlanError::InvalidParameter(
            "a files sink needs a directory".into(),
        ));
    }
    let path = if path.is_absolute() {
        path
    } else {
        std::env::current_dir()
            .map_err(|e| PlanError::Internal(format!("working directory: {e}")))?
            .join(path)
    };
    let text = path.to_str().ok_or_else(|| {
        PlanError::InvalidParameter(format!("sink path {} is not UTF-8", path.display()))
    })?;
    Ok(format!("file://{text}"))
}

/// The primary key of `item`, if it is a table with one.
fn table_primary_key(item: &freshet_catalog::Item) -> Option<Vec<usize>> {
    match &item.details {
        ItemDetails::Table { keys, .. } if !keys.primary_key.is_empty() => {
            Some(keys.primary_key.clone())
        }
        _ => None,
    }
}

/// Whether no two rows of `from` can share the values of `key`: a
/// primary key or a `UNIQUE` constraint (with NULLs that cannot repeat)
/// within it, or a functional dependency DataFusion derives (a `GROUP BY`,
/// a `DISTINCT`) whose determinant lies within it, for the sink's query or
/// for the definition of the view it reads.
///
/// Freshet's scans declare no constraints to DataFusion, so every
/// single-valued dependency comes from grouping, where a NULL key is one
/// group like any other: such a key is unique even where it is nullable.
fn provably_unique(
    cx: &StatementContext,
    from: &freshet_catalog::Item,
    query: &QueryPlan,
    key: &[usize],
) -> bool {
    let within = |cols: &[usize]| !cols.is_empty() && cols.iter().all(|c| key.contains(c));
    if let ItemDetails::Table { keys, .. } = &from.details {
        let desc = from.desc.as_ref();
        let non_null = |cols: &[usize]| {
            cols.iter().all(|&c| {
                desc.and_then(|d| d.columns.get(c))
                    .is_some_and(|c| !c.nullable)
            })
        };
        if within(&keys.primary_key)
            || keys
                .unique
                .iter()
                .any(|u| within(&u.columns) && (u.nulls_not_distinct || non_null(&u.columns)))
        {
            return true;
        }
    }
    let grouped = |plan: &QueryPlan| {
        plan.logical
            .schema()
            .functional_dependencies()
            .iter()
            .any(|d| d.mode == Dependency::Single && within(&d.source_indices))
    };
    if grouped(query) {
        return true;
    }
    // A materialized view is read from its collection: its definition
    // says what it holds (its columns in the same order).
    matches!(from.kind, ItemKind::MaterializedView | ItemKind::View)
        && crate::statements::materialized::planned_definition(cx.state, cx.catalog, from.id, false)
            .is_ok_and(|(definition, _)| grouped(&definition))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_become_absolute_file_urls() {
        assert_eq!(files_url("PATH", "/tmp/out").unwrap(), "file:///tmp/out");
        assert_eq!(files_url("URL", "file:///x/y").unwrap(), "file:///x/y");
        assert!(files_url("URL", "s3://bucket/x").is_err());
        assert!(files_url("PATH", "").is_err());
        let relative = files_url("PATH", "out").unwrap();
        assert!(relative.starts_with("file:///") && relative.ends_with("/out"));
    }
}

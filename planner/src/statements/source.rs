//! `CREATE SOURCE`: checking a source's options, and turning it (once the
//! server has learnt the shape of what it ingests) into the catalog items
//! of its group: the source, its subsources and its progress relation.
//!
//! Planning is in two steps because a source's relations can depend on the
//! world outside (an upstream database's tables): the planner checks the
//! statement and fixes every option ([`create_source`]); the server asks
//! the connector what relations it writes and calls [`source_ops`], as
//! Materialize's adapter "purifies" a `CREATE SOURCE` before planning it.

use datafusion::sql::sqlparser::ast;
use freshet_catalog::{
    ConnectionSpec, Ingestion, ItemDef, ItemDetails, ItemKind, ItemOptions, KafkaFormat,
    KafkaSourceSpec, LoadGenerator, LoadGeneratorSpec, Op, PostgresSourceSpec, SourceConnector,
    SourceDetails, SourceShape,
};
use freshet_repr::{GlobalId, RelationDesc, Timestamp};

use crate::error::{PlanError, Result};
use crate::parser::ObjectKind;
use crate::parser::item_options::ItemOption;
use crate::parser::quote_if_needed;
use crate::parser::source::{
    COMMON_OPTIONS, CreateSourceStatement, KafkaStatement, PostgresStatement,
    SourceConnectorStatement, generator_options,
};
use crate::plan::Plan;
use crate::statements::context::StatementContext;
use crate::statements::lookup::{lookup_kind, missing_message};
use crate::statements::options::interval_ms;

/// A checked `CREATE SOURCE`, waiting for the shape of what it ingests.
#[derive(Debug, Clone)]
pub struct CreateSourcePlan {
    /// The schema it is created in (its subsources and progress relation
    /// too).
    pub schema_id: GlobalId,
    /// Its name.
    pub name: String,
    /// Skip (with a notice) if the name exists.
    pub if_not_exists: bool,
    /// Where the data comes from, every option fixed.
    pub connector: SourceConnector,
    /// `FOR ALL TABLES`.
    pub for_all_tables: bool,
    /// The progress relation's name (`EXPOSE PROGRESS AS`, or
    /// `<name>_progress`).
    pub progress_name: String,
    /// `WITH (RETAIN HISTORY ...)`, applied to each of its relations.
    pub options: ItemOptions,
    /// The statement in canonical form, as the catalog stores it.
    pub create_sql: String,
    /// Catalog objects it uses (a webhook check's secrets, a
    /// connection): dropping one needs `CASCADE`.
    pub references: Vec<GlobalId>,
    /// For a PostgreSQL source, what to ask upstream about.
    pub postgres: Option<PostgresSourceRequest>,
}

/// What a PostgreSQL source asks its upstream for: the server looks the
/// tables up in the publication (purification) and fills in the
/// connector's tables from the answer.
#[derive(Debug, Clone)]
pub struct PostgresSourceRequest {
    /// `FOR TABLES (...)`: each upstream table (`[schema.]table`) and the
    /// name of its subsource (`AS name`; default the table's name).
    /// `None`: `FOR ALL TABLES`.
    pub tables: Option<Vec<(Vec<String>, Option<String>)>>,
    /// `TEXT COLUMNS`: `[schema.]table.column` names.
    pub text_columns: Vec<Vec<String>>,
}

/// Plan `CREATE SOURCE`.
pub fn create_source(cx: &StatementContext, stmt: &CreateSourceStatement) -> Result<Plan> {
    let resolver = cx.resolver();
    let (schema, name) = resolver.create_target(&stmt.name)?;
    let progress_name = match &stmt.progress {
        // An unqualified name is in the source's schema.
        Some(p) if p.0.len() == 1 => crate::parser::normalize_name(p)?.join("."),
        Some(p) => {
            let (progress_schema, progress) = resolver.create_target(p)?;
            if progress_schema.id != schema.id {
                return Err(PlanError::InvalidParameter(
                    "EXPOSE PROGRESS AS must name a relation in the source's schema".into(),
                ));
            }
            progress
        }
        None => format!("{name}_progress"),
    };
    if stmt
        .options
        .iter()
        .any(|o| matches!(o, ItemOption::Refresh(_)))
    {
        return Err(PlanError::InvalidParameter(
            "REFRESH is an option of materialized views, not of sources".into(),
        ));
    }
    let (retain_history, _) = crate::statements::options::split_options(cx, &stmt.options)?;
    let mut references = Vec::new();
    let mut postgres = None;
    let connector = match &stmt.connector {
        SourceConnectorStatement::LoadGenerator { generator, options } => {
            SourceConnector::LoadGenerator(load_generator(generator, options)?)
        }
        SourceConnectorStatement::Webhook(w) => {
            let spec = crate::statements::webhook::plan_webhook(cx, w)?;
            if let Some(check) = &spec.check {
                references.extend(check.secrets.iter().map(|(id, _)| *id));
            }
            SourceConnector::Webhook(spec)
        }
        SourceConnectorStatement::Kafka(k) => {
            let spec = kafka_source(cx, k)?;
            references.push(spec.connection);
            SourceConnector::Kafka(spec)
        }
        SourceConnectorStatement::Postgres(pg) => {
            let (spec, request) = postgres_source(cx, stmt, pg)?;
            references.push(spec.connection);
            postgres = Some(request);
            SourceConnector::Postgres(spec)
        }
    };
    if stmt.for_tables.is_some() && !matches!(stmt.connector, SourceConnectorStatement::Postgres(_))
    {
        return Err(PlanError::InvalidParameter(
            "FOR TABLES (...) is only valid for POSTGRES sources".into(),
        ));
    }
    let mut canonical = stmt.clone();
    canonical.if_not_exists = false;
    Ok(Plan::CreateSource(Box::new(CreateSourcePlan {
        schema_id: schema.id,
        name,
        if_not_exists: stmt.if_not_exists,
        connector,
        for_all_tables: stmt.for_all_tables,
        progress_name,
        options: ItemOptions {
            retain_history,
            refresh: None,
        },
        create_sql: canonical.to_string(),
        references,
        postgres,
    })))
}

/// Check a Kafka source's connection and options.
fn kafka_source(cx: &StatementContext, k: &KafkaStatement) -> Result<KafkaSourceSpec> {
    let Some(connection) = lookup_kind(cx, &k.connection, ObjectKind::Connection)? else {
        return Err(missing_message(ObjectKind::Connection, &k.connection));
    };
    let item = cx.catalog.get_item(connection)?;
    if !matches!(&item.details, ItemDetails::Connection(c) if matches!(**c, ConnectionSpec::Kafka(_)))
    {
        return Err(PlanError::InvalidParameter(format!(
            "connection \"{}\" is not a KAFKA connection",
            item.name
        )));
    }
    let format = match k.format.as_deref() {
        None | Some("BYTES") => KafkaFormat::Bytes,
        Some("TEXT") => KafkaFormat::Text,
        Some("JSON") => KafkaFormat::Json,
        Some(other) => {
            return Err(PlanError::InvalidParameter(format!(
                "unknown FORMAT {other}"
            )));
        }
    };
    let mut spec = KafkaSourceSpec {
        connection,
        topic: k.topic.clone(),
        format,
        key_column: None,
        partition_column: None,
        offset_column: None,
        timestamp_column: None,
        upsert: k.envelope.as_deref() == Some("UPSERT"),
    };
    for (what, alias) in &k.include {
        let name = alias
            .as_ref()
            .map(crate::parser::normalize_ident)
            .unwrap_or_else(|| what.to_lowercase());
        let slot = match what.as_str() {
            "KEY" => &mut spec.key_column,
            "PARTITION" => &mut spec.partition_column,
            "OFFSET" => &mut spec.offset_column,
            _ => &mut spec.timestamp_column,
        };
        if slot.is_some() {
            return Err(PlanError::InvalidParameter(format!(
                "INCLUDE {what} specified more than once"
            )));
        }
        *slot = Some(name);
    }
    let value_column = match format {
        KafkaFormat::Text => "text",
        _ => "data",
    };
    let mut names: Vec<&str> = vec![value_column];
    for n in [
        &spec.key_column,
        &spec.partition_column,
        &spec.offset_column,
        &spec.timestamp_column,
    ]
    .into_iter()
    .flatten()
    {
        if names.contains(&n.as_str()) {
            return Err(PlanError::InvalidParameter(format!(
                "column \"{n}\" specified more than once (rename it with AS)"
            )));
        }
        names.push(n);
    }
    if spec.upsert && spec.key_column.is_none() {
        return Err(PlanError::InvalidParameter(
            "ENVELOPE UPSERT needs the key: add INCLUDE KEY".into(),
        ));
    }
    Ok(spec)
}

/// Check a PostgreSQL source's connection and table list. The tables
/// themselves are looked up upstream by the server.
fn postgres_source(
    cx: &StatementContext,
    stmt: &CreateSourceStatement,
    pg: &PostgresStatement,
) -> Result<(PostgresSourceSpec, PostgresSourceRequest)> {
    let Some(connection) = lookup_kind(cx, &pg.connection, ObjectKind::Connection)? else {
        return Err(missing_message(ObjectKind::Connection, &pg.connection));
    };
    let item = cx.catalog.get_item(connection)?;
    if !matches!(&item.details, ItemDetails::Connection(c) if matches!(**c, ConnectionSpec::Postgres(_)))
    {
        return Err(PlanError::InvalidParameter(format!(
            "connection \"{}\" is not a POSTGRES connection",
            item.name
        )));
    }
    let tables = match (&stmt.for_tables, stmt.for_all_tables) {
        (Some(tables), false) => Some(
            tables
                .iter()
                .map(|(upstream, local)| {
                    let upstream = crate::parser::normalize_name(upstream)?;
                    let local = match local {
                        Some(l) if l.0.len() == 1 => {
                            Some(crate::parser::normalize_name(l)?.join("."))
                        }
                        Some(l) => {
                            return Err(PlanError::InvalidParameter(format!(
                                "subsource {l} must be named without a schema: subsources are created in the source's schema"
                            )));
                        }
                        None => None,
                    };
                    if upstream.len() > 2 {
                        return Err(PlanError::InvalidParameter(format!(
                            "upstream table {} must be named [schema.]table",
                            upstream.join(".")
                        )));
                    }
                    Ok((upstream, local))
                })
                .collect::<Result<Vec<_>>>()?,
        ),
        (None, true) => None,
        _ => {
            return Err(PlanError::InvalidParameter(
                "a POSTGRES source needs FOR ALL TABLES or FOR TABLES (...)".into(),
            ));
        }
    };
    let text_columns = pg
        .text_columns
        .iter()
        .map(|c| {
            let parts = crate::parser::normalize_name(c)?;
            if !(2..=3).contains(&parts.len()) {
                return Err(PlanError::InvalidParameter(format!(
                    "TEXT COLUMNS entry {c} must be [schema.]table.column"
                )));
            }
            Ok(parts)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((
        PostgresSourceSpec {
            connection,
            publication: pg.publication.clone(),
            slot: String::new(),
            tables: Vec::new(),
        },
        PostgresSourceRequest {
            tables,
            text_columns,
        },
    ))
}

/// The generator a name in SQL means.
fn generator_named(name: &str) -> Result<LoadGenerator> {
    Ok(match name {
        "COUNTER" => LoadGenerator::Counter,
        "AUCTION" => LoadGenerator::Auction,
        "MARKETING" => LoadGenerator::Marketing,
        "TPCH" => LoadGenerator::Tpch,
        "KEY VALUE" => LoadGenerator::KeyValue,
        "NEXMARK" => LoadGenerator::Nexmark,
        other => {
            return Err(PlanError::InvalidParameter(format!(
                "unknown load generator {other}"
            )));
        }
    })
}

/// Check a load generator's options and fix their values.
fn load_generator(
    name: &str,
    options: &[(String, Option<ast::Expr>)],
) -> Result<LoadGeneratorSpec> {
    let generator = generator_named(name)?;
    let mut spec = LoadGeneratorSpec::new(generator);
    let mut seen: Vec<&str> = Vec::new();
    for (option, value) in options {
        if seen.contains(&option.as_str()) {
            return Err(PlanError::Syntax(format!(
                "{option} specified more than once"
            )));
        }
        seen.push(option);
        if !COMMON_OPTIONS.contains(&option.as_str())
            && !generator_options(name).contains(&option.as_str())
            || (generator == LoadGenerator::Nexmark && option == "SEED")
        {
            // Materialize's wording.
            return Err(PlanError::InvalidParameter(format!(
                "{name} load generators do not support {option} values"
            )));
        }
        let number = |what: &str| -> Result<u64> { unsigned(what, value.as_ref()) };
        match option.as_str() {
            "TICK INTERVAL" => {
                let Some(v) = value else {
                    return Err(missing_value(option));
                };
                let ms = interval_ms("TICK INTERVAL", v)?;
                if ms == 0 {
                    return Err(PlanError::InvalidParameter(
                        "TICK INTERVAL must be at least 1ms".into(),
                    ));
                }
                spec.tick_ms = Some(ms);
            }
            "AS OF" => spec.as_of = number(option)?,
            "UP TO" => spec.up_to = Some(number(option)?),
            "SEED" => spec.seed = number(option)?,
            "MAX CARDINALITY" => spec.max_cardinality = Some(number(option)?),
            "SCALE FACTOR" => spec.scale_factor = Some(scale_factor(value.as_ref())?),
            "KEYS" => spec.keys = Some(number(option)?),
            "VALUE SIZE" => spec.value_size = Some(number(option)?),
            "PARTITIONS" => spec.partitions = Some(number(option)?),
            "BATCH SIZE" => spec.batch_size = Some(number(option)?),
            "SNAPSHOT ROUNDS" => spec.snapshot_rounds = Some(number(option)?),
            "TRANSACTIONAL SNAPSHOT" => {
                let transactional = match value {
                    None => true,
                    Some(v) => boolean(option, v)?,
                };
                if !transactional {
                    return Err(PlanError::unsupported(
                        "TRANSACTIONAL SNAPSHOT false (the snapshot is always written at one time)",
                    ));
                }
            }
            "EVENTS PER SECOND" => spec.events_per_second = Some(number(option)?),
            "TOTAL EVENTS" => spec.total_events = Some(number(option)?),
            other => {
                return Err(PlanError::InvalidParameter(format!(
                    "{name} load generators do not support {other} values"
                )));
            }
        }
    }
    if let Some(up_to) = spec.up_to
        && up_to < spec.as_of
    {
        return Err(PlanError::InvalidParameter(
            "UP TO cannot be less than AS OF".into(),
        ));
    }
    match generator {
        LoadGenerator::KeyValue => {
            for (what, v) in [
                ("KEYS", spec.keys),
                ("VALUE SIZE", spec.value_size),
                ("PARTITIONS", spec.partitions),
                ("BATCH SIZE", spec.batch_size),
            ] {
                // Materialize requires SNAPSHOT ROUNDS and SEED too;
                // here they default to 1 and 0.
                if v.is_none() {
                    return Err(PlanError::InvalidParameter(format!(
                        "LOAD GENERATOR KEY VALUE requires {what}"
                    )));
                }
            }
            let (keys, partitions, batch) = (
                spec.keys.unwrap_or(0),
                spec.partitions.unwrap_or(0),
                spec.batch_size.unwrap_or(0),
            );
            let invalid = |m: &str| Err(PlanError::InvalidParameter(m.into()));
            if keys == 0 || partitions == 0 || batch == 0 || spec.value_size == Some(0) {
                return invalid("LOAD GENERATOR KEY VALUE options must be non-zero");
            }
            if keys % partitions != 0 {
                return invalid("KEYS must be a multiple of PARTITIONS");
            }
            if batch > keys {
                return invalid("KEYS must be larger than BATCH SIZE");
            }
            if (keys / partitions) % batch != 0 {
                return invalid("PARTITIONS * BATCH SIZE must be a divisor of KEYS");
            }
            if spec.snapshot_rounds == Some(0) {
                return invalid("SNAPSHOT ROUNDS must be larger than 0");
            }
            if keys > 10_000_000 {
                return invalid("KEYS must be at most 10000000");
            }
            if spec.value_size.unwrap_or(0) > 1 << 20 {
                return Err(PlanError::InvalidParameter(
                    "VALUE SIZE must be at most 1 MiB".into(),
                ));
            }
        }
        LoadGenerator::Nexmark if spec.events_per_second == Some(0) => {
            return Err(PlanError::InvalidParameter(
                "EVENTS PER SECOND must be positive".into(),
            ));
        }
        _ => {}
    }
    Ok(spec)
}

fn missing_value(option: &str) -> PlanError {
    PlanError::Syntax(format!("{option} needs a value"))
}

/// A non-negative integer option.
fn unsigned(option: &str, value: Option<&ast::Expr>) -> Result<u64> {
    let Some(value) = value else {
        return Err(missing_value(option));
    };
    match value {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse::<u64>().ok(),
            ast::Value::SingleQuotedString(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        },
        _ => None,
    }
    .ok_or_else(|| {
        PlanError::InvalidParameter(format!(
            "invalid {option} {value}: expected a non-negative integer"
        ))
    })
}

/// A boolean option's value.
fn boolean(option: &str, value: &ast::Expr) -> Result<bool> {
    match value {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Boolean(b) => Some(*b),
            _ => None,
        },
        _ => None,
    }
    .ok_or_else(|| {
        PlanError::InvalidParameter(format!("invalid {option} {value}: expected a boolean"))
    })
}

/// `SCALE FACTOR`: a positive decimal, at most 1.
fn scale_factor(value: Option<&ast::Expr>) -> Result<String> {
    let text = match value {
        Some(ast::Expr::Value(v)) => match &v.value {
            ast::Value::Number(n, _) => Some(n.clone()),
            ast::Value::SingleQuotedString(s) => Some(s.trim().to_string()),
            _ => None,
        },
        _ => None,
    };
    match text.as_deref().map(|t| (t, t.parse::<f64>())) {
        // The snapshot is one append, held in memory while it is written.
        Some((t, Ok(f))) if f > 0.0 && f <= 1.0 => Ok(t.to_string()),
        _ => Err(PlanError::InvalidParameter(format!(
            "unsupported scale factor {}: expected a number above 0 and at most 1",
            value.map(|v| v.to_string()).unwrap_or_default()
        ))),
    }
}

/// The catalog transaction that creates a planned source whose connector
/// writes `shape`, created at `now`.
pub fn source_ops(plan: &CreateSourcePlan, shape: SourceShape, now: Timestamp) -> Result<Op> {
    let multi = shape.outputs.len() != 1;
    let (own_desc, outputs) = match (multi, plan.for_all_tables) {
        // A PostgreSQL source always writes subsources (even of one
        // table), as in Materialize.
        _ if plan.postgres.is_some() => (None, shape.outputs),
        (false, false) => (shape.outputs.into_iter().next().map(|(_, d)| d), Vec::new()),
        (true, true) => (None, shape.outputs),
        (true, false) => {
            return Err(PlanError::InvalidParameter(format!(
                "multi-output sources require a FOR ALL TABLES statement: {} writes {}",
                generator_sql(&plan.connector),
                shape
                    .outputs
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        (false, true) => {
            return Err(PlanError::InvalidParameter(format!(
                "FOR ALL TABLES is only valid for multi-output sources; {} writes one relation",
                generator_sql(&plan.connector)
            )));
        }
    };
    let part = |name: String, desc: RelationDesc, details: SourceDetails, sql: String| ItemDef {
        schema_id: plan.schema_id,
        name,
        kind: ItemKind::Source,
        create_sql: sql,
        desc: Some(desc),
        references: Vec::new(),
        details: ItemDetails::Source(Box::new(details)),
        options: Box::new(plan.options.clone()),
    };
    let mut parts: Vec<ItemDef> = outputs
        .into_iter()
        .map(|(upstream, desc)| {
            let sql = subsource_sql(&upstream, &desc, &plan.name);
            part(
                upstream.clone(),
                desc,
                SourceDetails::Output {
                    source: GlobalId::User(0),
                    upstream,
                },
                sql,
            )
        })
        .collect();
    parts.push(part(
        plan.progress_name.clone(),
        shape.progress.clone(),
        SourceDetails::Progress {
            source: GlobalId::User(0),
        },
        subsource_sql(&plan.progress_name, &shape.progress, &plan.name),
    ));
    Ok(Op::CreateSource {
        source: ItemDef {
            schema_id: plan.schema_id,
            name: plan.name.clone(),
            kind: ItemKind::Source,
            create_sql: plan.create_sql.clone(),
            desc: own_desc,
            references: plan.references.clone(),
            details: ItemDetails::Source(Box::new(SourceDetails::Ingestion(Box::new(Ingestion {
                connector: plan.connector.clone(),
                created_at: now,
            })))),
            options: Box::new(plan.options.clone()),
        },
        parts,
    })
}

fn generator_sql(connector: &SourceConnector) -> String {
    match connector {
        SourceConnector::LoadGenerator(spec) => {
            format!("LOAD GENERATOR {}", spec.generator.sql_name())
        }
        SourceConnector::Webhook(_) => "WEBHOOK".into(),
        SourceConnector::Postgres(_) => "POSTGRES".into(),
        SourceConnector::Kafka(_) => "KAFKA".into(),
    }
}

/// How a subsource or progress relation shows in `SHOW CREATE SOURCE`
/// (Materialize's `CREATE SUBSOURCE` form): its columns and its source.
pub fn subsource_sql(name: &str, desc: &RelationDesc, source: &str) -> String {
    let columns: Vec<String> = desc
        .columns
        .iter()
        .map(|c| {
            format!(
                "{} {}{}",
                quote_if_needed(&c.name),
                c.ty.sql_name(),
                if c.nullable { "" } else { " NOT NULL" }
            )
        })
        .collect();
    format!(
        "CREATE SUBSOURCE {} ({}) OF SOURCE {}",
        quote_if_needed(name),
        columns.join(", "),
        quote_if_needed(source)
    )
}

/// `SHOW CREATE SOURCE`: the stored statement with the current names of
/// the source and its progress relation; a subsource's `CREATE
/// SUBSOURCE` form.
pub fn show_create_source(cx: &StatementContext, item: &freshet_catalog::Item) -> Result<String> {
    let resolver = cx.resolver();
    let name_of = |id: GlobalId| {
        cx.catalog
            .item(id)
            .map(|i| i.name.clone())
            .unwrap_or_default()
    };
    match item.source_details() {
        Some(SourceDetails::Ingestion(_)) => {
            let mut stmts = crate::parser::parse(&item.create_sql)?;
            let Some(crate::parser::Statement::CreateSource(mut stmt)) = stmts.pop() else {
                return Err(PlanError::Internal(format!(
                    "stored definition of source {} is not CREATE SOURCE",
                    item.name
                )));
            };
            stmt.name = resolver.display_name(item.id);
            // The current options follow (`show_create_sql`).
            stmt.options.clear();
            let progress = cx
                .catalog
                .source_parts(item.id)
                .into_iter()
                .find(|p| matches!(p.source_details(), Some(SourceDetails::Progress { .. })));
            stmt.progress = progress.map(|p| ast::ObjectName::from(vec![quote_if_needed(&p.name)]));
            Ok(stmt.to_string())
        }
        Some(part) => Ok(subsource_sql(
            &item.name,
            &item.desc.clone().unwrap_or_default(),
            &name_of(part.source(item.id)),
        )),
        None => Err(PlanError::Internal(format!(
            "source {} has no source details",
            item.name
        ))),
    }
}

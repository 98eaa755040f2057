//! Planning SHOW, SET/RESET, transaction control and COPY.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, StringArray};
use datafusion::sql::sqlparser::ast::{
    self, CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget, Expr,
    ObjectName, ShowStatementOptions, TransactionIsolationLevel, TransactionMode, Value,
};
use freshet_catalog::{ItemDetails, ItemKind};
use freshet_repr::{ColumnDesc, PgType, RelationDesc};

use crate::error::{PlanError, Result};
use crate::parser::{ObjectKind, normalize_ident, normalize_name, quote_if_needed};
use crate::plan::{CopyFormat, CopyFromPlan, CopyOptions, Plan, SetValue};
use crate::query::resolve::Resolved;
use crate::statements::context::{StatementContext, plan_query};
use crate::statements::ddl::show_create_sql;

/// Rows of text (and boolean) columns computed at planning time.
pub fn text_rows(columns: &[(&str, PgType)], rows: Vec<Vec<Option<String>>>) -> Result<Plan> {
    let (desc, batch) = text_batch(columns, rows)?;
    Ok(Plan::Rows { desc, batch })
}

/// [`text_rows`]' columns and batch, for callers that answer with them
/// directly.
pub fn text_batch(
    columns: &[(&str, PgType)],
    rows: Vec<Vec<Option<String>>>,
) -> Result<(RelationDesc, RecordBatch)> {
    let desc = RelationDesc::new(
        columns
            .iter()
            .map(|(n, t)| ColumnDesc {
                name: n.to_string(),
                ty: t.clone(),
                nullable: true,
            })
            .collect(),
    );
    let arrays: Vec<ArrayRef> = columns
        .iter()
        .enumerate()
        .map(|(i, (_, t))| -> ArrayRef {
            let values = rows.iter().map(|r| r.get(i).cloned().flatten());
            match t {
                PgType::Bool => Arc::new(
                    values
                        .map(|v| v.map(|s| s == "true"))
                        .collect::<BooleanArray>(),
                ),
                _ => Arc::new(values.collect::<StringArray>()),
            }
        })
        .collect();
    let batch = RecordBatch::try_new(desc.arrow_schema(), arrays)
        .map_err(|e| PlanError::Internal(e.to_string()))?;
    Ok((desc, batch))
}

/// The schema `SHOW` lists from: an explicit `FROM`/`IN`, else the first
/// existing schema on the search path.
fn show_schema_id(
    cx: &StatementContext,
    opts: &ShowStatementOptions,
) -> Result<freshet_repr::GlobalId> {
    schema_to_show(
        cx,
        opts.show_in.as_ref().and_then(|i| i.parent_name.as_ref()),
    )
}

/// The schema named, else the first existing schema on the search path.
pub(crate) fn schema_to_show(
    cx: &StatementContext,
    name: Option<&ObjectName>,
) -> Result<freshet_repr::GlobalId> {
    let resolver = cx.resolver();
    if let Some(name) = name {
        return Ok(resolver.resolve_schema(name)?.id);
    }
    let db = resolver.database()?;
    for s in &cx.session.search_path {
        if let Some(schema) = cx.catalog.schema_by_name(db.id, s) {
            return Ok(schema.id);
        }
    }
    Err(PlanError::UnknownSchema(
        cx.session.search_path.first().cloned().unwrap_or_default(),
    ))
}

fn filter_like(opts: &ShowStatementOptions, name: &str) -> bool {
    match &opts.filter_position {
        Some(ast::ShowStatementFilterPosition::Suffix(ast::ShowStatementFilter::Like(p)))
        | Some(ast::ShowStatementFilterPosition::Infix(ast::ShowStatementFilter::Like(p))) => {
            like(p, name)
        }
        _ => true,
    }
}

fn like(pattern: &str, s: &str) -> bool {
    fn go(p: &[char], s: &[char]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some('%') => (0..=s.len()).any(|i| go(&p[1..], &s[i..])),
            Some('_') => !s.is_empty() && go(&p[1..], &s[1..]),
            Some(c) => s.first() == Some(c) && go(&p[1..], &s[1..]),
        }
    }
    go(
        &pattern.chars().collect::<Vec<_>>(),
        &s.chars().collect::<Vec<_>>(),
    )
}

/// `SHOW TABLES | VIEWS | MATERIALIZED VIEWS`.
pub fn show_items(
    cx: &StatementContext,
    kind: ItemKind,
    opts: &ShowStatementOptions,
) -> Result<Plan> {
    let schema = show_schema_id(cx, opts)?;
    let mut names: Vec<String> = cx
        .catalog
        .items()
        .filter(|i| i.schema_id == schema && i.kind == kind && filter_like(opts, &i.name))
        .map(|i| i.name.clone())
        .collect();
    names.sort();
    text_rows(
        &[("name", PgType::Text)],
        names.into_iter().map(|n| vec![Some(n)]).collect(),
    )
}

/// `SHOW SOURCES [FROM schema]`: each source and the relations it
/// writes, with their type (`load-generator`, `subsource`, `progress`,
/// ...), as Materialize lists them.
pub fn show_sources(cx: &StatementContext, schema: Option<&ObjectName>) -> Result<Plan> {
    let schema = schema_to_show(cx, schema)?;
    let mut rows: Vec<(String, &'static str)> = cx
        .catalog
        .items()
        .filter(|i| i.schema_id == schema && i.kind == ItemKind::Source)
        .map(|i| {
            (
                i.name.clone(),
                i.source_details().map_or("source", |d| d.type_name()),
            )
        })
        .collect();
    rows.sort();
    text_rows(
        &[("name", PgType::Text), ("type", PgType::Text)],
        rows.into_iter()
            .map(|(n, t)| vec![Some(n), Some(t.to_string())])
            .collect(),
    )
}

/// `SHOW SCHEMAS [FROM db]`.
pub fn show_schemas(cx: &StatementContext, opts: &ShowStatementOptions) -> Result<Plan> {
    let db = match opts.show_in.as_ref().and_then(|i| i.parent_name.as_ref()) {
        Some(name) => {
            let n = normalize_name(name)?.join(".");
            cx.catalog
                .database_by_name(&n)
                .ok_or(PlanError::UnknownDatabase(n))?
        }
        None => cx.resolver().database()?,
    };
    let mut names: Vec<String> = cx
        .catalog
        .schemas()
        .filter(|s| s.database_id == db.id && filter_like(opts, &s.name))
        .map(|s| s.name.clone())
        .chain(
            crate::builtins::SYSTEM_SCHEMAS
                .iter()
                .map(|s| s.to_string())
                .filter(|s| filter_like(opts, s)),
        )
        .collect();
    names.sort();
    text_rows(
        &[("name", PgType::Text)],
        names.into_iter().map(|n| vec![Some(n)]).collect(),
    )
}

/// `SHOW DATABASES`.
pub fn show_databases(cx: &StatementContext, opts: &ShowStatementOptions) -> Result<Plan> {
    let mut names: Vec<String> = cx
        .catalog
        .databases()
        .filter(|d| filter_like(opts, &d.name))
        .map(|d| d.name.clone())
        .collect();
    names.sort();
    text_rows(
        &[("name", PgType::Text)],
        names.into_iter().map(|n| vec![Some(n)]).collect(),
    )
}

/// `SHOW COLUMNS FROM t`.
pub fn show_columns(cx: &StatementContext, opts: &ShowStatementOptions) -> Result<Plan> {
    let name = opts
        .show_in
        .as_ref()
        .and_then(|i| i.parent_name.as_ref())
        .ok_or_else(|| PlanError::Syntax("SHOW COLUMNS requires FROM <relation>".into()))?;
    let desc = match cx.resolver().resolve_relation(name)? {
        Resolved::Item(id) => {
            cx.catalog
                .get_item(id)?
                .desc
                .clone()
                .ok_or_else(|| PlanError::WrongObjectType {
                    name: name.to_string(),
                    expected: "a relation",
                })?
        }
        Resolved::System(rel) => rel.desc(),
    };
    text_rows(
        &[
            ("name", PgType::Text),
            ("nullable", PgType::Bool),
            ("type", PgType::Text),
        ],
        desc.columns
            .iter()
            .map(|c| {
                vec![
                    Some(c.name.clone()),
                    Some(c.nullable.to_string()),
                    Some(c.ty.sql_name()),
                ]
            })
            .collect(),
    )
}

/// `SHOW CREATE <kind> name`.
pub fn show_create(cx: &StatementContext, kind: ObjectKind, name: &ObjectName) -> Result<Plan> {
    let item = cx.resolver().resolve_item(name)?;
    let (expected_kind, expected) = crate::statements::lookup::expected_kind(kind);
    if item.kind != expected_kind {
        return Err(PlanError::WrongObjectType {
            name: item.name.clone(),
            expected,
        });
    }
    let sql = show_create_sql(cx, item.id)?;
    let qualified = cx.resolver().display_name(item.id).to_string();
    text_rows(
        &[("name", PgType::Text), ("create_sql", PgType::Text)],
        vec![vec![Some(qualified), Some(sql)]],
    )
}

fn value_text(e: &Expr) -> Result<SetValueItem> {
    Ok(match e {
        Expr::Identifier(i)
            if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default") =>
        {
            SetValueItem::Default
        }
        Expr::Identifier(i) => SetValueItem::Text(i.value.clone()),
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => {
                SetValueItem::Text(s.clone())
            }
            Value::Number(n, _) => SetValueItem::Text(n.clone()),
            Value::Boolean(b) => SetValueItem::Text(b.to_string()),
            other => SetValueItem::Text(other.to_string()),
        },
        Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => match value_text(expr)? {
            SetValueItem::Text(t) => SetValueItem::Text(format!("-{t}")),
            d => d,
        },
        other => SetValueItem::Text(other.to_string()),
    })
}

enum SetValueItem {
    Default,
    Text(String),
}

/// `SET [LOCAL|SESSION] name = value[, ...]` and its spellings.
pub fn set(set: &ast::Set) -> Result<Plan> {
    match set {
        ast::Set::SingleAssignment {
            scope,
            variable,
            values,
            ..
        } => {
            let name = normalize_name(variable)?.join(".").to_lowercase();
            let local = matches!(scope, Some(ast::ContextModifier::Local));
            let mut texts = Vec::new();
            for v in values {
                match value_text(v)? {
                    SetValueItem::Default => {
                        return Ok(Plan::SetVariable {
                            name,
                            value: SetValue::Default,
                            local,
                        });
                    }
                    SetValueItem::Text(t) => texts.push(t),
                }
            }
            Ok(Plan::SetVariable {
                name,
                value: SetValue::Values(texts),
                local,
            })
        }
        ast::Set::SetTimeZone { local, value } => Ok(Plan::SetVariable {
            name: "timezone".into(),
            value: match value_text(value)? {
                SetValueItem::Default => SetValue::Default,
                SetValueItem::Text(t) if t.eq_ignore_ascii_case("local") => SetValue::Default,
                SetValueItem::Text(t) => SetValue::Values(vec![t]),
            },
            local: *local,
        }),
        ast::Set::SetNames { charset_name, .. } => Ok(Plan::SetVariable {
            name: "client_encoding".into(),
            value: SetValue::Values(vec![charset_name.value.clone()]),
            local: false,
        }),
        ast::Set::SetNamesDefault {} => Ok(Plan::SetVariable {
            name: "client_encoding".into(),
            value: SetValue::Default,
            local: false,
        }),
        ast::Set::SetTransaction { modes, .. } => Ok(Plan::SetTransaction {
            isolation: isolation(modes),
        }),
        other => Err(PlanError::unsupported(format!("{other}"))),
    }
}

/// The isolation level named by transaction modes.
pub fn isolation(modes: &[TransactionMode]) -> Option<String> {
    modes.iter().find_map(|m| match m {
        TransactionMode::IsolationLevel(level) => Some(
            match level {
                TransactionIsolationLevel::ReadUncommitted => "read uncommitted",
                TransactionIsolationLevel::ReadCommitted => "read committed",
                TransactionIsolationLevel::RepeatableRead => "repeatable read",
                TransactionIsolationLevel::Serializable => "serializable",
                TransactionIsolationLevel::Snapshot => "snapshot",
            }
            .to_string(),
        ),
        _ => None,
    })
}

/// `SHOW name`.
pub fn show_variable(variable: &[ast::Ident]) -> Plan {
    let name = variable
        .iter()
        .map(normalize_ident)
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    let name = match name.as_str() {
        "time zone" => "timezone".to_string(),
        // The SQL-standard spelling, which drivers (SQLAlchemy, pgJDBC)
        // read and map to their own constants: answered in PostgreSQL's
        // vocabulary (see `Isolation::postgres_name`).
        "transaction isolation level" => name,
        _ => name.replace(' ', "_"),
    };
    Plan::ShowVariable(name)
}

/// COPY options given as `(name, value)` pairs (as after `COPY
/// (SUBSCRIBE ...) TO STDOUT`).
pub fn copy_options_from_pairs(pairs: &[(String, Option<String>)]) -> Result<CopyOptions> {
    let one_char = |name: &str, v: &Option<String>| -> Result<char> {
        let v = v.as_deref().unwrap_or("");
        let mut chars = v.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => Ok(c),
            _ => Err(PlanError::InvalidParameter(format!(
                "COPY {name} must be a single one-byte character"
            ))),
        }
    };
    let mut options = Vec::with_capacity(pairs.len());
    for (name, value) in pairs {
        options.push(match name.as_str() {
            "format" => CopyOption::Format(datafusion::sql::sqlparser::ast::Ident::new(
                value.clone().unwrap_or_default(),
            )),
            "delimiter" => CopyOption::Delimiter(one_char(name, value)?),
            "null" => CopyOption::Null(value.clone().unwrap_or_default()),
            "header" => CopyOption::Header(!matches!(
                value.as_deref().map(str::to_lowercase).as_deref(),
                Some("false" | "off" | "0")
            )),
            "quote" => CopyOption::Quote(one_char(name, value)?),
            "escape" => CopyOption::Escape(one_char(name, value)?),
            "encoding" => CopyOption::Encoding(value.clone().unwrap_or_default()),
            other => {
                return Err(PlanError::unsupported(format!(
                    "COPY option {}",
                    other.to_uppercase()
                )));
            }
        });
    }
    copy_options(&options, &[])
}

fn copy_options(options: &[CopyOption], legacy: &[CopyLegacyOption]) -> Result<CopyOptions> {
    let mut o = CopyOptions {
        format: CopyFormat::Text,
        delimiter: b'\t',
        null: "\\N".into(),
        header: false,
        quote: b'"',
        escape: b'"',
    };
    let mut delimiter = None;
    let mut null = None;
    let mut quote = false;
    let byte = |c: &char, what: &str| -> Result<u8> {
        if c.is_ascii() {
            Ok(*c as u8)
        } else {
            Err(PlanError::InvalidParameter(format!(
                "COPY {what} must be a single one-byte character"
            )))
        }
    };
    let mut escape = None;
    for opt in options {
        match opt {
            CopyOption::Format(f) => {
                o.format = match f.value.to_lowercase().as_str() {
                    "text" => CopyFormat::Text,
                    "csv" => CopyFormat::Csv,
                    "binary" => CopyFormat::Binary,
                    other => {
                        return Err(PlanError::InvalidParameter(format!(
                            "COPY format \"{other}\" not recognized"
                        )));
                    }
                }
            }
            CopyOption::Delimiter(c) => delimiter = Some(byte(c, "delimiter")?),
            CopyOption::Null(s) => null = Some(s.clone()),
            CopyOption::Header(h) => o.header = *h,
            CopyOption::Quote(c) => {
                o.quote = byte(c, "quote")?;
                quote = true;
            }
            CopyOption::Escape(c) => escape = Some(byte(c, "escape")?),
            CopyOption::Encoding(e)
                if e.eq_ignore_ascii_case("utf8") || e.eq_ignore_ascii_case("utf-8") => {}
            // PostgreSQL's FREEZE skips later vacuuming of the loaded rows;
            // Freshet's storage has no such step, so it is a no-op hint.
            CopyOption::Freeze(_) => {}
            other => return Err(PlanError::unsupported(format!("COPY option {other}"))),
        }
    }
    for opt in legacy {
        match opt {
            CopyLegacyOption::Binary => o.format = CopyFormat::Binary,
            CopyLegacyOption::Delimiter(c) => delimiter = Some(byte(c, "delimiter")?),
            CopyLegacyOption::Null(s) => null = Some(s.clone()),
            // The pre-9.0 spelling psql's `\copy ... CSV HEADER` sends.
            CopyLegacyOption::Csv(csv) => {
                o.format = CopyFormat::Csv;
                for c in csv {
                    match c {
                        CopyLegacyCsvOption::Header => o.header = true,
                        CopyLegacyCsvOption::Quote(q) => {
                            o.quote = byte(q, "quote")?;
                            quote = true;
                        }
                        CopyLegacyCsvOption::Escape(e) => escape = Some(byte(e, "escape")?),
                        other => {
                            return Err(PlanError::unsupported(format!("COPY option {other}")));
                        }
                    }
                }
            }
            other => return Err(PlanError::unsupported(format!("COPY option {other}"))),
        }
    }
    if o.format == CopyFormat::Csv {
        o.delimiter = b',';
        o.null = String::new();
    }
    if o.format == CopyFormat::Binary {
        // PostgreSQL's own checks, in its order.
        for (given, name) in [
            (delimiter.is_some(), "DELIMITER"),
            (o.header, "HEADER"),
            (null.is_some(), "NULL"),
        ] {
            if given {
                return Err(PlanError::Syntax(format!(
                    "cannot specify {name} in BINARY mode"
                )));
            }
        }
        if quote || escape.is_some() {
            return Err(PlanError::unsupported(
                "COPY QUOTE and ESCAPE outside CSV mode",
            ));
        }
    }
    if let Some(d) = delimiter {
        o.delimiter = d;
    }
    if let Some(n) = null {
        o.null = n;
    }
    o.escape = escape.unwrap_or(o.quote);
    if o.header && o.format == CopyFormat::Text {
        return Err(PlanError::unsupported("COPY HEADER in text format"));
    }
    Ok(o)
}

/// `COPY ... FROM STDIN` and `COPY ... TO STDOUT`.
pub fn copy(
    cx: &StatementContext,
    source: &CopySource,
    to: bool,
    target: &CopyTarget,
    options: &[CopyOption],
    legacy: &[CopyLegacyOption],
) -> Result<Plan> {
    let opts = copy_options(options, legacy)?;
    match (to, target) {
        (false, CopyTarget::Stdin) => {
            let CopySource::Table {
                table_name,
                columns,
            } = source
            else {
                return Err(PlanError::Syntax("COPY FROM requires a table".into()));
            };
            let item = cx.resolver().resolve_item(table_name)?;
            if item.kind != ItemKind::Table {
                return Err(PlanError::WrongObjectType {
                    name: format!("cannot copy to {} \"{}\": it", item.kind.name(), item.name),
                    expected: "a table",
                });
            }
            let desc = item.desc.clone().unwrap_or_default();
            let cols = if columns.is_empty() {
                (0..desc.arity()).collect()
            } else {
                columns
                    .iter()
                    .map(|c| {
                        let n = normalize_ident(c);
                        desc.column_index(&n).ok_or_else(|| {
                            PlanError::UnknownColumn(format!("{n}\" of relation \"{}", item.name))
                        })
                    })
                    .collect::<Result<Vec<_>>>()?
            };
            // One row of every column's default, for columns the data
            // omits. A sequence-numbered column is NULL here: the sequencer
            // numbers each row (a default evaluated once would number them
            // all alike).
            let (defaults, serials) = match &item.details {
                ItemDetails::Table {
                    defaults, serials, ..
                } => (defaults.clone(), serials.clone()),
                _ => (vec![], vec![]),
            };
            let items: Vec<String> = desc
                .columns
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let numbered = serials.iter().any(|s| s.column == i);
                    let value = match defaults.get(i).cloned().flatten() {
                        Some(sql) if !numbered => sql,
                        _ => "NULL".into(),
                    };
                    format!(
                        "CAST(({value}) AS {}) AS {}",
                        c.ty.sql_name(),
                        quote_if_needed(&c.name)
                    )
                })
                .collect();
            let defaults_query = datafusion::sql::sqlparser::parser::Parser::parse_sql(
                &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
                &format!("SELECT {}", items.join(", ")),
            )
            .map_err(|e| PlanError::Internal(e.to_string()))?
            .pop();
            let Some(ast::Statement::Query(defaults_query)) = defaults_query else {
                return Err(PlanError::Internal("defaults query".into()));
            };
            let defaults = plan_query(cx, &defaults_query)?;
            Ok(Plan::CopyFrom(Box::new(CopyFromPlan {
                table: item.id,
                table_desc: desc,
                columns: cols,
                defaults,
                options: opts,
            })))
        }
        (true, CopyTarget::Stdout) => {
            let query = match source {
                CopySource::Query(q) => (**q).clone(),
                CopySource::Table {
                    table_name,
                    columns,
                } => {
                    let cols = if columns.is_empty() {
                        "*".to_string()
                    } else {
                        columns
                            .iter()
                            .map(|c| c.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    match datafusion::sql::sqlparser::parser::Parser::parse_sql(
                        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
                        &format!("SELECT {cols} FROM {table_name}"),
                    )
                    .map_err(|e| PlanError::Internal(e.to_string()))?
                    .pop()
                    {
                        Some(ast::Statement::Query(q)) => *q,
                        _ => return Err(PlanError::Internal("COPY TO query".into())),
                    }
                }
            };
            Ok(Plan::CopyTo(plan_query(cx, &query)?, opts))
        }
        _ => Err(PlanError::unsupported(
            "COPY to or from a file or program (use STDIN/STDOUT)",
        )),
    }
}

/// `PREPARE name [(types)] AS statement`.
pub fn prepare(
    name: &ast::Ident,
    data_types: &[ast::DataType],
    statement: &ast::Statement,
) -> Result<Plan> {
    let declared = data_types
        .iter()
        .map(|t| {
            crate::pg::types::pg_type_of(t)
                .map(|pg| pg.arrow_type())
                .map_err(PlanError::Type)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Plan::Prepare {
        name: normalize_ident(name),
        stmt: Box::new(crate::parser::Statement::Sql(Box::new(statement.clone()))),
        declared,
    })
}

/// `EXECUTE name [(args)]`: the arguments become one row of a query,
/// evaluated when the statement runs (they may call functions).
pub fn execute(cx: &StatementContext, name: &ObjectName, args: &[Expr]) -> Result<Plan> {
    let name = normalize_name(name)?.join(".");
    let args = if args.is_empty() {
        None
    } else {
        let sql = format!(
            "SELECT {}",
            args.iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut parsed = crate::parser::parse(&sql)?;
        let query = match parsed.pop() {
            Some(crate::parser::Statement::Sql(stmt)) => match *stmt {
                ast::Statement::Query(q) => q,
                _ => return Err(PlanError::Syntax("invalid EXECUTE arguments".into())),
            },
            _ => return Err(PlanError::Syntax("invalid EXECUTE arguments".into())),
        };
        Some(Box::new(plan_query(cx, &query)?))
    };
    Ok(Plan::Execute { name, args })
}

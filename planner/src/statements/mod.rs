//! Dispatching a parsed statement to its planner.

pub mod alter_table;
pub mod connection;
pub mod context;
pub mod ddl;
pub mod dml;
pub mod explain;
pub mod index;
pub mod insert_values;
pub mod keyed_write;
pub mod lookup;
pub mod materialized;
pub mod misc;
pub mod options;
pub mod peek;
pub mod peek_join;
pub mod secret;
pub mod sequence;
pub mod shapes;
pub mod sink;
pub mod source;
pub mod subscribe;
pub mod templates;
pub mod webhook;
pub mod written_plan;

use datafusion::sql::sqlparser::ast::{self, ShowCreateObject};
use freshet_catalog::ItemKind;

use crate::error::{PlanError, Result};
use crate::parser::{ObjectKind, Statement};
use crate::plan::{ExplainKind, PeekPlan, Plan, SetValue};
use crate::statements::context::{StatementContext, plan_query};

/// Plan one statement.
pub fn plan_statement(cx: &StatementContext, stmt: &Statement) -> Result<Plan> {
    match stmt {
        Statement::Sql(s) => plan_sql(cx, s),
        Statement::ExplainTimestamp(inner) => match inner.as_ref() {
            ast::Statement::Query(q) => {
                Ok(Plan::Explain(ExplainKind::Timestamp, plan_query(cx, q)?))
            }
            other => Err(PlanError::unsupported(format!(
                "EXPLAIN TIMESTAMP for {}",
                statement_kind(other)
            ))),
        },
        Statement::ExplainMaterializedView(name) => explain::explain_materialized_view(cx, name),
        Statement::ExplainIndex(name) => explain::explain_index(cx, name),
        Statement::ShowIndexes(on) => crate::statements::index::show_indexes(cx, on.as_ref()),
        Statement::CreateDefaultIndex { on, if_not_exists } => {
            crate::statements::index::create_index(cx, None, on, None, *if_not_exists)
        }
        Statement::ShowCreate(kind, name) => misc::show_create(cx, *kind, name),
        Statement::ShowSources(schema) => misc::show_sources(cx, schema.as_ref()),
        Statement::CreateSource(s) => source::create_source(cx, s),
        Statement::CreateSink(s) => sink::create_sink(cx, s),
        Statement::ShowSinks(schema) => sink::show_sinks(cx, schema.as_ref()),
        Statement::CreateSecret(s) => secret::create_secret(cx, s),
        Statement::AlterSecret(s) => secret::alter_secret(cx, s),
        Statement::ShowSecrets(schema) => secret::show_secrets(cx, schema.as_ref()),
        Statement::CreateConnection(c) => connection::create_connection(cx, c),
        Statement::ShowConnections(schema) => connection::show_connections(cx, schema.as_ref()),
        Statement::DropObjects {
            kind,
            if_exists,
            names,
            cascade,
        } => ddl::drop_items(cx, *kind, names, *if_exists, *cascade),
        Statement::AlterRename {
            kind,
            if_exists,
            name,
            new_name,
        } => ddl::rename(cx, *kind, name, new_name, *if_exists),
        Statement::Subscribe(s) => Ok(Plan::Subscribe(
            Box::new(crate::statements::subscribe::plan_subscribe(cx, s)?),
            misc::copy_options_from_pairs(&[])?,
        )),
        Statement::CopySubscribe { subscribe, options } => Ok(Plan::Subscribe(
            Box::new(crate::statements::subscribe::plan_subscribe(cx, subscribe)?),
            misc::copy_options_from_pairs(options)?,
        )),
        Statement::Declare { name, stmt } => {
            let plan = plan_statement(cx, stmt)?;
            if !matches!(plan, Plan::Select(_) | Plan::Peek(_) | Plan::Subscribe(..)) {
                return Err(PlanError::Syntax(
                    "DECLARE CURSOR needs a query or SUBSCRIBE".into(),
                ));
            }
            Ok(Plan::Declare {
                name: name.clone(),
                plan: Box::new(plan),
            })
        }
        Statement::CreateWithOptions { stmt, options } => {
            let plan = plan_statement(cx, stmt)?;
            options::with_item_options(cx, plan, stmt, options)
        }
        Statement::AlterOptions {
            kind,
            if_exists,
            name,
            set,
            reset,
        } => options::plan_alter_options(cx, *kind, *if_exists, name, set, reset),
        Statement::Maintenance { kind, tables } => maintenance(cx, *kind, tables),
        Statement::RefreshMaterializedView { name, with_data } => {
            refresh_materialized_view(cx, name, *with_data)
        }
        Statement::SelectAsOf {
            query,
            at_least,
            time,
        } => Ok(Plan::SelectAt {
            query: Box::new(plan_query(cx, query)?),
            at_least: *at_least,
            time: Box::new(options::plan_time(cx, time)?),
        }),
        Statement::Fetch {
            name,
            count,
            timeout,
        } => Ok(Plan::Fetch {
            name: name.clone(),
            count: *count,
            timeout: timeout
                .as_deref()
                .map(crate::statements::subscribe::fetch_timeout)
                .transpose()?,
        }),
    }
}

/// A short name for a statement kind, for messages.
fn statement_kind(stmt: &ast::Statement) -> String {
    let text = stmt.to_string();
    text.split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

fn plan_sql(cx: &StatementContext, stmt: &ast::Statement) -> Result<Plan> {
    use ast::Statement as S;
    match stmt {
        S::Query(q) => match crate::statements::index::fast_path(cx, q)? {
            Some(peek) => Ok(Plan::Peek(peek)),
            None => {
                let mut plan = peek::plan_select(cx, plan_query(cx, q)?)?;
                if let Plan::Peek(PeekPlan {
                    finish: Some(finish),
                    ..
                }) = &mut plan
                {
                    finish.source = Some(std::sync::Arc::new((**q).clone()));
                }
                Ok(plan)
            }
        },
        S::CreateIndex(ci) => crate::statements::index::create_index(
            cx,
            ci.name.as_ref(),
            &ci.table_name,
            Some(&ci.columns),
            ci.if_not_exists,
        ),
        S::Close { cursor } => Ok(Plan::Close(match cursor {
            ast::CloseCursor::All => None,
            ast::CloseCursor::Specific { name } => Some(crate::parser::normalize_ident(name)),
        })),
        S::Insert(ins) => dml::insert(cx, ins),
        S::Update(upd) => dml::update(cx, upd),
        S::Delete(del) => dml::delete(cx, del),
        S::Truncate(t) => dml::truncate(cx, t),
        S::CreateTable(ct) => ddl::create_table(cx, ct),
        S::CreateSequence {
            temporary,
            if_not_exists,
            name,
            data_type,
            sequence_options,
            owned_by,
        } => sequence::create_sequence(
            cx,
            *temporary,
            *if_not_exists,
            name,
            data_type.as_ref(),
            sequence_options,
            owned_by.as_ref(),
        ),
        S::CreateView(cv) if cv.materialized => materialized::create_materialized_view(cx, cv),
        S::CreateView(cv) => ddl::create_view(cx, cv),
        S::CreateSchema {
            schema_name,
            if_not_exists,
            ..
        } => ddl::create_schema(cx, schema_name, *if_not_exists),
        S::CreateDatabase {
            db_name,
            if_not_exists,
            ..
        } => ddl::create_database(db_name, *if_not_exists),
        S::Drop {
            object_type,
            if_exists,
            names,
            cascade,
            ..
        } => ddl::drop_objects(cx, object_type, names, *if_exists, *cascade),
        S::AlterTable(at) => alter_table::alter_table(cx, at),
        S::ShowTables { show_options, .. } => misc::show_items(cx, ItemKind::Table, show_options),
        S::ShowViews {
            materialized,
            show_options,
            ..
        } => misc::show_items(
            cx,
            if *materialized {
                ItemKind::MaterializedView
            } else {
                ItemKind::View
            },
            show_options,
        ),
        S::ShowSchemas { show_options, .. } => misc::show_schemas(cx, show_options),
        S::ShowDatabases { show_options, .. } => misc::show_databases(cx, show_options),
        S::ShowColumns { show_options, .. } => misc::show_columns(cx, show_options),
        S::ShowCreate { obj_type, obj_name } => {
            let kind = match obj_type {
                ShowCreateObject::Table => ObjectKind::Table,
                ShowCreateObject::View => ObjectKind::View,
                other => return Err(PlanError::unsupported(format!("SHOW CREATE {other}"))),
            };
            misc::show_create(cx, kind, obj_name)
        }
        S::ShowVariable { variable } => Ok(misc::show_variable(variable)),
        S::Set(set) => misc::set(set),
        S::Reset(reset) => match &reset.reset {
            ast::Reset::ALL => Ok(Plan::ResetAll),
            ast::Reset::ConfigurationParameter(name) => Ok(Plan::SetVariable {
                name: crate::parser::normalize_name(name)?
                    .join(".")
                    .to_lowercase(),
                value: SetValue::Default,
                local: false,
            }),
        },
        // Freshet has no LISTEN, so no session listens on any channel and
        // there is nothing to stop (connection pools send `UNLISTEN *`
        // when they hand a connection back).
        S::UNLISTEN { .. } => Ok(Plan::Empty),
        S::Discard { object_type } => match object_type {
            ast::DiscardObject::ALL => Ok(Plan::ResetAll),
            other => Err(PlanError::unsupported(format!("DISCARD {other}"))),
        },
        S::StartTransaction { modes, .. } => Ok(Plan::StartTransaction {
            isolation: misc::isolation(modes),
        }),
        S::Commit { chain: false, .. } => Ok(Plan::Commit),
        S::Rollback {
            chain: false,
            savepoint: Some(name),
        } => Ok(Plan::RollbackToSavepoint(crate::parser::normalize_ident(
            name,
        ))),
        S::Savepoint { name } => Ok(Plan::Savepoint(crate::parser::normalize_ident(name))),
        S::ReleaseSavepoint { name } => {
            Ok(Plan::ReleaseSavepoint(crate::parser::normalize_ident(name)))
        }
        S::Prepare {
            name,
            data_types,
            statement,
        } => misc::prepare(name, data_types, statement),
        S::Execute {
            name: Some(name),
            parameters,
            immediate: false,
            into,
            using,
            output: false,
            ..
        } if into.is_empty() && using.is_empty() => misc::execute(cx, name, parameters),
        S::Deallocate { name, .. } => Ok(Plan::Deallocate(
            if name.quote_style.is_none() && name.value.eq_ignore_ascii_case("all") {
                None
            } else {
                Some(crate::parser::normalize_ident(name))
            },
        )),
        S::Rollback {
            chain: false,
            savepoint: None,
        } => Ok(Plan::Rollback),
        S::Copy {
            source,
            to,
            target,
            options,
            legacy_options,
            values,
        } => {
            if !values.is_empty() {
                return Err(PlanError::unsupported("inline COPY data"));
            }
            misc::copy(cx, source, *to, target, options, legacy_options)
        }
        S::Explain {
            analyze,
            verbose,
            statement,
            options,
            ..
        } => {
            // `EXPLAIN VERBOSE q` or PostgreSQL's `EXPLAIN (VERBOSE) q`.
            let verbose = *verbose
                || options.iter().flatten().any(|o| {
                    o.name.value.eq_ignore_ascii_case("verbose")
                        && !matches!(&o.arg, Some(ast::Expr::Value(v))
                            if matches!(v.value, ast::Value::Boolean(false)))
                });
            if *analyze {
                return Err(PlanError::unsupported("EXPLAIN ANALYZE"));
            }
            if let ast::Statement::CreateView(cv) = statement.as_ref()
                && cv.materialized
            {
                return materialized::explain_create(cx, cv);
            }
            let query = match plan_sql(cx, statement)? {
                Plan::Select(q) => q,
                Plan::Peek(peek) => return Ok(Plan::ExplainPeek(peek)),
                Plan::Write(w) if w.keyed.is_some() => return Ok(Plan::ExplainKeyedWrite(w)),
                Plan::Write(w) => std::sync::Arc::unwrap_or_clone(w.source),
                Plan::InsertValues(insert) => return Ok(Plan::ExplainInsertValues(insert)),
                Plan::CopyTo(q, _) => q,
                _ => {
                    return Err(PlanError::unsupported(format!(
                        "EXPLAIN for {}",
                        statement_kind(statement)
                    )));
                }
            };
            let kind = if verbose {
                ExplainKind::Physical
            } else {
                ExplainKind::Plan
            };
            Ok(Plan::Explain(kind, query))
        }
        other => Err(PlanError::unsupported(statement_kind(other))),
    }
}

/// `VACUUM` / `ANALYZE`: each relation named must exist (and each column
/// named be one of its columns); views are skipped with a warning, as in
/// PostgreSQL. Nothing else happens: collections compact themselves and
/// plans use no statistics.
fn maintenance(
    cx: &StatementContext,
    kind: crate::parser::MaintenanceKind,
    tables: &[(ast::ObjectName, Vec<ast::Ident>)],
) -> Result<Plan> {
    use crate::query::resolve::Resolved;
    let command = match kind {
        crate::parser::MaintenanceKind::Vacuum => "vacuum",
        crate::parser::MaintenanceKind::Analyze => "analyze",
    };
    let resolver = cx.resolver();
    let mut warnings = Vec::new();
    for (name, columns) in tables {
        let item = match resolver.lookup_relation(name)? {
            None => return Err(PlanError::UnknownRelation(name.to_string())),
            Some(Resolved::System(_)) => continue,
            Some(Resolved::Item(id)) => cx.catalog.get_item(id)?,
        };
        if !item.kind.has_collection() {
            warnings.push(format!(
                "skipping \"{}\" --- cannot {command} non-tables or special system tables",
                item.name
            ));
            continue;
        }
        let desc = item.desc.clone().unwrap_or_default();
        for c in columns {
            let c = crate::parser::normalize_ident(c);
            if !desc.columns.iter().any(|d| d.name == c) {
                return Err(PlanError::UnknownColumnOf {
                    column: c,
                    relation: item.name.clone(),
                });
            }
        }
    }
    Ok(Plan::Maintenance {
        in_block_allowed: kind == crate::parser::MaintenanceKind::Analyze,
        warnings,
    })
}

/// `REFRESH MATERIALIZED VIEW`: a view that refreshes on every commit is
/// always up to date (a read after this statement sees every write
/// committed before it), so there is nothing to do; a view with a
/// `REFRESH` schedule refreshes only on it.
fn refresh_materialized_view(
    cx: &StatementContext,
    name: &ast::ObjectName,
    with_data: bool,
) -> Result<Plan> {
    use crate::parser::ObjectKind;
    let Some(id) = crate::statements::lookup::lookup_kind(cx, name, ObjectKind::MaterializedView)?
    else {
        return Err(crate::statements::lookup::missing_message(
            ObjectKind::MaterializedView,
            name,
        ));
    };
    if !with_data {
        return Err(PlanError::unsupported(
            "REFRESH MATERIALIZED VIEW ... WITH NO DATA (a materialized view is always populated)",
        ));
    }
    if cx.catalog.get_item(id)?.options.refresh.is_some() {
        return Err(PlanError::unsupported(
            "REFRESH MATERIALIZED VIEW of a view with a REFRESH schedule (it refreshes on its schedule)",
        ));
    }
    Ok(Plan::Maintenance {
        in_block_allowed: true,
        warnings: Vec::new(),
    })
}

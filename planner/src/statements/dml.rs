//! Planning INSERT, UPDATE and DELETE.
//!
//! Each becomes a query whose rows the sequencer writes: INSERT's source
//! rows (DataFusion plans the column list, casts and defaults), DELETE's
//! matching rows (retracted), and UPDATE's matching rows followed by their
//! new values (old retracted, new inserted), so a write commits exactly the
//! rows its read saw.

use datafusion::logical_expr::{ExprSchemable, LogicalPlan, LogicalPlanBuilder, col};
use datafusion::sql::sqlparser::ast::{
    self, AssignmentTarget, Expr, FromTable, Query, SelectItem, SetExpr, TableFactor, TableObject,
    TableWithJoins,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use freshet_catalog::{Item, ItemDetails, ItemKind};

use crate::error::{PlanError, Result};
use crate::parser::quote_if_needed;
use crate::parser::{normalize_ident, normalize_name};
use crate::plan::{Plan, QueryPlan, WriteKind, WritePlan};
use crate::query::resolve::ROWS_SCHEMA;
use crate::query::resolve::{Resolved, id_name};
use crate::statements::context::{StatementContext, finish_query, plan_query};
use crate::statements::insert_values::{self, InsertTarget};

fn parse_expr(sql: &str) -> Result<Expr> {
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| PlanError::Internal(format!("stored expression {sql:?} does not parse: {e}")))
}

fn parse_query(sql: &str) -> Result<Query> {
    match Parser::parse_sql(&PostgreSqlDialect {}, sql)
        .map_err(|e| PlanError::Internal(format!("generated query does not parse: {e}: {sql}")))?
        .pop()
    {
        Some(ast::Statement::Query(q)) => Ok(*q),
        _ => Err(PlanError::Internal(format!("not a query: {sql}"))),
    }
}

/// The table a write targets: it must be a table.
fn target_table<'a>(
    cx: &StatementContext<'a>,
    name: &ast::ObjectName,
    verb: &str,
) -> Result<&'a Item> {
    match cx.resolver().resolve_relation(name)? {
        Resolved::Item(id) => {
            let item = cx.catalog.get_item(id)?;
            if item.kind != ItemKind::Table {
                return Err(PlanError::NotWritable {
                    verb: verb.to_string(),
                    kind: item.kind.name(),
                    name: item.name.clone(),
                });
            }
            Ok(item)
        }
        Resolved::System(rel) => Err(PlanError::Catalog(
            freshet_catalog::CatalogError::SystemObject(rel.qualified_name()),
        )),
    }
}

/// `INSERT INTO t [(cols)] VALUES ... | SELECT ... [RETURNING ...]`.
pub fn insert(cx: &StatementContext, ins: &ast::Insert) -> Result<Plan> {
    if ins.or.is_some() || ins.ignore || ins.replace_into {
        return Err(PlanError::unsupported("INSERT OR / INSERT IGNORE"));
    }
    if ins.on.is_some() {
        return Err(PlanError::unsupported("INSERT ... ON CONFLICT"));
    }
    if ins.overwrite || ins.partitioned.is_some() || !ins.assignments.is_empty() {
        return Err(PlanError::unsupported("this form of INSERT"));
    }
    let TableObject::TableName(table_name) = &ins.table else {
        return Err(PlanError::unsupported("INSERT INTO TABLE FUNCTION"));
    };
    let item = target_table(cx, table_name, "insert into")?;
    let desc = item.desc.clone().unwrap_or_default();
    let defaults = match &item.details {
        ItemDetails::Table { defaults, .. } => defaults.clone(),
        _ => vec![],
    };
    // Which table column each source position fills.
    let targets: Vec<usize> = if ins.columns.is_empty() {
        (0..desc.arity()).collect()
    } else {
        ins.columns
            .iter()
            .map(|c| {
                let name = normalize_name(c)?.join(".");
                desc.column_index(&name).ok_or_else(|| {
                    PlanError::UnknownColumn(format!("{name}\" of relation \"{}", item.name))
                })
            })
            .collect::<Result<_>>()?
    };
    for (i, t) in targets.iter().enumerate() {
        if targets[..i].contains(t) {
            return Err(PlanError::DuplicateColumn(desc.columns[*t].name.clone()));
        }
    }
    let returning_list = ins.returning.clone();
    let mut ins = ins.clone();
    let mut source = match ins.source.take() {
        Some(q) => *q,
        // DEFAULT VALUES
        None => {
            ins.columns.clear();
            parse_query(&format!(
                "VALUES ({})",
                vec!["DEFAULT"; desc.arity()].join(", ")
            ))?
        }
    };
    let targets: Vec<usize> = if ins.columns.is_empty() {
        // Without a column list, VALUES rows fill the first columns and
        // the rest take their defaults, as in PostgreSQL: name them.
        let width = match source.body.as_ref() {
            SetExpr::Values(values) => values.rows.first().map(|r| r.content.len()),
            _ => None,
        };
        match width {
            Some(w) if w < desc.arity() => {
                ins.columns = desc.columns[..w]
                    .iter()
                    .map(|c| ast::ObjectName::from(vec![ast::Ident::with_quote('"', &c.name)]))
                    .collect();
                (0..w).collect()
            }
            _ => (0..desc.arity()).collect(),
        }
    } else {
        targets
    };
    // A `GENERATED ALWAYS` identity column takes no explicit value.
    if let ItemDetails::Table { serials, .. } = &item.details {
        for serial in serials
            .iter()
            .filter(|s| s.identity == Some(freshet_catalog::Identity::Always))
        {
            let Some(pos) = targets.iter().position(|t| *t == serial.column) else {
                continue;
            };
            let all_default = match source.body.as_ref() {
                SetExpr::Values(values) => values.rows.iter().all(|r| {
                    matches!(r.content.get(pos), Some(Expr::Identifier(i))
                        if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
                }),
                _ => false,
            };
            if !all_default {
                let column = &desc.columns[serial.column].name;
                return Err(PlanError::DataFusion(crate::error::sqlstate_error(
                    freshet_repr::sqlstate::GENERATED_ALWAYS,
                    format!(
                        "cannot insert a non-DEFAULT value into column \"{column}\" (it is an identity column defined as GENERATED ALWAYS)"
                    ),
                )));
            }
        }
    }
    // Constants and parameters need no query plan.
    if returning_list.is_none() {
        let target = InsertTarget {
            table: item.id,
            desc: &desc,
            defaults: &defaults,
            targets: &targets,
            named_columns: !ins.columns.is_empty(),
        };
        if let Some(plan) = insert_values::plan(&target, &source, cx.params) {
            return Ok(Plan::InsertValues(std::sync::Arc::new(plan)));
        }
    }
    // `DEFAULT` in VALUES means the column's default (or NULL).
    if let SetExpr::Values(values) = source.body.as_mut() {
        if values.rows.iter().any(|r| r.content.len() > targets.len()) {
            return Err(PlanError::Syntax(
                "INSERT has more expressions than target columns".into(),
            ));
        }
        for row in &mut values.rows {
            for (pos, e) in row.content.iter_mut().enumerate() {
                if let Expr::Identifier(ident) = e
                    && ident.quote_style.is_none()
                    && ident.value.eq_ignore_ascii_case("default")
                {
                    let col = targets.get(pos).copied();
                    *e = match col.and_then(|c| defaults.get(c).cloned().flatten()) {
                        Some(sql) => parse_expr(&sql)?,
                        None => Expr::value(ast::Value::Null),
                    };
                }
            }
        }
    }
    let refs = cx.resolver().rewrite(&mut source)?;
    let pc = cx.planning();
    let rows = if matches!(source.body.as_ref(), SetExpr::Values(_)) {
        ins.source = Some(Box::new(source));
        ins.table = TableObject::TableName(id_name(item.id));
        ins.returning = None;
        let plan = pc.plan_sql_statement(ast::Statement::Insert(ins.clone()))?;
        let LogicalPlan::Dml(dml) = plan else {
            return Err(PlanError::Internal("INSERT did not plan to DML".into()));
        };
        std::sync::Arc::unwrap_or_clone(dml.input)
    } else {
        // DataFusion's INSERT types every VALUES inside its source by the
        // target columns (`INSERT ... SELECT p0 FROM (VALUES (..., 0)) AS
        // s(p0, n)`, as SQLAlchemy writes batches, fails), so a query
        // source is planned as a query and fitted to the table here.
        let query = pc.plan_sql_statement(ast::Statement::Query(Box::new(source)))?;
        // Without a column list the query fills the first columns.
        let width = query.schema().fields().len();
        let targets = if ins.columns.is_empty() && width < targets.len() {
            &targets[..width]
        } else {
            &targets[..]
        };
        fit_to_table(&pc, query, &desc, targets, &defaults)?
    };
    let source = finish_query(cx, &pc, rows, None, &refs)?;
    let read_then_write = !source.inputs.is_empty();
    Ok(Plan::Write(Box::new(WritePlan {
        table: item.id,
        table_desc: desc,
        kind: WriteKind::Insert,
        source: std::sync::Arc::new(source),
        read_then_write,
        returning: returning(cx, item, None, returning_list.as_ref())?,
        keyed: None,
    })))
}

/// `query`'s columns as the table's row: each target column cast to its
/// type, the others their default (or NULL), as DataFusion's INSERT does.
fn fit_to_table(
    pc: &crate::query::provider::PlanningContext,
    query: LogicalPlan,
    desc: &freshet_repr::RelationDesc,
    targets: &[usize],
    defaults: &[Option<String>],
) -> Result<LogicalPlan> {
    use datafusion::logical_expr::{Expr as DfExpr, lit};
    let width = query.schema().fields().len();
    if width != targets.len() {
        return Err(PlanError::Syntax(format!(
            "INSERT has {} expressions than target columns",
            if width > targets.len() {
                "more"
            } else {
                "fewer"
            }
        )));
    }
    let schema = std::sync::Arc::clone(query.schema());
    let mut exprs = Vec::with_capacity(desc.arity());
    for (i, column) in desc.columns.iter().enumerate() {
        let ty = column.ty.arrow_type();
        let value = match targets.iter().position(|t| *t == i) {
            Some(v) => DfExpr::Column(datafusion::common::Column::from(schema.qualified_field(v))),
            None => match defaults.get(i).cloned().flatten() {
                Some(sql) => pc.plan_scalar_sql(&sql)?,
                None => lit(datafusion::common::ScalarValue::Null),
            },
        };
        exprs.push(value.cast_to(&ty, &schema)?.alias(&column.name));
    }
    Ok(LogicalPlanBuilder::from(query).project(exprs)?.build()?)
}

/// Plan `RETURNING items` over the rows a write produces, visible under the
/// table's name (or alias).
fn returning(
    cx: &StatementContext,
    item: &Item,
    alias: Option<&str>,
    items: Option<&Vec<SelectItem>>,
) -> Result<Option<QueryPlan>> {
    let Some(items) = items else { return Ok(None) };
    let alias = quote_if_needed(alias.unwrap_or(&item.name));
    let list = items
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let query = parse_query(&format!(
        "SELECT {list} FROM \"{ROWS_SCHEMA}\".\"rows\" AS {alias}"
    ))?;
    let mut rewritten = query.clone();
    let refs = cx.resolver().rewrite(&mut rewritten)?;
    let mut pc = cx.planning();
    pc.returning_rows = Some(item.desc.clone().unwrap_or_default().arrow_schema());
    let plan = pc.plan_sql_statement(ast::Statement::Query(Box::new(rewritten)))?;
    Ok(Some(finish_query(cx, &pc, plan, Some(&query), &refs)?))
}

/// The single plain table a DELETE or UPDATE names, with its alias.
fn single_table<'a>(
    cx: &StatementContext<'a>,
    twj: &TableWithJoins,
    verb: &str,
) -> Result<(&'a Item, String)> {
    if !twj.joins.is_empty() {
        return Err(PlanError::unsupported(format!("{verb} with joins")));
    }
    let TableFactor::Table { name, alias, .. } = &twj.relation else {
        return Err(PlanError::unsupported(format!("{verb} of this relation")));
    };
    let item = target_table(cx, name, verb)?;
    let alias = match alias {
        Some(a) => normalize_ident(&a.name),
        None => item.name.clone(),
    };
    Ok((item, alias))
}

/// `DELETE FROM t [WHERE ...] [RETURNING ...]`.
pub fn delete(cx: &StatementContext, del: &ast::Delete) -> Result<Plan> {
    if del.using.is_some() {
        return Err(PlanError::unsupported("DELETE ... USING"));
    }
    if del.limit.is_some() || !del.order_by.is_empty() {
        return Err(PlanError::unsupported("DELETE ... ORDER BY / LIMIT"));
    }
    let tables = match &del.from {
        FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
    };
    let [twj] = tables.as_slice() else {
        return Err(PlanError::unsupported("DELETE from several tables"));
    };
    let (item, alias) = single_table(cx, twj, "delete from")?;
    let a = quote_if_needed(&alias);
    let mut sql = format!("SELECT {a}.* FROM {} AS {a}", id_name(item.id));
    if let Some(sel) = &del.selection {
        sql.push_str(&format!(" WHERE {sel}"));
    }
    let source = plan_query(cx, &parse_query(&sql)?)?;
    let keyed = super::keyed_write::plan(cx, item, &source)?;
    Ok(Plan::Write(Box::new(WritePlan {
        table: item.id,
        table_desc: item.desc.clone().unwrap_or_default(),
        kind: WriteKind::Delete,
        source: std::sync::Arc::new(source),
        read_then_write: true,
        returning: returning(cx, item, Some(&alias), del.returning.as_ref())?,
        keyed,
    })))
}

/// `TRUNCATE [TABLE] t1, t2, ...`: each table's every row retracted.
/// `RESTART IDENTITY` has nothing to restart (no sequences yet) and
/// `CASCADE` nothing to cascade to (no foreign keys).
pub fn truncate(cx: &StatementContext, t: &ast::Truncate) -> Result<Plan> {
    if t.partitions.is_some() || t.on_cluster.is_some() {
        return Err(PlanError::unsupported(
            "TRUNCATE ... PARTITION / ON CLUSTER",
        ));
    }
    let mut writes = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for target in &t.table_names {
        let item = target_table(cx, &target.name, "truncate")?;
        if !seen.insert(item.id) {
            continue;
        }
        let source = plan_query(
            cx,
            &parse_query(&format!("SELECT * FROM {}", id_name(item.id)))?,
        )?;
        writes.push(WritePlan {
            table: item.id,
            table_desc: item.desc.clone().unwrap_or_default(),
            kind: WriteKind::Delete,
            source: std::sync::Arc::new(source),
            read_then_write: true,
            returning: None,
            keyed: None,
        });
    }
    Ok(Plan::Truncate(writes))
}

/// `UPDATE t SET col = expr, ... [WHERE ...] [RETURNING ...]`.
pub fn update(cx: &StatementContext, upd: &ast::Update) -> Result<Plan> {
    if upd.from.is_some() {
        return Err(PlanError::unsupported("UPDATE ... FROM"));
    }
    if upd.limit.is_some() || !upd.order_by.is_empty() || upd.or.is_some() {
        return Err(PlanError::unsupported("this form of UPDATE"));
    }
    let (item, alias) = single_table(cx, &upd.table, "update")?;
    let desc = item.desc.clone().unwrap_or_default();
    let mut new_values: Vec<Option<String>> = vec![None; desc.arity()];
    for assignment in &upd.assignments {
        let AssignmentTarget::ColumnName(target) = &assignment.target else {
            return Err(PlanError::unsupported("UPDATE with a column tuple"));
        };
        let parts = normalize_name(target)?;
        let column = parts.last().cloned().unwrap_or_default();
        let idx = desc.column_index(&column).ok_or_else(|| {
            PlanError::UnknownColumn(format!("{column}\" of relation \"{}", item.name))
        })?;
        if new_values[idx].is_some() {
            return Err(PlanError::Syntax(format!(
                "multiple assignments to same column \"{column}\""
            )));
        }
        let is_default = matches!(&assignment.value, Expr::Identifier(i)
            if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"));
        new_values[idx] = Some(if is_default {
            match &item.details {
                ItemDetails::Table { defaults, .. } => defaults.get(idx).cloned().flatten(),
                _ => None,
            }
            .unwrap_or_else(|| "NULL".into())
        } else {
            assignment.value.to_string()
        });
    }
    let a = quote_if_needed(&alias);
    let new_list: Vec<String> = new_values
        .iter()
        .zip(&desc.columns)
        .enumerate()
        .map(|(i, (v, c))| match v {
            Some(expr) => format!("({expr}) AS \"__new_{i}\""),
            None => format!("{a}.{} AS \"__new_{i}\"", quote_if_needed(&c.name)),
        })
        .collect();
    let mut sql = format!(
        "SELECT {a}.*, {} FROM {} AS {a}",
        new_list.join(", "),
        id_name(item.id)
    );
    if let Some(sel) = &upd.selection {
        sql.push_str(&format!(" WHERE {sel}"));
    }
    let mut query = parse_query(&sql)?;
    let refs = cx.resolver().rewrite(&mut query)?;
    let pc = cx.planning();
    let plan = pc.plan_sql_statement(ast::Statement::Query(Box::new(query)))?;
    // New values take the column types (an assignment cast).
    let n = desc.arity();
    let schema = plan.schema().clone();
    let columns = schema.columns();
    let mut exprs = Vec::with_capacity(2 * n);
    for (i, c) in columns.iter().enumerate() {
        if i < n {
            exprs.push(col(c.clone()));
        } else {
            let target = &desc.columns[i - n];
            let e = col(c.clone())
                .cast_to(&target.ty.arrow_type(), &schema)
                .map_err(|_| {
                    PlanError::DatatypeMismatch(format!(
                        "column \"{}\" is of type {} but expression cannot be cast to it",
                        target.name,
                        target.ty.sql_name()
                    ))
                })?;
            exprs.push(e.alias(format!("__new_{}", i - n)));
        }
    }
    let plan = LogicalPlanBuilder::from(plan).project(exprs)?.build()?;
    let source = finish_query(cx, &pc, plan, None, &refs)?;
    let keyed = super::keyed_write::plan(cx, item, &source)?;
    Ok(Plan::Write(Box::new(WritePlan {
        table: item.id,
        table_desc: desc,
        kind: WriteKind::Update,
        source: std::sync::Arc::new(source),
        read_then_write: true,
        returning: returning(cx, item, Some(&alias), upd.returning.as_ref())?,
        keyed,
    })))
}

//! Indexes: `CREATE [DEFAULT] INDEX`, the dataflow that maintains one, and
//! the reads an index answers without a DataFusion plan (peeks).
//!
//! An index arranges a relation (a table, source, materialized view, or a
//! plain view, which the index makes maintained) in memory by its keys
//! (columns or expressions over them). `SELECT * FROM obj` and `SELECT *
//! FROM obj WHERE <key column> = <constant> ...` on an indexed object are
//! answered straight from the arrangement.

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::common::{DFSchema, ParamValues, ScalarValue};
use datafusion::execution::SessionState;
use datafusion::logical_expr::Expr;
use datafusion::sql::sqlparser::ast::{self, ObjectName};
use freshet_catalog::{CatalogState, Item, ItemDef, ItemDetails, ItemKind};
use freshet_compute_types::{Export, RelPlan};
use freshet_repr::{GlobalId, RelationDesc};

use crate::error::{PlanError, Result};
use crate::parser::quote_if_needed;
pub use crate::plan::PeekPlan;
use crate::plan::{CreateIndexPlan, ItemDataflow, Plan};
use crate::statements::context::StatementContext;

/// `CREATE INDEX [name] ON obj (expr, ...)`, or, with `keys` `None`,
/// `CREATE DEFAULT INDEX ON obj` (keyed by every column).
pub fn create_index(
    cx: &StatementContext,
    name: Option<&ObjectName>,
    on: &ObjectName,
    keys: Option<&[ast::IndexColumn]>,
    if_not_exists: bool,
) -> Result<Plan> {
    let item = cx.resolver().resolve_readable_item(on)?;
    let desc = item
        .desc
        .as_ref()
        .ok_or_else(|| PlanError::Internal(format!("{} has no columns", item.name)))?;
    // Keys are stored as SQL over the object's columns: a column's quoted
    // name, or an expression's text.
    let columns: Vec<String> = match keys {
        None => desc
            .columns
            .iter()
            .map(|c| quote_if_needed(&c.name).to_string())
            .collect(),
        Some(keys) => keys
            .iter()
            .map(|k| key_sql(k, desc))
            .collect::<Result<_>>()?,
    };
    let default_name = match keys {
        None => format!("{}_primary_idx", item.name),
        Some(_) => format!("{}_{}_idx", item.name, name_part(&columns)),
    };
    let name = match name {
        Some(n) => crate::parser::normalize_name(n)?
            .pop()
            .ok_or_else(|| PlanError::Syntax("empty index name".into()))?,
        None => default_name,
    };
    let create_sql = format!(
        "CREATE INDEX {} ON {} ({})",
        quote_if_needed(&name),
        crate::query::resolve::id_name(item.id),
        columns.join(", ")
    );
    // The rows the index holds (a view's at the numeric scales its query
    // computes; planning it also checks that it can be maintained), and
    // the keys over them, which must plan and be deterministic. Whether
    // they render is checked where the plan is committed.
    let plan_for = |reuse: bool| index_dataflow(cx.state, cx.catalog, item, &columns, None, reuse);
    let (plan, keys_exprs, schema, rows_desc) = plan_for(true)?;
    let from_storage = if plan.imported_indexes().is_empty() {
        None
    } else {
        Some(plan_for(false)?.0)
    };
    let dataflow = ItemDataflow {
        plan,
        export: Export::Index {
            keys: keys_exprs,
            schema,
        },
        from_storage,
        notices: Vec::new(),
    };
    Ok(Plan::CreateIndex(Box::new(CreateIndexPlan {
        def: ItemDef {
            schema_id: item.schema_id,
            name,
            kind: ItemKind::Index,
            create_sql,
            desc: Some(rows_desc),
            references: vec![item.id],
            details: ItemDetails::Index {
                on: item.id,
                keys: columns,
                plan: None,
            },
            options: Default::default(),
        },
        if_not_exists,
        dataflow,
    })))
}

/// A key as stored: a column's quoted name, or the expression's text.
/// `ASC`/`DESC`/`NULLS FIRST|LAST` are accepted and dropped: an index is an
/// arrangement by key for lookups and joins, not an ordered scan, so the
/// order cannot change what any query returns.
fn key_sql(key: &ast::IndexColumn, desc: &RelationDesc) -> Result<String> {
    match &key.column.expr {
        ast::Expr::Identifier(ident) => {
            let name = crate::parser::normalize_ident(ident);
            if !desc.columns.iter().any(|c| c.name == name) {
                return Err(PlanError::UnknownColumn(name));
            }
            Ok(quote_if_needed(&name).to_string())
        }
        other => Ok(format!("({other})")),
    }
}

/// A name fragment for a default index name from its keys.
fn name_part(keys: &[String]) -> String {
    let words: Vec<String> = keys
        .iter()
        .map(|k| {
            k.chars()
                .map(|c| {
                    if c.is_alphanumeric() {
                        c.to_ascii_lowercase()
                    } else {
                        '_'
                    }
                })
                .collect::<String>()
                .split('_')
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join("_")
        })
        .collect();
    words.join("_")
}

/// The column a stored key names (its unquoted name; an expression key
/// names no column).
pub(crate) fn key_column_name(key: &str) -> String {
    match key.strip_prefix('"').and_then(|k| k.strip_suffix('"')) {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => key.to_string(),
    }
}

/// The keys (stored SQL over `on`'s columns) as expressions over the rows
/// of `rows` (`on`'s rows as the index's dataflow produces them), planned
/// as any query's expressions are (PostgreSQL casts, checked arithmetic),
/// and the schema they name.
fn key_exprs(
    cx: &StatementContext,
    on: GlobalId,
    keys: &[String],
    rows: &RelPlan,
) -> Result<(Vec<Expr>, Arc<DFSchema>)> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    use datafusion::logical_expr::LogicalPlan;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    let sql = format!(
        "SELECT {} FROM {}",
        keys.join(", "),
        crate::query::resolve::id_name(on)
    );
    let query = match Parser::parse_sql(&PostgreSqlDialect {}, &sql)
        .map_err(|e| PlanError::Syntax(format!("index key: {e}")))?
        .pop()
    {
        Some(ast::Statement::Query(q)) => q,
        _ => return Err(PlanError::Syntax(format!("index keys: {sql}"))),
    };
    let plan = crate::statements::context::plan_query(cx, &query)?;
    crate::lower::check_deterministic(&plan.logical)?;
    let LogicalPlan::Projection(projection) = &plan.logical else {
        return Err(PlanError::unsupported("this index key"));
    };
    let schema = Arc::new(DFSchema::try_from(rows.schema().as_ref().clone())?);
    let exprs = projection
        .expr
        .iter()
        .map(|e| {
            if e.exists(|n| {
                Ok(matches!(
                    n,
                    Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_)
                ))
            })? {
                return Err(PlanError::unsupported("a subquery in an index key"));
            }
            // Name the object's columns as the dataflow's rows do.
            let unqualified = e.clone().unalias().transform(|n| {
                Ok(match n {
                    Expr::Column(c) => Transformed::yes(Expr::Column(
                        datafusion::common::Column::new_unqualified(c.name),
                    )),
                    other => Transformed::no(other),
                })
            })?;
            Ok(unqualified.data)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((exprs, schema))
}

/// The indexed object and key columns of index `id`.
pub(crate) fn index_parts(catalog: &CatalogState, id: GlobalId) -> Result<(&Item, &[String])> {
    let item = catalog.get_item(id)?;
    let ItemDetails::Index { on, keys, .. } = &item.details else {
        return Err(PlanError::Internal(format!("{id} is not an index")));
    };
    Ok((catalog.get_item(*on)?, keys))
}

/// What maintains index `id`: the plan of its object's rows (a view's
/// query, or its collection), and the key expressions over them.
pub fn dataflow_plan(
    state: &SessionState,
    catalog: &CatalogState,
    id: GlobalId,
    reuse: bool,
) -> Result<(RelPlan, Vec<Expr>, Arc<DFSchema>)> {
    let (on, keys) = index_parts(catalog, id)?;
    let (plan, keys, schema, _) = index_dataflow(state, catalog, on, keys, Some(id), reuse)?;
    Ok((plan, keys, schema))
}

/// The dataflow of an index on `on` keyed by `keys` (stored SQL): its
/// rows' plan, the key expressions and the schema they name, and the rows'
/// columns. `id` is the index's own id once it has one: only an older
/// index on the same view can lend it its rows (a new index is younger
/// than every existing one).
fn index_dataflow(
    state: &SessionState,
    catalog: &CatalogState,
    on: &Item,
    keys: &[String],
    id: Option<GlobalId>,
    reuse: bool,
) -> Result<(RelPlan, Vec<Expr>, Arc<DFSchema>, RelationDesc)> {
    let desc = on
        .desc
        .clone()
        .ok_or_else(|| PlanError::Internal(format!("{} has no columns", on.name)))?;
    // Another index on the same view already holds its rows.
    let sibling = catalog
        .indexes_on(on.id)
        .find(|i| id.is_none_or(|id| i.id < id))
        .and_then(|i| Some((i.id, i.desc.clone()?)));
    let (plan, rows_desc) = match (on.kind, sibling) {
        (ItemKind::View, Some((index, rows))) if reuse => (
            RelPlan::ArrangedGet {
                index,
                inputs: catalog.collections_behind(on.id),
                schema: freshet_repr::nullable_schema(&rows.arrow_schema()),
            },
            rows,
        ),
        (ItemKind::View, _) => {
            crate::statements::materialized::view_dataflow(state, catalog, on.id, reuse)?
        }
        _ => (
            RelPlan::Get {
                id: on.id,
                schema: desc.arrow_schema(),
            },
            desc,
        ),
    };
    // Stored keys are planned where the index lives: `on`'s database.
    let (keys, schema) =
        crate::statements::materialized::with_stored_context(state, catalog, on.id, |cx| {
            key_exprs(cx, on.id, keys, &plan)
        })?;
    Ok((plan, keys, schema, rows_desc))
}

/// `SELECT * | col [AS name], ... FROM obj [WHERE key = constant AND ...]`
/// on an indexed object, as a peek decided on the SQL text (no planning at
/// all); `None` if the query has any other shape (then
/// [`crate::statements::peek`] looks at its plan).
pub fn fast_path(cx: &StatementContext, query: &ast::Query) -> Result<Option<PeekPlan>> {
    let ast::SetExpr::Select(select) = query.body.as_ref() else {
        return Ok(None);
    };
    let plain = query.with.is_none()
        && query.order_by.is_none()
        && query.limit_clause.is_none()
        && query.fetch.is_none()
        && select.distinct.is_none()
        && select.top.is_none()
        && select.into.is_none()
        && select.lateral_views.is_empty()
        && matches!(&select.group_by, ast::GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty())
        && select.having.is_none()
        && select.qualify.is_none()
        && select.named_window.is_empty()
        && select.from.len() == 1
        && select.from[0].joins.is_empty();
    if !plain {
        return Ok(None);
    }
    let ast::TableFactor::Table {
        name,
        alias: None,
        args: None,
        ..
    } = &select.from[0].relation
    else {
        return Ok(None);
    };
    let Ok(item) = cx.resolver().resolve_item(name) else {
        return Ok(None);
    };
    let Some(desc) = item.desc.clone() else {
        return Ok(None);
    };
    // `*`, or plain column names (perhaps renamed).
    let columns = match select.projection.as_slice() {
        [ast::SelectItem::Wildcard(_)] => None,
        items => {
            let mut columns = Vec::with_capacity(items.len());
            for item in items {
                let (ident, alias) = match item {
                    ast::SelectItem::UnnamedExpr(ast::Expr::Identifier(c)) => (c, None),
                    ast::SelectItem::ExprWithAlias {
                        expr: ast::Expr::Identifier(c),
                        alias,
                    } => (c, Some(alias)),
                    _ => return Ok(None),
                };
                // Unquoted, these name functions, not columns.
                const SQL_VALUE_FUNCTIONS: &[&str] = &[
                    "user",
                    "current_user",
                    "session_user",
                    "current_role",
                    "current_catalog",
                    "current_schema",
                    "current_date",
                    "current_time",
                    "current_timestamp",
                    "localtime",
                    "localtimestamp",
                ];
                let name = crate::parser::normalize_ident(ident);
                if ident.quote_style.is_none() && SQL_VALUE_FUNCTIONS.contains(&name.as_str()) {
                    return Ok(None);
                }
                let Some(i) = desc.columns.iter().position(|c| c.name == name) else {
                    return Ok(None);
                };
                columns.push((i, alias.map(crate::parser::normalize_ident)));
            }
            Some(columns)
        }
    };
    // `col = constant` conjuncts, by column.
    let mut equalities = Vec::new();
    if let Some(selection) = &select.selection
        && !conjuncts_of_equalities(selection, &mut equalities)
    {
        return Ok(None);
    }
    let indexes = cx.catalog.indexes_on(item.id);
    for index in indexes {
        let ItemDetails::Index { keys, .. } = &index.details else {
            continue;
        };
        let key = if equalities.is_empty() {
            None
        } else {
            // Every equality must be on a key column, and every key column
            // constrained exactly once.
            let mut values = Vec::with_capacity(keys.len());
            let keys: Vec<String> = keys.iter().map(|k| key_column_name(k)).collect();
            for k in &keys {
                let mut matching = equalities.iter().filter(|(c, _)| c == k);
                match (matching.next(), matching.next()) {
                    (Some((_, v)), None) => values.push(v.clone()),
                    _ => break,
                }
            }
            if values.len() != keys.len() || equalities.len() != keys.len() {
                continue;
            }
            let typed = values
                .iter()
                .zip(&keys)
                .map(|(v, k)| constant(v, &desc, k, cx.params))
                .collect::<Option<Vec<_>>>();
            match typed {
                Some(values) => Some(values),
                None => continue,
            }
        };
        let explain = match &key {
            None => format!("Peek index {} (all rows)", index.name),
            Some(values) => format!(
                "Peek index {} on ({}) = ({})",
                index.name,
                keys.join(", "),
                values
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        return Ok(Some(PeekPlan {
            index: index.id,
            key,
            range: None,
            inputs: crate::statements::context::inputs_of(cx, &BTreeSet::from([item.id])),
            // The index's rows carry the types it was created with.
            desc: match &columns {
                None => index.desc.clone().unwrap_or_else(|| desc.clone()),
                Some(columns) => {
                    let rows = index.desc.as_ref().unwrap_or(&desc);
                    RelationDesc::new(
                        columns
                            .iter()
                            .map(|(i, alias)| {
                                let mut column = rows.columns[*i].clone();
                                if let Some(alias) = alias {
                                    column.name = alias.clone();
                                }
                                column
                            })
                            .collect(),
                    )
                }
            },
            columns: columns
                .as_ref()
                .map(|c| c.iter().map(|(i, _)| *i).collect()),
            explain,
            finish: None,
        }));
    }
    Ok(None)
}

/// Collect `column = literal` conjuncts; false if `expr` is anything else.
fn conjuncts_of_equalities(expr: &ast::Expr, out: &mut Vec<(String, ast::Value)>) -> bool {
    match expr {
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::And,
            right,
        } => conjuncts_of_equalities(left, out) && conjuncts_of_equalities(right, out),
        ast::Expr::Nested(inner) => conjuncts_of_equalities(inner, out),
        ast::Expr::BinaryOp {
            left,
            op: ast::BinaryOperator::Eq,
            right,
        } => match (left.as_ref(), right.as_ref()) {
            (ast::Expr::Identifier(c), ast::Expr::Value(v))
            | (ast::Expr::Value(v), ast::Expr::Identifier(c)) => {
                out.push((crate::parser::normalize_ident(c), v.value.clone()));
                true
            }
            _ => false,
        },
        _ => false,
    }
}

/// A literal (or bound `$n` parameter) as a value of column `name`'s type;
/// `None` when it is not a plain number, string or parameter of a
/// comparable type, or a parameter not yet bound (the general path then
/// decides).
fn constant(
    value: &ast::Value,
    desc: &RelationDesc,
    name: &str,
    params: Option<&ParamValues>,
) -> Option<ScalarValue> {
    let column = desc.columns.iter().find(|c| c.name == name)?;
    let target = column.ty.arrow_type();
    let literal = match value {
        ast::Value::Placeholder(p) => {
            let ParamValues::List(values) = params? else {
                return None;
            };
            let n: usize = p.strip_prefix('$')?.parse().ok()?;
            let value = values.get(n.checked_sub(1)?)?.value.clone();
            // NULL never equals a key: let the general path say so.
            if value.is_null() {
                return None;
            }
            value
        }
        ast::Value::Number(n, _) if target.is_integer() => {
            ScalarValue::Int64(Some(n.parse().ok()?))
        }
        ast::Value::SingleQuotedString(s) if target == arrow::datatypes::DataType::Utf8 => {
            ScalarValue::Utf8(Some(s.clone()))
        }
        _ => return None,
    };
    literal.cast_to(&target).ok()
}

/// `SHOW INDEXES [ON obj]`: name, indexed object and key of each index.
pub fn show_indexes(cx: &StatementContext, on: Option<&ObjectName>) -> Result<Plan> {
    let on = on
        .map(|n| cx.resolver().resolve_item(n).map(|i| i.id))
        .transpose()?;
    let mut rows: Vec<Vec<Option<String>>> = cx
        .catalog
        .items()
        .filter_map(|i| match &i.details {
            ItemDetails::Index {
                on: indexed, keys, ..
            } if on.is_none_or(|o| o == *indexed) => {
                let indexed_name = cx.catalog.get_item(*indexed).ok()?.name.clone();
                Some(vec![
                    Some(i.name.clone()),
                    Some(indexed_name),
                    Some(keys.join(", ")),
                ])
            }
            _ => None,
        })
        .collect();
    rows.sort();
    crate::statements::misc::text_rows(
        &[
            ("name", freshet_repr::PgType::Text),
            ("on", freshet_repr::PgType::Text),
            ("key", freshet_repr::PgType::Text),
        ],
        rows,
    )
}

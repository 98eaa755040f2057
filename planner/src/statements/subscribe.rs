//! Planning `SUBSCRIBE`, and the cursor statements that read it.
//!
//! A subscribe's relation is planned exactly as a materialized view's
//! query (views inlined, every construct checked to be maintainable), and
//! runs as a transient dataflow owned by the session. Its output columns
//! follow Materialize: `mz_timestamp`, `mz_progressed` (with `PROGRESS`),
//! then `mz_diff` and the relation's columns, or for an envelope
//! `mz_state`, the key columns, and the value columns (`before_`/`after_`
//! for `DEBEZIUM`).

use std::collections::BTreeSet;
use std::time::Duration;

use datafusion::sql::sqlparser::ast;
use freshet_repr::{ColumnDesc, PgType, RelationDesc};

use crate::error::{PlanError, Result};
use crate::parser::{EnvelopeKind, SubscribeRelation, SubscribeStatement, normalize_ident};
pub use crate::plan::{SubscribeAsOf, SubscribeEnvelope, SubscribePlan};
use crate::statements::context::StatementContext;
use crate::statements::options::plan_time;

/// Plan `SUBSCRIBE ...`.
pub fn plan_subscribe(cx: &StatementContext, stmt: &SubscribeStatement) -> Result<SubscribePlan> {
    let query: Box<ast::Query> = match &stmt.relation {
        SubscribeRelation::Query(q) => q.clone(),
        SubscribeRelation::Name(name) => {
            cx.resolver().resolve_readable_item(name)?;
            let sql = format!("SELECT * FROM {name}");
            match datafusion::sql::sqlparser::parser::Parser::parse_sql(
                &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
                &sql,
            )
            .map_err(|e| PlanError::Internal(format!("{sql}: {e}")))?
            .pop()
            {
                Some(ast::Statement::Query(q)) => q,
                _ => return Err(PlanError::Internal(format!("{sql} is not a query"))),
            }
        }
    };
    let (plan, relation, planned) =
        crate::statements::materialized::query_dataflow(cx, &query, true)?;
    let from_storage = if plan.imported_indexes().is_empty() {
        None
    } else {
        Some(crate::statements::materialized::query_dataflow(cx, &query, false)?.0)
    };
    let mut depends_on = BTreeSet::new();
    for id in &planned.references {
        depends_on.insert(*id);
        depends_on.extend(cx.catalog.transitive_references(*id));
    }
    let mut snapshot = true;
    let mut progress = false;
    for (name, value) in &stmt.options {
        let flag = match value {
            None => true,
            Some(v) => bool_option("SUBSCRIBE", name, v)?,
        };
        match name.as_str() {
            "snapshot" => snapshot = flag,
            "progress" => progress = flag,
            other => {
                return Err(PlanError::InvalidParameter(format!(
                    "unrecognized SUBSCRIBE option \"{}\"",
                    other.to_uppercase()
                )));
            }
        }
    }
    let as_of = stmt
        .as_of
        .as_ref()
        .map(|(at_least, t)| {
            Ok::<_, PlanError>(SubscribeAsOf {
                at_least: *at_least,
                time: plan_time(cx, t)?,
            })
        })
        .transpose()?;
    let up_to = stmt.up_to.as_ref().map(|t| plan_time(cx, t)).transpose()?;
    let envelope = match &stmt.envelope {
        None => SubscribeEnvelope::Diffs,
        Some((kind, key)) => {
            let key = crate::query::resolve::key_positions(
                &relation.columns,
                key.iter().map(normalize_ident),
            )?;
            match kind {
                EnvelopeKind::Upsert => SubscribeEnvelope::Upsert { key },
                EnvelopeKind::Debezium => SubscribeEnvelope::Debezium { key },
            }
        }
    };
    let output = output_desc(&relation, &envelope, progress);
    Ok(SubscribePlan {
        plan,
        from_storage,
        relation,
        output,
        inputs: planned.inputs,
        depends_on,
        snapshot,
        progress,
        as_of,
        up_to,
        envelope,
    })
}

/// The Boolean value of option `name` of `statement` (`true`, `on`,
/// `'yes'`, `1`, ...).
pub(crate) fn bool_option(statement: &str, name: &str, value: &ast::Expr) -> Result<bool> {
    let text = match value {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Boolean(b) => return Ok(*b),
            ast::Value::SingleQuotedString(s) => s.to_lowercase(),
            ast::Value::Number(n, _) => n.clone(),
            other => other.to_string(),
        },
        ast::Expr::Identifier(i) => i.value.to_lowercase(),
        other => other.to_string(),
    };
    match text.as_str() {
        "true" | "on" | "t" | "yes" | "1" => Ok(true),
        "false" | "off" | "f" | "no" | "0" => Ok(false),
        _ => Err(PlanError::InvalidParameter(format!(
            "{statement} option {} requires a Boolean value",
            name.to_uppercase()
        ))),
    }
}

/// The type of `mz_timestamp`.
pub fn timestamp_type() -> PgType {
    PgType::Numeric {
        typmod: Some((20, 0)),
    }
}

/// The columns a subscribe of `relation` sends.
pub fn output_desc(
    relation: &RelationDesc,
    envelope: &SubscribeEnvelope,
    progress: bool,
) -> RelationDesc {
    let column = |name: &str, ty: PgType, nullable: bool| ColumnDesc {
        name: name.into(),
        ty,
        nullable,
    };
    let mut columns = vec![column("mz_timestamp", timestamp_type(), false)];
    if progress {
        columns.push(column("mz_progressed", PgType::Bool, false));
    }
    let nullable = |c: &ColumnDesc| ColumnDesc {
        nullable: true,
        ..c.clone()
    };
    match envelope {
        SubscribeEnvelope::Diffs => {
            columns.push(column("mz_diff", PgType::Int8, progress));
            columns.extend(relation.columns.iter().map(nullable));
        }
        SubscribeEnvelope::Upsert { key } | SubscribeEnvelope::Debezium { key } => {
            columns.push(column("mz_state", PgType::Text, true));
            columns.extend(key.iter().map(|&i| nullable(&relation.columns[i])));
            let values: Vec<&ColumnDesc> = (0..relation.columns.len())
                .filter(|i| !key.contains(i))
                .map(|i| &relation.columns[i])
                .collect();
            if matches!(envelope, SubscribeEnvelope::Debezium { .. }) {
                for prefix in ["before_", "after_"] {
                    columns.extend(values.iter().map(|c| ColumnDesc {
                        name: format!("{prefix}{}", c.name),
                        ..nullable(c)
                    }));
                }
            } else {
                columns.extend(values.iter().map(|c| nullable(c)));
            }
        }
    }
    RelationDesc::new(columns)
}

/// `FETCH`'s `timeout` option: an interval such as `'1s'`, `'250ms'`,
/// `'0'` (a bare number is seconds, as in an interval literal).
pub fn fetch_timeout(text: &str) -> Result<Duration> {
    let text = text.trim().to_lowercase();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().map_err(|_| bad_timeout(&text))?;
    let scale = match unit.trim() {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "ms" | "msec" | "millisecond" | "milliseconds" => 0.001,
        "us" | "microsecond" | "microseconds" => 0.000_001,
        "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hour" | "hours" => 3600.0,
        _ => return Err(bad_timeout(&text)),
    };
    let seconds = value * scale;
    if !seconds.is_finite() || !(0.0..=86_400.0 * 365.0).contains(&seconds) {
        return Err(bad_timeout(&text));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn bad_timeout(text: &str) -> PlanError {
    PlanError::InvalidParameter(format!(
        "invalid FETCH timeout \"{text}\": expected an interval such as '1s' or '500ms'"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_timeouts_parse_like_intervals() {
        assert_eq!(fetch_timeout("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(fetch_timeout("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(fetch_timeout("2").unwrap(), Duration::from_secs(2));
        assert_eq!(fetch_timeout("0").unwrap(), Duration::ZERO);
        assert!(fetch_timeout("soon").is_err());
        assert!(fetch_timeout("-1s").is_err());
    }

    #[test]
    fn envelope_columns_follow_materialize() {
        let relation = RelationDesc::new(vec![
            ColumnDesc {
                name: "k".into(),
                ty: PgType::Int4,
                nullable: false,
            },
            ColumnDesc {
                name: "v".into(),
                ty: PgType::Text,
                nullable: true,
            },
        ]);
        let names =
            |d: RelationDesc| -> Vec<String> { d.columns.into_iter().map(|c| c.name).collect() };
        assert_eq!(
            names(output_desc(&relation, &SubscribeEnvelope::Diffs, true)),
            ["mz_timestamp", "mz_progressed", "mz_diff", "k", "v"]
        );
        assert_eq!(
            names(output_desc(
                &relation,
                &SubscribeEnvelope::Upsert { key: vec![0] },
                false
            )),
            ["mz_timestamp", "mz_state", "k", "v"]
        );
        assert_eq!(
            names(output_desc(
                &relation,
                &SubscribeEnvelope::Debezium { key: vec![0] },
                false
            )),
            ["mz_timestamp", "mz_state", "k", "before_v", "after_v"]
        );
    }
}

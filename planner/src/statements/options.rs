//! Planning item options (`RETAIN HISTORY`, `REFRESH`) and the time
//! expressions of `AS OF` and `REFRESH AT`.
//!
//! Time expressions are planned as one-row queries (`SELECT <expr>`) whose
//! `mz_now()` is bound when the sequencer evaluates them: at the chosen
//! creation time for `REFRESH AT`, at the current read time for `AS OF`.

use datafusion::sql::sqlparser::ast;
use freshet_catalog::{ItemKind, ItemOptions};
use freshet_repr::{RefreshSchedule, Timestamp};

use crate::error::{PlanError, Result};
use crate::parser::item_options::{ItemOption, RefreshOption};
use crate::parser::{ObjectKind, Statement};
use crate::plan::Plan;
pub use crate::plan::{RefreshPlan, TimeExpr};
use crate::statements::context::{StatementContext, plan_query};

/// Plan `expr` as a time.
pub fn plan_time(cx: &StatementContext, expr: &ast::Expr) -> Result<TimeExpr> {
    let sql = format!("SELECT {expr}");
    let mut stmts = datafusion::sql::sqlparser::parser::Parser::parse_sql(
        &datafusion::sql::sqlparser::dialect::PostgreSqlDialect {},
        &sql,
    )
    .map_err(|e| PlanError::Syntax(e.to_string()))?;
    let Some(ast::Statement::Query(q)) = stmts.pop() else {
        return Err(PlanError::Internal(format!("{sql} is not a query")));
    };
    let query = plan_query(cx, &q)?;
    if !query.inputs.is_empty() {
        return Err(PlanError::InvalidParameter(format!(
            "a time must not read relations: {expr}"
        )));
    }
    Ok(TimeExpr {
        query,
        text: expr.to_string(),
    })
}

/// An interval option's value in milliseconds: `'1h'`, `'1 day'`,
/// `'90 minutes'`, `'500ms'`, `INTERVAL '2 hours'`.
pub fn interval_ms(what: &str, expr: &ast::Expr) -> Result<Timestamp> {
    let text = match expr {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) => s.clone(),
            _ => String::new(),
        },
        ast::Expr::Interval(i) => match i.value.as_ref() {
            ast::Expr::Value(v) => match &v.value {
                ast::Value::SingleQuotedString(s) => match &i.leading_field {
                    Some(f) => format!("{s} {f}"),
                    None => s.clone(),
                },
                _ => String::new(),
            },
            _ => String::new(),
        },
        _ => String::new(),
    };
    parse_interval(&text).ok_or_else(|| {
        PlanError::InvalidParameter(format!(
            "invalid {what} \"{expr}\": expected an interval such as '1h', '30 seconds' or '1 day'"
        ))
    })
}

/// Sum of `<number> <unit>` pairs, in milliseconds.
fn parse_interval(text: &str) -> Option<Timestamp> {
    let text = text.trim().to_lowercase();
    if text.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = text.as_str();
    while !rest.trim().is_empty() {
        rest = rest.trim_start();
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..n].parse().ok()?;
        rest = rest[n..].trim_start();
        let u = rest
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => 1.0,
            "" | "s" | "sec" | "secs" | "second" | "seconds" => 1_000.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60_000.0,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000.0,
            "d" | "day" | "days" => 86_400_000.0,
            "w" | "week" | "weeks" => 7.0 * 86_400_000.0,
            _ => return None,
        };
        rest = &rest[u..];
        total += value * scale;
    }
    (total.is_finite() && (0.0..1e15).contains(&total)).then_some(total.round() as Timestamp)
}

/// How `ms` reads as an option value (`'1h'`, `'90s'`, `'1500ms'`).
pub fn display_interval(ms: Timestamp) -> String {
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("min", 60_000),
        ("s", 1_000),
    ] {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("'{}{unit}'", ms / size);
        }
    }
    format!("'{ms}ms'")
}

/// The `WITH (...)` clause that recreates `options` (empty if default).
pub fn display_item_options(options: &ItemOptions) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(ms) = options.retain_history {
        parts.push(format!("RETAIN HISTORY FOR {}", display_interval(ms)));
    }
    if let Some(schedule) = &options.refresh {
        for e in &schedule.every {
            parts.push(format!(
                "REFRESH EVERY {} ALIGNED TO {}",
                display_interval(e.interval),
                e.aligned_to
            ));
        }
        for t in &schedule.at {
            parts.push(format!("REFRESH AT {t}"));
        }
    }
    (!parts.is_empty()).then(|| format!("WITH ({})", parts.join(", ")))
}

/// Split options into retention and a refresh plan, checking that they
/// combine as Materialize allows.
pub(crate) fn split_options(
    cx: &StatementContext,
    options: &[ItemOption],
) -> Result<(Option<Timestamp>, Option<RefreshPlan>)> {
    let mut retain = None;
    let mut refresh: Option<RefreshPlan> = None;
    let mut on_commit = false;
    for option in options {
        match option {
            ItemOption::RetainHistory(e) => {
                if retain.is_some() {
                    return Err(PlanError::Syntax(
                        "RETAIN HISTORY specified more than once".into(),
                    ));
                }
                retain = Some(interval_ms("RETAIN HISTORY", e)?);
            }
            ItemOption::Refresh(RefreshOption::OnCommit) => on_commit = true,
            ItemOption::Refresh(r) => {
                let plan = refresh.get_or_insert_with(RefreshPlan::default);
                match r {
                    RefreshOption::OnCommit => {}
                    RefreshOption::AtCreation => plan.at_creation = true,
                    RefreshOption::At(t) => plan.at.push(plan_time(cx, t)?),
                    RefreshOption::Every {
                        interval,
                        aligned_to,
                    } => {
                        let ms = interval_ms("REFRESH EVERY interval", interval)?;
                        if ms == 0 {
                            return Err(PlanError::InvalidParameter(
                                "REFRESH EVERY interval must be positive".into(),
                            ));
                        }
                        let aligned = aligned_to.as_ref().map(|a| plan_time(cx, a)).transpose()?;
                        plan.every.push((ms, aligned));
                    }
                }
            }
        }
    }
    if on_commit && refresh.is_some() {
        return Err(PlanError::InvalidParameter(
            "REFRESH ON COMMIT cannot be combined with other REFRESH options".into(),
        ));
    }
    Ok((retain, refresh))
}

/// `CREATE ... WITH (options)`: attach the options to `plan`, the plan of
/// the statement `stmt` without them.
pub fn with_item_options(
    cx: &StatementContext,
    mut plan: Plan,
    stmt: &Statement,
    options: &[ItemOption],
) -> Result<Plan> {
    let (retain, refresh_options) = split_options(cx, options)?;
    match &mut plan {
        Plan::CreateMaterializedView(create) => {
            create.def.options.retain_history = retain;
            create.refresh = refresh_options;
        }
        Plan::CreateIndex(create) => {
            if refresh_options.is_some() {
                return Err(PlanError::InvalidParameter(
                    "REFRESH is an option of materialized views, not of indexes".into(),
                ));
            }
            create.def.options.retain_history = retain;
        }
        Plan::CreateItem { def, .. } if def.kind == ItemKind::Table => {
            if refresh_options.is_some() {
                return Err(PlanError::InvalidParameter(format!(
                    "REFRESH is an option of materialized views, not of {}s",
                    def.kind.name()
                )));
            }
            def.options.retain_history = retain;
        }
        Plan::CreateItem { def, .. } => {
            return Err(PlanError::unsupported(format!(
                "WITH (RETAIN HISTORY | REFRESH) on a {}",
                def.kind.name()
            )));
        }
        Plan::Empty => {}
        _ => {
            return Err(PlanError::unsupported(format!(
                "WITH (RETAIN HISTORY | REFRESH) on {stmt}"
            )));
        }
    }
    Ok(plan)
}

/// `ALTER ... SET (RETAIN HISTORY FOR ...)` / `RESET (RETAIN HISTORY)`.
pub fn plan_alter_options(
    cx: &StatementContext,
    kind: ObjectKind,
    if_exists: bool,
    name: &ast::ObjectName,
    set: &[ItemOption],
    reset: &[String],
) -> Result<Plan> {
    let Some(id) = crate::statements::lookup::lookup_kind(cx, name, kind)? else {
        if if_exists {
            return Ok(Plan::Empty);
        }
        return Err(crate::statements::lookup::missing_message(kind, name));
    };
    let item = cx.catalog.get_item(id)?;
    let mut options = item.options.clone();
    if set.iter().any(|o| matches!(o, ItemOption::Refresh(_)))
        || reset.iter().any(|r| r == "refresh")
    {
        return Err(PlanError::unsupported(
            "changing a materialized view's REFRESH schedule (recreate it instead)",
        ));
    }
    let (retain, _) = split_options(cx, set)?;
    if retain.is_some() {
        options.retain_history = retain;
    }
    if reset.iter().any(|r| r == "retain history") {
        options.retain_history = None;
    }
    // A source's history is kept alike for every relation it writes.
    let mut ids = vec![id];
    if let Some(freshet_catalog::SourceDetails::Ingestion(_)) = item.source_details() {
        ids.extend(cx.catalog.source_parts(id).into_iter().map(|p| p.id));
    }
    Ok(Plan::SetOptions {
        ids,
        options: *options,
    })
}

/// The schedule a refresh plan makes once its times are known.
pub fn schedule(
    created_at: Timestamp,
    at: Vec<Timestamp>,
    every: Vec<(Timestamp, Option<Timestamp>)>,
    at_creation: bool,
) -> RefreshSchedule {
    let mut at = at;
    if at_creation {
        at.push(created_at);
    }
    at.sort_unstable();
    at.dedup();
    RefreshSchedule {
        at,
        every: every
            .into_iter()
            .map(|(interval, aligned)| freshet_repr::RefreshEvery {
                interval,
                aligned_to: aligned.unwrap_or(created_at),
            })
            .collect(),
    }
}

/// A time expression's value as a timestamp (milliseconds since the
/// epoch): integers and `numeric` as they are (`mz_timestamp`),
/// `timestamp[tz]` converted, text parsed as an integer.
pub fn timestamp_of(value: Option<&datafusion::common::ScalarValue>) -> Result<Timestamp, String> {
    use datafusion::common::ScalarValue as S;
    let negative = || "times before 1970 do not exist".to_string();
    let from_i128 = |v: i128| Timestamp::try_from(v).map_err(|_| negative());
    match value {
        None | Some(S::Null) => Err("it is NULL".into()),
        Some(S::Int8(Some(v))) => from_i128((*v).into()),
        Some(S::Int16(Some(v))) => from_i128((*v).into()),
        Some(S::Int32(Some(v))) => from_i128((*v).into()),
        Some(S::Int64(Some(v))) => from_i128((*v).into()),
        Some(S::UInt8(Some(v))) => Ok((*v).into()),
        Some(S::UInt16(Some(v))) => Ok((*v).into()),
        Some(S::UInt32(Some(v))) => Ok((*v).into()),
        Some(S::UInt64(Some(v))) => Ok(*v),
        Some(S::Decimal128(Some(v), _, scale)) => {
            let v = if *scale > 0 {
                v / 10i128.pow(u32::from(scale.unsigned_abs()))
            } else {
                *v
            };
            from_i128(v)
        }
        Some(S::TimestampSecond(Some(v), _)) => from_i128(i128::from(*v) * 1000),
        Some(S::TimestampMillisecond(Some(v), _)) => from_i128((*v).into()),
        Some(S::TimestampMicrosecond(Some(v), _)) => from_i128(i128::from(*v) / 1000),
        Some(S::TimestampNanosecond(Some(v), _)) => from_i128(i128::from(*v) / 1_000_000),
        Some(S::Utf8(Some(text))) | Some(S::LargeUtf8(Some(text))) => text
            .trim()
            .parse::<Timestamp>()
            .map_err(|_| format!("\"{text}\" is not a timestamp in milliseconds")),
        Some(other) => Err(format!(
            "expected an mz_timestamp, integer or timestamp, found {}",
            other.data_type()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_read_like_materialize_options() {
        assert_eq!(parse_interval("1h"), Some(3_600_000));
        assert_eq!(parse_interval("1 day"), Some(86_400_000));
        assert_eq!(parse_interval("1h 30m"), Some(5_400_000));
        assert_eq!(parse_interval("500ms"), Some(500));
        assert_eq!(parse_interval("2"), Some(2_000));
        assert_eq!(parse_interval("soon"), None);
        assert_eq!(parse_interval(""), None);
        assert_eq!(display_interval(3_600_000), "'1h'");
        assert_eq!(display_interval(1_500), "'1500ms'");
    }
}

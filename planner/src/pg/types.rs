//! SQL type names to Postgres types, and the type planner DataFusion uses
//! for casts so that `::uuid`, `::jsonb`, `::int4` and friends work and
//! timestamps keep Postgres's microsecond precision.

use std::sync::Arc;

use arrow::datatypes::FieldRef;
use datafusion::common::Result as DfResult;
use datafusion::logical_expr::planner::TypePlanner;
use datafusion::sql::sqlparser::ast;
use freshet_repr::{PgType, TypeError};

/// The Postgres type a SQL type name denotes.
pub fn pg_type_of(data_type: &ast::DataType) -> Result<PgType, TypeError> {
    let text = data_type.to_string().to_lowercase();
    parse_type_text(&text)
}

/// The Postgres type a type name denotes (`to_regtype`, `'int4'::regtype`):
/// SQL spellings, internal names, `pg_catalog.`-qualified or quoted.
pub fn parse_type_name(text: &str) -> Result<PgType, TypeError> {
    let text = text.trim().to_lowercase();
    let text = text.strip_prefix("pg_catalog.").unwrap_or(&text);
    let text = text.trim_matches('"');
    if let Some(elem) = text.strip_prefix('_') {
        return Ok(PgType::Array(Box::new(parse_type_text(elem)?)));
    }
    parse_type_text(text)
}

fn parse_type_text(text: &str) -> Result<PgType, TypeError> {
    let text = text.trim();
    if let Some(elem) = text.strip_suffix("[]") {
        return Ok(PgType::Array(Box::new(parse_type_text(elem)?)));
    }
    if let Some(elem) = text
        .strip_prefix("array<")
        .and_then(|t| t.strip_suffix('>'))
    {
        return Ok(PgType::Array(Box::new(parse_type_text(elem)?)));
    }
    let (name, mods) = match text.find('(') {
        Some(open) => {
            let close = text[open..]
                .find(')')
                .map(|c| open + c)
                .ok_or_else(|| TypeError::UnknownType(text.to_string()))?;
            let mods = text[open + 1..close]
                .split(',')
                .map(|m| m.trim().parse::<u64>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| TypeError::UnknownType(text.to_string()))?;
            let name = format!("{} {}", text[..open].trim(), text[close + 1..].trim());
            (name.trim().to_string(), mods)
        }
        None => (text.to_string(), vec![]),
    };
    // Fractional-second precision on time types is accepted and ignored:
    // Freshet stores microseconds.
    let time_like = [
        "time",
        "timestamp",
        "timestamptz",
        "time with",
        "timestamp with",
        "timestamp without",
        "time without",
    ];
    let mods = if time_like.iter().any(|t| name.starts_with(t)) {
        vec![]
    } else {
        mods
    };
    let name = match name.as_str() {
        "int" | "integer" | "int4" => "int4",
        "smallint" | "int2" => "int2",
        "bigint" | "int8" => "int8",
        "timestamp with time zone" => "timestamptz",
        "time with time zone" => return Err(TypeError::UnknownType("time with time zone".into())),
        other => other,
    };
    PgType::from_sql_name(name, &mods)
}

/// Maps SQL type names in casts to the Arrow types Freshet stores them as.
#[derive(Debug, Default)]
pub struct PgTypePlanner;

impl TypePlanner for PgTypePlanner {
    /// The cast's result field records its Postgres type, so `'…'::uuid`
    /// is reported as `uuid`, not `text`.
    fn plan_type_field(&self, sql_type: &ast::DataType) -> DfResult<Option<FieldRef>> {
        Ok(pg_type_of(sql_type)
            .ok()
            .map(|t| Arc::new(t.field("", true))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn ty(sql: &str) -> PgType {
        let stmt = Parser::parse_sql(&PostgreSqlDialect {}, &format!("CREATE TABLE t (c {sql})"))
            .unwrap()
            .remove(0);
        match stmt {
            ast::Statement::CreateTable(c) => pg_type_of(&c.columns[0].data_type).unwrap(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn maps_postgres_spellings() {
        assert_eq!(ty("int"), PgType::Int4);
        assert_eq!(ty("INTEGER"), PgType::Int4);
        assert_eq!(ty("int8"), PgType::Int8);
        assert_eq!(ty("smallint"), PgType::Int2);
        assert_eq!(ty("double precision"), PgType::Float8);
        assert_eq!(ty("real"), PgType::Float4);
        assert_eq!(
            ty("numeric(10,2)"),
            PgType::Numeric {
                typmod: Some((10, 2))
            }
        );
        assert_eq!(ty("numeric"), PgType::Numeric { typmod: None });
        assert_eq!(
            ty("decimal(5)"),
            PgType::Numeric {
                typmod: Some((5, 0))
            }
        );
        assert_eq!(ty("varchar(10)"), PgType::Varchar { max_len: Some(10) });
        assert_eq!(ty("character varying"), PgType::Varchar { max_len: None });
        assert_eq!(ty("char(3)"), PgType::Char { len: Some(3) });
        assert_eq!(ty("char"), PgType::Char { len: Some(1) });
        assert_eq!(ty("text"), PgType::Text);
        assert_eq!(ty("bytea"), PgType::Bytea);
        assert_eq!(ty("date"), PgType::Date);
        assert_eq!(ty("time"), PgType::Time);
        assert_eq!(ty("timestamp"), PgType::Timestamp);
        assert_eq!(ty("timestamp(3)"), PgType::Timestamp);
        assert_eq!(ty("timestamptz"), PgType::TimestampTz);
        assert_eq!(ty("timestamp with time zone"), PgType::TimestampTz);
        assert_eq!(ty("interval"), PgType::Interval);
        assert_eq!(ty("uuid"), PgType::Uuid);
        assert_eq!(ty("jsonb"), PgType::Jsonb);
        assert_eq!(ty("boolean"), PgType::Bool);
        assert_eq!(ty("int[]"), PgType::Array(Box::new(PgType::Int4)));
    }
}

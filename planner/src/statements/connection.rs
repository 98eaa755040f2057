//! `CREATE CONNECTION` and `SHOW CONNECTIONS`.
//!
//! A connection's options are checked and fixed here; whether the system
//! it names can be reached is the server's question (it connects once
//! unless `VALIDATE = false`), as is everything a source later asks it.

use datafusion::sql::sqlparser::ast::{self, ObjectName};
use freshet_catalog::{
    ConnectionSpec, ItemDef, ItemDetails, ItemKind, KafkaConnection, PostgresConnection,
};
use freshet_repr::PgType;

use crate::error::{PlanError, Result};
use crate::parser::ObjectKind;
use crate::parser::connection::{
    ConnectionOptionValue, CreateConnectionStatement, KAFKA_OPTIONS, POSTGRES_OPTIONS,
};
use crate::plan::Plan;
use crate::statements::context::StatementContext;
use crate::statements::lookup::{lookup_kind, missing_message};

/// A checked `CREATE CONNECTION`.
#[derive(Debug, Clone)]
pub struct CreateConnectionPlan {
    /// The connection's catalog item.
    pub def: ItemDef,
    /// Skip (with a notice) if the name exists.
    pub if_not_exists: bool,
    /// Connect once before committing it (`VALIDATE`, default true).
    pub validate: bool,
}

/// Plan `CREATE CONNECTION`.
pub fn create_connection(cx: &StatementContext, stmt: &CreateConnectionStatement) -> Result<Plan> {
    let (schema, name) = cx.resolver().create_target(&stmt.name)?;
    let spec = match stmt.connection_type.as_str() {
        "POSTGRES" => ConnectionSpec::Postgres(postgres(cx, &stmt.options)?),
        "KAFKA" => ConnectionSpec::Kafka(kafka(&stmt.options)?),
        other => {
            return Err(PlanError::Unsupported(format!(
                "connections of type {other}"
            )));
        }
    };
    let canonical = CreateConnectionStatement {
        if_not_exists: false,
        ..stmt.clone()
    };
    Ok(Plan::CreateConnection(Box::new(CreateConnectionPlan {
        def: ItemDef {
            schema_id: schema.id,
            name,
            kind: ItemKind::Connection,
            create_sql: canonical.to_string(),
            desc: None,
            references: spec.secrets(),
            details: ItemDetails::Connection(Box::new(spec)),
            options: Default::default(),
        },
        if_not_exists: stmt.if_not_exists,
        validate: stmt.validate.unwrap_or(true),
    })))
}

/// A `POSTGRES` connection's options, defaulted as libpq defaults them.
fn postgres(
    cx: &StatementContext,
    options: &[(String, ConnectionOptionValue)],
) -> Result<PostgresConnection> {
    let mut seen: Vec<&str> = Vec::new();
    let mut conn = PostgresConnection {
        host: String::new(),
        port: 5432,
        user: String::new(),
        password: None,
        database: "postgres".into(),
    };
    for (option, value) in options {
        if !POSTGRES_OPTIONS.contains(&option.as_str()) {
            return Err(PlanError::InvalidParameter(format!(
                "unknown POSTGRES connection option {option} (expected one of {})",
                POSTGRES_OPTIONS.join(", ")
            )));
        }
        if seen.contains(&option.as_str()) {
            return Err(PlanError::InvalidParameter(format!(
                "{option} specified more than once"
            )));
        }
        seen.push(option);
        match (option.as_str(), value) {
            ("PASSWORD", ConnectionOptionValue::Secret(secret)) => {
                let Some(id) = lookup_kind(cx, secret, ObjectKind::Secret)? else {
                    return Err(missing_message(ObjectKind::Secret, secret));
                };
                conn.password = Some(id);
            }
            ("PASSWORD", ConnectionOptionValue::Value(_)) => {
                return Err(PlanError::InvalidParameter(
                    "PASSWORD must name a secret: PASSWORD SECRET name (CREATE SECRET holds the password)"
                        .into(),
                ));
            }
            (_, ConnectionOptionValue::Secret(_)) => {
                return Err(PlanError::InvalidParameter(format!(
                    "{option} takes a value, not a secret"
                )));
            }
            ("HOST", ConnectionOptionValue::Value(v)) => conn.host = text_value(option, v)?,
            ("USER", ConnectionOptionValue::Value(v)) => conn.user = text_value(option, v)?,
            ("DATABASE", ConnectionOptionValue::Value(v)) => conn.database = text_value(option, v)?,
            ("PORT", ConnectionOptionValue::Value(v)) => {
                conn.port = text_value(option, v)?
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| {
                        PlanError::InvalidParameter(format!(
                            "invalid PORT {v}: expected 1 to 65535"
                        ))
                    })?;
            }
            ("SSL MODE", ConnectionOptionValue::Value(v)) => {
                let mode = text_value(option, v)?.to_ascii_lowercase();
                if mode != "disable" {
                    return Err(PlanError::Unsupported(format!(
                        "SSL MODE '{mode}' (only 'disable' is supported for now)"
                    )));
                }
            }
            _ => {
                return Err(PlanError::Internal(format!(
                    "connection option {option} not handled"
                )));
            }
        }
    }
    if conn.host.is_empty() {
        return Err(PlanError::InvalidParameter(
            "a POSTGRES connection needs HOST".into(),
        ));
    }
    if conn.user.is_empty() {
        return Err(PlanError::InvalidParameter(
            "a POSTGRES connection needs USER".into(),
        ));
    }
    Ok(conn)
}

/// A `KAFKA` connection's options: one or more `host:port` brokers.
fn kafka(options: &[(String, ConnectionOptionValue)]) -> Result<KafkaConnection> {
    let mut brokers = Vec::new();
    for (option, value) in options {
        let value = match (option.as_str(), value) {
            (o, ConnectionOptionValue::Value(v)) if KAFKA_OPTIONS.contains(&o) => v,
            (o, _) if KAFKA_OPTIONS.contains(&o) => {
                return Err(PlanError::InvalidParameter(format!(
                    "{option} takes a value, not a secret"
                )));
            }
            _ => {
                return Err(PlanError::InvalidParameter(format!(
                    "unknown KAFKA connection option {option} (expected one of {})",
                    KAFKA_OPTIONS.join(", ")
                )));
            }
        };
        match value.as_ref() {
            ast::Expr::Tuple(items) => {
                for item in items {
                    brokers.push(text_value(option, item)?);
                }
            }
            ast::Expr::Nested(item) => brokers.push(text_value(option, item)?),
            single => brokers.push(text_value(option, single)?),
        }
    }
    if brokers.is_empty() {
        return Err(PlanError::InvalidParameter(
            "a KAFKA connection needs BROKER 'host:port'".into(),
        ));
    }
    for b in &brokers {
        let valid = b
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !valid {
            return Err(PlanError::InvalidParameter(format!(
                "invalid broker {b:?}: expected 'host:port'"
            )));
        }
    }
    Ok(KafkaConnection { brokers })
}

/// A literal or bare word as text (`'db'`, `5432`, `postgres`).
fn text_value(option: &str, value: &ast::Expr) -> Result<String> {
    match value {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) => Ok(s.clone()),
            ast::Value::Number(n, _) => Ok(n.to_string()),
            _ => Err(bad_value(option, value)),
        },
        ast::Expr::Identifier(ident) => Ok(ident.value.clone()),
        _ => Err(bad_value(option, value)),
    }
}

fn bad_value(option: &str, value: &ast::Expr) -> PlanError {
    PlanError::InvalidParameter(format!(
        "invalid value for {option}: {value} (expected a string)"
    ))
}

/// `SHOW CONNECTIONS [FROM schema]`: each connection's name and type.
pub fn show_connections(cx: &StatementContext, schema: Option<&ObjectName>) -> Result<Plan> {
    let schema = crate::statements::misc::schema_to_show(cx, schema)?;
    let mut rows: Vec<(String, String)> = cx
        .catalog
        .items()
        .filter(|i| i.schema_id == schema)
        .filter_map(|i| match &i.details {
            ItemDetails::Connection(spec) => Some((i.name.clone(), spec.type_name().to_string())),
            _ => None,
        })
        .collect();
    rows.sort();
    crate::statements::misc::text_rows(
        &[("name", PgType::Text), ("type", PgType::Text)],
        rows.into_iter()
            .map(|(n, t)| vec![Some(n), Some(t)])
            .collect(),
    )
}

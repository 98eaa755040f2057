//! Webhook sources: checking `FROM WEBHOOK ...`, and compiling its
//! `CHECK` expression into something the HTTP endpoint evaluates per
//! request.
//!
//! The check is planned once, at `CREATE SOURCE` (so a check that does not
//! plan or is not boolean fails there, with the expression's error), and
//! compiled again by the server when the first request arrives: a
//! DataFusion physical expression over a one-row batch of the request's
//! body, headers and the secrets the check names. The secrets' values are
//! columns of that batch, not part of the expression, so a secret changed
//! by `ALTER SECRET` is read afresh by the next request.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BinaryArray, BooleanArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::DFSchema;
use datafusion::execution::SessionState;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::sql::planner::PlannerContext;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use freshet_catalog::{
    CatalogState, WebhookBodyFormat, WebhookCheck, WebhookCheckInput, WebhookHeaderColumn,
    WebhookHeaderFilter, WebhookSpec,
};
use freshet_repr::{GlobalId, PgType};

use crate::error::{PlanError, Result};
use crate::parser::ObjectKind;
use crate::parser::normalize_ident;
use crate::parser::source::{WebhookCheckInputKind, WebhookStatement};
use crate::query::resolve::NameResolver;
use crate::statements::context::StatementContext;
use crate::statements::lookup::{lookup_kind, missing_message};

/// Plan `FROM WEBHOOK ...` into the catalog's spec (the check planned
/// once to prove it is a boolean expression over the request).
pub fn plan_webhook(cx: &StatementContext, w: &WebhookStatement) -> Result<WebhookSpec> {
    let body_format = match w.body_format.as_str() {
        "TEXT" => WebhookBodyFormat::Text,
        "JSON" => WebhookBodyFormat::Json,
        "JSON ARRAY" => WebhookBodyFormat::JsonArray,
        "BYTES" => WebhookBodyFormat::Bytes,
        other => {
            return Err(PlanError::InvalidParameter(format!(
                "unknown webhook body format {other}"
            )));
        }
    };
    let include_headers = w.include_headers.as_ref().map(|entries| {
        let mut filter = WebhookHeaderFilter::default();
        for (not, name) in entries {
            let name = name.to_ascii_lowercase();
            if *not {
                filter.block.push(name);
            } else {
                filter.allow.push(name);
            }
        }
        filter
    });
    let mut columns = vec!["body".to_string()];
    if include_headers.is_some() {
        columns.push("headers".into());
    }
    let mut header_columns = Vec::new();
    for (header, column, bytes) in &w.header_columns {
        let column = normalize_ident(column);
        if columns.contains(&column) {
            return Err(PlanError::DuplicateColumn(column));
        }
        columns.push(column.clone());
        header_columns.push(WebhookHeaderColumn {
            header: header.to_ascii_lowercase(),
            column,
            bytes: *bytes,
        });
    }
    let check = match &w.check {
        None => None,
        Some(c) => {
            let mut check = WebhookCheck {
                expr: c.expr.to_string(),
                headers: WebhookCheckInput {
                    name: "headers".into(),
                    bytes: false,
                },
                body: WebhookCheckInput {
                    name: "body".into(),
                    bytes: false,
                },
                secrets: Vec::new(),
            };
            for input in &c.inputs {
                let alias = input.alias.as_ref().map(normalize_ident);
                match &input.input {
                    WebhookCheckInputKind::Headers => {
                        if input.bytes {
                            return Err(PlanError::unsupported("HEADERS BYTES in a webhook CHECK"));
                        }
                        check.headers.name = alias.unwrap_or_else(|| "headers".into());
                    }
                    WebhookCheckInputKind::Body => {
                        check.body = WebhookCheckInput {
                            name: alias.unwrap_or_else(|| "body".into()),
                            bytes: input.bytes,
                        };
                    }
                    WebhookCheckInputKind::Secret(name) => {
                        let Some(id) = lookup_kind(cx, name, ObjectKind::Secret)? else {
                            return Err(missing_message(ObjectKind::Secret, name));
                        };
                        let own = cx.catalog.get_item(id)?.name.clone();
                        check.secrets.push((
                            id,
                            WebhookCheckInput {
                                name: alias.unwrap_or(own),
                                bytes: input.bytes,
                            },
                        ));
                    }
                }
            }
            let mut names: Vec<&str> = vec![&check.body.name, &check.headers.name];
            names.extend(check.secrets.iter().map(|(_, i)| i.name.as_str()));
            for (i, n) in names.iter().enumerate() {
                if names[..i].contains(n) {
                    return Err(PlanError::DuplicateColumn(n.to_string()));
                }
            }
            CompiledCheck::compile(cx.state, &check)?;
            Some(check)
        }
    };
    Ok(WebhookSpec {
        body_format,
        include_headers,
        header_columns,
        check,
    })
}

/// A webhook's `CHECK`, ready to evaluate per request.
#[derive(Debug)]
pub struct CompiledCheck {
    schema: SchemaRef,
    expr: Arc<dyn PhysicalExpr>,
    secrets: Vec<(GlobalId, bool)>,
    body_bytes: bool,
}

/// What one request gives a check.
pub struct CheckRequest<'a> {
    /// The body as it came.
    pub body: &'a [u8],
    /// The headers as canonical `jsonb` text (an object, names lower
    /// case).
    pub headers: &'a str,
}

impl CompiledCheck {
    /// Plan and compile `check` against the columns it can read.
    pub fn compile(state: &SessionState, check: &WebhookCheck) -> Result<CompiledCheck> {
        let text_or_bytes = |name: &str, bytes: bool| {
            if bytes {
                PgType::Bytea.field(name, true)
            } else {
                PgType::Text.field(name, true)
            }
        };
        let mut fields: Vec<Field> = vec![
            text_or_bytes(&check.body.name, check.body.bytes),
            PgType::Jsonb.field(&check.headers.name, true),
        ];
        fields.extend(
            check
                .secrets
                .iter()
                .map(|(_, input)| text_or_bytes(&input.name, input.bytes)),
        );
        let schema = Arc::new(Schema::new(fields));
        let df_schema = DFSchema::try_from(Arc::clone(&schema))?;
        let ast = Parser::new(&PostgreSqlDialect {})
            .try_with_sql(&check.expr)
            .and_then(|mut p| p.parse_expr())
            .map_err(|e| PlanError::Syntax(format!("invalid webhook CHECK expression: {e}")))?;
        // No relation is in scope: the resolver only serves function
        // lookups.
        let session = crate::query::resolve::SessionInfo {
            database: String::new(),
            search_path: Vec::new(),
            user: String::new(),
            temp_schema: None,
        };
        let catalog = CatalogState::default();
        let planning = crate::query::provider::PlanningContext::new(
            state,
            NameResolver::new(&catalog, &session),
        );
        let logical =
            planning
                .sql_to_rel()
                .sql_to_expr(ast, &df_schema, &mut PlannerContext::new())?;
        let expr = state.create_physical_expr(logical, &df_schema)?;
        let returns = expr.data_type(&schema)?;
        if returns != DataType::Boolean {
            return Err(PlanError::DatatypeMismatch(format!(
                "CHECK expression must have type boolean, not type {}",
                PgType::from_arrow(&returns)
                    .map(|t| t.sql_name())
                    .unwrap_or_else(|| returns.to_string())
            )));
        }
        Ok(CompiledCheck {
            schema,
            expr,
            secrets: check.secrets.iter().map(|(id, i)| (*id, i.bytes)).collect(),
            body_bytes: check.body.bytes,
        })
    }

    /// The secrets the check reads, in the order [`Self::evaluate`] takes
    /// their values.
    pub fn secrets(&self) -> impl Iterator<Item = GlobalId> + '_ {
        self.secrets.iter().map(|(id, _)| *id)
    }

    /// Whether `request` passes (NULL does not). `secrets` are the values
    /// of [`Self::secrets`], in order. An error is the expression's own
    /// (e.g. a header that is not valid base64).
    pub fn evaluate(&self, request: &CheckRequest<'_>, secrets: &[&[u8]]) -> Result<bool> {
        let text_or_bytes = |value: &[u8], bytes: bool| -> Result<ArrayRef> {
            Ok(if bytes {
                Arc::new(BinaryArray::from_vec(vec![value]))
            } else {
                let text = std::str::from_utf8(value).map_err(|_| {
                    PlanError::InvalidParameter(
                        "a text input of the CHECK is not valid UTF-8 (use BYTES)".into(),
                    )
                })?;
                Arc::new(StringArray::from(vec![text]))
            })
        };
        let mut columns = vec![
            text_or_bytes(request.body, self.body_bytes)?,
            Arc::new(StringArray::from(vec![request.headers])) as ArrayRef,
        ];
        if secrets.len() != self.secrets.len() {
            return Err(PlanError::Internal(
                "webhook check given the wrong number of secrets".into(),
            ));
        }
        for (value, (_, bytes)) in secrets.iter().zip(&self.secrets) {
            columns.push(text_or_bytes(value, *bytes)?);
        }
        let batch = RecordBatch::try_new(Arc::clone(&self.schema), columns)
            .map_err(|e| PlanError::Internal(e.to_string()))?;
        let result = self.expr.evaluate(&batch)?.into_array(1)?;
        let result = result
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| PlanError::Internal("webhook CHECK did not return boolean".into()))?;
        Ok(result.is_valid(0) && result.value(0))
    }
}

//! Receiving webhook requests: `POST /api/webhook/<database>/<schema>/<source>`.
//!
//! A request is resolved to its source through the current catalog,
//! decoded by the source's body format (400 when the body does not fit
//! it), checked by the source's `CHECK` (401 when it is not true), and
//! appended; the answer is 200 only once the rows are durable. An unknown
//! source is 404, a body over the limit 413 (the router's limit), a
//! source that cannot take it now 503.
//!
//! Nothing here logs or returns a body, a header value or a secret.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use freshet_catalog::{
    CatalogState, ItemDetails, ItemKind, SourceConnector, SourceDetails, WebhookCheck, WebhookSpec,
};
use freshet_planner::statements::webhook::{CheckRequest, CompiledCheck};
use freshet_repr::GlobalId;
use parking_lot::Mutex;

use crate::http::HttpState;

/// Compiled checks of the webhook sources requests have reached, kept
/// while their definition is unchanged.
#[derive(Default)]
pub struct Webhooks {
    checks: Mutex<HashMap<GlobalId, (WebhookCheck, Arc<CompiledCheck>)>>,
}

type Reply = (StatusCode, String);

fn reply(status: StatusCode, message: impl Into<String>) -> Reply {
    let mut message = message.into();
    message.push('\n');
    (status, message)
}

/// The webhook source named by the path, with its spec.
fn find(
    catalog: &CatalogState,
    database: &str,
    schema: &str,
    source: &str,
) -> Option<(GlobalId, WebhookSpec)> {
    let db = catalog.database_by_name(database)?;
    let schema = catalog
        .schemas()
        .find(|s| s.database_id == db.id && s.name == schema)?;
    let item = catalog.item_by_name(schema.id, source)?;
    if item.kind != ItemKind::Source {
        return None;
    }
    match item.source_details()? {
        SourceDetails::Ingestion(i) => match &i.connector {
            SourceConnector::Webhook(spec) => Some((item.id, spec.clone())),
            _ => None,
        },
        _ => None,
    }
}

/// The handler of `POST /api/webhook/...`.
pub(crate) async fn receive(
    State(state): State<HttpState>,
    Path((database, schema, source)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Reply {
    let (status, message) = handle(&state, &database, &schema, &source, &headers, &body).await;
    tracing::debug!(
        %database, %schema, %source,
        status = status.as_u16(),
        bytes = body.len(),
        "webhook request"
    );
    (status, message)
}

async fn handle(
    state: &HttpState,
    database: &str,
    schema: &str,
    source: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Reply {
    let catalog = state.coord.catalog_state();
    let Some((id, spec)) = find(&catalog, database, schema, source) else {
        return reply(
            StatusCode::NOT_FOUND,
            format!("no webhook source named {database}.{schema}.{source}"),
        );
    };
    let pairs: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_bytes()))
        .collect();
    let rows = match freshet_sources::decode_webhook(&spec, body, pairs.iter().copied()) {
        Ok(rows) => rows,
        Err(e) => return reply(StatusCode::BAD_REQUEST, e.0),
    };
    if let Some(check) = &spec.check {
        match passes(state, &catalog, id, check, body, &pairs) {
            Ok(true) => {}
            Ok(false) => {
                return reply(
                    StatusCode::UNAUTHORIZED,
                    "the request failed the source's CHECK",
                );
            }
            Err(reply) => return reply,
        }
    }
    let Some(appender) = state.coord.sources.webhook(id) else {
        return reply(StatusCode::SERVICE_UNAVAILABLE, "the source is not running");
    };
    match appender.append(rows, body.len() as u64).await {
        Ok(()) => (StatusCode::OK, String::new()),
        Err(e) => reply(StatusCode::SERVICE_UNAVAILABLE, e),
    }
}

/// Whether the request passes the source's check; `Err`: the answer
/// when the check could not be evaluated.
fn passes(
    state: &HttpState,
    catalog: &CatalogState,
    id: GlobalId,
    check: &WebhookCheck,
    body: &[u8],
    pairs: &[(&str, &[u8])],
) -> Result<bool, Reply> {
    let compiled = {
        let mut checks = state.webhooks.checks.lock();
        match checks.get(&id) {
            Some((known, compiled)) if known == check => Arc::clone(compiled),
            _ => {
                let compiled = CompiledCheck::compile(state.coord.base_session_state(), check)
                    .map_err(|e| {
                        tracing::warn!(source = %id, error = %e, "webhook CHECK does not compile");
                        reply(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "the source's CHECK could not be compiled",
                        )
                    })?;
                let compiled = Arc::new(compiled);
                checks.insert(id, (check.clone(), Arc::clone(&compiled)));
                compiled
            }
        }
    };
    let mut secrets: Vec<&[u8]> = Vec::new();
    for secret in compiled.secrets() {
        match catalog.item(secret).map(|i| &i.details) {
            Some(ItemDetails::Secret(value)) => secrets.push(value.expose()),
            _ => {
                return Err(reply(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "a secret the source's CHECK reads no longer exists",
                ));
            }
        }
    }
    let headers = freshet_sources::headers_jsonb(pairs.iter().copied(), |_| true);
    compiled
        .evaluate(
            &CheckRequest {
                body,
                headers: &headers,
            },
            &secrets,
        )
        .map_err(|e| {
            reply(
                StatusCode::BAD_REQUEST,
                format!("evaluating the CHECK failed: {e}"),
            )
        })
}

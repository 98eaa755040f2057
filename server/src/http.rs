//! The HTTP endpoint: `/health` for load balancers and orchestration, and
//! `POST /api/webhook/<database>/<schema>/<source>` for webhook sources
//! ([`crate::webhook`]).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use tokio::net::TcpListener;

use crate::coordinator::Coordinator;
use crate::webhook::Webhooks;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct HttpState {
    pub coord: Arc<Coordinator>,
    pub webhooks: Arc<Webhooks>,
}

/// Serve HTTP until the listener fails. Webhook bodies over `body_limit`
/// bytes are refused with 413.
pub async fn serve(listener: TcpListener, coord: Arc<Coordinator>, body_limit: usize) {
    let state = HttpState {
        coord,
        webhooks: Arc::new(Webhooks::default()),
    };
    let app = Router::new()
        .route("/health", get(health))
        .route("/api/health", get(health))
        .route(
            "/api/webhook/{database}/{schema}/{source}",
            post(crate::webhook::receive),
        )
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state);
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "HTTP endpoint stopped");
    }
}

/// 200 while this process holds the data directory, 503 once it has been
/// fenced by a newer one.
async fn health(State(state): State<HttpState>) -> (StatusCode, &'static str) {
    if *state.coord.storage.fenced().borrow() {
        (StatusCode::SERVICE_UNAVAILABLE, "fenced\n")
    } else {
        (StatusCode::OK, "ok\n")
    }
}

/// Bind the HTTP listener.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

//! Booting and running a server.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::config::Config;
use crate::coordinator::Coordinator;
use crate::error::AdapterError;
use crate::handler::Handlers;
use crate::query_exec::{QueryExecutor, QueryLimits};
use crate::watch::Sockets;

/// Boot from the data directory and serve until interrupted or fenced.
pub async fn serve(config: Config) -> Result<(), ServeError> {
    let data_dir = config.data_dir.clone();
    let workers = config
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let limits = QueryLimits {
        per_query: config.query_memory_limit,
        total: config.total_query_memory,
        copy_part: config.copy_part_size,
    };
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let threads = config.query_threads.unwrap_or((4 * cores).max(8));
    let queries = QueryExecutor::new(limits, threads, crate::config::STATEMENT_STACK_BYTES)
        .map_err(ServeError::QueryRuntime)?;
    let mut storage_config = freshet_storage::StorageConfig::new(&data_dir);
    storage_config.part_cache_bytes = config.part_cache_size;
    let coord = tokio::task::spawn_blocking(move || {
        Coordinator::open(&data_dir, Some(storage_config), workers, queries)
    })
    .await
    .map_err(|e| ServeError::Boot(AdapterError::Internal(format!("boot task: {e}"))))?
    .map_err(ServeError::Boot)?;
    coord
        .drop_leftover_temp_schemas()
        .await
        .map_err(ServeError::Boot)?;
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Listen {
            address: config.listen,
            source,
        })?;
    let http = crate::http::bind(config.http_listen)
        .await
        .map_err(|source| ServeError::Listen {
            address: config.http_listen,
            source,
        })?;
    tracing::info!(
        pgwire = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        http = %http.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        data_dir = %config.data_dir.display(),
        "freshet is listening"
    );
    tokio::spawn(crate::http::serve(
        http,
        Arc::clone(&coord),
        config.webhook_body_limit,
    ));
    coord
        .compute
        .set_arrangement_limit(config.max_arrangement_memory as u64);
    tokio::spawn(enforce_arrangement_limit(Arc::clone(&coord)));
    let sockets = Arc::new(Sockets::default());
    let handlers = Arc::new(Handlers::new(
        Arc::clone(&coord),
        Arc::clone(&sockets),
        config.max_connections,
    ));
    let mut fenced = coord.storage.fenced();
    let mut backoff = AcceptBackoff::default();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (socket, peer) = match accepted {
                    Ok(a) => {
                        backoff.succeeded();
                        a
                    }
                    Err(e) => {
                        backoff.failed(&e).await;
                        continue;
                    }
                };
                let _ = socket.set_nodelay(true);
                tokio::spawn(crate::connection::serve_connection(
                    socket,
                    peer,
                    Arc::clone(&handlers),
                    Arc::clone(&sockets),
                ));
            }
            _ = fenced.changed() => {
                if *fenced.borrow() {
                    tracing::error!("a newer freshet process took over the data directory; shutting down");
                    coord.storage.shutdown();
                    return Err(ServeError::Fenced);
                }
            }
            _ = tokio::signal::ctrl_c() => {
                tracing::info!("interrupted; shutting down");
                coord.storage.shutdown();
                return Ok(());
            }
        }
    }
}

/// Once a second (as often as workers report arrangement sizes), stop
/// whichever dataflows hold more than the server's arrangement bound.
async fn enforce_arrangement_limit(coord: Arc<Coordinator>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for id in coord.compute.enforce_arrangement_limit() {
            tracing::warn!(dataflow = %id, "dataflow stopped: arrangement memory limit reached");
        }
    }
}

/// Pacing for `accept` failures. At the descriptor limit every `accept`
/// fails at once while the pending connection stays queued, so retrying
/// immediately would spin a core and flood the log; instead wait, doubling
/// up to a second, and log once per streak of failures.
#[derive(Debug, Default)]
struct AcceptBackoff {
    delay: Option<Duration>,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1);

    fn succeeded(&mut self) {
        if self.delay.take().is_some() {
            tracing::info!("accepting connections again");
        }
    }

    async fn failed(&mut self, error: &std::io::Error) {
        let delay = match self.delay {
            None => {
                tracing::warn!(%error, "accept failed; retrying with backoff until it succeeds");
                Self::FIRST
            }
            Some(d) => (d * 2).min(Self::MAX),
        };
        self.delay = Some(delay);
        tokio::time::sleep(delay).await;
    }
}

/// Why the server stopped or could not start; the binary logs it and
/// exits non-zero.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The runtime that runs queries' physical plans did not start.
    #[error("cannot start the query runtime: {0}")]
    QueryRuntime(std::io::Error),
    /// Opening the data directory or applying the catalog failed.
    #[error("cannot boot: {0}")]
    Boot(AdapterError),
    /// A listening address is taken or not ours.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The address.
        address: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A newer process opened the data directory.
    #[error("fenced by a newer process")]
    Fenced,
}

//! Booting and running a server.

use std::sync::Arc;

use tokio::net::TcpListener;

use crate::config::Config;
use crate::coordinator::Coordinator;
use crate::handler::Handlers;
use crate::watch::Sockets;

/// Boot from the data directory and serve until interrupted or fenced.
pub async fn serve(config: Config) -> anyhow_like::Result<()> {
    let data_dir = config.data_dir.clone();
    let workers = config
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let coord = tokio::task::spawn_blocking(move || Coordinator::open(&data_dir, None, workers))
        .await
        .map_err(|e| anyhow_like::Error(e.to_string()))?
        .map_err(|e| anyhow_like::Error(e.to_string()))?;
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|e| anyhow_like::Error(format!("cannot listen on {}: {e}", config.listen)))?;
    let http = crate::http::bind(config.http_listen)
        .await
        .map_err(|e| anyhow_like::Error(format!("cannot listen on {}: {e}", config.http_listen)))?;
    tracing::info!(
        pgwire = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        http = %http.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        data_dir = %config.data_dir.display(),
        "freshet is listening"
    );
    tokio::spawn(crate::http::serve(http, Arc::clone(&coord)));
    let sockets = Arc::new(Sockets::default());
    let handlers = Arc::new(Handlers::new(Arc::clone(&coord), Arc::clone(&sockets)));
    let mut fenced = coord.storage.fenced();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (socket, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                let _ = socket.set_nodelay(true);
                match dup_socket(&socket) {
                    Ok(dup) => sockets.insert(peer, dup),
                    Err(e) => tracing::warn!(error = %e, "cannot watch connection"),
                }
                let handlers = Arc::clone(&handlers);
                let sockets = Arc::clone(&sockets);
                tokio::spawn(async move {
                    if let Err(e) = pgwire::tokio::process_socket(socket, None, handlers).await {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                    sockets.remove(&peer);
                });
            }
            _ = fenced.changed() => {
                if *fenced.borrow() {
                    tracing::error!("a newer freshet process took over the data directory; shutting down");
                    coord.storage.shutdown();
                    return Err(anyhow_like::Error("fenced by a newer process".into()));
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

/// A second descriptor for the socket, used to notice disconnects.
fn dup_socket(socket: &tokio::net::TcpStream) -> std::io::Result<std::net::TcpStream> {
    use std::os::fd::AsFd;
    let fd = socket.as_fd().try_clone_to_owned()?;
    Ok(std::net::TcpStream::from(fd))
}

/// A minimal error type for the binary's top level.
pub mod anyhow_like {
    /// A displayable error.
    #[derive(Debug)]
    pub struct Error(pub String);

    impl std::fmt::Display for Error {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl std::error::Error for Error {}

    /// Result alias.
    pub type Result<T> = std::result::Result<T, Error>;
}

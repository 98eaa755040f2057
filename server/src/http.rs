//! The HTTP endpoint: `/health` for load balancers and orchestration.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::coordinator::Coordinator;

/// Serve HTTP until the listener fails. `/health` answers 200 while this
/// process holds the data directory and 503 once it has been fenced.
pub async fn serve(listener: TcpListener, coord: Arc<Coordinator>) {
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            continue;
        };
        let coord = Arc::clone(&coord);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let n = match tokio::time::timeout(
                std::time::Duration::from_secs(5),
                socket.read(&mut buf),
            )
            .await
            {
                Ok(Ok(n)) => n,
                _ => return,
            };
            let request = String::from_utf8_lossy(&buf[..n]);
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            let fenced = *coord.storage.fenced().borrow();
            let (status, body) = match path {
                "/health" | "/api/health" if !fenced => ("200 OK", "ok\n"),
                "/health" | "/api/health" => ("503 Service Unavailable", "fenced\n"),
                _ => ("404 Not Found", "not found\n"),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
        });
    }
}

/// Bind the HTTP listener.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

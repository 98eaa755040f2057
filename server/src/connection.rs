//! Serving one accepted connection so that nothing it does outlives it.
//!
//! A panic while serving a connection (a bug reachable from a malformed
//! message, say) must end that connection only: the task catches it, sends
//! the client an `XX000` error if the socket still takes one, and every
//! resource the connection held is released by unwinding (its session,
//! read holds and cursors live in the connection's state) or by the guard
//! here (the duplicate socket kept to notice disconnects).

use std::io::Write;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use freshet_repr::sqlstate;
use futures::FutureExt;
use tokio::net::TcpStream;

use crate::error::panic_message;
use crate::handler::Handlers;
use crate::watch::Sockets;

/// Serve `socket` until the client leaves, a fatal error, or a panic.
pub async fn serve_connection(
    socket: TcpStream,
    peer: SocketAddr,
    handlers: Arc<Handlers>,
    sockets: Arc<Sockets>,
) {
    let _socket_slot = match dup_socket(&socket) {
        Ok(dup) => Some(sockets.insert(peer, dup)),
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch connection");
            None
        }
    };
    let served = AssertUnwindSafe(pgwire::tokio::process_socket(socket, None, handlers))
        .catch_unwind()
        .await;
    match served {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "connection ended with an error"),
        Err(panic) => {
            // The panic hook has logged the panic itself, with its location.
            tracing::debug!(%peer, reason = panic_message(&panic), "connection closed after a panic");
            if let Some(watch) = sockets.watch(&peer) {
                let _ = watch.socket().write_all(&internal_error_message());
            }
        }
    }
}

/// A FATAL `ErrorResponse` (SQLSTATE XX000), encoded by hand: the codec
/// that would encode it was lost with the panicking task.
fn internal_error_message() -> Vec<u8> {
    let mut body = Vec::new();
    for (field, value) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', sqlstate::INTERNAL_ERROR),
        (
            b'M',
            "internal error while serving this connection; the connection is closed",
        ),
    ] {
        body.push(field);
        body.extend_from_slice(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut message = vec![b'E'];
    let len = u32::try_from(body.len() + 4).unwrap_or(u32::MAX);
    message.extend_from_slice(&len.to_be_bytes());
    message.extend_from_slice(&body);
    message
}

/// A second descriptor for the socket, used to notice disconnects (and to
/// report a panic after the first one is gone).
fn dup_socket(socket: &TcpStream) -> std::io::Result<std::net::TcpStream> {
    use std::os::fd::AsFd;
    let fd = socket.as_fd().try_clone_to_owned()?;
    Ok(std::net::TcpStream::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_error_is_a_well_formed_error_response() {
        let m = internal_error_message();
        assert_eq!(m[0], b'E');
        let len = u32::from_be_bytes([m[1], m[2], m[3], m[4]]) as usize;
        assert_eq!(len + 1, m.len());
        let text = String::from_utf8_lossy(&m[5..]);
        assert!(text.contains("CXX000\0"), "{text}");
        assert_eq!(*m.last().unwrap(), 0);
    }

    #[test]
    fn panic_messages_are_read_from_both_payload_kinds() {
        use std::any::Any;
        let s: Box<dyn Any + Send> = Box::new("static");
        assert_eq!(panic_message(&*s), "static");
        let owned: Box<dyn Any + Send> = Box::new(String::from("owned"));
        assert_eq!(panic_message(&*owned), "owned");
        let other: Box<dyn Any + Send> = Box::new(7u8);
        assert_eq!(panic_message(&*other), "(no message)");
    }
}

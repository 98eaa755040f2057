//! Noticing that a client went away while its statement runs.
//!
//! The pgwire crate does not read a connection while a handler runs, so a
//! client that disconnects mid-query would go unnoticed until the result is
//! written. The server keeps a duplicate of each accepted socket and, while
//! a statement waits or a subscribe streams, polls it for the peer's
//! hang-up and peeks at it, never consuming data.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// Duplicated sockets of live connections, by peer address.
#[derive(Debug, Default)]
pub struct Sockets {
    by_peer: Mutex<HashMap<SocketAddr, Arc<TcpStream>>>,
}

impl Sockets {
    /// Remember a connection's socket (a duplicate of its descriptor)
    /// until the returned slot is dropped, however the connection ends.
    pub fn insert(self: &Arc<Self>, peer: SocketAddr, socket: TcpStream) -> SocketSlot {
        self.by_peer.lock().insert(peer, Arc::new(socket));
        SocketSlot {
            sockets: Arc::clone(self),
            peer,
        }
    }

    /// A watch on a connection, if it is known.
    pub fn watch(&self, peer: &SocketAddr) -> Option<ConnWatch> {
        self.by_peer
            .lock()
            .get(peer)
            .cloned()
            .map(|s| ConnWatch { socket: s })
    }
}

/// A connection's entry in [`Sockets`]; dropping it forgets the socket
/// (closing the duplicate descriptor once no watch uses it).
#[derive(Debug)]
pub struct SocketSlot {
    sockets: Arc<Sockets>,
    peer: SocketAddr,
}

impl Drop for SocketSlot {
    fn drop(&mut self) {
        self.sockets.by_peer.lock().remove(&self.peer);
    }
}

/// Watches one connection for disconnection.
#[derive(Debug, Clone)]
pub struct ConnWatch {
    socket: Arc<TcpStream>,
}

impl ConnWatch {
    /// The watched socket (a duplicate descriptor of the connection's).
    pub fn socket(&self) -> &TcpStream {
        &self.socket
    }

    /// Resolves once the peer has closed or reset the connection (also
    /// when messages it sent before closing are still unread, e.g. the
    /// `Sync` after an `Execute` that is streaming).
    pub async fn closed(&self) {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let mut buf = [0u8; 1];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // POLLRDHUP (the peer's FIN) is Linux's; elsewhere only a reset or
        // hang-up is seen this way, and a clean close once the socket is
        // drained (the peek below).
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let closed = PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR;
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let closed = PollFlags::HUP | PollFlags::ERR;
        // A statement that ends sooner is never checked: most are far
        // quicker than this, and the check is two system calls.
        let mut wait = Duration::from_millis(20);
        loop {
            tokio::time::sleep(wait).await;
            wait = Duration::from_millis(100);
            let mut fds = [PollFd::new(&*self.socket, closed)];
            if rustix::event::poll(&mut fds, Some(&now)).is_ok()
                && fds[0].revents().intersects(closed)
            {
                return;
            }
            // The descriptor shares the original's O_NONBLOCK, so this
            // never blocks.
            match self.socket.peek(&mut buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e)
                    if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}

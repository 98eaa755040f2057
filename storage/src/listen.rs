//! Following a collection's updates as they happen.

use std::sync::Arc;

use arrow::array::RecordBatch;
use freshet_repr::Frontier;
use tokio::sync::mpsc;

/// What a [`Listen`] delivers, in time order.
#[derive(Debug, Clone)]
pub enum ListenEvent {
    /// Updates (data columns, time, diff) at times the listener has not yet
    /// seen as complete.
    Updates(RecordBatch),
    /// Every update at a time not beyond this frontier has been delivered.
    /// The empty antichain means the collection is sealed.
    Progress(Frontier),
}

/// A stream of a collection's updates after an `as_of`.
///
/// Created by [`Storage::listen`](crate::Storage::listen). Updates arrive
/// before the progress that completes their time. The stream ends (the
/// receiver returns `None`) when the collection is dropped.
#[derive(Debug)]
pub struct Listen {
    pub(crate) rx: mpsc::UnboundedReceiver<ListenEvent>,
}

impl Listen {
    /// The next event, waiting for it.
    pub async fn next(&mut self) -> Option<ListenEvent> {
        self.rx.recv().await
    }

    /// The next event if one is ready. `Err(true)` means the stream ended.
    pub fn try_next(&mut self) -> Result<ListenEvent, bool> {
        match self.rx.try_recv() {
            Ok(e) => Ok(e),
            Err(mpsc::error::TryRecvError::Empty) => Err(false),
            Err(mpsc::error::TryRecvError::Disconnected) => Err(true),
        }
    }
}

/// Callback run after events are sent (e.g. to wake a timely operator).
pub type Notify = Arc<dyn Fn() + Send + Sync>;

/// The sending half kept by the collection.
pub(crate) struct Listener {
    pub tx: mpsc::UnboundedSender<ListenEvent>,
    pub notify: Option<Notify>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener").finish_non_exhaustive()
    }
}

impl Listener {
    /// Send an event; false if the listener went away.
    pub fn send(&self, event: ListenEvent) -> bool {
        let ok = self.tx.send(event).is_ok();
        if ok && let Some(n) = &self.notify {
            n();
        }
        ok
    }
}

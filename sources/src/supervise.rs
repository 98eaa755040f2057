//! Running an ingestion that talks to an upstream: sessions retried with
//! backoff until the source is stopped, and which errors end it for good.
//! Shared by the PostgreSQL and Kafka sources, and by the generators' and
//! webhooks' error handling.

use std::future::Future;
use std::time::Duration;

use freshet_storage::StorageError;
use tokio::sync::watch;

use crate::error::{Result, SourceError};
use crate::status::{SourceState, StatusCell};

/// The longest wait between attempts while stalled.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// An ingestion made of sessions: each connects, resumes from the
/// durable progress and ingests until it is stopped (`Ok`) or fails.
pub(crate) trait Sessions: Send {
    /// The stop signal.
    fn stopped(&mut self) -> &mut watch::Receiver<bool>;
    /// Where the source reports its state.
    fn status(&self) -> &StatusCell;
    /// One session.
    fn session(&mut self) -> impl Future<Output = Result<()>> + Send;
}

/// Run sessions until stopped or a fatal error; a failed session stalls
/// the source and the next starts after a backoff.
pub(crate) async fn supervise(mut task: impl Sessions) {
    let mut backoff = Duration::from_millis(250);
    loop {
        if *task.stopped().borrow() {
            return;
        }
        let result = task.session().await;
        if *task.stopped().borrow() {
            return;
        }
        match result {
            Ok(()) => return,
            Err(e) if fatal(task.status(), &e) => return,
            Err(_) => {
                if pause(task.stopped(), backoff).await {
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Whether `e` ends the ingestion: a dropped collection (the source is
/// going away) or a shutdown end it quietly; a newer process holding the
/// data directory, or an upstream the source cannot follow
/// (`SourceError::Invalid`), fails it. Anything else stalls it (with the
/// error in its status) until the next attempt.
pub(crate) fn fatal(status: &StatusCell, e: &SourceError) -> bool {
    match e {
        SourceError::Storage(StorageError::UnknownCollection(_))
        | SourceError::Storage(StorageError::ShutDown) => true,
        SourceError::Storage(s) if s.is_fenced() => {
            status.set_state(SourceState::Failed, Some(e.to_string()));
            true
        }
        SourceError::Invalid(_) => {
            status.set_state(SourceState::Failed, Some(e.to_string()));
            true
        }
        _ => {
            status.set_state(SourceState::Stalled, Some(e.to_string()));
            false
        }
    }
}

/// Wait `d`, or until stopped (then `true`).
pub(crate) async fn pause(stopped: &mut watch::Receiver<bool>, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => *stopped.borrow(),
        changed = stopped.changed() => changed.is_err() || *stopped.borrow(),
    }
}

//! What each running source reports about itself, for
//! `freshet_internal.source_statuses`.

use std::sync::Arc;

use freshet_repr::GlobalId;
use parking_lot::Mutex;
use tokio::sync::watch;

/// A source's state, in Materialize's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceState {
    /// Started; nothing ingested since.
    Starting,
    /// Ingesting.
    Running,
    /// The upstream cannot be reached or an append failed; retrying.
    Stalled,
    /// Stopped for good with an error.
    Failed,
    /// Reached its end (`UP TO`, `TOTAL EVENTS`): nothing more will come.
    Completed,
}

impl SourceState {
    /// The word shown.
    pub fn name(&self) -> &'static str {
        match self {
            SourceState::Starting => "starting",
            SourceState::Running => "running",
            SourceState::Stalled => "stalled",
            SourceState::Failed => "failed",
            SourceState::Completed => "completed",
        }
    }
}

/// A snapshot of one source's status.
#[derive(Clone, Debug)]
pub struct SourceStatus {
    /// The source.
    pub id: GlobalId,
    /// Its state.
    pub state: SourceState,
    /// The last error, while stalled or failed.
    pub error: Option<String>,
    /// Updates (rows inserted or retracted) ingested by this process.
    pub records: u64,
    /// Bytes of those updates (their Arrow size).
    pub bytes: u64,
    /// How far ingestion has durably come, in the source's own terms (a
    /// tick, an offset, a log position).
    pub progress: Option<String>,
    /// Wall-clock milliseconds of the last append.
    pub last_ingest_at: Option<u64>,
    /// Wall-clock milliseconds of the last change of `state`.
    pub changed_at: u64,
}

/// The shared, updatable status of one source.
#[derive(Clone, Debug)]
pub struct StatusCell(Arc<Mutex<SourceStatus>>, Arc<watch::Sender<SourceState>>);

impl StatusCell {
    /// A new source's status: starting, nothing ingested.
    pub fn new(id: GlobalId) -> Self {
        StatusCell(
            Arc::new(Mutex::new(SourceStatus {
                id,
                state: SourceState::Starting,
                error: None,
                records: 0,
                bytes: 0,
                progress: None,
                last_ingest_at: None,
                changed_at: freshet_storage::wall_clock_ms(),
            })),
            Arc::new(watch::Sender::new(SourceState::Starting)),
        )
    }

    /// Follow the state as it changes.
    pub fn watch(&self) -> watch::Receiver<SourceState> {
        self.1.subscribe()
    }

    /// A copy of the status now.
    pub fn get(&self) -> SourceStatus {
        self.0.lock().clone()
    }

    /// Enter `state` (with its error, if any); logged when it changes.
    pub fn set_state(&self, state: SourceState, error: Option<String>) {
        let mut s = self.0.lock();
        if s.state != state || s.error != error {
            match (&error, state) {
                (Some(e), _) => {
                    tracing::warn!(source = %s.id, state = state.name(), error = %e, "source status")
                }
                (None, _) => tracing::info!(source = %s.id, state = state.name(), "source status"),
            }
            if s.state != state {
                s.changed_at = freshet_storage::wall_clock_ms();
            }
            s.state = state;
            s.error = error;
            self.1.send_replace(state);
        }
    }

    /// Record an append of `records` updates (`bytes` large) that brought
    /// the source to `progress`.
    pub fn ingested(&self, records: u64, bytes: u64, progress: String) {
        let mut s = self.0.lock();
        s.records += records;
        s.bytes += bytes;
        s.progress = Some(progress);
        s.last_ingest_at = Some(freshet_storage::wall_clock_ms());
    }

    /// Record the progress found at start (nothing ingested by it).
    pub fn resumed_at(&self, progress: String) {
        self.0.lock().progress = Some(progress);
    }
}

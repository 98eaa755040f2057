//! What each running sink reports about itself, for
//! `freshet_internal.sink_statuses`.

use std::sync::Arc;

use freshet_repr::{GlobalId, Timestamp};
use parking_lot::Mutex;

/// A sink's state, in Materialize's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkState {
    /// Started; reading its target's progress or starting its dataflow.
    Starting,
    /// Exporting.
    Running,
    /// The target cannot be written (or the dataflow restarts); retrying
    /// from the target's progress.
    Stalled,
    /// Stopped for good with an error (a key violation, a target that
    /// belongs to another sink).
    Failed,
    /// Its input will never change again and everything is exported.
    Completed,
}

impl SinkState {
    /// The word shown.
    pub fn name(&self) -> &'static str {
        match self {
            SinkState::Starting => "starting",
            SinkState::Running => "running",
            SinkState::Stalled => "stalled",
            SinkState::Failed => "failed",
            SinkState::Completed => "completed",
        }
    }
}

/// A snapshot of one sink's status.
#[derive(Clone, Debug)]
pub struct SinkStatus {
    /// The sink.
    pub id: GlobalId,
    /// Its state.
    pub state: SinkState,
    /// The last error, while stalled or failed.
    pub error: Option<String>,
    /// Changes (rows) written to the target by this process.
    pub messages: u64,
    /// Bytes written to the target by this process (encoded).
    pub bytes: u64,
    /// Every change at a time below this is durably at the target
    /// (`None` until the target's progress is read).
    pub frontier: Option<Timestamp>,
    /// Commits at the target by this process.
    pub commits: u64,
    /// Microseconds those commits took, in all.
    pub commit_us: u64,
    /// Of those, the microseconds spent recording progress at the target
    /// (the manifest, the progress record, the progress row): what
    /// exactly-once costs on top of delivering the changes.
    pub progress_us: u64,
    /// Wall-clock milliseconds of the last commit at the target.
    pub last_export_at: Option<u64>,
    /// Wall-clock milliseconds of the last change of `state`.
    pub changed_at: u64,
}

impl SinkStatus {
    /// The last timestamp exported: one below the frontier.
    pub fn progress(&self) -> Option<Timestamp> {
        self.frontier.and_then(|f| f.checked_sub(1))
    }
}

/// The shared, updatable status of one sink.
#[derive(Clone, Debug)]
pub struct StatusCell(Arc<Mutex<SinkStatus>>);

impl StatusCell {
    /// A new sink's status: starting, nothing exported.
    pub fn new(id: GlobalId) -> Self {
        StatusCell(Arc::new(Mutex::new(SinkStatus {
            id,
            state: SinkState::Starting,
            error: None,
            messages: 0,
            bytes: 0,
            frontier: None,
            commits: 0,
            commit_us: 0,
            progress_us: 0,
            last_export_at: None,
            changed_at: freshet_storage::wall_clock_ms(),
        })))
    }

    /// A copy of the status now.
    pub fn get(&self) -> SinkStatus {
        self.0.lock().clone()
    }

    /// Enter `state` (with its error, if any); logged when it changes.
    pub fn set_state(&self, state: SinkState, error: Option<String>) {
        let mut s = self.0.lock();
        if s.state != state || s.error != error {
            match &error {
                Some(e) => {
                    tracing::warn!(sink = %s.id, state = state.name(), error = %e, "sink status")
                }
                None => tracing::info!(sink = %s.id, state = state.name(), "sink status"),
            }
            if s.state != state {
                s.changed_at = freshet_storage::wall_clock_ms();
            }
            s.state = state;
            s.error = error;
        }
    }

    /// Record a commit at the target of `messages` changes that brought
    /// it to `frontier`, taking `took` in all.
    pub fn exported(
        &self,
        messages: u64,
        committed: &crate::Committed,
        took: std::time::Duration,
        frontier: Timestamp,
    ) {
        let mut s = self.0.lock();
        s.messages += messages;
        s.bytes += committed.bytes;
        s.commits += 1;
        s.commit_us += took.as_micros() as u64;
        s.progress_us += committed.progress.as_micros() as u64;
        s.frontier = Some(frontier);
        s.last_export_at = Some(freshet_storage::wall_clock_ms());
    }

    /// Record the frontier read back from the target at start.
    pub fn resumed_at(&self, frontier: Option<Timestamp>) {
        self.0.lock().frontier = frontier;
    }
}

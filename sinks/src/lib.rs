//! Sink exports.
//!
//! A sink delivers the changes of one relation to a target outside
//! Freshet exactly once, in timestamp order, each timestamp's changes
//! together. Its changes come from a subscribe-like dataflow the server
//! starts for it ([`DataflowStarter`]); this crate owns what happens after:
//! shaping them into the sink's envelope ([`envelope`]), committing
//! completed ranges of timestamps to the target, and recording the
//! progress *at the target itself*, in the same atomic step as the
//! changes it covers ([`files`], [`kafka`], [`postgres`]). A restart reads that progress back and
//! resumes exactly after it, so nothing is repeated and nothing skipped.
//!
//! While it runs, a sink holds its inputs readable at its progress (read
//! holds that [`freshet_internal.read_holds`] shows) and reports each
//! commit to storage, whose compaction permission for the inputs never
//! passes what the target has durably received (so after a crash the
//! changes to resume from are still there).
//!
//! [`Sinks`] runs one task per sink, started and stopped by the catalog's
//! implications (boot included).

pub mod envelope;
mod error;
pub mod files;
pub mod json;
pub mod kafka;
pub mod postgres;
mod run;
mod status;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arrow::datatypes::SchemaRef;
use freshet_catalog::SinkDetails;
use freshet_compute::Subscription;
use freshet_repr::{GlobalId, Timestamp};
use freshet_storage::{ReadHold, Storage};
use parking_lot::Mutex;

pub use error::{Result, SinkError};
pub use files::{check_format, check_target};
pub use status::{SinkState, SinkStatus, StatusCell};

/// Everything a sink's task needs besides its dataflow.
#[derive(Clone, Debug)]
pub struct SinkTarget {
    /// The sink.
    pub id: GlobalId,
    /// Its definition.
    pub details: SinkDetails,
    /// The columns of the rows its target receives.
    pub schema: SchemaRef,
    /// How to reach the target's system (its connection, resolved when
    /// the sink starts).
    pub endpoint: SinkEndpoint,
}

impl SinkTarget {
    /// The sink's name in the progress it records at a Kafka or
    /// PostgreSQL target: its id and `as_of`, so that a sink of another
    /// Freshet (a fresh data directory reuses ids) is not taken for it.
    pub(crate) fn identity(&self) -> String {
        format!("{}@{}", self.id, self.details.as_of)
    }
}

/// How a sink reaches the system it writes to.
#[derive(Clone, Debug)]
pub enum SinkEndpoint {
    /// Files need no connection.
    None,
    /// A Kafka cluster's brokers.
    Kafka(Vec<String>),
    /// A PostgreSQL server (its `Debug` hides the password).
    Postgres(Box<tokio_postgres::Config>),
}

impl SinkEndpoint {
    /// A PostgreSQL server, as a connection names it.
    pub fn postgres(
        host: &str,
        port: u16,
        user: &str,
        password: Option<&str>,
        database: &str,
    ) -> Self {
        let mut config = tokio_postgres::Config::new();
        config.host(host).port(port).user(user).dbname(database);
        if let Some(p) = password {
            config.password(p);
        }
        SinkEndpoint::Postgres(Box::new(config))
    }
}

/// A sink's dataflow, started.
pub struct Started {
    /// Its consolidated, time-ordered changes.
    pub subscription: Subscription,
    /// The sink's own holds on the dataflow's inputs, at the time it was
    /// started at; downgraded as the target commits.
    pub holds: Vec<ReadHold>,
}

/// Starts a sink's dataflow: the server plans it from the catalog.
pub trait DataflowStarter: Send + Sync + 'static {
    /// Start the dataflow reading the sink's inputs at `as_of` (their
    /// contents there first, if `snapshot`; then every change after).
    fn start(&self, as_of: Timestamp, snapshot: bool) -> Result<Started>;
}

/// What one commit at a target did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Committed {
    /// Bytes written (encoded changes and progress).
    pub bytes: u64,
    /// Time spent recording the progress.
    pub progress: Duration,
}

/// How sinks commit.
#[derive(Clone, Copy, Debug)]
pub struct SinkConfig {
    /// How long changes gather before a commit at the target (and how
    /// often progress is recorded when no change comes).
    pub commit_interval: Duration,
    /// Commit early once this many changes gathered.
    pub max_rows: usize,
}

impl Default for SinkConfig {
    fn default() -> Self {
        SinkConfig {
            commit_interval: Duration::from_millis(1000),
            max_rows: 100_000,
        }
    }
}

struct Running {
    status: StatusCell,
    task: tokio::task::JoinHandle<()>,
}

/// The sinks running in this process.
pub struct Sinks {
    storage: Arc<Storage>,
    runtime: tokio::runtime::Handle,
    config: SinkConfig,
    running: Mutex<BTreeMap<GlobalId, Running>>,
}

impl std::fmt::Debug for Sinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sinks")
            .field("running", &self.running.lock().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Sinks {
    /// No sinks yet; their tasks run on `runtime`.
    pub fn new(storage: Arc<Storage>, runtime: tokio::runtime::Handle, config: SinkConfig) -> Self {
        Sinks {
            storage,
            runtime,
            config,
            running: Mutex::new(BTreeMap::new()),
        }
    }

    /// Start exporting for `target` (nothing if it already runs). The task
    /// first reads the target's progress, then starts the dataflow with
    /// `starter` from there.
    pub fn start(&self, target: SinkTarget, starter: Arc<dyn DataflowStarter>) {
        let mut running = self.running.lock();
        if running
            .get(&target.id)
            .is_some_and(|r| !r.task.is_finished())
        {
            return;
        }
        let status = StatusCell::new(target.id);
        let task = self.runtime.spawn(run::run(
            target.clone(),
            starter,
            Arc::clone(&self.storage),
            status.clone(),
            self.config,
        ));
        running.insert(target.id, Running { status, task });
    }

    /// Stop sink `id` (dropped): its task ends, its dataflow and holds go,
    /// and its claim on its inputs' history is released.
    pub fn stop(&self, id: GlobalId) {
        if let Some(r) = self.running.lock().remove(&id) {
            r.task.abort();
        }
        self.storage.release_dependent(id);
    }

    /// Every sink's status.
    pub fn statuses(&self) -> Vec<SinkStatus> {
        self.running
            .lock()
            .values()
            .map(|r| r.status.get())
            .collect()
    }
}

//! Source ingestion.
//!
//! A source's data enters storage the way table writes do: through the
//! transaction log's group commit ([`Storage::commit`]). Each append carries
//! the source's new rows *and* the new row of its progress relation (the
//! tick, offset or log position reached), so the two are durable together
//! or not at all: after any crash, ingestion resumes exactly where the
//! durable data ends. Because source collections share the log's upper
//! with tables, a source that stalls never holds back a read; how stale it
//! is shows in its status.
//!
//! [`Sources`] runs one task per ingesting source, started and stopped by
//! the catalog's implications (boot included); [`shape`] says what a
//! connector writes, from which `CREATE SOURCE` makes its catalog items.

mod datum;
mod error;
mod kafka;
mod load_gen;
mod postgres;
mod progress;
mod status;
mod supervise;
mod webhook;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use freshet_catalog::{Ingestion, SourceConnector, SourceShape};
use freshet_repr::GlobalId;
use freshet_storage::Storage;
use parking_lot::Mutex;
use tokio::sync::watch;

pub use datum::{Datum, Update, write_updates};
pub use error::{Result, SourceError};
pub use kafka::{check_topic, validate_kafka};
pub use postgres::{PostgresEndpoint, TableRequest, drop_slot, new_slot_name, purify, validate};
pub use status::{SourceState, SourceStatus, StatusCell};
pub use webhook::{BadRequest, WebhookAppender, decode as decode_webhook, headers_jsonb};

/// A collection an ingestion writes.
#[derive(Clone, Debug)]
pub struct OutputTarget {
    /// The name upstream knows the relation by (a generator's relation);
    /// empty for a single-relation source, which writes its one relation
    /// itself.
    pub upstream: String,
    /// The collection.
    pub id: GlobalId,
    /// Its columns.
    pub schema: SchemaRef,
}

/// Everything an ingestion needs to run: what to ingest and where to
/// write it.
#[derive(Clone, Debug)]
pub struct IngestionTarget {
    /// The source.
    pub source: GlobalId,
    /// How it ingests.
    pub ingestion: Ingestion,
    /// The collections of its relations, in any order (the connector
    /// matches them to its relations by `upstream`).
    pub outputs: Vec<OutputTarget>,
    /// Its progress relation's collection.
    pub progress: OutputTarget,
    /// Where a PostgreSQL source's upstream is (its connection, with the
    /// password read from its secret).
    pub postgres: Option<PostgresEndpoint>,
    /// A Kafka source's brokers (its connection's).
    pub kafka: Option<Vec<String>>,
}

/// What a connector writes.
pub fn shape(connector: &SourceConnector) -> Result<SourceShape> {
    match connector {
        SourceConnector::LoadGenerator(spec) => Ok(load_gen::shape(spec)),
        SourceConnector::Webhook(spec) => Ok(webhook::shape(spec)),
        SourceConnector::Kafka(spec) => Ok(kafka::shape(spec)),
        SourceConnector::Postgres(_) => Err(SourceError::Internal(
            "a PostgreSQL source's shape comes from its upstream (purify)".into(),
        )),
    }
}

struct Running {
    status: StatusCell,
    stop: watch::Sender<bool>,
    /// A webhook source's way in.
    webhook: Option<WebhookAppender>,
    /// A PostgreSQL source's upstream and replication slot, dropped with
    /// the source once its task (which holds the slot) has ended.
    slot: Option<(PostgresEndpoint, String, tokio::task::JoinHandle<()>)>,
}

/// The running ingestions of this process.
pub struct Sources {
    storage: Arc<Storage>,
    runtime: tokio::runtime::Handle,
    running: Mutex<BTreeMap<GlobalId, Running>>,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sources")
            .field("running", &self.running.lock().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Sources {
    /// Ingestions writing to `storage`, run as tasks on `runtime`.
    pub fn new(storage: Arc<Storage>, runtime: tokio::runtime::Handle) -> Self {
        Sources {
            storage,
            runtime,
            running: Mutex::new(BTreeMap::new()),
        }
    }

    /// Start ingesting for `target` (nothing if it already runs). The task
    /// first reads how far the source durably came, then goes on from
    /// there.
    pub fn start(&self, target: IngestionTarget) -> Result<()> {
        let mut running = self.running.lock();
        if running.contains_key(&target.source) {
            return Ok(());
        }
        let status = StatusCell::new(target.source);
        let (stop, stopped) = watch::channel(false);
        let mut slot = None;
        let webhook = match &target.ingestion.connector {
            SourceConnector::LoadGenerator(spec) => {
                self.runtime.spawn(load_gen::run(
                    Arc::clone(&self.storage),
                    target.clone(),
                    spec.clone(),
                    status.clone(),
                    stopped,
                )?);
                None
            }
            SourceConnector::Webhook(_) => {
                let (appender, task) = webhook::run(
                    Arc::clone(&self.storage),
                    target.clone(),
                    status.clone(),
                    stopped,
                )?;
                self.runtime.spawn(task);
                Some(appender)
            }
            SourceConnector::Kafka(spec) => {
                let brokers = target.kafka.clone().ok_or_else(|| {
                    SourceError::Internal(format!("source {} has no brokers", target.source))
                })?;
                let task = kafka::run(
                    Arc::clone(&self.storage),
                    target.clone(),
                    spec.clone(),
                    brokers,
                    status.clone(),
                    stopped,
                )?;
                self.runtime.spawn(task);
                None
            }
            SourceConnector::Postgres(spec) => {
                let endpoint = target.postgres.clone().ok_or_else(|| {
                    SourceError::Internal(format!(
                        "source {} has no upstream endpoint",
                        target.source
                    ))
                })?;
                let endpoint_for_drop = endpoint.clone();
                let task = postgres::run(
                    Arc::clone(&self.storage),
                    target.clone(),
                    spec.clone(),
                    endpoint,
                    status.clone(),
                    stopped,
                )?;
                let handle = self.runtime.spawn(task);
                slot = Some((endpoint_for_drop, spec.slot.clone(), handle));
                None
            }
        };
        running.insert(
            target.source,
            Running {
                status,
                stop,
                webhook,
                slot,
            },
        );
        tracing::info!(source = %target.source, "ingestion started");
        Ok(())
    }

    /// Stop a dropped source's ingestion, and let go of what it holds
    /// upstream (a PostgreSQL source's replication slot, in the
    /// background). An append already handed to storage may still commit;
    /// nothing after it does.
    pub fn stop(&self, id: GlobalId) {
        if let Some(r) = self.running.lock().remove(&id) {
            let _ = r.stop.send(true);
            tracing::info!(source = %id, "ingestion stopped");
            if let Some((endpoint, slot, task)) = r.slot {
                self.runtime.spawn(async move {
                    let _ = task.await;
                    if let Err(e) = drop_slot(&endpoint, &slot).await {
                        tracing::warn!(%slot, error = %e, "could not drop the upstream replication slot of a dropped source; drop it upstream with pg_drop_replication_slot");
                    }
                });
            }
        }
    }

    /// Wait until source `id` has left `starting` (its snapshot is
    /// durable, or it stalled or failed trying): `CREATE SOURCE` answers
    /// then, so a read right after it sees the snapshot. Returns at once
    /// for a source that is not running.
    pub async fn wait_started(&self, id: GlobalId) -> SourceState {
        let Some(mut changes) = self.running.lock().get(&id).map(|r| r.status.watch()) else {
            return SourceState::Failed;
        };
        loop {
            let state = *changes.borrow_and_update();
            if state != SourceState::Starting {
                return state;
            }
            if changes.changed().await.is_err() {
                return SourceState::Failed;
            }
        }
    }

    /// The way into webhook source `id`, if it runs.
    pub fn webhook(&self, id: GlobalId) -> Option<WebhookAppender> {
        self.running.lock().get(&id).and_then(|r| r.webhook.clone())
    }

    /// The status of every running source.
    pub fn statuses(&self) -> Vec<SourceStatus> {
        self.running
            .lock()
            .values()
            .map(|r| r.status.get())
            .collect()
    }
}

impl Drop for Sources {
    fn drop(&mut self) {
        for (_, r) in std::mem::take(&mut *self.running.lock()) {
            let _ = r.stop.send(true);
        }
    }
}

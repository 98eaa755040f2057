//! Kafka sources: every partition of a topic, read from offsets Freshet
//! keeps itself (the progress relation has one `(partition, offset)` row
//! per partition: the next offset to read), never a consumer group's.
//!
//! One fetch task per partition reads ahead into a channel; the source's
//! task takes whatever is ready, turns records into rows (and, with
//! `ENVELOPE UPSERT`, into the retraction of the key's previous row and the
//! insertion of its new one), and appends them with the new offsets of
//! the partitions they came from in one commit. After a restart reading
//! resumes at the durable offsets: no record twice, none skipped.
//! `ENVELOPE UPSERT` keeps the current row of every key in memory, rebuilt
//! at start from the source's own collection.
//!
//! The Kafka protocol is spoken by `rskafka` (pure Rust; no librdkafka).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{
    Array, BinaryArray, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use freshet_catalog::{KafkaFormat, KafkaSourceSpec, SourceShape};
use freshet_repr::{ColumnDesc, PgType, RelationDesc};
use freshet_storage::{Storage, TableWrite};
use rskafka::client::partition::{OffsetAt, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::RecordAndOffset;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::datum::{Datum, Update, write_updates};
use crate::error::{Result, SourceError};
use crate::status::{SourceState, StatusCell};
use crate::supervise::{Sessions, supervise};
use crate::{IngestionTarget, OutputTarget};

/// How long connecting to the brokers (and any one request) may take
/// before the source counts as stalled.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// How long a fetch waits at the broker for new records.
const FETCH_WAIT_MS: i32 = 250;

/// How many bytes one fetch asks for at most.
const FETCH_MAX_BYTES: i32 = 4 * 1024 * 1024;

/// Records gathered before an append is made even though more are ready.
const MAX_BATCH_RECORDS: usize = 50_000;

/// How often the topic's partitions are listed again (to start reading
/// new ones).
const PARTITION_REFRESH: Duration = Duration::from_secs(5);

/// What a Kafka source writes: `[key,] text | data [, partition] [,
/// offset] [, timestamp]`, and the progress relation `(partition,
/// offset)`.
pub(crate) fn shape(spec: &KafkaSourceSpec) -> SourceShape {
    let value_type = |format: KafkaFormat| match format {
        KafkaFormat::Text => PgType::Text,
        KafkaFormat::Bytes => PgType::Bytea,
        KafkaFormat::Json => PgType::Jsonb,
    };
    let column = |name: &str, ty: PgType, nullable: bool| ColumnDesc {
        name: name.to_string(),
        ty,
        nullable,
    };
    let mut columns = Vec::new();
    if let Some(key) = &spec.key_column {
        columns.push(column(key, value_type(spec.format), !spec.upsert));
    }
    let value = match spec.format {
        KafkaFormat::Text => "text",
        _ => "data",
    };
    columns.push(column(value, value_type(spec.format), true));
    if let Some(p) = &spec.partition_column {
        columns.push(column(p, PgType::Int4, false));
    }
    if let Some(o) = &spec.offset_column {
        columns.push(column(o, PgType::Int8, false));
    }
    if let Some(t) = &spec.timestamp_column {
        columns.push(column(t, PgType::Timestamp, true));
    }
    SourceShape {
        outputs: vec![(String::new(), RelationDesc::new(columns))],
        progress: RelationDesc::new(vec![
            column("partition", PgType::Int4, false),
            column("offset", PgType::Int8, false),
        ]),
    }
}

/// A client of the brokers, with a deadline on every request so that an
/// unreachable cluster shows as an error rather than a wait.
async fn client(brokers: &[String]) -> Result<Client> {
    let backoff = rskafka::BackoffConfig {
        deadline: Some(REQUEST_DEADLINE),
        ..Default::default()
    };
    let build = ClientBuilder::new(brokers.to_vec())
        .client_id("freshet")
        .backoff_config(backoff)
        .build();
    tokio::time::timeout(REQUEST_DEADLINE, build)
        .await
        .map_err(|_| {
            SourceError::Upstream(format!("connecting to Kafka at {brokers:?} timed out"))
        })?
        .map_err(|e| SourceError::Upstream(format!("connecting to Kafka at {brokers:?}: {e}")))
}

/// The partitions of `topic`; `None` if there is no such topic.
async fn partitions(client: &Client, topic: &str) -> Result<Option<Vec<i32>>> {
    let topics = tokio::time::timeout(REQUEST_DEADLINE, client.list_topics())
        .await
        .map_err(|_| SourceError::Upstream("listing Kafka topics timed out".into()))?
        .map_err(|e| SourceError::Upstream(format!("listing Kafka topics: {e}")))?;
    Ok(topics
        .into_iter()
        .find(|t| t.name == topic)
        .map(|t| t.partitions.into_iter().collect()))
}

/// Check that the brokers answer (`CREATE CONNECTION ... TO KAFKA`).
pub async fn validate_kafka(brokers: &[String]) -> Result<()> {
    let client = client(brokers).await?;
    partitions(&client, "").await.map(|_| ())
}

/// Check that `topic` exists (`CREATE SOURCE ... FROM KAFKA`).
pub async fn check_topic(brokers: &[String], topic: &str) -> Result<()> {
    let client = client(brokers).await?;
    match partitions(&client, topic).await? {
        Some(_) => Ok(()),
        None => Err(SourceError::Invalid(format!(
            "topic \"{topic}\" does not exist in the Kafka cluster at {}",
            brokers.join(",")
        ))),
    }
}

/// Build the ingestion task of a Kafka source.
pub(crate) fn run(
    storage: Arc<Storage>,
    target: IngestionTarget,
    spec: KafkaSourceSpec,
    brokers: Vec<String>,
    status: StatusCell,
    stopped: watch::Receiver<bool>,
) -> Result<impl std::future::Future<Output = ()> + Send + 'static> {
    let output = target.outputs.first().cloned().ok_or_else(|| {
        SourceError::Internal(format!("source {} has no collection", target.source))
    })?;
    Ok(async move {
        supervise(Runner {
            storage,
            output,
            progress: target.progress.clone(),
            spec,
            brokers,
            status,
            stopped,
            upsert: HashMap::new(),
        })
        .await
    })
}

/// What a fetch task hands over: a partition's records, or its error.
type Fetched = (i32, rskafka::client::error::Result<Vec<RecordAndOffset>>);

struct Runner {
    storage: Arc<Storage>,
    output: OutputTarget,
    progress: OutputTarget,
    spec: KafkaSourceSpec,
    brokers: Vec<String>,
    status: StatusCell,
    stopped: watch::Receiver<bool>,
    /// `ENVELOPE UPSERT`: the current row of each key (by the key's
    /// bytes).
    upsert: HashMap<Vec<u8>, Vec<Datum>>,
}

impl Sessions for Runner {
    fn stopped(&mut self) -> &mut watch::Receiver<bool> {
        &mut self.stopped
    }

    fn status(&self) -> &StatusCell {
        &self.status
    }

    fn session(&mut self) -> impl std::future::Future<Output = Result<()>> + Send {
        self.consume()
    }
}

impl Runner {
    /// Read the durable offsets (and upsert state), then fetch and append
    /// until stopped or an error.
    async fn consume(&mut self) -> Result<()> {
        let (mut durable, rows) = self.read_durable().await?;
        if self.spec.upsert {
            self.upsert = rows;
        }
        if !durable.is_empty() {
            self.status.resumed_at(describe(&durable));
        }
        let mut offsets = durable.clone();
        let client = Arc::new(client(&self.brokers).await?);
        let (tx, mut rx) = mpsc::channel::<Fetched>(64);
        let mut fetchers = JoinSet::new();
        let mut reading: Vec<i32> = Vec::new();
        self.start_fetchers(&client, &mut offsets, &mut reading, &mut fetchers, &tx)
            .await?;
        self.status.set_state(SourceState::Running, None);
        let mut refresh = tokio::time::interval(PARTITION_REFRESH);
        refresh.tick().await;
        loop {
            tokio::select! {
                first = rx.recv() => {
                    let Some(first) = first else {
                        return Err(SourceError::Internal("every fetch task ended".into()));
                    };
                    let mut ready = vec![first];
                    let mut count = ready[0].1.as_ref().map_or(0, |r| r.len());
                    while count < MAX_BATCH_RECORDS {
                        match rx.try_recv() {
                            Ok(more) => {
                                count += more.1.as_ref().map_or(0, |r| r.len());
                                ready.push(more);
                            }
                            Err(_) => break,
                        }
                    }
                    self.ingest(ready, &mut offsets, &mut durable).await?;
                }
                _ = refresh.tick() => {
                    self.start_fetchers(&client, &mut offsets, &mut reading, &mut fetchers, &tx).await?;
                }
                _ = self.stopped.changed() => return Ok(()),
            }
        }
    }

    /// Start a fetch task for each partition of the topic not yet read.
    async fn start_fetchers(
        &self,
        client: &Arc<Client>,
        offsets: &mut BTreeMap<i32, i64>,
        reading: &mut Vec<i32>,
        fetchers: &mut JoinSet<()>,
        tx: &mpsc::Sender<Fetched>,
    ) -> Result<()> {
        let Some(partitions) = partitions(client, &self.spec.topic).await? else {
            return Err(SourceError::Upstream(format!(
                "topic \"{}\" does not exist",
                self.spec.topic
            )));
        };
        for p in partitions {
            if reading.contains(&p) {
                continue;
            }
            let pc = client
                .partition_client(self.spec.topic.clone(), p, UnknownTopicHandling::Retry)
                .await
                .map_err(|e| SourceError::Upstream(format!("partition {p}: {e}")))?;
            let earliest = pc
                .get_offset(OffsetAt::Earliest)
                .await
                .map_err(|e| SourceError::Upstream(format!("partition {p}: {e}")))?;
            let start = match offsets.get(&p) {
                // Records before the earliest were deleted by retention.
                Some(&o) => o.max(earliest),
                None => earliest,
            };
            offsets.entry(p).or_insert(start);
            reading.push(p);
            let tx = tx.clone();
            fetchers.spawn(async move {
                let mut next = start;
                loop {
                    let fetched = pc
                        .fetch_records(next, 1..FETCH_MAX_BYTES, FETCH_WAIT_MS)
                        .await
                        .map(|(records, _high)| records);
                    let failed = fetched.is_err();
                    if let Ok(records) = &fetched
                        && let Some(last) = records.iter().map(|r| r.offset).max()
                    {
                        next = last + 1;
                    }
                    let empty = fetched.as_ref().is_ok_and(|r| r.is_empty());
                    if !empty && tx.send((p, fetched)).await.is_err() {
                        return;
                    }
                    if failed {
                        return;
                    }
                }
            });
        }
        Ok(())
    }

    /// Turn fetched records into rows and append them with the new
    /// offsets of their partitions (`durable`: the offsets whose progress
    /// rows are durable, updated once the append is).
    async fn ingest(
        &mut self,
        ready: Vec<Fetched>,
        offsets: &mut BTreeMap<i32, i64>,
        durable: &mut BTreeMap<i32, i64>,
    ) -> Result<()> {
        let mut updates: Vec<Update> = Vec::new();
        let mut touched: Vec<i32> = Vec::new();
        // Records read and their key and value bytes (an upsert's record
        // makes two updates; the status counts what came from Kafka).
        let (mut read, mut bytes) = (0u64, 0u64);
        for (partition, fetched) in ready {
            let records = fetched.map_err(|e| {
                SourceError::Upstream(format!("fetching partition {partition}: {e}"))
            })?;
            for r in records {
                // A fetch may start before the offset asked for (a
                // compressed batch is returned whole).
                if offsets.get(&partition).is_some_and(|next| r.offset < *next) {
                    continue;
                }
                let next = r.offset + 1;
                read += 1;
                bytes += (r.record.key.as_ref().map_or(0, Vec::len)
                    + r.record.value.as_ref().map_or(0, Vec::len)) as u64;
                self.record(partition, r, &mut updates)?;
                offsets.insert(partition, next);
                if !touched.contains(&partition) {
                    touched.push(partition);
                }
            }
        }
        let changed: Vec<(i32, i64)> = touched
            .iter()
            .filter_map(|p| offsets.get(p).map(|o| (*p, *o)))
            .collect();
        if changed.is_empty() {
            return Ok(());
        }
        let mut writes = Vec::new();
        if !updates.is_empty() {
            let batch = write_updates(&self.output.schema, &updates)?;
            writes.push(TableWrite {
                id: self.output.id,
                updates: batch,
                staged: Vec::new(),
            });
        }
        let mut progress: Vec<Update> = Vec::new();
        for (p, new) in &changed {
            if let Some(old) = durable.get(p) {
                progress.push((vec![Datum::Int32(*p), Datum::Int64(*old)], -1));
            }
            progress.push((vec![Datum::Int32(*p), Datum::Int64(*new)], 1));
        }
        writes.push(TableWrite {
            id: self.progress.id,
            updates: write_updates(&self.progress.schema, &progress)?,
            staged: Vec::new(),
        });
        self.storage.commit(writes).await?;
        durable.extend(changed);
        self.status.ingested(read, bytes, describe(durable));
        self.status.set_state(SourceState::Running, None);
        Ok(())
    }

    /// The updates one record makes (its bytes move into the row).
    fn record(&mut self, partition: i32, r: RecordAndOffset, out: &mut Vec<Update>) -> Result<()> {
        let offset = r.offset;
        let at = |what: &str| format!("{what} at partition {partition} offset {offset}");
        let format = self.spec.format;
        let decode = |bytes: Option<Vec<u8>>, what: &str| -> Result<Datum> {
            let Some(bytes) = bytes else {
                return Ok(Datum::Null);
            };
            Ok(match format {
                KafkaFormat::Bytes => Datum::Bytes(bytes),
                KafkaFormat::Text => Datum::Text(
                    String::from_utf8(bytes)
                        .map_err(|_| SourceError::Invalid(format!("{} is not UTF-8", at(what))))?,
                ),
                KafkaFormat::Json => {
                    let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
                        SourceError::Invalid(format!("{} is not JSON: {e}", at(what)))
                    })?;
                    Datum::Text(freshet_repr::jsonb::jsonb_text(&v))
                }
            })
        };
        let key = match &self.spec.key_column {
            Some(_) => Some(decode(r.record.key, "the key")?),
            None => None,
        };
        let value = decode(r.record.value, "the value")?;
        let tombstone = value == Datum::Null;
        // What upsert state is keyed by, taken before the key moves into
        // the row.
        let upsert_key = match (self.spec.upsert, &key) {
            (false, _) => None,
            (true, k) => Some(k.as_ref().and_then(key_bytes).ok_or_else(|| {
                SourceError::Invalid(format!(
                    "{} has no key, which ENVELOPE UPSERT needs",
                    at("the record")
                ))
            })?),
        };
        let mut row = Vec::with_capacity(5);
        row.extend(key);
        row.push(value);
        if self.spec.partition_column.is_some() {
            row.push(Datum::Int32(partition));
        }
        if self.spec.offset_column.is_some() {
            row.push(Datum::Int64(offset));
        }
        if self.spec.timestamp_column.is_some() {
            row.push(Datum::Timestamp(r.record.timestamp.timestamp_micros()));
        }
        let Some(key) = upsert_key else {
            out.push((row, 1));
            return Ok(());
        };
        if let Some(old) = self.upsert.remove(&key) {
            out.push((old, -1));
        }
        if !tombstone {
            self.upsert.insert(key, row.clone());
            out.push((row, 1));
        }
        Ok(())
    }

    /// The durable offsets and, for an upsert source, its current rows by
    /// key.
    async fn read_durable(&mut self) -> Result<(BTreeMap<i32, i64>, HashMap<Vec<u8>, Vec<Datum>>)> {
        let at = self.storage.read_ts();
        let _hold = self.storage.acquire_read_hold(self.progress.id, at)?;
        let _hold2 = self.storage.acquire_read_hold(self.output.id, at)?;
        self.storage.wait_for_upper(self.progress.id, at).await?;
        self.storage.wait_for_upper(self.output.id, at).await?;
        let mut offsets = BTreeMap::new();
        for batch in self.storage.snapshot(self.progress.id, at)? {
            let (Some(p), Some(o)) = (
                batch.column(0).as_any().downcast_ref::<Int32Array>(),
                batch.column(1).as_any().downcast_ref::<Int64Array>(),
            ) else {
                return Err(SourceError::Internal("unexpected progress columns".into()));
            };
            for i in 0..batch.num_rows() {
                offsets.insert(p.value(i), o.value(i));
            }
        }
        let mut rows = HashMap::new();
        if self.spec.upsert {
            for batch in self.storage.snapshot(self.output.id, at)? {
                for row in batch_rows(&batch)? {
                    if let Some(key) = row.first().and_then(key_bytes) {
                        rows.insert(key, row);
                    }
                }
            }
        }
        Ok((offsets, rows))
    }
}

/// A key's bytes (its text's, for TEXT and JSON keys), which upsert state
/// is keyed by; `None` for a missing key.
fn key_bytes(key: &Datum) -> Option<Vec<u8>> {
    match key {
        Datum::Text(s) => Some(s.as_bytes().to_vec()),
        Datum::Bytes(b) => Some(b.clone()),
        _ => None,
    }
}

/// How far each partition came, for the status: `p0:17,p1:4`.
fn describe(offsets: &BTreeMap<i32, i64>) -> String {
    offsets
        .iter()
        .map(|(p, o)| format!("{p}:{o}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The rows of a batch of a Kafka source's collection, as data.
fn batch_rows(batch: &RecordBatch) -> Result<Vec<Vec<Datum>>> {
    let columns: Vec<&dyn Array> = batch.columns().iter().map(|c| c.as_ref()).collect();
    (0..batch.num_rows())
        .map(|i| columns.iter().map(|c| datum_at(*c, i)).collect())
        .collect()
}

fn datum_at(column: &dyn Array, i: usize) -> Result<Datum> {
    if column.is_null(i) {
        return Ok(Datum::Null);
    }
    let any = column.as_any();
    if let Some(a) = any.downcast_ref::<StringArray>() {
        return Ok(Datum::Text(a.value(i).to_string()));
    }
    if let Some(a) = any.downcast_ref::<BinaryArray>() {
        return Ok(Datum::Bytes(a.value(i).to_vec()));
    }
    if let Some(a) = any.downcast_ref::<Int32Array>() {
        return Ok(Datum::Int32(a.value(i)));
    }
    if let Some(a) = any.downcast_ref::<Int64Array>() {
        return Ok(Datum::Int64(a.value(i)));
    }
    if let Some(a) = any.downcast_ref::<TimestampMicrosecondArray>() {
        return Ok(Datum::Timestamp(a.value(i)));
    }
    Err(SourceError::Internal(format!(
        "a Kafka source column of type {}",
        column.data_type()
    )))
}

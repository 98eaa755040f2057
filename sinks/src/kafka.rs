//! The Kafka target: each change of the upsert or Debezium envelope is one
//! JSON message ([`crate::json`]) in the sink's topic, on the partition
//! its key hashes to (Kafka's own murmur2 partitioner, so Java clients
//! agree on where a key lives), and after each committed range a record
//! in the sink's progress topic says: every change below `frontier` is in
//! the topic, and this sink's messages after it start at `offsets`.
//!
//! Kafka brokers without transactions (tansu, for one) cannot make the
//! messages and the progress record one atomic write, so exactly-once
//! comes from reading back at start: every message carries its sink and
//! its Freshet time in headers, and a restart scans the topic from the
//! last progress record's offsets for this sink's messages at or after its
//! frontier. Those are already delivered; when the range is exported again
//! they are left out, and only what never reached the topic is sent. Within
//! a time a key has at most one change, so `(time, key)` names a message.
//!
//! Produce requests are never retried by the client (a retried request
//! whose first attempt did land would repeat its messages): a failed
//! produce stalls the sink, whose next attempt starts over from that scan.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use arrow::array::RecordBatch;
use freshet_catalog::KafkaSinkSpec;
use freshet_repr::Timestamp;
use rskafka::client::partition::{Compression, OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record;
use serde::{Deserialize, Serialize};

use crate::error::{Result, SinkError};
use crate::json::{JsonEncoder, Message};
use crate::{Committed, SinkTarget};

/// How long connecting (and any one request) may take.
const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// Bytes one fetch asks for at most.
const FETCH_MAX_BYTES: i32 = 4 * 1024 * 1024;

/// Bytes of messages one produce request carries at most (below the
/// brokers' default 1 MiB batch limit).
const PRODUCE_MAX_BYTES: usize = 512 * 1024;

/// How many progress records are read per step when looking back for
/// this sink's latest one.
const PROGRESS_WINDOW: i64 = 64;

/// The header naming the sink that wrote a message.
pub const SINK_HEADER: &str = "freshet-sink";

/// The header holding a message's Freshet time.
pub const TIME_HEADER: &str = "freshet-time";

/// A record of the progress topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// The sink (its identity: id and `as_of`, so that a sink of another
    /// Freshet with the same id is not taken for this one).
    pub sink: String,
    /// Every change at a time below this is in the topic (`None`: the
    /// sink has started but committed nothing).
    pub frontier: Option<Timestamp>,
    /// Per partition of the topic: where this sink's messages after
    /// `frontier` start.
    pub offsets: Vec<i64>,
}

/// A Kafka sink's topics, opened.
pub struct KafkaTarget {
    identity: String,
    spec: KafkaSinkSpec,
    encoder: JsonEncoder,
    /// Reads (and creates topics), retrying as the client does.
    reader: Client,
    /// Produces, never retrying a request by itself.
    producers: Vec<PartitionClient>,
    progress: PartitionClient,
    offsets: Vec<i64>,
    /// This sink's messages found in the topic at or after the frontier.
    present: HashSet<(Timestamp, Vec<u8>)>,
}

impl KafkaTarget {
    /// Connect to `brokers` for sink `target`, creating its
    /// topics if missing.
    pub async fn open(
        target: &SinkTarget,
        spec: &KafkaSinkSpec,
        brokers: &[String],
    ) -> Result<Self> {
        let details = &target.details;
        let reader = client(brokers, true).await?;
        let partitions = ensure_topics(&reader, spec).await?;
        if partitions.is_empty() {
            return Err(SinkError::Target(format!(
                "Kafka topic \"{}\" has no partitions",
                spec.topic
            )));
        }
        let producer = client(brokers, false).await?;
        let mut producers = Vec::with_capacity(partitions.len());
        for p in &partitions {
            producers.push(partition_client(&producer, &spec.topic, *p).await?);
        }
        let progress = partition_client(&producer, &spec.progress_topic, 0).await?;
        Ok(KafkaTarget {
            identity: target.identity(),
            spec: spec.clone(),
            encoder: JsonEncoder::new(details)?,
            reader,
            producers,
            progress,
            offsets: vec![0; partitions.len()],
            present: HashSet::new(),
        })
    }

    /// Read this sink's latest progress record (writing a first one if
    /// there is none, so that a crash before the first commit still
    /// leaves offsets to scan from), then scan the topic after it for the
    /// messages already delivered. Returns the frontier to resume from.
    pub async fn recover(&mut self) -> Result<Option<Timestamp>> {
        let latest = self.latest_progress().await?;
        let progress = match latest {
            Some(p) => p,
            None => {
                let mut offsets = Vec::with_capacity(self.producers.len());
                for p in 0..self.producers.len() {
                    let pc = self.read_partition(&self.spec.topic, p as i32).await?;
                    offsets.push(offset_range(&pc).await?.1);
                }
                let first = Progress {
                    sink: self.identity.clone(),
                    frontier: None,
                    offsets,
                };
                self.write_progress(&first).await?;
                first
            }
        };
        self.offsets = progress.offsets.clone();
        self.offsets.resize(self.producers.len(), 0);
        self.present.clear();
        for p in 0..self.producers.len() {
            self.scan(p, progress.frontier).await?;
        }
        if !self.present.is_empty() {
            tracing::info!(
                sink = %self.identity,
                delivered = self.present.len(),
                "messages after the sink's progress are in the topic already; they are not sent again"
            );
        }
        Ok(progress.frontier)
    }

    /// Send the changes at times in `[lower, upper)` (`batches`, rows of
    /// the sink's shaped schema), leaving out those already in the
    /// topic, then record `upper` as the frontier.
    pub async fn commit(
        &mut self,
        _lower: Timestamp,
        upper: Timestamp,
        batches: &[RecordBatch],
    ) -> Result<Committed> {
        let partitions = self.producers.len();
        let mut outgoing: Vec<Vec<Record>> = vec![Vec::new(); partitions];
        let mut bytes = 0u64;
        for batch in batches {
            for message in self.encoder.encode(batch)? {
                if !self.present.is_empty()
                    && self.present.contains(&(message.time, message.key.clone()))
                {
                    continue;
                }
                let p = partition_of(&message.key, partitions);
                bytes += (message.key.len() + message.value.as_ref().map_or(0, |v| v.len())) as u64;
                outgoing[p].push(self.record(message));
            }
        }
        let sends = outgoing
            .into_iter()
            .zip(&self.producers)
            .map(|(records, producer)| produce(producer, records));
        let last = futures::future::try_join_all(sends).await?;
        for (p, last) in last.into_iter().enumerate() {
            if let Some(offset) = last {
                self.offsets[p] = offset + 1;
            }
        }
        let progress = Progress {
            sink: self.identity.clone(),
            frontier: Some(upper),
            offsets: self.offsets.clone(),
        };
        let began = std::time::Instant::now();
        bytes += self.write_progress(&progress).await?;
        self.present.retain(|(t, _)| *t >= upper);
        Ok(Committed {
            bytes,
            progress: began.elapsed(),
        })
    }

    fn record(&self, message: Message) -> Record {
        Record {
            key: Some(message.key),
            value: message.value,
            headers: BTreeMap::from([
                (SINK_HEADER.to_string(), self.identity.clone().into_bytes()),
                (
                    TIME_HEADER.to_string(),
                    message.time.to_string().into_bytes(),
                ),
            ]),
            timestamp: rskafka::chrono::Utc::now(),
        }
    }

    async fn write_progress(&self, progress: &Progress) -> Result<u64> {
        let value = serde_json::to_vec(progress)
            .map_err(|e| SinkError::Internal(format!("progress record: {e}")))?;
        let len = (value.len() + self.identity.len()) as u64;
        let record = Record {
            key: Some(self.identity.clone().into_bytes()),
            value: Some(value),
            headers: BTreeMap::new(),
            timestamp: rskafka::chrono::Utc::now(),
        };
        produce(&self.progress, vec![record]).await?;
        Ok(len)
    }

    /// This sink's latest record in the progress topic, looking back from
    /// its end.
    async fn latest_progress(&self) -> Result<Option<Progress>> {
        let pc = self.read_partition(&self.spec.progress_topic, 0).await?;
        let (earliest, mut end) = offset_range(&pc).await?;
        while end > earliest {
            let start = (end - PROGRESS_WINDOW).max(earliest);
            let mut found = None;
            for (_, record) in read_range(&pc, start, end).await? {
                if record.key.as_deref() == Some(self.identity.as_bytes()) {
                    found = record.value;
                }
            }
            if let Some(value) = found {
                let progress: Progress = serde_json::from_slice(&value).map_err(|e| {
                    SinkError::Fatal(format!(
                        "the sink's record in progress topic \"{}\" cannot be read: {e}",
                        self.spec.progress_topic
                    ))
                })?;
                return Ok(Some(progress));
            }
            end = start;
        }
        Ok(None)
    }

    /// Collect this sink's messages in partition `p` from its recorded
    /// offset on, at or after `frontier`.
    async fn scan(&mut self, p: usize, frontier: Option<Timestamp>) -> Result<()> {
        let pc = self.read_partition(&self.spec.topic, p as i32).await?;
        let (earliest, end) = offset_range(&pc).await?;
        let start = self.offsets[p].max(earliest);
        tracing::debug!(sink = %self.identity, partition = p, start, end, "scanning the topic for delivered messages");
        for (offset, record) in read_range(&pc, start, end).await? {
            let ours = record.headers.get(SINK_HEADER).map(Vec::as_slice)
                == Some(self.identity.as_bytes());
            let time = record
                .headers
                .get(TIME_HEADER)
                .and_then(|t| std::str::from_utf8(t).ok())
                .and_then(|t| t.parse::<Timestamp>().ok());
            if let (true, Some(time), Some(key)) = (ours, time, record.key) {
                if frontier.is_none_or(|f| time >= f) {
                    self.present.insert((time, key));
                }
                self.offsets[p] = offset + 1;
            }
        }
        Ok(())
    }

    async fn read_partition(&self, topic: &str, p: i32) -> Result<PartitionClient> {
        partition_client(&self.reader, topic, p).await
    }
}

/// Check at `CREATE SINK` that the brokers answer and the topics exist or
/// can be created.
pub async fn check_target(spec: &KafkaSinkSpec, brokers: &[String]) -> Result<()> {
    let client = client(brokers, true).await?;
    ensure_topics(&client, spec).await.map(|_| ())
}

/// The partition Kafka's default partitioner puts `key` in.
fn partition_of(key: &[u8], partitions: usize) -> usize {
    ((murmur2(key) & 0x7fff_ffff) as usize) % partitions.max(1)
}

/// Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`).
fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = 0x9747_b28c ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, b) in rest.iter().enumerate().rev() {
            h ^= u32::from(*b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// A client of the brokers; `retry`: whether requests are retried (with
/// a deadline) by the client itself.
async fn client(brokers: &[String], retry: bool) -> Result<Client> {
    let backoff = rskafka::BackoffConfig {
        deadline: Some(if retry {
            REQUEST_DEADLINE
        } else {
            Duration::ZERO
        }),
        ..Default::default()
    };
    let build = ClientBuilder::new(brokers.to_vec())
        .client_id("freshet-sink")
        .backoff_config(backoff)
        .build();
    tokio::time::timeout(REQUEST_DEADLINE, build)
        .await
        .map_err(|_| SinkError::Target(format!("connecting to Kafka at {brokers:?} timed out")))?
        .map_err(|e| SinkError::Target(format!("connecting to Kafka at {brokers:?}: {e}")))
}

async fn partition_client(client: &Client, topic: &str, p: i32) -> Result<PartitionClient> {
    request(client.partition_client(topic, p, UnknownTopicHandling::Retry)).await
}

/// `f` within the request deadline, its error as a target error.
async fn request<T>(
    f: impl std::future::Future<Output = std::result::Result<T, rskafka::client::error::Error>>,
) -> Result<T> {
    tokio::time::timeout(REQUEST_DEADLINE, f)
        .await
        .map_err(|_| SinkError::Target("a Kafka request timed out".into()))?
        .map_err(|e| SinkError::Target(format!("Kafka: {e}")))
}

/// The topic's partitions, creating the topic and the progress topic if
/// missing.
async fn ensure_topics(client: &Client, spec: &KafkaSinkSpec) -> Result<Vec<i32>> {
    let mut data = None;
    for (topic, partitions) in [(&spec.topic, spec.partitions), (&spec.progress_topic, 1)] {
        let found = match topic_partitions(client, topic).await? {
            Some(p) => p,
            None => {
                tracing::info!(topic, partitions, "creating the sink's topic");
                let controller = request(async { client.controller_client() }).await?;
                match controller
                    .create_topic(topic.as_str(), partitions, spec.replication_factor, 5_000)
                    .await
                {
                    Ok(())
                    | Err(rskafka::client::error::Error::ServerError {
                        protocol_error: rskafka::client::error::ProtocolError::TopicAlreadyExists,
                        ..
                    }) => {}
                    Err(e) => {
                        return Err(SinkError::Target(format!(
                            "cannot create Kafka topic \"{topic}\": {e}"
                        )));
                    }
                }
                wait_for_topic(client, topic).await?
            }
        };
        data.get_or_insert(found);
    }
    let mut partitions = data.unwrap_or_default();
    partitions.sort_unstable();
    Ok(partitions)
}

async fn topic_partitions(client: &Client, topic: &str) -> Result<Option<Vec<i32>>> {
    let topics = request(client.list_topics()).await?;
    Ok(topics
        .into_iter()
        .find(|t| t.name == topic)
        .map(|t| t.partitions.into_iter().collect()))
}

async fn wait_for_topic(client: &Client, topic: &str) -> Result<Vec<i32>> {
    let deadline = tokio::time::Instant::now() + REQUEST_DEADLINE;
    loop {
        if let Some(p) = topic_partitions(client, topic).await?
            && !p.is_empty()
        {
            return Ok(p);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(SinkError::Target(format!(
                "Kafka topic \"{topic}\" was created but does not show"
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Produce `records` to `producer` in requests of at most
/// [`PRODUCE_MAX_BYTES`], in order; the offset of the last one.
async fn produce(producer: &PartitionClient, records: Vec<Record>) -> Result<Option<i64>> {
    let mut last = None;
    let mut chunk = Vec::new();
    let mut size = 0;
    let mut records = records.into_iter().peekable();
    while let Some(record) = records.next() {
        size += record.approximate_size();
        chunk.push(record);
        if size >= PRODUCE_MAX_BYTES || records.peek().is_none() {
            let offsets =
                request(producer.produce(std::mem::take(&mut chunk), Compression::NoCompression))
                    .await?;
            last = offsets.last().copied().or(last);
            size = 0;
        }
    }
    Ok(last)
}

/// The first offset of `pc` and the offset after its last record. The
/// end is the high watermark a fetch reports, not ListOffsets' answer
/// (which tansu gives as the last batch's base offset + 1).
async fn offset_range(pc: &PartitionClient) -> Result<(i64, i64)> {
    let earliest = request(pc.get_offset(OffsetAt::Earliest)).await?;
    let (_, end) = request(pc.fetch_records(earliest, 1..2, 0)).await?;
    Ok((earliest, end.max(earliest)))
}

/// The records of `pc` at offsets in `[start, end)`.
async fn read_range(pc: &PartitionClient, start: i64, end: i64) -> Result<Vec<(i64, Record)>> {
    let mut out = Vec::new();
    let mut next = start;
    while next < end {
        let (records, _) = request(pc.fetch_records(next, 1..FETCH_MAX_BYTES, 0)).await?;
        let before = next;
        for r in records {
            if r.offset >= next && r.offset < end {
                next = r.offset + 1;
                out.push((r.offset, r.record));
            }
        }
        if next == before {
            break;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_land_where_kafka_puts_them() {
        // Values from Kafka's own tests of `Utils.murmur2`.
        assert_eq!(murmur2(b"21"), -973_932_308);
        assert_eq!(murmur2(b"foobar"), -790_332_482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985_981_536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1_486_304_829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58_897_971
        );
        assert_eq!(murmur2(b"abc"), 479_470_107);
        assert!(partition_of(b"{\"k\":1}", 3) < 3);
        assert_eq!(partition_of(b"x", 1), 0);
    }
}

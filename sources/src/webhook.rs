//! Webhook sources: each accepted HTTP request becomes rows of the
//! source's relation.
//!
//! The HTTP endpoint (in the server) decodes a request with [`decode`]
//! and hands the rows to the source's [`WebhookAppender`]. One task per
//! webhook source appends them: it takes every request waiting, writes
//! their rows and the new progress row (`offset`: requests accepted so
//! far) in one group commit, and answers each request once that commit is
//! durable. Concurrent requests so share commits instead of queueing for
//! one each, and a `200 OK` always means the rows survive a crash.

use std::collections::BTreeMap;
use std::sync::Arc;

use freshet_catalog::{SourceShape, WebhookBodyFormat, WebhookSpec};
use freshet_repr::jsonb::jsonb_text;
use freshet_repr::{ColumnDesc, PgType, RelationDesc};
use freshet_storage::{Storage, TableWrite};
use tokio::sync::{mpsc, oneshot, watch};

use crate::datum::{Datum, Update, write_updates};
use crate::error::{Result, SourceError};
use crate::status::{SourceState, StatusCell};
use crate::{IngestionTarget, progress};

/// What a webhook source writes.
pub(crate) fn shape(spec: &WebhookSpec) -> SourceShape {
    let column = |name: &str, ty: PgType, nullable: bool| ColumnDesc {
        name: name.into(),
        ty,
        nullable,
    };
    let mut columns = vec![column(
        "body",
        match spec.body_format {
            WebhookBodyFormat::Text => PgType::Text,
            WebhookBodyFormat::Json | WebhookBodyFormat::JsonArray => PgType::Jsonb,
            WebhookBodyFormat::Bytes => PgType::Bytea,
        },
        false,
    )];
    if spec.include_headers.is_some() {
        columns.push(column("headers", PgType::Jsonb, false));
    }
    for h in &spec.header_columns {
        columns.push(column(
            &h.column,
            if h.bytes { PgType::Bytea } else { PgType::Text },
            true,
        ));
    }
    SourceShape {
        outputs: vec![(String::new(), RelationDesc::new(columns))],
        progress: RelationDesc::new(vec![column("offset", PgType::Int8, false)]),
    }
}

/// Why a request's body was refused (answered with 400).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadRequest(pub String);

/// A request's headers as the `headers` column and a `CHECK` see them: a
/// JSON object of lower-case names (repeated headers joined by `,`, as
/// HTTP allows), as canonical `jsonb` text.
pub fn headers_jsonb<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    keep: impl Fn(&str) -> bool,
) -> String {
    let mut by_name: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        if !keep(&name) {
            continue;
        }
        let value = String::from_utf8_lossy(value);
        by_name
            .entry(name)
            .and_modify(|v| {
                v.push(',');
                v.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    let object: serde_json::Map<String, serde_json::Value> = by_name
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    jsonb_text(&serde_json::Value::Object(object))
}

/// The rows one request becomes, or why its body is refused.
pub fn decode<'a>(
    spec: &WebhookSpec,
    body: &[u8],
    headers: impl IntoIterator<Item = (&'a str, &'a [u8])> + Clone,
) -> std::result::Result<Vec<Vec<Datum>>, BadRequest> {
    let bodies: Vec<Datum> = match spec.body_format {
        WebhookBodyFormat::Bytes => vec![Datum::Bytes(body.to_vec())],
        WebhookBodyFormat::Text => vec![Datum::Text(utf8(body)?.to_string())],
        WebhookBodyFormat::Json => vec![Datum::Text(jsonb_text(&json(body)?))],
        WebhookBodyFormat::JsonArray => match json(body)? {
            serde_json::Value::Array(items) => {
                items.iter().map(|v| Datum::Text(jsonb_text(v))).collect()
            }
            other => vec![Datum::Text(jsonb_text(&other))],
        },
    };
    let mut extra = Vec::new();
    if let Some(filter) = &spec.include_headers {
        extra.push(Datum::Text(headers_jsonb(headers.clone(), |n| {
            filter.keeps(n)
        })));
    }
    for column in &spec.header_columns {
        let values: Vec<&[u8]> = headers
            .clone()
            .into_iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(&column.header))
            .map(|(_, v)| v)
            .collect();
        extra.push(match values.as_slice() {
            [] => Datum::Null,
            values => {
                let joined = values.join(&b","[..]);
                if column.bytes {
                    Datum::Bytes(joined)
                } else {
                    Datum::Text(
                        String::from_utf8(joined).map_err(|_| {
                            BadRequest(format!(
                                "header {} is not valid UTF-8 (INCLUDE HEADER ... BYTES keeps it as bytes)",
                                column.header
                            ))
                        })?,
                    )
                }
            }
        });
    }
    Ok(bodies
        .into_iter()
        .map(|b| {
            let mut row = Vec::with_capacity(1 + extra.len());
            row.push(b);
            row.extend(extra.iter().cloned());
            row
        })
        .collect())
}

fn utf8(body: &[u8]) -> std::result::Result<&str, BadRequest> {
    std::str::from_utf8(body).map_err(|e| BadRequest(format!("body is not valid UTF-8: {e}")))
}

fn json(body: &[u8]) -> std::result::Result<serde_json::Value, BadRequest> {
    serde_json::from_slice(body).map_err(|e| BadRequest(format!("body is not valid JSON: {e}")))
}

/// One request waiting to be appended, and where to say how it went.
struct Pending {
    rows: Vec<Vec<Datum>>,
    bytes: u64,
    done: oneshot::Sender<Result<(), String>>,
}

/// The way into a webhook source's append task.
#[derive(Clone, Debug)]
pub struct WebhookAppender {
    tx: mpsc::Sender<PendingBox>,
}

/// [`Pending`], boxed for the channel.
struct PendingBox(Box<Pending>);

impl std::fmt::Debug for PendingBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingBox")
    }
}

/// Requests waiting for their append, at most; more get 503 (the client
/// retries), so a flood cannot grow memory without bound.
const QUEUE: usize = 4_096;

/// Rows one append carries, at most.
const MAX_ROWS_PER_APPEND: usize = 100_000;

impl WebhookAppender {
    /// Append one request's rows (`bytes`: its body's size); returns once
    /// they are durable. `Err`: why not (the request was not appended).
    pub async fn append(&self, rows: Vec<Vec<Datum>>, bytes: u64) -> Result<(), String> {
        let (done, result) = oneshot::channel();
        self.tx
            .try_send(PendingBox(Box::new(Pending { rows, bytes, done })))
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => "too many requests waiting".to_string(),
                mpsc::error::TrySendError::Closed(_) => "the source is not running".to_string(),
            })?;
        result
            .await
            .map_err(|_| "the source stopped before the request was appended".to_string())?
    }
}

/// Start the append task of a webhook source; returns the way in.
pub(crate) fn run(
    storage: Arc<Storage>,
    target: IngestionTarget,
    status: StatusCell,
    stopped: watch::Receiver<bool>,
) -> Result<(WebhookAppender, impl Future<Output = ()> + Send + 'static)> {
    let [output] = target.outputs.as_slice() else {
        return Err(SourceError::Internal(format!(
            "webhook source {} must write exactly one relation",
            target.source
        )));
    };
    let output = output.clone();
    let (tx, rx) = mpsc::channel(QUEUE);
    let task = async move {
        Appender {
            storage,
            target,
            output,
            status,
            stopped,
            rx,
        }
        .run()
        .await
    };
    Ok((WebhookAppender { tx }, task))
}

struct Appender {
    storage: Arc<Storage>,
    target: IngestionTarget,
    output: crate::OutputTarget,
    status: StatusCell,
    stopped: watch::Receiver<bool>,
    rx: mpsc::Receiver<PendingBox>,
}

impl Appender {
    async fn run(mut self) {
        // Requests accepted so far, from the progress relation.
        let mut offset = loop {
            match self.resume_point().await {
                Ok(n) => break n,
                Err(e) => {
                    if self.fatal(&e) || self.pause().await {
                        return;
                    }
                }
            }
        };
        if let Some(n) = offset {
            self.status.resumed_at(n.to_string());
        }
        self.status.set_state(SourceState::Running, None);
        loop {
            let first = tokio::select! {
                r = self.rx.recv() => match r {
                    Some(p) => p,
                    None => return,
                },
                _ = self.stopped.changed() => return,
            };
            let mut batch = vec![first.0];
            let mut rows = batch[0].rows.len();
            while rows < MAX_ROWS_PER_APPEND {
                match self.rx.try_recv() {
                    Ok(p) => {
                        rows += p.0.rows.len();
                        batch.push(p.0);
                    }
                    Err(_) => break,
                }
            }
            match self.append(offset, &batch).await {
                Ok(after) => {
                    offset = Some(after);
                    self.status.set_state(SourceState::Running, None);
                    for p in batch {
                        let _ = p.done.send(Ok(()));
                    }
                }
                Err(e) => {
                    let message = e.to_string();
                    for p in batch {
                        let _ = p.done.send(Err(message.clone()));
                    }
                    if self.fatal(&e) {
                        return;
                    }
                    // What is durable is unknown after a failed commit
                    // (it may have landed): read the offset again.
                    offset = match self.resume_point().await {
                        Ok(n) => n,
                        Err(_) => return,
                    };
                }
            }
        }
    }

    /// Requests durably accepted so far (`None`: none ever).
    async fn resume_point(&self) -> Result<Option<u64>> {
        progress::read_offset(&self.storage, &self.target.progress).await
    }

    /// Append `batch`'s rows and the progress row in one commit; returns
    /// the new offset.
    async fn append(&self, offset: Option<u64>, batch: &[Box<Pending>]) -> Result<u64> {
        let updates: Vec<Update> = batch
            .iter()
            .flat_map(|p| p.rows.iter().map(|r| (r.clone(), 1)))
            .collect();
        let after = offset.unwrap_or(0) + batch.len() as u64;
        let data = write_updates(&self.output.schema, &updates)?;
        let old = offset.map(|n| vec![Datum::Int64(i64::try_from(n).unwrap_or(i64::MAX))]);
        let new = vec![Datum::Int64(i64::try_from(after).unwrap_or(i64::MAX))];
        let writes = vec![
            TableWrite {
                id: self.output.id,
                updates: data,
                staged: Vec::new(),
            },
            TableWrite {
                id: self.target.progress.id,
                updates: write_updates(
                    &self.target.progress.schema,
                    &progress::replace(old.as_deref(), new),
                )?,
                staged: Vec::new(),
            },
        ];
        self.storage.commit(writes).await?;
        self.status.ingested(
            updates.len() as u64,
            batch.iter().map(|p| p.bytes).sum(),
            after.to_string(),
        );
        Ok(after)
    }

    /// Whether `e` ends the task ([`crate::supervise::fatal`]).
    fn fatal(&self, e: &SourceError) -> bool {
        crate::supervise::fatal(&self.status, e)
    }

    /// Wait a moment before retrying, or until stopped (then `true`).
    async fn pause(&mut self) -> bool {
        crate::supervise::pause(&mut self.stopped, std::time::Duration::from_millis(250)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use freshet_catalog::{WebhookHeaderColumn, WebhookHeaderFilter};

    fn spec(format: WebhookBodyFormat) -> WebhookSpec {
        WebhookSpec {
            body_format: format,
            include_headers: Some(WebhookHeaderFilter {
                allow: Vec::new(),
                block: vec!["authorization".into()],
            }),
            header_columns: vec![WebhookHeaderColumn {
                header: "x-id".into(),
                column: "id".into(),
                bytes: false,
            }],
            check: None,
        }
    }

    #[test]
    fn decodes_bodies_and_headers() {
        let headers: Vec<(&str, &[u8])> = vec![
            ("Authorization", b"Bearer s3cret"),
            ("X-Id", b"7"),
            ("x-tag", b"a"),
            ("X-Tag", b"b"),
        ];
        let rows = decode(
            &spec(WebhookBodyFormat::JsonArray),
            br#"[{"b":1,"a":2}, 3]"#,
            headers.iter().copied(),
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0][0], Datum::Text(r#"{"a": 2, "b": 1}"#.into()));
        assert_eq!(rows[1][0], Datum::Text("3".into()));
        assert_eq!(
            rows[0][1],
            Datum::Text(r#"{"x-id": "7", "x-tag": "a,b"}"#.into())
        );
        assert_eq!(rows[0][2], Datum::Text("7".into()));
        let e = decode(
            &spec(WebhookBodyFormat::Json),
            b"{nope",
            headers.iter().copied(),
        );
        assert!(e.unwrap_err().0.contains("not valid JSON"));
        let e = decode(
            &spec(WebhookBodyFormat::Text),
            b"\xff",
            headers.iter().copied(),
        );
        assert!(e.unwrap_err().0.contains("UTF-8"));
        let rows = decode(&spec(WebhookBodyFormat::Bytes), b"\xff", std::iter::empty()).unwrap();
        assert_eq!(rows[0][0], Datum::Bytes(vec![0xff]));
        assert_eq!(rows[0][2], Datum::Null);
    }
}

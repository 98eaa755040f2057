//! The few pgwire operations the benchmark needs, identical for both
//! servers. Everything goes through the simple query protocol with literal
//! SQL so that Freshet and PostgreSQL see exactly the same statements.

use std::time::Duration;

use bytes::Bytes;
use futures::SinkExt;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

use crate::error::{Context, Result, failed};

/// COPY data is sent in chunks of this size, as `psql \copy` does, instead
/// of one message of tens of megabytes.
const COPY_CHUNK: usize = 1 << 20;

/// Open a connection and drive it on the runtime.
pub async fn connect(conn_str: &str, who: &str) -> Result<Client> {
    let (client, connection) = tokio_postgres::connect(conn_str, NoTls)
        .await
        .context(format!("connect to {who} ({conn_str})"))?;
    tokio::spawn(async move {
        // The error, if any, surfaces on the next statement of the client.
        let _ = connection.await;
    });
    Ok(client)
}

/// Connect, retrying until `timeout`: a server may accept TCP connections a
/// moment before it serves pgwire sessions.
pub async fn connect_retrying(conn_str: &str, who: &str, timeout: Duration) -> Result<Client> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match connect(conn_str, who).await {
            Ok(client) => return Ok(client),
            Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Run one statement and return its affected-row count (0 for DDL).
pub async fn exec(client: &Client, sql: &str, who: &str) -> Result<u64> {
    let messages = client
        .simple_query(sql)
        .await
        .context(format!("{who}: {}", abbreviate(sql)))?;
    Ok(messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::CommandComplete(n) => Some(*n),
            _ => None,
        })
        .sum())
}

/// Run a query and return its rows as text (`None` = NULL).
pub async fn rows(client: &Client, sql: &str, who: &str) -> Result<Vec<Vec<Option<String>>>> {
    let messages = client
        .simple_query(sql)
        .await
        .context(format!("{who}: {}", abbreviate(sql)))?;
    Ok(messages
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect())
            }
            _ => None,
        })
        .collect())
}

/// `COPY ... FROM STDIN` with text-format `data`; checks the row count the
/// server reports so that a silently short load cannot skew the results.
pub async fn copy_in(
    client: &Client,
    sql: &str,
    data: Bytes,
    rows: usize,
    who: &str,
) -> Result<()> {
    let what = format!("{who}: {sql}");
    let sink = client
        .copy_in::<_, Bytes>(sql)
        .await
        .context(what.clone())?;
    futures::pin_mut!(sink);
    let mut offset = 0;
    while offset < data.len() {
        let end = (offset + COPY_CHUNK).min(data.len());
        sink.send(data.slice(offset..end))
            .await
            .context(what.clone())?;
        offset = end;
    }
    let copied = sink.finish().await.context(what.clone())?;
    if copied != rows as u64 {
        return failed(format!(
            "{what}: server reported {copied} rows, sent {rows}"
        ));
    }
    Ok(())
}

/// The first 120 characters of a statement, for error messages about
/// 10,000-row statements.
fn abbreviate(sql: &str) -> String {
    match sql.char_indices().nth(120) {
        Some((i, _)) => format!("{}...", &sql[..i]),
        None => sql.to_string(),
    }
}

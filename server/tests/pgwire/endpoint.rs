//! One server under test as the comparison harnesses see it: a connection
//! that runs statements with the simple query protocol, rendering every
//! value as text, and reconnects after a timeout or a broken connection
//! (a timed-out statement may still occupy the old one).

use std::time::Duration;

use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

/// The rows of a successful statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Rows {
    /// Columns of the last row description (0 for statements without rows).
    pub columns: usize,
    /// Values as text (NULL is `None`).
    pub rows: Vec<Vec<Option<String>>>,
    /// The count of the last command tag (rows returned or affected).
    pub affected: u64,
}

/// A failed statement. Failures that did not come from the server have a
/// parenthesized pseudo-SQLSTATE: `(connect)`, `(client)`, `(timeout)`.
#[derive(Clone, Debug, PartialEq)]
pub struct DbError {
    pub sqlstate: String,
    pub message: String,
}

/// A connection to one server.
pub struct Endpoint {
    conn_str: String,
    timeout: Duration,
    client: Option<Client>,
}

impl Endpoint {
    /// An endpoint whose statements give up after `timeout`.
    pub fn new(conn_str: String, timeout: Duration) -> Endpoint {
        Endpoint {
            conn_str,
            timeout,
            client: None,
        }
    }

    /// Run `sql` with the simple query protocol.
    pub async fn run(&mut self, sql: &str) -> Result<Rows, DbError> {
        let failure = |sqlstate: &str, message: String| DbError {
            sqlstate: sqlstate.into(),
            message,
        };
        if self.client.is_none() {
            let (client, connection) = tokio_postgres::connect(&self.conn_str, NoTls)
                .await
                .map_err(|e| failure("(connect)", e.to_string()))?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            self.client = Some(client);
        }
        let client = self.client.as_ref().expect("client was just set");
        match tokio::time::timeout(self.timeout, client.simple_query(sql)).await {
            Ok(Ok(messages)) => Ok(rows_of(messages)),
            Ok(Err(e)) => {
                if client.is_closed() {
                    self.client = None;
                }
                Err(match e.as_db_error() {
                    Some(db) => failure(db.code().code(), db.message().to_string()),
                    None => failure("(client)", e.to_string()),
                })
            }
            Err(_) => {
                self.client = None;
                Err(failure(
                    "(timeout)",
                    format!("no answer within {:?}", self.timeout),
                ))
            }
        }
    }
}

fn rows_of(messages: Vec<SimpleQueryMessage>) -> Rows {
    let mut out = Rows {
        columns: 0,
        rows: vec![],
        affected: 0,
    };
    for message in messages {
        match message {
            SimpleQueryMessage::RowDescription(cols) => out.columns = cols.len(),
            SimpleQueryMessage::Row(row) => out.rows.push(
                (0..row.len())
                    .map(|i| row.get(i).map(str::to_string))
                    .collect(),
            ),
            SimpleQueryMessage::CommandComplete(n) => out.affected = n,
            _ => {}
        }
    }
    out
}

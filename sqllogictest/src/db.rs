//! The [`AsyncDB`] implementation: one pgwire session driven with the simple query protocol.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType};
use tokio_postgres::{CancelToken, Client, NoTls, SimpleQueryMessage};

/// Where and as whom to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnParams {
    /// Host name or IP address of the server.
    pub host: String,
    /// pgwire port.
    pub port: u16,
    /// User name sent in the startup message.
    pub user: String,
    /// Database name sent in the startup message.
    pub database: String,
}

impl ConnParams {
    fn config(&self) -> tokio_postgres::Config {
        let mut config = tokio_postgres::Config::new();
        config
            .host(&self.host)
            .port(self.port)
            .user(&self.user)
            .dbname(&self.database)
            .application_name("freshet-sqllogictest")
            .connect_timeout(Duration::from_secs(10));
        config
    }
}

impl fmt::Display for ConnParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{}:{}/{}",
            self.user, self.host, self.port, self.database
        )
    }
}

/// An error from the database, as shown to `statement error` / `query error` matching.
///
/// Server errors display as `db error: ERROR: <message>` followed by any `DETAIL:` and `HINT:`
/// lines, so inline regexes match on the server's message text.
#[derive(Debug, thiserror::Error)]
pub struct DbError(#[from] tokio_postgres::Error);

impl DbError {
    /// The SQLSTATE code of a server error, if this is one.
    pub fn sql_state(&self) -> Option<String> {
        self.0.code().map(|c| c.code().to_string())
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_db_error() {
            Some(db) => {
                write!(f, "db error: {}: {}", db.severity(), db.message())?;
                if let Some(detail) = db.detail() {
                    write!(f, "\nDETAIL: {detail}")?;
                }
                if let Some(hint) = db.hint() {
                    write!(f, "\nHINT: {hint}")?;
                }
                Ok(())
            }
            None => write!(f, "{}", self.0),
        }
    }
}

/// State shared between the harness and every connection it opens, so that the harness can
/// cancel a hung query and notice a broken connection even though the
/// [`sqllogictest::Runner`] owns the connections.
#[derive(Default)]
pub struct SharedConnState {
    cancel_tokens: std::sync::Mutex<Vec<CancelToken>>,
    broken: AtomicBool,
}

impl SharedConnState {
    /// Whether any connection of this session has closed.
    pub fn is_broken(&self) -> bool {
        self.broken.load(Ordering::SeqCst)
    }

    /// Asks the server to cancel whatever every known connection is running (best effort).
    pub async fn cancel_all(&self) {
        let tokens = match self.cancel_tokens.lock() {
            Ok(tokens) => tokens.clone(),
            Err(_) => return,
        };
        for token in tokens {
            match tokio::time::timeout(Duration::from_secs(5), token.cancel_query(NoTls)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "cancel request failed"),
                Err(_) => tracing::warn!("cancel request timed out"),
            }
        }
    }

    fn register(&self, token: CancelToken) {
        if let Ok(mut tokens) = self.cancel_tokens.lock() {
            tokens.push(token);
        }
    }
}

/// One pgwire connection to the server under test.
pub struct FreshetDb {
    client: Client,
}

impl FreshetDb {
    /// Opens a connection and spawns its driver task on the current tokio runtime.
    pub async fn connect(
        params: &ConnParams,
        shared: Arc<SharedConnState>,
    ) -> Result<Self, DbError> {
        let (client, connection) = params.config().connect(NoTls).await?;
        shared.register(client.cancel_token());
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            shared.broken.store(true, Ordering::SeqCst);
        });
        Ok(Self { client })
    }

    /// Runs `sql` and reports whether it succeeded (used as a readiness probe).
    pub async fn simple_query_ok(&self, sql: &str) -> bool {
        self.client.simple_query(sql).await.is_ok()
    }
}

/// Renders one text value the way sqllogictest-rs expects.
fn render_value(value: Option<&str>) -> String {
    match value {
        None => "NULL".to_string(),
        Some("") => "(empty)".to_string(),
        Some(text) => text.to_string(),
    }
}

/// Turns the messages of one simple query into the output of its last statement.
fn collect_output(messages: Vec<SimpleQueryMessage>) -> DBOutput<DefaultColumnType> {
    // The result of the statement currently being read: `Some` once a row description arrived.
    let mut rows: Option<(usize, Vec<Vec<String>>)> = None;
    let mut output = DBOutput::StatementComplete(0);
    for message in messages {
        match message {
            SimpleQueryMessage::RowDescription(columns) => rows = Some((columns.len(), Vec::new())),
            SimpleQueryMessage::Row(row) => {
                let values = (0..row.len()).map(|i| render_value(row.get(i))).collect();
                match &mut rows {
                    Some((_, collected)) => collected.push(values),
                    None => rows = Some((row.len(), vec![values])),
                }
            }
            SimpleQueryMessage::CommandComplete(count) => {
                output = match rows.take() {
                    Some((width, rows)) => DBOutput::Rows {
                        types: vec![DefaultColumnType::Any; width],
                        rows,
                    },
                    None => DBOutput::StatementComplete(count),
                };
            }
            _ => {}
        }
    }
    output
}

#[async_trait]
impl AsyncDB for FreshetDb {
    type Error = DbError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<Self::ColumnType>, Self::Error> {
        let messages = self.client.simple_query(sql).await?;
        Ok(collect_output(messages))
    }

    async fn shutdown(&mut self) {}

    async fn sleep(dur: Duration) {
        tokio::time::sleep(dur).await;
    }

    async fn run_command(command: std::process::Command) -> std::io::Result<std::process::Output> {
        tokio::process::Command::from(command).output().await
    }

    fn error_sql_state(err: &Self::Error) -> Option<String> {
        err.sql_state()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_null_and_empty() {
        assert_eq!(render_value(None), "NULL");
        assert_eq!(render_value(Some("")), "(empty)");
        assert_eq!(render_value(Some("t")), "t");
    }

    #[test]
    fn no_messages_is_an_empty_statement() {
        assert!(matches!(
            collect_output(Vec::new()),
            DBOutput::StatementComplete(0)
        ));
    }

    #[test]
    fn statement_count_is_kept() {
        assert!(matches!(
            collect_output(vec![SimpleQueryMessage::CommandComplete(3)]),
            DBOutput::StatementComplete(3)
        ));
    }
}

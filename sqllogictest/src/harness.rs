//! Running one test file record by record and counting the outcomes.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqllogictest::{MakeConnection, Record, Runner, default_column_validator};

use crate::db::{ConnParams, DbError, FreshetDb, SharedConnState};
use crate::report::{Failure, FileReport};
use crate::script::{
    self, SltRecord, countable_conditions, is_excluded, is_runner_state, record_line, record_sql,
};
use crate::server::{ManagedServer, ServerConfig};

/// Which server the files run against.
#[derive(Debug, Clone)]
pub enum Target {
    /// Start a fresh server (fresh data dir, free port) for every file.
    Managed(ServerConfig),
    /// Use an already running server; files share its state and `restart` only reconnects.
    External(ConnParams),
}

/// Settings shared by all files of a run.
#[derive(Debug, Clone)]
pub struct HarnessConfig {
    /// Where to run.
    pub target: Target,
    /// Labels for `onlyif` / `skipif`.
    pub labels: Vec<String>,
    /// Time limit for one record; a record over it fails and the session is reopened.
    pub record_timeout: Duration,
}

/// Opens connections for the `sqllogictest` runner and registers them with the shared state.
struct Connector {
    params: ConnParams,
    shared: Arc<SharedConnState>,
}

type ConnectFuture = Pin<Box<dyn Future<Output = Result<FreshetDb, DbError>> + Send>>;

impl MakeConnection for Connector {
    type Conn = FreshetDb;
    type MakeFuture = ConnectFuture;

    fn make(&mut self) -> Self::MakeFuture {
        let params = self.params.clone();
        let shared = Arc::clone(&self.shared);
        Box::pin(async move { FreshetDb::connect(&params, shared).await })
    }
}

/// A `sqllogictest` runner plus what is needed to replace it after a reconnect.
struct Session {
    runner: Runner<FreshetDb, Connector>,
    shared: Arc<SharedConnState>,
}

impl Session {
    /// A new runner (connections are opened lazily) with the labels and the replayed state.
    async fn open(params: ConnParams, labels: &[String], state: &[SltRecord]) -> Self {
        let shared = Arc::new(SharedConnState::default());
        let mut runner = Runner::new(Connector {
            params,
            shared: Arc::clone(&shared),
        });
        for label in labels {
            runner.add_label(label);
        }
        runner.with_column_validator(default_column_validator);
        for record in state {
            if let Err(e) = runner.run_async(record.clone()).await {
                tracing::warn!(error = %e, "replaying runner state");
            }
        }
        Self { runner, shared }
    }

    async fn close(mut self) {
        self.runner.shutdown_async().await;
    }
}

/// The server a file runs on.
enum Server {
    Managed(Box<ManagedServer>),
    External(ConnParams),
}

impl Server {
    fn params(&self) -> ConnParams {
        match self {
            Server::Managed(server) => server.conn_params(),
            Server::External(params) => params.clone(),
        }
    }
}

/// Runs one file through [`FileRun`], starting and stopping a managed server around it.
pub async fn run_file(path: &Path, config: &HarnessConfig) -> FileReport {
    let started = Instant::now();
    let mut report = FileReport::new(path);
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            report.fatal(format!("cannot read {}: {e}", path.display()));
            return report;
        }
    };
    let server = match &config.target {
        Target::Managed(server_config) => match ManagedServer::start(server_config).await {
            Ok(server) => Server::Managed(Box::new(server)),
            Err(e) => {
                report.fatal(format!("cannot start the server: {e}"));
                return report;
            }
        },
        Target::External(params) => Server::External(params.clone()),
    };
    let mut run = FileRun {
        config,
        server,
        report,
        state: Vec::new(),
    };
    run.run_text(&text, &path.display().to_string()).await;
    let FileRun {
        server, mut report, ..
    } = run;
    if let Server::Managed(server) = server {
        report.kept_dir = server.stop().await;
    }
    report.elapsed = started.elapsed();
    report
}

/// The state of one file being run.
struct FileRun<'a> {
    config: &'a HarnessConfig,
    server: Server,
    report: FileReport,
    /// Records (`hash-threshold`, `control`) replayed into every new session.
    state: Vec<SltRecord>,
}

/// What to do after a record.
enum Flow {
    /// Go on with the next record.
    Continue,
    /// Go on, but on a new session (the connection broke, the server died or a record hung).
    Reconnect,
    /// Stop the file (`halt`).
    Stop,
}

impl FileRun<'_> {
    async fn run_text(&mut self, text: &str, name: &str) {
        let chunks = script::split_on_restart(text);
        // Parse everything up front, so a syntax error is reported before anything runs.
        let mut parsed = Vec::with_capacity(chunks.len());
        for chunk in &chunks {
            match script::parse_chunk(chunk, name) {
                Ok(records) => parsed.push(records),
                Err(e) => {
                    self.report.fatal(format!("parse error: {e}"));
                    return;
                }
            }
        }
        let mut session = Some(self.open_session().await);
        for (index, records) in parsed.into_iter().enumerate() {
            if index > 0 {
                if let Some(old) = session.take() {
                    old.close().await;
                }
                if !self.restart_server().await {
                    return;
                }
                session = Some(self.open_session().await);
            }
            for record in records {
                let Some(current) = session.as_mut() else {
                    return;
                };
                match self.run_record(current, record).await {
                    Flow::Continue => {}
                    Flow::Reconnect => {
                        if let Some(old) = session.take() {
                            old.close().await;
                        }
                        if !self.recover().await {
                            return;
                        }
                        session = Some(self.open_session().await);
                    }
                    Flow::Stop => return,
                }
            }
        }
        if let Some(old) = session.take() {
            old.close().await;
        }
    }

    async fn open_session(&self) -> Session {
        Session::open(self.server.params(), &self.config.labels, &self.state).await
    }

    /// Runs one record and counts its outcome.
    async fn run_record(&mut self, session: &mut Session, record: SltRecord) -> Flow {
        match &record {
            Record::Halt { .. } => return Flow::Stop,
            Record::Include { loc, filename } => {
                self.report.failed += 1;
                self.report.failures.push(Failure {
                    line: loc.line(),
                    message: format!("`include {filename}` is not supported"),
                });
                return Flow::Continue;
            }
            _ => {}
        }
        if is_runner_state(&record) {
            self.state.push(record.clone());
        }
        let Some(conditions) = countable_conditions(&record) else {
            if let Err(e) = session.runner.run_async(record).await {
                tracing::warn!(error = %e, "non-counted record failed");
            }
            return Flow::Continue;
        };
        if is_excluded(conditions, &self.config.labels) {
            self.report.skipped += 1;
            return Flow::Continue;
        }
        let line = record_line(&record).unwrap_or_default();
        let sql = record_sql(&record).unwrap_or_default().to_string();
        let outcome =
            tokio::time::timeout(self.config.record_timeout, session.runner.run_async(record))
                .await;
        match outcome {
            Ok(Ok(_)) => {
                self.report.passed += 1;
                Flow::Continue
            }
            Ok(Err(e)) => {
                self.report.failed += 1;
                self.report.failures.push(Failure {
                    line,
                    message: e.display(false).to_string(),
                });
                // Let the connection task notice a closed socket before looking.
                tokio::task::yield_now().await;
                let server_died = match &mut self.server {
                    Server::Managed(server) => server.has_exited(),
                    Server::External(_) => false,
                };
                if server_died || session.shared.is_broken() {
                    Flow::Reconnect
                } else {
                    Flow::Continue
                }
            }
            Err(_) => {
                self.report.failed += 1;
                self.report.failures.push(Failure {
                    line,
                    message: format!(
                        "timed out after {:?}\n[SQL] {sql}",
                        self.config.record_timeout
                    ),
                });
                session.shared.cancel_all().await;
                Flow::Reconnect
            }
        }
    }

    /// Handles the `restart` directive. Returns false if the file cannot go on.
    async fn restart_server(&mut self) -> bool {
        match &mut self.server {
            Server::Managed(server) => match server.restart().await {
                Ok(()) => {
                    self.report.restarts += 1;
                    true
                }
                Err(e) => {
                    self.report.fatal(format!("restart failed: {e}"));
                    false
                }
            },
            Server::External(_) => {
                tracing::warn!("`restart` against an external server only reconnects");
                true
            }
        }
    }

    /// After a lost connection: restart the server if it died. Returns false if it cannot.
    async fn recover(&mut self) -> bool {
        let Server::Managed(server) = &mut self.server else {
            return true;
        };
        if !server.has_exited() {
            return true;
        }
        tracing::warn!(log_tail = %server.log_tail(), "the server died; restarting it");
        self.report.crashes += 1;
        match server.restart().await {
            Ok(()) => true,
            Err(e) => {
                self.report
                    .fatal(format!("the server died and could not be restarted: {e}"));
                false
            }
        }
    }
}

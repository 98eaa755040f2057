//! Starting, killing and restarting a Freshet server process on a private data directory.

use std::fs::OpenOptions;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tempfile::TempDir;
use tokio::process::{Child, Command};

use crate::db::{ConnParams, FreshetDb, SharedConnState};

/// Name of the server executable.
const SERVER_BINARY_NAME: &str = "freshet";

/// How many times a first start is tried before giving up.
const START_ATTEMPTS: u32 = 3;

/// How many trailing lines of the server log an error message quotes.
const LOG_TAIL_LINES: usize = 30;

/// What can go wrong while managing the server process.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// No server binary was given and none was found at the default places.
    #[error("no freshet server binary found (tried: {}); build it with `cargo build -p freshet-server` or pass --server-binary", display_paths(.tried))]
    BinaryNotFound {
        /// The paths that were looked at.
        tried: Vec<PathBuf>,
    },
    /// An I/O operation (temp dir, log file, spawn, kill) failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The server exited while we waited for it to become ready.
    #[error("freshet server exited with {status} before it was ready; log tail:\n{log_tail}")]
    Exited {
        /// Exit status of the process.
        status: ExitStatus,
        /// The last lines of its log.
        log_tail: String,
    },
    /// The server did not answer `SELECT 1` in time.
    #[error("freshet server not ready after {timeout:?}; log tail:\n{log_tail}")]
    NotReady {
        /// How long we waited.
        timeout: Duration,
        /// The last lines of its log.
        log_tail: String,
    },
}

fn display_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServerError {
    let context = context.into();
    move |source| ServerError::Io { context, source }
}

/// Finds the server binary: `explicit` if given, else `freshet` next to the running executable,
/// else `target/debug/freshet` in the workspace this crate was built from.
pub fn resolve_server_binary(explicit: Option<&Path>) -> Result<PathBuf, ServerError> {
    if let Some(path) = explicit {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(ServerError::BinaryNotFound {
                tried: vec![path.to_path_buf()],
            })
        };
    }
    let mut tried = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        tried.push(dir.join(SERVER_BINARY_NAME));
    }
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir.parent().unwrap_or(manifest_dir);
    tried.push(
        workspace
            .join("target")
            .join("debug")
            .join(SERVER_BINARY_NAME),
    );
    match tried.iter().find(|p| p.is_file()) {
        Some(found) => Ok(found.clone()),
        None => Err(ServerError::BinaryNotFound { tried }),
    }
}

/// How to start managed servers.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The `freshet` executable.
    pub binary: PathBuf,
    /// How long to wait for a (re)started server to answer `SELECT 1`.
    pub startup_timeout: Duration,
    /// Value for the server's `--log-filter`.
    pub log_filter: String,
    /// Keep the temp directory (data and log) after the server stops.
    pub keep_data: bool,
}

/// A Freshet server process owned by the harness, with its own temp data directory.
///
/// The process is killed when this value is dropped.
pub struct ManagedServer {
    config: ServerConfig,
    dir: Option<TempDir>,
    root: PathBuf,
    pg_port: u16,
    http_port: u16,
    child: Option<Child>,
}

impl ManagedServer {
    /// Starts a server on fresh free ports and a fresh temp data dir, and waits until it is ready.
    ///
    /// A server that exits at once is retried on other ports, in case another process took a
    /// port between our probe and the server's bind.
    pub async fn start(config: &ServerConfig) -> Result<Self, ServerError> {
        let mut attempt = 1;
        loop {
            match Self::start_once(config).await {
                Err(ServerError::Exited { status, log_tail }) if attempt < START_ATTEMPTS => {
                    tracing::warn!(%status, %log_tail, "server exited at start; retrying");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn start_once(config: &ServerConfig) -> Result<Self, ServerError> {
        let dir = tempfile::Builder::new()
            .prefix("freshet-slt-")
            .tempdir()
            .map_err(io_error("cannot create a temp dir"))?;
        let root = dir.path().to_path_buf();
        let (pg_port, http_port) = free_port_pair()?;
        let mut server = Self {
            config: config.clone(),
            dir: Some(dir),
            root,
            pg_port,
            http_port,
            child: None,
        };
        server.spawn_and_wait().await?;
        Ok(server)
    }

    /// Connection parameters for this server.
    pub fn conn_params(&self) -> ConnParams {
        ConnParams {
            host: "127.0.0.1".to_string(),
            port: self.pg_port,
            user: "freshet".to_string(),
            database: "freshet".to_string(),
        }
    }

    /// The file the server's stderr goes to.
    pub fn log_path(&self) -> PathBuf {
        self.root.join("server.log")
    }

    fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// Kills the server with SIGKILL, starts it again on the same data dir and ports, and waits
    /// until it is ready.
    pub async fn restart(&mut self) -> Result<(), ServerError> {
        self.kill().await?;
        self.spawn_and_wait().await
    }

    /// Whether the server process has exited on its own.
    pub fn has_exited(&mut self) -> bool {
        match &mut self.child {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// Kills the server (if running) and waits for it to be reaped.
    pub async fn kill(&mut self) -> Result<(), ServerError> {
        if let Some(mut child) = self.child.take() {
            // `Child::kill` sends SIGKILL and reaps the process.
            if let Ok(None) = child.try_wait() {
                child
                    .kill()
                    .await
                    .map_err(io_error("cannot kill the freshet server"))?;
            }
        }
        Ok(())
    }

    /// Stops the server and removes its temp dir, or, with `keep_data`, returns where it is.
    pub async fn stop(mut self) -> Option<PathBuf> {
        if let Err(e) = self.kill().await {
            tracing::warn!(error = %e, "stopping the server");
        }
        if self.config.keep_data {
            self.dir.take().map(TempDir::keep)
        } else {
            None
        }
    }

    async fn spawn_and_wait(&mut self) -> Result<(), ServerError> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(io_error("cannot open the server log"))?;
        let child = Command::new(&self.config.binary)
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.pg_port))
            .arg("--http-listen")
            .arg(format!("127.0.0.1:{}", self.http_port))
            .arg("--log-filter")
            .arg(&self.config.log_filter)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .map_err(io_error(format!(
                "cannot start {}",
                self.config.binary.display()
            )))?;
        tracing::debug!(pid = ?child.id(), port = self.pg_port, "spawned freshet server");
        self.child = Some(child);
        self.wait_ready().await
    }

    async fn wait_ready(&mut self) -> Result<(), ServerError> {
        let params = self.conn_params();
        let deadline = Instant::now() + self.config.startup_timeout;
        loop {
            if let Some(child) = &mut self.child
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(ServerError::Exited {
                    status,
                    log_tail: self.log_tail(),
                });
            }
            if probe(&params).await {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(ServerError::NotReady {
                    timeout: self.config.startup_timeout,
                    log_tail: self.log_tail(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The last lines of the server log, for error messages.
    pub fn log_tail(&self) -> String {
        match std::fs::read_to_string(self.log_path()) {
            Ok(text) => {
                let lines: Vec<&str> = text.lines().collect();
                let start = lines.len().saturating_sub(LOG_TAIL_LINES);
                lines[start..].join("\n")
            }
            Err(e) => format!("(cannot read {}: {e})", self.log_path().display()),
        }
    }
}

/// Whether the server answers `SELECT 1`.
async fn probe(params: &ConnParams) -> bool {
    let attempt = async {
        let shared = Arc::new(SharedConnState::default());
        let db = FreshetDb::connect(params, shared).await.ok()?;
        db.simple_query_ok("SELECT 1").await.then_some(())
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(5), attempt).await,
        Ok(Some(()))
    )
}

/// Two distinct free loopback ports (pgwire and HTTP).
fn free_port_pair() -> Result<(u16, u16), ServerError> {
    let a = TcpListener::bind("127.0.0.1:0").map_err(io_error("cannot find a free port"))?;
    let b = TcpListener::bind("127.0.0.1:0").map_err(io_error("cannot find a free port"))?;
    let pa = a
        .local_addr()
        .map_err(io_error("cannot find a free port"))?
        .port();
    let pb = b
        .local_addr()
        .map_err(io_error("cannot find a free port"))?
        .port();
    Ok((pa, pb))
}

//! Running a `freshet` server process for one measurement.
//!
//! Each table size gets a fresh process on a fresh data directory, so that
//! views and data from a previous size cannot keep consuming CPU (a
//! materialized view keeps being maintained until dropped) and every size
//! starts from the same storage state. Mirrors
//! `server/tests/pgwire/harness.rs`.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio_postgres::Client;

use crate::db;
use crate::error::{Context, Result, failed};

/// How long a (possibly debug-build) server may take to start listening.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(120);

/// A running `freshet` process, killed when dropped.
pub struct FreshetServer {
    port: u16,
    http_port: u16,
    child: Child,
    log_path: PathBuf,
    /// The command line, to start the process again on the same data.
    command: Vec<std::ffi::OsString>,
    /// Holds the data directory and the log; removed after the kill.
    _tmp: tempfile::TempDir,
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("find a free loopback port")?;
    Ok(listener
        .local_addr()
        .context("find a free loopback port")?
        .port())
}

impl FreshetServer {
    /// Spawn `bin` on a temp data directory and wait until it listens.
    /// `workers` is passed as `--workers` only when given, so the benchmark
    /// also runs against servers that predate that flag.
    pub async fn start(bin: &Path, workers: Option<u32>) -> Result<FreshetServer> {
        FreshetServer::start_with(bin, workers, &[]).await
    }

    /// [`FreshetServer::start`] with `extra` flags appended to the command
    /// line (e.g. `--max-connections 1100`).
    pub async fn start_with(
        bin: &Path,
        workers: Option<u32>,
        extra: &[String],
    ) -> Result<FreshetServer> {
        let tmp = tempfile::Builder::new()
            .prefix("freshet-bench-")
            .tempdir()
            .context("create a temp dir for Freshet")?;
        let log_path = tmp.path().join("freshet.log");
        let log = File::create(&log_path).context(format!("create {}", log_path.display()))?;
        let port = free_port()?;
        let http_port = free_port()?;
        let mut command: Vec<std::ffi::OsString> = vec![bin.into()];
        command.extend([
            "--data-dir".into(),
            tmp.path().join("data").into_os_string(),
            "--listen".into(),
            format!("127.0.0.1:{port}").into(),
            "--http-listen".into(),
            format!("127.0.0.1:{http_port}").into(),
            "--log-filter".into(),
            "warn".into(),
        ]);
        if let Some(n) = workers {
            command.push("--workers".into());
            command.push(n.to_string().into());
        }
        command.extend(extra.iter().map(Into::into));
        let child = spawn(&command, log)?;
        let mut server = FreshetServer {
            port,
            http_port,
            child,
            log_path,
            command,
            _tmp: tmp,
        };
        server.wait_listening().await?;
        Ok(server)
    }

    /// The HTTP port (health, webhooks).
    pub fn http_port(&self) -> u16 {
        self.http_port
    }

    /// Poll the port until it accepts connections, failing early (with the
    /// server's log) when the process exits, e.g. on an unknown flag.
    async fn wait_listening(&mut self) -> Result<()> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(status) = self.child.try_wait().context("wait for freshet")? {
                return failed(format!(
                    "freshet exited during startup ({status}); its log:\n{}",
                    self.log_tail()
                ));
            }
            if Instant::now() > deadline {
                return failed(format!(
                    "freshet did not listen on port {} within {STARTUP_TIMEOUT:?}",
                    self.port
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// `kill -9` the process and start it again on the same data
    /// directory and port; returns once it listens.
    pub async fn kill_and_restart(&mut self) -> Result<()> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.log_path)
            .context(format!("open {}", self.log_path.display()))?;
        self.child = spawn(&self.command, log)?;
        self.wait_listening().await
    }

    /// The process id (for sampling its memory).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self._tmp.path().join("data")
    }

    /// The pgwire port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A new session on database `freshet`.
    pub async fn connect(&self) -> Result<Client> {
        let conn = format!(
            "host=127.0.0.1 port={} user=freshet dbname=freshet",
            self.port
        );
        db::connect_retrying(&conn, "Freshet", Duration::from_secs(30)).await
    }

    /// The last lines of the server's log, for error messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for FreshetServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start the server `command` describes, its stderr going to `log`.
fn spawn(command: &[std::ffi::OsString], log: File) -> Result<Child> {
    let (bin, args) = command
        .split_first()
        .ok_or_else(|| crate::error::BenchError::Failed("empty command".into()))?;
    Command::new(bin)
        .args(args)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .context(format!(
            "spawn {} (build it with `cargo build --release -p freshet-server`)",
            Path::new(bin).display()
        ))
}

/// `freshet --version`, for the environment table.
pub fn version(bin: &Path) -> String {
    match Command::new(bin).arg("--version").output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        Ok(out) => format!("unknown (--version exited with {})", out.status),
        Err(e) => format!("unknown ({e})"),
    }
}

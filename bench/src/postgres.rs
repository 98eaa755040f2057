//! Running a PostgreSQL 15 cluster in a temp directory, as
//! `server/tests/pgwire/differential.rs` does (same binary lookup, same
//! `runuser` handling as root), but with PostgreSQL's default durability:
//! `fsync=on` and `synchronous_commit=on` (the tests use `fsync=off`).
//! Freshet fsyncs every commit, so both systems pay for durable commits.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use tokio_postgres::Client;

use crate::db;
use crate::error::{Context, Result, failed};
use crate::freshet::free_port;

/// The system user PostgreSQL runs as when the benchmark runs as root and
/// `FRESHET_PG_USER` is unset (PostgreSQL refuses to run as root).
const DEFAULT_PG_USER: &str = "freshet-pg";

/// The server settings the benchmark passes to `postgres`, shown in the
/// report. Everything not listed is PostgreSQL's default.
pub const PG_SETTINGS: &str = "fsync=on, synchronous_commit=on, TimeZone=UTC; all else default (shared_buffers 128MB, work_mem 4MB)";

/// A running cluster, stopped (`pg_ctl stop -m immediate`) when dropped.
pub struct PgServer {
    port: u16,
    data_dir: PathBuf,
    bindir: Option<PathBuf>,
    /// The user the server runs as (`None`: the current user).
    run_as: Option<String>,
    /// Extra `name=value` settings for `postgres -c`.
    settings: Vec<String>,
    /// Whether `pg_ctl start` was attempted, so `drop` must stop it.
    started: bool,
    /// Declared last so that it is removed after the server stopped.
    tmp: tempfile::TempDir,
}

impl PgServer {
    /// initdb a fresh cluster and start it on a free loopback port.
    /// `bindir` overrides the lookup of `initdb` and `pg_ctl`; `settings`
    /// are extra `name=value` server settings (passed as `-c name=value`),
    /// e.g. `max_connections=1100`.
    pub fn start_with(bindir: Option<&Path>, settings: &[String]) -> Result<PgServer> {
        let run_as = pg_run_as_user()?;
        let tmp = tempfile::Builder::new()
            .prefix("freshet-bench-pg-")
            .tempdir()
            .context("create a temp dir for PostgreSQL")?;
        if let Some(user) = &run_as {
            let out = Command::new("chown")
                .arg(user)
                .arg(tmp.path())
                .output()
                .context("run chown")?;
            check_status(&out, &format!("chown {user} {}", tmp.path().display()))?;
        }
        let mut pg = PgServer {
            port: free_port()?,
            data_dir: tmp.path().join("data"),
            bindir: bindir.map(Path::to_path_buf),
            run_as,
            settings: settings.to_vec(),
            started: false,
            tmp,
        };
        pg.initdb()?;
        pg.pg_ctl_start()?;
        Ok(pg)
    }

    /// A command for PostgreSQL binary `bin`, run as the server's user.
    fn command(&self, bin: &str) -> Result<Command> {
        let program = pg_binary(self.bindir.as_deref(), bin)?;
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.arg("-u").arg(user).arg("--").arg(program);
                c
            }
            None => Command::new(program),
        };
        // The server user may not be able to read our working directory.
        cmd.current_dir(self.tmp.path());
        Ok(cmd)
    }

    fn initdb(&self) -> Result<()> {
        // --no-sync only skips initdb's own final fsync of the template
        // files; it does not change how the running server commits.
        let out = self
            .command("initdb")?
            .arg("-D")
            .arg(&self.data_dir)
            .args(["-U", "postgres", "--auth=trust", "--locale=C"])
            .args(["--lc-ctype=C.UTF-8", "--encoding=UTF8", "--no-sync"])
            .output()
            .context("run initdb (is PostgreSQL 15 installed?)")?;
        check_status(&out, "initdb")
    }

    fn pg_ctl_start(&mut self) -> Result<()> {
        let mut options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c TimeZone=UTC \
             -c fsync=on -c synchronous_commit=on",
            self.port,
            self.tmp.path().display()
        );
        for setting in &self.settings {
            options.push_str(" -c ");
            options.push_str(setting);
        }
        let log = self.tmp.path().join("postgres.log");
        self.started = true;
        let out = self
            .command("pg_ctl")?
            .arg("-D")
            .arg(&self.data_dir)
            .arg("-l")
            .arg(&log)
            .arg("-o")
            .arg(options)
            .args(["-w", "-t", "60", "start"])
            .output()
            .context("run pg_ctl start")?;
        if out.status.success() {
            return Ok(());
        }
        let log_text = std::fs::read_to_string(&log).unwrap_or_default();
        failed(format!(
            "PostgreSQL did not start: {}\nserver log:\n{log_text}",
            describe_output(&out)
        ))
    }

    /// The postmaster's process id (the first line of `postmaster.pid`).
    pub fn postmaster_pid(&self) -> Result<u32> {
        let path = self.data_dir.join("postmaster.pid");
        let text = std::fs::read_to_string(&path).context(format!("read {}", path.display()))?;
        match text.lines().next().and_then(|l| l.trim().parse().ok()) {
            Some(pid) => Ok(pid),
            None => failed(format!("no process id in {}", path.display())),
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A new session on database `postgres` as user `postgres`.
    pub async fn connect(&self) -> Result<Client> {
        let conn = format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        );
        db::connect_retrying(&conn, "PostgreSQL", Duration::from_secs(10)).await
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if !self.started {
            return;
        }
        let result = self.command("pg_ctl").and_then(|mut c| {
            c.arg("-D")
                .arg(&self.data_dir)
                .args(["-m", "immediate", "-w", "stop"])
                .output()
                .context("run pg_ctl stop")
        });
        match result {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!("pg_ctl stop failed: {}", describe_output(&out)),
            Err(e) => eprintln!("could not stop PostgreSQL: {e}"),
        }
    }
}

/// The user PostgreSQL must run as: `None` unless we run as root.
fn pg_run_as_user() -> Result<Option<String>> {
    let out = Command::new("id")
        .arg("-u")
        .output()
        .context("run `id -u` to learn whether we run as root")?;
    check_status(&out, "id -u")?;
    if String::from_utf8_lossy(&out.stdout).trim() != "0" {
        return Ok(None);
    }
    if let Ok(user) = std::env::var("FRESHET_PG_USER") {
        if !user_exists(&user) {
            return failed(format!("FRESHET_PG_USER={user}, but there is no such user"));
        }
        return Ok(Some(user));
    }
    ensure_default_pg_user()?;
    Ok(Some(DEFAULT_PG_USER.to_string()))
}

/// Whether a system user exists.
fn user_exists(user: &str) -> bool {
    Command::new("id")
        .arg("-u")
        .arg(user)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Create the system user [`DEFAULT_PG_USER`] unless it exists.
fn ensure_default_pg_user() -> Result<()> {
    if user_exists(DEFAULT_PG_USER) {
        return Ok(());
    }
    let result = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
        ])
        .arg(DEFAULT_PG_USER)
        .output();
    // A test process may have created it concurrently: check again.
    if user_exists(DEFAULT_PG_USER) {
        return Ok(());
    }
    let detail = match result {
        Ok(out) => describe_output(&out),
        Err(e) => e.to_string(),
    };
    failed(format!(
        "PostgreSQL refuses to run as root and creating the user `{DEFAULT_PG_USER}` failed \
         ({detail}). Run as a non-root user, or create a system user and export \
         FRESHET_PG_USER=<user>."
    ))
}

/// The path of PostgreSQL binary `bin`: in `bindir` if given, else in
/// `$FRESHET_PG_BINDIR`, on `$PATH`, or in `/usr/lib/postgresql/15/bin`.
fn pg_binary(bindir: Option<&Path>, bin: &str) -> Result<PathBuf> {
    let explicit = bindir
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("FRESHET_PG_BINDIR").map(PathBuf::from));
    if let Some(dir) = explicit {
        let path = dir.join(bin);
        if !path.is_file() {
            return failed(format!("PostgreSQL bindir has no {}", path.display()));
        }
        return Ok(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(bin))
        .chain([Path::new("/usr/lib/postgresql/15/bin").join(bin)])
        .find(|p| p.is_file())
        .map_or_else(
            || {
                failed(format!(
                    "PostgreSQL binary `{bin}` not found on PATH or in /usr/lib/postgresql/15/bin; \
                     install PostgreSQL 15, pass --pg-bindir, or use --skip-postgres"
                ))
            },
            Ok,
        )
}

/// An error with the command's output unless it succeeded.
fn check_status(out: &Output, what: &str) -> Result<()> {
    if out.status.success() {
        return Ok(());
    }
    failed(format!("{what} failed: {}", describe_output(out)))
}

/// A command's exit status, stdout and stderr, for error messages.
fn describe_output(out: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

//! A throwaway PostgreSQL 15 cluster for tests that compare Freshet with
//! PostgreSQL (the differential corpus, the materialized-view property test).
//!
//! `initdb`, `pg_ctl` (and the `postgres` they start) are looked up in
//! `$FRESHET_PG_BINDIR`, then on `$PATH`, then in `/usr/lib/postgresql/15/bin`.
//! PostgreSQL refuses to run as root, so as root the binaries run through
//! `runuser -u $FRESHET_PG_USER --`; when that variable is unset the system
//! user `freshet-pg` is used, and created with `useradd` if missing. The
//! cluster is UTF8 with the C collation (Freshet compares text bytewise),
//! `C.UTF-8` character classes (`upper`/`initcap` of non-ASCII letters, as in
//! Freshet) and `TimeZone=UTC` (Freshet's default). Starting panics, so a test
//! fails rather than skips when PostgreSQL cannot be started.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The system user PostgreSQL runs as when the test runs as root and
/// `FRESHET_PG_USER` is unset.
pub(crate) const DEFAULT_PG_USER: &str = "freshet-pg";

/// A PostgreSQL cluster in a temp directory, stopped (`pg_ctl stop -m
/// immediate`) when dropped, also when the test panics.
pub(crate) struct PgServer {
    port: u16,
    data_dir: PathBuf,
    /// The user the server runs as (`None`: the current user).
    run_as: Option<String>,
    /// Whether `pg_ctl start` was attempted, so `drop` must stop it.
    started: bool,
    /// Settings beyond the defaults (`-c name=value` each).
    settings: Vec<String>,
    /// Declared last so that it is removed after the server stopped.
    tmp: tempfile::TempDir,
}

impl PgServer {
    /// initdb a fresh cluster and start it on a free loopback port.
    pub(crate) fn start() -> PgServer {
        Self::start_with(&[])
    }

    /// A cluster that can serve logical replication (`wal_level =
    /// logical`), for change data capture tests.
    pub(crate) fn start_logical() -> PgServer {
        Self::start_with(&[
            "wal_level=logical",
            "max_replication_slots=16",
            "max_wal_senders=16",
        ])
    }

    /// initdb a fresh cluster and start it with `settings` (`name=value`).
    pub(crate) fn start_with(settings: &[&str]) -> PgServer {
        let run_as = pg_run_as_user();
        let tmp = tempfile::Builder::new()
            .prefix("freshet-pg-")
            .tempdir()
            .expect("create a temp dir for PostgreSQL");
        if let Some(user) = &run_as {
            let out = Command::new("chown")
                .arg(user)
                .arg(tmp.path())
                .output()
                .expect("run chown");
            check_status(&out, &format!("chown {user} {}", tmp.path().display()));
        }
        let mut pg = PgServer {
            port: free_port(),
            data_dir: tmp.path().join("data"),
            run_as,
            started: false,
            settings: settings.iter().map(|s| format!(" -c {s}")).collect(),
            tmp,
        };
        pg.initdb();
        pg.pg_ctl_start();
        pg
    }

    /// A command for PostgreSQL binary `bin`, run as the server's user.
    fn command(&self, bin: &str) -> Command {
        let program = pg_binary(bin);
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.arg("-u").arg(user).arg("--").arg(program);
                c
            }
            None => Command::new(program),
        };
        // The server user may not be able to read the test's working directory.
        cmd.current_dir(self.tmp.path());
        cmd
    }

    fn initdb(&self) {
        let out = self
            .command("initdb")
            .arg("-D")
            .arg(&self.data_dir)
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "--locale=C",
                "--lc-ctype=C.UTF-8",
            ])
            .args(["--encoding=UTF8", "--no-sync"])
            .output()
            .expect("run initdb (is PostgreSQL installed?)");
        check_status(&out, "initdb");
    }

    fn pg_ctl_start(&mut self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c TimeZone=UTC -c fsync=off{}",
            self.port,
            self.tmp.path().display(),
            self.settings.concat()
        );
        let log = self.tmp.path().join("postgres.log");
        self.started = true;
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&self.data_dir)
            .arg("-l")
            .arg(&log)
            .arg("-o")
            .arg(options)
            .args(["-w", "-t", "60", "start"])
            .output()
            .expect("run pg_ctl start");
        if !out.status.success() {
            let log_text = std::fs::read_to_string(&log).unwrap_or_default();
            panic!(
                "PostgreSQL did not start: {}\nserver log:\n{log_text}",
                describe_output(&out)
            );
        }
    }

    /// Stop the server (`pg_ctl stop -m fast`): clients see their
    /// connections end, as in an upstream outage.
    pub(crate) fn stop(&mut self) {
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&self.data_dir)
            .args(["-m", "fast", "-w", "stop"])
            .output()
            .expect("run pg_ctl stop");
        check_status(&out, "pg_ctl stop");
        self.started = false;
    }

    /// Start it again after [`PgServer::stop`], on the same port.
    pub(crate) fn restart(&mut self) {
        self.pg_ctl_start();
    }

    /// The port it listens on (127.0.0.1).
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Connection string of the `postgres` database as user `postgres`.
    pub(crate) fn conn_str(&self) -> String {
        self.conn_str_db("postgres")
    }

    /// Connection string of database `db` as user `postgres`.
    pub(crate) fn conn_str_db(&self, db: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname={db}",
            self.port
        )
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if !self.started {
            return;
        }
        let result = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&self.data_dir)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        match result {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!("pg_ctl stop failed: {}", describe_output(&out)),
            Err(e) => eprintln!("could not run pg_ctl stop: {e}"),
        }
    }
}

/// The user PostgreSQL must run as: `None` unless the test runs as root.
pub(crate) fn pg_run_as_user() -> Option<String> {
    let out = Command::new("id")
        .arg("-u")
        .output()
        .expect("run `id -u` to learn whether the test runs as root");
    check_status(&out, "id -u");
    if String::from_utf8_lossy(&out.stdout).trim() != "0" {
        return None;
    }
    if let Ok(user) = std::env::var("FRESHET_PG_USER") {
        assert!(
            user_exists(&user),
            "FRESHET_PG_USER={user}, but there is no such user"
        );
        return Some(user);
    }
    ensure_default_pg_user();
    Some(DEFAULT_PG_USER.to_string())
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
pub(crate) fn ensure_default_pg_user() {
    if user_exists(DEFAULT_PG_USER) {
        return;
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
    // Another test process may have created it concurrently: check again.
    if user_exists(DEFAULT_PG_USER) {
        return;
    }
    let detail = match result {
        Ok(out) => describe_output(&out),
        Err(e) => e.to_string(),
    };
    panic!(
        "PostgreSQL refuses to run as root and creating the user `{DEFAULT_PG_USER}` failed \
         ({detail}). Run the test as a non-root user, or create a system user and export \
         FRESHET_PG_USER=<user>."
    );
}

/// The path of PostgreSQL binary `bin`.
pub(crate) fn pg_binary(bin: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("FRESHET_PG_BINDIR") {
        let path = Path::new(&dir).join(bin);
        assert!(
            path.is_file(),
            "FRESHET_PG_BINDIR has no {}",
            path.display()
        );
        return path;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(bin))
        .chain([Path::new("/usr/lib/postgresql/15/bin").join(bin)])
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "PostgreSQL binary `{bin}` not found on PATH or in /usr/lib/postgresql/15/bin; \
                 install PostgreSQL 15 or set FRESHET_PG_BINDIR"
            )
        })
}

/// A loopback port nothing listens on right now.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("find a free loopback port")
}

/// Panic with the command's output unless it succeeded.
pub(crate) fn check_status(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        describe_output(out)
    );
}

/// A command's exit status, stdout and stderr, for error messages.
pub(crate) fn describe_output(out: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

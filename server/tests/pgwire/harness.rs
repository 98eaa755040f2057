//! Starting real `freshet` processes for tests.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio_postgres::{Client, NoTls};

/// A `freshet` server process on a temp data directory.
pub struct Server {
    pub port: u16,
    pub http_port: u16,
    pub data_dir: PathBuf,
    child: Option<Child>,
    _tmp: Option<tempfile::TempDir>,
    /// Extra command-line flags.
    args: Vec<String>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

impl Server {
    /// Start a server on a fresh data directory.
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// Start a server on a fresh data directory with extra flags.
    pub fn start_with(args: &[&str]) -> Server {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut s = Server {
            port: free_port(),
            http_port: free_port(),
            data_dir: tmp.path().to_path_buf(),
            child: None,
            _tmp: Some(tmp),
            args: args.iter().map(|a| a.to_string()).collect(),
        };
        s.spawn();
        s
    }

    /// Start another server on an existing data directory.
    pub fn start_on(data_dir: &Path) -> Server {
        let mut s = Server {
            port: free_port(),
            http_port: free_port(),
            data_dir: data_dir.to_path_buf(),
            child: None,
            _tmp: None,
            args: Vec::new(),
        };
        s.spawn();
        s
    }

    /// Start the process and wait until it listens. The ports were free
    /// when picked, but a test running alongside may take one first (a
    /// kill and its restart; or an outgoing connection's ephemeral port,
    /// held only for a moment, so it may be free again when looked at):
    /// then the server cannot listen, and it is started again on ports
    /// free now. A server that exits every time fails the test with its
    /// last exit status (its log is on stderr).
    fn spawn(&mut self) {
        let mut exits = Vec::new();
        for _ in 0..5 {
            match self.try_spawn() {
                None => return,
                Some(status) => exits.push(status),
            }
            self.port = free_port();
            self.http_port = free_port();
        }
        panic!("freshet exited during startup five times: {exits:?}");
    }

    /// Start the process; its exit status if it exited during startup.
    fn try_spawn(&mut self) -> Option<std::process::ExitStatus> {
        let child = Command::new(env!("CARGO_BIN_EXE_freshet"))
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--http-listen")
            .arg(format!("127.0.0.1:{}", self.http_port))
            .arg("--log-filter")
            .arg(std::env::var("FRESHET_TEST_LOG").unwrap_or_else(|_| "warn".into()))
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn freshet");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        let pid = self.child.as_ref().map(Child::id).unwrap_or_default();
        while !listens_on(pid, &[self.port, self.http_port]) {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Some(status);
            }
            assert!(Instant::now() < deadline, "freshet did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Kill with SIGKILL and start again on the same directory and port.
    pub fn kill_and_restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// SIGKILL the process.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Open file descriptors of the server process (Linux).
    pub fn open_fds(&self) -> usize {
        let pid = self.pid().expect("server running");
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// CPU time (user + system) the server process has used so far.
    pub fn cpu_time(&self) -> Duration {
        let pid = self.pid().expect("server running");
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Fields after the command name (which may hold spaces) start at
        // the state; utime and stime are the 14th and 15th fields.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks: u64 = fields
            .get(11..13)
            .map_or(0, |f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum());
        // Linux reports CPU time in clock ticks of 1/100 s.
        Duration::from_millis(ticks * 10)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Wait for the process to exit on its own.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Connection string for database `db`.
    pub fn conn_str(&self, db: &str) -> String {
        format!("host=127.0.0.1 port={} user=freshet dbname={db}", self.port)
    }

    /// Connect to database `freshet`.
    pub async fn connect(&self) -> Client {
        self.connect_db("freshet").await.expect("connect")
    }

    /// Connect to a database.
    pub async fn connect_db(&self, db: &str) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = tokio_postgres::connect(&self.conn_str(db), NoTls).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }
}

/// Whether process `pid` holds the listening sockets of all `ports` on
/// 127.0.0.1 (Linux). Waiting for a connect to succeed is not enough: a
/// server another test started moments earlier may have taken the same
/// port, and then this test would talk to that server while its own one
/// fails to bind and exits.
fn listens_on(pid: u32, ports: &[u16]) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else {
        return false;
    };
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    let sockets: Vec<String> = fds
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| link.to_str().map(str::to_owned))
        .collect();
    ports.iter().all(|port| {
        listening_inode(&table, *port)
            .is_some_and(|inode| sockets.contains(&format!("socket:[{inode}]")))
    })
}

/// The inode of the socket listening on 127.0.0.1:`port`, from the text
/// of /proc/net/tcp (fields: slot, local address, remote address, state,
/// queues, timer, retransmits, uid, timeout, inode; state 0A is LISTEN).
fn listening_inode(table: &str, port: u16) -> Option<String> {
    let local = format!("0100007F:{port:04X}");
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(1) == Some(&local.as_str()) && fields.get(3) == Some(&"0A"))
            .then(|| fields.get(9).map(|inode| inode.to_string()))
            .flatten()
    })
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The SQLSTATE of a failed statement.
pub fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.code().code().to_string())
        .unwrap_or_else(|| format!("not a db error: {e}"))
}

/// Rows of a simple query as text.
pub async fn rows(client: &Client, sql: &str) -> Vec<Vec<Option<String>>> {
    let mut out = vec![];
    for msg in client.simple_query(sql).await.expect(sql) {
        if let tokio_postgres::SimpleQueryMessage::Row(r) = msg {
            out.push((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect());
        }
    }
    out
}

/// Single text value of a simple query.
pub async fn value(client: &Client, sql: &str) -> Option<String> {
    rows(client, sql)
        .await
        .into_iter()
        .next()
        .and_then(|r| r.into_iter().next())
        .flatten()
}

/// How many read holds an object named `table` has (any schema).
pub async fn holds_on(c: &Client, table: &str) -> usize {
    rows(
        c,
        &format!(
            "SELECT count FROM freshet_internal.read_holds WHERE object_name LIKE '%.{table}'"
        ),
    )
    .await
    .len()
}

//! Bulk load: `COPY` of TPC-H's eight tables (CSV from `tpchgen-cli`) into
//! Freshet and PostgreSQL 15, with and without primary keys, with
//! Freshet's resident memory during and after the load.
//!
//! Freshet declares its keys in `CREATE TABLE` (every COPY checks them as
//! it commits). PostgreSQL gets them the way `pg_dump` restores do, the
//! fastest way it has: COPY into bare tables, then `ALTER TABLE ... ADD
//! PRIMARY KEY`, timed on its own. Memory is Freshet's `VmHWM` (peak
//! resident set, reset before each table through `/proc/PID/clear_refs`)
//! and `VmRSS` five seconds after the last COPY, and again after a
//! restart and a `count(*)` of every table.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::SinkExt;
use tokio::io::AsyncReadExt;

use crate::error::{Context, Result, failed};
use crate::freshet::FreshetServer;
use crate::postgres::PgServer;

/// The tables in load order, their columns and primary keys.
pub const TABLES: [(&str, &str, &str); 8] = [
    (
        "nation",
        "n_nationkey INTEGER NOT NULL, n_name CHAR(25) NOT NULL, n_regionkey INTEGER NOT NULL, n_comment VARCHAR(152)",
        "n_nationkey",
    ),
    (
        "region",
        "r_regionkey INTEGER NOT NULL, r_name CHAR(25) NOT NULL, r_comment VARCHAR(152)",
        "r_regionkey",
    ),
    (
        "part",
        "p_partkey INTEGER NOT NULL, p_name VARCHAR(55) NOT NULL, p_mfgr CHAR(25) NOT NULL, p_brand CHAR(10) NOT NULL, p_type VARCHAR(25) NOT NULL, p_size INTEGER NOT NULL, p_container CHAR(10) NOT NULL, p_retailprice DECIMAL(15,2) NOT NULL, p_comment VARCHAR(23) NOT NULL",
        "p_partkey",
    ),
    (
        "supplier",
        "s_suppkey INTEGER NOT NULL, s_name CHAR(25) NOT NULL, s_address VARCHAR(40) NOT NULL, s_nationkey INTEGER NOT NULL, s_phone CHAR(15) NOT NULL, s_acctbal DECIMAL(15,2) NOT NULL, s_comment VARCHAR(101) NOT NULL",
        "s_suppkey",
    ),
    (
        "partsupp",
        "ps_partkey INTEGER NOT NULL, ps_suppkey INTEGER NOT NULL, ps_availqty INTEGER NOT NULL, ps_supplycost DECIMAL(15,2) NOT NULL, ps_comment VARCHAR(199) NOT NULL",
        "ps_partkey, ps_suppkey",
    ),
    (
        "customer",
        "c_custkey INTEGER NOT NULL, c_name VARCHAR(25) NOT NULL, c_address VARCHAR(40) NOT NULL, c_nationkey INTEGER NOT NULL, c_phone CHAR(15) NOT NULL, c_acctbal DECIMAL(15,2) NOT NULL, c_mktsegment CHAR(10) NOT NULL, c_comment VARCHAR(117) NOT NULL",
        "c_custkey",
    ),
    (
        "orders",
        "o_orderkey INTEGER NOT NULL, o_custkey INTEGER NOT NULL, o_orderstatus CHAR(1) NOT NULL, o_totalprice DECIMAL(15,2) NOT NULL, o_orderdate DATE NOT NULL, o_orderpriority CHAR(15) NOT NULL, o_clerk CHAR(15) NOT NULL, o_shippriority INTEGER NOT NULL, o_comment VARCHAR(79) NOT NULL",
        "o_orderkey",
    ),
    (
        "lineitem",
        "l_orderkey INTEGER NOT NULL, l_partkey INTEGER NOT NULL, l_suppkey INTEGER NOT NULL, l_linenumber INTEGER NOT NULL, l_quantity DECIMAL(15,2) NOT NULL, l_extendedprice DECIMAL(15,2) NOT NULL, l_discount DECIMAL(15,2) NOT NULL, l_tax DECIMAL(15,2) NOT NULL, l_returnflag CHAR(1) NOT NULL, l_linestatus CHAR(1) NOT NULL, l_shipdate DATE NOT NULL, l_commitdate DATE NOT NULL, l_receiptdate DATE NOT NULL, l_shipinstruct CHAR(25) NOT NULL, l_shipmode CHAR(10) NOT NULL, l_comment VARCHAR(44) NOT NULL",
        "l_orderkey, l_linenumber",
    ),
];

/// Bytes per CopyData message.
const CHUNK: usize = 1 << 20;

/// One table's load.
#[derive(Debug)]
pub struct TableLoad {
    name: String,
    rows: u64,
    /// Seconds of COPY.
    secs: f64,
    /// Seconds of adding its key (PostgreSQL with keys).
    key_secs: Option<f64>,
    /// Peak RSS during its COPY (Freshet, KiB).
    peak_kib: Option<u64>,
}

/// One system's load of every table.
#[derive(Debug, Default)]
pub struct Load {
    /// Per table, in load order.
    pub tables: Vec<TableLoad>,
    /// RSS five seconds after the load (KiB).
    pub rss_at_rest: Option<u64>,
    /// RSS after a restart and a count of every table (KiB).
    pub rss_after_restart: Option<u64>,
    /// The data directory's size after the load (bytes).
    pub disk: Option<u64>,
}

impl Load {
    fn total(&self) -> f64 {
        self.tables
            .iter()
            .map(|t| t.secs + t.key_secs.unwrap_or(0.0))
            .sum()
    }
}

/// The benchmark's results.
pub struct TpchLoad {
    /// `tpchgen-cli` CSV directory.
    pub dir: PathBuf,
    /// Freshet without keys, with keys; PostgreSQL likewise.
    pub freshet: [Load; 2],
    pub postgres: [Load; 2],
}

pub(crate) fn csv(dir: &Path, table: &str) -> PathBuf {
    dir.join(format!("{table}.csv"))
}

/// Load every table into fresh Freshet servers and PostgreSQL clusters.
pub async fn run(
    bin: &Path,
    workers: Option<u32>,
    pg_bindir: Option<&Path>,
    dir: &Path,
) -> Result<TpchLoad> {
    for (t, _, _) in TABLES {
        if !csv(dir, t).exists() {
            return failed(format!(
                "{} is missing: generate the data with `tpchgen-cli csv -s 1 --output-dir {}`",
                csv(dir, t).display(),
                dir.display()
            ));
        }
    }
    let mut freshet: [Load; 2] = Default::default();
    let mut postgres: [Load; 2] = Default::default();
    for (i, keys) in [false, true].into_iter().enumerate() {
        eprintln!("tpch load: Freshet, keys: {keys}");
        freshet[i] = load_freshet(bin, workers, dir, keys).await?;
        eprintln!("tpch load: PostgreSQL, keys: {keys}");
        postgres[i] = load_postgres(pg_bindir, dir, keys).await?;
    }
    Ok(TpchLoad {
        dir: dir.to_path_buf(),
        freshet,
        postgres,
    })
}

/// A `/proc/PID/status` field in KiB.
pub(crate) fn proc_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

pub(crate) fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => total += dir_bytes(&e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// COPY a CSV file (with its header line) through `client`.
pub(crate) async fn copy_file(
    client: &tokio_postgres::Client,
    table: &str,
    path: &Path,
) -> Result<u64> {
    let sql = format!("COPY {table} FROM STDIN WITH (FORMAT csv, HEADER true)");
    let sink = client
        .copy_in::<_, Bytes>(sql.as_str())
        .await
        .context(sql.clone())?;
    futures::pin_mut!(sink);
    let mut file = tokio::fs::File::open(path)
        .await
        .context(format!("open {}", path.display()))?;
    loop {
        let mut buf = vec![0u8; CHUNK];
        let n = file
            .read(&mut buf)
            .await
            .context(format!("read {}", path.display()))?;
        if n == 0 {
            break;
        }
        buf.truncate(n);
        sink.send(Bytes::from(buf)).await.context(sql.clone())?;
    }
    sink.finish().await.context(sql)
}

pub(crate) fn create_sql(keys: bool) -> Vec<String> {
    TABLES
        .iter()
        .map(|(t, cols, pk)| match keys {
            true => format!("CREATE TABLE {t} ({cols}, PRIMARY KEY ({pk}))"),
            false => format!("CREATE TABLE {t} ({cols})"),
        })
        .collect()
}

async fn load_freshet(bin: &Path, workers: Option<u32>, dir: &Path, keys: bool) -> Result<Load> {
    let mut server = FreshetServer::start(bin, workers).await?;
    let pid = server.pid();
    let client = server.connect().await?;
    for sql in create_sql(keys) {
        client.batch_execute(&sql).await.context(sql.clone())?;
    }
    let mut load = Load::default();
    for (t, _, _) in TABLES {
        // Reset the peak so each table's is its own.
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
        let start = Instant::now();
        let rows = copy_file(&client, t, &csv(dir, t)).await?;
        let secs = start.elapsed().as_secs_f64();
        eprintln!("  {t}: {rows} rows in {secs:.2} s");
        load.tables.push(TableLoad {
            name: t.to_string(),
            rows,
            secs,
            key_secs: None,
            peak_kib: proc_kib(pid, "VmHWM:"),
        });
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    load.rss_at_rest = proc_kib(pid, "VmRSS:");
    load.disk = Some(dir_bytes(&server.data_dir()));
    drop(client);
    server.kill_and_restart().await?;
    let client = server.connect().await?;
    for (i, (t, _, _)) in TABLES.iter().enumerate() {
        let n: i64 = client
            .query_one(&format!("SELECT count(*) FROM {t}"), &[])
            .await
            .context(format!("count {t} after the restart"))?
            .get(0);
        if n as u64 != load.tables[i].rows {
            return failed(format!(
                "{t} holds {n} rows after a restart, {} were loaded",
                load.tables[i].rows
            ));
        }
    }
    load.rss_after_restart = proc_kib(server.pid(), "VmRSS:");
    Ok(load)
}

async fn load_postgres(pg_bindir: Option<&Path>, dir: &Path, keys: bool) -> Result<Load> {
    let pg = PgServer::start_with(pg_bindir, &[])?;
    let client = pg.connect().await?;
    for sql in create_sql(false) {
        client.batch_execute(&sql).await.context(sql.clone())?;
    }
    let mut load = Load::default();
    for (t, _, pk) in TABLES {
        let start = Instant::now();
        let rows = copy_file(&client, t, &csv(dir, t)).await?;
        let secs = start.elapsed().as_secs_f64();
        let key_secs = if keys {
            let start = Instant::now();
            let sql = format!("ALTER TABLE {t} ADD PRIMARY KEY ({pk})");
            client.batch_execute(&sql).await.context(sql)?;
            Some(start.elapsed().as_secs_f64())
        } else {
            None
        };
        eprintln!("  {t}: {rows} rows in {secs:.2} s (+ key {key_secs:?})");
        load.tables.push(TableLoad {
            name: t.to_string(),
            rows,
            secs,
            key_secs,
            peak_kib: None,
        });
    }
    Ok(load)
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("-".into(), |k| format!("{:.0} MiB", k as f64 / 1024.0))
}

/// The report section.
pub fn render(run: &TpchLoad) -> String {
    let mut out = format!("## TPC-H SF1 bulk load (COPY of {})\n\n", run.dir.display());
    for (i, label) in ["without keys", "with primary keys"].iter().enumerate() {
        let (f, p) = (&run.freshet[i], &run.postgres[i]);
        out.push_str(&format!(
            "### {label}\n\n| table | rows | Freshet s | Freshet peak RSS | PostgreSQL s |\n|---|---:|---:|---:|---:|\n"
        ));
        for (ft, pt) in f.tables.iter().zip(&p.tables) {
            let pg = match pt.key_secs {
                Some(k) => format!("{:.2} + key {:.2}", pt.secs, k),
                None => format!("{:.2}", pt.secs),
            };
            out.push_str(&format!(
                "| {} | {} | {:.2} | {} | {} |\n",
                ft.name,
                ft.rows,
                ft.secs,
                mib(ft.peak_kib),
                pg
            ));
        }
        out.push_str(&format!(
            "| **total** | | **{:.1}** | | **{:.1}** |\n\nFreshet/PostgreSQL time: {:.2}x. Freshet RSS 5 s after the load: {}; after a restart and a count of every table: {}; data directory {:.0} MiB.\n\n",
            f.total(),
            p.total(),
            f.total() / p.total(),
            mib(f.rss_at_rest),
            mib(f.rss_after_restart),
            f.disk.unwrap_or(0) as f64 / (1 << 20) as f64
        ));
    }
    out
}

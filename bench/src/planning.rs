//! Planning long statements (issue 14): how the time to answer one
//! statement grows with its length, on Freshet and on PostgreSQL.
//!
//! Each statement reads `t (x int)` with 2,000 rows and is a long `IN`
//! list, a long chain of `+`, `OR` or `AND`, generated at several lengths.
//! Each is sent [`REPEATS`] times over the simple query protocol and the
//! median wall time from send to the last row is reported; the answer is
//! checked against the count the generator knows. The time includes
//! sending and parsing the text (a 100,000-item list is ~600 KB) and
//! executing over the 2,000 rows; for long statements planning is most of
//! it.

use std::time::{Duration, Instant};

use tokio_postgres::{Client, SimpleQueryMessage};

use crate::error::{Context, Result, failed};
use crate::freshet::FreshetServer;
use crate::postgres::PgServer;

/// Times each statement is sent; the median is reported.
const REPEATS: usize = 3;

/// Rows of `t`.
const ROWS: i64 = 2_000;

/// One statement shape at one length.
#[derive(Debug, Clone)]
pub struct Case {
    /// What the statement is, e.g. "`x IN (...)`".
    pub shape: &'static str,
    /// Items, terms or operands.
    pub length: usize,
    sql: String,
    /// The `count(*)` the statement must answer.
    expected: i64,
}

/// The cases, shortest first within each shape.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for n in [1_000usize, 10_000, 100_000] {
        // Items 0, 3, 6, ...: the rows 1..=2000 that are multiples of 3.
        let items: Vec<String> = (0..n).map(|i| (3 * i).to_string()).collect();
        let hit = (ROWS.min(3 * (n as i64 - 1))) / 3;
        out.push(Case {
            shape: "`x IN (...)`",
            length: n,
            sql: format!("SELECT count(*) FROM t WHERE x IN ({})", items.join(", ")),
            expected: hit,
        });
    }
    for n in [1_000usize, 3_000, 9_000] {
        // x + 0 + 0 + ... = x: every row passes `> 0`.
        let terms = vec!["0"; n - 1].join(" + ");
        out.push(Case {
            shape: "`x + 0 + ... > 0`",
            length: n,
            sql: format!("SELECT count(*) FROM t WHERE x + {terms} > 0"),
            expected: ROWS,
        });
    }
    for n in [1_000usize, 4_900] {
        // x = 1 OR x = 2 OR ...: rows 1..=min(n, 2000).
        let terms: Vec<String> = (1..=n).map(|i| format!("x = {i}")).collect();
        out.push(Case {
            shape: "`x = 1 OR x = 2 OR ...`",
            length: n,
            sql: format!("SELECT count(*) FROM t WHERE {}", terms.join(" OR ")),
            expected: ROWS.min(n as i64),
        });
        // x <> 100001 AND x <> 100002 AND ...: every row passes.
        let terms: Vec<String> = (1..=n).map(|i| format!("x <> {}", 100_000 + i)).collect();
        out.push(Case {
            shape: "`x <> 100001 AND x <> 100002 AND ...`",
            length: n,
            sql: format!("SELECT count(*) FROM t WHERE {}", terms.join(" AND ")),
            expected: ROWS,
        });
    }
    out
}

/// The median time of one case on both systems.
#[derive(Debug, Clone)]
pub struct PlanningRow {
    pub case: Case,
    pub freshet: std::result::Result<Duration, String>,
    pub postgres: Option<std::result::Result<Duration, String>>,
}

/// Run every case on Freshet, then on PostgreSQL if given.
pub async fn run(
    bin: &std::path::Path,
    workers: Option<u32>,
    pg: Option<&PgServer>,
) -> Result<Vec<PlanningRow>> {
    let freshet = FreshetServer::start(bin, workers).await?;
    let f = freshet.connect().await?;
    load(&f).await?;
    let p = match pg {
        Some(pg) => {
            let c = pg.connect().await?;
            c.batch_execute("DROP TABLE IF EXISTS t").await.ok();
            load(&c).await?;
            Some(c)
        }
        None => None,
    };
    let mut out = Vec::new();
    for case in cases() {
        eprintln!("planning: {} with {} on Freshet", case.shape, case.length);
        let freshet = median(&f, &case).await;
        let postgres = match &p {
            Some(c) => {
                eprintln!(
                    "planning: {} with {} on PostgreSQL",
                    case.shape, case.length
                );
                Some(median(c, &case).await)
            }
            None => None,
        };
        out.push(PlanningRow {
            case,
            freshet,
            postgres,
        });
    }
    Ok(out)
}

async fn load(c: &Client) -> Result<()> {
    c.batch_execute(&format!(
        "CREATE TABLE t (x int); INSERT INTO t SELECT g FROM generate_series(1, {ROWS}) AS s(g)"
    ))
    .await
    .context("load t")
}

/// The median of [`REPEATS`] runs, or the first error.
async fn median(c: &Client, case: &Case) -> std::result::Result<Duration, String> {
    let mut times = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        let start = Instant::now();
        let messages = c
            .simple_query(&case.sql)
            .await
            .map_err(|e| match e.as_db_error() {
                Some(db) => format!("{}: {}", db.code().code(), db.message()),
                None => e.to_string(),
            })?;
        let elapsed = start.elapsed();
        let got = messages.iter().find_map(|m| match m {
            SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse::<i64>().ok()),
            _ => None,
        });
        if got != Some(case.expected) {
            return Err(format!("answered {got:?}, expected {}", case.expected));
        }
        times.push(elapsed);
    }
    times.sort();
    Ok(times[times.len() / 2])
}

/// The report section.
pub fn render(rows: &[PlanningRow]) -> String {
    let mut s = String::from("## Planning long statements\n\n");
    s.push_str(&format!(
        "One client; `t (x int)` with {ROWS} rows; each statement sent {REPEATS} times \
         (simple query protocol), median wall time from send to the last row, answer checked.\n\n"
    ));
    s.push_str("| statement | length | Freshet (s) | PostgreSQL (s) | ratio |\n|---|---:|---:|---:|---:|\n");
    let show = |r: &std::result::Result<Duration, String>| match r {
        Ok(d) => format!("{:.3}", d.as_secs_f64()),
        Err(e) => format!("error: {e}"),
    };
    for row in rows {
        let pg = row
            .postgres
            .as_ref()
            .map(show)
            .unwrap_or_else(|| "—".into());
        let ratio = match (&row.freshet, &row.postgres) {
            (Ok(f), Some(Ok(p))) if !p.is_zero() => {
                format!("{:.1}×", f.as_secs_f64() / p.as_secs_f64())
            }
            _ => "—".into(),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            row.case.shape,
            row.case.length,
            show(&row.freshet),
            pg,
            ratio
        ));
    }
    s
}

/// Refuse to report a run in which Freshet failed a case.
pub fn check(rows: &[PlanningRow]) -> Result<()> {
    match rows.iter().find(|r| r.freshet.is_err()) {
        Some(r) => failed(format!(
            "{} with {} failed on Freshet: {:?}",
            r.case.shape, r.case.length, r.freshet
        )),
        None => Ok(()),
    }
}

//! Differential testing against a real PostgreSQL.
//!
//! The corpus in `tests/differential/corpus/*.sql` runs, file by file in
//! name order (one session each side, so later files see earlier files'
//! tables; each file should create its own), record by record, on a
//! fresh `freshet` server and on a PostgreSQL instance this test starts in a
//! temp directory. Every record goes through the simple query protocol on
//! both servers and the outcomes are compared:
//!
//! * both succeed: the column count, the row count and every value as text
//!   (NULL distinguished from every string) must match; `-- query rowsort`
//!   sorts the rows of both sides first;
//! * both fail: the SQLSTATEs must match (the messages are not compared);
//! * one fails and the other does not: a difference.
//!
//! `-- setup` records must succeed on both servers and report the same
//! affected-row count.
//!
//! Differences listed in `tests/differential/known_differences.txt` are
//! expected. The test passes iff every difference found is listed and every
//! listed entry still differs (entries that now agree are reported as "fixed,
//! remove from list", entries whose query is not in the corpus as stale).
//!
//! # Corpus format
//!
//! Records are blocks of consecutive non-blank lines. A block starts with a
//! directive line:
//!
//! ```text
//! -- setup
//! CREATE TABLE t (a int)
//!
//! -- query rowsort
//! SELECT a FROM t
//! ```
//!
//! Directives are `-- setup`, `-- query` and `-- query rowsort`. The rest of
//! the block is one SQL statement; full-line `--` comments inside it are
//! dropped. A block made only of `--` comment lines is a comment.
//!
//! # Known-differences format
//!
//! Lines starting with `#` are comments. An entry is a block whose first line
//! is `reason: <one line>` and whose remaining lines are the query text,
//! exactly as in the corpus (whitespace runs are insignificant):
//!
//! ```text
//! reason: avg(integer) is double precision in Freshet, numeric in PostgreSQL
//! SELECT avg(i4) FROM t_types
//! ```
//!
//! # Running PostgreSQL
//!
//! (Implemented in [`crate::pg`].) `initdb`, `pg_ctl` (and the `postgres` they start) are looked up in
//! `$FRESHET_PG_BINDIR`, then on `$PATH`, then in `/usr/lib/postgresql/15/bin`.
//! PostgreSQL refuses to run as root, so as root the binaries run through
//! `runuser -u $FRESHET_PG_USER --`; when that variable is unset the system
//! user `freshet-pg` is used, and created with `useradd` if missing. The
//! cluster is UTF8 with the C collation (Freshet compares text bytewise),
//! `C.UTF-8` character classes (`upper`/`initcap` of non-ASCII letters, as in
//! Freshet) and `TimeZone=UTC` (Freshet's default). The test fails, and does
//! not skip, when PostgreSQL cannot be started.
//!
//! Reports print NULL as `NULL` (the comparison itself tells NULL from the
//! string 'NULL').
//!
//! Set `FRESHET_DIFF_VERBOSE=1` to also print both results of every known
//! difference.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use crate::endpoint::{DbError, Endpoint, Rows};
use crate::harness::Server;
use crate::pg::PgServer;

/// The directory of corpus files both servers run, in file name order.
const CORPUS_DIR: &str = "tests/differential/corpus";
/// The differences that are expected, with their reasons.
const KNOWN_PATH: &str = "tests/differential/known_differences.txt";

/// `file` under the server crate's directory as `cargo test` names it now
/// (a test binary reused from a build cache filled by a checkout
/// elsewhere carries that checkout's path in `env!`).
fn crate_file(file: &str) -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join(file)
}
/// How long one record may take on one server.
const RECORD_TIMEOUT: Duration = Duration::from_secs(60);
/// How many rows of a result a report shows.
const MAX_REPORTED_ROWS: usize = 20;

// ---------------------------------------------------------------------------
// Corpus and known differences
// ---------------------------------------------------------------------------

/// What a record is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Must succeed on both servers.
    Setup,
    /// Compared; `rowsort` sorts the rows of both results first.
    Query { rowsort: bool },
}

/// One statement of the corpus.
#[derive(Clone, Debug)]
struct Record {
    /// The corpus file (its name under [`CORPUS_DIR`]) the record is in.
    file: String,
    /// 1-based line of the directive in the corpus file.
    line: usize,
    kind: Kind,
    sql: String,
}

impl Record {
    /// The text known differences are keyed by.
    fn key(&self) -> String {
        normalize_sql(&self.sql)
    }
}

/// A known difference: the query it is about and why.
#[derive(Clone, Debug)]
struct Known {
    /// 1-based line of the entry in the known-differences file.
    line: usize,
    reason: String,
    key: String,
}

/// SQL with every whitespace run collapsed to one space.
fn normalize_sql(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Blocks of consecutive non-blank lines, each line with its 1-based number.
fn blocks(text: &str) -> Vec<Vec<(usize, &str)>> {
    let mut out = vec![];
    let mut current: Vec<(usize, &str)> = vec![];
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
        } else {
            current.push((i + 1, line));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The kind a directive line names, if it is one.
fn directive(line: &str) -> Option<Kind> {
    let words: Vec<&str> = line.strip_prefix("--")?.split_whitespace().collect();
    match words.as_slice() {
        ["setup"] => Some(Kind::Setup),
        ["query"] => Some(Kind::Query { rowsort: false }),
        ["query", "rowsort"] => Some(Kind::Query { rowsort: true }),
        _ => None,
    }
}

/// Parse the corpus format described in the module docs; `file` names
/// the records' origin in reports.
fn parse_corpus(file: &str, text: &str) -> Result<Vec<Record>, String> {
    let mut records = vec![];
    for block in blocks(text) {
        let (line, first) = block[0];
        let Some(kind) = directive(first.trim()) else {
            if block.iter().all(|(_, l)| l.trim_start().starts_with("--")) {
                continue;
            }
            return Err(format!(
                "{file}:{line}: a block must start with `-- setup`, `-- query` or \
                 `-- query rowsort`, or consist of comments only"
            ));
        };
        let sql: Vec<&str> = block[1..]
            .iter()
            .map(|(_, l)| *l)
            .filter(|l| !l.trim_start().starts_with("--"))
            .collect();
        let sql = sql.join("\n").trim().to_string();
        if sql.is_empty() {
            return Err(format!("{file}:{line}: record without SQL"));
        }
        records.push(Record {
            file: file.to_string(),
            line,
            kind,
            sql,
        });
    }
    Ok(records)
}

/// Parse the known-differences format described in the module docs.
fn parse_known(text: &str) -> Result<Vec<Known>, String> {
    let without_comments: Vec<&str> = text
        .lines()
        .map(|l| {
            if l.trim_start().starts_with('#') {
                ""
            } else {
                l
            }
        })
        .collect();
    let without_comments = without_comments.join("\n");
    let mut entries = vec![];
    for block in blocks(&without_comments) {
        let (line, first) = block[0];
        let Some(reason) = first.trim().strip_prefix("reason:") else {
            return Err(format!("line {line}: an entry must start with `reason:`"));
        };
        let query: Vec<&str> = block[1..].iter().map(|(_, l)| *l).collect();
        let key = normalize_sql(&query.join("\n"));
        if reason.trim().is_empty() || key.is_empty() {
            return Err(format!("line {line}: an entry needs a reason and a query"));
        }
        entries.push(Known {
            line,
            reason: reason.trim().to_string(),
            key,
        });
    }
    Ok(entries)
}

// ---------------------------------------------------------------------------
// Running records
// ---------------------------------------------------------------------------

/// What running one record on one server gave.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// The statement succeeded.
    Rows {
        /// Columns of the last row description (0 for statements without rows).
        columns: usize,
        rows: Vec<Vec<Option<String>>>,
        /// The count of the last command tag (rows returned or affected).
        affected: u64,
    },
    /// The statement failed.
    Error { sqlstate: String, message: String },
}

impl Outcome {
    fn is_error(&self) -> bool {
        matches!(self, Outcome::Error { .. })
    }

    /// The same outcome with its rows sorted.
    fn sorted(mut self) -> Outcome {
        if let Outcome::Rows { rows, .. } = &mut self {
            rows.sort();
        }
        self
    }

    /// A multi-line rendering for reports.
    fn render(&self) -> String {
        match self {
            Outcome::Error { sqlstate, message } => format!("ERROR {sqlstate}: {message}"),
            Outcome::Rows {
                columns,
                rows,
                affected,
            } => {
                let mut s = format!(
                    "{columns} column(s), {} row(s), tag count {affected}",
                    rows.len()
                );
                for row in rows.iter().take(MAX_REPORTED_ROWS) {
                    let cells: Vec<&str> =
                        row.iter().map(|v| v.as_deref().unwrap_or("NULL")).collect();
                    s.push_str("\n      | ");
                    s.push_str(&cells.join(" | "));
                }
                if rows.len() > MAX_REPORTED_ROWS {
                    s.push_str(&format!(
                        "\n      ... {} more",
                        rows.len() - MAX_REPORTED_ROWS
                    ));
                }
                s
            }
        }
    }
}

impl From<Result<Rows, DbError>> for Outcome {
    fn from(r: Result<Rows, DbError>) -> Outcome {
        match r {
            Ok(Rows {
                columns,
                rows,
                affected,
            }) => Outcome::Rows {
                columns,
                rows,
                affected,
            },
            Err(DbError { sqlstate, message }) => Outcome::Error { sqlstate, message },
        }
    }
}

/// Whether two outcomes of a record agree.
fn agree(kind: Kind, pg: &Outcome, fr: &Outcome) -> bool {
    match (pg, fr) {
        (Outcome::Error { sqlstate: a, .. }, Outcome::Error { sqlstate: b, .. }) => {
            kind != Kind::Setup && a == b
        }
        (Outcome::Rows { .. }, Outcome::Rows { .. }) => pg == fr,
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// Comparison and report
// ---------------------------------------------------------------------------

/// A record whose outcomes differ.
struct Difference {
    record: Record,
    pg: Outcome,
    fr: Outcome,
}

impl Difference {
    fn render(&self) -> String {
        format!(
            "  {}:{} {}\n    PostgreSQL: {}\n    Freshet:    {}",
            self.record.file,
            self.record.line,
            self.record.sql.replace('\n', "\n      "),
            self.pg.render(),
            self.fr.render()
        )
    }
}

/// The result of running the whole corpus.
#[derive(Default)]
struct Report {
    records: usize,
    agree: usize,
    /// Differences listed as known, with their reasons.
    known: Vec<(Difference, String)>,
    unexpected: Vec<Difference>,
    /// Known entries whose record now agrees.
    fixed: Vec<Known>,
    /// Known entries that match no record of the corpus.
    stale: Vec<Known>,
    /// Known entries listed twice.
    duplicate: Vec<Known>,
}

impl Report {
    fn passed(&self) -> bool {
        self.unexpected.is_empty()
            && self.fixed.is_empty()
            && self.stale.is_empty()
            && self.duplicate.is_empty()
    }

    fn render(&self, verbose: bool) -> String {
        let mut s = String::new();
        if !self.known.is_empty() {
            s.push_str("\nKnown differences:\n");
            for (d, reason) in &self.known {
                if verbose {
                    s.push_str(&format!("{}\n    reason: {reason}\n", d.render()));
                } else {
                    s.push_str(&format!(
                        "  {}:{} {}\n    reason: {reason}\n",
                        d.record.file,
                        d.record.line,
                        normalize_sql(&d.record.sql)
                    ));
                }
            }
        }
        if !self.unexpected.is_empty() {
            s.push_str("\nUnexpected differences:\n");
            for d in &self.unexpected {
                s.push_str(&format!("{}\n", d.render()));
            }
        }
        for (list, what) in [
            (&self.fixed, "fixed, remove from list"),
            (&self.stale, "not in the corpus, remove from list"),
            (&self.duplicate, "listed twice, remove one"),
        ] {
            for k in list {
                s.push_str(&format!(
                    "\nknown_differences.txt:{} ({what}): {}\n",
                    k.line, k.key
                ));
            }
        }
        s.push_str(&format!(
            "\nSummary: {} records, {} agree, {} known differences, {} unexpected differences, \
             {} fixed known differences, {} stale known differences\n",
            self.records,
            self.agree,
            self.known.len(),
            self.unexpected.len(),
            self.fixed.len(),
            self.stale.len() + self.duplicate.len(),
        ));
        s
    }
}

/// A record with its outcome on each server.
struct Run {
    record: Record,
    pg: Outcome,
    fr: Outcome,
}

/// Run every record on both servers, in corpus order.
async fn run_corpus(records: &[Record], pg: &mut Endpoint, fr: &mut Endpoint) -> Vec<Run> {
    let mut runs = Vec::with_capacity(records.len());
    for record in records {
        let (mut pg_out, mut fr_out): (Outcome, Outcome) = (
            pg.run(&record.sql).await.into(),
            fr.run(&record.sql).await.into(),
        );
        if record.kind == (Kind::Query { rowsort: true }) {
            pg_out = pg_out.sorted();
            fr_out = fr_out.sorted();
        }
        runs.push(Run {
            record: record.clone(),
            pg: pg_out,
            fr: fr_out,
        });
    }
    runs
}

/// Sort the runs into agreements, known and unexpected differences, and
/// check the known-differences list against them.
fn build_report(runs: Vec<Run>, known: &[Known]) -> Report {
    let mut report = Report::default();
    let mut reasons: BTreeMap<&str, &Known> = BTreeMap::new();
    for k in known {
        if reasons.insert(&k.key, k).is_some() {
            report.duplicate.push(k.clone());
        }
    }
    let mut seen = HashSet::new();
    for Run { record, pg, fr } in runs {
        let key = record.key();
        let listed = reasons.get(key.as_str()).copied();
        seen.insert(key);
        report.records += 1;
        if agree(record.kind, &pg, &fr) {
            report.agree += 1;
            report.fixed.extend(listed.cloned());
            continue;
        }
        // A setup PostgreSQL rejects is a mistake in the corpus, never "known".
        let corpus_mistake = record.kind == Kind::Setup && pg.is_error();
        let difference = Difference { record, pg, fr };
        match listed {
            Some(k) if !corpus_mistake => report.known.push((difference, k.reason.clone())),
            _ => report.unexpected.push(difference),
        }
    }
    report.stale = known
        .iter()
        .filter(|k| !seen.contains(&k.key))
        .cloned()
        .collect();
    report
}

/// Every record of every corpus file, files in name order.
fn read_corpus() -> Vec<Record> {
    let dir = crate_file(CORPUS_DIR);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "sql"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus files in {}", dir.display());
    let mut records = vec![];
    for path in files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        records.extend(parse_corpus(&name, &text).unwrap_or_else(|e| panic!("{e}")));
    }
    records
}

/// Read a file of the differential suite.
fn read(file: &str) -> String {
    let path = crate_file(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[tokio::test(flavor = "multi_thread")]
async fn freshet_agrees_with_postgres_on_the_corpus() {
    let records = read_corpus();
    let known = parse_known(&read(KNOWN_PATH)).expect("parse known_differences.txt");
    let postgres = PgServer::start();
    let mut freshet = Server::start();
    let mut pg = Endpoint::new(postgres.conn_str(), RECORD_TIMEOUT);
    let mut fr = Endpoint::new(freshet.conn_str("freshet"), RECORD_TIMEOUT);
    match Outcome::from(pg.run("SELECT version()").await) {
        Outcome::Rows { rows, .. } => println!("reference: {:?}", rows[0][0]),
        error => panic!("cannot query PostgreSQL: {}", error.render()),
    }
    let runs = run_corpus(&records, &mut pg, &mut fr).await;
    let report = build_report(runs, &known);
    let verbose = std::env::var_os("FRESHET_DIFF_VERBOSE").is_some_and(|v| v != "0");
    println!("{}", report.render(verbose));
    assert!(
        freshet.is_running(),
        "freshet exited while running the corpus (see the first differences above)"
    );
    assert!(
        report.passed(),
        "Freshet and PostgreSQL disagree beyond known_differences.txt (see the output above)"
    );
}

#[test]
fn corpus_format_parses_directives_and_comments() {
    let text = "-- a comment\n-- more\n\n-- setup\nCREATE TABLE t (a int)\n\n\
                -- query rowsort\n-- inner comment\nSELECT a\n  FROM t\n";
    let records = parse_corpus("t.sql", text).expect("valid corpus");
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].kind, Kind::Setup);
    assert_eq!(records[0].line, 4);
    assert_eq!(records[1].kind, Kind::Query { rowsort: true });
    assert_eq!(records[1].sql, "SELECT a\n  FROM t");
    assert_eq!(records[1].key(), "SELECT a FROM t");
    assert!(parse_corpus("t.sql", "SELECT 1\n").is_err());
    assert!(parse_corpus("t.sql", "-- query\n-- only a comment\n").is_err());
}

#[test]
fn known_format_parses_reasons_and_queries() {
    let text = "# header\n\nreason: r1\nSELECT  1\n\n# group\nreason: r2\nSELECT\n  2\n";
    let known = parse_known(text).expect("valid known differences");
    assert_eq!(known.len(), 2);
    assert_eq!(
        (known[0].reason.as_str(), known[0].key.as_str()),
        ("r1", "SELECT 1")
    );
    assert_eq!(
        (known[1].reason.as_str(), known[1].key.as_str()),
        ("r2", "SELECT 2")
    );
    assert!(parse_known("SELECT 1\n").is_err());
}

#[test]
fn outcomes_compare_values_nulls_and_sqlstates() {
    let rows = |v: Vec<Option<&str>>| Outcome::Rows {
        columns: v.len(),
        rows: vec![v.into_iter().map(|c| c.map(str::to_string)).collect()],
        affected: 1,
    };
    let error = |code: &str| Outcome::Error {
        sqlstate: code.into(),
        message: String::new(),
    };
    let query = Kind::Query { rowsort: false };
    assert!(agree(
        query,
        &rows(vec![Some("a"), None]),
        &rows(vec![Some("a"), None])
    ));
    assert!(!agree(query, &rows(vec![Some("")]), &rows(vec![None])));
    assert!(!agree(query, &rows(vec![Some("NULL")]), &rows(vec![None])));
    assert!(agree(query, &error("22012"), &error("22012")));
    assert!(!agree(query, &error("22012"), &error("22003")));
    assert!(!agree(query, &error("22012"), &rows(vec![None])));
    assert!(!agree(Kind::Setup, &error("42P01"), &error("42P01")));
}

#[test]
fn report_flags_unexpected_fixed_stale_and_duplicate_entries() {
    let record = |line, sql: &str| Record {
        file: "t.sql".into(),
        line,
        kind: Kind::Query { rowsort: false },
        sql: sql.to_string(),
    };
    let value = |v: &str| Outcome::Rows {
        columns: 1,
        rows: vec![vec![Some(v.to_string())]],
        affected: 1,
    };
    let known = |line, sql: &str| Known {
        line,
        reason: "r".into(),
        key: sql.to_string(),
    };
    let runs = vec![
        Run {
            record: record(1, "SELECT 1"),
            pg: value("1"),
            fr: value("1"),
        },
        Run {
            record: record(2, "SELECT 2"),
            pg: value("2"),
            fr: value("2.0"),
        },
        Run {
            record: record(3, "SELECT 3"),
            pg: value("3"),
            fr: value("3.0"),
        },
        Run {
            record: record(4, "SELECT 4"),
            pg: value("4"),
            fr: value("4"),
        },
    ];
    let listed = [
        known(1, "SELECT 2"),
        known(2, "SELECT 4"),
        known(3, "SELECT 5"),
        known(4, "SELECT 2"),
    ];
    let report = build_report(runs, &listed);
    assert_eq!((report.records, report.agree), (4, 2));
    assert_eq!(report.known.len(), 1);
    assert_eq!(report.unexpected[0].record.sql, "SELECT 3");
    assert_eq!(report.fixed[0].key, "SELECT 4");
    assert_eq!(report.stale[0].key, "SELECT 5");
    assert_eq!(report.duplicate[0].line, 4);
    assert!(!report.passed());
}

//! The Markdown report: one table per question, laid out so the numbers
//! can be pasted into docs/benchmarks.md. Missing cells are `—`, and the
//! reason is listed under "Notes".

use std::fmt::Write as _;
use std::time::Duration;

use crate::phases::{BatchOp, Freshness, ViewKind};
use crate::run::{SizeRun, SystemRun};
use crate::stats::Summary;
use crate::workload::{CUSTOMERS, ChangeKind};

/// Where and how the benchmark ran.
#[derive(Debug)]
pub struct Environment {
    pub rows: Vec<(&'static str, String)>,
    pub view: ViewKind,
}

const NA: &str = "—";

/// Render the whole report.
pub fn render(env: &Environment, runs: &[SizeRun], notes: &[String]) -> String {
    let mut out = String::from("# Freshet materialized-view maintenance benchmark\n\n");
    if env.view == ViewKind::Plain {
        out.push_str(
            "**Harness check: `region_stats` is a plain VIEW on Freshet (`--plain-view`).** \
             Freshness and throughput below are full recomputations on every read, not \
             materialized-view maintenance.\n\n",
        );
    }
    for section in [
        environment(env),
        loads(runs),
        writes(runs),
        recompute(runs),
        freshness(runs),
        flatness(runs),
        throughput(runs),
        ratios(runs),
        notes_section(runs, notes),
    ] {
        out.push_str(&section);
        out.push('\n');
    }
    out
}

/// The heading (`# Freshet <what> benchmark`) and environment of a report
/// that has no maintenance runs (lookup, subscribe, restart, soak), with
/// `notes`.
pub fn render_environment(what: &str, env: &Environment, notes: &[String]) -> String {
    let mut out = format!("# Freshet {what} benchmark\n\n");
    out.push_str(&environment(env));
    for n in notes {
        let _ = writeln!(out, "\n* {n}");
    }
    out
}

fn environment(env: &Environment) -> String {
    let mut s = String::from("## Environment\n\n| | |\n|---|---|\n");
    for (k, v) in &env.rows {
        let _ = writeln!(s, "| {k} | {v} |");
    }
    s
}

fn loads(runs: &[SizeRun]) -> String {
    let mut s = format!(
        "## Initial load (`COPY ... FROM STDIN`, text format)\n\n\
         | orders | system | customers ({} rows) s | orders s | orders rows/s |\n\
         |---:|---|---:|---:|---:|\n",
        thousands(CUSTOMERS as f64)
    );
    for (run, system, sys) in systems(runs) {
        let Some(l) = sys.load else { continue };
        let rate = l.order_rows as f64 / l.orders.as_secs_f64();
        let _ = writeln!(
            s,
            "| {} | {system} | {:.3} | {:.3} | {} |",
            thousands(run.size as f64),
            l.customers.as_secs_f64(),
            l.orders.as_secs_f64(),
            thousands(rate)
        );
    }
    s
}

fn writes(runs: &[SizeRun]) -> String {
    let mut s = String::from(
        "## Single-row write latency, no view defined (context)\n\n\
         Round trip of one autocommit statement; UPDATE and DELETE find their row by `id` \
         without an index on either system.\n\n\
         | orders | write | Freshet p50 ms | Freshet p99 ms | PostgreSQL p50 ms | PostgreSQL p99 ms |\n\
         |---:|---|---:|---:|---:|---:|\n",
    );
    for run in runs {
        for kind in ChangeKind::ALL {
            let f = write_latency(&run.freshet, kind);
            let p = run.postgres.as_ref().and_then(|p| write_latency(p, kind));
            if f.is_none() && p.is_none() {
                continue;
            }
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                thousands(run.size as f64),
                kind.name(),
                opt_ms(f.map(|x| x.p50)),
                opt_ms(f.map(|x| x.p99)),
                opt_ms(p.map(|x| x.p50)),
                opt_ms(p.map(|x| x.p99)),
            );
        }
    }
    s
}

fn write_latency(sys: &SystemRun, kind: ChangeKind) -> Option<Summary> {
    sys.writes
        .iter()
        .find(|w| w.kind == kind)
        .map(|w| w.latency)
}

fn recompute(runs: &[SizeRun]) -> String {
    let mut s = String::from(
        "## View creation and full recomputation\n\n\
         CREATE includes computing the initial contents (on Freshet: until the first read \
         of the view returns). The hydration rate is the compute-only rate of the \
         dataflow: input rows (orders + customers) through the join and the \
         aggregation per second of CREATE. The ad-hoc query is the view's SELECT run \
         directly (median of 3). REFRESH is PostgreSQL's median of 3.\n\n\
         | orders | Freshet CREATE s | Freshet hydration rows/s | Freshet ad-hoc query ms | PostgreSQL CREATE s | PostgreSQL REFRESH ms | PostgreSQL ad-hoc query ms |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for run in runs {
        let pg = run.postgres.as_ref();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            thousands(run.size as f64),
            opt_secs(run.freshet.view_create),
            run.freshet
                .view_create
                .map(|d| thousands(
                    (run.size + CUSTOMERS as usize) as f64 / d.as_secs_f64().max(1e-9)
                ))
                .unwrap_or_else(|| "—".into()),
            opt_ms(run.freshet.adhoc_query),
            opt_secs(pg.and_then(|p| p.view_create)),
            opt_ms(pg.and_then(|p| p.refresh)),
            opt_ms(pg.and_then(|p| p.adhoc_query)),
        );
    }
    s
}

fn freshness(runs: &[SizeRun]) -> String {
    let mut s = String::from(
        "## Freshness of single-row changes (Freshet)\n\n\
         Commit: write sent → acknowledged. Ack → visible: acknowledged → the first \
         `SELECT ... FROM region_stats WHERE region = <affected>` (another session) that \
         returns the new value. Start → visible: the sum, per change.\n\n\
         | orders | write | n | commit p50 ms | commit p99 ms | ack→visible p50 ms | ack→visible p99 ms | **start→visible p50 ms** | **start→visible p99 ms** | first read visible | max reads |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for run in runs {
        for f in &run.freshet.freshness {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} | {} |",
                thousands(run.size as f64),
                f.kind.name(),
                f.commit.samples,
                ms(f.commit.p50),
                ms(f.commit.p99),
                ms(f.ack_to_visible.p50),
                ms(f.ack_to_visible.p99),
                ms(f.start_to_visible.p50),
                ms(f.start_to_visible.p99),
                f.first_read_hits,
                f.commit.samples,
                f.max_reads,
            );
        }
    }
    s
}

/// p50 at the largest measured size over p50 at the smallest: the target
/// is about 1 (maintenance cost independent of table size).
fn flatness(runs: &[SizeRun]) -> String {
    let measured: Vec<&SizeRun> = runs
        .iter()
        .filter(|r| !r.freshet.freshness.is_empty())
        .collect();
    let (Some(small), Some(large)) = (
        measured.iter().min_by_key(|r| r.size),
        measured.iter().max_by_key(|r| r.size),
    ) else {
        return "## Flatness\n\nNot measured (no Freshet freshness results).\n".into();
    };
    let (a, b) = (thousands(small.size as f64), thousands(large.size as f64));
    let mut s = format!(
        "## Flatness: p50 at {b} orders / p50 at {a} orders\n\n\
         The target is a ratio near 1: the cost of reflecting one change should not grow \
         with the table.\n\n\
         | write | start→visible p50 ms @ {a} | @ {b} | ratio | ack→visible p50 ms @ {a} | @ {b} | ratio |\n\
         |---|---:|---:|---:|---:|---:|---:|\n"
    );
    for kind in ChangeKind::ALL {
        let (Some(x), Some(y)) = (find_freshness(small, kind), find_freshness(large, kind)) else {
            continue;
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            kind.name(),
            ms(x.start_to_visible.p50),
            ms(y.start_to_visible.p50),
            ratio(y.start_to_visible.p50, x.start_to_visible.p50),
            ms(x.ack_to_visible.p50),
            ms(y.ack_to_visible.p50),
            ratio(y.ack_to_visible.p50, x.ack_to_visible.p50),
        );
    }
    s
}

fn find_freshness(run: &SizeRun, kind: ChangeKind) -> Option<&Freshness> {
    run.freshet.freshness.iter().find(|f| f.kind == kind)
}

fn throughput(runs: &[SizeRun]) -> String {
    let mut s = String::from(
        "## Sustained maintenance throughput (Freshet)\n\n\
         Each batch is timed from sending it until a SELECT of the whole view shows it.\n\n\
         | orders | operation | batches × rows | commit median ms | start→visible median ms | rows/s |\n\
         |---:|---|---:|---:|---:|---:|\n",
    );
    for run in runs {
        for t in &run.freshet.throughput {
            let _ = writeln!(
                s,
                "| {} | {} | {} × {} | {} | {} | {} |",
                thousands(run.size as f64),
                t.op.name(),
                t.batches,
                thousands((t.rows / t.batches.max(1)) as f64),
                ms(t.commit_median),
                ms(t.visible_median),
                thousands(t.rows_per_sec()),
            );
        }
    }
    s
}

/// PostgreSQL must REFRESH to reflect any change, so its per-change cost is
/// the refresh time; Freshet's is 1 / sustained rows per second.
fn ratios(runs: &[SizeRun]) -> String {
    let mut s = String::from(
        "## PostgreSQL REFRESH vs Freshet incremental maintenance, per change\n\n\
         PostgreSQL per-change cost = REFRESH time (it must refresh to reflect a change). \
         Freshet per-change cost = 1 / sustained rows/s. Ratio = PostgreSQL / Freshet. \
         PostgreSQL's plain single-row INSERT p50 is shown for context.\n\n\
         | orders | PostgreSQL REFRESH ms | PostgreSQL INSERT p50 ms | Freshet µs/row (insert) | ratio (insert) | Freshet µs/row (delete) | ratio (delete) |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for run in runs {
        let pg = run.postgres.as_ref();
        let refresh = pg.and_then(|p| p.refresh);
        let insert = pg
            .and_then(|p| write_latency(p, ChangeKind::Insert))
            .map(|w| w.p50);
        let per_row = |op| {
            run.freshet
                .throughput
                .iter()
                .find(|t| t.op == op)
                .map(|t| Duration::from_secs_f64(1.0 / t.rows_per_sec()))
        };
        let (ins, del) = (per_row(BatchOp::Insert), per_row(BatchOp::Delete));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            thousands(run.size as f64),
            opt_ms(refresh),
            opt_ms(insert),
            opt_us(ins),
            opt_ratio(refresh, ins),
            opt_us(del),
            opt_ratio(refresh, del),
        );
    }
    s
}

fn notes_section(runs: &[SizeRun], notes: &[String]) -> String {
    let mut s = String::from("## Notes\n\n");
    let mut any = false;
    for note in notes {
        let _ = writeln!(s, "- {note}");
        any = true;
    }
    for (run, system, sys) in systems(runs) {
        for note in &sys.notes {
            let _ = writeln!(
                s,
                "- {} orders, {system}: {note}",
                thousands(run.size as f64)
            );
            any = true;
        }
    }
    if !any {
        s.push_str("- Every measurement ran.\n");
    }
    s
}

/// Each size's Freshet and (if run) PostgreSQL results, labelled.
fn systems(runs: &[SizeRun]) -> impl Iterator<Item = (&SizeRun, &'static str, &SystemRun)> {
    runs.iter().flat_map(|run| {
        std::iter::once((run, "Freshet", &run.freshet))
            .chain(run.postgres.as_ref().map(|p| (run, "PostgreSQL", p)))
    })
}

/// Milliseconds with about three significant digits.
fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1e3;
    match v {
        v if v < 1.0 => format!("{v:.3}"),
        v if v < 10.0 => format!("{v:.2}"),
        v if v < 100.0 => format!("{v:.1}"),
        v => thousands(v),
    }
}

fn opt_ms(d: Option<Duration>) -> String {
    d.map_or_else(|| NA.into(), ms)
}

fn opt_secs(d: Option<Duration>) -> String {
    d.map_or_else(|| NA.into(), |d| format!("{:.3}", d.as_secs_f64()))
}

fn opt_us(d: Option<Duration>) -> String {
    d.map_or_else(|| NA.into(), |d| format!("{:.2}", d.as_secs_f64() * 1e6))
}

fn ratio(num: Duration, den: Duration) -> String {
    if den.is_zero() {
        return NA.into();
    }
    let r = num.as_secs_f64() / den.as_secs_f64();
    if r >= 100.0 {
        format!("{}×", thousands(r))
    } else {
        format!("{r:.2}×")
    }
}

fn opt_ratio(num: Option<Duration>, den: Option<Duration>) -> String {
    match (num, den) {
        (Some(n), Some(d)) => ratio(n, d),
        _ => NA.into(),
    }
}

/// A rounded number with `,` thousands separators.
pub fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 { format!("-{out}") } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting() {
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(-1000.0), "-1,000");
        assert_eq!(ms(Duration::from_micros(250)), "0.250");
        assert_eq!(ms(Duration::from_millis(1234)), "1,234");
        assert_eq!(
            ratio(Duration::from_secs(3), Duration::from_secs(2)),
            "1.50×"
        );
    }
}

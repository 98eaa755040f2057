//! Property test of materialized views: random tables, random view
//! definitions drawn from a catalogue of query shapes, and a random stream of
//! writes, run over pgwire against a real `freshet` process and, for
//! reference, a PostgreSQL 15 (started by [`crate::pg`]) fed the same
//! statements.
//!
//! # What one run does
//!
//! A run is `FRESHET_MV_CASES` cases. Each case gets a fresh database on both
//! servers and, from its own seed (derived from `FRESHET_MV_SEED`):
//!
//! 1. 2–3 tables (`t1`, `t2`, `t3`) without keys: an integer column `k`, a
//!    text column `s1`, and 1–3 more columns of type int4 (`i*`), int8
//!    (`l*`), text (`s*`), bool (`b*`), numeric(12,2) (`n*`) or float8
//!    (`f*`), with small value domains (so joins and groups collide), NULLs
//!    and duplicate rows, and 0–12 initial rows each;
//! 2. one instance of every shape in [`SHAPES`] (or of those named in
//!    `FRESHET_MV_SHAPES`), each a template instantiated over the random
//!    schema with its own seed (so filtering shapes does not change the
//!    others). Freshet gets `CREATE MATERIALIZED VIEW mv_N AS <query>`;
//!    PostgreSQL only keeps the query text and runs it ad hoc. Chains (an MV
//!    over another MV) read the base MV on Freshet and inline the base query
//!    as a derived table in the ad hoc text; plain views under an MV are
//!    created on both servers;
//! 3. `FRESHET_MV_STEPS` random writes (single- and multi-row `INSERT`,
//!    `UPDATE .. SET col = expr WHERE pred`, `DELETE .. WHERE pred`), each
//!    applied to both servers, which must agree on the affected-row count.
//!
//! Right after an MV is created and after every write, every MV is checked:
//! (a) `SELECT * FROM mv_N` and (b) the defining query ad hoc, both on
//! Freshet inside one `BEGIN READ ONLY; ...; COMMIT` (a Freshet transaction
//! reads at one timestamp), and (c) the defining query on PostgreSQL. The
//! results are compared as multisets: rows are rendered as text (simple query
//! protocol), sorted, and compared cell by cell. (a) must equal (b) and (b)
//! must equal (c). If (b) alone fails with 0A000 (Freshet can maintain a
//! query it cannot answer ad hoc), (a) is compared with (c) instead and the
//! summary counts it under `adhoc0A`.
//!
//! # Comparing values
//!
//! * NULL differs from every string; text and bool cells must be equal as
//!   text.
//! * Cells of float8 columns (and of aggregates Freshet computes in float8:
//!   `avg`, `stddev_samp`, `var_samp`) are equal if they parse as `f64`
//!   within a relative tolerance of 1e-9 (`|x - y| <= 1e-9 * max(|x|, |y|)`),
//!   also between (a) and (b), because incremental and batch evaluation may
//!   sum in different orders.
//! * Between (b) and (c) every number column is compared by value (parsed as
//!   `f64`, same tolerance), because Freshet and PostgreSQL differ in result
//!   types and scales (`avg(int)` is float8 in Freshet and numeric in
//!   PostgreSQL; `COALESCE(numeric(12,2), 0)` prints `0.00` vs `0`). Between
//!   (a) and (b) integer and numeric cells must be equal as text.
//!
//! Constructs whose ad hoc answers differ between Freshet and PostgreSQL for
//! known reasons (see `tests/differential/known_differences.txt`) are not
//! generated: numeric division and `avg(numeric)` (result scale), `round`
//! of floats, `min`/`max` of booleans, `EXCEPT ALL`/`INTERSECT ALL` are
//! generated but Freshet refuses them ad hoc (0A000), `FULL JOIN .. USING`,
//! correlated scalar subqueries without an aggregate. Float values are
//! dyadic fractions so that sums do not depend on their order. Queries whose
//! answer would depend on the order of ties (top-k, `string_agg`,
//! `lag`/`lead`, `row_number`) order by every output column, so their
//! answers are deterministic multisets.
//!
//! # Outcomes
//!
//! CREATE failing with SQLSTATE 0A000 (feature_not_supported) counts as
//! `unsupported` for the shape, unless the shape is listed in
//! [`REQUIRED_SHAPES`] (and the run creates materialized views, not the
//! stand-in). The test fails on any (a)≠(b) or (b)≠(c) mismatch, any other
//! CREATE error, a generated query PostgreSQL rejects (a harness bug), a
//! write the two servers disagree on, or `freshet` exiting. Each failure
//! prints a reproduction: seed and case, the statements so far that concern
//! the view's tables, the view SQL, the three results, and the current table
//! contents as `INSERT`s. A summary table (shape → instances, created,
//! unsupported, failed creates, checks, mismatches) is printed at the end.
//!
//! # Environment
//!
//! * `FRESHET_MV_SEED` (default [`DEFAULT_SEED`]), `FRESHET_MV_CASES`
//!   (default [`DEFAULT_CASES`]), `FRESHET_MV_STEPS` (default
//!   [`DEFAULT_STEPS`]): the budget.
//! * `FRESHET_MV_SHAPES=agg_basic,join_inner`: only these shapes.
//! * `FRESHET_MV_STANDIN=view`: create plain `CREATE VIEW`s instead of
//!   materialized views (tests the harness itself, and Freshet's ad hoc
//!   answers against PostgreSQL); `indexed-view`: plain views with a
//!   default index, so `SELECT * FROM mv_N` is answered from the index
//!   (the `indexed_views_match_adhoc_and_postgres` test runs this).
//! * PostgreSQL is found and run as described in [`crate::pg`].
//!
//! Run longer with e.g.
//!
//! ```text
//! FRESHET_MV_SEED=7 FRESHET_MV_CASES=50 FRESHET_MV_STEPS=200 \
//!     cargo test -p freshet-server --test pgwire mv_property -- --nocapture
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};

use crate::endpoint::{DbError, Endpoint, Rows};
use crate::harness::Server;
use crate::pg::PgServer;

/// Seed of the default run.
const DEFAULT_SEED: u64 = 20_240_601;
/// Cases of the default run (each with fresh tables and every shape).
const DEFAULT_CASES: usize = 2;
/// Writes per case in the default run.
const DEFAULT_STEPS: usize = 8;
/// Shapes for which CREATE MATERIALIZED VIEW failing with 0A000 is a test
/// failure. Add a shape here once Freshet maintains it.
const REQUIRED_SHAPES: &[&str] = &[
    "project",
    "filter",
    "join_inner",
    "join_left",
    "join_right",
    "join_full",
    "semi_in",
    "semi_exists",
    "anti_not_exists",
    "anti_not_in",
    "cross_join",
    "self_join",
    "agg_basic",
    "agg_avg",
    "agg_stddev_var",
    "agg_bool",
    "agg_count_distinct",
    "agg_string_agg",
    "agg_having",
    "agg_global",
    "distinct",
    "union",
    "union_all",
    "except",
    "except_all",
    "intersect",
    "intersect_all",
    "scalar_subquery",
    "scalar_subquery_correlated",
    "cte",
    "values_join",
    "topk",
    "topk_per_group",
    "window_rank",
    "window_lag_lead",
    "window_sum",
    "mv_over_mv",
    "mv_over_view",
];
/// How long one statement may take on one server.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(60);
/// Relative tolerance for float comparisons.
const FLOAT_TOLERANCE: f64 = 1e-9;
/// Rows of a result a report shows.
const MAX_REPORTED_ROWS: usize = 40;
/// Characters of an error message the summary shows.
const MAX_SUMMARY_MESSAGE: usize = 70;

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

/// What `mv_N` is created as on Freshet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Standin {
    /// `CREATE MATERIALIZED VIEW` (the default).
    Materialized,
    /// `CREATE VIEW` (`FRESHET_MV_STANDIN=view`).
    View,
    /// `CREATE VIEW` and `CREATE DEFAULT INDEX` on it
    /// (`FRESHET_MV_STANDIN=indexed-view`): the view is maintained by the
    /// index and read through it.
    IndexedView,
}

impl Standin {
    fn create_keyword(self) -> &'static str {
        match self {
            Standin::Materialized => "MATERIALIZED VIEW",
            Standin::View | Standin::IndexedView => "VIEW",
        }
    }
}

/// The run's budget and options, from the environment.
#[derive(Clone, Debug)]
struct Config {
    seed: u64,
    cases: usize,
    steps: usize,
    standin: Standin,
    /// Only these shapes (`None`: all).
    shapes: Option<BTreeSet<String>>,
}

/// A numeric environment variable, or `default` when unset.
fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a valid number")),
        _ => default,
    }
}

impl Config {
    fn from_env() -> Config {
        let standin = match std::env::var("FRESHET_MV_STANDIN").as_deref() {
            Err(_) | Ok("") | Ok("materialized") => Standin::Materialized,
            Ok("view") => Standin::View,
            Ok("indexed-view") => Standin::IndexedView,
            Ok(other) => {
                panic!("FRESHET_MV_STANDIN={other}: expected `view`, `indexed-view` or unset")
            }
        };
        let shapes = std::env::var("FRESHET_MV_SHAPES")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .map(|s| {
                let wanted: BTreeSet<String> = s
                    .split(',')
                    .map(|w| w.trim().to_string())
                    .filter(|w| !w.is_empty())
                    .collect();
                for w in &wanted {
                    assert!(
                        SHAPES.iter().any(|sh| sh.name == w),
                        "FRESHET_MV_SHAPES names unknown shape `{w}`; shapes: {}",
                        shape_names().join(", ")
                    );
                }
                wanted
            });
        Config {
            seed: env_number("FRESHET_MV_SEED", DEFAULT_SEED),
            cases: env_number("FRESHET_MV_CASES", DEFAULT_CASES),
            steps: env_number("FRESHET_MV_STEPS", DEFAULT_STEPS),
            standin,
            shapes,
        }
    }

    fn wants(&self, shape: &str) -> bool {
        self.shapes.as_ref().is_none_or(|s| s.contains(shape))
    }
}

/// splitmix64: spreads seeds so that neighbouring ones give unrelated streams.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The seed of a shape's instance in a case: independent of which other
/// shapes the run generates.
fn shape_seed(case_seed: u64, shape: &str) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in shape.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3);
    }
    mix(case_seed ^ h)
}

// ---------------------------------------------------------------------------
// Schema and values
// ---------------------------------------------------------------------------

/// Column types the generator uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ty {
    Int4,
    Int8,
    Text,
    Bool,
    Numeric,
    Float8,
}

const ALL_TYPES: [Ty; 6] = [
    Ty::Int4,
    Ty::Int8,
    Ty::Text,
    Ty::Bool,
    Ty::Numeric,
    Ty::Float8,
];

impl Ty {
    fn ddl(self) -> &'static str {
        match self {
            Ty::Int4 => "int4",
            Ty::Int8 => "int8",
            Ty::Text => "text",
            Ty::Bool => "bool",
            Ty::Numeric => "numeric(12,2)",
            Ty::Float8 => "float8",
        }
    }

    /// Prefix of generated column names of this type.
    fn prefix(self) -> &'static str {
        match self {
            Ty::Int4 => "i",
            Ty::Int8 => "l",
            Ty::Text => "s",
            Ty::Bool => "b",
            Ty::Numeric => "n",
            Ty::Float8 => "f",
        }
    }

    fn is_int(self) -> bool {
        matches!(self, Ty::Int4 | Ty::Int8)
    }

    fn is_number(self) -> bool {
        matches!(self, Ty::Int4 | Ty::Int8 | Ty::Numeric | Ty::Float8)
    }

    /// Types whose values compare with `=` and combine in set operations.
    fn family(self) -> u8 {
        match self {
            Ty::Int4 | Ty::Int8 => 0,
            Ty::Text => 1,
            Ty::Bool => 2,
            Ty::Numeric => 3,
            Ty::Float8 => 4,
        }
    }

    /// Literals of the value domain (small, so that values collide; floats
    /// are dyadic so that sums are exact in any order).
    fn domain(self) -> &'static [&'static str] {
        match self {
            Ty::Int4 | Ty::Int8 => &["-1", "0", "1", "2", "3", "4"],
            Ty::Text => &["'a'", "'b'", "'c'", "'ab'", "'B'", "''"],
            Ty::Bool => &["true", "false"],
            Ty::Numeric => &["0.00", "1.50", "-2.25", "3.10", "10.00", "2.5"],
            Ty::Float8 => &["0.5", "1.25", "-2", "3", "0", "0.75", "-0.5"],
        }
    }
}

/// The type of a combination of two types (CASE branches, set operations).
fn unify(a: Ty, b: Ty) -> Ty {
    match (a, b) {
        _ if a == b => a,
        (Ty::Float8, _) | (_, Ty::Float8) => Ty::Float8,
        (Ty::Numeric, _) | (_, Ty::Numeric) => Ty::Numeric,
        (x, y) if x.is_int() && y.is_int() => Ty::Int8,
        _ => a,
    }
}

#[derive(Clone, Debug)]
struct Column {
    name: String,
    ty: Ty,
}

#[derive(Clone, Debug)]
struct Table {
    name: String,
    cols: Vec<Column>,
}

impl Table {
    fn ddl(&self) -> String {
        let cols: Vec<String> = self
            .cols
            .iter()
            .map(|c| format!("{} {}", c.name, c.ty.ddl()))
            .collect();
        format!("CREATE TABLE {} ({})", self.name, cols.join(", "))
    }
}

/// 2–3 tables, each with `k`, `s1` and 1–3 random columns.
fn gen_tables(rng: &mut StdRng) -> Vec<Table> {
    let n = rng.random_range(2..=3);
    (1..=n)
        .map(|t| {
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            let mut next_name = |ty: Ty| {
                let c = counts.entry(ty.prefix()).or_insert(0);
                *c += 1;
                format!("{}{}", ty.prefix(), c)
            };
            let key_ty = if rng.random_bool(0.5) {
                Ty::Int4
            } else {
                Ty::Int8
            };
            let s1 = next_name(Ty::Text);
            let mut cols = vec![
                Column {
                    name: "k".into(),
                    ty: key_ty,
                },
                Column {
                    name: s1,
                    ty: Ty::Text,
                },
            ];
            for _ in 0..rng.random_range(1..=3) {
                let ty = *ALL_TYPES.choose(rng).expect("types");
                cols.push(Column {
                    name: next_name(ty),
                    ty,
                });
            }
            cols[1..].shuffle(rng);
            Table {
                name: format!("t{t}"),
                cols,
            }
        })
        .collect()
}

/// A row of literals (NULL with probability 0.12).
fn gen_row(rng: &mut StdRng, cols: &[Column]) -> Vec<String> {
    cols.iter()
        .map(|c| {
            if rng.random_bool(0.12) {
                "NULL".to_string()
            } else {
                c.ty.domain().choose(rng).expect("domain").to_string()
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Writes
// ---------------------------------------------------------------------------

/// A write statement and the table it writes.
struct Write {
    table: String,
    sql: String,
}

/// Generates writes; remembers inserted rows to insert duplicates.
struct Writer {
    /// Rows inserted so far, per table (all columns, as literals).
    inserted: BTreeMap<String, Vec<Vec<String>>>,
}

impl Writer {
    fn new() -> Writer {
        Writer {
            inserted: BTreeMap::new(),
        }
    }

    /// A row for `t`: fresh, or a copy of an earlier one (a duplicate).
    fn row(&mut self, rng: &mut StdRng, t: &Table) -> Vec<String> {
        let history = self.inserted.entry(t.name.clone()).or_default();
        let row = match history.choose(rng) {
            Some(old) if rng.random_bool(0.3) => old.clone(),
            _ => gen_row(rng, &t.cols),
        };
        history.push(row.clone());
        row
    }

    /// `INSERT` of `n` rows; sometimes only a subset of the columns.
    fn insert(&mut self, rng: &mut StdRng, t: &Table, n: usize) -> Write {
        let rows: Vec<Vec<String>> = (0..n).map(|_| self.row(rng, t)).collect();
        let subset: Vec<usize> = if rng.random_bool(0.2) {
            // A column list without some columns: they are NULL.
            let keep: Vec<usize> = (0..t.cols.len()).filter(|_| rng.random_bool(0.7)).collect();
            if keep.is_empty() { vec![0] } else { keep }
        } else {
            (0..t.cols.len()).collect()
        };
        let values: Vec<String> = rows
            .iter()
            .map(|r| {
                let vals: Vec<&str> = subset.iter().map(|&i| r[i].as_str()).collect();
                format!("({})", vals.join(", "))
            })
            .collect();
        let col_list = if subset.len() == t.cols.len() && rng.random_bool(0.5) {
            String::new()
        } else {
            let names: Vec<&str> = subset.iter().map(|&i| t.cols[i].name.as_str()).collect();
            format!(" ({})", names.join(", "))
        };
        Write {
            table: t.name.clone(),
            sql: format!(
                "INSERT INTO {}{col_list} VALUES {}",
                t.name,
                values.join(", ")
            ),
        }
    }

    /// A random write to a random table.
    fn write(&mut self, rng: &mut StdRng, tables: &[Table]) -> Write {
        let t = tables.choose(rng).expect("tables");
        let roll: f64 = rng.random();
        if roll < 0.3 {
            self.insert(rng, t, 1)
        } else if roll < 0.5 {
            let n = rng.random_range(2..=5);
            self.insert(rng, t, n)
        } else if roll < 0.78 {
            let mut g = Gen::new(StdRng::seed_from_u64(rng.random()), vec![]);
            let n = if t.cols.len() > 2 && rng.random_bool(0.3) {
                2
            } else {
                1
            };
            let mut cols = t.cols.clone();
            cols.shuffle(rng);
            let sets: Vec<String> = cols[..n]
                .iter()
                .map(|c| format!("{} = {}", c.name, update_expr(&mut g, &c.name, c.ty)))
                .collect();
            let mut sql = format!("UPDATE {} SET {}", t.name, sets.join(", "));
            if rng.random_bool(0.93) {
                write!(sql, " WHERE {}", g.pred("", &t.cols, 1)).expect("write to String");
            }
            Write {
                table: t.name.clone(),
                sql,
            }
        } else {
            let mut g = Gen::new(StdRng::seed_from_u64(rng.random()), vec![]);
            Write {
                table: t.name.clone(),
                sql: format!("DELETE FROM {} WHERE {}", t.name, g.pred("", &t.cols, 1)),
            }
        }
    }
}

/// A new value for column `c` of type `ty` in an UPDATE, staying in (or
/// near) the value domain.
fn update_expr(g: &mut Gen, c: &str, ty: Ty) -> String {
    let lit = g.lit(ty);
    let options: Vec<String> = match ty {
        Ty::Int4 | Ty::Int8 => vec![
            lit,
            "NULL".into(),
            format!("CASE WHEN {c} >= 4 THEN -1 ELSE {c} + 1 END"),
            format!("COALESCE({c}, 2)"),
            format!("{c} - 1"),
        ],
        Ty::Text => vec![
            lit,
            "NULL".into(),
            format!("upper({c})"),
            format!("CASE WHEN {c} = 'a' THEN 'b' ELSE 'a' END"),
            format!("substr({c} || 'b', 1, 2)"),
        ],
        Ty::Bool => vec![lit, "NULL".into(), format!("NOT {c}")],
        Ty::Numeric => vec![
            lit,
            "NULL".into(),
            format!("-{c}"),
            format!("CASE WHEN {c} > 5 THEN 0.00 ELSE {c} + 1.25 END"),
        ],
        Ty::Float8 => vec![
            lit,
            "NULL".into(),
            format!("-{c}"),
            format!("CASE WHEN {c} > 4 THEN 0.5 ELSE {c} + 0.75 END"),
        ],
    };
    g.pick(&options)
}

// ---------------------------------------------------------------------------
// Query generation
// ---------------------------------------------------------------------------

/// Marks relation references in generated SQL until they are resolved for
/// CREATE (by name) or for the ad hoc query (possibly inlined).
const REF_OPEN: &str = "\u{27EA}";
const REF_CLOSE: &str = "\u{27EB}";

/// A relation a shape reads.
#[derive(Clone, Debug)]
struct Rel {
    /// Name on Freshet (a table, a view or a base materialized view).
    name: String,
    /// What the ad hoc query reads instead: the name, or `(query)`.
    adhoc: String,
    cols: Vec<Column>,
    /// The tables underneath.
    tables: BTreeSet<String>,
}

impl Rel {
    fn of_table(t: &Table) -> Rel {
        Rel {
            name: t.name.clone(),
            adhoc: t.name.clone(),
            cols: t.cols.clone(),
            tables: BTreeSet::from([t.name.clone()]),
        }
    }
}

/// A generated query: SQL with relation marks, and its output columns
/// (`c0`, `c1`, ...).
struct Query {
    sql: String,
    cols: Vec<Column>,
}

/// Random choices over the relations a shape may read.
struct Gen {
    rng: StdRng,
    rels: Vec<Rel>,
    /// Relations referenced so far, by name.
    used: BTreeMap<String, Rel>,
}

/// `alias.name`, or `name` when `alias` is empty.
fn q(alias: &str, name: &str) -> String {
    if alias.is_empty() {
        name.to_string()
    } else {
        format!("{alias}.{name}")
    }
}

/// `e0 AS c0, e1 AS c1, ...` and the output columns.
fn select_list(items: Vec<(String, Ty)>) -> (String, Vec<Column>) {
    let mut parts = vec![];
    let mut cols = vec![];
    for (i, (e, ty)) in items.into_iter().enumerate() {
        parts.push(format!("{e} AS c{i}"));
        cols.push(Column {
            name: format!("c{i}"),
            ty,
        });
    }
    (parts.join(", "), cols)
}

impl Gen {
    fn new(rng: StdRng, rels: Vec<Rel>) -> Gen {
        Gen {
            rng,
            rels,
            used: BTreeMap::new(),
        }
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn range(&mut self, lo: usize, hi: usize) -> usize {
        self.rng.random_range(lo..=hi)
    }

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items
            .choose(&mut self.rng)
            .expect("pick from a nonempty list")
            .clone()
    }

    /// A non-NULL literal of the domain of `ty`.
    fn lit(&mut self, ty: Ty) -> String {
        self.pick(ty.domain()).to_string()
    }

    fn rel(&mut self) -> Rel {
        let rels = self.rels.clone();
        self.pick(&rels)
    }

    /// Two relations, different ones when there are several.
    fn two_rels(&mut self) -> (Rel, Rel) {
        let a = self.rel();
        if self.rels.len() < 2 {
            return (a.clone(), a);
        }
        loop {
            let b = self.rel();
            if b.name != a.name {
                return (a, b);
            }
        }
    }

    /// `rel AS alias` (marked), recording the reference.
    fn from(&mut self, rel: &Rel, alias: &str) -> String {
        self.used.insert(rel.name.clone(), rel.clone());
        format!("{REF_OPEN}{}{REF_CLOSE} AS {alias}", rel.name)
    }

    /// A random column satisfying `want`.
    fn col(&mut self, cols: &[Column], want: impl Fn(Ty) -> bool) -> Option<Column> {
        let matching: Vec<Column> = cols.iter().filter(|c| want(c.ty)).cloned().collect();
        matching.choose(&mut self.rng).cloned()
    }

    fn any_col(&mut self, cols: &[Column]) -> Column {
        self.pick(cols)
    }

    /// A comparison operator.
    fn cmp_op(&mut self) -> &'static str {
        self.pick(&["=", "<>", "<", "<=", ">", ">="])
    }

    /// A predicate on one column.
    fn atom(&mut self, alias: &str, c: &Column) -> String {
        let x = q(alias, &c.name);
        let roll = self.range(0, 9);
        match (c.ty, roll) {
            (_, 0) => format!("{x} IS NULL"),
            (_, 1) => format!("{x} IS NOT NULL"),
            (Ty::Bool, 2..=4) => x,
            (Ty::Bool, 5 | 6) => format!("NOT {x}"),
            (Ty::Bool, _) => {
                let l = self.lit(Ty::Bool);
                format!("{x} = {l}")
            }
            (_, 2) => {
                let (l1, l2, l3) = (self.lit(c.ty), self.lit(c.ty), self.lit(c.ty));
                format!("{x} IN ({l1}, {l2}, {l3})")
            }
            (Ty::Text, 3) => {
                let p = self.pick(&["'a%'", "'%b'", "'_'", "'%'"]);
                format!("{x} LIKE {p}")
            }
            (ty, 3) if ty.is_number() => {
                let (l1, l2) = (self.lit(ty), self.lit(ty));
                format!("{x} BETWEEN {l1} AND {l2}")
            }
            (ty, _) => {
                let op = self.cmp_op();
                let l = self.lit(ty);
                format!("{x} {op} {l}")
            }
        }
    }

    /// A predicate over `cols` (qualified with `alias` unless empty).
    fn pred(&mut self, alias: &str, cols: &[Column], depth: u32) -> String {
        if depth > 0 && self.chance(0.4) {
            let a = self.pred(alias, cols, depth - 1);
            let b = self.pred(alias, cols, depth - 1);
            return match self.range(0, 4) {
                0 | 1 => format!("({a} AND {b})"),
                2 | 3 => format!("({a} OR {b})"),
                _ => format!("NOT ({a})"),
            };
        }
        let c = self.any_col(cols);
        self.atom(alias, &c)
    }

    /// A predicate over two relations: a comparison across them or a
    /// predicate on one side.
    fn pred2(&mut self, a: (&str, &[Column]), b: (&str, &[Column])) -> String {
        if self.chance(0.5)
            && let Some((x, y)) = self.compatible_pair(a.1, b.1)
        {
            let op = self.cmp_op();
            return format!("{} {op} {}", q(a.0, &x.name), q(b.0, &y.name));
        }
        if self.chance(0.5) {
            self.pred(a.0, a.1, 1)
        } else {
            self.pred(b.0, b.1, 1)
        }
    }

    /// Columns of `a` and `b` of one type family, preferring `k` = `k`.
    fn compatible_pair(&mut self, a: &[Column], b: &[Column]) -> Option<(Column, Column)> {
        let mut pairs = vec![];
        for x in a {
            for y in b {
                if x.ty.family() == y.ty.family() {
                    pairs.push((x.clone(), y.clone()));
                }
            }
        }
        pairs.choose(&mut self.rng).cloned()
    }

    /// An equality join key: `k = k` when both have it (mostly), otherwise
    /// a random pair of one type family.
    fn join_key(&mut self, a: &[Column], b: &[Column]) -> (Column, Column) {
        let ka = a.iter().find(|c| c.name == "k");
        let kb = b.iter().find(|c| c.name == "k");
        if let (Some(x), Some(y)) = (ka, kb)
            && self.chance(0.6)
        {
            return (x.clone(), y.clone());
        }
        match self.compatible_pair(a, b) {
            Some(p) => p,
            None => panic!("no join key between {a:?} and {b:?}"),
        }
    }

    /// `a.x = b.y [AND a.u = b.v] [AND residual]`.
    fn join_on(&mut self, a: (&str, &[Column]), b: (&str, &[Column])) -> String {
        let (x, y) = self.join_key(a.1, b.1);
        let mut on = format!("{} = {}", q(a.0, &x.name), q(b.0, &y.name));
        if self.chance(0.2) {
            let (u, v) = self.join_key(a.1, b.1);
            write!(on, " AND {} = {}", q(a.0, &u.name), q(b.0, &v.name)).expect("write");
        }
        if self.chance(0.45) {
            let r = self.pred2(a, b);
            write!(on, " AND {r}").expect("write");
        }
        on
    }

    /// An integer expression usable next to `cols` (a column, or a literal).
    fn int_operand(&mut self, alias: &str, cols: &[Column]) -> String {
        match self.col(cols, Ty::is_int) {
            Some(c) => q(alias, &c.name),
            None => "2".into(),
        }
    }

    /// A scalar expression over one column and its type.
    fn expr(&mut self, alias: &str, cols: &[Column]) -> (String, Ty) {
        let c = self.any_col(cols);
        let x = q(alias, &c.name);
        let roll = self.range(0, 7);
        match c.ty {
            Ty::Int4 | Ty::Int8 => {
                let e = match roll {
                    0 => format!("{x} + 1"),
                    1 => format!("{x} * 2"),
                    2 => {
                        let y = self.int_operand(alias, cols);
                        format!("{x} - {y}")
                    }
                    3 => format!("abs({x})"),
                    4 => format!("{x} % 3"),
                    5 => format!("COALESCE({x}, 0)"),
                    6 => {
                        let p = self.pred(alias, cols, 0);
                        let l = self.lit(c.ty);
                        format!("CASE WHEN {p} THEN {x} ELSE {l} END")
                    }
                    _ => x,
                };
                (e, c.ty)
            }
            Ty::Text => match roll {
                0 => (format!("upper({x})"), Ty::Text),
                1 => (format!("lower({x})"), Ty::Text),
                2 => (format!("{x} || 'x'"), Ty::Text),
                3 => {
                    let y = self.int_operand(alias, cols);
                    (format!("concat({x}, '-', {y})"), Ty::Text)
                }
                4 => (format!("length({x})"), Ty::Int4),
                5 => (format!("substr({x}, 1, 1)"), Ty::Text),
                6 => {
                    let p = self.pred(alias, cols, 0);
                    (format!("CASE WHEN {p} THEN {x} ELSE 'other' END"), Ty::Text)
                }
                _ => (format!("COALESCE({x}, 'none')"), Ty::Text),
            },
            Ty::Numeric => {
                let e = match roll {
                    0 => format!("{x} + 1.25"),
                    1 => format!("{x} * 2"),
                    2 => format!("-{x}"),
                    3 => format!("COALESCE({x}, 0)"),
                    4 => {
                        let y = self.int_operand(alias, cols);
                        format!("{x} + {y}")
                    }
                    5 => format!("{x} * {x}"),
                    6 => {
                        let p = self.pred(alias, cols, 0);
                        format!("CASE WHEN {p} THEN {x} ELSE 0 END")
                    }
                    _ => format!("abs({x})"),
                };
                (e, Ty::Numeric)
            }
            Ty::Float8 => {
                let e = match roll {
                    0 => format!("{x} * 2"),
                    1 => format!("{x} + 0.5"),
                    2 => format!("-{x}"),
                    3 => format!("COALESCE({x}, -1)"),
                    4 => {
                        let y = self.int_operand(alias, cols);
                        format!("{x} + {y}")
                    }
                    5 => format!("{x} * {x}"),
                    6 => {
                        let p = self.pred(alias, cols, 0);
                        format!("CASE WHEN {p} THEN {x} ELSE 0.25 END")
                    }
                    _ => format!("abs({x})"),
                };
                (e, Ty::Float8)
            }
            Ty::Bool => {
                let e = match roll {
                    0 | 1 => format!("NOT {x}"),
                    2 | 3 => {
                        let p = self.pred(alias, cols, 0);
                        format!("({x} AND {p})")
                    }
                    4 | 5 => {
                        let p = self.pred(alias, cols, 0);
                        format!("({x} OR {p})")
                    }
                    6 => format!("COALESCE({x}, false)"),
                    _ => format!("({})", self.pred(alias, cols, 1)),
                };
                (e, Ty::Bool)
            }
        }
    }

    /// A plain column (mostly) or an expression of one of `sides`.
    fn item(&mut self, sides: &[(&str, &[Column])]) -> (String, Ty) {
        let (alias, cols) = self.pick(sides);
        if self.chance(0.6) {
            let c = self.any_col(cols);
            (q(alias, &c.name), c.ty)
        } else {
            self.expr(alias, cols)
        }
    }

    fn items(&mut self, sides: &[(&str, &[Column])], lo: usize, hi: usize) -> Vec<(String, Ty)> {
        let n = self.range(lo, hi);
        (0..n).map(|_| self.item(sides)).collect()
    }

    /// ` WHERE pred` with probability `p`.
    fn maybe_where(&mut self, p: f64, alias: &str, cols: &[Column]) -> String {
        if self.chance(p) {
            format!(" WHERE {}", self.pred(alias, cols, 1))
        } else {
            String::new()
        }
    }

    /// A number column, or an integer one.
    fn number_col(&mut self, cols: &[Column]) -> Option<Column> {
        self.col(cols, Ty::is_number)
    }

    /// An aggregate of the basic kinds over `cols`.
    fn basic_agg(&mut self, alias: &str, cols: &[Column]) -> (String, Ty) {
        match self.range(0, 4) {
            0 => ("count(*)".into(), Ty::Int8),
            1 => {
                let c = self.any_col(cols);
                (format!("count({})", q(alias, &c.name)), Ty::Int8)
            }
            2 => match self.number_col(cols) {
                Some(c) => {
                    let ty = match c.ty {
                        Ty::Int4 => Ty::Int8,
                        Ty::Int8 => Ty::Numeric,
                        t => t,
                    };
                    (format!("sum({})", q(alias, &c.name)), ty)
                }
                None => ("count(*)".into(), Ty::Int8),
            },
            n => {
                // min/max of booleans: PostgreSQL has none.
                match self.col(cols, |t| t != Ty::Bool) {
                    Some(c) => {
                        let f = if n == 3 { "min" } else { "max" };
                        (format!("{f}({})", q(alias, &c.name)), c.ty)
                    }
                    None => ("count(*)".into(), Ty::Int8),
                }
            }
        }
    }

    /// 1–2 grouping items (a column, sometimes an expression).
    fn group_items(&mut self, alias: &str, cols: &[Column]) -> Vec<(String, Ty)> {
        let n = self.range(1, 2);
        (0..n)
            .map(|_| {
                if self.chance(0.75) {
                    let c = self.any_col(cols);
                    (q(alias, &c.name), c.ty)
                } else {
                    self.expr(alias, cols)
                }
            })
            .collect()
    }

    /// An `ASC|DESC [NULLS FIRST|LAST]` suffix.
    fn direction(&mut self) -> String {
        let dir = self.pick(&["", " DESC"]);
        let nulls = self.pick(&["", "", " NULLS FIRST", " NULLS LAST"]);
        format!("{dir}{nulls}")
    }
}

/// `SELECT <groups>, <aggs> FROM rel a [WHERE] GROUP BY <groups> [HAVING]`.
fn grouped(
    g: &mut Gen,
    r: &Rel,
    groups: Vec<(String, Ty)>,
    aggs: Vec<(String, Ty)>,
    having: Option<String>,
) -> Query {
    let group_exprs: Vec<String> = groups.iter().map(|(e, _)| e.clone()).collect();
    let mut items = groups;
    items.extend(aggs);
    let (sel, cols) = select_list(items);
    let from = g.from(r, "a");
    let wh = g.maybe_where(0.3, "a", &r.cols);
    let mut sql = format!("SELECT {sel} FROM {from}{wh}");
    if !group_exprs.is_empty() {
        write!(sql, " GROUP BY {}", group_exprs.join(", ")).expect("write");
    }
    if let Some(h) = having {
        write!(sql, " HAVING {h}").expect("write");
    }
    Query { sql, cols }
}

fn shape_project(g: &mut Gen) -> Query {
    let r = g.rel();
    let n = g.range(2, 4);
    let items = (0..n).map(|_| g.expr("a", &r.cols)).collect();
    let (sel, cols) = select_list(items);
    let from = g.from(&r, "a");
    let wh = g.maybe_where(0.5, "a", &r.cols);
    Query {
        sql: format!("SELECT {sel} FROM {from}{wh}"),
        cols,
    }
}

fn shape_filter(g: &mut Gen) -> Query {
    let r = g.rel();
    let items = r.cols.iter().map(|c| (q("a", &c.name), c.ty)).collect();
    let (sel, cols) = select_list(items);
    let from = g.from(&r, "a");
    let p = g.pred("a", &r.cols, 2);
    Query {
        sql: format!("SELECT {sel} FROM {from} WHERE {p}"),
        cols,
    }
}

fn join_shape(g: &mut Gen, kind: &str) -> Query {
    let (r1, r2) = g.two_rels();
    let sides: [(&str, &[Column]); 2] = [("a", &r1.cols), ("b", &r2.cols)];
    let items = g.items(&sides, 2, 4);
    let (sel, cols) = select_list(items);
    let on = g.join_on(sides[0], sides[1]);
    let (f1, f2) = (g.from(&r1, "a"), g.from(&r2, "b"));
    let mut sql = format!("SELECT {sel} FROM {f1} {kind} JOIN {f2} ON {on}");
    if g.chance(0.3) {
        let p = g.pred2(sides[0], sides[1]);
        write!(sql, " WHERE {p}").expect("write");
    }
    Query { sql, cols }
}

fn shape_join_inner(g: &mut Gen) -> Query {
    join_shape(g, "INNER")
}

fn shape_join_left(g: &mut Gen) -> Query {
    join_shape(g, "LEFT")
}

fn shape_join_right(g: &mut Gen) -> Query {
    join_shape(g, "RIGHT")
}

fn shape_join_full(g: &mut Gen) -> Query {
    join_shape(g, "FULL")
}

/// `SELECT .. FROM r1 a WHERE <condition on r2 b>` for semi and anti joins.
fn semi_anti(g: &mut Gen, kind: &str) -> Query {
    let (r1, r2) = g.two_rels();
    let items = g.items(&[("a", &r1.cols)], 1, 3);
    let (sel, cols) = select_list(items);
    let (x, y) = g.join_key(&r1.cols, &r2.cols);
    let (ax, by) = (q("a", &x.name), q("b", &y.name));
    let f1 = g.from(&r1, "a");
    let f2 = g.from(&r2, "b");
    let cond = match kind {
        "IN" | "NOT IN" => {
            let wh = g.maybe_where(0.5, "b", &r2.cols);
            format!("{ax} {kind} (SELECT {by} FROM {f2}{wh})")
        }
        _ => {
            let mut inner = format!("{by} = {ax}");
            if g.chance(0.5) {
                let r = g.pred2(("a", &r1.cols), ("b", &r2.cols));
                write!(inner, " AND {r}").expect("write");
            }
            format!("{kind} (SELECT 1 FROM {f2} WHERE {inner})")
        }
    };
    let mut sql = format!("SELECT {sel} FROM {f1} WHERE {cond}");
    if g.chance(0.3) {
        let p = g.pred("a", &r1.cols, 0);
        write!(sql, " AND {p}").expect("write");
    }
    Query { sql, cols }
}

fn shape_semi_in(g: &mut Gen) -> Query {
    semi_anti(g, "IN")
}

fn shape_semi_exists(g: &mut Gen) -> Query {
    semi_anti(g, "EXISTS")
}

fn shape_anti_not_exists(g: &mut Gen) -> Query {
    semi_anti(g, "NOT EXISTS")
}

fn shape_anti_not_in(g: &mut Gen) -> Query {
    semi_anti(g, "NOT IN")
}

fn shape_cross_join(g: &mut Gen) -> Query {
    let (r1, r2) = g.two_rels();
    let sides: [(&str, &[Column]); 2] = [("a", &r1.cols), ("b", &r2.cols)];
    let items = g.items(&sides, 2, 3);
    let (sel, cols) = select_list(items);
    let (f1, f2) = (g.from(&r1, "a"), g.from(&r2, "b"));
    let mut sql = if g.chance(0.5) {
        format!("SELECT {sel} FROM {f1} CROSS JOIN {f2}")
    } else {
        format!("SELECT {sel} FROM {f1}, {f2}")
    };
    if g.chance(0.6) {
        let p = g.pred2(sides[0], sides[1]);
        write!(sql, " WHERE {p}").expect("write");
    }
    Query { sql, cols }
}

fn shape_self_join(g: &mut Gen) -> Query {
    let r = g.rel();
    let sides: [(&str, &[Column]); 2] = [("a", &r.cols), ("b", &r.cols)];
    let items = g.items(&sides, 2, 4);
    let (sel, cols) = select_list(items);
    let key = g.any_col(&r.cols);
    let mut on = format!("a.{0} = b.{0}", key.name);
    let other = g.any_col(&r.cols);
    let op = g.pick(&["<", "<>", "<=", ">"]);
    write!(on, " AND a.{0} {op} b.{0}", other.name).expect("write");
    let kind = g.pick(&["INNER", "LEFT"]);
    let (f1, f2) = (g.from(&r, "a"), g.from(&r, "b"));
    Query {
        sql: format!("SELECT {sel} FROM {f1} {kind} JOIN {f2} ON {on}"),
        cols,
    }
}

fn shape_agg_basic(g: &mut Gen) -> Query {
    let r = g.rel();
    let groups = g.group_items("a", &r.cols);
    let n = g.range(2, 4);
    let aggs = (0..n).map(|_| g.basic_agg("a", &r.cols)).collect();
    grouped(g, &r, groups, aggs, None)
}

fn shape_agg_avg(g: &mut Gen) -> Query {
    let r = g.rel();
    let groups = g.group_items("a", &r.cols);
    // avg(numeric) is excluded: its result scale differs (known difference).
    let mut aggs = vec![];
    for _ in 0..g.range(1, 2) {
        let c = g
            .col(&r.cols, |t| t.is_int() || t == Ty::Float8)
            .expect("an integer column");
        aggs.push((format!("avg(a.{})", c.name), Ty::Float8));
    }
    aggs.push(("count(*)".into(), Ty::Int8));
    grouped(g, &r, groups, aggs, None)
}

fn shape_agg_stddev_var(g: &mut Gen) -> Query {
    let r = g.rel();
    let groups = if g.chance(0.8) {
        g.group_items("a", &r.cols)
    } else {
        vec![]
    };
    let mut aggs = vec![];
    for _ in 0..g.range(1, 3) {
        let c = g.number_col(&r.cols).expect("a number column");
        let f = g.pick(&["stddev_samp", "var_samp"]);
        aggs.push((format!("{f}(a.{})", c.name), Ty::Float8));
    }
    grouped(g, &r, groups, aggs, None)
}

fn shape_agg_bool(g: &mut Gen) -> Query {
    let r = g.rel();
    let groups = g.group_items("a", &r.cols);
    let mut aggs = vec![];
    for _ in 0..g.range(1, 3) {
        let arg = match g.col(&r.cols, |t| t == Ty::Bool) {
            Some(c) if g.chance(0.6) => q("a", &c.name),
            _ => format!("({})", g.pred("a", &r.cols, 0)),
        };
        let f = g.pick(&["bool_and", "bool_or"]);
        aggs.push((format!("{f}({arg})"), Ty::Bool));
    }
    grouped(g, &r, groups, aggs, None)
}

fn shape_agg_count_distinct(g: &mut Gen) -> Query {
    let r = g.rel();
    let groups = if g.chance(0.7) {
        g.group_items("a", &r.cols)
    } else {
        vec![]
    };
    let mut aggs = vec![];
    for _ in 0..g.range(1, 2) {
        let c = g.any_col(&r.cols);
        aggs.push((format!("count(DISTINCT a.{})", c.name), Ty::Int8));
    }
    aggs.push(("count(*)".into(), Ty::Int8));
    grouped(g, &r, groups, aggs, None)
}

fn shape_agg_string_agg(g: &mut Gen) -> Query {
    let r = g.rel();
    let groups = if g.chance(0.8) {
        g.group_items("a", &r.cols)
    } else {
        vec![]
    };
    let text = g.col(&r.cols, |t| t == Ty::Text).expect("a text column");
    let arg = match g.range(0, 2) {
        0 => q("a", &text.name),
        1 => format!("upper(a.{})", text.name),
        _ => {
            let y = g.int_operand("a", &r.cols);
            format!("concat(a.{}, ':', {y})", text.name)
        }
    };
    let sep = g.pick(&["','", "'|'", "''"]);
    let dir = g.direction();
    // Ordered by the aggregated value itself, so ties are equal strings.
    let aggs = vec![
        (
            format!("string_agg({arg}, {sep} ORDER BY {arg}{dir})"),
            Ty::Text,
        ),
        ("count(*)".into(), Ty::Int8),
    ];
    grouped(g, &r, groups, aggs, None)
}

fn shape_agg_having(g: &mut Gen) -> Query {
    let r = g.rel();
    let groups = g.group_items("a", &r.cols);
    let n = g.range(1, 3);
    let aggs = (0..n).map(|_| g.basic_agg("a", &r.cols)).collect();
    let having = match g.range(0, 2) {
        0 => format!("count(*) >= {}", g.range(1, 3)),
        1 => match g.number_col(&r.cols) {
            Some(c) => {
                let l = g.lit(c.ty);
                format!("sum(a.{}) > {l}", c.name)
            }
            None => "count(*) > 1".into(),
        },
        _ => {
            let text = g.col(&r.cols, |t| t == Ty::Text).expect("a text column");
            let l = g.lit(Ty::Text);
            format!("max(a.{}) >= {l}", text.name)
        }
    };
    grouped(g, &r, groups, aggs, Some(having))
}

fn shape_agg_global(g: &mut Gen) -> Query {
    let r = g.rel();
    let n = g.range(2, 4);
    let mut aggs: Vec<(String, Ty)> = (0..n).map(|_| g.basic_agg("a", &r.cols)).collect();
    if g.chance(0.3) {
        let c = g.col(&r.cols, Ty::is_int).expect("an integer column");
        aggs.push((format!("avg(a.{})", c.name), Ty::Float8));
    }
    grouped(g, &r, vec![], aggs, None)
}

fn shape_distinct(g: &mut Gen) -> Query {
    let r = g.rel();
    let items = g.items(&[("a", &r.cols)], 1, 3);
    let (sel, cols) = select_list(items);
    let from = g.from(&r, "a");
    let wh = g.maybe_where(0.4, "a", &r.cols);
    Query {
        sql: format!("SELECT DISTINCT {sel} FROM {from}{wh}"),
        cols,
    }
}

/// `SELECT .. FROM r1 a [WHERE] <op> SELECT .. FROM r2 b [WHERE]` over
/// columns of matching type families.
fn set_op(g: &mut Gen, op: &str) -> Query {
    let r1 = g.rel();
    let r2 = g.rel();
    let families: Vec<u8> = r1
        .cols
        .iter()
        .map(|c| c.ty.family())
        .filter(|f| r2.cols.iter().any(|c| c.ty.family() == *f))
        .collect::<BTreeSet<u8>>()
        .into_iter()
        .collect();
    let arity = g.range(1, 2);
    let mut left = vec![];
    let mut right = vec![];
    let mut cols = vec![];
    for i in 0..arity {
        let f = g.pick(&families);
        let x = g.col(&r1.cols, |t| t.family() == f).expect("family in r1");
        let y = g.col(&r2.cols, |t| t.family() == f).expect("family in r2");
        left.push(format!("a.{} AS c{i}", x.name));
        right.push(format!("b.{}", y.name));
        cols.push(Column {
            name: format!("c{i}"),
            ty: unify(x.ty, y.ty),
        });
    }
    let (f1, f2) = (g.from(&r1, "a"), g.from(&r2, "b"));
    let w1 = g.maybe_where(0.5, "a", &r1.cols);
    let w2 = g.maybe_where(0.5, "b", &r2.cols);
    Query {
        sql: format!(
            "SELECT {} FROM {f1}{w1} {op} SELECT {} FROM {f2}{w2}",
            left.join(", "),
            right.join(", ")
        ),
        cols,
    }
}

fn shape_union(g: &mut Gen) -> Query {
    set_op(g, "UNION")
}

fn shape_union_all(g: &mut Gen) -> Query {
    set_op(g, "UNION ALL")
}

fn shape_except(g: &mut Gen) -> Query {
    set_op(g, "EXCEPT")
}

fn shape_except_all(g: &mut Gen) -> Query {
    set_op(g, "EXCEPT ALL")
}

fn shape_intersect(g: &mut Gen) -> Query {
    set_op(g, "INTERSECT")
}

fn shape_intersect_all(g: &mut Gen) -> Query {
    set_op(g, "INTERSECT ALL")
}

/// An aggregate over `b` for a scalar subquery, and its type.
fn subquery_agg(g: &mut Gen, cols: &[Column]) -> (String, Ty) {
    match g.range(0, 3) {
        0 => ("count(*)".into(), Ty::Int8),
        1 => {
            let c = g.col(cols, |t| t != Ty::Bool).expect("a non-bool column");
            (format!("max(b.{})", c.name), c.ty)
        }
        2 => {
            let c = g.col(cols, |t| t != Ty::Bool).expect("a non-bool column");
            (format!("min(b.{})", c.name), c.ty)
        }
        _ => {
            let c = g.number_col(cols).expect("a number column");
            let ty = match c.ty {
                Ty::Int4 => Ty::Int8,
                Ty::Int8 => Ty::Numeric,
                t => t,
            };
            (format!("sum(b.{})", c.name), ty)
        }
    }
}

fn shape_scalar_subquery(g: &mut Gen) -> Query {
    let (r1, r2) = g.two_rels();
    let mut items = g.items(&[("a", &r1.cols)], 1, 2);
    let (agg, ty) = subquery_agg(g, &r2.cols);
    let f2 = g.from(&r2, "b");
    let wh = g.maybe_where(0.5, "b", &r2.cols);
    items.push((format!("(SELECT {agg} FROM {f2}{wh})"), ty));
    let (sel, cols) = select_list(items);
    let f1 = g.from(&r1, "a");
    let mut sql = format!("SELECT {sel} FROM {f1}");
    if g.chance(0.6) {
        let (x, y) = g.join_key(&r1.cols, &r2.cols);
        let f = g.pick(&["min", "max"]);
        let op = g.cmp_op();
        let f2 = g.from(&r2, "b");
        write!(
            sql,
            " WHERE a.{} {op} (SELECT {f}(b.{}) FROM {f2})",
            x.name, y.name
        )
        .expect("write");
    }
    Query { sql, cols }
}

fn shape_scalar_subquery_correlated(g: &mut Gen) -> Query {
    let (r1, r2) = g.two_rels();
    let mut items = g.items(&[("a", &r1.cols)], 1, 2);
    // Freshet refuses correlated scalar subqueries without an aggregate
    // (42000, known difference), so every one aggregates.
    for _ in 0..g.range(1, 2) {
        let (agg, ty) = subquery_agg(g, &r2.cols);
        let (x, y) = g.join_key(&r1.cols, &r2.cols);
        let f2 = g.from(&r2, "b");
        let mut cond = format!("b.{} = a.{}", y.name, x.name);
        if g.chance(0.3) {
            let p = g.pred("b", &r2.cols, 0);
            write!(cond, " AND {p}").expect("write");
        }
        items.push((format!("(SELECT {agg} FROM {f2} WHERE {cond})"), ty));
    }
    let (sel, cols) = select_list(items);
    let f1 = g.from(&r1, "a");
    let mut sql = format!("SELECT {sel} FROM {f1}");
    if g.chance(0.4) {
        let (x, y) = g.join_key(&r1.cols, &r2.cols);
        let f2 = g.from(&r2, "b");
        let n = g.range(0, 2);
        write!(
            sql,
            " WHERE (SELECT count(*) FROM {f2} WHERE b.{} = a.{}) > {n}",
            y.name, x.name
        )
        .expect("write");
    }
    Query { sql, cols }
}

/// A correlated aggregate whose correlation is not an equality
/// (`b.y < a.x`), in the select list and, sometimes, in `WHERE`: unnested
/// by Freshet's planner rule, not by DataFusion.
fn shape_correlated_inequality(g: &mut Gen) -> Query {
    let (r1, r2) = g.two_rels();
    let mut items = g.items(&[("a", &r1.cols)], 1, 2);
    let (agg, ty) = subquery_agg(g, &r2.cols);
    let (x, y) = g.join_key(&r1.cols, &r2.cols);
    let op = g.pick(&["<", "<=", ">", ">=", "<>"]);
    let f2 = g.from(&r2, "b");
    let mut cond = format!("b.{} {op} a.{}", y.name, x.name);
    if g.chance(0.3) {
        let p = g.pred("b", &r2.cols, 0);
        write!(cond, " AND {p}").expect("write");
    }
    items.push((format!("(SELECT {agg} FROM {f2} WHERE {cond})"), ty));
    let (sel, cols) = select_list(items);
    let f1 = g.from(&r1, "a");
    let mut sql = format!("SELECT {sel} FROM {f1}");
    if g.chance(0.4) {
        let (x, y) = g.join_key(&r1.cols, &r2.cols);
        let op = g.pick(&["<", ">", "<>"]);
        let f2 = g.from(&r2, "b");
        write!(
            sql,
            " WHERE (SELECT count(*) FROM {f2} WHERE b.{} {op} a.{}) > {}",
            y.name,
            x.name,
            g.range(0, 2)
        )
        .expect("write");
    }
    Query { sql, cols }
}

/// `[NOT] EXISTS`, `op ANY/ALL` and `[NOT] IN` (as a filter and as a
/// value) over a subquery correlated by an inequality.
fn shape_correlated_quantified(g: &mut Gen) -> Query {
    let (r1, r2) = g.two_rels();
    let mut items = g.items(&[("a", &r1.cols)], 1, 2);
    let (x, y) = g.join_key(&r1.cols, &r2.cols);
    let (u, v) = g.join_key(&r1.cols, &r2.cols);
    let corr_op = g.pick(&["<", ">", "<>", "<="]);
    let f2 = g.from(&r2, "b");
    let corr = format!("b.{} {corr_op} a.{}", v.name, u.name);
    if g.chance(0.5) {
        let not = g.pick(&["", "NOT "]);
        items.push((
            format!(
                "a.{} {not}IN (SELECT b.{} FROM {f2} WHERE {corr})",
                x.name, y.name
            ),
            Ty::Bool,
        ));
    }
    let (sel, cols) = select_list(items);
    let f1 = g.from(&r1, "a");
    let f2 = g.from(&r2, "b");
    let pred = match g.range(0, 2) {
        0 => {
            let not = g.pick(&["", "NOT "]);
            format!("{not}EXISTS (SELECT 1 FROM {f2} WHERE {corr})")
        }
        1 => {
            let op = g.cmp_op();
            let q = g.pick(&["ANY", "ALL"]);
            format!(
                "a.{} {op} {q} (SELECT b.{} FROM {f2} WHERE {corr})",
                x.name, y.name
            )
        }
        _ => {
            let not = g.pick(&["", "NOT "]);
            format!(
                "a.{} {not}IN (SELECT b.{} FROM {f2} WHERE {corr})",
                x.name, y.name
            )
        }
    };
    Query {
        sql: format!("SELECT {sel} FROM {f1} WHERE {pred}"),
        cols,
    }
}

/// `LEFT JOIN LATERAL (... ORDER BY ... LIMIT 1)`: the best row of the
/// other side below each row (a top-1 per outer value).
fn shape_lateral_top(g: &mut Gen) -> Query {
    let (r1, r2) = g.two_rels();
    let mut items = g.items(&[("a", &r1.cols)], 1, 2);
    let (x, y) = g.join_key(&r1.cols, &r2.cols);
    let c = g
        .col(&r2.cols, |t| t != Ty::Bool)
        .expect("a non-bool column");
    let dir = g.direction();
    let op = g.pick(&["<", ">", "<>"]);
    let f2 = g.from(&r2, "b");
    items.push(("l.v".to_string(), c.ty));
    let (sel, cols) = select_list(items);
    let f1 = g.from(&r1, "a");
    // Ordered by the one column selected: ties give the same value.
    let sql = format!(
        "SELECT {sel} FROM {f1} LEFT JOIN LATERAL (SELECT b.{c} AS v FROM {f2} \
         WHERE b.{y} {op} a.{x} ORDER BY b.{c}{dir} LIMIT 1) l ON true",
        c = c.name,
        y = y.name,
        x = x.name
    );
    Query { sql, cols }
}

/// `GROUPING SETS`, `ROLLUP` or `CUBE` over one or two grouping columns.
fn shape_grouping_sets(g: &mut Gen) -> Query {
    let r = g.rel();
    let a = g.any_col(&r.cols);
    let b = g.any_col(&r.cols);
    let (agg, ty) = g.basic_agg("a", &r.cols);
    let groups = if a.name == b.name {
        match g.range(0, 1) {
            0 => format!("ROLLUP (a.{})", a.name),
            _ => format!("GROUPING SETS ((a.{}), ())", a.name),
        }
    } else {
        match g.range(0, 2) {
            0 => format!("ROLLUP (a.{}, a.{})", a.name, b.name),
            1 => format!("CUBE (a.{}, a.{})", a.name, b.name),
            _ => format!("GROUPING SETS ((a.{}), (a.{}), ())", a.name, b.name),
        }
    };
    let mut items = vec![(format!("a.{}", a.name), a.ty)];
    if a.name != b.name {
        items.push((format!("a.{}", b.name), b.ty));
    }
    items.push(("count(*)".into(), Ty::Int8));
    items.push((agg, ty));
    let (sel, cols) = select_list(items);
    let from = g.from(&r, "a");
    let wh = g.maybe_where(0.3, "a", &r.cols);
    Query {
        sql: format!("SELECT {sel} FROM {from}{wh} GROUP BY {groups}"),
        cols,
    }
}

/// `DISTINCT ON (x) x, y ... ORDER BY x, y`: the first `y` per `x` (only
/// ordered columns are selected, so ties give the same row).
fn shape_distinct_on(g: &mut Gen) -> Query {
    let r = g.rel();
    let x = g.any_col(&r.cols);
    let y = g.any_col(&r.cols);
    let dir = g.direction();
    let items = vec![
        (format!("a.{}", x.name), x.ty),
        (format!("a.{}", y.name), y.ty),
    ];
    let (sel, cols) = select_list(items);
    let from = g.from(&r, "a");
    let wh = g.maybe_where(0.3, "a", &r.cols);
    Query {
        sql: format!(
            "SELECT DISTINCT ON (a.{x}) {sel} FROM {from}{wh} ORDER BY a.{x}, a.{y}{dir}",
            x = x.name,
            y = y.name
        ),
        cols,
    }
}

/// Arrays built from columns: `ARRAY[...]` with `array_length`,
/// `= ANY`, `&&`, `@>`, `<@` and subscripts, or an ordered `array_agg`
/// per group. Arrays come out as text (`{1,NULL}`), compared as text.
fn shape_arrays(g: &mut Gen) -> Query {
    let r = g.rel();
    let int = g.col(&r.cols, Ty::is_int).expect("k is an integer column");
    let other = g.col(&r.cols, Ty::is_int).expect("k is an integer column");
    // Everything `bigint[]`: PostgreSQL has no `bigint[] @> integer[]`.
    let arr = format!("ARRAY[a.{}, a.{}]::int8[]", int.name, other.name);
    if g.chance(0.4) {
        // Not numeric: a view's `array_agg(numeric)` prints its elements
        // at scale 10 where the ad hoc query keeps the column's (a known
        // bug, docs/log.md session 40).
        let x = g
            .col(&r.cols, |t| !matches!(t, Ty::Float8 | Ty::Numeric))
            .expect("k is an integer");
        let dir = g.direction();
        let groups = g.group_items("a", &r.cols);
        let aggs = vec![
            (
                format!("array_agg(a.{x} ORDER BY a.{x}{dir})", x = x.name),
                Ty::Text,
            ),
            (
                format!("array_length(array_agg(a.{}), 1)", int.name),
                Ty::Int4,
            ),
        ];
        return grouped(g, &r, groups, aggs, None);
    }
    let (l1, l2) = (g.lit(Ty::Int4), g.lit(Ty::Int4));
    let test = match g.range(0, 3) {
        0 => format!("{arr} && ARRAY[{l1}, {l2}]::int8[]"),
        1 => format!("{arr} @> ARRAY[{l1}]::int8[]"),
        2 => format!("{arr} <@ ARRAY[{l1}, {l2}, a.k]::int8[]"),
        _ => format!("a.{} = ANY (ARRAY[{l1}, {l2}, NULL])", int.name),
    };
    let items = vec![
        (q("a", &int.name), int.ty),
        (arr.clone(), Ty::Text),
        (format!("({arr})[{}]", g.range(1, 3)), Ty::Int8),
        (format!("array_length({arr} || a.k, 1)"), Ty::Int4),
        (test.clone(), Ty::Bool),
    ];
    let (sel, cols) = select_list(items);
    let from = g.from(&r, "a");
    let wh = if g.chance(0.5) {
        format!(" WHERE {test}")
    } else {
        g.maybe_where(0.3, "a", &r.cols)
    };
    Query {
        sql: format!("SELECT {sel} FROM {from}{wh}"),
        cols,
    }
}

/// `jsonb` built from columns and taken apart again (`->>`, `->`, `@>`,
/// `?`, `jsonb_typeof`), or an ordered `jsonb_agg` per group. Documents
/// come out as text, compared as text.
fn shape_jsonb(g: &mut Gen) -> Query {
    let r = g.rel();
    // Not numeric: jsonb holds numbers as JSON numbers, so `1.50` is
    // `1.5` (a documented difference).
    let plain = |t: Ty| !matches!(t, Ty::Float8 | Ty::Numeric);
    let x = g.col(&r.cols, plain).expect("k is an integer");
    let y = g.col(&r.cols, plain).expect("k is an integer");
    let doc = format!(
        "jsonb_strip_nulls(jsonb_build_object('x', a.{}, 'y', a.{}, 'k', a.k))",
        x.name, y.name
    );
    if g.chance(0.4) {
        let dir = g.direction();
        let groups = g.group_items("a", &r.cols);
        let aggs = vec![
            (
                format!("jsonb_agg(a.{x} ORDER BY a.{x}{dir})", x = x.name),
                Ty::Text,
            ),
            (format!("count(*) FILTER (WHERE {doc} ? 'y')"), Ty::Int8),
        ];
        return grouped(g, &r, groups, aggs, None);
    }
    let l = g.lit(Ty::Int4);
    let test = match g.range(0, 3) {
        0 => format!("{doc} ? 'x'"),
        1 => format!("{doc} @> '{{\"k\": {l}}}'"),
        2 => format!("({doc} ->> 'k')::int > {l}"),
        _ => format!("{doc} ?| ARRAY['x', 'y']"),
    };
    let items = vec![
        (q("a", "k"), Ty::Int4),
        (doc.clone(), Ty::Text),
        (format!("{doc} ->> 'x'"), Ty::Text),
        (format!("jsonb_typeof({doc} -> 'y')"), Ty::Text),
        (test.clone(), Ty::Bool),
    ];
    let (sel, cols) = select_list(items);
    let from = g.from(&r, "a");
    let wh = if g.chance(0.5) {
        format!(" WHERE {test}")
    } else {
        g.maybe_where(0.3, "a", &r.cols)
    };
    Query {
        sql: format!("SELECT {sel} FROM {from}{wh}"),
        cols,
    }
}

/// Aggregates with `FILTER (WHERE ...)`, per group or over everything.
fn shape_agg_filter(g: &mut Gen) -> Query {
    let r = g.rel();
    let groups = if g.chance(0.8) {
        g.group_items("a", &r.cols)
    } else {
        vec![]
    };
    let mut aggs = vec![];
    for _ in 0..g.range(1, 3) {
        let (agg, ty) = g.basic_agg("a", &r.cols);
        let p = g.pred("a", &r.cols, 0);
        // `count(*)` and friends: `agg(args)` becomes `agg(args) FILTER (...)`.
        aggs.push((format!("{agg} FILTER (WHERE {p})"), ty));
    }
    aggs.push(("count(*)".into(), Ty::Int8));
    grouped(g, &r, groups, aggs, None)
}

/// Window aggregates over explicit frames: `ROWS` frames ordered by every
/// column of the row (rows that tie are equal, so the multiset of answers
/// is deterministic) and `RANGE` frames with offsets over an integer key
/// (peers are part of the frame).
fn shape_window_frame(g: &mut Gen) -> Query {
    let r = g.rel();
    let part = g.any_col(&r.cols);
    let num = g.number_col(&r.cols).expect("a number column");
    let sum_ty = match num.ty {
        Ty::Int4 => Ty::Int8,
        Ty::Int8 => Ty::Numeric,
        t => t,
    };
    let all: Vec<String> = r.cols.iter().map(|c| format!("a.{}", c.name)).collect();
    let rows_frame = g.pick(&[
        "ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING",
        "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
        "ROWS BETWEEN CURRENT ROW AND 2 FOLLOWING",
        "ROWS BETWEEN 2 PRECEDING AND 1 PRECEDING",
    ]);
    let range_frame = g.pick(&[
        "RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING",
        "RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING",
        "RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING",
    ]);
    let dir = g.pick(&["", " DESC"]);
    let mut items: Vec<(String, Ty)> = r
        .cols
        .iter()
        .map(|c| (format!("a.{}", c.name), c.ty))
        .collect();
    items.push((
        format!(
            "sum(a.{}) OVER (PARTITION BY a.{} ORDER BY {} {rows_frame})",
            num.name,
            part.name,
            all.join(", ")
        ),
        sum_ty,
    ));
    items.push((
        format!(
            "count(*) OVER (PARTITION BY a.{} ORDER BY a.k{dir} {range_frame})",
            part.name
        ),
        Ty::Int8,
    ));
    if let Some(c) = g.col(&r.cols, |t| t != Ty::Bool)
        && g.chance(0.5)
    {
        items.push((
            format!(
                "max(a.{}) OVER (PARTITION BY a.{} ORDER BY a.k {range_frame})",
                c.name, part.name
            ),
            c.ty,
        ));
    }
    let (sel, cols) = select_list(items);
    let from = g.from(&r, "a");
    let wh = g.maybe_where(0.3, "a", &r.cols);
    Query {
        sql: format!("SELECT {sel} FROM {from}{wh}"),
        cols,
    }
}

fn shape_cte(g: &mut Gen) -> Query {
    let (r1, r2) = g.two_rels();
    let f1 = g.from(&r1, "a");
    if g.chance(0.5) {
        // An aggregating CTE joined with a table.
        let (x, y) = g.join_key(&r1.cols, &r2.cols);
        let (agg, ty) = g.basic_agg("a", &r1.cols);
        let wh = g.maybe_where(0.4, "a", &r1.cols);
        let f2 = g.from(&r2, "b");
        let other = g.item(&[("b", &r2.cols)]);
        let (sel, cols) = select_list(vec![
            ("c.g".into(), x.ty),
            ("c.v".into(), ty),
            ("c.n".into(), Ty::Int8),
            other,
        ]);
        Query {
            sql: format!(
                "WITH c AS (SELECT a.{x} AS g, {agg} AS v, count(*) AS n FROM {f1}{wh} GROUP BY a.{x}) \
                 SELECT {sel} FROM c JOIN {f2} ON b.{y} = c.g",
                x = x.name,
                y = y.name
            ),
            cols,
        }
    } else {
        // A filtering CTE used twice.
        let key = g.any_col(&r1.cols);
        let val = g.any_col(&r1.cols);
        let p = g.pred("a", &r1.cols, 1);
        let op = g.pick(&["<", "<>", "="]);
        let (sel, cols) = select_list(vec![
            ("x.g".into(), key.ty),
            ("x.v".into(), val.ty),
            ("y.v".into(), val.ty),
        ]);
        Query {
            sql: format!(
                "WITH c AS (SELECT a.{} AS g, a.{} AS v FROM {f1} WHERE {p}) \
                 SELECT {sel} FROM c AS x JOIN c AS y ON x.g = y.g AND x.v {op} y.v",
                key.name, val.name
            ),
            cols,
        }
    }
}

fn shape_values_join(g: &mut Gen) -> Query {
    let r = g.rel();
    let key = g.col(&r.cols, Ty::is_int).expect("an integer column");
    let labels = ["zero", "one", "two", "three", "four", "minus"];
    let mut rows = vec![];
    for _ in 0..g.range(2, 5) {
        let v = g.lit(Ty::Int4);
        let l = g.pick(&labels);
        rows.push(format!("({v}, '{l}')"));
    }
    if g.chance(0.3) {
        rows.push("(NULL, 'null')".into());
    }
    let mut items = g.items(&[("a", &r.cols)], 1, 2);
    items.push(("v.label".into(), Ty::Text));
    if g.chance(0.3) {
        items.push(("v.vk".into(), Ty::Int4));
    }
    let (sel, cols) = select_list(items);
    let kind = g.pick(&["INNER", "LEFT"]);
    let from = g.from(&r, "a");
    Query {
        sql: format!(
            "SELECT {sel} FROM {from} {kind} JOIN (VALUES {}) AS v(vk, label) ON a.{} = v.vk",
            rows.join(", "),
            key.name
        ),
        cols,
    }
}

fn shape_topk(g: &mut Gen) -> Query {
    let r = g.rel();
    let items = g.items(&[("a", &r.cols)], 1, 3);
    let (sel, cols) = select_list(items);
    // Ordered by every output column: ties are identical rows.
    let order: Vec<String> = cols
        .iter()
        .map(|c| format!("{}{}", c.name, g.direction()))
        .collect();
    let from = g.from(&r, "a");
    let wh = g.maybe_where(0.3, "a", &r.cols);
    let mut sql = format!(
        "SELECT {sel} FROM {from}{wh} ORDER BY {} LIMIT {}",
        order.join(", "),
        g.range(1, 5)
    );
    if g.chance(0.3) {
        write!(sql, " OFFSET {}", g.range(1, 2)).expect("write");
    }
    Query { sql, cols }
}

fn shape_topk_per_group(g: &mut Gen) -> Query {
    let r = g.rel();
    let part = match g.col(&r.cols, |_| true) {
        Some(c) if c.name != "k" && g.chance(0.3) => c,
        _ => r.cols[0].clone(),
    };
    let others = g.items(&[("a", &r.cols)], 1, 2);
    // Ordered by every other output column: ties are identical rows.
    let order: Vec<String> = others
        .iter()
        .map(|(e, _)| format!("{e}{}", g.direction()))
        .collect();
    let mut items = vec![(q("a", &part.name), part.ty)];
    items.extend(others);
    let (sel, cols) = select_list(items);
    let outer: Vec<String> = cols.iter().map(|c| format!("s.{}", c.name)).collect();
    let from = g.from(&r, "a");
    let wh = g.maybe_where(0.3, "a", &r.cols);
    let k = g.range(1, 3);
    Query {
        sql: format!(
            "SELECT {} FROM (SELECT {sel}, row_number() OVER (PARTITION BY a.{} ORDER BY {}) AS rn \
             FROM {from}{wh}) AS s WHERE s.rn <= {k}",
            outer.join(", "),
            part.name,
            order.join(", ")
        ),
        cols,
    }
}

fn shape_window_rank(g: &mut Gen) -> Query {
    let r = g.rel();
    let part = g.any_col(&r.cols);
    let x = g.any_col(&r.cols);
    let y = g.any_col(&r.cols);
    let (dx, dy) = (g.direction(), g.direction());
    let rank2_part = if g.chance(0.7) {
        format!("PARTITION BY a.{} ", part.name)
    } else {
        String::new()
    };
    let (sel, cols) = select_list(vec![
        (q("a", &part.name), part.ty),
        (q("a", &x.name), x.ty),
        (
            format!(
                "rank() OVER (PARTITION BY a.{} ORDER BY a.{}{dx})",
                part.name, x.name
            ),
            Ty::Int8,
        ),
        (
            format!("dense_rank() OVER ({rank2_part}ORDER BY a.{}{dy})", y.name),
            Ty::Int8,
        ),
    ]);
    let from = g.from(&r, "a");
    let wh = g.maybe_where(0.3, "a", &r.cols);
    Query {
        sql: format!("SELECT {sel} FROM {from}{wh}"),
        cols,
    }
}

fn shape_window_lag_lead(g: &mut Gen) -> Query {
    let r = g.rel();
    let mut cs = r.cols.clone();
    cs.shuffle(&mut g.rng);
    let (part, x, y) = (cs[0].clone(), cs[1].clone(), cs[2].clone());
    // Both windows share one order over every non-partition output column:
    // ties are identical rows, and each position gets one (lag, lead) pair
    // whichever identical row sits there. (Two different orders would pair
    // lag and lead values of identical rows arbitrarily.)
    let (d1, d2) = (g.direction(), g.direction());
    let lag_args = if g.chance(0.3) { ", 2" } else { "" };
    let (sel, cols) = select_list(vec![
        (q("a", &part.name), part.ty),
        (q("a", &x.name), x.ty),
        (q("a", &y.name), y.ty),
        (
            format!(
                "lag(a.{x}{lag_args}) OVER (PARTITION BY a.{p} ORDER BY a.{x}{d1}, a.{y}{d2})",
                x = x.name,
                y = y.name,
                p = part.name
            ),
            x.ty,
        ),
        (
            format!(
                "lead(a.{y}) OVER (PARTITION BY a.{p} ORDER BY a.{x}{d1}, a.{y}{d2})",
                x = x.name,
                y = y.name,
                p = part.name
            ),
            y.ty,
        ),
    ]);
    let from = g.from(&r, "a");
    let wh = g.maybe_where(0.3, "a", &r.cols);
    Query {
        sql: format!("SELECT {sel} FROM {from}{wh}"),
        cols,
    }
}

fn shape_window_sum(g: &mut Gen) -> Query {
    let r = g.rel();
    let part = g.any_col(&r.cols);
    let num = g.number_col(&r.cols).expect("a number column");
    let sum_ty = match num.ty {
        Ty::Int4 => Ty::Int8,
        Ty::Int8 => Ty::Numeric,
        t => t,
    };
    let other = g.any_col(&r.cols);
    let mut items = vec![
        (q("a", &part.name), part.ty),
        (q("a", &num.name), num.ty),
        (
            format!("sum(a.{}) OVER (PARTITION BY a.{})", num.name, part.name),
            sum_ty,
        ),
        (
            format!("count(*) OVER (PARTITION BY a.{})", other.name),
            Ty::Int8,
        ),
    ];
    if g.chance(0.5) {
        // A running sum: RANGE mode includes peers, so it is deterministic.
        let ord = g.any_col(&r.cols);
        let d = g.direction();
        items.push((
            format!(
                "sum(a.{}) OVER (PARTITION BY a.{} ORDER BY a.{}{d})",
                num.name, part.name, ord.name
            ),
            sum_ty,
        ));
    }
    if let Some(c) = g.col(&r.cols, |t| t != Ty::Bool)
        && g.chance(0.5)
    {
        items.push((
            format!("min(a.{}) OVER (PARTITION BY a.{})", c.name, part.name),
            c.ty,
        ));
    }
    let (sel, cols) = select_list(items);
    let from = g.from(&r, "a");
    let wh = g.maybe_where(0.3, "a", &r.cols);
    Query {
        sql: format!("SELECT {sel} FROM {from}{wh}"),
        cols,
    }
}

/// A query over a derived relation (an MV or a view) `base`, possibly joined
/// with a table: the upper layer of the chain shapes.
fn over_relation(g: &mut Gen, base: &Rel, tables: &[Rel]) -> Query {
    let sides: [(&str, &[Column]); 1] = [("b", &base.cols)];
    match g.range(0, 4) {
        0 => {
            let items = g.items(&sides, 1, 3);
            let (sel, cols) = select_list(items);
            let from = g.from(base, "b");
            let p = g.pred("b", &base.cols, 1);
            Query {
                sql: format!("SELECT {sel} FROM {from} WHERE {p}"),
                cols,
            }
        }
        1 => {
            let key = g.any_col(&base.cols);
            let mut items = vec![(q("b", &key.name), key.ty), ("count(*)".into(), Ty::Int8)];
            items.push(g.basic_agg("b", &base.cols));
            let (sel, cols) = select_list(items);
            let from = g.from(base, "b");
            Query {
                sql: format!("SELECT {sel} FROM {from} GROUP BY b.{}", key.name),
                cols,
            }
        }
        2 => {
            let items = g.items(&sides, 1, 2);
            let (sel, cols) = select_list(items);
            let from = g.from(base, "b");
            Query {
                sql: format!("SELECT DISTINCT {sel} FROM {from}"),
                cols,
            }
        }
        3 => {
            let items = g.items(&sides, 1, 2);
            let (sel, cols) = select_list(items);
            let order: Vec<String> = cols
                .iter()
                .map(|c| format!("{}{}", c.name, g.direction()))
                .collect();
            let from = g.from(base, "b");
            Query {
                sql: format!(
                    "SELECT {sel} FROM {from} ORDER BY {} LIMIT {}",
                    order.join(", "),
                    g.range(1, 4)
                ),
                cols,
            }
        }
        _ => {
            let t = g.pick(tables);
            let Some((x, y)) = g.compatible_pair(&base.cols, &t.cols) else {
                return over_relation_simple(g, base);
            };
            let items = g.items(&[("b", &base.cols), ("a", &t.cols)], 2, 3);
            let (sel, cols) = select_list(items);
            let kind = g.pick(&["INNER", "LEFT"]);
            let (fb, ft) = (g.from(base, "b"), g.from(&t, "a"));
            Query {
                sql: format!(
                    "SELECT {sel} FROM {fb} {kind} JOIN {ft} ON b.{} = a.{}",
                    x.name, y.name
                ),
                cols,
            }
        }
    }
}

/// `SELECT * FROM base WHERE pred`, when nothing else fits.
fn over_relation_simple(g: &mut Gen, base: &Rel) -> Query {
    let items = base.cols.iter().map(|c| (q("b", &c.name), c.ty)).collect();
    let (sel, cols) = select_list(items);
    let from = g.from(base, "b");
    let p = g.pred("b", &base.cols, 0);
    Query {
        sql: format!("SELECT {sel} FROM {from} WHERE {p}"),
        cols,
    }
}

/// How a shape builds its instance.
#[derive(Clone, Copy)]
enum ShapeKind {
    /// One query over the tables.
    Plain(fn(&mut Gen) -> Query),
    /// An MV over another MV (created on Freshet only; inlined ad hoc).
    OverMv,
    /// An MV over a plain view (created on both servers).
    OverView,
}

struct Shape {
    name: &'static str,
    kind: ShapeKind,
}

const fn plain(name: &'static str, f: fn(&mut Gen) -> Query) -> Shape {
    Shape {
        name,
        kind: ShapeKind::Plain(f),
    }
}

/// The catalogue of shapes, each instantiated once per case.
const SHAPES: &[Shape] = &[
    plain("project", shape_project),
    plain("filter", shape_filter),
    plain("join_inner", shape_join_inner),
    plain("join_left", shape_join_left),
    plain("join_right", shape_join_right),
    plain("join_full", shape_join_full),
    plain("semi_in", shape_semi_in),
    plain("semi_exists", shape_semi_exists),
    plain("anti_not_exists", shape_anti_not_exists),
    plain("anti_not_in", shape_anti_not_in),
    plain("cross_join", shape_cross_join),
    plain("self_join", shape_self_join),
    plain("agg_basic", shape_agg_basic),
    plain("agg_avg", shape_agg_avg),
    plain("agg_stddev_var", shape_agg_stddev_var),
    plain("agg_bool", shape_agg_bool),
    plain("agg_count_distinct", shape_agg_count_distinct),
    plain("agg_string_agg", shape_agg_string_agg),
    plain("agg_having", shape_agg_having),
    plain("agg_global", shape_agg_global),
    plain("distinct", shape_distinct),
    plain("union", shape_union),
    plain("union_all", shape_union_all),
    plain("except", shape_except),
    plain("except_all", shape_except_all),
    plain("intersect", shape_intersect),
    plain("intersect_all", shape_intersect_all),
    plain("scalar_subquery", shape_scalar_subquery),
    plain(
        "scalar_subquery_correlated",
        shape_scalar_subquery_correlated,
    ),
    plain("correlated_inequality", shape_correlated_inequality),
    plain("correlated_quantified", shape_correlated_quantified),
    plain("lateral_top", shape_lateral_top),
    plain("grouping_sets", shape_grouping_sets),
    plain("distinct_on", shape_distinct_on),
    plain("arrays", shape_arrays),
    plain("jsonb", shape_jsonb),
    plain("agg_filter", shape_agg_filter),
    plain("window_frame", shape_window_frame),
    plain("cte", shape_cte),
    plain("values_join", shape_values_join),
    plain("topk", shape_topk),
    plain("topk_per_group", shape_topk_per_group),
    plain("window_rank", shape_window_rank),
    plain("window_lag_lead", shape_window_lag_lead),
    plain("window_sum", shape_window_sum),
    Shape {
        name: "mv_over_mv",
        kind: ShapeKind::OverMv,
    },
    Shape {
        name: "mv_over_view",
        kind: ShapeKind::OverView,
    },
];

/// Shapes that may form the lower layer of a chain.
const BASE_SHAPES: &[&str] = &[
    "project",
    "filter",
    "join_inner",
    "join_left",
    "agg_basic",
    "agg_global",
    "agg_having",
    "distinct",
    "union_all",
    "semi_exists",
    "topk",
    "window_sum",
];

fn shape_names() -> Vec<&'static str> {
    SHAPES.iter().map(|s| s.name).collect()
}

fn plain_shape(name: &str) -> fn(&mut Gen) -> Query {
    match SHAPES.iter().find(|s| s.name == name).map(|s| s.kind) {
        Some(ShapeKind::Plain(f)) => f,
        _ => panic!("{name} is not a plain shape"),
    }
}

/// Replace relation marks by names (CREATE) or by what the ad hoc query
/// reads (`adhoc`).
fn resolve(sql: &str, used: &BTreeMap<String, Rel>, adhoc: bool) -> String {
    let mut out = sql.to_string();
    for (name, rel) in used {
        let mark = format!("{REF_OPEN}{name}{REF_CLOSE}");
        out = out.replace(&mark, if adhoc { &rel.adhoc } else { name });
    }
    assert!(
        !out.contains(REF_OPEN),
        "unresolved relation in generated SQL: {out}"
    );
    out
}

/// One materialized view under test, with what it needs.
struct Instance {
    shape: &'static str,
    name: String,
    /// Plain views created on both servers first: (name, query).
    views: Vec<(String, String)>,
    /// Materialized views created on Freshet first: (name, query).
    base_mvs: Vec<(String, String)>,
    /// The query of `CREATE MATERIALIZED VIEW name AS ...`.
    create_query: String,
    /// The query run ad hoc on both servers (chains inlined).
    adhoc: String,
    cols: Vec<Column>,
    tables: BTreeSet<String>,
}

impl Instance {
    /// Names of the objects it consists of (for filtering the log).
    fn objects(&self) -> BTreeSet<String> {
        let mut s: BTreeSet<String> = self.tables.clone();
        s.extend(self.views.iter().map(|(n, _)| n.clone()));
        s.extend(self.base_mvs.iter().map(|(n, _)| n.clone()));
        s.insert(self.name.clone());
        s
    }
}

/// Instantiate `shape` over `tables` as `mv_<index>`.
fn instantiate(shape: &Shape, index: usize, seed: u64, tables: &[Table]) -> Instance {
    let rels: Vec<Rel> = tables.iter().map(Rel::of_table).collect();
    let mut g = Gen::new(StdRng::seed_from_u64(seed), rels.clone());
    let name = format!("mv_{index}");
    let mut views = vec![];
    let mut base_mvs = vec![];
    let top = match shape.kind {
        ShapeKind::Plain(f) => f(&mut g),
        ShapeKind::OverMv | ShapeKind::OverView => {
            let base_shape = g.pick(BASE_SHAPES);
            let base = plain_shape(base_shape)(&mut g);
            let used = std::mem::take(&mut g.used);
            let create = resolve(&base.sql, &used, false);
            let adhoc = resolve(&base.sql, &used, true);
            let tables: BTreeSet<String> = used
                .values()
                .flat_map(|r| r.tables.iter().cloned())
                .collect();
            let base_rel = if matches!(shape.kind, ShapeKind::OverMv) {
                let base_name = format!("{name}_base");
                base_mvs.push((base_name.clone(), create));
                Rel {
                    name: base_name,
                    adhoc: format!("({adhoc})"),
                    cols: base.cols,
                    tables,
                }
            } else {
                let view_name = format!("v_{index}");
                views.push((view_name.clone(), create));
                Rel {
                    name: view_name.clone(),
                    adhoc: view_name,
                    cols: base.cols,
                    tables,
                }
            };
            over_relation(&mut g, &base_rel, &rels)
        }
    };
    let tables = g
        .used
        .values()
        .flat_map(|r| r.tables.iter().cloned())
        .collect();
    Instance {
        shape: shape.name,
        name,
        views,
        base_mvs,
        create_query: resolve(&top.sql, &g.used, false),
        adhoc: resolve(&top.sql, &g.used, true),
        cols: top.cols,
        tables,
    }
}

// ---------------------------------------------------------------------------
// Running statements
// ---------------------------------------------------------------------------

type Outcome = Result<Rows, DbError>;

fn render_error(e: &DbError) -> String {
    format!("ERROR {}: {}", e.sqlstate, e.message)
}

// ---------------------------------------------------------------------------
// Comparing results
// ---------------------------------------------------------------------------

/// How strictly number cells are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compare {
    /// Freshet vs Freshet: text equality, floats within the tolerance.
    SameSystem,
    /// Freshet vs PostgreSQL: every number by value within the tolerance.
    ByValue,
}

fn close(x: f64, y: f64) -> bool {
    x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= FLOAT_TOLERANCE * x.abs().max(y.abs())
}

/// Whether two cells of a column of type `ty` are equal.
fn cells_equal(a: &Option<String>, b: &Option<String>, ty: Option<Ty>, mode: Compare) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => {
            if x == y {
                return true;
            }
            let numeric = match (ty, mode) {
                (Some(Ty::Float8), _) => true,
                (Some(t), Compare::ByValue) => t.is_number(),
                _ => false,
            };
            numeric
                && match (x.parse::<f64>(), y.parse::<f64>()) {
                    (Ok(p), Ok(q)) => close(p, q),
                    _ => false,
                }
        }
        _ => false,
    }
}

/// Order of cells for sorting: NULL first, numbers by value, text bytewise.
fn cmp_cells(a: &Option<String>, b: &Option<String>, ty: Option<Ty>) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => {
            if ty.is_some_and(Ty::is_number)
                && let (Ok(p), Ok(q)) = (x.parse::<f64>(), y.parse::<f64>())
            {
                // -0 and 0 are equal (views store -0 as 0), so ties fall
                // through to the next column on both sides alike.
                return p.partial_cmp(&q).unwrap_or_else(|| p.total_cmp(&q));
            }
            x.cmp(y)
        }
    }
}

/// The rows sorted for multiset comparison.
fn sorted(rows: &[Vec<Option<String>>], types: &[Ty]) -> Vec<Vec<Option<String>>> {
    let mut rows = rows.to_vec();
    rows.sort_by(|x, y| {
        for (i, (a, b)) in x.iter().zip(y).enumerate() {
            let o = cmp_cells(a, b, types.get(i).copied());
            if o.is_ne() {
                return o;
            }
        }
        x.len().cmp(&y.len())
    });
    rows
}

/// Whether two results are equal as multisets; `None` if so, otherwise why not.
fn compare(x: &Rows, y: &Rows, types: &[Ty], mode: Compare) -> Option<String> {
    if x.columns != y.columns {
        return Some(format!("{} vs {} columns", x.columns, y.columns));
    }
    if x.rows.len() != y.rows.len() {
        return Some(format!("{} vs {} rows", x.rows.len(), y.rows.len()));
    }
    let (sx, sy) = (sorted(&x.rows, types), sorted(&y.rows, types));
    for (i, (rx, ry)) in sx.iter().zip(&sy).enumerate() {
        let equal = rx.len() == ry.len()
            && rx
                .iter()
                .zip(ry)
                .enumerate()
                .all(|(j, (a, b))| cells_equal(a, b, types.get(j).copied(), mode));
        if !equal {
            return Some(format!(
                "sorted row {i} differs: {} vs {}",
                render_row(rx),
                render_row(ry)
            ));
        }
    }
    None
}

fn render_row(row: &[Option<String>]) -> String {
    let cells: Vec<&str> = row.iter().map(|v| v.as_deref().unwrap_or("NULL")).collect();
    format!("({})", cells.join(" | "))
}

fn render_outcome(o: &Outcome, types: &[Ty]) -> String {
    match o {
        Err(e) => render_error(e),
        Ok(r) => {
            let mut s = format!("{} column(s), {} row(s)", r.columns, r.rows.len());
            let rows = sorted(&r.rows, types);
            for row in rows.iter().take(MAX_REPORTED_ROWS) {
                write!(s, "\n      {}", render_row(row)).expect("write");
            }
            if rows.len() > MAX_REPORTED_ROWS {
                write!(s, "\n      ... {} more", rows.len() - MAX_REPORTED_ROWS).expect("write");
            }
            s
        }
    }
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

/// Per-shape counts for the summary.
#[derive(Default)]
struct ShapeStats {
    instances: usize,
    created: usize,
    unsupported: usize,
    create_failed: usize,
    checks: usize,
    mismatches: usize,
    /// Checks where (b) was refused with 0A000 and (a) was compared with (c).
    adhoc_unsupported: usize,
    /// The first 0A000 message.
    unsupported_message: Option<String>,
}

/// A statement of a case, for reproductions.
struct LogEntry {
    sql: String,
    /// The objects it concerns (a table written, or the object created).
    about: String,
}

/// Everything of one case.
struct Case {
    index: usize,
    seed: u64,
    tables: Vec<Table>,
    log: Vec<LogEntry>,
    fr: Endpoint,
    pg: Endpoint,
}

/// The run's state across cases.
struct Run {
    config: Config,
    stats: BTreeMap<&'static str, ShapeStats>,
    failures: Vec<String>,
    checks: usize,
    writes: usize,
}

impl Run {
    fn fail(&mut self, report: String) {
        eprintln!("\n{report}");
        self.failures.push(report);
    }

    fn stats(&mut self, shape: &'static str) -> &mut ShapeStats {
        self.stats.entry(shape).or_default()
    }
}

/// What happened to an instance's CREATE statements.
enum Created {
    Yes,
    Unsupported(String),
    Failed(String),
}

impl Case {
    /// Run a statement on both servers that must succeed on both.
    async fn both(&mut self, sql: &str, about: &str) -> Result<(), String> {
        let pg = self.pg.run(sql).await;
        let fr = self.fr.run(sql).await;
        self.log.push(LogEntry {
            sql: sql.to_string(),
            about: about.to_string(),
        });
        match (&pg, &fr) {
            (Ok(p), Ok(f)) if p.affected == f.affected => Ok(()),
            (Err(p), Err(f)) if p.sqlstate == f.sqlstate => Ok(()),
            _ => Err(format!(
                "the servers disagree on {sql}\n  PostgreSQL: {}\n  Freshet:    {}",
                pg.as_ref()
                    .map(|r| format!("ok, {} row(s)", r.affected))
                    .unwrap_or_else(render_error),
                fr.as_ref()
                    .map(|r| format!("ok, {} row(s)", r.affected))
                    .unwrap_or_else(render_error),
            )),
        }
    }

    /// The statements so far that concern `objects`, as a script.
    fn script(&self, objects: &BTreeSet<String>) -> String {
        let mut s = String::new();
        for e in &self.log {
            if objects.contains(&e.about) {
                writeln!(s, "{};", e.sql).expect("write");
            }
        }
        s
    }

    /// The current contents of `tables` on PostgreSQL as INSERTs.
    async fn snapshot(&mut self, tables: &BTreeSet<String>) -> String {
        let mut s = String::new();
        let defs: Vec<Table> = self
            .tables
            .iter()
            .filter(|t| tables.contains(&t.name))
            .cloned()
            .collect();
        for t in defs {
            writeln!(s, "{};", t.ddl()).expect("write");
            match self.pg.run(&format!("SELECT * FROM {}", t.name)).await {
                Ok(r) if r.rows.is_empty() => {}
                Ok(r) => {
                    let rows: Vec<String> = r
                        .rows
                        .iter()
                        .map(|row| {
                            let vals: Vec<String> = row
                                .iter()
                                .zip(&t.cols)
                                .map(|(v, c)| match (v, c.ty) {
                                    (None, _) => "NULL".into(),
                                    (Some(v), Ty::Text) => format!("'{}'", v.replace('\'', "''")),
                                    (Some(v), Ty::Bool) => {
                                        (if v == "t" { "true" } else { "false" }).into()
                                    }
                                    (Some(v), _) => v.clone(),
                                })
                                .collect();
                            format!("({})", vals.join(", "))
                        })
                        .collect();
                    writeln!(s, "INSERT INTO {} VALUES {};", t.name, rows.join(", "))
                        .expect("write");
                }
                Err(e) => writeln!(s, "-- could not read {}: {}", t.name, render_error(&e))
                    .expect("write"),
            }
        }
        s
    }

    /// Create the instance's views and materialized views.
    async fn create(&mut self, inst: &Instance, standin: Standin) -> Created {
        for (name, query) in &inst.views {
            let sql = format!("CREATE VIEW {name} AS {query}");
            if let Err(e) = self.pg.run(&sql).await {
                return Created::Failed(format!(
                    "PostgreSQL rejects the generated view (harness bug): {}\n  {sql}",
                    render_error(&e)
                ));
            }
            let fr = self.fr.run(&sql).await;
            self.log.push(LogEntry {
                sql: sql.clone(),
                about: name.clone(),
            });
            match fr {
                Ok(_) => {}
                Err(e) if e.sqlstate == "0A000" => return Created::Unsupported(e.message),
                Err(e) => {
                    return Created::Failed(format!(
                        "{sql}\n  failed on Freshet: {}",
                        render_error(&e)
                    ));
                }
            }
        }
        // The ad hoc query must work on PostgreSQL, or the generator is wrong.
        if let Err(e) = self.pg.run(&inst.adhoc).await {
            return Created::Failed(format!(
                "PostgreSQL rejects the generated query (harness bug): {}\n  {}",
                render_error(&e),
                inst.adhoc
            ));
        }
        let mut statements: Vec<(String, String)> = inst
            .base_mvs
            .iter()
            .map(|(name, query)| {
                let sql = format!("CREATE {} {name} AS {query}", standin.create_keyword());
                (name.clone(), sql)
            })
            .collect();
        let name = &inst.name;
        let query = &inst.create_query;
        statements.push((
            name.clone(),
            format!("CREATE {} {name} AS {query}", standin.create_keyword()),
        ));
        if standin == Standin::IndexedView {
            statements.push((name.clone(), format!("CREATE DEFAULT INDEX ON {name}")));
        }
        for (name, sql) in statements {
            let fr = self.fr.run(&sql).await;
            self.log.push(LogEntry {
                sql: sql.clone(),
                about: name.clone(),
            });
            match fr {
                Ok(_) => {}
                Err(e) if e.sqlstate == "0A000" => return Created::Unsupported(e.message),
                Err(e) => {
                    return Created::Failed(format!(
                        "{sql}\n  failed on Freshet: {}",
                        render_error(&e)
                    ));
                }
            }
        }
        if standin == Standin::IndexedView {
            // Reads of the view must take the index's fast path.
            let explain = format!("EXPLAIN SELECT * FROM {}", inst.name);
            let first_line = match self.fr.run(&explain).await {
                Ok(rows) => rows.rows.first().and_then(|r| r.first().cloned()).flatten(),
                Err(e) => return Created::Failed(format!("{explain}: {}", render_error(&e))),
            };
            if !first_line
                .as_deref()
                .is_some_and(|l| l.starts_with("Fast path"))
            {
                return Created::Failed(format!("{explain} is not a fast path: {first_line:?}"));
            }
        }
        Created::Yes
    }

    /// Check (a) = (b) = (c) for one instance; `Err` is the report.
    async fn check(
        &mut self,
        inst: &Instance,
        stats: &mut ShapeStats,
        when: &str,
    ) -> Result<(), String> {
        let types: Vec<Ty> = inst.cols.iter().map(|c| c.ty).collect();
        let read_mv = format!("SELECT * FROM {}", inst.name);
        let (a, b) = match self.fr.run("BEGIN READ ONLY").await {
            Err(e) => {
                return Err(format!(
                    "BEGIN READ ONLY failed on Freshet: {}",
                    render_error(&e)
                ));
            }
            Ok(_) => {
                let a = self.fr.run(&read_mv).await;
                if a.is_err() {
                    let _ = self.fr.run("ROLLBACK").await;
                    (a, self.fr.run(&inst.adhoc).await)
                } else {
                    let b = self.fr.run(&inst.adhoc).await;
                    let end = if b.is_ok() { "COMMIT" } else { "ROLLBACK" };
                    if let Err(e) = self.fr.run(end).await {
                        return Err(format!("{end} failed on Freshet: {}", render_error(&e)));
                    }
                    (a, b)
                }
            }
        };
        let c = self.pg.run(&inst.adhoc).await;
        let problem = match (&a, &b, &c) {
            (Err(_), _, _) => Some("(a) reading the view failed".to_string()),
            (Ok(_), _, Err(_)) => Some("(c) PostgreSQL failed".to_string()),
            (Ok(ra), Err(e), Ok(rc)) if e.sqlstate == "0A000" => {
                stats.adhoc_unsupported += 1;
                compare(ra, rc, &types, Compare::ByValue)
                    .map(|d| format!("(a) != (c) [(b) unsupported ad hoc]: {d}"))
            }
            (Ok(_), Err(_), Ok(_)) => Some("(b) the ad hoc query failed on Freshet".to_string()),
            (Ok(ra), Ok(rb), Ok(rc)) => compare(ra, rb, &types, Compare::SameSystem)
                .map(|d| format!("(a) view != (b) ad hoc on Freshet: {d}"))
                .or_else(|| {
                    compare(rb, rc, &types, Compare::ByValue)
                        .map(|d| format!("(b) Freshet != (c) PostgreSQL: {d}"))
                }),
        };
        let Some(problem) = problem else {
            return Ok(());
        };
        let snapshot = self.snapshot(&inst.tables).await;
        Err(format!(
            "=== MISMATCH: shape {shape}, {name}, case {case} (case seed {cseed}), {when}\n\
             {problem}\n\
             -- reproduce on a fresh database (statements so far concerning {name}):\n{script}\
             -- the defining query, run ad hoc on both servers:\n{adhoc};\n\
             (a) {read_mv}:\n    {ra}\n\
             (b) ad hoc on Freshet:\n    {rb}\n\
             (c) ad hoc on PostgreSQL:\n    {rc}\n\
             -- the current contents of its tables (to reproduce (b) vs (c) without the history):\n{snapshot}",
            shape = inst.shape,
            name = inst.name,
            case = self.index,
            cseed = self.seed,
            script = self.script(&inst.objects()),
            adhoc = inst.adhoc,
            ra = render_outcome(&a, &types),
            rb = render_outcome(&b, &types),
            rc = render_outcome(&c, &types),
        ))
    }
}

/// Run one case; `Err` if Freshet is gone and the run must stop.
async fn run_case(
    run: &mut Run,
    postgres: &PgServer,
    freshet: &mut Server,
    index: usize,
) -> Result<(), String> {
    let case_seed = mix(run.config.seed.wrapping_add(index as u64));
    let mut rng = StdRng::seed_from_u64(case_seed);
    let db = format!("mvprop_{index}");
    for (what, conn, sql) in [
        (
            "PostgreSQL",
            postgres.conn_str(),
            format!("CREATE DATABASE {db}"),
        ),
        (
            "Freshet",
            freshet.conn_str("freshet"),
            format!("CREATE DATABASE {db}"),
        ),
    ] {
        let mut admin = Endpoint::new(conn, STATEMENT_TIMEOUT);
        if let Err(e) = admin.run(&sql).await {
            return Err(format!("{sql} failed on {what}: {}", render_error(&e)));
        }
    }
    let mut case = Case {
        index,
        seed: case_seed,
        tables: gen_tables(&mut rng),
        log: vec![],
        fr: Endpoint::new(freshet.conn_str(&db), STATEMENT_TIMEOUT),
        pg: Endpoint::new(postgres.conn_str_db(&db), STATEMENT_TIMEOUT),
    };
    let header = format!(
        "seed {} (FRESHET_MV_SEED), case {index} (case seed {case_seed}), standin {:?}",
        run.config.seed, run.config.standin
    );
    // Tables and initial rows.
    let mut writer = Writer::new();
    let tables = case.tables.clone();
    for t in &tables {
        if let Err(e) = case.both(&t.ddl(), &t.name).await {
            run.fail(format!("=== SETUP FAILED: {header}\n{e}"));
            return Ok(());
        }
        let mut left = rng.random_range(0..=12usize);
        while left > 0 {
            let n = rng.random_range(1..=left.min(5));
            left -= n;
            let w = writer.insert(&mut rng, t, n);
            if let Err(e) = case.both(&w.sql, &w.table).await {
                run.fail(format!("=== SETUP FAILED: {header}\n{e}"));
                return Ok(());
            }
        }
    }
    // Materialized views.
    let started = Instant::now();
    let mut active: Vec<Instance> = vec![];
    let mut next_index = 1;
    for shape in SHAPES {
        if !run.config.wants(shape.name) {
            continue;
        }
        let inst = instantiate(
            shape,
            next_index,
            shape_seed(case_seed, shape.name),
            &tables,
        );
        next_index += 1;
        let name = inst.name.clone();
        run.stats(shape.name).instances += 1;
        match case.create(&inst, run.config.standin).await {
            Created::Yes => {
                run.stats(shape.name).created += 1;
                active.push(inst);
            }
            Created::Unsupported(message) => {
                let required =
                    run.config.standin != Standin::View && REQUIRED_SHAPES.contains(&shape.name);
                let stats = run.stats(shape.name);
                stats.unsupported += 1;
                stats.unsupported_message.get_or_insert(message.clone());
                if required {
                    run.stats(shape.name).create_failed += 1;
                    run.fail(format!(
                        "=== REQUIRED SHAPE UNSUPPORTED: {} ({header}): {message}\n{}",
                        shape.name,
                        case.script(&inst.objects())
                    ));
                }
            }
            Created::Failed(report) => {
                run.stats(shape.name).create_failed += 1;
                run.fail(format!(
                    "=== CREATE FAILED: shape {}, {} ({header})\n{report}\n-- statements so far:\n{}",
                    shape.name,
                    inst.name,
                    case.script(&inst.objects())
                ));
            }
        }
        if !freshet.is_running() {
            return Err(format!("freshet exited while creating {name} ({header})"));
        }
    }
    eprintln!(
        "case {index}: {} table(s), {} of {} view(s) created in {:.1?}",
        tables.len(),
        active.len(),
        next_index - 1,
        started.elapsed()
    );
    // Check after creation, then after every write.
    let started = Instant::now();
    for step in 0..=run.config.steps {
        let when = if step == 0 {
            "after creation".to_string()
        } else {
            let w = writer.write(&mut rng, &tables);
            run.writes += 1;
            if let Err(e) = case.both(&w.sql, &w.table).await {
                run.fail(format!(
                    "=== WRITE DIVERGED: {header}, step {step}\n{e}\n-- statements so far:\n{}",
                    case.script(&case.log.iter().map(|e| e.about.clone()).collect())
                ));
                return Ok(());
            }
            format!("step {step}: {}", w.sql)
        };
        let mut still_active = vec![];
        for inst in active {
            let shape = inst.shape;
            let mut stats = std::mem::take(run.stats(shape));
            let result = case.check(&inst, &mut stats, &when).await;
            stats.checks += 1;
            run.checks += 1;
            match result {
                Ok(()) => still_active.push(inst),
                Err(report) => {
                    stats.mismatches += 1;
                    run.fail(format!("{report}\n-- {header}"));
                    // Later checks of this view would repeat the report.
                }
            }
            *run.stats(shape) = stats;
        }
        active = still_active;
        if !freshet.is_running() {
            return Err(format!(
                "freshet exited at step {step} of case {index} ({header})"
            ));
        }
    }
    eprintln!(
        "case {index}: {} step(s) checked in {:.1?}",
        run.config.steps,
        started.elapsed()
    );
    Ok(())
}

/// The per-shape summary table.
fn summary(run: &Run) -> String {
    let mut s = format!(
        "\n{:<28} {:>5} {:>7} {:>11} {:>7} {:>6} {:>8} {:>7}  first 0A000 message\n",
        "shape", "inst", "created", "unsupported", "failed", "checks", "mismatch", "adhoc0A"
    );
    for shape in SHAPES {
        let Some(st) = run.stats.get(shape.name) else {
            continue;
        };
        let mut msg = st.unsupported_message.clone().unwrap_or_default();
        if msg.chars().count() > MAX_SUMMARY_MESSAGE {
            msg = msg.chars().take(MAX_SUMMARY_MESSAGE).collect::<String>() + "...";
        }
        writeln!(
            s,
            "{:<28} {:>5} {:>7} {:>11} {:>7} {:>6} {:>8} {:>7}  {msg}",
            shape.name,
            st.instances,
            st.created,
            st.unsupported,
            st.create_failed,
            st.checks,
            st.mismatches,
            st.adhoc_unsupported
        )
        .expect("write");
    }
    let total = |f: fn(&ShapeStats) -> usize| run.stats.values().map(f).sum::<usize>();
    writeln!(
        s,
        "{:<28} {:>5} {:>7} {:>11} {:>7} {:>6} {:>8} {:>7}",
        "TOTAL",
        total(|s| s.instances),
        total(|s| s.created),
        total(|s| s.unsupported),
        total(|s| s.create_failed),
        total(|s| s.checks),
        total(|s| s.mismatches),
        total(|s| s.adhoc_unsupported)
    )
    .expect("write");
    s
}

#[tokio::test(flavor = "multi_thread")]
async fn materialized_views_match_adhoc_and_postgres() {
    run_property(Config::from_env()).await;
}

/// The same shapes as indexed plain views, read through the index's fast
/// path: an index on a view must equal the view's query.
#[tokio::test(flavor = "multi_thread")]
async fn indexed_views_match_adhoc_and_postgres() {
    let mut config = Config::from_env();
    if config.standin != Standin::Materialized {
        // The run above already covers the stand-in asked for.
        return;
    }
    config.standin = Standin::IndexedView;
    config.cases = config.cases.min(1);
    run_property(config).await;
}

async fn run_property(config: Config) {
    for name in REQUIRED_SHAPES {
        assert!(
            SHAPES.iter().any(|s| s.name == *name),
            "REQUIRED_SHAPES names unknown shape `{name}`"
        );
    }
    eprintln!(
        "mv_property: seed {} cases {} steps {} standin {:?} shapes {}",
        config.seed,
        config.cases,
        config.steps,
        config.standin,
        config
            .shapes
            .as_ref()
            .map(|s| s.iter().cloned().collect::<Vec<_>>().join(","))
            .unwrap_or_else(|| "all".into())
    );
    let started = Instant::now();
    let postgres = PgServer::start();
    let mut freshet = Server::start();
    let mut run = Run {
        config: config.clone(),
        stats: BTreeMap::new(),
        failures: vec![],
        checks: 0,
        writes: 0,
    };
    let mut fatal = None;
    for index in 0..config.cases {
        if let Err(e) = run_case(&mut run, &postgres, &mut freshet, index).await {
            fatal = Some(e);
            break;
        }
    }
    eprintln!("{}", summary(&run));
    eprintln!(
        "mv_property: {} case(s), {} write(s), {} check(s), {} failure(s) in {:.1?} \
         (seed {}, standin {:?})",
        config.cases,
        run.writes,
        run.checks,
        run.failures.len(),
        started.elapsed(),
        config.seed,
        config.standin
    );
    if let Some(e) = fatal {
        panic!("{e}");
    }
    assert!(
        run.failures.is_empty(),
        "{} failure(s); the first:\n{}",
        run.failures.len(),
        run.failures[0]
    );
}

#[test]
fn comparison_tolerates_float_noise_and_numeric_scale_only_where_allowed() {
    let rows = |cells: Vec<Vec<Option<&str>>>| Rows {
        columns: cells.first().map_or(0, Vec::len),
        rows: cells
            .into_iter()
            .map(|r| r.into_iter().map(|c| c.map(str::to_string)).collect())
            .collect(),
        affected: 0,
    };
    let fr = rows(vec![
        vec![Some("2"), Some("0.30000000000000004"), Some("1.50")],
        vec![Some("1"), None, Some("2.25")],
    ]);
    let pg = rows(vec![
        vec![Some("1"), None, Some("2.2500")],
        vec![Some("2"), Some("0.3"), Some("1.5")],
    ]);
    let types = [Ty::Int4, Ty::Float8, Ty::Numeric];
    assert_eq!(compare(&fr, &pg, &types, Compare::ByValue), None);
    // Numeric scale must agree within one system.
    assert!(compare(&fr, &pg, &types, Compare::SameSystem).is_some());
    // Text never compares by value, NULL is not a string.
    let t = [Ty::Text];
    assert!(
        compare(
            &rows(vec![vec![Some("1.0")]]),
            &rows(vec![vec![Some("1")]]),
            &t,
            Compare::ByValue
        )
        .is_some()
    );
    assert!(
        compare(
            &rows(vec![vec![None]]),
            &rows(vec![vec![Some("")]]),
            &t,
            Compare::ByValue
        )
        .is_some()
    );
    // Beyond the tolerance.
    let f = [Ty::Float8];
    assert!(
        compare(
            &rows(vec![vec![Some("1.000001")]]),
            &rows(vec![vec![Some("1")]]),
            &f,
            Compare::ByValue
        )
        .is_some()
    );
    // Multiplicities count.
    assert!(
        compare(
            &rows(vec![vec![Some("a")], vec![Some("a")]]),
            &rows(vec![vec![Some("a")], vec![Some("b")]]),
            &t,
            Compare::SameSystem
        )
        .is_some()
    );
}

#[test]
fn every_shape_instantiates_over_random_schemas() {
    for seed in 0..40u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let tables = gen_tables(&mut rng);
        for (i, shape) in SHAPES.iter().enumerate() {
            let inst = instantiate(shape, i, shape_seed(seed, shape.name), &tables);
            assert!(!inst.cols.is_empty(), "{}: no columns", shape.name);
            assert!(!inst.tables.is_empty(), "{}: reads no table", shape.name);
            assert!(!inst.adhoc.contains(REF_OPEN), "{}", inst.adhoc);
        }
        let mut writer = Writer::new();
        for _ in 0..20 {
            let w = writer.write(&mut rng, &tables);
            assert!(tables.iter().any(|t| t.name == w.table), "{}", w.sql);
        }
    }
}

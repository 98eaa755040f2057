//! Golden tests of lowering: the dataflow a `CREATE MATERIALIZED VIEW`
//! plans, as `EXPLAIN` prints it before compute annotates it, for one view
//! of each shape the renderer has an operator for.
//!
//! Each case's expected plan is a file in `planner/src/golden/`; a change
//! to lowering shows up as a diff there. After a deliberate change, rerun
//! with `FRESHET_BLESS=1` to rewrite the files, and review the diff.

use std::path::PathBuf;

use freshet_catalog::{Catalog, Op};
use freshet_storage::open_local;

use crate::plan::Plan;
use crate::query::resolve::SessionInfo;
use crate::statements::context::StatementContext;
use crate::statements::explain::explain_dataflow_text;

/// A catalog with `t (k int, v int)` and `u (k int, w text)`.
struct Fixture {
    _dir: tempfile::TempDir,
    catalog: Catalog,
    state: datafusion::execution::SessionState,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_, fence) = open_local(dir.path()).expect("data dir");
        let mut fixture = Fixture {
            catalog: Catalog::open(fence).expect("catalog"),
            state: crate::query::engine::new_session_state(1),
            _dir: dir,
        };
        fixture.create("CREATE TABLE t (k int, v int)");
        fixture.create("CREATE TABLE u (k int, w text)");
        fixture
    }

    fn plan(&self, sql: &str) -> Plan {
        let session = SessionInfo {
            database: freshet_catalog::DEFAULT_DATABASE.into(),
            search_path: vec!["public".into()],
            user: "freshet".into(),
            temp_schema: None,
        };
        let catalog = self.catalog.state();
        let cx = StatementContext {
            state: &self.state,
            catalog: &catalog,
            session: &session,
            params: None,
        };
        let stmt = crate::parser::parse(sql)
            .expect("parses")
            .pop()
            .expect("one statement");
        crate::statements::plan_statement(&cx, &stmt).expect("plans")
    }

    fn create(&mut self, sql: &str) {
        let Plan::CreateItem { def, .. } = self.plan(sql) else {
            panic!("{sql} is not a CREATE TABLE");
        };
        self.catalog
            .transact(vec![Op::CreateItem(def)])
            .expect("commits");
    }

    /// The dataflow `CREATE MATERIALIZED VIEW mv AS <query>` lowers to,
    /// with ids named.
    fn lowered(&self, query: &str) -> String {
        let sql = format!("CREATE MATERIALIZED VIEW mv AS {query}");
        let Plan::CreateMaterializedView(create) = self.plan(&sql) else {
            panic!("{sql} did not plan a materialized view");
        };
        let plan = &create.dataflow.plan;
        // One line per operator, as compute's EXPLAIN text has them.
        let text: String = plan.to_string().lines().map(|l| format!("{l}\n")).collect();
        explain_dataflow_text(&self.catalog.state(), plan, &text)
    }
}

/// Compare `actual` with the golden file `name`, or rewrite it when
/// blessing.
fn golden(name: &str, query: &str, actual: &str) {
    // The crate's directory as `cargo test` names it now: a test binary
    // reused from a build cache filled by a checkout elsewhere carries
    // that checkout's path in `env!`.
    let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let path = crate_dir.join("src/golden").join(format!("{name}.plan"));
    let text = format!("-- {query}\n{actual}");
    if std::env::var_os("FRESHET_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("golden dir");
        std::fs::write(&path, &text).expect("writes golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with FRESHET_BLESS=1)", path.display()));
    assert_eq!(
        text,
        expected,
        "lowering of {name} changed; if intended, rerun with FRESHET_BLESS=1 and review {}",
        path.display()
    );
}

const CASES: &[(&str, &str)] = &[
    ("map_filter", "SELECT k + 1 AS k1, v FROM t WHERE v > 0"),
    (
        "accumulable_reduce",
        "SELECT k, sum(v) AS total, count(*) AS n FROM t GROUP BY k",
    ),
    (
        "hierarchical_reduce",
        "SELECT k, min(v) AS lo, max(v) AS hi FROM t GROUP BY k",
    ),
    ("global_aggregate", "SELECT count(*) AS n FROM t"),
    (
        "inner_join",
        "SELECT t.k, t.v, u.w FROM t JOIN u ON t.k = u.k",
    ),
    (
        "left_join_residual",
        "SELECT t.k, u.w FROM t LEFT JOIN u ON t.k = u.k AND u.w <> 'x'",
    ),
    ("distinct", "SELECT DISTINCT k FROM t"),
    ("top_k", "SELECT k, v FROM t ORDER BY v DESC LIMIT 3"),
    ("union_all", "SELECT k FROM t UNION ALL SELECT k FROM u"),
    (
        "not_in_subquery",
        "SELECT k FROM t WHERE k NOT IN (SELECT k FROM u)",
    ),
    (
        "window",
        "SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v) AS r FROM t",
    ),
];

#[test]
fn lowering_matches_the_golden_plans() {
    let fixture = Fixture::new();
    for (name, query) in CASES {
        golden(name, query, &fixture.lowered(query));
    }
}

//! Parsing and planning arbitrary SQL against a small catalog.
//!
//! Planning runs on a thread with the same stack size the server gives the
//! threads that plan statements, so a statement that could overflow the
//! server's stack overflows here too. libFuzzer reports panics, aborts,
//! stack overflows, timeouts (planning cost that is not about linear in
//! the input) and memory beyond its limit.
#![no_main]

use std::sync::{Arc, OnceLock};

use freshet_catalog::{Catalog, CatalogState, Op};
use freshet_planner::parser::parse;
use freshet_planner::StatementContext;
use freshet_planner::{Plan, SessionInfo, plan_statement};
use libfuzzer_sys::fuzz_target;

/// The server's `STATEMENT_STACK_BYTES`.
const STACK_BYTES: usize = 64 << 20;

/// Tables and views statements can name.
const SCHEMA: &[&str] = &[
    "CREATE TABLE t (a int, b bigint, c text, d double precision, e numeric, f boolean, g timestamptz, h date)",
    "CREATE TABLE u (k int PRIMARY KEY, v text)",
    "CREATE VIEW v AS SELECT a, count(*) AS n FROM t GROUP BY a",
];

struct Fixture {
    catalog: Arc<CatalogState>,
    state: datafusion::execution::SessionState,
    session: SessionInfo,
    _dir: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_blob, fence) = freshet_storage::open_local(dir.path()).expect("storage");
        let mut catalog = Catalog::open(fence).expect("catalog");
        let state = freshet_planner::query::engine::new_session_state(2);
        let session = SessionInfo {
            database: "freshet".into(),
            search_path: vec!["public".into()],
            user: "freshet".into(),
            temp_schema: None,
        };
        for sql in SCHEMA {
            let current = catalog.state();
            let cx = StatementContext {
                state: &state,
                catalog: &current,
                session: &session,
                params: None,
            };
            let stmt = parse(sql).expect("schema parses").remove(0);
            match plan_statement(&cx, &stmt).expect("schema plans") {
                Plan::CreateItem { def, .. } => {
                    catalog
                        .transact(vec![Op::CreateItem(def)])
                        .expect("schema commits");
                }
                other => panic!("unexpected plan for {sql}: {other:?}"),
            }
        }
        Fixture {
            catalog: catalog.state(),
            state,
            session,
            _dir: dir,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(sql) = std::str::from_utf8(data) else {
        return;
    };
    let fixture = fixture();
    let sql = sql.to_owned();
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(STACK_BYTES)
            .spawn_scoped(scope, || {
                let Ok(stmts) = parse(&sql) else {
                    return;
                };
                for stmt in &stmts {
                    let cx = StatementContext {
                        state: &fixture.state,
                        catalog: &fixture.catalog,
                        session: &fixture.session,
                        params: None,
                    };
                    let _ = plan_statement(&cx, stmt);
                }
            })
            .expect("spawn planning thread")
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    });
});

//! Compute's operators without a server: dataflows installed through the
//! [`ComputeController`] over local storage, their output shards read back
//! and compared, at every time, with the same relation computed directly
//! from the inputs' contents (an oracle written in plain Rust).
//!
//! Each test changes its inputs over several commits (inserts and
//! retractions), so the incremental paths (accumulable and hierarchical
//! reductions, joins' arrangements, top-k's buckets, the self-correcting
//! sink) are what is exercised, not just the initial snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::{Column, DFSchema};
use datafusion::functions_aggregate::expr_fn::{count, max, min, sum};
use datafusion::logical_expr::{Expr, SortExpr};
use freshet_compute::ComputeController;
use freshet_compute::output::{checked_snapshot, shard_schema};
use freshet_compute_types::{DataflowDesc, Export, JoinKind, RelPlan};
use freshet_repr::{GlobalId, Timestamp};
use freshet_storage::{
    CollectionKind, Storage, StorageConfig, TableWrite, open_local, write_batch,
};

/// A row of a test table `(k, v)`; `None` is NULL.
type KV = (Option<i64>, Option<i64>);

const LEFT: GlobalId = GlobalId::User(1);
const RIGHT: GlobalId = GlobalId::User(2);
const VIEW: GlobalId = GlobalId::User(10);

fn kv_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("v", DataType::Int64, true),
    ]))
}

fn int_schema(names: &[&str]) -> SchemaRef {
    Arc::new(Schema::new(
        names
            .iter()
            .map(|n| Field::new(*n, DataType::Int64, true))
            .collect::<Vec<_>>(),
    ))
}

/// `schema` as expressions name it, qualified by `table`.
fn df_schema(table: &str, schema: &SchemaRef) -> Arc<DFSchema> {
    Arc::new(DFSchema::try_from_qualified_schema(table, schema).expect("qualified schema"))
}

fn column(table: &str, name: &str) -> Expr {
    Expr::Column(Column::new(Some(table), name))
}

/// Local storage with the two input tables and compute on two workers.
struct Harness {
    _dir: tempfile::TempDir,
    storage: Arc<Storage>,
    compute: ComputeController,
    /// Each table's current contents, as a multiset.
    tables: BTreeMap<GlobalId, BTreeMap<KV, i64>>,
}

impl Harness {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let (blob, fence) = open_local(dir.path()).expect("open data dir");
        let mut config = StorageConfig::new(dir.path());
        config.tick = Duration::from_millis(20);
        let storage = Arc::new(Storage::open(blob, fence, config).expect("storage"));
        for id in [LEFT, RIGHT] {
            storage
                .create_collection(id, kv_schema(), CollectionKind::Table)
                .expect("table");
        }
        storage.finish_boot().expect("boot");
        let compute = ComputeController::start(2, Arc::clone(&storage)).expect("compute");
        Harness {
            _dir: dir,
            storage,
            compute,
            tables: BTreeMap::new(),
        }
    }

    /// Commit `rows` to `table` with multiplicity `diff` (1 inserts, -1
    /// retracts), returning the commit time.
    fn commit(&mut self, table: GlobalId, rows: &[KV], diff: i64) -> Timestamp {
        let batch = RecordBatch::try_new(
            kv_schema(),
            vec![
                Arc::new(Int64Array::from(
                    rows.iter().map(|r| r.0).collect::<Vec<_>>(),
                )),
                Arc::new(Int64Array::from(
                    rows.iter().map(|r| r.1).collect::<Vec<_>>(),
                )),
            ],
        )
        .expect("batch");
        let contents = self.tables.entry(table).or_default();
        for row in rows {
            let n = contents.entry(*row).or_default();
            *n += diff;
            if *n == 0 {
                contents.remove(row);
            }
        }
        self.storage
            .commit_blocking(vec![TableWrite {
                id: table,
                updates: write_batch(&batch, diff).expect("write batch"),
                staged: Vec::new(),
            }])
            .expect("commit")
    }

    /// The rows of `table` now, each repeated by its multiplicity.
    fn rows(&self, table: GlobalId) -> Vec<KV> {
        let mut out = Vec::new();
        for (row, n) in self.tables.get(&table).into_iter().flatten() {
            out.extend(std::iter::repeat_n(
                *row,
                usize::try_from(*n).expect("positive"),
            ));
        }
        out
    }

    /// Create `VIEW`'s shard and install `plan` maintaining it, reading
    /// its inputs as of now.
    fn install(&self, plan: RelPlan) -> Timestamp {
        self.storage
            .create_collection(
                VIEW,
                shard_schema(&plan.schema()),
                CollectionKind::Materialized,
            )
            .expect("view shard");
        self.reinstall(plan)
    }

    /// Install `plan` for the existing `VIEW` shard.
    fn reinstall(&self, plan: RelPlan) -> Timestamp {
        let as_of = self.storage.read_ts();
        self.compute
            .install(
                DataflowDesc {
                    id: VIEW,
                    export: Export::Shard,
                    plan,
                    as_of,
                    start: as_of,
                    refresh: None,
                },
                Vec::new(),
                None,
            )
            .expect("install");
        as_of
    }

    /// `VIEW`'s rows at `time` (once its shard is complete there), each a
    /// `|`-joined line, sorted.
    fn view(&self, time: Timestamp) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, upper) = self.storage.frontiers(VIEW).expect("frontiers");
            if upper.as_option().is_none_or(|u| *u > time) {
                break;
            }
            assert!(Instant::now() < deadline, "the view never reached {time}");
            std::thread::sleep(Duration::from_millis(10));
        }
        let batches = checked_snapshot(self.storage.snapshot(VIEW, time).expect("snapshot"))
            .expect("the view holds no errors");
        let mut out = Vec::new();
        for b in &batches {
            for i in 0..b.num_rows() {
                let line: Vec<String> = b
                    .columns()
                    .iter()
                    .map(|c| {
                        let c = c.as_any().downcast_ref::<Int64Array>().expect("int64");
                        if c.is_null(i) {
                            "NULL".to_string()
                        } else {
                            c.value(i).to_string()
                        }
                    })
                    .collect();
                out.push(line.join("|"));
            }
        }
        out.sort();
        out
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.compute.shutdown();
        self.storage.shutdown();
    }
}

/// Lines of `rows` as [`Harness::view`] prints them, sorted.
fn lines(rows: impl IntoIterator<Item = Vec<Option<i64>>>) -> Vec<String> {
    let mut out: Vec<String> = rows
        .into_iter()
        .map(|r| {
            r.iter()
                .map(|v| v.map_or("NULL".to_string(), |v| v.to_string()))
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    out.sort();
    out
}

fn get(id: GlobalId) -> Box<RelPlan> {
    Box::new(RelPlan::Get {
        id,
        schema: kv_schema(),
    })
}

/// Per-key groups of `rows`' non-NULL values (NULL keys form one group).
fn groups(rows: &[KV]) -> BTreeMap<Option<i64>, Vec<Option<i64>>> {
    let mut out: BTreeMap<Option<i64>, Vec<Option<i64>>> = BTreeMap::new();
    for (k, v) in rows {
        out.entry(*k).or_default().push(*v);
    }
    out
}

/// The changes every test applies to `LEFT`: inserts, a retraction that
/// empties a group, one that changes a group's extreme, NULLs.
fn left_changes() -> Vec<(Vec<KV>, i64)> {
    vec![
        (
            vec![
                (Some(1), Some(10)),
                (Some(1), Some(5)),
                (Some(2), Some(7)),
                (Some(3), None),
                (None, Some(4)),
            ],
            1,
        ),
        (vec![(Some(1), Some(10)), (Some(2), Some(7))], -1),
        (
            vec![(Some(1), Some(20)), (Some(2), Some(-3)), (Some(1), Some(5))],
            1,
        ),
        (vec![(Some(3), None), (None, Some(4))], -1),
    ]
}

/// `SELECT k, <aggregates> FROM left GROUP BY k`, the output columns
/// named `names`.
fn reduce_by_k(aggregates: Vec<Expr>, names: &[&str]) -> RelPlan {
    RelPlan::Reduce {
        input: get(LEFT),
        input_schema: df_schema("t", &kv_schema()),
        group: vec![column("t", "k")],
        aggregates,
        schema: int_schema(names),
    }
}

/// Install `plan` over `LEFT` and check it against `oracle` after each of
/// [`left_changes`].
fn check_left_changes(plan: RelPlan, oracle: impl Fn(&[KV]) -> Vec<String>) {
    let mut h = Harness::new();
    h.install(plan);
    for (rows, diff) in left_changes() {
        let t = h.commit(LEFT, &rows, diff);
        assert_eq!(h.view(t), oracle(&h.rows(LEFT)), "at {t}");
    }
}

#[test]
fn accumulable_reduce_follows_inserts_and_retractions() {
    let plan = reduce_by_k(
        vec![sum(column("t", "v")), count(column("t", "v"))],
        &["k", "sum", "count"],
    );
    let oracle = |rows: &[KV]| {
        lines(groups(rows).into_iter().map(|(k, vs)| {
            let present: Vec<i64> = vs.iter().flatten().copied().collect();
            let sum = (!present.is_empty()).then(|| present.iter().sum());
            vec![k, sum, Some(present.len() as i64)]
        }))
    };
    check_left_changes(plan, oracle);
}

#[test]
fn hierarchical_min_max_follow_retracted_extremes() {
    let plan = reduce_by_k(
        vec![min(column("t", "v")), max(column("t", "v"))],
        &["k", "min", "max"],
    );
    let oracle = |rows: &[KV]| {
        lines(groups(rows).into_iter().map(|(k, vs)| {
            let present: Vec<i64> = vs.iter().flatten().copied().collect();
            vec![
                k,
                present.iter().min().copied(),
                present.iter().max().copied(),
            ]
        }))
    };
    check_left_changes(plan, oracle);
}

fn join(kind: JoinKind) -> RelPlan {
    let (l, r) = (df_schema("l", &kv_schema()), df_schema("r", &kv_schema()));
    let pair = Arc::new(l.as_ref().join(r.as_ref()).expect("pair schema"));
    RelPlan::Join {
        left: get(LEFT),
        right: get(RIGHT),
        left_schema: l,
        right_schema: r,
        left_keys: vec![column("l", "k")],
        right_keys: vec![column("r", "k")],
        kind,
        nulls_equal: false,
        filter: None,
        pair_schema: pair,
        schema: int_schema(&["lk", "lv", "rk", "rv"]),
    }
}

/// `LEFT JOIN`s (or inner joins) of the current tables, by the oracle.
fn joined(left: &[KV], right: &[KV], outer: bool) -> Vec<String> {
    let mut out = Vec::new();
    for l in left {
        let matches: Vec<&KV> = right
            .iter()
            .filter(|r| l.0.is_some() && r.0 == l.0)
            .collect();
        for r in &matches {
            out.push(vec![l.0, l.1, r.0, r.1]);
        }
        if matches.is_empty() && outer {
            out.push(vec![l.0, l.1, None, None]);
        }
    }
    lines(out)
}

fn check_join(kind: JoinKind, outer: bool) {
    let mut h = Harness::new();
    h.commit(
        RIGHT,
        &[(Some(1), Some(100)), (Some(2), Some(200)), (None, Some(0))],
        1,
    );
    h.install(join(kind));
    let mut steps: Vec<(GlobalId, Vec<KV>, i64)> = left_changes()
        .into_iter()
        .map(|(rows, diff)| (LEFT, rows, diff))
        .collect();
    // Changes on the other side: a second match, then a key losing all.
    steps.insert(2, (RIGHT, vec![(Some(1), Some(101))], 1));
    steps.push((RIGHT, vec![(Some(2), Some(200))], -1));
    for (table, rows, diff) in steps {
        let t = h.commit(table, &rows, diff);
        assert_eq!(
            h.view(t),
            joined(&h.rows(LEFT), &h.rows(RIGHT), outer),
            "at {t}"
        );
    }
}

#[test]
fn inner_join_follows_both_sides() {
    check_join(JoinKind::Inner, false);
}

#[test]
fn left_outer_join_pads_rows_that_lose_their_matches() {
    check_join(JoinKind::LeftOuter, true);
}

#[test]
fn top_k_keeps_the_largest_values_as_they_change() {
    let input = df_schema("t", &kv_schema());
    let plan = RelPlan::TopK {
        input: get(LEFT),
        input_schema: input,
        group: Vec::new(),
        number: false,
        schema: kv_schema(),
        order: vec![SortExpr::new(column("t", "v"), false, false)],
        offset: 0,
        limit: Some(2),
    };
    // Descending, NULLs last; ties cannot occur in these changes.
    let oracle = |rows: &[KV]| {
        let mut sorted = rows.to_vec();
        sorted.sort_by(|a, b| match (a.1, b.1) {
            (Some(x), Some(y)) => y.cmp(&x),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        lines(sorted.into_iter().take(2).map(|(k, v)| vec![k, v]))
    };
    check_left_changes(plan, oracle);
}

/// Reinstalling a dataflow over a shard an earlier one wrote (as boot
/// does) restates the whole output at the new start; the sink subtracts
/// what the shard holds, so nothing is written twice.
#[test]
fn the_self_correcting_sink_does_not_duplicate_on_reinstall() {
    let mut h = Harness::new();
    let plan = reduce_by_k(vec![count(column("t", "v"))], &["k", "count"]);
    let oracle = |rows: &[KV]| {
        lines(
            groups(rows)
                .into_iter()
                .map(|(k, vs)| vec![k, Some(vs.iter().flatten().count() as i64)]),
        )
    };
    h.install(plan.clone());
    let t = h.commit(LEFT, &[(Some(1), Some(1)), (Some(2), Some(2))], 1);
    assert_eq!(h.view(t), oracle(&h.rows(LEFT)));
    h.compute.drop_dataflow(VIEW).expect("drop");
    // Written while no dataflow maintains the view.
    h.commit(LEFT, &[(Some(1), Some(3))], 1);
    h.reinstall(plan);
    let t = h.commit(LEFT, &[(Some(2), Some(2))], -1);
    assert_eq!(h.view(t), oracle(&h.rows(LEFT)), "at {t}");
}

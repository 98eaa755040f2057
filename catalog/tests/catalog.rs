//! Catalog contracts: committed diffs, implications in order, boot equals
//! replay, renames, dependencies and fencing.

use std::sync::Arc;

use freshet_catalog::*;
use freshet_repr::{ColumnDesc, GlobalId, PgType, RelationDesc};
use freshet_storage::{Consensus, Fence, FileConsensus};

fn consensus(dir: &std::path::Path) -> Arc<dyn Consensus> {
    Arc::new(FileConsensus::open(dir).unwrap())
}

fn open(c: &Arc<dyn Consensus>) -> Catalog {
    Catalog::open(Fence::acquire(Arc::clone(c)).unwrap()).unwrap()
}

fn desc() -> RelationDesc {
    RelationDesc::new(vec![ColumnDesc {
        name: "a".into(),
        ty: PgType::Int4,
        nullable: true,
    }])
}

fn public(cat: &Catalog) -> GlobalId {
    let state = cat.state();
    let db = state.database_by_name(DEFAULT_DATABASE).unwrap();
    state.schema_by_name(db.id, "public").unwrap().id
}

fn table(schema_id: GlobalId, name: &str) -> Op {
    Op::CreateItem(ItemDef {
        schema_id,
        name: name.into(),
        kind: ItemKind::Table,
        create_sql: format!("CREATE TABLE {name} (a int4)"),
        desc: Some(desc()),
        references: vec![],
        details: ItemDetails::Table {
            defaults: vec![None],
            keys: Default::default(),
            serials: vec![],
        },
        options: Default::default(),
    })
}

fn view(schema_id: GlobalId, name: &str, refs: Vec<GlobalId>) -> Op {
    Op::CreateItem(ItemDef {
        schema_id,
        name: name.into(),
        kind: ItemKind::View,
        create_sql: format!("CREATE VIEW {name} AS SELECT 1"),
        desc: Some(desc()),
        references: refs,
        details: ItemDetails::View,
        options: Default::default(),
    })
}

#[test]
fn first_boot_has_default_database_and_public_schema() {
    let dir = tempfile::tempdir().unwrap();
    let c = consensus(dir.path());
    let cat = open(&c);
    let state = cat.state();
    let db = state.database_by_name("freshet").unwrap();
    assert!(state.schema_by_name(db.id, "public").is_some());
    drop(cat);
    // Not created twice.
    let cat = open(&c);
    assert_eq!(cat.state().databases().count(), 1);
}

#[test]
fn diffs_imply_ordered_actions_and_boot_equals_replay() {
    let dir = tempfile::tempdir().unwrap();
    let c = consensus(dir.path());
    let mut cat = open(&c);
    let public = public(&cat);
    let (diff, ids) = cat.transact(vec![table(public, "t")]).unwrap();
    let t = ids[0];
    assert_eq!(
        implications(&diff),
        vec![
            Implication::CreateTableCollection {
                id: t,
                desc: desc()
            },
            Implication::InitReadPolicy(t)
        ]
    );
    let (diff, ids) = cat.transact(vec![view(public, "v", vec![t])]).unwrap();
    assert!(implications(&diff).is_empty(), "views imply nothing");
    let v = ids[0];
    let (diff, _) = cat
        .transact(vec![Op::Drop(
            cat.state()
                .transitive_dependents(&[t])
                .into_iter()
                .collect(),
        )])
        .unwrap();
    // The view is removed before the table it depends on.
    let removed: Vec<GlobalId> = diff
        .changes
        .iter()
        .map(|c| match c {
            Change::Removed(o) => o.id(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(removed, vec![v, t]);
    assert_eq!(implications(&diff), vec![Implication::DropCollection(t)]);

    let (_, ids) = cat
        .transact(vec![table(public, "x"), table(public, "y")])
        .unwrap();
    cat.transact(vec![view(public, "w", ids.clone())]).unwrap();
    let before = cat.state().as_diff_from_empty();
    drop(cat);
    let cat = open(&c);
    let after = cat.state().as_diff_from_empty();
    assert_eq!(before, after, "boot replays the same catalog");
    let boot = implications(&after);
    assert_eq!(
        boot,
        vec![
            Implication::CreateTableCollection {
                id: ids[0],
                desc: desc()
            },
            Implication::CreateTableCollection {
                id: ids[1],
                desc: desc()
            },
            Implication::InitReadPolicy(ids[0]),
            Implication::InitReadPolicy(ids[1]),
        ]
    );
}

#[test]
fn ids_are_never_reused_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let c = consensus(dir.path());
    let mut cat = open(&c);
    let public = public(&cat);
    let (_, a) = cat.transact(vec![table(public, "a")]).unwrap();
    cat.transact(vec![Op::Drop(a.clone())]).unwrap();
    drop(cat);
    let mut cat = open(&c);
    let (_, b) = cat.transact(vec![table(public, "a")]).unwrap();
    assert!(b[0] > a[0]);
}

#[test]
fn restrict_refuses_and_cascade_expands() {
    let dir = tempfile::tempdir().unwrap();
    let c = consensus(dir.path());
    let mut cat = open(&c);
    let public = public(&cat);
    let (_, t) = cat.transact(vec![table(public, "t")]).unwrap();
    let (_, v) = cat.transact(vec![view(public, "v", t.clone())]).unwrap();
    let (_, w) = cat.transact(vec![view(public, "w", v.clone())]).unwrap();
    let err = cat.transact(vec![Op::Drop(t.clone())]).unwrap_err();
    match err {
        CatalogError::DependentObjects { detail, .. } => {
            assert_eq!(detail, "view v depends on table t")
        }
        other => panic!("{other}"),
    }
    let state = cat.state();
    assert_eq!(state.dependents(t[0]), v);
    assert_eq!(
        state
            .transitive_dependents(&t)
            .into_iter()
            .collect::<Vec<_>>(),
        vec![t[0], v[0], w[0]]
    );
    assert_eq!(
        state
            .transitive_references(w[0])
            .into_iter()
            .collect::<Vec<_>>(),
        vec![t[0], v[0]]
    );
    // Dropping the schema cascades to everything in it.
    let all = state.transitive_dependents(&[public]);
    assert_eq!(all.len(), 4);
}

#[test]
fn rename_keeps_ids_and_dependents() {
    let dir = tempfile::tempdir().unwrap();
    let c = consensus(dir.path());
    let mut cat = open(&c);
    let public = public(&cat);
    let (_, t) = cat.transact(vec![table(public, "t")]).unwrap();
    let (_, v) = cat.transact(vec![view(public, "v", t.clone())]).unwrap();
    let (diff, _) = cat
        .transact(vec![Op::RenameItem {
            id: t[0],
            new_name: "t2".into(),
        }])
        .unwrap();
    assert!(
        implications(&diff).is_empty(),
        "a rename implies no runtime change"
    );
    let state = cat.state();
    assert!(state.item_by_name(public, "t").is_none());
    assert_eq!(state.item_by_name(public, "t2").unwrap().id, t[0]);
    assert_eq!(state.get_item(v[0]).unwrap().references, t);
    assert_eq!(
        state.full_name(t[0]).unwrap(),
        ("freshet".into(), "public".into(), "t2".into())
    );
    // Names are unique per schema.
    assert!(matches!(
        cat.transact(vec![Op::RenameItem {
            id: v[0],
            new_name: "t2".into()
        }]),
        Err(CatalogError::AlreadyExists { .. })
    ));
    drop(cat);
    let cat = open(&c);
    assert_eq!(cat.state().item_by_name(public, "t2").unwrap().id, t[0]);
}

#[test]
fn failed_transactions_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let c = consensus(dir.path());
    let mut cat = open(&c);
    let public = public(&cat);
    let before = cat.state().as_diff_from_empty();
    let err = cat
        .transact(vec![table(public, "ok"), table(public, "ok")])
        .unwrap_err();
    assert!(matches!(err, CatalogError::AlreadyExists { .. }));
    assert_eq!(cat.state().as_diff_from_empty(), before);
    drop(cat);
    assert_eq!(open(&c).state().as_diff_from_empty(), before);
}

#[test]
fn a_newer_catalog_fences_the_older() {
    let dir = tempfile::tempdir().unwrap();
    let c = consensus(dir.path());
    let mut old = open(&c);
    let public = public(&old);
    old.transact(vec![table(public, "a")]).unwrap();
    let mut new = open(&c);
    let err = old.transact(vec![table(public, "b")]).unwrap_err();
    assert!(err.is_fenced(), "{err}");
    new.transact(vec![table(public, "c")]).unwrap();
    drop((old, new));
    let state = open(&c).state();
    assert!(state.item_by_name(public, "a").is_some());
    assert!(state.item_by_name(public, "b").is_none());
    assert!(state.item_by_name(public, "c").is_some());
}

/// A process opening the catalog while the older one is still committing
/// DDL claims it even when a commit lands between its replay and its fence
/// entry (it replays again), and sees every commit the older one made.
#[test]
fn taking_over_a_catalog_that_is_being_changed_succeeds() {
    for round in 0..20u64 {
        let dir = tempfile::tempdir().unwrap();
        let c = consensus(dir.path());
        let mut old = open(&c);
        let public = public(&old);
        let writer = std::thread::spawn(move || {
            let mut created = Vec::new();
            loop {
                let name = format!("t{}", created.len());
                match old.transact(vec![table(public, &name)]) {
                    Ok(_) => created.push(name),
                    Err(e) => return (created, e),
                }
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(2 + round));
        let new = Catalog::open(Fence::acquire(Arc::clone(&c)).unwrap())
            .unwrap_or_else(|e| panic!("round {round}: opening failed: {e}"));
        let (created, err) = writer.join().unwrap();
        assert!(err.is_fenced(), "round {round}: {err}");
        let state = new.state();
        for name in &created {
            assert!(
                state.item_by_name(public, name).is_some(),
                "round {round}: {name} was committed but is missing"
            );
        }
    }
}

#[test]
fn long_logs_are_compacted_into_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let c = consensus(dir.path());
    let mut cat = open(&c);
    let public = public(&cat);
    for i in 0..300 {
        cat.transact(vec![table(public, &format!("t{i}"))]).unwrap();
    }
    let before = cat.state().as_diff_from_empty();
    drop(cat);
    let cat = open(&c);
    assert_eq!(cat.state().as_diff_from_empty(), before);
    assert!(c.scan(CATALOG_KEY, 0).unwrap().len() < 5);
    drop(cat);
    assert_eq!(open(&c).state().as_diff_from_empty(), before);
}

/// Transaction blocks reserve the ids of what they create when their
/// statements run; other transactions allocate above the reservations, and
/// a block's COMMIT creates its objects under the reserved ids, however
/// the catalog moved meanwhile. After a restart allocation continues
/// above everything committed.
#[test]
fn blocks_reserve_ids_and_commit_under_them() {
    let dir = tempfile::tempdir().unwrap();
    let c = consensus(dir.path());
    let mut cat = open(&c);
    let public = public(&cat);
    let base = cat.state();
    // Block A: a table, then a view on it (a later statement).
    let (a1, a_created, a_ops1) = cat.preview_step(&base, vec![table(public, "ta")]).unwrap();
    let ta = a_created[0];
    let (_, a_view, a_ops2) = cat
        .preview_step(&a1, vec![view(public, "va", vec![ta])])
        .unwrap();
    // Block B reserves above A.
    let (_, b_created, b_ops) = cat.preview_step(&base, vec![table(public, "tb")]).unwrap();
    assert!(b_created[0] > a_view[0]);
    // An autocommit transaction allocates above both.
    let (_, plain) = cat.transact(vec![table(public, "tc")]).unwrap();
    assert!(plain[0] > b_created[0]);
    // B commits first, then A: each under its own ids.
    let (_, b_ids) = cat.transact(b_ops).unwrap();
    assert_eq!(b_ids, b_created);
    let (_, a_ids) = cat
        .transact(a_ops1.into_iter().chain(a_ops2).collect())
        .unwrap();
    assert_eq!(a_ids, vec![ta, a_view[0]]);
    let state = cat.state();
    for (name, id) in [
        ("ta", ta),
        ("va", a_view[0]),
        ("tb", b_created[0]),
        ("tc", plain[0]),
    ] {
        assert_eq!(
            state.item_by_name(public, name).map(|i| i.id),
            Some(id),
            "{name}"
        );
    }
    drop(cat);
    let mut cat = open(&c);
    let (_, after) = cat.transact(vec![table(public, "td")]).unwrap();
    assert!(after[0] > plain[0]);
}

//! Storage contracts: group commit, snapshot and listen, frontiers, read
//! holds, restart and fencing.

mod common;

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, Int64Array, UInt64Array};
use common::*;
use freshet_repr::{Frontier, GlobalId};
use freshet_storage::{
    CollectionKind, ListenEvent, Storage, StorageError, open_local, updates_schema,
};

const A: GlobalId = GlobalId::User(1);

/// A view's output: rows `ids` inserted at `t`.
fn view_updates(ids: &[i64], t: u64) -> arrow::array::RecordBatch {
    let data = rows(ids, "m");
    let mut cols = data.columns().to_vec();
    cols.push(Arc::new(UInt64Array::from(vec![t; ids.len()])));
    cols.push(Arc::new(Int64Array::from(vec![1i64; ids.len()])));
    arrow::array::RecordBatch::try_new(updates_schema(&schema()), cols).unwrap()
}
const B: GlobalId = GlobalId::User(2);

#[test]
fn group_commit_is_atomic_across_tables_and_visible_at_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), fast_config(dir.path()));
    let t0 = s.read_ts();
    let t1 = s
        .commit_blocking(vec![insert(A, &[1, 2], "x"), insert(B, &[10], "y")])
        .unwrap();
    assert!(t1 > t0);
    assert_eq!(
        s.read_ts(),
        t1,
        "strict serializable: the ack'd write is readable"
    );
    let t2 = s
        .commit_blocking(vec![delete(A, &[1], "x"), insert(B, &[11], "y")])
        .unwrap();
    assert!(t2 > t1);
    assert_eq!(ids(&s.snapshot(A, t0).unwrap()), Vec::<i64>::new());
    assert_eq!(ids(&s.snapshot(A, t1).unwrap()), vec![1, 2]);
    assert_eq!(ids(&s.snapshot(B, t1).unwrap()), vec![10]);
    assert_eq!(ids(&s.snapshot(A, t2).unwrap()), vec![2]);
    assert_eq!(ids(&s.snapshot(B, t2).unwrap()), vec![10, 11]);
    // A time beyond the upper is not readable yet.
    let (_, upper) = s.frontiers(A).unwrap();
    let u = *upper.as_option().unwrap();
    assert!(matches!(
        s.snapshot(A, u),
        Err(StorageError::InvalidReadTime { .. })
    ));
}

#[test]
fn retracting_a_missing_row_is_an_internal_error_not_data() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), fast_config(dir.path()));
    let t = s.commit_blocking(vec![delete(A, &[7], "z")]).unwrap();
    assert!(matches!(
        s.snapshot(A, t),
        Err(StorageError::NegativeMultiplicity { .. })
    ));
}

#[test]
fn idle_tables_advance_with_every_group_and_with_time() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), fast_config(dir.path()));
    let t = s.commit_blocking(vec![insert(A, &[1], "x")]).unwrap();
    let (_, upper_b) = s.frontiers(B).unwrap();
    assert!(upper_b.less_than(&(t + 1)) || upper_b == Frontier::at(t + 1));
    assert!(!upper_b.less_equal(&t), "B's upper passed the commit to A");
    std::thread::sleep(Duration::from_millis(100));
    let (_, later) = s.frontiers(B).unwrap();
    assert!(
        later.as_option() > upper_b.as_option(),
        "ticks advance uppers without writes"
    );
}

#[test]
fn snapshot_plus_listen_sees_every_update_once_in_time_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), fast_config(dir.path()));
    let t1 = s.commit_blocking(vec![insert(A, &[1], "x")]).unwrap();
    let t2 = s.commit_blocking(vec![insert(A, &[2], "x")]).unwrap();
    let mut listen = s.listen(A, t1, None).unwrap();
    let t3 = s
        .commit_blocking(vec![insert(A, &[3], "x"), delete(A, &[1], "x")])
        .unwrap();
    let mut seen = vec![];
    let mut last_progress = 0;
    loop {
        match listen.try_next() {
            Ok(ListenEvent::Updates(b)) => {
                let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                let times = b.column(2).as_any().downcast_ref::<UInt64Array>().unwrap();
                let diffs = b.column(3).as_any().downcast_ref::<Int64Array>().unwrap();
                for i in 0..b.num_rows() {
                    assert!(times.value(i) > t1);
                    assert!(times.value(i) >= last_progress, "update behind progress");
                    seen.push((times.value(i), ids.value(i), diffs.value(i)));
                }
            }
            Ok(ListenEvent::Progress(p)) => {
                let p = *p.as_option().unwrap();
                assert!(p >= last_progress);
                last_progress = p;
                if p > t3 {
                    break;
                }
            }
            Err(false) => std::thread::sleep(Duration::from_millis(5)),
            Err(true) => panic!("listen ended"),
        }
    }
    seen.sort();
    assert_eq!(seen, vec![(t2, 2, 1), (t3, 1, -1), (t3, 3, 1)]);
}

#[test]
fn since_never_passes_a_read_hold() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), fast_config(dir.path()));
    s.set_read_policy(A, freshet_storage::ReadPolicy::LagBehindUpper(0))
        .unwrap();
    let t = s.commit_blocking(vec![insert(A, &[1], "x")]).unwrap();
    let hold = s.acquire_read_hold(A, t).unwrap();
    assert_eq!(s.read_holds().iter().filter(|h| h.id == A).count(), 1);
    s.commit_blocking(vec![delete(A, &[1], "x")]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let (since, _) = s.frontiers(A).unwrap();
    assert_eq!(since, Frontier::at(t), "since stops at the hold");
    assert_eq!(ids(&s.snapshot(A, t).unwrap()), vec![1]);
    drop(hold);
    assert!(s.read_holds().iter().all(|h| h.id != A));
    std::thread::sleep(Duration::from_millis(200));
    let (since, _) = s.frontiers(A).unwrap();
    assert!(since.as_option() > Some(&t), "since advances once released");
    assert!(matches!(
        s.snapshot(A, t),
        Err(StorageError::InvalidReadTime { .. })
    ));
    assert!(s.acquire_read_hold(A, t).is_err());
}

#[test]
fn acknowledged_writes_survive_restart_before_and_after_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = fast_config(dir.path());
    cfg.flush_interval = Duration::from_secs(3600);
    let (t1, t2) = {
        let s = open(dir.path(), cfg.clone());
        let t1 = s.commit_blocking(vec![insert(A, &[1, 2], "x")]).unwrap();
        s.flush_blocking().unwrap();
        let t2 = s
            .commit_blocking(vec![insert(A, &[3], "x"), insert(B, &[4], "y")])
            .unwrap();
        (t1, t2)
        // Dropped without a flush: t2 lives only in the log.
    };
    let s = open(dir.path(), cfg.clone());
    assert!(
        s.read_ts() > t2,
        "the oracle resumes above every handed-out time"
    );
    let now = s.read_ts();
    assert_eq!(ids(&s.snapshot(A, now).unwrap()), vec![1, 2, 3]);
    assert_eq!(ids(&s.snapshot(B, now).unwrap()), vec![4]);
    let _ = t1;
    let t3 = s.commit_blocking(vec![insert(A, &[5], "x")]).unwrap();
    drop(s);
    let s = open(dir.path(), cfg);
    assert!(s.read_ts() > t3);
    assert_eq!(ids(&s.snapshot(A, s.read_ts()).unwrap()), vec![1, 2, 3, 5]);
}

#[test]
fn compaction_keeps_contents_and_bounds_parts() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = fast_config(dir.path());
    cfg.max_parts = 3;
    let s = open(dir.path(), cfg);
    s.set_read_policy(A, freshet_storage::ReadPolicy::LagBehindUpper(0))
        .unwrap();
    let mut expect = vec![];
    for i in 0..20 {
        s.commit_blocking(vec![insert(A, &[i], "x")]).unwrap();
        expect.push(i);
        if i % 3 == 0 {
            s.commit_blocking(vec![delete(A, &[i], "x")]).unwrap();
            expect.retain(|x| *x != i);
        }
        s.flush_blocking().unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let info = s.collections().into_iter().find(|c| c.id == A).unwrap();
    assert!(info.parts <= 4, "parts: {}", info.parts);
    assert_eq!(ids(&s.snapshot(A, s.read_ts()).unwrap()), expect);
}

#[test]
fn a_newer_process_fences_the_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let old = open(dir.path(), fast_config(dir.path()));
    let t = old.commit_blocking(vec![insert(A, &[1], "x")]).unwrap();
    let mut fenced = old.fenced();
    let new = open(dir.path(), fast_config(dir.path()));
    let err = old.commit_blocking(vec![insert(A, &[2], "x")]).unwrap_err();
    assert!(err.is_fenced(), "{err}");
    assert!(*fenced.borrow_and_update());
    // The new process has every acknowledged write and none of the refused.
    assert!(new.read_ts() > t);
    assert_eq!(ids(&new.snapshot(A, new.read_ts()).unwrap()), vec![1]);
    drop(old);
    drop(new);
    let again = open(dir.path(), fast_config(dir.path()));
    assert_eq!(ids(&again.snapshot(A, again.read_ts()).unwrap()), vec![1]);
}

#[test]
fn materialized_collections_append_with_compare_and_set_uppers() {
    let dir = tempfile::tempdir().unwrap();
    let (blob, fence) = open_local(dir.path()).unwrap();
    let s = Storage::open(blob, fence, fast_config(dir.path())).unwrap();
    let mv = GlobalId::User(9);
    s.create_collection(mv, schema(), CollectionKind::Materialized)
        .unwrap();
    s.finish_boot().unwrap();
    let mut listen = s.listen(mv, 0, None).unwrap();
    s.compare_and_append(
        mv,
        &[view_updates(&[1], 5)],
        &Frontier::at(0),
        Frontier::at(10),
    )
    .unwrap();
    let err = s
        .compare_and_append(
            mv,
            &[view_updates(&[2], 12)],
            &Frontier::at(0),
            Frontier::at(20),
        )
        .unwrap_err();
    assert!(matches!(err, StorageError::UpperMismatch { .. }));
    // Updates outside [expected, new_upper) are refused.
    assert!(
        s.compare_and_append(
            mv,
            &[view_updates(&[2], 25)],
            &Frontier::at(10),
            Frontier::at(20),
        )
        .is_err()
    );
    assert_eq!(ids(&s.snapshot(mv, 9).unwrap()), vec![1]);
    assert!(s.snapshot(mv, 10).is_err(), "10 is not complete yet");
    let mut events = vec![];
    while let Ok(e) = listen.try_next() {
        events.push(e);
    }
    assert!(matches!(events.last(), Some(ListenEvent::Progress(p)) if p == &Frontier::at(10)));
    // Sealing: the empty antichain means no more updates ever.
    s.compare_and_append(mv, &[], &Frontier::at(10), Frontier::closed())
        .unwrap();
    assert_eq!(s.frontiers(mv).unwrap().1, Frontier::closed());
}

#[test]
fn dropping_a_collection_deletes_its_shard_and_ends_listeners() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path(), fast_config(dir.path()));
    s.commit_blocking(vec![insert(A, &[1], "x")]).unwrap();
    s.flush_blocking().unwrap();
    let mut listen = s.listen(A, s.read_ts(), None).unwrap();
    s.drop_collection(A).unwrap();
    loop {
        match listen.try_next() {
            Err(true) => break,
            _ => continue,
        }
    }
    assert!(matches!(
        s.snapshot(A, s.read_ts()),
        Err(StorageError::UnknownCollection(_))
    ));
    assert!(!dir.path().join("consensus/shard/u1/log").exists());
    let parts = std::fs::read_dir(dir.path().join("blob/parts/u1"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(parts, 0);
}

#[test]
fn concurrent_writers_share_group_commits() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(open(dir.path(), fast_config(dir.path())));
    let threads: Vec<_> = (0..16)
        .map(|w| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                (0..20)
                    .map(|i| {
                        s.commit_blocking(vec![insert(A, &[w * 1000 + i], "c")])
                            .unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all_ts = vec![];
    for t in threads {
        all_ts.extend(t.join().unwrap());
    }
    let distinct: std::collections::BTreeSet<_> = all_ts.iter().collect();
    assert!(
        distinct.len() < all_ts.len(),
        "some writers should share a group commit timestamp"
    );
    assert_eq!(
        s.snapshot(A, s.read_ts())
            .unwrap()
            .iter()
            .map(|b| b.num_rows())
            .sum::<usize>(),
        320
    );
}

/// Writers that find the log idle commit on their own threads, the others
/// through the commit thread, while flushes roll the log under them:
/// every write is acknowledged at a time after the writer's previous one,
/// seen at it, and found again after a restart.
#[test]
fn writes_committed_by_their_own_threads_and_the_commit_thread_interleave_with_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = fast_config(dir.path());
    let s = Arc::new(open(dir.path(), cfg.clone()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flusher = {
        let (s, stop) = (Arc::clone(&s), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                s.flush_blocking().unwrap();
                std::thread::sleep(Duration::from_millis(3));
            }
        })
    };
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                let mut last = 0;
                for i in 0..100 {
                    let id = w * 1000 + i;
                    let ts = s.commit_blocking(vec![insert(A, &[id], "c")]).unwrap();
                    assert!(ts > last, "a writer's commits are ordered");
                    assert!(ids(&s.snapshot(A, ts).unwrap()).contains(&id));
                    last = ts;
                    if i % 10 == 0 {
                        // A pause leaves the log idle for the next write.
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    flusher.join().unwrap();
    let expected: Vec<i64> = (0..4)
        .flat_map(|w| (0..100).map(move |i| w * 1000 + i))
        .collect();
    assert_eq!(ids(&s.snapshot(A, s.read_ts()).unwrap()), expected);
    drop(s);
    let s = open(dir.path(), cfg);
    assert_eq!(ids(&s.snapshot(A, s.read_ts()).unwrap()), expected);
}

#[test]
fn since_never_passes_a_dependents_durable_resume_point() {
    let dir = tempfile::tempdir().unwrap();
    let config = fast_config(dir.path());
    let mv = GlobalId::User(9);
    let (blob, fence) = open_local(dir.path()).unwrap();
    let s = Storage::open(blob, fence, config.clone()).unwrap();
    for id in [A, B] {
        s.create_collection(id, schema(), CollectionKind::Table)
            .unwrap();
    }
    s.create_collection(mv, schema(), CollectionKind::Materialized)
        .unwrap();
    s.set_read_policy(A, freshet_storage::ReadPolicy::LagBehindUpper(0))
        .unwrap();
    let as_of = s.commit_blocking(vec![insert(A, &[1], "x")]).unwrap();
    s.admit_dependent(mv, as_of, vec![A]);
    s.finish_boot().unwrap();
    for i in 2..6 {
        s.commit_blocking(vec![insert(A, &[i], "x")]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    let since = |s: &Storage| *s.frontiers(A).unwrap().0.as_option().unwrap();
    assert_eq!(since(&s), as_of, "until its first output, the as_of bounds");
    // The view writes through `as_of + 1`: its inputs may compact to
    // `as_of`, where it would resume, and no further.
    s.compare_and_append(mv, &[], &Frontier::at(0), Frontier::at(as_of + 1))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(since(&s), as_of);
    // An upper advanced only in memory (an empty append within a second
    // of the last durable write) permits nothing more.
    let later = s.read_ts();
    s.compare_and_append(mv, &[], &Frontier::at(as_of + 1), Frontier::at(later))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(since(&s), as_of, "the durable upper bounds, not the upper");
    let info = s.collections().into_iter().find(|c| c.id == A).unwrap();
    assert_eq!(info.permission, Some(as_of));
    // Dropping the view releases its requirement.
    s.drop_collection(mv).unwrap();
    s.commit_blocking(vec![insert(A, &[9], "x")]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(since(&s) > as_of);
    assert_eq!(
        s.collections()
            .into_iter()
            .find(|c| c.id == A)
            .unwrap()
            .permission,
        None
    );
}

/// A process taking over while the older one is still appending to a
/// materialized collection claims the shard even when an append lands
/// between its read of the shard and its claim (it reads again); the older
/// process's appends then fail as fenced.
#[test]
fn taking_over_a_shard_that_is_being_appended_to_succeeds() {
    let mv = GlobalId::User(9);
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let (blob, fence) = open_local(dir.path()).unwrap();
        let old = Arc::new(Storage::open(blob, fence, fast_config(dir.path())).unwrap());
        old.create_collection(mv, schema(), CollectionKind::Materialized)
            .unwrap();
        old.finish_boot().unwrap();
        let writer = {
            let old = Arc::clone(&old);
            std::thread::spawn(move || {
                let mut upper = 0u64;
                loop {
                    let data = rows(&[upper as i64], "m");
                    let mut cols = data.columns().to_vec();
                    cols.push(Arc::new(UInt64Array::from(vec![upper])));
                    cols.push(Arc::new(Int64Array::from(vec![1i64])));
                    let batch = arrow::array::RecordBatch::try_new(updates_schema(&schema()), cols)
                        .unwrap();
                    match old.compare_and_append(
                        mv,
                        &[batch],
                        &Frontier::at(upper),
                        Frontier::at(upper + 1),
                    ) {
                        Ok(_) => upper += 1,
                        Err(e) => return (upper, e),
                    }
                }
            })
        };
        std::thread::sleep(Duration::from_millis(5 + round));
        let (blob, fence) = open_local(dir.path()).unwrap();
        let new = Storage::open(blob, fence, fast_config(dir.path())).unwrap();
        new.create_collection(mv, schema(), CollectionKind::Materialized)
            .unwrap_or_else(|e| panic!("round {round}: claiming the shard failed: {e}"));
        let (appended, err) = writer.join().unwrap();
        assert!(err.is_fenced(), "round {round}: {err}");
        // Everything the old process appended before the claim is there.
        let (_, upper) = new.frontiers(mv).unwrap();
        assert!(upper.as_option().is_some_and(|u| *u <= appended));
    }
}

/// A view's appends are visible (upper, reads) as soon as they are
/// queued, land durably in order, and survive restart and compaction.
#[test]
fn background_appends_land_in_order_and_survive_restart_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let mv = GlobalId::User(9);
    let open_mv = |max_parts: usize| {
        let (blob, fence) = open_local(dir.path()).unwrap();
        let mut cfg = fast_config(dir.path());
        cfg.max_parts = max_parts;
        let s = Storage::open(blob, fence, cfg).unwrap();
        s.create_collection(mv, schema(), CollectionKind::Materialized)
            .unwrap();
        s.finish_boot().unwrap();
        s
    };
    let mut expect: Vec<i64> = Vec::new();
    {
        // No compaction yet: the appends stay as they were written.
        let s = open_mv(1000);
        let (done_tx, done) = std::sync::mpsc::channel();
        // Small appends and a large one, each continuing the one before;
        // queued faster than written, so several are written as one.
        for t in 0..30u64 {
            let added: Vec<i64> = if t == 17 {
                (1_000..21_000).collect()
            } else {
                vec![t as i64]
            };
            expect.extend(&added);
            let done_tx = done_tx.clone();
            s.append_in_background(
                mv,
                vec![view_updates(&added, t)],
                Frontier::at(t),
                Frontier::at(t + 1),
                Box::new(move |r| done_tx.send((t, r.is_ok())).unwrap()),
            )
            .unwrap();
            // Visible as soon as it is queued, durable or not yet.
            assert_eq!(s.frontiers(mv).unwrap().1, Frontier::at(t + 1));
            let mut seen = expect.clone();
            seen.sort();
            assert_eq!(ids(&s.snapshot(mv, t).unwrap()), seen, "at {t}");
        }
        // An append that does not continue the upper is refused at once,
        // and nothing of it is visible.
        assert!(matches!(
            s.append_in_background(
                mv,
                vec![view_updates(&[-1], 40)],
                Frontier::at(40),
                Frontier::at(41),
                Box::new(|_| {}),
            ),
            Err(StorageError::UpperMismatch { .. })
        ));
        assert_eq!(s.frontiers(mv).unwrap().1, Frontier::at(30));
        s.flush_appends().unwrap();
        let outcomes: Vec<(u64, bool)> = done.try_iter().collect();
        assert_eq!(outcomes, (0..30).map(|t| (t, true)).collect::<Vec<_>>());
        expect.sort();
        assert_eq!(ids(&s.snapshot(mv, 29).unwrap()), expect);
    }
    // Read back from the durable state alone (nothing cached).
    let s = open_mv(1000);
    assert_eq!(s.frontiers(mv).unwrap().1, Frontier::at(30));
    assert_eq!(ids(&s.snapshot(mv, 29).unwrap()), expect);
    drop(s);
    // Compaction merges the parts.
    let s = open_mv(3);
    s.set_read_policy(mv, freshet_storage::ReadPolicy::LagBehindUpper(0))
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while s
        .collections()
        .into_iter()
        .find(|c| c.id == mv)
        .unwrap()
        .parts
        > 3
    {
        assert!(std::time::Instant::now() < deadline, "never compacted");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(ids(&s.snapshot(mv, 29).unwrap()), expect);
    drop(s);
    let s = open_mv(3);
    assert_eq!(ids(&s.snapshot(mv, 29).unwrap()), expect);
}

#[test]
fn small_appends_stay_in_the_shard_state_until_they_fill_a_part_file() {
    let dir = tempfile::tempdir().unwrap();
    let mv = GlobalId::User(9);
    let open_mv = || {
        let (blob, fence) = open_local(dir.path()).unwrap();
        let mut cfg = fast_config(dir.path());
        cfg.max_parts = 1000;
        let s = Storage::open(blob, fence, cfg).unwrap();
        s.create_collection(mv, schema(), CollectionKind::Materialized)
            .unwrap();
        s.finish_boot().unwrap();
        s
    };
    let files = || {
        std::fs::read_dir(dir.path().join("blob/parts").join(mv.to_string()))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let s = open_mv();
    let mut listen = s.listen(mv, 0, None).unwrap();
    // One row per append, each written (and its commit made) on its own.
    for t in 0..200u64 {
        s.compare_and_append(
            mv,
            &[view_updates(&[t as i64], t)],
            &Frontier::at(t),
            Frontier::at(t + 1),
        )
        .unwrap();
        if t == 0 {
            assert_eq!(files(), 0, "a one-row append wrote a part file");
        }
    }
    // Most appends went into the state; now and then their parts were
    // written out together as one file.
    let written = files();
    assert!((1..40).contains(&written), "{written} part files");
    let expect: Vec<i64> = (0..200).collect();
    assert_eq!(ids(&s.snapshot(mv, 199).unwrap()), expect);
    // Listeners heard every append once, though files hold several.
    let mut heard = Vec::new();
    while let Ok(event) = listen.try_next() {
        if let ListenEvent::Updates(b) = event {
            heard.extend(ids(&[b]));
        }
    }
    heard.sort();
    assert_eq!(heard, expect);
    drop(s);
    // A restart reads inline parts from the state and files alike.
    let s = open_mv();
    assert_eq!(ids(&s.snapshot(mv, 199).unwrap()), expect);
    assert_eq!(files(), written, "a restart took inline parts for orphans");
}

/// Part files of table `A` on disk.
fn part_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir.join("blob/parts").join(A.to_string()))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn staged_parts_join_the_table_at_their_commit_and_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = fast_config(dir.path());
    cfg.flush_interval = Duration::from_secs(3600);
    let before = {
        let s = open(dir.path(), cfg.clone());
        let t0 = s.commit_blocking(vec![insert(A, &[1], "x")]).unwrap();
        let mut listen = s.listen(A, t0, None).unwrap();
        let staged = s
            .stage(
                A,
                &[freshet_storage::write_batch(&rows(&[10, 11], "s"), 1).unwrap()],
            )
            .unwrap();
        assert_eq!(staged.rows(), 2);
        let discarded = s
            .stage(
                A,
                &[freshet_storage::write_batch(&rows(&[20], "s"), 1).unwrap()],
            )
            .unwrap();
        // Staged but never committed nor discarded (a crash mid-COPY).
        let _orphan = s
            .stage(
                A,
                &[freshet_storage::write_batch(&rows(&[30], "s"), 1).unwrap()],
            )
            .unwrap();
        assert_eq!(
            ids(&s.snapshot(A, s.read_ts()).unwrap()),
            vec![1],
            "a staged part is invisible before its commit"
        );
        // A part staged for another table cannot ride in a write to A.
        let wrong = s
            .stage(
                B,
                &[freshet_storage::write_batch(&rows(&[40], "s"), 1).unwrap()],
            )
            .unwrap();
        let mut w = insert(A, &[2], "x");
        w.staged = vec![wrong];
        assert!(matches!(
            s.commit_blocking(vec![w]),
            Err(StorageError::InvalidUsage(_))
        ));
        let mut w = insert(A, &[2], "x");
        w.staged = vec![staged];
        let t1 = s.commit_blocking(vec![w]).unwrap();
        assert_eq!(ids(&s.snapshot(A, t1).unwrap()), vec![1, 2, 10, 11]);
        assert_eq!(ids(&s.snapshot(A, t0).unwrap()), vec![1]);
        // The listener sees the staged rows at the commit's time.
        let mut seen = vec![];
        while seen.len() < 3 {
            match listen.try_next() {
                Ok(ListenEvent::Updates(b)) => {
                    let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                    let times = b.column(2).as_any().downcast_ref::<UInt64Array>().unwrap();
                    for i in 0..b.num_rows() {
                        seen.push((ids.value(i), times.value(i)));
                    }
                }
                Ok(ListenEvent::Progress(_)) => {}
                Err(false) => std::thread::sleep(Duration::from_millis(5)),
                Err(true) => panic!("listen ended"),
            }
        }
        seen.sort();
        assert_eq!(seen, vec![(2, t1), (10, t1), (11, t1)]);
        let files = part_files(dir.path());
        s.discard_staged(&[discarded]);
        assert_eq!(part_files(dir.path()), files - 1);
        s.read_ts()
        // Dropped without a flush: the commit lives in the log, naming the part.
    };
    let s = open(dir.path(), cfg.clone());
    assert_eq!(
        ids(&s.snapshot(A, s.read_ts()).unwrap()),
        vec![1, 2, 10, 11]
    );
    assert!(s.read_ts() > before);
    // The orphan is gone; what remains is what the shard names (the part
    // of t0's row, the staged part and t1's inline row).
    let info = s.collections().into_iter().find(|c| c.id == A).unwrap();
    assert_eq!(part_files(dir.path()), info.parts - info.inline_parts);
    let t2 = s.commit_blocking(vec![delete(A, &[10], "s")]).unwrap();
    s.flush_blocking().unwrap();
    drop(s);
    let s = open(dir.path(), cfg);
    assert_eq!(ids(&s.snapshot(A, t2).unwrap()), vec![1, 2, 11]);
}

#[test]
fn compaction_of_staged_parts_keeps_their_commit_times() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = fast_config(dir.path());
    cfg.max_parts = 2;
    let s = open(dir.path(), cfg);
    let mut times = vec![];
    for i in 0..6 {
        let part = s
            .stage(
                A,
                &[freshet_storage::write_batch(&rows(&[i], "s"), 1).unwrap()],
            )
            .unwrap();
        let mut w = insert(A, &[100 + i], "x");
        w.staged = vec![part];
        times.push(s.commit_blocking(vec![w]).unwrap());
        s.flush_blocking().unwrap();
    }
    // Hold the history so compaction keeps every time distinguishable.
    let _hold = s.acquire_read_hold(A, times[0]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let info = s.collections().into_iter().find(|c| c.id == A).unwrap();
    assert!(info.parts <= 3, "parts: {}", info.parts);
    for (i, t) in times.iter().enumerate() {
        let mut expect: Vec<i64> = (0..=i as i64).chain(100..=100 + i as i64).collect();
        expect.sort();
        assert_eq!(ids(&s.snapshot(A, *t).unwrap()), expect, "at {t}");
    }
}

#[test]
fn decoded_parts_stay_within_the_cache_budget_and_reads_load_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = fast_config(dir.path());
    // Room for about two of the parts below.
    cfg.part_cache_bytes = 64 << 10;
    cfg.max_parts = 1_000;
    let s = open(dir.path(), cfg.clone());
    let mut expect = vec![];
    for p in 0..20 {
        let ids: Vec<i64> = (p * 1_000..(p + 1) * 1_000).collect();
        s.commit_blocking(vec![insert(A, &ids, "payload")]).unwrap();
        s.flush_blocking().unwrap();
        expect.extend(ids);
    }
    s.commit_blocking(vec![delete(A, &[5, 15_005], "payload")])
        .unwrap();
    expect.retain(|x| *x != 5 && *x != 15_005);
    for _ in 0..3 {
        assert_eq!(ids(&s.snapshot(A, s.read_ts()).unwrap()), expect);
        assert!(
            s.part_cache_bytes() <= cfg.part_cache_bytes,
            "cache holds {} bytes",
            s.part_cache_bytes()
        );
    }
    drop(s);
    let s = open(dir.path(), cfg.clone());
    assert_eq!(ids(&s.snapshot(A, s.read_ts()).unwrap()), expect);
    assert!(s.part_cache_bytes() <= cfg.part_cache_bytes);
}

/// Column bounds are stored with each part (flushed writes, a staged
/// `COPY` part, a compaction's output), so after a restart a scan knows
/// every part's bounds without decoding any of them, and a filter can
/// skip parts on its first read.
#[test]
fn part_bounds_survive_a_restart_without_reading_the_parts() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = fast_config(dir.path());
    cfg.max_parts = 1_000;
    {
        let s = open(dir.path(), cfg.clone());
        for p in 0..3 {
            let ids: Vec<i64> = (p * 100..(p + 1) * 100).collect();
            s.commit_blocking(vec![insert(A, &ids, "x")]).unwrap();
            s.flush_blocking().unwrap();
        }
        let ids: Vec<i64> = (1_000..1_050).collect();
        let staged = s
            .stage(
                A,
                &[freshet_storage::write_batch(&rows(&ids, "s"), 1).unwrap()],
            )
            .unwrap();
        let mut w = insert(A, &[5_000], "x");
        w.staged = vec![staged];
        s.commit_blocking(vec![w]).unwrap();
        s.flush_blocking().unwrap();
    }
    let s = open(dir.path(), cfg.clone());
    let scan = s.scan(A, s.read_ts()).unwrap();
    assert!(scan.len() >= 4, "parts: {}", scan.len());
    let mut ranges: Vec<(i64, i64)> = (0..scan.len())
        .map(|i| {
            let stats = scan.part_stats(i).expect("bounds read from the footer");
            let b = stats.columns[0].0.clone().expect("an id column has bounds");
            let v = |a: &dyn Array| a.as_any().downcast_ref::<Int64Array>().unwrap().value(0);
            (v(b.min.as_ref()), v(b.max.as_ref()))
        })
        .collect();
    ranges.sort();
    assert_eq!(
        ranges,
        vec![
            (0, 99),
            (100, 199),
            (200, 299),
            (1_000, 1_049),
            (5_000, 5_000)
        ]
    );
    assert_eq!(s.part_cache_bytes(), 0, "no part was decoded to know them");
    let mut kept = scan;
    kept.retain(|i| i == 0);
    let read: Vec<_> = (0..kept.len())
        .flat_map(|i| kept.read(i, None).unwrap())
        .collect();
    assert_eq!(read.iter().map(|b| b.num_rows()).sum::<usize>(), 100);
    drop(kept);

    // A compaction's merged part carries bounds too.
    drop(s);
    cfg.max_parts = 1;
    {
        let s = open(dir.path(), cfg.clone());
        for _ in 0..200 {
            if s.collections()
                .into_iter()
                .find(|c| c.id == A)
                .unwrap()
                .parts
                == 1
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let s = open(dir.path(), cfg);
    let scan = s.scan(A, s.read_ts()).unwrap();
    assert_eq!(scan.len(), 1, "merged");
    let b = scan.part_stats(0).unwrap().columns[0].0.clone().unwrap();
    let v = |a: &dyn Array| a.as_any().downcast_ref::<Int64Array>().unwrap().value(0);
    assert_eq!((v(b.min.as_ref()), v(b.max.as_ref())), (0, 5_000));
    assert_eq!(s.part_cache_bytes(), 0);
}

/// A scan reads part by part: retractions in one part cancel rows of
/// another (and in unflushed writes), bounds let a filter drop parts
/// without reading them, the row count is known without reading when
/// nothing retracts, and parts a compaction replaces mid-scan stay
/// readable until the scan ends.
#[test]
fn scans_read_part_by_part_and_outlive_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = fast_config(dir.path());
    cfg.max_parts = 6;
    let s = open(dir.path(), cfg);
    // Rows wide enough that every flush, even of one row, writes a part
    // file (smaller parts stay inline in the shard's state, which
    // compaction leaves alone, and no file would outlive anything).
    let pad = "x".repeat(9_000);
    s.set_read_policy(A, freshet_storage::ReadPolicy::LagBehindUpper(0))
        .unwrap();
    for p in 0..4 {
        let ids: Vec<i64> = (p * 100..(p + 1) * 100).collect();
        s.commit_blocking(vec![insert(A, &ids, &pad)]).unwrap();
        s.flush_blocking().unwrap();
    }
    let all: Vec<i64> = (0..400).collect();
    let scan = s.scan(A, s.read_ts()).unwrap();
    assert_eq!(scan.len(), 4);
    assert_eq!(scan.exact_rows(), Some(400), "inserts only: count known");
    // Part 2 holds ids 200..300: its bounds say so (written by this
    // process, so known without reading).
    let bounds = scan.part_stats(2).unwrap().columns[0].0.clone().unwrap();
    let min = bounds.min.as_any().downcast_ref::<Int64Array>().unwrap();
    let max = bounds.max.as_any().downcast_ref::<Int64Array>().unwrap();
    assert_eq!((min.value(0), max.value(0)), (200, 299));
    let mut filtered = scan;
    filtered.retain(|i| i == 2);
    let read: Vec<_> = (0..filtered.len())
        .flat_map(|i| filtered.read(i, None).unwrap())
        .collect();
    assert_eq!(ids(&read), (200..300).collect::<Vec<_>>());
    drop(filtered);

    // Retract a row of part 0 in a flushed part, and one of part 3 in an
    // unflushed write: every read of the other parts cancels them.
    s.commit_blocking(vec![delete(A, &[7], &pad)]).unwrap();
    s.flush_blocking().unwrap();
    s.commit_blocking(vec![delete(A, &[333], &pad)]).unwrap();
    let expect: Vec<i64> = all
        .iter()
        .copied()
        .filter(|x| *x != 7 && *x != 333)
        .collect();
    let scan = s.scan(A, s.read_ts()).unwrap();
    assert_eq!(scan.exact_rows(), None, "retractions: count unknown");
    let mut read = vec![];
    for i in (0..scan.len()).rev() {
        read.extend(scan.read(i, None).unwrap());
    }
    scan.check_complete().unwrap();
    assert_eq!(ids(&read), expect);
    // A plan may execute a scan twice: each part cancels the same rows.
    let again: Vec<_> = (0..scan.len())
        .flat_map(|i| scan.read(i, None).unwrap())
        .collect();
    assert_eq!(ids(&again), expect);
    drop(scan);

    // Compaction while a scan is open (two more parts pass `max_parts`):
    // the scan still reads what it started with, from the replaced files,
    // which go when it ends.
    let scan = s.scan(A, s.read_ts()).unwrap();
    for id in [1_000, 1_001] {
        s.commit_blocking(vec![insert(A, &[id], &pad)]).unwrap();
        s.flush_blocking().unwrap();
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while s
        .collections()
        .into_iter()
        .find(|c| c.id == A)
        .unwrap()
        .parts
        > 1
    {
        assert!(std::time::Instant::now() < deadline, "never compacted");
        std::thread::sleep(Duration::from_millis(20));
    }
    let read: Vec<_> = (0..scan.len())
        .flat_map(|i| scan.read(i, None).unwrap())
        .collect();
    assert_eq!(ids(&read), expect);
    // The seven replaced parts stay beside the merged one.
    assert_eq!(part_files(dir.path()), 8, "the scan's parts are kept");
    drop(scan);
    assert_eq!(
        part_files(dir.path()),
        1,
        "replaced parts deleted with the scan"
    );
    let mut now = expect.clone();
    now.extend([1_000, 1_001]);
    assert_eq!(ids(&s.snapshot(A, s.read_ts()).unwrap()), now);
}

/// Payloads of a batch of the `payload` column alone, sorted.
fn payloads(batches: &[arrow::array::RecordBatch]) -> Vec<String> {
    let mut out: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            let a = b
                .column(0)
                .as_any()
                .downcast_ref::<arrow::array::StringArray>()
                .unwrap();
            (0..a.len())
                .map(|i| a.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    out.sort();
    out
}

#[test]
fn scans_decode_only_the_columns_asked_for_and_agree_with_whole_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = fast_config(dir.path());
    cfg.max_parts = 100;
    {
        let s = open(dir.path(), cfg.clone());
        for p in 0..3i64 {
            let ids: Vec<i64> = (p * 1000..(p + 1) * 1000).collect();
            s.commit_blocking(vec![insert(A, &ids, &format!("p{p}"))])
                .unwrap();
            s.flush_blocking().unwrap();
        }
        // A COPY's staged part, whose file has no time column.
        let staged = s
            .stage(
                A,
                &[freshet_storage::write_batch(&rows(&[5_000, 5_001], "s"), 1).unwrap()],
            )
            .unwrap();
        s.commit_blocking(vec![freshet_storage::TableWrite {
            staged: vec![staged],
            id: A,
            updates: freshet_storage::write_batch(&rows(&[], "s"), 1).unwrap(),
        }])
        .unwrap();
        s.flush_blocking().unwrap();
    }
    // After a restart every part is read from its file.
    let s = open(dir.path(), cfg);
    let scan = s.scan(A, s.read_ts()).unwrap();
    let payload_only: Vec<_> = (0..scan.len())
        .flat_map(|i| scan.read(i, Some(&[1])).unwrap())
        .collect();
    assert!(payload_only.iter().all(|b| b.num_columns() == 1));
    let mut expect: Vec<String> = (0..3)
        .flat_map(|p| vec![format!("p{p}"); 1000])
        .chain(["s".to_string(), "s".to_string()])
        .collect();
    expect.sort();
    assert_eq!(payloads(&payload_only), expect);
    // The first read of each part decoded every column once (to note its
    // bounds) but kept only the payload, time and diff.
    let narrow = s.part_cache_bytes();
    let reordered: Vec<_> = (0..scan.len())
        .flat_map(|i| scan.read(i, Some(&[1, 0])).unwrap())
        .collect();
    assert!(
        s.part_cache_bytes() > narrow,
        "reading ids decoded and cached them"
    );
    let whole: Vec<_> = (0..scan.len())
        .flat_map(|i| scan.read(i, None).unwrap())
        .collect();
    let swapped: Vec<_> = whole.iter().map(|b| b.project(&[1, 0]).unwrap()).collect();
    assert_eq!(
        arrow::compute::concat_batches(&reordered[0].schema(), &reordered).unwrap(),
        arrow::compute::concat_batches(&swapped[0].schema(), &swapped).unwrap(),
        "a projected read is the projection of a whole read"
    );
    drop(scan);

    // With a retraction to cancel, a projected read still drops exactly
    // the retracted row (found by every column).
    s.commit_blocking(vec![delete(A, &[1_500], "p1")]).unwrap();
    let scan = s.scan(A, s.read_ts()).unwrap();
    let payload_only: Vec<_> = (0..scan.len())
        .flat_map(|i| scan.read(i, Some(&[1])).unwrap())
        .collect();
    scan.check_complete().unwrap();
    let p1 = expect.iter().position(|p| p == "p1").unwrap();
    expect.remove(p1);
    assert_eq!(payloads(&payload_only), expect);
}

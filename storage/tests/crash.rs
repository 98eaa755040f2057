//! Crash harness for the transaction log: a child process commits groups that
//! write the same rows to two tables and reports each acknowledgement; the
//! parent SIGKILLs it at a random moment (during boot, mid-write, mid-fsync,
//! mid-flush), reopens the data directory and checks that every acknowledged
//! group is fully present in both tables and that no group is present in one
//! table but not the other.
//!
//! `FRESHET_CRASH_CYCLES` sets the number of kill/restart cycles (default 12).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow::array::{Array, Int64Array};
use common::*;
use freshet_repr::GlobalId;
use rand::Rng;

const A: GlobalId = GlobalId::User(1);
const B: GlobalId = GlobalId::User(2);

/// Rows each group writes per table: large enough that records take several
/// writes and kills land mid-record.
fn rows_for(id: i64) -> usize {
    1 + (id as usize % 97) * 40
}

fn child(dir: &str, cycle: i64) {
    let mut cfg = fast_config(dir.as_ref());
    cfg.flush_interval = Duration::from_millis(150);
    let storage = Arc::new(open(dir.as_ref(), cfg));
    println!("ready");
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let storage = Arc::clone(&storage);
            std::thread::spawn(move || {
                for i in 0.. {
                    let id = cycle * 10_000_000 + w * 1_000_000 + i;
                    let ids = vec![id; rows_for(id)];
                    let payload = "p".repeat(64);
                    storage
                        .commit_blocking(vec![insert(A, &ids, &payload), insert(B, &ids, &payload)])
                        .expect("commit");
                    println!("ack {id}");
                }
            })
        })
        .collect();
    for w in writers {
        let _ = w.join();
    }
}

fn counts(batches: &[arrow::array::RecordBatch]) -> BTreeMap<i64, usize> {
    let mut out = BTreeMap::new();
    for b in batches {
        let a = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        for i in 0..a.len() {
            *out.entry(a.value(i)).or_default() += 1;
        }
    }
    out
}

fn main() {
    if let Ok(dir) = std::env::var("FRESHET_CRASH_CHILD") {
        let cycle = std::env::var("FRESHET_CRASH_CYCLE")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        child(&dir, cycle);
        return;
    }
    // Ignore libtest-style arguments (`cargo test` passes filters).
    let cycles: i64 = std::env::var("FRESHET_CRASH_CYCLES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(12);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rng();
    let mut all_acked: BTreeSet<i64> = BTreeSet::new();
    let mut total_present = 0;
    for cycle in 1..=cycles {
        let mut child = Command::new(&exe)
            .env("FRESHET_CRASH_CHILD", dir.path())
            .env("FRESHET_CRASH_CYCLE", cycle.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let acked = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().unwrap();
        let reader = {
            let acked = Arc::clone(&acked);
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Some(id) = line.strip_prefix("ack ") {
                        acked.lock().unwrap().push(id.parse::<i64>().unwrap());
                    }
                }
            })
        };
        std::thread::sleep(Duration::from_millis(rng.random_range(20..700)));
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        all_acked.extend(acked.lock().unwrap().iter().copied());

        let s = open(dir.path(), fast_config(dir.path()));
        let ts = s.read_ts();
        // Hold both tables at `ts` while reading them, as every reader
        // must: counting A's rows can take longer than the tables' read
        // policy lets their since lag behind the advancing upper.
        let _holds = [A, B].map(|id| s.acquire_read_hold(id, ts).unwrap());
        let a = counts(&s.snapshot(A, ts).unwrap());
        let b = counts(&s.snapshot(B, ts).unwrap());
        for id in &all_acked {
            assert_eq!(
                a.get(id),
                Some(&rows_for(*id)),
                "acknowledged group {id} missing or partial in A"
            );
            assert_eq!(
                b.get(id),
                Some(&rows_for(*id)),
                "acknowledged group {id} missing or partial in B"
            );
        }
        assert_eq!(a, b, "a group is present in one table but not the other");
        for (id, n) in &a {
            assert_eq!(*n, rows_for(*id), "group {id} is partial");
        }
        total_present = a.len();
        println!(
            "cycle {cycle}: {} acknowledged so far, {} groups present",
            all_acked.len(),
            a.len()
        );
    }
    assert!(
        !all_acked.is_empty(),
        "the child never acknowledged a write"
    );
    println!(
        "crash harness: {cycles} cycles, {} acknowledged groups, {total_present} present, all intact",
        all_acked.len()
    );
}

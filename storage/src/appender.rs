//! Appends to derived collections (materialized views' outputs), made
//! durable on a thread of their own.
//!
//! Writing a part and committing the shard's state costs a few file
//! creations and fsyncs (about a millisecond here). Done by the timely
//! worker that computes the view, it stalls every dataflow and peek on
//! that worker meanwhile, and each completed time pays it alone. Handed to
//! this thread instead, the worker goes on computing, and the appends
//! that queue while one is being written are written together: one part
//! and one commit for every span of times that arrived meanwhile, per
//! collection (group commit, as table writes have).
//!
//! An append is made visible (the collection's upper moves, readers and
//! listeners see it) when it is queued, by `Collection::publish`; this
//! thread makes it durable, and the caller learns that from its `done`
//! callback, called in the order the appends were queued.

use std::sync::mpsc::{Receiver, Sender};

use arrow::array::RecordBatch;
use freshet_repr::{Frontier, GlobalId};

use crate::error::{Result, StorageError};

/// Called with an append's outcome once it is durable (or failed).
pub type AppendDone = Box<dyn FnOnce(std::result::Result<(), &StorageError>) + Send>;

/// What the appender thread is asked to do.
pub(crate) enum AppendCommand {
    /// Append `updates` to `id`, moving its upper from `expected` to
    /// `new_upper` (as `compare_and_append`).
    Append {
        id: GlobalId,
        updates: Vec<RecordBatch>,
        expected: Frontier,
        new_upper: Frontier,
        done: AppendDone,
    },
    /// Answer once every append queued before this one is done.
    Flush(Sender<()>),
}

/// Appends to one collection written as one.
struct Group {
    id: GlobalId,
    updates: Vec<RecordBatch>,
    expected: Frontier,
    new_upper: Frontier,
    done: Vec<AppendDone>,
}

enum Step {
    Append(Group),
    Flush(Sender<()>),
}

/// Serve `commands` until every sender is gone, writing each group with
/// `append` (a collection's `compare_and_append`).
pub(crate) fn run(
    commands: Receiver<AppendCommand>,
    append: impl Fn(GlobalId, &[RecordBatch], &Frontier, Frontier) -> Result<()>,
) {
    while let Ok(first) = commands.recv() {
        let queued = std::iter::once(first).chain(std::iter::from_fn(|| commands.try_recv().ok()));
        for step in coalesce(queued) {
            match step {
                Step::Append(g) => {
                    let result = append(g.id, &g.updates, &g.expected, g.new_upper);
                    if let Err(e) = &result {
                        tracing::debug!(collection = %g.id, error = %e, "background append failed");
                    }
                    for done in g.done {
                        done(result.as_ref().map(|_| ()));
                    }
                }
                Step::Flush(answer) => {
                    let _ = answer.send(());
                }
            }
        }
    }
}

/// `queued` commands as steps: each append joins the latest group of its
/// collection when it continues it (its `expected` is that group's new
/// upper), else starts one. A flush stays behind everything queued
/// before it (a later append joining an earlier group only makes it
/// durable sooner).
fn coalesce(queued: impl Iterator<Item = AppendCommand>) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    for command in queued {
        match command {
            AppendCommand::Append {
                id,
                updates,
                expected,
                new_upper,
                done,
            } => {
                let latest = steps.iter_mut().rev().find_map(|s| match s {
                    Step::Append(g) if g.id == id => Some(g),
                    _ => None,
                });
                match latest {
                    Some(g) if g.new_upper == expected => {
                        g.updates.extend(updates);
                        g.new_upper = new_upper;
                        g.done.push(done);
                    }
                    _ => steps.push(Step::Append(Group {
                        id,
                        updates,
                        expected,
                        new_upper,
                        done: vec![done],
                    })),
                }
            }
            AppendCommand::Flush(answer) => steps.push(Step::Flush(answer)),
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    fn append(id: u64, from: u64, to: u64, log: &Arc<Mutex<Vec<String>>>) -> AppendCommand {
        let log = Arc::clone(log);
        AppendCommand::Append {
            id: GlobalId::User(id),
            updates: Vec::new(),
            expected: Frontier::at(from),
            new_upper: Frontier::at(to),
            done: Box::new(move |r| log.lock().unwrap().push(format!("{id}:{to}:{}", r.is_ok()))),
        }
    }

    #[test]
    fn continuing_appends_are_written_together_in_order() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let (flushed_tx, flushed) = std::sync::mpsc::channel();
        for c in [
            append(1, 0, 5, &log),
            append(2, 0, 3, &log),
            append(1, 5, 7, &log),
            AppendCommand::Flush(flushed_tx),
            append(1, 7, 9, &log),
            // Does not continue collection 2's upper: a group of its own,
            // which fails.
            append(2, 4, 6, &log),
        ] {
            tx.send(c).unwrap();
        }
        drop(tx);
        let writes = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&writes);
        run(rx, move |id, _, expected, new_upper| {
            seen.lock()
                .unwrap()
                .push((id, expected.clone(), new_upper.clone()));
            if id == GlobalId::User(2) && *expected == Frontier::at(4) {
                return Err(StorageError::InvalidUsage("gap".into()));
            }
            Ok(())
        });
        assert_eq!(
            *writes.lock().unwrap(),
            vec![
                (GlobalId::User(1), Frontier::at(0), Frontier::at(9)),
                (GlobalId::User(2), Frontier::at(0), Frontier::at(3)),
                (GlobalId::User(2), Frontier::at(4), Frontier::at(6)),
            ]
        );
        assert_eq!(
            *log.lock().unwrap(),
            vec!["1:5:true", "1:7:true", "1:9:true", "2:3:true", "2:6:false"]
        );
        assert!(flushed.recv().is_ok());
    }
}

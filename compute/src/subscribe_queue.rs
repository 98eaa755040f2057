//! The bounded hand-off between worker 0 and a subscribe's consumer.
//!
//! Worker 0 pushes into a [`SubscribeQueue`] and never waits: a consumer
//! that leaves more than the queue's bound of updates unread (beyond one
//! batch, however large) ends its subscribe with an error instead of
//! stalling the workers (and through them every other dataflow and
//! writer). Progress with no updates coalesces into the
//! newest queued event, so an idle, unread subscribe holds O(1) memory.

use std::collections::VecDeque;

use freshet_repr::{Timestamp, sqlstate};
use futures::task::AtomicWaker;
use parking_lot::Mutex;

use crate::error::DataflowError;
use crate::row::Row;

/// What the workers send a subscribe's consumer.
#[derive(Debug)]
pub(crate) enum QueuedEvent {
    /// Every update at a time before `upper`, consolidated and sorted by
    /// time (after any earlier event's); `complete`: nothing follows.
    Progress {
        updates: Vec<(Row, Timestamp, i64)>,
        upper: Timestamp,
        complete: bool,
    },
    /// The subscribe cannot continue.
    Failed(DataflowError),
}

#[derive(Debug, Default)]
struct Queue {
    events: VecDeque<QueuedEvent>,
    /// Updates queued and not yet taken.
    buffered: usize,
    /// No more events will be pushed (failed, complete, or abandoned).
    ended: bool,
}

/// The bounded hand-off between worker 0 and a subscribe's consumer.
#[derive(Debug)]
pub(crate) struct SubscribeQueue {
    queue: Mutex<Queue>,
    waker: AtomicWaker,
    /// Most updates that may wait for the consumer.
    limit: usize,
}

impl SubscribeQueue {
    /// Wake `waker` at the next push or end.
    pub(crate) fn register(&self, waker: &std::task::Waker) {
        self.waker.register(waker);
    }

    pub(crate) fn new(limit: usize) -> Self {
        SubscribeQueue {
            queue: Mutex::new(Queue::default()),
            waker: AtomicWaker::new(),
            limit: limit.max(1),
        }
    }

    /// Queue updates completed through `upper`. Returns whether the
    /// consumer still wants more (false once the subscribe has ended).
    pub(crate) fn push(
        &self,
        updates: Vec<(Row, Timestamp, i64)>,
        upper: Timestamp,
        complete: bool,
    ) -> bool {
        let mut q = self.queue.lock();
        if q.ended {
            return false;
        }
        // A consumer that has taken everything may receive any one batch
        // (a large snapshot); only a backlog past the bound ends it.
        if q.buffered > 0 && q.buffered + updates.len() > self.limit {
            q.events.push_back(QueuedEvent::Failed(DataflowError {
                code: sqlstate::CONFIGURATION_LIMIT_EXCEEDED.into(),
                message: format!(
                    "subscribe fell behind: its client left more than {} updates unread",
                    self.limit
                ),
            }));
            q.ended = true;
        } else {
            q.buffered += updates.len();
            let merged = match q.events.back_mut() {
                Some(QueuedEvent::Progress {
                    upper: last,
                    complete: last_complete,
                    ..
                }) if updates.is_empty() => {
                    *last = upper;
                    *last_complete = complete;
                    true
                }
                _ => false,
            };
            if !merged {
                q.events.push_back(QueuedEvent::Progress {
                    updates,
                    upper,
                    complete,
                });
            }
            q.ended = complete;
        }
        drop(q);
        self.waker.wake();
        !self.queue.lock().ended
    }

    /// End the subscribe with `error` (unless it already ended).
    pub(crate) fn fail(&self, error: DataflowError) {
        let mut q = self.queue.lock();
        if q.ended {
            return;
        }
        q.events.push_back(QueuedEvent::Failed(error));
        q.ended = true;
        drop(q);
        self.waker.wake();
    }

    pub(crate) fn abandon(&self) {
        let mut q = self.queue.lock();
        q.ended = true;
        q.events.clear();
        q.buffered = 0;
    }

    pub(crate) fn try_pop(&self) -> Option<QueuedEvent> {
        let mut q = self.queue.lock();
        let event = q.events.pop_front()?;
        if let QueuedEvent::Progress { updates, .. } = &event {
            q.buffered -= updates.len();
        }
        Some(event)
    }

    /// Whether nothing is queued and nothing more will be.
    pub(crate) fn drained(&self) -> bool {
        let q = self.queue.lock();
        q.ended && q.events.is_empty()
    }
}

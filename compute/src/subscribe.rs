//! Subscribes: a transient dataflow's output, delivered to the session
//! that asked for it as consolidated updates, one completed span of times
//! at a time.
//!
//! Worker 0 pushes into a [`SubscribeQueue`] and never waits: a consumer
//! that leaves more than the queue's bound of updates unread (beyond one
//! batch, however large) ends its subscribe with an error instead of
//! stalling the workers (and through them every other dataflow and
//! writer). Progress with no updates coalesces into the
//! newest queued event, so an idle, unread subscribe holds O(1) memory.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;

use arrow::array::RecordBatch;
use freshet_repr::sqlstate;
use freshet_repr::{GlobalId, Timestamp};
use futures::task::AtomicWaker;
use parking_lot::Mutex;

use crate::controller::ComputeController;
use crate::error::DataflowError;
use crate::row::{Row, RowCodec};
use crate::state::DataflowState;

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

    fn abandon(&self) {
        let mut q = self.queue.lock();
        q.ended = true;
        q.events.clear();
        q.buffered = 0;
    }

    fn try_pop(&self) -> Option<QueuedEvent> {
        let mut q = self.queue.lock();
        let event = q.events.pop_front()?;
        if let QueuedEvent::Progress { updates, .. } = &event {
            q.buffered -= updates.len();
        }
        Some(event)
    }

    /// Whether nothing is queued and nothing more will be.
    fn drained(&self) -> bool {
        let q = self.queue.lock();
        q.ended && q.events.is_empty()
    }
}

/// Updates a subscribe delivers: rows (every column nullable) with their
/// times and diffs, sorted by time, and how far the output is complete.
#[derive(Debug)]
pub struct SubscribeBatch {
    /// The rows.
    pub rows: RecordBatch,
    /// Each row's time.
    pub times: Vec<Timestamp>,
    /// Each row's multiplicity change (never zero).
    pub diffs: Vec<i64>,
    /// Every update at a time before this has been delivered.
    pub upper: Timestamp,
    /// The subscribe has delivered everything (its `UP TO`, or inputs
    /// that will never change again).
    pub complete: bool,
}

/// A running subscribe, owned by the session that started it. Dropping it
/// tears down the dataflow and releases its read holds.
pub struct Subscription {
    id: GlobalId,
    controller: Arc<ComputeController>,
    state: Arc<DataflowState>,
    queue: Arc<SubscribeQueue>,
    codec: Arc<RowCodec>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Subscription {
    pub(crate) fn new(
        controller: Arc<ComputeController>,
        state: Arc<DataflowState>,
        queue: Arc<SubscribeQueue>,
        codec: Arc<RowCodec>,
    ) -> Self {
        Subscription {
            id: state.id,
            controller,
            state,
            queue,
            codec,
        }
    }

    /// The dataflow's transient id.
    pub fn id(&self) -> GlobalId {
        self.id
    }

    /// The time its inputs were read at (the first updates' time).
    pub fn as_of(&self) -> Timestamp {
        self.state.as_of
    }

    /// The state compute keeps for it (introspection, ending it early).
    pub fn state(&self) -> &Arc<DataflowState> {
        &self.state
    }

    /// The next batch, waiting for it; `None` once the subscribe has
    /// delivered everything (after a batch with `complete`).
    pub async fn next(&mut self) -> Option<std::result::Result<SubscribeBatch, DataflowError>> {
        let event = poll_fn(|cx| {
            if let Some(e) = self.queue.try_pop() {
                return Poll::Ready(Some(e));
            }
            if self.queue.drained() {
                return Poll::Ready(None);
            }
            self.queue.waker.register(cx.waker());
            match self.queue.try_pop() {
                Some(e) => Poll::Ready(Some(e)),
                None if self.queue.drained() => Poll::Ready(None),
                None => Poll::Pending,
            }
        })
        .await?;
        Some(self.decode(event))
    }

    /// The next batch if one is queued, without waiting.
    pub fn try_next(&mut self) -> Option<std::result::Result<SubscribeBatch, DataflowError>> {
        let event = self.queue.try_pop()?;
        Some(self.decode(event))
    }

    fn decode(&self, event: QueuedEvent) -> std::result::Result<SubscribeBatch, DataflowError> {
        match event {
            QueuedEvent::Failed(e) => Err(e),
            QueuedEvent::Progress {
                updates,
                upper,
                complete,
            } => {
                let rows = self
                    .codec
                    .decode(updates.iter().map(|(r, _, _)| r))
                    .map_err(|e| DataflowError::internal(format!("decoding updates: {e}")))?;
                Ok(SubscribeBatch {
                    rows,
                    times: updates.iter().map(|(_, t, _)| *t).collect(),
                    diffs: updates.iter().map(|(_, _, d)| *d).collect(),
                    upper,
                    complete,
                })
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.queue.abandon();
        if let Err(e) = self.controller.drop_dataflow(self.id) {
            tracing::warn!(subscribe = %self.id, error = %e, "cannot drop subscribe dataflow");
        }
    }
}

//! Subscribes: a transient dataflow's output, delivered to the session
//! that asked for it as consolidated updates, one completed span of times
//! at a time, through a [`SubscribeQueue`] (see [`crate::subscribe_queue`]).

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;

use arrow::array::RecordBatch;
use freshet_repr::{GlobalId, Timestamp};

use crate::error::DataflowError;
use crate::row::RowCodec;
use crate::state::DataflowState;
use crate::subscribe_queue::{QueuedEvent, SubscribeQueue};

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

/// How a [`Subscription`] ends its dataflow when dropped: the controller
/// hands it this, so that the handle does not depend on the controller.
pub(crate) type EndDataflow = Box<dyn Fn(GlobalId) -> crate::error::Result<()> + Send + Sync>;

/// A running subscribe, owned by the session that started it. Dropping it
/// tears down the dataflow and releases its read holds.
pub struct Subscription {
    id: GlobalId,
    /// Tears the dataflow down (the controller's `drop_dataflow`).
    end: EndDataflow,
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
        end: EndDataflow,
        state: Arc<DataflowState>,
        queue: Arc<SubscribeQueue>,
        codec: Arc<RowCodec>,
    ) -> Self {
        Subscription {
            id: state.id,
            end,
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
            self.queue.register(cx.waker());
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
        if let Err(e) = (self.end)(self.id) {
            tracing::warn!(subscribe = %self.id, error = %e, "cannot drop subscribe dataflow");
        }
    }
}

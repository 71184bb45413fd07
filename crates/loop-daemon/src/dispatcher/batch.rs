//! The batch window (docs/agent-input.md): a dequeued delivery that has a
//! [`BatchKey`] — a review or one of its inline comments, a CI result of a commit — waits
//! until `routing.batchWindowSeconds` after it was queued, and the deliveries of the same
//! key queued meanwhile go with it into one paste. loop-core decides what joins and what
//! the paste shows; this module only holds the window.
//!
//! A delivery without a key (a conversation comment, a lifecycle event), a spawn, and a
//! key left in doubt by the previous process are never held. Whatever else the worker
//! takes off its queue during the window keeps its order and runs after the batch; a
//! stop ends the window at once.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use loop_core::batch::BatchKey;
use loop_core::log::{Kind, Line};
use tokio::sync::mpsc;

use super::Dispatcher;
use super::queue::{Item, Job};

impl Dispatcher {
    /// `first` and the jobs of its batch, in arrival order. Jobs taken off `receiver`
    /// that do not join are put in `held`, in order; their keys stay in `pending`.
    pub(crate) async fn gather(
        &self,
        first: Job,
        receiver: &mut mpsc::UnboundedReceiver<Item>,
        held: &mut VecDeque<Item>,
        pending: &Mutex<VecDeque<String>>,
    ) -> Vec<Job> {
        let window = self.config().routing.batch_window_seconds;
        let Some(key) = self.batchable(&first) else { return vec![first] };
        if window <= 0.0 {
            return vec![first];
        }
        let deadline = first.queued_at + Duration::from_secs_f64(window);
        let mut jobs = vec![first];
        let joins = |job: &Job| self.batchable(job).as_ref() == Some(&key);
        let mut kept = VecDeque::new();
        for item in held.drain(..) {
            match item {
                Item::Job(job) if joins(&job) => jobs.push(*job),
                other => kept.push_back(other),
            }
        }
        *held = kept;
        let mut stopping = held.iter().any(|item| matches!(item, Item::Stop));
        while !stopping {
            match tokio::time::timeout_at(deadline, receiver.recv()).await {
                Ok(Some(Item::Job(job))) if joins(&job) => jobs.push(*job),
                Ok(Some(item)) => {
                    stopping = matches!(item, Item::Stop);
                    held.push_back(item);
                }
                Ok(None) | Err(_) => stopping = true,
            }
        }
        for job in &jobs[1..] {
            taken(pending, job.cx.delivery_id.as_deref().unwrap_or_default());
        }
        if jobs.len() > 1 {
            let lead = jobs[0].cx.delivery_id.clone();
            for job in &jobs {
                let line = Line::info(Kind::DispatchBatched)
                    .work_item(&job.target)
                    .field("batch", key.describe())
                    .field("others", jobs.len() - 1)
                    .field("lead", &lead);
                self.events().emit_async(job.cx.stamp(line)).await;
            }
        }
        jobs
    }

    /// Whether `key` is one the previous process left in flight (not taken out).
    fn is_in_doubt(&self, key: &str) -> bool {
        let in_doubt = self.inner.in_doubt.lock().unwrap_or_else(PoisonError::into_inner);
        !in_doubt.is_empty() && in_doubt.contains(key)
    }

    /// The batch `job` may join: a delivery's key, unless it is left in doubt.
    fn batchable(&self, job: &Job) -> Option<BatchKey> {
        if job.spawn || job.cx.delivery_id.as_deref().is_some_and(|key| self.is_in_doubt(key)) {
            return None;
        }
        BatchKey::of(&job.event)
    }
}

/// Takes `key` out of the keys still queued (a batch takes jobs out of order).
pub(crate) fn taken(pending: &Mutex<VecDeque<String>>, key: &str) {
    let mut queued = pending.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(at) = queued.iter().position(|k| k == key) {
        queued.remove(at);
    }
}

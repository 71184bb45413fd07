//! Queues: one FIFO and one worker task per work item, so a session receives its events
//! one at a time and in order while different sessions are served in parallel — at most
//! `routing.maxConcurrentDispatches` at once, each bounded by
//! `routing.dispatchTimeoutSeconds` (reference §5.5, §5.12). A queue is created by the
//! first event for its item and retired once it is empty, so a long-lived daemon holds
//! queues for the items being worked on, not for every item it ever served.
//!
//! An event about an item whose spawn is in flight waits on the same queue, behind the
//! spawn, and is planned again when the worker reaches it (outside the permit: planning
//! is no dispatch); so does a close while the item's worker holds deliveries, which are
//! carried out before the close ends the session. The started reaction and the dispatch both happen inside the
//! concurrency permit. A
//! shutdown puts a stop at the tail of every queue, so what is queued still runs, and
//! aborts the queues still busy when the timeout ends; their queued keys are returned as
//! abandoned. The dispatch in flight is not abandoned work: it was taken.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use loop_core::WorkItemRef;
use loop_core::event::Event;
use loop_core::log::{Kind, Line};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Dispatcher, Inner};
use crate::pipeline::Planned;
use loop_core::plan::{Context, Decision};

/// One delivery or spawn waiting for its work item's worker.
#[derive(Debug)]
pub struct Job {
    pub event: Arc<Event>,
    pub cx: Context,
    /// The queue key: the record's work item, or the spawn target.
    pub target: WorkItemRef,
    /// Queued as a spawn (no session existed when it was decided).
    pub spawn: bool,
    /// When it was queued: a batch window runs from here.
    pub queued_at: tokio::time::Instant,
    /// Keeps [`Dispatcher::idle`] waiting until the job is done or dropped.
    busy: Busy,
    /// Counts it among what its worker holds until the job is done or dropped.
    _held: Counted,
    /// A spawn's: counts it in flight until the job is done or dropped.
    _spawning: Option<Counted>,
}

/// An event waiting behind its work item's spawn, planned again when the worker reaches
/// it ([`loop_core::plan::Step::AwaitSpawn`]).
#[derive(Debug)]
pub struct Replan {
    pub planned: Arc<Planned>,
    /// The work item whose worker it waits on.
    item: WorkItemRef,
    /// Its key among the keys still queued.
    key: String,
    /// Keeps [`Dispatcher::idle`] waiting until it is planned and carried out.
    _busy: Busy,
    /// Counts it among what its worker holds until it is carried out.
    _held: Counted,
}

/// How many jobs of each work item are in some state: spawns in flight
/// ([`loop_core::plan::Snapshot::spawning`]), or work its worker holds, queued or running
/// ([`loop_core::plan::Snapshot::busy`]). Counted by [`Counted`] guards.
#[derive(Debug, Default)]
pub struct Tally(Mutex<HashMap<WorkItemRef, usize>>);

impl Tally {
    /// The work items counted at least once.
    pub fn items(&self) -> BTreeSet<WorkItemRef> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).keys().cloned().collect()
    }
}

/// Counts `item` once in one of the dispatcher's [`Tally`]s while alive.
#[derive(Debug)]
pub struct Counted {
    dispatcher: Dispatcher,
    tally: fn(&Inner) -> &Tally,
    item: WorkItemRef,
}

impl Counted {
    fn new(dispatcher: &Dispatcher, tally: fn(&Inner) -> &Tally, item: &WorkItemRef) -> Self {
        let mut counts = tally(&dispatcher.inner).0.lock().unwrap_or_else(PoisonError::into_inner);
        *counts.entry(item.clone()).or_default() += 1;
        Self { dispatcher: dispatcher.clone(), tally, item: item.clone() }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let tally = (self.tally)(&self.dispatcher.inner);
        let mut counts = tally.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.item) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.item);
            }
        }
    }
}

/// Counts one unit of work while alive.
#[derive(Debug)]
pub struct Busy(Dispatcher);

impl Busy {
    pub fn new(dispatcher: &Dispatcher) -> Self {
        dispatcher.begin_work();
        Self(dispatcher.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.end_work();
    }
}

#[derive(Debug)]
pub(crate) enum Item {
    Job(Box<Job>),
    Replan(Box<Replan>),
    Stop,
}

/// A work item's queue and its worker.
#[derive(Debug)]
pub struct Queue {
    sender: mpsc::UnboundedSender<Item>,
    /// The keys queued and not yet taken by the worker.
    pending: Arc<Mutex<VecDeque<String>>>,
    worker: JoinHandle<()>,
}

impl Queue {
    fn start(dispatcher: Dispatcher, item: WorkItemRef) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        let pending = Arc::new(Mutex::new(VecDeque::new()));
        let worker = tokio::spawn(work(dispatcher, item, receiver, pending.clone()));
        Self { sender, pending, worker }
    }
}

impl Dispatcher {
    /// Enqueues a delivery (`spawn: false`) or a spawn on `target`'s queue and logs
    /// `dispatch.queued`. Once shutting down nothing is queued: the key is released and
    /// `false` returned.
    pub(crate) async fn enqueue_or_release(
        &self,
        event: Arc<Event>,
        cx: &Context,
        target: WorkItemRef,
        spawn: bool,
    ) -> bool {
        let queued = Decision::Queued { item: target.clone(), spawn };
        self.put_or_release(cx, target.clone(), queued, |busy, held| {
            let spawning = spawn.then(|| Counted::new(self, |inner| &inner.spawning, &target));
            let queued_at = tokio::time::Instant::now();
            let job = Job {
                event,
                cx: cx.clone(),
                target,
                spawn,
                queued_at,
                busy,
                _held: held,
                _spawning: spawning,
            };
            Item::Job(Box::new(job))
        })
        .await
    }

    /// Queues `planned` on `item`'s queue, behind what it holds, to be planned again
    /// there, and logs `awaiting` (`dispatch.awaiting_spawn` or `dispatch.awaiting_queue`).
    /// Once shutting down nothing is queued: the key is released and `false` returned.
    pub(crate) async fn await_or_release(
        &self,
        planned: Arc<Planned>,
        cx: &Context,
        item: WorkItemRef,
        awaiting: Decision,
    ) -> bool {
        self.put_or_release(cx, item.clone(), awaiting, |busy, held| {
            let key = cx.delivery_id.clone().unwrap_or_default();
            Item::Replan(Box::new(Replan { planned, item, key, _busy: busy, _held: held }))
        })
        .await
    }

    /// Records `queued` and puts what `item` makes on `target`'s queue, holding the
    /// webhook's inbox mark until it ends; once shutting down, releases the key instead.
    async fn put_or_release(
        &self,
        cx: &Context,
        target: WorkItemRef,
        queued: Decision,
        item: impl FnOnce(Busy, Counted) -> Item,
    ) -> bool {
        if self.inner.closing.load(std::sync::atomic::Ordering::SeqCst) {
            self.record(&Decision::ShuttingDown { item: target }, cx).await;
            return false;
        }
        self.record(&queued, cx).await;
        if let (Some(seq), Some(marks)) = (cx.inbox_seq, self.inner.inbox_marks.get()) {
            marks.hold(seq);
        }
        let item = item(Busy::new(self), Counted::new(self, |inner| &inner.held, &target));
        let key = cx.delivery_id.clone().unwrap_or_default();
        let mut queues = self.inner.queues.lock().unwrap_or_else(PoisonError::into_inner);
        let queue = queues
            .entry(target.clone())
            .or_insert_with(|| Queue::start(self.clone(), target.clone()));
        queue.pending.lock().unwrap_or_else(PoisonError::into_inner).push_back(key.clone());
        if let Err(mpsc::error::SendError(item)) = queue.sender.send(item) {
            // The worker died (a panic in a dispatch): start a fresh one for this item.
            let fresh = Queue::start(self.clone(), target.clone());
            fresh.pending.lock().unwrap_or_else(PoisonError::into_inner).push_back(key);
            // A fresh worker holds its receiver until it sees `Stop`.
            let _ = fresh.sender.send(item);
            queues.insert(target, fresh);
        }
        true
    }

    /// Waits, outside the concurrency bound and the dispatch timeout, while the agent
    /// of a delivery's session may not be typed into, or while a spawn's harness is cut
    /// off by a usage limit (docs/agent-states.md), with one `dispatch.held` line per job
    /// saying why. `false`: the process is stopping and the jobs were not let through.
    async fn until_agent_free(&self, jobs: &[Job]) -> bool {
        let job = &jobs[0];
        let (target, harness) = (job.target.tmux_session(), self.inner.harness.name());
        let holding = |agents: &crate::agent_state::AgentStates| match job.spawn {
            true => agents.holding_spawn(harness),
            false => agents.holding(&target),
        };
        let agents = &self.inner.agents;
        let Some(reason) = holding(agents) else { return true };
        let metrics = self.inner.metrics.get();
        for job in jobs {
            if let Some(metrics) = metrics {
                metrics.held(reason);
            }
            let held = Line::info(Kind::DispatchHeld)
                .work_item(&job.target)
                .field("delivery_id", &job.cx.delivery_id)
                .field("tmux_target", &target)
                .field("reason", reason);
            self.events().emit_async(held).await;
        }
        let released = agents.until(holding).await;
        if let (true, Some(metrics)) = (released, metrics) {
            (0..jobs.len()).for_each(|_| metrics.released());
        }
        released
    }

    /// Runs one job, or the jobs of one batch pasted together, inside a concurrency
    /// permit and the dispatch timeout, then records each job's outcome and sends its
    /// completion reaction.
    async fn run(&self, jobs: Vec<Job>) {
        let started = std::time::Instant::now();
        let _permit = self.inner.bound.acquire().await;
        let reactions: Vec<_> = jobs.iter().map(|job| self.react(&job.event, &job.cx)).collect();
        let seconds = self.config().routing.dispatch_timeout_seconds;
        let decisions =
            match tokio::time::timeout(Duration::from_secs(seconds), self.carry_out(&jobs)).await {
                Ok(decisions) => decisions,
                Err(_elapsed) => jobs
                    .iter()
                    .map(|job| Decision::TimedOut { item: job.target.clone(), seconds })
                    .collect(),
            };
        for (job, decision) in jobs.iter().zip(&decisions) {
            self.record(decision, &job.cx).await;
            if let Some(metrics) = self.inner.metrics.get() {
                metrics.dispatch_latency(started.elapsed());
            }
        }
        if let Some(Decision::Spawned { item, harness, target, .. }) = decisions.first() {
            self.announce(item, harness, target).await;
        }
        for (reaction, decision) in reactions.into_iter().zip(&decisions) {
            if let Some(reaction) = reaction {
                // The reaction task may have ended (no permit to react); nothing to do then.
                let _ = reaction.send(decision.succeeded());
            }
        }
        for job in jobs {
            if let (Some(seq), Some(marks)) = (job.cx.inbox_seq, self.inner.inbox_marks.get()) {
                marks.release(seq).await;
            }
            drop(job.busy);
        }
    }
}

impl Dispatcher {
    /// Plans an event that waited on its work item's worker again, now that the worker
    /// reached it (so nothing there is ahead of it any more), and carries the plan out.
    /// Its key was claimed when it was first planned and is still in flight, so it is
    /// not claimed again.
    async fn replan(&self, replan: Replan) {
        let planned = self.plan(&replan.planned, Some(replan.item.clone())).await;
        let plan = loop_core::plan::Plan { claim: None, ..planned };
        let seq = plan.cx.inbox_seq;
        // A stamp that could not be written is logged; the poller's close is not retried.
        let _logged = self.carry_out_plan(plan, &replan.planned).await;
        if let (Some(seq), Some(marks)) = (seq, self.inner.inbox_marks.get()) {
            marks.release(seq).await;
        }
    }
}

async fn work(
    dispatcher: Dispatcher,
    item: WorkItemRef,
    mut receiver: mpsc::UnboundedReceiver<Item>,
    pending: Arc<Mutex<VecDeque<String>>>,
) {
    // What a batch window took off the queue without taking it along, in order.
    let mut held = VecDeque::new();
    loop {
        let Some(next) =
            held.pop_front().or_else(|| dispatcher.next_or_retire(&item, &mut receiver))
        else {
            break;
        };
        match next {
            Item::Stop => break,
            Item::Job(job) => {
                super::batch::taken(&pending, job.cx.delivery_id.as_deref().unwrap_or_default());
                let jobs = dispatcher.gather(*job, &mut receiver, &mut held, &pending).await;
                if !dispatcher.until_agent_free(&jobs).await {
                    // Stopping while held: not delivered, so not taken — left for the
                    // next start with what is still queued behind it.
                    let mut keys = pending.lock().unwrap_or_else(PoisonError::into_inner);
                    for job in jobs.iter().rev() {
                        keys.push_front(job.cx.delivery_id.clone().unwrap_or_default());
                    }
                    break;
                }
                dispatcher.run(jobs).await;
            }
            Item::Replan(replan) => {
                super::batch::taken(&pending, &replan.key);
                dispatcher.replan(*replan).await;
            }
        }
    }
}

impl Dispatcher {
    /// The next thing on `item`'s queue; when there is none, takes the queue out of the
    /// map and returns `None` for its worker to end. Things are put on a queue under the
    /// map's lock, so once it is out nothing more reaches it: the next event for the item
    /// starts a fresh one, and order holds because this worker has nothing left to do.
    fn next_or_retire(
        &self,
        item: &WorkItemRef,
        receiver: &mut mpsc::UnboundedReceiver<Item>,
    ) -> Option<Item> {
        if let Ok(next) = receiver.try_recv() {
            return Some(next);
        }
        let mut queues = self.inner.queues.lock().unwrap_or_else(PoisonError::into_inner);
        if let Ok(next) = receiver.try_recv() {
            return Some(next);
        }
        // The entry is this worker's: another is only started for an item whose worker
        // died, and a shutdown has taken it out already.
        queues.remove(item);
        None
    }
}

/// Stops every queue after what it holds, waits up to `timeout` in all, aborts the rest
/// and returns the keys they still held.
pub async fn stop_all(queues: Vec<Queue>, timeout: Duration) -> Vec<String> {
    for queue in &queues {
        // A worker that already ended has nothing queued.
        let _ = queue.sender.send(Item::Stop);
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let mut abandoned = Vec::new();
    for mut queue in queues {
        if tokio::time::timeout_at(deadline, &mut queue.worker).await.is_err() {
            queue.worker.abort();
        }
        // What a worker still held when it ended (held for its agent) or was aborted.
        let left = queue.pending.lock().unwrap_or_else(PoisonError::into_inner).clone();
        abandoned.extend(left);
    }
    abandoned
}

//! The dispatcher: carries out what the pipeline ([`crate::pipeline`]) decided about a
//! judged event — delivers it into a work item's live agent session, spawns one, executes
//! a control command, or ends a session on a closure — and records every outcome.
//!
//! It owns the runtime pieces: one FIFO queue and one worker task per work item
//! (serial per session), a live bound of `routing.maxConcurrentDispatches` across them,
//! `routing.dispatchTimeoutSeconds` per dispatch, the durable delivery ledger
//! (`loop_store::delivery`), the existence-check cache, reactions and announcements.
//! tmux and file IO run on blocking threads, never on the async runtime.
//!
//! It decides nothing loop-core decides (guards, control semantics, spawn policy,
//! prompts); it never reads the config file itself (the service hands it each reloaded
//! config through [`Dispatcher::set_config`]).
//!
//! Layout:
//! - `bound`: the concurrency bound, resized when a reload changes it.
//! - `queue`: per-work-item workers, concurrency bound, timeout, shutdown.
//! - `batch`: the window in which a review's (or a commit's CI) deliveries join one paste.
//! - `job`: delivering into a session, spawning one, respawning a dead one.
//! - `ci`: reading a failing CI run's evidence within `routing.ci`'s budget.
//! - `command`: executing control commands (record, pause, resume, stop, cleanup, roster).
//! - `closure`: closes, the `ended` stamp, reopen.
//! - `github`: existence checks, reactions and announcements (best-effort).
//! - `limit`: waiting out a usage limit and waking the agent it cut off.

mod batch;
mod bound;
mod ci;
pub(crate) mod closure;
mod command;
mod github;
mod graph;
mod job;
mod limit;
mod queue;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

pub use self::graph::{Claimed, GraphTarget, GraphView, InnerLoop, record_pull_request};
use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::config::Config;
use loop_core::log::{Kind, Line};
pub use loop_core::poll::DeliveryStatus;
use loop_core::route::ExistenceCache;
use loop_github::GithubClient;
use loop_sessions::registry::Registry as SessionRegistry;
use loop_sessions::trust::ClaudeFiles;
use loop_sessions::{Harness, Tmux};
use loop_store::delivery::DeliveryLog;
use loop_store::{EventLog, Mark, StateStore, StoreError};
use tokio::sync::watch;

pub(crate) use self::command::{RosterOutcome, workspaces};
use loop_core::plan::{Context, Decision, LedgerEffect, Snapshot, endpoint_for};

/// Why the dispatcher could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum DispatcherError {
    #[error("cannot read the delivery ledger under `{root}`; check the state root's permissions")]
    Ledger {
        root: std::path::PathBuf,
        #[source]
        source: StoreError,
    },
}

/// What the dispatcher is built from.
#[derive(Debug)]
pub struct DispatcherParts {
    pub config: Arc<Config>,
    pub store: StateStore,
    /// `None`: no GitHub access (no existence checks, reactions or announcements).
    pub github: Option<GithubClient>,
    pub tmux: Arc<Tmux>,
    /// The harness new sessions are spawned with (`routing.defaultHarness`).
    pub harness: Arc<dyn Harness>,
    /// Claude Code's files, for trust and plugin pre-seeding; `None`: no pre-seeding.
    pub claude_files: Option<ClaudeFiles>,
    /// the-loop's Claude Code plugin, registered before each Claude spawn while
    /// `routing.harnessPlugins.enabled`; `None`: never.
    pub plugin: Option<loop_sessions::plugin::PluginSite>,
}

/// The dispatcher; cheap to clone (one shared state).
#[derive(Debug, Clone)]
pub struct Dispatcher {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: RwLock<Arc<Config>>,
    store: StateStore,
    /// The session registry's rules over `store`'s local records.
    registry: SessionRegistry,
    github: Option<GithubClient>,
    tmux: Arc<Tmux>,
    harness: Arc<dyn Harness>,
    claude_files: Option<ClaudeFiles>,
    plugin: Option<loop_sessions::plugin::PluginSite>,
    ledger: Mutex<DeliveryLog>,
    /// Keys the previous process left in flight: each may have been pasted just before
    /// it ended, so its first delivery in this process asks the harness first (taken
    /// out on that delivery; docs/dispatcher.md, "In doubt").
    in_doubt: Mutex<std::collections::HashSet<String>>,
    existence: Mutex<ExistenceCache>,
    reactions: github::Reactions,
    /// The heads (`repo@sha`) whose CI failure was pasted, newest last (bounded): a pass
    /// on one of them is pasted as one line.
    ci_failures: Mutex<std::collections::VecDeque<String>>,
    /// What each session checkout is for its work item (its origin remote), judged once,
    /// so a delivery does not run git to judge it again (forgotten when the session
    /// closes).
    proven_checkouts:
        Mutex<HashMap<(WorkItemRef, std::path::PathBuf), loop_core::checkout::Verdict>>,
    /// The `graph.skipped` lines said: once per session checkout and reason (likewise).
    graph_skips: Mutex<std::collections::HashSet<(WorkItemRef, std::path::PathBuf, &'static str)>>,
    queues: Mutex<HashMap<WorkItemRef, queue::Queue>>,
    /// Jobs queued to spawn each work item's session and not yet ended.
    spawning: queue::Tally,
    /// Jobs and replans on each work item's queue, queued or running.
    held: queue::Tally,
    /// `routing.maxConcurrentDispatches`, following the config in force.
    bound: bound::Bound,
    /// Jobs queued or running, and reactions in flight.
    busy: watch::Sender<usize>,
    closing: std::sync::atomic::AtomicBool,
    /// The runtime the dispatcher was opened on, for callers on blocking threads.
    runtime: tokio::runtime::Handle,
    /// Where decided deliveries are counted (`GET /metrics`), once set.
    metrics: std::sync::OnceLock<crate::metrics::Metrics>,
    /// Every live agent's state, kept by the watcher: a delivery waits here while its
    /// agent is at a dialog or cut off by a limit.
    agents: Arc<crate::agent_state::AgentStates>,
    /// The receiver's inbox, whose `processed` marks of the webhooks this dispatcher
    /// queued work for it sends when that work ends, once set.
    inbox_marks: std::sync::OnceLock<Arc<crate::receiver::InboxMarks>>,
}

impl Dispatcher {
    /// Opens the dispatcher over `parts.store`: loads the delivery ledger and releases
    /// the in-flight marks a previous process left (`dispatch.abandoned`).
    pub async fn open(parts: DispatcherParts) -> Result<Self, DispatcherError> {
        let capacity = parts.config.routing.dedup_cache_size as usize;
        let store = parts.store.clone();
        let (ledger, abandoned) =
            blocking(move || store.open_delivery_log(capacity)).await.map_err(|source| {
                DispatcherError::Ledger { root: parts.store.layout().root().to_owned(), source }
            })?;
        let bound = bound::Bound::new(parts.config.routing.max_concurrent_dispatches);
        let dispatcher = Self {
            inner: Arc::new(Inner {
                config: RwLock::new(parts.config),
                registry: SessionRegistry::new(parts.store.clone()),
                store: parts.store,
                github: parts.github,
                tmux: parts.tmux,
                harness: parts.harness,
                claude_files: parts.claude_files,
                plugin: parts.plugin,
                ledger: Mutex::new(ledger),
                in_doubt: Mutex::new(abandoned.iter().cloned().collect()),
                existence: Mutex::new(ExistenceCache::new(github::EXISTENCE_CACHE_CAPACITY)),
                reactions: github::Reactions::default(),
                ci_failures: Mutex::default(),
                proven_checkouts: Mutex::default(),
                graph_skips: Mutex::default(),
                queues: Mutex::default(),
                spawning: queue::Tally::default(),
                held: queue::Tally::default(),
                bound,
                busy: watch::Sender::new(0),
                closing: std::sync::atomic::AtomicBool::new(false),
                runtime: tokio::runtime::Handle::current(),
                metrics: std::sync::OnceLock::new(),
                inbox_marks: std::sync::OnceLock::new(),
                agents: Arc::default(),
            }),
        };
        if !abandoned.is_empty() {
            dispatcher
                .events()
                .emit_async(
                    Line::warning(Kind::DispatchAbandoned)
                        .field("count", abandoned.len())
                        .field("delivery_ids", &abandoned)
                        .field("reason", "previous-process-ended"),
                )
                .await;
        }
        Ok(dispatcher)
    }

    /// The config in force.
    pub fn config(&self) -> Arc<Config> {
        self.inner.config.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Puts a reloaded config in force for every later decision: the dedup capacity and
    /// the concurrency bound follow it at once (a raised bound starts waiting dispatches;
    /// a lowered one lets the running ones finish), `dispatchTimeoutSeconds` from the
    /// next dispatch on.
    pub fn set_config(&self, config: Arc<Config>) {
        let capacity = config.routing.dedup_cache_size as usize;
        self.inner.bound.resize(config.routing.max_concurrent_dispatches);
        *self.inner.config.write().unwrap_or_else(PoisonError::into_inner) = config;
        self.ledger().set_capacity(capacity);
    }

    /// The runtime the dispatcher runs on (for synchronous callers on blocking threads).
    pub fn runtime(&self) -> &tokio::runtime::Handle {
        &self.inner.runtime
    }

    pub fn store(&self) -> &StateStore {
        &self.inner.store
    }

    /// Every live agent's state (docs/agent-states.md).
    pub fn agents(&self) -> &Arc<crate::agent_state::AgentStates> {
        &self.inner.agents
    }

    /// The tmux server its sessions run on (the demo watches its sessions there).
    pub fn tmux(&self) -> &Arc<Tmux> {
        &self.inner.tmux
    }

    /// The harness its sessions run.
    pub(crate) fn harness(&self) -> &Arc<dyn Harness> {
        &self.inner.harness
    }

    /// The client of the work items' host, when there is GitHub access.
    pub(crate) fn github(&self) -> Option<&GithubClient> {
        self.inner.github.as_ref()
    }

    pub(crate) fn events(&self) -> &EventLog {
        self.inner.store.events()
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, DeliveryLog> {
        self.inner.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// From now on, a webhook's jobs hold its inbox `processed` mark until they end
    /// (the first receiver's inbox; a later call is ignored).
    pub fn send_inbox_marks(&self, marks: Arc<crate::receiver::InboxMarks>) {
        let _ = self.inner.inbox_marks.set(marks);
    }

    /// Whether `key` was left in flight by the previous process and not yet delivered
    /// in this one; answers `true` once per key.
    fn take_in_doubt(&self, key: &str) -> bool {
        let mut in_doubt = self.inner.in_doubt.lock().unwrap_or_else(PoisonError::into_inner);
        !in_doubt.is_empty() && in_doubt.remove(key)
    }

    /// Where the delivery `key` stands for `refs`, for the poller's retry accounting
    /// (reference §5.10), in the contract's precedence: done (an endpoint one of the refs
    /// resolves to holds it in `recentDeliveries`), settled, done again when the ledger
    /// kept it (ended for good: delivered, to whichever endpoint, or dropped for good —
    /// nothing for the poller to wait for or retry; §9 edge 19, docs/dispatcher.md), in
    /// flight (taken in), unhandled (never taken in, or released).
    pub async fn delivery_status(&self, key: &str, refs: &[WorkItemRef]) -> DeliveryStatus {
        if key.is_empty() {
            return DeliveryStatus::Unhandled;
        }
        let registry = self.snapshot().await;
        let config = self.config();
        let done = refs.iter().any(|item| {
            registry.matches(std::slice::from_ref(item)).into_iter().any(|record| {
                let mode = config.routing.tmux.session_per_pr;
                let (_, endpoint) = endpoint_for(record, Some(item), mode);
                endpoint.is_some_and(|e| e.has_delivered(key))
            })
        });
        if done {
            return DeliveryStatus::Done;
        }
        match self.ledger().mark_of(key) {
            Some(Mark::Settled { reason }) => DeliveryStatus::Settled(reason.clone()),
            Some(Mark::Kept) => DeliveryStatus::Done,
            Some(Mark::Inflight) => DeliveryStatus::InFlight,
            None => DeliveryStatus::Unhandled,
        }
    }

    /// The ledger's mark for `key`.
    pub(crate) fn mark_of(&self, key: &str) -> Option<Mark> {
        self.ledger().mark_of(key).cloned()
    }

    /// How many work items have a queue (and its worker task) now: those with work
    /// queued or being carried out, as a queue is retired once empty.
    pub fn queued_items(&self) -> usize {
        self.inner.queues.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Resolves once no job is queued or running and no reaction is in flight.
    pub async fn idle(&self) {
        let mut busy = self.inner.busy.subscribe();
        // The sender lives in `inner`, which `self` keeps alive.
        let _ = busy.wait_for(|n| *n == 0).await;
    }

    fn begin_work(&self) {
        self.inner.busy.send_modify(|n| *n += 1);
    }

    fn end_work(&self) {
        self.inner.busy.send_modify(|n| *n = n.saturating_sub(1));
    }

    /// The live session records, read on a blocking thread; an unreadable registry reads
    /// as empty (logged), never as an error into a dispatch.
    pub(crate) async fn snapshot(&self) -> Snapshot {
        let this = self.clone();
        blocking(move || this.snapshot_now()).await
    }

    /// [`Dispatcher::snapshot`] on the calling thread (file IO: a blocking thread's).
    ///
    /// The spawns in flight are read before the records: a spawn writes its record before
    /// it stops counting as in flight, so an item is always seen either spawning or
    /// recorded.
    pub(crate) fn snapshot_now(&self) -> Snapshot {
        let (spawning, busy) = (self.inner.spawning.items(), self.inner.held.items());
        let records = self.inner.store.live_records().unwrap_or_else(|err| {
            self.events()
                .emit(Line::error(Kind::RegistryUnreadable).field("error", err.to_string()));
            Vec::new()
        });
        Snapshot { records, spawning, busy, exited: self.inner.agents.exited() }
    }

    /// Takes `key` in; `false` when it is a duplicate.
    pub(crate) async fn take_in(&self, key: &str) -> bool {
        let key = key.to_owned();
        // A line that could not be written leaves the key taken in memory all the same.
        self.change_ledger(move |ledger| ledger.take_in(&key, Timestamp::now()))
            .await
            .unwrap_or(true)
    }

    /// Counts every decided delivery in `metrics` from now on (the first call wins).
    pub fn count_in(&self, metrics: crate::metrics::Metrics) {
        let _ = self.inner.metrics.set(metrics);
    }

    /// Where decided deliveries are counted, once set (the poll ingress's judging counts
    /// its drops there too).
    pub(crate) fn metrics(&self) -> Option<&crate::metrics::Metrics> {
        self.inner.metrics.get()
    }

    /// Writes the decision's line, counts it and applies its ledger effect to
    /// `cx.delivery_id`.
    pub(crate) async fn record(&self, decision: &Decision, cx: &Context) {
        for line in decision.lines(cx) {
            self.events().emit_async(line).await;
        }
        if let Some(metrics) = self.inner.metrics.get() {
            metrics.decision(decision);
        }
        let Some(key) = cx.delivery_id.clone() else { return };
        let effect = decision.ledger();
        if matches!(effect, LedgerEffect::Untouched) {
            return;
        }
        self.change_ledger(move |ledger| {
            let now = Timestamp::now();
            match effect {
                LedgerEffect::Untouched => Ok(()),
                LedgerEffect::Keep => ledger.keep(&key, now),
                LedgerEffect::Settle(reason) => ledger.settle(&key, reason, now),
                LedgerEffect::Release => ledger.release(&key, now).map(|_released| ()),
            }
        })
        .await;
    }

    /// Applies one change to the delivery ledger on a blocking thread: in memory, and one
    /// line appended to its log (no fsync; `loop_store::delivery`). A line that could not
    /// be written is logged (`dispatch.ledger_write_failed`) and `None` returned; the
    /// in-memory ledger holds the change either way.
    async fn change_ledger<T: Send + 'static>(
        &self,
        change: impl FnOnce(&mut DeliveryLog) -> Result<T, StoreError> + Send + 'static,
    ) -> Option<T> {
        let this = self.clone();
        match blocking(move || change(&mut this.ledger())).await {
            Ok(value) => Some(value),
            Err(err) => {
                self.events()
                    .emit_async(
                        Line::warning(Kind::DispatchLedgerWriteFailed)
                            .field("error", err.to_string()),
                    )
                    .await;
                None
            }
        }
    }

    /// Stops taking work, lets each queue finish what it holds for up to `timeout`, and
    /// reports (`dispatch.abandoned`) and releases the keys still queued after that. The
    /// dispatch in flight on a queue is not counted as abandoned.
    pub async fn shutdown(&self, timeout: Duration) -> Vec<String> {
        self.inner.closing.store(true, std::sync::atomic::Ordering::SeqCst);
        // A delivery held for its agent stays unclaimed, for the next start.
        self.inner.agents.close();
        let queues: Vec<queue::Queue> = {
            let mut queues = self.inner.queues.lock().unwrap_or_else(PoisonError::into_inner);
            queues.drain().map(|(_, q)| q).collect()
        };
        let abandoned = queue::stop_all(queues, timeout).await;
        if !abandoned.is_empty() {
            let keys = abandoned.clone();
            self.change_ledger(move |ledger| {
                let now = Timestamp::now();
                keys.iter()
                    .map(|key| ledger.release(key, now).map(|_released| ()))
                    .fold(Ok(()), Result::and)
            })
            .await;
            self.events()
                .emit_async(
                    Line::warning(Kind::DispatchAbandoned)
                        .field("count", abandoned.len())
                        .field("delivery_ids", &abandoned),
                )
                .await;
        }
        abandoned
    }
}

thread_local! {
    /// Set while a thread of its own that may block drives a dispatcher future with
    /// `block_on` ([`on_own_thread`]): its blocking work runs right there.
    static MAY_BLOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `drive` (which `block_on`s a dispatcher future) with the blocking work of that
/// future done inline on this thread, which must be a thread of its own, never one of the
/// runtime's: the receiver's processing thread hands each delivery over this way, and a
/// hop to the blocking pool and back per step would cost two thread wake-ups each.
pub(crate) fn on_own_thread<T>(drive: impl FnOnce() -> T) -> T {
    /// Puts the flag back however `drive` ends (a panic included).
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            MAY_BLOCK.set(self.0);
        }
    }
    let _restore = Restore(MAY_BLOCK.replace(true));
    drive()
}

/// Runs blocking work (file IO, tmux) off the async runtime: on the blocking pool, or
/// inline on a thread of its own ([`on_own_thread`]).
pub(crate) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    if MAY_BLOCK.get() {
        return f();
    }
    match tokio::task::spawn_blocking(f).await {
        Ok(value) => value,
        // A blocking task is only cancelled when the runtime shuts down, and then the
        // future awaiting it is dropped first; what is left is the task's own panic.
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}

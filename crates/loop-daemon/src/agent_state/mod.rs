//! The agents' states, kept for every live session (docs/agent-states.md): a table the
//! watcher ([`watch`]) keeps current from the hooks' spool and the panes, which the
//! dispatcher reads before it types ([`AgentStates::until_free`]) and the control plane
//! serves on its session rows. What moves a state is loop-core's
//! ([`loop_core::agent_state`]); this room only holds the result and wakes who waits.
//!
//! A usage limit is its harness's (the account on this machine): while one of its agents
//! is cut off, nothing is typed into any of its sessions and none is spawned. At the
//! reset the dispatcher wakes the agent the limit cut off ([`AgentStates::woken`]); what
//! was held goes in after that.
//!
//! Layout:
//! - this module: the table, and the wait a held delivery or spawn makes;
//! - [`watch`]: the watcher task — spool and pane read every second, `agent.state` lines.

pub mod watch;

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use loop_core::agent_state::{AgentState, Tracked};
use tokio::sync::watch as channel;

/// A state change the watcher saw, for whoever tells the work item about it.
#[derive(Debug, Clone)]
pub struct Change {
    /// The work item whose session it is.
    pub item: loop_core::WorkItemRef,
    /// Its tmux session.
    pub target: String,
    /// The state it left.
    pub before: AgentState,
    pub tracked: Tracked,
}

/// How long a wait sleeps between looks when nothing wakes it (every change does).
const RECHECK: Duration = Duration::from_secs(5);

/// One watched agent.
#[derive(Debug, Clone)]
struct Entry {
    /// The harness it runs (whose account a limit cuts off).
    harness: String,
    tracked: Tracked,
    /// The limit it was woken from ([`limit_key`]), once the dispatcher did.
    woken: Option<Timestamp>,
}

/// Every live session's agent state, by tmux session name.
#[derive(Debug)]
pub struct AgentStates {
    table: Mutex<HashMap<String, Entry>>,
    /// Bumped on every change, and on close: wakes held deliveries.
    changed: channel::Sender<u64>,
    closing: std::sync::atomic::AtomicBool,
}

impl Default for AgentStates {
    fn default() -> Self {
        Self {
            table: Mutex::default(),
            changed: channel::Sender::new(0),
            closing: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl AgentStates {
    /// The state of the agent in tmux session `target`, when it is watched.
    pub fn seen(&self, target: &str) -> Option<Tracked> {
        self.lock().get(target).map(|entry| entry.tracked.clone())
    }

    /// Every watched agent's state.
    pub fn all(&self) -> HashMap<String, Tracked> {
        self.lock().iter().map(|(target, entry)| (target.clone(), entry.tracked.clone())).collect()
    }

    /// Puts `tracked` in force for `target`, an agent of `harness`, waking held
    /// deliveries.
    pub(crate) fn set(&self, target: &str, harness: &str, tracked: Tracked) {
        let mut table = self.lock();
        let woken = table.get(target).and_then(|entry| entry.woken);
        let entry = Entry { harness: harness.to_owned(), tracked, woken };
        table.insert(target.to_owned(), entry);
        drop(table);
        self.changed.send_modify(|generation| *generation += 1);
    }

    /// How many harnesses a usage limit cuts off now.
    pub fn limited_harnesses(&self) -> usize {
        let table = self.lock();
        let cut_off = table.values().filter(|entry| entry.cut_off()).map(|entry| &entry.harness);
        cut_off.collect::<std::collections::BTreeSet<_>>().len()
    }

    /// The tmux sessions whose agent is seen exited.
    pub fn exited(&self) -> std::collections::BTreeSet<String> {
        let table = self.lock();
        let exited = table.iter().filter(|(_, entry)| entry.tracked.state == AgentState::Exited);
        exited.map(|(target, _)| target.clone()).collect()
    }

    /// Records that the agent in `target` was woken from the limit keyed `limit` (its
    /// [`limit_key`]): what its limit held may go in.
    pub fn woken(&self, target: &str, limit: Timestamp) {
        if let Some(entry) = self.lock().get_mut(target) {
            entry.woken = Some(limit);
        }
        self.changed.send_modify(|generation| *generation += 1);
    }

    /// Forgets `target` (its session is no longer live).
    pub(crate) fn forget(&self, target: &str) {
        if self.lock().remove(target).is_some() {
            self.changed.send_modify(|generation| *generation += 1);
        }
    }

    /// The targets watched.
    pub(crate) fn targets(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// Ends every wait: the process is stopping.
    pub fn close(&self) {
        self.closing.store(true, std::sync::atomic::Ordering::SeqCst);
        self.changed.send_modify(|generation| *generation += 1);
    }

    /// Why a delivery into `target` must wait now, if it must: its agent's state's own
    /// reason (a limit until its agent was woken from it), else a limit on its harness.
    pub fn holding(&self, target: &str) -> Option<&'static str> {
        let table = self.lock();
        let entry = table.get(target)?;
        let own = match &entry.tracked.state {
            AgentState::Limited { .. } if !entry.cut_off() => None,
            state => state.holds_delivery(),
        };
        own.or_else(|| Self::harness_limit(&table, &entry.harness))
    }

    /// Why a spawn of `harness` must wait now, if it must: one of its agents is cut off
    /// by a usage limit.
    pub fn holding_spawn(&self, harness: &str) -> Option<&'static str> {
        Self::harness_limit(&self.lock(), harness)
    }

    fn harness_limit(table: &HashMap<String, Entry>, harness: &str) -> Option<&'static str> {
        table
            .values()
            .any(|entry| entry.harness == harness && entry.cut_off())
            .then_some("its harness is cut off by a usage limit")
    }

    /// Waits until `holding` says nothing holds (it names why it does). `false`:
    /// the process is stopping and nothing was let through (a held delivery stays
    /// unclaimed, and comes again on the next start).
    pub async fn until(&self, holding: impl Fn(&Self) -> Option<&'static str>) -> bool {
        let mut changes = self.changed.subscribe();
        loop {
            if self.closing.load(std::sync::atomic::Ordering::SeqCst) {
                return false;
            }
            if holding(self).is_none() {
                return true;
            }
            let _ = tokio::time::timeout(RECHECK, changes.changed()).await;
        }
    }

    /// Sleeps until `at`. `false`: the process is stopping.
    pub async fn sleep_until(&self, at: Timestamp) -> bool {
        let mut changes = self.changed.subscribe();
        loop {
            if self.closing.load(std::sync::atomic::Ordering::SeqCst) {
                return false;
            }
            let left = at.duration_since(Timestamp::now());
            if left <= SignedDuration::ZERO {
                return true;
            }
            let left = Duration::try_from(left).unwrap_or(RECHECK).min(RECHECK);
            let _ = tokio::time::timeout(left, changes.changed()).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Entry {
    /// Whether a limit cuts this agent off: it is limited and not yet woken from it.
    fn cut_off(&self) -> bool {
        matches!(self.tracked.state, AgentState::Limited { .. })
            && self.woken != Some(limit_key(&self.tracked))
    }
}

/// What names a limit: its reset, or when it began when it named none. Until then the
/// agent waits; `routing.limitRetryMinutes` after that the dispatcher wakes it anyway.
pub fn limit_key(tracked: &Tracked) -> Timestamp {
    match &tracked.state {
        AgentState::Limited { until: Some(until), .. } => *until,
        _ => tracked.since,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loop_core::agent_state::Permission;

    fn at_dialog(now: Timestamp) -> Tracked {
        let asked = Permission { tool: "Bash".into(), input: "touch x".into(), request: None };
        Tracked {
            state: AgentState::NeedsPermission(asked),
            hooked: true,
            ..Tracked::starting(now)
        }
    }

    #[tokio::test]
    async fn a_delivery_waits_while_a_dialog_is_open_and_goes_once_it_closes() {
        let states = std::sync::Arc::new(AgentStates::default());
        let now = Timestamp::now();
        states.set("loop-a-1", "claude", at_dialog(now));
        assert_eq!(states.holding("loop-a-1"), Some("the agent is at a permission dialog"));
        let waiter = {
            let states = states.clone();
            tokio::spawn(async move { states.until(|states| states.holding("loop-a-1")).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "held");
        let mut idle = at_dialog(now);
        idle.state = AgentState::Idle;
        states.set("loop-a-1", "claude", idle);
        assert!(waiter.await.unwrap(), "let through");
    }

    #[tokio::test]
    async fn a_limit_holds_its_harness_until_its_agent_is_woken_and_a_stop_ends_every_wait() {
        let states = AgentStates::default();
        let now = Timestamp::now();
        let until = now + SignedDuration::from_secs(60);
        let limited = Tracked {
            state: AgentState::Limited { until: Some(until), notice: "limit".into() },
            ..at_dialog(now)
        };
        let idle = Tracked { state: AgentState::Idle, ..at_dialog(now) };
        states.set("loop-a-1", "claude", limited.clone());
        states.set("loop-a-2", "claude", idle.clone());
        states.set("loop-b-1", "cursor", idle.clone());
        assert_eq!(states.holding("loop-a-1"), Some("the agent is cut off by a usage limit"));
        assert_eq!(states.holding("loop-a-2"), Some("its harness is cut off by a usage limit"));
        assert_eq!(states.holding("loop-b-1"), None, "another harness, another account");
        assert!(
            states.holding_spawn("claude").is_some() && states.holding_spawn("cursor").is_none()
        );
        states.woken("loop-a-1", until - SignedDuration::from_secs(1));
        assert!(states.holding("loop-a-1").is_some(), "woken from another limit");
        states.woken("loop-a-1", limit_key(&limited));
        states.set("loop-a-1", "claude", limited.clone());
        assert_eq!(states.holding("loop-a-1"), None, "woken: the limit still shows, and is over");
        assert_eq!(states.holding("loop-a-2"), None);
        assert_eq!(states.holding_spawn("claude"), None);
        assert_eq!(states.holding("loop-c-9"), None, "not watched: not held");
        let unknown = Tracked {
            state: AgentState::Limited { until: None, notice: "limit".into() },
            ..at_dialog(now + SignedDuration::from_secs(5))
        };
        assert_eq!(limit_key(&unknown), unknown.since, "no reset named: when it began");
        states.set("loop-a-1", "claude", at_dialog(now));
        states.close();
        assert!(!states.until(|states| states.holding("loop-a-1")).await);
        assert!(!states.sleep_until(now + SignedDuration::from_mins(5)).await);
    }
}

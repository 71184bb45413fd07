//! The agents' states, kept for every live session (docs/agent-states.md): a table the
//! watcher ([`watch`]) keeps current from the hooks' spool and the panes, which the
//! dispatcher reads before it types ([`AgentStates::until_free`]) and the control plane
//! serves on its session rows. What moves a state is loop-core's
//! ([`loop_core::agent_state`]); this room only holds the result and wakes who waits.
//!
//! Layout:
//! - this module: the table, and the wait a held delivery makes;
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

/// How long a held delivery sleeps between looks when nothing wakes it: a limit's reset
/// passes with no change of state.
const RECHECK: Duration = Duration::from_secs(5);

/// Every live session's agent state, by tmux session name.
#[derive(Debug)]
pub struct AgentStates {
    table: Mutex<HashMap<String, Tracked>>,
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
        self.lock().get(target).cloned()
    }

    /// Every watched agent's state.
    pub fn all(&self) -> HashMap<String, Tracked> {
        self.lock().clone()
    }

    /// Puts `tracked` in force for `target`, waking held deliveries.
    pub(crate) fn set(&self, target: &str, tracked: Tracked) {
        self.lock().insert(target.to_owned(), tracked);
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

    /// Why a delivery into `target` must wait now, if it must: the state's own reason,
    /// and a limit only until its reset (or `limit_retry` after it began, when it named
    /// none).
    pub fn holding(
        &self,
        target: &str,
        now: Timestamp,
        limit_retry: SignedDuration,
    ) -> Option<&'static str> {
        let tracked = self.seen(target)?;
        let reason = tracked.state.holds_delivery()?;
        match &tracked.state {
            AgentState::Limited { until, .. } => {
                let until = until.unwrap_or(tracked.since + limit_retry);
                (now < until).then_some(reason)
            }
            _ => Some(reason),
        }
    }

    /// Waits until the agent in `target` may be typed into ([`Self::holding`] says why
    /// it may not). `false`: the process is stopping and the delivery was not let
    /// through (it stays unclaimed, and comes again on the next start).
    pub async fn until_free(&self, target: &str, limit_retry: SignedDuration) -> bool {
        let mut changes = self.changed.subscribe();
        loop {
            if self.closing.load(std::sync::atomic::Ordering::SeqCst) {
                return false;
            }
            if self.holding(target, Timestamp::now(), limit_retry).is_none() {
                return true;
            }
            // A change, or a reset passing with none.
            let _ = tokio::time::timeout(RECHECK, changes.changed()).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Tracked>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
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
        states.set("loop-a-1", at_dialog(now));
        let retry = SignedDuration::from_mins(30);
        assert_eq!(
            states.holding("loop-a-1", now, retry),
            Some("the agent is at a permission dialog")
        );
        let waiter = {
            let states = states.clone();
            tokio::spawn(async move { states.until_free("loop-a-1", retry).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "held");
        let mut idle = at_dialog(now);
        idle.state = AgentState::Idle;
        states.set("loop-a-1", idle);
        assert!(waiter.await.unwrap(), "let through");
    }

    #[tokio::test]
    async fn a_limit_holds_until_its_reset_and_a_stop_ends_every_wait() {
        let states = AgentStates::default();
        let now = Timestamp::now();
        let retry = SignedDuration::from_mins(30);
        let limited = |until: Option<Timestamp>| Tracked {
            state: AgentState::Limited { until, notice: "limit".into() },
            ..at_dialog(now)
        };
        states.set("loop-a-1", limited(Some(now + SignedDuration::from_secs(60))));
        assert!(states.holding("loop-a-1", now, retry).is_some());
        assert_eq!(states.holding("loop-a-1", now + SignedDuration::from_secs(61), retry), None);
        states.set("loop-a-1", limited(None));
        assert!(states.holding("loop-a-1", now + SignedDuration::from_mins(29), retry).is_some());
        assert_eq!(states.holding("loop-a-1", now + SignedDuration::from_mins(31), retry), None);
        assert_eq!(states.holding("loop-b-2", now, retry), None, "not watched: not held");
        states.set("loop-a-1", at_dialog(now));
        states.close();
        assert!(!states.until_free("loop-a-1", retry).await);
    }
}

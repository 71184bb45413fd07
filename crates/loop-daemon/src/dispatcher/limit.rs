//! Waiting out a usage limit (docs/agent-states.md): at the limit's reset (or
//! `routing.limitRetryMinutes` after it began, when it named none) the agent it cut off
//! is woken — the limit's own dialog closed with its first choice ("Stop and wait for
//! limit to reset", which only closes it), then a short turn telling it to go on — and
//! only then is what its harness held let through ([`AgentStates::woken`]).
//!
//! One wait per limit: the teller starts it when an agent enters `limited`; a wait whose
//! limit is no longer the agent's (it was read again, or the agent went on by itself)
//! ends without typing. A limit still open at a restart is read again from the spool and
//! waited out by the new process.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use loop_core::agent_state::AgentState;
use loop_core::log::{Kind, Line};
use loop_sessions::landing::LandingError;
use loop_sessions::session;
use loop_sessions::tmux::Keys;

use super::{Dispatcher, blocking};
use crate::agent_state::{Change, limit_key};

/// The turn that tells a woken agent to go on.
const GO_ON: &str = "The usage limit that stopped your last turn has reset. Continue where you \
                     left off.";

/// How long the limit's dialog may take to close after its choice is sent.
const DIALOG_CLOSES_WITHIN: Duration = Duration::from_secs(5);

/// How many times waking is tried before it is given up (and what was held let in).
const WAKE_TRIES: u32 = 3;

impl Dispatcher {
    /// Waits out the limit `change` entered, then wakes its agent. Runs as its own task.
    pub(super) async fn wait_out_limit(&self, change: Change) {
        let AgentState::Limited { until, .. } = &change.tracked.state else { return };
        let retry = self.config().routing.limit_retry_minutes;
        let retry = SignedDuration::from_mins(i64::try_from(retry).unwrap_or(i64::MAX / 60));
        let limit = limit_key(&change.tracked);
        let wake_at = until.unwrap_or(change.tracked.since + retry);
        let agents = self.inner.agents.clone();
        if !agents.sleep_until(wake_at).await {
            return;
        }
        let still = agents.seen(&change.target).filter(|now| {
            matches!(now.state, AgentState::Limited { .. }) && limit_key(now) == limit
        });
        if still.is_none() {
            return;
        }
        let line = match self.wake(&change.target).await {
            Ok(()) => Line::info(Kind::AgentWoken),
            Err(err) => Line::warning(Kind::AgentWakeFailed).field("error", err.to_string()),
        };
        // Woken or not, what the limit held is let through: a session that cannot be
        // typed into is the delivery's to find out (and respawn), not a wait forever.
        agents.woken(&change.target, limit);
        let line = line
            .work_item(&change.item)
            .field("tmux_target", &change.target)
            .field("limit", limit.to_string())
            .field("woken_at", Timestamp::now().to_string());
        self.events().emit_async(line).await;
    }

    /// Closes the limit's dialog in `target` if it is open, then types the turn that
    /// tells the agent to go on; tried again while the agent shows no empty input box
    /// (a loaded machine may redraw the dialog late or close it slowly).
    async fn wake(&self, target: &str) -> Result<(), session::SessionError> {
        let (tmux, harness, target) =
            (self.inner.tmux.clone(), self.inner.harness.clone(), target.to_owned());
        blocking(move || {
            let open = |tmux: &loop_sessions::Tmux| {
                let signs = harness.pane_signs();
                let view = tmux.look(&target).ok().flatten();
                view.zip(signs).is_some_and(|(view, signs)| signs.limit_dialog(&view.screen))
            };
            let mut tries = 0;
            loop {
                tries += 1;
                if open(&tmux) {
                    tmux.send(&target, &[Keys::Submit]).map_err(session::SessionError::from)?;
                    let deadline = std::time::Instant::now() + DIALOG_CLOSES_WITHIN;
                    while open(&tmux) && std::time::Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
                match session::deliver(&tmux, &*harness, &target, GO_ON) {
                    // Nothing was typed: trying again cannot type it twice.
                    Err(session::SessionError::Landing(LandingError::NotAtInput { .. }))
                        if tries < WAKE_TRIES =>
                    {
                        std::thread::sleep(Duration::from_secs(2));
                    }
                    done => return done,
                }
            }
        })
        .await
    }
}

//! Session lifecycles built from the runner and a harness: first spawn, respawn of a dead
//! session (resume the recorded conversation, verify it survived the probe delay, else
//! start fresh), delivery with respawn, and settling a session on close.
//!
//! These are effects only. Whether to spawn, respawn or close, and what to write in the
//! local session record afterwards, is the caller's decision: every function returns the
//! [`Launch`] (conversation id, model, effort, arguments) the record should keep.

use std::time::Duration;

use loop_core::WorkItemRef;
use loop_core::config::{TmuxConfig, WorkspaceConfig};

use crate::harness::{ConversationId, Harness, HarnessError, Launch, LaunchChoice};
use crate::landing::{self, LandingError};
use crate::tmux::{DeliveryError, SessionSite, Termination, Tmux, TmuxError};
use crate::workspace::{WorkspaceError, Workspaces};

/// Why a lifecycle step failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Tmux(#[from] TmuxError),
    #[error(transparent)]
    Harness(#[from] HarnessError),
    #[error(transparent)]
    Delivery(#[from] DeliveryError),
    #[error(
        "the harness in `{target}` did not start reading input within {within:?}; the prompt was not pasted"
    )]
    NotReady { target: String, within: Duration },
    #[error(transparent)]
    Landing(#[from] LandingError),
}

impl loop_core::Hint for SessionError {
    fn hint(&self) -> Option<String> {
        match self {
            Self::Tmux(err) => err.hint(),
            Self::Harness(err) => err.hint(),
            Self::NotReady { target, .. } => {
                Some(format!("look at it with `tmux attach -r -t {target}`"))
            }
            Self::Landing(err) => err.hint(),
            Self::Delivery(_) => None,
        }
    }
}

/// How spawns and respawns behave; from `routing.tmux`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RespawnSettings {
    /// `resumeOnRespawn`: try the recorded conversation first.
    pub resume: bool,
    /// `resumeProbeSeconds`: how long a resumed harness must stay up to count.
    pub probe: Duration,
    /// How long a new harness may take to start reading input before its first prompt.
    pub ready_within: Duration,
}

impl RespawnSettings {
    /// From `routing.tmux` (`resumeOnRespawn`, `resumeProbeSeconds`); `ready_within`
    /// keeps its default.
    pub fn from_config(tmux: &TmuxConfig) -> Self {
        Self {
            resume: tmux.resume_on_respawn,
            probe: seconds(tmux.resume_probe_seconds, Self::default().probe),
            ..Self::default()
        }
    }
}

impl Default for RespawnSettings {
    fn default() -> Self {
        Self { resume: true, probe: Duration::from_secs(2), ready_within: Duration::from_secs(60) }
    }
}

/// A respawn's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Respawned {
    pub launch: Launch,
    /// Why resuming was not possible or did not hold, when the launch is fresh after a
    /// resume was wanted (for `session.resume_failed`).
    pub resume_failure: Option<String>,
}

/// What [`deliver_or_respawn`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// Pasted into the live session.
    Pasted,
    /// The session was dead or absent: respawned, and the text pasted as its first prompt.
    Respawned(Respawned),
    /// The session looked dead, but by the time of the respawn a live harness held the
    /// name (someone else brought it back): the text was pasted into it instead.
    RespawnAverted,
}

/// Starts a new conversation at `site`, then pastes `prompt` once the harness reads input.
pub fn spawn_fresh(
    tmux: &Tmux,
    harness: &dyn Harness,
    site: &SessionSite,
    choice: &LaunchChoice,
    prompt: &str,
    settings: &RespawnSettings,
) -> Result<Launch, SessionError> {
    let launch = harness.fresh(&harness.new_conversation()?, choice)?;
    tmux.spawn(site, &launch.argv)?;
    paste_first_prompt(tmux, harness, site, prompt, settings)?;
    Ok(launch)
}

/// Brings a dead or absent session back: resumes `recorded` when allowed, valid and
/// supported, and keeps that launch only if the harness survives the probe; otherwise
/// starts a fresh conversation. Then pastes `prompt` as the first prompt.
pub fn respawn(
    tmux: &Tmux,
    harness: &dyn Harness,
    site: &SessionSite,
    recorded: Option<&str>,
    choice: &LaunchChoice,
    prompt: &str,
    settings: &RespawnSettings,
) -> Result<Respawned, SessionError> {
    let mut resume_failure = None;
    if settings.resume {
        match try_resume(tmux, harness, site, recorded, choice, settings.probe) {
            Ok(launch) => {
                paste_first_prompt(tmux, harness, site, prompt, settings)?;
                return Ok(Respawned { launch, resume_failure: None });
            }
            // A live occupant is not ours to replace: say so, the caller delivers into it.
            Err(SessionError::Tmux(err @ TmuxError::SessionLive { .. })) => return Err(err.into()),
            Err(err) => resume_failure = Some(err.to_string()),
        }
    }
    let launch = harness.fresh(&harness.new_conversation()?, choice)?;
    tmux.spawn(site, &launch.argv)?;
    paste_first_prompt(tmux, harness, site, prompt, settings)?;
    Ok(Respawned { launch, resume_failure })
}

fn try_resume(
    tmux: &Tmux,
    harness: &dyn Harness,
    site: &SessionSite,
    recorded: Option<&str>,
    choice: &LaunchChoice,
    probe: Duration,
) -> Result<Launch, SessionError> {
    let recorded = recorded.ok_or_else(|| HarnessError::NoResume {
        harness: harness.name().to_owned(),
        why: "no conversation id is recorded".to_owned(),
    })?;
    let launch = harness.resume(&ConversationId::parse(recorded)?, choice)?;
    tmux.spawn(site, &launch.argv)?;
    if tmux.survived(&site.target, probe)? {
        Ok(launch)
    } else {
        Err(HarnessError::NoResume {
            harness: harness.name().to_owned(),
            why: format!("the resumed harness exited within {probe:?}"),
        }
        .into())
    }
}

/// Puts `text` into the agent's input in `target` by the harness's rule (see
/// [`crate::landing`]): the one way text reaches a live session.
pub fn deliver(
    tmux: &Tmux,
    harness: &dyn Harness,
    target: &str,
    text: &str,
) -> Result<(), SessionError> {
    Ok(landing::deliver(tmux, harness, target, text, landing::AT_INPUT_WITHIN)?)
}

/// Delivers `text` into the session ([`deliver`]); when nothing runs there, respawns it
/// (see [`respawn`]) with `text` as the new harness's first prompt.
pub fn deliver_or_respawn(
    tmux: &Tmux,
    harness: &dyn Harness,
    site: &SessionSite,
    recorded: Option<&str>,
    choice: &LaunchChoice,
    text: &str,
    settings: &RespawnSettings,
) -> Result<Delivered, SessionError> {
    match deliver(tmux, harness, &site.target, text) {
        Ok(()) => Ok(Delivered::Pasted),
        Err(SessionError::Landing(LandingError::Delivery(DeliveryError::SessionMissing {
            ..
        }))) => match respawn(tmux, harness, site, recorded, choice, text, settings) {
            Ok(respawned) => Ok(Delivered::Respawned(respawned)),
            Err(SessionError::Tmux(TmuxError::SessionLive { .. })) => {
                deliver(tmux, harness, &site.target, text)?;
                Ok(Delivered::RespawnAverted)
            }
            Err(err) => Err(err),
        },
        Err(err) => Err(err),
    }
}

/// The first prompt of a new harness: once its terminal reads raw, by the harness's
/// landing rule, waiting as long as a start may take for its input box.
fn paste_first_prompt(
    tmux: &Tmux,
    harness: &dyn Harness,
    site: &SessionSite,
    prompt: &str,
    settings: &RespawnSettings,
) -> Result<(), SessionError> {
    let started = std::time::Instant::now();
    if !tmux.await_input_ready(&site.target, settings.ready_within)? {
        return Err(SessionError::NotReady {
            target: site.target.clone(),
            within: settings.ready_within,
        });
    }
    let rest = settings.ready_within.saturating_sub(started.elapsed());
    Ok(landing::deliver(tmux, harness, &site.target, prompt, rest)?)
}

/// What closing does to the tmux session; from `routing.tmux`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseSettings {
    /// `keepSessionOnClose`: keep the session (and its scrollback) attachable.
    pub keep_session: bool,
    /// `killHarnessOnClose`: end the harness inside a kept session.
    pub kill_harness: bool,
    /// `harnessKillGraceSeconds`: SIGTERM to SIGKILL.
    pub grace: Duration,
    /// `workspace.keepCheckoutOnClose`: leave the checkout on disk.
    pub keep_checkout: bool,
}

impl CloseSettings {
    /// From `routing.tmux` and `routing.workspace.keepCheckoutOnClose`.
    pub fn from_config(tmux: &TmuxConfig, workspace: &WorkspaceConfig) -> Self {
        Self {
            keep_session: tmux.keep_session_on_close,
            kill_harness: tmux.kill_harness_on_close,
            grace: seconds(tmux.harness_kill_grace_seconds, Self::default().grace),
            keep_checkout: workspace.keep_checkout_on_close,
        }
    }
}

/// A validated, non-negative number of seconds from the config (anything else: `default`).
fn seconds(value: f64, default: Duration) -> Duration {
    Duration::try_from_secs_f64(value).unwrap_or(default)
}

impl Default for CloseSettings {
    fn default() -> Self {
        Self {
            keep_session: true,
            kill_harness: true,
            grace: Duration::from_secs(5),
            keep_checkout: false,
        }
    }
}

/// What settling a session did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The session was kept; the harness was ended (`Some`) or left running (`None`).
    Kept { termination: Option<Termination> },
    /// The session was killed (`existed: false`: it was already gone).
    Killed { existed: bool },
}

/// What closing an endpoint's session did.
#[derive(Debug)]
pub struct Closed {
    pub settled: Settled,
    /// `None`: the checkout was kept (no workspaces, or `keepCheckoutOnClose`); else
    /// whether one was removed, or why removing it failed (reported, never fatal).
    pub checkout: Option<Result<bool, WorkspaceError>>,
}

/// Closes the session serving `served`: settles its tmux session by the retention rules,
/// then removes its checkout unless it is kept.
pub fn close(
    tmux: &Tmux,
    workspaces: Option<&Workspaces>,
    served: &WorkItemRef,
    settings: &CloseSettings,
) -> Result<Closed, TmuxError> {
    let settled = settle(tmux, &served.tmux_session(), settings)?;
    let checkout =
        workspaces.filter(|_| !settings.keep_checkout).map(|workspaces| workspaces.remove(served));
    Ok(Closed { settled, checkout })
}

/// Applies the retention rules to a closing session.
pub fn settle(tmux: &Tmux, target: &str, settings: &CloseSettings) -> Result<Settled, TmuxError> {
    if !settings.keep_session {
        return Ok(Settled::Killed { existed: tmux.kill_session(target)? });
    }
    let termination = if settings.kill_harness {
        Some(tmux.terminate_harness(target, settings.grace)?)
    } else {
        None
    };
    Ok(Settled::Kept { termination })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routing(yaml: &str) -> loop_core::config::RoutingConfig {
        loop_core::config::parse(yaml).expect("a valid config").config.routing
    }

    #[test]
    fn settings_default_to_the_reference_values() {
        let routing = routing("");
        let respawn = RespawnSettings::from_config(&routing.tmux);
        assert!(respawn.resume);
        assert_eq!(respawn.probe, Duration::from_secs(2));
        assert_eq!(
            CloseSettings::from_config(&routing.tmux, &routing.workspace),
            CloseSettings::default()
        );
    }

    #[test]
    fn settings_follow_the_config() {
        let routing = routing(
            "routing:\n  tmux:\n    keepSessionOnClose: false\n    killHarnessOnClose: false\n    harnessKillGraceSeconds: 0.5\n    resumeOnRespawn: false\n    resumeProbeSeconds: 0\n  workspace:\n    keepCheckoutOnClose: true\n",
        );
        let respawn = RespawnSettings::from_config(&routing.tmux);
        assert_eq!((respawn.resume, respawn.probe), (false, Duration::ZERO));
        let close = CloseSettings::from_config(&routing.tmux, &routing.workspace);
        assert_eq!(
            close,
            CloseSettings {
                keep_session: false,
                kill_harness: false,
                grace: Duration::from_millis(500),
                keep_checkout: true
            }
        );
    }
}

//! The sentences of a work item's session and checkout: spawns, pastes' outcomes,
//! pauses, closes and cleanup (`session.*`, `cleanup.deferred`), the item's end
//! (`work_item.*`), its workspace (`workspace.*`), the harness's plugin (`harness.*`) and
//! its agent's state (`agent.state`).

use super::{done, error, failed, noted, unworded};
use crate::explain::fields::{field, items, text};
use crate::explain::reason::reason_text;
use crate::explain::{Mark, Record, Stage};
use crate::log::Kind;

/// A line of this family in words; any other kind is [`unworded`].
pub(super) fn wording(kind: Kind, record: &Record) -> (Stage, Mark, String) {
    match kind {
        Kind::SessionSpawned => (
            Stage::Effect,
            Mark::Passed,
            format!(
                "spawned a {} session for {} in tmux `{}`",
                field(record, "harness"),
                items(record),
                field(record, "tmux_target")
            ),
        ),
        Kind::SessionRespawned => (
            Stage::Effect,
            Mark::Passed,
            format!(
                "brought {}'s dead session back in tmux `{}`",
                items(record),
                field(record, "tmux_target")
            ),
        ),
        Kind::SessionAnnounced => {
            let late = if record.get("recovered").is_some() {
                " (owed by a process stopped before it could)"
            } else {
                ""
            };
            (
                Stage::Outcome,
                Mark::Passed,
                format!("announced the session on {}{late}", items(record)),
            )
        }
        Kind::SessionAnnounceFailed => (
            Stage::Outcome,
            Mark::Noted,
            format!(
                "could not announce the session on {}: {}",
                items(record),
                field(record, "error")
            ),
        ),
        Kind::SessionClosed => {
            (Stage::Effect, Mark::Passed, format!("closed {}'s session", items(record)))
        }
        Kind::SessionPaused => {
            (Stage::Effect, Mark::Passed, format!("paused {}'s session", items(record)))
        }
        Kind::SessionResumed => {
            (Stage::Effect, Mark::Passed, format!("resumed {}'s session", items(record)))
        }
        Kind::SessionCleaned => (
            Stage::Effect,
            Mark::Passed,
            format!(
                "cleaned up {}: removed {}",
                items(record),
                if field(record, "removed").is_empty() {
                    "nothing".to_owned()
                } else {
                    field(record, "removed")
                }
            ),
        ),
        Kind::SessionPrLinked => (
            Stage::Effect,
            Mark::Passed,
            format!("linked {} to {}'s session", field(record, "pull_request"), items(record)),
        ),
        Kind::SessionReset => (Stage::Effect, Mark::Passed, format!("reset {}", items(record))),
        Kind::SessionAwaitingInput => (
            Stage::Effect,
            Mark::Noted,
            format!(
                "the agent asked a question on {} and waits for the answer: {}",
                items(record),
                field(record, "comment_url")
            ),
        ),
        Kind::SessionAskFailed => (
            Stage::Outcome,
            Mark::Failed,
            format!(
                "the agent's question on {} was not posted: {}",
                items(record),
                field(record, "error")
            ),
        ),
        Kind::SessionReplySent => (
            Stage::Effect,
            Mark::Passed,
            match text(record, "via") {
                Some("comment") => format!(
                    "the answer to the agent's question reached {}'s session (delivery {})",
                    items(record),
                    field(record, "delivery_id")
                ),
                _ => format!(
                    "{} replied to {}'s session from this machine",
                    field(record, "actor"),
                    items(record)
                ),
            },
        ),
        Kind::SessionReplyFailed => (
            Stage::Outcome,
            Mark::Failed,
            format!(
                "a reply to {}'s session was not delivered: {}",
                items(record),
                field(record, "error")
            ),
        ),
        Kind::WorkItemEnded => (Stage::Effect, Mark::Passed, format!("{} ended", items(record))),
        Kind::SessionAutoclosed => (
            Stage::Effect,
            Mark::Passed,
            format!(
                "ended {}'s session because the work item closed ({})",
                items(record),
                reason_text(text(record, "reason").unwrap_or_default(), record)
            ),
        ),
        Kind::WorkItemPullRequestEnded => (
            Stage::Effect,
            Mark::Passed,
            format!(
                "ended pull request {}'s endpoint on {} ({})",
                field(record, "pull_request"),
                items(record),
                field(record, "state")
            ),
        ),
        Kind::SessionKeptOpen => (
            Stage::Decision,
            Mark::Noted,
            format!(
                "kept {}'s own session open: only the pull request {} closed",
                items(record),
                field(record, "closed_ref")
            ),
        ),
        Kind::WorkItemStampFailed => (
            Stage::Outcome,
            Mark::Failed,
            format!(
                "could not write or clear {}'s `ended` stamp: {}",
                items(record),
                field(record, "error")
            ),
        ),
        Kind::CleanupDeferred => (
            Stage::Decision,
            Mark::Noted,
            format!(
                "closed {}'s session but kept its checkout and tmux session: {} — \
                 `the-loop sessions cleanup` removes them",
                items(record),
                match text(record, "actor") {
                    Some(actor) =>
                        format!("{actor} who closed it is not in `routing.authorizedUsers`"),
                    None => "the close names no actor".to_owned(),
                }
            ),
        ),
        Kind::WorkItemReopened => {
            (Stage::Effect, Mark::Passed, format!("{} was reopened", items(record)))
        }
        Kind::SessionHarnessTerminated => done(format!("ended {}'s agent", items(record))),
        Kind::SessionTmuxKilled => done(format!("killed {}'s tmux session", items(record))),
        Kind::SessionRetained => noted(
            Stage::Effect,
            format!("kept {}'s tmux session to look at (`routing.tmux` retention)", items(record)),
        ),
        Kind::SessionLinkFailed => failed(
            Stage::Outcome,
            format!(
                "could not record {} on {}'s session: {}",
                field(record, "linked_ref"),
                items(record),
                error(record)
            ),
        ),
        Kind::SessionPrClosed => {
            done(format!("ended pull request {}'s own session", field(record, "pull_request")))
        }
        Kind::SessionPrSessionDeclined => noted(
            Stage::Decision,
            format!(
                "pull request {} did not get a session of its own ({}): the event went to {}",
                field(record, "pull_request"),
                field(record, "reason"),
                items(record)
            ),
        ),
        Kind::SessionPrSpawned => done(format!(
            "spawned a {} session for pull request {} in tmux `{}`",
            field(record, "harness"),
            field(record, "pull_request"),
            field(record, "tmux_target")
        )),
        Kind::SessionAgentNotice => done(format!(
            "told the work item its agent is {}: {}",
            field(record, "state"),
            field(record, "comment_url")
        )),
        Kind::AgentWoken => done(format!(
            "woke the agent in tmux `{}` after its usage limit (reset {}): told it to go on",
            field(record, "tmux_target"),
            field(record, "limit")
        )),
        Kind::AgentWakeFailed => failed(
            Stage::Outcome,
            format!(
                "could not wake the agent in tmux `{}` after its usage limit: {}; what it held \
                 goes in anyway",
                field(record, "tmux_target"),
                error(record)
            ),
        ),
        Kind::SessionAgentNoticeFailed => failed(
            Stage::Outcome,
            format!(
                "could not tell the work item its agent is {}: {}",
                field(record, "state"),
                error(record)
            ),
        ),
        Kind::AgentState => noted(
            Stage::Effect,
            format!(
                "the agent in tmux `{}` is {}{} (seen by its {})",
                field(record, "tmux_target"),
                field(record, "state"),
                agent_detail(record),
                field(record, "seen_by")
            ),
        ),
        Kind::SessionRespawnAverted => noted(
            Stage::Effect,
            format!(
                "a live agent already held tmux `{}` when the respawn came: pasted there",
                field(record, "tmux_target")
            ),
        ),
        Kind::SessionResumeFailed => noted(
            Stage::Outcome,
            format!(
                "could not resume conversation {}; a new one was started: {}",
                field(record, "harness_session_id"),
                error(record)
            ),
        ),
        Kind::SessionSpawnMarkerLeft => failed(
            Stage::Outcome,
            format!("could not remove {}'s session marker: {}", items(record), error(record)),
        ),
        Kind::SessionSpawnRecovered => noted(
            Stage::Effect,
            format!(
                "a spawn cut short by a stop had left tmux `{}`: replaced",
                field(record, "tmux_target")
            ),
        ),
        Kind::SessionTouchFailed => failed(
            Stage::Outcome,
            format!("could not note the delivery on {}'s record: {}", items(record), error(record)),
        ),
        Kind::SessionUpdateFailed => failed(
            Stage::Outcome,
            format!("could not update {}'s session record: {}", items(record), error(record)),
        ),
        Kind::SessionWorkItemMissing => failed(
            Stage::Outcome,
            format!("GitHub says {} no longer exists: {}", items(record), error(record)),
        ),
        Kind::WorkspacePrepared => done(format!(
            "prepared {}'s checkout `{}` ({})",
            items(record),
            field(record, "checkout"),
            field(record, "strategy")
        )),
        Kind::WorkspaceCleaned => done(format!("removed {}'s checkout", items(record))),
        Kind::WorkspaceCleanFailed => failed(
            Stage::Outcome,
            format!("could not remove {}'s checkout: {}", items(record), error(record)),
        ),
        Kind::WorkspaceTrusted => {
            done(format!("pre-seeded the harness's trust for {}'s checkout", items(record)))
        }
        Kind::HarnessPluginRegistered => done(format!(
            "wrote the-loop's Claude Code plugin, which {}'s session loads",
            items(record)
        )),
        Kind::HarnessPluginFailed => failed(
            Stage::Outcome,
            format!(
                "could not register the-loop's Claude Code plugin for {} (the session runs without it): {}",
                items(record),
                error(record)
            ),
        ),
        Kind::WorkspaceTrustFailed => failed(
            Stage::Outcome,
            format!(
                "could not pre-seed the harness's trust for {}: {}",
                items(record),
                error(record)
            ),
        ),
        other => unworded(other.name(), record),
    }
}

/// What an `agent.state` line adds to its state: the tool and input a dialog asks
/// about, or when a limit resets.
fn agent_detail(record: &Record) -> String {
    match (text(record, "tool"), text(record, "input"), text(record, "until")) {
        (_, _, Some(until)) => format!(" until {until}"),
        (Some(tool), Some(input), _) if !tool.is_empty() => format!(": {tool} `{input}`"),
        (_, Some(input), _) => format!(": `{input}`"),
        _ => String::new(),
    }
}

//! Each event-log line in words: where it sits in the pipeline, whether it let the event
//! through, and one sentence. The sentences are kept by family of line (the `event`
//! field's prefix), a file each; [`wording`] names every kind's family in one match with
//! no catch-all, so a new kind does not compile until it has a family, and
//! `every_kind_of_line_has_a_sentence_of_its_own` fails until the family words it.

mod delivery;
mod graph;
mod poll;
mod service;
mod session;

use super::fields::{details, field, text};
use super::reason::reason_text;
use super::{Mark, Record, Stage, Step};
use crate::log::Kind;

/// One line in words.
pub fn step(record: &Record) -> Step {
    let event = text(record, "event").unwrap_or("?").to_owned();
    let (stage, mark, sentence) = match Kind::from_name(&event) {
        Some(kind) => wording(kind, record),
        // Another version's line, or a hand-written one: shown with its fields.
        None => unworded(&event, record),
    };
    let ts = text(record, "ts").unwrap_or_default().to_owned();
    Step { ts, event, stage, mark, text: sentence }
}

/// Where a line of `kind` sits, whether it let the event through, and what it says: the
/// family that words it. One arm per kind: a new kind does not compile until it has one.
fn wording(kind: Kind, record: &Record) -> (Stage, Mark, String) {
    match kind {
        Kind::WebhookReceived
        | Kind::WebhookRejected
        | Kind::RoutingDropped
        | Kind::DispatchDropped
        | Kind::RoutingRouted
        | Kind::RoutingCollaborator
        | Kind::RoutingLinkageDropped
        | Kind::DispatchDecided
        | Kind::ControlRejected
        | Kind::ControlAmbiguous
        | Kind::ControlCommand
        | Kind::DispatchQueued
        | Kind::DispatchHeld
        | Kind::DispatchAwaitingQueue
        | Kind::DispatchAwaitingSpawn
        | Kind::DispatchSucceeded
        | Kind::DispatchFailed
        | Kind::SessionSpawnFailed
        | Kind::DispatchError
        | Kind::DispatchAbandoned
        | Kind::ControlAnnounced
        | Kind::ControlAnnounceFailed
        | Kind::McpCall
        | Kind::ReactionAdded
        | Kind::ReactionFailed
        | Kind::ReactionShed
        | Kind::ControlRecordFailed
        | Kind::DispatchBatched
        | Kind::CiFetched
        | Kind::CiFetchFailed
        | Kind::DispatchInDoubt
        | Kind::DispatchRecovered
        | Kind::DispatchLedgerWriteFailed
        | Kind::InboxFull
        | Kind::InboxResumed
        | Kind::InboxReplaying
        | Kind::InboxSyncFailed
        | Kind::InboxWriteFailed
        | Kind::InboxTornTail => delivery::wording(kind, record),
        Kind::PollCommentForwarded
        | Kind::PollCommentSettled
        | Kind::PollUnauthorized
        | Kind::PollAttemptsReleased
        | Kind::PollClosureDetected
        | Kind::PollCommentFailed
        | Kind::PollCycle
        | Kind::PollGiveupReported
        | Kind::PollGiveupReportFailed
        | Kind::PollItemError
        | Kind::PollLinkageFallback
        | Kind::PollProviderError
        | Kind::PollRearmed
        | Kind::PollScopeDegraded
        | Kind::PollScopeError
        | Kind::PollScopeRecovered
        | Kind::PollSpawnFailed
        | Kind::PollerStarted
        | Kind::PollerStopped
        | Kind::PollerBlocked => poll::wording(kind, record),
        Kind::SessionSpawned
        | Kind::SessionRespawned
        | Kind::SessionAnnounced
        | Kind::SessionAnnounceFailed
        | Kind::SessionClosed
        | Kind::SessionPaused
        | Kind::SessionResumed
        | Kind::SessionCleaned
        | Kind::SessionPrLinked
        | Kind::SessionReset
        | Kind::SessionAwaitingInput
        | Kind::SessionAskFailed
        | Kind::SessionReplySent
        | Kind::SessionReplyFailed
        | Kind::WorkItemEnded
        | Kind::SessionAutoclosed
        | Kind::WorkItemPullRequestEnded
        | Kind::SessionKeptOpen
        | Kind::WorkItemStampFailed
        | Kind::CleanupDeferred
        | Kind::WorkItemReopened
        | Kind::SessionHarnessTerminated
        | Kind::SessionTmuxKilled
        | Kind::SessionRetained
        | Kind::SessionLinkFailed
        | Kind::SessionPrClosed
        | Kind::SessionPrSessionDeclined
        | Kind::SessionPrSpawned
        | Kind::SessionRespawnAverted
        | Kind::AgentState
        | Kind::AgentWoken
        | Kind::AgentWakeFailed
        | Kind::SessionAgentNotice
        | Kind::SessionAgentNoticeFailed
        | Kind::SessionResumeFailed
        | Kind::SessionSpawnMarkerLeft
        | Kind::SessionSpawnRecovered
        | Kind::SessionTouchFailed
        | Kind::SessionUpdateFailed
        | Kind::SessionWorkItemMissing
        | Kind::WorkspacePrepared
        | Kind::WorkspaceCleaned
        | Kind::WorkspaceCleanFailed
        | Kind::WorkspaceTrusted
        | Kind::HarnessPluginRegistered
        | Kind::HarnessPluginFailed
        | Kind::WorkspaceTrustFailed => session::wording(kind, record),
        Kind::ConfigReloaded
        | Kind::ConfigReloadFailed
        | Kind::ServerStarted
        | Kind::ServerStopped
        | Kind::ApiStarted
        | Kind::ApiStopped
        | Kind::ApiRequest
        | Kind::StreamSubscribed
        | Kind::StreamRefused
        | Kind::StreamDesync
        | Kind::StreamDisconnected
        | Kind::RegistryUnreadable
        | Kind::StateLegacyAdopted
        | Kind::StateQuarantined => service::wording(kind, record),
        Kind::GraphStarted
        | Kind::GraphAdvanced
        | Kind::GraphParked
        | Kind::GraphBlocked
        | Kind::GraphEscalated
        | Kind::GraphNoEdge
        | Kind::GraphCompleted
        | Kind::GraphLinkFailed
        | Kind::GraphChoiceRefused
        | Kind::GraphSkipped
        | Kind::GraphForced
        | Kind::GraphSkipsDeclared
        | Kind::GraphSkipsRejected
        | Kind::GraphAssignmentDelivered
        | Kind::GraphAssignmentFailed
        | Kind::GraphHookDegraded => graph::wording(kind, record),
    }
}

/// A line no sentence is written for (another version's type, a hand-written line, or a
/// kind its family does not word): shown with its fields.
fn unworded(event: &str, record: &Record) -> (Stage, Mark, String) {
    (Stage::Outcome, Mark::Noted, format!("{event}: {}", details(record)))
}

/// The line's `reason` code in words.
fn reason(record: &Record) -> String {
    reason_text(text(record, "reason").unwrap_or("?"), record)
}

/// The line's `error` field.
fn error(record: &Record) -> String {
    field(record, "error")
}

fn noted(stage: Stage, text: String) -> (Stage, Mark, String) {
    (stage, Mark::Noted, text)
}

fn failed(stage: Stage, text: String) -> (Stage, Mark, String) {
    (stage, Mark::Failed, text)
}

fn done(text: String) -> (Stage, Mark, String) {
    (Stage::Effect, Mark::Passed, text)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::explain::tests::record;

    #[test]
    fn every_kind_of_line_has_a_sentence_of_its_own() {
        for kind in Kind::ALL {
            let line = record(json!({"ts": "t", "event": kind.name(), "work_item": "github:o/r#1",
                "reason": "pr-merged", "pull_request": "github:o/r#2", "state": "merged",
                "closed_ref": "github:o/r#2", "error": "disk full", "actor": "mallory"}));
            let text = step(&line).text;
            assert!(!text.starts_with(&format!("{kind}:")), "{kind} has no wording: {text}");
            assert!(!text.is_empty(), "{kind}");
        }
    }

    #[test]
    fn a_line_of_an_unknown_type_still_shows_its_fields() {
        let step = step(&record(json!({"ts": "t", "event": "brand.new", "level": "info", "x": 1})));
        assert_eq!(step.text, "brand.new: x=1");
    }
}

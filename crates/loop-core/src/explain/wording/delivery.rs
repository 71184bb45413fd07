//! The sentences of a delivery's own path: how it arrived (`webhook.*`, `inbox.*`,
//! `mcp.call`), the guards and routing it passed (`routing.*`), what was decided and
//! pasted (`dispatch.*`, `ci.*`), the commands it carried (`control.*`) and the
//! reactions it got (`reaction.*`).

use serde_json::Value;

use super::{error, failed, noted, reason, unworded};
use crate::explain::fields::{actor, actor_pass, field, items, text};
use crate::explain::{Mark, Record, Stage};
use crate::log::Kind;

/// A line of this family in words; any other kind is [`unworded`].
pub(super) fn wording(kind: Kind, record: &Record) -> (Stage, Mark, String) {
    let action = text(record, "action").map(|a| format!(" {a}")).unwrap_or_default();
    let gh_event = field(record, "gh_event");
    match kind {
        Kind::WebhookReceived => (
            Stage::Arrived,
            Mark::Noted,
            format!(
                "arrived by webhook: `{gh_event}`{action}{}",
                if record.get("verified") == Some(&Value::Bool(true)) {
                    ", signature verified"
                } else {
                    ", unsigned"
                }
            ),
        ),
        Kind::WebhookRejected => {
            (Stage::Guard, Mark::Failed, format!("refused at the door: {}", reason(record)))
        }
        Kind::RoutingDropped | Kind::DispatchDropped => {
            let reason_code = text(record, "reason").unwrap_or("?");
            let mark = if reason_code == "duplicate-delivery" { Mark::Noted } else { Mark::Failed };
            (Stage::Guard, mark, format!("dropped: {}", reason(record)))
        }
        Kind::RoutingRouted => (
            Stage::Guard,
            Mark::Passed,
            format!(
                "passed the self-marker, repository and actor checks ({}); routed to {}{}",
                actor_pass(record),
                items(record),
                if record.get("labeled") == Some(&Value::Bool(true)) {
                    ", which carries the auto-execute label"
                } else {
                    ""
                }
            ),
        ),
        Kind::RoutingCollaborator => (
            Stage::Guard,
            Mark::Passed,
            format!(
                "{} is a collaborator of {}: the comment is input only, never a command or a spawn",
                actor(record),
                items(record)
            ),
        ),
        Kind::RoutingLinkageDropped => (
            Stage::Guard,
            Mark::Noted,
            format!("{} was left out: {}", items(record), reason(record)),
        ),
        Kind::DispatchDecided => (
            Stage::Decision,
            Mark::Noted,
            format!(
                "decided `{}`{}{} for {}",
                field(record, "decision"),
                text(record, "command").map(|c| format!(" `{c}`")).unwrap_or_default(),
                text(record, "detail").map(|d| format!(" ({d})")).unwrap_or_default(),
                text(record, "target").map_or_else(|| items(record), str::to_owned)
            ),
        ),
        Kind::ControlRejected => (
            Stage::Guard,
            Mark::Failed,
            format!(
                "the `{}` command from {} was refused: {}",
                field(record, "command"),
                actor(record),
                reason(record)
            ),
        ),
        Kind::ControlAmbiguous => (
            Stage::Guard,
            Mark::Failed,
            format!(
                "the comment carries different commands ({}): nothing executed, nothing forwarded",
                field(record, "commands")
            ),
        ),
        Kind::ControlCommand => {
            let collaborator =
                text(record, "collaborator").map(|c| format!(" @{c}")).unwrap_or_default();
            (
                Stage::Effect,
                Mark::Passed,
                format!(
                    "executed `{}`{collaborator} from {} ({}) on {}: {}",
                    field(record, "command"),
                    actor(record),
                    field(record, "source"),
                    items(record),
                    field(record, "effect")
                ),
            )
        }
        Kind::DispatchHeld => (
            Stage::Decision,
            Mark::Noted,
            format!(
                "held for {}'s session: {}; delivered once it can take it",
                items(record),
                field(record, "reason")
            ),
        ),
        Kind::DispatchQueued => (
            Stage::Decision,
            Mark::Noted,
            if record.get("spawn") == Some(&Value::Bool(true)) {
                format!("queued to spawn a session for {}", items(record))
            } else {
                format!("queued for delivery into {}'s session", items(record))
            },
        ),
        Kind::DispatchAwaitingQueue => (
            Stage::Decision,
            Mark::Noted,
            format!(
                "waits until {}'s session has been given what was queued for it before this \
                 close, and is decided again then",
                items(record)
            ),
        ),
        Kind::DispatchAwaitingSpawn => (
            Stage::Decision,
            Mark::Noted,
            format!(
                "waits for {}'s session, being spawned, and is decided again once it is",
                items(record)
            ),
        ),
        Kind::DispatchSucceeded => (
            Stage::Effect,
            Mark::Passed,
            if record.get("already_delivered") == Some(&Value::Bool(true)) {
                format!("{}'s session already had it: nothing pasted again", items(record))
            } else {
                format!("pasted into {}'s {} session", items(record), field(record, "harness"))
            },
        ),
        Kind::DispatchFailed | Kind::SessionSpawnFailed | Kind::DispatchError => (
            Stage::Outcome,
            Mark::Failed,
            format!(
                "{} for {} failed: {}{}",
                if kind == Kind::SessionSpawnFailed { "spawning a session" } else { "delivery" },
                items(record),
                field(record, "error"),
                if record.get("will_retry") == Some(&Value::Bool(true)) {
                    " (it will be retried)"
                } else {
                    ""
                }
            ),
        ),
        Kind::DispatchAbandoned => (
            Stage::Outcome,
            Mark::Failed,
            "abandoned when the service stopped; it is retried after the next start".to_owned(),
        ),
        Kind::ControlAnnounced => (
            Stage::Outcome,
            Mark::Passed,
            format!("posted the command back on {} (self-marked)", items(record)),
        ),
        Kind::ControlAnnounceFailed => (
            Stage::Outcome,
            Mark::Noted,
            format!(
                "could not post the command back on {}: {}",
                items(record),
                field(record, "error")
            ),
        ),
        Kind::McpCall => (
            Stage::Arrived,
            Mark::Noted,
            format!("MCP tool `{}` called: {}", field(record, "tool"), field(record, "outcome")),
        ),
        Kind::ReactionAdded => (
            Stage::Outcome,
            Mark::Noted,
            format!("reacted `{}` ({})", field(record, "content"), field(record, "state")),
        ),
        Kind::ReactionFailed => {
            (Stage::Outcome, Mark::Noted, format!("could not react: {}", field(record, "error")))
        }
        Kind::ReactionShed => (
            Stage::Outcome,
            Mark::Noted,
            format!(
                "got no reactions: {} were already in flight, more than GitHub was taking; \
                 reactions resume once they drain",
                field(record, "in_flight")
            ),
        ),
        Kind::ControlRecordFailed => failed(
            Stage::Outcome,
            format!("could not record the command on {}: {}", items(record), error(record)),
        ),
        Kind::DispatchBatched => noted(
            Stage::Decision,
            format!(
                "pasted as one prompt with {} other deliveries of the same {} (each keeps its \
                 own status)",
                field(record, "others"),
                field(record, "batch")
            ),
        ),
        Kind::CiFetched => noted(
            Stage::Effect,
            format!(
                "read the CI evidence in {} GitHub requests: {} failed jobs, {} annotations, \
                 {} log bytes read of which {} shown",
                field(record, "requests"),
                field(record, "failed_jobs"),
                field(record, "annotations"),
                field(record, "log_bytes"),
                field(record, "tail_bytes")
            ),
        ),
        Kind::CiFetchFailed => noted(
            Stage::Outcome,
            format!(
                "could not read the CI evidence after {} GitHub requests ({}): the event's \
                 own excerpt was pasted instead",
                field(record, "requests"),
                error(record)
            ),
        ),
        Kind::DispatchInDoubt => noted(
            Stage::Decision,
            "the previous process stopped while this delivery was in flight and its harness \
             cannot say it arrived: delivered again (at least once)"
                .to_owned(),
        ),
        Kind::DispatchRecovered => noted(
            Stage::Decision,
            "the previous process stopped while this delivery was in flight; the session's \
             own transcript shows it arrived, so it is not pasted twice"
                .to_owned(),
        ),
        Kind::DispatchLedgerWriteFailed => failed(
            Stage::Outcome,
            format!("could not append to the delivery ledger: {}", error(record)),
        ),
        Kind::InboxFull => failed(
            Stage::Outcome,
            format!(
                "the webhook journal is at its ceiling ({} deliveries, {} bytes waiting; \
                 `webhooks.ghWebhook.inboxMaxDeliveries` / `inboxMaxBytes`): deliveries are \
                 answered 503 until processing catches up, and GitHub can redeliver them",
                field(record, "deliveries"),
                field(record, "bytes")
            ),
        ),
        Kind::InboxResumed => noted(
            Stage::Outcome,
            format!(
                "the webhook journal takes deliveries again after refusing {} with 503",
                field(record, "refused")
            ),
        ),
        Kind::InboxReplaying => noted(
            Stage::Arrived,
            format!(
                "replaying {} webhook deliveries journalled before the last stop",
                field(record, "count")
            ),
        ),
        Kind::InboxSyncFailed => failed(
            Stage::Outcome,
            format!("could not sync the webhook journal to disk: {}", error(record)),
        ),
        Kind::InboxWriteFailed => failed(
            Stage::Outcome,
            format!("could not write the delivery to the webhook journal: {}", error(record)),
        ),
        Kind::InboxTornTail => noted(
            Stage::Outcome,
            format!(
                "the webhook journal `{}` ended in a partly written entry ({} bytes at {}), \
                 which was dropped: GitHub never got a 202 for it",
                field(record, "path"),
                field(record, "bytes"),
                field(record, "offset")
            ),
        ),
        other => unworded(other.name(), record),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::explain::delivery_trail;
    use crate::explain::tests::record;

    #[test]
    fn a_routed_line_says_why_the_actor_got_in() {
        let routed = |pass: &str| {
            let line = record(json!({"ts": "t1", "event": "routing.routed", "delivery_id": "d",
                "actor": "bob", "pass": pass, "work_items": ["github:o/r#1"]}));
            delivery_trail(&[line], "d").steps[0].text.clone()
        };
        assert!(routed("authorized").contains("@bob is authorized"));
        let close = routed("close-exempt");
        assert!(close.contains("a close passes whoever closed it, here @bob"), "{close}");
        assert!(!close.contains("is authorized"), "{close}");
        assert!(routed("collaborator").contains("@bob is a collaborator: input only"));
    }
}

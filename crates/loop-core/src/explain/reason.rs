//! A reason code (`reason` on drops, refusals, skips and closes) in words: what stopped
//! the event, and the setting or command that would change it.

use super::Record;
use super::fields::{actor, field, text};

/// A reason code in words.
pub fn reason_text(reason: &str, record: &Record) -> String {
    match reason {
        "self-authored" => "it is the-loop's own comment (it carries the self-marker)".to_owned(),
        "empty-review" => "the review has nothing to deliver: it is still pending, or has no body (its inline comments arrive on their own)".to_owned(),
        "undeclared-repository" => format!(
            "repository {} is not declared in `repositories`",
            text(record, "repository").unwrap_or("of the event")
        ),
        "unauthorized-actor" => format!(
            "{} is not in `routing.authorizedUsers` (nor a collaborator of the work item)",
            actor(record)
        ),
        "disabled-event" => format!(
            "the `{}` event is not in `webhooks.ghWebhook.events`",
            field(record, "gh_event")
        ),
        "no-work-item" => "it belongs to no work item (no issue or pull request could be resolved)".to_owned(),
        "work-item-not-found" => "GitHub says the work item it names does not exist".to_owned(),
        "duplicate-delivery" => "the same GitHub object was already taken in (by either ingress): nothing is done twice".to_owned(),
        "spawn-policy" => "no live session, and the work item is not armed: it lacks the `routing.autoExecuteLabel` label, or `routing.spawnOnUnmatched` is `never`".to_owned(),
        "collaborator-no-spawn" => "a collaborator's event never spawns a session".to_owned(),
        "awaiting-start" => "no live session, and no `the-loop start` has been recorded for the work item (`routing.control.requireStartCommand`)".to_owned(),
        "session-paused" => "the session is paused; `the-loop resume` delivers again".to_owned(),
        "already-processed" => "the session already received this delivery".to_owned(),
        "session-vanished" => "the session disappeared before the event reached it".to_owned(),
        "session-occupied" => "a live tmux session already holds the session's name".to_owned(),
        "shutting-down" => "the service was stopping; it is retried after the next start".to_owned(),
        "ambiguous-address" => "the comment addresses more than one instance".to_owned(),
        "addressed-elsewhere" => format!(
            "the comment addresses another instance (this one is `{}`)",
            text(record, "instance").unwrap_or("unnamed")
        ),
        "instance-locked" => "this instance is locked to the work items it manages (`instance.scope: locked`)".to_owned(),
        "unaddressed" => "this instance only acts on comments addressed to it (`instance.scope: addressed`)".to_owned(),
        "missing-collaborator" => "the command names no valid `@login`".to_owned(),
        "nothing-to-resume" => "there is no paused session to resume".to_owned(),
        "invalid-signature" => "the signature does not match the webhook secret".to_owned(),
        "invalid-payload" => "the body is not a JSON object".to_owned(),
        "payload-too-large" => "the body is larger than the receiver accepts".to_owned(),
        "not-found" => "GitHub says it does not exist".to_owned(),
        "issue-closed" => "the issue was closed".to_owned(),
        "foreign-checkout" => "the session's checkout is not the work item's repository (its `origin` remote names another)".to_owned(),
        "spec-dir-outside-checkout" => "`routing.graph.specDir` is not a relative path inside the checkout".to_owned(),
        "no-spec-dir" => "the work item's spec folder does not exist in its checkout yet".to_owned(),
        "pr-merged" => "the pull request was merged".to_owned(),
        "pr-closed" => "the pull request was closed without merging".to_owned(),
        "control-consumed" => "the comment's command was already carried out (this is a replay after a restart): it is not executed twice".to_owned(),
        "control-executed" => "the comment carried a command, which was executed; commands are never pasted into the session".to_owned(),
        "control-rejected" => "the comment's command would not act, so it was neither executed nor remembered".to_owned(),
        "control-ambiguous" => "the comment names two different commands: nothing is executed and nothing is forwarded".to_owned(),
        "handed-to-graph" => "the comment answers the process graph's gate (`the-loop execute`)".to_owned(),
        "already-granted" => "the login is already a collaborator".to_owned(),
        "not-a-collaborator" => "the login is not a collaborator".to_owned(),
        other => format!("`{other}`"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::explain::tests::record;

    #[test]
    fn every_reason_the_dispatcher_settles_with_reads_as_a_sentence() {
        let line = record(json!({}));
        for reason in
            ["control-consumed", "control-executed", "control-rejected", "control-ambiguous"]
        {
            assert!(!reason_text(reason, &line).starts_with('`'), "{reason} has no wording");
        }
    }
}

//! The sentences of the poller: its cycles, scopes and ledgers (`poll.*`) and its own
//! start and stop (`poller.*`).

use serde_json::Value;

use super::{error, failed, noted, reason, unworded};
use crate::explain::fields::{actor, field, items};
use crate::explain::{Mark, Record, Stage};
use crate::log::Kind;

/// A line of this family in words; any other kind is [`unworded`].
pub(super) fn wording(kind: Kind, record: &Record) -> (Stage, Mark, String) {
    match kind {
        Kind::PollCommentForwarded => (
            Stage::Arrived,
            Mark::Noted,
            format!(
                "seen by the poller: comment {} by {} on {}",
                field(record, "comment_id"),
                actor(record),
                items(record)
            ),
        ),
        Kind::PollCommentSettled => (
            Stage::Outcome,
            Mark::Noted,
            format!(
                "the poller settled comment {}: {}",
                field(record, "comment_id"),
                field(record, "outcome")
            ),
        ),
        Kind::PollUnauthorized => (
            Stage::Guard,
            Mark::Failed,
            format!(
                "the poller ignored {} on {}: not in `routing.authorizedUsers`",
                actor(record),
                items(record)
            ),
        ),
        Kind::PollAttemptsReleased => noted(
            Stage::Outcome,
            format!("the retry budget of {} comments was given back", field(record, "released")),
        ),
        Kind::PollClosureDetected => noted(
            Stage::Arrived,
            format!(
                "polling found {} {} ({})",
                items(record),
                field(record, "state"),
                field(record, "kind")
            ),
        ),
        Kind::PollCommentFailed => failed(
            Stage::Outcome,
            format!(
                "comment {} could not be delivered (try {}{})",
                field(record, "comment_id"),
                field(record, "attempts"),
                if record.get("will_retry") == Some(&Value::Bool(true)) {
                    ", retried next cycle"
                } else {
                    ", no more retries"
                }
            ),
        ),
        Kind::PollCycle => noted(
            Stage::Outcome,
            format!(
                "a poll cycle: {} items seen, {} comments forwarded, {} spawns, {} requests \
                 ({} not modified)",
                field(record, "items_seen"),
                field(record, "comments_forwarded"),
                field(record, "spawns"),
                field(record, "requests"),
                field(record, "not_modified")
            ),
        ),
        Kind::PollGiveupReported => noted(
            Stage::Outcome,
            format!(
                "gave up on comment {} after {} tries and said so on {}",
                field(record, "comment_id"),
                field(record, "attempts"),
                items(record)
            ),
        ),
        Kind::PollGiveupReportFailed => failed(
            Stage::Outcome,
            format!(
                "could not post the give-up note for comment {}: {}",
                field(record, "comment_id"),
                error(record)
            ),
        ),
        Kind::PollItemError => failed(
            Stage::Outcome,
            match record.get("error") {
                Some(_) => format!("polling {} failed: {}", items(record), error(record)),
                None => format!("polling {} skipped it: {}", items(record), reason(record)),
            },
        ),
        Kind::PollLinkageFallback => noted(
            Stage::Outcome,
            format!(
                "{} did not say which issues pull requests close ({}): they are linked by head branch and closing keywords until the next full sweep asks again",
                field(record, "host"),
                error(record)
            ),
        ),
        Kind::PollProviderError => failed(
            Stage::Outcome,
            format!("the {} provider failed: {}", field(record, "provider"), error(record)),
        ),
        Kind::PollRearmed => noted(
            Stage::Outcome,
            format!(
                "{} comments were given a fresh retry budget (ledger version {})",
                field(record, "comments"),
                field(record, "version")
            ),
        ),
        Kind::PollScopeDegraded => failed(
            Stage::Outcome,
            format!(
                "polling {} degraded ({}); retried in {} cycles, and no closure is concluded \
                 from it meanwhile",
                field(record, "scope"),
                error(record),
                field(record, "retry_after_cycles")
            ),
        ),
        Kind::PollScopeError => failed(
            Stage::Outcome,
            format!("listing {} failed: {}", field(record, "scope"), error(record)),
        ),
        Kind::PollScopeRecovered => {
            noted(Stage::Outcome, format!("listing {} works again", field(record, "scope")))
        }
        Kind::PollSpawnFailed => failed(
            Stage::Outcome,
            format!(
                "the spawn for {} failed (try {}{})",
                items(record),
                field(record, "attempts"),
                if record.get("will_retry") == Some(&Value::Bool(true)) {
                    ", retried next cycle"
                } else {
                    ", no more retries until new activity"
                }
            ),
        ),
        Kind::PollerStarted => noted(
            Stage::Outcome,
            format!("the poller started (every {} s)", field(record, "interval_seconds")),
        ),
        Kind::PollerStopped => noted(Stage::Outcome, "the poller stopped".to_owned()),
        Kind::PollerBlocked => failed(
            Stage::Outcome,
            format!(
                "another poller holds `{}` ({}): this one did not start",
                field(record, "pidfile"),
                field(record, "holder")
            ),
        ),
        other => unworded(other.name(), record),
    }
}

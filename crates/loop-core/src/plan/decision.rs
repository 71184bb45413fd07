//! What the dispatcher decided about one delivery, as values: each [`Decision`] names its
//! event-log line ([`Decision::line`]) and what becomes of the delivery's dedup key
//! ([`Decision::ledger`]). The pipeline and the workers build decisions and hand them to
//! one function that writes the line and applies the ledger effect, so the log can never
//! say one thing while the ledger does another.

use crate::WorkItemRef;
use crate::control::{Command, Disposition, Executed, Rejection, RosterEffect, SpawnRefusal};
use crate::guards::ScopeRefusal;
use crate::log::{Kind, Line};
use crate::login::Login;

/// What becomes of a delivery's dedup key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerEffect {
    /// Leave the key as it is (still in flight, or not ours to change).
    Untouched,
    /// Ended for good: a redelivery is a duplicate.
    Keep,
    /// Refused on purpose: never replayed, never counted as pending.
    Settle(&'static str),
    /// A failure: a redelivery or a later poll may try again.
    Release,
}

/// The facts of the delivery every line carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    /// `X-GitHub-Event` (or the poller's equivalent).
    pub gh_event: String,
    pub action: Option<String>,
    /// The dedup key.
    pub delivery_id: Option<String>,
    /// `X-GitHub-Delivery`, when it differs from the dedup key.
    pub gh_delivery: Option<String>,
    pub actor: Option<String>,
    pub work_items: Vec<WorkItemRef>,
    /// The receiver's inbox sequence number of the webhook that carried the event: its
    /// `processed` mark waits for the jobs it queued (docs/receiver.md).
    pub inbox_seq: Option<u64>,
}

impl Context {
    /// Marks a line as part of this delivery's trail (what `explain` groups by).
    pub fn stamp(&self, event: Line) -> Line {
        event.field("gh_event", &self.gh_event).field("delivery_id", &self.delivery_id).field(
            "gh_delivery",
            self.gh_delivery.as_ref().filter(|d| Some(*d) != self.delivery_id.as_ref()),
        )
    }

    fn items(&self) -> Vec<String> {
        self.work_items.iter().map(ToString::to_string).collect()
    }
}

/// A decision about one delivery (or one step of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The dedup key was already taken in.
    Duplicate,
    /// There is no work item to act on (`no-work-item`).
    NoWorkItem { reason: &'static str },
    /// Outside this instance's scope; `command` when an authorized named actor typed one.
    OutOfScope { refusal: ScopeRefusal, instance: Option<String>, command: Option<Command> },
    /// Two different keywords: nothing executed, nothing forwarded.
    Ambiguous { commands: Vec<Command> },
    /// A command refused.
    Rejected { command: Command, rejection: Rejection, target: Option<WorkItemRef> },
    /// A command executed (recorded when it is not `execute`), with its effect.
    Executed { command: Command, actor: Login, effect: Executed, target: WorkItemRef },
    /// A replay of the delivery whose command is already recorded (a process died
    /// between recording it and settling the delivery): not executed again.
    ControlConsumed { command: Command, target: WorkItemRef },
    /// One login of a roster edit.
    RosterEdited {
        command: Command,
        actor: Login,
        collaborator: Login,
        effect: RosterEffect,
        target: WorkItemRef,
    },
    /// `execute`: handed to the graph, and the comment carries on as input.
    HandedToGraph { actor: Login, target: WorkItemRef },
    /// The spawn-policy gate refused an unmatched event.
    SpawnRefused { refusal: SpawnRefusal },
    /// Every matched session is paused.
    SessionPaused { item: WorkItemRef },
    /// The key is already in the session's restart-surviving deliveries.
    AlreadyProcessed { item: WorkItemRef },
    /// Enqueued on a work item's queue.
    Queued { item: WorkItemRef, spawn: bool },
    /// A close event handled: the delivery's one outcome (kept, counted once), named by
    /// the closure's reason. Its steps are the closure decisions below.
    Closed { reason: &'static str },
    /// The closed item's own session was ended (`session.autoclosed`).
    AutoClosed { item: WorkItemRef, reason: &'static str, merged: bool },
    /// A pull request delivering `owner` closed: only its endpoint ended
    /// (`work_item.pull_request_ended`), the owner's session stays (`session.kept_open`).
    KeptOpen {
        owner: WorkItemRef,
        pull_request: WorkItemRef,
        state: &'static str,
        reason: &'static str,
    },
    /// A tracked item was stamped `ended` and disarmed (`work_item.ended`).
    Ended {
        item: WorkItemRef,
        state: &'static str,
        kind: &'static str,
        ingress: &'static str,
        actor: Option<Login>,
    },
    /// The `ended` stamp could not be written or cleared (`work_item.stamp_failed`).
    StampFailed { item: WorkItemRef, error: String },
    /// The closer is not a named authorized actor: the session was closed, its local
    /// resources kept (`cleanup.deferred`).
    CleanupDeferred { item: WorkItemRef, actor: Option<Login>, closed_as: &'static str },
    /// A reopen cleared the item's `ended` stamp (`work_item.reopened`).
    Reopened { item: WorkItemRef, ingress: &'static str },
    /// Pasted into a session (`already`: it was there before; nothing pasted).
    Delivered { item: WorkItemRef, endpoint: WorkItemRef, harness: String, already: bool },
    /// A dead session brought back with the event as its first prompt.
    Respawned {
        item: WorkItemRef,
        harness: String,
        session_id: String,
        resumed: bool,
        target: String,
    },
    /// A session spawned for a work item.
    Spawned {
        item: WorkItemRef,
        harness: String,
        session_id: String,
        target: String,
        interaction: &'static str,
    },
    /// A spawn that could not happen.
    SpawnFailed { item: WorkItemRef, error: String },
    /// Queued behind the spawn in flight for `item`, to be planned again once it ended.
    AwaitingSpawn { item: WorkItemRef },
    /// A close queued behind the deliveries `item`'s worker holds, to be planned again
    /// once they are carried out.
    AwaitingQueue { item: WorkItemRef },
    /// The session disappeared between enqueue and dequeue.
    SessionVanished { item: WorkItemRef },
    /// A live tmux session holds the name and cannot be cleared.
    SessionOccupied { item: WorkItemRef, target: String, error: String },
    /// Pasting (or respawning) failed.
    Failed { item: WorkItemRef, harness: String, error: String },
    /// The dispatch did not finish within `dispatchTimeoutSeconds`.
    TimedOut { item: WorkItemRef, seconds: u64 },
    /// Not queued: the dispatcher is shutting down.
    ShuttingDown { item: WorkItemRef },
}

impl Decision {
    /// Whether the dispatch succeeded, for the completion reaction.
    pub fn succeeded(&self) -> bool {
        matches!(
            self,
            Self::Delivered { .. }
                | Self::Respawned { .. }
                | Self::Spawned { .. }
                | Self::SessionPaused { .. }
        )
    }

    /// What becomes of the dedup key.
    pub fn ledger(&self) -> LedgerEffect {
        match self {
            Self::Duplicate
            | Self::HandedToGraph { .. }
            | Self::Queued { .. }
            | Self::AwaitingSpawn { .. }
            | Self::AwaitingQueue { .. }
            | Self::AutoClosed { .. }
            | Self::KeptOpen { .. }
            | Self::Ended { .. }
            | Self::StampFailed { .. }
            | Self::CleanupDeferred { .. }
            | Self::Reopened { .. } => LedgerEffect::Untouched,
            Self::NoWorkItem { .. }
            | Self::AlreadyProcessed { .. }
            | Self::Closed { .. }
            | Self::Delivered { .. }
            | Self::Respawned { .. }
            | Self::Spawned { .. }
            | Self::SessionVanished { .. }
            | Self::SessionOccupied { .. } => LedgerEffect::Keep,
            Self::OutOfScope { refusal, .. } => LedgerEffect::Settle(refusal.reason()),
            Self::Ambiguous { .. } => LedgerEffect::Settle("control-ambiguous"),
            Self::Rejected { .. } => LedgerEffect::Settle("control-rejected"),
            Self::Executed { .. } | Self::RosterEdited { .. } => {
                LedgerEffect::Settle("control-executed")
            }
            Self::ControlConsumed { .. } => LedgerEffect::Settle("control-consumed"),
            Self::SpawnRefused { refusal } => match refusal.disposition() {
                Disposition::Release => LedgerEffect::Release,
                Disposition::Settle => LedgerEffect::Settle(refusal.reason()),
                Disposition::Keep => LedgerEffect::Keep,
            },
            Self::SessionPaused { .. } => LedgerEffect::Settle("session-paused"),
            Self::SpawnFailed { .. }
            | Self::Failed { .. }
            | Self::TimedOut { .. }
            | Self::ShuttingDown { .. } => LedgerEffect::Release,
        }
    }

    /// The event-log lines, in order; none for a close's summary (its steps have them).
    pub fn lines(&self, cx: &Context) -> Vec<Line> {
        let event = match self {
            Self::KeptOpen { owner, pull_request, state, reason } => {
                let ended = Line::info(Kind::WorkItemPullRequestEnded)
                    .work_item(owner)
                    .field("pull_request", pull_request.to_string())
                    .field("state", state);
                let kept = Line::info(Kind::SessionKeptOpen)
                    .work_item(owner)
                    .field("reason", reason)
                    .field("closed_ref", pull_request.to_string());
                return vec![cx.stamp(ended), cx.stamp(kept)];
            }
            other => other.line(cx),
        };
        event.into_iter().collect()
    }

    /// The one line of a single-line decision.
    fn line(&self, cx: &Context) -> Option<Line> {
        let dropped = |level: fn(Kind) -> Line, reason: &str| {
            level(Kind::DispatchDropped).field("reason", reason).field("work_items", cx.items())
        };
        let event = match self {
            Self::Duplicate => dropped(Line::info, "duplicate-delivery"),
            Self::NoWorkItem { reason } => dropped(Line::warning, reason),
            Self::OutOfScope { refusal, instance, command } => {
                let event = match command {
                    Some(command) => Line::warning(Kind::ControlRejected)
                        .field("work_items", cx.items())
                        .field("command", command.name())
                        .field("via", "comment")
                        .field("actor", &cx.actor),
                    None => dropped(Line::info, refusal.reason()),
                };
                event.field("reason", refusal.reason()).field("instance", instance)
            }
            Self::Ambiguous { commands } => Line::warning(Kind::ControlAmbiguous)
                .field("work_items", cx.items())
                .field("actor", &cx.actor)
                .field("commands", commands.iter().map(|c| c.name()).collect::<Vec<_>>()),
            Self::Rejected { command, rejection, target } => Line::warning(Kind::ControlRejected)
                .field("work_items", cx.items())
                .field("work_item", target.as_ref().map(ToString::to_string))
                .field("command", command.name())
                .field("via", "comment")
                .field("actor", &cx.actor)
                .field("reason", rejection.reason()),
            Self::Executed { command, actor, effect, target } => Line::info(Kind::ControlCommand)
                .work_item(target)
                .field("command", command.name())
                .field("via", "comment")
                .field("actor", actor.as_str())
                .field("effect", effect.as_str()),
            Self::ControlConsumed { command, target } => {
                dropped(Line::info, "control-consumed")
                    .work_item(target)
                    .field("command", command.name())
            }
            Self::RosterEdited { command, actor, collaborator, effect, target } => {
                Line::info(Kind::ControlCommand)
                    .work_item(target)
                    .field("command", command.name())
                    .field("via", "comment")
                    .field("actor", actor.as_str())
                    .field("collaborator", collaborator.as_str())
                    .field("effect", effect.as_str())
            }
            Self::HandedToGraph { actor, target } => Line::info(Kind::ControlCommand)
                .work_item(target)
                .field("command", Command::Execute.name())
                .field("via", "comment")
                .field("actor", actor.as_str())
                .field("effect", "handed-to-graph"),
            Self::SpawnRefused { refusal } => dropped(Line::info, refusal.reason()),
            Self::SessionPaused { item } => {
                dropped(Line::info, "session-paused").work_item(item)
            }
            Self::AlreadyProcessed { item } => {
                dropped(Line::info, "already-processed").work_item(item)
            }
            Self::Queued { item, spawn } => {
                Line::info(Kind::DispatchQueued).work_item(item).field("spawn", spawn)
            }
            Self::AwaitingSpawn { item } => Line::info(Kind::DispatchAwaitingSpawn).work_item(item),
            Self::AwaitingQueue { item } => Line::info(Kind::DispatchAwaitingQueue).work_item(item),
            Self::Closed { .. } | Self::KeptOpen { .. } => return None,
            Self::AutoClosed { item, reason, merged } => Line::info(Kind::SessionAutoclosed)
                .work_item(item)
                .field("reason", reason)
                .field("merged", merged),
            Self::Ended { item, state, kind, ingress, actor } => Line::info(Kind::WorkItemEnded)
                .work_item(item)
                .field("state", state)
                .field("kind", kind)
                .field("ingress", ingress)
                .field("actor", actor.as_ref().map(Login::as_str)),
            Self::StampFailed { item, error } => {
                Line::error(Kind::WorkItemStampFailed).work_item(item).field("error", error)
            }
            Self::CleanupDeferred { item, actor, closed_as } => Line::info(Kind::CleanupDeferred)
                .work_item(item)
                .field("reason", if actor.is_some() { "unauthorized-actor" } else { "no-actor" })
                .field("actor", actor.as_ref().map(Login::as_str))
                .field("closed_as", closed_as),
            Self::Reopened { item, ingress } => {
                Line::info(Kind::WorkItemReopened).work_item(item).field("ingress", ingress)
            }
            Self::Delivered { item, endpoint, harness, already } => {
                Line::info(Kind::DispatchSucceeded)
                    .work_item(item)
                    .field("endpoint", (endpoint != item).then(|| endpoint.to_string()))
                    .field("harness", harness)
                    .field("via", "tmux")
                    .field("already_delivered", already.then_some(true))
            }
            Self::Respawned { item, harness, session_id, resumed, target } => {
                Line::info(Kind::SessionRespawned)
                    .work_item(item)
                    .field("harness", harness)
                    .field("harness_session_id", session_id)
                    .field("resumed", resumed)
                    .field("runner", "tmux")
                    .field("tmux_target", target)
            }
            Self::Spawned { item, harness, session_id, target, interaction } => {
                Line::info(Kind::SessionSpawned)
                    .work_item(item)
                    .field("harness", harness)
                    .field("harness_session_id", session_id)
                    .field("runner", "tmux")
                    .field("interaction", interaction)
                    .field("tmux_target", target)
                    .field("action", &cx.action)
            }
            Self::SpawnFailed { item, error } => Line::error(Kind::SessionSpawnFailed)
                .work_item(item)
                .field("error", error)
                .field("will_retry", cx.delivery_id.is_some()),
            Self::SessionVanished { item } => {
                dropped(Line::warning, "session-vanished").work_item(item)
            }
            Self::SessionOccupied { item, target, error } => {
                dropped(Line::error, "session-occupied")
                    .work_item(item)
                    .field("tmux_target", target)
                    .field("error", error)
                    .field("will_retry", false)
            }
            Self::Failed { item, harness, error } => Line::error(Kind::DispatchFailed)
                .work_item(item)
                .field("harness", harness)
                .field("via", "tmux")
                .field("error", error)
                .field("will_retry", cx.delivery_id.is_some()),
            Self::TimedOut { item, seconds } => Line::error(Kind::DispatchFailed)
                .work_item(item)
                .field("error", format!("the dispatch did not finish within {seconds} s (routing.dispatchTimeoutSeconds)"))
                .field("will_retry", cx.delivery_id.is_some()),
            Self::ShuttingDown { item } => {
                dropped(Line::warning, "shutting-down").work_item(item)
            }
        };
        Some(cx.stamp(event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item() -> WorkItemRef {
        "github:octo/app#15".parse().expect("a valid ref")
    }

    #[test]
    fn refusals_on_purpose_settle_and_failures_release() {
        let awaiting = Decision::SpawnRefused { refusal: SpawnRefusal::AwaitingStart };
        assert_eq!(awaiting.ledger(), LedgerEffect::Settle("awaiting-start"));
        let policy = Decision::SpawnRefused { refusal: SpawnRefusal::SpawnPolicy };
        assert_eq!(policy.ledger(), LedgerEffect::Release);
        let failed = Decision::Failed { item: item(), harness: "h".into(), error: "x".into() };
        assert_eq!(failed.ledger(), LedgerEffect::Release);
        assert_eq!(
            Decision::Ambiguous { commands: vec![] }.ledger(),
            LedgerEffect::Settle("control-ambiguous")
        );
    }

    #[test]
    fn a_line_carries_the_reason_and_the_delivery() {
        let cx = Context {
            gh_event: "issue_comment".into(),
            delivery_id: Some("k".into()),
            work_items: vec![item()],
            ..Context::default()
        };
        let line = Decision::SpawnRefused { refusal: SpawnRefusal::AwaitingStart }
            .line(&cx)
            .expect("a line");
        assert_eq!(line.name(), "dispatch.dropped");
        let text = format!("{line:?}");
        assert!(text.contains("awaiting-start") && text.contains("\"k\""), "{text}");
    }
}

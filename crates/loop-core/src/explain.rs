//! `explain`: the decision trail of one delivery or one work item, rebuilt from
//! event-log lines alone and said in plain language — the answer to "why did nothing
//! happen?" (SPEC §6).
//!
//! Input is the log's records as parsed JSON objects (envelope `ts`, `event`, `level`
//! plus fields), in file order; for a work item, also its current records
//! ([`ItemState`]), which the caller reads. Each line becomes a [`Step`] with its stage
//! (what arrived, a guard, a decision, an effect, an outcome), whether it passed or
//! failed, and a sentence; each delivery ends with a [`Verdict`]. A line of a type this
//! module does not know is still shown, with its fields, so nothing in the log is hidden.
//!
//! Pure: no IO, no clock. Lines are grouped by delivery: the GitHub delivery id when a
//! line carries one (`gh_delivery`, else `delivery_id`), so the receiver's lines (keyed by
//! `X-GitHub-Delivery`) and the dispatcher's (keyed by the dedup key, carrying
//! `gh_delivery`) form one trail.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::WorkItemRef;
use crate::log::Kind;
use crate::record::{Collaborators, Control, Ended, EndpointStatus, LocalRecord, PollLedger};

/// One event-log record: the JSON object of one line.
pub type Record = Map<String, Value>;

/// Where in the pipeline a line sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// The event came in (webhook or poll).
    Arrived,
    /// A check the event had to pass (signature, self-marker, repository, actor,
    /// instance scope, control authorization, spawn gate, dedup).
    Guard,
    /// What the-loop decided to do.
    Decision,
    /// What it did.
    Effect,
    /// How a thing it did ended (failures, retries, reactions).
    Outcome,
}

/// Whether a step let the event through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mark {
    Passed,
    Failed,
    /// Neither: a fact.
    Noted,
}

/// One line of the trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    pub ts: String,
    /// The event-log type (`routing.dropped`, …).
    pub event: String,
    pub stage: Stage,
    pub mark: Mark,
    /// The line in plain language.
    pub text: String,
}

/// How a delivery ended, in one sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "outcome", content = "text")]
pub enum Verdict {
    /// Something was done (delivered, spawned, a command executed, a close handled).
    Acted(String),
    /// Stopped on purpose by a guard or a rule: the reason.
    Refused(String),
    /// Something was tried and failed.
    Failed(String),
    /// No decision is in the log (still in flight, or the service stopped first).
    Undecided(String),
}

/// The trail of one delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeliveryTrail {
    /// `None` for lines that belong to no delivery (a CLI command, a close found by
    /// polling).
    pub delivery: Option<String>,
    pub steps: Vec<Step>,
    pub verdict: Option<Verdict>,
}

/// A work item's current records, as the caller read them.
#[derive(Debug, Clone, Default)]
pub struct ItemState {
    pub control: Option<Control>,
    pub session: Option<LocalRecord>,
    pub ledger: Option<PollLedger>,
    pub ended: Option<Ended>,
    pub collaborators: Option<Collaborators>,
}

impl ItemState {
    /// Whether any record holds something about the item.
    pub fn known(&self) -> bool {
        self.control.is_some()
            || self.session.is_some()
            || self.ledger.is_some()
            || self.ended.is_some()
    }

    /// The records as JSON: `{control, session, poll, ended, collaborators}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "control": self.control,
            "session": self.session,
            "poll": self.ledger,
            "ended": self.ended,
            "collaborators": self.collaborators,
        })
    }
}

/// Everything `explain` says about a work item, as `explain --json` and
/// `GET /api/v1/explain` print it: `{workItem, state, summary, deliveries}`.
pub fn item_explanation(item: &WorkItemRef, state: &ItemState, trails: &[DeliveryTrail]) -> Value {
    serde_json::json!({
        "workItem": item.to_string(),
        "state": state.to_json(),
        "summary": describe_item(state),
        "deliveries": trails,
    })
}

/// The delivery key a record belongs to: the GitHub delivery when it names one.
fn delivery_key(record: &Record) -> Option<&str> {
    text(record, "gh_delivery").or_else(|| text(record, "delivery_id"))
}

/// Whether `record` is about delivery `id` under any of the names a delivery has.
fn mentions_delivery(record: &Record, id: &str) -> bool {
    ["delivery_id", "gh_delivery", "dedup_key"].iter().any(|key| text(record, key) == Some(id))
        || strings(record, "delivery_ids").any(|d| d == id)
}

/// Whether `record` is about work item `item` (`work_item` or one of `work_items`).
fn mentions_item(record: &Record, item: &str) -> bool {
    text(record, "work_item") == Some(item)
        || text(record, "target") == Some(item)
        || strings(record, "work_items").any(|w| w == item)
}

/// The trail of delivery `id` (a GitHub delivery id, a dedup key or a poll id): every
/// line naming it, and every line of the GitHub delivery those lines name.
pub fn delivery_trail(records: &[Record], id: &str) -> DeliveryTrail {
    let keys: Vec<&str> = records
        .iter()
        .filter(|r| mentions_delivery(r, id))
        .filter_map(delivery_key)
        .chain(std::iter::once(id))
        .collect();
    let lines: Vec<&Record> = records
        .iter()
        .filter(|r| mentions_delivery(r, id) || delivery_key(r).is_some_and(|k| keys.contains(&k)))
        .collect();
    trail(Some(id.to_owned()), &lines)
}

/// The trail of work item `item`: each delivery that touched it (with all its lines,
/// the arrival included) and each line about it outside any delivery, in log order.
/// Only the last `limit` entries are kept (0 = all).
pub fn item_trail(records: &[Record], item: &WorkItemRef, limit: usize) -> Vec<DeliveryTrail> {
    let item = item.to_string();
    let mut order: Vec<Option<String>> = Vec::new();
    let mut groups: Vec<Vec<&Record>> = Vec::new();
    let touched: Vec<&str> =
        records.iter().filter(|r| mentions_item(r, &item)).filter_map(delivery_key).collect();
    for record in records {
        match delivery_key(record) {
            Some(key) if touched.contains(&key) => {
                let key = Some(key.to_owned());
                match order.iter().position(|k| *k == key) {
                    Some(at) => groups[at].push(record),
                    None => {
                        order.push(key);
                        groups.push(vec![record]);
                    }
                }
            }
            None if mentions_item(record, &item) => {
                order.push(None);
                groups.push(vec![record]);
            }
            _ => {}
        }
    }
    let skip = if limit == 0 { 0 } else { order.len().saturating_sub(limit) };
    order.into_iter().zip(groups).skip(skip).map(|(key, lines)| trail(key, &lines)).collect()
}

/// A delivery's steps in the order they happened: by timestamp, and in file order within
/// one millisecond. A process that writes its routine lines behind its emitters (the
/// service) writes a line recording an effect at once, so the file can hold an effect
/// before the routing lines that led to it.
fn trail(delivery: Option<String>, lines: &[&Record]) -> DeliveryTrail {
    let mut steps: Vec<Step> = lines.iter().map(|r| step(r)).collect();
    steps.sort_by(|a, b| a.ts.cmp(&b.ts));
    let verdict = delivery.as_ref().map(|_| verdict(&steps));
    DeliveryTrail { delivery, steps, verdict }
}

/// The first refusal wins (it is why nothing more happened); else a failure, else the
/// last effect.
fn verdict(steps: &[Step]) -> Verdict {
    if let Some(refusal) = steps.iter().find(|s| s.mark == Mark::Failed && s.stage == Stage::Guard)
    {
        return Verdict::Refused(refusal.text.clone());
    }
    if let Some(failure) = steps.iter().rev().find(|s| s.mark == Mark::Failed) {
        return Verdict::Failed(failure.text.clone());
    }
    if let Some(effect) = steps.iter().rev().find(|s| s.stage == Stage::Effect) {
        return Verdict::Acted(effect.text.clone());
    }
    if steps.is_empty() {
        return Verdict::Undecided("the event log has no line about this delivery".to_owned());
    }
    Verdict::Undecided(
        "no decision is recorded yet: it is still being processed, or the service stopped before deciding (it is replayed at the next start)"
            .to_owned(),
    )
}

fn text<'a>(record: &'a Record, key: &str) -> Option<&'a str> {
    record.get(key).and_then(Value::as_str)
}

fn strings<'a>(record: &'a Record, key: &str) -> impl Iterator<Item = &'a str> {
    record.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
}

/// A field for a sentence: strings bare, anything else as JSON, `?` when absent.
fn field(record: &Record, key: &str) -> String {
    match record.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join(", "),
        Some(other) => other.to_string(),
        None => "?".to_owned(),
    }
}

/// `@login`, or `someone unnamed` when the event names no actor.
fn actor(record: &Record) -> String {
    text(record, "actor").map_or_else(|| "someone unnamed".to_owned(), |a| format!("@{a}"))
}

/// Why the actor guard let a `routing.routed` line's event in, for a sentence. Lines
/// written before the `pass` field existed said nothing more than the actor.
fn actor_pass(record: &Record) -> String {
    match text(record, "pass") {
        Some("authorized") => format!("{} is authorized", actor(record)),
        Some("close-exempt") => format!("a close passes whoever closed it, here {}", actor(record)),
        Some("actorless") => "no actor: input only, never a command".to_owned(),
        Some("collaborator") => format!("{} is a collaborator: input only", actor(record)),
        _ => format!("actor {}", actor(record)),
    }
}

/// The work items a line is about, for a sentence.
fn items(record: &Record) -> String {
    if let Some(item) = text(record, "work_item") {
        return item.to_owned();
    }
    let all: Vec<&str> = strings(record, "work_items").collect();
    if all.is_empty() { "the work item".to_owned() } else { all.join(", ") }
}

/// Every field but the envelope, as `k=v`.
fn details(record: &Record) -> String {
    record
        .iter()
        .filter(|(k, _)| !["ts", "event", "level", "source", "pid"].contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={}", v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
        .collect::<Vec<_>>()
        .join(" ")
}

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

/// One line in words.
pub fn step(record: &Record) -> Step {
    let event = text(record, "event").unwrap_or("?").to_owned();
    let (stage, mark, sentence) = match Kind::from_name(&event) {
        Some(kind) => wording(kind, record),
        // Another version's line, or a hand-written one: shown with its fields.
        None => (Stage::Outcome, Mark::Noted, format!("{event}: {}", details(record))),
    };
    let ts = text(record, "ts").unwrap_or_default().to_owned();
    Step { ts, event, stage, mark, text: sentence }
}

/// Where a line of `kind` sits, whether it let the event through, and what it says. One
/// arm per kind: a new kind does not compile until it has its sentence.
fn wording(kind: Kind, record: &Record) -> (Stage, Mark, String) {
    let reason = || reason_text(text(record, "reason").unwrap_or("?"), record);
    let action = text(record, "action").map(|a| format!(" {a}")).unwrap_or_default();
    let gh_event = field(record, "gh_event");
    let error = || field(record, "error");
    let noted = |stage: Stage, text: String| (stage, Mark::Noted, text);
    let failed = |stage: Stage, text: String| (stage, Mark::Failed, text);
    let done = |text: String| (Stage::Effect, Mark::Passed, text);
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
            (Stage::Guard, Mark::Failed, format!("refused at the door: {}", reason()))
        }
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
        Kind::RoutingDropped | Kind::DispatchDropped => {
            let reason_code = text(record, "reason").unwrap_or("?");
            let mark = if reason_code == "duplicate-delivery" { Mark::Noted } else { Mark::Failed };
            (Stage::Guard, mark, format!("dropped: {}", reason()))
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
        Kind::RoutingLinkageDropped => {
            (Stage::Guard, Mark::Noted, format!("{} was left out: {}", items(record), reason()))
        }
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
                reason()
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
        Kind::McpCall => (
            Stage::Arrived,
            Mark::Noted,
            format!("MCP tool `{}` called: {}", field(record, "tool"), field(record, "outcome")),
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
        Kind::ConfigReloaded => noted(
            Stage::Outcome,
            match text(record, "detail") {
                Some(detail) => format!("the config file changed and was reloaded: {detail}"),
                None => "the config file changed and was reloaded".to_owned(),
            },
        ),
        Kind::ConfigReloadFailed => failed(
            Stage::Outcome,
            format!(
                "the changed config file `{}` was refused, the previous one stays in force: {}",
                field(record, "path"),
                error()
            ),
        ),
        Kind::ControlRecordFailed => failed(
            Stage::Outcome,
            format!("could not record the command on {}: {}", items(record), error()),
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
                error()
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
        Kind::DispatchLedgerWriteFailed => {
            failed(Stage::Outcome, format!("could not append to the delivery ledger: {}", error()))
        }
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
            format!("could not sync the webhook journal to disk: {}", error()),
        ),
        Kind::InboxWriteFailed => failed(
            Stage::Outcome,
            format!("could not write the delivery to the webhook journal: {}", error()),
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
                error()
            ),
        ),
        Kind::PollItemError => failed(
            Stage::Outcome,
            match record.get("error") {
                Some(_) => format!("polling {} failed: {}", items(record), error()),
                None => format!("polling {} skipped it: {}", items(record), reason()),
            },
        ),
        Kind::PollLinkageFallback => noted(
            Stage::Outcome,
            format!(
                "{} did not say which issues pull requests close ({}): they are linked by head branch and closing keywords until the next full sweep asks again",
                field(record, "host"),
                error()
            ),
        ),
        Kind::PollProviderError => failed(
            Stage::Outcome,
            format!("the {} provider failed: {}", field(record, "provider"), error()),
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
                error(),
                field(record, "retry_after_cycles")
            ),
        ),
        Kind::PollScopeError => failed(
            Stage::Outcome,
            format!("listing {} failed: {}", field(record, "scope"), error()),
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
        Kind::ServerStarted => noted(
            Stage::Outcome,
            format!(
                "the webhook receiver started on {}:{}{}",
                field(record, "host"),
                field(record, "port"),
                field(record, "path")
            ),
        ),
        Kind::ServerStopped => noted(Stage::Outcome, "the webhook receiver stopped".to_owned()),
        Kind::ApiStarted => noted(
            Stage::Outcome,
            format!(
                "the control plane started on http://{}:{}",
                field(record, "host"),
                field(record, "port")
            ),
        ),
        Kind::ApiStopped => noted(Stage::Outcome, "the control plane stopped".to_owned()),
        Kind::ApiRequest => noted(
            Stage::Outcome,
            format!(
                "{} {} answered {}",
                field(record, "method"),
                field(record, "path"),
                field(record, "status")
            ),
        ),
        Kind::StreamSubscribed => noted(
            Stage::Outcome,
            format!("a stream client connected ({} open)", field(record, "subscribers")),
        ),
        Kind::StreamRefused => noted(
            Stage::Outcome,
            format!("a stream client was refused ({})", field(record, "reason")),
        ),
        Kind::StreamDesync => noted(
            Stage::Outcome,
            format!("a stream client was told to refetch ({})", field(record, "reason")),
        ),
        Kind::StreamDisconnected => noted(
            Stage::Outcome,
            format!(
                "a stream client went away after {} frames ({})",
                field(record, "frames"),
                field(record, "reason")
            ),
        ),
        Kind::RegistryUnreadable => failed(
            Stage::Outcome,
            format!("the session records could not be listed (read as none): {}", error()),
        ),
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
                error()
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
                error()
            ),
        ),
        Kind::SessionSpawnMarkerLeft => failed(
            Stage::Outcome,
            format!("could not remove {}'s session marker: {}", items(record), error()),
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
            format!("could not note the delivery on {}'s record: {}", items(record), error()),
        ),
        Kind::SessionUpdateFailed => failed(
            Stage::Outcome,
            format!("could not update {}'s session record: {}", items(record), error()),
        ),
        Kind::SessionWorkItemMissing => failed(
            Stage::Outcome,
            format!("GitHub says {} no longer exists: {}", items(record), error()),
        ),
        Kind::StateLegacyAdopted => noted(
            Stage::Outcome,
            format!(
                "read {}'s `{}` forward from the reference's layout",
                items(record),
                field(record, "section")
            ),
        ),
        Kind::StateQuarantined => failed(
            Stage::Outcome,
            format!(
                "`{}` did not parse and was moved aside to `{}`: {}",
                field(record, "path"),
                field(record, "moved_to"),
                error()
            ),
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
            format!("could not remove {}'s checkout: {}", items(record), error()),
        ),
        Kind::GraphStarted => done(format!(
            "entered {}'s process graph ({}) at `{}`",
            items(record),
            field(record, "loop"),
            field(record, "node")
        )),
        Kind::GraphAdvanced => done(format!(
            "the gate of `{}` gave `{}`: {} moved to `{}`{}",
            field(record, "from"),
            field(record, "outcome"),
            items(record),
            field(record, "to"),
            match strings(record, "skipped").collect::<Vec<_>>() {
                skipped if skipped.is_empty() => String::new(),
                skipped => format!(", past {} (declared away)", skipped.join(", ")),
            }
        )),
        Kind::GraphParked => noted(
            Stage::Outcome,
            format!("`{}` waits: {}", field(record, "node"), field(record, "reason")),
        ),
        Kind::GraphBlocked => failed(
            Stage::Outcome,
            format!(
                "the gate of `{}` blocked: {}",
                field(record, "node"),
                field(record, "messages")
            ),
        ),
        Kind::GraphEscalated => failed(
            Stage::Outcome,
            format!(
                "the gate of `{}` blocked again ({} attempts): escalated to a human — {}",
                field(record, "node"),
                field(record, "attempts"),
                field(record, "messages")
            ),
        ),
        Kind::GraphNoEdge => failed(
            Stage::Outcome,
            format!(
                "`{}` passed with `{}`, but the loop declares no edge for it: parked for a human",
                field(record, "node"),
                field(record, "outcome")
            ),
        ),
        Kind::GraphCompleted => done(format!(
            "{} reached `{}`: its process is complete",
            items(record),
            field(record, "node")
        )),
        Kind::GraphLinkFailed => failed(
            Stage::Outcome,
            format!(
                "the process graph could not be driven (the event was still delivered): {}",
                error()
            ),
        ),
        Kind::GraphChoiceRefused => noted(
            Stage::Outcome,
            format!(
                "the state file's {} is not what the operator offers: the operator's default was used",
                field(record, "refused")
            ),
        ),
        Kind::GraphSkipped => {
            noted(Stage::Outcome, format!("the process graph was not driven: {}", reason()))
        }
        Kind::GraphForced => done(format!(
            "{} forced {} from `{}` to `{}` past its gates ({}): the pointer moved, no verdict was forged",
            field(record, "actor"),
            items(record),
            field(record, "from"),
            field(record, "to"),
            field(record, "reason")
        )),
        Kind::GraphSkipsDeclared => done(format!(
            "{} declared {} skipped for {} ({}): the walk passes them when it reaches them",
            field(record, "actor"),
            strings(record, "nodes").map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
            items(record),
            field(record, "reason")
        )),
        Kind::GraphSkipsRejected => noted(
            Stage::Outcome,
            format!(
                "refused to declare `{}` skipped: {}",
                field(record, "token"),
                field(record, "why")
            ),
        ),
        Kind::GraphAssignmentDelivered => {
            done(format!("pasted the `{}` assignment into the session", field(record, "node")))
        }
        Kind::GraphAssignmentFailed => failed(
            Stage::Outcome,
            format!("could not paste the `{}` assignment: {}", field(record, "node"), error()),
        ),
        Kind::GraphHookDegraded => noted(
            Stage::Outcome,
            format!(
                "hook `{}` degraded (the gate's verdict stands): {}",
                field(record, "hook"),
                error()
            ),
        ),
        Kind::WorkspaceTrusted => {
            done(format!("pre-seeded the harness's trust for {}'s checkout", items(record)))
        }
        Kind::HarnessPluginRegistered => done(format!(
            "wrote or registered the-loop's Claude Code plugin for {}'s session",
            items(record)
        )),
        Kind::HarnessPluginFailed => failed(
            Stage::Outcome,
            format!(
                "could not register the-loop's Claude Code plugin for {} (the session runs without it): {}",
                items(record),
                error()
            ),
        ),
        Kind::WorkspaceTrustFailed => failed(
            Stage::Outcome,
            format!("could not pre-seed the harness's trust for {}: {}", items(record), error()),
        ),
    }
}

/// A work item's records in words: arming, session, ledger, collaborators, ended.
pub fn describe_item(state: &ItemState) -> Vec<String> {
    let mut lines = Vec::new();
    lines.push(match &state.control {
        None => "arming: no command recorded — nothing spawns until an authorized `the-loop start`"
            .to_owned(),
        Some(control) => {
            let by = control.actor.as_ref().map(|a| format!(" by @{a}")).unwrap_or_default();
            let armed =
                if crate::control::is_armed(Some(control.command)) { "armed" } else { "not armed" };
            let source = control.source.name();
            format!(
                "arming: {armed} — last command `{}`{by} ({source}) at {}",
                control.command.name(),
                control.requested_at
            )
        }
    });
    match &state.session {
        None => lines.push("session: none on this machine".to_owned()),
        Some(record) => {
            for (endpoint, handle) in &record.endpoints {
                let status = match handle.status {
                    EndpointStatus::Active => "active",
                    EndpointStatus::Paused => "paused",
                    EndpointStatus::Closed => "closed",
                };
                let tmux = if handle.tmux_target.is_empty() {
                    "no tmux session".to_owned()
                } else {
                    format!("tmux `{}`", handle.tmux_target)
                };
                let whose = if *endpoint == record.work_item {
                    "session".to_owned()
                } else {
                    format!("session for {endpoint}")
                };
                lines.push(format!(
                    "{whose}: {status}, {} in {tmux}, {} deliveries remembered{}",
                    handle.harness,
                    handle.recent_deliveries.len(),
                    handle
                        .last_event_at
                        .map(|t| format!(", last event at {t}"))
                        .unwrap_or_default()
                ));
            }
        }
    }
    if let Some(ledger) = &state.ledger {
        let pending = ledger.comments.comment_attempts.len();
        let gave_up = ledger.comments.gave_up.as_ref().map_or(0, |g| g.comments.len());
        let spawn = ledger.spawn.as_ref().map_or_else(String::new, |s| {
            format!(", spawn attempts {}{}", s.attempts, if s.gave_up { " (gave up)" } else { "" })
        });
        lines.push(format!(
            "poll ledger: {} comment(s) seen, {pending} awaiting a retry, {gave_up} given up{spawn}",
            ledger.comments.seen_comments.len()
        ));
    }
    if let Some(collaborators) = state.collaborators.as_ref().filter(|c| !c.users.is_empty()) {
        let names: Vec<String> =
            collaborators.users.iter().map(|c| format!("@{}", c.login)).collect();
        lines.push(format!("collaborators (input only): {}", names.join(", ")));
    }
    if let Some(ended) = &state.ended {
        let by = ended.actor.as_ref().map(|a| format!(" by @{a}")).unwrap_or_default();
        lines.push(format!(
            "ended: {} {}{by} at {} (seen by {})",
            ended.kind, ended.state, ended.at, ended.source
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(value: Value) -> Record {
        match value {
            Value::Object(map) => map,
            _ => unreachable!("the fixtures are objects"),
        }
    }

    /// A refused comment as the receiver and dispatcher log it.
    fn refused_comment() -> Vec<Record> {
        vec![
            record(
                json!({"ts": "t1", "event": "webhook.received", "gh_event": "issue_comment", "action": "created", "delivery_id": "d-1", "verified": true}),
            ),
            record(
                json!({"ts": "t2", "event": "routing.dropped", "gh_event": "issue_comment", "delivery_id": "d-1", "reason": "unauthorized-actor", "actor": "mallory", "work_items": ["github:o/r#1"]}),
            ),
            record(
                json!({"ts": "t3", "event": "webhook.received", "gh_event": "issues", "delivery_id": "d-2", "verified": true}),
            ),
        ]
    }

    #[test]
    fn a_refused_comment_names_the_actor_and_the_key_to_change() {
        let trail = delivery_trail(&refused_comment(), "d-1");
        assert_eq!(trail.steps.len(), 2, "only d-1's lines");
        assert_eq!(trail.steps[0].stage, Stage::Arrived);
        assert_eq!(trail.steps[1].mark, Mark::Failed);
        let Some(Verdict::Refused(why)) = trail.verdict else { panic!("{:?}", trail.verdict) };
        assert!(why.contains("@mallory") && why.contains("routing.authorizedUsers"), "{why}");
    }

    #[test]
    fn the_dispatchers_lines_join_the_trail_through_the_github_delivery_id() {
        let mut records = refused_comment();
        records.push(record(json!({"ts": "t4", "event": "dispatch.queued", "delivery_id": "comment:9", "gh_delivery": "d-2", "work_item": "github:o/r#1", "spawn": false})));
        records.push(record(json!({"ts": "t5", "event": "dispatch.succeeded", "delivery_id": "comment:9", "gh_delivery": "d-2", "work_item": "github:o/r#1", "harness": "claude"})));
        let trail = delivery_trail(&records, "d-2");
        assert_eq!(trail.steps.len(), 3);
        assert_eq!(
            trail.verdict,
            Some(Verdict::Acted("pasted into github:o/r#1's claude session".into()))
        );
        // Asking by the dedup key finds the same trail.
        assert_eq!(delivery_trail(&records, "comment:9").steps.len(), 3);
    }

    #[test]
    fn every_reason_the_dispatcher_settles_with_reads_as_a_sentence() {
        let line = record(json!({}));
        for reason in
            ["control-consumed", "control-executed", "control-rejected", "control-ambiguous"]
        {
            assert!(!reason_text(reason, &line).starts_with('`'), "{reason} has no wording");
        }
    }

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

    #[test]
    fn an_unknown_delivery_and_an_undecided_one_say_so() {
        let records = refused_comment();
        assert!(matches!(delivery_trail(&records, "nope").verdict, Some(Verdict::Undecided(_))));
        let Some(Verdict::Undecided(why)) = delivery_trail(&records, "d-2").verdict else {
            panic!()
        };
        assert!(why.contains("replayed"), "{why}");
    }

    #[test]
    fn an_items_trail_groups_lines_by_delivery_and_keeps_the_arrival() {
        let mut records = refused_comment();
        records.push(record(json!({"ts": "t6", "event": "control.command", "work_item": "github:o/r#1", "command": "pause", "source": "cli", "actor": "me", "effect": "paused"})));
        let item: WorkItemRef = "github:o/r#1".parse().unwrap();
        let trail = item_trail(&records, &item, 0);
        assert_eq!(trail.len(), 2, "{trail:?}");
        assert_eq!(trail[0].delivery.as_deref(), Some("d-1"));
        assert_eq!(trail[0].steps[0].event, "webhook.received");
        assert_eq!(trail[1].delivery, None);
        assert!(trail[1].steps[0].text.contains("executed `pause`"), "{:?}", trail[1].steps);
        assert_eq!(item_trail(&records, &item, 1).len(), 1, "the limit keeps the last entries");
    }

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
    fn a_trail_lists_its_steps_in_the_order_they_happened_not_the_order_written() {
        // The service writes an effect's line at once and routine lines behind it.
        let records = vec![
            record(json!({"ts": "2026-12-01T10:00:00.005Z", "event": "session.spawned",
                "delivery_id": "d", "work_item": "github:o/r#1", "harness": "claude",
                "tmux_target": "t"})),
            record(json!({"ts": "2026-12-01T10:00:00.001Z", "event": "webhook.received",
                "delivery_id": "d", "gh_event": "issue_comment", "verified": true})),
            record(json!({"ts": "2026-12-01T10:00:00.001Z", "event": "routing.routed",
                "delivery_id": "d", "actor": "ann", "pass": "authorized",
                "work_items": ["github:o/r#1"]})),
        ];
        let trail = delivery_trail(&records, "d");
        let events: Vec<&str> = trail.steps.iter().map(|s| s.event.as_str()).collect();
        assert_eq!(events, ["webhook.received", "routing.routed", "session.spawned"]);
        assert!(matches!(trail.verdict, Some(Verdict::Acted(_))), "{:?}", trail.verdict);
    }

    #[test]
    fn a_line_of_an_unknown_type_still_shows_its_fields() {
        let step = step(&record(json!({"ts": "t", "event": "brand.new", "level": "info", "x": 1})));
        assert_eq!(step.text, "brand.new: x=1");
    }

    #[test]
    fn an_item_with_no_records_is_said_to_be_unarmed_and_sessionless() {
        let lines = describe_item(&ItemState::default());
        assert!(lines[0].starts_with("arming: no command recorded"), "{lines:?}");
        assert_eq!(lines[1], "session: none on this machine");
    }
}

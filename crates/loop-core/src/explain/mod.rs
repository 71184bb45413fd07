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
//!
//! Layout: this module groups lines into trails and gives each its verdict; `wording`
//! says each line in words (a file per family of line), `reason` says a reason code in
//! words, `item` describes a work item's current records, `fields` reads a line's fields
//! for a sentence.

mod fields;
mod item;
mod reason;
mod wording;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::WorkItemRef;
use fields::{strings, text};

pub use item::{ItemState, describe_item, item_explanation};
pub use reason::reason_text;
pub use wording::step;

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    pub(super) fn record(value: Value) -> Record {
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
}

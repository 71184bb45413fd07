//! Reading an event-log line's fields for a sentence: a field as text, the actor, the
//! work items a line is about, and every field but the envelope.

use serde_json::Value;

use super::Record;

pub(super) fn text<'a>(record: &'a Record, key: &str) -> Option<&'a str> {
    record.get(key).and_then(Value::as_str)
}

pub(super) fn strings<'a>(record: &'a Record, key: &str) -> impl Iterator<Item = &'a str> {
    record.get(key).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
}

/// A field for a sentence: strings bare, anything else as JSON, `?` when absent.
pub(super) fn field(record: &Record, key: &str) -> String {
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
pub(super) fn actor(record: &Record) -> String {
    text(record, "actor").map_or_else(|| "someone unnamed".to_owned(), |a| format!("@{a}"))
}

/// Why the actor guard let a `routing.routed` line's event in, for a sentence. Lines
/// written before the `pass` field existed said nothing more than the actor.
pub(super) fn actor_pass(record: &Record) -> String {
    match text(record, "pass") {
        Some("authorized") => format!("{} is authorized", actor(record)),
        Some("close-exempt") => format!("a close passes whoever closed it, here {}", actor(record)),
        Some("actorless") => "no actor: input only, never a command".to_owned(),
        Some("collaborator") => format!("{} is a collaborator: input only", actor(record)),
        _ => format!("actor {}", actor(record)),
    }
}

/// The work items a line is about, for a sentence.
pub(super) fn items(record: &Record) -> String {
    if let Some(item) = text(record, "work_item") {
        return item.to_owned();
    }
    let all: Vec<&str> = strings(record, "work_items").collect();
    if all.is_empty() { "the work item".to_owned() } else { all.join(", ") }
}

/// Every field but the envelope, as `k=v`.
pub(super) fn details(record: &Record) -> String {
    record
        .iter()
        .filter(|(k, _)| !["ts", "event", "level", "source", "pid"].contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={}", v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
        .collect::<Vec<_>>()
        .join(" ")
}

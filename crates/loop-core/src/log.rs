//! One line of the event log as a value: its type (`event`), its level and its fields.
//!
//! Decisions render their own lines (the line is derived from the value, so `explain`
//! cannot disagree with what happened); loop-store writes them. A line knows whether it
//! records an effect ([`Line::records_an_effect`]): such a line must be on disk before
//! the emitter moves on.
//!
//! Rendering takes the timestamp, the emitting process's name and its pid as arguments:
//! nothing here reads a clock.

use jiff::Timestamp;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::WorkItemRef;

/// How loud a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Debug,
    Info,
    Warning,
    Error,
}

/// One line to append: a type, a level and its fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    name: String,
    level: Level,
    fields: Map<String, Value>,
}

impl Line {
    pub fn new(level: Level, name: impl Into<String>) -> Self {
        Self { name: name.into(), level, fields: Map::new() }
    }

    pub fn debug(name: impl Into<String>) -> Self {
        Self::new(Level::Debug, name)
    }

    pub fn info(name: impl Into<String>) -> Self {
        Self::new(Level::Info, name)
    }

    pub fn warning(name: impl Into<String>) -> Self {
        Self::new(Level::Warning, name)
    }

    pub fn error(name: impl Into<String>) -> Self {
        Self::new(Level::Error, name)
    }

    /// Adds a field; a value that encodes as `null` is omitted.
    pub fn field(mut self, key: &str, value: impl Serialize) -> Self {
        match serde_json::to_value(value) {
            Ok(Value::Null) | Err(_) => {}
            Ok(value) => {
                self.fields.insert(key.to_owned(), value);
            }
        }
        self
    }

    /// Adds `work_item`, the field `events --work-item` filters on.
    pub fn work_item(self, item: &WorkItemRef) -> Self {
        self.field("work_item", item.to_string())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn level(&self) -> Level {
        self.level
    }

    /// The value of field `key`, if set.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// Whether the line records an effect on a work item — a command executed, a session
    /// started or ended, a checkout prepared or removed — or something going wrong. A
    /// process that writes behind its emitters writes such a line before `emit` returns,
    /// so a `kill -9` right after the effect cannot take its line. The per-delivery lines
    /// (receipt, routing, queueing, reactions) are the volume and may trail.
    pub fn records_an_effect(&self) -> bool {
        const EFFECTS: [&str; 5] = ["control.", "session.", "work_item.", "workspace.", "cleanup."];
        self.level >= Level::Warning || EFFECTS.iter().any(|family| self.name.starts_with(family))
    }

    /// The line as written: envelope first (`ts`, `source`, `event`, `level`, `pid`), then
    /// the fields, newline-terminated.
    pub fn render(&self, ts: Timestamp, source: &str, pid: u32) -> Vec<u8> {
        let mut object = Map::new();
        object.insert("ts".into(), Value::String(format_ts(ts)));
        object.insert("source".into(), Value::String(source.to_owned()));
        object.insert("event".into(), Value::String(self.name.clone()));
        object.insert(
            "level".into(),
            serde_json::to_value(self.level).unwrap_or(Value::String("info".into())),
        );
        object.insert("pid".into(), Value::from(pid));
        for (key, value) in &self.fields {
            object.entry(key.clone()).or_insert_with(|| value.clone());
        }
        let mut line = Value::Object(object).to_string().into_bytes();
        line.push(b'\n');
        line
    }
}

/// The envelope's timestamp: RFC 3339 UTC with milliseconds, `2026-11-29T16:27:45.123Z`.
pub fn format_ts(ts: Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_has_the_envelope_first_and_omits_nulls() {
        let ts: Timestamp = "2026-11-29T16:27:45.1234Z".parse().unwrap();
        let line =
            Line::warning("poll.item_error").field("reason", "x").field("actor", None::<String>);
        let text = String::from_utf8(line.render(ts, "poll", 42)).unwrap();
        assert_eq!(
            text,
            "{\"ts\":\"2026-11-29T16:27:45.123Z\",\"source\":\"poll\",\"event\":\"poll.item_error\",\"level\":\"warning\",\"pid\":42,\"reason\":\"x\"}\n"
        );
    }

    #[test]
    fn a_whole_second_timestamp_still_has_milliseconds() {
        assert_eq!(format_ts("2026-01-02T03:04:05Z".parse().unwrap()), "2026-01-02T03:04:05.000Z");
    }

    #[test]
    fn warnings_and_effect_families_are_effects_and_routing_lines_are_not() {
        assert!(Line::info("session.spawned").records_an_effect());
        assert!(Line::warning("routing.dropped").records_an_effect());
        assert!(!Line::info("routing.routed").records_an_effect());
    }
}

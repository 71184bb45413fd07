//! Which events `the-loop events` shows: by work item, event-type glob and age.
//!
//! Pure: `now` is passed in, so `--since 15m` is tested without a clock.

use jiff::{SignedDuration, Timestamp};
use loop_core::WorkItemRef;
use loop_core::log::Level;

use super::read::EventRecord;

/// Why a `--since` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{input}` is not a time: expected RFC 3339 (`2026-11-29T10:00:00Z`) or an age (`90s`, `15m`, `2h`, `7d`)"
)]
pub struct SinceError {
    pub input: String,
}

/// Reads `--since`: an RFC 3339 instant, or an age in `s`, `m`, `h` or `d` before `now`.
pub fn parse_since(input: &str, now: Timestamp) -> Result<Timestamp, SinceError> {
    let refuse = || SinceError { input: input.to_owned() };
    if let Ok(ts) = input.parse::<Timestamp>() {
        return Ok(ts);
    }
    let unit = input.chars().last().ok_or_else(refuse)?;
    let count: i64 = input[..input.len() - unit.len_utf8()].parse().map_err(|_| refuse())?;
    let seconds = match unit {
        's' => Some(count),
        'm' => count.checked_mul(60),
        'h' => count.checked_mul(3600),
        'd' => count.checked_mul(86_400),
        _ => None,
    }
    .filter(|seconds| *seconds >= 0)
    .ok_or_else(refuse)?;
    now.checked_sub(SignedDuration::from_secs(seconds)).map_err(|_| refuse())
}

/// The filters of `the-loop events` and `GET /api/v1/events`; an empty filter matches
/// everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub work_item: Option<WorkItemRef>,
    /// Event-type patterns, OR-ed; `*` matches any run of characters.
    pub events: Vec<String>,
    pub since: Option<Timestamp>,
    /// The delivery: a line's `delivery_id` or `gh_delivery`.
    pub delivery_id: Option<String>,
    /// The emitting component (`source`: `gh-webhook`, `poll`, `service`, `cli`, `api`).
    pub source: Option<String>,
    /// The quietest level shown.
    pub level: Option<Level>,
}

impl EventFilter {
    pub fn matches(&self, record: &EventRecord) -> bool {
        let item_ok = self.work_item.as_ref().is_none_or(|item| {
            let item = item.to_string();
            record.work_items().any(|named| named == item)
        });
        let event_ok = self.events.is_empty()
            || self.events.iter().any(|glob| glob_matches(glob, record.event()));
        let since_ok = self
            .since
            .is_none_or(|since| record.ts().parse::<Timestamp>().is_ok_and(|ts| ts >= since));
        let delivery_ok = self.delivery_id.as_deref().is_none_or(|id| {
            ["delivery_id", "gh_delivery"]
                .iter()
                .any(|key| record.0.get(*key).and_then(serde_json::Value::as_str) == Some(id))
        });
        let source_ok = self.source.as_deref().is_none_or(|source| record.source() == source);
        let level_ok = self
            .level
            .is_none_or(|least| Level::from_name(record.level()).is_some_and(|l| l >= least));
        item_ok && event_ok && since_ok && delivery_ok && source_ok && level_ok
    }
}

/// Whether `text` matches `pattern`, where `*` stands for any run of characters.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else { return false };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else { return rest.is_empty() };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(value: serde_json::Value) -> EventRecord {
        match value {
            serde_json::Value::Object(map) => EventRecord(map),
            _ => unreachable!("tests pass objects"),
        }
    }

    #[test]
    fn globs_match_as_the_shell_does_for_star() {
        let cases = [
            ("session.*", "session.spawned", true),
            ("session.*", "sessions.x", false),
            ("*", "anything", true),
            ("poll.item_error", "poll.item_error", true),
            ("poll.item", "poll.item_error", false),
            ("*.error", "poll.error", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("ab*ba", "aba", false),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(glob_matches(pattern, text), expected, "{pattern} vs {text}");
        }
    }

    #[test]
    fn since_accepts_an_instant_or_an_age_before_now() {
        let now: Timestamp = "2026-11-29T12:00:00Z".parse().unwrap();
        let cases = [
            ("2026-11-29T10:00:00Z", "2026-11-29T10:00:00Z"),
            ("90s", "2026-11-29T11:58:30Z"),
            ("15m", "2026-11-29T11:45:00Z"),
            ("2h", "2026-11-29T10:00:00Z"),
            ("7d", "2026-11-22T12:00:00Z"),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_since(input, now).unwrap().to_string(), expected, "{input}");
        }
        for bad in ["", "m", "5w", "-5m", "yesterday", "5 m"] {
            assert!(parse_since(bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_work_item_filter_matches_work_item_or_membership_in_work_items() {
        let filter = EventFilter {
            work_item: Some("github:o/r#1".parse().unwrap()),
            ..EventFilter::default()
        };
        assert!(filter.matches(&record(json!({"event": "x", "work_item": "github:o/r#1"}))));
        assert!(filter.matches(&record(
            json!({"event": "x", "work_items": ["github:o/r#2", "github:o/r#1"]})
        )));
        assert!(!filter.matches(&record(json!({"event": "x", "work_item": "github:o/r#2"}))));
        assert!(!filter.matches(&record(json!({"event": "x"}))));
    }

    #[test]
    fn delivery_source_and_level_filters_narrow_what_matches() {
        let line = record(
            json!({"event": "x", "source": "poll", "level": "warning", "gh_delivery": "d-1"}),
        );
        let by = |filter: EventFilter| filter.matches(&line);
        assert!(by(EventFilter { delivery_id: Some("d-1".into()), ..EventFilter::default() }));
        assert!(!by(EventFilter { delivery_id: Some("d-2".into()), ..EventFilter::default() }));
        assert!(by(EventFilter { source: Some("poll".into()), ..EventFilter::default() }));
        assert!(!by(EventFilter { source: Some("cli".into()), ..EventFilter::default() }));
        assert!(by(EventFilter { level: Some(Level::Info), ..EventFilter::default() }));
        assert!(by(EventFilter { level: Some(Level::Warning), ..EventFilter::default() }));
        assert!(!by(EventFilter { level: Some(Level::Error), ..EventFilter::default() }));
    }

    #[test]
    fn the_since_filter_compares_instants_not_strings() {
        let filter = EventFilter {
            since: Some("2026-11-29T10:00:00Z".parse().unwrap()),
            ..EventFilter::default()
        };
        assert!(filter.matches(&record(json!({"ts": "2026-11-29T10:00:00.000Z"}))));
        assert!(!filter.matches(&record(json!({"ts": "2026-11-29T09:59:59.999Z"}))));
        assert!(!filter.matches(&record(json!({"ts": "garbage"}))));
    }
}

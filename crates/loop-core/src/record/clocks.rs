//! The poll clocks, `local/poll-clocks.json` (seed 001).
//!
//! When this machine last listed each ref and last asked whether it ended. They are the
//! machine's, not the repository's: keeping them out of the portable record is what
//! lets that record change only when the poller learns something. Keyed by ref, work
//! items and pull requests alike.
//!
//! A bad value is dropped entry by entry (seed 001): a key that is not a ref drops its
//! entry, a stamp that does not parse drops that stamp, and the rest of the file is kept
//! — a clock only says when to ask again, so a lost one makes its ref due, no more. Only a
//! file that is not JSON, or not this shape at all, is unreadable.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::refs::WorkItemRef;

/// The whole clock file: `{clocks: {ref: {lastPolledAt, closureCheckedAt}}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PollClocks {
    #[serde(default, deserialize_with = "entry_by_entry")]
    pub clocks: BTreeMap<WorkItemRef, PollClock>,
}

/// The clocks whose key is a ref and whose value is an object; the rest dropped.
fn entry_by_entry<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<WorkItemRef, PollClock>, D::Error> {
    let entries = BTreeMap::<String, Value>::deserialize(deserializer)?;
    Ok(entries
        .into_iter()
        .filter_map(|(key, value)| {
            let item = key.parse().ok()?;
            let clock = PollClock::deserialize(value).ok()?;
            Some((item, clock))
        })
        .collect())
}

/// A stamp, or none when it is missing or does not parse.
fn lenient_stamp<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Timestamp>, D::Error> {
    let value = Value::deserialize(deserializer)?;
    Ok(value.as_str().and_then(|text| text.parse().ok()))
}

/// One ref's clocks. An entry with neither is dropped from the file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PollClock {
    /// The last cycle that listed this ref.
    #[serde(default, deserialize_with = "lenient_stamp", skip_serializing_if = "Option::is_none")]
    pub last_polled_at: Option<Timestamp>,
    /// The last cycle that asked whether this unlisted ref ended and was not told closed.
    #[serde(default, deserialize_with = "lenient_stamp", skip_serializing_if = "Option::is_none")]
    pub closure_checked_at: Option<Timestamp>,
}

impl PollClock {
    pub fn is_empty(&self) -> bool {
        self.last_polled_at.is_none() && self.closure_checked_at.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #16, item 8: one bad value never loses the other clocks.
    #[test]
    fn a_bad_value_is_dropped_entry_by_entry_and_the_rest_kept() {
        let text = r#"{"clocks": {
            "github:octo/app#1": {"lastPolledAt": "2026-11-01T00:00:00Z", "closureCheckedAt": "yesterday"},
            "github:octo/app#2": {"lastPolledAt": 17},
            "not a ref": {"lastPolledAt": "2026-11-01T00:00:00Z"},
            "github:octo/app#3": "2026-11-01T00:00:00Z",
            "github:octo/app#4": {"closureCheckedAt": "2026-11-02T00:00:00Z"}
        }}"#;
        let clocks: PollClocks = serde_json::from_str(text).expect("read despite bad values");
        let at = |s: &str| Some(s.parse::<Timestamp>().expect("a stamp"));
        let item = |n: u64| format!("github:octo/app#{n}").parse::<WorkItemRef>().expect("a ref");
        let kept: Vec<(WorkItemRef, PollClock)> = clocks.clocks.into_iter().collect();
        assert_eq!(
            kept,
            [
                (
                    item(1),
                    PollClock {
                        last_polled_at: at("2026-11-01T00:00:00Z"),
                        closure_checked_at: None
                    }
                ),
                (item(2), PollClock::default()),
                (
                    item(4),
                    PollClock {
                        last_polled_at: None,
                        closure_checked_at: at("2026-11-02T00:00:00Z")
                    }
                ),
            ]
        );
        assert!(serde_json::from_str::<PollClocks>(r#"{"clocks": []}"#).is_err(), "not this shape");
    }
}

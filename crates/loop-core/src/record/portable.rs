//! The sections of a portable work-item record, `portable/<slug>.json`.
//!
//! One record per work item (seed 003 R10). Each section has one writer and is replaced
//! whole by it: `control` (control keywords and CLI verbs), `poll` (the poller's ledger,
//! with the ledgers of the pull requests delivering the item nested under
//! `pullRequests`), `collaborators` (the roster), `ended` (the closure this deployment
//! observed) and `channels` (the thread bound to the item per channel type). Sections this
//! version does not know (e.g. the reference's `graph`) are kept verbatim by the store.
//!
//! Every attribute here is an operator ledger entry or a remote entity; none is a machine
//! handle (seed 003 R1.3) — the classification table in loop-store enforces that.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::control::Command;
use crate::login::Login;
use crate::refs::WorkItemRef;

/// The last control command recorded for a work item (section `control`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Control {
    pub command: Command,
    pub source: ControlSource,
    /// Who typed it; absent for commands with no actor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<Login>,
    pub requested_at: Timestamp,
    /// Free text, e.g. the URL of the comment that carried the keyword.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The instance (`instance.name`) that recorded it, when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
}

/// Where a control command came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ControlSource {
    Comment,
    Cli,
}

/// What the poller has learnt about a work item's thread (section `poll`).
///
/// The poll clocks (`lastPolledAt`, `closureCheckedAt`) are not here: they are this
/// machine's and live in `local/poll-clocks.json` (seed 001).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PollLedger {
    #[serde(flatten)]
    pub comments: CommentLedger,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn: Option<SpawnLedger>,
    /// The listing's title, refreshed each cycle (derived).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The ledgers of the pull requests delivering this work item, keyed by PR ref
    /// (seed 003 R10). Never nested further.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pull_requests: BTreeMap<WorkItemRef, CommentLedger>,
}

/// The comment bookkeeping shared by a work item's ledger and its pull requests' ledgers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentLedger {
    /// Resolved comment ids, newest last.
    #[serde(default)]
    pub seen_comments: Vec<u64>,
    /// Delivery attempts of comments still in flight, keyed by comment id.
    #[serde(default, with = "id_map")]
    pub comment_attempts: BTreeMap<u64, u32>,
    /// Comments abandoned after the retry budget, and by which version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gave_up: Option<GaveUp>,
}

/// The presence (spawn) retry ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpawnLedger {
    pub attempts: u32,
    pub gave_up: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<String>,
}

/// Comments the poller stopped retrying, and the CLI version that gave up on them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GaveUp {
    pub comments: Vec<u64>,
    pub version: String,
}

/// Who besides the authorized users may give this work item input (section
/// `collaborators`). A collaborator never commands, spawns or arms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Collaborators {
    pub users: Vec<Collaborator>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Collaborator {
    pub login: Login,
    pub added_by: Login,
    pub added_at: Timestamp,
    /// Where the grant was made: `comment` or `cli`.
    pub source: ControlSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The work item's closure, as this deployment observed it (section `ended`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ended {
    /// `closed` or `merged`.
    pub state: String,
    /// `issue` or `pull-request`.
    pub kind: String,
    /// GitHub's state reason (`completed`, `not_planned`, …), when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub at: Timestamp,
    /// The ingress that observed it: `gh-webhook`, `poll` or `cli`.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<Login>,
}

/// A channel thread the-loop opened for the work item (section `channels`, keyed by
/// channel type such as `slack`). A remote entity: it travels with the record so a second
/// machine never opens a second thread (seed 003 R2.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelBinding {
    pub channel: String,
    pub thread: String,
    pub opened_at: Timestamp,
    /// How the thread came to exist: `opened` by the-loop or `adopted` from a message.
    pub origin: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permalink: Option<String>,
}

/// `{comment id: n}` with the ids written as JSON object keys (strings), read back from
/// strings. Kept explicit because `#[serde(flatten)]` buffers maps and would otherwise
/// refuse string keys for integer ids.
mod id_map {
    use std::collections::BTreeMap;

    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(
        map: &BTreeMap<u64, u32>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let keyed: BTreeMap<String, u32> = map.iter().map(|(id, n)| (id.to_string(), *n)).collect();
        keyed.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<u64, u32>, D::Error> {
        let keyed = BTreeMap::<String, u32>::deserialize(deserializer)?;
        keyed
            .into_iter()
            .map(|(id, n)| {
                id.parse::<u64>()
                    .map(|id| (id, n))
                    .map_err(|_| D::Error::custom(format!("`{id}` is not a comment id")))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_ledger_with_nested_pull_requests_round_trips() {
        let pr: WorkItemRef = "github:octo/lib#7".parse().unwrap();
        let ledger = PollLedger {
            comments: CommentLedger {
                seen_comments: vec![1, 2],
                comment_attempts: BTreeMap::from([(3, 1)]),
                gave_up: None,
            },
            spawn: Some(SpawnLedger { attempts: 1, gave_up: false, delivery_id: Some("d".into()) }),
            title: Some("Fix".into()),
            pull_requests: BTreeMap::from([(
                pr,
                CommentLedger { seen_comments: vec![9], ..CommentLedger::default() },
            )]),
        };
        let json = serde_json::to_value(&ledger).unwrap();
        assert_eq!(json["commentAttempts"]["3"], 1);
        assert_eq!(json["pullRequests"]["github:octo/lib#7"]["seenComments"][0], 9);
        assert_eq!(serde_json::from_value::<PollLedger>(json).unwrap(), ledger);
    }

    #[test]
    fn a_control_section_reads_with_seconds_precision_timestamps() {
        let control: Control = serde_json::from_str(
            r#"{"command":"start","source":"comment","actor":"octocat","requestedAt":"2026-11-29T10:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(control.command, Command::Start);
        let back = serde_json::to_value(&control).unwrap();
        assert_eq!(back["requestedAt"], "2026-11-29T10:00:00Z");
    }
}

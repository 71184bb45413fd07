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

use crate::command::Command;
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
    /// The dedup key of the delivery (comment) that carried it, written in the same write
    /// as the command: a replay of that delivery after a crash is recognised and not
    /// executed again. Absent for CLI commands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<String>,
}

/// Where a control command came from: a comment on the work item, or the operator at
/// `the-loop`'s CLI or its control plane (`/api/v1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ControlSource {
    Comment,
    Cli,
    Api,
}

impl ControlSource {
    /// The name the record (and `sessions list`) writes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Comment => "comment",
            Self::Cli => "cli",
            Self::Api => "api",
        }
    }
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

/// A comment's GraphQL node id (`IC_…` conversation, `PRR_…` review, `PRRC_…` inline),
/// as the reference keys its ledger. GitHub numbers the three surfaces of a pull request
/// in separate id spaces, so a numeric id would let two comments of one PR collide; the
/// node id is unique across them and is what the webhook's dedup key names too.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CommentId(String);

impl CommentId {
    pub fn new(node_id: impl Into<String>) -> Self {
        Self(node_id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CommentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The comment bookkeeping shared by a work item's ledger and its pull requests' ledgers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentLedger {
    /// Resolved comments, newest last.
    #[serde(default)]
    pub seen_comments: Vec<CommentId>,
    /// Delivery attempts of comments still in flight.
    #[serde(default)]
    pub comment_attempts: BTreeMap<CommentId, u32>,
    /// Comments abandoned after the retry budget, and by which version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gave_up: Option<GaveUp>,
    /// Every comment of the thread created before this instant (GitHub's `created_at`,
    /// never this machine's clock) is resolved, whether `seenComments` still names it or
    /// not. Set when a thread longer than `seenComments` may hold pushes its oldest ids
    /// out; absent until then (and in every record an older version wrote).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_through: Option<Timestamp>,
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
    pub comments: Vec<CommentId>,
    pub version: String,
}

/// Who besides the authorized users may give this work item input (section
/// `collaborators`). A collaborator never commands, spawns or arms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Collaborators {
    pub users: Vec<Collaborator>,
    /// The dedup key of the delivery (comment) whose roster command wrote the section
    /// last, in the same write: a replay of that delivery after a crash is recognised and
    /// not applied or logged again. Absent after a CLI edit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<String>,
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
    /// Why it ended, as the close path names it (seed 002): `issue-closed`, `pr-merged`
    /// or `pr-closed`. Absent in records written before this was filled.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn id(node_id: &str) -> CommentId {
        CommentId::new(node_id)
    }

    #[test]
    fn a_poll_ledger_with_nested_pull_requests_round_trips() {
        let pr: WorkItemRef = "github:octo/lib#7".parse().unwrap();
        let ledger = PollLedger {
            comments: CommentLedger {
                seen_comments: vec![id("IC_1"), id("IC_2")],
                comment_attempts: BTreeMap::from([(id("IC_3"), 1)]),
                gave_up: None,
                seen_through: Some("2026-12-01T21:00:00Z".parse().unwrap()),
            },
            spawn: Some(SpawnLedger { attempts: 1, gave_up: false, delivery_id: Some("d".into()) }),
            title: Some("Fix".into()),
            pull_requests: BTreeMap::from([(
                pr,
                CommentLedger { seen_comments: vec![id("PRR_9")], ..CommentLedger::default() },
            )]),
        };
        let json = serde_json::to_value(&ledger).unwrap();
        assert_eq!(json["commentAttempts"]["IC_3"], 1);
        assert_eq!(json["seenThrough"], "2026-12-01T21:00:00Z");
        assert_eq!(json["pullRequests"]["github:octo/lib#7"]["seenComments"][0], "PRR_9");
        assert_eq!(serde_json::from_value::<PollLedger>(json).unwrap(), ledger);
    }

    #[test]
    fn a_poll_ledger_in_the_references_shape_loads_and_round_trips() {
        // As the reference writes it: GraphQL node ids, as strings, on every surface.
        let written = serde_json::json!({
            "seenComments": ["IC_kwDOA1", "PRR_kwDOA1", "PRRC_kwDOA1"],
            "commentAttempts": {"IC_kwDOA2": 2, "PRRC_kwDOA2": 1},
            "gaveUp": {"comments": ["PRR_kwDOA3"], "version": "0.9.0"},
            "spawn": {"attempts": 0, "gaveUp": false},
            "title": "Fix",
            "pullRequests": {
                "github:octo/lib#7": {"seenComments": ["IC_kwDOB1"], "commentAttempts": {}}
            }
        });
        let ledger: PollLedger = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(ledger.comments.seen_comments.len(), 3);
        assert_eq!(ledger.comments.comment_attempts[&id("IC_kwDOA2")], 2);
        assert_eq!(ledger.comments.gave_up.as_ref().unwrap().comments, [id("PRR_kwDOA3")]);
        assert_eq!(ledger.comments.seen_through, None, "no watermark in the reference's shape");
        let back = serde_json::to_value(&ledger).unwrap();
        assert_eq!(back["seenComments"], written["seenComments"]);
        assert_eq!(back["commentAttempts"], written["commentAttempts"]);
        assert_eq!(back["gaveUp"], written["gaveUp"]);
        assert!(back.get("seenThrough").is_none(), "none is written until a thread needs one");
        assert_eq!(serde_json::from_value::<PollLedger>(back).unwrap(), ledger);
    }

    #[test]
    fn a_control_section_reads_with_seconds_precision_timestamps() {
        let control: Control = serde_json::from_str(
            r#"{"command":"start","source":"comment","actor":"octocat","requestedAt":"2026-11-29T10:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(control.command, Command::Start);
        assert_eq!(control.delivery_id, None, "the reference writes no delivery key");
        let back = serde_json::to_value(&control).unwrap();
        assert_eq!(back["requestedAt"], "2026-11-29T10:00:00Z");
    }
}

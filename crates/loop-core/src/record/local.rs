//! The machine-local session record, `local/<slug>.json` (seed 003 R5).
//!
//! One file per work item, never tracked, never carried to another machine. It maps each
//! ref this machine serves for the work item — the work item's own, and one per pull
//! request that has (or may get) a session here — to an [`Endpoint`] holding only
//! handles: which harness, which conversation, which checkout, which tmux target. It says
//! nothing about a pull request beyond its ref: the ref is the join key to the records
//! that describe it.
//!
//! The registry's rules (one live session per work item, closing, linking a PR) belong to
//! loop-sessions/loop-core; this is only the value they read and write.

use std::collections::BTreeMap;
use std::path::PathBuf;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::refs::WorkItemRef;

/// How many delivery ids an endpoint remembers for restart-surviving de-duplication.
pub const RECENT_DELIVERIES_CAP: usize = 50;

/// Every handle this machine holds for one work item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalRecord {
    /// The work item this file is about (its file name is this ref's slug).
    #[serde(rename = "ref")]
    pub work_item: WorkItemRef,
    /// Sessions keyed by the ref they serve: the work item's own, one per pull request.
    #[serde(default)]
    pub endpoints: BTreeMap<WorkItemRef, Endpoint>,
    /// Per bound channel thread (keyed by thread id), the last message this deployment
    /// mirrored.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub channel_cursors: BTreeMap<String, String>,
}

impl LocalRecord {
    /// An empty record for `work_item`.
    pub fn new(work_item: WorkItemRef) -> Self {
        Self { work_item, endpoints: BTreeMap::new(), channel_cursors: BTreeMap::new() }
    }

    /// The endpoint serving the work item itself.
    pub fn own_endpoint(&self) -> Option<&Endpoint> {
        self.endpoints.get(&self.work_item)
    }
}

/// One agent session on this machine: handles only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// The harness adapter running the session (`claude`, `cursor`).
    pub harness: String,
    /// The harness's conversation id, used to resume; absent until the harness reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_session_id: Option<String>,
    /// The checkout the session works in (absolute).
    pub cwd: PathBuf,
    /// The tmux target (`loop-<slug>` with `.`/`:` → `_`); empty until a session is spawned.
    #[serde(default)]
    pub tmux_target: String,
    pub status: EndpointStatus,
    /// The last delivery ids pasted into this session, oldest first, at most
    /// [`RECENT_DELIVERIES_CAP`].
    #[serde(default)]
    pub recent_deliveries: Vec<String>,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_event_at: Option<Timestamp>,
    /// The model the session was launched with, when one was chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The effort the session was launched with, when one was chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// The harness's launch arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub harness_args: Vec<String>,
    /// The question the agent asked (`the-loop ask`) that no answer has reached yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_input: Option<AwaitingInput>,
    /// Why the process graph cannot run in this session's checkout (a clone of another
    /// repository), as status, the board and the API show it; absent when it can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_warning: Option<String>,
}

/// An open question of the agent's: where it was asked and what it offered. The text is
/// kept here (this machine's file) for the operator's views; the event log never has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaitingInput {
    pub asked_at: Timestamp,
    /// The question's comment on GitHub.
    pub comment_url: String,
    /// The question, cut to [`AwaitingInput::QUESTION_CAP`] characters.
    pub question: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

impl AwaitingInput {
    /// How much of a question the record keeps.
    pub const QUESTION_CAP: usize = 500;
}

impl Endpoint {
    /// A new active endpoint of `harness` working in `cwd`, created at `created_at`: no
    /// session spawned yet (no tmux target, no conversation), nothing delivered, nothing
    /// chosen, no question open.
    pub fn new(harness: impl Into<String>, cwd: PathBuf, created_at: Timestamp) -> Self {
        Self {
            harness: harness.into(),
            harness_session_id: None,
            cwd,
            tmux_target: String::new(),
            status: EndpointStatus::Active,
            recent_deliveries: Vec::new(),
            created_at,
            last_event_at: None,
            model: None,
            effort: None,
            harness_args: Vec::new(),
            awaiting_input: None,
            graph_warning: None,
        }
    }

    /// Whether `delivery_id` was already pasted into this session.
    pub fn has_delivered(&self, delivery_id: &str) -> bool {
        self.recent_deliveries.iter().any(|seen| seen == delivery_id)
    }

    /// Remembers `delivery_id` as delivered at `now`, dropping the oldest beyond the cap.
    pub fn note_delivery(&mut self, delivery_id: &str, now: Timestamp) {
        if !self.has_delivered(delivery_id) {
            self.recent_deliveries.push(delivery_id.to_owned());
        }
        let excess = self.recent_deliveries.len().saturating_sub(RECENT_DELIVERIES_CAP);
        self.recent_deliveries.drain(..excess);
        self.last_event_at = Some(now);
    }

    /// Live = active or paused: a paused session still blocks a second spawn.
    pub fn is_live(&self) -> bool {
        matches!(self.status, EndpointStatus::Active | EndpointStatus::Paused)
    }
}

/// The lifecycle state of an endpoint's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndpointStatus {
    Active,
    Paused,
    Closed,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> Endpoint {
        Endpoint::new("claude", PathBuf::from("/w"), Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn recent_deliveries_keep_only_the_newest_up_to_the_cap() {
        let mut endpoint = endpoint();
        for n in 0..RECENT_DELIVERIES_CAP + 5 {
            endpoint.note_delivery(&format!("d{n}"), Timestamp::UNIX_EPOCH);
        }
        assert_eq!(endpoint.recent_deliveries.len(), RECENT_DELIVERIES_CAP);
        assert_eq!(endpoint.recent_deliveries[0], "d5");
        assert!(endpoint.has_delivered("d54"));
        assert!(!endpoint.has_delivered("d4"));
    }

    #[test]
    fn a_repeated_delivery_is_remembered_once() {
        let mut endpoint = endpoint();
        endpoint.note_delivery("d", Timestamp::UNIX_EPOCH);
        endpoint.note_delivery("d", Timestamp::UNIX_EPOCH);
        assert_eq!(endpoint.recent_deliveries, ["d"]);
    }

    #[test]
    fn endpoints_are_keyed_by_the_ref_they_serve() {
        let item: WorkItemRef = "github:octo/app#15".parse().unwrap();
        let pr: WorkItemRef = "github:octo/lib#7".parse().unwrap();
        let mut record = LocalRecord::new(item.clone());
        record.endpoints.insert(item, endpoint());
        record.endpoints.insert(pr, endpoint());
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(json["ref"], "github:octo/app#15");
        assert!(json["endpoints"]["github:octo/lib#7"].is_object());
        assert_eq!(serde_json::from_value::<LocalRecord>(json).unwrap(), record);
    }
}

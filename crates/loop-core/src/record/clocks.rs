//! The poll clocks, `local/poll-clocks.json` (seed 001).
//!
//! When this machine last listed each ref and last asked whether it ended. They are the
//! machine's, not the repository's: keeping them out of the portable record is what
//! lets that record change only when the poller learns something. Keyed by ref, work
//! items and pull requests alike.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::refs::WorkItemRef;

/// The whole clock file: `{clocks: {ref: {lastPolledAt, closureCheckedAt}}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PollClocks {
    #[serde(default)]
    pub clocks: BTreeMap<WorkItemRef, PollClock>,
}

/// One ref's clocks. An entry with neither is dropped from the file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PollClock {
    /// The last cycle that listed this ref.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_polled_at: Option<Timestamp>,
    /// The last cycle that asked whether this unlisted ref ended and was not told closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closure_checked_at: Option<Timestamp>,
}

impl PollClock {
    pub fn is_empty(&self) -> bool {
        self.last_polled_at.is_none() && self.closure_checked_at.is_none()
    }
}

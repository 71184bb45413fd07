//! The poller's heartbeat, `poll-status.json` (reference §3.8).
//!
//! When the poller started, when its last cycle ended, what that cycle did and how each
//! scope (repository + label) fared: when it was last listed, whether it is degraded and
//! why, and the GitHub requests it cost (reference §4.4, [N/315] scope fields). Written
//! atomically before the first cycle and after each one, kept after the poller exits.
//! It is never used for liveness (the pidfile lock is) and carries no pid; it is a
//! separate file from the pidfile because replacing a file swaps its inode and would
//! drop the lock.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::StateStore;
use crate::error::StoreError;
use crate::json_file::{self, FileMode, JsonFile, Written};

/// The whole heartbeat file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Heartbeat {
    pub started_at: Timestamp,
    /// Absent until the first cycle ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_cycle_at: Option<Timestamp>,
    pub interval_seconds: u64,
    /// Absent until the first cycle ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_cycle: Option<CycleSummary>,
    /// Every configured scope, in configuration order (empty before a cycle considered
    /// them; an older heartbeat has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<ScopeHealth>,
}

/// What one poll cycle did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CycleSummary {
    pub items_seen: u32,
    pub spawns: u32,
    pub comments_forwarded: u32,
    pub closures: u32,
    /// Items whose processing failed.
    pub failures: u32,
    /// Provider errors (a listing or a question that could not be asked).
    pub errors: u32,
    /// Whether shutdown cut the cycle short.
    pub interrupted: bool,
    /// Scopes at least one of whose listings answered.
    #[serde(default)]
    pub scopes_polled: u32,
    /// Scopes whose listing failed this cycle.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes_failed: Vec<ScopeFailure>,
    /// Scopes whose issues were deliberately not asked (quarantined: Issues are off).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes_skipped: Vec<ScopeFailure>,
    /// GitHub requests the cycle made, and how many were answered 304 (free).
    #[serde(default)]
    pub requests: u64,
    #[serde(default)]
    pub not_modified: u64,
}

/// A scope that failed or was skipped in a cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeFailure {
    /// `[host/]owner/repo`, lower-cased.
    pub scope: String,
    pub error: String,
    /// Not worth retrying every cycle (Issues are off); re-probed later.
    pub permanent: bool,
}

/// How one scope fared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeHealth {
    /// `[host/]owner/repo`, lower-cased (the scope name in events).
    pub repository: String,
    pub label: String,
    pub monitor: ScopeMonitor,
    /// The end of the last cycle in which its listing answered (kept across restarts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_polled_at: Option<Timestamp>,
    /// Its last listing failed or its issues are quarantined: nothing in it is reconciled.
    pub degraded: bool,
    /// Why it is degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// GitHub requests made for it in the last cycle (its listing and its items' threads),
    /// and how many were answered 304.
    pub requests: u64,
    pub not_modified: u64,
}

/// Which kinds of item a scope lists (`polling.sources[].monitor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeMonitor {
    pub issues: bool,
    pub pull_requests: bool,
}

impl StateStore {
    fn heartbeat_lock(&self) -> std::path::PathBuf {
        self.layout.locks_dir().join("poll-status.lock")
    }

    /// Replaces the heartbeat atomically.
    pub fn write_heartbeat(&self, heartbeat: &Heartbeat) -> Result<Written, StoreError> {
        let _guard = crate::lock::LockGuard::exclusive(&self.heartbeat_lock())?;
        json_file::write_json(&self.layout.heartbeat(), heartbeat, FileMode::Private)
    }

    /// The heartbeat, `None` when there is none (or it was unreadable and quarantined).
    pub fn read_heartbeat(&self) -> Result<Option<Heartbeat>, StoreError> {
        let (path, lock) = (self.layout.heartbeat(), self.heartbeat_lock());
        JsonFile { path: &path, lock: &lock, events: &self.events }.load(json_file::parse_json)
    }
}

//! The poller's heartbeat, `poll-status.json` (reference §3.8).
//!
//! When the poller started, when its last cycle ended and what that cycle did. Written
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
}

/// What one poll cycle did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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

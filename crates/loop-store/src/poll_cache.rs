//! The poller's cache, `local/poll-cache.json`: what makes its next cycle incremental.
//!
//! The validators (ETag + body) of its conditional requests, the thread it last read for
//! each item with the `updated_at` it was read at, the linked issues of each pull request
//! with the description they were read for, and when the last full sweep ran. A restarted
//! poller (or the next `poll --once` from cron) reads it back, so its first cycle with
//! nothing new is one 304 per scope instead of a read of every thread.
//!
//! It is a cache, never an authority: the portable ledger decides what was seen, and every
//! validator is checked by GitHub (a stale one only costs a 200). A cache written for
//! another configuration (`writtenFor`: scopes, labels, monitors, API bases) is not used;
//! a file that does not parse is quarantined and reads as absent. One writer, the poller
//! holding `poll.pid`; written atomically, 0600, machine-local. This module stores and
//! loads; the poller decides what goes in (the validator and comment types are its).

use std::collections::BTreeMap;

use jiff::Timestamp;
use loop_core::WorkItemRef;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::StateStore;
use crate::error::StoreError;
use crate::json_file::{self, FileMode, JsonFile, Written};
use crate::lock::LockGuard;

/// The whole file. `V` is a stored validator, `C` a remembered comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PollCache<V, C> {
    /// What configuration the cache was written for, one line per scope and per API
    /// base. A cache whose lines differ from the current configuration's is not used.
    pub written_for: Vec<String>,
    /// When the last full sweep (every thread read again, conditionally) ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sweep_at: Option<Timestamp>,
    /// The conditional answers remembered per API host, oldest first.
    pub validators: BTreeMap<String, Vec<V>>,
    /// Each listed item's thread as last read.
    pub threads: BTreeMap<WorkItemRef, RememberedThread<C>>,
    /// Each listed pull request's linked issues.
    pub linkage: BTreeMap<WorkItemRef, RememberedLinkage>,
}

/// An item's thread as last read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RememberedThread<C> {
    /// The item's `updated_at` when the thread was read; a listing showing another value
    /// means the thread is read again.
    pub updated_at: String,
    pub comments: Vec<C>,
}

/// A pull request's linked issues (`closingIssuesReferences`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RememberedLinkage {
    /// The description they were read for; another description means they are asked again.
    pub body: String,
    pub linked: Vec<WorkItemRef>,
}

impl StateStore {
    fn poll_cache_lock(&self) -> std::path::PathBuf {
        self.layout.locks_dir().join("poll-cache.lock")
    }

    /// The cache, `None` when there is none, it does not parse (then quarantined) or it
    /// cannot be read (logged): the poller then starts cold, which is never an error.
    pub fn read_poll_cache<V, C>(&self) -> Option<PollCache<V, C>>
    where
        V: DeserializeOwned,
        C: DeserializeOwned,
    {
        let (path, lock) = (self.layout.poll_cache(), self.poll_cache_lock());
        JsonFile { path: &path, lock: &lock, events: &self.events }
            .load(json_file::parse_json)
            .unwrap_or_else(|err| {
                tracing::warn!(error = %err, "reading the poll cache failed; starting cold");
                None
            })
    }

    /// Replaces the cache atomically (0600).
    pub fn write_poll_cache<V, C>(&self, cache: &PollCache<V, C>) -> Result<Written, StoreError>
    where
        V: Serialize,
        C: Serialize,
    {
        let _guard = LockGuard::exclusive(&self.poll_cache_lock())?;
        json_file::write_json(&self.layout.poll_cache(), cache, FileMode::Private)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::{EventLog, StateLayout};

    type Cache = PollCache<String, String>;

    fn store(dir: &std::path::Path) -> StateStore {
        let layout = StateLayout::new(dir.join("state"));
        StateStore::new(layout.clone(), EventLog::new(layout.event_log(), "test"))
    }

    fn cache() -> Cache {
        let item: WorkItemRef = "github:octo/app#1".parse().expect("a valid ref");
        PollCache {
            written_for: vec!["scope octo/app".into()],
            last_sweep_at: Some(Timestamp::UNIX_EPOCH),
            validators: BTreeMap::from([("github.com".into(), vec!["v".into()])]),
            threads: BTreeMap::from([(
                item.clone(),
                RememberedThread { updated_at: "t".into(), comments: vec!["c".into()] },
            )]),
            linkage: BTreeMap::from([(
                item,
                RememberedLinkage { body: "b".into(), linked: Vec::new() },
            )]),
        }
    }

    #[test]
    fn the_cache_round_trips_privately_and_an_identical_write_touches_nothing() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = store(dir.path());
        assert_eq!(store.read_poll_cache::<String, String>(), None, "no file: cold");
        assert_eq!(store.write_poll_cache(&cache()).expect("written"), Written::Changed);
        assert_eq!(store.read_poll_cache(), Some(cache()));
        let mode = std::fs::metadata(store.layout().poll_cache()).expect("the file").permissions();
        assert_eq!(mode.mode() & 0o777, 0o600, "machine-local");
        assert_eq!(store.write_poll_cache(&cache()).expect("written"), Written::Unchanged);
    }

    #[test]
    fn an_unparsable_cache_is_quarantined_and_reads_as_a_cold_start() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let store = store(dir.path());
        let path = store.layout().poll_cache();
        std::fs::create_dir_all(path.parent().expect("under local/")).expect("local/");
        std::fs::write(&path, "{\"writtenFor\": [").expect("a torn file");
        assert_eq!(store.read_poll_cache::<String, String>(), None);
        assert!(!path.exists(), "moved aside");
        let aside = std::fs::read_dir(path.parent().expect("under local/"))
            .expect("local/")
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().starts_with("poll-cache.json.corrupt-"));
        assert!(aside, "kept for inspection");
    }
}

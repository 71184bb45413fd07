//! The delivery ledger, `local/deliveries.json`: what became of each delivery the
//! dispatcher took in, keyed by dedup key (reference §5.10, issue 6 item 4).
//!
//! A bounded, oldest-first list of marks. A key is marked `inflight` at intake (so a
//! duplicate arriving meanwhile is refused), becomes `kept` when its dispatch ends without
//! a reason to retry (delivered, or dropped for good), or `settled` with a reason when it
//! was refused on purpose (never replayed, never counted as pending). A failure removes the
//! key (released) so a redelivery or a later poll tries again. Whether a key was *done*
//! is not recorded here: that is the endpoint's `recentDeliveries` in the session record,
//! which the dispatcher asks first.
//!
//! The ledger survives restarts. An `inflight` mark found on load belongs to a process
//! that died mid-dispatch: it is released then (the caller is told which), because
//! nothing will ever finish it. The file is machine-local (0600) and is written whole,
//! atomically, under its lock; a file that does not parse is quarantined and reads empty.
//! This module decides nothing about *when* to mark, settle or release.

use std::collections::VecDeque;
use std::path::PathBuf;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::StateStore;
use crate::error::StoreError;
use crate::json_file::{self, FileMode, JsonFile, Written};
use crate::lock::LockGuard;

/// What the ledger holds for one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Mark {
    /// Taken in; its dispatch has not ended.
    Inflight,
    /// Ended without a reason to retry (delivered, or a permanent drop).
    Kept,
    /// Refused on purpose, with the reason (`awaiting-start`, `control-executed`, …).
    Settled { reason: String },
}

/// One key's mark and when it was last changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryEntry {
    pub key: String,
    #[serde(flatten)]
    pub mark: Mark,
    pub at: Timestamp,
}

/// The marks, oldest first, at most `capacity` (`routing.dedupCacheSize`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryLedger {
    #[serde(skip, default = "default_capacity")]
    capacity: usize,
    entries: VecDeque<DeliveryEntry>,
}

fn default_capacity() -> usize {
    1024
}

impl DeliveryLedger {
    /// An empty ledger keeping at most `capacity` keys (at least one).
    pub fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), entries: VecDeque::new() }
    }

    /// The mark of `key`, if any.
    pub fn mark_of(&self, key: &str) -> Option<&Mark> {
        self.entries.iter().find(|e| e.key == key).map(|e| &e.mark)
    }

    /// Marks `key` in flight. Returns `false` (and changes nothing) when the key is
    /// already marked: the delivery is a duplicate.
    pub fn take_in(&mut self, key: &str, now: Timestamp) -> bool {
        if self.mark_of(key).is_some() {
            return false;
        }
        self.put(key, Mark::Inflight, now);
        true
    }

    /// Marks `key` as ended for good (delivered, or dropped permanently).
    pub fn keep(&mut self, key: &str, now: Timestamp) {
        self.put(key, Mark::Kept, now);
    }

    /// Marks `key` settled with `reason`; a key never taken in is marked too.
    pub fn settle(&mut self, key: &str, reason: &str, now: Timestamp) {
        self.put(key, Mark::Settled { reason: reason.to_owned() }, now);
    }

    /// Removes `key`: a redelivery or a later poll may retry it. Returns whether it was
    /// marked.
    pub fn release(&mut self, key: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.key != key);
        before != self.entries.len()
    }

    /// Changes the bound, evicting the oldest marks beyond it.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity.max(1);
        self.evict();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Releases every in-flight mark (a previous process died mid-dispatch) and returns
    /// their keys.
    pub fn release_inflight(&mut self) -> Vec<String> {
        let (inflight, rest): (Vec<_>, Vec<_>) =
            self.entries.drain(..).partition(|e| e.mark == Mark::Inflight);
        self.entries = rest.into();
        inflight.into_iter().map(|e| e.key).collect()
    }

    fn put(&mut self, key: &str, mark: Mark, now: Timestamp) {
        self.entries.retain(|e| e.key != key);
        self.entries.push_back(DeliveryEntry { key: key.to_owned(), mark, at: now });
        self.evict();
    }

    fn evict(&mut self) {
        while self.entries.len() > self.capacity {
            self.entries.pop_front();
        }
    }
}

impl StateStore {
    fn deliveries_path(&self) -> PathBuf {
        self.layout.local_dir().join("deliveries.json")
    }

    fn deliveries_lock(&self) -> PathBuf {
        self.layout.locks_dir().join("deliveries.lock")
    }

    /// The delivery ledger bounded to `capacity`; empty when there is none (or it was
    /// unreadable, then quarantined). In-flight marks of a previous process are released;
    /// their keys are returned beside the ledger.
    pub fn load_delivery_ledger(
        &self,
        capacity: usize,
    ) -> Result<(DeliveryLedger, Vec<String>), StoreError> {
        let (path, lock) = (self.deliveries_path(), self.deliveries_lock());
        let loaded = JsonFile { path: &path, lock: &lock, events: &self.events }
            .load(json_file::parse_json::<DeliveryLedger>)?;
        let mut ledger = loaded.unwrap_or_else(|| DeliveryLedger::new(capacity));
        ledger.set_capacity(capacity);
        let abandoned = ledger.release_inflight();
        Ok((ledger, abandoned))
    }

    /// Writes the ledger whole, atomically, under its lock.
    pub fn save_delivery_ledger(&self, ledger: &DeliveryLedger) -> Result<Written, StoreError> {
        let _guard = LockGuard::exclusive(&self.deliveries_lock())?;
        json_file::write_json(&self.deliveries_path(), ledger, FileMode::Private)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp::UNIX_EPOCH;

    #[test]
    fn a_key_taken_in_twice_is_a_duplicate() {
        let mut ledger = DeliveryLedger::new(8);
        assert!(ledger.take_in("k", NOW));
        assert!(!ledger.take_in("k", NOW));
        assert_eq!(ledger.mark_of("k"), Some(&Mark::Inflight));
    }

    #[test]
    fn a_released_key_may_be_taken_in_again() {
        let mut ledger = DeliveryLedger::new(8);
        ledger.take_in("k", NOW);
        assert!(ledger.release("k"));
        assert!(ledger.take_in("k", NOW));
    }

    #[test]
    fn settling_a_key_never_taken_in_marks_it() {
        let mut ledger = DeliveryLedger::new(8);
        ledger.settle("k", "awaiting-start", NOW);
        assert_eq!(ledger.mark_of("k"), Some(&Mark::Settled { reason: "awaiting-start".into() }));
        assert!(!ledger.take_in("k", NOW));
    }

    #[test]
    fn the_oldest_marks_are_evicted_beyond_the_bound() {
        let mut ledger = DeliveryLedger::new(2);
        for key in ["a", "b", "c"] {
            ledger.take_in(key, NOW);
        }
        assert_eq!(ledger.mark_of("a"), None);
        assert!(ledger.mark_of("c").is_some());
        ledger.set_capacity(1);
        assert_eq!(ledger.len(), 1);
    }

    #[test]
    fn inflight_marks_of_a_dead_process_are_released_and_named() {
        let mut ledger = DeliveryLedger::new(8);
        ledger.take_in("running", NOW);
        ledger.take_in("done", NOW);
        ledger.keep("done", NOW);
        ledger.settle("paused", "session-paused", NOW);
        assert_eq!(ledger.release_inflight(), ["running"]);
        assert_eq!(ledger.mark_of("running"), None);
        assert_eq!(ledger.mark_of("done"), Some(&Mark::Kept));
        assert!(ledger.mark_of("paused").is_some());
    }

    #[test]
    fn the_ledger_survives_a_restart_but_inflight_marks_do_not() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store =
            StateStore::new(crate::StateLayout::new(dir.path()), crate::EventLog::disabled());
        let mut ledger = DeliveryLedger::new(8);
        ledger.take_in("kept", NOW);
        ledger.keep("kept", NOW);
        ledger.settle("settled", "awaiting-start", NOW);
        ledger.take_in("running", NOW);
        store.save_delivery_ledger(&ledger).expect("saved");
        let (loaded, abandoned) = store.load_delivery_ledger(8).expect("loaded");
        assert_eq!(abandoned, ["running"]);
        assert_eq!(loaded.mark_of("kept"), Some(&Mark::Kept));
        assert_eq!(
            loaded.mark_of("settled"),
            Some(&Mark::Settled { reason: "awaiting-start".into() })
        );
        assert_eq!(loaded.mark_of("running"), None);
    }
}

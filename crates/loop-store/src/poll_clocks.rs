//! The poll clocks file, `local/poll-clocks.json` (seed 001).
//!
//! One machine-wide file: when each ref was last listed and last asked about closure.
//! Reads are best-effort — a missing file is empty, an unreadable one is quarantined and
//! empty — because a clock never decides anything but when to ask again. Writes are
//! atomic, under the file's lock, and skipped when nothing changed. The poller batches a
//! whole cycle into one [`StateStore::update_poll_clocks`].

use loop_core::WorkItemRef;
use loop_core::record::{PollClock, PollClocks};

use crate::StateStore;
use crate::error::StoreError;
use crate::json_file::{self, FileMode, JsonFile, Written};
use crate::lock::LockGuard;

impl StateStore {
    fn poll_clocks_lock(&self) -> std::path::PathBuf {
        self.layout.locks_dir().join("poll-clocks.lock")
    }

    /// Every clock; empty when the file is missing or unreadable (then logged).
    pub fn poll_clocks(&self) -> PollClocks {
        let (path, lock) = (self.layout.poll_clocks(), self.poll_clocks_lock());
        JsonFile { path: &path, lock: &lock, events: &self.events }
            .load(json_file::parse_json)
            .unwrap_or_else(|err| {
                tracing::warn!(error = %err, "reading the poll clocks failed; treating them as empty");
                None
            })
            .unwrap_or_default()
    }

    /// The clock of one ref; empty when unknown.
    pub fn poll_clock(&self, item: &WorkItemRef) -> PollClock {
        self.poll_clocks().clocks.get(item).copied().unwrap_or_default()
    }

    /// Read-modify-write of the whole file under its lock; entries left empty are dropped.
    pub fn update_poll_clocks(
        &self,
        change: impl FnOnce(&mut PollClocks),
    ) -> Result<Written, StoreError> {
        let (path, lock) = (self.layout.poll_clocks(), self.poll_clocks_lock());
        let _guard = LockGuard::exclusive(&lock)?;
        let file = JsonFile { path: &path, lock: &lock, events: &self.events };
        let mut clocks: PollClocks = file.load_locked(json_file::parse_json)?.unwrap_or_default();
        change(&mut clocks);
        clocks.clocks.retain(|_, clock| !clock.is_empty());
        json_file::write_json(&path, &clocks, FileMode::Private)
    }

    /// Sets one ref's clock (an empty clock forgets the ref).
    pub fn put_poll_clock(
        &self,
        item: &WorkItemRef,
        clock: PollClock,
    ) -> Result<Written, StoreError> {
        self.update_poll_clocks(|clocks| {
            clocks.clocks.insert(item.clone(), clock);
        })
    }
}

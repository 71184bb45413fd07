//! The delivery ledger: what became of each delivery the dispatcher took in, keyed by
//! dedup key (reference §5.10, issue 6 item 4), and its file `local/deliveries.log`.
//!
//! A bounded, oldest-first list of marks. A key is marked `inflight` at intake (so a
//! duplicate arriving meanwhile is refused), becomes `kept` when its dispatch ends without
//! a reason to retry (delivered, or dropped for good), or `settled` with a reason when it
//! was refused on purpose (never replayed, never counted as pending). A failure removes the
//! key (released) so a redelivery or a later poll tries again. Whether a key was *done*
//! is not recorded here: that is the endpoint's `recentDeliveries` in the session record,
//! which the dispatcher asks first.
//!
//! Persistence ([`DeliveryLog`]; docs/dispatcher.md, "Durability"): the dispatcher keeps
//! the ledger in memory and appends one JSON line per change (`inflight`, `kept`,
//! `settled`, `released`, `doubted`) to the log — one `write(2)` on an `O_APPEND` descriptor, no
//! fsync, so no change on the dispatch path costs a sync or a rewrite that grows with
//! history. A `kill -9` loses nothing written (the page cache outlives the process); an
//! OS crash may lose the last lines. Replaying the lines in order rebuilds the ledger.
//! A last line without its newline (a write cut short) is ignored; any other line that
//! does not parse sends the file to quarantine (`state.quarantined`) and the lines that
//! did parse are kept. The log is compacted — rewritten atomically and fsynced, one line
//! per key — when it has grown past twice the keys held (at least the bound; plus
//! [`COMPACTION_SLACK`] lines), and
//! at open when it needs repair.
//!
//! The ledger survives restarts. An `inflight` mark found at open belongs to a process
//! that died mid-dispatch: nothing will ever finish it, and its delivery may or may not
//! have reached its session. It becomes *doubt* then (`doubted`): no longer a mark (the
//! key may be taken in again), and the caller is told every key in doubt so it can ask
//! the harness's own record before pasting again. Doubt lasts until the key is marked
//! again, across any number of processes: a kill before the doubt was checked must not
//! turn it into a plain retry (a second paste). Appends and compaction hold the ledger's lock
//! (`locks/deliveries.lock`); an appender whose file was replaced by another process's
//! compaction reopens it first. The file is machine-local (0600).
//! This module decides nothing about *when* to mark, settle or release.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::StateStore;
use crate::error::StoreError;
use crate::json_file::{self, FileMode};
use crate::lock::LockGuard;

/// Lines a log may hold beyond twice the bound before it is compacted.
pub const COMPACTION_SLACK: usize = 256;

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
    /// Keys a process ended holding in flight, not yet marked since: each may or may not
    /// have reached its session. Not marks (a key in doubt may be taken in again), and
    /// kept across processes until the key is marked again, so a second kill before the
    /// doubt was checked cannot turn it into a plain retry.
    #[serde(skip)]
    doubted: VecDeque<(String, Timestamp)>,
}

/// How long a mark is kept beyond the bound (see [`DeliveryLedger::evict`]).
const RECENT: jiff::SignedDuration = jiff::SignedDuration::from_mins(15);

/// How far past its bound the ledger may grow to keep recent marks.
const HARD_BOUND_FACTOR: usize = 16;

fn default_capacity() -> usize {
    1024
}

impl DeliveryLedger {
    /// An empty ledger keeping at most `capacity` keys (at least one).
    pub fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), entries: VecDeque::new(), doubted: VecDeque::new() }
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

    /// Turns every in-flight mark (a previous process died mid-dispatch) into doubt and
    /// returns the keys that were in flight; with the keys already in doubt, every key
    /// now in doubt.
    pub fn release_inflight(&mut self) -> (Vec<String>, Vec<String>) {
        let (inflight, rest): (Vec<_>, Vec<_>) =
            self.entries.drain(..).partition(|e| e.mark == Mark::Inflight);
        self.entries = rest.into();
        let released: Vec<String> = inflight.iter().map(|e| e.key.clone()).collect();
        for entry in inflight {
            self.doubt(entry.key, entry.at);
        }
        (released, self.doubted.iter().map(|(key, _)| key.clone()).collect())
    }

    /// Applies one logged change, as the call that logged it did.
    fn apply(&mut self, line: Line) {
        let mark = match line.change {
            Change::Inflight => Mark::Inflight,
            Change::Kept => Mark::Kept,
            Change::Settled { reason } => Mark::Settled { reason },
            Change::Released => {
                self.release(&line.key);
                return;
            }
            Change::Doubted => {
                self.release(&line.key);
                self.doubt(line.key, line.at);
                return;
            }
        };
        self.put(&line.key, mark, line.at);
    }

    /// The ledger as log lines, one per key, oldest first.
    fn encode_lines(&self, path: &Path) -> Result<Vec<u8>, StoreError> {
        let mut bytes = Vec::new();
        for entry in &self.entries {
            let change = match &entry.mark {
                Mark::Inflight => Change::Inflight,
                Mark::Kept => Change::Kept,
                Mark::Settled { reason } => Change::Settled { reason: reason.clone() },
            };
            let line = Line { key: entry.key.clone(), change, at: entry.at };
            bytes.extend(line.encode(path)?);
        }
        for (key, at) in &self.doubted {
            let line = Line { key: key.clone(), change: Change::Doubted, at: *at };
            bytes.extend(line.encode(path)?);
        }
        Ok(bytes)
    }

    fn put(&mut self, key: &str, mark: Mark, now: Timestamp) {
        self.entries.retain(|e| e.key != key);
        self.doubted.retain(|(doubted, _)| doubted != key);
        self.entries.push_back(DeliveryEntry { key: key.to_owned(), mark, at: now });
        self.evict();
    }

    /// Forgets the oldest marks beyond the bound, but never one in flight, and not one
    /// younger than [`RECENT`] until the ledger holds [`HARD_BOUND_FACTOR`] times the
    /// bound. A mark is what tells a delivery's other copy (the other ingress, a
    /// redelivery) and the poller's next look at a comment it forwarded that it was
    /// delivered: under a backlog, or with slow poll cycles, more than the bound pass in
    /// less time than that takes, and forgetting by count alone pasted comments twice
    /// (the soak). Age is measured against the newest mark (the last put), so no clock is
    /// read here and nothing is scanned on the dispatch path.
    fn evict(&mut self) {
        let newest = self.entries.back().map(|e| e.at);
        while self.entries.len() > self.capacity {
            let Some(oldest) = self.entries.iter().position(|e| e.mark != Mark::Inflight) else {
                break;
            };
            let old_enough = newest.is_some_and(|newest| {
                self.entries[oldest].at.saturating_add(RECENT).is_ok_and(|t| t <= newest)
            });
            if !old_enough && self.entries.len() <= self.capacity.saturating_mul(HARD_BOUND_FACTOR)
            {
                break;
            }
            self.entries.remove(oldest);
        }
        while self.doubted.len() > self.capacity {
            self.doubted.pop_front();
        }
    }

    /// Puts `key` in doubt (once), as of `at`.
    fn doubt(&mut self, key: String, at: Timestamp) {
        if !self.doubted.iter().any(|(doubted, _)| *doubted == key) {
            self.doubted.push_back((key, at));
        }
        self.evict();
    }
}

/// One line of the log: a key's new mark, or its release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Line {
    key: String,
    #[serde(flatten)]
    change: Change,
    at: Timestamp,
}

/// What a line did to its key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
enum Change {
    Inflight,
    Kept,
    Settled {
        reason: String,
    },
    Released,
    /// Was in flight when its process ended (see [`DeliveryLedger::release_inflight`]).
    Doubted,
}

impl Line {
    /// The line's bytes, newline included.
    fn encode(&self, path: &Path) -> Result<Vec<u8>, StoreError> {
        let mut bytes = serde_json::to_vec(self)
            .map_err(|source| StoreError::Encode { path: path.to_owned(), source })?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

/// What a log's bytes rebuild.
#[derive(Debug)]
struct Replayed {
    ledger: DeliveryLedger,
    /// Complete lines read (the compaction trigger counts from here).
    lines: usize,
    /// The file ends inside a line (a write cut short): ignored, and the file is repaired.
    torn: bool,
    /// Lines that did not parse, by number (1-based), with why.
    unreadable: Vec<String>,
}

/// Replays a log's bytes in order under `capacity`.
fn replay(bytes: &[u8], capacity: usize) -> Replayed {
    let mut ledger = DeliveryLedger::new(capacity);
    let mut segments: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    // The segment after the last newline: empty, or a line whose write was cut short.
    let torn = segments.pop().is_some_and(|tail| !tail.is_empty());
    let mut unreadable = Vec::new();
    for (number, segment) in segments.iter().enumerate() {
        if segment.is_empty() {
            continue;
        }
        match serde_json::from_slice::<Line>(segment) {
            Ok(line) => ledger.apply(line),
            Err(err) => unreadable.push(format!("line {}: {err}", number + 1)),
        }
    }
    Replayed { ledger, lines: segments.len(), torn, unreadable }
}

/// Whether a log of `lines` lines for a ledger holding `held` keys (at least its bound:
/// recent marks may outnumber it) is due for compaction.
fn compaction_due(lines: usize, held: usize) -> bool {
    lines > 2 * held + COMPACTION_SLACK
}

/// The ledger held in memory by its owner, persisted as an append-only log
/// (module doc). Every change applies in memory first; an `Err` means its line could not
/// be written (the in-memory ledger still holds the change).
#[derive(Debug)]
pub struct DeliveryLog {
    ledger: DeliveryLedger,
    path: PathBuf,
    lock: PathBuf,
    /// The append descriptor and the inode it was opened on.
    appender: Option<(File, u64)>,
    /// Lines in the file as far as this process knows, for the compaction trigger.
    lines: usize,
}

impl DeliveryLog {
    /// The ledger as this process holds it.
    pub fn ledger(&self) -> &DeliveryLedger {
        &self.ledger
    }

    /// The mark of `key`, if any.
    pub fn mark_of(&self, key: &str) -> Option<&Mark> {
        self.ledger.mark_of(key)
    }

    /// Changes the bound in memory (evicting the oldest marks); the next compaction
    /// writes it.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.ledger.set_capacity(capacity);
    }

    /// Marks `key` in flight; `Ok(false)` (nothing written) when it is already marked:
    /// a duplicate. `Err`: taken in, but its line could not be written.
    pub fn take_in(&mut self, key: &str, now: Timestamp) -> Result<bool, StoreError> {
        if !self.ledger.take_in(key, now) {
            return Ok(false);
        }
        self.append(key, Change::Inflight, now)?;
        Ok(true)
    }

    /// Marks `key` as ended for good (delivered, or dropped permanently).
    pub fn keep(&mut self, key: &str, now: Timestamp) -> Result<(), StoreError> {
        self.ledger.keep(key, now);
        self.append(key, Change::Kept, now)
    }

    /// Marks `key` settled with `reason`; a key never taken in is marked too.
    pub fn settle(&mut self, key: &str, reason: &str, now: Timestamp) -> Result<(), StoreError> {
        self.ledger.settle(key, reason, now);
        self.append(key, Change::Settled { reason: reason.to_owned() }, now)
    }

    /// Removes `key` so a redelivery or a later poll may retry it; `Ok(false)` (nothing
    /// written) when it was not marked.
    pub fn release(&mut self, key: &str, now: Timestamp) -> Result<bool, StoreError> {
        if !self.ledger.release(key) {
            return Ok(false);
        }
        self.append(key, Change::Released, now)?;
        Ok(true)
    }

    fn append(&mut self, key: &str, change: Change, at: Timestamp) -> Result<(), StoreError> {
        let bytes = Line { key: key.to_owned(), change, at }.encode(&self.path)?;
        let _guard = LockGuard::exclusive(&self.lock)?;
        self.append_locked(&bytes)?;
        let held = self.ledger.len().max(self.ledger.capacity);
        if compaction_due(self.lines, held) {
            self.compact_locked()?;
        }
        Ok(())
    }

    /// Appends whole lines with one `write(2)`; the caller holds the lock.
    fn append_locked(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        let on_disk = match fs::metadata(&self.path) {
            Ok(meta) => Some(meta.ino()),
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => return Err(StoreError::io("inspect", &self.path)(err)),
        };
        let (file, _) = match self.appender.take() {
            Some((file, inode)) if on_disk == Some(inode) => self.appender.insert((file, inode)),
            // Not opened yet, or replaced (another process compacted) or removed since.
            _ => {
                let opened = open_appender(&self.path)?;
                self.lines = self.ledger.len();
                self.appender.insert(opened)
            }
        };
        file.write_all(bytes).map_err(StoreError::io("append to", &self.path))?;
        self.lines += bytes.iter().filter(|b| **b == b'\n').count();
        Ok(())
    }

    /// Rewrites the log as the replay of what it holds (every process's lines), one line
    /// per key, atomically and fsynced; the caller holds the lock. This process's
    /// in-memory ledger is not changed.
    fn compact_locked(&mut self) -> Result<(), StoreError> {
        let bytes = json_file::read_bytes(&self.path)?.unwrap_or_default();
        let replayed = replay(&bytes, self.ledger.capacity);
        json_file::write_atomically(
            &self.path,
            &replayed.ledger.encode_lines(&self.path)?,
            FileMode::Private.bits(),
        )?;
        self.appender = Some(open_appender(&self.path)?);
        self.lines = replayed.ledger.len();
        Ok(())
    }
}

/// Opens the log for appending (created 0600), with its inode.
fn open_appender(path: &Path) -> Result<(File, u64), StoreError> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(StoreError::io("open for appending", path))?;
    let inode = file.metadata().map_err(StoreError::io("inspect", path))?.ino();
    Ok((file, inode))
}

/// What was read at open, and whether the file must be rewritten.
#[derive(Debug)]
struct Loaded {
    ledger: DeliveryLedger,
    lines: usize,
    /// The log needs rewriting (torn, unreadable lines).
    rewrite: bool,
    unreadable: Vec<String>,
}

impl StateStore {
    fn deliveries_log(&self) -> PathBuf {
        self.layout.local_dir().join("deliveries.log")
    }

    fn deliveries_lock(&self) -> PathBuf {
        self.layout.locks_dir().join("deliveries.lock")
    }

    /// Reads the log under `capacity` (empty when there is none).
    fn read_deliveries(&self, capacity: usize) -> Result<Loaded, StoreError> {
        let Some(bytes) = json_file::read_bytes(&self.deliveries_log())? else {
            let ledger = DeliveryLedger::new(capacity);
            return Ok(Loaded { ledger, lines: 0, rewrite: false, unreadable: Vec::new() });
        };
        let Replayed { ledger, lines, torn, unreadable } = replay(&bytes, capacity);
        if torn {
            tracing::warn!(path = %self.deliveries_log().display(), "the delivery log ends inside a line (a write cut short); it is ignored");
        }
        let rewrite = torn || !unreadable.is_empty();
        Ok(Loaded { ledger, lines, rewrite, unreadable })
    }

    /// The delivery ledger bounded to `capacity`, read without changing any file: empty
    /// when there is none. In-flight marks become doubt in the returned ledger only; the
    /// keys in doubt are returned beside it.
    pub fn load_delivery_ledger(
        &self,
        capacity: usize,
    ) -> Result<(DeliveryLedger, Vec<String>), StoreError> {
        let mut ledger = self.read_deliveries(capacity)?.ledger;
        let (_, in_doubt) = ledger.release_inflight();
        Ok((ledger, in_doubt))
    }

    /// Replaces the log with `ledger`, one line per key, atomically and fsynced.
    pub fn save_delivery_ledger(&self, ledger: &DeliveryLedger) -> Result<(), StoreError> {
        let _guard = LockGuard::exclusive(&self.deliveries_lock())?;
        let path = self.deliveries_log();
        json_file::write_atomically(&path, &ledger.encode_lines(&path)?, FileMode::Private.bits())
    }

    /// Opens the delivery ledger for its owner, bounded to `capacity`: the log replayed, a
    /// log with
    /// unreadable lines quarantined and rewritten from the lines that parsed, a torn one
    /// rewritten. In-flight marks of a previous process become doubt (a `doubted` line
    /// each); the keys in doubt — those, and those a process before it left in doubt and
    /// nobody marked since — are returned beside the log.
    pub fn open_delivery_log(
        &self,
        capacity: usize,
    ) -> Result<(DeliveryLog, Vec<String>), StoreError> {
        let (path, lock) = (self.deliveries_log(), self.deliveries_lock());
        let _guard = LockGuard::exclusive(&lock)?;
        let Loaded { mut ledger, lines, rewrite, unreadable } = self.read_deliveries(capacity)?;
        if !unreadable.is_empty() {
            json_file::quarantine(&path, &unreadable.join("; "), &self.events)?;
        }
        let (abandoned, in_doubt) = ledger.release_inflight();
        let mut log = DeliveryLog { ledger, path, lock, appender: None, lines };
        if rewrite {
            let bytes = log.ledger.encode_lines(&log.path)?;
            json_file::write_atomically(&log.path, &bytes, FileMode::Private.bits())?;
            log.lines = log.ledger.len() + log.ledger.doubted.len();
        } else if !abandoned.is_empty() {
            let now = Timestamp::now();
            let mut bytes = Vec::new();
            for key in &abandoned {
                let line = Line { key: key.clone(), change: Change::Doubted, at: now };
                bytes.extend(line.encode(&log.path)?);
            }
            log.append_locked(&bytes)?;
        }
        Ok((log, in_doubt))
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

    /// `minutes` after [`NOW`].
    fn at(minutes: i64) -> Timestamp {
        NOW + jiff::SignedDuration::from_mins(minutes)
    }

    #[test]
    fn the_oldest_marks_are_evicted_beyond_the_bound_once_not_recent() {
        let mut ledger = DeliveryLedger::new(2);
        for (key, minutes) in [("a", 0), ("b", 20), ("c", 40)] {
            ledger.keep(key, at(minutes));
        }
        assert_eq!(ledger.mark_of("a"), None);
        assert!(ledger.mark_of("c").is_some());
        ledger.set_capacity(1);
        assert_eq!(ledger.len(), 1);
    }

    #[test]
    fn recent_marks_outlive_the_bound_up_to_its_hard_multiple() {
        let mut ledger = DeliveryLedger::new(2);
        for n in 0..40 {
            ledger.keep(&format!("k{n}"), at(1));
        }
        assert_eq!(ledger.len(), 2 * HARD_BOUND_FACTOR, "all recent: kept up to the hard bound");
        assert_eq!(ledger.mark_of("k39"), Some(&Mark::Kept));
        ledger.keep("later", at(30));
        assert_eq!(ledger.len(), 2, "the old ones go once a mark is 15 minutes newer");
    }

    #[test]
    fn a_mark_in_flight_is_never_evicted_however_many_follow() {
        let mut ledger = DeliveryLedger::new(2);
        for key in ["a", "b", "c"] {
            assert!(ledger.take_in(key, at(0)));
        }
        assert!(!ledger.take_in("a", at(0)), "still a duplicate while in flight");
        ledger.keep("a", at(0));
        ledger.keep("b", at(20));
        assert_eq!(ledger.len(), 2, "back within the bound once they ended");
        assert_eq!(ledger.mark_of("a"), None, "the oldest ended mark went first");
        assert_eq!(ledger.mark_of("c"), Some(&Mark::Inflight));
    }

    #[test]
    fn inflight_marks_of_a_dead_process_are_released_and_named() {
        let mut ledger = DeliveryLedger::new(8);
        ledger.take_in("running", NOW);
        ledger.take_in("done", NOW);
        ledger.keep("done", NOW);
        ledger.settle("paused", "session-paused", NOW);
        let running = vec!["running".to_owned()];
        assert_eq!(ledger.release_inflight(), (running.clone(), running));
        assert_eq!(ledger.mark_of("running"), None);
        assert_eq!(ledger.mark_of("done"), Some(&Mark::Kept));
        assert!(ledger.mark_of("paused").is_some());
    }

    fn store() -> (tempfile::TempDir, StateStore) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store =
            StateStore::new(crate::StateLayout::new(dir.path()), crate::EventLog::disabled());
        (dir, store)
    }

    fn log_text(store: &StateStore) -> String {
        fs::read_to_string(store.deliveries_log()).expect("the log exists")
    }

    #[test]
    fn the_ledger_survives_a_restart_but_inflight_marks_do_not() {
        let (_dir, store) = store();
        let (mut log, abandoned) = store.open_delivery_log(8).expect("opened");
        assert!(abandoned.is_empty());
        assert!(log.take_in("kept", NOW).expect("written"));
        log.keep("kept", NOW).expect("written");
        log.settle("settled", "awaiting-start", NOW).expect("written");
        assert!(log.take_in("released", NOW).expect("written"));
        assert!(log.release("released", NOW).expect("written"));
        assert!(log.take_in("running", NOW).expect("written"));
        assert!(!log.take_in("running", NOW).expect("nothing written"), "a duplicate");
        assert_eq!(log_text(&store).lines().count(), 6, "one line per change");
        drop(log);

        let (reopened, abandoned) = store.open_delivery_log(8).expect("reopened");
        assert_eq!(abandoned, ["running"]);
        assert_eq!(reopened.mark_of("kept"), Some(&Mark::Kept));
        assert_eq!(
            reopened.mark_of("settled"),
            Some(&Mark::Settled { reason: "awaiting-start".into() })
        );
        assert_eq!(reopened.mark_of("released"), None);
        assert_eq!(reopened.mark_of("running"), None);
        let text = log_text(&store);
        let last = text.lines().last().unwrap_or_default();
        assert!(
            last.contains("\"key\":\"running\"") && last.contains("\"state\":\"doubted\""),
            "the doubt about an abandoned mark is logged: {text}"
        );
        drop(reopened);
        // Killed again before anyone looked at it: still in doubt, not a plain retry.
        let (mut again, abandoned) = store.open_delivery_log(8).expect("reopened again");
        assert_eq!(abandoned, ["running"], "the doubt outlives a second process");
        assert_eq!(again.ledger().len(), 2);
        assert!(again.take_in("running", NOW).expect("written"), "a key in doubt is taken in");
        again.keep("running", NOW).expect("written");
        drop(again);
        let (_, abandoned) = store.open_delivery_log(8).expect("reopened once more");
        assert!(abandoned.is_empty(), "marked since: no doubt left");
    }

    #[test]
    fn a_change_is_one_appended_line_in_a_private_file() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, store) = store();
        let (mut log, _) = store.open_delivery_log(8).expect("opened");
        log.settle("k", "session-paused", NOW).expect("written");
        let inode = fs::metadata(store.deliveries_log()).expect("the log").ino();
        log.keep("k", NOW).expect("written");
        let meta = fs::metadata(store.deliveries_log()).expect("the log");
        assert_eq!(meta.ino(), inode, "appended in place, never replaced");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            log_text(&store),
            "{\"key\":\"k\",\"state\":\"settled\",\"reason\":\"session-paused\",\"at\":\"1970-01-01T00:00:00Z\"}\n\
             {\"key\":\"k\",\"state\":\"kept\",\"at\":\"1970-01-01T00:00:00Z\"}\n"
        );
        let local: Vec<_> = fs::read_dir(dir.path().join("local"))
            .expect("local/")
            .map(|e| e.expect("an entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!local.iter().any(|name| name.ends_with(".tmp")), "{local:?}");
    }

    #[test]
    fn a_torn_last_line_is_ignored_and_the_log_repaired() {
        let (_dir, store) = store();
        let (mut log, _) = store.open_delivery_log(8).expect("opened");
        log.settle("whole", "awaiting-start", NOW).expect("written");
        drop(log);
        let mut file = OpenOptions::new().append(true).open(store.deliveries_log()).expect("log");
        file.write_all(b"{\"key\":\"cut\",\"sta").expect("a torn write");
        let (mut log, abandoned) = store.open_delivery_log(8).expect("reopened");
        assert!(abandoned.is_empty());
        assert!(log.mark_of("whole").is_some());
        assert!(log.mark_of("cut").is_none());
        log.keep("after", NOW).expect("written");
        let (reopened, _) = store.open_delivery_log(8).expect("reopened again");
        assert_eq!(reopened.mark_of("after"), Some(&Mark::Kept), "{}", log_text(&store));
        assert!(log_text(&store).ends_with('\n'));
    }

    #[test]
    fn an_unreadable_line_quarantines_the_log_and_keeps_the_lines_that_parse() {
        let (dir, store) = store();
        let (mut log, _) = store.open_delivery_log(8).expect("opened");
        log.settle("before", "awaiting-start", NOW).expect("written");
        drop(log);
        let mut file = OpenOptions::new().append(true).open(store.deliveries_log()).expect("log");
        file.write_all(b"not json\n").expect("garbage");
        file.write_all(b"{\"key\":\"after\",\"state\":\"kept\",\"at\":\"1970-01-01T00:00:00Z\"}\n")
            .expect("a line");
        let (log, _) = store.open_delivery_log(8).expect("reopened");
        assert!(log.mark_of("before").is_some() && log.mark_of("after").is_some());
        let aside: Vec<_> = fs::read_dir(dir.path().join("local"))
            .expect("local/")
            .map(|e| e.expect("an entry").file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("deliveries.log.corrupt-"))
            .collect();
        assert_eq!(aside.len(), 1, "{aside:?}");
        assert!(!log_text(&store).contains("not json"));
    }

    #[test]
    fn the_log_is_compacted_once_it_outgrows_the_bound() {
        let (_dir, store) = store();
        let (mut log, _) = store.open_delivery_log(2).expect("opened");
        for n in 0..2 * COMPACTION_SLACK {
            let key = format!("k{n}");
            let when = at(16 * n as i64);
            log.take_in(&key, when).expect("written");
            log.keep(&key, when).expect("written");
        }
        let lines = log_text(&store).lines().count();
        assert!(lines <= 2 * 2 + COMPACTION_SLACK + 1, "{lines} lines");
        let (reopened, _) = store.open_delivery_log(2).expect("reopened");
        let last = format!("k{}", 2 * COMPACTION_SLACK - 1);
        assert_eq!(reopened.mark_of(&last), Some(&Mark::Kept));
        assert_eq!(reopened.ledger().len(), 2);
    }

    #[test]
    fn an_appender_follows_a_log_replaced_by_another_writer() {
        let (_dir, store) = store();
        let (mut log, _) = store.open_delivery_log(8).expect("opened");
        log.settle("first", "awaiting-start", NOW).expect("written");
        let mut other = DeliveryLedger::new(8);
        other.keep("theirs", NOW);
        store.save_delivery_ledger(&other).expect("replaced");
        log.keep("second", NOW).expect("written");
        let (reopened, _) = store.open_delivery_log(8).expect("reopened");
        assert_eq!(reopened.mark_of("theirs"), Some(&Mark::Kept));
        assert_eq!(reopened.mark_of("second"), Some(&Mark::Kept), "{}", log_text(&store));
    }

    #[test]
    fn loading_reports_inflight_marks_without_writing() {
        let (_dir, store) = store();
        let (mut log, _) = store.open_delivery_log(8).expect("opened");
        log.take_in("running", NOW).expect("written");
        let before = log_text(&store);
        let (ledger, inflight) = store.load_delivery_ledger(8).expect("loaded");
        assert_eq!(inflight, ["running"]);
        assert!(ledger.mark_of("running").is_none());
        assert_eq!(log_text(&store), before);
    }
}

//! The poller's ledgers on disk: the `poll` section of portable records and the
//! machine's poll clocks (seed 001).
//!
//! Records are read lazily, once per cycle, and remembered as read; a record is written
//! back only when its clock-free body differs from what was read, so a quiet cycle leaves
//! `portable/` untouched. The clocks (`lastPolledAt`, `closureCheckedAt`) live in
//! `local/poll-clocks.json`; changes are collected during a cycle and written in one
//! read-modify-write. A clock an older version left inside a record is read only when the
//! local file has none for the ref, and disappears the next time the record is written
//! (the typed section has no such key).
//!
//! A ledger that could not be written (a full or read-only disk) is not dropped with the
//! cycle: [`Ledgers::unrecorded`] hands it to the next cycle's [`Ledgers::open`], which
//! works on it instead of what the disk still says. So a first sight whose baseline
//! could not be recorded is not taken again later (which would baseline away what was
//! posted meanwhile), and comments already forwarded are not forwarded twice; the
//! ledger is written once the disk takes it.
//!
//! Decisions are not made here: this is load, compare and store.

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::poll::parse_stamp;
use loop_core::record::{PollClock, PollClocks, PollLedger};
use loop_store::{StateStore, StoreError};

/// A record's poll section as read, and as the cycle has changed it.
#[derive(Debug)]
struct Loaded {
    stored: Option<PollLedger>,
    current: Option<PollLedger>,
}

/// One cycle's view of the poll ledgers and clocks.
#[derive(Debug)]
pub struct Ledgers {
    store: StateStore,
    loaded: HashMap<WorkItemRef, Loaded>,
    clocks: PollClocks,
    /// Clock changes of this cycle, written by [`Ledgers::save_clocks`]; `None` forgets.
    clock_changes: BTreeMap<WorkItemRef, Option<PollClock>>,
    /// Ledgers an earlier cycle could not write, used in place of what is on disk.
    carried: HashMap<WorkItemRef, Option<PollLedger>>,
}

/// Ledgers a cycle changed but could not write, for the next cycle to carry on from.
pub type Unrecorded = HashMap<WorkItemRef, Option<PollLedger>>;

impl Ledgers {
    /// Reads the clock file (best-effort: unreadable is empty); `carried` are the
    /// ledgers the last cycle could not write ([`Ledgers::unrecorded`]).
    pub fn open(store: &StateStore, carried: Unrecorded) -> Self {
        Self {
            store: store.clone(),
            loaded: HashMap::new(),
            clocks: store.poll_clocks(),
            clock_changes: BTreeMap::new(),
            carried,
        }
    }

    /// The ledgers changed in memory but not written (a write failed), for the next cycle.
    pub fn unrecorded(self) -> Unrecorded {
        self.loaded
            .into_iter()
            .filter(|(_, loaded)| loaded.current != loaded.stored)
            .map(|(owner, loaded)| (owner, loaded.current))
            .chain(self.carried)
            .collect()
    }

    /// The poll section of `owner`'s record (`None`: never polled, forgotten or
    /// quarantined — first sight).
    pub fn ledger(&mut self, owner: &WorkItemRef) -> Result<Option<&PollLedger>, StoreError> {
        Ok(self.load(owner)?.current.as_ref())
    }

    /// Replaces the poll section of `owner`'s record in memory.
    pub fn put(&mut self, owner: &WorkItemRef, ledger: PollLedger) -> Result<(), StoreError> {
        self.load(owner)?.current = Some(ledger);
        Ok(())
    }

    fn load(&mut self, owner: &WorkItemRef) -> Result<&mut Loaded, StoreError> {
        if !self.loaded.contains_key(owner) {
            let stored = self.store.read_section::<PollLedger>(owner)?.into_value();
            let current = self.carried.remove(owner).unwrap_or_else(|| stored.clone());
            self.loaded.insert(owner.clone(), Loaded { current, stored });
        }
        Ok(self.loaded.get_mut(owner).expect("inserted just above when absent"))
    }

    /// Writes `owner`'s record when its body changed since it was read. Returns whether
    /// it wrote.
    pub fn flush(&mut self, owner: &WorkItemRef) -> Result<bool, StoreError> {
        let Some(loaded) = self.loaded.get_mut(owner) else { return Ok(false) };
        if loaded.current == loaded.stored {
            return Ok(false);
        }
        self.store.write_section(owner, loaded.current.as_ref())?;
        loaded.stored = loaded.current.clone();
        Ok(true)
    }

    /// Drops `owner`'s poll section (written through at once) and the clocks of it and of
    /// the pull requests nested in it.
    pub fn forget(&mut self, owner: &WorkItemRef) -> Result<(), StoreError> {
        let nested: Vec<WorkItemRef> = self
            .ledger(owner)?
            .map(|l| l.pull_requests.keys().cloned().collect())
            .unwrap_or_default();
        self.store.write_section::<PollLedger>(owner, None)?;
        self.loaded.insert(owner.clone(), Loaded { stored: None, current: None });
        for item in nested.iter().chain([owner]) {
            self.clock_changes.insert(item.clone(), None);
        }
        Ok(())
    }

    /// Drops the ledger of pull request `pr` nested in `owner`'s poll section (written
    /// through at once), and its clocks.
    pub fn drop_nested(&mut self, owner: &WorkItemRef, pr: &WorkItemRef) -> Result<(), StoreError> {
        if let Some(mut ledger) = self.ledger(owner)?.cloned()
            && ledger.pull_requests.remove(pr).is_some()
        {
            self.put(owner, ledger)?;
            self.flush(owner)?;
        }
        self.clock_changes.insert(pr.clone(), None);
        Ok(())
    }

    /// The clocks of `item`: the local file's, else (an older version's record) the ones
    /// still inside the record. An unparsable stamp reads as none.
    pub fn clock(&self, item: &WorkItemRef) -> PollClock {
        if let Some(change) = self.clock_changes.get(item) {
            return change.unwrap_or_default();
        }
        if let Some(clock) = self.clocks.clocks.get(item) {
            return *clock;
        }
        self.stale_clock(item)
    }

    fn stale_clock(&self, item: &WorkItemRef) -> PollClock {
        let Ok(Some(record)) = self.store.load_portable_record(item) else {
            return PollClock::default();
        };
        let poll = record.get("poll");
        let stamp = |key: &str| poll?.get(key)?.as_str().and_then(parse_stamp);
        PollClock {
            last_polled_at: stamp("lastPolledAt"),
            closure_checked_at: stamp("closureCheckedAt"),
        }
    }

    /// Whether `item`'s record still carries a `lastPolledAt` an older version wrote there
    /// (the reference's records have no title): its thread was polled before. A record
    /// that cannot be read is an error, never "not polled" (which would re-baseline it).
    pub fn legacy_polled(&self, item: &WorkItemRef) -> Result<bool, StoreError> {
        let record = self.store.load_portable_record(item)?;
        Ok(record
            .and_then(|record| record.get("poll").map(|poll| poll.get("lastPolledAt").is_some()))
            .unwrap_or(false))
    }

    /// `item` was listed at `now`.
    pub fn polled(&mut self, item: &WorkItemRef, now: Timestamp) {
        let mut clock = self.clock(item);
        clock.last_polled_at = Some(now);
        self.clock_changes.insert(item.clone(), Some(clock));
    }

    /// `item` was asked about at `now` and not found closed.
    pub fn closure_checked(&mut self, item: &WorkItemRef, now: Timestamp) {
        let mut clock = self.clock(item);
        clock.closure_checked_at = Some(now);
        self.clock_changes.insert(item.clone(), Some(clock));
    }

    /// Writes this cycle's clock changes in one read-modify-write (skipped when none).
    pub fn save_clocks(&mut self) -> Result<(), StoreError> {
        if self.clock_changes.is_empty() {
            return Ok(());
        }
        let changes = std::mem::take(&mut self.clock_changes);
        self.store.update_poll_clocks(|clocks| {
            for (item, change) in &changes {
                match change {
                    Some(clock) => clocks.clocks.insert(item.clone(), *clock),
                    None => clocks.clocks.remove(item),
                };
            }
        })?;
        for (item, change) in changes {
            match change {
                Some(clock) => self.clocks.clocks.insert(item, clock),
                None => self.clocks.clocks.remove(&item),
            };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use loop_store::{EventLog, StateLayout};

    use super::*;

    /// A full or read-only disk, for one record: its path is taken by a directory, so
    /// writing the record fails while everything else works.
    #[test]
    fn a_ledger_that_could_not_be_written_is_carried_on_from_not_taken_again() {
        let dir = tempfile::tempdir().unwrap();
        let layout = StateLayout::new(dir.path());
        let store = StateStore::new(layout.clone(), EventLog::new(layout.event_log(), "poll"));
        let item: WorkItemRef = "github:octo/app#7".parse().unwrap();
        let mut ledgers = Ledgers::open(&store, Unrecorded::new());
        assert!(ledgers.ledger(&item).unwrap().is_none(), "first sight");
        let baselined = PollLedger { title: Some("baselined".into()), ..PollLedger::default() };
        ledgers.put(&item, baselined.clone()).unwrap();
        let record = layout.portable_record(&item);
        std::fs::create_dir_all(record.join("in-the-way")).unwrap();
        assert!(ledgers.flush(&item).is_err(), "the disk refuses it");
        let carried = ledgers.unrecorded();

        std::fs::remove_dir_all(&record).unwrap();
        let mut ledgers = Ledgers::open(&store, carried);
        assert_eq!(ledgers.ledger(&item).unwrap(), Some(&baselined), "not a first sight again");
        assert!(ledgers.flush(&item).unwrap(), "written once the disk takes it");
        assert!(ledgers.unrecorded().is_empty());
        let mut ledgers = Ledgers::open(&store, Unrecorded::new());
        assert_eq!(ledgers.ledger(&item).unwrap(), Some(&baselined));
    }
}

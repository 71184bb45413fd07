//! The state root: every file the-loop writes under `state.root`.
//!
//! Portable work-item records, machine-local session records, poll clocks, the event log,
//! pidfile locks and the poller heartbeat (SPEC §4). Every JSON file is written atomically;
//! a file that does not parse is quarantined and reads as absent, never a crash.
//!
//! This crate decides nothing: it stores and loads what loop-core's rules produce. It does
//! not read the config file or the environment: callers hand it a [`StateLayout`] built
//! from plain values. Its calls block (file IO, `flock`); async callers use
//! `spawn_blocking`.
//!
//! Layout:
//! - [`layout`]: every path under the root; [`classification`]: the kind of every key.
//! - `json_file` (crate-private): atomic writes ([`write_atomically`] is public), quarantine.
//! - `local`: session records (`local/<slug>.json`); `live`: the live view of them, what
//!   decisions read.
//! - [`portable`]: work-item records (`portable/<slug>.json`) and their sections;
//!   [`index`] derives `portable/index.json`; [`listing`] keeps them all as one listing;
//!   `legacy` reads old layouts forward.
//! - `poll_clocks`: `local/poll-clocks.json`; [`poll_cache`]: `local/poll-cache.json`.
//! - [`agent_spool`]: what agents' hooks report, and the answers written for them;
//!   [`agent_states`]: what the watcher last saw them doing (`local/agent/`).
//! - [`delivery`]: the dispatcher's delivery ledger (`local/deliveries.log`).
//! - [`pidfile`]: single-instance pidfile locks; [`heartbeat`]: `poll-status.json`.
//! - [`inbox`]: the journal of acknowledged webhook deliveries (`local/inbox/`).
//! - [`event_log`]: the append-only event log, its reader and filters.
//! - `watch`: the inotify watch telling `live` and `index` which record files changed.
//! - [`spec_state`]: a work item's spec folder in its checkout (`work-item-state.json`,
//!   the artifacts its gates read) — the one file kept outside `state.root`.

pub mod agent_spool;
pub mod agent_states;
pub mod classification;
pub mod delivery;
pub mod error;
pub mod event_log;
pub mod heartbeat;
pub mod inbox;
pub mod index;
mod json_file;
pub mod layout;
mod legacy;
pub mod listing;
mod live;
mod local;
mod lock;
pub mod pidfile;
pub mod poll_cache;
mod poll_clocks;
pub mod portable;
pub mod spec_state;
mod watch;

pub use delivery::{DeliveryLedger, Mark};
pub use error::StoreError;
pub use event_log::EventLog;
pub use json_file::{Written, write_atomically};
pub use layout::StateLayout;
pub use pidfile::{Holder, PidLock, lock_holder};
pub use portable::{ChannelBindings, LegacyGraph, Section, Slot};

/// One state root and the event log its store reports to. Cheap to clone.
#[derive(Debug, Clone)]
pub struct StateStore {
    layout: StateLayout,
    /// Where quarantines and legacy adoptions are reported.
    events: EventLog,
    /// Session records parsed by listings, shared by the store's clones.
    listed: std::sync::Arc<local::ListedRecords>,
    /// The portable records as last listed, likewise.
    listed_portable: std::sync::Arc<listing::ListedPortable>,
    /// The index entries last written, kept current (`index`), likewise.
    held_index: std::sync::Arc<index::HeldIndex>,
    /// The session records with a live endpoint, kept current (`live`), likewise.
    live: std::sync::Arc<live::LiveView>,
    /// What this store and its clones have read, for tests and metrics.
    reads: std::sync::Arc<Reads>,
}

/// How many record files (session and portable) and directory listings of records a
/// store and its clones have read since it was made: what a test counts to show a
/// delivery reads nothing of the history ([`StateStore::reads`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCounts {
    /// Record files opened and read (a file found unchanged by its `stat` is not).
    pub records: u64,
    /// Directory listings of `portable/` or the registry directory.
    pub listings: u64,
}

/// The counters behind [`ReadCounts`]; relaxed atomics, one add per read.
#[derive(Debug, Default)]
struct Reads {
    records: std::sync::atomic::AtomicU64,
    listings: std::sync::atomic::AtomicU64,
}

impl StateStore {
    pub fn new(layout: StateLayout, events: EventLog) -> Self {
        Self {
            layout,
            events,
            listed: std::sync::Arc::default(),
            listed_portable: std::sync::Arc::default(),
            held_index: std::sync::Arc::default(),
            live: std::sync::Arc::default(),
            reads: std::sync::Arc::default(),
        }
    }

    /// What this store and its clones have read so far.
    pub fn reads(&self) -> ReadCounts {
        use std::sync::atomic::Ordering::Relaxed;
        ReadCounts {
            records: self.reads.records.load(Relaxed),
            listings: self.reads.listings.load(Relaxed),
        }
    }

    /// Counts one record file read.
    fn count_record_read(&self) {
        self.reads.records.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Counts one listing of a records directory.
    fn count_listing(&self) {
        self.reads.listings.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Removes the temp files writers killed mid-write left in `portable/`, `local/` and
    /// the registry directory (see `json_file`); returns how many. For a service start.
    pub fn sweep_orphaned_temp_files(&self) -> usize {
        let layout = &self.layout;
        let mut dirs = vec![layout.portable_dir(), layout.local_dir()];
        if !dirs.iter().any(|dir| dir == layout.registry_dir()) {
            dirs.push(layout.registry_dir().to_owned());
        }
        dirs.iter().map(|dir| json_file::sweep_orphaned_temp_files(dir)).sum()
    }

    pub fn layout(&self) -> &StateLayout {
        &self.layout
    }

    pub fn events(&self) -> &EventLog {
        &self.events
    }

    /// The same store — its listings' caches included — reporting to `events` instead:
    /// one per part of a process (the receiver, the poller), so the session records are
    /// held in memory once, not once per part.
    pub fn reporting_to(&self, events: EventLog) -> Self {
        Self { events, ..self.clone() }
    }
}

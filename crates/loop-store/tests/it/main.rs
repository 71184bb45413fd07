//! loop-store's integration tests: one binary, one module per file kind.
//!
//! Tests that need a second *process* (lock contention, `kill -9` mid-write) re-run this
//! very binary as a child with `--exact child::act` and the role in an environment
//! variable; see [`child`].

mod child;
mod classification;
mod clocks;
mod event_log;
mod inbox;
mod live;
mod local;
mod pidfile;
mod portable;
mod spec_state;

use std::path::Path;

use loop_core::WorkItemRef;
use loop_store::{EventLog, StateLayout, StateStore};

/// A store over a fresh root inside `dir`, logging to the default event log.
pub fn store_in(dir: &Path) -> StateStore {
    let layout = StateLayout::new(dir.join("state"));
    let events = EventLog::new(layout.event_log(), "test");
    StateStore::new(layout, events)
}

pub fn item(text: &str) -> WorkItemRef {
    text.parse().expect("test refs are well-formed")
}

/// Every line of the store's event log, as text.
pub fn logged(store: &StateStore) -> String {
    std::fs::read_to_string(store.layout().event_log()).unwrap_or_default()
}

//! `eventLog` and `state`: where the-loop writes its event log and its records.

use std::path::PathBuf;

use serde::Serialize;

use crate::config::read::{Block, Section, optional_path};

/// `eventLog`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventLogConfig {
    pub enabled: bool,
    /// The JSONL file; `None`: `<state.root>/logs/events.jsonl`.
    pub path: Option<PathBuf>,
}

impl Section for EventLogConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || true),
            path: b.field_by("path", || None, optional_path),
        }
    }
}

/// `state`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateConfig {
    /// Root of all generated state; relative to the cwd; `~` is not expanded.
    pub root: PathBuf,
}

impl Section for StateConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { root: b.field("root", || PathBuf::from(".the-loop")) }
    }
}

default_from_nothing!(EventLogConfig, StateConfig);

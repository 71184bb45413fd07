//! Cleanup: the local teardown of one work item — every tmux session it has (PR
//! endpoints first, its own last: harness ended, then the session killed), every checkout
//! (its own and each PR endpoint's, keyed on the ref each serves), then its local session
//! record. Retention settings do not apply; portable records are never touched.
//!
//! Each step runs even when an earlier one failed; failures are collected, so a stuck
//! endpoint or a checkout that cannot be removed still lets the record go.

use std::time::Duration;

use loop_core::WorkItemRef;

use crate::registry::{Registry, RegistryError};
use crate::tmux::{Termination, Tmux};
use crate::workspace::Workspaces;

/// What was removed, in the order the reference reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Removed {
    /// At least one tmux session was killed.
    Tmux,
    /// At least one checkout was removed.
    Workspace,
    /// The local session record was deleted.
    Session,
}

/// The outcome of a cleanup.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Cleaned {
    pub removed: Vec<Removed>,
    /// The PR endpoints whose sessions or checkouts were handled.
    pub endpoints: Vec<WorkItemRef>,
    /// What failed, one message per failure.
    pub errors: Vec<String>,
}

impl Cleaned {
    /// Whether there was anything to clean (removed, ended or failed).
    pub fn found(&self) -> bool {
        !self.removed.is_empty() || !self.endpoints.is_empty() || !self.errors.is_empty()
    }

    fn note(&mut self, removed: Removed) {
        if !self.removed.contains(&removed) {
            self.removed.push(removed);
        }
    }
}

/// Removes `work_item`'s sessions, checkouts and local record. Works on closed records
/// and with no record at all (then only its own checkout, found by ref, is removed).
/// `workspaces` is `None` when checkouts are disabled.
pub fn cleanup(
    tmux: &Tmux,
    workspaces: Option<&Workspaces>,
    registry: &Registry,
    work_item: &WorkItemRef,
    grace: Duration,
) -> Result<Cleaned, RegistryError> {
    let mut cleaned = Cleaned::default();
    let record = registry.load(work_item)?;
    let endpoints: Vec<_> = record
        .as_ref()
        .map(|record| record.endpoints.iter().filter(|(served, _)| *served != work_item).collect())
        .unwrap_or_default();
    let own = record.as_ref().and_then(|record| record.own_endpoint());
    let sessions = endpoints
        .iter()
        .map(|(served, endpoint)| (*served, *endpoint))
        .chain(own.map(|own| (work_item, own)));
    for (served, endpoint) in sessions {
        if served != work_item {
            cleaned.endpoints.push(served.clone());
        }
        if endpoint.tmux_target.is_empty() {
            continue;
        }
        match tmux.terminate_harness(&endpoint.tmux_target, grace) {
            Ok(Termination::SessionMissing) => continue,
            Ok(_) => {}
            Err(err) => cleaned.errors.push(format!("{served}: {err}")),
        }
        match tmux.kill_session(&endpoint.tmux_target) {
            Ok(true) => cleaned.note(Removed::Tmux),
            Ok(false) => {}
            Err(err) => cleaned.errors.push(format!("{served}: {err}")),
        }
    }
    if let Some(workspaces) = workspaces {
        let served = endpoints.iter().map(|(served, _)| *served).chain([work_item]);
        for served in served {
            match workspaces.remove(served) {
                Ok(true) => cleaned.note(Removed::Workspace),
                Ok(false) => {}
                Err(err) => cleaned.errors.push(format!("{served}: {err}")),
            }
        }
    }
    if record.is_some() {
        registry.close(work_item)?;
        if registry.forget(work_item)? {
            cleaned.note(Removed::Session);
        }
    }
    Ok(cleaned)
}

//! Questions the dispatcher asks of the session records, answered from one snapshot of
//! the live ones: which live record owns a ref, what state its session is in, and which
//! endpoint an event goes to (reference §5.3, §5.7).
//!
//! Pure over the snapshot: reading the records is the caller's. Closed records are not
//! in it (they are history, which grows); whether one exists is asked of
//! [`super::Lookup::session_recorded`] for the item an event names.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::WorkItemRef;
use crate::config::SessionPerPr;
use crate::control::SessionState;
use crate::record::{Endpoint, EndpointStatus, LocalRecord};

/// The live session records of this machine, as read once for one decision.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The records holding a live endpoint (active or paused, their own or a pull
    /// request's), sorted by ref; shared with the store's live view, uncopied.
    pub records: Vec<Arc<LocalRecord>>,
    /// The work items whose session is being spawned (a spawn queued or running): their
    /// records are about to exist.
    pub spawning: BTreeSet<WorkItemRef>,
    /// The work items whose worker holds deliveries ahead of what is planned now (queued
    /// or being carried out): a close waits for them.
    pub busy: BTreeSet<WorkItemRef>,
    /// The tmux sessions whose agent is seen exited (docs/agent-states.md): a command
    /// that brings a session back restarts them.
    pub exited: BTreeSet<String>,
}

impl Snapshot {
    /// The records whose own session is live (active or paused).
    pub fn live(&self) -> impl Iterator<Item = &LocalRecord> {
        self.records
            .iter()
            .map(Arc::as_ref)
            .filter(|r| r.own_endpoint().is_some_and(Endpoint::is_live))
    }

    /// The live record owning `item`: its own record, else one holding it as a pull
    /// request (additive resolution: a ref with its own record never resolves elsewhere).
    pub fn owner(&self, item: &WorkItemRef) -> Option<&LocalRecord> {
        self.live()
            .find(|r| &r.work_item == item)
            .or_else(|| self.live().find(|r| r.endpoints.contains_key(item)))
    }

    /// The live records owning any of `items`, each once, in the order first reached.
    pub fn matches<'a>(&'a self, items: &[WorkItemRef]) -> Vec<&'a LocalRecord> {
        let mut found: Vec<&LocalRecord> = Vec::new();
        for item in items {
            let own = self.live().find(|r| &r.work_item == item);
            let owners: Vec<&LocalRecord> = match own {
                Some(record) => vec![record],
                None => self.live().filter(|r| r.endpoints.contains_key(item)).collect(),
            };
            for record in owners {
                if !found.iter().any(|f| f.work_item == record.work_item) {
                    found.push(record);
                }
            }
        }
        found
    }

    /// Whether a live record owns any of `items` (the existence check is then skipped).
    pub fn owns_any(&self, items: &[WorkItemRef]) -> bool {
        items.iter().any(|item| self.owner(item).is_some())
    }

    /// Every ref a live endpoint serves (active or paused), with the work item whose
    /// record holds it and that endpoint's state.
    pub fn serving(&self) -> HashMap<WorkItemRef, (WorkItemRef, SessionState)> {
        let mut serving = HashMap::new();
        for record in &self.records {
            for (served, endpoint) in &record.endpoints {
                let state = match endpoint.status {
                    EndpointStatus::Active => SessionState::Active,
                    EndpointStatus::Paused => SessionState::Paused,
                    EndpointStatus::Closed => continue,
                };
                serving.insert(served.clone(), (record.work_item.clone(), state));
            }
        }
        serving
    }

    /// The first of `items` whose session is being spawned and that no live record owns
    /// yet: an event about it waits for that spawn, then is planned again, so it is never
    /// dropped for want of a record about to exist.
    pub fn spawn_awaited<'a>(&self, items: &'a [WorkItemRef]) -> Option<&'a WorkItemRef> {
        items.iter().find(|item| self.spawning.contains(*item) && self.owner(item).is_none())
    }

    /// The live record that a close of `closed` ends something of (its own session, or
    /// `closed` as one of its pull requests) while that record's worker still holds
    /// deliveries: they were accepted before the close, so the close waits for them.
    pub fn close_awaits_queue(&self, closed: &WorkItemRef) -> Option<&WorkItemRef> {
        self.live()
            .filter(|r| &r.work_item == closed || r.endpoints.contains_key(closed))
            .map(|r| &r.work_item)
            .find(|item| self.busy.contains(*item))
    }

    /// Whether the agent of `item`'s own live session exited.
    pub fn agent_exited(&self, item: &WorkItemRef) -> bool {
        let own =
            self.owner(item).filter(|r| &r.work_item == item).and_then(LocalRecord::own_endpoint);
        own.is_some_and(|own| self.exited.contains(&own.tmux_target))
    }
}

/// The state of a record's own session.
pub fn session_state(record: Option<&LocalRecord>) -> SessionState {
    match record.and_then(LocalRecord::own_endpoint).map(|e| e.status) {
        Some(EndpointStatus::Active) => SessionState::Active,
        Some(EndpointStatus::Paused) => SessionState::Paused,
        Some(EndpointStatus::Closed) | None => SessionState::None,
    }
}

/// Whether an event about `pull_request` gets a session of its own rather than the work
/// item's (reference §5.7): never under `never`; for a PR in the work item's own
/// repository only under `always`; otherwise yes.
pub fn wants_own_session(
    mode: SessionPerPr,
    work_item: &WorkItemRef,
    pull_request: &WorkItemRef,
) -> bool {
    match mode {
        SessionPerPr::Never => false,
        SessionPerPr::Always => true,
        SessionPerPr::CrossRepository => !pull_request.repo().same_repository(work_item.repo()),
    }
}

/// The endpoint an event goes to: the PR's own session when the mode gives it one and it
/// has been spawned and is live, else the record's own. `None` when neither exists.
pub fn endpoint_for<'a>(
    record: &'a LocalRecord,
    pull_request: Option<&WorkItemRef>,
    mode: SessionPerPr,
) -> (&'a WorkItemRef, Option<&'a Endpoint>) {
    if let Some(pr) = pull_request
        && pr != &record.work_item
        && wants_own_session(mode, &record.work_item, pr)
        && let Some((key, endpoint)) = record.endpoints.get_key_value(pr)
        && endpoint.is_live()
        && !endpoint.tmux_target.is_empty()
    {
        return (key, Some(endpoint));
    }
    (&record.work_item, record.own_endpoint())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use jiff::Timestamp;

    use super::*;

    fn r(s: &str) -> WorkItemRef {
        s.parse().expect("a valid ref")
    }

    fn endpoint(status: EndpointStatus, target: &str) -> Endpoint {
        Endpoint {
            tmux_target: target.into(),
            status,
            ..Endpoint::new("h", PathBuf::from("/w"), Timestamp::UNIX_EPOCH)
        }
    }

    fn record(item: &str, status: EndpointStatus, prs: &[&str]) -> Arc<LocalRecord> {
        let mut record = LocalRecord::new(r(item));
        record.endpoints.insert(r(item), endpoint(status, "loop-x"));
        for pr in prs {
            record.endpoints.insert(r(pr), endpoint(EndpointStatus::Active, ""));
        }
        Arc::new(record)
    }

    #[test]
    fn a_recorded_binding_finds_the_owner_and_a_closed_record_owns_nothing() {
        let registry = Snapshot {
            records: vec![
                record("github:o/a#15", EndpointStatus::Active, &["github:o/a#16"]),
                record("github:o/a#20", EndpointStatus::Closed, &["github:o/a#21"]),
            ],
            ..Snapshot::default()
        };
        assert_eq!(registry.owner(&r("github:o/a#16")).map(|r| r.work_item.number()), Some(15));
        assert!(registry.owner(&r("github:o/a#21")).is_none());
        assert!(registry.owner(&r("github:o/a#20")).is_none());
    }

    #[test]
    fn a_re_link_delivers_to_both_records() {
        let registry = Snapshot {
            records: vec![
                record("github:o/a#15", EndpointStatus::Active, &["github:o/a#16"]),
                record("github:o/a#17", EndpointStatus::Active, &[]),
            ],
            ..Snapshot::default()
        };
        let matched = registry.matches(&[r("github:o/a#17"), r("github:o/a#16")]);
        let numbers: Vec<u64> = matched.iter().map(|r| r.work_item.number()).collect();
        assert_eq!(numbers, [17, 15]);
    }

    #[test]
    fn a_spawn_is_awaited_only_until_a_live_record_owns_the_item() {
        let spawning = BTreeSet::from([r("github:o/a#15")]);
        let mut registry = Snapshot { spawning, ..Snapshot::default() };
        let refs = [r("github:o/a#16"), r("github:o/a#15")];
        assert_eq!(registry.spawn_awaited(&refs), Some(&r("github:o/a#15")));
        registry.records.push(record("github:o/a#15", EndpointStatus::Active, &[]));
        assert_eq!(registry.spawn_awaited(&refs), None, "the spawn's record exists");
    }

    #[test]
    fn a_close_awaits_only_the_busy_worker_of_a_record_it_ends() {
        let mut registry = Snapshot {
            records: vec![
                record("github:o/a#15", EndpointStatus::Active, &["github:o/a#16"]),
                record("github:o/a#17", EndpointStatus::Active, &[]),
            ],
            busy: BTreeSet::from([r("github:o/a#15")]),
            ..Snapshot::default()
        };
        assert_eq!(registry.close_awaits_queue(&r("github:o/a#15")), Some(&r("github:o/a#15")));
        assert_eq!(registry.close_awaits_queue(&r("github:o/a#16")), Some(&r("github:o/a#15")));
        assert_eq!(registry.close_awaits_queue(&r("github:o/a#17")), None, "an idle worker");
        registry.busy.clear();
        assert_eq!(registry.close_awaits_queue(&r("github:o/a#15")), None);
    }

    #[test]
    fn a_same_repository_pr_never_gets_its_own_session_under_cross_repository() {
        let mut rec = Arc::unwrap_or_clone(record("github:o/a#15", EndpointStatus::Active, &[]));
        rec.endpoints.insert(r("github:o/a#16"), endpoint(EndpointStatus::Active, "loop-pr"));
        rec.endpoints.insert(r("github:o/b#3"), endpoint(EndpointStatus::Active, "loop-b"));
        let cross = SessionPerPr::CrossRepository;
        assert_eq!(endpoint_for(&rec, Some(&r("github:o/a#16")), cross).0, &r("github:o/a#15"));
        assert_eq!(endpoint_for(&rec, Some(&r("github:o/b#3")), cross).0, &r("github:o/b#3"));
        assert_eq!(
            endpoint_for(&rec, Some(&r("github:o/b#3")), SessionPerPr::Never).0,
            &r("github:o/a#15")
        );
        assert_eq!(
            endpoint_for(&rec, Some(&r("github:o/a#16")), SessionPerPr::Always).0,
            &r("github:o/a#16")
        );
    }
}

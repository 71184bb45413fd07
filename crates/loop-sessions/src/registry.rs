//! The session registry: the rules over the machine-local session record
//! (`local/<slug>.json`, [`LocalRecord`]) — one live session per work item, the statuses
//! active / paused / closed and their transitions, PR endpoints, capped recent
//! deliveries, and which session a ref routes to.
//!
//! The rules are plain functions on the record (`rules`, tested with tables); [`Registry`]
//! applies them to the stored file under its lock through loop-store, which owns the
//! file format, atomic writes and quarantine. A record's status is its own endpoint's;
//! PR endpoints keep theirs.
//!
//! Decisions on the reference's quirks (docs/sessions.md): registering over a closed
//! record keeps its PR endpoints (their checkouts and sessions still exist and cleanup
//! needs them); a respawn keeps `createdAt` and the recent deliveries.
//!
//! Every write is fsynced except [`Registry::touch`], the per-delivery stamp, which is
//! atomic against `kill -9` but not against an OS crash.
//!
//! A spawn's intent ([`Registry::begin_spawn`]) is a marker file beside the records,
//! `<registry dir>/<tmux target>.spawning`, written before the harness starts and removed
//! once the record is written: one found by a later spawn into the same target is a
//! spawn a `kill -9` cut short, whose harness (if any) is ours to replace
//! (docs/sessions.md, "A spawn cut short").
//!
//! A new session's announcement is owed the same way ([`Registry::owe_announcement`]):
//! `<target>.announcing` (the endpoint, its owner, the harness and when) is written before
//! the record and removed once the announcement was tried, so a kill between the two is
//! announced by the next process ([`Registry::owed_announcements`]).
//!
//! The registry stores handles only. It never spawns, pastes or kills.

use std::sync::Arc;

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::record::{AwaitingInput, Endpoint, EndpointStatus, LocalRecord};
use loop_store::{StateStore, StoreError};

/// Why a registry operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("`{work_item}` already has a live session")]
    AlreadyLive { work_item: WorkItemRef },
    #[error("`{work_item}` does not deliver itself; a PR endpoint must be another ref")]
    SelfLink { work_item: WorkItemRef },
    #[error("cannot {action} the session marker `{path}`")]
    Marker {
        action: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl loop_core::Hint for RegistryError {
    fn hint(&self) -> Option<String> {
        match self {
            Self::AlreadyLive { work_item } => Some(format!(
                "pass force to replace it, or close it first (`the-loop sessions close --work-item {work_item}`)"
            )),
            Self::Marker { .. } => {
                Some("check the permissions of the registry directory".to_owned())
            }
            _ => None,
        }
    }
}

/// The handles a spawn or respawn produced for one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointHandles {
    pub harness: String,
    pub harness_session_id: Option<String>,
    pub cwd: std::path::PathBuf,
    pub tmux_target: String,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub harness_args: Vec<String>,
}

impl EndpointHandles {
    /// A new active endpoint with these handles, created at `now`.
    pub fn into_endpoint(self, now: Timestamp) -> Endpoint {
        Endpoint {
            harness_session_id: self.harness_session_id,
            tmux_target: self.tmux_target,
            model: self.model,
            effort: self.effort,
            harness_args: self.harness_args,
            ..Endpoint::new(self.harness, self.cwd, now)
        }
    }
}

/// A routing answer: the record that owns the ref and the endpoint (by the ref it
/// serves) to deliver to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub owner: WorkItemRef,
    pub served: WorkItemRef,
    pub endpoint: Endpoint,
}

/// The registry's rules as functions on a record (`None`: no record).
pub mod rules {
    use super::*;

    /// Whether the record's own session is live (active or paused).
    pub fn is_live(record: &LocalRecord) -> bool {
        record.own_endpoint().is_some_and(Endpoint::is_live)
    }

    /// Registers `endpoint` as the work item's own session. Refused while a live one
    /// exists unless `force`; a closed record is replaced without force, keeping its PR
    /// endpoints. Returns whether a live session was replaced.
    pub fn register(
        slot: &mut Option<LocalRecord>,
        work_item: &WorkItemRef,
        endpoint: Endpoint,
        force: bool,
    ) -> Result<bool, RegistryError> {
        let live = slot.as_ref().is_some_and(is_live);
        if live && !force {
            return Err(RegistryError::AlreadyLive { work_item: work_item.clone() });
        }
        let record = slot.get_or_insert_with(|| LocalRecord::new(work_item.clone()));
        record.endpoints.insert(work_item.clone(), endpoint);
        Ok(live)
    }

    /// Moves the record's own session from one of `from` to `to`; `false` when it is not
    /// in one of `from` (nothing live, already paused, …).
    pub fn transition(
        slot: &mut Option<LocalRecord>,
        from: &[EndpointStatus],
        to: EndpointStatus,
    ) -> bool {
        let Some(record) = slot.as_mut() else { return false };
        let own = record.work_item.clone();
        match record.endpoints.get_mut(&own) {
            Some(endpoint) if from.contains(&endpoint.status) => {
                endpoint.status = to;
                true
            }
            _ => false,
        }
    }

    /// Adds an unspawned endpoint for `pr` to a live record (same harness and checkout
    /// as the work item's own until it gets a session of its own). `false` when the
    /// record is not live or `pr` is already listed (whatever its status).
    pub fn link_pull_request(
        slot: &mut Option<LocalRecord>,
        pr: &WorkItemRef,
        now: Timestamp,
    ) -> Result<bool, RegistryError> {
        let Some(record) = slot.as_mut().filter(|record| is_live(record)) else { return Ok(false) };
        if &record.work_item == pr {
            return Err(RegistryError::SelfLink { work_item: pr.clone() });
        }
        if record.endpoints.contains_key(pr) {
            return Ok(false);
        }
        let own = record.own_endpoint().expect("a live record has its own endpoint");
        let endpoint = Endpoint::new(own.harness.clone(), own.cwd.clone(), now);
        record.endpoints.insert(pr.clone(), endpoint);
        Ok(true)
    }

    /// Writes the handles of `served`'s (re)spawned session into a live record: a new
    /// endpoint is created at `now`; an existing one keeps `createdAt`, its recent
    /// deliveries and last event, and becomes active. `false` when the record is not live.
    pub fn save_handles(
        slot: &mut Option<LocalRecord>,
        served: &WorkItemRef,
        handles: EndpointHandles,
        now: Timestamp,
    ) -> bool {
        let Some(record) = slot.as_mut().filter(|record| is_live(record)) else { return false };
        match record.endpoints.get_mut(served) {
            Some(endpoint) => {
                endpoint.harness = handles.harness;
                endpoint.harness_session_id = handles.harness_session_id;
                endpoint.cwd = handles.cwd;
                endpoint.tmux_target = handles.tmux_target;
                endpoint.model = handles.model;
                endpoint.effort = handles.effort;
                endpoint.harness_args = handles.harness_args;
                endpoint.status = EndpointStatus::Active;
            }
            None => {
                record.endpoints.insert(served.clone(), handles.into_endpoint(now));
            }
        }
        true
    }

    /// Closes a live PR endpoint (never the record's own) and returns it, so the caller
    /// can settle its tmux session.
    pub fn close_endpoint(slot: &mut Option<LocalRecord>, pr: &WorkItemRef) -> Option<Endpoint> {
        let record = slot.as_mut().filter(|record| is_live(record))?;
        if &record.work_item == pr {
            return None;
        }
        let endpoint = record.endpoints.get_mut(pr).filter(|endpoint| endpoint.is_live())?;
        endpoint.status = EndpointStatus::Closed;
        Some(endpoint.clone())
    }

    /// Stamps an event on `served`'s endpoint of a live record and remembers the delivery
    /// id (capped per endpoint). `false` when there is nothing live to touch.
    pub fn touch(
        slot: &mut Option<LocalRecord>,
        served: &WorkItemRef,
        delivery_id: Option<&str>,
        now: Timestamp,
    ) -> bool {
        let Some(record) = slot.as_mut().filter(|record| is_live(record)) else { return false };
        let Some(endpoint) = record.endpoints.get_mut(served) else { return false };
        match delivery_id {
            Some(id) => endpoint.note_delivery(id, now),
            None => endpoint.last_event_at = Some(now),
        }
        true
    }

    /// Records the agent's open question on the live endpoint serving `served`; `false`
    /// when there is none.
    pub fn await_input(
        slot: &mut Option<LocalRecord>,
        served: &WorkItemRef,
        question: AwaitingInput,
    ) -> bool {
        let Some(record) = slot.as_mut().filter(|record| is_live(record)) else { return false };
        match record.endpoints.get_mut(served).filter(|endpoint| endpoint.is_live()) {
            Some(endpoint) => {
                endpoint.awaiting_input = Some(question);
                true
            }
            None => false,
        }
    }

    /// Records (or, with `None`, clears) why the graph cannot run on `owner`'s own
    /// endpoint, when it still works in `cwd`; whether anything changed.
    pub fn note_graph_warning(
        slot: &mut Option<LocalRecord>,
        owner: &WorkItemRef,
        cwd: &std::path::Path,
        warning: Option<&str>,
    ) -> bool {
        let Some(endpoint) = slot.as_mut().and_then(|record| record.endpoints.get_mut(owner))
        else {
            return false;
        };
        if endpoint.cwd != cwd || endpoint.graph_warning.as_deref() == warning {
            return false;
        }
        endpoint.graph_warning = warning.map(str::to_owned);
        true
    }

    /// Clears the open question of the endpoint serving `served`, returning it.
    pub fn answer(slot: &mut Option<LocalRecord>, served: &WorkItemRef) -> Option<AwaitingInput> {
        slot.as_mut()?.endpoints.get_mut(served)?.awaiting_input.take()
    }

    /// Whether an attach must be read-only: always for a closed session (nothing may be
    /// typed into a conversation the-loop has ended), as asked otherwise — a paused
    /// session stays writable (reference quirk §9.3, decided for the documented
    /// behaviour).
    pub fn attach_read_only(status: EndpointStatus, requested: bool) -> bool {
        requested || status == EndpointStatus::Closed
    }

    /// Which endpoint of `record` an event on `target` goes to. A closed record routes
    /// nowhere. With `split` (a PR session of its own is wanted) a live endpoint serving
    /// `target` is used; otherwise, or when that endpoint is missing or closed, the work
    /// item's own session.
    pub fn route(record: &LocalRecord, target: &WorkItemRef, split: bool) -> Option<Route> {
        if !is_live(record) {
            return None;
        }
        let owner = record.work_item.clone();
        if split
            && let Some(endpoint) =
                record.endpoints.get(target).filter(|endpoint| endpoint.is_live())
        {
            return Some(Route { owner, served: target.clone(), endpoint: endpoint.clone() });
        }
        let own = record.own_endpoint()?.clone();
        Some(Route { served: owner.clone(), owner, endpoint: own })
    }
}

/// The registry over a state root's local session records.
#[derive(Debug, Clone)]
pub struct Registry {
    store: StateStore,
}

impl Registry {
    pub fn new(store: StateStore) -> Self {
        Self { store }
    }

    /// The work item's record, closed or not.
    pub fn load(&self, work_item: &WorkItemRef) -> Result<Option<LocalRecord>, RegistryError> {
        Ok(self.store.load_local_record(work_item)?)
    }

    /// See [`rules::register`].
    pub fn register(
        &self,
        work_item: &WorkItemRef,
        endpoint: Endpoint,
        force: bool,
    ) -> Result<bool, RegistryError> {
        self.update(work_item, |slot| rules::register(slot, work_item, endpoint, force))?
    }

    /// active → paused; `false` when nothing live or already paused.
    pub fn pause(&self, work_item: &WorkItemRef) -> Result<bool, RegistryError> {
        self.update(work_item, |slot| {
            rules::transition(slot, &[EndpointStatus::Active], EndpointStatus::Paused)
        })
    }

    /// paused → active; `false` when not paused.
    pub fn resume(&self, work_item: &WorkItemRef) -> Result<bool, RegistryError> {
        self.update(work_item, |slot| {
            rules::transition(slot, &[EndpointStatus::Paused], EndpointStatus::Active)
        })
    }

    /// active/paused → closed; `false` when nothing live. PR endpoints keep their status.
    pub fn close(&self, work_item: &WorkItemRef) -> Result<bool, RegistryError> {
        self.update(work_item, |slot| {
            rules::transition(
                slot,
                &[EndpointStatus::Active, EndpointStatus::Paused],
                EndpointStatus::Closed,
            )
        })
    }

    /// Deletes the record; `false` when there was none.
    pub fn forget(&self, work_item: &WorkItemRef) -> Result<bool, RegistryError> {
        self.update(work_item, |slot| slot.take().is_some())
    }

    /// See [`rules::link_pull_request`].
    pub fn link_pull_request(
        &self,
        work_item: &WorkItemRef,
        pr: &WorkItemRef,
        now: Timestamp,
    ) -> Result<bool, RegistryError> {
        self.update(work_item, |slot| rules::link_pull_request(slot, pr, now))?
    }

    /// See [`rules::await_input`].
    pub fn await_input(
        &self,
        owner: &WorkItemRef,
        served: &WorkItemRef,
        question: AwaitingInput,
    ) -> Result<bool, RegistryError> {
        self.update(owner, |slot| rules::await_input(slot, served, question))
    }

    /// See [`rules::note_graph_warning`].
    pub fn note_graph_warning(
        &self,
        owner: &WorkItemRef,
        cwd: &std::path::Path,
        warning: Option<&str>,
    ) -> Result<bool, RegistryError> {
        self.update(owner, |slot| rules::note_graph_warning(slot, owner, cwd, warning))
    }

    /// See [`rules::answer`].
    pub fn answer(
        &self,
        owner: &WorkItemRef,
        served: &WorkItemRef,
    ) -> Result<Option<AwaitingInput>, RegistryError> {
        self.update(owner, |slot| rules::answer(slot, served))
    }

    /// See [`rules::save_handles`].
    pub fn save_handles(
        &self,
        owner: &WorkItemRef,
        served: &WorkItemRef,
        handles: EndpointHandles,
        now: Timestamp,
    ) -> Result<bool, RegistryError> {
        self.update(owner, |slot| rules::save_handles(slot, served, handles, now))
    }

    /// See [`rules::close_endpoint`].
    pub fn close_endpoint(
        &self,
        owner: &WorkItemRef,
        pr: &WorkItemRef,
    ) -> Result<Option<Endpoint>, RegistryError> {
        self.update(owner, |slot| rules::close_endpoint(slot, pr))
    }

    /// See [`rules::touch`]. The stamp is the done-mark of a paste, written on the
    /// dispatch hot path without fsync: atomic against `kill -9`, lost (the last few) on
    /// an OS crash (docs/dispatcher.md, "Durability").
    pub fn touch(
        &self,
        owner: &WorkItemRef,
        served: &WorkItemRef,
        delivery_id: Option<&str>,
        now: Timestamp,
    ) -> Result<bool, RegistryError> {
        let touched = self.store.update_local_record_unsynced(owner, |slot| {
            rules::touch(slot, served, delivery_id, now)
        })?;
        Ok(touched.0)
    }

    /// The live record owning `target`: its own (one file read), else the live record
    /// listing it as an endpoint (from the store's live view: closed records are not
    /// read).
    pub fn record_owning(
        &self,
        target: &WorkItemRef,
    ) -> Result<Option<LocalRecord>, RegistryError> {
        if let Some(record) = self.load(target)?.filter(rules::is_live) {
            return Ok(Some(record));
        }
        Ok(self
            .store
            .live_records()?
            .into_iter()
            .find(|record| rules::is_live(record) && record.endpoints.contains_key(target))
            .map(Arc::unwrap_or_clone))
    }

    /// Where an event on `target` goes (see [`rules::route`]); `None`: no live session.
    pub fn route(&self, target: &WorkItemRef, split: bool) -> Result<Option<Route>, RegistryError> {
        Ok(self.record_owning(target)?.and_then(|record| rules::route(&record, target, split)))
    }

    /// Records the intent to spawn into tmux session `target`, before its harness starts.
    /// `true` when an intent for `target` was already there: an earlier spawn was cut
    /// short after it may have started its harness and before it wrote its record (a
    /// kill; or a spawn that failed with its harness possibly running). Survives `kill -9`
    /// (not fsynced: after an OS crash no harness survives either).
    pub fn begin_spawn(&self, target: &str) -> Result<bool, RegistryError> {
        let path = self.spawn_marker(target);
        let error = |action| {
            let path = path.clone();
            move |source| RegistryError::Marker { action, path, source }
        };
        std::fs::create_dir_all(self.store.layout().registry_dir()).map_err(error("create"))?;
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(_) => Ok(false),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(true),
            Err(err) => Err(error("create")(err)),
        }
    }

    /// Removes the intent to spawn into `target`: the record is written, or the spawn
    /// failed without starting a harness of its own. Idempotent.
    pub fn end_spawn(&self, target: &str) -> Result<(), RegistryError> {
        remove_marker(self.spawn_marker(target))
    }

    /// Records that the session spawned into `owed.tmux_target` is owed its announcement,
    /// before its record is written. Survives `kill -9`.
    pub fn owe_announcement(&self, owed: &OwedAnnouncement) -> Result<(), RegistryError> {
        let path = self.marker(&owed.tmux_target, ANNOUNCING);
        let error = |source| RegistryError::Marker { action: "write", path: path.clone(), source };
        std::fs::create_dir_all(self.store.layout().registry_dir()).map_err(error)?;
        let bytes = serde_json::to_vec(&serde_json::json!({
            "workItem": owed.work_item.to_string(),
            "owner": owed.owner.to_string(),
            "harness": owed.harness,
            "tmuxTarget": owed.tmux_target,
            "owedAt": owed.owed_at.to_string(),
        }))
        .map_err(|err| error(err.into()))?;
        loop_store::write_atomically(&path, &bytes, 0o600)?;
        Ok(())
    }

    /// The announcement owed for `target` was tried (posted, refused or failed). Idempotent.
    pub fn settle_announcement(&self, target: &str) -> Result<(), RegistryError> {
        remove_marker(self.marker(target, ANNOUNCING))
    }

    /// The announcements a previous process owed and did not settle. A marker that does
    /// not parse is removed (it can only be a torn write of one whose record never
    /// followed).
    pub fn owed_announcements(&self) -> Result<Vec<OwedAnnouncement>, RegistryError> {
        let dir = self.store.layout().registry_dir();
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(RegistryError::Marker { action: "list", path: dir.to_owned(), source });
            }
        };
        let mut owed = Vec::new();
        for path in entries.flatten().map(|entry| entry.path()) {
            if path.extension().and_then(|e| e.to_str()) != Some(ANNOUNCING) {
                continue;
            }
            match std::fs::read(&path).ok().as_deref().and_then(OwedAnnouncement::parse) {
                Some(announcement) => owed.push(announcement),
                None => remove_marker(path)?,
            }
        }
        Ok(owed)
    }

    /// `<registry dir>/<target>.spawning`.
    fn spawn_marker(&self, target: &str) -> std::path::PathBuf {
        self.marker(target, "spawning")
    }

    /// `<registry dir>/<target>.<kind>`; a character a file name cannot hold safely
    /// becomes `_` (tmux targets are `loop-…` names, so none does in practice).
    fn marker(&self, target: &str, kind: &str) -> std::path::PathBuf {
        let name: String = target
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') { c } else { '_' })
            .collect();
        self.store.layout().registry_dir().join(format!("{name}.{kind}"))
    }

    fn update<R>(
        &self,
        work_item: &WorkItemRef,
        f: impl FnOnce(&mut Option<LocalRecord>) -> R,
    ) -> Result<R, RegistryError> {
        Ok(self.store.update_local_record(work_item, f)?.0)
    }
}

/// The extension of an owed announcement's marker.
const ANNOUNCING: &str = "announcing";

/// A new session's announcement that is owed until it was tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwedAnnouncement {
    /// The endpoint the session serves (the work item, or one of its pull requests).
    pub work_item: WorkItemRef,
    /// The record holding the endpoint.
    pub owner: WorkItemRef,
    pub harness: String,
    pub tmux_target: String,
    pub owed_at: Timestamp,
}

impl OwedAnnouncement {
    fn parse(bytes: &[u8]) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        let text = |key: &str| value.get(key)?.as_str();
        Some(Self {
            work_item: text("workItem")?.parse().ok()?,
            owner: text("owner")?.parse().ok()?,
            harness: text("harness")?.to_owned(),
            tmux_target: text("tmuxTarget")?.to_owned(),
            owed_at: text("owedAt")?.parse().ok()?,
        })
    }
}

fn remove_marker(path: std::path::PathBuf) -> Result<(), RegistryError> {
    match std::fs::remove_file(&path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            Err(RegistryError::Marker { action: "remove", path, source: err })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::rules::*;
    use super::*;

    fn r(s: &str) -> WorkItemRef {
        s.parse().unwrap()
    }

    fn endpoint(status: EndpointStatus) -> Endpoint {
        Endpoint {
            harness_session_id: Some("u-1".into()),
            tmux_target: "loop-github-octo-app-15".into(),
            status,
            ..Endpoint::new("claude", PathBuf::from("/w/item"), Timestamp::UNIX_EPOCH)
        }
    }

    fn record_with(status: EndpointStatus) -> Option<LocalRecord> {
        let mut slot = None;
        register(&mut slot, &r("github:octo/app#15"), endpoint(status), false).unwrap();
        slot
    }

    fn later() -> Timestamp {
        Timestamp::from_second(1_000).unwrap()
    }

    #[test]
    fn a_second_registration_of_a_live_item_is_refused_unless_forced() {
        for status in [EndpointStatus::Active, EndpointStatus::Paused] {
            let mut slot = record_with(status);
            let err = register(
                &mut slot,
                &r("github:octo/app#15"),
                endpoint(EndpointStatus::Active),
                false,
            );
            assert!(matches!(err, Err(RegistryError::AlreadyLive { .. })), "{status:?}");
            assert!(
                register(
                    &mut slot,
                    &r("github:octo/app#15"),
                    endpoint(EndpointStatus::Active),
                    true
                )
                .unwrap()
            );
        }
    }

    #[test]
    fn re_registering_after_close_needs_no_force_and_keeps_pr_endpoints() {
        let mut slot = record_with(EndpointStatus::Active);
        link_pull_request(&mut slot, &r("github:octo/app#16"), later()).unwrap();
        assert!(transition(&mut slot, &[EndpointStatus::Active], EndpointStatus::Closed));
        let replaced =
            register(&mut slot, &r("github:octo/app#15"), endpoint(EndpointStatus::Active), false)
                .unwrap();
        assert!(!replaced);
        assert!(slot.unwrap().endpoints.contains_key(&r("github:octo/app#16")));
    }

    #[test]
    fn status_transitions_follow_the_table() {
        use EndpointStatus::*;
        let pause = |slot: &mut Option<LocalRecord>| transition(slot, &[Active], Paused);
        let resume = |slot: &mut Option<LocalRecord>| transition(slot, &[Paused], Active);
        let close = |slot: &mut Option<LocalRecord>| transition(slot, &[Active, Paused], Closed);
        let mut slot = record_with(Active);
        assert!(!resume(&mut slot), "resuming an active session is a no-op");
        assert!(pause(&mut slot));
        assert!(!pause(&mut slot), "pausing twice is a no-op");
        assert!(close(&mut slot), "a paused session can be closed");
        assert!(!close(&mut slot), "closing twice is a no-op");
        assert!(!pause(&mut None), "nothing to pause");
    }

    #[test]
    fn linking_a_pr_adds_an_unspawned_endpoint_once() {
        let mut slot = record_with(EndpointStatus::Active);
        let pr = r("github:octo/lib#7");
        assert!(link_pull_request(&mut slot, &pr, later()).unwrap());
        assert!(!link_pull_request(&mut slot, &pr, later()).unwrap(), "already linked");
        let record = slot.clone().unwrap();
        let linked = &record.endpoints[&pr];
        assert_eq!((linked.harness_session_id.as_deref(), linked.tmux_target.as_str()), (None, ""));
        assert_eq!(linked.cwd, PathBuf::from("/w/item"));
        assert!(matches!(
            link_pull_request(&mut slot, &r("github:octo/app#15"), later()),
            Err(RegistryError::SelfLink { .. })
        ));
        assert!(!link_pull_request(&mut None, &pr, later()).unwrap(), "no record, nothing linked");
    }

    #[test]
    fn closing_an_endpoint_never_closes_the_record_itself() {
        let mut slot = record_with(EndpointStatus::Active);
        let pr = r("github:octo/app#16");
        link_pull_request(&mut slot, &pr, later()).unwrap();
        assert!(close_endpoint(&mut slot, &r("github:octo/app#15")).is_none());
        assert_eq!(close_endpoint(&mut slot, &pr).map(|e| e.status), Some(EndpointStatus::Closed));
        assert!(close_endpoint(&mut slot, &pr).is_none(), "already closed");
        assert!(is_live(slot.as_ref().unwrap()));
    }

    #[test]
    fn recent_deliveries_are_kept_per_endpoint() {
        let mut slot = record_with(EndpointStatus::Active);
        let (item, pr) = (r("github:octo/app#15"), r("github:octo/app#16"));
        link_pull_request(&mut slot, &pr, later()).unwrap();
        assert!(touch(&mut slot, &pr, Some("d1"), later()));
        let record = slot.clone().unwrap();
        assert!(record.endpoints[&pr].has_delivered("d1"));
        assert!(!record.endpoints[&item].has_delivered("d1"));
        assert_eq!(record.endpoints[&pr].last_event_at, Some(later()));
        assert!(
            !touch(&mut slot, &r("github:octo/app#99"), Some("d2"), later()),
            "no such endpoint"
        );
        transition(&mut slot, &[EndpointStatus::Active], EndpointStatus::Closed);
        assert!(!touch(&mut slot, &item, Some("d3"), later()), "a closed record is not touched");
    }

    #[test]
    fn a_respawn_keeps_created_at_and_recent_deliveries() {
        let mut slot = record_with(EndpointStatus::Active);
        let item = r("github:octo/app#15");
        touch(&mut slot, &item, Some("d1"), later());
        let handles = EndpointHandles {
            harness: "claude".into(),
            harness_session_id: Some("u-2".into()),
            cwd: PathBuf::from("/w/item"),
            tmux_target: "loop-github-octo-app-15".into(),
            model: Some("opus".into()),
            effort: None,
            harness_args: vec!["--x".into()],
        };
        assert!(save_handles(&mut slot, &item, handles, later()));
        let own = slot.unwrap().own_endpoint().unwrap().clone();
        assert_eq!(own.created_at, Timestamp::UNIX_EPOCH);
        assert_eq!(own.harness_session_id.as_deref(), Some("u-2"));
        assert_eq!(own.recent_deliveries, ["d1"]);
        assert_eq!(own.model.as_deref(), Some("opus"));
    }

    #[test]
    fn attach_is_forced_read_only_only_for_a_closed_session() {
        use EndpointStatus::*;
        let table = [
            (Active, false, false),
            (Active, true, true),
            (Paused, false, false),
            (Paused, true, true),
            (Closed, false, true),
            (Closed, true, true),
        ];
        for (status, requested, expected) in table {
            assert_eq!(attach_read_only(status, requested), expected, "{status:?} {requested}");
        }
    }

    #[test]
    fn routing_collapses_onto_the_record_unless_split_and_ignores_closed_records() {
        let mut slot = record_with(EndpointStatus::Active);
        let (item, pr) = (r("github:octo/app#15"), r("github:octo/app#16"));
        link_pull_request(&mut slot, &pr, later()).unwrap();
        let record = slot.clone().unwrap();
        assert_eq!(route(&record, &pr, false).unwrap().served, item);
        assert_eq!(route(&record, &pr, true).unwrap().served, pr);
        close_endpoint(&mut slot, &pr);
        assert_eq!(
            route(slot.as_ref().unwrap(), &pr, true).unwrap().served,
            item,
            "closed endpoint falls back"
        );
        transition(&mut slot, &[EndpointStatus::Active], EndpointStatus::Closed);
        assert!(route(slot.as_ref().unwrap(), &pr, true).is_none());
        assert!(slot.unwrap().endpoints.contains_key(&pr), "endpoints survive closing the record");
    }

    #[test]
    fn a_spawn_intent_left_behind_is_reported_once_and_withdrawn_idempotently() {
        let dir = tempfile::tempdir().unwrap();
        let layout = loop_store::StateLayout::new(dir.path());
        let registry = Registry::new(StateStore::new(layout, loop_store::EventLog::disabled()));
        assert!(!registry.begin_spawn("loop-octo-app-1").unwrap(), "nothing left before");
        assert!(registry.begin_spawn("loop-octo-app-1").unwrap(), "a spawn cut short");
        assert!(!registry.begin_spawn("loop-octo-app-2").unwrap(), "per tmux target");
        registry.end_spawn("loop-octo-app-1").unwrap();
        registry.end_spawn("loop-octo-app-1").unwrap();
        assert!(!registry.begin_spawn("loop-octo-app-1").unwrap());
        assert!(dir.path().join("local/loop-octo-app-1.spawning").exists());
        assert!(!dir.path().join("local/x_y.spawning").exists());
        registry.begin_spawn("x/y").unwrap();
        assert!(dir.path().join("local/x_y.spawning").exists(), "never a path");
    }

    #[test]
    fn an_owed_announcement_is_listed_until_settled_and_a_torn_one_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let layout = loop_store::StateLayout::new(dir.path());
        let registry = Registry::new(StateStore::new(layout, loop_store::EventLog::disabled()));
        assert_eq!(registry.owed_announcements().unwrap(), []);
        let owed = OwedAnnouncement {
            work_item: r("github:octo/app#16"),
            owner: r("github:octo/app#15"),
            harness: "claude".into(),
            tmux_target: "loop-github-octo-app-16".into(),
            owed_at: later(),
        };
        registry.owe_announcement(&owed).unwrap();
        std::fs::write(dir.path().join("local/loop-torn.announcing"), b"{\"workItem\":").unwrap();
        assert_eq!(registry.owed_announcements().unwrap(), std::slice::from_ref(&owed));
        assert!(!dir.path().join("local/loop-torn.announcing").exists(), "dropped");
        registry.settle_announcement(&owed.tmux_target).unwrap();
        registry.settle_announcement(&owed.tmux_target).unwrap();
        assert_eq!(registry.owed_announcements().unwrap(), []);
        assert_eq!(registry.store.list_local_records().unwrap(), [], "a marker is never a record");
    }
}

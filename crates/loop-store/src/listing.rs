//! Every portable record as one listing, kept between listings: the control plane's
//! `GET /api/v1/work-items` and "Needs you" ask for all of them on each change the board
//! sees, and re-reading and re-parsing 10 000 files each time was most of their cost
//! (docs/performance.md).
//!
//! As the session records' listing does (`local`), a listing stats every file in
//! `portable/` and re-reads only the ones whose identity changed (device, inode, size,
//! mtime, ctime). Every write of a record renames a new file into place (a new inode),
//! and so does `git pull`; an edit in place changes the times. A file is stat'ed before it is read, so a write racing a
//! listing is read again by the next one. What a file holds is read exactly as
//! [`StateStore::load_portable_record`] reads it (a malformed one is quarantined and left
//! out); sealed stubs are left out. When nothing changed, the last answer is handed out
//! again as it is (shared bytes, no copy per request).
//!
//! A record's `graph` is derived, never stored (seed 003 R4): for a work item with a
//! session on this machine, the section is rendered from the state file in that
//! session's checkout (`loop_core::graph::context::listing`), and that file is watched
//! the same way — stat'ed on each listing, read again only when its identity changed —
//! so a move of the pointer is in the next answer. A record with no such state file is
//! listed as stored (a legacy `graph` section, the reference's frozen selection, stays).
//! A live session whose checkout the graph cannot run in adds the record's
//! `graphWarning`: why, in words (the session record's, set by the dispatcher).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use loop_core::WorkItemRef;
use loop_core::graph::LoopName;
use loop_core::graph::state::{WorkItemState, spec_id};
use loop_core::record::Control;
use serde_json::{Map, Value};

use crate::local::FileIdentity;
use crate::portable::Section as _;
use crate::spec_state::SpecFolder;
use crate::{StateStore, StoreError, json_file};

/// The portable records as last listed, shared by a store's clones.
#[derive(Debug, Default)]
pub(crate) struct ListedPortable(Mutex<Known>);

/// What a listing answers.
#[derive(Debug, Default)]
pub struct Listing {
    /// Every record, sorted by ref, as one JSON array.
    pub json: Bytes,
    /// The records' `control` sections, in the same order.
    pub controls: Vec<(WorkItemRef, Control)>,
}

#[derive(Debug, Default)]
struct Known {
    files: HashMap<OsString, File>,
    /// The spec folders' root the graphs were read under (`None`: none read).
    spec_dir: Option<PathBuf>,
    /// Each work item's state file in its session's checkout, as last read.
    graphs: HashMap<WorkItemRef, Graph>,
    /// Why the graph cannot run, per work item whose live session recorded it.
    warnings: HashMap<WorkItemRef, String>,
    /// Each work item's `usage`, as the caller last derived it.
    usage: HashMap<WorkItemRef, Value>,
    last: Option<Arc<Listing>>,
}

/// Each work item's state file in its session's checkout, and the graph warnings its
/// live sessions recorded.
type Sources = (Vec<(WorkItemRef, PathBuf)>, HashMap<WorkItemRef, String>);

#[derive(Debug)]
struct Graph {
    path: PathBuf,
    /// `None`: no file there.
    identity: Option<FileIdentity>,
    /// The record's `graph` section; `None` when the file is absent, does not parse or
    /// names another work item.
    section: Option<Value>,
}

#[derive(Debug)]
struct File {
    identity: FileIdentity,
    /// `None`: not a record to list (sealed, unnamed, malformed).
    record: Option<Listed>,
}

#[derive(Debug)]
struct Listed {
    item: WorkItemRef,
    json: Vec<u8>,
    control: Option<Control>,
}

impl StateStore {
    /// Every portable record as [`StateStore::list_portable_records`] lists them, as one
    /// JSON array with their `control` sections: only files changed since the last
    /// listing are read. With `spec_dir` (`routing.graph.specDir`, when the graph is
    /// driven), a work item with a session here carries the `graph` section its state
    /// file in that session's checkout says. A work item in `usage` carries that value as
    /// its `usage` (its sessions' tokens and cost, derived by the caller from their
    /// transcripts); the answer is rendered again only when it differs from the last.
    pub fn list_portable(
        &self,
        spec_dir: Option<&Path>,
        usage: HashMap<WorkItemRef, Value>,
    ) -> Result<Arc<Listing>, StoreError> {
        let (sources, warnings) = match spec_dir {
            Some(spec_dir) => self.graph_sources(spec_dir)?,
            None => (Vec::new(), HashMap::new()),
        };
        let dir = self.layout.portable_dir();
        self.count_listing();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Arc::new(Listing {
                    json: Bytes::from_static(b"[]"),
                    controls: Vec::new(),
                }));
            }
            Err(err) => return Err(StoreError::io("list", &dir)(err)),
        };
        let mut known = self.listed_portable.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut present = HashSet::new();
        let mut changed = false;
        for entry in entries {
            let entry = entry.map_err(StoreError::io("list", &dir))?;
            let name = entry.file_name();
            if name.to_str().and_then(crate::layout::record_slug).is_none() {
                continue;
            }
            // Gone since the directory was read: the next listing will not see it.
            let Ok(meta) = entry.metadata() else { continue };
            let identity = FileIdentity::of(&meta);
            present.insert(name.clone());
            if known.files.get(&name).is_some_and(|file| file.identity == identity) {
                continue;
            }
            let record = self.listed(&entry.path())?;
            known.files.insert(name, File { identity, record });
            changed = true;
        }
        let before = known.files.len();
        known.files.retain(|name, _| present.contains(name));
        changed |= known.files.len() != before;
        changed |= graphs_changed(&mut known, spec_dir, sources);
        changed |= known.warnings != warnings;
        known.warnings = warnings;
        changed |= known.usage != usage;
        known.usage = usage;
        if let Some(last) = known.last.as_ref().filter(|_| !changed) {
            return Ok(Arc::clone(last));
        }
        let mut records: Vec<&Listed> =
            known.files.values().filter_map(|f| f.record.as_ref()).collect();
        records.sort_by(|a, b| a.item.cmp(&b.item));
        let mut json =
            Vec::with_capacity(records.iter().map(|r| r.json.len() + 1).sum::<usize>() + 2);
        json.push(b'[');
        for (n, record) in records.iter().enumerate() {
            if n > 0 {
                json.push(b',');
            }
            let derived = Derived {
                graph: known.graphs.get(&record.item).and_then(|g| g.section.as_ref()),
                graph_warning: known.warnings.get(&record.item),
                usage: known.usage.get(&record.item),
            };
            match derived {
                Derived { graph: None, graph_warning: None, usage: None } => {
                    json.extend_from_slice(&record.json);
                }
                _ => json.extend(with_derived(&record.json, &derived)),
            }
        }
        json.push(b']');
        let controls = records
            .iter()
            .filter_map(|r| r.control.clone().map(|control| (r.item.clone(), control)))
            .collect();
        let listing = Arc::new(Listing { json: Bytes::from(json), controls });
        known.last = Some(Arc::clone(&listing));
        Ok(listing)
    }

    /// Each work item with a session here, and where its state file is in the session's
    /// checkout.
    fn graph_sources(&self, spec_dir: &Path) -> Result<Sources, StoreError> {
        let records = self.list_local_records()?;
        let warnings = records
            .iter()
            .filter_map(|record| {
                let own = record.own_endpoint().filter(|own| own.is_live())?;
                Some((record.work_item.clone(), own.graph_warning.clone()?))
            })
            .collect();
        let sources = records
            .iter()
            .filter_map(|record| {
                let own = record.own_endpoint()?;
                let id = spec_id(record.work_item.number());
                let folder = SpecFolder::new(&own.cwd, spec_dir, &id).ok()?;
                Some((record.work_item.clone(), folder.state_path()))
            })
            .collect();
        Ok((sources, warnings))
    }

    /// The record in `path` as a listing shows it, read as its loader reads it.
    fn listed(&self, path: &Path) -> Result<Option<Listed>, StoreError> {
        self.count_record_read();
        let Some(bytes) = json_file::read_bytes(path)? else { return Ok(None) };
        // A file that does not even name its ref is the reader's to quarantine; it is
        // found again by its ref's slug only, so it is skipped here.
        let named = serde_json::from_slice::<Map<String, Value>>(&bytes)
            .ok()
            .and_then(|map| map.get("ref").and_then(Value::as_str).and_then(|r| r.parse().ok()));
        let Some(item) = named else { return Ok(None) };
        let Some(record) = self.load_portable_record(&item)? else { return Ok(None) };
        if crate::portable::is_sealed(Some(&record)) {
            return Ok(None);
        }
        let control = record
            .get(Control::KEY)
            .cloned()
            .and_then(|value| serde_json::from_value::<Control>(value).ok());
        let json = serde_json::to_vec(&record)
            .map_err(|err| StoreError::io("encode", path)(std::io::Error::other(err)))?;
        Ok(Some(Listed { item, json, control }))
    }
}

/// Brings `known`'s graphs up to `sources` under `spec_dir`, reading only the state files
/// whose identity changed; whether any section changed.
fn graphs_changed(
    known: &mut Known,
    spec_dir: Option<&Path>,
    sources: Vec<(WorkItemRef, PathBuf)>,
) -> bool {
    let mut changed = false;
    if known.spec_dir.as_deref() != spec_dir {
        known.spec_dir = spec_dir.map(Path::to_owned);
        changed |= !known.graphs.is_empty();
        known.graphs.clear();
    }
    let controls: HashMap<&WorkItemRef, Option<loop_core::control::Command>> = known
        .files
        .values()
        .filter_map(|f| f.record.as_ref())
        .map(|r| (&r.item, r.control.as_ref().map(|c| c.command)))
        .collect();
    let mut read = Vec::new();
    for (item, path) in &sources {
        let identity = std::fs::metadata(path).ok().map(|meta| FileIdentity::of(&meta));
        let same =
            known.graphs.get(item).is_some_and(|g| g.path == *path && g.identity == identity);
        if !same {
            let armed_by = controls.get(item).copied().flatten();
            let section = identity.and_then(|_| graph_section(item, path, armed_by));
            read.push((item.clone(), Graph { path: path.clone(), identity, section }));
        }
    }
    for (item, graph) in read {
        let before = known.graphs.get(&item).map(|g| g.section.clone());
        changed |= before.as_ref() != Some(&graph.section);
        known.graphs.insert(item, graph);
    }
    known.graphs.retain(|item, graph| {
        let kept = sources.iter().any(|(i, _)| i == item);
        changed |= !kept && graph.section.is_some();
        kept
    });
    changed
}

/// The `graph` section the state file at `path` gives `item`; `None` when it cannot be
/// read, does not parse, or names another work item (a listing never moves a file aside:
/// the graph's own readers do).
fn graph_section(
    item: &WorkItemRef,
    path: &Path,
    armed_by: Option<loop_core::control::Command>,
) -> Option<Value> {
    let bytes = std::fs::read(path).ok()?;
    let state: WorkItemState = json_file::parse_json(&bytes).ok()?;
    if state.work_item != item.to_string() || !state.entered() {
        return None;
    }
    let graph = LoopName::select(Some(&state.loop_name), armed_by);
    Some(loop_core::graph::context::listing(graph.graph(), &state, &spec_id(item.number())))
}

/// What a listing adds to a record, each when there is one.
struct Derived<'k> {
    graph: Option<&'k Value>,
    graph_warning: Option<&'k String>,
    usage: Option<&'k Value>,
}

/// `record` (one JSON object) with its `graph`, `graphWarning` and `usage` keys set to
/// what `derived` holds.
fn with_derived(record: &[u8], derived: &Derived<'_>) -> Vec<u8> {
    match serde_json::from_slice::<Map<String, Value>>(record) {
        Ok(mut map) => {
            if let Some(section) = derived.graph {
                map.insert("graph".to_owned(), section.clone());
            }
            if let Some(warning) = derived.graph_warning {
                map.insert("graphWarning".to_owned(), Value::from(warning.as_str()));
            }
            if let Some(usage) = derived.usage {
                map.insert("usage".to_owned(), usage.clone());
            }
            serde_json::to_vec(&map).unwrap_or_else(|_| record.to_vec())
        }
        Err(_) => record.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EventLog, StateLayout};

    fn control() -> Control {
        Control {
            command: loop_core::control::Command::Start,
            source: loop_core::record::ControlSource::Comment,
            actor: None,
            requested_at: jiff::Timestamp::UNIX_EPOCH,
            note: None,
            instance: None,
            delivery_id: None,
        }
    }

    #[test]
    fn a_listing_follows_writes_removals_and_files_edited_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(StateLayout::new(dir.path()), EventLog::disabled());
        let (a, b): (WorkItemRef, WorkItemRef) =
            ("github:octo/app#2".parse().unwrap(), "github:octo/app#10".parse().unwrap());
        assert_eq!(&store.list_portable(None, HashMap::new()).unwrap().json[..], b"[]");
        store.write_section(&b, Some(&control())).unwrap();
        store.write_section(&a, Some(&control())).unwrap();
        let first = store.list_portable(None, HashMap::new()).unwrap();
        let listed: Vec<Value> = serde_json::from_slice(&first.json).unwrap();
        let refs: Vec<&str> = listed.iter().filter_map(|r| r["ref"].as_str()).collect();
        assert_eq!(refs, [a.to_string(), b.to_string()], "sorted by ref");
        assert_eq!(first.controls.len(), 2);
        let again = store.list_portable(None, HashMap::new()).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "nothing changed: the same answer");

        store.write_section::<Control>(&a, None).unwrap();
        let after = store.list_portable(None, HashMap::new()).unwrap();
        let listed: Vec<Value> = serde_json::from_slice(&after.json).unwrap();
        assert_eq!(listed.len(), 1, "a record with no section left is gone: {listed:?}");

        // Edited in place (as an editor or a merge might).
        let path = store.layout.portable_record(&b);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"start\"", "\"resume\"")).unwrap();
        let edited = store.list_portable(None, HashMap::new()).unwrap();
        assert_eq!(edited.controls[0].1.command, loop_core::control::Command::Resume);
        let listed: Vec<Value> = serde_json::from_slice(&edited.json).unwrap();
        assert_eq!(listed[0]["control"]["command"], "resume");
    }

    #[test]
    fn a_records_usage_is_the_callers_and_a_change_of_it_renders_the_answer_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(StateLayout::new(dir.path()), EventLog::disabled());
        let (a, b): (WorkItemRef, WorkItemRef) =
            ("github:octo/app#1".parse().unwrap(), "github:octo/app#2".parse().unwrap());
        store.write_section(&a, Some(&control())).unwrap();
        store.write_section(&b, Some(&control())).unwrap();
        let usage = |cost: f64| HashMap::from([(a.clone(), serde_json::json!({"costUsd": cost}))]);
        let first = store.list_portable(None, usage(0.5)).unwrap();
        let listed: Vec<Value> = serde_json::from_slice(&first.json).unwrap();
        assert_eq!(listed[0]["usage"]["costUsd"], 0.5);
        assert!(listed[1].get("usage").is_none(), "no usage given: none listed");
        assert!(Arc::ptr_eq(&first, &store.list_portable(None, usage(0.5)).unwrap()));
        let grown = store.list_portable(None, usage(0.75)).unwrap();
        let listed: Vec<Value> = serde_json::from_slice(&grown.json).unwrap();
        assert_eq!(listed[0]["usage"]["costUsd"], 0.75);
    }

    #[test]
    fn a_records_graph_is_its_sessions_state_file_followed_as_the_pointer_moves() {
        use loop_core::record::{Endpoint, LocalRecord};
        let dir = tempfile::tempdir().unwrap();
        let store =
            StateStore::new(StateLayout::new(dir.path().join("state")), EventLog::disabled());
        let item: WorkItemRef = "github:octo/app#7".parse().unwrap();
        store.write_section(&item, Some(&control())).unwrap();
        let checkout = dir.path().join("checkout");
        let spec = Path::new("docs/specs");
        let folder = SpecFolder::new(&checkout, spec, "issue-7").unwrap();
        std::fs::create_dir_all(folder.dir()).unwrap();
        let mut record = LocalRecord::new(item.clone());
        let own = Endpoint {
            tmux_target: item.tmux_session(),
            ..Endpoint::new("claude", checkout.clone(), jiff::Timestamp::UNIX_EPOCH)
        };
        record.endpoints.insert(item.clone(), own);
        store.save_local_record(&record).unwrap();
        let graph_of = |listing: &Listing| {
            let listed: Vec<Value> = serde_json::from_slice(&listing.json).unwrap();
            listed[0].get("graph").cloned()
        };

        // No state file yet: the record as stored.
        assert_eq!(graph_of(&store.list_portable(Some(spec), HashMap::new()).unwrap()), None);
        let save = |node: &str| {
            let mut state = WorkItemState::new(&item.to_string(), "pdlc-adhoc-loop");
            state.current_node = node.to_owned();
            folder.update(&EventLog::disabled(), |_| (Some(state), ())).unwrap();
        };
        save("work");
        let first = store.list_portable(Some(spec), HashMap::new()).unwrap();
        let graph = graph_of(&first).expect("a graph section");
        assert_eq!(
            (&graph["loop"], &graph["workItem"]),
            (&"pdlc-adhoc-loop".into(), &"issue-7".into())
        );
        assert_eq!(
            (&graph["currentNode"], &graph["phase"]),
            (&"work".into(), &"implementation".into())
        );
        assert_eq!(graph["nodes"][0]["id"], "work");
        let again = store.list_portable(Some(spec), HashMap::new()).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "nothing changed: the same answer");

        save("review");
        let moved = store.list_portable(Some(spec), HashMap::new()).unwrap();
        assert_eq!(graph_of(&moved).unwrap()["currentNode"], "review", "the next answer follows");

        // Another item's file, or the graph not driven: no section.
        let mut other = WorkItemState::new("github:octo/app#8", "pdlc-adhoc-loop");
        other.current_node = "work".into();
        folder.update(&EventLog::disabled(), |_| (Some(other), ())).unwrap();
        assert_eq!(graph_of(&store.list_portable(Some(spec), HashMap::new()).unwrap()), None);
        save("work");
        assert!(graph_of(&store.list_portable(Some(spec), HashMap::new()).unwrap()).is_some());
        assert_eq!(graph_of(&store.list_portable(None, HashMap::new()).unwrap()), None);
    }
}

//! Portable work-item records, `portable/<slug>.json` (SPEC §4, reference §3.3).
//!
//! One record per work item: identity first (`ref`, then the derived `url`), then
//! sections. Each writer replaces only its own [`Section`] — read-modify-write under the
//! record's sidecar lock, so writers of different sections (even in different processes)
//! never lose each other's update — and sections this version does not know (the
//! reference's `graph`) are kept verbatim. A write whose resulting bytes equal the file
//! touches nothing (seed 001).
//!
//! Writing `None` stores `"<section>": null`, a tombstone: "deliberately empty", which
//! stops the legacy read-forward for that section (trap 16). When no section holds an
//! object any more the file is deleted — or, while a legacy file still holds something
//! for the item, replaced by the stub `{ref, url, sealed: true}` so the legacy reader
//! cannot resurrect it.
//!
//! A record that does not parse, names another ref, or holds a section that does not
//! parse as its type, is quarantined whole and reads as absent (fail closed for
//! `control`, first sight for `poll`). After every change `portable/index.json` is rebuilt
//! (see [`crate::index`]). Files are 0644: they are meant to be committed.

use std::collections::BTreeMap;

use loop_core::WorkItemRef;
use loop_core::record::{ChannelBinding, Collaborators, Control, Ended, PollLedger};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::StateStore;
use crate::error::StoreError;
use crate::json_file::{self, FileMode, JsonFile, Written};
use crate::lock::LockGuard;
use loop_core::log::{Kind, Line};

/// The identity keys of a portable record; every other top-level key is a section.
pub const IDENTITY_KEYS: [&str; 2] = ["ref", "url"];

/// The key of the stub left when every section is gone but legacy state remains.
pub const SEALED_KEY: &str = "sealed";

/// The channel bindings section: thread bound per channel type (`slack`).
pub type ChannelBindings = BTreeMap<String, ChannelBinding>;

/// A section of the portable record and the type its value has.
pub trait Section: Serialize + DeserializeOwned + Clone {
    /// The section's key in the record.
    const KEY: &'static str;

    /// The value a pre-issue-128 layout holds for `item`, read forward when the record
    /// has no key for this section. Most sections have no legacy location.
    fn legacy(_store: &StateStore, _item: &WorkItemRef) -> Result<Option<Self>, StoreError> {
        Ok(None)
    }
}

impl Section for Control {
    const KEY: &'static str = "control";

    fn legacy(store: &StateStore, item: &WorkItemRef) -> Result<Option<Self>, StoreError> {
        crate::legacy::control(store, item)
    }
}

impl Section for PollLedger {
    const KEY: &'static str = "poll";

    fn legacy(store: &StateStore, item: &WorkItemRef) -> Result<Option<Self>, StoreError> {
        crate::legacy::poll(store, item)
    }
}

impl Section for Collaborators {
    const KEY: &'static str = "collaborators";
}

impl Section for Ended {
    const KEY: &'static str = "ended";
}

impl Section for ChannelBindings {
    const KEY: &'static str = "channels";
}

/// The reference's frozen phase selection (`graph`), kept verbatim: read for the choices
/// a work item frozen before its state file carried them (seed 003 R4), never written.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LegacyGraph(pub Value);

impl Section for LegacyGraph {
    const KEY: &'static str = "graph";
}

/// What a record holds for one section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot<T> {
    /// Never recorded (the legacy location may still be consulted).
    Absent,
    /// Deliberately empty (`null`).
    Tombstone,
    Present(T),
}

impl<T> Slot<T> {
    /// The value, if one is recorded.
    pub fn into_value(self) -> Option<T> {
        match self {
            Slot::Present(value) => Some(value),
            Slot::Absent | Slot::Tombstone => None,
        }
    }
}

impl StateStore {
    fn portable_lock(&self, item: &WorkItemRef) -> std::path::PathBuf {
        self.layout.locks_dir().join(format!("portable-{}.lock", item.slug()))
    }

    /// The whole record of `item` as stored (identity, sections, unknown sections), or
    /// `None` when there is none or it was quarantined.
    pub fn load_portable_record(
        &self,
        item: &WorkItemRef,
    ) -> Result<Option<Map<String, Value>>, StoreError> {
        let (path, lock) = (self.layout.portable_record(item), self.portable_lock(item));
        self.count_record_read();
        JsonFile { path: &path, lock: &lock, events: &self.events }
            .load(|bytes| parse_record(bytes, item))
    }

    /// Every portable record on this machine, as [`StateStore::load_portable_record`]
    /// reads each (a malformed one is quarantined and left out), sorted by ref. Sealed
    /// stubs hold nothing and are left out too.
    pub fn list_portable_records(&self) -> Result<Vec<Map<String, Value>>, StoreError> {
        let dir = self.layout.portable_dir();
        self.count_listing();
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(StoreError::io("list", &dir)(err)),
        };
        let mut items = Vec::new();
        for entry in entries {
            let entry = entry.map_err(StoreError::io("list", &dir))?;
            let name = entry.file_name();
            if name.to_str().and_then(crate::layout::record_slug).is_none() {
                continue;
            }
            self.count_record_read();
            let Some(bytes) = json_file::read_bytes(&entry.path())? else { continue };
            let named = serde_json::from_slice::<Map<String, Value>>(&bytes).ok().and_then(|map| {
                map.get("ref").and_then(Value::as_str).and_then(|r| r.parse::<WorkItemRef>().ok())
            });
            // A file that does not even name its ref is the reader's to quarantine; it is
            // found again by its ref's slug only, so it is skipped here.
            items.extend(named);
        }
        items.sort();
        let mut records = Vec::with_capacity(items.len());
        for item in &items {
            if let Some(record) = self.load_portable_record(item)?
                && !is_sealed(Some(&record))
            {
                records.push(record);
            }
        }
        Ok(records)
    }

    /// Everything this machine knows about `item` — arming, session record, ledger,
    /// ended stamp, roster — as `explain`, the API and the MCP tools show it.
    pub fn item_state(
        &self,
        item: &WorkItemRef,
    ) -> Result<loop_core::explain::ItemState, StoreError> {
        use loop_core::record::{Collaborators, Control, Ended, PollLedger};
        Ok(loop_core::explain::ItemState {
            control: self.read_section::<Control>(item)?.into_value(),
            session: self.load_local_record(item)?,
            ledger: self.read_section::<PollLedger>(item)?.into_value(),
            ended: self.read_section::<Ended>(item)?.into_value(),
            collaborators: self.read_section::<Collaborators>(item)?.into_value(),
        })
    }

    /// Reads one section. When the record has no key for it (not even a tombstone) and is
    /// not sealed, the legacy location is consulted once: a value found there is written
    /// forward into the record (logged as `state.legacy_adopted`) and returned.
    pub fn read_section<S: Section>(&self, item: &WorkItemRef) -> Result<Slot<S>, StoreError> {
        let record = self.load_portable_record(item)?;
        match section_of::<S>(record.as_ref()) {
            Ok(Slot::Absent) if !is_sealed(record.as_ref()) => self.adopt_legacy::<S>(item),
            Ok(slot) => Ok(slot),
            Err(_) => {
                self.quarantine_if_malformed(item)?;
                Ok(Slot::Absent)
            }
        }
    }

    /// Replaces section `S` of `item`'s record; `None` writes the tombstone.
    pub fn write_section<S: Section>(
        &self,
        item: &WorkItemRef,
        value: Option<&S>,
    ) -> Result<Written, StoreError> {
        let value = match value {
            Some(value) => serde_json::to_value(value).map_err(|source| StoreError::Encode {
                path: self.layout.portable_record(item),
                source,
            })?,
            None => Value::Null,
        };
        self.update_record(item, |map| {
            map.insert(S::KEY.to_owned(), value);
        })
    }

    fn adopt_legacy<S: Section>(&self, item: &WorkItemRef) -> Result<Slot<S>, StoreError> {
        let Some(value) = S::legacy(self, item)? else { return Ok(Slot::Absent) };
        let encoded = serde_json::to_value(&value).map_err(|source| StoreError::Encode {
            path: self.layout.portable_record(item),
            source,
        })?;
        let mut adopted = false;
        self.update_record(item, |map| {
            // Another writer may have recorded the section meanwhile: theirs wins.
            if !map.contains_key(S::KEY) && !is_sealed(Some(map)) {
                map.insert(S::KEY.to_owned(), encoded);
                adopted = true;
            }
        })?;
        if !adopted {
            let record = self.load_portable_record(item)?;
            return Ok(section_of::<S>(record.as_ref()).unwrap_or(Slot::Absent));
        }
        self.events
            .emit(Line::info(Kind::StateLegacyAdopted).work_item(item).field("section", S::KEY));
        Ok(Slot::Present(value))
    }

    /// Re-reads `item`'s record under its lock and quarantines it if it (still) does not
    /// parse or holds a known section that does not parse; then the item is unknown.
    fn quarantine_if_malformed(&self, item: &WorkItemRef) -> Result<(), StoreError> {
        let (path, lock) = (self.layout.portable_record(item), self.portable_lock(item));
        let _guard = LockGuard::exclusive(&lock)?;
        self.count_record_read();
        JsonFile { path: &path, lock: &lock, events: &self.events }
            .load_locked(|bytes| parse_valid_record(bytes, item))?;
        Ok(())
    }

    /// The one read-modify-write path of portable records: lock, read (quarantining a
    /// record or a known section that does not parse), apply `change`, normalise, write or
    /// delete, unlock, then update the index if anything changed.
    fn update_record(
        &self,
        item: &WorkItemRef,
        change: impl FnOnce(&mut Map<String, Value>),
    ) -> Result<Written, StoreError> {
        let path = self.layout.portable_record(item);
        let lock = self.portable_lock(item);
        let (written, on_disk) = {
            let _guard = LockGuard::exclusive(&lock)?;
            let file = JsonFile { path: &path, lock: &lock, events: &self.events };
            self.count_record_read();
            let before = file.load_locked(|bytes| parse_valid_record(bytes, item))?;
            let mut map = before.clone().unwrap_or_default();
            map.shift_remove(SEALED_KEY);
            change(&mut map);
            let map = normalise(item, map);
            if map
                .iter()
                .any(|(key, value)| !IDENTITY_KEYS.contains(&key.as_str()) && value.is_object())
            {
                (json_file::write_json(&path, &map, FileMode::Shared)?, Some(map))
            } else if crate::legacy::holds_anything(self, item) {
                let mut sealed = normalise(item, Map::new());
                sealed.insert(SEALED_KEY.to_owned(), Value::Bool(true));
                (json_file::write_json(&path, &sealed, FileMode::Shared)?, Some(sealed))
            } else if before.is_some() {
                json_file::remove(&path)?;
                (Written::Changed, None)
            } else {
                (Written::Unchanged, None)
            }
        };
        if written == Written::Changed {
            self.index_record(item, on_disk.as_ref());
        }
        Ok(written)
    }
}

/// Parses a record file: a JSON object whose `ref` is `item`.
fn parse_record(bytes: &[u8], item: &WorkItemRef) -> Result<Map<String, Value>, String> {
    let map: Map<String, Value> = json_file::parse_json(bytes)?;
    match map.get("ref").and_then(Value::as_str).map(str::parse::<WorkItemRef>) {
        Some(Ok(found)) if found == *item => Ok(map),
        Some(Ok(found)) => {
            Err(format!("its ref `{found}` does not belong in `{}.json`", item.slug()))
        }
        _ => Err("it has no valid `ref`".to_owned()),
    }
}

/// [`parse_record`], and every section this version knows parses as its type.
fn parse_valid_record(bytes: &[u8], item: &WorkItemRef) -> Result<Map<String, Value>, String> {
    parse_record(bytes, item).and_then(|map| validate_sections(&map).map(|()| map))
}

/// Checks that every section this version knows parses as its type.
fn validate_sections(map: &Map<String, Value>) -> Result<(), String> {
    fn check<S: Section>(map: &Map<String, Value>) -> Result<(), String> {
        section_of::<S>(Some(map)).map(|_| ())
    }
    check::<Control>(map)?;
    check::<PollLedger>(map)?;
    check::<Collaborators>(map)?;
    check::<Ended>(map)?;
    check::<ChannelBindings>(map)
}

fn section_of<S: Section>(record: Option<&Map<String, Value>>) -> Result<Slot<S>, String> {
    match record.and_then(|map| map.get(S::KEY)) {
        None => Ok(Slot::Absent),
        Some(Value::Null) => Ok(Slot::Tombstone),
        Some(value) => S::deserialize(value)
            .map(Slot::Present)
            .map_err(|err| format!("section `{}`: {err}", S::KEY)),
    }
}

pub(crate) fn is_sealed(record: Option<&Map<String, Value>>) -> bool {
    record.and_then(|map| map.get(SEALED_KEY)).and_then(Value::as_bool).unwrap_or(false)
}

/// Identity first (`ref`, `url`), then the sections in the order they were first written.
fn normalise(item: &WorkItemRef, mut map: Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("ref".to_owned(), Value::String(item.to_string()));
    out.insert("url".to_owned(), Value::String(item.url()));
    for key in IDENTITY_KEYS {
        map.shift_remove(key);
    }
    out.extend(map);
    out
}

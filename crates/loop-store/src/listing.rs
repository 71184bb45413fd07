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

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use loop_core::WorkItemRef;
use loop_core::record::Control;
use serde_json::{Map, Value};

use crate::local::FileIdentity;
use crate::portable::Section as _;
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
    last: Option<Arc<Listing>>,
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
    /// listing are read.
    pub fn list_portable(&self) -> Result<Arc<Listing>, StoreError> {
        let dir = self.layout.portable_dir();
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
            if name.to_str().and_then(crate::local::record_slug).is_none() {
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
            json.extend_from_slice(&record.json);
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

    /// The record in `path` as a listing shows it, read as its loader reads it.
    fn listed(&self, path: &Path) -> Result<Option<Listed>, StoreError> {
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
        assert_eq!(&store.list_portable().unwrap().json[..], b"[]");
        store.write_section(&b, Some(&control())).unwrap();
        store.write_section(&a, Some(&control())).unwrap();
        let first = store.list_portable().unwrap();
        let listed: Vec<Value> = serde_json::from_slice(&first.json).unwrap();
        let refs: Vec<&str> = listed.iter().filter_map(|r| r["ref"].as_str()).collect();
        assert_eq!(refs, [a.to_string(), b.to_string()], "sorted by ref");
        assert_eq!(first.controls.len(), 2);
        let again = store.list_portable().unwrap();
        assert!(Arc::ptr_eq(&first, &again), "nothing changed: the same answer");

        store.write_section::<Control>(&a, None).unwrap();
        let after = store.list_portable().unwrap();
        let listed: Vec<Value> = serde_json::from_slice(&after.json).unwrap();
        assert_eq!(listed.len(), 1, "a record with no section left is gone: {listed:?}");

        // Edited in place (as an editor or a merge might).
        let path = store.layout.portable_record(&b);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"start\"", "\"resume\"")).unwrap();
        let edited = store.list_portable().unwrap();
        assert_eq!(edited.controls[0].1.command, loop_core::control::Command::Resume);
        let listed: Vec<Value> = serde_json::from_slice(&edited.json).unwrap();
        assert_eq!(listed[0]["control"]["command"], "resume");
    }
}

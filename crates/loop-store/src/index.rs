//! `portable/index.json`: a derived listing of the portable records.
//!
//! `{workItems: [{ref, url, file, sections, pullRequests?, sealed?}]}` sorted by ref,
//! rewritten after every record change, removed when no record remains. A failure to
//! write it is logged and swallowed; a record that does not parse is left out (its
//! reader quarantines it). Written under its own lock, never while a record's lock is
//! held. The reference's index (no `pullRequests`, `url` optional) reads as one of ours.
//!
//! A change does not read every record again: the process keeps the entries it last
//! wrote ([`HeldIndex`]) and a watch on `portable/` (`watch`) that names the record
//! files changed since by anyone else, so a write reads those and takes its own record's
//! entry from what it wrote. The first write in a process, or one after the watch lost
//! events, scans `portable/` once; without a watch (not Linux) every write does.
//!
//! Records also arrive without any writer of ours rebuilding it — by `git pull` (they are
//! made to travel), copied in, or written by the reference — so whoever decides from the
//! index reads it through [`StateStore::portable_index`], which rebuilds it when it is
//! missing, does not parse, or no longer lists exactly the record files there are with
//! none newer than itself: a stale or broken index never hides a record.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use loop_core::WorkItemRef;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::StateStore;
use crate::error::StoreError;
use crate::json_file::{self, FileMode};
use crate::layout::record_slug;
use crate::lock::LockGuard;
use crate::portable::{IDENTITY_KEYS, SEALED_KEY};
use crate::watch::{self, Drained, Watch};

/// The whole index file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortableIndex {
    pub work_items: Vec<IndexEntry>,
}

/// One record as the index lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexEntry {
    #[serde(rename = "ref")]
    pub work_item: String,
    /// Empty when the writer left it out (the reference's is optional).
    #[serde(default)]
    pub url: String,
    /// The record's file name inside `portable/`.
    pub file: String,
    /// The sections holding a value (tombstones are not listed).
    pub sections: Vec<String>,
    /// The pull requests whose ledgers the record's `poll` section carries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pull_requests: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sealed: bool,
}

/// The index entries this process last wrote, by file, with the watch on `portable/`
/// that names what changed since; `None` until the first write (module doc). Held by
/// a write under the index's lock.
#[derive(Debug, Default)]
pub(crate) struct HeldIndex(Mutex<Option<Held>>);

#[derive(Debug)]
pub(crate) struct Held {
    watch: Watch,
    entries: HashMap<String, IndexEntry>,
}

impl StateStore {
    fn index_lock(&self) -> PathBuf {
        self.layout.locks_dir().join("portable-index.lock")
    }

    /// Updates the index for `item`'s record as just written (`None`: removed); failures
    /// are logged and swallowed.
    pub(crate) fn index_record(&self, item: &WorkItemRef, record: Option<&Map<String, Value>>) {
        if let Err(err) = self.try_index_record(item, record) {
            tracing::warn!(error = %err, "could not update portable/index.json");
        }
    }

    fn try_index_record(
        &self,
        item: &WorkItemRef,
        record: Option<&Map<String, Value>>,
    ) -> Result<(), StoreError> {
        let _guard = LockGuard::exclusive(&self.index_lock())?;
        let mut held = self.held_index.0.lock().unwrap_or_else(PoisonError::into_inner);
        let file = format!("{}.json", item.slug());
        // Taken out while it is brought up to date: an error leaves the next write to scan.
        let caught_up = match held.take() {
            Some(mut index) => match index.watch.drain() {
                Ok(Drained::Names(names)) => {
                    let dir = self.layout.portable_dir();
                    for name in names.into_iter().map(|slug| format!("{slug}.json")) {
                        if name != file {
                            self.reindex(&mut index.entries, &dir, name)?;
                        }
                    }
                    Some(index)
                }
                Ok(Drained::Lost) | Err(_) => self.held_from_scan()?,
            },
            None => self.held_from_scan()?,
        };
        let Some(mut index) = caught_up else {
            // No watch: the whole scan, as every write did before.
            return self.write_index(&self.scan_index()?);
        };
        match record.and_then(|record| index_entry(file.clone(), record)) {
            Some(entry) => index.entries.insert(file, entry),
            None => index.entries.remove(&file),
        };
        let mut work_items: Vec<IndexEntry> = index.entries.values().cloned().collect();
        work_items.sort_by(|a, b| a.work_item.cmp(&b.work_item));
        self.write_index(&PortableIndex { work_items })?;
        *held = Some(index);
        Ok(())
    }

    /// A held index from a scan of `portable/`, the watch set first so that nothing
    /// written meanwhile is missed; `None` when no watch can be set.
    fn held_from_scan(&self) -> Result<Option<Held>, StoreError> {
        let Ok(watch) = watch::Watch::new(&self.layout.portable_dir()) else { return Ok(None) };
        let mut entries = HashMap::new();
        for (name, path, _) in self.record_files()? {
            if let Some(entry) = self.entry_of(name.clone(), &path)? {
                entries.insert(name, entry);
            }
        }
        Ok(Some(Held { watch, entries }))
    }

    /// Reads `name` in `dir` again into `entries`.
    fn reindex(
        &self,
        entries: &mut HashMap<String, IndexEntry>,
        dir: &Path,
        name: String,
    ) -> Result<(), StoreError> {
        let path = dir.join(&name);
        match self.entry_of(name.clone(), &path)? {
            Some(entry) => entries.insert(name, entry),
            None => entries.remove(&name),
        };
        Ok(())
    }

    /// The entry of the record file at `path` named `name`: `None` when it is gone or
    /// does not parse.
    fn entry_of(&self, name: String, path: &Path) -> Result<Option<IndexEntry>, StoreError> {
        self.count_record_read();
        let Some(bytes) = json_file::read_bytes(path)? else { return Ok(None) };
        let Ok(record) = serde_json::from_slice::<Map<String, Value>>(&bytes) else {
            return Ok(None);
        };
        Ok(index_entry(name, &record))
    }

    /// Writes `index`, or removes the file when it lists nothing. The caller holds the
    /// index's lock.
    fn write_index(&self, index: &PortableIndex) -> Result<(), StoreError> {
        let path = self.layout.portable_index();
        if index.work_items.is_empty() {
            json_file::remove(&path)
        } else {
            json_file::write_json(&path, index, FileMode::Shared).map(drop)
        }
    }

    fn try_rebuild_index(&self) -> Result<PortableIndex, StoreError> {
        let _guard = LockGuard::exclusive(&self.index_lock())?;
        let index = self.scan_index()?;
        self.write_index(&index)?;
        Ok(index)
    }

    /// The index of the records in `portable/` now: the file when it is fresh, else
    /// rebuilt from the records (see the module doc). When the rebuilt index cannot be
    /// written it is still returned, so every record is listed all the same.
    pub fn portable_index(&self) -> Result<PortableIndex, StoreError> {
        let path = self.layout.portable_index();
        let written = fs::metadata(&path).and_then(|meta| meta.modified()).ok();
        let bytes = json_file::read_bytes(&path)?;
        let parsed = bytes.and_then(|bytes| serde_json::from_slice::<PortableIndex>(&bytes).ok());
        let files = self.record_files()?;
        if let (Some(index), Some(written)) = (parsed, written) {
            let mut listed: Vec<&str> = index.work_items.iter().map(|e| e.file.as_str()).collect();
            let mut present: Vec<&str> = files.iter().map(|(name, ..)| name.as_str()).collect();
            listed.sort_unstable();
            present.sort_unstable();
            let older = files.iter().all(|(.., modified)| modified.is_some_and(|m| m < written));
            if listed == present && older {
                return Ok(index);
            }
        }
        match self.try_rebuild_index() {
            Ok(index) => Ok(index),
            Err(err) => {
                tracing::warn!(error = %err, "could not rebuild portable/index.json; listing the records without it");
                self.scan_index()
            }
        }
    }

    /// The index built from the records without writing it.
    fn scan_index(&self) -> Result<PortableIndex, StoreError> {
        let mut index = PortableIndex::default();
        for (name, record_path, _) in self.record_files()? {
            index.work_items.extend(self.entry_of(name, &record_path)?);
        }
        index.work_items.sort_by(|a, b| a.work_item.cmp(&b.work_item));
        Ok(index)
    }

    /// The record files in `portable/`: name, path and when each was last modified.
    fn record_files(&self) -> Result<Vec<(String, PathBuf, Option<SystemTime>)>, StoreError> {
        let dir = self.layout.portable_dir();
        self.count_listing();
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(StoreError::io("list", &dir)(err)),
        };
        let mut files = Vec::new();
        for entry in entries {
            let entry = entry.map_err(StoreError::io("list", &dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if record_slug(&name).is_none() {
                continue;
            }
            let modified = entry.metadata().and_then(|meta| meta.modified()).ok();
            files.push((name, entry.path(), modified));
        }
        Ok(files)
    }
}

fn index_entry(file: String, record: &Map<String, Value>) -> Option<IndexEntry> {
    let text = |key: &str| record.get(key).and_then(Value::as_str).map(str::to_owned);
    let sections = record
        .iter()
        .filter(|(key, value)| {
            !IDENTITY_KEYS.contains(&key.as_str()) && key.as_str() != SEALED_KEY && !value.is_null()
        })
        .map(|(key, _)| key.clone())
        .collect();
    let pull_requests = record
        .get("poll")
        .and_then(|poll| poll.get("pullRequests"))
        .and_then(Value::as_object)
        .map(|prs| prs.keys().cloned().collect())
        .unwrap_or_default();
    Some(IndexEntry {
        work_item: text("ref")?,
        url: text("url").unwrap_or_default(),
        file,
        sections,
        pull_requests,
        sealed: record.get(SEALED_KEY).and_then(Value::as_bool).unwrap_or(false),
    })
}

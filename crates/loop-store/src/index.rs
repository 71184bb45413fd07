//! `portable/index.json`: a derived listing of the portable records.
//!
//! `{workItems: [{ref, url, file, sections, pullRequests?, sealed?}]}` sorted by ref,
//! rebuilt by scanning `portable/` after every record change, removed when no record
//! remains. It is read by nothing the daemon decides on, so a failure to rebuild it is
//! logged and swallowed; a record that does not parse is left out (its reader
//! quarantines it). Rebuilt under its own lock, never while a record's lock is held.
//! A record quarantined on read stays listed until the next record change rebuilds it.

use std::fs;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::StateStore;
use crate::error::StoreError;
use crate::json_file::{self, FileMode};
use crate::local::record_slug;
use crate::lock::LockGuard;
use crate::portable::{IDENTITY_KEYS, SEALED_KEY};

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

impl StateStore {
    /// Rebuilds the index; failures are logged and swallowed.
    pub(crate) fn rebuild_index(&self) {
        if let Err(err) = self.try_rebuild_index() {
            tracing::warn!(error = %err, "could not rebuild portable/index.json");
        }
    }

    fn try_rebuild_index(&self) -> Result<(), StoreError> {
        let _guard = LockGuard::exclusive(&self.layout.locks_dir().join("portable-index.lock"))?;
        let dir = self.layout.portable_dir();
        let path = self.layout.portable_index();
        let mut index = PortableIndex::default();
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(err) => return Err(StoreError::io("list", &dir)(err)),
        };
        for entry in entries {
            let entry = entry.map_err(StoreError::io("list", &dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if record_slug(&name).is_none() {
                continue;
            }
            let Some(bytes) = json_file::read_bytes(&entry.path())? else { continue };
            let Ok(record) = serde_json::from_slice::<Map<String, Value>>(&bytes) else { continue };
            index.work_items.extend(index_entry(name, &record));
        }
        if index.work_items.is_empty() {
            return json_file::remove(&path);
        }
        index.work_items.sort_by(|a, b| a.work_item.cmp(&b.work_item));
        json_file::write_json(&path, &index, FileMode::Shared).map(|_| ())
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

//! Legacy reference locations, read forward and never written (reference §3.13).
//!
//! Pre-issue-128 roots kept control records in `<root>/sessions/control/<slug>.json` and
//! the poll ledger in `<root>/sessions/poll-state.json` (`{items: {<ref>: <entry>}}`);
//! pre-issue-106 installs kept that ledger at the cwd-relative
//! `.the-loop/poll-state.json`. [`crate::portable`] consults these only when a record has
//! no key for the section and is not sealed, and writes what it finds forward. Session
//! records were `<root>/sessions/<slug>.json`, in the shape `local/` holds now; [`sessions`]
//! lists them for [`crate::local`] to adopt once.
//!
//! Nothing here writes, renames or quarantines: a legacy file that does not parse is
//! reported through `tracing` and read as absent, and is left exactly where it is.

use std::path::{Path, PathBuf};

use loop_core::WorkItemRef;
use loop_core::record::{Control, LocalRecord, PollLedger};
use serde_json::{Map, Value};

use crate::StateStore;
use crate::error::StoreError;
use crate::json_file::read_bytes;

/// The legacy control record of `item`, if one exists and parses.
pub(crate) fn control(
    store: &StateStore,
    item: &WorkItemRef,
) -> Result<Option<Control>, StoreError> {
    let path = store.layout.legacy_control(item);
    Ok(read_value(&path)?.and_then(|value| decode(&path, value)))
}

/// The legacy poll entry of `item`: the per-root file first, then the cwd-relative one.
pub(crate) fn poll(
    store: &StateStore,
    item: &WorkItemRef,
) -> Result<Option<PollLedger>, StoreError> {
    for path in poll_files(store) {
        if let Some(entry) = poll_entry(&path, item)? {
            return Ok(decode(&path, entry));
        }
    }
    Ok(None)
}

/// Whether any legacy location still holds something for `item` (then an emptied record
/// is sealed instead of deleted).
pub(crate) fn holds_anything(store: &StateStore, item: &WorkItemRef) -> bool {
    store.layout.legacy_control(item).exists()
        || poll_files(store).iter().any(|path| matches!(poll_entry(path, item), Ok(Some(_))))
}

fn poll_files(store: &StateStore) -> Vec<PathBuf> {
    let mut files = vec![store.layout.legacy_poll_state()];
    files.extend(store.layout.legacy_cwd_poll_state());
    files
}

fn poll_entry(path: &Path, item: &WorkItemRef) -> Result<Option<Value>, StoreError> {
    let Some(Value::Object(mut file)) = read_value(path)? else { return Ok(None) };
    let Some(Value::Object(items)) = file.remove("items") else { return Ok(None) };
    Ok(find_item(items, item))
}

/// The legacy session records: every `sessions/<slug>.json` that parses as a session
/// record of the ref its name says, with its slug.
pub(crate) fn sessions(store: &StateStore) -> Vec<(String, LocalRecord)> {
    let dir = store.layout.legacy_sessions_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut found = Vec::new();
    for path in entries.flatten().map(|entry| entry.path()) {
        let Some(slug) =
            path.file_name().and_then(|n| n.to_str()).and_then(crate::layout::record_slug)
        else {
            continue;
        };
        let Ok(Some(value)) = read_value(&path) else { continue };
        let Some(record) = decode::<LocalRecord>(&path, value) else { continue };
        if record.work_item.slug() == slug {
            found.push((slug.to_owned(), record));
        } else {
            tracing::warn!(path = %path.display(), "ignoring a legacy session record named for another ref");
        }
    }
    found
}

fn find_item(items: Map<String, Value>, item: &WorkItemRef) -> Option<Value> {
    items
        .into_iter()
        .find(|(key, _)| key.parse::<WorkItemRef>().is_ok_and(|found| found == *item))
        .map(|(_, value)| value)
}

fn read_value(path: &Path) -> Result<Option<Value>, StoreError> {
    let Some(bytes) = read_bytes(path)? else { return Ok(None) };
    match serde_json::from_slice(&bytes) {
        Ok(value) => Ok(Some(value)),
        Err(err) => {
            tracing::warn!(path = %path.display(), error = %err, "ignoring an unreadable legacy state file");
            Ok(None)
        }
    }
}

fn decode<T: serde::de::DeserializeOwned>(path: &Path, value: Value) -> Option<T> {
    serde_json::from_value(value)
        .inspect_err(|err| tracing::warn!(path = %path.display(), error = %err, "ignoring a legacy entry of an unexpected shape"))
        .ok()
}

//! Machine-local session records, `<registry dir>/<slug>.json` (seed 003 R5).
//!
//! One file per work item holding only handles (see [`loop_core::record::local`]). The
//! registry's rules live with the sessions; this module loads, saves, updates under the
//! record's lock, deletes and lists. Writes are atomic and fsynced, except the
//! per-delivery stamp ([`StateStore::update_local_record_unsynced`]), which is atomic
//! against `kill -9` only. Files are 0600: they hold resumable conversation ids
//! and absolute paths, and must never leave the machine.
//!
//! The registry directory is shared with other files (e.g. `service.pid` in the default
//! `local/`), so listing only considers names shaped `[A-Za-z0-9._-]+-<digits>.json`
//! (trap 22). A record whose `ref` does not match its file name is treated like one that
//! does not parse: quarantined and absent.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use loop_core::WorkItemRef;
use loop_core::record::LocalRecord;

use crate::StateStore;
use crate::error::StoreError;
use crate::json_file::{self, Durability, FileMode, JsonFile, Written};
use crate::lock::LockGuard;

impl StateStore {
    fn local_lock(&self, slug: &str) -> PathBuf {
        self.layout.locks_dir().join(format!("local-{slug}.lock"))
    }

    fn local_file<'a>(&'a self, path: &'a Path, lock: &'a Path) -> JsonFile<'a> {
        JsonFile { path, lock, events: &self.events }
    }

    /// The session record of `item`; `None` when there is none or it was unreadable
    /// (then it has been quarantined).
    pub fn load_local_record(&self, item: &WorkItemRef) -> Result<Option<LocalRecord>, StoreError> {
        let (path, lock) = (self.layout.local_record(item), self.local_lock(&item.slug()));
        self.local_file(&path, &lock).load(|bytes| parse_local(bytes, &item.slug()))
    }

    /// Replaces `record`'s file under its lock (unchanged bytes are not rewritten).
    pub fn save_local_record(&self, record: &LocalRecord) -> Result<Written, StoreError> {
        let item = record.work_item.clone();
        self.update_local_record(&item, |slot| *slot = Some(record.clone()))
            .map(|(_, written)| written)
    }

    /// Read-modify-write of `item`'s record under its lock. `f` sees `None` when there is
    /// no record; leaving `None` deletes the file. Returns what `f` returned.
    pub fn update_local_record<R>(
        &self,
        item: &WorkItemRef,
        f: impl FnOnce(&mut Option<LocalRecord>) -> R,
    ) -> Result<(R, Written), StoreError> {
        self.update_local_record_with(item, Durability::Synced, f)
    }

    /// [`StateStore::update_local_record`] without fsync, for the per-delivery stamp
    /// (`recentDeliveries`, `lastEventAt`) on the dispatch hot path: the rename is atomic
    /// against the process's death (`kill -9`); an OS crash may lose the last stamps
    /// (docs/dispatcher.md, "Durability"). Deleting a record is always synced.
    pub fn update_local_record_unsynced<R>(
        &self,
        item: &WorkItemRef,
        f: impl FnOnce(&mut Option<LocalRecord>) -> R,
    ) -> Result<(R, Written), StoreError> {
        self.update_local_record_with(item, Durability::ProcessDeath, f)
    }

    fn update_local_record_with<R>(
        &self,
        item: &WorkItemRef,
        durability: Durability,
        f: impl FnOnce(&mut Option<LocalRecord>) -> R,
    ) -> Result<(R, Written), StoreError> {
        let slug = item.slug();
        let (path, lock) = (self.layout.local_record(item), self.local_lock(&slug));
        let _guard = LockGuard::exclusive(&lock)?;
        let before =
            self.local_file(&path, &lock).load_locked(|bytes| parse_local(bytes, &slug))?;
        let mut after = before.clone();
        let result = f(&mut after);
        let written = match (&before, &after) {
            (_, Some(record)) => {
                json_file::write_json_with(&path, record, FileMode::Private, durability)?
            }
            (Some(_), None) => {
                json_file::remove(&path)?;
                Written::Changed
            }
            (None, None) => Written::Unchanged,
        };
        Ok((result, written))
    }

    /// Removes `item`'s session record, if any.
    pub fn delete_local_record(&self, item: &WorkItemRef) -> Result<(), StoreError> {
        let _guard = LockGuard::exclusive(&self.local_lock(&item.slug()))?;
        json_file::remove(&self.layout.local_record(item))
    }

    /// Every readable session record in the registry directory, sorted by ref.
    pub fn list_local_records(&self) -> Result<Vec<LocalRecord>, StoreError> {
        let dir = self.layout.registry_dir();
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(StoreError::io("list", dir)(err)),
        };
        let mut records = Vec::new();
        for entry in entries {
            let entry = entry.map_err(StoreError::io("list", dir))?;
            let name = entry.file_name();
            let Some(slug) = name.to_str().and_then(record_slug) else { continue };
            let (path, lock) = (entry.path(), self.local_lock(slug));
            records.extend(self.local_file(&path, &lock).load(|bytes| parse_local(bytes, slug))?);
        }
        records.sort_by(|a, b| a.work_item.cmp(&b.work_item));
        Ok(records)
    }
}

/// The slug of a record file name shaped `[A-Za-z0-9._-]+-<digits>.json`, else `None`.
pub(crate) fn record_slug(name: &str) -> Option<&str> {
    let slug = name.strip_suffix(".json")?;
    let (stem, number) = slug.rsplit_once('-')?;
    let stem_ok = !stem.is_empty()
        && stem.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    let number_ok = !number.is_empty() && number.chars().all(|c| c.is_ascii_digit());
    (stem_ok && number_ok).then_some(slug)
}

fn parse_local(bytes: &[u8], slug: &str) -> Result<LocalRecord, String> {
    let record: LocalRecord = json_file::parse_json(bytes)?;
    if record.work_item.slug() != slug {
        return Err(format!("its ref `{}` does not belong in `{slug}.json`", record.work_item));
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_record_shaped_names_are_listed() {
        assert_eq!(record_slug("github-octo-my.app-7.json"), Some("github-octo-my.app-7"));
        for name in [
            "service.pid",
            "poll-clocks.json",
            "index.json",
            "x-7.json.corrupt-1",
            "-7.json",
            "a b-7.json",
        ] {
            assert_eq!(record_slug(name), None, "{name}");
        }
    }
}

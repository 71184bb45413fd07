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
//!
//! Decisions read the live records from the live view (`live`), never a listing; a
//! listing (the API, `status`, the poller's reconciliation) keeps what it parsed ([`ListedRecords`]) and reads again only the files whose
//! identity changed (device, inode, size, mtime, ctime; one `stat` per unchanged file).
//! Every writer replaces a record by rename, so a changed record is a new inode: a stale
//! answer would need a new file with the same inode, size and nanosecond timestamps. A
//! listing of 50 records costs about 1.5 ms when each is read and parsed. An unchanged
//! record is handed out shared (`Arc`), so a listing's cost past the `stat`s does not
//! grow with what the records hold (a closed one keeps its recent delivery ids).
//!
//! A root the reference wrote before its issue 128 holds session records in
//! `<root>/sessions/<slug>.json`. The first read of session records in a process adopts
//! them: each one whose slug is not yet in `legacy-sessions-adopted.json` is written here
//! when no record of its own exists (`state.legacy_adopted`, section `session`), then its
//! slug is added to that list — so a record adopted and later reset or closed is never
//! adopted again. The legacy files are left as they are.

use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use loop_core::WorkItemRef;
use loop_core::log::{Kind, Line};
use loop_core::record::LocalRecord;

use crate::StateStore;
use crate::error::StoreError;
use crate::json_file::{self, Durability, FileMode, JsonFile, Written};
use crate::layout::record_slug;
use crate::legacy;
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
        self.adopt_legacy_sessions();
        let (path, lock) = (self.layout.local_record(item), self.local_lock(&item.slug()));
        self.count_record_read();
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
        self.adopt_legacy_sessions();
        let slug = item.slug();
        let (path, lock) = (self.layout.local_record(item), self.local_lock(&slug));
        let _guard = LockGuard::exclusive(&lock)?;
        self.count_record_read();
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
        // Still under the record's lock, so no later write of it reaches the view first.
        self.note_local_write(&slug, &path, after);
        Ok((result, written))
    }

    /// Removes `item`'s session record, if any.
    pub fn delete_local_record(&self, item: &WorkItemRef) -> Result<(), StoreError> {
        self.adopt_legacy_sessions();
        let (slug, path) = (item.slug(), self.layout.local_record(item));
        let _guard = LockGuard::exclusive(&self.local_lock(&slug))?;
        json_file::remove(&path)?;
        self.note_local_write(&slug, &path, None);
        Ok(())
    }

    /// Every readable session record in the registry directory, sorted by ref. A file
    /// unchanged since the last listing is not read again, and its record is shared with
    /// that listing, not copied (module doc).
    pub fn list_local_records(&self) -> Result<Vec<Arc<LocalRecord>>, StoreError> {
        self.adopt_legacy_sessions();
        self.count_listing();
        let dir = self.layout.registry_dir();
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(StoreError::io("list", dir)(err)),
        };
        let mut listed = self.listed.records.lock().unwrap_or_else(PoisonError::into_inner);
        // What the last listing kept: each file still here is carried over, so a removed
        // one is forgotten (and, after an error, the rest is read again next time).
        let mut before = std::mem::take(&mut *listed);
        let mut records = Vec::new();
        for entry in entries {
            let entry = entry.map_err(StoreError::io("list", dir))?;
            let name = entry.file_name();
            let Some(slug) = name.to_str().and_then(record_slug) else { continue };
            let path = entry.path();
            let known = before.remove(&path);
            let known_identity = known.as_ref().map(|(identity, _)| identity);
            let record = match self.read_record_file(&path, known_identity)? {
                RecordFile::Gone => None,
                RecordFile::Unchanged => known.map(|(identity, record)| {
                    listed.insert(path, (identity, Arc::clone(&record)));
                    record
                }),
                RecordFile::Read(identity, bytes) => match parse_local(&bytes, slug) {
                    Ok(record) => {
                        let record = Arc::new(record);
                        listed.insert(path, (identity, Arc::clone(&record)));
                        Some(record)
                    }
                    // Quarantined (after a re-read under the lock) unless fixed since.
                    Err(_) => self
                        .local_file(&path, &self.local_lock(slug))
                        .load(|bytes| parse_local(bytes, slug))?
                        .map(Arc::new),
                },
            };
            records.extend(record);
        }
        records.sort_by(|a, b| a.work_item.cmp(&b.work_item));
        Ok(records)
    }
}

impl StateStore {
    /// Adopts the legacy session records, once per process (module doc). A failure is
    /// reported and leaves them for the next process.
    pub(crate) fn adopt_legacy_sessions(&self) {
        self.listed.legacy_adopted.get_or_init(|| {
            if let Err(err) = self.adopt_legacy_sessions_now() {
                tracing::warn!(error = %err, "cannot read the legacy session records forward");
            }
        });
    }

    fn adopt_legacy_sessions_now(&self) -> Result<(), StoreError> {
        let legacy = legacy::sessions(self);
        if legacy.is_empty() {
            return Ok(());
        }
        let _guard = LockGuard::exclusive(&self.layout.locks_dir().join("legacy-sessions.lock"))?;
        let ledger = self.layout.legacy_sessions_adopted();
        let mut adopted: BTreeSet<String> = json_file::read_bytes(&ledger)?
            .and_then(|bytes| serde_json::from_slice::<AdoptedSessions>(&bytes).ok())
            .map(|file| file.adopted)
            .unwrap_or_default();
        let before = adopted.len();
        for (slug, record) in legacy {
            if adopted.contains(&slug) {
                continue;
            }
            // The record first: a kill before the ledger is written adopts nothing twice,
            // since a record of its own is never replaced.
            let (path, lock) =
                (self.layout.local_record(&record.work_item), self.local_lock(&slug));
            let _record = LockGuard::exclusive(&lock)?;
            if self.local_file(&path, &lock).load_locked(|b| parse_local(b, &slug))?.is_none() {
                json_file::write_json_with(&path, &record, FileMode::Private, Durability::Synced)?;
                self.events.emit(
                    Line::info(Kind::StateLegacyAdopted)
                        .work_item(&record.work_item)
                        .field("section", "session"),
                );
            }
            adopted.insert(slug);
        }
        if adopted.len() != before {
            let file = AdoptedSessions { adopted };
            json_file::write_json_with(&ledger, &file, FileMode::Private, Durability::Synced)?;
        }
        Ok(())
    }
}

/// `legacy-sessions-adopted.json`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct AdoptedSessions {
    adopted: BTreeSet<String>,
}

/// Session records parsed by listings, by path, with the identity of the file each was
/// read from; and whether this process adopted the legacy ones yet.
#[derive(Debug, Default)]
pub(crate) struct ListedRecords {
    records: Mutex<HashMap<PathBuf, (FileIdentity, Arc<LocalRecord>)>>,
    legacy_adopted: std::sync::OnceLock<()>,
}

/// What tells one version of a record file from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileIdentity {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileIdentity {
    pub(crate) fn of(meta: &fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// What a listing found in one record file.
#[derive(Debug)]
pub(crate) enum RecordFile {
    /// Removed since the directory was read.
    Gone,
    /// The very file the known record was parsed from.
    Unchanged,
    /// Read, with the identity of the file the bytes came from (`fstat` of the open file).
    Read(FileIdentity, Vec<u8>),
}

impl StateStore {
    /// Reads a record file unless `known` is this very file's identity (one `stat`, no
    /// open); a read is counted ([`StateStore::reads`]).
    pub(crate) fn read_record_file(
        &self,
        path: &Path,
        known: Option<&FileIdentity>,
    ) -> Result<RecordFile, StoreError> {
        let read = read_record(path, known)?;
        if matches!(read, RecordFile::Read(..)) {
            self.count_record_read();
        }
        Ok(read)
    }
}

fn read_record(path: &Path, known: Option<&FileIdentity>) -> Result<RecordFile, StoreError> {
    let gone = |err: &io::Error| err.kind() == io::ErrorKind::NotFound;
    if let Some(seen) = known {
        match fs::metadata(path) {
            Ok(meta) if FileIdentity::of(&meta) == *seen => return Ok(RecordFile::Unchanged),
            Ok(_) => {}
            Err(err) if gone(&err) => return Ok(RecordFile::Gone),
            Err(err) => return Err(StoreError::io("inspect", path)(err)),
        }
    }
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(err) if gone(&err) => return Ok(RecordFile::Gone),
        Err(err) => return Err(StoreError::io("read", path)(err)),
    };
    let identity = FileIdentity::of(&file.metadata().map_err(StoreError::io("inspect", path))?);
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(StoreError::io("read", path))?;
    Ok(RecordFile::Read(identity, bytes))
}

pub(crate) fn parse_local(bytes: &[u8], slug: &str) -> Result<LocalRecord, String> {
    let record: LocalRecord = json_file::parse_json(bytes)?;
    if record.work_item.slug() != slug {
        return Err(format!("its ref `{}` does not belong in `{slug}.json`", record.work_item));
    }
    Ok(record)
}

//! The live view of the session records: the ones a decision can touch, held in memory.
//!
//! Judging, planning and the agent-state watcher ask which records own a ref, with what
//! endpoints (a pull request's binding included), many times a second. Only records
//! holding a live endpoint (active or paused, its own or a pull request's) can answer;
//! closed ones are history, which grows with every item the daemon has ever seen. So
//! this view holds the live records only, and stays current two ways:
//!
//! - every write this process makes to a session record (`local`) hands the record to
//!   the view under the record's lock, so no later write of it reaches the view first;
//! - records changed from outside (the CLI, another instance, an operator's edit) are
//!   told by an inotify watch on the registry directory: each call drains it (one
//!   non-blocking `read` when nothing happened) and reads again only the files it
//!   names, and not even those when their `stat` shows the very file this process wrote.
//!
//! The first call in a process reads every record once to find the live ones, and so
//! does a call after the watch lost events (a queue overflow, the directory removed or
//! moved); where no watch can be set (not Linux, out of inotify instances) every call
//! lists the registry as [`StateStore::list_local_records`] does (a `stat` per unchanged
//! file), and that is logged once. A file that does not parse reads as absent
//! here; the readers that take its lock quarantine it. Nothing here reads a closed
//! record again unless a change to its file is told: an event naming an ended item asks
//! for it by name ([`StateStore::load_local_record`]).

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use loop_core::record::{Endpoint, LocalRecord};

use crate::StateStore;
use crate::error::StoreError;
use crate::layout::record_slug;
use crate::local::{FileIdentity, RecordFile, parse_local};
use crate::watch;

/// The view, shared by a store's clones.
#[derive(Debug, Default)]
pub(crate) struct LiveView {
    /// Held for a call's drain and re-reads, and by a writer handing over its record
    /// (under that record's `flock`); never across a lock of a record file.
    state: Mutex<View>,
}

#[derive(Debug, Default)]
struct View {
    /// The registry directory's watch; `None` until the view has read every record, so
    /// the next call does.
    watch: Option<watch::Watch>,
    /// The records with a live endpoint, by slug, each with the identity of its file when
    /// known.
    live: HashMap<String, Live>,
    /// The identity of the files of records this process wrote and that hold no live
    /// endpoint, since the watch was last drained: their change needs no read.
    written: HashMap<String, FileIdentity>,
    /// Whether the watch could not be set and that was logged.
    unwatched_told: bool,
}

#[derive(Debug)]
struct Live {
    identity: Option<FileIdentity>,
    record: Arc<LocalRecord>,
}

impl View {
    /// Keeps `record` (read or written) when it holds a live endpoint, else forgets it.
    fn keep(
        &mut self,
        slug: &str,
        identity: Option<FileIdentity>,
        record: Option<Arc<LocalRecord>>,
    ) {
        match record {
            Some(record) if holds_live_endpoint(&record) => {
                self.live.insert(slug.to_owned(), Live { identity, record });
            }
            _ => {
                self.live.remove(slug);
            }
        }
    }
}

impl StateStore {
    /// The session records holding a live endpoint (active or paused; the record's own or
    /// a pull request's), sorted by ref, from the live view (module doc): closed records
    /// are neither listed nor read.
    pub fn live_records(&self) -> Result<Vec<Arc<LocalRecord>>, StoreError> {
        self.adopt_legacy_sessions();
        let mut view = self.live.state.lock().unwrap_or_else(PoisonError::into_inner);
        let told = match view.watch.as_ref().map(watch::Watch::drain) {
            Some(Ok(watch::Drained::Names(names))) => Some(names),
            Some(Ok(watch::Drained::Lost)) | None => None,
            Some(Err(err)) => {
                tracing::warn!(error = %err, "cannot read the registry directory's watch; reading every session record again");
                None
            }
        };
        let read = match told {
            Some(names) => self.read_told(&mut view, names),
            None => self.read_all(&mut view),
        };
        if let Err(err) = read {
            // Part of it may be missing: the next call reads every record.
            view.watch = None;
            return Err(err);
        }
        let mut records: Vec<Arc<LocalRecord>> =
            view.live.values().map(|live| Arc::clone(&live.record)).collect();
        records.sort_by(|a, b| a.work_item.cmp(&b.work_item));
        Ok(records)
    }

    /// Hands the view what this process just wrote to `slug`'s record at `path` (`None`:
    /// deleted). The caller holds the record's lock.
    pub(crate) fn note_local_write(&self, slug: &str, path: &Path, record: Option<LocalRecord>) {
        let identity = record.as_ref().and_then(|_| fs::metadata(path).ok());
        let identity = identity.as_ref().map(FileIdentity::of);
        let mut view = self.live.state.lock().unwrap_or_else(PoisonError::into_inner);
        if view.watch.is_none() {
            // Not read yet (or lost): the next call reads every record.
            return;
        }
        if let (Some(identity), Some(record)) = (identity, &record)
            && !holds_live_endpoint(record)
        {
            view.written.insert(slug.to_owned(), identity);
        }
        view.keep(slug, identity, record.map(Arc::new));
    }

    /// Reads again the record files the watch named, unless a `stat` shows the file the
    /// view already knows.
    fn read_told(&self, view: &mut View, names: BTreeSet<String>) -> Result<(), StoreError> {
        let dir = self.layout.registry_dir();
        for slug in names {
            let known = view.live.get(&slug).and_then(|live| live.identity);
            let known = known.or_else(|| view.written.get(&slug).copied());
            match self.read_record_file(&dir.join(format!("{slug}.json")), known.as_ref())? {
                RecordFile::Unchanged => {}
                RecordFile::Gone => view.keep(&slug, None, None),
                RecordFile::Read(identity, bytes) => {
                    view.keep(&slug, Some(identity), parse_local(&bytes, &slug).ok().map(Arc::new));
                }
            }
        }
        view.written.clear();
        Ok(())
    }

    /// Reads every record file, the watch set first so that nothing written meanwhile is
    /// missed. Without a watch, the registry is listed (its cache spares the files
    /// unchanged since the last call).
    fn read_all(&self, view: &mut View) -> Result<(), StoreError> {
        view.watch = None;
        view.live.clear();
        view.written.clear();
        let dir = self.layout.registry_dir();
        let watch = match watch::Watch::new(dir) {
            Ok(watch) => watch,
            Err(err) => {
                let absent = err.kind() == io::ErrorKind::NotFound;
                if !absent && !view.unwatched_told {
                    view.unwatched_told = true;
                    tracing::warn!(dir = %dir.display(), error = %err, "cannot watch the registry directory; every decision lists the session records");
                }
                for record in self.list_local_records()? {
                    view.keep(&record.work_item.slug(), None, Some(record));
                }
                return Ok(());
            }
        };
        self.count_listing();
        let entries = fs::read_dir(dir).map_err(StoreError::io("list", dir))?;
        for entry in entries {
            let entry = entry.map_err(StoreError::io("list", dir))?;
            let name = entry.file_name();
            let Some(slug) = name.to_str().and_then(record_slug) else { continue };
            if let RecordFile::Read(identity, bytes) = self.read_record_file(&entry.path(), None)? {
                view.keep(slug, Some(identity), parse_local(&bytes, slug).ok().map(Arc::new));
            }
        }
        view.watch = Some(watch);
        Ok(())
    }
}

/// Whether a decision can touch `record`: one of its endpoints is live.
fn holds_live_endpoint(record: &LocalRecord) -> bool {
    record.endpoints.values().any(Endpoint::is_live)
}

//! How every JSON file under the state root is written and read.
//!
//! Writes are atomic: the bytes go to a temp file in the same directory, which is fsynced,
//! renamed over the target, and the directory is fsynced — a crash leaves the old file or
//! the new one, never a torn one. The body is 2-space pretty JSON with a trailing newline,
//! and a write whose bytes equal what is on disk touches nothing (seed 001).
//!
//! Reads never fail on content: a file that does not parse is moved aside to
//! `<name>.corrupt-<UTC timestamp>` (under the file's lock, after re-reading, so a file a
//! writer just fixed is never moved), whoever the read names is told ([`QuarantineReport`]:
//! the store's event log, which writes the error line `state.quarantined`), and the file
//! reads as absent. It is never overwritten unseen. This module sits below the event log:
//! it knows only the trait, never the log.
//!
//! One exception, named for what it is: [`Durability::ProcessDeath`] skips both fsyncs.
//! The rename is still atomic, and a `kill -9` leaves the page cache to the kernel, so the
//! file is old or new after the process dies; only an OS crash or power loss can lose the
//! write (or, on a filesystem that does not order a rename after its data, leave it
//! empty, which then reads as unparsable: quarantined). It is for per-delivery stamps on
//! the dispatch hot path (the session record's `recentDeliveries`); records that hold
//! user intent (portable records, config, rosters) are always written synced.
//!
//! File modes: files under `portable/` are 0644 (meant to be committed and shared); every
//! other file this module creates is 0600 (machine handles, logs). A replacement takes the
//! mode of its kind, whatever the file had, and exactly that mode: the umask does not
//! narrow it.
//!
//! [`write_atomically`] is the same replacement for any bytes and mode, public so that the
//! rest of the-loop (the config file, the harness's trust files) writes files one way.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use jiff::Timestamp;
use serde::Serialize;

use crate::error::StoreError;
use crate::lock::LockGuard;

/// Who may read a file this store creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileMode {
    /// 0644: portable records and the index, meant to be committed.
    Shared,
    /// 0600: everything machine-local.
    Private,
}

impl FileMode {
    pub(crate) fn bits(self) -> u32 {
        match self {
            FileMode::Shared => 0o644,
            FileMode::Private => 0o600,
        }
    }
}

/// Whether a write changed the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Changed,
    Unchanged,
}

/// The on-disk form of every JSON record: 2-space indent and a trailing newline.
pub(crate) fn encode<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<Vec<u8>, StoreError> {
    let mut bytes = serde_json::to_vec_pretty(value)
        .map_err(|source| StoreError::Encode { path: path.to_owned(), source })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Reads a whole file; `None` when it does not exist.
pub(crate) fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(StoreError::io("read", path)(err)),
    }
}

/// What a replacement survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// The temp file and the directory are fsynced: survives an OS crash or power loss.
    Synced,
    /// No fsync: survives the process's death (`kill -9`), not an OS crash (module doc).
    ProcessDeath,
}

/// Writes `value` atomically unless the file already holds exactly these bytes.
pub(crate) fn write_json<T: Serialize + ?Sized>(
    path: &Path,
    value: &T,
    mode: FileMode,
) -> Result<Written, StoreError> {
    write_json_with(path, value, mode, Durability::Synced)
}

/// [`write_json`] with the durability asked for.
pub(crate) fn write_json_with<T: Serialize + ?Sized>(
    path: &Path,
    value: &T,
    mode: FileMode,
    durability: Durability,
) -> Result<Written, StoreError> {
    let bytes = encode(path, value)?;
    if read_bytes(path)?.as_deref() == Some(bytes.as_slice()) {
        return Ok(Written::Unchanged);
    }
    replace(path, &bytes, mode.bits(), durability)?;
    Ok(Written::Changed)
}

/// Replaces `path` with `bytes` so that a crash leaves the old file or the new one, never
/// a torn one: a temp file in the same directory (created if missing) gets exactly `mode`
/// (permission bits; the umask does not narrow them), the bytes, an fsync, and is renamed
/// over `path`; then the directory is fsynced. A symlink at `path` is replaced, not
/// written through: resolve it first to write its target. On failure the temp file is
/// removed and `path` is untouched; the error names the call that failed and its path.
pub fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> Result<(), StoreError> {
    replace(path, bytes, mode, Durability::Synced)
}

/// Temp file in the same directory → mode → write → (fsync) → rename → (fsync the
/// directory).
fn replace(path: &Path, bytes: &[u8], mode: u32, durability: Durability) -> Result<(), StoreError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mode = mode & 0o7777;
    let dir = parent_dir(path);
    fs::create_dir_all(dir).map_err(StoreError::io("create directory", dir))?;
    let name = path.file_name().map(|name| name.to_string_lossy()).unwrap_or_default();
    let temp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&temp)
            .map_err(StoreError::io("create", &temp))?;
        // `open` took the umask off `mode`; put back exactly what was asked for.
        file.set_permissions(Permissions::from_mode(mode))
            .map_err(StoreError::io("set the mode of", &temp))?;
        file.write_all(bytes).map_err(StoreError::io("write", &temp))?;
        if durability == Durability::Synced {
            file.sync_all().map_err(StoreError::io("fsync", &temp))?;
        }
        fs::rename(&temp, path).map_err(StoreError::io("rename into place", path))?;
        match durability {
            Durability::Synced => sync_dir(dir),
            Durability::ProcessDeath => Ok(()),
        }
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Removes the temp files [`replace`] left in `dir` when its process died between
/// creating one and renaming it (`.<name>.<pid>.<n>.tmp` whose process is gone); returns
/// how many. Another live process's are left alone: it may be about to rename them.
pub(crate) fn sweep_orphaned_temp_files(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    let orphaned = |name: &str| {
        let Some(stem) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else {
            return false;
        };
        let mut fields = stem.rsplitn(3, '.');
        let (_counter, pid) = (fields.next(), fields.next());
        let pid = pid.and_then(|p| p.parse::<i32>().ok()).and_then(rustix::process::Pid::from_raw);
        pid.is_some_and(|pid| {
            pid.as_raw_nonzero().get() != std::process::id() as i32
                && rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH)
        })
    };
    entries
        .flatten()
        .filter(|entry| entry.file_name().to_str().is_some_and(orphaned))
        .filter(|entry| fs::remove_file(entry.path()).is_ok())
        .count()
}

/// Removes a file (absent is fine) and fsyncs its directory.
pub(crate) fn remove(path: &Path) -> Result<(), StoreError> {
    match fs::remove_file(path) {
        Ok(()) => sync_dir(parent_dir(path)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(StoreError::io("remove", path)(err)),
    }
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|dir| dir.sync_all()).map_err(StoreError::io("fsync directory", dir))
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Who is told that a file did not parse and was moved aside. The store's event log is
/// (`event_log` implements this); a test can be.
pub(crate) trait QuarantineReport {
    /// `path` did not parse (`error`) and now lies at `moved_to`.
    fn quarantined(&self, path: &Path, moved_to: &Path, error: &str);
}

/// One JSON file kind's read path: parse, or quarantine and read as absent.
pub(crate) struct JsonFile<'a> {
    pub(crate) path: &'a Path,
    /// The sidecar lock every writer of this file holds.
    pub(crate) lock: &'a Path,
    /// Who is told of a quarantine: the store's event log.
    pub(crate) events: &'a dyn QuarantineReport,
}

impl JsonFile<'_> {
    /// Reads and parses without holding the lock; a parse failure is re-checked under the
    /// lock before the file is quarantined.
    pub(crate) fn load<T>(
        &self,
        parse: impl Fn(&[u8]) -> Result<T, String>,
    ) -> Result<Option<T>, StoreError> {
        match self.parsed(&parse)? {
            Some(Err(_)) => {
                let _guard = LockGuard::exclusive(self.lock)?;
                self.load_locked(parse)
            }
            read => Ok(read.and_then(Result::ok)),
        }
    }

    /// Reads and parses; the caller holds the lock, so a parse failure is final.
    pub(crate) fn load_locked<T>(
        &self,
        parse: impl Fn(&[u8]) -> Result<T, String>,
    ) -> Result<Option<T>, StoreError> {
        match self.parsed(&parse)? {
            Some(Err(error)) => {
                quarantine(self.path, &error, self.events)?;
                Ok(None)
            }
            read => Ok(read.and_then(Result::ok)),
        }
    }

    /// The file, parsed: `None` when it does not exist, the parse error when it does not
    /// parse.
    fn parsed<T>(
        &self,
        parse: &impl Fn(&[u8]) -> Result<T, String>,
    ) -> Result<Option<Result<T, String>>, StoreError> {
        Ok(read_bytes(self.path)?.map(|bytes| parse(&bytes)))
    }
}

/// Parses JSON into `T`, reporting the error as text for the quarantine event.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|err| err.to_string())
}

/// Moves `path` aside to `<name>.corrupt-<UTC timestamp>` and tells `events`.
pub(crate) fn quarantine(
    path: &Path,
    error: &str,
    events: &dyn QuarantineReport,
) -> Result<PathBuf, StoreError> {
    let stamp = Timestamp::now().strftime("%Y%m%dT%H%M%S%.3fZ").to_string();
    let name = path.file_name().map(|name| name.to_string_lossy()).unwrap_or_default();
    let aside = path.with_file_name(format!("{name}.corrupt-{stamp}"));
    fs::rename(path, &aside).map_err(StoreError::io("quarantine", path))?;
    tracing::error!(path = %path.display(), moved_to = %aside.display(), error, "quarantined an unreadable state file");
    events.quarantined(path, &aside, error);
    Ok(aside)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// Remembers each quarantine it is told of: `(path, moved_to, error)`.
    #[derive(Default)]
    struct Told(RefCell<Vec<(PathBuf, PathBuf, String)>>);

    impl QuarantineReport for Told {
        fn quarantined(&self, path: &Path, moved_to: &Path, error: &str) {
            self.0.borrow_mut().push((path.to_owned(), moved_to.to_owned(), error.to_owned()));
        }
    }

    #[test]
    fn a_sweep_removes_the_temp_files_of_dead_writers_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let names = [
            format!(".github-octo-app-3.json.{dead}.62.tmp"),
            format!(".github-octo-app-3.json.{}.63.tmp", std::process::id()),
            // pid 1 is always alive: its write may still be renamed.
            ".index.json.1.0.tmp".to_owned(),
            "github-octo-app-3.json".to_owned(),
            ".notes.tmp".to_owned(),
        ];
        for name in &names {
            fs::write(dir.path().join(name), b"{}").unwrap();
        }
        assert_eq!(sweep_orphaned_temp_files(dir.path()), 1);
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut kept = names[1..].to_vec();
        kept.sort();
        assert_eq!(left, kept);
    }

    #[test]
    fn write_atomically_gives_the_bytes_exactly_the_mode_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new/file.txt");
        write_atomically(&path, b"one\n", 0o640).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"one\n");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o640);
        write_atomically(&path, b"two\n", 0o604).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two\n");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o604);
        let names: Vec<_> = fs::read_dir(dir.path().join("new")).unwrap().collect();
        assert_eq!(names.len(), 1, "no temp file left behind");
    }

    #[test]
    fn a_write_is_pretty_json_with_a_trailing_newline_and_the_kinds_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/a.json");
        let value = serde_json::json!({"b": 1});
        assert_eq!(write_json(&path, &value, FileMode::Private).unwrap(), Written::Changed);
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\n  \"b\": 1\n}\n");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let shared = dir.path().join("s.json");
        write_json(&shared, &value, FileMode::Shared).unwrap();
        assert_eq!(fs::metadata(&shared).unwrap().permissions().mode() & 0o777, 0o644);
    }

    #[test]
    fn an_identical_write_touches_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        write_json(&path, &[1, 2], FileMode::Private).unwrap();
        let inode = std::os::unix::fs::MetadataExt::ino(&fs::metadata(&path).unwrap());
        assert_eq!(write_json(&path, &[1, 2], FileMode::Private).unwrap(), Written::Unchanged);
        assert_eq!(std::os::unix::fs::MetadataExt::ino(&fs::metadata(&path).unwrap()), inode);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no temp file left behind");
    }

    #[test]
    fn an_unsynced_write_replaces_the_file_whole_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        write_json(&path, &[1], FileMode::Private).unwrap();
        let inode = std::os::unix::fs::MetadataExt::ino(&fs::metadata(&path).unwrap());
        let written = write_json_with(&path, &[2], FileMode::Private, Durability::ProcessDeath);
        assert_eq!(written.unwrap(), Written::Changed);
        assert_eq!(fs::read_to_string(&path).unwrap(), "[\n  2\n]\n");
        assert_ne!(
            std::os::unix::fs::MetadataExt::ino(&fs::metadata(&path).unwrap()),
            inode,
            "renamed over, never rewritten in place"
        );
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no temp file left behind");
    }

    #[test]
    fn an_unparsable_file_is_moved_aside_reported_and_reads_as_absent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        fs::write(&path, "{ not json").unwrap();
        let told = Told::default();
        let file = JsonFile { path: &path, lock: &dir.path().join("a.lock"), events: &told };
        assert_eq!(file.load(parse_json::<serde_json::Value>).unwrap(), None);
        assert!(!path.exists());
        let aside: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("a.json.corrupt-"))
            .collect();
        assert_eq!(aside.len(), 1, "{aside:?}");
        assert_eq!(fs::read_to_string(dir.path().join(&aside[0])).unwrap(), "{ not json");
        let told = told.0.into_inner();
        assert_eq!(told.len(), 1, "told once: {told:?}");
        assert_eq!((&told[0].0, &told[0].1), (&path, &dir.path().join(&aside[0])));
        assert!(!told[0].2.is_empty(), "with the parse error");
    }
}

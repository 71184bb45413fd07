//! Pidfile locks: the single-instance guard of each daemon (reference §3.7).
//!
//! The pidfile *is* the lock: an exclusive, non-blocking `flock` on the file itself. After
//! locking, the locked inode is checked against the path (a concurrent release may have
//! unlinked it and another starter created a new one); then `<pid>\n` is written and
//! fsynced. A second holder is refused with an error naming the pid in the file; a stale
//! file left by a killed process is simply unlocked, so it is taken over. Release unlinks
//! the path (only if it is still our inode) and then closes the file.
//!
//! Liveness is the lock only: the recorded pid is advisory and trusted only while the lock
//! is held (trap 19). The pidfile is never rewritten by rename — that would swap the inode
//! and silently drop the lock — which is why the heartbeat is a separate file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, flock};
use rustix::io::Errno;

use crate::error::StoreError;

/// How often a lock whose file was replaced under us is retried before giving up.
const ACQUIRE_ATTEMPTS: usize = 5;

/// A held pidfile lock; dropping it releases the lock and removes the file.
#[derive(Debug)]
pub struct PidLock {
    path: PathBuf,
    /// The locked file; closing it releases the lock.
    file: File,
}

/// Who holds a pidfile lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    /// The pid the file names; `None` when the holder has not written it yet.
    pub pid: Option<u32>,
}

impl PidLock {
    /// Takes the lock at `path` for this process, creating the file (0644) and its
    /// directory when missing.
    pub fn acquire(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(StoreError::io("create directory", dir))?;
        }
        for _ in 0..ACQUIRE_ATTEMPTS {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o644)
                .open(path)
                .map_err(StoreError::io("open pidfile", path))?;
            match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                Err(Errno::WOULDBLOCK) => {
                    return Err(StoreError::PidfileHeld {
                        path: path.to_owned(),
                        pid: read_pid(path),
                    });
                }
                Err(errno) => return Err(StoreError::io("lock pidfile", path)(errno.into())),
            }
            if !same_inode(&file, path)? {
                continue;
            }
            file.set_len(0).map_err(StoreError::io("truncate pidfile", path))?;
            (&file)
                .write_all(format!("{}\n", std::process::id()).as_bytes())
                .map_err(StoreError::io("write pidfile", path))?;
            file.sync_all().map_err(StoreError::io("fsync pidfile", path))?;
            return Ok(Self { path: path.to_owned(), file });
        }
        Err(StoreError::PidfileRace { path: path.to_owned() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PidLock {
    fn drop(&mut self) {
        // Unlink first, then close: no one can lock our inode after it left the path.
        if same_inode(&self.file, &self.path).unwrap_or(false)
            && let Err(err) = fs::remove_file(&self.path)
        {
            tracing::warn!(path = %self.path.display(), error = %err, "could not remove the pidfile");
        }
    }
}

/// Whether someone holds the lock at `path`, without ever creating the file. A missing
/// or unlocked file (a stale one from a killed process) is not held.
pub fn lock_holder(path: &Path) -> Result<Option<Holder>, StoreError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(StoreError::io("open pidfile", path)(err)),
    };
    match flock(&file, FlockOperation::NonBlockingLockShared) {
        Ok(()) => Ok(None),
        Err(Errno::WOULDBLOCK) => Ok(Some(Holder { pid: read_pid(path) })),
        Err(errno) => Err(StoreError::io("probe pidfile", path)(errno.into())),
    }
}

fn read_pid(path: &Path) -> Option<u32> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn same_inode(file: &File, path: &Path) -> Result<bool, StoreError> {
    let held = file.metadata().map_err(StoreError::io("stat pidfile", path))?.ino();
    match fs::metadata(path) {
        Ok(meta) => Ok(meta.ino() == held),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(StoreError::io("stat pidfile", path)(err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_open_file_is_refused_naming_the_pid_and_release_removes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/poll.pid");
        let lock = PidLock::acquire(&path).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), format!("{}\n", std::process::id()));
        match PidLock::acquire(&path) {
            Err(StoreError::PidfileHeld { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected PidfileHeld, got {other:?}"),
        }
        assert_eq!(lock_holder(&path).unwrap(), Some(Holder { pid: Some(std::process::id()) }));
        drop(lock);
        assert!(!path.exists());
        assert_eq!(lock_holder(&path).unwrap(), None);
        assert!(!path.exists(), "probing never creates the file");
    }

    #[test]
    fn a_stale_unlocked_pidfile_is_not_held_and_is_taken() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("poll.pid");
        fs::write(&path, "999999\n").unwrap();
        assert_eq!(lock_holder(&path).unwrap(), None);
        let _lock = PidLock::acquire(&path).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), format!("{}\n", std::process::id()));
    }

    /// Reference §6 edge 71, the release side of the inode race: a holder whose file was
    /// replaced at the path (its release unlinked, a new starter created and locked another)
    /// must not remove the newcomer's file when it lets go, or a third starter would take a
    /// lock that is already held.
    #[test]
    fn releasing_a_lock_whose_file_was_replaced_leaves_the_new_holders_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("poll.pid");
        let first = PidLock::acquire(&path).unwrap();
        fs::remove_file(&path).unwrap();
        let second = PidLock::acquire(&path).unwrap();
        drop(first);
        assert!(path.exists(), "the first holder's release removed the second's file");
        assert!(matches!(PidLock::acquire(&path), Err(StoreError::PidfileHeld { .. })));
        drop(second);
        assert!(!path.exists());
    }

    #[test]
    fn the_refusal_message_names_the_file_and_the_pid() {
        let err = StoreError::PidfileHeld { path: "/s/poll.pid".into(), pid: Some(42) };
        assert_eq!(err.to_string(), "`/s/poll.pid` is locked by another running process (pid 42)");
    }
}

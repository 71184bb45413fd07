//! Inter-process exclusion for read-modify-write: a blocking exclusive `flock` on a
//! sidecar lock file.
//!
//! Records are replaced by rename, which swaps the inode, so the lock is never taken on
//! the record itself but on a separate, never-replaced `*.lock` file. `flock` locks belong
//! to an open file description, so two threads of one process exclude each other as well
//! as two processes do. The lock is released when the guard is dropped (the file is
//! closed). Lock files are left in place: removing one would let two holders lock two
//! different inodes.
//!
//! This blocks the calling thread; async callers go through `spawn_blocking`.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rustix::fs::{FlockOperation, flock};

use crate::error::StoreError;

/// Holds an exclusive lock until dropped.
#[derive(Debug)]
pub(crate) struct LockGuard {
    /// Closing this file releases the lock.
    _file: File,
}

impl LockGuard {
    /// Blocks until the exclusive lock on `path` is ours, creating the file (0600) and its
    /// directory when missing.
    pub(crate) fn exclusive(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(StoreError::io("create directory", dir))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(StoreError::io("open lock file", path))?;
        flock(&file, FlockOperation::LockExclusive)
            .map_err(|errno| StoreError::io("lock", path)(errno.into()))?;
        Ok(Self { _file: file })
    }
}

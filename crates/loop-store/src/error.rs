//! The one error type of the state store.
//!
//! Every variant names the file it is about, so a message can say what failed where and
//! what to do. A file that merely does not parse is not an error: it is quarantined and
//! reads as absent (see [`crate::json_file`]).

use std::io;
use std::path::PathBuf;

/// Why a state operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A filesystem call failed; `action` says which (`read`, `write`, `rename`, …).
    #[error("could not {action} `{path}`")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// A value could not be encoded as JSON (a bug: record shapes always encode).
    #[error("could not encode the record for `{path}`")]
    Encode {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },

    /// A pidfile lock is held by another live process.
    #[error("`{path}` is locked by another running process{}", pid.map(|pid| format!(" (pid {pid})")).unwrap_or_default())]
    PidfileHeld { path: PathBuf, pid: Option<u32> },

    /// The pidfile kept being replaced while we tried to lock it.
    #[error("`{path}` was replaced while it was being locked; another daemon is starting")]
    PidfileRace { path: PathBuf },
}

impl StoreError {
    /// Wraps an IO error with the action and the path it concerned.
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| StoreError::Io { action, path, source }
    }
}

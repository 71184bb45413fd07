//! The config file on disk: read it, fingerprint it, and re-read it when it changes.
//!
//! Shared by the CLI (`config check|show`, every verb that needs the config) and the
//! service (hot reload, SPEC §3). A missing file is all defaults; a file that cannot be
//! read or does not validate is an error naming the path. Change detection is the SHA-256
//! of the file's bytes, checked when the caller asks (per event, per poll cycle) — no
//! watcher thread. A reload that fails keeps the previous config and says why.
//!
//! This module reads files only; parsing and validation are `loop_core::config`'s, and
//! printing is the caller's.

use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The variable naming the CLI config file (`--config`'s twin); the service sets it in
/// every session's pane.
pub const CONFIG_ENV: &str = "THE_LOOP_CLI_CONFIG";

use loop_core::config::{self, Config, ConfigError, Loaded, Problem};
use loop_store::StoreError;
use sha2::{Digest, Sha256};

/// Why a config file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("cannot read the config file `{path}`")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the config file `{path}` is not UTF-8 text")]
    NotText { path: PathBuf },
    #[error("cannot write the config file `{path}`")]
    Write {
        path: PathBuf,
        #[source]
        source: StoreError,
    },
    /// `path` is the backup that could not be written.
    #[error("cannot back the config file up to `{path}`")]
    BackUp {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the config file `{path}` is invalid")]
    Invalid {
        path: PathBuf,
        #[source]
        source: ConfigError,
    },
}

impl SourceError {
    /// Every problem with its key path and line, when the file was read but refused.
    pub fn problems(&self) -> &[Problem] {
        match self {
            Self::Invalid { source, .. } => &source.problems,
            Self::Read { .. } | Self::NotText { .. } | Self::Write { .. } | Self::BackUp { .. } => {
                &[]
            }
        }
    }
}

/// The SHA-256 of a file's bytes; `None` when the file does not exist.
pub type Fingerprint = Option<[u8; 32]>;

/// One read of a config file.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    path: PathBuf,
    /// `None` when the file does not exist (all defaults).
    text: Option<String>,
    fingerprint: Fingerprint,
}

impl ConfigFile {
    /// Reads `path`; a missing file is not an error (it means all defaults).
    pub fn read(path: &Path) -> Result<Self, SourceError> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => Some(bytes),
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(source) => return Err(SourceError::Read { path: path.to_owned(), source }),
        };
        let fingerprint = bytes.as_deref().map(|b| Sha256::digest(b).into());
        let text = bytes
            .map(String::from_utf8)
            .transpose()
            .map_err(|_| SourceError::NotText { path: path.to_owned() })?;
        Ok(Self { path: path.to_owned(), text, fingerprint })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file exists (else every key takes its default).
    pub fn exists(&self) -> bool {
        self.text.is_some()
    }

    /// The file's text; empty when it does not exist.
    pub fn text(&self) -> &str {
        self.text.as_deref().unwrap_or("")
    }

    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }

    /// Parses and validates the text (gate included).
    pub fn parse(&self) -> Result<Loaded, SourceError> {
        config::parse(self.text())
            .map_err(|source| SourceError::Invalid { path: self.path.clone(), source })
    }
}

/// Writes a config file atomically ([`loop_store::write_atomically`]: a crash leaves the
/// old file or the new one). Creates the parent directory; an existing file's
/// permissions are kept, a new file is 0600.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), SourceError> {
    let mode =
        std::fs::metadata(path).map(|existing| existing.permissions().mode()).unwrap_or(0o600);
    loop_store::write_atomically(path, text.as_bytes(), mode)
        .map_err(|source| SourceError::Write { path: path.to_owned(), source })
}

/// Copies `path` to `<path>.bak` (replacing an older backup) and returns the backup's path.
pub fn back_up(path: &Path) -> Result<PathBuf, SourceError> {
    let mut backup = path.as_os_str().to_owned();
    backup.push(".bak");
    let backup = PathBuf::from(backup);
    std::fs::copy(path, &backup)
        .map_err(|source| SourceError::BackUp { path: backup.clone(), source })?;
    Ok(backup)
}

/// What [`ConfigSource::reload_if_changed`] found.
#[derive(Debug)]
pub enum Reload {
    /// The file's bytes are the same as at the last successful or failed read.
    Unchanged,
    /// The file changed and the new config is now current.
    Reloaded { config: Arc<Config>, warnings: Vec<Problem> },
    /// The file changed and cannot be used; `keep` is still current.
    Failed { keep: Arc<Config>, error: SourceError },
}

/// A config file and the config last loaded from it.
#[derive(Debug)]
pub struct ConfigSource {
    path: PathBuf,
    /// Fingerprint of the last read, valid or not (a broken file is reported once).
    seen: Fingerprint,
    current: Arc<Config>,
}

impl ConfigSource {
    /// Loads `path` (missing: all defaults). Returns the source and the load's warnings.
    pub fn open(path: impl Into<PathBuf>) -> Result<(Self, Vec<Problem>), SourceError> {
        let path = path.into();
        let file = ConfigFile::read(&path)?;
        let Loaded { config, warnings } = file.parse()?;
        let source = Self { path, seen: file.fingerprint(), current: Arc::new(config) };
        Ok((source, warnings))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The config in force.
    pub fn current(&self) -> &Arc<Config> {
        &self.current
    }

    /// Re-reads the file if its content changed since the last look. A change that does
    /// not load keeps the previous config; it is reported once, not on every call.
    pub fn reload_if_changed(&mut self) -> Reload {
        let file = match ConfigFile::read(&self.path) {
            Ok(file) => file,
            Err(error) => return Reload::Failed { keep: Arc::clone(&self.current), error },
        };
        if file.fingerprint() == self.seen {
            return Reload::Unchanged;
        }
        self.seen = file.fingerprint();
        match file.parse() {
            Ok(Loaded { config, warnings }) => {
                self.current = Arc::new(config);
                Reload::Reloaded { config: Arc::clone(&self.current), warnings }
            }
            Err(error) => Reload::Failed { keep: Arc::clone(&self.current), error },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "routing:\n  authorizedUsers: [octocat]\n";

    fn source_with(text: Option<&str>) -> (tempfile::TempDir, PathBuf, ConfigSource) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cli-config.yaml");
        if let Some(text) = text {
            std::fs::write(&path, text).unwrap();
        }
        let (source, _) = ConfigSource::open(&path).unwrap();
        (dir, path, source)
    }

    #[test]
    fn a_missing_file_loads_all_defaults() {
        let (_dir, _path, source) = source_with(None);
        assert_eq!(**source.current(), Config::default());
    }

    #[test]
    fn an_untouched_file_is_unchanged() {
        let (_dir, path, mut source) = source_with(Some(VALID));
        assert!(matches!(source.reload_if_changed(), Reload::Unchanged));
        std::fs::write(&path, VALID).unwrap();
        assert!(matches!(source.reload_if_changed(), Reload::Unchanged), "same bytes, same config");
    }

    #[test]
    fn an_edited_valid_file_is_reloaded() {
        let (_dir, path, mut source) = source_with(Some(VALID));
        std::fs::write(&path, "routing:\n  authorizedUsers: [octocat, mona]\n").unwrap();
        let Reload::Reloaded { config, .. } = source.reload_if_changed() else {
            panic!("expected a reload")
        };
        assert_eq!(config.routing.authorized_users.len(), 2);
        assert_eq!(source.current().routing.authorized_users.len(), 2);
        assert!(matches!(source.reload_if_changed(), Reload::Unchanged));
    }

    #[test]
    fn an_edited_invalid_file_fails_and_keeps_the_previous_config() {
        let (_dir, path, mut source) = source_with(Some(VALID));
        std::fs::write(&path, "routing:\n  authorizedUsers: [octocat]\n  enabled: \"yes\"\n")
            .unwrap();
        let Reload::Failed { keep, error } = source.reload_if_changed() else {
            panic!("expected a failure")
        };
        assert_eq!(keep.routing.authorized_users.len(), 1);
        assert_eq!(error.problems().len(), 1);
        assert!(error.problems()[0].to_string().starts_with("routing.enabled:"), "{error:?}");
        assert_eq!(source.current().routing.authorized_users.len(), 1);
        assert!(matches!(source.reload_if_changed(), Reload::Unchanged), "reported once");
    }

    #[test]
    fn a_deleted_file_reloads_as_defaults() {
        let (_dir, path, mut source) = source_with(Some(VALID));
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(source.reload_if_changed(), Reload::Reloaded { .. }));
        assert_eq!(**source.current(), Config::default());
    }

    #[test]
    fn an_atomic_write_creates_the_directory_and_keeps_the_backup_apart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/cli-config.yaml");
        write_atomically(&path, "version: \"0.5.0\"\n").unwrap();
        let backup = back_up(&path).unwrap();
        write_atomically(&path, "{}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}\n");
        assert_eq!(std::fs::read_to_string(&backup).unwrap(), "version: \"0.5.0\"\n");
        assert!(backup.ends_with("cli-config.yaml.bak"));
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(names.len(), 2, "no temp file left behind");
    }

    #[test]
    fn an_unreadable_path_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = ConfigSource::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains(&dir.path().display().to_string()), "{err}");
    }
}

//! Harness trust pre-seeding for Claude Code (`routing.harnessTrust`): marks the spawn
//! directory trusted in Claude's user config so a session never stalls on the trust
//! dialog nobody is watching.
//!
//! Files (all under `CLAUDE_CONFIG_DIR` when it is set, passed in as a value):
//! - user config: `<config dir>/.config.json` if it exists, else
//!   `${CLAUDE_CONFIG_DIR:-$HOME}/.claude.json`;
//! - user settings: `<config dir>/settings.json` (config dir = `CLAUDE_CONFIG_DIR` or
//!   `$HOME/.claude`).
//!
//! Written keys, and nothing else: `projects[<dir>].hasTrustDialogAccepted` and
//! `.hasCompletedProjectOnboarding` for the spawn directory (and its realpath when a
//! symlink makes it differ); `hasTrustDialogAccepted` on the workspace root under the
//! `workspace-root` scope (never when the root is `/` or `$HOME`, nor when it does not
//! contain the directory); and, only when the harness arguments ask for bypass mode (or
//! the operator says `always`), `skipDangerousModePermissionPrompt` in settings plus the
//! legacy `bypassPermissionsModeAccepted` in the user config.
//!
//! Writes merge into the existing JSON, keep every other key, happen only when a value
//! changes (an unchanged file keeps its inode and mtime), replace the real target
//! atomically with [`loop_store::write_atomically`] (symlinks are written through), keep
//! the file's mode (0600 for a new file), and are refused — file untouched — when the file
//! is not a JSON object. This module reads no environment variable itself.

use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use loop_core::config::{BypassAcceptance, HarnessTrustConfig, TrustScope};
use serde_json::{Map, Value};

/// Serialises the read-modify-write of the harness's files between parallel spawns in
/// this process.
static WRITE_LOCK: Mutex<()> = Mutex::new(());

/// Why pre-seeding did not happen.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("no working directory to trust")]
    NoDirectory,
    #[error("could not read `{path}`")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{path}` is not valid JSON; left untouched")]
    NotJson {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("`{path}` does not hold a JSON object (or `{key}` is not an object); left untouched")]
    NotObject { path: PathBuf, key: String },
    #[error("could not write `{path}`")]
    Write {
        path: PathBuf,
        #[source]
        source: loop_store::StoreError,
    },
}

impl loop_core::Hint for TrustError {
    fn hint(&self) -> Option<String> {
        matches!(self, Self::NotJson { .. } | Self::NotObject { .. })
            .then(|| "fix the file, or set `routing.harnessTrust.enabled: false`".to_owned())
    }
}

/// Where Claude Code keeps its files, resolved from `$HOME` and `$CLAUDE_CONFIG_DIR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaudeFiles {
    /// `$CLAUDE_CONFIG_DIR`, else `~/.claude` (session transcripts are under `projects/`).
    pub config_dir: PathBuf,
    pub user_config: PathBuf,
    pub settings: PathBuf,
    /// The user's home, which is never trusted as a root.
    pub home: PathBuf,
}

impl ClaudeFiles {
    /// `claude_config_dir` is the value of `CLAUDE_CONFIG_DIR` (blank counts as unset).
    pub fn locate(home: &Path, claude_config_dir: Option<&str>) -> Self {
        let override_dir =
            claude_config_dir.map(str::trim).filter(|dir| !dir.is_empty()).map(PathBuf::from);
        let config_dir = override_dir.clone().unwrap_or_else(|| home.join(".claude"));
        let dotted = config_dir.join(".config.json");
        let user_config = if dotted.exists() {
            dotted
        } else {
            override_dir.unwrap_or_else(|| home.to_owned()).join(".claude.json")
        };
        let settings = config_dir.join("settings.json");
        Self { config_dir, user_config, settings, home: home.to_owned() }
    }
}

/// `routing.harnessTrust`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrustSettings {
    pub enabled: bool,
    pub scope: TrustScope,
    pub accept_bypass_permissions: BypassAcceptance,
}

impl From<&HarnessTrustConfig> for TrustSettings {
    fn from(config: &HarnessTrustConfig) -> Self {
        Self {
            enabled: config.enabled,
            scope: config.scope,
            accept_bypass_permissions: config.accept_bypass_permissions,
        }
    }
}

/// What pre-seeding changed, one note per change (empty: nothing needed changing).
pub type TrustNotes = Vec<String>;

/// Pre-seeds trust for a Claude Code session starting in `cwd`. `root` is the workspace
/// root (if any); `harness_args` are the arguments the session launches with.
pub fn seed_claude_trust(
    files: &ClaudeFiles,
    settings: &TrustSettings,
    cwd: &Path,
    root: Option<&Path>,
    harness_args: &[String],
) -> Result<TrustNotes, TrustError> {
    if !settings.enabled {
        return Ok(Vec::new());
    }
    if cwd.as_os_str().is_empty() {
        return Err(TrustError::NoDirectory);
    }
    let mut notes = Vec::new();
    let mut projects: Vec<(String, bool)> =
        directory_keys(cwd).into_iter().map(|key| (key, true)).collect();
    if settings.scope == TrustScope::WorkspaceRoot
        && let Some(root) = root
    {
        let root = normalise(root);
        let dir = normalise(cwd);
        if root == Path::new("/") || root == normalise(&files.home) {
            tracing::warn!(root = %root.display(), "workspace root too broad to trust; trusting the directory only");
        } else if dir.starts_with(&root) && !projects.iter().any(|(key, _)| Path::new(key) == root)
        {
            projects.push((root.display().to_string(), false));
        }
    }
    let bypass = match settings.accept_bypass_permissions {
        BypassAcceptance::Always => true,
        BypassAcceptance::Never => false,
        BypassAcceptance::Auto => asks_for_bypass(harness_args),
    };
    let changed = update_json(&files.user_config, |config| {
        let mut changed = Vec::new();
        let projects_map = object_at(config, "projects")?;
        for (key, onboarding) in &projects {
            let entry =
                projects_map.entry(key.clone()).or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(entry) = entry else { return Err(format!("projects.{key}")) };
            let mut names = vec!["hasTrustDialogAccepted"];
            if *onboarding {
                names.push("hasCompletedProjectOnboarding");
            }
            for name in names {
                if set_true(entry, name) {
                    changed.push(format!("trusted `{key}` ({name})"));
                }
            }
        }
        if bypass && set_true(config, "bypassPermissionsModeAccepted") {
            changed.push("accepted the bypass-permissions disclaimer (legacy key)".to_owned());
        }
        Ok(changed)
    })?;
    notes.extend(changed);
    if bypass {
        notes.extend(update_json(&files.settings, |settings| {
            Ok(if set_true(settings, "skipDangerousModePermissionPrompt") {
                vec!["skipped the dangerous-mode permission prompt".to_owned()]
            } else {
                Vec::new()
            })
        })?);
    }
    Ok(notes)
}

/// Whether the arguments turn on bypass mode: `--dangerously-skip-permissions`,
/// `--permission-mode bypassPermissions` or `--permission-mode=bypassPermissions`.
pub fn asks_for_bypass(args: &[String]) -> bool {
    args.iter().enumerate().any(|(at, arg)| {
        arg == "--dangerously-skip-permissions"
            || arg == "--permission-mode=bypassPermissions"
            || (arg == "--permission-mode"
                && args.get(at + 1).is_some_and(|mode| mode == "bypassPermissions"))
    })
}

/// The keys a directory is trusted under: its normalised absolute path, and its
/// realpath when different.
fn directory_keys(dir: &Path) -> Vec<String> {
    let normal = normalise(dir);
    let mut keys = vec![normal.display().to_string()];
    if let Ok(real) = std::fs::canonicalize(&normal)
        && real != normal
    {
        keys.push(real.display().to_string());
    }
    keys
}

/// Removes `.` and resolves `..` lexically.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn set_true(map: &mut Map<String, Value>, key: &str) -> bool {
    if map.get(key) == Some(&Value::Bool(true)) {
        return false;
    }
    map.insert(key.to_owned(), Value::Bool(true));
    true
}

pub(crate) fn object_at<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Result<&'a mut Map<String, Value>, String> {
    match map.entry(key.to_owned()).or_insert_with(|| Value::Object(Map::new())) {
        Value::Object(inner) => Ok(inner),
        _ => Err(key.to_owned()),
    }
}

/// Reads `path` (a missing file is `{}`), lets `mutate` change it, and writes it back
/// atomically only when `mutate` reports changes. `mutate` returns the notes, or the
/// key path of a value that is not an object.
pub(crate) fn update_json(
    path: &Path,
    mutate: impl FnOnce(&mut Map<String, Value>) -> Result<Vec<String>, String>,
) -> Result<Vec<String>, TrustError> {
    // A poisoned lock only means another spawn panicked mid-write; the file itself is
    // replaced atomically, so it is still whole.
    let _guard = WRITE_LOCK.lock().unwrap_or_else(|poison| poison.into_inner());
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let (mut map, mode) = match std::fs::read(&target) {
        Ok(bytes) => {
            let value: Value = serde_json::from_slice(&bytes)
                .map_err(|source| TrustError::NotJson { path: target.clone(), source })?;
            let Value::Object(map) = value else {
                return Err(TrustError::NotObject { path: target, key: "(top level)".into() });
            };
            let mode = std::fs::metadata(&target)
                .map(|meta| std::os::unix::fs::PermissionsExt::mode(&meta.permissions()));
            (map, mode.ok())
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => (Map::new(), None),
        Err(source) => return Err(TrustError::Read { path: target, source }),
    };
    let notes =
        mutate(&mut map).map_err(|key| TrustError::NotObject { path: target.clone(), key })?;
    if notes.is_empty() {
        return Ok(notes);
    }
    write_json(&target, &Value::Object(map), mode.unwrap_or(0o600))?;
    Ok(notes)
}

/// Writes `value` as 2-space JSON with a trailing newline over `target` (already resolved
/// through symlinks), atomically, with `mode`.
fn write_json(target: &Path, value: &Value, mode: u32) -> Result<(), TrustError> {
    // `{:#}` is `serde_json::to_string_pretty`, which cannot fail for a `Value`.
    let text = format!("{value:#}\n");
    loop_store::write_atomically(target, text.as_bytes(), mode)
        .map_err(|source| TrustError::Write { path: target.to_owned(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn bypass_is_recognised_in_three_spellings_only() {
        assert!(asks_for_bypass(&strings(&["--dangerously-skip-permissions"])));
        assert!(asks_for_bypass(&strings(&["--permission-mode", "bypassPermissions"])));
        assert!(asks_for_bypass(&strings(&["--permission-mode=bypassPermissions"])));
        assert!(!asks_for_bypass(&strings(&["--permission-mode"])));
        assert!(!asks_for_bypass(&strings(&["--permission-mode", "acceptEdits"])));
        assert!(!asks_for_bypass(&strings(&["bypassPermissions"])));
    }

    #[test]
    fn files_follow_home_unless_claude_config_dir_moves_them() {
        let home = tempfile::tempdir().unwrap();
        let files = ClaudeFiles::locate(home.path(), None);
        assert_eq!(files.user_config, home.path().join(".claude.json"));
        assert_eq!(files.settings, home.path().join(".claude/settings.json"));
        let custom = home.path().join("cfg");
        let moved = ClaudeFiles::locate(home.path(), Some(custom.to_str().unwrap()));
        assert_eq!(moved.user_config, custom.join(".claude.json"));
        assert_eq!(moved.settings, custom.join("settings.json"));
        assert_eq!(ClaudeFiles::locate(home.path(), Some("  ")), files, "blank is unset");
        std::fs::create_dir_all(&custom).unwrap();
        std::fs::write(custom.join(".config.json"), "{}").unwrap();
        let dotted = ClaudeFiles::locate(home.path(), Some(custom.to_str().unwrap()));
        assert_eq!(
            dotted.user_config,
            custom.join(".config.json"),
            "an existing .config.json wins"
        );
    }

    #[test]
    fn paths_normalise_lexically() {
        assert_eq!(normalise(Path::new("/ws/./a/../b")), Path::new("/ws/b"));
    }
}

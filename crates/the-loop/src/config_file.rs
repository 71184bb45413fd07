//! Which config file this invocation uses, loading it, and handing it to children.
//!
//! Discovery (SPEC §2), first hit wins: `--config PATH` / `THE_LOOP_CLI_CONFIG` (clap
//! merges the two, the flag winning), then `./.the-loop/cli-config.yaml` if it is a
//! regular file, then `~/.the-loop/cli-config.yaml`. The result is made absolute, so a
//! child started from another directory reads the same file; a missing file means every
//! key takes its default.
//!
//! Nothing here runs before clap has parsed the command line, so `--help` and
//! `config migrate` work whatever state the file is in.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use loop_core::Hint;
use loop_core::config::{Config, ConfigError};
use loop_daemon::config_source::{ConfigSource, SourceError};

use crate::cli::GlobalArgs;
use crate::env_vars;
use crate::printer::Printer;

/// Where the config file is looked for under the cwd and under `$HOME`.
const RELATIVE_PATH: &str = ".the-loop/cli-config.yaml";

/// How the config file was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `--config` or `THE_LOOP_CLI_CONFIG`.
    Named,
    /// `./.the-loop/cli-config.yaml`.
    WorkingDirectory,
    /// `~/.the-loop/cli-config.yaml`.
    Home,
}

/// The config file this invocation uses (it may not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigLocation {
    /// Absolute.
    pub path: PathBuf,
    pub origin: Origin,
}

/// Applies the discovery order to explicit inputs (the named path, the cwd, `$HOME`).
pub fn discover(
    named: Option<&Path>,
    cwd: &Path,
    home: Option<&Path>,
) -> anyhow::Result<ConfigLocation> {
    let (path, origin) = if let Some(named) = named {
        (cwd.join(named), Origin::Named)
    } else if cwd.join(RELATIVE_PATH).is_file() {
        (cwd.join(RELATIVE_PATH), Origin::WorkingDirectory)
    } else if let Some(home) = home.filter(|h| !h.as_os_str().is_empty()) {
        (cwd.join(home).join(RELATIVE_PATH), Origin::Home)
    } else {
        anyhow::bail!(
            "cannot find the config file: `{RELATIVE_PATH}` is not in the current directory and `{}` is not set; pass `--config PATH`",
            env_vars::HOME
        );
    };
    let path = std::path::absolute(&path)
        .with_context(|| format!("cannot make the config path `{}` absolute", path.display()))?;
    Ok(ConfigLocation { path, origin })
}

/// [`discover`] for this process: its flags, cwd and `$HOME`.
pub fn locate(global: &GlobalArgs) -> anyhow::Result<ConfigLocation> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let home = std::env::var_os(env_vars::HOME).map(PathBuf::from);
    discover(global.config.as_deref(), &cwd, home.as_deref())
}

/// Where `config init` writes when given no `--path`: the file `--config` /
/// `THE_LOOP_CLI_CONFIG` names, else `./.the-loop/cli-config.yaml` — which discovery then
/// finds first, beside the default `state.root`.
pub fn init_location(global: &GlobalArgs) -> anyhow::Result<PathBuf> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let path = cwd.join(global.config.as_deref().unwrap_or(Path::new(RELATIVE_PATH)));
    std::path::absolute(&path)
        .with_context(|| format!("cannot make the config path `{}` absolute", path.display()))
}

/// The config this invocation runs with, and where it came from.
#[derive(Debug)]
pub struct CliConfig {
    pub location: ConfigLocation,
    pub config: Arc<Config>,
    /// The file as read: the one config source a service built by this process follows.
    pub source: ConfigSource,
}

impl CliConfig {
    /// Finds, reads and validates the config for a verb that needs it, printing its
    /// warnings once. An invalid or stale file is refused: every problem is printed,
    /// with the command that fixes a stale one.
    pub fn load(global: &GlobalArgs, printer: Printer) -> anyhow::Result<Self> {
        let location = locate(global)?;
        // Every problem is printed here, once; the error says only that the file was
        // refused, so it is not listed a second time as the cause.
        let (source, warnings) = ConfigSource::open(&location.path).map_err(|err| match err {
            SourceError::Invalid { path, source } => {
                print_refusal(&path, &source, printer);
                let count = source.problems.len();
                let problems = if count == 1 { "problem" } else { "problems" };
                anyhow::anyhow!(
                    "the config file `{}` was refused ({count} {problems} above)",
                    path.display()
                )
            }
            other => other.into(),
        })?;
        for warning in &warnings {
            printer.warning(warning);
        }
        Ok(Self { location, config: Arc::clone(source.current()), source })
    }

    /// The environment every child process gets (`Command::envs`), so a spawned service
    /// or daemon reads this same file whatever its cwd (reference trap 3).
    pub fn child_env(&self) -> [(&'static str, OsString); 1] {
        [(env_vars::CLI_CONFIG, self.location.path.clone().into_os_string())]
    }
}

/// Prints every problem of a refused file, then each distinct hint once and how to fix
/// a stale one.
pub fn print_refusal(path: &Path, err: &ConfigError, printer: Printer) {
    for problem in &err.problems {
        printer.error(problem);
    }
    let mut hints: Vec<String> = err.problems.iter().filter_map(Hint::hint).collect();
    hints.dedup();
    for hint in hints {
        printer.hint(hint);
    }
    if err.needs_migration() {
        printer.hint(format!(
            "this file was written for an older version: `{} --config {}` rewrites it (keeping a `.bak`)",
            loop_core::config::MIGRATE_COMMAND,
            path.display()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_path_wins_and_is_made_absolute() {
        let dir = tempfile::tempdir().unwrap();
        let found = discover(Some(Path::new("conf/x.yaml")), dir.path(), None).unwrap();
        assert_eq!(found.path, dir.path().join("conf/x.yaml"));
        assert_eq!(found.origin, Origin::Named);
    }

    #[test]
    fn the_working_directory_file_is_used_only_when_it_is_a_file() {
        let cwd = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(cwd.path().join(RELATIVE_PATH)).unwrap();
        let found = discover(None, cwd.path(), Some(home.path())).unwrap();
        assert_eq!(found.origin, Origin::Home, "a directory of that name is not the config");
        assert_eq!(found.path, home.path().join(RELATIVE_PATH));

        let cwd = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(cwd.path().join(".the-loop")).unwrap();
        std::fs::write(cwd.path().join(RELATIVE_PATH), "{}").unwrap();
        let found = discover(None, cwd.path(), Some(home.path())).unwrap();
        assert_eq!(found.origin, Origin::WorkingDirectory);
    }

    #[test]
    fn without_home_or_a_local_file_discovery_says_what_to_pass() {
        let cwd = tempfile::tempdir().unwrap();
        let err = discover(None, cwd.path(), None).unwrap_err().to_string();
        assert!(err.contains("--config"), "{err}");
    }

    #[test]
    fn children_get_the_resolved_absolute_path() {
        let location = ConfigLocation {
            path: PathBuf::from("/etc/loop/cli-config.yaml"),
            origin: Origin::Named,
        };
        let dir = tempfile::tempdir().unwrap();
        let (source, _) = ConfigSource::open(dir.path().join("none.yaml")).unwrap();
        let loaded = CliConfig { location, config: Arc::new(Config::default()), source };
        let [(name, value)] = loaded.child_env();
        assert_eq!(name, "THE_LOOP_CLI_CONFIG");
        assert_eq!(value, "/etc/loop/cli-config.yaml");
    }
}

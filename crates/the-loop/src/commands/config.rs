//! `the-loop config check|show|init|migrate`.
//!
//! Glue only: discovery is `config_file`'s, reading and writing the file is
//! `loop_daemon::config_source`'s, validation and migration are `loop_core::config`'s.
//! `check` and `migrate` must work on a file every other verb refuses.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use loop_core::config::{self, Problem};
use loop_daemon::config_source::{self, ConfigFile, SourceError};
use serde_json::json;

use crate::ExitStatus;
use crate::cli::{ConfigCommand, GlobalArgs};
use crate::config_file::{self, CliConfig};
use crate::printer::Printer;

pub fn run(
    command: ConfigCommand,
    global: &GlobalArgs,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    match command {
        ConfigCommand::Check => check(global, printer),
        ConfigCommand::Show => show(global, printer),
        ConfigCommand::Init { path, force } => init(global, path, force, printer),
        ConfigCommand::Migrate { path, dry_run } => migrate(global, path, dry_run, printer),
    }
}

/// Validates the file: exit 0 when it loads (warnings printed), 2 with every problem.
fn check(global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    let location = config_file::locate(global)?;
    let file = ConfigFile::read(&location.path)?;
    let refusal = match file.parse() {
        Ok(loaded) => {
            if global.json {
                printer.data(verdict_json(&file, &[], &loaded.warnings));
            }
            for warning in &loaded.warnings {
                printer.warning(warning);
            }
            let path = file.path().display();
            if file.exists() {
                let count = loaded.warnings.len();
                printer.info(format!("{path}: valid ({count} warning{})", plural(count)));
            } else {
                printer.info(format!("{path}: no such file; every key takes its default"));
            }
            return Ok(ExitStatus::Success);
        }
        Err(SourceError::Invalid { source, .. }) => source,
        Err(other) => return Err(other.into()),
    };
    if global.json {
        printer.data(verdict_json(&file, &refusal.problems, &refusal.warnings));
    }
    for warning in &refusal.warnings {
        printer.warning(warning);
    }
    config_file::print_refusal(file.path(), &refusal, printer);
    let count = refusal.problems.len();
    printer.error(format!("{}: {count} problem{}", file.path().display(), plural(count)));
    Ok(ExitStatus::CouldNotRun)
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

fn verdict_json(file: &ConfigFile, problems: &[Problem], warnings: &[Problem]) -> String {
    let verdict = json!({
        "path": file.path(),
        "exists": file.exists(),
        "valid": problems.is_empty(),
        "problems": problems,
        "warnings": warnings,
    });
    serde_json::to_string_pretty(&verdict).expect("invariant: the verdict is plain JSON")
}

/// Prints the effective config, every default filled in.
fn show(global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    let loaded = CliConfig::load(global, printer)?;
    let doc = loaded.config.to_json();
    if global.json {
        printer
            .data(serde_json::to_string_pretty(&doc).expect("invariant: the config is plain JSON"));
    } else {
        printer.data(format!(
            "# effective config from {}\n{}",
            loaded.location.path.display(),
            config::to_yaml(&doc).trim_end()
        ));
    }
    Ok(ExitStatus::Success)
}

/// Writes the commented starter config.
fn init(
    global: &GlobalArgs,
    path: Option<PathBuf>,
    force: bool,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let target = match path {
        Some(path) => absolute(&path)?,
        None => config_file::init_location(global)?,
    };
    let exists =
        target.try_exists().with_context(|| format!("cannot check `{}`", target.display()))?;
    if exists && !force {
        printer.error(format!("`{}` already exists; nothing written", target.display()));
        printer.hint("pass `--force` to replace it (the old file is kept as `<file>.bak`)");
        return Ok(ExitStatus::CouldNotRun);
    }
    if exists {
        let backup = config_source::back_up(&target)?;
        printer.info(format!("kept the old file as {}", backup.display()));
    }
    config_source::write_atomically(&target, config::STARTER)?;
    printer.info(format!("wrote a starter config to {}", target.display()));
    printer
        .hint("set `routing.authorizedUsers` and `repositories`, then run `the-loop config check`");
    Ok(ExitStatus::Success)
}

/// Rewrites a file written for an older version; reports every change.
fn migrate(
    global: &GlobalArgs,
    path: Option<PathBuf>,
    dry_run: bool,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let target = target_path(global, path)?;
    let file = ConfigFile::read(&target)?;
    if !file.exists() {
        printer.error(format!("no config file at `{}`: nothing to migrate", target.display()));
        return Ok(ExitStatus::CouldNotRun);
    }
    let doc = match config::parse_document(file.text()) {
        Ok(doc) => doc,
        Err(err) => {
            config_file::print_refusal(&target, &err, printer);
            return Ok(ExitStatus::CouldNotRun);
        }
    };
    let (migrated, changes) = config::migrate(doc);
    if changes.is_empty() {
        printer.info("config is already current; nothing to migrate");
        return Ok(ExitStatus::Success);
    }
    for change in &changes {
        printer.info(format!("  {change}"));
    }
    let text = format!(
        "# Migrated to version {} by `{}`; comments of the original are in the `.bak` file.\n{}",
        config::CURRENT_VERSION,
        config::MIGRATE_COMMAND,
        config::to_yaml(&migrated)
    );
    if dry_run {
        printer.data(text.trim_end());
        printer.info(format!("dry run: {} changes, nothing written", changes.len()));
        return Ok(ExitStatus::Success);
    }
    let backup = config_source::back_up(&target)?;
    config_source::write_atomically(&target, &text)?;
    printer.info(format!(
        "migrated {} ({} changes); the original is kept as {}",
        target.display(),
        changes.len(),
        backup.display()
    ));
    if let Err(err) = config::parse(&text) {
        for problem in &err.problems {
            printer.warning(problem);
        }
        printer.hint(
            "the migrated file still has problems; fix them, then run `the-loop config check`",
        );
    }
    Ok(ExitStatus::Success)
}

/// `--path` made absolute, else the discovered config path.
fn target_path(global: &GlobalArgs, path: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match path {
        Some(path) => absolute(&path),
        None => Ok(config_file::locate(global)?.path),
    }
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot make `{}` absolute", path.display()))
}

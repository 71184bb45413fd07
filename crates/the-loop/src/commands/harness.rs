//! `the-loop harness install claude | status`: the plugin the binary ships
//! (loop-sessions' `plugin`), installed for a person's own Claude Code on demand, and
//! what is installed where. Sessions the-loop spawns need no install: each is launched
//! with `--plugin-dir` on the files the spawn rewrites (docs/agent-side.md).

use anyhow::Context as _;
use loop_sessions::plugin::{self, PluginSite};
use loop_sessions::trust::ClaudeFiles;
use serde_json::json;

use super::service::environment;
use crate::ExitStatus;
use crate::cli::{GlobalArgs, HarnessCommand, PluginHarness};
use crate::config_file::CliConfig;
use crate::printer::Printer;
use crate::state_root;

pub fn run(
    command: HarnessCommand,
    global: &GlobalArgs,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let CliConfig { config, .. } = CliConfig::load(global, printer)?;
    let env = environment(&config);
    let files = ClaudeFiles::locate(&env.home, env.claude_config_dir.as_deref());
    let site = loop_daemon::service::plugin_site(&config, &state_root::layout(&config))
        .context("cannot name this executable, which the plugin's hook runs")?;
    match command {
        HarnessCommand::Install { harness: PluginHarness::Claude } => {
            install(&files, &site, printer)
        }
        HarnessCommand::Status => {
            let spawns = config.routing.harness_plugins.enabled;
            status(&files, &site, spawns, global.json, printer)
        }
    }
}

fn install(files: &ClaudeFiles, site: &PluginSite, printer: Printer) -> anyhow::Result<ExitStatus> {
    let notes = plugin::seed_claude_plugin(files, site).with_context(|| {
        format!("cannot install the plugin for Claude Code ({})", files.settings.display())
    })?;
    for note in &notes {
        printer.info(note);
    }
    let installed = plugin::status(files, site)?;
    if installed.in_use(site) {
        printer.info(format!(
            "the-loop's plugin is installed: `/the-loop:work-on` in Claude Code (from {})",
            site.marketplace.display()
        ));
        Ok(ExitStatus::Success)
    } else {
        printer.warning(format!(
            "left your settings as they were: {} already names another `{}` marketplace or \
             disables `{}`",
            files.settings.display(),
            plugin::NAME,
            plugin::ENABLED_KEY
        ));
        Ok(ExitStatus::Negative)
    }
}

fn status(
    files: &ClaudeFiles,
    site: &PluginSite,
    spawns: bool,
    as_json: bool,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let installed = plugin::status(files, site).with_context(|| {
        format!("cannot read Claude Code's settings ({})", files.settings.display())
    })?;
    let in_use = installed.in_use(site);
    if as_json {
        printer.data(json!({
            "harness": "claude",
            "marketplace": site.marketplace,
            "pluginDir": site.plugin_dir(),
            "command": site.command_file(),
            "filesCurrent": installed.current,
            "spawnedSessions": spawns,
            "settings": files.settings,
            "registered": installed.marketplace,
            "enabled": installed.enabled,
            "mcpUrl": site.mcp_url,
            "inUse": in_use,
        }));
    } else {
        let yes_no = |b: bool| if b { "yes" } else { "no" };
        printer.data(format!("claude plugin:    {}", site.plugin_dir().display()));
        printer.data(format!(
            "  files current:  {} (rewritten before every spawn)",
            yes_no(installed.current)
        ));
        printer.data(format!(
            "  spawned:        {}",
            if spawns {
                "sessions the-loop spawns load it (`--plugin-dir`): `/the-loop:work-on`, its hooks, the MCP server"
            } else {
                "no — `routing.harnessPlugins.enabled: false`"
            }
        ));
        printer.data(format!("  settings:       {}", files.settings.display()));
        printer.data(format!(
            "  registered:     {}",
            installed.marketplace.as_ref().map_or("no".to_owned(), |m| m.to_string())
        ));
        printer.data(format!(
            "  enabled:        {}",
            installed.enabled.as_ref().map_or("no".to_owned(), |e| e.to_string())
        ));
        printer.data(format!("  MCP server:     {}", site.mcp_url));
        printer.data(format!(
            "  your own:       {}",
            if in_use {
                "installed — Claude Code sessions you start have `/the-loop:work-on`"
            } else {
                "not installed — `the-loop harness install claude` for sessions you start"
            }
        ));
    }
    Ok(if spawns { ExitStatus::Success } else { ExitStatus::Negative })
}

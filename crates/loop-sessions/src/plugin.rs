//! the-loop's Claude Code plugin, shipped inside the binary and kept current by it.
//!
//! The plugin is written as a directory marketplace under the state root
//! (`<state.root>/harness/claude-marketplace/`) and holds what a spawned session relies
//! on: the `/the-loop:work-on` command its spawn prompt names and every command a shipped
//! loop's assignment names (`commands/<name>.md`, one per [`SHIPPED`] command), hooks that
//! report the agent's state (`the-loop hook agent` on every event docs/agent-states.md
//! reads) and record a pull request the session creates (`the-loop hook link-pr`), each by
//! this binary's absolute path, and the registration of the-loop's MCP server. Before each Claude
//! spawn the files are rewritten where they differ, and the session is launched with
//! `--plugin-dir` on them: loaded from its first second, for that session alone, with no
//! install and nothing written to the user's settings (`harness.plugin_registered` /
//! `harness.plugin_failed`). A plugin installed in Claude's settings instead is copied
//! into Claude's cache on a later start and not reloaded until its version changes — so
//! a first session would run without it.
//!
//! `the-loop harness install claude` installs the same files for the sessions a person
//! starts: Claude's user settings get `extraKnownMarketplaces["the-loop"]` and
//! `enabledPlugins["the-loop@the-loop"]`, each only when absent (an operator's `false`
//! stands; an unparsable settings file is left untouched), through the same
//! non-destructive writer as trust pre-seeding (docs/agent-side.md). The manifest's
//! version changes with the files, so Claude re-caches an updated plugin.

use std::path::{Path, PathBuf};

use loop_core::slash::{SHIPPED, SlashCommand, WORK_ON};
use serde_json::{Value, json};

use crate::trust::{ClaudeFiles, TrustError, TrustNotes, object_at, update_json};

/// The marketplace's name, and the plugin's.
pub const NAME: &str = "the-loop";
/// The `enabledPlugins` key: `<plugin>@<marketplace>`.
pub const ENABLED_KEY: &str = "the-loop@the-loop";

/// Why the plugin could not be written or registered.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("could not write the plugin file `{path}`")]
    Files {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Settings(#[from] TrustError),
}

impl loop_core::Hint for PluginError {
    fn hint(&self) -> Option<String> {
        match self {
            Self::Settings(TrustError::NotJson { .. } | TrustError::NotObject { .. }) => {
                Some("fix the file, or set `routing.harnessPlugins.enabled: false`".to_owned())
            }
            _ => None,
        }
    }
}

/// Where the plugin lives and what its files point at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSite {
    /// The marketplace root (holds `.claude-plugin/marketplace.json`).
    pub marketplace: PathBuf,
    /// The `the-loop` binary the hook runs (absolute).
    pub bin: PathBuf,
    /// The MCP endpoint of this machine's service.
    pub mcp_url: String,
}

impl PluginSite {
    /// The site under `state_root`.
    pub fn under(state_root: &Path, bin: PathBuf, mcp_url: String) -> Self {
        Self { marketplace: state_root.join("harness").join("claude-marketplace"), bin, mcp_url }
    }

    /// The plugin's own directory.
    pub fn plugin_dir(&self) -> PathBuf {
        self.marketplace.join(NAME)
    }

    /// Where Claude Code finds the `work-on` command.
    pub fn command_file(&self) -> PathBuf {
        self.file_of(&WORK_ON)
    }

    /// Where Claude Code finds `command` (`/the-loop:<name>`).
    pub fn file_of(&self, command: &SlashCommand) -> PathBuf {
        self.plugin_dir().join("commands").join(format!("{}.md", command.name))
    }

    /// Every file of the marketplace, with its content. The manifest's version carries a
    /// fingerprint of the rest: Claude Code caches an installed plugin by version, so a
    /// changed plugin must read as a new version to reach `harness install`'s users.
    fn files(&self) -> Vec<(PathBuf, String)> {
        let description = "the-loop: work on GitHub work items from a session the-loop runs";
        let plugin = self.plugin_dir();
        let bin = shell_quote(&self.bin.display().to_string());
        let mut files = vec![
            (
                self.marketplace.join(".claude-plugin").join("marketplace.json"),
                pretty(&json!({
                    "name": NAME,
                    "owner": {"name": "the-loop"},
                    "description": "the-loop's own plugin, written by the-loop binary",
                    "plugins": [{"name": NAME, "source": format!("./{NAME}"), "description": description}],
                })),
            ),
            (plugin.join("hooks").join("hooks.json"), pretty(&hooks(&bin))),
            (
                plugin.join(".mcp.json"),
                pretty(&json!({"mcpServers": {NAME: {"type": "http", "url": self.mcp_url}}})),
            ),
        ];
        files.extend(SHIPPED.iter().map(|command| (self.file_of(command), command.plugin_file())));
        let version = format!("{}+{:016x}", env!("CARGO_PKG_VERSION"), fingerprint(&files));
        files.push((
            plugin.join(".claude-plugin").join("plugin.json"),
            pretty(&json!({
                "name": NAME,
                "version": version,
                "description": description,
                "author": {"name": "the-loop"},
            })),
        ));
        files
    }

    /// Writes every file whose content differs from the binary's; one note per file
    /// written (none: already current).
    pub fn write(&self) -> Result<Vec<String>, PluginError> {
        let mut notes = Vec::new();
        for (path, content) in self.files() {
            if std::fs::read(&path).is_ok_and(|existing| existing == content.as_bytes()) {
                continue;
            }
            let failed = |source| PluginError::Files { path: path.clone(), source };
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(failed)?;
            }
            loop_store::write_atomically(&path, content.as_bytes(), 0o644).map_err(|err| {
                PluginError::Files { path: path.clone(), source: std::io::Error::other(err) }
            })?;
            notes.push(format!("wrote the plugin file `{}`", path.display()));
        }
        Ok(notes)
    }

    /// Whether every file holds what this binary would write.
    pub fn is_current(&self) -> bool {
        self.files().into_iter().all(|(path, content)| {
            std::fs::read(&path).is_ok_and(|existing| existing == content.as_bytes())
        })
    }
}

/// Writes the plugin where it differs and registers it in Claude's user settings, each
/// key only when absent. The notes say what changed (empty: nothing needed to).
pub fn seed_claude_plugin(
    files: &ClaudeFiles,
    site: &PluginSite,
) -> Result<TrustNotes, PluginError> {
    let mut notes = site.write()?;
    let source =
        json!({"source": {"source": "directory", "path": site.marketplace.display().to_string()}});
    notes.extend(update_json(&files.settings, |settings| {
        let mut changed = Vec::new();
        let marketplaces = object_at(settings, "extraKnownMarketplaces")?;
        if !marketplaces.contains_key(NAME) {
            marketplaces.insert(NAME.to_owned(), source);
            changed.push(format!("registered the `{NAME}` plugin marketplace"));
        }
        let enabled = object_at(settings, "enabledPlugins")?;
        if !enabled.contains_key(ENABLED_KEY) {
            enabled.insert(ENABLED_KEY.to_owned(), Value::Bool(true));
            changed.push(format!("enabled the `{ENABLED_KEY}` plugin"));
        }
        Ok(changed)
    })?);
    Ok(notes)
}

/// What `the-loop harness status` reports about the plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginStatus {
    /// The plugin's files exist and are this binary's.
    pub current: bool,
    /// `extraKnownMarketplaces["the-loop"]` in the settings, as written there.
    pub marketplace: Option<Value>,
    /// `enabledPlugins["the-loop@the-loop"]`, as written there.
    pub enabled: Option<Value>,
}

impl PluginStatus {
    /// Whether Claude Code loads this binary's plugin: current files, our marketplace
    /// registered, the plugin enabled.
    pub fn in_use(&self, site: &PluginSite) -> bool {
        let ours = self
            .marketplace
            .as_ref()
            .and_then(|m| m.pointer("/source/path"))
            .and_then(Value::as_str)
            == Some(site.marketplace.display().to_string().as_str());
        self.current && ours && self.enabled == Some(Value::Bool(true))
    }
}

/// Reads what is installed (nothing is written).
pub fn status(files: &ClaudeFiles, site: &PluginSite) -> Result<PluginStatus, TrustError> {
    let settings = match std::fs::read(&files.settings) {
        Ok(bytes) => serde_json::from_slice::<Value>(&bytes)
            .map_err(|source| TrustError::NotJson { path: files.settings.clone(), source })?,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Value::Null,
        Err(source) => return Err(TrustError::Read { path: files.settings.clone(), source }),
    };
    Ok(PluginStatus {
        current: site.is_current(),
        marketplace: settings.pointer(&format!("/extraKnownMarketplaces/{NAME}")).cloned(),
        enabled: settings.get("enabledPlugins").and_then(|e| e.get(ENABLED_KEY)).cloned(),
    })
}

/// The plugin's hooks: every event the agent's state is read from runs `hook agent`
/// (a permission request waits up to a day for its answer from the work item), and a
/// tool call that may have created a pull request also runs `hook link-pr`.
fn hooks(bin: &str) -> Value {
    let agent = |timeout: u32| json!({"type": "command", "command": format!("{bin} hook agent"), "timeout": timeout});
    let mut events = serde_json::Map::new();
    for event in loop_core::agent_state::hook::EVENTS {
        let timeout = if event == "PermissionRequest" { 86_400 } else { 10 };
        events.insert(event.to_owned(), json!([{"hooks": [agent(timeout)]}]));
    }
    let link_pr = json!({
        "matcher": "Bash|mcp__.*",
        "hooks": [{"type": "command", "command": format!("{bin} hook link-pr"), "timeout": 30}],
    });
    if let Some(Value::Array(post)) = events.get_mut("PostToolUse") {
        post.push(link_pr);
    }
    json!({"hooks": events})
}

/// FNV-1a over every file's path and content: stable across builds and machines.
fn fingerprint(files: &[(PathBuf, String)]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (path, content) in files {
        for byte in path.as_os_str().as_encoded_bytes().iter().chain(content.as_bytes()) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

fn pretty(value: &Value) -> String {
    format!("{value:#}\n")
}

/// `text` as one word for a POSIX shell.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_runs_this_binary_by_its_quoted_path() {
        let site =
            PluginSite::under(Path::new("/s"), PathBuf::from("/opt/it's/the-loop"), "u".into());
        let hooks =
            site.files().into_iter().find(|(p, _)| p.ends_with("hooks/hooks.json")).unwrap().1;
        assert!(hooks.contains(r#""'/opt/it'\\''s/the-loop' hook link-pr""#), "{hooks}");
        let hooks: Value = serde_json::from_str(&hooks).unwrap();
        for event in loop_core::agent_state::hook::EVENTS {
            let command = hooks.pointer(&format!("/hooks/{event}/0/hooks/0/command"));
            assert_eq!(command, Some(&json!("'/opt/it'\\''s/the-loop' hook agent")), "{event}");
        }
        let patience = hooks.pointer("/hooks/PermissionRequest/0/hooks/0/timeout");
        assert_eq!(patience, Some(&json!(86_400)));
    }
}

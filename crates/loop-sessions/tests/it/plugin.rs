//! the-loop's Claude Code plugin against real files in a private HOME: written from the
//! binary where it differs, registered once, an operator's `false` kept, an unparsable
//! settings file left byte for byte.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use loop_core::graph::LoopName;
use loop_sessions::plugin::{self, PluginError, PluginSite};
use loop_sessions::trust::{ClaudeFiles, TrustError};
use serde_json::{Value, json};

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        Self { dir: tempfile::tempdir().expect("temp dir") }
    }
    fn files(&self) -> ClaudeFiles {
        ClaudeFiles::locate(self.dir.path(), None)
    }
    fn site(&self) -> PluginSite {
        PluginSite::under(
            &self.dir.path().join("state"),
            PathBuf::from("/opt/bin/the-loop"),
            "http://127.0.0.1:4114/mcp".to_owned(),
        )
    }
    fn settings(&self) -> Value {
        read(&self.files().settings)
    }
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("file exists")).expect("json")
}

#[test]
fn a_spawn_writes_the_plugin_and_registers_it_once() {
    let home = Home::new();
    let (files, site) = (home.files(), home.site());
    let notes = plugin::seed_claude_plugin(&files, &site).expect("seeded");
    assert!(notes.iter().any(|n| n.contains("registered")), "{notes:?}");
    let command = std::fs::read_to_string(site.command_file()).expect("work-on.md");
    assert!(command.starts_with("---\ndescription:"), "{command}");
    assert!(command.contains("$ARGUMENTS") && command.contains("the-loop ask"), "{command}");
    let hooks = read(&site.plugin_dir().join("hooks/hooks.json"));
    assert_eq!(
        hooks["hooks"]["PostToolUse"][1]["hooks"][0]["command"],
        "'/opt/bin/the-loop' hook link-pr"
    );
    assert_eq!(hooks["hooks"]["Stop"][0]["hooks"][0]["command"], "'/opt/bin/the-loop' hook agent");
    let mcp = read(&site.plugin_dir().join(".mcp.json"));
    assert_eq!(mcp["mcpServers"]["the-loop"]["url"], "http://127.0.0.1:4114/mcp");
    let marketplace = read(&site.marketplace.join(".claude-plugin/marketplace.json"));
    assert_eq!(marketplace["plugins"][0]["source"], "./the-loop");
    let settings = home.settings();
    assert_eq!(
        settings["extraKnownMarketplaces"]["the-loop"]["source"],
        json!({"source": "directory", "path": site.marketplace.display().to_string()})
    );
    assert_eq!(settings["enabledPlugins"]["the-loop@the-loop"], true);
    assert!(plugin::status(&files, &site).unwrap().in_use(&site));

    let before = std::fs::metadata(&files.settings).unwrap();
    let again = plugin::seed_claude_plugin(&files, &site).expect("seeded again");
    assert!(again.is_empty(), "nothing to change: {again:?}");
    let after = std::fs::metadata(&files.settings).unwrap();
    assert_eq!((before.ino(), before.mtime_nsec()), (after.ino(), after.mtime_nsec()));
}

#[test]
fn an_operators_false_and_other_keys_are_kept() {
    let home = Home::new();
    let files = home.files();
    std::fs::create_dir_all(files.settings.parent().unwrap()).unwrap();
    let mine = json!({
        "model": "opus",
        "enabledPlugins": {"the-loop@the-loop": false, "other@market": true},
        "extraKnownMarketplaces": {"market": {"source": {"source": "github", "repo": "o/r"}}},
    });
    std::fs::write(&files.settings, format!("{mine:#}")).unwrap();
    plugin::seed_claude_plugin(&files, &home.site()).expect("seeded");
    let settings = home.settings();
    assert_eq!(
        settings["enabledPlugins"]["the-loop@the-loop"], false,
        "an operator's false stands"
    );
    assert_eq!(settings["enabledPlugins"]["other@market"], true);
    assert_eq!(settings["model"], "opus");
    assert!(settings["extraKnownMarketplaces"]["market"].is_object());
    assert!(settings["extraKnownMarketplaces"]["the-loop"].is_object());
    assert!(!plugin::status(&files, &home.site()).unwrap().in_use(&home.site()));
}

#[test]
fn an_unparsable_settings_file_is_left_untouched() {
    let home = Home::new();
    let files = home.files();
    std::fs::create_dir_all(files.settings.parent().unwrap()).unwrap();
    std::fs::write(&files.settings, "{ not json").unwrap();
    let err = plugin::seed_claude_plugin(&files, &home.site()).unwrap_err();
    assert!(matches!(err, PluginError::Settings(TrustError::NotJson { .. })), "{err}");
    assert!(loop_core::Hint::hint(&err).unwrap().contains("harnessPlugins.enabled: false"));
    assert_eq!(std::fs::read_to_string(&files.settings).unwrap(), "{ not json");
}

#[test]
fn a_stale_file_is_rewritten_and_status_says_so_until_then() {
    let home = Home::new();
    let (files, site) = (home.files(), home.site());
    plugin::seed_claude_plugin(&files, &site).expect("seeded");
    std::fs::write(site.command_file(), "an older binary's command").unwrap();
    assert!(!plugin::status(&files, &site).unwrap().current);
    let notes = plugin::seed_claude_plugin(&files, &site).expect("seeded");
    assert_eq!(notes.len(), 1, "only the stale file: {notes:?}");
    assert!(plugin::status(&files, &site).unwrap().in_use(&site));
}

#[test]
fn every_command_a_shipped_loop_or_prompt_names_is_a_file_of_the_written_plugin() {
    let home = Home::new();
    let site = home.site();
    site.write().expect("written");
    let mut names: Vec<String> = vec!["work-on".to_owned()];
    for name in LoopName::ALL {
        names.extend(name.graph().nodes.iter().filter_map(|node| node.command.clone()));
    }
    for name in names {
        let path = site.plugin_dir().join("commands").join(format!("{name}.md"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("`/the-loop:{name}` has no shipped file: {err}"));
        let body = loop_core::slash::shipped(&name).map(|c| c.body.trim_end()).unwrap_or("?");
        assert!(text.starts_with("---\ndescription: \""), "{name}: {text}");
        assert!(text.contains(body), "{name}: the table's text is the file's");
    }
}

/// The real, pinned Claude Code CLI accepts the written plugin and its marketplace
/// (`claude plugin validate`); skipped, saying so, only where it cannot be installed.
#[test]
fn claude_plugin_validate_accepts_the_written_plugin_and_marketplace() {
    let Some(claude) = loop_sim::test_support::claude_code() else { return };
    let home = Home::new();
    let site = home.site();
    site.write().expect("written");
    for dir in [site.plugin_dir(), site.marketplace.clone()] {
        let out = std::process::Command::new(claude)
            .args(["plugin", "validate"])
            .arg(&dir)
            .env("HOME", home.dir.path())
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .output()
            .expect("claude runs");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "validate {}: {said}", dir.display());
        assert!(!said.to_lowercase().contains("warning"), "validate {}: {said}", dir.display());
    }
}

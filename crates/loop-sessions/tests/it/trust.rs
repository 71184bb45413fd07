//! Claude Code trust pre-seeding against real files in a private HOME.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use loop_core::config::{BypassAcceptance, TrustScope};
use loop_sessions::trust::{ClaudeFiles, TrustError, TrustSettings, seed_claude_trust};
use serde_json::{Value, json};

fn settings() -> TrustSettings {
    TrustSettings {
        enabled: true,
        scope: TrustScope::WorkspaceRoot,
        accept_bypass_permissions: BypassAcceptance::Auto,
    }
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("file exists")).expect("json")
}

/// A HOME with a workspace root and a checkout inside it.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        let home = Self { dir: tempfile::tempdir().expect("temp dir") };
        std::fs::create_dir_all(home.checkout()).expect("checkout dir");
        home
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn root(&self) -> std::path::PathBuf {
        self.path().join("ws")
    }
    fn checkout(&self) -> std::path::PathBuf {
        self.root().join("item")
    }
    fn files(&self) -> ClaudeFiles {
        ClaudeFiles::locate(self.path(), None)
    }
    fn key(&self, path: &Path) -> String {
        std::fs::canonicalize(path).expect("exists").display().to_string()
    }
}

#[test]
fn a_new_config_trusts_the_checkout_with_both_keys_and_the_root_with_one_mode_0600() {
    let home = Home::new();
    let notes =
        seed_claude_trust(&home.files(), &settings(), &home.checkout(), Some(&home.root()), &[])
            .expect("seeded");
    assert!(!notes.is_empty());
    let config = read(&home.files().user_config);
    let projects = &config["projects"];
    assert_eq!(
        projects[home.key(&home.checkout())],
        json!({"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true})
    );
    assert_eq!(projects[home.key(&home.root())], json!({"hasTrustDialogAccepted": true}));
    let mode = std::fs::metadata(&home.files().user_config).expect("meta").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(!home.files().settings.exists(), "no bypass asked, no settings written");
}

#[test]
fn the_directory_scope_trusts_only_the_checkout() {
    let home = Home::new();
    let scope = TrustSettings { scope: TrustScope::Directory, ..settings() };
    seed_claude_trust(&home.files(), &scope, &home.checkout(), Some(&home.root()), &[])
        .expect("seeded");
    let projects = read(&home.files().user_config)["projects"].as_object().expect("object").clone();
    assert_eq!(projects.len(), 1);
}

#[test]
fn home_slash_and_a_root_not_containing_the_checkout_are_never_trusted() {
    let home = Home::new();
    for root in [home.path().to_owned(), "/".into(), home.path().join("ws-other")] {
        seed_claude_trust(&home.files(), &settings(), &home.checkout(), Some(&root), &[])
            .expect("seeded");
    }
    let projects = read(&home.files().user_config)["projects"].as_object().expect("object").clone();
    assert_eq!(projects.keys().collect::<Vec<_>>(), [&home.key(&home.checkout())]);
}

#[test]
fn a_repeat_writes_nothing_and_keeps_inode_and_mtime() {
    let home = Home::new();
    seed_claude_trust(&home.files(), &settings(), &home.checkout(), Some(&home.root()), &[])
        .expect("seeded");
    let before = std::fs::metadata(&home.files().user_config).expect("meta");
    let notes =
        seed_claude_trust(&home.files(), &settings(), &home.checkout(), Some(&home.root()), &[])
            .expect("again");
    assert!(notes.is_empty());
    let after = std::fs::metadata(&home.files().user_config).expect("meta");
    assert_eq!((before.ino(), before.mtime_nsec()), (after.ino(), after.mtime_nsec()));
}

#[test]
fn unrelated_keys_projects_and_file_mode_are_preserved() {
    let home = Home::new();
    let config = home.files().user_config;
    let existing = json!({"theme": "dark", "projects": {"/elsewhere": {"allowedTools": ["x"]}}});
    std::fs::write(&config, existing.to_string()).expect("write");
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    seed_claude_trust(&home.files(), &settings(), &home.checkout(), None, &[]).expect("seeded");
    let written = read(&config);
    assert_eq!(written["theme"], "dark");
    assert_eq!(written["projects"]["/elsewhere"], json!({"allowedTools": ["x"]}));
    assert_eq!(std::fs::metadata(&config).expect("meta").permissions().mode() & 0o777, 0o640);
}

#[test]
fn invalid_json_and_non_objects_are_refused_and_left_byte_identical() {
    let home = Home::new();
    let config = home.files().user_config;
    for (bytes, nested) in
        [(&b"{not json"[..], false), (b"[1, 2]", false), (b"{\"projects\": 3}", true)]
    {
        std::fs::write(&config, bytes).expect("write");
        let err = seed_claude_trust(&home.files(), &settings(), &home.checkout(), None, &[])
            .expect_err("refused");
        match err {
            TrustError::NotJson { .. } => assert!(!nested),
            TrustError::NotObject { .. } => {}
            other => panic!("unexpected {other}"),
        }
        assert_eq!(std::fs::read(&config).expect("read"), bytes);
    }
}

#[test]
fn a_symlinked_config_is_written_through_and_stays_a_link() {
    let home = Home::new();
    let dotfiles = home.path().join("dotfiles");
    std::fs::create_dir(&dotfiles).expect("dir");
    std::fs::write(dotfiles.join("claude.json"), "{}").expect("write");
    std::os::unix::fs::symlink(dotfiles.join("claude.json"), home.files().user_config)
        .expect("link");
    seed_claude_trust(&home.files(), &settings(), &home.checkout(), None, &[]).expect("seeded");
    assert!(
        std::fs::symlink_metadata(home.files().user_config).expect("meta").file_type().is_symlink()
    );
    assert!(read(&dotfiles.join("claude.json"))["projects"].is_object());
}

#[test]
fn the_bypass_disclaimer_is_recorded_only_when_asked_for() {
    let home = Home::new();
    let bypass = vec!["--permission-mode".to_owned(), "bypassPermissions".to_owned()];
    let never = TrustSettings { accept_bypass_permissions: BypassAcceptance::Never, ..settings() };
    seed_claude_trust(&home.files(), &never, &home.checkout(), None, &bypass).expect("seeded");
    assert!(!home.files().settings.exists(), "never overrides the arguments");
    seed_claude_trust(&home.files(), &settings(), &home.checkout(), None, &bypass).expect("seeded");
    assert_eq!(read(&home.files().settings)["skipDangerousModePermissionPrompt"], true);
    assert_eq!(read(&home.files().user_config)["bypassPermissionsModeAccepted"], true);

    let other = Home::new();
    let always =
        TrustSettings { accept_bypass_permissions: BypassAcceptance::Always, ..settings() };
    seed_claude_trust(&other.files(), &always, &other.checkout(), None, &[]).expect("seeded");
    assert_eq!(read(&other.files().settings)["skipDangerousModePermissionPrompt"], true);
}

#[test]
fn disabled_trust_touches_nothing() {
    let home = Home::new();
    let off = TrustSettings { enabled: false, ..settings() };
    let bypass = vec!["--dangerously-skip-permissions".to_owned()];
    let notes =
        seed_claude_trust(&home.files(), &off, &home.checkout(), Some(&home.root()), &bypass)
            .expect("no-op");
    assert!(notes.is_empty());
    assert!(!home.files().user_config.exists());
    assert!(!home.files().settings.exists());
}

#[test]
fn claude_config_dir_moves_every_file_written() {
    let home = Home::new();
    let custom = home.path().join("claude-config");
    let files = ClaudeFiles::locate(home.path(), Some(custom.to_str().expect("utf-8")));
    let bypass = vec!["--dangerously-skip-permissions".to_owned()];
    seed_claude_trust(&files, &settings(), &home.checkout(), None, &bypass).expect("seeded");
    assert!(custom.join(".claude.json").exists());
    assert!(custom.join("settings.json").exists());
    assert!(!home.path().join(".claude.json").exists());
}

//! Shared context: the stand-in harness binary, a private tmux server per test, bounded
//! polling and record readers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use loop_sessions::{Tmux, TmuxSettings, TmuxSocket};
use tempfile::TempDir;

/// The `loop-stand-in` binary. Cargo does not build another package's binaries for this
/// crate's tests, so it is built here — unless a build newer than the stand-in's two
/// source files exists (a nested cargo waits for the workspace's build lock, which other
/// builds may hold for a long time). When the build cannot run — another crate of the
/// workspace is mid-edit — an existing binary is used.
pub fn stand_in() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
        let binary = target.join("debug/loop-stand-in");
        let sources = ["../loop-sim/src/stand_in.rs", "../loop-sim/src/bin/loop-stand-in.rs"]
            .map(|source| Path::new(env!("CARGO_MANIFEST_DIR")).join(source));
        let modified = |path: &Path| std::fs::metadata(path).and_then(|meta| meta.modified()).ok();
        let fresh = modified(&binary).is_some_and(|built| {
            sources.iter().all(|source| modified(source).is_some_and(|m| m < built))
        });
        if fresh {
            return binary;
        }
        let built = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "loop-sim", "--bin", "loop-stand-in"])
            .status()
            .is_ok_and(|status| status.success());
        assert!(
            built || binary.exists(),
            "building loop-stand-in failed and no earlier build exists at {}",
            binary.display()
        );
        binary
    })
}

/// A private tmux server and a scratch directory; the server is killed on drop.
pub struct Lab {
    pub dir: TempDir,
    pub tmux: Tmux,
}

impl Lab {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let scratch = dir.path().join("scratch");
        std::fs::create_dir(&scratch).expect("scratch dir");
        let mut settings =
            TmuxSettings::new(TmuxSocket::Path(dir.path().join("tmux.sock")), scratch);
        settings.config_file = Some(PathBuf::from("/dev/null"));
        settings.command_timeout = Duration::from_secs(20);
        Self { dir, tmux: Tmux::new(settings) }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The stand-in's argv recording messages to `messages.jsonl` and launches to
    /// `launches.jsonl`, followed by `extra`.
    pub fn stand_in_argv(&self, extra: &[&str]) -> Vec<String> {
        let mut argv = vec![
            stand_in().display().to_string(),
            "--record".into(),
            self.path("messages.jsonl").display().to_string(),
            "--launches".into(),
            self.path("launches.jsonl").display().to_string(),
        ];
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv
    }

    /// Runs a raw tmux command against this lab's server (for test set-up only).
    pub fn tmux_raw(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-S")
            .arg(self.path("tmux.sock"))
            .args(args)
            .output()
            .expect("tmux runs")
    }

    pub fn messages(&self) -> Vec<String> {
        read_lines(&self.path("messages.jsonl"))
            .into_iter()
            .map(|line| line["text"].as_str().expect("text is a string").to_owned())
            .collect()
    }

    pub fn launches(&self) -> Vec<serde_json::Value> {
        read_lines(&self.path("launches.jsonl"))
    }

    pub fn scratch_entries(&self) -> usize {
        std::fs::read_dir(self.path("scratch")).expect("scratch dir").count()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.tmux_raw(&["kill-server"]);
    }
}

/// Reads a JSON-lines file; a missing file has no lines.
pub fn read_lines(path: &Path) -> Vec<serde_json::Value> {
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    text.lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect()
}

/// Polls `check` up to 1500 times, 20 ms apart (30 s, generous for a loaded machine),
/// until it returns `Some`.
pub fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    for _ in 0..1500 {
        if let Some(value) = check() {
            return value;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("gave up waiting for {what}");
}

//! Shared context: a private tmux server per test, readers of (and waits for) what the
//! stand-in harness records, and git run as a test's fixed author. The stand-in binary, the wait and the record reader are
//! every crate's (`loop_sim::test_support`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use loop_sessions::{
    CommandHarness, Launch, LaunchChoice, Liveness, RespawnSettings, SessionSite, Tmux,
    TmuxSettings, TmuxSocket, session,
};
use loop_sim::test_support::{read_lines, stand_in, wait_for};
use tempfile::TempDir;

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

    /// The stand-in as a command harness, fresh with `--session-id` and resumed with
    /// `--resume`; `resume_extra` is added to the resume template.
    pub fn stand_in_harness(&self, resume_extra: &[&str]) -> CommandHarness {
        let mut resume = self.stand_in_argv(&["--resume", "{session_id}"]);
        resume.extend(resume_extra.iter().map(|s| s.to_string()));
        CommandHarness {
            name: "stand-in".into(),
            fresh: self.stand_in_argv(&["--session-id", "{session_id}"]),
            resume: Some(resume),
            transcript: None,
        }
    }

    /// Spawns `harness` fresh at `site` on this lab's tmux, with no model or effort
    /// chosen and `prompt` its first prompt.
    pub fn spawn(
        &self,
        harness: &CommandHarness,
        site: &SessionSite,
        prompt: &str,
        settings: &RespawnSettings,
    ) -> Launch {
        session::spawn_fresh(&self.tmux, harness, site, &LaunchChoice::default(), prompt, settings)
            .expect("spawned")
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
        read_lines(&self.path("launches.jsonl")).values
    }

    /// Waits until the recorded messages satisfy `done`; returns them.
    #[track_caller]
    pub fn wait_for_messages(&self, what: &str, done: impl Fn(&[String]) -> bool) -> Vec<String> {
        wait_for(what, || {
            let messages = self.messages();
            if done(&messages) { Ok(messages) } else { Err(format!("messages {messages:?}")) }
        })
    }

    /// Waits until `target`'s pane is dead (its harness exited or was killed).
    #[track_caller]
    pub fn wait_for_dead_pane(&self, target: &str) {
        wait_for(&format!("the pane of {target} to die"), || match self.tmux.liveness(target) {
            Ok(Liveness::Dead) => Ok(()),
            other => Err(format!("{other:?}")),
        })
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

/// Runs `git -C dir ARGS…` as a fixed author and committer; fails the test on an error.
/// Answers its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

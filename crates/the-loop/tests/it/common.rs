//! Running the built `the-loop` binary in isolation.
//!
//! [`Cli`] owns a temp directory holding a private `HOME` and a private working directory;
//! each run clears the environment of `THE_LOOP_*` (and `HOME`), so nothing of the
//! developer's machine leaks in. A failed expectation prints the command, its exit code,
//! stdout and stderr.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use loop_sim::Sim;
use loop_sim::test_support::{POLL, wait_for_within};

/// A port nothing listens on right now, for a service the test starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// Writes `script` as an executable `sh` script at `path` (a stand-in on a test's PATH).
pub fn executable(path: &Path, script: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{script}\n")).expect("a script");
    let status = Command::new("chmod").arg("+x").arg(path).status();
    assert!(status.is_ok_and(|s| s.success()), "chmod +x {}", path.display());
}

/// Writes `bin/claude`: the binary's stand-in harness (it records what it is given),
/// taking the rest of its arguments from the config's `harnessArgs.claude`.
pub fn stand_in_claude(bin: &Path) {
    executable(
        &bin.join("claude"),
        &format!("exec '{}' stand-in-harness \"$@\"", env!("CARGO_BIN_EXE_the-loop")),
    );
}

/// A private home and working directory for running the binary.
#[derive(Debug)]
pub struct Cli {
    _root: tempfile::TempDir,
    home: PathBuf,
    cwd: PathBuf,
    env: Vec<(String, String)>,
}

impl Cli {
    pub fn new() -> Self {
        let root = tempfile::tempdir().expect("a temp dir for the test");
        let home = root.path().join("home");
        let cwd = root.path().join("work");
        for dir in [&home, &cwd] {
            std::fs::create_dir_all(dir).expect("the test's home and work dirs");
        }
        Self { _root: root, home, cwd, env: Vec::new() }
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Sets an environment variable for every later run.
    pub fn env(&mut self, name: &str, value: impl AsRef<OsStr>) -> &mut Self {
        let value = value.as_ref().to_string_lossy().into_owned();
        self.env.push((name.to_owned(), value));
        self
    }

    /// What a service that runs sessions needs here, for every later run: a token for the
    /// simulator, its own tmux server under `tmux_dir`, and `bin` (its stand-in harness)
    /// first on `PATH`.
    pub fn sessions_env(&mut self, bin: &Path, tmux_dir: &Path) -> &mut Self {
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        self.env("GH_TOKEN", "test-token").env("TMUX_TMPDIR", tmux_dir).env("PATH", path)
    }

    /// Stops setting a variable set with [`Cli::env`].
    pub fn unset(&mut self, name: &str) -> &mut Self {
        self.env.retain(|(key, _)| key != name);
        self
    }

    /// Writes `text` to `relative` under the working directory, creating directories.
    pub fn write(&self, relative: impl AsRef<Path>, text: &str) -> PathBuf {
        let path = self.cwd.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("the fixture's directory");
        }
        std::fs::write(&path, text).expect("the fixture file");
        path
    }

    /// Runs `the-loop ARGS…` in the working directory.
    pub fn run<I, S>(&self, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<String> =
            args.into_iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect();
        let output = self.command(&args).output().expect("the built the-loop binary runs");
        Run {
            args,
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// `the-loop ARGS…` in the working directory with this environment, not yet started
    /// (for long-running verbs a test spawns and signals).
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new(env!("CARGO_BIN_EXE_the-loop"));
        command.args(args).current_dir(&self.cwd);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("THE_LOOP_") {
                command.env_remove(&name);
            }
        }
        command.env("HOME", &self.home);
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }
}

impl Cli {
    /// `the-loop start --foreground` in the background, outside any tmux, its stdout and
    /// stderr into `output`, once it says it is ready (within `patience`). Fails with what
    /// it printed, after `context`, if it exits first.
    pub fn start_foreground(&self, output: &Path, patience: Duration, context: &str) -> Child {
        let file = std::fs::File::create(output).expect("the service's output file");
        let mut child = self
            .command(["start", "--foreground"])
            .env_remove("TMUX")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("a second handle"))
            .stderr(file)
            .spawn()
            .expect("the built the-loop binary starts");
        wait_for_within(patience, POLL, "the service to say it is ready", || {
            let text = std::fs::read_to_string(output).unwrap_or_default();
            if text.contains("the service is ready") {
                return Ok(());
            }
            let exited = child.try_wait().ok().flatten();
            assert!(exited.is_none(), "{context}the service exited ({exited:?}):\n{text}");
            Err(format!("{context}its output so far:\n{text}"))
        });
        child
    }
}

/// Where a [`ServiceSite`] keeps what a test looks at, under the [`Cli`]'s working
/// directory.
#[derive(Debug)]
pub struct ServicePaths {
    /// `state/`, the state root.
    pub root: PathBuf,
    /// `messages.jsonl`: what the stand-in harness was given.
    pub messages: PathBuf,
    /// `tmux/`: the private tmux server's `TMUX_TMPDIR`.
    pub tmux_dir: PathBuf,
    /// The webhook receiver's port.
    pub port: u16,
}

/// A service against the simulator, as the tests that run `start --foreground` set it up.
#[derive(Debug)]
pub struct ServiceSite<'a> {
    pub sim: &'a Sim,
    pub repo: &'a str,
    /// The one login in `routing.authorizedUsers`.
    pub authorized: &'a str,
    /// Whether the poller runs too (every second) beside the webhook receiver.
    pub polling: bool,
    /// The webhook secret, in `THE_LOOP_GH_WEBHOOK_SECRET`.
    pub secret: &'a str,
    /// More keys under `routing:` (indented by two spaces).
    pub routing: &'a str,
    /// More arguments for the stand-in harness, after `--record <messages>`.
    pub harness_args: &'a str,
}

impl ServiceSite<'_> {
    /// Writes the config and sets the environment in `cli`: `bin/claude` (the binary's
    /// stand-in harness) first on `PATH`, a private tmux server, sessions in `work/`, the
    /// receiver on a free port, the simulator as GitHub. Pointing the simulator's webhooks
    /// at the receiver is the caller's ([`ServicePaths::port`]).
    pub fn write(&self, cli: &mut Cli) -> ServicePaths {
        let root = cli.cwd().join("state");
        let (bin, tmux_dir, work) =
            (cli.cwd().join("bin"), cli.cwd().join("tmux"), cli.cwd().join("work"));
        for dir in [&bin, &tmux_dir, &work] {
            std::fs::create_dir_all(dir).expect("a test directory");
        }
        let messages = cli.cwd().join("messages.jsonl");
        stand_in_claude(&bin);
        let port = free_port();
        let quoted = |path: &Path| serde_json::Value::from(path.display().to_string()).to_string();
        cli.write(
            ".the-loop/cli-config.yaml",
            &format!(
                "state:\n  root: {root}\nrepositories: [{repo}]\n\
                 webhooks:\n  ghWebhook:\n    enabled: true\n    port: {port}\nservice:\n  enabled: false\n\
                 polling:\n  enabled: {polling}\n  intervalSeconds: 1\n\
                 integrations:\n  github:\n    api:\n      baseUrl: {base}\n\
                 routing:\n  enabled: true\n  authorizedUsers: [{authorized}]\n  spawnWorkdir: {work}\n  \
                 harnessTrust:\n    enabled: false\n  \
                 harnessArgs:\n    claude: [--record, {messages}{harness_args}]\n{routing}",
                root = quoted(&root),
                repo = self.repo,
                polling = self.polling,
                base = self.sim.url(),
                authorized = self.authorized,
                work = quoted(&work),
                messages = quoted(&messages),
                harness_args = self.harness_args,
                routing = self.routing,
            ),
        );
        cli.env("THE_LOOP_GH_WEBHOOK_SECRET", self.secret).sessions_env(&bin, &tmux_dir);
        ServicePaths { root, messages, tmux_dir, port }
    }
}

/// The outcome of one run.
#[derive(Debug)]
pub struct Run {
    args: Vec<String>,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Asserts the exit code, printing the whole run when it differs.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, Some(code), "unexpected exit code\n{self}");
        self
    }

    /// Asserts stderr contains `needle`.
    #[track_caller]
    pub fn expect_stderr(&self, needle: &str) -> &Self {
        assert!(self.stderr.contains(needle), "stderr lacks {needle:?}\n{self}");
        self
    }

    /// Asserts stdout contains `needle`.
    #[track_caller]
    pub fn expect_stdout(&self, needle: &str) -> &Self {
        assert!(self.stdout.contains(needle), "stdout lacks {needle:?}\n{self}");
        self
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "$ the-loop {}", self.args.join(" "))?;
        writeln!(f, "exit: {:?}", self.code)?;
        writeln!(f, "--- stdout\n{}", self.stdout)?;
        write!(f, "--- stderr\n{}", self.stderr)
    }
}

//! Running the built `the-loop` binary in isolation.
//!
//! [`Cli`] owns a temp directory holding a private `HOME` and a private working directory;
//! each run clears the environment of `THE_LOOP_*` (and `HOME`), so nothing of the
//! developer's machine leaks in. A failed expectation prints the command, its exit code,
//! stdout and stderr.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

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

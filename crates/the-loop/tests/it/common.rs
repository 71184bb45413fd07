//! Running the built `the-loop` binary in isolation.
//!
//! [`Cli`] owns a temp directory holding a private `HOME` and a private working directory;
//! each run clears the environment of `THE_LOOP_*` (and `HOME`), so nothing of the
//! developer's machine leaks in. A failed expectation prints the command, its exit code,
//! stdout and stderr. [`Site`] is a whole machine around it: the simulator, a polling
//! service, the stand-in agent in real tmux.

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use loop_sim::Sim;
use loop_sim::test_support::{git_origin, read_lines, wait_for};
use serde_json::Value;

pub const REPO: &str = "octo/app";
pub const ITEM: &str = "github:octo/app#1";
pub const LABEL: &str = "the-loop: auto-execute";

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

/// A polling service over the simulator (`service.port` free, so parallel tests do not
/// share 4114), whose `claude` is the stand-in agent; `the-loop` on the panes' `PATH`.
/// With `checkouts`, each session runs in a clone of `REPO`, served by the simulator's
/// side as a real git repository, so the process graph is driven.
pub struct Site {
    pub cli: Cli,
    pub sim: Sim,
    pub tmux_dir: PathBuf,
    pub root: PathBuf,
    /// What the stand-in recorded: messages, and the `!` commands it ran.
    pub record: PathBuf,
    /// How the stand-in was launched, one JSON line per launch (`argv`, `cwd`).
    pub launches: PathBuf,
    /// Where the sessions' checkouts are (with `checkouts`).
    pub workspaces: PathBuf,
    /// The served repositories (with `checkouts`): `<origins>/octo/app.git`.
    pub origins: PathBuf,
    /// The control plane's port (the API and `/mcp`).
    pub api_port: u16,
    _runtime: tokio::runtime::Runtime,
}

impl Site {
    pub fn new(checkouts: bool) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let sim = runtime.block_on(Sim::start()).expect("the simulator starts");
        sim.create_repo(REPO).unwrap();
        let mut cli = Cli::new();
        let root = cli.cwd().join("state");
        let bin = cli.cwd().join("bin");
        let tmux_dir = cli.cwd().join("tmux");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&tmux_dir).unwrap();
        let record = cli.cwd().join("agent.jsonl");
        let launches = cli.cwd().join("launches.jsonl");
        let api_port =
            std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let claude = bin.join("claude");
        std::fs::write(
            &claude,
            format!(
                "#!/bin/sh\nexec {} stand-in-harness --record {} --launches {} \"$@\"\n",
                env!("CARGO_BIN_EXE_the-loop"),
                record.display(),
                launches.display()
            ),
        )
        .unwrap();
        Command::new("chmod").arg("+x").arg(&claude).status().unwrap();
        std::fs::write(
            bin.join("the-loop"),
            format!("#!/bin/sh\nexec {} \"$@\"\n", env!("CARGO_BIN_EXE_the-loop")),
        )
        .unwrap();
        Command::new("chmod").arg("+x").arg(bin.join("the-loop")).status().unwrap();
        let (workspaces, origins) = (cli.cwd().join("workspaces"), cli.cwd().join("origins"));
        let workspace = if checkouts {
            let base = git_origin(&origins, REPO);
            format!(
                "  workspace:\n    root: {}\n    strategy: clone\n    cloneUrls:\n      - host: github.com\n        base: {base}\n",
                workspaces.display()
            )
        } else {
            String::new()
        };
        cli.write(
            ".the-loop/cli-config.yaml",
            &format!(
                "state:\n  root: {root}\nrepositories: [{REPO}]\nrouting:\n  enabled: true\n  authorizedUsers: [octocat]\n  spawnOnUnmatched: labeled\n  harnessTrust:\n    enabled: false\n  spawnWorkdir: {work}\n{workspace}polling:\n  enabled: true\n  intervalSeconds: 1\nservice:\n  port: {api_port}\nintegrations:\n  github:\n    api:\n      baseUrl: {base}\n",
                root = root.display(),
                work = cli.cwd().display(),
                base = sim.url(),
            ),
        );
        cli.env("GH_TOKEN", "test-token");
        cli.env("TMUX_TMPDIR", &tmux_dir);
        cli.env("USER", "alice");
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        cli.env("PATH", path);
        Self {
            cli,
            sim,
            tmux_dir,
            root,
            record,
            launches,
            workspaces,
            origins,
            api_port,
            _runtime: runtime,
        }
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.cli.run(args)
    }

    /// Types `line` into issue `number`'s session pane and presses Enter, as a person
    /// (or the agent's own tool use) would.
    pub fn type_into_pane(&self, number: u64, line: &str) {
        let target = format!("=loop-github-octo-app-{number}:");
        for keys in [&["-l", line][..], &["Enter"][..]] {
            let status = Command::new("tmux")
                .args(["send-keys", "-t", &target])
                .args(keys)
                .env("TMUX_TMPDIR", &self.tmux_dir)
                .env_remove("TMUX")
                .status()
                .unwrap();
            assert!(status.success(), "tmux send-keys");
        }
    }

    /// POSTs `body` as JSON to the control plane; the status and the JSON answer.
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        use std::io::{Read as _, Write as _};
        let body = body.to_string();
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.api_port)).unwrap();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            self.api_port,
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        let (head, rest) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        (status, serde_json::from_str(rest).unwrap_or(Value::Null))
    }

    pub fn messages(&self) -> Vec<String> {
        read_lines(&self.record)
            .values
            .iter()
            .filter_map(|line| line["text"].as_str().map(str::to_owned))
            .collect()
    }

    pub fn wait_for_message(&self, needle: &str) -> String {
        wait_for(&format!("a message holding {needle:?}"), || {
            self.messages()
                .into_iter()
                .find(|m| m.contains(needle))
                .ok_or_else(|| format!("messages: {:?}", self.messages()))
        })
    }

    pub fn events(&self, name: &str) -> Vec<Value> {
        read_lines(&self.root.join("logs/events.jsonl"))
            .values
            .iter()
            .filter(|line| line["event"] == name)
            .cloned()
            .collect()
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = self.cli.run(["stop", "--timeout", "10"]);
        let _ = Command::new("tmux")
            .arg("kill-server")
            .stderr(std::process::Stdio::null())
            .env("TMUX_TMPDIR", &self.tmux_dir)
            .env_remove("TMUX")
            .status();
    }
}

//! A user's machine for end-to-end tests: the real binary run as a polling service
//! against one simulated GitHub ([`World`]), with a real agent stand-in in real tmux.
//!
//! A [`Machine`] is a private home, working directory and state root ([`Cli`]), its own
//! tmux server (`TMUX_TMPDIR`), and `bin/` first on `PATH` holding `claude` — the binary's
//! own stand-in agent (`the-loop stand-in-harness`), recording what reaches it and the `!`
//! commands it runs into `agent.jsonl` — and `the-loop` itself, as a session's pane would
//! find it. Several machines may share one world (two instances on one repository).
//!
//! [`Machine::with_claude`] runs the real Claude Code instead, against the world's model
//! stand-in ([`World::model`]), in a home set up as a user's machine is after Claude's
//! first run (onboarding done, the API key approved); folder trust is the daemon's.

use std::path::PathBuf;
use std::process::Command;

use loop_sim::Sim;
use loop_sim::model_api::ModelApi;
use loop_sim::test_support::{git_origin, read_lines, wait_for};
use serde_json::Value;

use crate::common::{Cli, Run, executable, free_port};

/// One simulated GitHub holding `octo/app`, on a runtime of its own (the binary is run
/// from the test's thread).
pub struct World {
    pub sim: Sim,
    runtime: tokio::runtime::Runtime,
}

impl World {
    pub const REPO: &str = "octo/app";

    pub fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the simulator");
        let sim = runtime.block_on(Sim::start()).expect("the simulator starts");
        sim.create_repo(Self::REPO).expect("the repository");
        Self { sim, runtime }
    }

    /// Runs `future` on the simulator's runtime, from the test's thread.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// A stand-in for Anthropic's Messages API on this world's runtime.
    pub fn model(&self) -> ModelApi {
        self.runtime.block_on(ModelApi::start()).expect("the model stand-in starts")
    }
}

/// The agent a machine's sessions run.
pub enum Agent<'a> {
    /// The binary's stand-in agent, recording into `agent.jsonl`.
    StandIn,
    /// The real Claude Code CLI at `cli`, whose model is the stand-in at `model_url`;
    /// signed in as a subscriber (an OAuth token: limits shown as a subscriber sees
    /// them), or with an API key.
    Claude { cli: &'a std::path::Path, model_url: String, subscriber: bool },
}

/// Where a machine's sessions work.
#[derive(Debug, Clone, Copy)]
pub enum Checkouts<'a> {
    /// In the machine's working directory, no checkout.
    None,
    /// In clones of `octo/app`, fetched from its served repository through
    /// `routing.workspace.cloneUrls`.
    Served,
    /// In clones of `octo/app` by its GitHub URL (`https` or `ssh`, `routing.workspace.
    /// cloneProtocol`), which the user's global git config (`url.<base>.insteadOf`,
    /// `from` rewritten) sends to the served repository, as a mirror or SSH setup does.
    Rewritten { protocol: &'a str, from: &'a str },
}

/// The API key the real Claude Code is given (the model stand-in takes any).
const API_KEY: &str = "sk-ant-api03-the-loop-tests-0123456789abcdefghij";
/// A subscriber's token, as `claude setup-token` prints one.
const OAUTH_TOKEN: &str = "sk-ant-oat01-the-loop-tests-0123456789abcdefghij";

/// A machine running the-loop against a [`World`]; stops its service and its tmux server
/// when dropped.
pub struct Machine {
    pub cli: Cli,
    pub root: PathBuf,
    pub tmux_dir: PathBuf,
    /// What the stand-in agent recorded: messages, and the `!` commands it ran.
    pub record: PathBuf,
    /// How the stand-in agent was launched, one JSON line per launch (`argv`, `cwd`).
    pub launches: PathBuf,
    /// Where the sessions' checkouts are ([`Machine::with_checkouts`]).
    pub workspaces: PathBuf,
    /// The repositories served to them: `<origins>/octo/app.git`, seeded from
    /// `<origins>/.seed-octo-app` ([`Machine::with_checkouts`]).
    pub origins: PathBuf,
    /// The control plane's port (the API and `/mcp`), free when the machine was made.
    pub api_port: u16,
}

impl Machine {
    /// A machine polling `octo/app` every second, `octocat` authorized, spawning on the
    /// auto-execute label; `extra` is appended to its config as further top-level
    /// sections (e.g. an `instance:` block).
    pub fn new(world: &World, extra: &str) -> Self {
        Self::build(world, Agent::StandIn, Checkouts::None, "", extra)
    }

    /// A machine whose sessions run the real Claude Code against `model`, each in a clone
    /// of `octo/app`; `routing` is appended to its `routing:` section.
    pub fn with_claude(
        world: &World,
        cli: &std::path::Path,
        model: &ModelApi,
        routing: &str,
    ) -> Self {
        let agent = Agent::Claude { cli, model_url: model.base_url(), subscriber: false };
        Self::build(world, agent, Checkouts::Served, routing, "")
    }

    /// [`Self::with_claude`], signed in as a subscriber: a usage limit is shown with its
    /// reset time and its dialog, as on a Pro or Max plan.
    pub fn with_claude_subscriber(
        world: &World,
        cli: &std::path::Path,
        model: &ModelApi,
        routing: &str,
    ) -> Self {
        let agent = Agent::Claude { cli, model_url: model.base_url(), subscriber: true };
        Self::build(world, agent, Checkouts::Served, routing, "")
    }

    /// A machine whose sessions each run in a clone of `octo/app`, served from a real
    /// git repository on this machine (`routing.workspace`, strategy `clone`), so the
    /// process graph is driven in them; `routing` is appended to its `routing:` section
    /// (keys indented by two spaces).
    pub fn with_checkouts(world: &World, routing: &str) -> Self {
        Self::build(world, Agent::StandIn, Checkouts::Served, routing, "")
    }

    /// A machine whose sessions run in clones made as `checkouts` says.
    pub fn with(world: &World, checkouts: Checkouts<'_>, routing: &str) -> Self {
        Self::build(world, Agent::StandIn, checkouts, routing, "")
    }

    fn build(
        world: &World,
        agent: Agent<'_>,
        checkouts: Checkouts<'_>,
        routing: &str,
        extra: &str,
    ) -> Self {
        let mut cli = Cli::new();
        let root = cli.cwd().join("state");
        let bin = cli.cwd().join("bin");
        let tmux_dir = cli.cwd().join("tmux");
        for dir in [&bin, &tmux_dir] {
            std::fs::create_dir_all(dir).expect("the machine's directories");
        }
        let record = cli.cwd().join("agent.jsonl");
        let launches = cli.cwd().join("launches.jsonl");
        let (workspaces, origins) = (cli.cwd().join("workspaces"), cli.cwd().join("origins"));
        let workspace = match checkouts {
            Checkouts::None => String::new(),
            Checkouts::Served => {
                let base = git_origin(&origins, World::REPO);
                format!(
                    "  workspace:\n    root: {}\n    strategy: clone\n    cloneUrls:\n      - host: github.com\n        base: {base}\n",
                    workspaces.display()
                )
            }
            Checkouts::Rewritten { protocol, from } => {
                let base = git_origin(&origins, World::REPO);
                let config = cli.home().join(".gitconfig");
                std::fs::write(&config, format!("[url \"{base}/\"]\n\tinsteadOf = {from}\n"))
                    .expect("the user's git config");
                cli.env("GIT_CONFIG_GLOBAL", &config);
                format!(
                    "  workspace:\n    root: {}\n    strategy: clone\n    cloneProtocol: {protocol}\n",
                    workspaces.display()
                )
            }
        };
        let api_port = free_port();
        let binary = env!("CARGO_BIN_EXE_the-loop");
        let trust = match &agent {
            Agent::StandIn => {
                executable(
                    &bin.join("claude"),
                    &format!(
                        "exec {binary} stand-in-harness --record {} --launches {} \"$@\"",
                        record.display(),
                        launches.display()
                    ),
                );
                "  harnessTrust:\n    enabled: false\n"
            }
            Agent::Claude { cli: claude, .. } => {
                executable(&bin.join("claude"), &format!("exec '{}' \"$@\"", claude.display()));
                // What a user's machine holds after Claude Code's first run; folder trust
                // for its workspaces is the daemon's to seed.
                let first_run = serde_json::json!({
                    "hasCompletedOnboarding": true,
                    "customApiKeyResponses": {
                        "approved": [&API_KEY[API_KEY.len() - 20..]],
                        "rejected": [],
                    },
                });
                std::fs::write(cli.home().join(".claude.json"), first_run.to_string())
                    .expect("the user's Claude config");
                ""
            }
        };
        executable(&bin.join("the-loop"), &format!("exec {binary} \"$@\""));
        cli.write(
            ".the-loop/cli-config.yaml",
            &format!(
                "state:\n  root: {root}\nrepositories: [{repo}]\nrouting:\n  enabled: true\n  authorizedUsers: [octocat]\n  spawnOnUnmatched: labeled\n{trust}  spawnWorkdir: {work}\n{workspace}{routing}polling:\n  enabled: true\n  intervalSeconds: 1\nservice:\n  port: {api_port}\nintegrations:\n  github:\n    api:\n      baseUrl: {base}\n{extra}",
                root = root.display(),
                repo = World::REPO,
                work = cli.cwd().display(),
                base = world.sim.url(),
            ),
        );
        if let Agent::Claude { model_url, subscriber, .. } = &agent {
            cli.env("ANTHROPIC_BASE_URL", model_url);
            match subscriber {
                true => cli.env("CLAUDE_CODE_OAUTH_TOKEN", OAUTH_TOKEN),
                false => cli.env("ANTHROPIC_API_KEY", API_KEY),
            };
            for quiet in [
                "DISABLE_AUTOUPDATER",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                "DISABLE_TELEMETRY",
                "DISABLE_ERROR_REPORTING",
                "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL",
            ] {
                cli.env(quiet, "1");
            }
        }
        cli.sessions_env(&bin, &tmux_dir).env("USER", "alice");
        Self { cli, root, tmux_dir, record, launches, workspaces, origins, api_port }
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.cli.run(args)
    }

    /// Starts the service in the background and waits for its first poll cycle, so a
    /// comment posted from now on is new to it.
    pub fn start(&self) {
        self.run(&["start"]).expect_code(0);
        wait_for("a first poll cycle", || self.events("poll.cycle").first().cloned().ok_or("none"));
    }

    /// Sends `method path` (with `body` as JSON) to the machine's control plane; the
    /// status and the JSON answer (`null` when it is not JSON).
    pub fn api(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let (status, text) = self.http(method, path, body);
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// [`Self::api`]'s status and the answer's body as text.
    pub fn http(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
        use std::io::{Read as _, Write as _};
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.api_port)).unwrap();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            self.api_port,
            body.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        let (head, rest) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        (status, rest.to_owned())
    }

    /// The event log's lines named `name`, in order.
    pub fn events(&self, name: &str) -> Vec<Value> {
        read_lines(&self.root.join("logs/events.jsonl"))
            .values
            .iter()
            .filter(|line| line["event"] == name)
            .cloned()
            .collect()
    }

    /// The event log's lines, one per line as `event work_item`, for a failed check.
    pub fn trail(&self) -> String {
        let lines = read_lines(&self.root.join("logs/events.jsonl")).values;
        let lines: Vec<String> = lines
            .iter()
            .map(|l| format!("{} {}", l["event"].as_str().unwrap_or("?"), l["work_item"]))
            .collect();
        lines.join("\n")
    }

    /// The messages the stand-in agent received, in order, across its sessions.
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

    /// Types `line` into the pane of tmux target `target` and presses Enter, as a person
    /// (or the agent's own tool use) would.
    pub fn type_into_pane(&self, target: &str, line: &str) {
        for keys in [&["-l", line][..], &["Enter"][..]] {
            let status = self.tmux().args(["send-keys", "-t", target]).args(keys).status();
            assert!(status.is_ok_and(|s| s.success()), "tmux send-keys");
        }
    }

    /// `#{pane_dead}` of tmux target `target`: `1` once its process exited, `0` while it
    /// runs, empty when there is no such pane.
    pub fn tmux_pane_dead(&self, target: &str) -> String {
        let output =
            self.tmux().args(["display-message", "-p", "-t", target, "#{pane_dead}"]).output();
        output.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default()
    }

    /// tmux on this machine's server.
    pub fn tmux(&self) -> Command {
        let mut tmux = Command::new("tmux");
        tmux.env("TMUX_TMPDIR", &self.tmux_dir).env_remove("TMUX");
        tmux
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        let _ = self.cli.run(["stop", "--timeout", "10"]);
        let _ = self.tmux().arg("kill-server").stderr(std::process::Stdio::null()).status();
    }
}

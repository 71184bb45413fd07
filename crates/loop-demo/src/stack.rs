//! The demo's running loop, in this process: a simulated GitHub, the service's parts
//! (webhook receiver and poller over one dispatcher — hybrid mode) and a private tmux
//! server whose sessions run the agent the caller names ([`Agent`]): the stand-in
//! harness (`the-loop stand-in-harness`), or the real Claude Code CLI against loop-sim's
//! Messages API stand-in, in a Claude config directory of the demo's own.
//!
//! Everything lives in one directory ([`Paths`]): the config the parts are built from
//! (also what `the-loop --config … explain` reads afterwards), the state root, the tmux
//! socket and the harness's record of what was pasted. Values the service would take from
//! the environment (the webhook secret, the GitHub token) are passed in, never exported.
//!
//! It decides nothing and narrates nothing: the story drives the simulator and reads the
//! effects. The parts are built and run by loop-daemon's [`Service`], exactly as for
//! `start --foreground`, with the simulator's client and the stand-in agent as its
//! stand-ins; [`Stack::stop`] is its shutdown.

use std::hash::{BuildHasher as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use loop_core::WorkItemRef;
use loop_core::config::Config;
use loop_core::graph::state::spec_id;
use loop_daemon::config_source::ConfigSource;
use loop_daemon::dispatcher::{Claimed, Dispatcher, GraphTarget};
use loop_daemon::receiver::Secret;
use loop_daemon::service::{Environment, Mode, Service, ServiceError, StandIns, Stopped};
use loop_github::{GithubClient, GithubSettings, TokenSource};
use loop_sessions::{ClaudeCode, CommandHarness, Harness, Tmux};
use loop_sim::model_api::ModelApi;
use loop_sim::{Sim, SimSettings, WebhookTarget};
use loop_store::{EventLog, StateLayout, StateStore};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::DemoError;

/// The simulated repository the story plays in.
pub const REPO: &str = "demo/app";
/// The variable the demo config names for the webhook secret (never set: the secret is
/// handed to the receiver and the simulator directly).
const SECRET_ENV: &str = "THE_LOOP_DEMO_WEBHOOK_SECRET";
/// The variable the demo config names for the GitHub token (never set, see above).
const TOKEN_ENV: &str = "THE_LOOP_DEMO_GH_TOKEN";
/// The API key the real Claude Code is given (the model stand-in takes any).
const CLAUDE_API_KEY: &str = "sk-ant-api03-the-loop-demo-0123456789abcdefghijkl";

/// The agent the demo's sessions run.
#[derive(Debug, Clone)]
pub enum Agent {
    /// The stand-in agent: its program and leading arguments (`the-loop
    /// stand-in-harness`); the demo adds where it records and which conversation.
    StandIn(Vec<String>),
    /// The real Claude Code CLI at this path, its model a stand-in the demo runs.
    Claude(PathBuf),
}

/// Every path of one demo run, under its directory.
#[derive(Debug, Clone)]
pub struct Paths {
    pub root: PathBuf,
    pub config: PathBuf,
    pub state: PathBuf,
    pub work: PathBuf,
    pub scratch: PathBuf,
    pub socket: PathBuf,
    /// What the stand-in harness recorded as submitted, one JSON line per message.
    pub messages: PathBuf,
    pub launches: PathBuf,
    /// The demo repository served as a real git repository, which sessions clone.
    pub origins: PathBuf,
    /// The sessions' checkouts (`routing.workspace.root`).
    pub workspaces: PathBuf,
    /// Claude Code's config directory for the demo's sessions (`CLAUDE_CONFIG_DIR`),
    /// with `--agent claude`: the user's own is never touched.
    pub claude: PathBuf,
    /// The launcher of the real Claude Code, pointing it at the model stand-in.
    pub claude_launcher: PathBuf,
}

impl Paths {
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
            config: root.join("cli-config.yaml"),
            state: root.join("state"),
            work: root.join("work"),
            scratch: root.join("scratch"),
            socket: root.join("tmux.sock"),
            messages: root.join("harness").join("messages.jsonl"),
            launches: root.join("harness").join("launches.jsonl"),
            origins: root.join("origins"),
            workspaces: root.join("workspaces"),
            claude: root.join("claude"),
            claude_launcher: root.join("harness").join("claude"),
        }
    }
}

/// Who the story's people are.
#[derive(Debug, Clone)]
pub struct Cast {
    /// In `routing.authorizedUsers`: may start sessions and talk to them.
    pub maintainer: &'static str,
    /// A teammate: merges the pull request, is not authorized.
    pub teammate: &'static str,
    /// Anyone on the internet: not authorized.
    pub stranger: &'static str,
}

pub const CAST: Cast = Cast { maintainer: "alice", teammate: "bob", stranger: "mallory" };

/// The running demo loop.
#[derive(Debug)]
pub struct Stack {
    pub paths: Paths,
    pub sim: Sim,
    pub tmux: Arc<Tmux>,
    pub layout: StateLayout,
    pub config: Arc<Config>,
    /// Where the simulator sends its webhooks.
    pub webhook_url: String,
    /// Where the control plane and its dashboard answer (`http://127.0.0.1:port`).
    pub dashboard_url: String,
    /// The model the real Claude Code talks to, with `--agent claude`.
    pub model: Option<ModelApi>,
    dispatcher: Dispatcher,
    /// The running service (receiver and poller over the dispatcher, holding their locks).
    service: JoinHandle<Result<Stopped, ServiceError>>,
    /// The service's shutdown future holds the other end.
    stop_service: oneshot::Sender<()>,
}

impl Stack {
    /// Starts everything under `paths.root` (which must exist and be empty), the
    /// sessions running `agent`.
    pub async fn start(paths: Paths, agent: &Agent) -> Result<Self, DemoError> {
        let create = |dir: &Path| {
            std::fs::create_dir_all(dir).map_err(|source| DemoError::Io {
                action: "create",
                path: dir.to_owned(),
                source,
            })
        };
        for dir in [&paths.state, &paths.work, &paths.scratch] {
            create(dir)?;
        }
        if let Some(dir) = paths.messages.parent() {
            create(dir)?;
        }
        let listen = |what| move |source| DemoError::Listen { what, source };
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(listen("the simulated GitHub"))?;
        let sim = Sim::serve(listener, SimSettings::default())
            .await
            .map_err(listen("the simulated GitHub"))?;
        sim.create_repo(REPO)
            .map_err(|source| DemoError::Sim { action: "create the demo repository", source })?;
        // Sessions run in clones of it, so the process graph is driven there.
        let clone_base =
            loop_sim::git::serve_repository(&paths.origins, REPO).map_err(|source| {
                DemoError::Io {
                    action: "serve the demo repository with git in",
                    path: paths.origins.clone(),
                    source,
                }
            })?;

        let listener =
            tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.map_err(listen("webhooks"))?;
        let addr = listener.local_addr().map_err(listen("webhooks"))?;
        let api_listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(listen("the control plane"))?;
        let api_port = api_listener.local_addr().map_err(listen("the control plane"))?.port();
        let ports = Ports { webhooks: addr.port(), api: api_port };
        let (harness, model): (Arc<dyn Harness>, _) = match agent {
            Agent::StandIn(program) => (Arc::new(stand_in_harness(&paths, program)), None),
            Agent::Claude(cli) => {
                let model = ModelApi::start().await.map_err(listen("the model stand-in"))?;
                (Arc::new(claude_harness(&paths, cli, &model)?), Some(model))
            }
        };
        let trust = model.is_some();
        std::fs::write(&paths.config, config_text(&paths, &sim.url(), &clone_base, ports, trust))
            .map_err(|source| DemoError::Io {
            action: "write the demo config",
            path: paths.config.clone(),
            source,
        })?;
        // Its warnings are none: a unit test below keeps it so.
        let (source, _) = ConfigSource::open(&paths.config)?;
        let config = Arc::clone(source.current());
        let layout = StateLayout::for_config(&config, None);
        let secret = random_secret();
        let env = Environment {
            scratch_dir: paths.scratch.clone(),
            secret: Secret::from_value(Some(&secret)),
            tmux_socket: Some(paths.socket.clone()),
            tmux_config: Some(PathBuf::from("/dev/null")),
            listener: Some(listener),
            api_listener: Some(api_listener),
            stand_ins: Some(StandIns { github: simulator_client(&sim)?, harness }),
            home: paths.root.clone(),
            claude_config_dir: Some(paths.claude.display().to_string()),
            ..Environment::default()
        };
        let service =
            Service::from_config(source, env, Mode::Serve { hold_processing: false }).await?;
        // The demo config enables the receiver and the control plane, so the service
        // always has both addresses.
        let webhook_url = service.webhook_url().ok_or(DemoError::ServiceLost)?;
        let dashboard_url = service.api_url().ok_or(DemoError::ServiceLost)?;
        let dispatcher = service.dispatcher().clone();
        let tmux = Arc::clone(dispatcher.tmux());
        let (stop_service, stopped) = oneshot::channel::<()>();
        // It narrates nothing: the story reads the effects.
        let service = tokio::spawn(service.run(
            async move {
                let _ = stopped.await;
            },
            |_| {},
        ));
        sim.set_webhook(Some(WebhookTarget { url: webhook_url.clone(), secret: Some(secret) }));

        Ok(Self {
            paths,
            sim,
            tmux,
            layout,
            config,
            webhook_url,
            dashboard_url,
            model,
            dispatcher,
            service,
            stop_service,
        })
    }

    /// Stops the ingresses, lets the dispatcher finish, gives back what it abandoned and
    /// stops the simulator. The tmux server and everything on disk stay.
    pub async fn stop(self) -> Result<(), DemoError> {
        self.sim.set_webhook(None);
        let _ = self.stop_service.send(());
        self.service.await.map_err(|_| DemoError::ServiceLost)??;
        self.sim.shutdown().await;
        Ok(())
    }

    /// What the agent was sent, in order: the stand-in's record of what it received, or
    /// the user messages that reached the model (a turn continuing after a tool is not
    /// a message).
    pub fn received(&self) -> Result<Vec<String>, DemoError> {
        if let Some(model) = &self.model {
            let turns = model.turns().into_iter().filter(|turn| turn.tool_results.is_empty());
            return Ok(turns.filter_map(|turn| turn.user_text).collect());
        }
        match std::fs::read_to_string(&self.paths.messages) {
            Ok(text) => Ok(text
                .lines()
                .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
                .filter_map(|line| line["text"].as_str().map(str::to_owned))
                .collect()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(source) => {
                Err(DemoError::Io { action: "read", path: self.paths.messages.clone(), source })
            }
        }
    }

    /// Waits until the dispatcher has nothing queued or running.
    pub async fn idle(&self) {
        self.dispatcher.idle().await;
    }

    /// The agent's claim that `item`'s current node is done, exactly as `the-loop graph
    /// complete` in its session makes it (the dispatcher's call, judged by the gate under
    /// the state file's lock). `None`: no graph is driven for it.
    pub async fn claim(&self, item: &WorkItemRef) -> Option<Claimed> {
        self.dispatcher.graph_complete(&GraphTarget::session(item.clone()), None, "agent").await
    }

    /// `item`'s spec folder in its session's checkout (`<checkout>/<specDir>/issue-<N>`),
    /// where an agent writes the phase's artifacts.
    pub fn spec_folder(&self, item: &WorkItemRef) -> Result<Option<PathBuf>, DemoError> {
        let store = StateStore::new(self.layout.clone(), EventLog::disabled());
        let record = store.load_local_record(item).map_err(DemoError::Record)?;
        Ok(record
            .and_then(|record| record.own_endpoint().map(|own| own.cwd.clone()))
            .map(|cwd| cwd.join(&self.config.routing.graph.spec_dir).join(spec_id(item.number()))))
    }
}

/// The ports the demo's listeners were bound to.
#[derive(Debug, Clone, Copy)]
struct Ports {
    webhooks: u16,
    api: u16,
}

/// The config of the demo service: hybrid ingress against the simulator, the control
/// plane on its own port, the demo maintainer authorized, each session in a clone of the
/// demo repository (served by git from the demo's directory).
/// `trust`: pre-seed Claude Code's folder trust for the sessions' checkouts (the real
/// Claude Code asks otherwise).
fn config_text(
    paths: &Paths,
    sim_url: &str,
    clone_base: &str,
    ports: Ports,
    trust: bool,
) -> String {
    // JSON strings are YAML double-quoted scalars: any path is written safely.
    let quoted = |path: &Path| serde_json::Value::from(path.display().to_string()).to_string();
    format!(
        "# Written by `the-loop demo`: the service it ran in-process, against a simulated GitHub.\n\
         # `the-loop --config <this file> explain|events` reads what happened.\n\
         repositories: [{REPO}]\n\
         state:\n  root: {state}\n\
         webhooks:\n  ghWebhook:\n    enabled: true\n    port: {webhooks}\n    secretEnv: {SECRET_ENV}\n\
         service:\n  port: {api}\n\
         polling:\n  enabled: true\n  intervalSeconds: 1\n\
         integrations:\n  github:\n    api:\n      baseUrl: {sim_url}\n      tokenEnv: [{TOKEN_ENV}]\n\
         routing:\n  enabled: true\n  authorizedUsers: [{maintainer}]\n  spawnWorkdir: {work}\n  \
         harnessTrust:\n    enabled: {trust}\n  \
         workspace:\n    root: {workspaces}\n    strategy: clone\n    cloneUrls:\n      - host: github.com\n        base: {clone_base}\n",
        state = quoted(&paths.state),
        work = quoted(&paths.work),
        workspaces = quoted(&paths.workspaces),
        clone_base = serde_json::Value::from(clone_base),
        maintainer = CAST.maintainer,
        webhooks = ports.webhooks,
        api = ports.api,
    )
}

/// The real Claude Code at `cli` as the demo's harness: launched through a script that
/// points it at `model` with the demo's own config directory, in which what a user's
/// machine holds after Claude's first run is written (onboarding done, the key
/// approved). Trust for the checkouts is the daemon's pre-seeding, as on a machine.
fn claude_harness(paths: &Paths, cli: &Path, model: &ModelApi) -> Result<ClaudeCode, DemoError> {
    let io = |action, path: &Path| {
        let path = path.to_owned();
        move |source| DemoError::Io { action, path, source }
    };
    std::fs::create_dir_all(&paths.claude).map_err(io("create", &paths.claude))?;
    let first_run = serde_json::json!({
        "hasCompletedOnboarding": true,
        "customApiKeyResponses": {"approved": [&CLAUDE_API_KEY[CLAUDE_API_KEY.len() - 20..]], "rejected": []},
    });
    let user_config = paths.claude.join(".claude.json");
    std::fs::write(&user_config, first_run.to_string()).map_err(io("write", &user_config))?;
    let word = |text: &str| loop_sessions::shell::word(text);
    let launcher = format!(
        "#!/bin/sh\n# Written by `the-loop demo --agent claude`: Claude Code against the demo's model.\n\
         export ANTHROPIC_BASE_URL={url} ANTHROPIC_API_KEY={key} CLAUDE_CONFIG_DIR={dir}\n\
         export DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1\n\
         export DISABLE_ERROR_REPORTING=1 CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1\n\
         exec {cli} \"$@\"\n",
        url = word(&model.base_url()),
        key = word(CLAUDE_API_KEY),
        dir = word(&paths.claude.display().to_string()),
        cli = word(&cli.display().to_string()),
    );
    let path = &paths.claude_launcher;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    }
    std::fs::write(path, launcher).map_err(io("write", path))?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(io("make executable", path))?;
    let mut claude = ClaudeCode::new(Vec::new());
    claude.program = path.display().to_string();
    claude.transcripts = Some(paths.claude.join("projects"));
    Ok(claude)
}

/// The GitHub client of the simulator, with the demo token handed over as a value.
fn simulator_client(sim: &Sim) -> Result<GithubClient, DemoError> {
    let mut settings = GithubSettings::for_host("github.com");
    settings.base_url = Some(sim.url());
    let token = [(TOKEN_ENV.to_owned(), "demo-token".to_owned())];
    let tokens = TokenSource::new("github.com", &[TOKEN_ENV.to_owned()], token);
    Ok(GithubClient::new(settings, tokens)?)
}

/// `program` (e.g. `the-loop stand-in-harness`) as the harness, recording what it is sent
/// under the demo's directory: `… --record … --launches … --session-id ID`.
fn stand_in_harness(paths: &Paths, program: &[String]) -> CommandHarness {
    let argv = |conversation: &[&str]| -> Vec<String> {
        let mut argv = program.to_vec();
        for (flag, path) in [("--record", &paths.messages), ("--launches", &paths.launches)] {
            argv.extend([flag.to_owned(), path.display().to_string()]);
        }
        argv.extend(conversation.iter().map(|s| (*s).to_owned()));
        argv
    };
    CommandHarness {
        name: "stand-in".to_owned(),
        fresh: argv(&["--session-id", loop_sessions::harness::SESSION_ID_PLACEHOLDER]),
        resume: Some(argv(&["--resume", loop_sessions::harness::SESSION_ID_PLACEHOLDER])),
        transcript: Some(paths.messages.display().to_string()),
    }
}

/// A webhook secret nobody else knows: 128 bits from the standard library's randomly
/// seeded hasher (a demo secret guarding a loopback port for a minute).
fn random_secret() -> String {
    let state = std::collections::hash_map::RandomState::new();
    let half = |salt: u64| {
        let mut hasher = state.build_hasher();
        hasher.write_u64(salt);
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(1), half(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_config_is_valid_without_warnings_and_runs_both_ingresses() {
        let paths = Paths::new(Path::new("/tmp/the-loop-demo-x"));
        let text = config_text(
            &paths,
            "http://127.0.0.1:1",
            "file:///o",
            Ports { webhooks: 8787, api: 4114 },
            false,
        );
        let loaded = loop_core::config::parse(&text).expect("the demo config is valid");
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let config = loaded.config;
        assert!(config.webhooks.gh_webhook.enabled && config.polling.enabled, "hybrid mode");
        assert_eq!(config.routing.authorized_users.len(), 1);
        assert_eq!(config.state.root, paths.state);
        assert_eq!(config.integrations.github.api.base_url.as_deref(), Some("http://127.0.0.1:1"));
    }

    #[test]
    fn paths_with_quotes_and_spaces_are_written_safely() {
        let paths = Paths::new(Path::new("/tmp/a dir/it's: \"here\""));
        let text = config_text(
            &paths,
            "http://127.0.0.1:1",
            "file:///o",
            Ports { webhooks: 8787, api: 4114 },
            true,
        );
        let config = loop_core::config::parse(&text).expect("valid").config;
        assert_eq!(config.state.root, paths.state);
        assert_eq!(config.routing.spawn_workdir, paths.work);
    }
}

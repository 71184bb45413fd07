//! Building the service from its config: the one place a process's parts are wired.
//!
//! [`Service::from_config`] takes the config file's source, the [`Environment`] (what the
//! process brings from outside the config) and the [`Mode`] it runs in, and builds, in
//! the reference's order: the receiver's pidfile lock (a second service is refused
//! naming the holder before anything else is looked at), the [`preflight`] (every reason
//! an ingress cannot run, at once), the process's one event-log writer and its one config
//! source ([`LiveConfig`]), the receiver (its journal opened and replayed later), the
//! GitHub clients, the dispatcher (its ledger loaded), the poller and its lock, and the
//! receiver's listener. Every part logs through a view of the one writer under its own
//! `source`: `gh-webhook`, `poll`, and the dispatcher's as the mode names it.
//!
//! `start --foreground` and the demo build [`Mode::Serve`], `poll --once`
//! [`Mode::PollOnce`], the operator's verbs [`Mode::Operate`]; running it is
//! [`super::hosting`]'s. It reads no environment variable: the caller hands the values in.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use loop_core::config::Config;
use loop_github::{GithubClient, GithubError};
use loop_sessions::harness::configured;
use loop_sessions::plugin::PluginSite;
use loop_sessions::trust::ClaudeFiles;
use loop_sessions::{Harness, Tmux, TmuxSettings, TmuxSocket};
use loop_store::{EventLog, PidLock, StateLayout, StateStore, StoreError};
use tokio::net::TcpListener;

use super::preflight::{Ingress, Misconfiguration, preflight};
use crate::api::ApiToken;
use crate::config_source::CONFIG_ENV;
use crate::config_source::ConfigSource;
use crate::dispatcher::{Dispatcher, DispatcherError, DispatcherParts};
use crate::live_config::{Hosted, LiveConfig};
use crate::metrics::Metrics;
use crate::poller::{GithubClients, Poller, PollerError};
use crate::receiver::{self, Receiver, ReceiverError, Secret};
use crate::usage::UsageBook;

/// Everything a service is built from besides its config: the machine's facts, the
/// values the environment holds, and — for the demo — stand-ins for GitHub and the agent.
#[derive(Debug, Default)]
pub struct Environment {
    /// `$HOME`, where Claude Code keeps its files.
    pub home: PathBuf,
    /// `CLAUDE_CONFIG_DIR`, when set.
    pub claude_config_dir: Option<String>,
    /// Where private prompt files are written (the system temp dir).
    pub scratch_dir: PathBuf,
    /// The working directory, where an earlier version's layout is looked for.
    pub working_dir: Option<PathBuf>,
    /// The webhook secret: the value of the variable `webhooks.ghWebhook.secretEnv` names.
    pub secret: Option<Secret>,
    /// The socket of the tmux server sessions run on; `None`: the server the process
    /// inherited (`TMUX_TMPDIR`, `TMUX`).
    pub tmux_socket: Option<PathBuf>,
    /// The config file tmux servers it starts read; `None`: tmux's own.
    pub tmux_config: Option<PathBuf>,
    /// A listener the caller bound for the receiver; `None`: it binds
    /// `webhooks.ghWebhook.host:port`.
    pub listener: Option<TcpListener>,
    /// A listener the caller bound for the control plane; `None`: it binds
    /// `service.host:port`.
    pub api_listener: Option<TcpListener>,
    /// The control plane's bearer token: the value of the variable `service.tokenEnv`
    /// names.
    pub api_token: Option<ApiToken>,
    /// Stand-ins for what the config would reach; `None`: GitHub and the configured harness.
    pub stand_ins: Option<StandIns>,
}

/// What a process can run in place of the real GitHub and agent (the demo: a simulated
/// GitHub and a stand-in agent).
#[derive(Debug)]
pub struct StandIns {
    /// The client of the work items' host, for the poller and the dispatcher alike.
    pub github: GithubClient,
    /// The harness every session is spawned with.
    pub harness: Arc<dyn Harness>,
}

/// What a process hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `start --foreground` and the demo: every ingress the config enables, over one
    /// dispatcher, until a stop. `hold_processing` journals deliveries without judging
    /// them (crash tests, repairs).
    Serve { hold_processing: bool },
    /// `poll --once`: the poller, whether or not `polling.enabled`, for one cycle.
    PollOnce,
    /// The operator's verbs (`sessions …`, `collaborators …`): the dispatcher alone.
    Operate,
}

impl Mode {
    /// The event log's `source` for the dispatcher's lines (and the process's own).
    fn source(self) -> &'static str {
        match self {
            Self::Serve { .. } => "service",
            Self::PollOnce => "poll",
            Self::Operate => "cli",
        }
    }

    /// How long the dispatcher may finish its queues at the end: within the 5 s a
    /// service has to exit once the ingresses stopped; a cycle's queued deliveries for
    /// `poll --once`; the one command for an operator's verb.
    pub(super) fn grace(self) -> Duration {
        match self {
            Self::Serve { .. } => Duration::from_millis(400),
            Self::PollOnce => Duration::from_secs(30),
            Self::Operate => Duration::from_secs(5),
        }
    }

    /// Which ingresses it hosts with `config`: `(receiver, poller)`.
    fn ingresses(self, config: &Config) -> (bool, bool) {
        match self {
            Self::Serve { .. } => {
                (Ingress::Receiver.enabled(config), Ingress::Poller.enabled(config))
            }
            Self::PollOnce => (false, true),
            Self::Operate => (false, false),
        }
    }
}

/// Why the service could not be built or stopped badly.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("the service cannot start: {}", list(.0))]
    Misconfigured(Vec<Misconfiguration>),

    #[error(
        "the webhook receiver is already running ({} holds `{}`)",
        pid.map_or_else(|| "another process".to_owned(), |pid| format!("pid {pid}")),
        path.display()
    )]
    ReceiverRunning { path: PathBuf, pid: Option<u32> },

    #[error("cannot take the webhook receiver's pidfile lock")]
    ReceiverLock(#[source] StoreError),

    #[error(transparent)]
    Poller(#[from] PollerError),

    #[error("the webhook receiver failed")]
    Receiver(#[from] ReceiverError),

    #[error("the control plane failed")]
    Api(#[source] std::io::Error),

    #[error("cannot listen on {host}:{port}")]
    Listen {
        host: String,
        port: u16,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot open the dispatcher")]
    Dispatcher(#[from] DispatcherError),

    #[error("cannot release the abandoned attempts")]
    Release(#[source] StoreError),
}

fn list(problems: &[Misconfiguration]) -> String {
    problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// A process's parts, wired: built by [`Service::from_config`], run by
/// [`Service::run`], [`Service::poll_once`] or (for the operator) through
/// [`Service::dispatcher`] and [`Service::close`].
#[derive(Debug)]
pub struct Service {
    pub(super) mode: Mode,
    /// The process's one config source, followed by every part.
    pub(super) config: LiveConfig,
    /// The process's one event-log writer (the dispatcher's view of it); flushed last.
    pub(super) events: EventLog,
    pub(super) dispatcher: Dispatcher,
    /// What `GET /metrics` on the receiver's port answers.
    pub(super) metrics: Metrics,
    /// The sessions' tokens and cost, shared by the control plane and the gauges' sampler.
    pub(super) usage: UsageBook,
    pub(super) receiver: Option<Receiving>,
    pub(super) poller: Option<Polling>,
    pub(super) api: Option<Serving>,
    warnings: Vec<String>,
}

/// The control plane's listener and token, for [`Service::run`] to serve.
#[derive(Debug)]
pub(super) struct Serving {
    pub(super) listener: TcpListener,
    pub(super) address: SocketAddr,
    pub(super) token: Option<ApiToken>,
    /// Claude Code's `projects/` directory, for transcripts.
    pub(super) claude_projects: PathBuf,
}

/// The receiver, not yet wired to the dispatcher, with its listener and its lock.
#[derive(Debug)]
pub(super) struct Receiving {
    pub(super) receiver: Receiver,
    pub(super) listener: TcpListener,
    pub(super) address: SocketAddr,
    pub(super) lock: PidLock,
}

/// The poller over the dispatcher, holding its lock.
#[derive(Debug)]
pub(super) struct Polling {
    pub(super) poller: Poller<Dispatcher>,
    pub(super) lock: PidLock,
}

impl Service {
    /// Builds what `mode` hosts from `source`'s config in `env` (see the module's order).
    /// The receiver's lock held by another process, and every misconfiguration, are
    /// errors of their own ([`ServiceError::ReceiverRunning`],
    /// [`ServiceError::Misconfigured`]); so is a poller that finds its lock held
    /// ([`PollerError::Blocked`]).
    pub async fn from_config(
        source: ConfigSource,
        env: Environment,
        mode: Mode,
    ) -> Result<Self, ServiceError> {
        let config = Arc::clone(source.current());
        let config_path = source.path().to_owned();
        let layout = StateLayout::for_config(&config, env.working_dir.clone());
        let (receiving, polling) = mode.ingresses(&config);
        let receiver_lock = if receiving { Some(receiver_lock(&layout)?) } else { None };
        let problems = match mode {
            Mode::Serve { .. } => preflight(&config, &env),
            Mode::PollOnce => {
                let routing =
                    (!config.routing.enabled).then_some(Misconfiguration::RoutingDisabled);
                routing
                    .into_iter()
                    .chain(Ingress::Poller.misconfigurations(&config, &env))
                    .collect()
            }
            Mode::Operate => Vec::new(),
        };
        if !problems.is_empty() {
            return Err(ServiceError::Misconfigured(problems));
        }

        let events = if config.event_log.enabled {
            EventLog::new(layout.event_log(), mode.source()).with_writer()
        } else {
            EventLog::disabled()
        };
        let Environment {
            home,
            claude_config_dir,
            scratch_dir,
            working_dir: _,
            secret,
            tmux_socket,
            tmux_config,
            listener,
            api_listener,
            api_token,
            stand_ins,
        } = env;
        let hosted = Hosted { receiver: receiving, unsigned: secret.is_none(), poller: polling };
        let live = LiveConfig::new(source, events.clone(), hosted);
        let mut warnings = Vec::new();
        // One store for every part, so the session records are cached once.
        let store = StateStore::new(layout.clone(), events.clone());

        let receiver = match receiver_lock {
            Some(lock) => {
                let hold = matches!(mode, Mode::Serve { hold_processing: true });
                let store = store.reporting_to(events.for_source("gh-webhook"));
                let receiver = Receiver::new(live.clone(), store, secret)?.hold_processing(hold);
                warnings.extend(receiver.warnings().iter().cloned());
                Some((receiver, lock))
            }
            None => None,
        };

        let (stand_in_github, stand_in_harness) =
            stand_ins.map_or((None, None), |s| (Some(s.github), Some(s.harness)));
        let clients = match (polling, stand_in_github.clone()) {
            (false, _) => None,
            (true, Some(client)) => Some(GithubClients::new([client])),
            (true, None) => Some(GithubClients::for_config(&config).map_err(|error| {
                ServiceError::Misconfigured(vec![Misconfiguration::Github { error }])
            })?),
        };
        let github = match (&clients, stand_in_github) {
            (Some(clients), _) => clients.primary().cloned(),
            (None, Some(client)) => Some(client),
            (None, None) => github_client(&config)
                .inspect_err(|err| {
                    warnings.push(format!(
                        "no GitHub access ({err}): no existence checks, reactions or announcements"
                    ));
                })
                .ok(),
        };

        let located = ClaudeFiles::locate(&home, claude_config_dir.as_deref());
        let claude_projects = located.config_dir.join("projects");
        let harness = stand_in_harness.unwrap_or_else(|| {
            Arc::from(configured(
                config.routing.default_harness,
                &config.routing.harness_args,
                &located.config_dir,
            ))
        });
        let dispatcher = Dispatcher::open(DispatcherParts {
            config: Arc::clone(&config),
            store: store.clone(),
            github: github.clone(),
            tmux: Arc::new(Tmux::new(tmux_settings(
                &config,
                &config_path,
                tmux_socket,
                tmux_config,
                scratch_dir,
            ))),
            harness,
            claude_files: Some(located),
            plugin: plugin_site(&config, &layout),
        })
        .await?;
        let metrics = Metrics::new();
        if let Some(client) = github {
            metrics.watch_github(client);
        }
        let usage = UsageBook::counted_in(claude_projects.clone(), metrics.clone());

        let poller = match clients {
            Some(clients) => {
                let store = store.reporting_to(events.for_source("poll"));
                let poller =
                    Poller::new(store, clients, dispatcher.clone(), env!("CARGO_PKG_VERSION"));
                let lock = poller.lock()?;
                Some(Polling { poller, lock })
            }
            None => None,
        };

        let receiver = match receiver {
            Some((receiver, lock)) => {
                let gh = &config.webhooks.gh_webhook;
                let listener = match listener {
                    Some(listener) => listener,
                    None => {
                        TcpListener::bind((gh.host.as_str(), gh.port)).await.map_err(|source| {
                            ServiceError::Listen { host: gh.host.clone(), port: gh.port, source }
                        })?
                    }
                };
                let address = listener.local_addr().map_err(|source| ServiceError::Listen {
                    host: gh.host.clone(),
                    port: gh.port,
                    source,
                })?;
                Some(Receiving { receiver, listener, address, lock })
            }
            None => None,
        };

        let api = match mode {
            Mode::Serve { .. } if config.service.enabled => {
                let service = &config.service;
                let listen = |source| ServiceError::Listen {
                    host: service.host.clone(),
                    port: service.port,
                    source,
                };
                let listener = match api_listener {
                    Some(listener) => listener,
                    None => TcpListener::bind((service.host.as_str(), service.port))
                        .await
                        .map_err(listen)?,
                };
                let address = listener.local_addr().map_err(listen)?;
                Some(Serving { listener, address, token: api_token, claude_projects })
            }
            _ => None,
        };

        Ok(Self {
            mode,
            config: live,
            events,
            dispatcher,
            metrics,
            usage,
            receiver,
            poller,
            api,
            warnings,
        })
    }

    /// The dispatcher every ingress hands its work to (the operator's verbs call it).
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// What an operator should know before it runs: the receiver's start-up warnings
    /// (unsigned deliveries, no authorized users, a narrowed event filter, no repository
    /// bound) and a missing GitHub client.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// How many journalled deliveries the receiver will replay first.
    pub fn backlog(&self) -> usize {
        self.receiver.as_ref().map_or(0, |r| r.receiver.backlog())
    }

    /// Where the receiver takes deliveries, once bound (`http://host:port/path`).
    pub fn webhook_url(&self) -> Option<String> {
        let path = &self.config.current().webhooks.gh_webhook.path;
        self.receiver.as_ref().map(|r| receiver::url(r.address, path))
    }

    /// Where the control plane answers, once bound (`http://host:port`; the dashboard is
    /// at `/`).
    pub fn api_url(&self) -> Option<String> {
        self.api.as_ref().map(|api| format!("http://{}", api.address))
    }

    /// How long the poller waits between cycles, when it polls.
    pub fn poll_interval(&self) -> Option<Duration> {
        self.poller
            .as_ref()
            .map(|_| Duration::from_secs(self.config.current().polling.interval_seconds.max(1)))
    }
}

/// Takes the receiver's single-instance lock; a holder is named.
fn receiver_lock(layout: &StateLayout) -> Result<PidLock, ServiceError> {
    match PidLock::acquire(layout.gh_webhook_pidfile()) {
        Ok(lock) => Ok(lock),
        Err(StoreError::PidfileHeld { path, pid }) => {
            Err(ServiceError::ReceiverRunning { path, pid })
        }
        Err(err) => Err(ServiceError::ReceiverLock(err)),
    }
}

/// The tmux server sessions run on, as `routing.tmux` configures it; the webhook
/// secret's variable is withheld from every server it starts, and every session is told
/// the config file (`THE_LOOP_CLI_CONFIG`), so the-loop's verbs in its pane read this one.
fn tmux_settings(
    config: &Config,
    config_path: &Path,
    socket: Option<PathBuf>,
    config_file: Option<PathBuf>,
    scratch_dir: PathBuf,
) -> TmuxSettings {
    let socket = socket.map_or(TmuxSocket::Inherited, TmuxSocket::Path);
    let mut tmux = TmuxSettings::new(socket, scratch_dir);
    tmux.config_file = config_file;
    tmux.remain_on_exit = config.routing.tmux.remain_on_exit;
    tmux.withheld_env = vec![config.webhooks.gh_webhook.secret_env.clone()];
    tmux.session_env = vec![(
        CONFIG_ENV.to_owned(),
        std::path::absolute(config_path)
            .unwrap_or_else(|_| config_path.to_owned())
            .display()
            .to_string(),
    )];
    tmux
}

/// Where the-loop's Claude Code plugin is written (under the state root) and what it
/// points at: this binary, for the link-pr hook, and the service's MCP endpoint. `None`
/// when this process cannot name its own executable.
pub fn plugin_site(config: &Config, layout: &StateLayout) -> Option<PluginSite> {
    let bin = std::env::current_exe()
        .inspect_err(|err| tracing::warn!(%err, "cannot name this executable: no harness plugin"))
        .ok()?;
    let mcp_url = format!("{}/mcp", config.service.local_url());
    let root = std::path::absolute(layout.root()).unwrap_or_else(|_| layout.root().to_owned());
    Some(PluginSite::under(&root, bin, mcp_url))
}

/// The GitHub client of the work items' host (see [`work_item_host`]), as
/// `integrations.github` configures it.
fn github_client(config: &Config) -> Result<GithubClient, GithubError> {
    GithubClient::from_config(&work_item_host(config), &config.integrations.github)
}

/// The GitHub host work items live on: the first declared repository's, else
/// `routing.workspace.defaultHost` (`github.com`).
fn work_item_host(config: &Config) -> String {
    config
        .repositories
        .first()
        .map(|repo| repo.host().to_owned())
        .unwrap_or_else(|| config.routing.workspace.default_host.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_the_first_declared_repositorys_else_the_default_host() {
        let mut config = Config::default();
        assert_eq!(work_item_host(&config), "github.com");
        config.repositories = vec!["ghe.corp.example/octo/app".parse().unwrap()];
        assert_eq!(work_item_host(&config), "ghe.corp.example");
    }
}

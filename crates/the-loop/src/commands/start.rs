//! `the-loop start`: bring up every enabled ingress in one service process.
//!
//! `--foreground` runs the service in this process: the webhook receiver
//! (`webhooks.ghWebhook.enabled`) and the poller (`polling.enabled`) over one
//! dispatcher. The receiver's order is the reference's: its pidfile lock (a second one is
//! refused naming the holder's pid, exit 1) → the secret (unset is refused unless
//! `allowUnsigned`, exit 2) → the inbox journal → bind. The poller checks it has
//! something to poll and a GitHub client per host before taking `poll.pid`. Both run
//! until TERM or INT; then they stop, the dispatcher finishes the item in flight, and
//! the process exits within 5 s. The config file is re-read at natural points: per
//! delivery by the receiver, between cycles by the poller.
//!
//! Without `--foreground` (detached): refuse when nothing is enabled, an enabled ingress
//! is misconfigured (exit 2) or one is already running (exit 1, naming the pid); else
//! re-run this binary as `start --foreground --own-session` in its own session, with the
//! resolved config path exported, stdin from `/dev/null` and its output appended to
//! `<root>/logs/service.out`, and report success only once the child holds every
//! enabled ingress's lock and has said it is ready (every ingress listening). A child
//! that exits first, or is not ready within [`START_PATIENCE`], is a failure reported
//! with what it wrote and the log's path.
//!
//! The service also answers `GET /metrics` on the receiver's port (loop-daemon's
//! `metrics`). Glue only: the ingresses, the dispatcher and running them together
//! (`service::Service`) are loop-daemon's, the locks loop-store's.

use std::fs::{self, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use loop_daemon::config_source::ConfigSource;
use loop_daemon::dispatcher::Dispatcher;
use loop_daemon::live_config::{Hosted, LiveConfig};
use loop_daemon::metrics::Metrics;
use loop_daemon::poller::{GithubClients, Poller, PollerError, scope};
use loop_daemon::receiver::{self, Receiver, ReceiverError, Secret};
use loop_daemon::service::{Event, Service};
use loop_store::{EventLog, PidLock, StateLayout, StateStore, StoreError};
use tokio::signal::unix::{SignalKind, signal};

use super::service::{self, Ingress};
use super::status::{self, State};
use crate::ExitStatus;
use crate::cli::{GlobalArgs, StartArgs};
use crate::config_file::CliConfig;
use crate::printer::Printer;
use crate::state_root;

pub fn run(args: StartArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    if !args.foreground {
        return detached(global, printer);
    }
    if args.own_session {
        // The detached child leaves its parent's session and terminal (fails only for a
        // process-group leader, which a freshly spawned child never is).
        rustix::process::setsid().context("cannot start a session of its own")?;
    }
    let loaded = CliConfig::load(global, printer)?;
    let config = &loaded.config;
    let gh = &config.webhooks.gh_webhook;
    if !gh.enabled && !config.polling.enabled {
        printer.error("nothing to start: no ingress is enabled");
        printer.hint(format!(
            "set `webhooks.ghWebhook.enabled: true` (webhooks) or `polling.enabled: true` (polling) in `{}`",
            loaded.location.path.display()
        ));
        return Ok(ExitStatus::CouldNotRun);
    }
    let layout = state_root::layout(config);
    // The process's one event-log writer, and its one config source.
    let events = service_events(config, &layout);
    let secret = Secret::from_value(std::env::var(&gh.secret_env).ok().as_deref());
    let hosted =
        Hosted { receiver: gh.enabled, unsigned: secret.is_none(), poller: config.polling.enabled };
    let (source, _) = ConfigSource::open(&loaded.location.path)?;
    let live = LiveConfig::new(source, events.clone(), hosted);

    // The receiver: its lock, then its start-time checks (reference order).
    let mut receiving = None;
    if gh.enabled {
        let lock = match PidLock::acquire(layout.gh_webhook_pidfile()) {
            Ok(lock) => lock,
            Err(StoreError::PidfileHeld { path, pid }) => {
                let holder =
                    pid.map_or_else(|| "another process".to_owned(), |pid| format!("pid {pid}"));
                printer.error(format!(
                    "the webhook receiver is already running ({holder} holds `{}`)",
                    path.display()
                ));
                return Ok(ExitStatus::Negative);
            }
            Err(err) => return Err(err).context("cannot take the webhook receiver's pidfile lock"),
        };
        let store = StateStore::new(layout.clone(), events.for_source("gh-webhook"));
        let receiver = match Receiver::new(live.clone(), store, secret) {
            Ok(receiver) => receiver.hold_processing(args.hold_processing),
            Err(err @ (ReceiverError::UnsetSecret { .. } | ReceiverError::Path { .. })) => {
                printer.error(&err);
                if let Some(hint) = err.hint() {
                    printer.hint(hint);
                }
                return Ok(ExitStatus::CouldNotRun);
            }
            Err(err) => return Err(err.into()),
        };
        for warning in receiver.warnings() {
            printer.warning(warning);
        }
        if receiver.backlog() > 0 {
            printer.info(format!("replaying {} journalled deliveries", receiver.backlog()));
        }
        receiving = Some((lock, receiver));
    }

    // The poller: something to poll and a client per host, checked before any lock.
    let mut polling = None;
    if config.polling.enabled {
        if scope::scopes(config).is_empty() {
            printer.error("nothing to poll: no repository is configured");
            printer.hint(format!(
                "list the repositories to poll under `repositories` (or `polling.sources`) in `{}`",
                loaded.location.path.display()
            ));
            return Ok(ExitStatus::CouldNotRun);
        }
        match GithubClients::for_config(config) {
            Ok(clients) => polling = Some(clients),
            Err(err) => {
                printer.error(format!("the poller cannot reach GitHub: {err}"));
                return Ok(ExitStatus::CouldNotRun);
            }
        }
    }

    // The service reports through `tracing` (journal failures, reload problems) on stderr.
    let level = if global.verbose > 0 { tracing::Level::INFO } else { tracing::Level::WARN };
    let _ = tracing_subscriber::fmt().with_max_level(level).with_writer(std::io::stderr).try_init();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the service's runtime")?;
    let status = runtime.block_on(serve(
        &loaded,
        layout,
        (live, events),
        receiving,
        polling,
        args.hold_processing,
        printer,
    ))?;
    printer.info("the service stopped");
    Ok(status)
}

/// Runs every enabled ingress over one dispatcher until TERM or INT (loop-daemon's
/// [`Service`]), then stops them, lets the dispatcher finish what it holds and gives the
/// poller's abandoned attempts back.
async fn serve(
    loaded: &CliConfig,
    layout: StateLayout,
    (live, events): (LiveConfig, EventLog),
    receiving: Option<(PidLock, Receiver)>,
    polling: Option<GithubClients>,
    held: bool,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let config = &loaded.config;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;

    let github = match &polling {
        Some(clients) => clients.primary().cloned(),
        None => loop_daemon::service::github_client(config)
            .inspect_err(|err| {
                printer.warning(format!(
                    "no GitHub access ({err}): no existence checks, reactions or announcements"
                ));
            })
            .ok(),
    };
    let watched = github.clone();
    let service_store = StateStore::new(layout.clone(), events.clone());
    let parts = loop_daemon::service::dispatcher_parts(
        Arc::clone(config),
        service_store,
        github,
        &service::host(),
    );
    let dispatcher = Dispatcher::open(parts).await.context("cannot open the dispatcher")?;
    let metrics = Metrics::new();
    if let Some(client) = watched {
        metrics.watch_github(client);
    }

    let poller = polling.map(|clients| {
        let store = StateStore::new(layout.clone(), events.for_source("poll"));
        Poller::new(store, clients, dispatcher.clone(), env!("CARGO_PKG_VERSION"))
    });
    let _poll_lock = match poller.as_ref().map(Poller::lock).transpose() {
        Ok(lock) => lock,
        Err(err @ PollerError::Blocked { .. }) => {
            printer.error(&err);
            return Ok(ExitStatus::Negative);
        }
        Err(err) => return Err(err).context("cannot take the poller's lock"),
    };

    let mut receiver = None;
    let mut _receiver_lock = None;
    if let Some((lock, receiving)) = receiving {
        let gh = &config.webhooks.gh_webhook;
        let listener = tokio::net::TcpListener::bind((gh.host.as_str(), gh.port))
            .await
            .with_context(|| format!("cannot listen on {}:{}", gh.host, gh.port))?;
        let addr = listener.local_addr().context("cannot read the bound address")?;
        printer.info(format!(
            "receiving webhooks at {} (pid {}){}",
            receiver::url(addr, &gh.path),
            std::process::id(),
            if held { "; holding deliveries unprocessed" } else { "" }
        ));
        receiver = Some((receiving, listener));
        _receiver_lock = Some(lock);
    }
    if poller.is_some() {
        printer.info(format!(
            "polling every {}s (pid {})",
            config.polling.interval_seconds.max(1),
            std::process::id()
        ));
    }

    let service = Service {
        dispatcher,
        receiver,
        poller,
        config: live,
        metrics,
        grace: DISPATCH_GRACE,
        on_event: Box::new(move |event| match event {
            // Every ingress holds its lock and listens: what a detached start waits for.
            Event::Ready => printer.info(format!("{READY} (pid {})", std::process::id())),
            Event::ReceiverStopped => printer.info("webhook receiver stopped"),
            Event::ConfigNotApplied { error } => printer.warning(format!(
                "the config change was not applied (the previous config stays): {error}"
            )),
        }),
    };
    service
        .run(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        })
        .await?;
    Ok(ExitStatus::Success)
}

/// How long the dispatcher may finish its queues at shutdown, after the ingresses
/// stopped (all within the 5 s every process has to exit).
const DISPATCH_GRACE: Duration = Duration::from_millis(400);

/// The event log the service writes, through one writer thread shared by every part
/// (`eventLog.enabled: false` disables it).
fn service_events(config: &loop_core::config::Config, layout: &StateLayout) -> EventLog {
    if config.event_log.enabled {
        EventLog::new(layout.event_log(), "service").with_writer()
    } else {
        EventLog::disabled()
    }
}

/// The line the service writes once every ingress holds its lock and listens.
const READY: &str = "the service is ready";

/// How long a detached start waits for the service to hold its locks.
pub const START_PATIENCE: Duration = Duration::from_secs(15);

/// How often the child and the locks are checked while waiting.
const PROBE_EVERY: Duration = Duration::from_millis(50);

/// How many of the log's last lines a failed start shows.
const LOG_TAIL_LINES: usize = 20;

/// Starts the service detached and waits until it holds every enabled ingress's lock.
pub fn detached(global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    let loaded = CliConfig::load(global, printer)?;
    let config = &loaded.config;
    let layout = state_root::layout(config);
    let rows = status::rows(config, &layout)?;
    if let Some(row) = rows.iter().find(|row| row.live.running()) {
        let holder =
            row.live.pid().map_or_else(|| "a process".to_owned(), |pid| format!("pid {pid}"));
        printer.error(format!(
            "the service is already running: {holder} holds `{}` ({})",
            row.live.pidfile.display(),
            row.live.ingress.name()
        ));
        printer.hint("`the-loop restart` replaces it; `the-loop status` shows what runs");
        return Ok(ExitStatus::Negative);
    }
    let enabled: Vec<Ingress> = rows.iter().filter(|r| r.enabled).map(|r| r.live.ingress).collect();
    if enabled.is_empty() {
        printer.error("nothing to start: no ingress is enabled");
        printer.hint(format!(
            "set `webhooks.ghWebhook.enabled: true` or `polling.enabled: true` in `{}`",
            loaded.location.path.display()
        ));
        return Ok(ExitStatus::CouldNotRun);
    }
    let misconfigured: Vec<_> = rows
        .iter()
        .filter_map(|row| match &row.state {
            State::Misconfigured { reason } => Some((row.live.ingress, reason)),
            _ => None,
        })
        .collect();
    if !misconfigured.is_empty() {
        for (ingress, reason) in misconfigured {
            printer.error(format!("the {} cannot start: {reason}", ingress.name()));
        }
        return Ok(ExitStatus::CouldNotRun);
    }

    let log_path = service::output_log(&layout);
    let log = open_log(&log_path)?;
    let offset = log.metadata().map(|m| m.len()).unwrap_or(0);
    let exe = std::env::current_exe()
        .context("cannot find this program's own path to start the service")?;
    let mut child = Command::new(exe)
        .args(["start", "--foreground", "--own-session"])
        .envs(loaded.child_env())
        .stdin(Stdio::null())
        .stdout(log.try_clone().with_context(|| format!("cannot share `{}`", log_path.display()))?)
        .stderr(log)
        .spawn()
        .context("cannot start the service process")?;
    let names = enabled.iter().map(|i| i.name()).collect::<Vec<_>>().join(", ");
    match wait_until_ready(&mut child, &enabled, &layout, &log_path, offset)? {
        Started::Yes => {
            printer.info(format!(
                "started the service (pid {}): {names}; output goes to `{}`",
                child.id(),
                log_path.display()
            ));
            Ok(ExitStatus::Success)
        }
        Started::Exited(status) => {
            printer
                .error(format!("the service did not start: it exited during start-up ({status})"));
            show_log_tail(&log_path, offset, printer);
            Ok(ExitStatus::Negative)
        }
        Started::TimedOut => {
            // Never leave a half-started service behind: the child is ours, its pid known.
            let _ = rustix::process::kill_process(
                rustix::process::Pid::from_child(&child),
                rustix::process::Signal::TERM,
            );
            let _ = child.wait();
            printer.error(format!(
                "the service was not ready within {}s and was stopped",
                START_PATIENCE.as_secs()
            ));
            show_log_tail(&log_path, offset, printer);
            Ok(ExitStatus::Negative)
        }
    }
}

/// How a detached start ended.
enum Started {
    Yes,
    Exited(std::process::ExitStatus),
    TimedOut,
}

/// Waits until the child holds every enabled ingress's lock and has said it is ready
/// (in its output since `offset`), or exits, or [`START_PATIENCE`] runs out.
fn wait_until_ready(
    child: &mut Child,
    enabled: &[Ingress],
    layout: &loop_store::StateLayout,
    log: &Path,
    offset: u64,
) -> anyhow::Result<Started> {
    let deadline = Instant::now() + START_PATIENCE;
    let ready = format!("{READY} (pid {})", child.id());
    loop {
        if let Some(status) = child.try_wait().context("cannot watch the service process")? {
            return Ok(Started::Exited(status));
        }
        let mut all = read_since(log, offset).contains(&ready);
        for ingress in enabled {
            all &= service::liveness(*ingress, layout)?.pid() == Some(child.id());
        }
        if all {
            return Ok(Started::Yes);
        }
        if Instant::now() >= deadline {
            return Ok(Started::TimedOut);
        }
        std::thread::sleep(PROBE_EVERY);
    }
}

fn open_log(path: &Path) -> anyhow::Result<fs::File> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create `{}`", dir.display()))?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open the service log `{}`", path.display()))
}

/// What the service wrote to its log since `offset` (empty when unreadable).
fn read_since(path: &Path, offset: u64) -> String {
    let mut text = String::new();
    let _ = fs::File::open(path).and_then(|mut file| {
        file.seek(SeekFrom::Start(offset))?;
        file.read_to_string(&mut text)
    });
    text
}

/// Shows what the service wrote since `offset` (its last lines), then where the log is.
fn show_log_tail(path: &Path, offset: u64, printer: Printer) {
    let text = read_since(path, offset);
    let lines: Vec<&str> = text.lines().collect();
    for line in &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..] {
        printer.info(format!("  | {line}"));
    }
    printer.hint(format!("the service's whole output is in `{}`", path.display()));
}

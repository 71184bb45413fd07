//! `the-loop start`: bring up every enabled ingress in one service process.
//!
//! `--foreground` runs the service in this process: today that is the webhook receiver.
//! The order is the reference's: the receiver's pidfile lock (a second receiver is
//! refused naming the holder's pid, exit 1) → the secret (unset is refused unless
//! `allowUnsigned`, exit 2) → the inbox journal → bind → serve until TERM or INT, then
//! stop within 5 s, finishing the delivery in flight.
//!
//! Without `--foreground` (detached): refuse when nothing is enabled, an enabled ingress
//! is misconfigured (exit 2) or one is already running (exit 1, naming the pid); else
//! re-run this binary as `start --foreground --own-session` in its own session, with the
//! resolved config path exported, stdin from `/dev/null` and its output appended to
//! `<root>/logs/service.out`, and report success only once the child holds every
//! enabled ingress's lock. A child that exits first, or has not locked within
//! [`START_PATIENCE`], is a failure reported with what it wrote and the log's path.
//! Glue only: the receiver is loop-daemon's, the lock loop-store's.

use std::fs::{self, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use loop_daemon::config_source::ConfigSource;
use loop_daemon::dispatcher::Dispatcher;
use loop_daemon::receiver::{self, Receiver, ReceiverError, Secret};
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
    if !gh.enabled {
        printer.error("nothing to start: no ingress is enabled");
        printer.hint(format!(
            "set `webhooks.ghWebhook.enabled: true` in `{}` to receive webhooks",
            loaded.location.path.display()
        ));
        return Ok(ExitStatus::CouldNotRun);
    }
    let layout = state_root::layout(config);
    let _lock = match PidLock::acquire(layout.gh_webhook_pidfile()) {
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
    let secret = Secret::from_value(std::env::var(&gh.secret_env).ok().as_deref());
    let (source, _) = ConfigSource::open(&loaded.location.path)?;
    let receiver = match Receiver::new(source, layout.clone(), secret) {
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

    // The service reports through `tracing` (journal failures, reload problems) on stderr.
    let level = if global.verbose > 0 { tracing::Level::INFO } else { tracing::Level::WARN };
    let _ = tracing_subscriber::fmt().with_max_level(level).with_writer(std::io::stderr).try_init();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the service's runtime")?;
    runtime.block_on(async {
        let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
        let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
        let listener = tokio::net::TcpListener::bind((gh.host.as_str(), gh.port))
            .await
            .with_context(|| format!("cannot listen on {}:{}", gh.host, gh.port))?;
        let addr = listener.local_addr().context("cannot read the bound address")?;
        let github = loop_daemon::service::github_client(&loaded.config)
            .inspect_err(|err| {
                printer.warning(format!(
                    "no GitHub access ({err}): no existence checks, reactions or announcements"
                ));
            })
            .ok();
        let parts = loop_daemon::service::dispatcher_parts(
            Arc::clone(&loaded.config),
            StateStore::new(layout.clone(), service_events(&loaded.config, &layout)),
            github,
            &service::host(),
        );
        let dispatcher = Dispatcher::open(parts).await.context("cannot open the dispatcher")?;
        let receiver = receiver
            .with_dispatch(Arc::new(dispatcher.clone()))
            .with_existence(Arc::new(dispatcher.clone()));
        printer.info(format!(
            "receiving webhooks at {} (pid {}){}",
            receiver::url(addr, &gh.path),
            std::process::id(),
            if args.hold_processing { "; holding deliveries unprocessed" } else { "" }
        ));
        let stop = async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        };
        let served = receiver.run(listener, stop).await.context("the webhook receiver failed");
        // The receiver finished the delivery it was judging; what the dispatcher still
        // holds is released for the next start (`dispatch.abandoned`).
        dispatcher.shutdown(DISPATCH_GRACE).await;
        served
    })?;
    printer.info("webhook receiver stopped");
    Ok(ExitStatus::Success)
}

/// How long the dispatcher may finish its queues at shutdown, after the receiver stopped
/// (both within the 5 s every process has to exit).
const DISPATCH_GRACE: Duration = Duration::from_millis(400);

/// The event log the service writes (`eventLog.enabled: false` disables it).
fn service_events(config: &loop_core::config::Config, layout: &StateLayout) -> EventLog {
    if config.event_log.enabled {
        EventLog::new(layout.event_log(), "gh-webhook")
    } else {
        EventLog::disabled()
    }
}

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
    match wait_until_locked(&mut child, &enabled, &layout)? {
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
                "the service did not take its locks within {}s and was stopped",
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

fn wait_until_locked(
    child: &mut Child,
    enabled: &[Ingress],
    layout: &loop_store::StateLayout,
) -> anyhow::Result<Started> {
    let deadline = Instant::now() + START_PATIENCE;
    loop {
        if let Some(status) = child.try_wait().context("cannot watch the service process")? {
            return Ok(Started::Exited(status));
        }
        let mut all = true;
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

/// Shows what the service wrote since `offset` (its last lines), then where the log is.
fn show_log_tail(path: &Path, offset: u64, printer: Printer) {
    let mut text = String::new();
    let read = fs::File::open(path).and_then(|mut file| {
        file.seek(SeekFrom::Start(offset))?;
        file.read_to_string(&mut text)
    });
    if read.is_ok() {
        let lines: Vec<&str> = text.lines().collect();
        for line in &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..] {
            printer.info(format!("  | {line}"));
        }
    }
    printer.hint(format!("the service's whole output is in `{}`", path.display()));
}

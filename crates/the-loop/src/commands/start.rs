//! `the-loop start`: bring up every enabled ingress in one service process.
//!
//! `--foreground` runs the service in this process: the webhook receiver
//! (`webhooks.ghWebhook.enabled`) and the poller (`polling.enabled`) over one
//! dispatcher, as loop-daemon's `Service::from_config` builds them. Its order is the
//! reference's: the receiver's pidfile lock (a second one is refused naming the holder's
//! pid, exit 1) → the preflight (an unset secret unless `allowUnsigned`, nothing to poll,
//! no GitHub client: every problem is listed, exit 2) → the inbox journal → the
//! dispatcher → `poll.pid` → bind. Both run until TERM or INT; then they stop, the
//! dispatcher finishes the item in flight, and the process exits within 5 s. The config
//! file is re-read at natural points (before each delivery, every few seconds) and each
//! change is logged once.
//!
//! Without `--foreground` (detached): refuse when an ingress is already running (exit 1,
//! naming the pid) or the same preflight finds a problem (exit 2); else re-run this
//! binary as `start --foreground --own-session` in its own session, with the resolved
//! config path exported, stdin from `/dev/null` and its output appended to
//! `<root>/logs/service.out`, and report success only once the child holds every
//! enabled ingress's lock and has said it is ready (every ingress listening). A child
//! that exits first, or is not ready within [`START_PATIENCE`], is a failure reported
//! with what it wrote and the log's path.
//!
//! The service also answers `GET /metrics` on the receiver's port (loop-daemon's
//! `metrics`) and, unless `service.enabled: false`, serves the control plane on
//! `service.host:service.port` (loop-daemon's `api`). Glue only: building, checking and running the service are loop-daemon's,
//! the locks loop-store's; this verb prints and picks the exit code.

use std::fs::{self, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use loop_daemon::poller::PollerError;
use loop_daemon::service::{Ingress, Mode, Notice, Service, ServiceError, preflight};

use super::service;
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
    // The service reports through `tracing` (journal failures, reload problems) on stderr.
    let level = if global.verbose > 0 { tracing::Level::INFO } else { tracing::Level::WARN };
    let _ = tracing_subscriber::fmt().with_max_level(level).with_writer(std::io::stderr).try_init();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the service's runtime")?;
    let status = runtime.block_on(serve(loaded, args.hold_processing, printer))?;
    if status == ExitStatus::Success {
        printer.info("the service stopped");
    }
    Ok(status)
}

/// Builds the service the config describes, says what it runs, and runs it until TERM
/// or INT.
async fn serve(loaded: CliConfig, held: bool, printer: Printer) -> anyhow::Result<ExitStatus> {
    // Listening before anything is built: a TERM from then on is a clean stop.
    let stop = super::stop_signal()?;
    let CliConfig { location, config, source } = loaded;
    let mode = Mode::Serve { hold_processing: held };
    let service = match Service::from_config(source, service::environment(&config), mode).await {
        Ok(service) => service,
        Err(
            err @ (ServiceError::ReceiverRunning { .. }
            | ServiceError::Poller(PollerError::Blocked { .. })),
        ) => {
            printer.error(&err);
            return Ok(ExitStatus::Negative);
        }
        Err(ServiceError::Misconfigured(problems)) => {
            service::refuse(&problems, &location.path, printer);
            return Ok(ExitStatus::CouldNotRun);
        }
        Err(err) => return Err(err).context("cannot start the service"),
    };
    for warning in service.warnings() {
        printer.warning(warning);
    }
    if service.backlog() > 0 {
        printer.info(format!("replaying {} journalled deliveries", service.backlog()));
    }
    let pid = std::process::id();
    if let Some(url) = service.webhook_url() {
        let holding = if held { "; holding deliveries unprocessed" } else { "" };
        printer.info(format!("receiving webhooks at {url} (pid {pid}){holding}"));
    }
    if let Some(interval) = service.poll_interval() {
        printer.info(format!("polling every {}s (pid {pid})", interval.as_secs()));
    }
    if let Some(url) = service.api_url() {
        printer.info(format!("control plane at {url}/api/v1, dashboard at {url}/ (pid {pid})"));
    }

    service
        .run(stop, move |event| match event {
            // Every ingress holds its lock and listens: what a detached start waits for.
            Notice::Ready => printer.info(format!("{READY} (pid {pid})")),
            Notice::ReceiverStopped => printer.info("webhook receiver stopped"),
            Notice::ConfigNotApplied { error } => printer.warning(format!(
                "the config change was not applied (the previous config stays): {error}"
            )),
        })
        .await?;
    Ok(ExitStatus::Success)
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
    for ingress in Ingress::ALL {
        let live = service::liveness(ingress, &layout)?;
        if live.running() {
            let holder =
                live.pid().map_or_else(|| "a process".to_owned(), |pid| format!("pid {pid}"));
            printer.error(format!(
                "the service is already running: {holder} holds `{}` ({})",
                live.pidfile.display(),
                ingress.name()
            ));
            printer.hint("`the-loop restart` replaces it; `the-loop status` shows what runs");
            return Ok(ExitStatus::Negative);
        }
    }
    let problems = preflight(config, &service::environment(config));
    if !problems.is_empty() {
        service::refuse(&problems, &loaded.location.path, printer);
        return Ok(ExitStatus::CouldNotRun);
    }
    let enabled: Vec<Ingress> =
        Ingress::ALL.into_iter().filter(|ingress| ingress.enabled(config)).collect();

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

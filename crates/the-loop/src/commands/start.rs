//! `the-loop start`: bring up every enabled ingress in one service process.
//!
//! Today that is the webhook receiver, run in this process with `--foreground`. The order
//! is the reference's: the receiver's pidfile lock (a second receiver is refused naming
//! the holder's pid, exit 1) → the secret (unset is refused unless `allowUnsigned`, exit
//! 2) → the inbox journal → bind → serve until TERM or INT, then stop within 5 s,
//! finishing the delivery in flight.
//!
//! Detached start (own session, output to `<root>/logs/service.out`) and the poller are
//! added by later issues: each enabled ingress becomes one more task under the same
//! shutdown signal here, and detached start re-runs this verb with `--foreground`.
//! Glue only: the receiver is loop-daemon's, the lock loop-store's.

use anyhow::Context as _;
use loop_daemon::config_source::ConfigSource;
use loop_daemon::receiver::{self, Receiver, ReceiverError, Secret};
use loop_store::{PidLock, StoreError};
use tokio::signal::unix::{SignalKind, signal};

use crate::ExitStatus;
use crate::cli::{GlobalArgs, StartArgs};
use crate::config_file::CliConfig;
use crate::printer::Printer;
use crate::state_root;

pub fn run(args: StartArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    if !args.foreground {
        printer.error(
            "`the-loop start` without `--foreground` (a detached service) is not available yet",
        );
        printer.hint("run `the-loop start --foreground` under systemd, tmux or nohup");
        return Ok(ExitStatus::CouldNotRun);
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
    let receiver = match Receiver::new(source, layout, secret) {
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
        receiver.run(listener, stop).await.context("the webhook receiver failed")
    })?;
    printer.info("webhook receiver stopped");
    Ok(ExitStatus::Success)
}

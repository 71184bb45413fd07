//! `the-loop poll --once`: one poll cycle in the foreground — the cron form (SPEC §2).
//!
//! Takes the poller's lock (`poll.pid`, the same one a running poller holds, so two
//! overlapping cron runs never interleave), runs one cycle through the real dispatcher,
//! lets queued deliveries finish, gives back the attempts the dispatcher abandoned, and
//! exits 0 on a clean cycle, 1 when a scope was degraded, 2 when it cannot run (bad
//! config, routing disabled, nothing to poll, the lock held by another poller). SIGINT/SIGTERM stop the
//! cycle after the item in flight.
//!
//! Glue only: the poller and the dispatcher are loop-daemon's.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use loop_core::config::Config;
use loop_daemon::dispatcher::Dispatcher;
use loop_daemon::poller::{CycleReport, GithubClients, Poller, PollerError, scope};
use loop_daemon::shutdown::Shutdown;
use loop_store::{EventLog, StateStore};
use tokio::signal::unix::{SignalKind, signal};

use super::service;
use crate::ExitStatus;
use crate::cli::{GlobalArgs, PollArgs};
use crate::config_file::CliConfig;
use crate::printer::Printer;
use crate::state_root;

/// How long queued deliveries may take to finish after the cycle.
const DRAIN: Duration = Duration::from_secs(30);

pub fn run(args: PollArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    if !args.once {
        printer.error("`the-loop poll` runs one cycle and needs `--once`");
        printer.hint("to poll continuously, set `polling.enabled: true` and run `the-loop start`");
        return Ok(ExitStatus::CouldNotRun);
    }
    let loaded = CliConfig::load(global, printer)?;
    let config = loaded.config;
    if !config.routing.enabled {
        // The dispatcher acts on nothing then: every polled comment would be retried and
        // given up, with a notice on GitHub.
        printer.error("nothing would be acted on: `routing.enabled` is false");
        printer
            .hint(format!("set `routing.enabled: true` in `{}`", loaded.location.path.display()));
        return Ok(ExitStatus::CouldNotRun);
    }
    if scope::scopes(&config).is_empty() {
        printer.error("nothing to poll: no repository is configured");
        printer.hint(format!(
            "list the repositories to poll under `repositories` in `{}`",
            loaded.location.path.display()
        ));
        return Ok(ExitStatus::CouldNotRun);
    }
    let github = match GithubClients::for_config(&config) {
        Ok(github) => github,
        Err(err) => {
            printer.error(&err);
            return Ok(ExitStatus::CouldNotRun);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the poller's runtime")?;
    let report = runtime.block_on(once(config, github, printer))?;
    let Some(report) = report else { return Ok(ExitStatus::CouldNotRun) };
    if global.json {
        printer.data(summary_json(&report));
    } else {
        printer.info(summary_line(&report));
        for scope in &report.scopes_degraded {
            printer.warning(format!(
                "degraded: {scope} — see `the-loop events --event 'poll.scope_*'`"
            ));
        }
    }
    Ok(if report.scopes_degraded.is_empty() { ExitStatus::Success } else { ExitStatus::Negative })
}

/// Lock, one cycle, drain, release. `None` when another poller holds the lock.
async fn once(
    config: Arc<Config>,
    github: GithubClients,
    printer: Printer,
) -> anyhow::Result<Option<CycleReport>> {
    let layout = state_root::layout(&config);
    let store = StateStore::new(layout.clone(), EventLog::new(layout.event_log(), "poll"));
    let parts = loop_daemon::service::dispatcher_parts(
        config.clone(),
        store.clone(),
        github.primary().cloned(),
        &service::host(),
    );
    let dispatcher = Dispatcher::open(parts).await.context("cannot open the dispatcher")?;
    let mut poller = Poller::new(store, github, dispatcher.clone(), env!("CARGO_PKG_VERSION"));
    let _lock = match poller.lock() {
        Ok(lock) => lock,
        Err(err @ PollerError::Blocked { .. }) => {
            printer.error(&err);
            return Ok(None);
        }
        Err(err) => return Err(err).context("cannot take the poller's lock"),
    };
    poller.announce_start(&config, true);
    let (stop, signalled) = tokio::sync::broadcast::channel(1);
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let stopper = tokio::spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        let _ = stop.send(());
    });
    let report = poller.cycle(&config, &mut Shutdown::new(signalled)).await;
    stopper.abort();
    let abandoned = dispatcher.shutdown(DRAIN).await;
    poller.release_attempts(&abandoned).context("cannot release the abandoned attempts")?;
    poller.announce_stop();
    Ok(Some(report))
}

fn summary_line(report: &CycleReport) -> String {
    let mut line = format!(
        "poll cycle: {} item(s), {} spawn(s), {} comment(s) forwarded",
        report.items_seen, report.spawns, report.comments_forwarded
    );
    for (count, what) in [
        (report.closures, "closed"),
        (report.failures, "gave up"),
        (report.ledger_checks, "ledger check(s)"),
    ] {
        if count > 0 {
            line.push_str(&format!(", {count} {what}"));
        }
    }
    if !report.errors.is_empty() {
        line.push_str(&format!(", {} error(s)", report.errors.len()));
    }
    if !report.scopes_degraded.is_empty() {
        line.push_str(&format!(", {} scope(s) degraded", report.scopes_degraded.len()));
    }
    line.push_str(&format!(
        "; {} GitHub request(s), {} answered 304",
        report.requests, report.not_modified
    ));
    if report.interrupted {
        line.push_str(" (interrupted by a stop request)");
    }
    line
}

fn summary_json(report: &CycleReport) -> serde_json::Value {
    serde_json::json!({
        "itemsSeen": report.items_seen,
        "spawns": report.spawns,
        "commentsForwarded": report.comments_forwarded,
        "closures": report.closures,
        "failures": report.failures,
        "ledgerChecks": report.ledger_checks,
        "errors": report.errors,
        "interrupted": report.interrupted,
        "scopesPolled": report.scopes_polled,
        "scopesDegraded": report.scopes_degraded,
        "scopesFailed": report.scopes_failed,
        "scopesSkipped": report.scopes_skipped,
        "scopes": report.scopes,
        "requests": report.requests,
        "notModified": report.not_modified,
    })
}

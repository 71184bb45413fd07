//! `the-loop poll --once`: one poll cycle in the foreground — the cron form (SPEC §2).
//!
//! Takes the poller's lock (`poll.pid`, the same one a running poller holds, so two
//! overlapping cron runs never interleave), runs one cycle through the real dispatcher,
//! lets queued deliveries finish, gives back the attempts the dispatcher abandoned, and
//! exits 0 on a clean cycle, 1 when a scope was degraded, 2 when it cannot run (bad
//! config, routing disabled, nothing to poll, the lock held by another poller). SIGINT/SIGTERM stop the
//! cycle after the item in flight.
//!
//! Glue only: the service that polls once (poller, dispatcher, checks) is loop-daemon's.

use anyhow::Context as _;
use loop_daemon::poller::{CycleReport, PollerError};
use loop_daemon::service::{Mode, Service, ServiceError};

use super::service;
use crate::ExitStatus;
use crate::cli::{GlobalArgs, PollArgs};
use crate::config_file::CliConfig;
use crate::printer::Printer;

pub fn run(args: PollArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    if !args.once {
        printer.error("`the-loop poll` runs one cycle and needs `--once`");
        printer.hint("to poll continuously, set `polling.enabled: true` and run `the-loop start`");
        return Ok(ExitStatus::CouldNotRun);
    }
    let loaded = CliConfig::load(global, printer)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the poller's runtime")?;
    let report = runtime.block_on(once(loaded, printer))?;
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

/// Builds the one-cycle service and runs its cycle until done or SIGINT/SIGTERM. `None`
/// when it cannot run (already said why).
async fn once(loaded: CliConfig, printer: Printer) -> anyhow::Result<Option<CycleReport>> {
    // Listening before anything is built: a TERM from then on is a clean stop.
    let stop = super::stop_signal()?;
    let CliConfig { location, config, source } = loaded;
    let env = service::environment(&config);
    let service = match Service::from_config(source, env, Mode::PollOnce).await {
        Ok(service) => service,
        Err(ServiceError::Misconfigured(problems)) => {
            service::refuse(&problems, &location.path, printer);
            return Ok(None);
        }
        Err(ServiceError::Poller(err @ PollerError::Blocked { .. })) => {
            printer.error(&err);
            return Ok(None);
        }
        Err(err) => return Err(err).context("cannot start the poller"),
    };
    Ok(Some(service.poll_once(stop).await?))
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

//! `the-loop status`: per ingress, running / stopped / misconfigured / disabled, from
//! its pidfile lock alone, the poller's last cycle and scope health from its heartbeat,
//! and, while the service runs, what each live session's agent is doing (the watcher's
//! `local/agent/states.json`; docs/agent-states.md).
//!
//! Read-only: it never removes a stale pidfile and never signals anything. Exit 0 only
//! if every enabled ingress is running (the keepalive primitive: `status || start`).

use jiff::{SignedDuration, Timestamp};
use loop_daemon::service::{Environment, Ingress, Liveness, Misconfiguration, preflight};
use loop_store::heartbeat::Heartbeat;
use loop_store::{EventLog, StateLayout, StateStore};
use serde_json::{Value, json};

use super::service;
use crate::ExitStatus;
use crate::cli::GlobalArgs;
use crate::config_file::CliConfig;
use crate::printer::Printer;
use crate::state_root;

/// What one row of `status` says about an ingress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Running {
        pid: Option<u32>,
    },
    Stopped,
    /// Enabled but cannot run with this config (and not running).
    Misconfigured {
        reason: String,
    },
    Disabled,
}

impl State {
    fn name(&self) -> &'static str {
        match self {
            Self::Running { .. } => "running",
            Self::Stopped => "stopped",
            Self::Misconfigured { .. } => "misconfigured",
            Self::Disabled => "disabled",
        }
    }
}

/// One ingress's row.
#[derive(Debug, Clone)]
pub struct Row {
    pub live: Liveness,
    pub enabled: bool,
    pub state: State,
}

/// The rows for every ingress, in start order, with what the service's preflight says
/// about an enabled one in `env`.
pub fn rows(
    config: &loop_core::config::Config,
    layout: &StateLayout,
    env: &Environment,
) -> anyhow::Result<Vec<Row>> {
    let problems = preflight(config, env);
    Ingress::ALL
        .into_iter()
        .map(|ingress| {
            let live = service::liveness(ingress, layout)?;
            let enabled = ingress.enabled(config);
            let reasons: Vec<String> = problems
                .iter()
                .filter(|problem| problem.ingress() == Some(ingress))
                .map(Misconfiguration::to_string)
                .collect();
            let state = if live.running() {
                State::Running { pid: live.pid() }
            } else if !enabled {
                State::Disabled
            } else if !reasons.is_empty() {
                State::Misconfigured { reason: reasons.join("; ") }
            } else {
                State::Stopped
            };
            Ok(Row { live, enabled, state })
        })
        .collect()
}

pub fn run(global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    let loaded = CliConfig::load(global, printer)?;
    let config = &loaded.config;
    let layout = state_root::layout(config);
    let rows = rows(config, &layout, &service::environment(config))?;
    let store = StateStore::new(layout.clone(), EventLog::disabled());
    let heartbeat = store.read_heartbeat().unwrap_or_else(|err| {
        printer.warning(format!("cannot read the poller's heartbeat: {err}"));
        None
    });
    let ok = rows.iter().all(|row| !row.enabled || row.live.running());
    let now = Timestamp::now();
    let warnings = graph_warnings(&store).unwrap_or_else(|err| {
        printer.warning(format!("cannot read the session records: {err}"));
        Vec::new()
    });
    let running = rows.iter().any(|row| row.live.running());
    let agents = match running {
        true => store.read_agent_states().map(|states| states.agents).unwrap_or_else(|err| {
            printer.warning(format!("cannot read the agents' states: {err}"));
            Vec::new()
        }),
        false => Vec::new(),
    };
    if global.json {
        let services: Vec<Value> =
            rows.iter().map(|row| row_json(row, &layout, heartbeat.as_ref())).collect();
        let graphs: Vec<Value> = warnings
            .iter()
            .map(|(item, warning)| json!({"workItem": item.to_string(), "graphWarning": warning}))
            .collect();
        printer.data(
            json!({ "services": services, "agents": agents, "graphWarnings": graphs, "ok": ok }),
        );
    } else {
        for row in &rows {
            printer.data(row_text(row));
            if row.live.ingress == Ingress::Poller && (row.enabled || row.live.running()) {
                for line in heartbeat_lines(heartbeat.as_ref(), row.live.running(), now) {
                    printer.data(format!("    {line}"));
                }
            }
        }
        if !agents.is_empty() {
            printer.data("agents:".to_owned());
        }
        for agent in &agents {
            let since = agent.since.strftime("%H:%M:%S UTC");
            let mark = if agent.needs_attention { "  ← needs you" } else { "" };
            let detail = match agent.detail == agent.state {
                true => String::new(),
                false => format!(" — {}", agent.detail),
            };
            printer.data(format!(
                "    {} {} since {since}{detail}{mark}",
                agent.work_item, agent.state
            ));
        }
        for (item, warning) in &warnings {
            printer.warning(format!("{item}: {warning}"));
        }
    }
    Ok(if ok { ExitStatus::Success } else { ExitStatus::Negative })
}

/// Each live session whose process graph cannot run, with why (the warning the
/// dispatcher recorded on its endpoint).
fn graph_warnings(store: &StateStore) -> anyhow::Result<Vec<(loop_core::WorkItemRef, String)>> {
    Ok(store
        .list_local_records()?
        .into_iter()
        .filter_map(|record| {
            let own = record.own_endpoint().filter(|own| own.is_live())?;
            let warning = own.graph_warning.clone()?;
            Some((record.work_item.clone(), warning))
        })
        .collect())
}

fn row_text(row: &Row) -> String {
    let enabled = if row.enabled { "[enabled]" } else { "[disabled]" };
    let name = row.live.ingress.name();
    match &row.state {
        State::Running { pid: Some(pid) } => format!("{name:<11} running (pid {pid}) {enabled}"),
        State::Running { pid: None } => format!("{name:<11} running (starting) {enabled}"),
        State::Stopped => format!("{name:<11} stopped {enabled}"),
        State::Misconfigured { reason } => format!("{name:<11} misconfigured {enabled} — {reason}"),
        State::Disabled => format!(
            "{name:<11} not running {enabled} — `{}` is false",
            row.live.ingress.enabled_key()
        ),
    }
}

fn row_json(row: &Row, layout: &StateLayout, heartbeat: Option<&Heartbeat>) -> Value {
    let mut value = json!({
        "service": row.live.ingress.name(),
        "enabled": row.enabled,
        "state": row.state.name(),
        "running": row.live.running(),
        "pid": row.live.pid(),
        "pidfile": row.live.pidfile,
        "logfile": service::output_log(layout),
    });
    if let State::Misconfigured { reason } = &row.state {
        value["reason"] = json!(reason);
    }
    if row.live.ingress == Ingress::Poller {
        value["startedAt"] = json!(heartbeat.map(|h| h.started_at));
        value["lastCycleAt"] = json!(heartbeat.and_then(|h| h.last_cycle_at));
        value["lastCycle"] = json!(heartbeat.and_then(|h| h.last_cycle.as_ref()));
        value["intervalSeconds"] = json!(heartbeat.map(|h| h.interval_seconds));
        value["scopes"] = json!(heartbeat.map(|h| &h.scopes));
    }
    value
}

/// The poller's heartbeat in words: when it started, what its last cycle did, and how
/// each scope fared.
fn heartbeat_lines(heartbeat: Option<&Heartbeat>, running: bool, now: Timestamp) -> Vec<String> {
    let Some(heartbeat) = heartbeat else {
        return vec!["last cycle: unknown — no heartbeat recorded".to_owned()];
    };
    let mut lines =
        vec![format!("started: {} ({})", heartbeat.started_at, age(heartbeat.started_at, now))];
    match (heartbeat.last_cycle_at, &heartbeat.last_cycle) {
        (Some(at), Some(cycle)) => {
            let stopped = if running { "" } else { ", before it stopped" };
            let mut counts = vec![
                format!("{} item(s)", cycle.items_seen),
                format!("{} spawn(s)", cycle.spawns),
                format!("{} comment(s) forwarded", cycle.comments_forwarded),
            ];
            for (n, what) in [
                (cycle.closures, "closed"),
                (cycle.failures, "gave up"),
                (cycle.errors, "error(s)"),
            ] {
                if n > 0 {
                    counts.push(format!("{n} {what}"));
                }
            }
            if cycle.interrupted {
                counts.push("interrupted".to_owned());
            }
            lines.push(format!(
                "last cycle: {at} ({}{stopped}) — {}",
                age(at, now),
                counts.join(", ")
            ));
        }
        _ => lines.push("last cycle: none recorded yet".to_owned()),
    }
    lines.extend(scope_lines(heartbeat, now));
    lines
}

/// One line per scope (when it last answered, what the last cycle cost), then the
/// reference's `degraded:` lines.
fn scope_lines(heartbeat: &Heartbeat, now: Timestamp) -> Vec<String> {
    let mut lines = Vec::new();
    for scope in &heartbeat.scopes {
        let polled = scope
            .last_polled_at
            .map_or_else(|| "never polled".to_owned(), |at| format!("polled {}", age(at, now)));
        lines.push(format!(
            "scope: {} [{}] — {polled}, {} request(s), {} answered 304",
            scope.repository, scope.label, scope.requests, scope.not_modified
        ));
    }
    for scope in heartbeat.scopes.iter().filter(|s| s.degraded) {
        let reason = scope.reason.as_deref().unwrap_or("its listing failed");
        lines.push(format!("degraded: {} — {reason}", scope.repository));
    }
    let nothing_polled = heartbeat.last_cycle.as_ref().is_some_and(|c| c.scopes_polled == 0);
    if nothing_polled && !heartbeat.scopes.is_empty() {
        lines.push("degraded: no repository was polled — every listing failed".to_owned());
    }
    lines
}

/// `42s ago`, `5m ago`, `3h ago`, `2d ago`.
fn age(then: Timestamp, now: Timestamp) -> String {
    let secs = now.duration_since(then).max(SignedDuration::ZERO).as_secs();
    match secs {
        0..60 => format!("{secs}s ago"),
        60..3600 => format!("{}m ago", secs / 60),
        3600..86_400 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use loop_store::heartbeat::{CycleSummary, ScopeHealth, ScopeMonitor};

    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn ages_are_said_in_the_largest_whole_unit() {
        let now = at("2026-01-02T00:00:00Z");
        assert_eq!(age(at("2026-01-01T23:59:18Z"), now), "42s ago");
        assert_eq!(age(at("2026-01-01T23:55:00Z"), now), "5m ago");
        assert_eq!(age(at("2026-01-01T21:00:00Z"), now), "3h ago");
        assert_eq!(age(at("2025-12-31T00:00:00Z"), now), "2d ago");
        assert_eq!(age(at("2026-01-02T00:00:09Z"), now), "0s ago", "a clock skew is not negative");
    }

    #[test]
    fn a_last_cycle_reads_as_counts_and_says_when_the_poller_has_stopped_since() {
        let heartbeat = Heartbeat {
            started_at: at("2026-01-01T23:00:00Z"),
            last_cycle_at: Some(at("2026-01-01T23:59:00Z")),
            interval_seconds: 60,
            last_cycle: Some(CycleSummary {
                items_seen: 3,
                spawns: 1,
                comments_forwarded: 2,
                errors: 1,
                ..CycleSummary::default()
            }),
            scopes: Vec::new(),
        };
        let lines = heartbeat_lines(Some(&heartbeat), false, at("2026-01-02T00:00:00Z"));
        assert_eq!(lines[0], "started: 2026-01-01T23:00:00Z (1h ago)");
        assert_eq!(
            lines[1],
            "last cycle: 2026-01-01T23:59:00Z (1m ago, before it stopped) — 3 item(s), 1 spawn(s), 2 comment(s) forwarded, 1 error(s)"
        );
    }

    #[test]
    fn no_heartbeat_and_no_cycle_yet_are_said_plainly() {
        let now = at("2026-01-02T00:00:00Z");
        assert_eq!(
            heartbeat_lines(None, true, now),
            ["last cycle: unknown — no heartbeat recorded"]
        );
        let fresh = Heartbeat {
            started_at: now,
            last_cycle_at: None,
            interval_seconds: 60,
            last_cycle: None,
            scopes: Vec::new(),
        };
        assert_eq!(heartbeat_lines(Some(&fresh), true, now)[1], "last cycle: none recorded yet");
    }

    #[test]
    fn each_scope_says_when_it_last_answered_and_a_degraded_one_says_why() {
        let now = at("2026-01-02T00:00:00Z");
        let scope = |repository: &str, degraded: bool| ScopeHealth {
            repository: repository.into(),
            label: "go".into(),
            monitor: ScopeMonitor { issues: true, pull_requests: true },
            last_polled_at: Some(at("2026-01-01T23:58:00Z")),
            degraded,
            reason: degraded.then(|| "Not Found".to_owned()),
            requests: 1,
            not_modified: u64::from(!degraded),
        };
        let heartbeat = Heartbeat {
            started_at: now,
            last_cycle_at: Some(now),
            interval_seconds: 60,
            last_cycle: Some(CycleSummary { scopes_polled: 1, ..CycleSummary::default() }),
            scopes: vec![scope("octo/app", false), scope("octo/gone", true)],
        };
        let lines = heartbeat_lines(Some(&heartbeat), true, now);
        assert_eq!(
            lines[2..],
            [
                "scope: octo/app [go] — polled 2m ago, 1 request(s), 1 answered 304",
                "scope: octo/gone [go] — polled 2m ago, 1 request(s), 0 answered 304",
                "degraded: octo/gone — Not Found",
            ]
        );
        let nothing = Heartbeat {
            last_cycle: Some(CycleSummary::default()),
            scopes: vec![scope("octo/gone", true)],
            ..heartbeat
        };
        let lines = heartbeat_lines(Some(&nothing), true, now);
        assert_eq!(
            lines.last().map(String::as_str),
            Some("degraded: no repository was polled — every listing failed")
        );
    }
}

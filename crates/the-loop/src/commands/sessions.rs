//! `the-loop sessions …`: the operator's view of work items and their sessions, and the
//! levers over them (reference §2.4, sessions §1.7, §2.8, §6.1–6.2).
//!
//! Views (`list`, `show`) read the records; `attach` execs `tmux attach-session`;
//! `link-pr` records a pull request through the one `link_pull_request` the HTTP API,
//! the MCP tool and the plugin's hook share. The control verbs (`start`, `stop`, `pause`,
//! `resume`, `cleanup`), `close` and `reset` run in this process through the service's
//! dispatcher (loop-daemon's `Service`, built for the operator) — the same decisions and
//! effects as the keyword comments — and the control verbs then post the keyword back
//! to the work item (the operator layer's `post_keyword`: self-marked, naming the
//! instance), so the thread stays the record (`--no-comment` skips it; a failed post
//! only warns). Glue only.

use std::os::unix::process::CommandExt as _;

use anyhow::Context as _;
use loop_core::WorkItemRef;
use loop_core::config::Config;
use loop_core::control::Command;
use loop_core::explain::describe_item;
use loop_core::login::Login;
use loop_core::record::{Control, EndpointStatus, LocalRecord};
use loop_daemon::agent::{LinkError, Linked};
use loop_daemon::config_source::ConfigSource;
use loop_daemon::dispatcher::Dispatcher;
use loop_daemon::operator::{Issued, Surface};
use loop_daemon::service::{Mode, Service};
use loop_sessions::Liveness;
use loop_store::{EventLog, StateStore};
use serde_json::json;

use super::service;
use crate::ExitStatus;
use crate::cli::{ControlArgs, GlobalArgs, SessionStatus, SessionsCommand};
use crate::config_file::CliConfig;
use crate::printer::Printer;
use crate::state_root;

/// The event log's `source` for what the CLI does.
const SOURCE: &str = "cli";

pub fn run(
    command: SessionsCommand,
    global: &GlobalArgs,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let CliConfig { config, source, .. } = CliConfig::load(global, printer)?;
    let site = Site::new(&config);
    match command {
        SessionsCommand::List { status } => list(&site, status, global.json, printer),
        SessionsCommand::Show(item) => show(&site, &item.work_item, global.json, printer),
        SessionsCommand::Attach { item, read_only } => {
            attach(&site, &item.work_item, read_only, printer)
        }
        SessionsCommand::Start(args) => control(source, &site, Command::Start, args, printer),
        SessionsCommand::Stop(args) => control(source, &site, Command::Stop, args, printer),
        SessionsCommand::Pause(args) => control(source, &site, Command::Pause, args, printer),
        SessionsCommand::Resume(args) => control(source, &site, Command::Resume, args, printer),
        SessionsCommand::Cleanup(args) => control(source, &site, Command::Cleanup, args, printer),
        SessionsCommand::Close { item, keep_tmux, kill_tmux } => {
            let keep = if kill_tmux { Some(false) } else { keep_tmux.then_some(true) };
            close(source, &item.work_item, keep, printer)
        }
        SessionsCommand::Reset { work_items, all, dry_run } => {
            reset(source, &site, work_items, all, dry_run, printer)
        }
        SessionsCommand::LinkPr { item, pull_request } => {
            link_pr(&site, &config, &item.work_item, &pull_request, printer)
        }
    }
}

/// The state root this invocation works on.
pub struct Site {
    pub store: StateStore,
}

impl Site {
    pub fn new(config: &Config) -> Self {
        let layout = state_root::layout(config);
        let events = if config.event_log.enabled {
            EventLog::new(layout.event_log(), SOURCE)
        } else {
            EventLog::disabled()
        };
        Self { store: StateStore::new(layout, events) }
    }

    fn control(&self, item: &WorkItemRef) -> anyhow::Result<Option<Control>> {
        Ok(self
            .store
            .read_section::<Control>(item)
            .with_context(|| format!("cannot read the portable record of {item}"))?
            .into_value())
    }

    fn record(&self, item: &WorkItemRef) -> anyhow::Result<Option<LocalRecord>> {
        self.store
            .load_local_record(item)
            .with_context(|| format!("cannot read the session record of {item}"))
    }
}

fn status_name(status: EndpointStatus) -> &'static str {
    match status {
        EndpointStatus::Active => "active",
        EndpointStatus::Paused => "paused",
        EndpointStatus::Closed => "closed",
    }
}

fn list(
    site: &Site,
    status: Option<SessionStatus>,
    json: bool,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let wanted = status.map(|s| match s {
        SessionStatus::Active => EndpointStatus::Active,
        SessionStatus::Paused => EndpointStatus::Paused,
        SessionStatus::Closed => EndpointStatus::Closed,
    });
    let records: Vec<_> = site
        .store
        .list_local_records()
        .context("cannot list the session records")?
        .into_iter()
        .filter(|r| wanted.is_none_or(|w| r.own_endpoint().is_some_and(|e| e.status == w)))
        .collect();
    let mut rows = Vec::new();
    for record in &records {
        rows.push((&**record, site.control(&record.work_item)?));
    }
    if json {
        let entries: Vec<_> = rows
            .iter()
            .map(|(record, control)| json!({"ref": record.work_item.to_string(), "record": record, "control": control}))
            .collect();
        printer.data(serde_json::Value::Array(entries));
        return Ok(ExitStatus::Success);
    }
    if rows.is_empty() {
        printer.info("(no registered sessions)");
        return Ok(ExitStatus::Success);
    }
    printer.data(format!(
        "{:<32} {:<8} {:<8} {:<36} {:<9} {:<18} {}",
        "Work item", "Harness", "Status", "Tmux", "Session", "Control", "Last event"
    ));
    for (record, control) in rows {
        let own = record.own_endpoint();
        let control = control.map_or_else(
            || "-".to_owned(),
            |c| format!("{} ({})", c.command.name(), c.source.name()),
        );
        printer.data(format!(
            "{:<32} {:<8} {:<8} {:<36} {:<9} {:<18} {}",
            record.work_item.to_string(),
            own.map_or("-", |e| e.harness.as_str()),
            own.map_or("-", |e| status_name(e.status)),
            own.map(|e| e.tmux_target.as_str()).filter(|t| !t.is_empty()).unwrap_or("-"),
            // The first characters identify it; the file is outside the process, so never
            // slice bytes.
            own.and_then(|e| e.harness_session_id.as_deref())
                .map_or_else(|| "-".to_owned(), |id| id.chars().take(8).collect()),
            control,
            own.and_then(|e| e.last_event_at).map_or_else(|| "-".to_owned(), |t| t.to_string()),
        ));
    }
    Ok(ExitStatus::Success)
}

fn show(
    site: &Site,
    item: &WorkItemRef,
    json: bool,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let state = site
        .store
        .item_state(item)
        .with_context(|| format!("cannot read the records of {item}"))?;
    let known = state.known();
    if json {
        printer.data(json!({
            "ref": item.to_string(),
            "session": state.session,
            "control": state.control,
            "poll": state.ledger,
            "ended": state.ended,
            "collaborators": state.collaborators,
        }));
    } else {
        printer.data(item.to_string());
        for line in describe_item(&state) {
            printer.data(format!("  {line}"));
        }
    }
    Ok(if known { ExitStatus::Success } else { ExitStatus::Negative })
}

fn attach(
    site: &Site,
    item: &WorkItemRef,
    read_only: bool,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let Some(record) = site.record(item)? else {
        printer.error(format!("{item} has no session on this machine"));
        printer.hint("`the-loop sessions list` shows the sessions there are");
        return Ok(ExitStatus::Negative);
    };
    let Some(own) = record.own_endpoint() else {
        printer.error(format!("{item}'s session record has no session of its own"));
        return Ok(ExitStatus::Negative);
    };
    if own.tmux_target.is_empty() {
        printer.error(format!("{item} has no tmux session recorded yet"));
        return Ok(ExitStatus::Negative);
    }
    let read_only = loop_sessions::registry::rules::attach_read_only(own.status, read_only);
    if read_only && own.status == EndpointStatus::Closed {
        printer.info("the session is closed: attaching read-only");
    }
    let tmux = loop_sessions::Tmux::new(loop_sessions::TmuxSettings::new(
        loop_sessions::TmuxSocket::Inherited,
        std::env::temp_dir(),
    ));
    // A kept session whose harness ended (`Dead`) is still worth attaching: its
    // scrollback is the record of the conversation.
    match tmux.liveness(&own.tmux_target) {
        Ok(Liveness::Live | Liveness::Dead) => {}
        Ok(Liveness::Unknown) => {
            printer.error(format!("tmux did not answer about `{}`", own.tmux_target));
            printer.hint("is tmux installed and on PATH?");
            return Ok(ExitStatus::Negative);
        }
        Ok(Liveness::Absent) => {
            printer.error(format!("the tmux session `{}` is gone", own.tmux_target));
            printer.hint("`the-loop sessions list` shows the sessions there are");
            return Ok(ExitStatus::Negative);
        }
        Err(err) => {
            printer.error(format!("cannot ask tmux about `{}`: {err}", own.tmux_target));
            printer.hint("is tmux installed and on PATH?");
            return Ok(ExitStatus::Negative);
        }
    }
    let argv = tmux
        .attach_command(&own.tmux_target, read_only)
        .context("cannot build the tmux command")?;
    let Some((program, args)) = argv.split_first() else {
        anyhow::bail!("the tmux command is empty");
    };
    // Only returns when the exec failed.
    let err = std::process::Command::new(program).args(args).exec();
    printer.error(format!("cannot run tmux: {err}"));
    Ok(ExitStatus::Negative)
}

/// The local user, recorded as the command's actor (never used to authorize).
pub fn operator() -> Login {
    ["USER", "LOGNAME"]
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .find_map(|name| name.parse::<Login>().ok())
        .unwrap_or_else(|| {
            "operator".parse().unwrap_or_else(|_| unreachable!("`operator` is a valid login"))
        })
}

/// Runs `f` with the dispatcher of the operator's service (loop-daemon's `Service` in
/// `Mode::Operate`) over this machine's state, on a runtime of its own.
pub fn with_dispatcher<T>(
    source: ConfigSource,
    f: impl AsyncFnOnce(&Dispatcher) -> T,
) -> anyhow::Result<T> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    runtime.block_on(async {
        let env = service::environment(source.current());
        let service = Service::from_config(source, env, Mode::Operate)
            .await
            .context("cannot open the dispatcher")?;
        let value = f(service.dispatcher()).await;
        service.close().await;
        Ok(value)
    })
}

fn control(
    source: ConfigSource,
    site: &Site,
    command: Command,
    args: ControlArgs,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let item = &args.item.work_item;
    let operator = operator();
    let (issued, posted) = with_dispatcher(source, async |d| {
        let issued = d.issue(item, command, &operator, Vec::new(), None, Surface::Cli).await;
        let post = !args.no_comment && matches!(issued, Issued::Executed { .. });
        let posted = if post {
            d.post_keyword(item, command, &[], &operator, Surface::Cli).await
        } else {
            Ok(())
        };
        (issued, posted)
    })?;
    let (done, line) = issued.report(command, item);
    let status = if done { ExitStatus::Success } else { ExitStatus::Negative };
    if done {
        printer.info(line)
    } else {
        printer.error(line)
    }
    if let Err(not_posted) = posted {
        printer.warning(not_posted);
    }
    if let (Command::Start, Some(record)) = (command, site.record(item)?)
        && let Some(own) = record.own_endpoint().filter(|e| !e.tmux_target.is_empty())
    {
        printer.info(format!(
            "attach: tmux attach -t {}  (or `the-loop sessions attach --work-item {item}`)",
            own.tmux_target
        ));
    }
    Ok(status)
}

fn close(
    source: ConfigSource,
    item: &WorkItemRef,
    keep_tmux: Option<bool>,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let closed = with_dispatcher(source, async |d| d.close_for_operator(item, keep_tmux).await)?;
    if closed {
        printer.info(format!("{item}: closed"));
        Ok(ExitStatus::Success)
    } else {
        printer.error(format!("{item} has no live session to close"));
        Ok(ExitStatus::Negative)
    }
}

fn reset(
    source: ConfigSource,
    site: &Site,
    items: Vec<WorkItemRef>,
    all: bool,
    dry_run: bool,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let mut items = items;
    if all {
        items.extend(
            site.store
                .list_local_records()
                .context("cannot list the session records")?
                .into_iter()
                .map(|r| r.work_item.clone()),
        );
        let index = site.store.portable_index().context("cannot list the portable records")?;
        items.extend(index.work_items.iter().filter_map(|e| e.work_item.parse().ok()));
        if items.is_empty() {
            printer.error("nothing to reset: no work item has a record on this machine");
            return Ok(ExitStatus::Negative);
        }
    }
    items.sort();
    items.dedup();
    if dry_run {
        for item in &items {
            let live =
                site.record(item)?.is_some_and(|r| loop_sessions::registry::rules::is_live(&r));
            printer.info(format!(
                "{item}: would {}remove the session record and clear `control`, `poll`, `collaborators` and `ended`",
                if live { "end the live session, " } else { "" }
            ));
        }
        printer.info(format!("would reset {} work item(s)", items.len()));
        return Ok(ExitStatus::Success);
    }
    let failed = with_dispatcher(source, async |d| {
        let mut failed = 0;
        for item in &items {
            match d.reset_for_operator(item).await {
                Ok(ended) => printer.info(format!(
                    "{item}: {}reset — removed session, control, poll, collaborators, ended",
                    if ended { "ended a live session; " } else { "" }
                )),
                Err(err) => {
                    failed += 1;
                    printer.error(format!("{item}: {err}"));
                }
            }
        }
        failed
    })?;
    printer.info(format!("reset {} work item(s)", items.len() - failed));
    Ok(if failed == 0 { ExitStatus::Success } else { ExitStatus::Negative })
}

fn link_pr(
    site: &Site,
    config: &Config,
    item: &WorkItemRef,
    pull_request: &str,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    match loop_daemon::agent::link_pull_request(&site.store, config, item, pull_request) {
        Ok(Linked::Linked { work_item, pull_request }) => {
            printer.info(format!("linked {pull_request} to {work_item}"));
            Ok(ExitStatus::Success)
        }
        Ok(Linked::Already { work_item, pull_request }) => {
            printer.info(format!(
                "{pull_request} is already linked to {work_item} (or its session is closed)"
            ));
            Ok(ExitStatus::Success)
        }
        Err(err @ LinkError::NoSession { .. }) => {
            printer.report(&anyhow::Error::new(err));
            Ok(ExitStatus::Negative)
        }
        Err(err) if err.is_bad_request() => {
            printer.report(&anyhow::Error::new(err));
            Ok(ExitStatus::CouldNotRun)
        }
        Err(err) => Err(err.into()),
    }
}

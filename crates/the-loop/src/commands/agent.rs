//! The agent's verbs: `the-loop ask` (from inside a session), `the-loop reply` (the
//! operator's answer from this machine) and the plugin's `hook link-pr`. Glue over
//! loop-daemon's `agent` module, run through the operator's dispatcher like the other
//! levers (docs/agent-side.md).

use std::io::Read as _;

use loop_core::agent::{Question, Refusal};
use loop_daemon::agent::{self, AgentError};

use super::sessions::{Site, operator, with_dispatcher};
use crate::ExitStatus;
use crate::cli::{AskArgs, GlobalArgs, HookCommand, ReplyArgs};
use crate::config_file::CliConfig;
use crate::env_vars;
use crate::printer::Printer;

/// Posts the question; prints its comment URL (stdout). Exit 2 when it may not be asked
/// here (no live session serves the item, empty text), 1 when posting failed.
pub fn ask(args: AskArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    let question = match Question::new(&args.question, &args.options) {
        Ok(question) => question,
        Err(refusal) => {
            printer.error(refusal);
            return Ok(ExitStatus::CouldNotRun);
        }
    };
    let CliConfig { source, .. } = CliConfig::load(global, printer)?;
    let asked = with_dispatcher(source, async |d| d.ask(&args.work_item, question).await)?;
    match asked {
        Ok(asked) => {
            printer.info(format!("asked on {}; the answer arrives as the next event", asked.asked));
            printer.data(asked.comment_url);
            Ok(ExitStatus::Success)
        }
        Err(err) => {
            let status =
                if err.is_refusal() { ExitStatus::CouldNotRun } else { ExitStatus::Negative };
            printer.report(&anyhow::Error::new(err));
            Ok(status)
        }
    }
}

/// Pastes the reply; exit 1 when there is no live session (or its pane is gone), 2 when
/// it is paused or the text is empty.
pub fn reply(args: ReplyArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    let CliConfig { source, .. } = CliConfig::load(global, printer)?;
    let operator = operator();
    let replied = with_dispatcher(source, async |d| {
        d.reply(&args.work_item, &args.text, operator.as_str()).await
    })?;
    match replied {
        Ok(replied) => {
            printer.info(format!("pasted into {}'s session", replied.served));
            match replied.mirrored {
                Ok(url) => printer.data(url),
                Err(reason) => {
                    printer.warning(format!("the reply was not mirrored on GitHub: {reason}"))
                }
            }
            Ok(ExitStatus::Success)
        }
        Err(err) => {
            let status = match &err {
                AgentError::Refused(Refusal::NoSession { .. }) | AgentError::PaneGone { .. } => {
                    ExitStatus::Negative
                }
                AgentError::Refused(_) => ExitStatus::CouldNotRun,
                _ => ExitStatus::Negative,
            };
            printer.report(&anyhow::Error::new(err));
            Ok(status)
        }
    }
}

/// Runs a hook. Whatever happens it exits 0, so it never blocks or alters what it
/// follows; it prints nothing on stdout but a permission answer given from the work item.
pub fn hook(command: HookCommand, global: &GlobalArgs) -> ExitStatus {
    match command {
        HookCommand::LinkPr => {
            if let Err(err) = link_created_pull_request(global) {
                tracing::debug!(%err, "hook link-pr: nothing linked");
            }
        }
        HookCommand::Agent => match report_agent_state(global) {
            Ok(Some(decision)) => Printer::new(true, 0).data(decision),
            Ok(None) => {}
            Err(err) => tracing::debug!(%err, "hook agent: nothing reported"),
        },
    }
    ExitStatus::Success
}

/// How long a permission request waits for an answer: under the hook's own timeout
/// (86,400 s in the plugin), so it ends by itself and the dialog stays for the terminal.
const PERMISSION_PATIENCE: std::time::Duration = std::time::Duration::from_secs(23 * 3600);
/// How often a waiting permission request looks for its answer.
const ANSWER_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Spools the hook's report for the session in THE_LOOP_SESSION (none: not a session
/// the-loop runs, nothing to do). A permission request then waits for its answer: the
/// decision to print, or `None` once the prompt was answered at the terminal (a later
/// report) or the wait ran out.
fn report_agent_state(global: &GlobalArgs) -> anyhow::Result<Option<serde_json::Value>> {
    use loop_core::agent_state::hook::{Event, Report};
    let Ok(session) = std::env::var(env_vars::SESSION) else { return Ok(None) };
    let mut input = String::new();
    std::io::stdin().take(4 << 20).read_to_string(&mut input)?;
    let value: serde_json::Value = serde_json::from_str(&input)?;
    let now = jiff::Timestamp::now();
    let request = format!("{}-{}", now.as_millisecond(), std::process::id());
    let Some(report) = Report::from_hook_input(&value, now, Some(request.clone())) else {
        return Ok(None);
    };
    let report = report.read_reset(&loop_daemon::agent_state::watch::zone_of);
    let CliConfig { config, .. } = CliConfig::load(global, Printer::new(true, 0))?;
    let spool =
        loop_store::agent_spool::AgentSpool::new(crate::state_root::layout(&config).agent_dir());
    spool.append(&session, &report)?;
    if report.event != Event::PermissionRequest {
        return Ok(None);
    }
    let mut seen = spool.read_from(&session, 0)?.next;
    let (parent, deadline) =
        (std::os::unix::process::parent_id(), std::time::Instant::now() + PERMISSION_PATIENCE);
    while std::time::Instant::now() < deadline && std::os::unix::process::parent_id() == parent {
        if let Some(decision) = spool.take_answer(&session, &request)? {
            return Ok(Some(decision));
        }
        let later = spool.read_from(&session, seen)?;
        if later
            .reports
            .iter()
            .any(|r| !matches!(r.event, Event::Notification | Event::PermissionRequest))
        {
            return Ok(None);
        }
        seen = later.next;
        std::thread::sleep(ANSWER_POLL);
    }
    Ok(None)
}

fn link_created_pull_request(global: &GlobalArgs) -> anyhow::Result<()> {
    let mut input = String::new();
    std::io::stdin().take(4 << 20).read_to_string(&mut input)?;
    let value: serde_json::Value = serde_json::from_str(&input)?;
    let Some(pull_request) = loop_core::agent::created_pull_request(&value) else { return Ok(()) };
    let item: loop_core::WorkItemRef = std::env::var(env_vars::WORK_ITEM)?.parse()?;
    let CliConfig { config, .. } = CliConfig::load(global, Printer::new(true, 0))?;
    let site = Site::new(&config);
    agent::link_pull_request(&site.store, &config, &item, &pull_request)?;
    Ok(())
}

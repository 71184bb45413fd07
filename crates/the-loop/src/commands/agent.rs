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

/// Runs a hook. Whatever happens it exits 0 and prints nothing on stdout, so it never
/// blocks or alters the tool call it follows; what it did is in the event log.
pub fn hook(command: HookCommand, global: &GlobalArgs) -> ExitStatus {
    match command {
        HookCommand::LinkPr => {
            if let Err(err) = link_created_pull_request(global) {
                tracing::debug!(%err, "hook link-pr: nothing linked");
            }
        }
    }
    ExitStatus::Success
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

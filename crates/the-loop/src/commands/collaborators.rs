//! `the-loop collaborators add|remove REF @login…`: the CLI twin of the
//! `add-collaborator` / `remove-collaborator` keywords. A collaborator's comments reach
//! the work item's session as input; a collaborator never commands, spawns or arms.
//!
//! The roster edit is the dispatcher's (`Dispatcher::issue`, `source: cli`); then the
//! keyword with its logins is posted back to the work item, self-marked. Glue only.

use std::sync::Arc;

use loop_core::control::Command;
use loop_core::login::Login;
use loop_daemon::operator::Issued;

use super::sessions::{self, Site};
use crate::ExitStatus;
use crate::cli::{CollaboratorsArgs, CollaboratorsCommand, GlobalArgs};
use crate::config_file::CliConfig;
use crate::printer::Printer;

pub fn run(
    command: CollaboratorsCommand,
    global: &GlobalArgs,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let (command, args) = match command {
        CollaboratorsCommand::Add(args) => (Command::AddCollaborator, args),
        CollaboratorsCommand::Remove(args) => (Command::RemoveCollaborator, args),
    };
    edit(command, args, global, printer)
}

fn edit(
    command: Command,
    args: CollaboratorsArgs,
    global: &GlobalArgs,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let mut logins = Vec::new();
    for login in &args.logins {
        match login.trim_start_matches('@').parse::<Login>() {
            Ok(login) => logins.push(login),
            Err(err) => {
                printer.error(format!("`{login}` is not a GitHub login: {err}"));
                return Ok(ExitStatus::CouldNotRun);
            }
        }
    }
    let loaded = CliConfig::load(global, printer)?;
    let config: &Arc<_> = &loaded.config;
    let site = Site::new(config);
    let item = &args.work_item;
    let operator = sessions::operator();
    let edited = logins.clone();
    let issued = sessions::with_dispatcher(config, &site, async |d| {
        d.issue(item, command, &operator, edited).await
    })?;
    let Issued::Roster(effects) = issued else {
        printer.error(format!("{item}: {} was not applied ({issued:?})", command.name()));
        return Ok(ExitStatus::Negative);
    };
    for (login, effect) in &effects {
        printer.info(format!("{item}: @{login} {}", effect.as_str()));
    }
    if !args.no_comment {
        let mentions: Vec<String> = logins.iter().map(|l| format!("@{l}")).collect();
        let keyword =
            format!("{} {}", command.keyword(&config.routing.control.keywords), mentions.join(" "));
        sessions::post_keyword(config, &site, item, &keyword, &operator, printer);
    }
    Ok(ExitStatus::Success)
}

//! `the-loop collaborators add|remove REF @login…`: the CLI twin of the
//! `add-collaborator` / `remove-collaborator` keywords. A collaborator's comments reach
//! the work item's session as input; a collaborator never commands, spawns or arms.
//!
//! The roster edit is the dispatcher's (`Dispatcher::issue`, `source: cli`); then the
//! keyword with its logins is posted back to the work item, self-marked
//! (`Dispatcher::post_keyword`). Glue only.

use loop_core::control::Command;
use loop_core::login::Login;
use loop_daemon::operator::{Issued, Surface};

use super::sessions;
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
    let item = &args.work_item;
    let operator = sessions::operator();
    let (issued, posted) = sessions::with_dispatcher(loaded.source, async |d| {
        let issued = d.issue(item, command, &operator, logins.clone(), None, Surface::Cli).await;
        let post = !args.no_comment && matches!(issued, Issued::Roster(_));
        let posted = if post {
            d.post_keyword(item, command, &logins, &operator, Surface::Cli).await
        } else {
            Ok(())
        };
        (issued, posted)
    })?;
    let Issued::Roster(effects) = issued else {
        printer.error(format!("{item}: {} was not applied ({issued:?})", command.name()));
        return Ok(ExitStatus::Negative);
    };
    for (login, effect) in &effects {
        printer.info(format!("{item}: @{login} {}", effect.as_str()));
    }
    if let Err(not_posted) = posted {
        printer.warning(not_posted);
    }
    Ok(ExitStatus::Success)
}

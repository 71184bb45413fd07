//! `the-loop`: parse the command line, run the verb, map the outcome to an exit code.
//!
//! This binary is a thin shell: verbs live in `commands/`, rules in loop-core, state in
//! loop-store. Only this file turns outcomes into exit codes (SPEC §2): 0 success,
//! 1 ran but the answer is negative, 2 could not run.

mod cli;
mod commands;
mod config_file;
mod env_vars;
mod printer;
mod state_root;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::Cli;
use crate::printer::Printer;

/// What a verb concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// It did what was asked, or the answer is yes.
    Success,
    /// It ran, and the answer is negative (a service is down, nothing to do).
    Negative,
    /// It could not run: bad arguments, a bad config, an unreadable state root.
    CouldNotRun,
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> Self {
        match status {
            ExitStatus::Success => ExitCode::SUCCESS,
            ExitStatus::Negative => ExitCode::from(1),
            ExitStatus::CouldNotRun => ExitCode::from(2),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let printer = Printer::new(cli.global.quiet, cli.global.verbose);
    let status = commands::run(cli, printer).unwrap_or_else(|err| {
        printer.report(&err);
        ExitStatus::CouldNotRun
    });
    status.into()
}

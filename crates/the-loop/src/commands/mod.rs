//! One module per verb: glue from parsed arguments to the libraries and back to the printer.

mod config;
mod events;
mod sim;
mod start;

use crate::ExitStatus;
use crate::cli::{Cli, Command};
use crate::printer::Printer;

pub fn run(cli: Cli, printer: Printer) -> anyhow::Result<ExitStatus> {
    match cli.command {
        Command::Config(command) => config::run(command, &cli.global, printer),
        Command::Events(args) => events::run(args, &cli.global, printer),
        Command::Sim(args) => sim::run(args, &cli.global, printer),
        Command::Start(args) => start::run(args, &cli.global, printer),
    }
}

//! One module per verb: glue from parsed arguments to the libraries and back to the printer.

mod agent;
mod collaborators;
mod config;
mod dashboard;
mod demo;
mod events;
mod explain;
mod graph;
mod harness;
mod poll;
mod restart;
mod service;
mod sessions;
mod sim;
mod stand_in_harness;
mod start;
mod status;
mod stop;

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};

use crate::ExitStatus;
use crate::cli::{Cli, Command};
use crate::printer::Printer;

pub fn run(cli: Cli, printer: Printer) -> anyhow::Result<ExitStatus> {
    match cli.command {
        Command::Config(command) => config::run(command, &cli.global, printer),
        Command::Events(args) => events::run(args, &cli.global, printer),
        Command::Sim(args) => sim::run(args, &cli.global, printer),
        Command::Poll(args) => poll::run(args, &cli.global, printer),
        Command::Start(args) => start::run(args, &cli.global, printer),
        Command::Stop(args) => stop::run(args, &cli.global, printer),
        Command::Status => status::run(&cli.global, printer),
        Command::Dashboard(args) => dashboard::run(args, &cli.global, printer),
        Command::Restart(args) => restart::run(args, &cli.global, printer),
        Command::Ask(args) => agent::ask(args, &cli.global, printer),
        Command::Reply(args) => agent::reply(args, &cli.global, printer),
        Command::Hook(command) => Ok(agent::hook(command, &cli.global)),
        Command::Harness(command) => harness::run(command, &cli.global, printer),
        Command::Explain(args) => explain::run(args, &cli.global, printer),
        Command::Graph(command) => graph::run(command, &cli.global, printer),
        Command::Sessions(command) => sessions::run(command, &cli.global, printer),
        Command::Collaborators(command) => collaborators::run(command, &cli.global, printer),
        Command::Demo(args) => demo::run(args, &cli.global, printer),
        Command::StandInHarness(args) => Ok(stand_in_harness::run(args)),
    }
}

/// The first SIGINT or SIGTERM, as a future: what stops a verb that runs in the
/// foreground (`start --foreground`, `poll --once`, `sim`). It listens from this call on,
/// so call it before building what it stops: a signal from then on is a clean stop.
fn stop_signal() -> anyhow::Result<impl Future<Output = ()>> {
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}

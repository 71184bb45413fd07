//! `the-loop events`: read the event log.

use crate::ExitStatus;
use crate::cli::{EventsArgs, GlobalArgs};
use crate::printer::Printer;

pub fn run(args: EventsArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    let _ = (args, global, printer);
    anyhow::bail!("`events` is being built")
}

//! `the-loop config check|show|init|migrate`.

use crate::ExitStatus;
use crate::cli::{ConfigCommand, GlobalArgs};
use crate::printer::Printer;

pub fn run(
    command: ConfigCommand,
    global: &GlobalArgs,
    printer: Printer,
) -> anyhow::Result<ExitStatus> {
    let _ = (command, global, printer);
    anyhow::bail!("`config` is being built")
}

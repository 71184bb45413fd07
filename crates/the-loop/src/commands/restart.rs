//! `the-loop restart [--timeout S]`: `stop`, then a detached `start` — but only when
//! everything stopped, so a service that outlived the timeout is never doubled.
//!
//! Exit 0 when both halves succeeded; otherwise the failing half's code.

use std::time::Duration;

use super::start;
use super::stop::{self, Outcome};
use crate::ExitStatus;
use crate::cli::{GlobalArgs, StopArgs};
use crate::config_file::CliConfig;
use crate::printer::Printer;
use crate::state_root;

pub fn run(args: StopArgs, global: &GlobalArgs, printer: Printer) -> anyhow::Result<ExitStatus> {
    let loaded = CliConfig::load(global, printer)?;
    let layout = state_root::layout(&loaded.config);
    printer.info("stopping:");
    let outcomes = stop::stop_all(&layout, Duration::from_secs(args.timeout))?;
    stop::report(&outcomes, args.timeout, printer);
    if outcomes.iter().any(|(_, o)| matches!(o, Outcome::Failed { .. })) {
        printer.error("not starting: the old service is still running");
        return Ok(ExitStatus::Negative);
    }
    printer.info("starting:");
    start::detached(global, printer)
}

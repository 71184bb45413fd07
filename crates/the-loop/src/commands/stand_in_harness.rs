//! `the-loop stand-in-harness` (hidden): the stand-in agent harness the demo's sessions
//! run, so a user with only the `the-loop` binary can run `the-loop demo`.
//!
//! Glue only: the program is `loop_sim::stand_in::program` (the same one the
//! `loop-stand-in` test binary runs); it owns its terminal and writes to it directly.

use std::ffi::OsString;

use crate::ExitStatus;
use crate::cli::StandInHarnessArgs;

pub fn run(args: StandInHarnessArgs) -> ExitStatus {
    let argv: Vec<OsString> = std::env::args_os().collect();
    match loop_sim::stand_in::program::run(&argv, &args.args) {
        0 => ExitStatus::Success,
        1 => ExitStatus::Negative,
        _ => ExitStatus::CouldNotRun,
    }
}

//! `loop-stand-in`: the stand-in harness binary (see `loop_sim::stand_in`); the program
//! itself is [`loop_sim::stand_in::program`], shared with `the-loop stand-in-harness`.

use std::ffi::OsString;
use std::process::ExitCode;

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    ExitCode::from(loop_sim::stand_in::program::run(&argv, argv.get(1..).unwrap_or_default()))
}

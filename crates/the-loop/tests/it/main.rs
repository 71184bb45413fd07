//! The integration tests of the `the-loop` binary: one test binary, a module per area.
//!
//! Every test runs the real built binary through [`common::Cli`], with a private `HOME`,
//! a private working directory and no `THE_LOOP_*` variables inherited.

mod agent_input;
mod agent_side;
mod common;
mod config;
mod dashboard;
mod demo;
mod events;
mod explain;
mod graph;
mod house;
mod instances;
mod kill;
mod lifecycle;
mod machine;
mod poll;
mod real_claude;
mod sessions;
mod sim;
mod soak;
mod start;

//! The fuzz harnesses: what each input boundary is put through and what must hold there
//! (SPEC §8: no panic is reachable from input). `fuzz/` wraps each [`Target`] in a
//! libFuzzer target; the `replay` test runs the committed seeds and regression inputs
//! through the same functions on stable, in `cargo test`. See docs/fuzzing.md.
//!
//! A harness panics when an invariant breaks — that is how libFuzzer and the replay test
//! see a finding.

pub mod api_responses;
pub mod config;
pub mod pane_screen;
pub mod state_files;
pub mod webhook_delivery;

/// One fuzz target: its name (the `fuzz/` binary, the `fuzz/seeds/<name>/` directory)
/// and the harness an input goes through.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

/// Every target, in the order `scripts/fuzz.sh all` runs them.
pub const TARGETS: [Target; 5] = [
    Target { name: "webhook_delivery", run: webhook_delivery::run },
    Target { name: "config", run: config::run },
    Target { name: "state_files", run: state_files::run },
    Target { name: "api_responses", run: api_responses::run },
    Target { name: "pane_screen", run: pane_screen::run },
];

//! Integration tests of loop-github against the simulated GitHub (loop-sim).
//!
//! One binary, a module per area. Every test starts its own simulator on port 0 and
//! observes waits through a recording clock instead of sleeping.

mod bench;
mod contract;
mod operations;
mod resilience;
mod support;
mod webhooks;

//! A simulated GitHub and a stand-in harness, for tests, benchmarks and `the-loop demo`.
//!
//! Filled by the GitHub-client issue.

pub mod stand_in;

//! The service: webhook receiver, poller, dispatcher runtime and metrics.
//!
//! Filled by the receiver, dispatcher and poller issues.

pub mod config_source;

//! The state root: every file the-loop writes under `state.root`.
//!
//! Portable work-item records, machine-local session records, poll clocks, the webhook
//! inbox journal, the event log, pidfile locks and the poller heartbeat. Every JSON file is
//! written atomically; a file that does not parse is quarantined, never a crash.
//!
//! This crate decides nothing: it stores and loads what loop-core's rules produce.

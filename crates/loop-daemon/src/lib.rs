//! The service: webhook receiver, poller, dispatcher runtime and metrics, and the one
//! place they are wired together.
//!
//! Layout:
//! - [`service`]: [`service::Service::from_config`] builds a process's parts once from
//!   the config and the environment it is handed; [`service::preflight`] says why it
//!   could not; `Service::run` hosts them until a stop.
//! - [`config_source`]: the config file, fingerprinted and re-read when asked.
//! - [`live_config`]: the process's one config source, followed by every part.
//! - [`receiver`]: the webhook receiver — verify, journal, 202, then judge and hand on.
//! - [`pipeline`]: judging an event for both ingresses, and the dispatcher's step
//!   executor.
//! - [`dispatcher`]: per-work-item queues, spawns, deliveries, closes, reactions.
//! - [`poller`]: scopes, incremental listings, ledgers, closure reconciliation.
//! - [`agent_state`]: every live agent's state (hooks' spool and panes, watched), which
//!   holds deliveries while a dialog or a limit is open.
//! - [`operator`]: the CLI's steering verbs through the dispatcher.
//! - [`metrics`]: `GET /metrics`.
//! - [`api`]: the control plane — `/api/v1` on `service.port`.
//! - [`shutdown`]: the shutdown signal and completion guards every task holds.
//! - [`transcript`]: where a session's Claude Code transcript is, safely.
//! - [`usage`]: tokens and cost per session and work item, read from transcripts.
//!
//! It prints nothing and reads no environment variable: the binary passes values in and
//! prints what it is told. The dispatcher's code on the runtime never blocks: its file
//! and tmux IO run on blocking threads, and event-log lines go through the process's one
//! writer with `EventLog::emit_async` (the poller's record IO is not yet moved off it).

pub mod agent;
pub mod agent_state;
pub mod api;
pub mod config_source;
pub mod dispatcher;
pub mod live_config;
pub mod mcp;
pub mod metrics;
pub mod operator;
pub mod pipeline;
pub mod poller;
pub mod receiver;
pub mod service;
pub mod shutdown;
pub mod transcript;
pub mod usage;

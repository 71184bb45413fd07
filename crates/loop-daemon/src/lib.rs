//! The service: webhook receiver, poller, dispatcher runtime and metrics.
//!
//! Layout:
//! - [`config_source`]: the config file, fingerprinted and hot-reloaded.
//! - [`live_config`]: the process's one config source, followed by every part.
//! - [`receiver`]: the webhook receiver — verify, journal, 202, then judge and hand on.
//! - [`shutdown`]: the shutdown signal and completion guards every task holds.
//!
//! The poller and the dispatcher are filled by their issues.

pub mod config_source;
pub mod dispatcher;
pub mod live_config;
pub mod metrics;
pub mod operator;
pub mod pipeline;
pub mod poller;
pub mod receiver;
pub mod service;
pub mod shutdown;

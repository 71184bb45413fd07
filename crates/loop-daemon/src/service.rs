//! The service, wired once: every process of the-loop that dispatches — `start
//! --foreground`, `poll --once`, the operator's verbs and the demo — is built by
//! [`Service::from_config`] from the config file's source and an [`Environment`], so
//! each spawns, delivers and closes sessions the same way, logs through one event-log
//! writer and follows one config source. `status` and a detached `start` ask the same
//! [`preflight`] before anything runs.
//!
//! Layout:
//! - `preflight`: [`Ingress`], [`preflight`] and its [`Misconfiguration`]s, and the
//!   [`liveness`] of an ingress from its pidfile lock.
//! - `build`: [`Service::from_config`], the [`Environment`] and the [`Mode`].
//! - `hosting`: [`Service::run`] (until a stop), [`Service::poll_once`],
//!   [`Service::close`].
//!
//! It reads no environment variable and prints nothing: the caller passes the values in
//! and is told what happens.

mod build;
mod hosting;
mod preflight;

pub use build::{Environment, Mode, Service, ServiceError, StandIns, plugin_site};
pub use hosting::{Notice, Stopped};
pub use preflight::{Ingress, Liveness, Misconfiguration, liveness, preflight};

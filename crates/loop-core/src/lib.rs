//! The model and pure rules of the-loop.
//!
//! Everything here is a value or a function from values to values: work-item refs and
//! logins, the configuration schema and its validation, and (as later capabilities land)
//! normalized events, routing, guards, control parsing and dispatch decisions.
//!
//! This crate must not do IO, read a clock or the environment, or be async: callers pass
//! file contents, `now` and environment values in. That is what lets every rule be tested
//! with plain table tests and property tests.
//!
//! Layout:
//! - [`refs`]: repositories and work-item refs, slugs, tmux names, URLs.
//! - [`checkout`]: whether a checkout is a work item's repository, from its origin URLs.
//! - [`login`]: GitHub logins.
//! - [`log`]: one event-log line as a value, and how it renders.
//! - [`config`]: the `cli-config.yaml` schema, its validation, version gate and migration.
//! - [`record`]: the shapes of the records kept about work items (portable sections, the
//!   local session record, poll clocks).
//! - [`event`]: the normalized event both ingresses produce.
//! - [`linkage`]: which issues a pull request says it delivers.
//! - [`route`]: event → ordered work-item refs, and the existence-check seam.
//! - [`hint`]: the operator's next step for an error, apart from its message.
//! - [`guards`]: self-authored marker, repository bound, actor guard, instance scope.
//! - [`command`]: the commands an operator gives a work item, as the records hold them.
//! - [`control`]: control keywords, the named-actor re-check, command semantics and the
//!   spawn-policy gate.
//! - [`excerpt`]: the capped field allow-list of an event that a prompt may show.
//! - [`hygiene`]: untrusted text cleaned of what GitHub does not show its reader.
//! - [`agent_state`]: the agent's state in its session (working, idle, at a dialog,
//!   limited, stalled, exited) and how hook reports and pane looks move it.
//! - [`pane`]: what an agent's pane shows (its input box), read from a screen capture.
//! - [`prompt`]: prompt templates, placeholders and the interaction directive.
//! - [`batch`]: deliveries pasted as one prompt (a review with its inline comments, the
//!   CI results of one commit).
//! - [`ci`]: CI evidence — which runs to read, how a log is cut, the CI report.
//! - [`plan`]: the whole decision about one event — judged at the front door, planned
//!   as ordered steps for the dispatcher, routed again when its job is dequeued.
//! - [`poll`]: the poller's ledger rules and the closure-reconciliation schedule.
//! - [`slash`]: the slash commands the-loop ships, and the instructions each carries.
//! - [`usage`]: tokens per model summed from a harness's transcript, and their cost.
//! - [`graph`]: the process graph — the shipped loops, the work item's state in them,
//!   and the runtime that moves it.

pub mod agent;
pub mod agent_state;
pub mod batch;
pub mod checkout;
pub mod ci;
pub mod command;
pub mod config;
pub mod control;
pub mod event;
pub mod excerpt;
pub mod explain;
pub mod graph;
pub mod guards;
pub mod hint;
pub mod hygiene;
pub mod linkage;
pub mod log;
pub mod login;
pub mod pane;
pub mod plan;
pub mod poll;
pub mod prompt;
pub mod record;
pub mod refs;
pub mod route;
pub mod slash;
pub mod usage;

pub use hint::Hint;
pub use login::Login;
pub use refs::{RefError, RepoRef, WorkItemRef};

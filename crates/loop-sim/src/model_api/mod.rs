//! A stand-in for Anthropic's Messages API, so the real Claude Code CLI can run in tests
//! with `ANTHROPIC_BASE_URL` pointing here: scripted answers per turn, realistic usage,
//! and a log of every request it made.
//!
//! It answers the endpoints Claude Code 2.1.197 calls (docs/simulator.md, "The model
//! stand-in", lists what it was seen to send): `HEAD /`, `POST /v1/messages` streamed or
//! whole, `POST /v1/messages/count_tokens`, with Anthropic's shapes, error bodies and
//! `request-id`s. Turns (requests offering tools) are answered by a script of [`Rule`]s
//! or a default echo; side requests (title, quota probe) apart, without using the
//! script. Rules are added in Rust ([`ModelApi::script`]) or over HTTP
//! (`POST /_stand-in/rules`) by a process that did not start the server.
//!
//! Test infrastructure, like the rest of loop-sim; it keeps nothing on disk.
//!
//! Layout:
//! - [`request`]: what a request body asks (turn or side, last user message,
//!   conversation), or why it is refused.
//! - [`script`]: rules and the book of their use.
//! - [`reply`]: what a rule answers.
//! - [`model`]: the decision for one request.
//! - [`usage`]: token counters and the estimate.
//! - [`wire`]: Anthropic's JSON and stream shapes and ids.
//! - [`log`]: the request log.

pub mod log;
pub mod model;
pub mod reply;
pub mod request;
pub mod script;
pub mod usage;
pub mod wire;

pub use log::{ModelRequest, RequestKind, SelectedHeaders, total_usage};
pub use model::AnsweredBy;
pub use reply::{LimitWindow, Reply, ReplyKind, StopReason};
pub use request::{Side, ToolResult};
pub use script::{Matcher, Rule, RuleStatus, ScriptError, Times};
pub use usage::Usage;

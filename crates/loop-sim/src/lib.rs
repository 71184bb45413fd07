//! A simulated GitHub and a stand-in harness, for tests, benchmarks and `the-loop demo`.
//!
//! GitHub cannot be reached from tests, so this crate is the ground they stand on: an HTTP
//! server answering the REST endpoints and GraphQL fields the-loop uses with GitHub's real
//! shapes, ETags, pagination and rate-limit headers; injectable faults; a scripting API
//! (Rust and `/_sim/` over HTTP) to act as users; signed webhook deliveries to a receiver;
//! and a request log for counting what the-loop asked.
//!
//! It is test and demo infrastructure: nothing in the product's runtime path may depend on
//! it, and it keeps no state on disk beyond the git repositories [`git`] serves where it is
//! told.
//!
//! Layout:
//! - [`world`]: the in-memory state and the user actions that change it.
//! - [`shapes`]: GitHub's JSON shapes for that state.
//! - [`graphql`]: the GraphQL subset (`closingIssuesReferences`).
//! - [`server`]: the HTTP server and [`Sim`], the handle tests hold.
//! - [`webhook`]: signed deliveries to a receiver.
//! - [`git`]: real git repositories a session's workspace clones.
//! - [`request_log`]: requests by endpoint and status.
//! - [`bench`](mod@bench): counting the requests a scenario makes.
//! - [`stand_in`]: a stand-in agent harness for session tests.
//! - [`model_api`]: a stand-in for Anthropic's Messages API, for running the real Claude
//!   Code against scripted answers.
//! - [`test_support`]: what every crate's tests share besides the simulator (patience,
//!   waiting for a condition, reading JSON-lines records, the stand-in binary).

// `serde_json::json!` recurses once per key; GitHub's repository object has ~80.
#![recursion_limit = "256"]

pub mod bench;
pub mod git;
pub mod graphql;
pub mod model_api;
pub mod request_log;
pub mod server;
pub mod shapes;
pub mod stand_in;
pub mod test_support;
pub mod webhook;
pub mod world;

pub use model_api::ModelApi;
pub use request_log::{RequestLog, RequestRecord};
pub use server::{Fault, FaultKind, Sim, SimSettings};
pub use webhook::{Delivery, WebhookTarget};
pub use world::{
    Action, AnnotationDraft, JobDraft, Outcome, ReviewState, StepDraft, World, WorldError,
};

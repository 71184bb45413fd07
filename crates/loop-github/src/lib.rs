//! The GitHub REST/GraphQL client and webhook signature verification.
//!
//! the-loop talks to GitHub directly over HTTPS on the operator's own token (no `gh`
//! process per call) and spends as little rate limit as it can: listings are conditional
//! (a 304 is free), only changed items are read further, and the linked issues of many pull
//! requests come from one GraphQL request.
//!
//! This crate does IO (HTTP, the environment, `gh auth token`) but makes no decisions: it
//! returns typed answers and typed errors, and the poller and dispatcher decide. It never
//! logs or prints a token.
//!
//! Layout:
//! - [`token`]: where the token comes from; [`Token`] redacts itself.
//! - [`client`]: one host's HTTP exchange (headers, ETags, pagination, retries, rate limits).
//! - [`api`]: the operations the product needs, as typed calls on [`GithubClient`].
//! - [`error`]: [`GithubError`], sorted by what a caller may conclude.
//! - [`signature`]: `X-Hub-Signature-256` verification for the webhook receiver.

pub mod api;
pub mod client;
pub mod error;
pub mod signature;
pub mod token;

pub use api::{
    CommentSurface, GithubClient, ItemKind, ItemState, ItemStatus, ListedItem, Listing,
    PostedComment, PullRequest, Reaction, ReactionTarget, ThreadComment, ThreadSince, merge_thread,
};
pub use client::{
    ApiEndpoints, Clock, GithubSettings, RateLimit, Resource, SystemClock, Tail, Validator,
};
pub use error::GithubError;
pub use signature::{SignatureError, verify_signature};
pub use token::{Token, TokenError, TokenSource};

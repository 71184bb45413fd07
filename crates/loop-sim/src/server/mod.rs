//! The simulated GitHub as an HTTP server, and [`Sim`], the handle tests and scripts hold.
//!
//! GitHub's REST endpoints the client uses are served at the root (github.com layout) and
//! under `/api/v3` (Enterprise layout); GraphQL at `/graphql` and `/api/graphql`. Answers
//! carry `ETag`s (a matching `If-None-Match` gets a 304 that costs no rate limit),
//! `Link` pagination and `x-ratelimit-*` headers. Faults can be injected per path.
//! Requests need a `User-Agent` (else 403) and a token (else 401), as on GitHub.
//!
//! Scripting lives under `/_sim/`: `POST /_sim/actions` (an [`Action`]), `GET /_sim/world`,
//! `GET|DELETE /_sim/requests`, `POST /_sim/faults`, `POST|DELETE /_sim/webhook`,
//! `GET /_sim/deliveries`, `POST /_sim/rate-limit`.
//!
//! The server takes a bound listener (port 0 in tests) and stops when [`Sim::shutdown`] is
//! called or the handle is dropped.
//!
//! Layout: this module holds what the server's parts share (settings, faults, the state
//! behind the mutexes, a reply before its headers); [`Sim`] is in `handle`, the GitHub
//! front door in `github`, which routes (`route`) to the REST writes (`rest`) and reads
//! (`read`) or to GraphQL; `/_sim/` is `scripting`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use axum::http::StatusCode;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::request_log::RequestLog;
use crate::shapes::Urls;
use crate::webhook::{self, Delivery, WebhookTarget};
use crate::world::{Action, Outcome, World, WorldError};

mod github;
mod handle;
mod read;
mod rest;
mod route;
mod scripting;

pub use handle::Sim;

/// How the simulated GitHub presents itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimSettings {
    /// The web root in `html_url`s; work-item refs are read from it (`https://github.com`,
    /// or `https://ghe.example.com` to simulate an Enterprise host).
    pub web: String,
    /// The login every API token acts as (who the-loop's comments are by).
    pub viewer: String,
    /// Requests per rate-limit window, for REST and for GraphQL.
    pub rate_limit: u64,
}

impl Default for SimSettings {
    fn default() -> Self {
        Self {
            web: "https://github.com".to_owned(),
            viewer: "loop-operator".to_owned(),
            rate_limit: 5000,
        }
    }
}

/// A failure to inject into the next matching requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    pub kind: FaultKind,
    /// How many requests it affects.
    #[serde(default = "one")]
    pub times: u32,
    /// Only requests whose path contains this (any request when absent).
    #[serde(default)]
    pub path_contains: Option<String>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultKind {
    /// Answer normally, after this delay.
    Latency { millis: u64 },
    /// Answer with this 5xx status.
    ServerError { status: u16 },
    /// 403 "You have exceeded a secondary rate limit", with `Retry-After` when given.
    SecondaryRateLimit { retry_after: Option<u64> },
    /// 404 as if the thing did not exist.
    NotFound,
    /// 200 with a body that is not JSON.
    Malformed,
    /// 401 "Bad credentials".
    Unauthorized,
    /// 200 with a GraphQL error and no data, as an Enterprise server without a field
    /// the query names (or a token without access to it) answers.
    GraphqlError { message: String },
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    limit: u64,
    used: u64,
    /// When the window ends, seconds since the Unix epoch.
    reset: i64,
}

impl Bucket {
    fn fresh(limit: u64, now: Timestamp) -> Self {
        Bucket { limit, used: 0, reset: now.as_second() + 3600 }
    }
}

/// Everything the server shares; std mutexes, never held across an `.await`.
#[derive(Debug)]
struct SimState {
    settings: SimSettings,
    base: String,
    world: Mutex<World>,
    log: Mutex<RequestLog>,
    /// The bodies of GraphQL requests, in order.
    graphql_requests: Mutex<Vec<Value>>,
    faults: Mutex<VecDeque<Fault>>,
    /// Rate-limit buckets, `core` and `graphql`.
    buckets: Mutex<BTreeMap<&'static str, Bucket>>,
    webhook: Mutex<Option<WebhookTarget>>,
    deliveries: Mutex<Vec<Delivery>>,
    /// Indices into `deliveries` for the emitter task; dropped with the state, which ends
    /// the emitter.
    outbox: mpsc::UnboundedSender<usize>,
    /// How many deliveries the emitter has finished (answered or failed).
    settled: watch::Receiver<usize>,
}

impl SimState {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }

    fn urls(&self, prefix: &str) -> Urls {
        Urls { api: format!("{}{prefix}", self.base), web: self.settings.web.clone() }
    }

    /// Applies an action and queues the webhooks it causes.
    fn act(&self, action: Action) -> Result<Outcome, WorldError> {
        let mut world = lock(&self.world);
        let (outcome, happenings) = world.apply(action, self.now())?;
        let target = lock(&self.webhook).clone();
        if let Some(target) = target {
            let urls = self.urls("");
            let mut deliveries = lock(&self.deliveries);
            for happening in happenings {
                let body = webhook::payload(&world, &urls, &happening)?.to_string();
                let signature =
                    target.secret.as_ref().map(|s| webhook::sign(s.as_bytes(), body.as_bytes()));
                let index = deliveries.len();
                deliveries.push(Delivery {
                    id: webhook::delivery_id(index as u64 + 1),
                    event: happening.event.to_owned(),
                    action: happening.action.to_owned(),
                    body,
                    signature,
                    status: None,
                    error: None,
                });
                // The emitter lives as long as the state; a closed outbox means shutdown.
                let _queued = self.outbox.send(index);
            }
        }
        Ok(outcome)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the data consistent, so a poisoned lock is still usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a GitHub handler answers before headers are added.
struct Reply {
    status: StatusCode,
    body: Value,
    link: Option<String>,
    /// Where a redirect points (`Location`).
    location: Option<String>,
}

impl Reply {
    fn ok(body: Value) -> Self {
        Reply { status: StatusCode::OK, body, link: None, location: None }
    }

    fn error(status: StatusCode, message: &str) -> Self {
        Reply {
            status,
            body: json!({
                "message": message,
                "documentation_url": "https://docs.github.com/rest",
                "status": status.as_str()
            }),
            link: None,
            location: None,
        }
    }

    fn from_world(err: &WorldError) -> Self {
        match err {
            WorldError::Invalid { reason } => {
                Reply::error(StatusCode::UNPROCESSABLE_ENTITY, reason)
            }
            _ => Reply::error(StatusCode::NOT_FOUND, "Not Found"),
        }
    }
}

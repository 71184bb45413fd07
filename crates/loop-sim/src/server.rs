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

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};

use crate::graphql;
use crate::request_log::{RequestLog, RequestRecord};
use crate::shapes::{self, Urls};
use crate::webhook::{self, Delivery, WebhookTarget};
use crate::world::{
    Action, InlineDraft, JobDraft, Outcome, ReactionSubject, Repo, ReviewState, World, WorldError,
};

/// The `X-GitHub-Api-Version`s GitHub accepts; any other is refused with 400, as GitHub
/// does.
const API_VERSIONS: [&str; 2] = ["2022-11-28", "2026-03-10"];

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

/// A running simulated GitHub.
#[derive(Debug)]
pub struct Sim {
    state: Arc<SimState>,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl Sim {
    /// Serves on `listener` (bind `127.0.0.1:0` in tests).
    pub async fn serve(listener: TcpListener, settings: SimSettings) -> std::io::Result<Sim> {
        let addr = listener.local_addr()?;
        // reqwest (for webhooks) is built without a bundled crypto provider.
        let _already_installed = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(std::io::Error::other)?;
        let (outbox, inbox) = mpsc::unbounded_channel();
        let (settled_tx, settled) = watch::channel(0);
        let now = Timestamp::now();
        let state = Arc::new(SimState {
            base: format!("http://{addr}"),
            world: Mutex::new(World::new(now)),
            log: Mutex::default(),
            graphql_requests: Mutex::default(),
            faults: Mutex::default(),
            buckets: Mutex::new(BTreeMap::from([
                ("core", Bucket::fresh(settings.rate_limit, now)),
                ("graphql", Bucket::fresh(settings.rate_limit, now)),
            ])),
            webhook: Mutex::default(),
            deliveries: Mutex::default(),
            outbox,
            settled,
            settings,
        });
        tokio::spawn(emit(Arc::downgrade(&state), http, inbox, settled_tx));
        let app = Router::new()
            .route("/_sim/actions", post(sim_action))
            .route("/_sim/world", get(sim_world))
            .route("/_sim/requests", get(sim_requests).delete(sim_clear_requests))
            .route("/_sim/faults", post(sim_fault))
            .route("/_sim/webhook", post(sim_set_webhook).delete(sim_clear_webhook))
            .route("/_sim/deliveries", get(sim_deliveries))
            .route("/_sim/rate-limit", post(sim_rate_limit))
            .route("/_sim/job-logs/{id}", get(sim_job_log))
            .fallback(github)
            .with_state(state.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let serving = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(err) = serving.await {
                tracing::error!(%err, "simulated GitHub stopped");
            }
        });
        Ok(Sim { state, addr, stop: Some(stop), server: Some(server) })
    }

    /// Serves on a fresh `127.0.0.1` port with default settings.
    pub async fn start() -> std::io::Result<Sim> {
        Self::serve(TcpListener::bind("127.0.0.1:0").await?, SimSettings::default()).await
    }

    /// The REST base URL, github.com layout (`http://127.0.0.1:PORT`): what
    /// `integrations.github.api.baseUrl` is set to.
    pub fn url(&self) -> String {
        self.state.base.clone()
    }

    /// The REST base URL in the Enterprise layout (`http://127.0.0.1:PORT/api/v3`).
    pub fn enterprise_url(&self) -> String {
        format!("{}/api/v3", self.state.base)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Applies a user action (the Rust twin of `POST /_sim/actions`).
    pub fn act(&self, action: Action) -> Result<Outcome, WorldError> {
        self.state.act(action)
    }

    pub fn create_repo(&self, repo: &str) -> Result<(), WorldError> {
        self.act(Action::CreateRepo { repo: repo.to_owned() }).map(drop)
    }

    /// Opens an issue; returns its number.
    pub fn open_issue(
        &self,
        repo: &str,
        author: &str,
        title: &str,
        labels: &[&str],
    ) -> Result<u64, WorldError> {
        let action = Action::OpenIssue {
            repo: repo.to_owned(),
            author: author.to_owned(),
            title: title.to_owned(),
            body: String::new(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        };
        Ok(self.act(action)?.number.unwrap_or_default())
    }

    /// Opens a pull request from `head_ref`; `Closes #N` in `body` links issue N.
    pub fn open_pull_request(
        &self,
        repo: &str,
        author: &str,
        title: &str,
        body: &str,
        head_ref: &str,
        labels: &[&str],
    ) -> Result<u64, WorldError> {
        let action = Action::OpenPullRequest {
            repo: repo.to_owned(),
            author: author.to_owned(),
            title: title.to_owned(),
            body: body.to_owned(),
            head_ref: head_ref.to_owned(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        };
        Ok(self.act(action)?.number.unwrap_or_default())
    }

    /// Comments on an issue or pull request's conversation; returns the comment id.
    pub fn comment(
        &self,
        repo: &str,
        number: u64,
        author: &str,
        body: &str,
    ) -> Result<u64, WorldError> {
        let action = Action::Comment {
            repo: repo.to_owned(),
            number,
            author: author.to_owned(),
            body: body.to_owned(),
        };
        Ok(self.act(action)?.id.unwrap_or_default())
    }

    /// Replaces conversation comment `id`'s body (a checklist ticked in GitHub's UI).
    pub fn edit_comment(
        &self,
        repo: &str,
        id: u64,
        actor: &str,
        body: &str,
    ) -> Result<(), WorldError> {
        let action = Action::EditComment {
            repo: repo.to_owned(),
            id,
            actor: actor.to_owned(),
            body: body.to_owned(),
        };
        self.act(action).map(|_| ())
    }

    pub fn label(
        &self,
        repo: &str,
        number: u64,
        actor: &str,
        label: &str,
    ) -> Result<(), WorldError> {
        let action = Action::Label {
            repo: repo.to_owned(),
            number,
            actor: actor.to_owned(),
            label: label.to_owned(),
        };
        self.act(action).map(drop)
    }

    /// Completes a GitHub Actions run of `workflow` on pull request `number`'s head, with
    /// `jobs` (it failed when one of their steps did); returns the run id.
    pub fn complete_run(
        &self,
        repo: &str,
        number: u64,
        actor: &str,
        workflow: &str,
        jobs: Vec<JobDraft>,
    ) -> Result<u64, WorldError> {
        let action = Action::CompleteRun {
            repo: repo.to_owned(),
            number,
            actor: actor.to_owned(),
            workflow: workflow.to_owned(),
            jobs,
        };
        Ok(self.act(action)?.id.unwrap_or_default())
    }

    /// Reviews a pull request with inline comments `(path, line, body)`; returns the review id.
    pub fn review(
        &self,
        repo: &str,
        number: u64,
        author: &str,
        state: ReviewState,
        body: &str,
        inline: &[(&str, u64, &str)],
    ) -> Result<u64, WorldError> {
        let action = Action::Review {
            repo: repo.to_owned(),
            number,
            author: author.to_owned(),
            state,
            body: body.to_owned(),
            comments: inline
                .iter()
                .map(|(path, line, body)| InlineDraft {
                    path: (*path).to_owned(),
                    line: *line,
                    body: (*body).to_owned(),
                })
                .collect(),
        };
        Ok(self.act(action)?.id.unwrap_or_default())
    }

    pub fn merge(&self, repo: &str, number: u64, actor: &str) -> Result<(), WorldError> {
        self.act(Action::Merge { repo: repo.to_owned(), number, actor: actor.to_owned() }).map(drop)
    }

    pub fn close(&self, repo: &str, number: u64, actor: &str) -> Result<(), WorldError> {
        self.act(Action::Close {
            repo: repo.to_owned(),
            number,
            actor: actor.to_owned(),
            reason: None,
        })
        .map(drop)
    }

    /// A snapshot of the whole world (what the-loop wrote included).
    pub fn world(&self) -> World {
        lock(&self.state.world).clone()
    }

    /// The conversation comments of `repo#number` by `author`, oldest first.
    pub fn comments_by(&self, repo: &str, number: u64, author: &str) -> Vec<String> {
        let world = lock(&self.state.world);
        world
            .item(repo, number)
            .map(|item| {
                item.comments
                    .iter()
                    .filter(|c| c.author == author)
                    .map(|c| c.body.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The login API tokens act as.
    pub fn viewer(&self) -> &str {
        &self.state.settings.viewer
    }

    pub fn inject(&self, fault: Fault) {
        lock(&self.state.faults).push_back(fault);
    }

    /// The requests answered since start or the last [`Sim::clear_requests`].
    pub fn requests(&self) -> RequestLog {
        lock(&self.state.log).clone()
    }

    /// The bodies (`{"query", "variables"}`) of the GraphQL requests answered so far.
    pub fn graphql_requests(&self) -> Vec<Value> {
        lock(&self.state.graphql_requests).clone()
    }

    pub fn clear_requests(&self) {
        lock(&self.state.log).records.clear();
    }

    /// Sends webhooks for every later change to `target` (or stops, with `None`).
    pub fn set_webhook(&self, target: Option<WebhookTarget>) {
        *lock(&self.state.webhook) = target;
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        lock(&self.state.deliveries).clone()
    }

    /// Resolves once every delivery queued so far has been answered or has failed.
    pub async fn webhooks_settled(&self) {
        let queued = lock(&self.state.deliveries).len();
        let mut settled = self.state.settled.clone();
        // The sender lives in the emitter, which lives as long as the state we hold.
        let _ = settled.wait_for(|done| *done >= queued).await;
    }

    /// Sets the requests per rate-limit window (REST and GraphQL) and starts a new window.
    pub fn set_rate_limit(&self, limit: u64) {
        let now = self.state.now();
        for bucket in lock(&self.state.buckets).values_mut() {
            *bucket = Bucket::fresh(limit, now);
        }
    }

    /// Starts a new rate-limit window, as GitHub does at `x-ratelimit-reset`.
    pub fn reset_rate_limit(&self) {
        let now = self.state.now();
        for bucket in lock(&self.state.buckets).values_mut() {
            *bucket = Bucket::fresh(bucket.limit, now);
        }
    }

    /// Requests left in the REST window.
    pub fn rate_limit_remaining(&self) -> u64 {
        lock(&self.state.buckets).get("core").map_or(0, |b| b.limit.saturating_sub(b.used))
    }

    /// Stops serving and waits for the server task to end.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Sends queued deliveries in order until the state is gone.
async fn emit(
    state: std::sync::Weak<SimState>,
    http: reqwest::Client,
    mut inbox: mpsc::UnboundedReceiver<usize>,
    settled: watch::Sender<usize>,
) {
    while let Some(index) = inbox.recv().await {
        let Some(state) = state.upgrade() else { return };
        let target = lock(&state.webhook).clone();
        let delivery = lock(&state.deliveries).get(index).cloned();
        let result = match (target, delivery) {
            (Some(target), Some(delivery)) => webhook::send(&http, &target, &delivery).await,
            _ => Err("the webhook was removed before delivery".to_owned()),
        };
        if let Some(delivery) = lock(&state.deliveries).get_mut(index) {
            match result {
                Ok(status) => delivery.status = Some(status),
                Err(error) => delivery.error = Some(error),
            }
        }
        settled.send_modify(|done| *done = (*done).max(index + 1));
    }
}

// --- the GitHub API ---

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

/// A request routed to one of the endpoints: its OpenAPI template and parameters.
struct Route {
    endpoint: &'static str,
    resource: &'static str,
    repo: String,
    number: u64,
    /// The `{name}` of a label path, percent-decoded; empty elsewhere.
    label: String,
    /// The URL prefix of the layout (`""` or `/api/v3`).
    prefix: &'static str,
}

fn route(method: &Method, path: &str) -> Option<Route> {
    let (prefix, rest) = match path.strip_prefix("/api/v3") {
        Some(rest) => ("/api/v3", rest),
        None => ("", path),
    };
    if *method == Method::POST && (path == "/graphql" || path == "/api/graphql") {
        return Some(Route {
            endpoint: "/graphql",
            resource: "graphql",
            repo: String::new(),
            number: 0,
            label: String::new(),
            prefix: "",
        });
    }
    let segments: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    let ["repos", owner, name, tail @ ..] = segments.as_slice() else { return None };
    let repo = format!("{owner}/{name}");
    let num = |s: &str| s.parse::<u64>().ok().filter(|n| *n > 0);
    let label = match tail {
        ["issues", _, "labels", name] => percent_decoded(name)?,
        _ => String::new(),
    };
    let (endpoint, number) = match (method.as_str(), tail) {
        ("GET", ["issues"]) => ("/repos/{owner}/{repo}/issues", 0),
        ("GET", ["issues", n]) => ("/repos/{owner}/{repo}/issues/{issue_number}", num(n)?),
        ("GET", ["issues", n, "comments"]) => {
            ("/repos/{owner}/{repo}/issues/{issue_number}/comments", num(n)?)
        }
        ("POST", ["issues", n, "comments"]) => {
            ("/repos/{owner}/{repo}/issues/{issue_number}/comments", num(n)?)
        }
        ("POST", ["issues", n, "labels"]) => {
            ("/repos/{owner}/{repo}/issues/{issue_number}/labels", num(n)?)
        }
        ("DELETE", ["issues", n, "labels", _]) => {
            ("/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}", num(n)?)
        }
        ("PATCH", ["issues", "comments", id]) => {
            ("/repos/{owner}/{repo}/issues/comments/{comment_id}", num(id)?)
        }
        ("POST", ["issues", "comments", id, "reactions"]) => {
            ("/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", num(id)?)
        }
        ("POST", ["issues", n, "reactions"]) => {
            ("/repos/{owner}/{repo}/issues/{issue_number}/reactions", num(n)?)
        }
        ("POST", ["pulls", "comments", id, "reactions"]) => {
            ("/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions", num(id)?)
        }
        ("GET", ["pulls"]) => ("/repos/{owner}/{repo}/pulls", 0),
        ("GET", ["pulls", n]) => ("/repos/{owner}/{repo}/pulls/{pull_number}", num(n)?),
        ("GET", ["pulls", n, "reviews"]) => {
            ("/repos/{owner}/{repo}/pulls/{pull_number}/reviews", num(n)?)
        }
        ("GET", ["pulls", n, "comments"]) => {
            ("/repos/{owner}/{repo}/pulls/{pull_number}/comments", num(n)?)
        }
        ("GET", ["actions", "runs", id, "jobs"]) => {
            ("/repos/{owner}/{repo}/actions/runs/{run_id}/jobs", num(id)?)
        }
        ("GET", ["actions", "jobs", id, "logs"]) => {
            ("/repos/{owner}/{repo}/actions/jobs/{job_id}/logs", num(id)?)
        }
        ("GET", ["check-runs", id, "annotations"]) => {
            ("/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations", num(id)?)
        }
        _ => return None,
    };
    Some(Route { endpoint, resource: "core", repo, number, label, prefix })
}

/// A path segment with its `%XX` escapes decoded; `None` when they are not UTF-8 or
/// malformed.
fn percent_decoded(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = segment.get(at + 1..at + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `path` with a `/repositories/{id}` prefix — the form GitHub's `Link` headers use —
/// turned into the `/repos/{owner}/{repo}` form its routes are written in.
fn by_name(state: &SimState, path: &str) -> String {
    let (prefix, rest) = path.split_at(if path.starts_with("/api/v3/") { 7 } else { 0 });
    let Some((id, tail)) = rest.strip_prefix("/repositories/").and_then(|r| r.split_once('/'))
    else {
        return path.to_owned();
    };
    let world = lock(&state.world);
    let Some(repo) = id.parse().ok().and_then(|id: u64| world.repos.values().find(|r| r.id == id))
    else {
        return path.to_owned();
    };
    format!("{prefix}/repos/{}/{tail}", repo.full_name())
}

/// The one handler behind every GitHub path.
async fn github(State(state): State<Arc<SimState>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let query: BTreeMap<String, String> =
        Query::try_from_uri(&parts.uri).map(|Query(q)| q).unwrap_or_default();
    let body = axum::body::to_bytes(body, 25 * 1024 * 1024).await.unwrap_or_default();
    let method = parts.method.clone();
    let routed = route(&method, &by_name(&state, &path));
    let endpoint = routed.as_ref().map_or(path.clone(), |r| r.endpoint.to_owned());
    let response = answer(&state, &parts.headers, &method, &path, &query, &body, routed).await;
    let header =
        |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    lock(&state.log).records.push(RequestRecord {
        method: method.to_string(),
        endpoint,
        path,
        query,
        status: response.status().as_u16(),
        api_version: header("x-github-api-version"),
        accept: header("accept"),
    });
    response
}

async fn answer(
    state: &SimState,
    headers: &HeaderMap,
    method: &Method,
    path: &str,
    query: &BTreeMap<String, String>,
    body: &Bytes,
    routed: Option<Route>,
) -> Response {
    if !headers.contains_key(header::USER_AGENT) {
        return finish(
            state,
            None,
            Reply::error(
                StatusCode::FORBIDDEN,
                "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required).",
            ),
            false,
        );
    }
    let version = headers.get("x-github-api-version").and_then(|v| v.to_str().ok());
    if version.is_some_and(|v| !API_VERSIONS.contains(&v)) {
        let message = format!("Invalid API version: {}", version.unwrap_or_default());
        return finish(state, None, Reply::error(StatusCode::BAD_REQUEST, &message), false);
    }
    let Some(route) = routed else {
        return finish(state, None, Reply::error(StatusCode::NOT_FOUND, "Not Found"), false);
    };
    let authorized = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split_once(' ').is_some_and(|(_, token)| !token.trim().is_empty()));
    if !authorized {
        return finish(
            state,
            Some(&route),
            Reply::error(StatusCode::UNAUTHORIZED, "Requires authentication"),
            false,
        );
    }
    if let Some(fault) = take_fault(state, path) {
        match fault {
            FaultKind::Latency { millis } => {
                tokio::time::sleep(Duration::from_millis(millis)).await
            }
            FaultKind::ServerError { status } => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
                return finish(state, Some(&route), Reply::error(status, "Server Error"), false);
            }
            FaultKind::SecondaryRateLimit { retry_after } => {
                let mut response = finish(
                    state,
                    Some(&route),
                    Reply::error(
                        StatusCode::FORBIDDEN,
                        "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                    ),
                    false,
                );
                if let Some(seconds) = retry_after {
                    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
                }
                return response;
            }
            FaultKind::NotFound => {
                return finish(
                    state,
                    Some(&route),
                    Reply::error(StatusCode::NOT_FOUND, "Not Found"),
                    false,
                );
            }
            FaultKind::Unauthorized => {
                return finish(
                    state,
                    Some(&route),
                    Reply::error(StatusCode::UNAUTHORIZED, "Bad credentials"),
                    false,
                );
            }
            FaultKind::GraphqlError { message } => {
                let answer = json!({ "data": null, "errors": [{ "message": message }] });
                return finish(state, Some(&route), Reply::ok(answer), false);
            }
            FaultKind::Malformed => {
                let mut response = (StatusCode::OK, "{\"id\": 1, \"title\": ").into_response();
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json; charset=utf-8"),
                );
                return response;
            }
        }
    }
    if rate_limit_spent(state, route.resource) {
        let reply = Reply::error(
            StatusCode::FORBIDDEN,
            "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID.",
        );
        return finish(state, Some(&route), reply, false);
    }
    let reply = if route.resource == "graphql" {
        match serde_json::from_slice::<Value>(body) {
            Ok(request) => {
                lock(&state.graphql_requests).push(request.clone());
                let mut world = lock(&state.world);
                let viewer = state.settings.viewer.clone();
                Reply::ok(graphql::answer(
                    &mut world,
                    state.now(),
                    &viewer,
                    &state.urls(""),
                    &request,
                ))
            }
            Err(_) => Reply::error(StatusCode::BAD_REQUEST, "Problems parsing JSON"),
        }
    } else {
        rest(state, method, &route, query, body)
    };
    let etag = (*method == Method::GET && reply.status == StatusCode::OK).then(|| etag_of(&reply));
    let not_modified = etag.as_ref().is_some_and(|etag| {
        headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|candidate| candidate.trim() == etag))
    });
    if not_modified {
        let mut response = finish(
            state,
            Some(&route),
            Reply {
                status: StatusCode::NOT_MODIFIED,
                body: Value::Null,
                link: reply.link,
                location: None,
            },
            false,
        );
        if let Some(etag) = etag.and_then(|e| HeaderValue::from_str(&e).ok()) {
            response.headers_mut().insert(header::ETAG, etag);
        }
        return response;
    }
    let mut response = finish(state, Some(&route), reply, true);
    if let Some(etag) = etag.and_then(|e| HeaderValue::from_str(&e).ok()) {
        response.headers_mut().insert(header::ETAG, etag);
    }
    response
}

/// The next fault for `path`, used up by one.
fn take_fault(state: &SimState, path: &str) -> Option<FaultKind> {
    let mut faults = lock(&state.faults);
    let index =
        faults.iter().position(|f| f.path_contains.as_deref().is_none_or(|p| path.contains(p)))?;
    let fault = faults.get_mut(index)?;
    let kind = fault.kind.clone();
    fault.times = fault.times.saturating_sub(1);
    if fault.times == 0 {
        faults.remove(index);
    }
    Some(kind)
}

fn rate_limit_spent(state: &SimState, resource: &'static str) -> bool {
    let now = state.now();
    let mut buckets = lock(&state.buckets);
    let Some(bucket) = buckets.get_mut(resource) else { return false };
    if now.as_second() >= bucket.reset {
        *bucket = Bucket::fresh(bucket.limit, now);
    }
    bucket.used >= bucket.limit
}

fn etag_of(reply: &Reply) -> String {
    let mut hasher = Sha256::new();
    hasher.update(reply.body.to_string().as_bytes());
    hasher.update(reply.link.as_deref().unwrap_or("").as_bytes());
    let digest = hasher.finalize();
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("W/\"{hex}\"")
}

/// Adds GitHub's headers; `counts` spends one request of the rate limit.
fn finish(state: &SimState, route: Option<&Route>, reply: Reply, counts: bool) -> Response {
    let resource = route.map_or("core", |r| r.resource);
    let bucket = {
        let mut buckets = lock(&state.buckets);
        buckets.get_mut(resource).map(|bucket| {
            if counts {
                bucket.used += 1;
            }
            *bucket
        })
    };
    let mut response = if matches!(reply.status, StatusCode::NOT_MODIFIED | StatusCode::FOUND) {
        Response::builder().status(reply.status).body(Body::empty()).unwrap_or_default()
    } else {
        (reply.status, axum::Json(reply.body)).into_response()
    };
    let headers = response.headers_mut();
    if let Some(bucket) = bucket {
        headers.insert("x-ratelimit-limit", HeaderValue::from(bucket.limit));
        headers.insert(
            "x-ratelimit-remaining",
            HeaderValue::from(bucket.limit.saturating_sub(bucket.used)),
        );
        headers.insert("x-ratelimit-used", HeaderValue::from(bucket.used));
        headers.insert("x-ratelimit-reset", HeaderValue::from(bucket.reset));
        headers.insert("x-ratelimit-resource", HeaderValue::from_static(resource));
    }
    headers.insert("x-github-api-version-selected", HeaderValue::from_static("2022-11-28"));
    headers.insert("x-github-media-type", HeaderValue::from_static("github.v3; format=json"));
    if let Some(location) = reply.location.and_then(|l| HeaderValue::from_str(&l).ok()) {
        headers.insert(header::LOCATION, location);
    }
    if let Some(link) = reply.link.and_then(|l| HeaderValue::from_str(&l).ok()) {
        headers.insert(header::LINK, link);
    }
    response
}

fn rest(
    state: &SimState,
    method: &Method,
    route: &Route,
    query: &BTreeMap<String, String>,
    body: &Bytes,
) -> Reply {
    let urls = state.urls(route.prefix);
    let viewer = state.settings.viewer.clone();
    let result = match (method.as_str(), route.endpoint) {
        ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments") => {
            let Some(text) = json_field(body, "body") else {
                return Reply::error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid request.\n\n\"body\" wasn't supplied.",
                );
            };
            let action = Action::Comment {
                repo: route.repo.clone(),
                number: route.number,
                author: viewer,
                body: text,
            };
            state.act(action).and_then(|outcome| {
                let world = lock(&state.world);
                let repo = world.repo(&route.repo)?;
                let (number, comment) =
                    world.comment(&route.repo, outcome.id.unwrap_or_default())?;
                Ok(Reply {
                    status: StatusCode::CREATED,
                    body: shapes::issue_comment(&world, &urls, repo, number, comment),
                    link: None,
                    location: None,
                })
            })
        }
        ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}") => {
            let Some(text) = json_field(body, "body") else {
                return Reply::error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid request.\n\n\"body\" wasn't supplied.",
                );
            };
            let action = Action::EditComment {
                repo: route.repo.clone(),
                id: route.number,
                actor: viewer,
                body: text,
            };
            state.act(action).and_then(|_| {
                let world = lock(&state.world);
                let repo = world.repo(&route.repo)?;
                let (number, comment) = world.comment(&route.repo, route.number)?;
                Ok(Reply {
                    status: StatusCode::OK,
                    body: shapes::issue_comment(&world, &urls, repo, number, comment),
                    link: None,
                    location: None,
                })
            })
        }
        ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/labels") => {
            let names: Option<Vec<String>> = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|v| v.get("labels")?.as_array().cloned())
                .map(|names| names.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect())
                .filter(|names: &Vec<String>| !names.is_empty());
            let Some(names) = names else {
                return Reply::error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid request.\n\n\"labels\" wasn't supplied.",
                );
            };
            let mut result = Ok(());
            for label in names {
                let action = Action::Label {
                    repo: route.repo.clone(),
                    number: route.number,
                    actor: viewer.clone(),
                    label,
                };
                result = result.and_then(|()| state.act(action).map(drop));
            }
            result.and_then(|()| item_labels(state, &urls, route))
        }
        ("DELETE", "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}") => {
            let carried = {
                let world = lock(&state.world);
                world
                    .item(&route.repo, route.number)
                    .map(|item| item.labels.iter().any(|l| l.eq_ignore_ascii_case(&route.label)))
            };
            match carried {
                Ok(false) => return Reply::error(StatusCode::NOT_FOUND, "Label does not exist"),
                Ok(true) => {}
                Err(err) => return Reply::from_world(&err),
            }
            let action = Action::Unlabel {
                repo: route.repo.clone(),
                number: route.number,
                actor: viewer,
                label: route.label.clone(),
            };
            state.act(action).and_then(|_| item_labels(state, &urls, route))
        }
        ("POST", endpoint) if endpoint.ends_with("/reactions") => {
            let Some(content) = json_field(body, "content") else {
                return Reply::error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid request.\n\n\"content\" wasn't supplied.",
                );
            };
            let repo = route.repo.clone();
            let target = if endpoint.contains("/issues/comments/") {
                ReactionSubject::IssueComment { repo, id: route.number }
            } else if endpoint.contains("/pulls/comments/") {
                ReactionSubject::ReviewComment { repo, id: route.number }
            } else {
                ReactionSubject::Item { repo, number: route.number }
            };
            state.act(Action::React { target, actor: viewer, content }).map(|outcome| {
                let world = lock(&state.world);
                let reaction = world_reaction(&world, outcome.id.unwrap_or_default());
                let status = if outcome.existed { StatusCode::OK } else { StatusCode::CREATED };
                Reply {
                    status,
                    body: reaction.map_or(Value::Null, |r| shapes::reaction(&world, &urls, &r)),
                    link: None,
                    location: None,
                }
            })
        }
        _ => {
            let world = lock(&state.world);
            read(&world, &urls, route, query)
        }
    };
    result.unwrap_or_else(|err| Reply::from_world(&err))
}

/// The labels an item carries, as GitHub answers a label write.
fn item_labels(state: &SimState, urls: &Urls, route: &Route) -> Result<Reply, WorldError> {
    let world = lock(&state.world);
    let repo = world.repo(&route.repo)?;
    let item = world.item(&route.repo, route.number)?;
    Ok(Reply {
        status: StatusCode::OK,
        body: shapes::labels(repo, urls, &item.labels),
        link: None,
        location: None,
    })
}

fn json_field(body: &Bytes, field: &str) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    value.get(field)?.as_str().map(str::to_owned)
}

fn world_reaction(world: &World, id: u64) -> Option<crate::world::Reaction> {
    world.repos.values().flat_map(|repo| repo.items.values()).find_map(|item| {
        let on_item = item.reactions.iter();
        let on_comments = item.comments.iter().flat_map(|c| c.reactions.iter());
        let on_inline = item
            .pull
            .iter()
            .flat_map(|p| p.review_comments.iter())
            .flat_map(|c| c.reactions.iter());
        on_item.chain(on_comments).chain(on_inline).find(|r| r.id == id).cloned()
    })
}

fn read(
    world: &World,
    urls: &Urls,
    route: &Route,
    query: &BTreeMap<String, String>,
) -> Result<Reply, WorldError> {
    let repo = world.repo(&route.repo)?;
    let n = route.number;
    let on_issues = route.endpoint.starts_with("/repos/{owner}/{repo}/issues");
    let is_pull = repo.items.get(&n).is_some_and(|i| i.pull.is_some());
    if on_issues && !repo.has_issues && !is_pull {
        return Ok(Reply::error(StatusCode::GONE, "Issues are disabled for this repo"));
    }
    match route.endpoint {
        "/repos/{owner}/{repo}/issues" => {
            let state = query.get("state").map_or("open", String::as_str);
            let wanted: Vec<String> = query
                .get("labels")
                .map(|l| {
                    l.split(',')
                        .map(|s| s.trim().to_ascii_lowercase())
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            let mut items: Vec<&crate::world::Item> = repo
                .items
                .values()
                .filter(|i| match state {
                    "all" => true,
                    "closed" => !i.open,
                    _ => i.open,
                })
                .filter(|i| {
                    wanted.iter().all(|w| i.labels.iter().any(|l| l.eq_ignore_ascii_case(w)))
                })
                .collect();
            // GitHub's defaults: sort=created, direction=desc.
            match query.get("sort").map(String::as_str) {
                Some("updated") => items.sort_by_key(|i| (i.updated_at, i.number)),
                _ => items.sort_by_key(|i| (i.created_at, i.number)),
            }
            if query.get("direction").map(String::as_str) != Some("asc") {
                items.reverse();
            }
            let rows = items.into_iter().map(|i| shapes::issue(world, urls, repo, i)).collect();
            Ok(paginate(urls, route, repo, query, rows))
        }
        "/repos/{owner}/{repo}/pulls" => {
            let state = query.get("state").map_or("open", String::as_str);
            let rows = repo
                .items
                .values()
                .rev()
                .filter(|i| match state {
                    "all" => true,
                    "closed" => !i.open,
                    _ => i.open,
                })
                .filter_map(|i| shapes::pull_request(world, urls, repo, i))
                .collect();
            Ok(paginate(urls, route, repo, query, rows))
        }
        "/repos/{owner}/{repo}/issues/{issue_number}" => {
            Ok(Reply::ok(shapes::issue(world, urls, repo, world.item(&route.repo, n)?)))
        }
        "/repos/{owner}/{repo}/issues/{issue_number}/comments" => {
            let item = world.item(&route.repo, n)?;
            let since = since(query)?;
            let rows = item
                .comments
                .iter()
                .filter(|c| since.is_none_or(|since| c.updated_at >= since))
                .map(|c| shapes::issue_comment(world, urls, repo, n, c))
                .collect();
            Ok(paginate(urls, route, repo, query, rows))
        }
        "/repos/{owner}/{repo}/pulls/{pull_number}" => {
            let item = world.item(&route.repo, n)?;
            shapes::pull_request(world, urls, repo, item)
                .map(Reply::ok)
                .ok_or(WorldError::NoItem { repo: route.repo.clone(), number: n })
        }
        "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"
        | "/repos/{owner}/{repo}/pulls/{pull_number}/comments" => {
            let item = world.item(&route.repo, n)?;
            let pull = item
                .pull
                .as_ref()
                .ok_or(WorldError::NoItem { repo: route.repo.clone(), number: n })?;
            let rows = if route.endpoint.ends_with("/reviews") {
                pull.reviews
                    .iter()
                    .map(|r| shapes::review(world, urls, repo, n, r, &pull.head_sha))
                    .collect()
            } else {
                // An inline comment is never edited here: its `updated_at` is its creation.
                let since = since(query)?;
                pull.review_comments
                    .iter()
                    .filter(|c| since.is_none_or(|since| c.created_at >= since))
                    .map(|c| shapes::review_comment(world, urls, repo, n, c, &pull.head_sha))
                    .collect()
            };
            Ok(paginate(urls, route, repo, query, rows))
        }
        "/repos/{owner}/{repo}/actions/runs/{run_id}/jobs" => {
            let run = world.run(&route.repo, n)?;
            let jobs: Vec<Value> =
                run.jobs.iter().map(|j| shapes::job(urls, repo, run, j)).collect();
            Ok(Reply::ok(json!({"total_count": jobs.len(), "jobs": jobs})))
        }
        "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations" => {
            let (run, job) =
                world.job(n).ok_or(WorldError::NoItem { repo: route.repo.clone(), number: n })?;
            Ok(Reply::ok(shapes::annotations(urls, repo, run, job)))
        }
        "/repos/{owner}/{repo}/actions/jobs/{job_id}/logs" => {
            world.job(n).ok_or(WorldError::NoItem { repo: route.repo.clone(), number: n })?;
            // GitHub answers with a short-lived address of the log on another host; here
            // the simulator serves it itself, outside the API.
            let root = urls.api.trim_end_matches("/api/v3");
            Ok(Reply {
                status: StatusCode::FOUND,
                body: Value::Null,
                link: None,
                location: Some(format!("{root}/_sim/job-logs/{n}")),
            })
        }
        _ => Err(WorldError::NoRepo { repo: route.repo.clone() }),
    }
}

/// The `since` of a comment listing: only comments updated at or after it are listed
/// (inclusive, as GitHub compares `updated_at`). One that is not an ISO 8601 time is
/// refused.
fn since(query: &BTreeMap<String, String>) -> Result<Option<Timestamp>, WorldError> {
    query
        .get("since")
        .map(|since| {
            since.parse::<Timestamp>().map_err(|_| WorldError::Invalid {
                reason: format!("`since` must be an ISO 8601 timestamp, not {since:?}"),
            })
        })
        .transpose()
}

/// One page of `rows` (`per_page` default 30, at most 100) with GitHub's `Link` header,
/// whose URLs name `repo` by its id (`/repositories/{id}/…`), as GitHub's do.
fn paginate(
    urls: &Urls,
    route: &Route,
    repo: &Repo,
    query: &BTreeMap<String, String>,
    rows: Vec<Value>,
) -> Reply {
    let per_page =
        query.get("per_page").and_then(|p| p.parse::<usize>().ok()).unwrap_or(30).clamp(1, 100);
    let page = query.get("page").and_then(|p| p.parse::<usize>().ok()).unwrap_or(1).max(1);
    let last = rows.len().div_ceil(per_page).max(1);
    let body: Vec<Value> = rows.into_iter().skip((page - 1) * per_page).take(per_page).collect();
    let url_of = |p: usize| {
        let mut q = query.clone();
        q.insert("page".to_owned(), p.to_string());
        let encoded: Vec<String> =
            q.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect();
        let number = route.number.to_string();
        let path = route
            .endpoint
            .replace("/repos/{owner}/{repo}", &format!("/repositories/{}", repo.id))
            .replace("{issue_number}", &number)
            .replace("{pull_number}", &number);
        format!("<{}{}?{}>", urls.api, path, encoded.join("&"))
    };
    let mut links = Vec::new();
    if page < last {
        links.push(format!("{}; rel=\"next\"", url_of(page + 1)));
        links.push(format!("{}; rel=\"last\"", url_of(last)));
    }
    if page > 1 {
        links.push(format!("{}; rel=\"first\"", url_of(1)));
        links.push(format!("{}; rel=\"prev\"", url_of(page - 1)));
    }
    Reply {
        status: StatusCode::OK,
        body: Value::Array(body),
        link: (!links.is_empty()).then(|| links.join(", ")),
        location: None,
    }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

// --- scripting under /_sim ---

async fn sim_action(
    State(state): State<Arc<SimState>>,
    axum::Json(action): axum::Json<Action>,
) -> Response {
    match state.act(action) {
        Ok(outcome) => (StatusCode::OK, axum::Json(outcome)).into_response(),
        Err(err) => {
            let status = match err {
                WorldError::Invalid { .. } => StatusCode::UNPROCESSABLE_ENTITY,
                _ => StatusCode::NOT_FOUND,
            };
            (status, axum::Json(json!({ "message": err.to_string() }))).into_response()
        }
    }
}

async fn sim_world(State(state): State<Arc<SimState>>) -> Response {
    let world = lock(&state.world).clone();
    axum::Json(world).into_response()
}

async fn sim_requests(State(state): State<Arc<SimState>>) -> Response {
    let log = lock(&state.log).clone();
    axum::Json(json!({ "total": log.total(), "counts": log.counts(), "records": log.records }))
        .into_response()
}

async fn sim_clear_requests(State(state): State<Arc<SimState>>) -> StatusCode {
    lock(&state.log).records.clear();
    StatusCode::NO_CONTENT
}

async fn sim_fault(
    State(state): State<Arc<SimState>>,
    axum::Json(fault): axum::Json<Fault>,
) -> StatusCode {
    lock(&state.faults).push_back(fault);
    StatusCode::NO_CONTENT
}

async fn sim_set_webhook(
    State(state): State<Arc<SimState>>,
    axum::Json(target): axum::Json<WebhookTarget>,
) -> StatusCode {
    *lock(&state.webhook) = Some(target);
    StatusCode::NO_CONTENT
}

async fn sim_clear_webhook(State(state): State<Arc<SimState>>) -> StatusCode {
    *lock(&state.webhook) = None;
    StatusCode::NO_CONTENT
}

/// A job's log, where the logs endpoint's redirect points (GitHub serves it from another
/// host, without the API's headers or rate limit). Recorded in the request log as
/// `GET /_sim/job-logs/{id}`, so a client's request count includes the redirect it
/// followed.
async fn sim_job_log(
    State(state): State<Arc<SimState>>,
    axum::extract::Path(id): axum::extract::Path<u64>,
) -> Response {
    let log = lock(&state.world).job(id).map(|(_, job)| job.log.clone());
    let response = match log {
        Some(text) => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response(),
        None => (StatusCode::NOT_FOUND, "Not Found").into_response(),
    };
    lock(&state.log).records.push(RequestRecord {
        method: "GET".to_owned(),
        endpoint: "/_sim/job-logs/{id}".to_owned(),
        path: format!("/_sim/job-logs/{id}"),
        query: BTreeMap::new(),
        status: response.status().as_u16(),
        api_version: None,
        accept: None,
    });
    response
}

async fn sim_deliveries(State(state): State<Arc<SimState>>) -> Response {
    let deliveries = lock(&state.deliveries).clone();
    axum::Json(deliveries).into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RateLimitRequest {
    /// A new limit per window (starts a new window).
    limit: Option<u64>,
    /// Start a new window with the current limit.
    #[serde(default)]
    reset: bool,
}

async fn sim_rate_limit(
    State(state): State<Arc<SimState>>,
    axum::Json(request): axum::Json<RateLimitRequest>,
) -> StatusCode {
    let now = state.now();
    for bucket in lock(&state.buckets).values_mut() {
        if let Some(limit) = request.limit {
            *bucket = Bucket::fresh(limit, now);
        } else if request.reset {
            *bucket = Bucket::fresh(bucket.limit, now);
        }
    }
    StatusCode::NO_CONTENT
}

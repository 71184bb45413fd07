//! The HTTP exchange with one GitHub host: headers, tokens, conditional requests,
//! pagination, retries and rate limits.
//!
//! Every request carries `User-Agent`, `Accept: application/vnd.github+json` and
//! `X-GitHub-Api-Version`. `GET`s are conditional: the `ETag` of each URL's last answer is
//! remembered (bounded) and sent as `If-None-Match`; a 304 is served from the remembered
//! body and costs no rate limit. A remembered answer is sent only with the same *variant*
//! (token, `Accept`, API version), since an ETag stands for one representation; the
//! remembered answers can be exported and given back ([`Validator`]), so a caller may keep
//! them across processes. 5xx and secondary rate limits are retried with back-off
//! (`Retry-After` when given); a spent primary rate limit is waited out until its reset.
//! A 401 makes the client ask its [`TokenSource`] once more before giving up.
//!
//! Waiting goes through a [`Clock`], so tests observe waits instead of sleeping. This
//! module knows nothing about issues or pull requests; `api.rs` does.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::GithubError;
use crate::token::{Token, TokenSource};

/// How many times in a row a spent primary rate limit is waited out before giving up.
const MAX_RATE_LIMIT_WAITS: u32 = 3;

/// The longest single wait a header can ask for: GitHub's rate-limit windows are an hour.
const MAX_WAIT: Duration = Duration::from_secs(3660);

/// The most pages one listing follows. At 100 rows a page that is 100 000 rows — far beyond
/// any real thread or labelled listing — so a longer `Link: rel="next"` chain (a misbehaving
/// proxy or server) ends in an error instead of a loop.
const MAX_PAGES: usize = 1000;

/// The REST API version every request asks for.
pub const API_VERSION: &str = "2022-11-28";

/// Time, as the client sees it: what time it is and how to wait.
pub trait Clock: Send + Sync + fmt::Debug {
    fn now(&self) -> SystemTime;
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// The real clock: wall time and `tokio::time::sleep`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// How to reach one GitHub host, resolved from `integrations.github.api`.
#[derive(Debug, Clone)]
pub struct GithubSettings {
    /// `github.com` or an Enterprise host such as `ghe.example.com`.
    pub host: String,
    /// `integrations.github.api.baseUrl`: replaces the REST base derived from the host.
    pub base_url: Option<String>,
    pub user_agent: String,
    /// Per-request timeout (connect + answer).
    pub request_timeout: Duration,
    /// How many times a transient failure (5xx, secondary rate limit, timeout) is retried.
    pub max_retries: u32,
    /// First back-off after a 5xx or a broken connection; doubled on each retry.
    pub retry_backoff: Duration,
    /// How many URLs' `ETag`s and bodies are remembered for conditional requests.
    pub etag_cache_entries: usize,
    /// How many requests may be in flight at once (GitHub's secondary limits punish
    /// bursts of concurrent requests).
    pub max_concurrent_requests: usize,
}

impl GithubSettings {
    /// Defaults for `host`.
    pub fn for_host(host: &str) -> Self {
        Self {
            host: host.to_ascii_lowercase(),
            base_url: None,
            user_agent: format!("the-loop/{}", env!("CARGO_PKG_VERSION")),
            request_timeout: Duration::from_secs(30),
            max_retries: 3,
            retry_backoff: Duration::from_secs(1),
            etag_cache_entries: 4096,
            max_concurrent_requests: 8,
        }
    }
}

/// Where the REST and GraphQL APIs of a host live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiEndpoints {
    /// REST base, without a trailing slash.
    pub rest: Url,
    pub graphql: Url,
}

impl ApiEndpoints {
    /// `github.com` → `https://api.github.com` (+ `/graphql`); an Enterprise host →
    /// `https://HOST/api/v3` and `https://HOST/api/graphql`. A `base_url` replaces the REST
    /// base; its GraphQL endpoint is `…/api/graphql` when it ends in `/api/v3`, else
    /// `<base_url>/graphql` (the github.com layout).
    pub fn resolve(host: &str, base_url: Option<&str>) -> Result<Self, GithubError> {
        let rest = match base_url {
            Some(base) => base.trim_end_matches('/').to_owned(),
            None if host.eq_ignore_ascii_case(loop_core::refs::DEFAULT_HOST) => {
                "https://api.github.com".to_owned()
            }
            None => format!("https://{host}/api/v3"),
        };
        let graphql = match rest.strip_suffix("/api/v3") {
            Some(root) => format!("{root}/api/graphql"),
            None => format!("{rest}/graphql"),
        };
        let parse = |url: &str| {
            let parsed = Url::parse(url).map_err(|err| GithubError::BaseUrl {
                base_url: url.to_owned(),
                reason: err.to_string(),
            })?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(GithubError::BaseUrl {
                    base_url: url.to_owned(),
                    reason: "the scheme must be `https` (or `http` for a local simulator)".into(),
                });
            }
            Ok(parsed)
        };
        Ok(Self { rest: parse(&rest)?, graphql: parse(&graphql)? })
    }
}

/// A rate-limit bucket as GitHub last reported it in `x-ratelimit-*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub limit: u64,
    pub remaining: u64,
    pub used: u64,
    /// When the bucket refills, seconds since the Unix epoch.
    pub reset_epoch: u64,
}

/// Which rate-limit bucket a request draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Core,
    Graphql,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Core => "core",
            Resource::Graphql => "graphql",
        }
    }
}

/// Whether a `GET` goes through the ETag cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// Sent with the remembered `ETag` (a 304 is served from the remembered body), and its
    /// answer remembered.
    Conditional,
    /// Unconditional, and its answer not remembered: for a read whose URL changes with
    /// every call (a `since=` watermark), where a remembered answer would never be asked
    /// for again and would only push useful ones out.
    Fresh,
    /// For a listing, [`Reuse::Conditional`] for its last page only: an earlier page (a long
    /// thread's old comments) is forgotten once it has a next page, so a listing of any
    /// length keeps one page in the cache. Its earlier pages cost a 200 each time.
    LastPage,
}

/// A successful answer: status, body and the `Link: rel="next"` target, if any.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub body: Bytes,
    pub next: Option<String>,
    /// The body came from the ETag cache after a 304.
    pub not_modified: bool,
}

/// The end of an answer read by [`Transport::get_tail_once`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail {
    pub bytes: Vec<u8>,
    /// How many bytes were read in all.
    pub read: u64,
    /// Whether the answer came from where a redirect pointed (one request more).
    pub redirected: bool,
}

#[derive(Debug, Clone)]
struct Cached {
    /// The [`variant`] of the request that got this answer.
    variant: String,
    etag: String,
    body: Bytes,
    next: Option<String>,
}

/// A remembered conditional answer in a form that can be stored: what makes the next `GET`
/// of `url` conditional, and the body a 304 stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Validator {
    pub url: String,
    /// A fingerprint of the token, `Accept` and API version that got the answer (never the
    /// token itself). GitHub's answers vary on them, so the validator is sent only by a
    /// request with the same variant; any other asks unconditionally.
    pub variant: String,
    pub etag: String,
    /// The answer's body (UTF-8 JSON), served again when GitHub says 304.
    pub body: String,
    /// The answer's `Link: rel="next"` target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// Remembered answers by URL, oldest evicted first.
#[derive(Debug, Default)]
struct EtagCache {
    capacity: usize,
    entries: HashMap<String, Cached>,
    order: VecDeque<String>,
    /// Bumped by every change, so a caller keeping the validators knows when to store them.
    generation: u64,
}

impl EtagCache {
    fn get(&self, url: &str, variant: &str) -> Option<&Cached> {
        self.entries.get(url).filter(|cached| cached.variant == variant)
    }

    fn put(&mut self, url: String, cached: Cached) {
        if self.capacity == 0 {
            return;
        }
        self.generation += 1;
        if self.entries.insert(url.clone(), cached).is_none() {
            self.order.push_back(url);
        }
        self.evict_beyond_capacity();
    }

    /// Forgets every answer whose URL `forget` picks.
    fn forget(&mut self, forget: impl Fn(&str) -> bool) {
        let before = self.entries.len();
        self.entries.retain(|url, _| !forget(url));
        if self.entries.len() != before {
            self.order.retain(|url| !forget(url));
            self.generation += 1;
        }
    }

    fn evict_beyond_capacity(&mut self) {
        while self.entries.len() > self.capacity {
            match self.order.pop_front() {
                Some(oldest) => {
                    self.entries.remove(&oldest);
                }
                None => break,
            }
        }
    }
}

/// The shared state of a client; std mutexes, never held across an `.await`.
#[derive(Debug, Default)]
struct Shared {
    /// The token in use; `None` until first needed.
    token: Mutex<Option<Token>>,
    cache: Mutex<EtagCache>,
    rate_limits: Mutex<BTreeMap<Resource, RateLimit>>,
    /// Answers by HTTP status (304s included), for metrics.
    statuses: Mutex<BTreeMap<u16, u64>>,
}

/// The HTTP side of a GitHub client for one host. Cheap to clone; clones share the token,
/// the ETag cache and the rate-limit view.
#[derive(Debug, Clone)]
pub(crate) struct Transport {
    settings: Arc<GithubSettings>,
    endpoints: ApiEndpoints,
    http: reqwest::Client,
    tokens: Arc<TokenSource>,
    clock: Arc<dyn Clock>,
    shared: Arc<Shared>,
    /// One permit per request in flight; every clone of the client draws from it.
    in_flight: Arc<tokio::sync::Semaphore>,
}

/// The outcome of one HTTP attempt, before retries are decided.
enum Attempt {
    Done(Answer),
    /// Ask for the token again and retry (once).
    Reauthorize,
    /// Back off (exponentially) and retry, spending one retry. `delivered` says the request
    /// may have reached GitHub (a 5xx or a broken answer), so a write must not be repeated.
    Backoff {
        reason: String,
        delivered: bool,
    },
    /// Wait this long and retry, spending one retry.
    RetryAfter(Duration, String),
    /// Wait until the primary limit resets and retry.
    WaitForReset(Duration),
    Fail(GithubError),
}

impl Transport {
    pub(crate) fn new(
        settings: GithubSettings,
        tokens: TokenSource,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, GithubError> {
        // reqwest is built without a bundled crypto provider; `ring` is installed as the
        // process default unless something else already installed one.
        let _already_installed = rustls::crypto::ring::default_provider().install_default();
        let endpoints = ApiEndpoints::resolve(&settings.host, settings.base_url.as_deref())?;
        let http = reqwest::Client::builder()
            .timeout(settings.request_timeout)
            .connect_timeout(settings.request_timeout)
            .user_agent(settings.user_agent.clone())
            .build()
            .map_err(GithubError::Setup)?;
        let shared = Shared {
            cache: Mutex::new(EtagCache {
                capacity: settings.etag_cache_entries,
                ..EtagCache::default()
            }),
            ..Shared::default()
        };
        let in_flight =
            Arc::new(tokio::sync::Semaphore::new(settings.max_concurrent_requests.max(1)));
        Ok(Self {
            in_flight,
            settings: Arc::new(settings),
            endpoints,
            http,
            tokens: Arc::new(tokens),
            clock,
            shared: Arc::new(shared),
        })
    }

    pub(crate) fn host(&self) -> &str {
        &self.settings.host
    }

    pub(crate) fn endpoints(&self) -> &ApiEndpoints {
        &self.endpoints
    }

    /// The REST URL of `path` (which starts with `/`).
    pub(crate) fn rest_url(&self, path: &str) -> Url {
        let mut url = self.endpoints.rest.clone();
        let base = url.path().trim_end_matches('/').to_owned();
        url.set_path(&format!("{base}{path}"));
        url
    }

    /// The last reported state of each rate-limit bucket.
    pub(crate) fn rate_limits(&self) -> BTreeMap<Resource, RateLimit> {
        lock(&self.shared.rate_limits).clone()
    }

    /// Whether `resource`'s bucket is down to its last tenth (or less) before its reset:
    /// the reserve best-effort writes (reactions) leave to what the-loop must ask.
    pub(crate) fn in_reserve(&self, resource: Resource) -> bool {
        lock(&self.shared.rate_limits).get(&resource).is_some_and(|limit| {
            limit.remaining <= limit.limit / 10 && !self.until_epoch(limit.reset_epoch).is_zero()
        })
    }

    /// How many answers of each HTTP status this client has received (304s included).
    pub(crate) fn answers_by_status(&self) -> BTreeMap<u16, u64> {
        lock(&self.shared.statuses).clone()
    }

    /// Every remembered conditional answer whose body is UTF-8, oldest first.
    pub(crate) fn validators(&self) -> Vec<Validator> {
        let cache = lock(&self.shared.cache);
        cache
            .order
            .iter()
            .filter_map(|url| {
                let cached = cache.entries.get(url)?;
                let body = std::str::from_utf8(&cached.body).ok()?;
                Some(Validator {
                    url: url.clone(),
                    variant: cached.variant.clone(),
                    etag: cached.etag.clone(),
                    body: body.to_owned(),
                    next: cached.next.clone(),
                })
            })
            .collect()
    }

    /// Remembers `validators` (oldest first) as if their answers had just arrived; each is
    /// sent only with its own variant, so one from another token is never used.
    pub(crate) fn restore_validators(&self, validators: impl IntoIterator<Item = Validator>) {
        let mut cache = lock(&self.shared.cache);
        for v in validators {
            let cached = Cached {
                variant: v.variant,
                etag: v.etag,
                body: Bytes::from(v.body),
                next: v.next,
            };
            cache.put(v.url, cached);
        }
    }

    /// Forgets the remembered answers of every URL `forget` picks (their next `GET` asks
    /// unconditionally).
    pub(crate) fn forget_answers(&self, forget: impl Fn(&str) -> bool) {
        lock(&self.shared.cache).forget(forget);
    }

    /// A number that changes whenever a remembered answer is added or replaced.
    pub(crate) fn validators_generation(&self) -> u64 {
        lock(&self.shared.cache).generation
    }

    /// `GET url`, conditional on the remembered ETag.
    pub(crate) async fn get(&self, url: &str) -> Result<Answer, GithubError> {
        self.exchange(Method::GET, url, None, Resource::Core, true, Reuse::Conditional).await
    }

    /// Every page of a `GET` listing, following `Link: rel="next"`, each page through the
    /// ETag cache as `reuse` says. `unchanged` is true when every page was a 304.
    pub(crate) async fn get_all_pages(
        &self,
        url: &str,
        reuse: Reuse,
    ) -> Result<(Vec<Value>, bool), GithubError> {
        let mut rows = Vec::new();
        let mut unchanged = true;
        let mut next = Some(url.to_owned());
        let mut pages = 0;
        while let Some(page_url) = next {
            pages += 1;
            if pages > MAX_PAGES {
                return Err(malformed(
                    url,
                    &format!(
                        "more than {MAX_PAGES} pages: the `Link: rel=\"next\"` chain does not end"
                    ),
                ));
            }
            let page_reuse = if reuse == Reuse::LastPage { Reuse::Conditional } else { reuse };
            let answer = self
                .exchange(Method::GET, &page_url, None, Resource::Core, true, page_reuse)
                .await?;
            if reuse == Reuse::LastPage && answer.next.is_some() {
                self.forget_answers(|url| url == page_url);
            }
            unchanged &= answer.not_modified;
            match serde_json::from_slice::<Value>(&answer.body) {
                Ok(Value::Array(page)) => rows.extend(page),
                Ok(_) => return Err(malformed(&page_url, "expected a JSON array")),
                Err(err) => return Err(malformed(&page_url, &err.to_string())),
            }
            next = answer.next;
        }
        Ok((rows, unchanged))
    }

    /// `GET url` once, without retries: for reads that spend a budget of their own
    /// (the CI evidence), where a retry is one request more.
    pub(crate) async fn get_once(&self, url: &str) -> Result<Answer, GithubError> {
        let token = self.current_token(false).await?;
        let once = |reason: String| GithubError::Transient {
            method: "GET".to_owned(),
            url: url.to_owned(),
            attempts: 1,
            reason,
        };
        match self
            .attempt(&Method::GET, url, None, Resource::Core, &token, Reuse::Conditional)
            .await
        {
            Attempt::Done(answer) => Ok(answer),
            Attempt::Reauthorize => Err(GithubError::Unauthorized { url: url.to_owned() }),
            Attempt::Backoff { reason, .. } | Attempt::RetryAfter(_, reason) => Err(once(reason)),
            Attempt::WaitForReset(_) => Err(once("the rate limit is spent".to_owned())),
            Attempt::Fail(err) => Err(err),
        }
    }

    /// `GET url` once, following a redirect, keeping only the last `keep` bytes of the
    /// answer and reading at most `max_read` (a longer body is an error: its end was
    /// not reached). For a log, which GitHub answers with a 302 to a pre-signed address
    /// (reqwest drops the token when the redirect leaves the API's host).
    pub(crate) async fn get_tail_once(
        &self,
        url: &str,
        keep: usize,
        max_read: u64,
    ) -> Result<Tail, GithubError> {
        let token = self.current_token(false).await?;
        let failed = |reason: String| GithubError::Transient {
            method: "GET".to_owned(),
            url: url.to_owned(),
            attempts: 1,
            reason,
        };
        let _permit = self.in_flight.acquire().await.ok();
        let mut response = self
            .http
            .get(url)
            .header(header::ACCEPT, "application/vnd.github+json")
            .header("X-GitHub-Api-Version", API_VERSION)
            .bearer_auth(token.expose())
            .send()
            .await
            .map_err(|err| failed(describe_transport_error(&err)))?;
        let status = response.status();
        *lock(&self.shared.statuses).entry(status.as_u16()).or_default() += 1;
        let redirected = response.url().as_str() != url;
        if !status.is_success() {
            let body = response.bytes().await.unwrap_or_default();
            return Err(match status {
                StatusCode::UNAUTHORIZED => GithubError::Unauthorized { url: url.to_owned() },
                StatusCode::NOT_FOUND => GithubError::NotFound { url: url.to_owned() },
                StatusCode::GONE => {
                    GithubError::Gone { url: url.to_owned(), message: error_message(&body) }
                }
                s if s.is_server_error() => failed(format!("{s}: {}", error_message(&body))),
                s => GithubError::Rejected {
                    method: "GET".to_owned(),
                    url: url.to_owned(),
                    status: s.as_u16(),
                    message: error_message(&body),
                },
            });
        }
        let mut tail: VecDeque<u8> = VecDeque::with_capacity(keep.min(1 << 20));
        let mut read: u64 = 0;
        while let Some(chunk) =
            response.chunk().await.map_err(|err| failed(describe_transport_error(&err)))?
        {
            read += chunk.len() as u64;
            if read > max_read {
                return Err(failed(format!("the answer is longer than {max_read} bytes")));
            }
            tail.extend(chunk.iter());
            let excess = tail.len().saturating_sub(keep);
            tail.drain(..excess);
        }
        Ok(Tail { bytes: tail.into(), read, redirected })
    }

    /// `POST url` with a JSON body (never conditional, never cached). `idempotent` allows
    /// repeating it after a 5xx (true for GraphQL queries, false for writes).
    pub(crate) async fn post(
        &self,
        url: &str,
        body: &Value,
        resource: Resource,
        idempotent: bool,
    ) -> Result<Answer, GithubError> {
        self.exchange(Method::POST, url, Some(body), resource, idempotent, Reuse::Fresh).await
    }

    /// `DELETE url` (repeated after a 5xx: deleting twice leaves the same state).
    pub(crate) async fn delete(&self, url: &str) -> Result<Answer, GithubError> {
        self.exchange(Method::DELETE, url, None, Resource::Core, true, Reuse::Fresh).await
    }

    async fn exchange(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
        resource: Resource,
        idempotent: bool,
        reuse: Reuse,
    ) -> Result<Answer, GithubError> {
        let mut retries = 0;
        let mut reauthorized = false;
        let mut attempts = 0;
        let mut rate_waits = 0;
        loop {
            self.wait_for_primary_limit(resource).await;
            let token = self.current_token(false).await?;
            attempts += 1;
            match self.attempt(&method, url, body, resource, &token, reuse).await {
                Attempt::Done(answer) => return Ok(answer),
                Attempt::Reauthorize if !reauthorized => {
                    reauthorized = true;
                    self.current_token(true).await?;
                }
                Attempt::Reauthorize => {
                    return Err(GithubError::Unauthorized { url: url.to_owned() });
                }
                Attempt::WaitForReset(_) if rate_waits >= MAX_RATE_LIMIT_WAITS => {
                    return Err(GithubError::Transient {
                        method: method.to_string(),
                        url: url.to_owned(),
                        attempts,
                        reason: format!(
                            "the rate limit was still spent after {rate_waits} waits for its reset"
                        ),
                    });
                }
                Attempt::WaitForReset(wait) => {
                    rate_waits += 1;
                    tracing::warn!(%url, wait_s = wait.as_secs(), "GitHub rate limit spent; waiting for its reset");
                    self.clock.sleep(wait).await;
                }
                Attempt::Backoff { reason, delivered } if delivered && !idempotent => {
                    return Err(GithubError::Transient {
                        method: method.to_string(),
                        url: url.to_owned(),
                        attempts,
                        reason: format!("{reason} (a write is not repeated: it may have landed)"),
                    });
                }
                Attempt::Backoff { reason, .. } => {
                    let wait = self.backoff(retries);
                    self.retry(&method, url, attempts, &mut retries, wait, reason).await?;
                }
                Attempt::RetryAfter(wait, reason) => {
                    self.retry(&method, url, attempts, &mut retries, wait, reason).await?;
                }
                Attempt::Fail(err) => return Err(err),
            }
        }
    }

    /// Spends one retry and waits `wait`, or fails when the retries are spent.
    async fn retry(
        &self,
        method: &Method,
        url: &str,
        attempts: u32,
        retries: &mut u32,
        wait: Duration,
        reason: String,
    ) -> Result<(), GithubError> {
        if *retries >= self.settings.max_retries {
            return Err(GithubError::Transient {
                method: method.to_string(),
                url: url.to_owned(),
                attempts,
                reason,
            });
        }
        *retries += 1;
        tracing::debug!(%url, %reason, wait_ms = wait.as_millis() as u64, "retrying GitHub request");
        self.clock.sleep(wait).await;
        Ok(())
    }

    /// The token to use; `refresh` asks the source again (after a 401).
    async fn current_token(&self, refresh: bool) -> Result<Token, GithubError> {
        if !refresh && let Some(token) = lock(&self.shared.token).clone() {
            return Ok(token);
        }
        let token = self.tokens.token().await?;
        *lock(&self.shared.token) = Some(token.clone());
        Ok(token)
    }

    async fn wait_for_primary_limit(&self, resource: Resource) {
        let spent = lock(&self.shared.rate_limits).get(&resource).copied();
        if let Some(limit) = spent.filter(|l| l.remaining == 0) {
            let wait = self.until_epoch(limit.reset_epoch);
            if !wait.is_zero() {
                tracing::warn!(
                    resource = resource.as_str(),
                    wait_s = wait.as_secs(),
                    "GitHub rate limit spent; waiting for its reset"
                );
                self.clock.sleep(wait).await;
            }
            // The bucket is assumed refilled; the next answer's headers say how much.
            if let Some(l) = lock(&self.shared.rate_limits).get_mut(&resource) {
                l.remaining = l.remaining.max(1);
            }
        }
    }

    /// Time from now until `epoch` plus one second of slack; zero when it has passed, and
    /// never more than [`MAX_WAIT`] (the header is outside input).
    fn until_epoch(&self, epoch: u64) -> Duration {
        let now = self.clock.now().duration_since(UNIX_EPOCH).unwrap_or_default();
        Duration::from_secs(epoch.saturating_add(1)).saturating_sub(now).min(MAX_WAIT)
    }

    fn backoff(&self, retries_so_far: u32) -> Duration {
        self.settings.retry_backoff.saturating_mul(1 << retries_so_far.min(6))
    }

    async fn attempt(
        &self,
        method: &Method,
        url: &str,
        body: Option<&Value>,
        resource: Resource,
        token: &Token,
        reuse: Reuse,
    ) -> Attempt {
        let variant = variant(token);
        let remembered = *method == Method::GET && reuse == Reuse::Conditional;
        let cached =
            if remembered { lock(&self.shared.cache).get(url, &variant).cloned() } else { None };
        let mut request = self
            .http
            .request(method.clone(), url)
            .header(header::ACCEPT, "application/vnd.github+json")
            .header("X-GitHub-Api-Version", API_VERSION)
            .bearer_auth(token.expose());
        if let Some(cached) = &cached {
            request = request.header(header::IF_NONE_MATCH, cached.etag.as_str());
        }
        if let Some(body) = body {
            request =
                request.header(header::CONTENT_TYPE, "application/json").body(body.to_string());
        }
        // Held until the body is read. The semaphore is never closed, so this only waits.
        let _permit = self.in_flight.acquire().await.ok();
        let response = match request.send().await {
            Ok(response) => response,
            Err(err) => {
                return Attempt::Backoff {
                    reason: describe_transport_error(&err),
                    delivered: !err.is_connect(),
                };
            }
        };
        let status = response.status();
        let headers = response.headers().clone();
        *lock(&self.shared.statuses).entry(status.as_u16()).or_default() += 1;
        self.record_rate_limit(resource, &headers);
        let body = match response.bytes().await {
            Ok(body) => body,
            Err(err) => {
                return Attempt::Backoff {
                    reason: describe_transport_error(&err),
                    delivered: true,
                };
            }
        };
        let next = next_link(&headers);
        match status {
            StatusCode::NOT_MODIFIED => match cached {
                Some(cached) => Attempt::Done(Answer {
                    body: cached.body,
                    next: cached.next,
                    not_modified: true,
                }),
                None => {
                    Attempt::Fail(malformed(url, "304 Not Modified to an unconditional request"))
                }
            },
            s if s.is_success() => {
                if remembered
                    && let Some(etag) = headers.get(header::ETAG).and_then(|v| v.to_str().ok())
                {
                    // Copied: the answer may be a slice of the connection's whole read
                    // buffer, which a cached view would keep alive for as long as it is
                    // remembered.
                    let entry = Cached {
                        variant,
                        etag: etag.to_owned(),
                        body: Bytes::copy_from_slice(&body),
                        next: next.clone(),
                    };
                    lock(&self.shared.cache).put(url.to_owned(), entry);
                }
                Attempt::Done(Answer { body, next, not_modified: false })
            }
            StatusCode::UNAUTHORIZED => Attempt::Reauthorize,
            StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS => {
                let message = error_message(&body);
                if let Some(wait) = self.secondary_limit_wait(&headers, &message) {
                    Attempt::RetryAfter(wait, format!("secondary rate limit ({status}): {message}"))
                } else if header_u64(&headers, "x-ratelimit-remaining") == Some(0) {
                    let reset = header_u64(&headers, "x-ratelimit-reset").unwrap_or(0);
                    Attempt::WaitForReset(self.until_epoch(reset).max(Duration::from_secs(1)))
                } else if status == StatusCode::TOO_MANY_REQUESTS {
                    Attempt::RetryAfter(Duration::from_secs(60), format!("{status}: {message}"))
                } else {
                    Attempt::Fail(GithubError::Permission {
                        method: method.to_string(),
                        url: url.to_owned(),
                        status: status.as_u16(),
                        message,
                    })
                }
            }
            StatusCode::NOT_FOUND => Attempt::Fail(GithubError::NotFound { url: url.to_owned() }),
            StatusCode::GONE => Attempt::Fail(GithubError::Gone {
                url: url.to_owned(),
                message: error_message(&body),
            }),
            s if s.is_server_error() => Attempt::Backoff {
                reason: format!("{status}: {}", error_message(&body)),
                delivered: true,
            },
            s => Attempt::Fail(GithubError::Rejected {
                method: method.to_string(),
                url: url.to_owned(),
                status: s.as_u16(),
                message: error_message(&body),
            }),
        }
    }

    /// GitHub's secondary limits: `Retry-After` seconds, else at least a minute when the
    /// message names a secondary rate limit.
    fn secondary_limit_wait(&self, headers: &HeaderMap, message: &str) -> Option<Duration> {
        if let Some(seconds) = header_u64(headers, header::RETRY_AFTER.as_str()) {
            return Some(Duration::from_secs(seconds).min(MAX_WAIT));
        }
        let lower = message.to_ascii_lowercase();
        (lower.contains("secondary rate limit") || lower.contains("abuse detection"))
            .then(|| Duration::from_secs(60))
    }

    fn record_rate_limit(&self, resource: Resource, headers: &HeaderMap) {
        let (Some(limit), Some(remaining), Some(reset_epoch)) = (
            header_u64(headers, "x-ratelimit-limit"),
            header_u64(headers, "x-ratelimit-remaining"),
            header_u64(headers, "x-ratelimit-reset"),
        ) else {
            return;
        };
        let used =
            header_u64(headers, "x-ratelimit-used").unwrap_or(limit.saturating_sub(remaining));
        lock(&self.shared.rate_limits)
            .insert(resource, RateLimit { limit, remaining, used, reset_epoch });
    }
}

/// Locks a mutex; a poisoned lock still holds consistent data here (every critical section
/// is a single insert or read), so the poison is ignored.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The variant a request's answer is remembered under: 16 hex digits of a SHA-256 over
/// `Accept`, the API version and the token. It tells tokens apart without storing one.
fn variant(token: &Token) -> String {
    let mut hasher = Sha256::new();
    for part in ["application/vnd.github+json", API_VERSION, token.expose()] {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hasher.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn malformed(url: &str, reason: &str) -> GithubError {
    GithubError::Malformed { url: url.to_owned(), reason: reason.to_owned() }
}

fn header_u64(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers
        .get(name)
        .and_then(|v: &HeaderValue| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// GitHub's `{"message": …}`, or the start of the body when it is not JSON.
fn error_message(body: &[u8]) -> String {
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => match value.get("message").and_then(Value::as_str) {
            Some(message) => message.to_owned(),
            None => "no message".to_owned(),
        },
        Err(_) => String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
    }
}

fn describe_transport_error(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        "timed out".to_owned()
    } else if err.is_connect() {
        "could not connect".to_owned()
    } else {
        "the connection failed".to_owned()
    }
}

/// The `rel="next"` target of a `Link` header.
fn next_link(headers: &HeaderMap) -> Option<String> {
    let link = headers.get(header::LINK)?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        let is_next = params.split(';').any(|p| p.trim() == "rel=\"next\"");
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        is_next.then(|| target.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_map_to_their_api_endpoints() {
        let dotcom = ApiEndpoints::resolve("github.com", None).unwrap();
        assert_eq!(dotcom.rest.as_str(), "https://api.github.com/");
        assert_eq!(dotcom.graphql.as_str(), "https://api.github.com/graphql");
        let ghe = ApiEndpoints::resolve("ghe.example.com", None).unwrap();
        assert_eq!(ghe.rest.as_str(), "https://ghe.example.com/api/v3");
        assert_eq!(ghe.graphql.as_str(), "https://ghe.example.com/api/graphql");
        let sim = ApiEndpoints::resolve("github.com", Some("http://127.0.0.1:9/")).unwrap();
        assert_eq!(sim.graphql.as_str(), "http://127.0.0.1:9/graphql");
        let sim_ghe = ApiEndpoints::resolve("x.y", Some("http://127.0.0.1:9/api/v3")).unwrap();
        assert_eq!(sim_ghe.graphql.as_str(), "http://127.0.0.1:9/api/graphql");
        assert!(ApiEndpoints::resolve("github.com", Some("ftp://x")).is_err());
        assert!(ApiEndpoints::resolve("github.com", Some("not a url")).is_err());
    }

    #[test]
    fn next_link_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::LINK,
            HeaderValue::from_static(
                "<https://api.github.com/x?page=1>; rel=\"prev\", <https://api.github.com/x?page=3>; rel=\"next\", <https://api.github.com/x?page=9>; rel=\"last\"",
            ),
        );
        assert_eq!(next_link(&headers).as_deref(), Some("https://api.github.com/x?page=3"));
        headers
            .insert(header::LINK, HeaderValue::from_static("<https://a/x?page=1>; rel=\"first\""));
        assert_eq!(next_link(&headers), None);
    }

    #[test]
    fn etag_cache_evicts_the_oldest_beyond_capacity() {
        let mut cache = EtagCache { capacity: 2, ..EtagCache::default() };
        let entry =
            || Cached { variant: "v".into(), etag: "e".into(), body: Bytes::new(), next: None };
        for url in ["a", "b", "a", "c"] {
            cache.put(url.into(), entry());
        }
        assert!(cache.get("a", "v").is_none());
        assert!(cache.get("b", "v").is_some() && cache.get("c", "v").is_some());
        assert_eq!(cache.generation, 4);
    }

    #[test]
    fn a_remembered_answer_is_used_only_by_the_same_variant() {
        let mut cache = EtagCache { capacity: 2, ..EtagCache::default() };
        let (one, other) = (variant(&Token::new("one")), variant(&Token::new("other")));
        assert_ne!(one, other);
        assert_eq!(one.len(), 16);
        assert!(!one.contains("one"));
        let entry =
            Cached { variant: one.clone(), etag: "e".into(), body: Bytes::new(), next: None };
        cache.put("a".into(), entry);
        assert!(cache.get("a", &one).is_some());
        assert!(cache.get("a", &other).is_none(), "another token asks unconditionally");
    }

    proptest::proptest! {
        #[test]
        fn any_link_header_parses_without_panicking(link in ".{0,200}") {
            let mut headers = HeaderMap::new();
            if let Ok(value) = HeaderValue::from_str(&link) {
                headers.insert(header::LINK, value);
            }
            let _ = next_link(&headers);
        }

        #[test]
        fn any_error_body_yields_a_message_without_panicking(body in proptest::collection::vec(0u8.., 0..300)) {
            let _ = error_message(&body);
        }
    }
}

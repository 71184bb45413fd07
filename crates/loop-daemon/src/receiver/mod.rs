//! The GitHub webhook receiver: verify, journal, answer 202, then process.
//!
//! HTTP surface (reference §1.2 as amended by SPEC §1): `POST {webhooks.ghWebhook.path}`
//! takes deliveries; `GET /health` and `/healthz` answer 200. A delivery's
//! `X-Hub-Signature-256` is checked over the raw body in constant time before a byte of it
//! is parsed (401 when missing or wrong); the body must be a UTF-8 JSON object (400
//! otherwise) of at most the body cap (413). A verified delivery is journalled under
//! `<root>/local/inbox/` and answered 202 once the journal's write holds it (a `kill -9`
//! loses nothing; the `fdatasync` follows behind as group commit, see [`journal`]); the
//! [`processor`] then judges it through the [`pipeline`] and hands it to a [`Dispatch`]. Unknown paths are 404, other methods 405; every answer is JSON.
//!
//! The receiver takes a bound listener (tests bind port 0) and a shutdown future. On
//! shutdown it stops accepting, finishes the requests in flight, lets the processor finish
//! the delivery in flight, syncs the journal and returns — within [`GRACE`].
//!
//! It does not decide anything about events (loop-core does), execute decisions (the
//! dispatcher does) or read the environment (the caller passes the secret in).

pub mod intake;
mod journal;
mod processor;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER, SERVER};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use jiff::Timestamp;
use loop_core::config::Config;
use loop_core::log::{Kind, Line};
use loop_core::route::KnownExistence;
use loop_store::inbox::{Inbox, Receipt};
use loop_store::{EventLog, StateStore, StoreError};
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

use crate::live_config::LiveConfig;
use crate::metrics::{InboxGauges, Metrics, Outcome};
use crate::shutdown::Trigger;
pub use intake::{Delivery, Dispatch, ExistenceAnswers, Judged, RecordDecision};
use journal::{JournalRequest, Unaccepted};
pub use processor::InboxMarks;
use processor::Processor;

/// GitHub's payload cap is 25 MB; the default cap is 25 MiB, never smaller (reference §1.4).
pub const DEFAULT_BODY_LIMIT: usize = 25 * 1024 * 1024;

/// How long shutdown may take in all (SPEC §1: every process exits within 5 s).
pub const GRACE: Duration = Duration::from_millis(4500);

/// How long the HTTP server may spend finishing requests in flight on shutdown.
const HTTP_GRACE: Duration = Duration::from_secs(3);

/// Requests waiting for the journal writer.
const JOURNAL_QUEUE: usize = 4096;

/// Durable deliveries waiting for the processor; beyond this they wait in the journal only.
/// Each holds its body: 64 keep the processor fed at the bench's rate, and 256 (with
/// read-backs of 256) left 4 MB more resident after a drain (docs/performance.md).
const PROCESS_QUEUE: usize = 64;

/// The `Retry-After` of a 503: long enough for a backlog at its ceiling to drain a good
/// part, short enough that a retrying sender is not kept away for long.
const RETRY_AFTER_SECONDS: u32 = 30;

/// Said at start and on every reload while signatures are not verified.
pub(crate) const UNSIGNED_WARNING: &str = "`webhooks.ghWebhook.allowUnsigned` is on and there is no secret: signatures will NOT be verified; anyone who can reach the receiver can inject events";

/// The `Server` header of every answer.
const SERVER_NAME: &str = concat!("the-loop-gh-webhook/", env!("CARGO_PKG_VERSION"));

/// Why the receiver cannot start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReceiverError {
    #[error("the webhook secret is unset: the environment variable `{env}` is empty or missing")]
    UnsetSecret { env: String },

    #[error(
        "`webhooks.ghWebhook.path` is `{path}`: it must start with `/`, contain no `{{`, `}}` or `*`, and not be `/health` or `/healthz`"
    )]
    Path { path: String },

    #[error("cannot open the inbox journal")]
    Inbox(#[source] StoreError),

    #[error("cannot start the inbox journal's writer or processor thread")]
    Writer(#[source] std::io::Error),

    #[error("the listener failed")]
    Serve(#[source] std::io::Error),
}

impl loop_core::Hint for ReceiverError {
    fn hint(&self) -> Option<String> {
        match self {
            Self::UnsetSecret { env } => Some(format!(
                "export `{env}` with the secret configured on GitHub, or set `webhooks.ghWebhook.allowUnsigned: true` to accept unsigned deliveries"
            )),
            Self::Path { .. } => Some(
                "set `webhooks.ghWebhook.path` to a plain path such as `/gh-webhook`".to_owned(),
            ),
            Self::Inbox(_) | Self::Writer(_) | Self::Serve(_) => None,
        }
    }
}

/// The HMAC secret (the value of the env var `secretEnv` names). Never printed.
#[derive(Clone)]
pub struct Secret(Arc<[u8]>);

impl Secret {
    /// `None` for an unset or empty value: no secret.
    pub fn from_value(value: Option<&str>) -> Option<Self> {
        value.filter(|v| !v.is_empty()).map(|v| Self(Arc::from(v.as_bytes())))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A receiver ready to run: config checked, journal opened.
#[derive(Debug)]
pub struct Receiver {
    config: LiveConfig,
    store: StateStore,
    events: EventLog,
    secret: Option<Secret>,
    inbox: Inbox,
    backlog: Vec<loop_store::inbox::Journalled>,
    dispatch: Arc<dyn Dispatch>,
    existence: Arc<dyn ExistenceAnswers>,
    hold_processing: bool,
    body_limit: usize,
    warnings: Vec<String>,
    /// More routes served on the receiver's port (e.g. `GET /metrics`).
    routes: Option<Router>,
    /// Where refused and dropped deliveries are counted, if anywhere.
    metrics: Option<Metrics>,
    /// The inbox's depth and processing lag (kept by the journal writer and processor).
    gauges: Arc<InboxGauges>,
}

impl Receiver {
    /// Checks the start-time settings (path, secret) and opens the inbox journal under
    /// `store`'s root, reading what it still holds. Its lines go to `store`'s event log
    /// (the process's one writer: see [`loop_store::EventLog::for_source`]); the soft
    /// settings follow `config` per delivery.
    pub fn new(
        config: LiveConfig,
        store: StateStore,
        secret: Option<Secret>,
    ) -> Result<Self, ReceiverError> {
        let current = config.current();
        if let Some(refusal) = misconfigurations(&current, secret.as_ref()).into_iter().next() {
            return Err(refusal);
        }
        let gh = &current.webhooks.gh_webhook;
        let events = store.events().clone();
        let (inbox, contents) =
            Inbox::open(&store.layout().inbox_dir()).map_err(ReceiverError::Inbox)?;
        for torn in &contents.ignored {
            events.emit(
                Line::warning(Kind::InboxTornTail)
                    .field("path", &torn.path)
                    .field("offset", torn.offset)
                    .field("bytes", torn.bytes),
            );
        }
        let mut warnings = Vec::new();
        if secret.is_none() {
            warnings.push(format!("`{}` is unset: {UNSIGNED_WARNING}", gh.secret_env));
        }
        if current.routing.authorized_users.is_empty() {
            warnings.push(
                "`routing.authorizedUsers` is empty: the receiver acts on NO human-authored events"
                    .to_owned(),
            );
        }
        warnings.extend(filter_warning(&current));
        if current.repositories.is_empty() {
            warnings.push(
                "`repositories` is empty: deliveries from every repository are routed".to_owned(),
            );
        }
        let pending = contents.pending.len() as u64;
        Ok(Self {
            dispatch: Arc::new(RecordDecision::new(events.clone())),
            existence: Arc::new(KnownExistence::default()),
            config,
            store,
            events,
            secret,
            inbox,
            backlog: contents.pending,
            hold_processing: false,
            body_limit: DEFAULT_BODY_LIMIT,
            gauges: Arc::new(InboxGauges::new(pending)),
            warnings,
            routes: None,
            metrics: None,
        })
    }

    /// Who executes judged events (default: [`RecordDecision`]).
    pub fn with_dispatch(mut self, dispatch: Arc<dyn Dispatch>) -> Self {
        self.dispatch = dispatch;
        self
    }

    /// Where definite existence answers for branch-only refs come from (default: none
    /// known, so every such ref is kept).
    pub fn with_existence(mut self, existence: Arc<dyn ExistenceAnswers>) -> Self {
        self.existence = existence;
        self
    }

    /// Journals and acknowledges deliveries but processes none, not even the backlog:
    /// they wait in the journal for a start without this. For crash tests and for
    /// taking deliveries while the rest of the service is being repaired.
    pub fn hold_processing(mut self, hold: bool) -> Self {
        self.hold_processing = hold;
        self
    }

    /// Serves `routes` on the receiver's port beside its own (e.g. `GET /metrics`).
    pub fn with_routes(mut self, routes: Router) -> Self {
        self.routes = Some(routes);
        self
    }

    /// Counts every delivery it refuses (front door) or drops (event filter, judging) in
    /// `metrics`, under the event log's reason; what it hands on is the dispatcher's to
    /// count ([`crate::dispatcher::Dispatcher::count_in`]).
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The largest body accepted (default [`DEFAULT_BODY_LIMIT`]).
    pub fn with_body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// What an operator should know before it runs (unsigned deliveries, no authorized
    /// users, a narrowed event filter, no repository bound).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The inbox's depth and processing lag, kept current while it runs (for metrics).
    pub fn inbox(&self) -> Arc<InboxGauges> {
        Arc::clone(&self.gauges)
    }

    /// How many journalled deliveries will be replayed at start.
    pub fn backlog(&self) -> usize {
        self.backlog.len()
    }

    /// Serves `listener` until `shutdown` completes, then stops within [`GRACE`].
    pub async fn run(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ReceiverError> {
        let Self {
            config,
            store,
            events,
            secret,
            inbox,
            backlog,
            dispatch,
            existence,
            hold_processing,
            body_limit,
            warnings: _,
            routes,
            metrics,
            gauges,
        } = self;
        let current = config.current();
        let trigger = Trigger::new();
        let (journal_tx, journal_rx) = mpsc::channel(JOURNAL_QUEUE);
        let (process_tx, process_rx) = mpsc::channel(PROCESS_QUEUE);
        let next_seq = inbox.next_seq();
        let (_, writer_guard) = trigger.task();
        let unqueued = Arc::new(journal::Unqueued::default());
        unqueued.written_to.store(next_seq, std::sync::atomic::Ordering::Release);
        let writer = journal::Writer {
            inbox,
            requests: journal_rx,
            to_process: process_tx,
            unqueued: Arc::clone(&unqueued),
            events: events.clone(),
            gauges: Arc::clone(&gauges),
            config: config.subscribe(),
        };
        journal::spawn_writer(writer, writer_guard).map_err(ReceiverError::Writer)?;
        if !hold_processing {
            let marks = Arc::new(InboxMarks::new(&journal_tx));
            dispatch.mark_when_done(Arc::clone(&marks));
            let processor = Processor {
                pipeline: Arc::new(Mutex::new(
                    intake::Intake::new(config, store.clone(), events.clone(), dispatch, existence)
                        .count_in(metrics.clone()),
                )),
                backlog,
                next_seq,
                deliveries: process_rx,
                unqueued,
                journal: journal_tx.clone(),
                marks,
                inbox_dir: store.layout().inbox_dir(),
                events: events.clone(),
                gauges,
                worker: processor::Worker::spawn().map_err(ReceiverError::Writer)?,
            };
            let (shutdown, guard) = trigger.task();
            tokio::spawn(processor.run(shutdown, guard));
        }

        let local = listener.local_addr().map_err(ReceiverError::Serve)?;
        let gh = &current.webhooks.gh_webhook;
        events.emit(
            Line::info(Kind::ServerStarted)
                .field("host", local.ip().to_string())
                .field("port", local.port())
                .field("path", &gh.path)
                .field("routing", current.routing.enabled)
                .field("verifying_signatures", secret.is_some())
                .field("held", hold_processing),
        );
        let state = Arc::new(Door { journal: journal_tx, secret, events: events.clone(), metrics });
        let app = router(&gh.path, body_limit, state);
        let app = match routes {
            // The extra routes first: merging into a router that has a fallback would
            // leave them unreachable.
            Some(routes) => routes.merge(app),
            None => app,
        };
        let (stop_http, http_stopped) = oneshot::channel::<()>();
        let mut server = tokio::spawn(
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = http_stopped.await;
                })
                .into_future(),
        );
        let served = tokio::select! {
            () = shutdown => None,
            served = &mut server => Some(served),
        };
        let result = match served {
            Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(err))) => Err(ReceiverError::Serve(err)),
            Some(Err(join)) => Err(ReceiverError::Serve(std::io::Error::other(join))),
            None => {
                let _ = stop_http.send(());
                if tokio::time::timeout(HTTP_GRACE, &mut server).await.is_err() {
                    tracing::warn!("requests still in flight after {HTTP_GRACE:?}; closing them");
                    server.abort();
                }
                Ok(())
            }
        };
        // The server's state (and its journal sender) is gone; the processor finishes the
        // delivery in flight; the writer syncs what is left and stops.
        let remaining = GRACE.saturating_sub(HTTP_GRACE);
        if tokio::time::timeout(remaining, trigger.stop_and_wait()).await.is_err() {
            tracing::warn!("the processor or the journal writer did not stop in time");
        }
        events.emit(
            Line::info(Kind::ServerStopped)
                .field("host", local.ip().to_string())
                .field("port", local.port()),
        );
        // Every line of this run is in the file before `run` returns.
        let _ = tokio::task::spawn_blocking(move || events.flush()).await;
        result
    }
}

/// Why a receiver cannot start with `config` and `secret`: its route cannot be served
/// (it must be absolute, hold no route syntax and not be a health check), or it has no
/// secret while unsigned deliveries are refused. The service's preflight asks the same.
pub fn misconfigurations(config: &Config, secret: Option<&Secret>) -> Vec<ReceiverError> {
    let gh = &config.webhooks.gh_webhook;
    let path = gh.path.as_str();
    let servable = path.starts_with('/')
        && !path.contains(['{', '}', '*'])
        && !["/health", "/healthz"].contains(&path.trim_end_matches('/'));
    let mut refusals = Vec::new();
    if !servable {
        refusals.push(ReceiverError::Path { path: gh.path.clone() });
    }
    if secret.is_none() && !gh.allow_unsigned {
        refusals.push(ReceiverError::UnsetSecret { env: gh.secret_env.clone() });
    }
    refusals
}

/// The start-up (and reload) warning for an event filter without `issues` or
/// `pull_request` (reference §1.6).
pub(crate) fn filter_warning(config: &Config) -> Option<String> {
    let events = &config.webhooks.gh_webhook.events;
    let missing: Vec<&str> = ["issues", "pull_request"]
        .into_iter()
        .filter(|name| !events.iter().any(|e| e == name))
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "`webhooks.ghWebhook.events` lacks {}: those events are acknowledged and dropped",
            missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(" and ")
        )
    })
}

/// What every request handler shares.
#[derive(Debug)]
struct Door {
    /// To the journal writer thread, which holds the receiving end; when the server
    /// drops this (its last request done), the writer may finish.
    journal: mpsc::Sender<JournalRequest>,
    secret: Option<Secret>,
    events: EventLog,
    metrics: Option<Metrics>,
}

fn router(path: &str, body_limit: usize, door: Arc<Door>) -> Router {
    Router::new()
        .route(path, post(deliver))
        .route("/health", get(health))
        .route("/healthz", get(health))
        .route("/health/", get(health))
        .route("/healthz/", get(health))
        .fallback(|| async { answer(StatusCode::NOT_FOUND, NOT_FOUND) })
        .method_not_allowed_fallback(|| async {
            answer(StatusCode::METHOD_NOT_ALLOWED, METHOD_NOT_ALLOWED)
        })
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::map_response(|mut response: Response| async move {
            response.headers_mut().insert(SERVER, HeaderValue::from_static(SERVER_NAME));
            response
        }))
        .with_state(door)
}

/// A JSON answer; `json` is one of the `{"status": …}` bodies below.
fn answer(status: StatusCode, json: &'static str) -> Response {
    (status, [(CONTENT_TYPE, HeaderValue::from_static("application/json"))], json).into_response()
}

const OK: &str = r#"{"status":"ok"}"#;
const ACCEPTED: &str = r#"{"status":"accepted"}"#;
const NOT_FOUND: &str = r#"{"status":"not found"}"#;
const METHOD_NOT_ALLOWED: &str = r#"{"status":"method not allowed"}"#;
const INVALID_SIGNATURE: &str = r#"{"status":"invalid signature"}"#;
const INVALID_PAYLOAD: &str = r#"{"status":"invalid payload"}"#;
const TOO_LARGE: &str = r#"{"status":"payload too large"}"#;
const UNAVAILABLE: &str = r#"{"status":"unavailable"}"#;

async fn health() -> Response {
    answer(StatusCode::OK, OK)
}

/// The headers of a delivery the receiver reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeliveryHeaders<'a> {
    /// `X-GitHub-Event`.
    pub event: Option<&'a str>,
    /// `X-GitHub-Delivery`.
    pub delivery: Option<&'a str>,
    /// `X-Hub-Signature-256`.
    pub signature: Option<&'a str>,
}

/// Why the front door refused a delivery (`webhook.rejected`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 401: the signature is missing, malformed or wrong.
    InvalidSignature,
    /// 400: the body is not a UTF-8 JSON object.
    InvalidPayload,
}

impl Refusal {
    pub fn reason(self) -> &'static str {
        match self {
            Self::InvalidSignature => "invalid-signature",
            Self::InvalidPayload => "invalid-payload",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            Self::InvalidSignature => StatusCode::UNAUTHORIZED,
            Self::InvalidPayload => StatusCode::BAD_REQUEST,
        }
    }
}

/// The front door's decision on one request, before anything is journalled: the
/// signature over the raw body first (when a secret is set), then the body's shape.
/// Pure apart from `received_at`, which the caller passes.
pub fn admit(
    secret: Option<&Secret>,
    headers: DeliveryHeaders<'_>,
    body: Bytes,
    received_at: Timestamp,
) -> Result<Receipt, Refusal> {
    let verified = match secret {
        Some(secret) => {
            loop_github::verify_signature(&secret.0, &body, headers.signature)
                .map_err(|_| Refusal::InvalidSignature)?;
            true
        }
        None => false,
    };
    if !is_json_object(&body) {
        return Err(Refusal::InvalidPayload);
    }
    Ok(Receipt {
        event: headers.event.filter(|v| !v.is_empty()).unwrap_or("unknown").to_owned(),
        delivery_id: headers.delivery.filter(|v| !v.is_empty()).map(str::to_owned),
        verified,
        received_at,
        // A body may be a slice of the connection's whole read buffer; a copy of its own
        // keeps queued deliveries from pinning those buffers.
        body: Bytes::copy_from_slice(&body),
    })
}

/// One delivery: admit, journal, answer.
async fn deliver(
    State(door): State<Arc<Door>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let headers = DeliveryHeaders {
        event: text("x-github-event"),
        delivery: text("x-github-delivery"),
        signature: text(loop_github::signature::SIGNATURE_HEADER),
    };
    let reject = |reason: &'static str, level: fn(Kind) -> Line| {
        let line = level(Kind::WebhookRejected)
            .field("reason", reason)
            .field("gh_event", headers.event.unwrap_or("unknown"))
            .field("delivery_id", headers.delivery);
        door.events.emit(line);
        if let Some(metrics) = &door.metrics {
            metrics.delivery(Outcome::Rejected, reason);
        }
    };
    let body = match body {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            reject("payload-too-large", Line::warning);
            return answer(StatusCode::PAYLOAD_TOO_LARGE, TOO_LARGE);
        }
        Err(_) => {
            reject("invalid-payload", Line::error);
            return answer(StatusCode::BAD_REQUEST, INVALID_PAYLOAD);
        }
    };
    let receipt = match admit(door.secret.as_ref(), headers, body, Timestamp::now()) {
        Ok(receipt) => receipt,
        Err(refusal @ Refusal::InvalidSignature) => {
            reject(refusal.reason(), Line::warning);
            return answer(refusal.status(), INVALID_SIGNATURE);
        }
        Err(refusal @ Refusal::InvalidPayload) => {
            reject(refusal.reason(), Line::error);
            return answer(refusal.status(), INVALID_PAYLOAD);
        }
    };
    let (ack, journalled) = oneshot::channel();
    if door.journal.send(JournalRequest::Receive { receipt, ack }).await.is_err() {
        return answer(StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE);
    }
    match journalled.await {
        Ok(Ok(_seq)) => answer(StatusCode::ACCEPTED, ACCEPTED),
        // Not accepted, so nothing is lost: GitHub records a failed delivery that can be
        // redelivered, and a client that honours `Retry-After` comes back when there is
        // room again (the journal writer logs the start and the end of a refusal).
        Ok(Err(Unaccepted::Full | Unaccepted::Unwritable)) | Err(_) => unavailable(),
    }
}

/// 503 with `Retry-After`: the delivery was not taken, and may be sent again.
fn unavailable() -> Response {
    let mut response = answer(StatusCode::SERVICE_UNAVAILABLE, UNAVAILABLE);
    response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    response
}

/// Whether `body` is UTF-8 text holding exactly one JSON object. Validates without
/// building a value.
pub fn is_json_object(body: &[u8]) -> bool {
    struct ObjectOnly;
    impl<'de> Visitor<'de> for ObjectOnly {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(())
        }
    }
    let Ok(text) = std::str::from_utf8(body) else { return false };
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_any(ObjectOnly).is_ok() && de.end().is_ok()
}

/// The address a receiver bound to, as `http://host:port{path}` (for operators and tests).
pub fn url(addr: SocketAddr, path: &str) -> String {
    format!("http://{addr}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_single_utf8_json_object_is_a_payload() {
        for good in [&b"{}"[..], b" {\"a\":[1,{\"b\":null}]} ", b"{\"\\u00e9\":\"\xc3\xa9\"}"] {
            assert!(is_json_object(good), "{:?}", String::from_utf8_lossy(good));
        }
        for bad in [
            &b""[..],
            b"[]",
            b"null",
            b"1",
            b"\"s\"",
            b"{",
            b"{} {}",
            b"{\"a\":\"\xff\"}",
            b"\xef\xbb\xbf{}",
        ] {
            assert!(!is_json_object(bad), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_signature_is_checked_before_the_body_and_a_missing_id_stays_missing() {
        let secret = Secret::from_value(Some("s")).unwrap();
        let headers = DeliveryHeaders { event: Some(""), delivery: Some(""), signature: None };
        let not_json = Bytes::from_static(b"not json");
        assert_eq!(
            admit(Some(&secret), headers, not_json.clone(), Timestamp::UNIX_EPOCH),
            Err(Refusal::InvalidSignature)
        );
        assert_eq!(
            admit(None, headers, not_json, Timestamp::UNIX_EPOCH),
            Err(Refusal::InvalidPayload)
        );
        let receipt =
            admit(None, headers, Bytes::from_static(b"{}"), Timestamp::UNIX_EPOCH).unwrap();
        assert_eq!(receipt.event, "unknown");
        assert_eq!(receipt.delivery_id, None, "an empty id is no id");
        assert!(!receipt.verified);
    }

    #[test]
    fn the_secret_never_prints() {
        let secret = Secret::from_value(Some("hunter2")).unwrap();
        assert!(!format!("{secret:?}").contains("hunter2"));
    }
}

//! The stand-in model over HTTP: the Messages API endpoints Claude Code calls and the
//! `/_stand-in/` scripting endpoints, on one axum router.
//!
//! API: `HEAD /` and `GET /` (Claude Code's connectivity check) answer 200;
//! `POST /v1/messages` (any query, Claude Code adds `?beta=true`) answers a message as
//! JSON or, with `"stream": true`, as server-sent events; `POST /v1/messages/count_tokens`
//! answers `{"input_tokens": n}`. Both need an `x-api-key` or an `authorization: Bearer`
//! (else 401 `authentication_error`) and a readable body (else 400
//! `invalid_request_error`, 413 `request_too_large` past 32 MiB); other paths answer 404
//! `not_found_error`. Errors have Anthropic's shape and every answer a `request-id`.
//!
//! Scripting (JSON, unauthenticated, not logged): `POST /_stand-in/rules` adds a
//! [`Rule`] (answers `{"index": n}`), `GET` lists them with their use, `DELETE` removes
//! them all; `GET /_stand-in/requests` is the request log, `DELETE` clears it.
//!
//! A request is logged when its answer is decided, before any scripted delay. A paced
//! stream is fed by a task of its own that ends with the stream or when the client goes.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use jiff::Timestamp;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use super::log::{ModelRequest, RequestKind, SelectedHeaders};
use super::model::{Outcome, StandInModel};
use super::request::{self, Endpoint, Invalid, Prompt};
use super::script::Rule;
use super::usage::{Usage, tokens};
use super::wire::{self, Ids, error_body, status_of};

/// The largest body read; the API's own limit for Messages requests.
const BODY_LIMIT: usize = 32 * 1024 * 1024;

/// The header Claude Code names its session in.
const SESSION_HEADER: &str = "x-claude-code-session-id";

/// What the server's requests share; std mutexes, never held across an `.await`.
#[derive(Debug)]
pub(super) struct Shared {
    pub ids: Ids,
    pub model: Mutex<StandInModel>,
    pub log: Mutex<Vec<ModelRequest>>,
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the data consistent, so a poisoned lock is still usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(super) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/_stand-in/rules", get(list_rules).post(add_rule).delete(clear_rules))
        .route("/_stand-in/requests", get(list_requests).delete(clear_requests))
        .fallback(api)
        .with_state(shared)
}

async fn add_rule(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let refused = |message: String| {
        (StatusCode::BAD_REQUEST, Json(json!({"error": message}))).into_response()
    };
    let rule: Rule = match serde_json::from_slice(&body) {
        Ok(rule) => rule,
        Err(err) => return refused(format!("not a rule: {err}")),
    };
    match lock(&shared.model).script.add(rule) {
        Ok(index) => (StatusCode::CREATED, Json(json!({"index": index}))).into_response(),
        Err(err) => refused(err.to_string()),
    }
}

async fn list_rules(State(shared): State<Arc<Shared>>) -> Response {
    Json(lock(&shared.model).script.rules()).into_response()
}

async fn clear_rules(State(shared): State<Arc<Shared>>) -> StatusCode {
    lock(&shared.model).script.clear();
    StatusCode::NO_CONTENT
}

async fn list_requests(State(shared): State<Arc<Shared>>) -> Response {
    Json(lock(&shared.log).clone()).into_response()
}

async fn clear_requests(State(shared): State<Arc<Shared>>) -> StatusCode {
    lock(&shared.log).clear();
    StatusCode::NO_CONTENT
}

/// One API request, answered and logged.
async fn api(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let mut record = ModelRequest {
        request_id: shared.ids.make("req"),
        at: Timestamp::now(),
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        kind: RequestKind::Other,
        side: None,
        model: None,
        conversation: None,
        stream: false,
        user_text: None,
        tool_results: Vec::new(),
        history: Vec::new(),
        skills: Vec::new(),
        tools: Vec::new(),
        status: 0,
        usage: None,
        answered_by: None,
        error: None,
        headers: selected_headers(&parts.headers),
    };
    let endpoint = match (&parts.method, parts.uri.path()) {
        (&Method::HEAD | &Method::GET, "/") => {
            return finish(&shared, record, StatusCode::OK, Body::empty(), None, &BTreeMap::new());
        }
        (&Method::POST, "/v1/messages") => Endpoint::Messages,
        (&Method::POST, "/v1/messages/count_tokens") => Endpoint::CountTokens,
        _ => {
            return refuse(
                &shared,
                record,
                "not_found_error",
                "The requested resource could not be found.",
            );
        }
    };
    // Past the limit, or a connection that broke mid-body (then nobody reads the answer).
    let Ok(bytes) = axum::body::to_bytes(body, BODY_LIMIT).await else {
        return refuse(
            &shared,
            record,
            "request_too_large",
            "Request exceeds the maximum allowed number of bytes.",
        );
    };
    let session = parts.headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok());
    let prompt = request::read(&bytes, endpoint, session);
    if let Ok(prompt) = &prompt {
        describe(&mut record, endpoint, prompt);
    }
    if !record.headers.api_key && !record.headers.bearer_token {
        let message = "x-api-key header or authorization: Bearer token is required";
        return refuse(&shared, record, "authentication_error", message);
    }
    let prompt = match prompt {
        Ok(prompt) => prompt,
        Err(Invalid(message)) => return refuse(&shared, record, "invalid_request_error", &message),
    };
    if endpoint == Endpoint::CountTokens {
        let input_tokens = tokens(prompt.size.whole);
        record.usage = Some(Usage { input_tokens, ..Usage::default() });
        let body = Body::from(json!({"input_tokens": input_tokens}).to_string());
        return finish(
            &shared,
            record,
            StatusCode::OK,
            body,
            Some("application/json"),
            &BTreeMap::new(),
        );
    }
    let decision = lock(&shared.model).decide(&prompt, &shared.ids, Timestamp::now());
    record.usage = decision.usage(prompt.stream);
    record.answered_by = Some(decision.by);
    let sse = "text/event-stream; charset=utf-8";
    let (status, body, content_type) = match decision.outcome {
        Outcome::Message(message) if prompt.stream => {
            (StatusCode::OK, stream(message.events(), decision.pace), sse)
        }
        Outcome::Message(message) => {
            (StatusCode::OK, Body::from(message.json().to_string()), "application/json")
        }
        Outcome::Broken { message, error_type, error } if prompt.stream => {
            let events = message.broken_events(&error_type, &error);
            record.error = Some(error_type);
            (StatusCode::OK, stream(events, decision.pace), sse)
        }
        Outcome::Broken { error_type, error, .. } => {
            let status = status_code(status_of(&error_type));
            (status, error_json(&mut record, error_type, &error), "application/json")
        }
        Outcome::Error { status, error_type, message } => {
            (status_code(status), error_json(&mut record, error_type, &message), "application/json")
        }
    };
    let response = finish(&shared, record, status, body, Some(content_type), &decision.headers);
    tokio::time::sleep(decision.delay).await;
    response
}

/// Fills in what the body said.
fn describe(record: &mut ModelRequest, endpoint: Endpoint, prompt: &Prompt) {
    record.kind = match (endpoint, prompt.side) {
        (Endpoint::CountTokens, _) => RequestKind::CountTokens,
        (Endpoint::Messages, None) => RequestKind::Turn,
        (Endpoint::Messages, Some(_)) => RequestKind::Side,
    };
    if endpoint == Endpoint::Messages {
        record.side = prompt.side;
        record.stream = prompt.stream;
        record.user_text = Some(prompt.user_text.clone());
        record.tool_results = prompt.tool_results.clone();
        record.history = prompt.history.clone();
        record.skills = prompt.skills.clone();
    }
    record.model = Some(prompt.model.clone());
    record.conversation = prompt.conversation.clone();
    record.tools = prompt.tools.clone();
}

/// The request headers the log keeps; credentials only as "one came".
fn selected_headers(headers: &HeaderMap) -> SelectedHeaders {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let bearer = text("authorization")
        .and_then(|value| value.strip_prefix("Bearer ").map(|token| !token.trim().is_empty()))
        .unwrap_or(false);
    SelectedHeaders {
        anthropic_version: text("anthropic-version"),
        anthropic_beta: text("anthropic-beta")
            .map(|betas| {
                betas.split(',').map(|b| b.trim().to_owned()).filter(|b| !b.is_empty()).collect()
            })
            .unwrap_or_default(),
        user_agent: text("user-agent"),
        api_key: text("x-api-key").is_some_and(|key| !key.trim().is_empty()),
        bearer_token: bearer,
    }
}

fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// An error body for `record`, which it marks with the error type.
fn error_json(record: &mut ModelRequest, error_type: String, message: &str) -> Body {
    let body = error_body(&error_type, message, Some(&record.request_id)).to_string();
    record.error = Some(error_type);
    Body::from(body)
}

/// An error of `error_type` (its usual status), logged.
fn refuse(shared: &Shared, mut record: ModelRequest, error_type: &str, message: &str) -> Response {
    let body = error_json(&mut record, error_type.to_owned(), message);
    let status = status_code(status_of(error_type));
    finish(shared, record, status, body, Some("application/json"), &BTreeMap::new())
}

/// The response, with `request-id` and any scripted headers; logs `record` with its status.
fn finish(
    shared: &Shared,
    mut record: ModelRequest,
    status: StatusCode,
    body: Body,
    content_type: Option<&'static str>,
    extra: &BTreeMap<String, String>,
) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if let Some(content_type) = content_type {
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    if let Ok(id) = HeaderValue::from_str(&record.request_id) {
        headers.insert("request-id", id);
    }
    for (name, value) in extra {
        // Scripted headers were checked when the rule was added.
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value))
        {
            headers.insert(name, value);
        }
    }
    record.status = status.as_u16();
    lock(&shared.log).push(record);
    response
}

/// A stream body of `events`, `pace` apart.
fn stream(events: Vec<(&'static str, Value)>, pace: Duration) -> Body {
    if pace.is_zero() {
        return Body::from(
            events.iter().map(|(name, data)| wire::sse(name, data)).collect::<String>(),
        );
    }
    let (tx, rx) = mpsc::channel::<String>(1);
    tokio::spawn(async move {
        for (i, (name, data)) in events.iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(pace).await;
            }
            if tx.send(wire::sse(name, data)).await.is_err() {
                return; // the client went away
            }
        }
    });
    Body::from_stream(ReceiverStream::new(rx).map(Ok::<_, Infallible>))
}

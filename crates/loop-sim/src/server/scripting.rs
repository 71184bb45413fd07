//! Scripting under `/_sim/`: actions, the world, the request log, faults, the webhook
//! target, deliveries, job logs and the rate limit, over HTTP for scripts that are not
//! Rust.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use crate::request_log::RequestRecord;
use crate::webhook::WebhookTarget;
use crate::world::{Action, WorldError};

use super::{Bucket, Fault, SimState, lock};

/// The `/_sim/` routes; the GitHub API is the fallback behind them.
pub(super) fn routes() -> Router<Arc<SimState>> {
    Router::new()
        .route("/_sim/actions", post(sim_action))
        .route("/_sim/world", get(sim_world))
        .route("/_sim/requests", get(sim_requests).delete(sim_clear_requests))
        .route("/_sim/faults", post(sim_fault))
        .route("/_sim/webhook", post(sim_set_webhook).delete(sim_clear_webhook))
        .route("/_sim/deliveries", get(sim_deliveries))
        .route("/_sim/rate-limit", post(sim_rate_limit))
        .route("/_sim/job-logs/{id}", get(sim_job_log))
}

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

//! `GET /api/v1/health`: `{status: "ok", version}` — what a probe (or the dashboard's
//! "is it up?") asks; never audited, never behind the token.

use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::{ApiState, HEALTH};

pub(super) fn routes() -> Router<ApiState> {
    Router::new().route(HEALTH, get(health))
}

async fn health() -> Json<Value> {
    Json(json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION") }))
}

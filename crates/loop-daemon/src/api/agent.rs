//! The agent's routes: `POST /api/v1/sessions/reply` (the operator answers a session from
//! the dashboard or a script) and `POST /api/v1/sessions/link-pr` (a pull request
//! recorded for a work item). The same calls as `the-loop reply` and `the-loop sessions
//! link-pr`, from [`crate::agent`]; refs travel in the body, never in the path.

use axum::routing::post;
use axum::{Json, Router};
use loop_core::WorkItemRef;
use loop_core::agent::Refusal;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, ApiState, Body};
use crate::agent::{self, AgentError, LinkError, Linked};
use crate::dispatcher::blocking;

pub(super) fn routes() -> Router<ApiState> {
    Router::new()
        .route("/api/v1/sessions/reply", post(reply))
        .route("/api/v1/sessions/link-pr", post(link_pr))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyRequest {
    #[serde(rename = "ref")]
    work_item: String,
    text: String,
    /// Who answers (shown in the pane and on GitHub); `operator` when empty.
    #[serde(default)]
    actor: String,
}

/// Pastes the reply: 404 no live session (or its pane is gone), 400 paused or empty.
async fn reply(
    axum::extract::State(state): axum::extract::State<ApiState>,
    Body(request): Body<ReplyRequest>,
) -> Result<Json<Value>, ApiError> {
    let item = parse_ref(&request.work_item)?;
    let actor = match request.actor.trim() {
        "" => "operator",
        actor => actor,
    };
    match state.dispatcher.reply(&item, &request.text, actor).await {
        Ok(replied) => Ok(Json(json!({
            "workItem": item.to_string(),
            "servedBy": replied.served.to_string(),
            "delivered": true,
            "commentUrl": replied.mirrored.as_ref().ok(),
            "mirrorError": replied.mirrored.as_ref().err(),
        }))),
        Err(err) => Err(match &err {
            AgentError::Refused(Refusal::NoSession { .. }) | AgentError::PaneGone { .. } => {
                ApiError::not_found(err.to_string())
            }
            AgentError::Refused(_) => ApiError::bad_request(err.to_string()),
            _ => ApiError::internal(err.to_string()),
        }),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LinkRequest {
    #[serde(rename = "ref")]
    work_item: String,
    /// A number, `#n`, a ref or a URL.
    pull_request: Value,
}

/// Records the pull request: 404 no session record, 400 a malformed pull request or a
/// self-link.
async fn link_pr(
    axum::extract::State(state): axum::extract::State<ApiState>,
    Body(request): Body<LinkRequest>,
) -> Result<Json<Value>, ApiError> {
    let item = parse_ref(&request.work_item)?;
    let pull_request = match request.pull_request {
        Value::Number(number) => number.to_string(),
        Value::String(text) => text,
        other => {
            return Err(ApiError::bad_request(format!(
                "`pullRequest` must be a number or a string, not {other}"
            )));
        }
    };
    let (store, config) = (state.store.clone(), state.dispatcher.config());
    let linked =
        blocking(move || agent::link_pull_request(&store, &config, &item, &pull_request)).await;
    match linked {
        Ok(Linked::Linked { work_item, pull_request }) => Ok(Json(json!({
            "workItem": work_item.to_string(), "pullRequest": pull_request.to_string(), "linked": true,
        }))),
        Ok(Linked::Already { work_item, pull_request }) => Ok(Json(json!({
            "workItem": work_item.to_string(), "pullRequest": pull_request.to_string(), "linked": false,
        }))),
        Err(err @ LinkError::NoSession { .. }) => Err(ApiError::not_found(err.to_string())),
        Err(err) if err.is_bad_request() => Err(ApiError::bad_request(err.to_string())),
        Err(err) => Err(ApiError::internal(err.to_string())),
    }
}

fn parse_ref(text: &str) -> Result<WorkItemRef, ApiError> {
    text.trim()
        .parse()
        .map_err(|err: loop_core::refs::RefError| ApiError::bad_request(err.to_string()))
}

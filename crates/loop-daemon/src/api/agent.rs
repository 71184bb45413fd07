//! The agent's routes: `POST /api/v1/sessions/reply` (the operator answers a session from
//! the dashboard or a script) and `POST /api/v1/sessions/link-pr` (a pull request
//! recorded for a work item). The same calls as `the-loop reply` and `the-loop sessions
//! link-pr`, from [`crate::agent`]; refs travel in the body, never in the path.

use axum::Json;
use loop_core::agent::Refusal;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::Detail;
use super::{ApiError, ApiState, Body, work_item};
use crate::agent::{self, AgentError, LinkError, Linked};
use crate::dispatcher::blocking;

pub(super) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new().routes(routes!(reply)).routes(routes!(link_pr))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct ReplyRequest {
    #[serde(rename = "ref")]
    #[schema(value_type = super::openapi::WorkItemRef)]
    work_item: String,
    /// What the operator answers (not blank).
    #[schema(pattern = "\\S")]
    text: String,
    /// Who answers (shown in the pane and on GitHub); `operator` when empty.
    #[serde(default)]
    actor: String,
}

/// Pastes the reply: 404 no live session (or its pane is gone), 400 paused or empty.
#[utoipa::path(post, path = "/api/v1/sessions/reply", tag = "sessions", request_body = ReplyRequest, responses(
    (status = 200, description = "`{workItem, servedBy, delivered, commentUrl, mirrorError}`", body = Value),
    (status = 400, description = "A malformed ref, a paused session or an empty text", body = Detail),
    (status = 404, description = "No live session, or its pane is gone", body = Detail),
    (status = 500, description = "The reply could not be delivered", body = Detail)))]
async fn reply(
    axum::extract::State(state): axum::extract::State<ApiState>,
    Body(request): Body<ReplyRequest>,
) -> Result<Json<Value>, ApiError> {
    let item = work_item(&request.work_item)?;
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

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LinkRequest {
    #[serde(rename = "ref")]
    #[schema(value_type = super::openapi::WorkItemRef)]
    work_item: String,
    #[schema(value_type = super::openapi::PullRequest)]
    pull_request: PullRequest,
}

/// A pull request as `link-pr` takes it: its number, or `#N`, a ref or a URL.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PullRequest {
    /// JSON has one number type: `12` and `12.0` are the same number.
    Number(serde_json::Number),
    Text(String),
}

/// Records the pull request: 404 no session record, 400 a malformed pull request or a
/// self-link.
/// `number` as a whole number ≥ 0 (`12.0` is `12`), if it is one.
pub(super) fn whole(number: &serde_json::Number) -> Option<u64> {
    number.as_u64().or_else(|| {
        let float = number.as_f64()?;
        // 2^53: every whole number below it is exact as a float.
        (float.fract() == 0.0 && (0.0..9_007_199_254_740_992.0).contains(&float))
            .then_some(float as u64)
    })
}

#[utoipa::path(post, path = "/api/v1/sessions/link-pr", tag = "sessions", request_body = LinkRequest, responses(
    (status = 200, description = "`{workItem, pullRequest, linked}`", body = Value),
    (status = 400, description = "A malformed ref or pull request, or a self-link", body = Detail),
    (status = 404, description = "No session record", body = Detail),
    (status = 500, description = "The record could not be written", body = Detail)))]
async fn link_pr(
    axum::extract::State(state): axum::extract::State<ApiState>,
    Body(request): Body<LinkRequest>,
) -> Result<Json<Value>, ApiError> {
    let item = work_item(&request.work_item)?;
    let pull_request = match request.pull_request {
        PullRequest::Number(number) => whole(&number).map(|n| n.to_string()).ok_or_else(|| {
            ApiError::bad_request(format!("`pullRequest`: {number} is not a pull-request number"))
        })?,
        PullRequest::Text(text) => text,
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

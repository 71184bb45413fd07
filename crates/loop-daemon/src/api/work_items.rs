//! Work items: `GET /api/v1/work-items` (every portable record, sorted by ref, as
//! stored), `GET /api/v1/work-items/one?ref=` and `GET /api/v1/attention` — the "Needs
//! you" list, derived from the records and the event log, never stored (reference §2.4):
//!
//! 1. `session-paused`: every session whose own endpoint is paused;
//! 2. `armed-without-session`: an item whose recorded command is `start` or `resume`
//!    with no live session here;
//! 3. `awaiting-input`: every live session (the item's or a pull request's) holding an
//!    open question of the agent's (`the-loop ask`) no answer has reached yet;
//! 4. `recent-error`: the last [`RECENT_ERRORS`] error-level lines.

use std::sync::Arc;

use axum::Json;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use loop_core::control::Command;
use loop_core::record::{Control, EndpointStatus, LocalRecord};
use loop_store::StoreError;
use loop_store::event_log::read::{EventRecord, read_all};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::Detail;
use super::{ApiError, ApiState, Params, read, work_item};

/// How many of the newest error lines "Needs you" shows.
pub const RECENT_ERRORS: usize = 20;

pub(super) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new().routes(routes!(list)).routes(routes!(one)).routes(routes!(attention))
}

/// `?ref=`: the work item a route is about.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct RefQuery {
    #[serde(rename = "ref")]
    #[param(value_type = super::openapi::WorkItemRef)]
    pub(super) work_item: String,
}

/// Every portable record as stored, sorted by ref (the store's listing: only records
/// changed since the last request are read again), each with a session here carrying the
/// `graph` section its state file gives.
#[utoipa::path(get, path = "/api/v1/work-items", tag = "work items", responses(
    (status = 200, description = "The records", body = Vec<Value>),
    (status = 500, description = "The state could not be read", body = Detail)))]
async fn list(state: axum::extract::State<ApiState>) -> Result<Response, ApiError> {
    let (store, spec_dir) = (state.store.clone(), graphs(&state));
    let listing = read(move || store.list_portable(spec_dir.as_deref())).await?;
    Ok(([(CONTENT_TYPE, "application/json")], listing.json.clone()).into_response())
}

/// Where the listing finds each item's graph: `routing.graph.specDir` when the graph is
/// driven (the same for both listings, so they share one cached answer).
fn graphs(state: &ApiState) -> Option<std::path::PathBuf> {
    let config = state.config.current();
    let graph = &config.routing.graph;
    graph.enabled.then(|| graph.spec_dir.clone())
}

/// One portable record.
#[utoipa::path(get, path = "/api/v1/work-items/one", tag = "work items", params(RefQuery), responses(
    (status = 200, description = "The record", body = Value),
    (status = 400, description = "A malformed ref", body = Detail),
    (status = 404, description = "No record", body = Detail),
    (status = 500, description = "The state could not be read", body = Detail)))]
async fn one(
    state: axum::extract::State<ApiState>,
    Params(query): Params<RefQuery>,
) -> Result<Json<Value>, ApiError> {
    let item = work_item(&query.work_item)?;
    let store = state.store.clone();
    let found = read({
        let item = item.clone();
        move || store.load_portable_record(&item)
    })
    .await?;
    found
        .map(|record| Json(Value::Object(record)))
        .ok_or_else(|| ApiError::not_found(format!("{item} has no portable record")))
}

/// The "Needs you" rows, derived on each request.
#[utoipa::path(get, path = "/api/v1/attention", tag = "work items", responses(
    (status = 200, description = "`[{workItem, kind, detail}]`", body = Vec<Attention>),
    (status = 500, description = "The state could not be read", body = Detail)))]
async fn attention(
    state: axum::extract::State<ApiState>,
) -> Result<Json<Vec<Attention>>, ApiError> {
    let (store, spec_dir) = (state.store.clone(), graphs(&state));
    let (sessions, listing, events) = read(move || {
        let sessions = store.list_local_records()?;
        let listing = store.list_portable(spec_dir.as_deref())?;
        let events = match store.events().path() {
            Some(path) => read_all(path)?,
            None => Vec::new(),
        };
        Ok::<_, StoreError>((sessions, listing, events))
    })
    .await?;
    let agents = state.dispatcher.agents().all();
    Ok(Json(needs_you(&sessions, &listing.controls, &events, &agents)))
}

/// One "Needs you" row.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct Attention {
    /// The work item (empty for an error line that names none).
    work_item: String,
    /// `session-paused`, `armed-without-session`, `awaiting-input`, `agent-waiting` or
    /// `recent-error`.
    kind: &'static str,
    /// What needs the operator, in a sentence.
    detail: String,
}

/// The "Needs you" rows, in the rules' order.
fn needs_you(
    sessions: &[Arc<LocalRecord>],
    controls: &[(loop_core::WorkItemRef, Control)],
    events: &[EventRecord],
    agents: &std::collections::HashMap<String, loop_core::agent_state::Tracked>,
) -> Vec<Attention> {
    let row = |item: &str, kind: &'static str, detail: String| Attention {
        work_item: item.to_owned(),
        kind,
        detail,
    };
    let mut rows = Vec::new();
    for record in sessions {
        if record.own_endpoint().is_some_and(|e| e.status == EndpointStatus::Paused) {
            let last = controls
                .iter()
                .find(|(item, _)| *item == record.work_item)
                .map_or("none", |(_, control)| control.command.name());
            let detail = format!("session paused (last control: {last})");
            rows.push(row(&record.work_item.to_string(), "session-paused", detail));
        }
    }
    for (item, control) in controls {
        let armed = matches!(control.command, Command::Start | Command::Resume);
        let live = sessions
            .iter()
            .any(|r| r.work_item == *item && loop_sessions::registry::rules::is_live(r));
        if armed && !live {
            let detail = format!(
                "`{}` recorded, but no session runs on this machine",
                control.command.name()
            );
            rows.push(row(&item.to_string(), "armed-without-session", detail));
        }
    }
    for record in sessions {
        for (served, endpoint) in &record.endpoints {
            if let Some(open) = endpoint.awaiting_input.as_ref().filter(|_| endpoint.is_live()) {
                rows.push(row(&served.to_string(), "awaiting-input", open.question.clone()));
            }
            let agent = agents.get(&endpoint.tmux_target).filter(|_| endpoint.is_live());
            if let Some(agent) = agent.filter(|a| a.state.needs_attention()) {
                rows.push(row(&served.to_string(), "agent-waiting", agent.in_words()));
            }
        }
    }
    let errors: Vec<&EventRecord> = events.iter().filter(|e| e.level() == "error").collect();
    for error in &errors[errors.len().saturating_sub(RECENT_ERRORS)..] {
        let item = error.work_items().next().unwrap_or("");
        rows.push(row(item, "recent-error", format!("`{}` at {}", error.event(), error.ts())));
    }
    rows
}

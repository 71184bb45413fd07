//! Sessions: the reads (`GET /api/v1/sessions[?status=]`, `/sessions/one?ref=`,
//! `/sessions/transcript?ref=&tail=`) and the operator's levers (`POST
//! /api/v1/sessions/control`, `/sessions/close`) through the dispatcher's operator
//! verbs — the same decisions, effects, event lines and keyword comments as `the-loop
//! sessions …`.
//!
//! A session row is the reference's: the own endpoint's handles flat (`harness`,
//! `harnessSessionId`, `cwd`, `status`, `createdAt`, `lastEventAt`, `tmuxTarget`,
//! `recentDeliveries`), `ref`, `workItem {ref, provider, owner, repo, number}`, `url`,
//! `pullRequests[]` (each PR endpoint, same shape), `control` (the portable record's, or
//! null) and `attach`, the command that attaches a terminal to it — with the tmux server
//! the service runs sessions on (`-S <socket>`, `-f <config>`), ready to paste.
//!
//! A transcript is read only for Claude Code, and only from a regular file
//! `<projects root>/<escaped cwd>/<session id>.jsonl` whose resolved path is inside the
//! projects root, the id made of letters, digits, `-` and `_`: a record cannot make the
//! service read anything else.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use loop_core::WorkItemRef;
use loop_core::control::Command;
use loop_core::login::Login;
use loop_core::record::{Control, Endpoint, EndpointStatus, LocalRecord};
use loop_sessions::harness::claude_project_dir_name;
use loop_sessions::tmux::Tmux;
use loop_store::StoreError;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::Detail;
use super::work_items::RefQuery;
use super::{ApiError, ApiState, Body, Params, read, work_item};
use crate::operator::Surface;

pub(super) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(one))
        .routes(routes!(transcript))
        .routes(routes!(control))
        .routes(routes!(close))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only the sessions whose own endpoint has this status.
    #[param(value_type = Option<String>, pattern = "^(active|paused|closed)$")]
    status: Option<EndpointStatus>,
}

/// The session rows (the reference's registry rows).
#[utoipa::path(get, path = "/api/v1/sessions", tag = "sessions", params(ListQuery), responses(
    (status = 200, description = "The rows", body = Vec<Value>),
    (status = 500, description = "The state could not be read", body = Detail)))]

async fn list(
    State(state): State<ApiState>,
    Params(query): Params<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let store = state.store.clone();
    let tmux = Arc::clone(state.dispatcher.tmux());
    let agents = state.dispatcher.agents().all();
    let rows = read(move || {
        let mut rows = Vec::new();
        for record in store.list_local_records()? {
            let own = record.own_endpoint().map(|e| e.status);
            if query.status.is_none_or(|wanted| own == Some(wanted)) {
                let control = store.read_section::<Control>(&record.work_item)?.into_value();
                rows.push(row(&record, control.as_ref(), &tmux, &agents));
            }
        }
        Ok::<_, StoreError>(rows)
    })
    .await?;
    Ok(Json(Value::Array(rows)))
}

/// One session row.
#[utoipa::path(get, path = "/api/v1/sessions/one", tag = "sessions", params(RefQuery), responses(
    (status = 200, description = "The row", body = Value),
    (status = 400, description = "A malformed ref", body = Detail),
    (status = 404, description = "No session on this machine", body = Detail),
    (status = 500, description = "The state could not be read", body = Detail)))]
async fn one(
    State(state): State<ApiState>,
    Params(query): Params<RefQuery>,
) -> Result<Json<Value>, ApiError> {
    let item = work_item(&query.work_item)?;
    let store = state.store.clone();
    let tmux = Arc::clone(state.dispatcher.tmux());
    let agents = state.dispatcher.agents().all();
    let found = read({
        let item = item.clone();
        move || {
            let Some(record) = store.load_local_record(&item)? else { return Ok(None) };
            let control = store.read_section::<Control>(&item)?.into_value();
            Ok::<_, StoreError>(Some(row(&record, control.as_ref(), &tmux, &agents)))
        }
    })
    .await?;
    found.map(Json).ok_or_else(|| no_session(&item))
}

fn no_session(item: &WorkItemRef) -> ApiError {
    ApiError::not_found(format!("{item} has no session on this machine"))
}

/// Every watched agent's state, by tmux session.
type Agents = std::collections::HashMap<String, loop_core::agent_state::Tracked>;

/// A session record as the reference's registry row.
fn row(record: &LocalRecord, control: Option<&Control>, tmux: &Tmux, agents: &Agents) -> Value {
    let mut row = endpoint_row(&record.work_item, record.own_endpoint(), tmux, agents);
    let pull_requests: Vec<Value> = record
        .endpoints
        .iter()
        .filter(|(served, _)| **served != record.work_item)
        .map(|(pr, endpoint)| endpoint_row(pr, Some(endpoint), tmux, agents))
        .collect();
    if let Value::Object(map) = &mut row {
        map.insert("pullRequests".to_owned(), Value::Array(pull_requests));
        map.insert("control".to_owned(), json!(control));
    }
    row
}

/// The handles of the session serving `served` (none: `null` handles), and its agent's
/// state while it is live and watched (docs/agent-states.md).
fn endpoint_row(
    served: &WorkItemRef,
    endpoint: Option<&Endpoint>,
    tmux: &Tmux,
    agents: &Agents,
) -> Value {
    use loop_core::agent_state::AgentState;
    let agent = endpoint.filter(|e| e.is_live()).and_then(|e| agents.get(&e.tmux_target));
    let permission = agent.and_then(|a| match &a.state {
        AgentState::NeedsPermission(asked) => {
            Some(json!({"tool": asked.tool, "input": asked.input}))
        }
        _ => None,
    });
    let limit = agent.and_then(|a| match &a.state {
        AgentState::Limited { until, notice } => Some(json!({"until": until, "notice": notice})),
        _ => None,
    });
    let repo = served.repo();
    let attach = endpoint
        .filter(|e| !e.tmux_target.is_empty())
        .and_then(|e| tmux.attach_command(&e.tmux_target, false).ok())
        .map(|argv| loop_sessions::shell::line(&argv));
    json!({
        "ref": served.to_string(),
        "workItem": {
            "ref": served.to_string(),
            "provider": "github",
            "owner": repo.owner(),
            "repo": repo.name(),
            "number": served.number(),
        },
        "url": served.url(),
        "harness": endpoint.map(|e| &e.harness),
        "harnessSessionId": endpoint.and_then(|e| e.harness_session_id.as_ref()),
        "cwd": endpoint.map(|e| &e.cwd),
        "status": endpoint.map(|e| e.status),
        "createdAt": endpoint.map(|e| e.created_at),
        "lastEventAt": endpoint.and_then(|e| e.last_event_at),
        "tmuxTarget": endpoint.map(|e| &e.tmux_target),
        "recentDeliveries": endpoint.map(|e| &e.recent_deliveries),
        "attach": attach,
        "agentState": agent.map(|a| a.state.name()),
        "agentStateSince": agent.map(|a| a.since),
        "permission": permission,
        "limit": limit,
    })
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
struct TranscriptQuery {
    #[serde(rename = "ref")]
    #[param(value_type = super::openapi::WorkItemRef)]
    work_item: String,
    /// The last lines to return; 0: all.
    #[serde(default = "default_tail")]
    tail: usize,
}

fn default_tail() -> usize {
    200
}

/// A Claude Code session's transcript.
#[utoipa::path(get, path = "/api/v1/sessions/transcript", tag = "sessions", params(TranscriptQuery), responses(
    (status = 200, description = "`{workItem, harness, harnessSessionId, path, totalLines, truncated, entries[]}`", body = Value),
    (status = 400, description = "A malformed ref", body = Detail),
    (status = 404, description = "No session, not Claude Code, no conversation id or no file", body = Detail),
    (status = 500, description = "The state could not be read", body = Detail)))]
async fn transcript(
    State(state): State<ApiState>,
    Params(query): Params<TranscriptQuery>,
) -> Result<Json<Value>, ApiError> {
    let item = work_item(&query.work_item)?;
    let store = state.store.clone();
    let projects = state.claude_projects.clone();
    let found = read({
        let item = item.clone();
        move || store.load_local_record(&item)
    })
    .await?;
    let record = found.ok_or_else(|| no_session(&item))?;
    let (endpoint, path) = transcript_file(&projects, &record, &item)?;
    let (path, lines) = tokio::task::spawn_blocking(move || read_transcript(&path))
        .await
        .map_err(|_| ApiError::internal("the transcript reader stopped"))??;
    let total = lines.len();
    let keep = if query.tail == 0 { total } else { query.tail.min(total) };
    let entries: Vec<Value> = lines[total - keep..]
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| json!({"malformed": line})))
        .collect();
    Ok(Json(json!({
        "workItem": item.to_string(),
        "harness": endpoint.harness,
        "harnessSessionId": endpoint.harness_session_id,
        "path": path,
        "totalLines": total,
        "truncated": keep < total,
        "entries": entries,
    })))
}

/// The session serving `item` in `record` (the pull request's own, else the item's) and
/// where its Claude Code transcript would be, `<projects>/<escaped cwd>/<id>.jsonl`: 404
/// when it runs another harness or has no conversation id, or the id is not one a
/// transcript is named by (letters, digits, `-`, `_`). Not read: see [`read_transcript`].
pub(super) fn transcript_file<'r>(
    projects: &Path,
    record: &'r LocalRecord,
    item: &WorkItemRef,
) -> Result<(&'r Endpoint, TranscriptFile), ApiError> {
    let endpoint =
        record.endpoints.get(item).or(record.own_endpoint()).ok_or_else(|| no_session(item))?;
    if endpoint.harness != "claude" {
        return Err(ApiError::not_found(format!(
            "{item}'s session runs `{}`: only Claude Code's transcripts can be read",
            endpoint.harness
        )));
    }
    let id = endpoint.harness_session_id.as_deref().ok_or_else(|| {
        ApiError::not_found(format!("{item}'s session has not reported its conversation id yet"))
    })?;
    let safe_id =
        !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !safe_id {
        return Err(ApiError::not_found(format!(
            "`{id}` is not a conversation id a transcript is named by"
        )));
    }
    let path = projects.join(claude_project_dir_name(&endpoint.cwd)).join(format!("{id}.jsonl"));
    Ok((endpoint, TranscriptFile { projects: projects.to_owned(), path }))
}

/// A transcript's path, not yet proven to be inside the projects root.
#[derive(Debug, Clone)]
pub(super) struct TranscriptFile {
    projects: PathBuf,
    path: PathBuf,
}

impl TranscriptFile {
    /// The file, resolved, if it is a regular file inside the projects root (a link out
    /// of it, or a directory, is not).
    pub(super) fn resolve(&self) -> Option<PathBuf> {
        let root = self.projects.canonicalize().ok()?;
        let resolved = self.path.canonicalize().ok()?;
        let regular = std::fs::metadata(&resolved).is_ok_and(|m| m.is_file());
        (resolved.starts_with(&root) && regular).then_some(resolved)
    }
}

/// The non-blank lines of `file`, if it resolves (see the module docs).
fn read_transcript(file: &TranscriptFile) -> Result<(PathBuf, Vec<String>), ApiError> {
    let gone = || {
        ApiError::not_found(format!(
            "no transcript `{}` under `{}`",
            file.path.display(),
            file.projects.display()
        ))
    };
    let resolved = file.resolve().ok_or_else(gone)?;
    let text = std::fs::read(&resolved).map_err(|_| gone())?;
    let lines = String::from_utf8_lossy(&text)
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(str::to_owned)
        .collect();
    Ok((resolved, lines))
}

/// `POST /api/v1/sessions/control`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct ControlRequest {
    #[serde(rename = "ref")]
    #[schema(value_type = super::openapi::WorkItemRef)]
    work_item: String,
    #[schema(pattern = "^(start|pause|resume|stop|cleanup|approve|deny)$")]
    verb: String,
    /// A deny's reason, given to the agent.
    #[serde(default)]
    reason: Option<String>,
    /// Post the command's keyword back to the work item, as the CLI does.
    #[serde(default = "yes")]
    comment: bool,
    /// Who asks, recorded as the command's actor (never used to authorize).
    #[serde(default)]
    #[schema(value_type = Option<super::openapi::Actor>)]
    actor: Option<String>,
}

fn yes() -> bool {
    true
}

/// The operator verbs the control route takes: the session's, and the answers to its
/// agent's permission prompt (docs/agent-states.md).
const VERBS: [Command; 7] = [
    Command::Start,
    Command::Pause,
    Command::Resume,
    Command::Stop,
    Command::Cleanup,
    Command::Approve,
    Command::Deny,
];

/// Runs an operator verb, as `the-loop sessions <verb>` does.
#[utoipa::path(post, path = "/api/v1/sessions/control", tag = "sessions", request_body = ControlRequest, responses(
    (status = 200, description = "`{verb, workItem, effect, exitCode, messages[{stream, text}], output}`", body = Value),
    (status = 400, description = "A malformed ref, an unknown verb or actor", body = Detail)))]
async fn control(
    State(state): State<ApiState>,
    Body(request): Body<ControlRequest>,
) -> Result<Json<Value>, ApiError> {
    let item = work_item(&request.work_item)?;
    let command = VERBS.into_iter().find(|c| c.name() == request.verb).ok_or_else(|| {
        ApiError::bad_request(format!(
            "`{}` is not a session verb: expected one of start, pause, resume, stop, cleanup, \
             approve, deny",
            request.verb
        ))
    })?;
    let operator = operator(request.actor.as_deref())?;
    let dispatcher = &state.dispatcher;
    let reason = request.reason.as_deref().filter(|_| command == Command::Deny);
    let issued =
        dispatcher.issue(&item, command, &operator, Vec::new(), reason, Surface::Api).await;
    let (done, said) = issued.report(command, &item);
    let mut messages = vec![json!({"stream": if done { "out" } else { "err" }, "text": said})];
    let executed = matches!(issued, crate::operator::Issued::Executed { .. });
    if request.comment
        && executed
        && let Err(not_posted) =
            dispatcher.post_keyword(&item, command, &[], &operator, Surface::Api).await
    {
        messages.push(json!({"stream": "err", "text": format!("warning: {not_posted}")}));
    }
    let output: Vec<&str> = messages.iter().filter_map(|m| m["text"].as_str()).collect();
    let output = output.join("\n");
    Ok(Json(json!({
        "verb": command.name(),
        "workItem": item.to_string(),
        "effect": issued.effect(),
        "exitCode": if done { 0 } else { 1 },
        "messages": messages,
        "output": output,
    })))
}

/// The actor recorded for a command from the control plane: the body's, else
/// `operator`.
pub(super) fn operator(actor: Option<&str>) -> Result<Login, ApiError> {
    actor
        .unwrap_or("operator")
        .parse()
        .map_err(|err| ApiError::bad_request(format!("`actor`: {err}")))
}

/// `POST /api/v1/sessions/close`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CloseRequest {
    #[serde(rename = "ref")]
    #[schema(value_type = super::openapi::WorkItemRef)]
    work_item: String,
    /// Keep (or kill) the tmux session this once; absent: `routing.tmux`'s retention.
    #[serde(default)]
    keep_tmux: Option<bool>,
}

/// Closes a live session the way a merge does.
#[utoipa::path(post, path = "/api/v1/sessions/close", tag = "sessions", request_body = CloseRequest, responses(
    (status = 200, description = "`{workItem, closed, exitCode, messages}`", body = Value),
    (status = 400, description = "A malformed ref", body = Detail)))]
async fn close(
    State(state): State<ApiState>,
    Body(request): Body<CloseRequest>,
) -> Result<Json<Value>, ApiError> {
    let item = work_item(&request.work_item)?;
    let closed = state.dispatcher.close_for_operator(&item, request.keep_tmux).await;
    let (stream, text) = if closed {
        ("out", format!("{item}: closed"))
    } else {
        ("err", format!("{item} has no live session to close"))
    };
    Ok(Json(json!({
        "workItem": item.to_string(),
        "closed": closed,
        "exitCode": if closed { 0 } else { 1 },
        "messages": [{"stream": stream, "text": text}],
    })))
}

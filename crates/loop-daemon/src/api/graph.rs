//! The process graph's routes (reference §1.4, docs/process-graph.md): `GET
//! /api/v1/graph` (a loop's shape), `POST /api/v1/graph/check` (where an item stands, a
//! pure read), `POST /api/v1/graph/complete` (the session's claim), `POST
//! /api/v1/graph/advance` (the current gate judged once), and the operator's overrides
//! `POST /api/v1/graph/force` and `/graph/skip`. The verbs are the dispatcher's —
//! `graph_view`, `graph_complete`, `graph_judge`, `graph_force`, `graph_skip`, what
//! `the-loop graph status|check|complete|force|skip` call — under the state file's lock
//! and behind the same gates (the graph is enabled, the item armed, the checkout provably
//! its repository, its spec folder there).
//!
//! The graph is addressed as the reference's dashboard does: `repo`, the checkout on
//! this machine (a session's `cwd`), `workItem` (`issue-<N>`, or a ref), and for a pull
//! request's inner loop `pr` (and `prRepo` when it is in another repository). `ref`
//! names the work item when `workItem` is an id and no session here has its checkout at
//! `repo`. Refusals: `prRepo` without `pr`, a `repo` that is not a directory (`check`
//! answers `repoResolved: false` instead), a malformed ref or id are 400; no graph
//! driven there is 404.

use std::path::{Path, PathBuf};

use axum::Json;
use axum::extract::State;
use loop_core::WorkItemRef;
use loop_core::graph::LoopName;
use loop_core::graph::context::{self, NodeCheck};
use loop_core::graph::model::SessionUse;
use loop_core::graph::runtime::{Refused, Step};
use loop_core::graph::state::{Parked, WorkItemState, inner_loop_dir, spec_id};
use loop_core::hint::Hint as _;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::Detail;
use super::{ApiError, ApiState, Body, Params, read, work_item};
use crate::dispatcher::{Claimed, GraphTarget, InnerLoop};

/// The [`Address`] a request body names: every graph verb's body carries the same five
/// fields.
macro_rules! address_of {
    ($request:expr) => {
        Address {
            repo: &$request.repo,
            work_item: &$request.work_item,
            reference: $request.reference.as_deref().unwrap_or_default(),
            pr: $request.pr.as_ref(),
            pr_repo: $request.pr_repo.as_deref().unwrap_or_default(),
        }
    };
}

pub(super) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(show))
        .routes(routes!(check))
        .routes(routes!(complete))
        .routes(routes!(advance))
        .routes(routes!(force))
        .routes(routes!(skip))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
struct ShowQuery {
    /// A checkout on the service's machine.
    #[param(min_length = 1)]
    repo: String,
    /// A pull request's number: its inner loop's shape.
    #[param(minimum = 1, maximum = 9_007_199_254_740_991_f64)]
    pr: Option<u64>,
    /// `owner/repo` of that pull request, when not the work item's repository.
    #[serde(default)]
    #[param(value_type = Option<super::openapi::PrRepository>)]
    pr_repo: String,
}

/// A loop as shipped.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct Shape {
    version: u32,
    name: String,
    start: String,
    /// Where the work items' spec folders are in `repo`.
    spec_root: String,
    nodes: Vec<NodeShape>,
    edges: Vec<EdgeShape>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct NodeShape {
    id: String,
    /// The `loop:<phase>` label's suffix; none writes no label.
    phase: Option<String>,
    /// `agent`, `human` or `code`.
    actor: &'static str,
    /// Artifacts, each `name` or `name|other-name`.
    produces: Vec<String>,
    command: Option<String>,
    /// Model routing: not part of this version's loops (always null).
    stage: Option<String>,
    /// `new` or `inherit`.
    session: &'static str,
    required: bool,
    optional: bool,
    skippable: bool,
    opt_in: bool,
    description: Option<String>,
    max_attempts: u32,
    terminal: bool,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
struct EdgeShape {
    from: String,
    to: String,
    on: String,
}

/// The outer loop's shape (`pr`: the pull-request loop's).
#[utoipa::path(get, path = "/api/v1/graph", tag = "graph", params(ShowQuery), responses(
    (status = 200, description = "The loop", body = Shape),
    (status = 400, description = "`prRepo` without `pr`, or `repo` is not a directory", body = Detail)))]
async fn show(
    State(state): State<ApiState>,
    Params(query): Params<ShowQuery>,
) -> Result<Json<Shape>, ApiError> {
    pull_request(query.pr.map(serde_json::Number::from).as_ref(), &query.pr_repo)?;
    let repo = checkout(&query.repo).await?;
    let graph = match query.pr {
        Some(_) => LoopName::PullRequest,
        None => LoopName::WorkItem,
    }
    .graph();
    let spec_root = repo.join(&state.config.current().routing.graph.spec_dir);
    Ok(Json(Shape {
        version: loop_core::graph::state::VERSION,
        name: graph.name.clone(),
        start: graph.start.clone(),
        spec_root: spec_root.display().to_string(),
        nodes: graph
            .nodes
            .iter()
            .map(|node| NodeShape {
                id: node.id.clone(),
                phase: node.phase.clone(),
                actor: node.actor.as_str(),
                produces: node.produces.iter().map(ToString::to_string).collect(),
                command: node.command.clone(),
                stage: None,
                session: match node.session {
                    SessionUse::New => "new",
                    SessionUse::Inherit => "inherit",
                },
                required: node.required,
                optional: node.optional,
                skippable: node.skippable,
                opt_in: node.opt_in,
                description: node.description.clone(),
                max_attempts: node.max_attempts,
                terminal: node.terminal,
            })
            .collect(),
        edges: graph
            .edges
            .iter()
            .map(|e| EdgeShape { from: e.from.clone(), to: e.to.clone(), on: e.on.clone() })
            .collect(),
    }))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CheckRequest {
    /// The checkout on the service's machine.
    #[schema(min_length = 1)]
    repo: String,
    #[schema(value_type = super::openapi::SpecId)]
    work_item: String,
    /// Re-evaluating every gate from the artifacts is not in this version: `true` is a 400.
    #[serde(default)]
    recompute: bool,
    #[schema(value_type = Option<u64>, minimum = 1, maximum = 9_007_199_254_740_991_f64)]
    pr: Option<serde_json::Number>,
    #[serde(default)]
    #[schema(value_type = Option<super::openapi::PrRepository>)]
    pr_repo: Option<String>,
    /// The work item's ref, when `workItem` is an id.
    #[serde(default, rename = "ref")]
    #[schema(value_type = Option<super::openapi::RefOrNone>)]
    reference: Option<String>,
}

/// Where the item stands.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct CheckAnswer {
    work_item: String,
    /// `""`: never entered.
    current_node: String,
    /// Nothing unsatisfied up to the current node.
    ok: bool,
    parked: Option<ParkedRow>,
    nodes: Vec<NodeRow>,
    /// `false` only when `repo` is not a directory (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    repo_resolved: Option<bool>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
struct ParkedRow {
    node: String,
    reason: String,
    since: String,
}

impl From<&Parked> for ParkedRow {
    fn from(parked: &Parked) -> Self {
        Self {
            node: parked.node.clone(),
            reason: parked.reason.clone(),
            since: parked.since.to_string(),
        }
    }
}

/// One node's report.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct NodeRow {
    node: String,
    /// In a check: `pass`, `skipped`, `not-reached`, or the current node's status
    /// (`in-progress`, `waiting`, `parked`, `blocked`, `escalated`, `complete`). From
    /// `advance`: `pass`, `wait`, `block` or `escalated`.
    status: String,
    outcome: String,
    messages: Vec<String>,
    forced: bool,
    attempts: u32,
}

impl From<NodeCheck> for NodeRow {
    fn from(row: NodeCheck) -> Self {
        Self {
            node: row.node,
            status: row.status.as_str().to_owned(),
            outcome: row.outcome,
            messages: row.messages,
            forced: row.forced,
            attempts: row.attempts,
        }
    }
}

/// Every node of the item's loop, where it is and what it waits for. Reads only.
#[utoipa::path(post, path = "/api/v1/graph/check", tag = "graph", request_body = CheckRequest, responses(
    (status = 200, description = "The check (`repoResolved: false` when `repo` is not a directory)", body = CheckAnswer),
    (status = 400, description = "`prRepo` without `pr`, a malformed `workItem` or `ref`, or `recompute`", body = Detail),
    (status = 404, description = "No graph is driven for the item in `repo`", body = Detail)))]
async fn check(
    State(state): State<ApiState>,
    Body(request): Body<CheckRequest>,
) -> Result<Json<CheckAnswer>, ApiError> {
    if request.recompute {
        return Err(ApiError::bad_request(
            "`recompute` (every gate re-evaluated from the artifacts) is not in this version; send `recompute: false`",
        ));
    }
    let address = address_of!(request);
    let target = match address.target(&state).await {
        Err(Unresolved::NotADirectory(_)) => {
            return Ok(Json(CheckAnswer {
                work_item: request.work_item,
                current_node: String::new(),
                ok: false,
                parked: None,
                nodes: Vec::new(),
                repo_resolved: Some(false),
            }));
        }
        resolved => resolved?,
    };
    let view = state.dispatcher.graph_view(&target).await.ok_or_else(|| no_graph(&target))?;
    let graph = view.graph.graph();
    let state_file = view.state.as_ref();
    Ok(Json(CheckAnswer {
        work_item: request.work_item,
        current_node: state_file.map(|s| s.current_node.clone()).unwrap_or_default(),
        ok: view.ok,
        parked: state_file.and_then(|s| s.parked.as_ref()).map(ParkedRow::from),
        nodes: context::node_checks(graph, state_file).into_iter().map(NodeRow::from).collect(),
        repo_resolved: None,
    }))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CompleteRequest {
    #[schema(min_length = 1)]
    repo: String,
    #[schema(value_type = super::openapi::SpecId)]
    work_item: String,
    /// The node claimed; the current one when empty.
    #[serde(default)]
    node: String,
    /// Who claims (recorded in `completions`); `operator` when empty.
    #[serde(default)]
    actor: String,
    #[serde(default, rename = "ref")]
    #[schema(value_type = Option<super::openapi::RefOrNone>)]
    reference: Option<String>,
    #[schema(value_type = Option<u64>, minimum = 1, maximum = 9_007_199_254_740_991_f64)]
    pr: Option<serde_json::Number>,
    #[serde(default)]
    #[schema(value_type = Option<super::openapi::PrRepository>)]
    pr_repo: Option<String>,
}

/// What a claim came to.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct Completed {
    /// The node claimed.
    node: String,
    /// The claimed node's verdict (`pass`, `wait`, `block`, `escalated`), or its status
    /// in a check when the claim was refused.
    status: String,
    outcome: String,
    /// Whether the pointer moved.
    moved: bool,
    current_node: String,
    messages: Vec<String>,
    /// Why nothing was judged: `""`, `not-started`, `already-past` or `not-current`.
    reason: &'static str,
}

/// The claim that a node's work is done, judged by its gate under the state file's lock;
/// the next node's entry (label, assignment) is carried out as on any boundary.
#[utoipa::path(post, path = "/api/v1/graph/complete", tag = "graph", request_body = CompleteRequest, responses(
    (status = 200, description = "What the claim came to", body = Completed),
    (status = 400, description = "`prRepo` without `pr`, `repo` not a directory, a malformed `workItem` or `ref`", body = Detail),
    (status = 404, description = "No graph is driven for the item in `repo`", body = Detail)))]
async fn complete(
    State(state): State<ApiState>,
    Body(request): Body<CompleteRequest>,
) -> Result<Json<Completed>, ApiError> {
    let address = address_of!(request);
    let target = address.target(&state).await?;
    let node = Some(request.node.trim().to_owned()).filter(|n| !n.is_empty());
    let by = match request.actor.trim() {
        "" => "operator",
        actor => actor,
    };
    let claimed = state
        .dispatcher
        .graph_complete(&target, node.clone(), by)
        .await
        .ok_or_else(|| no_graph(&target))?;
    let reason = match &claimed.step {
        Step::NotStarted => "not-started",
        Step::AlreadyPast { .. } => "already-past",
        Step::NotCurrent { .. } => "not-current",
        _ => "",
    };
    let verdict = verdict(&claimed);
    let state_file = claimed.state.as_ref();
    let node = verdict.as_ref().map(|v| v.node.clone()).or(node).unwrap_or_default();
    let row = state_file.and_then(|s| node_row(claimed.graph, s, &node));
    Ok(Json(Completed {
        status: match (&verdict, &row) {
            (Some(v), _) => v.status.to_owned(),
            (None, Some(row)) => row.status.clone(),
            (None, None) => String::new(),
        },
        outcome: verdict
            .as_ref()
            .map(|v| v.outcome.clone())
            .or(row.map(|r| r.outcome))
            .unwrap_or_default(),
        moved: matches!(claimed.step, Step::Advanced { .. }),
        current_node: state_file.map(|s| s.current_node.clone()).unwrap_or_default(),
        messages: claimed.messages,
        reason,
        node,
    }))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AdvanceRequest {
    #[schema(min_length = 1)]
    repo: String,
    #[schema(value_type = super::openapi::SpecId)]
    work_item: String,
    #[serde(default, rename = "ref")]
    #[schema(value_type = Option<super::openapi::RefOrNone>)]
    reference: Option<String>,
    #[schema(value_type = Option<u64>, minimum = 1, maximum = 9_007_199_254_740_991_f64)]
    pr: Option<serde_json::Number>,
    #[serde(default)]
    #[schema(value_type = Option<super::openapi::PrRepository>)]
    pr_repo: Option<String>,
}

/// The current node's gate judged once, with no new comment (a claim recorded, an
/// artifact written or a decision taken since count); the next node's entry is carried
/// out as on any boundary.
#[utoipa::path(post, path = "/api/v1/graph/advance", tag = "graph", request_body = AdvanceRequest, responses(
    (status = 200, description = "The judged node's report (`status`: pass, wait, block or escalated)", body = NodeRow),
    (status = 400, description = "`prRepo` without `pr`, `repo` not a directory, a malformed `workItem` or `ref`, or a graph never entered", body = Detail),
    (status = 404, description = "No graph is driven for the item in `repo`", body = Detail)))]
async fn advance(
    State(state): State<ApiState>,
    Body(request): Body<AdvanceRequest>,
) -> Result<Json<NodeRow>, ApiError> {
    let address = address_of!(request);
    let target = address.target(&state).await?;
    let claimed = state.dispatcher.graph_judge(&target).await.ok_or_else(|| no_graph(&target))?;
    let Some(verdict) = verdict(&claimed) else {
        return Err(ApiError::bad_request(format!(
            "{}: its graph was never entered (its session's spawn enters it)",
            target.item
        )));
    };
    let record = claimed.state.as_ref().and_then(|s| s.nodes.get(&verdict.node));
    Ok(Json(NodeRow {
        forced: record.is_some_and(|r| r.forced),
        attempts: record.map_or(0, |r| r.attempts),
        node: verdict.node,
        status: verdict.status.to_owned(),
        outcome: verdict.outcome,
        messages: claimed.messages,
    }))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ForceRequest {
    #[schema(min_length = 1)]
    repo: String,
    #[schema(value_type = super::openapi::SpecId)]
    work_item: String,
    /// The node the pointer is moved to.
    to_node: String,
    /// Why: recorded in `forced[]` and posted on the work item; an empty one is a 400.
    reason: String,
    /// Who forces (recorded and posted, never used to authorize); `operator` when absent.
    #[serde(default)]
    #[schema(value_type = Option<super::openapi::Actor>)]
    actor: Option<String>,
    #[serde(default, rename = "ref")]
    #[schema(value_type = Option<super::openapi::RefOrNone>)]
    reference: Option<String>,
    #[schema(value_type = Option<u64>, minimum = 1, maximum = 9_007_199_254_740_991_f64)]
    pr: Option<serde_json::Number>,
    #[serde(default)]
    #[schema(value_type = Option<super::openapi::PrRepository>)]
    pr_repo: Option<String>,
}

/// What a force did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct ForceAnswer {
    /// The work item's ref.
    work_item: String,
    from_node: String,
    to_node: String,
    reason: String,
    /// What it bypassed (an undeclared edge, a required gate), and an audit comment that
    /// could not be posted.
    warnings: Vec<String>,
}

/// The operator's override: the pointer moved to `toNode` past the gates, no verdict
/// forged (the node left keeps no outcome, the node entered is marked forced, `forced[]`
/// records who and why); `toNode`'s entry chain is not run. `graph.forced`, and an audit
/// comment on the work item.
#[utoipa::path(post, path = "/api/v1/graph/force", tag = "graph", request_body = ForceRequest, responses(
    (status = 200, description = "Where the pointer was and is", body = ForceAnswer),
    (status = 400, description = "An empty `reason`, an unknown `toNode` or `actor`, `prRepo` without `pr`, `repo` not a directory, a malformed `workItem` or `ref`", body = Detail),
    (status = 404, description = "No graph is driven for the item in `repo`", body = Detail)))]
async fn force(
    State(state): State<ApiState>,
    Body(request): Body<ForceRequest>,
) -> Result<Json<ForceAnswer>, ApiError> {
    let by = super::sessions::operator(request.actor.as_deref())?;
    let address = address_of!(request);
    let target = address.target(&state).await?;
    let forced = state
        .dispatcher
        .graph_force(&target, request.to_node.trim(), &request.reason, by.as_str())
        .await
        .ok_or_else(|| no_graph(&target))?
        .map_err(refused)?;
    Ok(Json(ForceAnswer {
        work_item: target.item.to_string(),
        from_node: forced.from,
        to_node: forced.to,
        reason: forced.reason,
        warnings: forced.warnings,
    }))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SkipRequest {
    #[schema(min_length = 1)]
    repo: String,
    #[schema(value_type = super::openapi::SpecId)]
    work_item: String,
    /// Skippable nodes or skip sets (`spec-chain`, `review-chain`, …) ahead of the pointer.
    nodes: Vec<String>,
    /// Why: recorded with each skip and posted on the work item; an empty one is a 400.
    reason: String,
    /// Who declares (recorded and posted, never used to authorize); `operator` when absent.
    #[serde(default)]
    #[schema(value_type = Option<super::openapi::Actor>)]
    actor: Option<String>,
    #[serde(default, rename = "ref")]
    #[schema(value_type = Option<super::openapi::RefOrNone>)]
    reference: Option<String>,
    #[schema(value_type = Option<u64>, minimum = 1, maximum = 9_007_199_254_740_991_f64)]
    pr: Option<serde_json::Number>,
    #[serde(default)]
    #[schema(value_type = Option<super::openapi::PrRepository>)]
    pr_repo: Option<String>,
}

/// What a skip declaration did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct SkipAnswer {
    /// The work item's ref.
    work_item: String,
    /// The nodes now declared skipped.
    declared: Vec<String>,
    rejected: Vec<RejectedRow>,
    reason: String,
    /// An audit comment that could not be posted.
    warnings: Vec<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
struct RejectedRow {
    token: String,
    why: String,
}

/// The operator's skip declaration: each named node ahead of the pointer recorded in
/// `skips` (with `via: api`), passed by the walk when it gets there; a token outside the
/// loop's skip vocabulary, or a node reached, is rejected (200, in `rejected`).
/// `graph.skips_declared` / `graph.skips_rejected`, and an audit comment when anything
/// was declared.
#[utoipa::path(post, path = "/api/v1/graph/skip", tag = "graph", request_body = SkipRequest, responses(
    (status = 200, description = "What was declared and what was rejected", body = SkipAnswer),
    (status = 400, description = "An empty `reason` or `nodes`, an unknown `actor`, `prRepo` without `pr`, `repo` not a directory, a malformed `workItem` or `ref`", body = Detail),
    (status = 404, description = "No graph is driven for the item in `repo`", body = Detail)))]
async fn skip(
    State(state): State<ApiState>,
    Body(request): Body<SkipRequest>,
) -> Result<Json<SkipAnswer>, ApiError> {
    let by = super::sessions::operator(request.actor.as_deref())?;
    let address = address_of!(request);
    let target = address.target(&state).await?;
    let declared = state
        .dispatcher
        .graph_skip(&target, request.nodes.clone(), &request.reason, by.as_str(), "api")
        .await
        .ok_or_else(|| no_graph(&target))?
        .map_err(refused)?;
    Ok(Json(SkipAnswer {
        work_item: target.item.to_string(),
        declared: declared.declared,
        rejected: declared
            .rejected
            .into_iter()
            .map(|r| RejectedRow { token: r.token, why: r.why })
            .collect(),
        reason: declared.reason,
        warnings: declared.warnings,
    }))
}

/// An override refused: a 400 saying what to send instead.
fn refused(refused: Refused) -> ApiError {
    match refused.hint() {
        Some(hint) => ApiError::bad_request(format!("{refused} ({hint})")),
        None => ApiError::bad_request(refused.to_string()),
    }
}

/// What a node's gate said, in the reference's words; `None` when nothing was judged.
struct Verdict {
    node: String,
    status: &'static str,
    outcome: String,
}

fn verdict(claimed: &Claimed) -> Option<Verdict> {
    let judged = |node: &str, status, outcome: &str| Verdict {
        node: node.to_owned(),
        status,
        outcome: outcome.to_owned(),
    };
    Some(match &claimed.step {
        Step::Advanced { from, outcome, .. } => judged(from, "pass", outcome),
        Step::Terminal { node } => judged(node, "pass", ""),
        Step::Parked { node } => judged(node, "wait", ""),
        Step::Blocked { node } => judged(node, "block", ""),
        Step::Escalated { node } => judged(node, "escalated", ""),
        // The gate passed onto no declared edge: the item is parked there for a human.
        Step::NoEdge { node, outcome } => judged(node, "escalated", outcome),
        Step::NotStarted
        | Step::Started { .. }
        | Step::AlreadyStarted
        | Step::AlreadyPast { .. }
        | Step::NotCurrent { .. } => return None,
    })
}

/// `node`'s check row in `state`, walking `graph`.
fn node_row(graph: LoopName, state: &WorkItemState, node: &str) -> Option<NodeRow> {
    context::node_checks(graph.graph(), Some(state))
        .into_iter()
        .find(|row| row.node == node)
        .map(NodeRow::from)
}

fn no_graph(target: &GraphTarget) -> ApiError {
    let item = &target.item;
    let dir = target.checkout.as_deref().unwrap_or(Path::new("")).display();
    ApiError::not_found(format!(
        "{item}: no process graph is driven in {dir} (`routing.graph.enabled` off, the item not armed, the checkout not its repository, or no spec folder; `the-loop explain {item}` says which)"
    ))
}

/// Where a graph verb's request points.
struct Address<'a> {
    repo: &'a str,
    work_item: &'a str,
    reference: &'a str,
    pr: Option<&'a serde_json::Number>,
    pr_repo: &'a str,
}

/// The work item an [`Address`] names.
enum Named {
    Item(WorkItemRef),
    /// `issue-<N>` alone.
    Number(u64),
}

/// Why an [`Address`] names no graph.
enum Unresolved {
    NotADirectory(ApiError),
    Refused(ApiError),
}

impl From<Unresolved> for ApiError {
    fn from(unresolved: Unresolved) -> Self {
        match unresolved {
            Unresolved::NotADirectory(err) | Unresolved::Refused(err) => err,
        }
    }
}

impl Address<'_> {
    /// The graph this address names: the checkout, the work item (its ref from `ref`,
    /// from `workItem`, or from the session here whose checkout `repo` is), the inner
    /// loop.
    async fn target(&self, state: &ApiState) -> Result<GraphTarget, Unresolved> {
        let refused = Unresolved::Refused;
        let inner = pull_request(self.pr, self.pr_repo).map_err(refused)?;
        // What the request says is checked before where it points.
        let named = self.named().map_err(refused)?;
        if self.repo.is_empty() {
            let empty = "`repo` is empty: name a checkout on the service's machine";
            return Err(Unresolved::Refused(ApiError::bad_request(empty)));
        }
        let repo = checkout(self.repo).await.map_err(Unresolved::NotADirectory)?;
        let item = match named {
            Named::Item(item) => item,
            Named::Number(number) => {
                self.session_item(state, &repo, number).await.map_err(refused)?
            }
        };
        let pull_request = inner.map(|inner| InnerLoop {
            // The item's own repository is the plain `pr-loops/pr-<n>/`.
            repository: inner.repository.filter(|(owner, name)| {
                !(item.repo().owner().eq_ignore_ascii_case(owner)
                    && item.repo().name().eq_ignore_ascii_case(name))
            }),
            ..inner
        });
        Ok(GraphTarget { item, checkout: Some(repo), pull_request })
    }

    /// The work item `workItem` and `ref` name: its ref, or only its number (`issue-<N>`
    /// with no `ref`: the session here whose checkout `repo` is has the rest).
    fn named(&self) -> Result<Named, ApiError> {
        let id = self.work_item.trim();
        let neither = || {
            ApiError::bad_request(format!(
                "`workItem`: `{id}` is neither `issue-<N>` nor a work item's ref"
            ))
        };
        let (number, named) = match id.strip_prefix("issue-") {
            Some(n) => (n.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(neither)?, None),
            None => {
                let item = work_item(id).map_err(|_| neither())?;
                (item.number(), Some(item))
            }
        };
        let given = match self.reference.trim() {
            "" => None,
            reference => Some(work_item(reference)?),
        };
        match (given, named) {
            (Some(given), named)
                if given.number() != number || named.as_ref().is_some_and(|n| *n != given) =>
            {
                Err(ApiError::bad_request(format!(
                    "`workItem` `{id}` and `ref` `{given}` name different work items"
                )))
            }
            (Some(item), _) | (None, Some(item)) => Ok(Named::Item(item)),
            (None, None) => Ok(Named::Number(number)),
        }
    }

    /// The work item numbered `number` whose session here has its checkout at `repo`.
    async fn session_item(
        &self,
        state: &ApiState,
        repo: &Path,
        number: u64,
    ) -> Result<WorkItemRef, ApiError> {
        let (store, dir) = (state.store.clone(), repo.to_owned());
        let found = read(move || {
            let here = |cwd: &Path| std::fs::canonicalize(cwd).is_ok_and(|cwd| cwd == dir);
            let records = store.list_local_records()?;
            Ok(records
                .into_iter()
                .find(|r| {
                    r.work_item.number() == number && r.own_endpoint().is_some_and(|e| here(&e.cwd))
                })
                .map(|r| r.work_item.clone()))
        })
        .await?;
        found
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "no session of {} has its checkout at {} on this machine: name the work item in `ref`",
                    spec_id(number),
                    repo.display()
                ))
            })
    }
}

/// The largest pull-request number taken (2^53 - 1: every whole number up to it is exact
/// as a JSON float too).
const MAX_NUMBER: u64 = 9_007_199_254_740_991;

/// `pr` and `prRepo` checked: `prRepo` needs `pr`, and is `owner/repo` with safe parts.
fn pull_request(
    pr: Option<&serde_json::Number>,
    pr_repo: &str,
) -> Result<Option<InnerLoop>, ApiError> {
    let pr_repo = pr_repo.trim();
    let Some(pr) = pr else {
        if pr_repo.is_empty() {
            return Ok(None);
        }
        return Err(ApiError::bad_request(
            "`prRepo` names a pull request's repository: send `pr` too",
        ));
    };
    // JSON has one number type: `12.0` is `12`; a float is exact up to `MAX_NUMBER`.
    let Some(number) = super::agent::whole(pr).filter(|n| (1..=MAX_NUMBER).contains(n)) else {
        return Err(ApiError::bad_request(format!("`pr`: {pr} is not a pull request's number")));
    };
    if pr_repo.is_empty() {
        return Ok(Some(InnerLoop { number, repository: None }));
    }
    match pr_repo.split_once('/') {
        Some((owner, name)) if inner_loop_dir(Some((owner, name)), number).is_some() => {
            let repository = Some((owner.to_owned(), name.to_owned()));
            Ok(Some(InnerLoop { number, repository }))
        }
        _ => Err(ApiError::bad_request(format!("`prRepo`: `{pr_repo}` is not `owner/repo`"))),
    }
}

/// `repo` as a directory on this machine, resolved; a 400 when it is not one.
async fn checkout(repo: &str) -> Result<PathBuf, ApiError> {
    let not_a_directory = || {
        ApiError::bad_request(format!(
            "`repo`: `{repo}` is not a directory on the service's machine"
        ))
    };
    if repo.trim().is_empty() {
        return Err(not_a_directory());
    }
    let dir = tokio::fs::canonicalize(repo).await.map_err(|_| not_a_directory())?;
    match tokio::fs::metadata(&dir).await {
        Ok(meta) if meta.is_dir() => Ok(dir),
        _ => Err(not_a_directory()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pull_requests_repository_needs_its_number_and_a_safe_name() {
        let n = |text: &str| serde_json::from_str::<serde_json::Number>(text).unwrap();
        assert!(pull_request(None, "").unwrap().is_none());
        assert_eq!(pull_request(None, "octo/lib").unwrap_err().status, 400);
        assert_eq!(pull_request(Some(&n("0")), "").unwrap_err().status, 400);
        assert_eq!(pull_request(Some(&n("2.5")), "").unwrap_err().status, 400);
        let own = pull_request(Some(&n("3.0")), "").unwrap().expect("a pull request");
        assert_eq!((own.number, own.repository), (3, None));
        let other = pull_request(Some(&n("3")), "octo/lib").unwrap().expect("a pull request");
        assert_eq!(other.repository, Some(("octo".into(), "lib".into())));
        for bad in ["octo", "../x", "octo/..", "a/b/c"] {
            assert_eq!(pull_request(Some(&n("3")), bad).unwrap_err().status, 400, "{bad}");
        }
    }

    #[test]
    fn a_human_gates_verdict_is_wait_and_a_pass_names_the_node_left() {
        let claimed = |step| Claimed {
            step,
            messages: Vec::new(),
            context: String::new(),
            graph: LoopName::WorkItem,
            state: None,
        };
        let parked = verdict(&claimed(Step::Parked { node: "design-approval".into() }));
        assert_eq!(parked.map(|v| (v.node, v.status)), Some(("design-approval".into(), "wait")));
        let advanced = verdict(&claimed(Step::Advanced {
            from: "design".into(),
            to: "test-planning".into(),
            outcome: "pass".into(),
        }))
        .expect("judged");
        assert_eq!((advanced.node.as_str(), advanced.status), ("design", "pass"));
        assert!(verdict(&claimed(Step::NotStarted)).is_none());
    }
}

//! The control plane's OpenAPI document, `GET /api/openapi.json`.
//!
//! It is generated, never written by hand: every route set is a utoipa-axum
//! `OpenApiRouter`, and a route joins it only through `routes!` on a handler carrying its
//! `#[utoipa::path]` (method, path, parameters from the handler's query type, request body
//! from its body type, responses), so what is served and what is described come from the
//! same place. [`document`] then adds what every route shares — the guards' refusals
//! (403, and 401 behind a token), a body's (400, 413, 415, 422), a query's (422) — and
//! `/mcp`, which is the MCP SDK's service rather than a handler. `scripts/api-contract.sh`
//! checks the running service against it with schemathesis.

use std::sync::Arc;

use axum::Extension;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use utoipa::openapi::path::{HttpMethod, Operation, OperationBuilder, PathItem};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{OneOfBuilder, Schema, Type};
use utoipa::openapi::{
    ContentBuilder, InfoBuilder, ObjectBuilder, OpenApi, RefOr, Response, ResponseBuilder,
};
use utoipa::{PartialSchema, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::Detail;
use super::{ApiState, HEALTH};

/// Where the document is served.
pub const PATH: &str = "/api/openapi.json";

/// The MCP endpoint's path.
pub const MCP: &str = "/mcp";

/// A work item's ref without its anchors: `github:[host/]owner/repo#N` (what
/// `WorkItemRef::from_str` takes, less the leading and trailing blanks it forgives).
const REF: &str = r"github:([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+(:[1-9][0-9]{0,3})?/)?[A-Za-z0-9][A-Za-z0-9._-]{0,99}/[A-Za-z0-9][A-Za-z0-9._-]{0,99}#[1-9][0-9]{0,17}";

/// A string of the shape `pattern` (anchored) states, described.
fn text(pattern: &str, description: &str, example: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(format!("^({pattern})$")))
        .description(Some(description))
        .examples([example])
        .into()
}

/// The schema of a work item's ref in a query or a body (read as a string, parsed by
/// the route: a malformed one is a 400).
pub(super) struct WorkItemRef;

impl PartialSchema for WorkItemRef {
    fn schema() -> RefOr<Schema> {
        text(REF, "A work item's ref, `github:[host/]owner/repo#N`", "github:octo/app#7")
    }
}

impl ToSchema for WorkItemRef {}

/// The schema of an actor: a GitHub login (recorded, never used to authorize).
pub(super) struct Actor;

impl PartialSchema for Actor {
    fn schema() -> RefOr<Schema> {
        text(r"[A-Za-z0-9]{1,39}", "A GitHub login", "octocat")
    }
}

impl ToSchema for Actor {}

/// The schema of `explain`'s subject: a delivery id, or a work item's ref (a subject with
/// both `:` and `#` is taken for a ref).
pub(super) struct Subject;

impl PartialSchema for Subject {
    fn schema() -> RefOr<Schema> {
        text(
            &format!("[^#]*|[^:]*|{REF}"),
            "A delivery id (GitHub's, a dedup key or a poll id) or a work item's ref",
            "github:octo/app#7",
        )
    }
}

impl ToSchema for Subject {}

/// The schema of `since`: an age (`90s`, `15m`, `2h`, `7d`); an RFC 3339 time is taken too.
pub(super) struct Since;

impl PartialSchema for Since {
    fn schema() -> RefOr<Schema> {
        text(r"[0-9]{1,6}[smhd]", "An age (`90s`, `15m`, `2h`, `7d`) or an RFC 3339 time", "15m")
    }
}

impl ToSchema for Since {}

/// The schema of a pull request as `link-pr` takes it: its number, or `#N`, a ref or a URL.
pub(super) struct PullRequest;

impl PartialSchema for PullRequest {
    fn schema() -> RefOr<Schema> {
        let number = ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).build();
        let url = r"https://github\.com/[A-Za-z0-9][A-Za-z0-9._-]{0,99}/[A-Za-z0-9][A-Za-z0-9._-]{0,99}/pull/[1-9][0-9]{0,17}";
        let written =
            text(&format!("#?[1-9][0-9]{{0,17}}|{REF}|{url}"), "`#N`, a ref or a URL", "#12");
        OneOfBuilder::new().item(number).item(written).into()
    }
}

impl ToSchema for PullRequest {}

/// The schema of a graph verb's `workItem`: the spec folder's id, `issue-<N>`, or a ref.
pub(super) struct SpecId;

impl PartialSchema for SpecId {
    fn schema() -> RefOr<Schema> {
        text(
            &format!("issue-[1-9][0-9]{{0,17}}|{REF}"),
            "`issue-<N>` (the spec folder's name) or a work item's ref",
            "issue-7",
        )
    }
}

impl ToSchema for SpecId {}

/// The schema of a graph verb's `ref`: a work item's ref, or empty (none given).
pub(super) struct RefOrNone;

impl PartialSchema for RefOrNone {
    fn schema() -> RefOr<Schema> {
        text(&format!("|{REF}"), "A work item's ref, or empty", "github:octo/app#7")
    }
}

impl ToSchema for RefOrNone {}

/// The schema of a graph verb's `prRepo`: `owner/repo`, or empty for the item's own.
pub(super) struct PrRepository;

impl PartialSchema for PrRepository {
    fn schema() -> RefOr<Schema> {
        text(
            "([A-Za-z0-9._-]+/[A-Za-z0-9._-]+)?",
            "The pull request's repository, `owner/repo`, when not the work item's",
            "octo/lib",
        )
    }
}

impl ToSchema for PrRepository {}

pub(super) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new().routes(routes!(openapi))
}

/// The document, rendered once at start.
#[derive(Debug, Clone)]
pub(super) struct Rendered(pub Arc<String>);

/// This document.
#[utoipa::path(get, path = "/api/openapi.json", tag = "health", responses(
    (status = 200, description = "The OpenAPI 3.1 document of this service", body = serde_json::Value)))]
async fn openapi(Extension(Rendered(text)): Extension<Rendered>) -> impl IntoResponse {
    ([(CONTENT_TYPE, "application/json")], text.as_str().to_owned())
}

/// The whole document for the paths `collected` from the route sets, `/mcp` when it is
/// served.
pub fn document(mut collected: OpenApi, mcp: bool) -> OpenApi {
    collected.info = InfoBuilder::new()
        .title("the-loop control plane")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(
            "The HTTP API of `the-loop start` (docs/control-plane.md): refs travel in the query or the body, every refusal is `{\"detail\": …}`.",
        ))
        .build();
    if mcp {
        collected.paths.paths.insert(MCP.to_owned(), mcp_item());
    }
    for (path, item) in &mut collected.paths.paths {
        for operation in operations(item) {
            add_refusals(path, operation);
        }
    }
    // The schemas routes name by reference (a parameter's is not collected by itself).
    let components = collected.components.get_or_insert_with(Default::default);
    for (name, schema) in [
        (Detail::name(), Detail::schema()),
        (WorkItemRef::name(), WorkItemRef::schema()),
        (Actor::name(), Actor::schema()),
        (Subject::name(), Subject::schema()),
        (Since::name(), Since::schema()),
        (PullRequest::name(), PullRequest::schema()),
    ] {
        components.schemas.entry(name.into_owned()).or_insert(schema);
    }
    collected
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.options,
        &mut item.head,
        &mut item.patch,
        &mut item.trace,
    ]
    .into_iter()
    .filter_map(Option::as_mut)
}

/// The refusals every operation can answer besides its own.
fn add_refusals(path: &str, operation: &mut Operation) {
    let mut add = |status: &str, description: &str| {
        operation
            .responses
            .responses
            .entry(status.to_owned())
            .or_insert_with(|| refusal(description));
    };
    add(
        "403",
        "The `Host` is not loopback on a loopback bind, or a page of another origin tries to act",
    );
    if path != HEALTH {
        add("401", "A token is configured and the request does not carry it");
    }
    if path == MCP {
        return;
    }
    if operation.request_body.is_some() {
        add("400", "The body is not JSON");
        add("413", "The body is larger than 64 KiB");
        add("415", "The body is not `Content-Type: application/json`");
        add("422", "The body does not have the route's shape");
    }
    if operation.parameters.as_ref().is_some_and(|p| !p.is_empty()) {
        add("422", "The query does not have the route's shape");
    }
}

fn refusal(description: &str) -> RefOr<Response> {
    let detail =
        ContentBuilder::new().schema(Some(utoipa::openapi::Ref::from_schema_name("Detail")));
    ResponseBuilder::new()
        .description(description)
        .content("application/json", detail.build())
        .into()
}

/// `/mcp`: the MCP SDK's streamable HTTP transport (JSON-RPC over POST, its event stream
/// over GET, a session's end as DELETE), described, not modelled.
fn mcp_item() -> PathItem {
    let any = || ContentBuilder::new().schema(Some(ObjectBuilder::new())).build();
    let answered = |description: &str| {
        ResponseBuilder::new()
            .description(description)
            .content("application/json", any())
            .content("text/event-stream", any())
            .build()
    };
    let operation = |summary: &str| {
        OperationBuilder::new()
            .tag("mcp")
            .summary(Some(summary))
            .description(Some(
                "The Model Context Protocol's streamable HTTP transport (docs/agent-side.md)",
            ))
            .response("200", answered("The MCP answer"))
            .response("202", answered("Accepted (a notification)"))
            .response("400", answered("Not an MCP request"))
            .response("404", answered("No such MCP session"))
            .response("405", answered("Not a method of the transport"))
            .response("406", answered("The client does not accept the answer's media type"))
    };
    let post = operation("An MCP JSON-RPC message")
        .request_body(Some(
            RequestBodyBuilder::new()
                .content("application/json", any())
                .required(Some(utoipa::openapi::Required::True))
                .build(),
        ))
        .build();
    let mut item = PathItem::new(HttpMethod::Post, post);
    item.get = Some(operation("The server's event stream of an MCP session").build());
    item.delete = Some(operation("Ends an MCP session").build());
    item
}

//! The MCP server on the service port at `/mcp` (streamable HTTP, the official Rust SDK
//! `rmcp`): the tools an agent session — or any MCP client on this machine — calls
//! instead of the CLI. Each tool is a thin call into what the CLI runs: `ask` and
//! `link_pull_request` are [`crate::agent`]'s, the reads are loop-store's and loop-core's
//! `explain`. Every call is recorded (`mcp.call`: the tool, its outcome, the work item;
//! never arguments' text), and every call reads the dispatcher's live config.
//!
//! The transport guards against DNS rebinding: a request whose `Host` is not the
//! service's own address (or a loopback name for it), or whose `Origin` is not the
//! service's own origin, is refused before any tool runs.

use std::sync::Arc;

use loop_core::WorkItemRef;
use loop_core::agent::Question;
use loop_core::explain;
use loop_core::log::{Kind, Line};
use loop_core::record::LocalRecord;
use loop_core::usage::Usage;
use loop_store::event_log::filter::{EventFilter, parse_since};
use loop_store::event_log::read::read_all;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::agent::{self, Linked};
use crate::dispatcher::{Dispatcher, blocking};
use crate::usage::UsageBook;

/// The most event-log lines one `query_events` answers with.
const MAX_EVENTS: usize = 500;

/// The `/mcp` service for `dispatcher`, accepting only requests addressed to
/// `authorities` (`host:port` forms of the service's own address) from no origin or one
/// of `origins`; ends when `cancel` is cancelled.
pub fn service(
    dispatcher: Dispatcher,
    usage: UsageBook,
    authorities: Vec<String>,
    origins: Vec<String>,
    cancel: tokio_util::sync::CancellationToken,
) -> StreamableHttpService<TheLoopMcp, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(authorities)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_cancellation_token(cancel);
    StreamableHttpService::new(
        move || Ok(TheLoopMcp::new(dispatcher.clone(), usage.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// One MCP session's server: the tools over the service's dispatcher.
#[derive(Debug, Clone)]
pub struct TheLoopMcp {
    dispatcher: Dispatcher,
    /// The sessions' tokens and cost, shared with the control plane's routes.
    usage: UsageBook,
    tool_router: ToolRouter<Self>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AskParams {
    /// The work item (`github:owner/repo#N`), or the pull request its session serves.
    pub work_item: String,
    /// The question, as it should read on GitHub.
    pub question: String,
    /// Choices to offer (at most 10).
    #[serde(default)]
    pub options: Vec<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct LinkParams {
    /// The work item the pull request delivers.
    pub work_item: String,
    /// The pull request: its number, `#12`, `github:owner/repo#12` or its URL.
    pub pull_request: PullRequestArg,
}

/// A pull request as a number or as text.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum PullRequestArg {
    Number(u64),
    Text(String),
}

impl PullRequestArg {
    fn into_text(self) -> String {
        match self {
            Self::Number(number) => number.to_string(),
            Self::Text(text) => text,
        }
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct WorkItemParams {
    /// The work item (`github:owner/repo#N`).
    pub work_item: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct EventsParams {
    /// Only lines about this work item.
    #[serde(default)]
    pub work_item: Option<String>,
    /// Only lines of these types; `*` matches any run of characters (`session.*`).
    #[serde(default)]
    pub types: Vec<String>,
    /// Only lines at or after this time: RFC 3339 or an age (`15m`, `2h`).
    #[serde(default)]
    pub since: Option<String>,
    /// The last N matching lines (default 50, at most 500).
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ExplainParams {
    /// A delivery id (GitHub's, a dedup key or a poll id) or a work item's ref.
    pub subject: String,
}

/// What a tool answers: its JSON, or why it refused.
type Answer = Result<Value, String>;

#[tool_router]
impl TheLoopMcp {
    fn new(dispatcher: Dispatcher, usage: UsageBook) -> Self {
        Self { dispatcher, usage, tool_router: Self::tool_router() }
    }

    /// What `record`'s sessions spent (`null` without a transcript here). Blocking.
    fn spent(
        usage: &UsageBook,
        record: Option<&LocalRecord>,
        pricing: &loop_core::config::PricingConfig,
    ) -> Option<Usage> {
        let tokens = usage.record(record?, pricing)?;
        Some(Usage::priced(&tokens, pricing))
    }

    #[tool(description = "Ask a question on the work item (a self-marked comment) and record \
        that the session waits for the answer; the answer arrives as the session's next \
        message. Refused unless a live session on this machine serves the work item.")]
    async fn ask(
        &self,
        Parameters(params): Parameters<AskParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let item = parse_ref(&params.work_item);
        let answer = match (&item, Question::new(&params.question, &params.options)) {
            (Err(err), _) => Err(err.clone()),
            (_, Err(refusal)) => Err(refusal.to_string()),
            (Ok(item), Ok(question)) => self
                .dispatcher
                .ask(item, question)
                .await
                .map(|asked| json!({"workItem": asked.asked.to_string(), "commentUrl": asked.comment_url}))
                .map_err(|err| err.to_string()),
        };
        self.answer("ask", item.ok().as_ref(), answer).await
    }

    #[tool(description = "Record that a pull request delivers the work item, so its events \
        (reviews, CI) reach the work item's session. Idempotent; refuses a self-link; writes \
        nothing without a session record on this machine.")]
    async fn link_pull_request(
        &self,
        Parameters(params): Parameters<LinkParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let item = parse_ref(&params.work_item);
        let answer = match &item {
            Err(err) => Err(err.clone()),
            Ok(item) => {
                let (store, config, item, pr) = (
                    self.dispatcher.store().clone(),
                    self.dispatcher.config(),
                    item.clone(),
                    params.pull_request.into_text(),
                );
                blocking(move || agent::link_pull_request(&store, &config, &item, &pr))
                    .await
                    .map(|linked| {
                        let (work_item, pull_request, linked) = match linked {
                            Linked::Linked { work_item, pull_request } => (work_item, pull_request, true),
                            Linked::Already { work_item, pull_request } => (work_item, pull_request, false),
                        };
                        json!({"workItem": work_item.to_string(), "pullRequest": pull_request.to_string(), "linked": linked})
                    })
                    .map_err(|err| err.to_string())
            }
        };
        self.answer("link_pull_request", item.ok().as_ref(), answer).await
    }

    #[tool(description = "One work item as this machine knows it: its arming (control), its \
        session and the pull requests recorded for it, its poll ledger, whether it ended, \
        any question of the agent's still waiting for an answer, and what its sessions \
        spent (usage: tokens and costUsd, null when unknown).")]
    async fn get_work_item(
        &self,
        Parameters(params): Parameters<WorkItemParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let item = parse_ref(&params.work_item);
        let answer = match &item {
            Err(err) => Err(err.clone()),
            Ok(item) => {
                let (store, item) = (self.dispatcher.store().clone(), item.clone());
                let (usage, pricing) =
                    (self.usage.clone(), self.dispatcher.config().pricing.clone());
                blocking(move || {
                    let state = store.item_state(&item)?;
                    let spent = Self::spent(&usage, state.session.as_ref(), &pricing);
                    Ok::<_, loop_store::StoreError>(work_item_view(&item, &state, spent))
                })
                .await
                .map_err(|err| err.to_string())
            }
        };
        self.answer("get_work_item", item.ok().as_ref(), answer).await
    }

    #[tool(description = "Every work item with a session on this machine: ref, session \
        status, pull requests, whether it waits for an answer and what it spent (usage).")]
    async fn list_work_items(&self) -> Result<CallToolResult, ErrorData> {
        let store = self.dispatcher.store().clone();
        let (usage, pricing) = (self.usage.clone(), self.dispatcher.config().pricing.clone());
        let answer = blocking(move || {
            let records = store.list_local_records()?;
            let rows = records
                .iter()
                .map(|record| {
                    let own = record.own_endpoint();
                    json!({
                        "workItem": record.work_item.to_string(),
                        "status": own.map(|e| e.status),
                        "pullRequests": pull_requests(record),
                        "awaitingInput": record.endpoints.values().any(|e| e.awaiting_input.is_some()),
                        "usage": Self::spent(&usage, Some(record), &pricing),
                    })
                })
                .collect();
            Ok::<_, loop_store::StoreError>(Value::Array(rows))
        })
        .await
        .map_err(|err| err.to_string());
        self.answer("list_work_items", None, answer).await
    }

    #[tool(description = "The last lines of the event log (the audit trail of every \
        decision), oldest first, filtered by work item, type and time.")]
    async fn query_events(
        &self,
        Parameters(params): Parameters<EventsParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let item = params.work_item.as_deref().map(parse_ref).transpose();
        let since = params
            .since
            .as_deref()
            .map(|since| parse_since(since, jiff::Timestamp::now()).map_err(|e| e.to_string()))
            .transpose();
        let answer = match (&item, since) {
            (Err(err), _) => Err(err.clone()),
            (_, Err(err)) => Err(err),
            (Ok(item), Ok(since)) => {
                let filter = EventFilter {
                    work_item: item.clone(),
                    events: params.types,
                    since,
                    ..EventFilter::default()
                };
                let limit = params.limit.unwrap_or(50).clamp(1, MAX_EVENTS);
                let path = self.dispatcher.store().layout().event_log().to_owned();
                blocking(move || read_all(&path))
                    .await
                    .map(|records| {
                        let matching: Vec<Value> = records
                            .into_iter()
                            .filter(|record| filter.matches(record))
                            .map(|record| Value::Object(record.0))
                            .collect();
                        let skip = matching.len().saturating_sub(limit);
                        Value::Array(matching.into_iter().skip(skip).collect())
                    })
                    .map_err(|err| err.to_string())
            }
        };
        self.answer("query_events", item.ok().flatten().as_ref(), answer).await
    }

    #[tool(description = "Why did (nothing) happen? The decision trail of one delivery (by \
        its id) or of one work item (by its ref), from the event log.")]
    async fn explain(
        &self,
        Parameters(params): Parameters<ExplainParams>,
    ) -> Result<CallToolResult, ErrorData> {
        let item = params.subject.parse::<WorkItemRef>().ok();
        let (store, subject, of) = (self.dispatcher.store().clone(), params.subject, item.clone());
        let answer = blocking(move || {
            let records: Vec<explain::Record> = read_all(store.layout().event_log())
                .map_err(|err| err.to_string())?
                .into_iter()
                .map(|record| record.0)
                .collect();
            match of {
                Some(item) => {
                    let state = store.item_state(&item).map_err(|err| err.to_string())?;
                    Ok(json!({
                        "workItem": item.to_string(),
                        "summary": explain::describe_item(&state),
                        "deliveries": explain::item_trail(&records, &item, 20),
                    }))
                }
                None => serde_json::to_value(explain::delivery_trail(&records, &subject))
                    .map_err(|err| err.to_string()),
            }
        })
        .await;
        self.answer("explain", item.as_ref(), answer).await
    }
}

impl TheLoopMcp {
    /// Records the call and turns its answer into the tool's result.
    async fn answer(
        &self,
        tool: &str,
        item: Option<&WorkItemRef>,
        answer: Answer,
    ) -> Result<CallToolResult, ErrorData> {
        let mut line = Line::info(Kind::McpCall)
            .field("tool", tool)
            .field("outcome", if answer.is_ok() { "ok" } else { "refused" });
        if let Some(item) = item {
            line = line.work_item(item);
        }
        if let Err(reason) = &answer {
            line = line.field("error", reason);
        }
        self.dispatcher.events().emit_async(line).await;
        Ok(match answer {
            Ok(value) => CallToolResult::success(vec![ContentBlock::text(format!("{value:#}"))]),
            Err(reason) => CallToolResult::error(vec![ContentBlock::text(reason)]),
        })
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for TheLoopMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("the-loop", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "the-loop runs this session for a GitHub work item. Ask questions with `ask` \
                 (then wait for the next message), record each pull request you open with \
                 `link_pull_request`, and read where the work item stands with \
                 `get_work_item`.",
            )
    }
}

fn parse_ref(text: &str) -> Result<WorkItemRef, String> {
    text.trim().parse().map_err(|err: loop_core::refs::RefError| err.to_string())
}

/// The pull requests a record lists beside its own work item.
fn pull_requests(record: &loop_core::record::LocalRecord) -> Vec<String> {
    record
        .endpoints
        .keys()
        .filter(|served| **served != record.work_item)
        .map(ToString::to_string)
        .collect()
}

/// `get_work_item`'s answer.
fn work_item_view(item: &WorkItemRef, state: &explain::ItemState, usage: Option<Usage>) -> Value {
    let awaiting: Vec<Value> = state
        .session
        .iter()
        .flat_map(|record| record.endpoints.iter())
        .filter_map(|(served, endpoint)| {
            let question = endpoint.awaiting_input.as_ref()?;
            Some(json!({
                "servedBy": served.to_string(),
                "askedAt": question.asked_at,
                "commentUrl": question.comment_url,
                "question": question.question,
                "options": question.options,
            }))
        })
        .collect();
    json!({
        "workItem": item.to_string(),
        "url": item.url(),
        "control": state.control,
        "session": state.session,
        "pullRequests": state.session.as_ref().map(pull_requests).unwrap_or_default(),
        "poll": state.ledger,
        "ended": state.ended,
        "collaborators": state.collaborators,
        "awaitingInput": awaiting,
        "usage": usage,
        "summary": explain::describe_item(state),
    })
}

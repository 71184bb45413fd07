//! The stand-in model's request log: one record per request answered (scripting under
//! `/_stand-in/` aside), with what a test asserts on: what kind of request it was, which
//! conversation, the last user message, the tools offered, what was answered and with
//! what usage, and the headers that tell which client sent it and how it authenticated
//! (never a credential's value).

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::model::AnsweredBy;
use super::request::{Side, ToolResult};
use super::usage::Usage;

/// What a request was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// A `POST /v1/messages` offering tools: a user turn, scripted.
    Turn,
    /// A `POST /v1/messages` without tools (title, quota probe): answered apart.
    Side,
    /// `POST /v1/messages/count_tokens`.
    CountTokens,
    /// Anything else: `HEAD /`, unknown paths, bodies that could not be read.
    Other,
}

/// The request headers a test may ask about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectedHeaders {
    pub anthropic_version: Option<String>,
    /// `anthropic-beta`, split at commas.
    pub anthropic_beta: Vec<String>,
    pub user_agent: Option<String>,
    /// An `x-api-key` came (its value is not kept).
    pub api_key: bool,
    /// An `authorization: Bearer …` came (its value is not kept).
    pub bearer_token: bool,
}

/// One answered request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The `request-id` it was answered with.
    pub request_id: String,
    pub at: Timestamp,
    pub method: String,
    /// The path, without the query.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    pub kind: RequestKind,
    /// What a side request was for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<Side>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    pub stream: bool,
    /// The last user message's text (tool results included), for messages requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_results: Vec<ToolResult>,
    /// The text of every earlier user message, oldest first: the history it carried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<String>,
    /// The skills Claude Code listed to the model (plugin commands as `plugin:name`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
    /// The names of the tools offered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    pub status: u16,
    /// The usage answered (for `count_tokens`, `input_tokens` alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Which rule answered a turn, or the default or side answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<AnsweredBy>,
    /// The error type answered, in the body or the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub headers: SelectedHeaders,
}

impl ModelRequest {
    pub fn is_turn(&self) -> bool {
        self.kind == RequestKind::Turn
    }
}

/// The sum of the usage answered to `requests`: what a session's transcript must add up
/// to.
pub fn total_usage<'a>(requests: impl IntoIterator<Item = &'a ModelRequest>) -> Usage {
    requests.into_iter().filter_map(|r| r.usage).fold(Usage::default(), |sum, u| Usage {
        input_tokens: sum.input_tokens + u.input_tokens,
        output_tokens: sum.output_tokens + u.output_tokens,
        cache_creation_input_tokens: sum.cache_creation_input_tokens
            + u.cache_creation_input_tokens,
        cache_read_input_tokens: sum.cache_read_input_tokens + u.cache_read_input_tokens,
    })
}

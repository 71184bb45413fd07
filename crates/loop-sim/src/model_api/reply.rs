//! One scripted answer ([`Reply`]): a text, a tool use, an HTTP error, a subscriber's
//! usage limit or a stream that breaks, with how it is delivered (a delay before the
//! first byte, a pace between stream events), the usage to answer instead of the
//! estimate, and extra response headers.
//!
//! In JSON (a rule's `replies`), `kind` names the variant and the rest are its fields:
//! `{"kind": "text", "text": "hi", "delay_ms": 200}`,
//! `{"kind": "usage_limit", "resets_at": 1765000000, "window": "five_hour"}`.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::usage::Usage;

/// Why a text reply ended, as `stop_reason` says it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    #[default]
    EndTurn,
    MaxTokens,
    ToolUse,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::ToolUse => "tool_use",
        }
    }
}

/// Which subscriber usage limit a [`ReplyKind::UsageLimit`] says was hit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitWindow {
    /// The session limit (`five_hour`).
    #[default]
    FiveHour,
    /// The weekly limit (`seven_day`).
    SevenDay,
}

/// What a reply is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReplyKind {
    /// One text block.
    Text {
        text: String,
        #[serde(default)]
        stop_reason: StopReason,
    },
    /// A tool use (after an optional text block); `stop_reason: tool_use`.
    ToolUse {
        name: String,
        input: Value,
        /// The `tool_use` id; one is made (`toolu_…`) when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// An HTTP error in Anthropic's shape, before any byte of a message.
    Error { status: u16, error_type: String, message: String },
    /// A subscriber's usage limit: a 429 with the `anthropic-ratelimit-unified-*` headers
    /// Claude Code reads, resetting at `resets_at` (seconds since the Unix epoch).
    UsageLimit {
        resets_at: i64,
        #[serde(default)]
        window: LimitWindow,
    },
    /// A stream that starts, sends `text` if any, then an `event: error`; as an HTTP
    /// error of the type's status when the request did not stream.
    StreamError {
        error_type: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
}

/// One scripted answer: what it is, and how it is delivered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    #[serde(flatten)]
    pub kind: ReplyKind,
    /// Milliseconds before the first byte of the answer.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
    /// Milliseconds between stream events.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pace_ms: u64,
    /// The usage to answer instead of the estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Extra response headers (on errors and messages alike).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Reply {
    fn of(kind: ReplyKind) -> Reply {
        Reply { kind, delay_ms: 0, pace_ms: 0, usage: None, headers: BTreeMap::new() }
    }

    /// A text that ends the turn.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::of(ReplyKind::Text { text: text.into(), stop_reason: StopReason::EndTurn })
    }

    /// A text cut off by `max_tokens`.
    pub fn truncated(text: impl Into<String>) -> Reply {
        Reply::of(ReplyKind::Text { text: text.into(), stop_reason: StopReason::MaxTokens })
    }

    /// A call of tool `name` with `input`.
    pub fn tool_use(name: impl Into<String>, input: Value) -> Reply {
        Reply::of(ReplyKind::ToolUse { name: name.into(), input, id: None, text: None })
    }

    /// An HTTP error: `status`, Anthropic's error `error_type` (`rate_limit_error`,
    /// `overloaded_error`, …) and `message`.
    pub fn error(status: u16, error_type: impl Into<String>, message: impl Into<String>) -> Reply {
        Reply::of(ReplyKind::Error {
            status,
            error_type: error_type.into(),
            message: message.into(),
        })
    }

    /// A subscriber's session limit (five hours) that resets at `resets_at`.
    pub fn usage_limit(resets_at: Timestamp) -> Reply {
        Reply::limit(LimitWindow::FiveHour, resets_at)
    }

    /// A subscriber's usage limit of `window` that resets at `resets_at`.
    pub fn limit(window: LimitWindow, resets_at: Timestamp) -> Reply {
        Reply::of(ReplyKind::UsageLimit { resets_at: resets_at.as_second(), window })
    }

    /// A stream that breaks with an `event: error` of `error_type`.
    pub fn stream_error(error_type: impl Into<String>, message: impl Into<String>) -> Reply {
        Reply::of(ReplyKind::StreamError {
            error_type: error_type.into(),
            message: message.into(),
            text: None,
        })
    }

    /// Text before a tool use, or before a stream's error; other replies are unchanged.
    pub fn preceded_by(mut self, before: impl Into<String>) -> Reply {
        if let ReplyKind::ToolUse { text, .. } | ReplyKind::StreamError { text, .. } =
            &mut self.kind
        {
            *text = Some(before.into());
        }
        self
    }

    /// The `tool_use` id to answer with, so a later rule can match its result; only for
    /// tool uses.
    pub fn with_id(mut self, tool_use_id: impl Into<String>) -> Reply {
        if let ReplyKind::ToolUse { id, .. } = &mut self.kind {
            *id = Some(tool_use_id.into());
        }
        self
    }

    /// Waits `delay` before the first byte.
    pub fn delayed(mut self, delay: Duration) -> Reply {
        self.delay_ms = delay.as_millis() as u64;
        self
    }

    /// Waits `pace` between stream events.
    pub fn paced(mut self, pace: Duration) -> Reply {
        self.pace_ms = pace.as_millis() as u64;
        self
    }

    /// Answers exactly `usage` instead of the estimate.
    pub fn with_usage(mut self, usage: Usage) -> Reply {
        self.usage = Some(usage);
        self
    }

    /// Adds a response header (`retry-after`, `anthropic-ratelimit-unified-status`, …).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Reply {
        self.headers.insert(name.into().to_ascii_lowercase(), value.into());
        self
    }

    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.delay_ms)
    }

    pub fn pace(&self) -> Duration {
        Duration::from_millis(self.pace_ms)
    }
}

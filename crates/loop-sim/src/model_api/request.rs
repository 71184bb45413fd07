//! What a Messages API request asks, read from its JSON body: the facts the stand-in
//! model decides on and the request log shows.
//!
//! Three readings matter and are easy to get wrong against Claude Code:
//! - **Turn or side request.** Claude Code sends each user turn as a request *with*
//!   `tools` (two dozen of them) and, beside it, requests without tools: the session
//!   title ("Generate a concise, sentence-case title…", answered as JSON through
//!   `output_config.format`), a one-token quota probe in subscriber mode. Only turns are
//!   scripted; a side request is recognised by carrying no tools.
//! - **The last user message.** The last message is often `role: system` (a
//!   mid-conversation system message), so it is the last `role: user` message; its text
//!   is its text blocks without `<system-reminder>` sections, then the content of its
//!   `tool_result` blocks.
//! - **The conversation.** Claude Code names its session in the
//!   `X-Claude-Code-Session-Id` header and in `metadata.user_id`, a JSON *string* holding
//!   `session_id`; either one names the conversation.
//!
//! Pure: a body and a header in, [`Prompt`] or the message of a 400 out. Nothing from
//! the body is trusted to have any shape.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::usage::InputSize;

/// Which endpoint a body was sent to; `count_tokens` needs no `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Messages,
    CountTokens,
}

/// What a side request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The session title Claude Code asks for after the first prompt.
    Title,
    /// Anything else sent without tools (the subscriber-mode quota probe, …).
    Other,
}

/// A `tool_result` block of the last user message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    pub tool_use_id: String,
    /// Its content as text (text blocks joined by line breaks, reminders removed).
    pub content: String,
    #[serde(default)]
    pub is_error: bool,
}

/// A readable Messages request.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub model: String,
    pub stream: bool,
    /// The names of the tools it offers; none for a side request.
    pub tools: Vec<String>,
    /// `None` for a turn (it offers tools); what it is for otherwise.
    pub side: Option<Side>,
    /// The last user message's text, then its tool results' content, by line.
    pub user_text: String,
    pub tool_results: Vec<ToolResult>,
    /// The same text of every user message before it, oldest first (empty ones left
    /// out): the conversation as the client sent it again.
    pub history: Vec<String>,
    /// The skills and commands Claude Code lists to the model ("The following skills
    /// are available…"), by name.
    pub skills: Vec<String>,
    pub conversation: Option<String>,
    /// The JSON schema the answer must follow (`output_config.format.schema`), if any.
    pub output_schema: Option<Value>,
    pub size: InputSize,
}

/// The message of a 400 `invalid_request_error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

/// What the title request's system prompt starts with in Claude Code 2.1.197.
const TITLE_INSTRUCTION: &str = "Generate a concise, sentence-case title";

/// What Claude Code 2.1.197 writes before the skills (plugin commands among them) it
/// offers the model.
const SKILLS_HEADING: &str = "The following skills are available for use with the Skill tool:";

const REMINDER_OPEN: &str = "<system-reminder>";
const REMINDER_CLOSE: &str = "</system-reminder>";

/// Reads a request body sent to `endpoint`; `session_header` is the
/// `X-Claude-Code-Session-Id` header, if it came.
pub fn read(
    body: &[u8],
    endpoint: Endpoint,
    session_header: Option<&str>,
) -> Result<Prompt, Invalid> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|err| Invalid(format!("the request body is not valid JSON: {err}")))?;
    let Value::Object(body) = value else {
        return Err(Invalid("the request body must be a JSON object".to_owned()));
    };
    let model = match body.get("model") {
        Some(Value::String(model)) => model.clone(),
        Some(_) => return Err(Invalid("model: Input should be a valid string".to_owned())),
        None => return Err(Invalid("model: Field required".to_owned())),
    };
    let messages = match body.get("messages") {
        Some(Value::Array(messages)) => messages,
        Some(_) => return Err(Invalid("messages: Input should be a valid list".to_owned())),
        None => return Err(Invalid("messages: Field required".to_owned())),
    };
    for (i, message) in messages.iter().enumerate() {
        if !message.get("role").is_some_and(Value::is_string) {
            return Err(Invalid(format!("messages.{i}.role: Field required")));
        }
    }
    if endpoint == Endpoint::Messages {
        match body.get("max_tokens") {
            Some(max) if max.as_u64().is_some() => {}
            Some(_) => {
                return Err(Invalid("max_tokens: Input should be a valid integer".to_owned()));
            }
            None => return Err(Invalid("max_tokens: Field required".to_owned())),
        }
    }
    let tools: Vec<String> = match body.get("tools") {
        Some(Value::Array(tools)) => tools
            .iter()
            .map(|tool| tool.get("name").and_then(Value::as_str).unwrap_or_default().to_owned())
            .collect(),
        _ => Vec::new(),
    };
    let output_schema = body
        .get("output_config")
        .and_then(|config| config.get("format"))
        .filter(|format| format.get("type").and_then(Value::as_str) == Some("json_schema"))
        .and_then(|format| format.get("schema"))
        .cloned();
    let side = tools.is_empty().then(|| side_kind(&body, output_schema.as_ref()));
    let last_user = messages
        .iter()
        .rev()
        .find(|message| message.get("role").and_then(Value::as_str) == Some("user"));
    let (user_text, tool_results) = last_user.map(user_message).unwrap_or_default();
    let users: Vec<&Value> = messages
        .iter()
        .filter(|message| message.get("role").and_then(Value::as_str) == Some("user"))
        .collect();
    let history = users[..users.len().saturating_sub(1)]
        .iter()
        .map(|message| user_message(message).0)
        .filter(|text| !text.is_empty())
        .collect();
    let skills = messages
        .iter()
        .flat_map(|message| texts(message.get("content").unwrap_or(&Value::Null)))
        .flat_map(listed_skills)
        .collect();
    let json_len = |value: Option<&Value>| value.map_or(0, |v| v.to_string().chars().count());
    let size = InputSize {
        whole: json_len(body.get("system"))
            + json_len(body.get("messages"))
            + json_len(body.get("tools")),
        tail: json_len(messages.last()),
        cached: body.contains_key("cache_control") || body.values().any(mentions_cache_control),
    };
    Ok(Prompt {
        model,
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        tools,
        side,
        user_text,
        tool_results,
        history,
        skills,
        conversation: conversation(&body, session_header),
        output_schema,
        size,
    })
}

/// A side request is for the title when its system prompt or its answer's schema says so.
fn side_kind(body: &Map<String, Value>, schema: Option<&Value>) -> Side {
    let wants_title = schema
        .and_then(|schema| schema.get("properties"))
        .is_some_and(|properties| properties.get("title").is_some());
    let asks_title = body
        .get("system")
        .is_some_and(|system| texts(system).iter().any(|t| t.contains(TITLE_INSTRUCTION)));
    if wants_title || asks_title { Side::Title } else { Side::Other }
}

/// The text of a message's content and its tool results.
fn user_message(message: &Value) -> (String, Vec<ToolResult>) {
    let content = message.get("content").unwrap_or(&Value::Null);
    let mut lines: Vec<String> =
        texts(content).iter().filter_map(|t| without_reminders(t)).collect();
    let mut results = Vec::new();
    if let Value::Array(blocks) = content {
        for block in blocks {
            if block.get("type").and_then(Value::as_str) != Some("tool_result") {
                continue;
            }
            let content = block.get("content").map(texts).unwrap_or_default();
            let content: Vec<String> =
                content.iter().filter_map(|t| without_reminders(t)).collect();
            results.push(ToolResult {
                tool_use_id: block
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                content: content.join("\n"),
                is_error: block.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            });
        }
    }
    lines.extend(results.iter().map(|r| r.content.clone()).filter(|c| !c.is_empty()));
    (lines.join("\n"), results)
}

/// The names in a "The following skills are available for use with the Skill tool:" list
/// (`- name: description` lines, up to the first line that is not one).
fn listed_skills(text: &str) -> Vec<String> {
    let Some(at) = text.find(SKILLS_HEADING) else { return Vec::new() };
    text[at + SKILLS_HEADING.len()..]
        .lines()
        .skip_while(|line| line.trim().is_empty())
        .map_while(|line| line.strip_prefix("- "))
        .filter_map(|entry| entry.split_once(": ").map(|(name, _)| name.trim().to_owned()))
        .collect()
}

/// The texts of a content value: the string itself, or its `text` blocks in order.
fn texts(content: &Value) -> Vec<&str> {
    match content {
        Value::String(text) => vec![text.as_str()],
        Value::Array(blocks) => blocks
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    }
}

/// `text` without its `<system-reminder>…</system-reminder>` sections, trimmed; `None`
/// when nothing else is left. An unclosed reminder runs to the end.
fn without_reminders(text: &str) -> Option<String> {
    let mut kept = String::new();
    let mut rest = text;
    while let Some(open) = rest.find(REMINDER_OPEN) {
        kept.push_str(&rest[..open]);
        let after = &rest[open + REMINDER_OPEN.len()..];
        rest =
            after.find(REMINDER_CLOSE).map_or("", |close| &after[close + REMINDER_CLOSE.len()..]);
    }
    kept.push_str(rest);
    let kept = kept.trim();
    (!kept.is_empty()).then(|| kept.to_owned())
}

/// The conversation a request belongs to: the session header, else the `session_id` in
/// `metadata.user_id` (a JSON string), else `metadata.user_id` itself.
fn conversation(body: &Map<String, Value>, session_header: Option<&str>) -> Option<String> {
    if let Some(session) = session_header.filter(|s| !s.is_empty()) {
        return Some(session.to_owned());
    }
    let user_id = body.get("metadata")?.get("user_id")?.as_str()?;
    let from_json = serde_json::from_str::<Value>(user_id)
        .ok()
        .and_then(|inner| inner.get("session_id")?.as_str().map(str::to_owned));
    from_json.or_else(|| (!user_id.is_empty()).then(|| user_id.to_owned()))
}

/// Whether `cache_control` appears anywhere in the request.
fn mentions_cache_control(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            map.contains_key("cache_control") || map.values().any(mentions_cache_control)
        }
        Value::Array(items) => items.iter().any(mentions_cache_control),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn prompt(body: Value) -> Prompt {
        read(body.to_string().as_bytes(), Endpoint::Messages, None).unwrap()
    }

    /// The first turn as Claude Code 2.1.197 sends it: a reminder block, the prompt, and a
    /// mid-conversation system message last.
    fn claude_code_turn() -> Value {
        json!({
            "model": "claude-opus-4-8",
            "max_tokens": 64000,
            "stream": true,
            "system": [{"type": "text", "text": "You are Claude Code", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "Bash", "input_schema": {}}, {"name": "Read", "input_schema": {}}],
            "metadata": {"user_id": "{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"s-1\"}"},
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "<system-reminder>\nToday's date is 2026-12-03.\n</system-reminder>\n\n"},
                    {"type": "text", "text": "say hello please", "cache_control": {"type": "ephemeral"}}
                ]},
                {"role": "system", "content": "Available agent types for the Agent tool: …"}
            ]
        })
    }

    #[test]
    fn a_resumed_conversation_carries_its_history_and_the_skills_listed() {
        let mut turn = claude_code_turn();
        let listing = "<system-reminder>\nThe following skills are available for use with the Skill tool:\n\n- deep-research: Deep research\n- the-loop:work-on: Start work\n\nMore text\n</system-reminder>";
        turn["messages"] = json!([
            {"role": "user", "content": [{"type": "text", "text": listing}, {"type": "text", "text": "first prompt"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
            {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"}]},
            {"role": "user", "content": "second prompt"},
        ]);
        let read = prompt(turn);
        assert_eq!(read.user_text, "second prompt");
        assert_eq!(read.history, ["first prompt"], "reminder-only messages left out");
        assert_eq!(read.skills, ["deep-research", "the-loop:work-on"]);
    }

    #[test]
    fn a_claude_code_turn_is_read_past_its_reminders_and_system_message() {
        let turn = prompt(claude_code_turn());
        assert_eq!(turn.side, None, "it offers tools");
        assert_eq!(turn.tools, ["Bash", "Read"]);
        assert_eq!(turn.user_text, "say hello please");
        assert_eq!(turn.conversation.as_deref(), Some("s-1"), "from metadata.user_id");
        assert!(turn.stream);
        assert!(turn.size.cached);
        assert!(turn.size.tail < turn.size.whole);
    }

    #[test]
    fn the_session_header_names_the_conversation_first() {
        let body = claude_code_turn().to_string();
        let turn = read(body.as_bytes(), Endpoint::Messages, Some("from-header")).unwrap();
        assert_eq!(turn.conversation.as_deref(), Some("from-header"));
        let plain = prompt(
            json!({"model": "m", "max_tokens": 1, "metadata": {"user_id": "user-7"}, "messages": []}),
        );
        assert_eq!(
            plain.conversation.as_deref(),
            Some("user-7"),
            "a user_id that is not JSON names it as it is"
        );
        let none = prompt(json!({"model": "m", "max_tokens": 1, "messages": []}));
        assert_eq!(none.conversation, None);
    }

    #[test]
    fn tool_results_are_part_of_the_text_and_listed_apart() {
        let turn = prompt(json!({
            "model": "m", "max_tokens": 10, "tools": [{"name": "Bash"}],
            "messages": [
                {"role": "user", "content": "run it"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hi\n<system-reminder>watch out</system-reminder>"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true, "content": [{"type": "text", "text": "denied"}]},
                    {"type": "text", "text": "and then?"}
                ]}
            ]
        }));
        assert_eq!(turn.user_text, "and then?\nhi\ndenied");
        assert_eq!(
            turn.tool_results,
            [
                ToolResult { tool_use_id: "toolu_1".into(), content: "hi".into(), is_error: false },
                ToolResult {
                    tool_use_id: "toolu_2".into(),
                    content: "denied".into(),
                    is_error: true
                },
            ]
        );
        assert!(!turn.size.cached, "no cache_control anywhere");
    }

    #[test]
    fn requests_without_tools_are_side_requests_and_the_title_one_is_known() {
        let title = prompt(json!({
            "model": "claude-haiku-4-5-20251001", "max_tokens": 32000, "tools": [],
            "system": [{"type": "text", "text": "Generate a concise, sentence-case title (3-7 words) …"}],
            "output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {"title": {"type": "string"}}}}},
            "messages": [{"role": "user", "content": [{"type": "text", "text": "<session>\nsay hello\n</session>"}]}]
        }));
        assert_eq!(title.side, Some(Side::Title));
        assert!(title.output_schema.is_some());
        let by_schema_alone = prompt(json!({
            "model": "m", "max_tokens": 1, "messages": [],
            "output_config": {"format": {"type": "json_schema", "schema": {"properties": {"title": {}}}}}
        }));
        assert_eq!(by_schema_alone.side, Some(Side::Title));
        let quota = prompt(
            json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]}),
        );
        assert_eq!(quota.side, Some(Side::Other));
        assert_eq!(quota.user_text, "quota");
    }

    #[test]
    fn reminders_are_cut_wherever_they_sit() {
        assert_eq!(without_reminders("<system-reminder>x</system-reminder>"), None);
        assert_eq!(
            without_reminders("a <system-reminder>x</system-reminder> b").as_deref(),
            Some("a  b")
        );
        assert_eq!(without_reminders("a <system-reminder>never closed").as_deref(), Some("a"));
        assert_eq!(without_reminders("  plain  ").as_deref(), Some("plain"));
    }

    #[test]
    fn malformed_bodies_name_what_is_wrong() {
        let invalid = |body: &str, endpoint| read(body.as_bytes(), endpoint, None).unwrap_err().0;
        assert!(invalid("{not json", Endpoint::Messages).contains("not valid JSON"));
        assert_eq!(invalid("[1]", Endpoint::Messages), "the request body must be a JSON object");
        assert_eq!(
            invalid(r#"{"messages":[],"max_tokens":1}"#, Endpoint::Messages),
            "model: Field required"
        );
        assert_eq!(
            invalid(r#"{"model":7,"messages":[],"max_tokens":1}"#, Endpoint::Messages),
            "model: Input should be a valid string"
        );
        assert_eq!(
            invalid(r#"{"model":"m","max_tokens":1}"#, Endpoint::Messages),
            "messages: Field required"
        );
        assert_eq!(
            invalid(r#"{"model":"m","messages":{},"max_tokens":1}"#, Endpoint::Messages),
            "messages: Input should be a valid list"
        );
        assert_eq!(
            invalid(r#"{"model":"m","messages":[{}],"max_tokens":1}"#, Endpoint::Messages),
            "messages.0.role: Field required"
        );
        assert_eq!(
            invalid(r#"{"model":"m","messages":[]}"#, Endpoint::Messages),
            "max_tokens: Field required"
        );
        assert_eq!(
            invalid(r#"{"model":"m","messages":[],"max_tokens":"9"}"#, Endpoint::Messages),
            "max_tokens: Input should be a valid integer"
        );
        let counted = read(br#"{"model":"m","messages":[]}"#, Endpoint::CountTokens, None);
        assert!(counted.is_ok(), "count_tokens needs no max_tokens");
    }

    #[test]
    fn odd_blocks_are_ignored_not_fatal() {
        let turn = prompt(json!({
            "model": "m", "max_tokens": 1, "tools": [{"no_name": true}, 3],
            "messages": [{"role": "user", "content": [7, {"type": "image"}, {"type": "text"}, {"type": "tool_result"}, {"type": "text", "text": "ok"}]}]
        }));
        assert_eq!(turn.user_text, "ok");
        assert_eq!(turn.tools, ["", ""]);
        assert_eq!(turn.tool_results.len(), 1);
    }
}

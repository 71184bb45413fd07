//! Anthropic's Messages API shapes for an answer: the JSON message, the server-sent
//! event stream, the error body, and the ids (`msg_…`, `toolu_…`, `req_…`).
//!
//! The stream follows the documented order: `message_start` (the message with empty
//! `content` and the input usage, `output_tokens: 1`), then per content block
//! `content_block_start`, `content_block_delta`s and `content_block_stop` (a `ping` after
//! the first block starts), then `message_delta` (`stop_reason` and the cumulative usage)
//! and `message_stop`. Text comes as `text_delta`s and a tool's input as
//! `input_json_delta`s whose `partial_json` pieces concatenate to the input's JSON. A
//! broken stream ends with `event: error` instead.
//!
//! Pure: values in, JSON and bytes out.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::usage::Usage;

/// Characters of text per `text_delta`.
const TEXT_PIECE: usize = 24;
/// Characters of JSON per `input_json_delta`.
const JSON_PIECE: usize = 16;

/// Makes ids unique to one server: a nonce (so two servers, or one restarted for a
/// resumed session, never repeat a message id, which transcripts de-duplicate by) and a
/// counter.
#[derive(Debug)]
pub struct Ids {
    nonce: u64,
    next: AtomicU64,
}

impl Ids {
    pub fn new(nonce: u64) -> Ids {
        Ids { nonce: nonce & 0xffff_ffff_ffff, next: AtomicU64::new(1) }
    }

    /// `prefix_01` then 24 characters: 12 of nonce (hex), 12 of counter.
    pub fn make(&self, prefix: &str) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{prefix}_01{:012x}{n:012}", self.nonce)
    }
}

/// One content block of an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Text(String),
    ToolUse { id: String, name: String, input: Value },
}

impl Block {
    /// What the block costs in output characters.
    pub fn chars(&self) -> usize {
        match self {
            Block::Text(text) => text.chars().count(),
            Block::ToolUse { name, input, .. } => {
                name.chars().count() + input.to_string().chars().count()
            }
        }
    }

    fn start(&self) -> Value {
        match self {
            Block::Text(_) => json!({"type": "text", "text": ""}),
            Block::ToolUse { id, name, .. } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": {}})
            }
        }
    }

    fn deltas(&self) -> Vec<Value> {
        match self {
            Block::Text(text) => pieces(text, TEXT_PIECE)
                .into_iter()
                .map(|piece| json!({"type": "text_delta", "text": piece}))
                .collect(),
            Block::ToolUse { input, .. } => {
                // As the API does, the input's JSON starts with an empty piece.
                let json = input.to_string();
                let mut deltas = vec![json!({"type": "input_json_delta", "partial_json": ""})];
                deltas.extend(
                    pieces(&json, JSON_PIECE)
                        .into_iter()
                        .map(|piece| json!({"type": "input_json_delta", "partial_json": piece})),
                );
                deltas
            }
        }
    }

    fn whole(&self) -> Value {
        match self {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
        }
    }
}

/// A whole answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: String,
    pub model: String,
    pub content: Vec<Block>,
    pub stop_reason: &'static str,
    pub usage: Usage,
}

/// `usage` as the API writes it; every cache write is a five-minute one.
fn usage_json(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_creation_input_tokens,
            "ephemeral_1h_input_tokens": 0,
        },
        "output_tokens": usage.output_tokens,
    })
}

impl Message {
    /// The non-streaming answer.
    pub fn json(&self) -> Value {
        json!({
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": self.content.iter().map(Block::whole).collect::<Vec<_>>(),
            "stop_reason": self.stop_reason,
            "stop_sequence": null,
            "usage": usage_json(&self.usage),
        })
    }

    /// `message_start`: the message so far, no content, one output token.
    fn start(&self) -> (&'static str, Value) {
        let usage = Usage { output_tokens: 1, ..self.usage };
        let message = json!({
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": usage_json(&usage),
        });
        ("message_start", json!({"type": "message_start", "message": message}))
    }

    /// The answer's stream events, in order.
    pub fn events(&self) -> Vec<(&'static str, Value)> {
        let mut events = vec![self.start()];
        for (index, block) in self.content.iter().enumerate() {
            events.extend(block_events(index, block, block.deltas()));
        }
        if self.content.is_empty() {
            events.push(ping());
        }
        events.push((
            "message_delta",
            json!({
                "type": "message_delta",
                "delta": {"stop_reason": self.stop_reason, "stop_sequence": null},
                "usage": usage_json(&self.usage),
            }),
        ));
        events.push(("message_stop", json!({"type": "message_stop"})));
        events
    }

    /// A stream that starts as this message would, sends the text of its first block if
    /// it is one, and breaks with an error of `error_type`.
    pub fn broken_events(&self, error_type: &str, message: &str) -> Vec<(&'static str, Value)> {
        let mut events = vec![self.start()];
        match self.content.first() {
            Some(block @ Block::Text(_)) => {
                let mut started = block_events(0, block, block.deltas());
                started.pop(); // no content_block_stop: the stream breaks mid-block
                events.extend(started);
            }
            _ => events.push(ping()),
        }
        events.push(("error", error_body(error_type, message, None)));
        events
    }
}

fn ping() -> (&'static str, Value) {
    ("ping", json!({"type": "ping"}))
}

/// `content_block_start`, a `ping` after the first, the deltas, `content_block_stop`.
fn block_events(index: usize, block: &Block, deltas: Vec<Value>) -> Vec<(&'static str, Value)> {
    let mut events = vec![(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": block.start()}),
    )];
    if index == 0 {
        events.push(ping());
    }
    events.extend(deltas.into_iter().map(|delta| {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        )
    }));
    events.push(("content_block_stop", json!({"type": "content_block_stop", "index": index})));
    events
}

/// One server-sent event.
pub fn sse(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// Anthropic's error body; the request id rides along when there is one.
pub fn error_body(error_type: &str, message: &str, request_id: Option<&str>) -> Value {
    let mut body = json!({"type": "error", "error": {"type": error_type, "message": message}});
    if let Some(id) = request_id {
        body["request_id"] = json!(id);
    }
    body
}

/// The HTTP status the API answers with for an error type.
pub fn status_of(error_type: &str) -> u16 {
    match error_type {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        _ => 500,
    }
}

/// `text` in pieces of at most `size` characters (never splitting a character); one
/// empty piece for empty text.
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars.chunks(size).map(|chunk| chunk.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(content: Vec<Block>, stop_reason: &'static str) -> Message {
        let usage = Usage {
            input_tokens: 5,
            output_tokens: 9,
            cache_creation_input_tokens: 3,
            cache_read_input_tokens: 2,
        };
        Message { id: "msg_x".into(), model: "m".into(), content, stop_reason, usage }
    }

    fn names(events: &[(&'static str, Value)]) -> Vec<&'static str> {
        events.iter().map(|(name, _)| *name).collect()
    }

    #[test]
    fn ids_carry_their_prefix_the_nonce_and_a_counter() {
        let ids = Ids::new(0xabc);
        assert_eq!(ids.make("msg"), "msg_01000000000abc000000000001");
        assert_eq!(ids.make("toolu"), "toolu_01000000000abc000000000002");
        assert_ne!(Ids::new(1).make("msg"), Ids::new(2).make("msg"));
    }

    #[test]
    fn a_tool_use_streams_in_order_and_its_pieces_make_the_input() {
        let input =
            json!({"command": "echo hi", "description": "Say hi with a long enough description"});
        let answer = message(
            vec![
                Block::Text("Let me run that.".into()),
                Block::ToolUse { id: "toolu_1".into(), name: "Bash".into(), input: input.clone() },
            ],
            "tool_use",
        );
        let events = answer.events();
        assert_eq!(
            names(&events)[..8],
            [
                "message_start",
                "content_block_start",
                "ping",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta"
            ]
        );
        assert_eq!(
            names(&events)[events.len() - 3..],
            ["content_block_stop", "message_delta", "message_stop"]
        );
        let start = &events[0].1["message"];
        assert_eq!(start["usage"]["output_tokens"], 1);
        assert_eq!(start["usage"]["input_tokens"], 5);
        assert_eq!(start["content"], json!([]));
        let partial: String = events
            .iter()
            .filter(|(_, e)| e["index"] == 1 && e["delta"]["type"] == "input_json_delta")
            .map(|(_, e)| e["delta"]["partial_json"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(serde_json::from_str::<Value>(&partial).unwrap(), input);
        assert!(
            events.iter().filter(|(n, _)| *n == "content_block_delta").count() > 3,
            "the input comes in pieces"
        );
        let delta = &events[events.len() - 2].1;
        assert_eq!(delta["delta"]["stop_reason"], "tool_use");
        assert_eq!(delta["usage"]["output_tokens"], 9);
        assert_eq!(
            events[5].1["content_block"],
            json!({"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}})
        );
    }

    #[test]
    fn the_json_form_holds_the_same_blocks_and_usage() {
        let answer = message(vec![Block::Text("hello".into())], "end_turn");
        let json = answer.json();
        assert_eq!(json["content"], json!([{"type": "text", "text": "hello"}]));
        assert_eq!(
            json["usage"],
            json!({
                "input_tokens": 5, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 2,
                "cache_creation": {"ephemeral_5m_input_tokens": 3, "ephemeral_1h_input_tokens": 0},
                "output_tokens": 9
            })
        );
        assert_eq!(json["stop_reason"], "end_turn");
        assert_eq!(json["type"], "message");
    }

    #[test]
    fn a_broken_stream_ends_with_an_error_event() {
        let answer = message(vec![Block::Text("half an ans".into())], "end_turn");
        let events = answer.broken_events("overloaded_error", "Overloaded");
        assert_eq!(
            names(&events),
            ["message_start", "content_block_start", "ping", "content_block_delta", "error"]
        );
        assert_eq!(
            events[4].1,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        );
        let silent = message(vec![], "end_turn").broken_events("api_error", "boom");
        assert_eq!(names(&silent), ["message_start", "ping", "error"]);
    }

    #[test]
    fn text_is_cut_on_character_boundaries() {
        assert_eq!(pieces("", 3), [""]);
        assert_eq!(pieces("héllo wörld", 4), ["héll", "o wö", "rld"]);
        assert_eq!(
            sse("ping", &json!({"type": "ping"})),
            "event: ping\ndata: {\"type\":\"ping\"}\n\n"
        );
        assert_eq!(status_of("overloaded_error"), 529);
        assert_eq!(status_of("something_new"), 500);
    }
}

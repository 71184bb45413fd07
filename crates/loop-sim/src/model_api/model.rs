//! The stand-in model's decision for one readable request: which answer, with what usage,
//! after what delay. The HTTP layer only carries it out.
//!
//! A turn takes the script's reply ([`Script::choose`]) or, when no rule applies, the
//! default `stand-in model: received "<first line>"`. A side request is answered apart
//! and never uses the script: the title request gets `{"title": "<a few words of the
//! prompt>"}` (any JSON schema gets an object of its properties), anything else `ok`.
//! Usage is scripted or estimated ([`CacheLedger`]); a usage-limit reply becomes a 429
//! with the `anthropic-ratelimit-unified-*` headers a subscriber's Claude Code reads.
//!
//! Pure: the clock comes in as `now`.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::reply::{LimitWindow, Reply, ReplyKind, StopReason};
use super::request::Prompt;
use super::script::Script;
use super::usage::{CacheLedger, Usage, tokens};
use super::wire::{Block, Ids, Message};

/// What a 429 for a subscriber's usage limit says.
const LIMIT_MESSAGE: &str =
    "This request would exceed your account's rate limit. Please try again later.";

/// Where an answer came from, as the request log shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum AnsweredBy {
    /// Step `step` of rule `rule`.
    Rule { rule: usize, step: usize },
    /// The account's usage limit ([`StandInModel::limit`]).
    Limit,
    /// No rule applied.
    Default,
    /// A side request's own answer.
    Side,
}

/// What is answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A message, streamed or whole.
    Message(Message),
    /// A stream that breaks with `event: error` (the message so far); an HTTP error of
    /// the error type's status when the request did not stream.
    Broken { message: Message, error_type: String, error: String },
    /// An HTTP error.
    Error { status: u16, error_type: String, message: String },
}

/// The whole decision for one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub outcome: Outcome,
    pub by: AnsweredBy,
    /// Before the first byte.
    pub delay: Duration,
    /// Between stream events.
    pub pace: Duration,
    /// Extra response headers.
    pub headers: BTreeMap<String, String>,
}

impl Decision {
    /// The usage answered, if a message was.
    pub fn usage(&self, stream: bool) -> Option<Usage> {
        match &self.outcome {
            Outcome::Message(message) => Some(message.usage),
            Outcome::Broken { message, .. } if stream => Some(message.usage),
            _ => None,
        }
    }
}

/// The script and the cache the model keeps between requests.
#[derive(Debug, Default)]
pub struct StandInModel {
    pub script: Script,
    pub cache: CacheLedger,
    /// The account's usage limit: until its reset (seconds since the Unix epoch) every
    /// turn is refused with it, whatever the script says, as the real API refuses every
    /// request of a subscriber who hit it.
    pub limit: Option<(i64, LimitWindow)>,
}

impl StandInModel {
    /// Decides the answer to `prompt` at `now`.
    pub fn decide(&mut self, prompt: &Prompt, ids: &Ids, now: Timestamp) -> Decision {
        let limit = self.limit.filter(|(resets_at, _)| now.as_second() < *resets_at);
        let (reply, by) = if prompt.side.is_some() {
            (Reply::text(side_text(prompt)), AnsweredBy::Side)
        } else if let Some((resets_at, window)) = limit {
            let resets_at = Timestamp::from_second(resets_at).unwrap_or(now);
            (Reply::limit(window, resets_at), AnsweredBy::Limit)
        } else {
            match self.script.choose(prompt, || ids.make("toolu")) {
                Some(chosen) => {
                    (chosen.reply, AnsweredBy::Rule { rule: chosen.rule, step: chosen.step })
                }
                None => (Reply::text(default_text(&prompt.user_text)), AnsweredBy::Default),
            }
        };
        let mut headers = BTreeMap::new();
        let mut message = |content: Vec<Block>, stop_reason: StopReason| {
            let mut usage = self
                .cache
                .input_usage((prompt.conversation.clone(), prompt.side.is_some()), prompt.size);
            usage.output_tokens = tokens(content.iter().map(Block::chars).sum());
            Message {
                id: ids.make("msg"),
                model: prompt.model.clone(),
                content,
                stop_reason: stop_reason.as_str(),
                usage: reply.usage.unwrap_or(usage),
            }
        };
        let outcome = match &reply.kind {
            ReplyKind::Text { text, stop_reason } => {
                Outcome::Message(message(vec![Block::Text(text.clone())], *stop_reason))
            }
            ReplyKind::ToolUse { name, input, id, text } => {
                let mut content: Vec<Block> = text.iter().map(|t| Block::Text(t.clone())).collect();
                let id = id.clone().unwrap_or_else(|| ids.make("toolu"));
                content.push(Block::ToolUse { id, name: name.clone(), input: input.clone() });
                Outcome::Message(message(content, StopReason::ToolUse))
            }
            ReplyKind::StreamError { error_type, message: error, text } => Outcome::Broken {
                message: message(
                    text.iter().map(|t| Block::Text(t.clone())).collect(),
                    StopReason::EndTurn,
                ),
                error_type: error_type.clone(),
                error: error.clone(),
            },
            ReplyKind::Error { status, error_type, message } => Outcome::Error {
                status: *status,
                error_type: error_type.clone(),
                message: message.clone(),
            },
            ReplyKind::UsageLimit { resets_at, window } => {
                headers.extend(limit_headers(*resets_at, *window, now));
                Outcome::Error {
                    status: 429,
                    error_type: "rate_limit_error".to_owned(),
                    message: LIMIT_MESSAGE.to_owned(),
                }
            }
        };
        headers.extend(reply.headers.clone());
        Decision { outcome, by, delay: reply.delay(), pace: reply.pace(), headers }
    }
}

/// The headers of a rejected subscriber request, as Claude Code reads them.
fn limit_headers(resets_at: i64, window: LimitWindow, now: Timestamp) -> Vec<(String, String)> {
    let (claim, short) = match window {
        LimitWindow::FiveHour => ("five_hour", "5h"),
        LimitWindow::SevenDay => ("seven_day", "7d"),
    };
    let unified = |suffix: &str| format!("anthropic-ratelimit-unified-{suffix}");
    vec![
        ("retry-after".to_owned(), (resets_at - now.as_second()).max(0).to_string()),
        (unified("status"), "rejected".to_owned()),
        (unified("reset"), resets_at.to_string()),
        (unified("representative-claim"), claim.to_owned()),
        (unified(&format!("{short}-status")), "rejected".to_owned()),
        (unified(&format!("{short}-reset")), resets_at.to_string()),
        (unified(&format!("{short}-utilization")), "1.0".to_owned()),
    ]
}

/// `stand-in model: received "<the first line>"`.
pub fn default_text(user_text: &str) -> String {
    let first = user_text.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or_default();
    format!("stand-in model: received \"{first}\"")
}

/// A side request's answer: an object of the schema's properties when one is asked for
/// (the title made from the prompt), else `ok`.
fn side_text(prompt: &Prompt) -> String {
    let properties =
        prompt.output_schema.as_ref().and_then(|s| s.get("properties")).and_then(Value::as_object);
    let Some(properties) = properties else { return "ok".to_owned() };
    let mut answer = Map::new();
    for (name, schema) in properties {
        let value = match schema.get("type").and_then(Value::as_str) {
            _ if name == "title" => json!(title(&prompt.user_text)),
            Some("string") => json!("stand-in"),
            Some("boolean") => json!(false),
            Some("integer" | "number") => json!(0),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => Value::Null,
        };
        answer.insert(name.clone(), value);
    }
    Value::Object(answer).to_string()
}

/// Up to six words of the session's first line, sentence-cased.
fn title(user_text: &str) -> String {
    let session = user_text
        .split_once("<session>")
        .map(|(_, rest)| rest.split_once("</session>").map_or(rest, |(inside, _)| inside))
        .unwrap_or(user_text);
    let first = session.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or_default();
    let words: Vec<&str> = first.split_whitespace().take(6).collect();
    let mut chars = words.join(" ").chars().collect::<Vec<_>>();
    match chars.first_mut() {
        Some(c) => *c = c.to_uppercase().next().unwrap_or(*c),
        None => return "Stand-in session".to_owned(),
    }
    chars.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_api::request::{Endpoint, read};
    use crate::model_api::script::{Matcher, Rule};
    use jiff::SignedDuration;

    fn prompt(body: Value) -> Prompt {
        read(body.to_string().as_bytes(), Endpoint::Messages, Some("conv")).unwrap()
    }

    fn turn(text: &str) -> Prompt {
        prompt(
            json!({"model": "m", "max_tokens": 9, "tools": [{"name": "Bash"}], "messages": [{"role": "user", "content": text}]}),
        )
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_000_000).unwrap()
    }

    fn text(decision: &Decision) -> String {
        match &decision.outcome {
            Outcome::Message(Message { content, .. }) => match content.first() {
                Some(Block::Text(text)) => text.clone(),
                other => format!("{other:?}"),
            },
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn an_unscripted_turn_gets_the_default_reply_with_its_first_line() {
        let mut model = StandInModel::default();
        let decision = model.decide(&turn("\n  fix the parser  \nplease"), &Ids::new(1), now());
        assert_eq!(text(&decision), "stand-in model: received \"fix the parser\"");
        assert_eq!(decision.by, AnsweredBy::Default);
        let Outcome::Message(message) = &decision.outcome else { panic!() };
        assert_eq!(message.stop_reason, "end_turn");
        assert_eq!(message.usage.output_tokens, tokens(text(&decision).len()));
        assert_eq!(
            message.usage.total_input(),
            tokens(turn("\n  fix the parser  \nplease").size.whole)
        );
    }

    #[test]
    fn side_requests_are_answered_apart_and_leave_the_script_alone() {
        let mut model = StandInModel::default();
        model.script.add(Rule::new(Matcher::Any, Reply::text("scripted"))).unwrap();
        let title_request = prompt(json!({
            "model": "h", "max_tokens": 100, "tools": [],
            "output_config": {"format": {"type": "json_schema", "schema": {"properties": {"title": {"type": "string"}, "n": {"type": "integer"}}}}},
            "messages": [{"role": "user", "content": "<session>\nsay hello to the whole wide world\n</session>\n\nWrite the title…"}]
        }));
        let decision = model.decide(&title_request, &Ids::new(1), now());
        assert_eq!(decision.by, AnsweredBy::Side);
        assert_eq!(
            serde_json::from_str::<Value>(&text(&decision)).unwrap(),
            json!({"title": "Say hello to the whole wide", "n": 0})
        );
        let quota = prompt(
            json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]}),
        );
        assert_eq!(text(&model.decide(&quota, &Ids::new(1), now())), "ok");
        assert_eq!(model.script.rules()[0].served, 0);
        assert_eq!(text(&model.decide(&turn("x"), &Ids::new(1), now())), "scripted");
    }

    #[test]
    fn an_accounts_limit_refuses_every_turn_until_its_reset_and_spends_no_rule() {
        let mut model = StandInModel::default();
        model.script.add(Rule::new(Matcher::Any, Reply::text("scripted"))).unwrap();
        let resets = now() + SignedDuration::from_secs(60);
        model.limit = Some((resets.as_second(), LimitWindow::FiveHour));
        for _ in 0..2 {
            let refused = model.decide(&turn("x"), &Ids::new(1), now());
            assert_eq!(refused.by, AnsweredBy::Limit);
            assert!(matches!(refused.outcome, Outcome::Error { status: 429, .. }));
        }
        assert_eq!(model.script.rules()[0].served, 0);
        let after = model.decide(&turn("x"), &Ids::new(1), resets);
        assert_eq!(text(&after), "scripted", "the reset lifts it");
    }

    #[test]
    fn a_usage_limit_is_a_429_with_the_unified_headers() {
        let mut model = StandInModel::default();
        let resets = Timestamp::from_second(1_003_600).unwrap();
        model
            .script
            .add(Rule::new(Matcher::Any, Reply::usage_limit(resets).with_header("x-extra", "1")))
            .unwrap();
        let decision = model.decide(&turn("x"), &Ids::new(1), now());
        let Outcome::Error { status, error_type, .. } = &decision.outcome else {
            panic!("{decision:?}")
        };
        assert_eq!((*status, error_type.as_str()), (429, "rate_limit_error"));
        let header = |name: &str| decision.headers.get(name).map(String::as_str);
        assert_eq!(header("retry-after"), Some("3600"));
        assert_eq!(header("anthropic-ratelimit-unified-status"), Some("rejected"));
        assert_eq!(header("anthropic-ratelimit-unified-reset"), Some("1003600"));
        assert_eq!(header("anthropic-ratelimit-unified-representative-claim"), Some("five_hour"));
        assert_eq!(header("anthropic-ratelimit-unified-5h-reset"), Some("1003600"));
        assert_eq!(header("x-extra"), Some("1"));
        assert_eq!(decision.usage(true), None);
        let weekly = limit_headers(5, LimitWindow::SevenDay, now());
        assert!(weekly.contains(&(
            "anthropic-ratelimit-unified-representative-claim".into(),
            "seven_day".into()
        )));
        assert!(
            weekly.contains(&("retry-after".into(), "0".into())),
            "a reset in the past is due now"
        );
    }

    #[test]
    fn scripted_usage_is_answered_exactly_and_tool_uses_get_ids() {
        let mut model = StandInModel::default();
        let usage = Usage {
            input_tokens: 7,
            output_tokens: 3,
            cache_creation_input_tokens: 100,
            cache_read_input_tokens: 50,
        };
        let reply = Reply::tool_use("Bash", json!({"command": "ls"}))
            .preceded_by("Looking.")
            .with_usage(usage)
            .paced(Duration::from_millis(4));
        model.script.add(Rule::new(Matcher::Any, reply)).unwrap();
        let decision = model.decide(&turn("x"), &Ids::new(1), now());
        assert_eq!(decision.usage(false), Some(usage));
        assert_eq!(decision.pace, Duration::from_millis(4));
        let Outcome::Message(message) = &decision.outcome else { panic!() };
        assert_eq!(message.stop_reason, "tool_use");
        assert!(
            matches!(&message.content[..], [Block::Text(_), Block::ToolUse { id, .. }] if id.starts_with("toolu_01"))
        );
    }

    #[test]
    fn a_broken_stream_counts_usage_only_when_streamed() {
        let mut model = StandInModel::default();
        model
            .script
            .add(Rule::new(
                Matcher::Any,
                Reply::stream_error("overloaded_error", "Overloaded").preceded_by("par"),
            ))
            .unwrap();
        let decision = model.decide(&turn("x"), &Ids::new(1), now());
        assert!(
            matches!(&decision.outcome, Outcome::Broken { error_type, .. } if error_type == "overloaded_error")
        );
        assert!(decision.usage(true).is_some());
        assert_eq!(decision.usage(false), None, "a request that did not stream got an HTTP error");
    }

    #[test]
    fn titles_are_a_few_sentence_cased_words() {
        assert_eq!(
            title("<session>\nfix the flaky parser test in loop core now\n</session>"),
            "Fix the flaky parser test in"
        );
        assert_eq!(title("ünïcode first"), "Ünïcode first");
        assert_eq!(title("   "), "Stand-in session");
    }
}

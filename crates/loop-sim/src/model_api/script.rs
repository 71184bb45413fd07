//! The stand-in model's script: rules that say how to answer a turn, and the book that
//! keeps which of them have been used.
//!
//! A [`Rule`] matches a turn's last user message ([`Matcher`]) and holds one or more
//! [`Reply`]s used in order, once, a number of times or always ([`Times`]). A sequence
//! that answered with a tool use continues on the request that brings the tool's result
//! back (same conversation, a `tool_result` for the `tool_use` id it answered), whatever
//! that request's text: so `[tool use, text]` is "run the tool, then end the turn". Any
//! other step waits for the next turn the rule matches again.
//!
//! The same types are the JSON of `POST /_stand-in/rules`:
//!
//! ```json
//! {"when": {"contains": "run it"}, "times": "once",
//!  "replies": [{"kind": "tool_use", "name": "Bash", "input": {"command": "echo hi"}},
//!              {"kind": "text", "text": "done", "usage": {"input_tokens": 10, "output_tokens": 2}}]}
//! ```
//!
//! Pure: no IO, no clock. Tool-use ids come from the caller.

use axum::http::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use super::reply::{Reply, ReplyKind};
use super::request::Prompt;

/// When a rule applies to a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Matcher {
    /// The last user message's text (tool results included) contains this.
    Contains(String),
    /// The last user message carries a `tool_result` for this `tool_use` id.
    ToolUseId(String),
    /// The last user message carries a `tool_result` whose content contains this.
    ToolResultContains(String),
    /// Every turn.
    Any,
}

impl Matcher {
    pub fn matches(&self, prompt: &Prompt) -> bool {
        match self {
            Matcher::Contains(text) => prompt.user_text.contains(text.as_str()),
            Matcher::ToolUseId(id) => prompt.tool_results.iter().any(|r| &r.tool_use_id == id),
            Matcher::ToolResultContains(text) => {
                prompt.tool_results.iter().any(|r| r.content.contains(text.as_str()))
            }
            Matcher::Any => true,
        }
    }
}

/// How many times a rule's replies are used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Times {
    /// Each reply once, then the rule is spent.
    #[default]
    Once,
    /// The whole sequence this many times.
    Count(u32),
    /// The sequence over and over.
    Always,
}

/// A way to answer turns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub when: Matcher,
    /// Used in order; at least one.
    pub replies: Vec<Reply>,
    #[serde(default)]
    pub times: Times,
}

impl Rule {
    /// `reply`, once, to the first turn `when` matches.
    pub fn new(when: Matcher, reply: Reply) -> Rule {
        Rule { when, replies: vec![reply], times: Times::Once }
    }

    /// `reply`, once, to the first turn whose last user message contains `text`.
    pub fn when_contains(text: impl Into<String>, reply: Reply) -> Rule {
        Rule::new(Matcher::Contains(text.into()), reply)
    }

    /// `reply` next in the sequence (after a tool use: when its result comes back).
    pub fn then(mut self, reply: Reply) -> Rule {
        self.replies.push(reply);
        self
    }

    /// The sequence over and over, never spent.
    pub fn always(mut self) -> Rule {
        self.times = Times::Always;
        self
    }

    /// The sequence `n` times.
    pub fn times(mut self, n: u32) -> Rule {
        self.times = Times::Count(n);
        self
    }

    /// Whether `served` replies use the rule up.
    fn spent_after(&self, served: u64) -> bool {
        let len = self.replies.len() as u64;
        match self.times {
            Times::Once => served >= len,
            Times::Count(n) => served >= u64::from(n) * len,
            Times::Always => false,
        }
    }
}

/// Why a rule cannot be scripted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    #[error("a rule needs at least one reply")]
    NoReplies,
    #[error("`times`: a count must be at least 1")]
    ZeroTimes,
    #[error("an error reply's status must be 400-599, got {status}")]
    Status { status: u16 },
    #[error("header `{name}`: not a valid HTTP header name and value")]
    Header { name: String },
}

/// Checks what the server would otherwise find out only while answering.
pub fn validate(rule: &Rule) -> Result<(), ScriptError> {
    if rule.replies.is_empty() {
        return Err(ScriptError::NoReplies);
    }
    if rule.times == Times::Count(0) {
        return Err(ScriptError::ZeroTimes);
    }
    for reply in &rule.replies {
        if let ReplyKind::Error { status, .. } = reply.kind
            && !(400..=599).contains(&status)
        {
            return Err(ScriptError::Status { status });
        }
        for (name, value) in &reply.headers {
            if HeaderName::from_bytes(name.as_bytes()).is_err()
                || HeaderValue::from_str(value).is_err()
            {
                return Err(ScriptError::Header { name: name.clone() });
            }
        }
    }
    Ok(())
}

/// A rule and how far it has been used, as `GET /_stand-in/rules` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleStatus {
    pub index: usize,
    #[serde(flatten)]
    pub rule: Rule,
    /// Replies answered so far.
    pub served: u64,
    pub spent: bool,
}

/// A sequence under way in one conversation: its next step answers a tool result.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Continuation {
    conversation: Option<String>,
    rule: usize,
    /// The `tool_use` ids of the step just answered.
    awaiting: Vec<String>,
}

/// The rules, in the order they were added, and the sequences under way.
#[derive(Debug, Default)]
pub struct Script {
    rules: Vec<RuleStatus>,
    continuations: Vec<Continuation>,
}

/// A reply chosen for a turn: which rule and step gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct Chosen {
    /// The reply, with its tool-use id filled in.
    pub reply: Reply,
    pub rule: usize,
    pub step: usize,
}

impl Script {
    /// Adds `rule` after the others; returns its index.
    pub fn add(&mut self, rule: Rule) -> Result<usize, ScriptError> {
        validate(&rule)?;
        let index = self.rules.len();
        self.rules.push(RuleStatus { index, rule, served: 0, spent: false });
        Ok(index)
    }

    pub fn clear(&mut self) {
        self.rules.clear();
        self.continuations.clear();
    }

    pub fn rules(&self) -> Vec<RuleStatus> {
        self.rules.clone()
    }

    /// The reply for a turn, using it up: a sequence awaiting one of the turn's tool
    /// results first, else the first unspent rule that matches. `None`: no rule applies.
    pub fn choose(
        &mut self,
        prompt: &Prompt,
        mut tool_use_id: impl FnMut() -> String,
    ) -> Option<Chosen> {
        let answers = |c: &Continuation| {
            c.conversation == prompt.conversation
                && prompt.tool_results.iter().any(|r| c.awaiting.contains(&r.tool_use_id))
        };
        let continued =
            self.continuations.iter().position(answers).map(|i| self.continuations.remove(i).rule);
        let index = continued
            .filter(|&i| self.rules.get(i).is_some_and(|r| !r.spent))
            .or_else(|| self.rules.iter().position(|r| !r.spent && r.rule.when.matches(prompt)))?;
        // `index` was found in `rules` just above, and `add` refuses a rule without
        // replies, so `len` is at least 1 and `step` within it.
        let status = &mut self.rules[index];
        let len = status.rule.replies.len();
        let step = (status.served % len as u64) as usize;
        let mut reply = status.rule.replies[step].clone();
        status.served += 1;
        status.spent = status.rule.spent_after(status.served);
        let mut awaiting = Vec::new();
        if let ReplyKind::ToolUse { id, .. } = &mut reply.kind {
            awaiting.push(id.get_or_insert_with(&mut tool_use_id).clone());
        }
        self.continuations.retain(|c| !(c.rule == index && c.conversation == prompt.conversation));
        if step + 1 < len && !awaiting.is_empty() {
            self.continuations.push(Continuation {
                conversation: prompt.conversation.clone(),
                rule: index,
                awaiting,
            });
        }
        Some(Chosen { reply, rule: index, step })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use jiff::Timestamp;
    use serde_json::json;

    use super::*;
    use crate::model_api::request::{Endpoint, ToolResult, read};
    use crate::model_api::usage::Usage;

    fn turn(text: &str, conversation: &str) -> Prompt {
        let body = json!({"model": "m", "max_tokens": 1, "tools": [{"name": "Bash"}], "messages": [{"role": "user", "content": text}]});
        read(body.to_string().as_bytes(), Endpoint::Messages, Some(conversation)).unwrap()
    }

    fn tool_result(id: &str, content: &str, conversation: &str) -> Prompt {
        let mut prompt = turn("", conversation);
        prompt.tool_results =
            vec![ToolResult { tool_use_id: id.into(), content: content.into(), is_error: false }];
        prompt.user_text = content.to_owned();
        prompt
    }

    fn ids() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("toolu_{n}")
        }
    }

    fn text_of(chosen: Option<Chosen>) -> Option<String> {
        match chosen?.reply.kind {
            ReplyKind::Text { text, .. } => Some(text),
            other => Some(format!("{other:?}")),
        }
    }

    #[test]
    fn a_once_rule_answers_the_first_match_and_is_spent() {
        let mut script = Script::default();
        script.add(Rule::when_contains("hello", Reply::text("hi"))).unwrap();
        assert_eq!(script.choose(&turn("goodbye", "c"), ids()), None);
        assert_eq!(
            text_of(script.choose(&turn("well hello there", "c"), ids())).as_deref(),
            Some("hi")
        );
        assert_eq!(script.choose(&turn("hello again", "c"), ids()), None);
        assert!(script.rules()[0].spent);
    }

    #[test]
    fn rules_are_tried_in_order_and_always_and_counts_repeat() {
        let mut script = Script::default();
        script.add(Rule::when_contains("a", Reply::text("first")).times(2)).unwrap();
        script.add(Rule::new(Matcher::Any, Reply::text("fallback")).always()).unwrap();
        let mut next = |text| text_of(script.choose(&turn(text, "c"), ids()));
        assert_eq!(next("a").as_deref(), Some("first"));
        assert_eq!(next("b").as_deref(), Some("fallback"));
        assert_eq!(next("a").as_deref(), Some("first"));
        assert_eq!(next("a").as_deref(), Some("fallback"), "the counted rule is spent");
        assert_eq!(next("a").as_deref(), Some("fallback"));
    }

    #[test]
    fn a_tool_use_sequence_continues_on_its_result_whatever_it_says() {
        let mut script = Script::default();
        let rule =
            Rule::when_contains("run echo", Reply::tool_use("Bash", json!({"command": "echo hi"})))
                .then(Reply::text("done"));
        script.add(rule).unwrap();
        let first = script.choose(&turn("please run echo", "c1"), ids()).unwrap();
        let ReplyKind::ToolUse { id: Some(id), .. } = &first.reply.kind else {
            panic!("{first:?}")
        };
        assert_eq!(id, "toolu_1", "an id is made for the tool use");
        assert_eq!((first.rule, first.step), (0, 0));
        // Another conversation's tool result with that id does not continue it.
        assert_eq!(script.choose(&tool_result("toolu_1", "hi", "c2"), ids()), None);
        let second = script.choose(&tool_result("toolu_1", "hi", "c1"), ids()).unwrap();
        assert_eq!(second.step, 1);
        assert_eq!(text_of(Some(second)).as_deref(), Some("done"));
        assert!(script.rules()[0].spent);
    }

    #[test]
    fn a_scripted_tool_use_id_is_kept_and_can_be_matched() {
        let mut script = Script::default();
        script
            .add(
                Rule::when_contains(
                    "go",
                    Reply::tool_use("Read", json!({})).with_id("toolu_known"),
                )
                .always(),
            )
            .unwrap();
        script
            .add(Rule::new(Matcher::ToolUseId("toolu_known".into()), Reply::text("read it")))
            .unwrap();
        script
            .add(Rule::new(Matcher::ToolResultContains("boom".into()), Reply::text("saw boom")))
            .unwrap();
        let used = script.choose(&turn("go", "c"), ids()).unwrap();
        assert!(
            matches!(&used.reply.kind, ReplyKind::ToolUse { id: Some(id), .. } if id == "toolu_known")
        );
        assert_eq!(
            text_of(script.choose(&tool_result("toolu_known", "x", "c"), ids())).as_deref(),
            Some("read it")
        );
        assert_eq!(
            text_of(script.choose(&tool_result("toolu_other", "a boom", "c"), ids())).as_deref(),
            Some("saw boom")
        );
    }

    #[test]
    fn text_steps_wait_for_the_rule_to_match_again() {
        let mut script = Script::default();
        script
            .add(Rule::when_contains("ask", Reply::text("one")).then(Reply::text("two")))
            .unwrap();
        assert_eq!(script.choose(&turn("unrelated", "c"), ids()), None);
        assert_eq!(text_of(script.choose(&turn("ask", "c"), ids())).as_deref(), Some("one"));
        assert_eq!(text_of(script.choose(&turn("ask", "c"), ids())).as_deref(), Some("two"));
        assert_eq!(script.choose(&turn("ask", "c"), ids()), None);
    }

    #[test]
    fn bad_rules_are_refused_before_they_can_break_an_answer() {
        let mut script = Script::default();
        let empty = Rule { when: Matcher::Any, replies: vec![], times: Times::Once };
        assert_eq!(script.add(empty), Err(ScriptError::NoReplies));
        assert_eq!(
            script.add(Rule::new(Matcher::Any, Reply::text("x")).times(0)),
            Err(ScriptError::ZeroTimes)
        );
        assert_eq!(
            script.add(Rule::new(Matcher::Any, Reply::error(200, "x", "y"))),
            Err(ScriptError::Status { status: 200 })
        );
        let bad_header = Reply::text("x").with_header("bad header", "v");
        assert!(matches!(
            script.add(Rule::new(Matcher::Any, bad_header)),
            Err(ScriptError::Header { .. })
        ));
        assert!(script.rules().is_empty());
    }

    #[test]
    fn the_json_form_reads_as_documented() {
        let rule: Rule = serde_json::from_value(json!({
            "when": {"contains": "run it"},
            "replies": [
                {"kind": "tool_use", "name": "Bash", "input": {"command": "echo hi"}, "text": "running"},
                {"kind": "text", "text": "done", "delay_ms": 5, "usage": {"input_tokens": 10, "output_tokens": 2}},
                {"kind": "usage_limit", "resets_at": 1765000000},
                {"kind": "error", "status": 529, "error_type": "overloaded_error", "message": "Overloaded", "headers": {"retry-after": "1"}}
            ]
        }))
        .unwrap();
        assert_eq!(rule.times, Times::Once);
        let expected = Rule::when_contains(
            "run it",
            Reply::tool_use("Bash", json!({"command": "echo hi"})).preceded_by("running"),
        )
        .then(Reply::text("done").delayed(Duration::from_millis(5)).with_usage(Usage {
            input_tokens: 10,
            output_tokens: 2,
            ..Usage::default()
        }))
        .then(Reply::usage_limit(Timestamp::from_second(1_765_000_000).unwrap()))
        .then(Reply::error(529, "overloaded_error", "Overloaded").with_header("Retry-After", "1"));
        assert_eq!(rule, expected);
        let always: Rule = serde_json::from_value(
            json!({"when": "any", "replies": [{"kind": "text", "text": "x"}], "times": "always"}),
        )
        .unwrap();
        assert_eq!(always.times, Times::Always);
        let counted: Rule = serde_json::from_value(json!({"when": {"tool_use_id": "t"}, "replies": [{"kind": "text", "text": "x"}], "times": {"count": 3}})).unwrap();
        assert_eq!(counted.times, Times::Count(3));
    }
}

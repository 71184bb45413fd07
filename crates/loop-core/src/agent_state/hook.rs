//! What a harness hook reports about its agent, as the `the-loop hook agent` binary reads
//! it from Claude Code's hook input and writes it into the session's spool, and the
//! answer a `PermissionRequest` hook prints (../shared/notes/claude-code-sessions.md §1).
//!
//! A report keeps what a state needs and nothing of the conversation: the event, the
//! tool and a one-line summary of its input (the command, the file), a notification's
//! type, a failure's error. Texts are capped so a spool line stays short.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The longest tool-input summary or message a report keeps, in characters.
pub const TEXT_CAP: usize = 300;

/// One hook report: a spool line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// When the hook ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Timestamp>,
    pub event: Event,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The tool input's summary: the command, the file path, else its JSON (capped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// A notification's type (`permission_prompt`, `idle_prompt`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A failed turn's error (`rate_limit`, `overloaded`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A failed turn's rendered message, or a notification's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When a limit that failed the turn resets, read by the hook from its message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<Timestamp>,
    /// A permission request's id, chosen by the hook: its answer is filed under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// The harness's conversation id (`session_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
}

/// The hook events a state is read from; any other is kept by name and ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Event {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    PermissionRequest,
    Notification,
    Stop,
    StopFailure,
    SessionEnd,
    Other(String),
    #[default]
    Unknown,
}

/// The events the plugin's hooks report (the plugin registers one hook per name).
pub const EVENTS: [&str; 10] = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PermissionRequest",
    "Notification",
    "Stop",
    "StopFailure",
    "SessionEnd",
];

impl From<String> for Event {
    fn from(name: String) -> Self {
        match name.as_str() {
            "SessionStart" => Self::SessionStart,
            "UserPromptSubmit" => Self::UserPromptSubmit,
            "PreToolUse" => Self::PreToolUse,
            // A tool that failed still ran: the turn goes on.
            "PostToolUse" | "PostToolUseFailure" => Self::PostToolUse,
            "PermissionRequest" => Self::PermissionRequest,
            "Notification" => Self::Notification,
            "Stop" => Self::Stop,
            "StopFailure" => Self::StopFailure,
            "SessionEnd" => Self::SessionEnd,
            "" => Self::Unknown,
            _ => Self::Other(name),
        }
    }
}

impl From<Event> for String {
    fn from(event: Event) -> Self {
        match event {
            Event::SessionStart => "SessionStart".into(),
            Event::UserPromptSubmit => "UserPromptSubmit".into(),
            Event::PreToolUse => "PreToolUse".into(),
            Event::PostToolUse => "PostToolUse".into(),
            Event::PermissionRequest => "PermissionRequest".into(),
            Event::Notification => "Notification".into(),
            Event::Stop => "Stop".into(),
            Event::StopFailure => "StopFailure".into(),
            Event::SessionEnd => "SessionEnd".into(),
            Event::Other(name) => name,
            Event::Unknown => String::new(),
        }
    }
}

impl Report {
    /// The report of one hook run: `input` is what the hook read on its stdin, `at` when
    /// it ran, `request` the id it chose for a permission request. `None`: not a hook's
    /// input (no `hook_event_name`).
    pub fn from_hook_input(input: &Value, at: Timestamp, request: Option<String>) -> Option<Self> {
        let text = |key: &str| input.get(key).and_then(Value::as_str).map(cap);
        let event = Event::from(input.get("hook_event_name")?.as_str()?.to_owned());
        let request = (event == Event::PermissionRequest).then_some(request).flatten();
        Some(Self {
            at: Some(at),
            tool: text("tool_name"),
            input: input.get("tool_input").map(summary),
            kind: text("notification_type"),
            error: text("error"),
            message: text("last_assistant_message").or_else(|| text("message")),
            conversation: text("session_id"),
            resets_at: None,
            request,
            event,
        })
    }

    /// Reads the reset time a failed turn's message names (`You've hit your session
    /// limit · resets 5:54pm (UTC)`), placing its zone with `zone_of`.
    pub fn read_reset(mut self, zone_of: super::limit::ZoneOf<'_>) -> Self {
        if self.event == Event::StopFailure {
            let (at, message) = (self.at, self.message.as_deref());
            self.resets_at = at
                .zip(message)
                .and_then(|(at, message)| super::LimitNotice::read(message, at, zone_of).resets_at);
        }
        self
    }
}

/// What a `PermissionRequest` hook prints to answer its prompt: allow, or deny with
/// `reason` given to the model.
pub fn permission_decision(allow: bool, reason: Option<&str>) -> Value {
    let decision = match (allow, reason) {
        (true, _) => json!({"behavior": "allow"}),
        (false, reason) => json!({
            "behavior": "deny",
            "message": reason.unwrap_or("Denied by the work item's operator (the-loop deny)."),
        }),
    };
    json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}})
}

/// A tool input in one line: its command, its file, else its JSON; capped.
fn summary(input: &Value) -> String {
    let named = ["command", "file_path", "path", "url", "pattern"]
        .iter()
        .find_map(|key| input.get(key).and_then(Value::as_str));
    match named {
        Some(text) => cap(text),
        None => cap(&input.to_string()),
    }
}

/// `text` on one line, at most [`TEXT_CAP`] characters (an ellipsis marks a cut).
fn cap(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(TEXT_CAP) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permission_request_keeps_its_tool_command_and_id() {
        let input = json!({
            "session_id": "c0ffee",
            "hook_event_name": "PermissionRequest",
            "tool_name": "Bash",
            "tool_input": {"command": "touch /tmp/outside\n&& ls", "description": "make a file"},
            "permission_suggestions": [],
        });
        let at = Timestamp::from_second(1_800_000_000).unwrap();
        let report = Report::from_hook_input(&input, at, Some("r7".into())).unwrap();
        assert_eq!(report.event, Event::PermissionRequest);
        assert_eq!(report.tool.as_deref(), Some("Bash"));
        assert_eq!(report.input.as_deref(), Some("touch /tmp/outside && ls"));
        assert_eq!(report.request.as_deref(), Some("r7"));
        assert_eq!(report.conversation.as_deref(), Some("c0ffee"));
        let line = serde_json::to_string(&report).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&line).unwrap(), report, "{line}");
    }

    #[test]
    fn only_a_permission_request_carries_a_request_id_and_texts_are_capped() {
        let at = Timestamp::from_second(1_800_000_000).unwrap();
        let input = json!({"hook_event_name": "PreToolUse", "tool_input": {"x": "y".repeat(1000)}});
        let report = Report::from_hook_input(&input, at, Some("r1".into())).unwrap();
        assert_eq!(report.request, None);
        assert_eq!(report.input.unwrap().chars().count(), TEXT_CAP + 1);
        assert_eq!(Report::from_hook_input(&json!({"tool_name": "Bash"}), at, None), None);
        let other = Report::from_hook_input(&json!({"hook_event_name": "CwdChanged"}), at, None);
        assert_eq!(other.unwrap().event, Event::Other("CwdChanged".into()));
        let failed = json!({"hook_event_name": "PostToolUseFailure"});
        assert_eq!(Report::from_hook_input(&failed, at, None).unwrap().event, Event::PostToolUse);
    }

    #[test]
    fn decisions_are_claude_codes_permission_request_output() {
        assert_eq!(
            permission_decision(true, None),
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}})
        );
        let denied = permission_decision(false, Some("not outside the repo"));
        assert_eq!(
            denied.pointer("/hookSpecificOutput/decision/message"),
            Some(&json!("not outside the repo"))
        );
    }
}

//! The agent's side of the conversation, decided: where a question may be asked, what
//! the question and the operator's reply look like on GitHub and in the pane, and which
//! deliveries answer an open question (docs/agent-side.md).
//!
//! The daemon posts and pastes what these functions compose; nothing here does IO.

use crate::event::{Event, EventKind};
use crate::guards::mark_self_authored;
use crate::record::LocalRecord;
use crate::refs::WorkItemRef;

/// The most options a question may offer.
pub const MAX_OPTIONS: usize = 10;

/// A question the agent asks (`the-loop ask`, the MCP tool `ask`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub text: String,
    pub options: Vec<String>,
}

/// Why a question or a reply was refused before anything was posted or pasted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the question is empty")]
    EmptyQuestion,
    #[error("option {index} is empty")]
    EmptyOption { index: usize },
    #[error("a question offers at most {MAX_OPTIONS} options, not {count}")]
    TooManyOptions { count: usize },
    #[error("the reply is empty")]
    EmptyReply,
    #[error("{asked} has no live session on this machine")]
    NoSession { asked: WorkItemRef },
    #[error("{asked}'s session is paused")]
    Paused { asked: WorkItemRef },
}

impl crate::Hint for Refusal {
    fn hint(&self) -> Option<String> {
        match self {
            Self::NoSession { .. } => Some(
                "`the-loop ask` works from inside a session the-loop started (it reads \
                 THE_LOOP_WORK_ITEM); `the-loop sessions list` shows them"
                    .to_owned(),
            ),
            Self::Paused { asked } => {
                Some(format!("resume it first: `the-loop sessions resume {asked}`"))
            }
            _ => None,
        }
    }
}

impl Question {
    /// Trims the text and options; refuses an empty question or option, or too many.
    pub fn new(text: &str, options: &[String]) -> Result<Self, Refusal> {
        let text = text.trim();
        if text.is_empty() {
            return Err(Refusal::EmptyQuestion);
        }
        if options.len() > MAX_OPTIONS {
            return Err(Refusal::TooManyOptions { count: options.len() });
        }
        let mut trimmed = Vec::with_capacity(options.len());
        for (at, option) in options.iter().enumerate() {
            let option = option.trim();
            if option.is_empty() {
                return Err(Refusal::EmptyOption { index: at + 1 });
            }
            trimmed.push(option.to_owned());
        }
        Ok(Self { text: text.to_owned(), options: trimmed })
    }

    /// The comment that asks it on GitHub: self-marked, so the-loop never pastes its own
    /// question back into the session.
    pub fn comment(&self) -> String {
        let mut body = format!("**The agent working on this item asks:**\n\n{}\n", self.text);
        if !self.options.is_empty() {
            body.push_str("\nOptions:\n");
            for (at, option) in self.options.iter().enumerate() {
                body.push_str(&format!("{}. {option}\n", at + 1));
            }
        }
        body.push_str(
            "\n_Answer in a comment here; the answer reaches the session as its next event._",
        );
        mark_self_authored(&body)
    }

    /// The question as a record keeps it (at most `cap` characters).
    pub fn shortened(&self, cap: usize) -> String {
        shorten(&self.text, cap)
    }
}

/// Which session endpoint a question about `asked` is asked from: the live record's own
/// work item, or one of its live pull requests. Anything else — no record, a closed
/// one, a ref the record does not serve — is refused, so nothing is ever posted on an
/// item outside a session's own.
pub fn question_site<'a>(
    record: Option<&'a LocalRecord>,
    asked: &WorkItemRef,
) -> Result<&'a LocalRecord, Refusal> {
    record
        .filter(|record| record.endpoints.get(asked).is_some_and(|endpoint| endpoint.is_live()))
        .ok_or_else(|| Refusal::NoSession { asked: asked.clone() })
}

/// Where an operator's reply to `asked` is pasted: the endpoint serving `asked` when it
/// has a live pane of its own, else the work item's own session. Refused when there is
/// no live session, or it is paused (a reply never resumes).
pub fn reply_site(
    record: Option<&LocalRecord>,
    asked: &WorkItemRef,
) -> Result<WorkItemRef, Refusal> {
    let no_session = || Refusal::NoSession { asked: asked.clone() };
    let record = record.filter(|record| record.own_endpoint().is_some_and(|own| own.is_live()));
    let record = record.ok_or_else(no_session)?;
    let served = match record.endpoints.get(asked) {
        Some(endpoint) if endpoint.is_live() && !endpoint.tmux_target.is_empty() => asked.clone(),
        _ => record.work_item.clone(),
    };
    let endpoint = record.endpoints.get(&served).ok_or_else(no_session)?;
    if endpoint.status == crate::record::EndpointStatus::Paused {
        return Err(Refusal::Paused { asked: asked.clone() });
    }
    Ok(served)
}

/// The operator's reply as pasted into the pane: a provenance header, then the text.
pub fn reply_prompt(text: &str, operator: &str, work_item: &WorkItemRef) -> String {
    format!(
        "# Reply from the operator of the-loop ({work_item})\n\n`{operator}` answered from \
         their machine (not on GitHub); the reply is mirrored on the work item.\n\n{}\n",
        text.trim()
    )
}

/// The reply mirrored on the work item: self-marked, naming the operator.
pub fn reply_comment(text: &str, operator: &str) -> String {
    mark_self_authored(&format!(
        "**`{operator}` answered the agent from the-loop on their machine:**\n\n{}",
        quote(text.trim())
    ))
}

/// Whether delivering `event` answers an open question: a person's comment or review
/// does; a label, a CI run or a push does not.
pub fn answers_question(event: &Event) -> bool {
    matches!(
        event.kind,
        EventKind::IssueComment
            | EventKind::PullRequestReview
            | EventKind::PullRequestReviewComment
    )
}

/// The pull request a harness tool call created, read from a `PostToolUse` hook's input
/// (Claude Code's JSON: `tool_name`, `tool_input`, `tool_response`): a `gh pr create`
/// run through the shell, or an MCP tool whose name says it creates a pull request. The
/// answer is the last pull-request address in the tool's response; `None` for any other
/// tool, or a response that names none.
pub fn created_pull_request(hook_input: &serde_json::Value) -> Option<String> {
    let tool = hook_input.get("tool_name")?.as_str()?;
    let creates = if tool == "Bash" {
        let command = hook_input.pointer("/tool_input/command")?.as_str()?;
        command
            .split_whitespace()
            .collect::<Vec<_>>()
            .windows(3)
            .any(|w| w == ["gh", "pr", "create"])
    } else {
        tool.starts_with("mcp__") && tool.to_ascii_lowercase().contains("create_pull_request")
    };
    if !creates {
        return None;
    }
    let response = hook_input.get("tool_response")?;
    let text = match response {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    pull_request_addresses(&text).last().map(|address| (*address).to_owned())
}

/// Every `https://host/owner/repo/pull/N` in `text`, in order.
fn pull_request_addresses(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("https://") {
        let candidate = &rest[at..];
        let end = candidate
            .find(|c: char| {
                c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | ')' | ']' | '\\')
            })
            .unwrap_or(candidate.len());
        let address = &candidate[..end];
        let parts: Vec<&str> = address["https://".len()..].split('/').collect();
        if parts.len() >= 5
            && parts[3] == "pull"
            && !parts[4].is_empty()
            && parts[4].bytes().all(|b| b.is_ascii_digit())
        {
            let len = "https://".len() + parts[..5].iter().map(|p| p.len() + 1).sum::<usize>() - 1;
            found.push(&address[..len]);
        }
        rest = &candidate[end.max(1)..];
    }
    found
}

fn quote(text: &str) -> String {
    text.lines().map(|line| format!("> {line}")).collect::<Vec<_>>().join("\n")
}

fn shorten(text: &str, cap: usize) -> String {
    match text.char_indices().nth(cap) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guards::is_self_authored;

    #[test]
    fn a_question_is_trimmed_checked_and_self_marked() {
        assert_eq!(Question::new("  ", &[]), Err(Refusal::EmptyQuestion));
        assert_eq!(
            Question::new("Which?", &["a".into(), " ".into()]),
            Err(Refusal::EmptyOption { index: 2 })
        );
        let many: Vec<String> = (0..11).map(|n| n.to_string()).collect();
        assert_eq!(Question::new("Which?", &many), Err(Refusal::TooManyOptions { count: 11 }));
        let question =
            Question::new(" Which database? ", &[" Postgres".into(), "SQLite ".into()]).unwrap();
        let body = question.comment();
        assert!(body.contains("Which database?\n\nOptions:\n1. Postgres\n2. SQLite\n"), "{body}");
        assert!(is_self_authored(&body));
        assert_eq!(question.shortened(5), "Which…");
    }

    #[test]
    fn a_created_pull_request_is_read_from_gh_or_an_mcp_tool_and_nothing_else() {
        let gh = serde_json::json!({
            "tool_name": "Bash",
            "tool_input": {"command": "gh pr create --fill --base main"},
            "tool_response": {"stdout": "Creating pull request for loop/7 into main\n\nhttps://github.com/octo/app/pull/12\n", "stderr": ""},
        });
        assert_eq!(
            created_pull_request(&gh).as_deref(),
            Some("https://github.com/octo/app/pull/12")
        );
        let mcp = serde_json::json!({
            "tool_name": "mcp__github__create_pull_request",
            "tool_input": {"owner": "octo"},
            "tool_response": [{"type": "text", "text": "{\"number\":3,\"html_url\":\"https://ghe.example.com/octo/lib/pull/3\"}"}],
        });
        assert_eq!(
            created_pull_request(&mcp).as_deref(),
            Some("https://ghe.example.com/octo/lib/pull/3")
        );
        let other = serde_json::json!({
            "tool_name": "Bash",
            "tool_input": {"command": "gh pr view 12"},
            "tool_response": {"stdout": "https://github.com/octo/app/pull/12"},
        });
        assert_eq!(created_pull_request(&other), None);
        let no_url = serde_json::json!({
            "tool_name": "Bash",
            "tool_input": {"command": "gh pr create"},
            "tool_response": {"stdout": "https://github.com/octo/app/issues/12 https://github.com/o/r/pull/x"},
        });
        assert_eq!(created_pull_request(&no_url), None);
        assert_eq!(created_pull_request(&serde_json::json!("garbage")), None);
        assert_eq!(created_pull_request(&serde_json::json!({"tool_name": 3})), None);
    }

    #[test]
    fn the_reply_names_the_operator_and_is_self_marked() {
        let item: WorkItemRef = "github:octo/app#7".parse().unwrap();
        let pasted = reply_prompt("Use Postgres.\n", "ann", &item);
        assert!(pasted.starts_with("# Reply from the operator of the-loop (github:octo/app#7)"));
        assert!(pasted.ends_with("Use Postgres.\n"));
        let mirrored = reply_comment("Use Postgres.\nThanks", "ann");
        assert!(mirrored.contains("`ann`") && mirrored.contains("> Use Postgres.\n> Thanks"));
        assert!(is_self_authored(&mirrored));
    }
}

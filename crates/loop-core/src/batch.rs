//! Deliveries pasted into a session as one prompt (docs/agent-input.md).
//!
//! Two kinds of deliveries belong together: a pull-request review and its inline
//! comments (one `pull_request_review` and N `pull_request_review_comment`s sharing a
//! review id), and the CI results of one head commit (`workflow_run`, `check_run`,
//! `check_suite`, `status`). The dispatcher holds a job that has a [`BatchKey`] for
//! `routing.batchWindowSeconds` after it arrived and takes with it the jobs of the same
//! key that arrive meanwhile; a job without a key is never held. This module decides
//! which events join and what the one prompt shows; each delivery keeps its own dedup
//! key, status and reactions.

use crate::ci;
use crate::event::{Event, EventKind, Surface};
use crate::excerpt::{excerpt, review_excerpt};

/// What makes deliveries one prompt.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BatchKey {
    /// A review and its inline comments: the review's numeric id.
    Review(String),
    /// CI results of one commit: its SHA.
    Head(String),
}

impl BatchKey {
    /// The key of `event`; `None` for every event that is pasted on its own (a
    /// conversation comment, a lifecycle event, anything without the id).
    pub fn of(event: &Event) -> Option<Self> {
        if let Some(comment) = &event.comment {
            return match comment.surface {
                Surface::Review | Surface::Inline => comment.review_id.clone().map(Self::Review),
                Surface::Conversation => None,
            };
        }
        ci::head_sha(event).map(|sha| Self::Head(sha.to_owned()))
    }

    /// The field the event log names the batch by.
    pub fn describe(&self) -> String {
        match self {
            Self::Review(id) => format!("review {id}"),
            Self::Head(sha) => format!("head {sha}"),
        }
    }
}

/// The `$payload_excerpt` of deliveries pasted together, in arrival order; `events` is
/// not empty. One event alone is its own excerpt. A review batch is the review (when it
/// is among them) and then each inline comment in arrival order; a CI batch is
/// [`ci::report`] over what was fetched, or, when nothing could be fetched, each event's
/// own excerpt in a JSON array.
pub fn excerpt_of(events: &[&Event], evidence: Option<&ci::Evidence>) -> String {
    if let Some(evidence) = evidence {
        return ci::report(events, evidence);
    }
    match events {
        [] => "{}".to_owned(),
        [one] => excerpt(one),
        _ if events.iter().all(|e| e.comment.is_some()) => {
            let review = events
                .iter()
                .find(|e| e.kind == EventKind::PullRequestReview)
                .and_then(|e| e.comment.as_ref());
            let comments: Vec<_> = events
                .iter()
                .filter(|e| e.kind != EventKind::PullRequestReview)
                .filter_map(|e| e.comment.as_ref())
                .collect();
            review_excerpt(review, &comments)
        }
        _ => {
            let each: Vec<String> = events.iter().map(|e| excerpt(e)).collect();
            format!("[\n{}\n]", each.join(",\n"))
        }
    }
}

/// What the one prompt of `events` shows instead of the lead event's own excerpt:
/// `None` for a lone event with nothing read about it; the one line of
/// [`ci::passed_after_failure`] when every event is a CI pass on a head whose failure was
/// pasted before (`failure_reported`); else [`excerpt_of`].
pub fn paste_excerpt(
    events: &[&Event],
    evidence: Option<&ci::Evidence>,
    failure_reported: bool,
) -> Option<String> {
    let passed = |e: &&Event| ci::outcome(e) == Some(ci::Outcome::Passed);
    match events {
        [lead, ..] if failure_reported && events.iter().all(passed) => {
            Some(ci::passed_after_failure(lead))
        }
        [_] if evidence.is_none() => None,
        _ => Some(excerpt_of(events, evidence)),
    }
}

/// The `$delivery_id` of deliveries pasted together: their keys, comma-separated.
pub fn delivery_ids(keys: &[String]) -> Option<String> {
    (!keys.is_empty()).then(|| keys.join(", "))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn review(id: u64, body: &str) -> Event {
        Event::from_webhook(
            "pull_request_review",
            &json!({
                "action": "submitted",
                "review": {"id": id, "node_id": format!("PRR_{id}"), "body": body, "state": "changes_requested",
                           "html_url": "https://github.com/o/r/pull/2#pullrequestreview-1", "user": {"login": "ann"}},
            }),
        )
    }

    fn inline(id: u64, review: u64, path: &str, line: u64, body: &str) -> Event {
        Event::from_webhook(
            "pull_request_review_comment",
            &json!({
                "action": "created",
                "comment": {"id": id, "node_id": format!("PRRC_{id}"), "pull_request_review_id": review,
                            "path": path, "line": line, "body": body, "user": {"login": "ann"},
                            "html_url": format!("https://github.com/o/r/pull/2#discussion_r{id}")},
            }),
        )
    }

    #[test]
    fn a_review_and_its_inline_comments_share_a_key_and_a_conversation_comment_has_none() {
        assert_eq!(BatchKey::of(&review(7, "x")), Some(BatchKey::Review("7".into())));
        assert_eq!(BatchKey::of(&inline(8, 7, "a.rs", 1, "y")), Some(BatchKey::Review("7".into())));
        let conversation = Event::from_webhook(
            "issue_comment",
            &json!({"action": "created", "comment": {"id": 9, "body": "z"}}),
        );
        assert_eq!(BatchKey::of(&conversation), None);
    }

    #[test]
    fn a_review_batch_puts_the_review_body_first_then_each_comment_with_its_anchor() {
        let (a, r, b) = (
            inline(8, 7, "src/a.rs", 3, "first"),
            review(7, "see inline"),
            inline(9, 7, "b.rs", 40, "second"),
        );
        let text = excerpt_of(&[&a, &r, &b], None);
        let got: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(got["review"]["body"], "see inline");
        assert_eq!(got["review"]["state"], "changes_requested");
        assert_eq!(got["comments"][0]["at"], "src/a.rs:3");
        assert_eq!(got["comments"][0]["body"], "first");
        assert_eq!(got["comments"][1]["at"], "b.rs:40");
        let (review_at, first_at) = (text.find("see inline").unwrap(), text.find("first").unwrap());
        assert!(review_at < first_at, "the review body comes first:\n{text}");
    }

    #[test]
    fn one_event_alone_is_its_own_excerpt() {
        let r = review(7, "lone");
        assert_eq!(excerpt_of(&[&r], None), excerpt(&r));
    }

    #[test]
    fn a_pass_is_one_line_only_after_a_reported_failure() {
        let pass = Event::from_webhook(
            "workflow_run",
            &json!({"workflow_run": {"id": 1, "name": "CI", "conclusion": "success", "head_sha": "abcdef123"}}),
        );
        assert_eq!(paste_excerpt(&[&pass], None, false), None);
        let line = paste_excerpt(&[&pass], None, true).unwrap();
        assert!(line.contains("CI passed on abcdef1 after the failure reported earlier"), "{line}");
        let r = review(7, "x");
        assert_eq!(paste_excerpt(&[&r], None, true), None);
    }

    #[test]
    fn delivery_ids_name_every_key() {
        assert_eq!(delivery_ids(&["a".into(), "b".into()]).as_deref(), Some("a, b"));
        assert_eq!(delivery_ids(&[]), None);
    }
}

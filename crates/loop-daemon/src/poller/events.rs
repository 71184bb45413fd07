//! Polled GitHub objects as the normalized [`Event`] a webhook would have produced.
//!
//! Same kinds and action names (`issue_comment`/`created`, `pull_request_review`/
//! `submitted`, `pull_request_review_comment`/`created`, `issues`/`labeled` for presence,
//! `issues`/`closed` for a closure), same node ids, so [`Event::dedup_key`] gives the key
//! the receiver would give and hybrid mode delivers each thing once (SPEC §1). Nothing
//! here judges an event or keeps raw payloads.

use loop_core::WorkItemRef;
use loop_core::event::{Actor, Comment, Entity, Event, EventKind, Surface};
use loop_github::{CommentSurface, ItemKind, ItemStatus, ListedItem, ThreadComment};

/// An actor from a login GitHub reported (`""` = a deleted account).
pub fn actor(login: &str) -> Actor {
    match login {
        "" => Actor::Nobody,
        text => text.parse().map_or_else(|_| Actor::Unrecognised(text.to_owned()), Actor::User),
    }
}

fn entity(item: &ListedItem, linked: &[WorkItemRef]) -> Entity {
    Entity {
        number: Some(item.item.number()),
        is_pull_request: item.kind == ItemKind::PullRequest,
        title: Some(item.title.clone()).filter(|t| !t.is_empty()),
        state: Some("open".to_owned()),
        labels: item.labels.clone(),
        author: item.author.parse().ok(),
        body: Some(item.body.clone()).filter(|b| !b.is_empty()),
        html_url: Some(item.html_url.clone()),
        updated_at: Some(item.updated_at.clone()),
        closing_issues: linked.to_vec(),
        ..Entity::default()
    }
}

fn lifecycle_kind(kind: ItemKind) -> EventKind {
    match kind {
        ItemKind::Issue => EventKind::Issues,
        ItemKind::PullRequest => EventKind::PullRequest,
    }
}

/// The comment, review or inline comment as its webhook event.
pub fn comment_event(item: &ListedItem, linked: &[WorkItemRef], comment: &ThreadComment) -> Event {
    let (kind, action, surface) = match &comment.surface {
        CommentSurface::Conversation => (EventKind::IssueComment, "created", Surface::Conversation),
        CommentSurface::Review { .. } => {
            (EventKind::PullRequestReview, "submitted", Surface::Review)
        }
        CommentSurface::Inline { .. } => {
            (EventKind::PullRequestReviewComment, "created", Surface::Inline)
        }
    };
    let (path, line, review_state, review_id) = match &comment.surface {
        CommentSurface::Conversation => (None, None, None, None),
        // Webhooks spell review states in lower case; REST in upper case.
        CommentSurface::Review { state } => {
            (None, None, Some(state.to_ascii_lowercase()), Some(comment.id.to_string()))
        }
        CommentSurface::Inline { path, line, review } => {
            (Some(path.clone()), *line, None, review.map(|id| id.to_string()))
        }
    };
    let author = actor(&comment.author);
    Event {
        kind,
        action: Some(action.to_owned()),
        repository: Some(item.item.repo().clone()),
        entity: Some(entity(item, linked)),
        actor: author.clone(),
        comment: Some(Comment {
            surface,
            id: Some(comment.id.to_string()),
            node_id: Some(comment.node_id.clone()),
            body: Some(comment.body.clone()),
            author,
            html_url: Some(comment.html_url.clone()).filter(|u| !u.is_empty()),
            path,
            line,
            review_state,
            review_id,
        }),
        label: None,
        runs: Vec::new(),
        status: None,
        branches: Vec::new(),
    }
}

/// The presence of a labelled item: a `labeled` event that can spawn a session. Its
/// dedup key names the item's `updated_at`, so a webhook `labeled` for the same change
/// and this presence are one delivery.
pub fn presence_event(item: &ListedItem, linked: &[WorkItemRef], label: &str) -> Event {
    Event {
        kind: lifecycle_kind(item.kind),
        action: Some("labeled".to_owned()),
        repository: Some(item.item.repo().clone()),
        entity: Some(entity(item, linked)),
        actor: Actor::Nobody,
        comment: None,
        label: Some(label.to_owned()),
        runs: Vec::new(),
        status: None,
        branches: Vec::new(),
    }
}

/// The close event of an item GitHub reports closed or merged; its sender is the closer.
pub fn close_event(status: &ItemStatus) -> Event {
    Event {
        kind: lifecycle_kind(status.kind),
        action: Some("closed".to_owned()),
        repository: Some(status.item.repo().clone()),
        entity: Some(Entity {
            number: Some(status.item.number()),
            is_pull_request: status.kind == ItemKind::PullRequest,
            title: Some(status.title.clone()).filter(|t| !t.is_empty()),
            state: Some("closed".to_owned()),
            merged: (status.kind == ItemKind::PullRequest).then_some(status.merged),
            html_url: Some(status.html_url.clone()),
            updated_at: Some(status.updated_at.clone()),
            ..Entity::default()
        }),
        actor: status.closed_by.as_deref().map_or(Actor::Nobody, actor),
        comment: None,
        label: None,
        runs: Vec::new(),
        status: None,
        branches: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn listed(kind: ItemKind) -> ListedItem {
        ListedItem {
            item: "github:octo/app#16".parse().unwrap(),
            node_id: "PR_16".into(),
            kind,
            title: "Fix".into(),
            body: String::new(),
            html_url: "https://github.com/octo/app/pull/16".into(),
            author: "ann".into(),
            labels: vec!["the-loop: auto-execute".into()],
            updated_at: "2026-11-29T10:00:00Z".into(),
        }
    }

    fn thread_comment(surface: CommentSurface) -> ThreadComment {
        ThreadComment {
            id: 5,
            node_id: "IC_5".into(),
            surface,
            body: "hi".into(),
            author: "ann".into(),
            created_at: "2026-11-29T10:00:00Z".into(),
            updated_at: "2026-11-29T10:00:00Z".into(),
            html_url: "https://github.com/octo/app/pull/16#issuecomment-5".into(),
        }
    }

    #[test]
    fn a_polled_conversation_comment_has_the_webhooks_dedup_key() {
        let polled = comment_event(
            &listed(ItemKind::PullRequest),
            &[],
            &thread_comment(CommentSurface::Conversation),
        );
        let pushed = Event::from_webhook(
            "issue_comment",
            &json!({
                "action": "created",
                "repository": {"full_name": "octo/app", "html_url": "https://github.com/octo/app"},
                "issue": {"number": 16, "pull_request": {"url": "x"}},
                "comment": {"id": 5, "node_id": "IC_5", "body": "hi", "user": {"login": "ann"}},
            }),
        );
        assert_eq!(polled.dedup_key(), pushed.dedup_key());
        assert_eq!(polled.pull_request(), pushed.pull_request());
        assert_eq!(polled.actor, pushed.actor);
    }

    #[test]
    fn a_polled_review_is_submitted_with_a_lower_case_state() {
        let mut review = thread_comment(CommentSurface::Review { state: "APPROVED".into() });
        review.node_id = "PRR_5".into();
        let event = comment_event(&listed(ItemKind::PullRequest), &[], &review);
        assert_eq!(event.dedup_key().unwrap().as_str(), "pull_request_review:PRR_5:submitted");
        assert_eq!(event.comment.unwrap().review_state.as_deref(), Some("approved"));
    }

    #[test]
    fn an_inline_comment_keeps_its_anchor() {
        let inline = thread_comment(CommentSurface::Inline {
            path: "src/a.rs".into(),
            line: Some(3),
            review: Some(5),
        });
        let event = comment_event(&listed(ItemKind::PullRequest), &[], &inline);
        assert_eq!(event.kind, EventKind::PullRequestReviewComment);
        let comment = event.comment.unwrap();
        assert_eq!((comment.path.as_deref(), comment.line), (Some("src/a.rs"), Some(3)));
    }

    #[test]
    fn a_deleted_author_is_nobody_and_a_malformed_one_is_unrecognised() {
        assert_eq!(actor(""), Actor::Nobody);
        assert_eq!(actor("not a login"), Actor::Unrecognised("not a login".into()));
        assert_eq!(actor("ann").login().map(|l| l.as_str()), Some("ann"));
    }

    #[test]
    fn presence_carries_the_label_and_closure_the_closer() {
        let label = "the-loop: auto-execute";
        let presence = presence_event(&listed(ItemKind::Issue), &[], label);
        assert!(presence.carries_label(label));
        assert_eq!(
            presence.dedup_key().unwrap().as_str(),
            "issues:github:octo/app#16:labeled:2026-11-29T10:00:00Z"
        );
        let closed = close_event(&ItemStatus {
            item: "github:octo/app#16".parse().unwrap(),
            node_id: "PR_16".into(),
            kind: ItemKind::PullRequest,
            title: "Fix".into(),
            html_url: String::new(),
            state: loop_github::ItemState::Closed,
            state_reason: None,
            merged: true,
            closed_by: Some("ann".into()),
            updated_at: "2026-11-29T11:00:00Z".into(),
        });
        assert!(closed.is_close());
        assert_eq!(closed.closed_item().unwrap().to_string(), "github:octo/app#16");
        assert_eq!(closed.entity.unwrap().merged, Some(true));
        assert_eq!(closed.actor.name(), Some("ann"));
    }
}

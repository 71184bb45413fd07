//! The give-up notice (issue-240): the one comment the poller posts when it abandons a
//! comment after its retry budget.
//!
//! Built only from the ref, the comment id, the comment's URL and the attempt count — no
//! text of the abandoned comment can reach it — and self-marked so neither ingress acts
//! on it.

use loop_core::WorkItemRef;
use loop_core::guards::mark_self_authored;

/// The notice body for comment `id` (linked when `url` is known) on `item`.
pub fn give_up_notice(item: &WorkItemRef, id: u64, url: Option<&str>, attempts: u32) -> String {
    let comment = match url.filter(|u| !u.is_empty()) {
        Some(url) => format!("[comment {id}]({url})"),
        None => format!("comment {id}"),
    };
    let text = format!(
        "😕 the-loop could not deliver {comment} on {item}: every one of {attempts} delivery \
         attempt(s) failed, so it is abandoned and won't be retried.\n\n\
         To recover, post the instruction again — a new comment is a new delivery with a full \
         budget, and nothing on disk needs editing. Check the session with \
         `the-loop sessions list`; the causes are in the event log as `dispatch.failed` errors."
    );
    mark_self_authored(&text)
}

#[cfg(test)]
mod tests {
    use loop_core::guards::is_self_authored;

    use super::*;

    #[test]
    fn the_notice_names_the_comment_the_attempts_and_the_recovery_and_is_marked() {
        let item: WorkItemRef = "github:octo/app#15".parse().unwrap();
        let body = give_up_notice(&item, 42, Some("https://github.com/x#issuecomment-42"), 3);
        assert!(body.contains("[comment 42](https://github.com/x#issuecomment-42)"));
        assert!(body.contains("github:octo/app#15") && body.contains("3 delivery"));
        assert!(body.contains("post the instruction again"));
        assert!(body.contains("the-loop sessions list"));
        assert!(is_self_authored(&body));
        let bare = give_up_notice(&item, 42, None, 3);
        assert!(bare.contains("comment 42 on") && !bare.contains("]("));
    }
}

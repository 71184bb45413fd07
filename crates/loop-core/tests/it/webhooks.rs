//! Real webhook payloads (see `tests/fixtures/webhooks/README.md`) through normalization,
//! routing and the excerpt.

use loop_core::event::{Actor, Event};
use loop_core::excerpt::{EXCERPT_MAX_CHARS, excerpt};
use loop_core::route::route;
use serde_json::Value;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/webhooks");

/// Each fixture, the refs it must route to, and whether it names a human actor.
const EXPECTED: &[(&str, &[&str], bool)] = &[
    ("check_run.completed", &["github:Codertocat/Hello-World#2"], false),
    ("check_run.created", &["github:Codertocat/Hello-World#2"], false),
    ("check_run.requested_action", &["github:electron/electron#26764"], false),
    ("check_run.rerequested", &[], false),
    ("check_suite.completed", &["github:Codertocat/Hello-World#2"], false),
    ("check_suite.completed.2", &[], false),
    ("check_suite.requested", &[], false),
    ("check_suite.rerequested", &["github:Codertocat/Hello-World#2"], false),
    ("issue_comment.created", &["github:Codertocat/Hello-World#1"], true),
    ("issue_comment.deleted", &["github:Codertocat/Hello-World#1"], true),
    ("issue_comment.edited", &["github:Codertocat/Hello-World#1"], true),
    ("issues.assigned", &["github:Codertocat/Hello-World#1"], true),
    ("issues.deleted", &["github:Codertocat/Hello-World#1"], true),
    ("issues.edited", &["github:Codertocat/Hello-World#1"], true),
    ("issues.labeled", &["github:Codertocat/Hello-World#1"], true),
    ("issues.opened", &["github:Codertocat/Hello-World#1"], true),
    ("issues.reopened", &["github:Codertocat/Hello-World#1"], true),
    ("issues.unlabeled", &["github:Codertocat/Hello-World#1"], true),
    ("pull_request.closed", &["github:Codertocat/Hello-World#2"], true),
    ("pull_request.converted_to_draft", &["github:Codertocat/Hello-World#2"], true),
    ("pull_request.labeled", &["github:Codertocat/Hello-World#2"], true),
    ("pull_request.opened", &["github:Codertocat/Hello-World#2"], true),
    ("pull_request.ready_for_review", &["github:Codertocat/Hello-World#2"], true),
    ("pull_request.reopened", &["github:Codertocat/Hello-World#2"], true),
    ("pull_request.synchronize", &["github:Codertocat/Hello-World#2"], true),
    ("pull_request_review.dismissed", &["github:Codertocat/Hello-World#2"], true),
    ("pull_request_review.submitted", &["github:Codertocat/Hello-World#2"], true),
    ("pull_request_review_comment.created", &["github:Codertocat/Hello-World#2"], true),
    ("pull_request_review_comment.deleted", &["github:Codertocat/Hello-World#2"], true),
    ("pull_request_review_comment.edited", &["github:Codertocat/Hello-World#2"], true),
    ("status", &[], false),
    ("status.2", &[], false),
    ("workflow_run.completed", &[], false),
    ("workflow_run.completed.2", &["github:octo-org/octo-repo#2"], false),
    ("workflow_run.requested", &[], false),
];

fn load(stem: &str) -> (String, Value) {
    let path = format!("{FIXTURES}/{stem}.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"));
    let payload = serde_json::from_str(&text).unwrap_or_else(|err| panic!("{path}: {err}"));
    let event = stem.split('.').next().unwrap_or(stem).to_owned();
    (event, payload)
}

#[test]
fn every_fixture_is_in_the_table_and_every_default_event_is_covered() {
    let mut on_disk: Vec<String> = std::fs::read_dir(FIXTURES)
        .expect("the fixtures directory is part of the crate")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".json").map(str::to_owned)
        })
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = EXPECTED.iter().map(|(stem, ..)| (*stem).to_owned()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
    for kind in loop_core::event::EventKind::DEFAULT_SET {
        assert!(
            listed.iter().any(|stem| stem.split('.').next() == Some(kind.as_str())),
            "no fixture for {}",
            kind.as_str()
        );
    }
}

#[test]
fn real_payloads_route_to_the_expected_refs() {
    for (stem, expected, human) in EXPECTED {
        let (name, payload) = load(stem);
        let event = Event::from_webhook(&name, &payload);
        let refs: Vec<String> = route(&event).items().map(ToString::to_string).collect();
        assert_eq!(refs, *expected, "{stem}");
        assert_eq!(
            matches!(event.actor, Actor::User(_)),
            *human,
            "{stem}: actor {:?}",
            event.actor
        );
        assert!(event.dedup_key().is_some(), "{stem}: no dedup key");
    }
}

#[test]
fn real_payloads_render_excerpts_within_the_caps_without_their_noise() {
    for (stem, ..) in EXPECTED {
        let (name, payload) = load(stem);
        let text = excerpt(&Event::from_webhook(&name, &payload));
        assert!(text.chars().count() <= EXCERPT_MAX_CHARS, "{stem}: {} chars", text.len());
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{stem}: {e}"));
        assert!(value.is_object(), "{stem}");
        for noise in ["api.github.com", "\"sender\"", "\"user\"", "\"diff_hunk\"", "avatar_url"] {
            assert!(!text.contains(noise), "{stem}: excerpt carries {noise}:\n{text}");
        }
    }
}

#[test]
fn a_real_comment_excerpt_is_its_body_address_and_author() {
    let (name, payload) = load("pull_request_review_comment.created");
    let value: Value = serde_json::from_str(&excerpt(&Event::from_webhook(&name, &payload)))
        .expect("the excerpt is JSON");
    assert_eq!(
        value,
        serde_json::json!({"comment": {
            "path": "README.md",
            "line": 265,
            "body": "Maybe you should use more emoji on this line.",
            "html_url": "https://github.com/Codertocat/Hello-World/pull/2#discussion_r284312630",
            "author": "Codertocat",
        }})
    );
}

/// The receiver reads only the fields normalization uses: for every real payload that is
/// the same event as normalizing the whole parsed payload.
#[test]
fn reading_a_raw_body_gives_the_event_the_whole_payload_gives() {
    for (stem, _, _) in EXPECTED {
        let (event, payload) = load(stem);
        let body = std::fs::read(format!("{FIXTURES}/{stem}.json")).unwrap();
        assert_eq!(
            Event::read_webhook(&event, &body),
            Some(Event::from_webhook(&event, &payload)),
            "{stem}"
        );
    }
    // A key spelled with an escape is the key it decodes to.
    let escaped = br#"{"\u0061ction":"opened","sender":{"log\u0069n":"octocat"}}"#;
    let payload: serde_json::Value = serde_json::from_slice(escaped).unwrap();
    let event = Event::read_webhook("issues", escaped).unwrap();
    assert_eq!(event.action.as_deref(), Some("opened"));
    assert_eq!(event, Event::from_webhook("issues", &payload));
    for not_an_object in [&b"[]"[..], b"1", b"{", b"{} {}", b""] {
        assert_eq!(Event::read_webhook("issues", not_an_object), None);
    }
}

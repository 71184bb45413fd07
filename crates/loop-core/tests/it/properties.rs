//! Properties over arbitrary input: normalization, routing, guards, control parsing and
//! the excerpt never panic, and the excerpt is always JSON within its cap.

use loop_core::config::{ControlConfig, InstanceConfig};
use loop_core::control::Vocabulary;
use loop_core::event::Event;
use loop_core::excerpt::{EXCERPT_MAX_CHARS, excerpt};
use loop_core::guards;
use loop_core::linkage;
use loop_core::route::route;
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Keys the normalizer reads, so arbitrary payloads reach its deeper paths.
const KEYS: &[&str] = &[
    "action",
    "repository",
    "full_name",
    "html_url",
    "issue",
    "pull_request",
    "comment",
    "review",
    "user",
    "login",
    "sender",
    "number",
    "body",
    "title",
    "labels",
    "name",
    "head",
    "ref",
    "check_run",
    "check_suite",
    "workflow_run",
    "pull_requests",
    "branches",
    "output",
    "summary",
    "label",
    "closingIssuesReferences",
    "nodes",
    "nameWithOwner",
    "owner",
    "url",
    "id",
    "node_id",
    "path",
    "line",
    "state",
    "draft",
    "merged",
    "head_branch",
    "description",
];

const EVENTS: &[&str] = &[
    "issues",
    "issue_comment",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "pull_request_review_thread",
    "workflow_run",
    "check_run",
    "check_suite",
    "status",
    "push",
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,40}",
        Just("octo/app".to_owned()),
        Just("https://ghe.example.com/o/r".to_owned()),
        Just("claude/issue-15".to_owned()),
        Just("Closes other/repo#15, fixes GH-2 and https://github.com/a/b/issues/3".to_owned()),
        "(the-loop (start|stop|add-collaborator @[a-z]{1,5}) ?){1,3}",
        "[a-z]{0,5}".prop_map(|s| s.repeat(1500)),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (0u64..40).prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..8).prop_map(|entries| {
                let map: Map<String, Value> =
                    entries.into_iter().map(|(k, v)| ((*k).to_owned(), v)).collect();
                Value::Object(map)
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_payloads_never_panic_and_excerpts_stay_json_within_the_cap(
        name in prop::sample::select(EVENTS),
        payload in json(),
    ) {
        let event = Event::from_webhook(name, &payload);
        let routed = route(&event);
        let _ = event.dedup_key();
        let _ = event.closed_item();
        let _ = guards::self_marker(&event);
        let _ = guards::actor(&event, &routed, &[], |_| Vec::new());
        let text = excerpt(&event);
        prop_assert!(text.chars().count() <= EXCERPT_MAX_CHARS);
        let parsed: Value = serde_json::from_str(&text).expect("the excerpt is JSON");
        prop_assert!(parsed.is_object());
    }

    #[test]
    fn arbitrary_comment_bodies_never_panic(body in "\\PC{0,300}") {
        let vocabulary = Vocabulary::from(&ControlConfig::default());
        let _ = vocabulary.parse(&body);
        let _ = guards::address(&body);
        let _ = guards::instance_scope(&InstanceConfig::default(), Some(&body), &[], |_| false);
        let own = "octo/app".parse().expect("a valid repository");
        let _ = linkage::closing_keyword_references(&body, &own);
        let _ = linkage::branch_issue_number(&body);
    }

    #[test]
    fn huge_free_text_is_capped_and_keeps_the_address(
        body in "\\PC{0,50}",
        repeat in 1usize..400,
    ) {
        let long = body.repeat(repeat);
        let payload = serde_json::json!({
            "comment": {"body": long, "html_url": "https://github.com/o/r/issues/1#c",
                        "path": "src/main.rs", "line": 3},
        });
        let text = excerpt(&Event::from_webhook("pull_request_review_comment", &payload));
        prop_assert!(text.chars().count() <= EXCERPT_MAX_CHARS);
        let value: Value = serde_json::from_str(&text).expect("the excerpt is JSON");
        prop_assert_eq!(&value["comment"]["html_url"], "https://github.com/o/r/issues/1#c");
        prop_assert_eq!(&value["comment"]["path"], "src/main.rs");
    }
}

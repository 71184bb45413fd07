//! The simulator's webhook payloads have GitHub's key structure: every key of the curated
//! examples from `@octokit/webhooks-examples` (fixtures/webhook-examples.json, MIT) is
//! present with the same JSON type, for every event and action the simulator emits.

use std::collections::BTreeMap;

use loop_sim::{JobDraft, ReviewState, StepDraft, WebhookTarget};
use serde_json::Value;

/// Top-level keys of the examples that describe GitHub-App or organisation context the
/// simulator does not model.
const CONTEXT_KEYS: [&str; 3] = ["installation", "organization", "enterprise"];

fn examples() -> BTreeMap<String, Value> {
    serde_json::from_str(include_str!("../../fixtures/webhook-examples.json")).unwrap()
}

/// Key paths with the JSON type at each (`null` is compatible with anything); arrays are
/// described by their first element.
fn key_paths(value: &Value, prefix: &str, out: &mut BTreeMap<String, &'static str>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let path = format!("{prefix}.{k}");
                out.insert(path.clone(), kind(v));
                key_paths(v, &path, out);
            }
        }
        Value::Array(items) => {
            if let Some(first) = items.first() {
                key_paths(first, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether some ancestor of `path` is `null` in `paths` (its children cannot exist).
fn null_ancestor(paths: &BTreeMap<String, &'static str>, path: &str) -> bool {
    path.match_indices(['.', '[']).any(|(i, _)| i > 0 && paths.get(&path[..i]) == Some(&"null"))
}

#[tokio::test]
async fn payloads_have_every_key_of_githubs_examples() {
    let (sim, _) = crate::start().await;
    // Nothing listens on the target: the payloads are recorded before they are sent.
    sim.set_webhook(Some(WebhookTarget { url: "http://127.0.0.1:9/".into(), secret: None }));
    let issue = sim.open_issue("octo/app", "alice", "Bug", &["bug"]).unwrap();
    sim.comment("octo/app", issue, "alice", "hi").unwrap();
    let pr = sim.open_pull_request("octo/app", "bob", "Fix", "Closes #1", "issue-1", &[]).unwrap();
    sim.review("octo/app", pr, "alice", ReviewState::Approved, "ok", &[("a.rs", 1, "x")]).unwrap();
    let step = StepDraft { name: "test".into(), failed: true };
    let job =
        JobDraft { name: "ci".into(), steps: vec![step], annotations: vec![], log: String::new() };
    sim.complete_run("octo/app", pr, "bob", "CI", vec![job]).unwrap();
    sim.merge("octo/app", pr, "alice").unwrap();

    let examples = examples();
    let mut seen = Vec::new();
    for delivery in sim.deliveries() {
        let name = format!("{}.{}", delivery.event, delivery.action);
        // The examples package has no `issues.closed`; it has `issues.opened`'s shape.
        let example_name =
            if name == "issues.closed" { "issues.opened".to_owned() } else { name.clone() };
        let example =
            examples.get(&example_name).unwrap_or_else(|| panic!("no example for {name}"));
        let payload: Value = serde_json::from_str(&delivery.body).unwrap();
        let (mut ours, mut theirs) = (BTreeMap::new(), BTreeMap::new());
        key_paths(&payload, "", &mut ours);
        key_paths(example, "", &mut theirs);
        let problems: Vec<String> = theirs
            .iter()
            .filter(|(path, _)| !CONTEXT_KEYS.iter().any(|c| path.starts_with(&format!(".{c}"))))
            .filter(|(path, _)| !null_ancestor(&ours, path))
            .filter_map(|(path, kind)| match ours.get(path) {
                None => Some(format!("missing {path}")),
                Some(mine) if *mine != *kind && *mine != "null" && *kind != "null" => {
                    Some(format!("{path}: {mine}, GitHub sends {kind}"))
                }
                _ => None,
            })
            // Arrays the simulator leaves empty (assignees, requested reviewers) have no
            // element to compare.
            .filter(|p| !p.starts_with("missing") || !p.contains("[]"))
            .collect();
        assert!(problems.is_empty(), "{name}:\n{}", problems.join("\n"));
        seen.push(name);
    }
    assert_eq!(
        seen,
        [
            "issues.opened",
            "issues.labeled",
            "issue_comment.created",
            "pull_request.opened",
            "pull_request_review.submitted",
            "pull_request_review_comment.created",
            "workflow_run.completed",
            "pull_request.closed",
            "issues.closed",
        ]
    );
}

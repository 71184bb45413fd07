//! The process graph's routes against the real service (docs/control-plane.md, "Process
//! graph"): a work item armed with `do` whose session's checkout is a git repository of
//! its own (its `origin` the item's), its state file at the ad-hoc loop's `work` node.
//! The routes claim, judge and check it through the dispatcher's graph verbs, and refuse
//! what the reference refuses.

use std::path::{Path, PathBuf};
use std::process::Command;

use loop_core::graph::state::WorkItemState;
use serde_json::{Value, json};

use crate::api::{ApiService, ITEM, control, json, session, store};

/// A checkout whose `origin` is `octo/app`'s, the item's spec folder in it with its
/// state at `work`.
fn checkout(root: &Path) -> PathBuf {
    let dir = root.join("checkout");
    std::fs::create_dir_all(dir.join("docs/specs/issue-7")).expect("the spec folder");
    for args in
        [&["init", "-q"][..], &["remote", "add", "origin", "https://github.com/octo/app.git"]]
    {
        let status = Command::new("git").arg("-C").arg(&dir).args(args).status().expect("git");
        assert!(status.success(), "git {args:?}");
    }
    let mut state = WorkItemState::new(ITEM, "pdlc-adhoc-loop");
    state.current_node = "work".into();
    state.nodes.entry("work".into()).or_default().attempts = 1;
    std::fs::write(state_path(&dir), serde_json::to_vec(&state).expect("JSON")).expect("written");
    dir
}

fn state_path(checkout: &Path) -> PathBuf {
    checkout.join("docs/specs/issue-7/work-item-state.json")
}

fn state_of(checkout: &Path) -> WorkItemState {
    let text = std::fs::read_to_string(state_path(checkout)).expect("the state file");
    serde_json::from_str(&text).expect("it parses")
}

/// The service over an item armed with `do`, its session in [`checkout`].
async fn served() -> (ApiService, PathBuf) {
    let api = ApiService::start("", None).await;
    let dir = checkout(api.site.dir.path());
    let item: loop_core::WorkItemRef = ITEM.parse().unwrap();
    let store = store(&api.site);
    store.write_section(&item, Some(&control(loop_core::control::Command::Do))).unwrap();
    store.save_local_record(&session(loop_core::record::EndpointStatus::Active, &dir)).unwrap();
    (api, dir)
}

/// The first listed work item's `graph` section.
async fn listed_graph(api: &ApiService) -> Value {
    json(&api.get("/api/v1/work-items", &[]).await)[0]["graph"].clone()
}

async fn post(api: &ApiService, path: &str, body: Value) -> (u16, Value) {
    let answer = api.post(path, &[], &body.to_string()).await;
    (answer.status, json(&answer))
}

#[tokio::test]
async fn a_claim_advances_the_item_the_gate_then_waits_and_check_says_where_it_is() {
    let (api, dir) = served().await;
    let repo = dir.to_str().expect("utf-8");

    let (status, checked) =
        post(&api, "/api/v1/graph/check", json!({"repo": repo, "workItem": "issue-7"})).await;
    assert_eq!(status, 200, "{checked:#}");
    assert_eq!(
        (checked["currentNode"].as_str(), checked["ok"].as_bool()),
        (Some("work"), Some(true))
    );
    assert!(checked.get("repoResolved").is_none(), "{checked:#}");
    assert_eq!(checked["nodes"][0]["node"], "work");
    assert_eq!(checked["nodes"][0]["status"], "in-progress");

    // The listing's `graph`, derived from the state file, follows the pointer.
    let graph = listed_graph(&api).await;
    assert_eq!(
        (graph["loop"].as_str(), graph["workItem"].as_str(), graph["currentNode"].as_str()),
        (Some("pdlc-adhoc-loop"), Some("issue-7"), Some("work")),
        "{graph:#}"
    );
    assert_eq!(graph["phase"], "implementation");
    assert_eq!(
        graph["nodes"][1],
        json!({"id": "review", "phase": null, "skipped": false, "selectable": false, "optIn": false})
    );

    let (status, completed) = post(
        &api,
        "/api/v1/graph/complete",
        json!({"repo": repo, "workItem": "issue-7", "actor": "octocat"}),
    )
    .await;
    assert_eq!(status, 200, "{completed:#}");
    assert_eq!(completed["node"], "work");
    assert_eq!(
        (completed["status"].as_str(), completed["moved"].as_bool()),
        (Some("pass"), Some(true))
    );
    assert_eq!(completed["currentNode"], "review");
    assert_eq!(completed["reason"], "");
    let state = state_of(&dir);
    assert_eq!(state.current_node, "review", "saved in the checkout's state file");
    assert_eq!(state.completions["work"].by, "octocat");
    assert_eq!(listed_graph(&api).await["currentNode"], "review", "the listing follows the state");

    // The human gate reads no comment: it waits, and the item is parked there.
    let (status, advanced) =
        post(&api, "/api/v1/graph/advance", json!({"repo": repo, "workItem": ITEM})).await;
    assert_eq!(status, 200, "{advanced:#}");
    assert_eq!(
        (advanced["node"].as_str(), advanced["status"].as_str()),
        (Some("review"), Some("wait"))
    );
    assert_eq!(advanced["attempts"], 1);
    let (_, checked) = post(
        &api,
        "/api/v1/graph/check",
        json!({"repo": repo, "workItem": "issue-7", "ref": ITEM}),
    )
    .await;
    assert_eq!(checked["parked"]["node"], "review", "{checked:#}");
    let row =
        |id: &str| checked["nodes"].as_array().unwrap().iter().find(|r| r["node"] == id).cloned();
    assert_eq!(row("work").unwrap()["status"], "pass");
    assert_eq!(row("review").unwrap()["status"], "waiting");
    assert_eq!(row("complete").unwrap()["status"], "not-reached");

    // Claims the runtime refuses, with its reasons.
    let claim = |node: &str| json!({"repo": repo, "workItem": "issue-7", "node": node});
    let (_, past) = post(&api, "/api/v1/graph/complete", claim("work")).await;
    assert_eq!(
        (past["reason"].as_str(), past["moved"].as_bool()),
        (Some("already-past"), Some(false))
    );
    let (_, ahead) = post(&api, "/api/v1/graph/complete", claim("complete")).await;
    assert_eq!(ahead["reason"], "not-current", "{ahead:#}");
    assert_eq!(ahead["currentNode"], "review");

    let site = api.stop().await;
    let advanced = site.events_named("graph.advanced");
    assert_eq!(advanced.len(), 1, "{advanced:#?}");
    assert_eq!(
        (advanced[0]["from"].as_str(), advanced[0]["to"].as_str()),
        (Some("work"), Some("review"))
    );
    assert_eq!(site.events_named("graph.parked").len(), 1);
}

#[tokio::test]
async fn the_shape_of_a_loop_and_the_refusals_of_every_graph_route() {
    let (api, dir) = served().await;
    let repo = dir.to_str().expect("utf-8").to_owned();

    let shape = api.get(&format!("/api/v1/graph?repo={repo}"), &[]).await;
    assert_eq!(shape.status, 200, "{}", shape.body);
    let shape = json(&shape);
    assert_eq!(
        (shape["name"].as_str(), shape["start"].as_str()),
        (Some("pdlc-work-item-loop"), Some("phase-selection"))
    );
    assert_eq!(
        shape["specRoot"],
        format!("{}/docs/specs", std::fs::canonicalize(&dir).unwrap().display())
    );
    let first = &shape["nodes"][0];
    assert_eq!(
        (first["id"].as_str(), first["actor"].as_str(), first["required"].as_bool()),
        (Some("phase-selection"), Some("human"), Some(true))
    );
    assert!(shape["edges"].as_array().is_some_and(|e| e.iter().any(|e| e["on"] == "selected")));
    let inner = json(&api.get(&format!("/api/v1/graph?repo={repo}&pr=3"), &[]).await);
    assert_eq!(inner["name"], "pdlc-pr-loop");

    // `prRepo` without `pr`: 400 on every route.
    let lone = api.get(&format!("/api/v1/graph?repo={repo}&prRepo=octo/lib"), &[]).await;
    assert_eq!(lone.status, 400, "{}", lone.body);
    for verb in ["check", "complete", "advance"] {
        let body = json!({"repo": repo, "workItem": "issue-7", "prRepo": "octo/lib"});
        let (status, answer) = post(&api, &format!("/api/v1/graph/{verb}"), body).await;
        assert_eq!(status, 400, "{verb}: {answer:#}");
        assert!(answer["detail"].as_str().unwrap().contains("`pr`"), "{answer:#}");
    }

    // A repo that is not a directory: 400, but check answers that it did not resolve.
    let nowhere = dir.join("nowhere");
    let nowhere = nowhere.to_str().unwrap();
    let missing = api.get(&format!("/api/v1/graph?repo={nowhere}"), &[]).await;
    assert_eq!(missing.status, 400, "{}", missing.body);
    for verb in ["complete", "advance"] {
        let (status, answer) = post(
            &api,
            &format!("/api/v1/graph/{verb}"),
            json!({"repo": nowhere, "workItem": "issue-7"}),
        )
        .await;
        assert_eq!(status, 400, "{verb}: {answer:#}");
        assert!(answer["detail"].as_str().unwrap().contains("not a directory"), "{answer:#}");
    }
    let (status, unresolved) =
        post(&api, "/api/v1/graph/check", json!({"repo": nowhere, "workItem": "issue-7"})).await;
    assert_eq!(status, 200, "{unresolved:#}");
    assert_eq!(
        unresolved,
        json!({"workItem": "issue-7", "currentNode": "", "ok": false, "parked": null, "nodes": [], "repoResolved": false})
    );

    // A malformed work item, ids that disagree, and a directory no graph is driven in.
    for (body, expected) in [
        (json!({"repo": repo, "workItem": "issue-x"}), 400),
        (json!({"repo": repo, "workItem": "issue-7", "ref": "github:octo/app#8"}), 400),
        (json!({"repo": repo, "workItem": "octo"}), 400),
        (json!({"repo": repo, "workItem": "issue-9"}), 404),
        (json!({"repo": api.site.dir.path(), "workItem": ITEM}), 404),
    ] {
        let (status, answer) = post(&api, "/api/v1/graph/complete", body.clone()).await;
        assert_eq!(status, expected, "{body}: {answer:#}");
    }
    let (status, answer) = post(
        &api,
        "/api/v1/graph/check",
        json!({"repo": repo, "workItem": "issue-7", "recompute": true}),
    )
    .await;
    assert_eq!(status, 400, "{answer:#}");
    assert_eq!(state_of(&dir).current_node, "work", "no refusal moved anything");
    api.stop().await;
}

#[tokio::test]
async fn a_force_moves_the_pointer_past_the_gate_and_a_skip_declares_nodes_ahead() {
    let (api, dir) = served().await;
    let repo = dir.to_str().expect("utf-8");
    let address = |extra: Value| {
        let mut body = json!({"repo": repo, "workItem": "issue-7"});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };

    // Refused before anything is written: no reason, an unknown node, a bad actor, an
    // empty declaration.
    for (path, body) in [
        ("force", json!({"toNode": "review", "reason": " "})),
        ("force", json!({"toNode": "nowhere", "reason": "why"})),
        ("force", json!({"toNode": "review", "reason": "why", "actor": "not a login"})),
        ("skip", json!({"nodes": ["review"], "reason": ""})),
        ("skip", json!({"nodes": [], "reason": "why"})),
    ] {
        let (status, answer) = post(&api, &format!("/api/v1/graph/{path}"), address(body)).await;
        assert_eq!(status, 400, "{path}: {answer:#}");
    }
    let (_, unknown) =
        post(&api, "/api/v1/graph/force", address(json!({"toNode": "nowhere", "reason": "why"})))
            .await;
    assert!(unknown["detail"].as_str().unwrap().contains("work, review"), "{unknown:#}");
    assert_eq!(state_of(&dir).current_node, "work", "no refusal moved anything");

    // The ad-hoc loop's nodes are not skippable: every token is rejected, 200.
    let (status, skipped) = post(
        &api,
        "/api/v1/graph/skip",
        address(json!({"nodes": ["review", "bogus"], "reason": "tiny", "actor": "octocat"})),
    )
    .await;
    assert_eq!(status, 200, "{skipped:#}");
    assert_eq!(skipped["workItem"], ITEM);
    assert_eq!(skipped["declared"], json!([]));
    assert_eq!(skipped["rejected"][0]["token"], "review");
    assert!(skipped["rejected"][1]["why"].as_str().unwrap().contains("not a node or skip set"));
    assert!(state_of(&dir).skips.is_empty());

    let (status, forced) = post(
        &api,
        "/api/v1/graph/force",
        address(json!({"toNode": "complete", "reason": "shipped by hand", "actor": "octocat"})),
    )
    .await;
    assert_eq!(status, 200, "{forced:#}");
    assert_eq!(
        (forced["workItem"].as_str(), forced["fromNode"].as_str(), forced["toNode"].as_str()),
        (Some(ITEM), Some("work"), Some("complete"))
    );
    let warnings: Vec<&str> =
        forced["warnings"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(warnings.iter().any(|w| w.contains("not a declared edge")), "{warnings:?}");
    assert!(
        warnings.iter().any(|w| w.contains("could not post the audit comment")),
        "no GitHub here, and the answer says so: {warnings:?}"
    );
    let state = state_of(&dir);
    assert_eq!(state.current_node, "complete");
    assert!(state.nodes["complete"].forced);
    assert_eq!(state.nodes["work"].outcome, "", "the bypassed gate has no verdict");
    assert_eq!(state.forced[0]["actor"], "octocat");
    assert_eq!(state.forced[0]["reason"], "shipped by hand");
    assert_eq!(state.forced[0]["warnings"].as_array().map(Vec::len), Some(1));

    let (_, checked) = post(&api, "/api/v1/graph/check", address(json!({}))).await;
    let row =
        |id: &str| checked["nodes"].as_array().unwrap().iter().find(|r| r["node"] == id).cloned();
    assert_eq!(row("complete").unwrap()["forced"], true, "{checked:#}");

    let site = api.stop().await;
    let lines = site.events_named("graph.forced");
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert_eq!(
        (lines[0]["from"].as_str(), lines[0]["to"].as_str(), lines[0]["level"].as_str()),
        (Some("work"), Some("complete"), Some("warning"))
    );
    assert_eq!(site.events_named("graph.skips_rejected").len(), 2);
    assert!(site.events_named("graph.skips_declared").is_empty());
}

//! Dispatch drives the process graph (docs/process-graph.md), end to end: the
//! simulator's webhooks through the real receiver and dispatcher, sessions in real tmux
//! with the stand-in harness, each work item cloned from a real git repository.

use std::path::Path;

use loop_core::graph::state::WorkItemState;
use loop_daemon::dispatcher::GraphTarget;
use loop_sim::test_support::git_origin;
use serde_json::Value;

use crate::dispatch_lab::{LABEL, Lab, OWNER, REPO, STRANGER};

/// A lab whose sessions run in clones of `REPO`, served from a bare repository.
async fn lab_with_checkouts(git: &Path) -> Lab {
    let base = git_origin(&git.join("origin"), REPO);
    let extra = format!(
        "  workspace:\n    root: {}\n    strategy: clone\n    cloneUrls:\n      - host: github.com\n        base: {base}\n",
        git.join("workspaces").display()
    );
    Lab::start(&extra).await
}

fn labels(lab: &Lab, number: u64) -> Vec<String> {
    lab.sim.world().item(REPO, number).expect("the issue").labels.clone()
}

fn comments(lab: &Lab, number: u64) -> Vec<String> {
    let world = lab.sim.world();
    world.item(REPO, number).expect("the issue").comments.iter().map(|c| c.body.clone()).collect()
}

fn state_file(git: &Path, number: u64) -> WorkItemState {
    let path = git.join(format!(
        "workspaces/.work-items/github-octo-app-{number}/github.com/octo/app/docs/specs/issue-{number}/work-item-state.json"
    ));
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    serde_json::from_str(&text).expect("the state file parses")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_enters_phase_selection_and_an_authorized_execute_moves_to_the_first_phase() {
    let git = tempfile::tempdir().expect("a temp dir");
    let mut lab = lab_with_checkouts(git.path()).await;
    let number = lab.started_issue().await;

    assert_eq!(labels(&lab, number), [LABEL, "loop:phase-selection"], "{:#?}", lab.events());
    let checklist: Vec<String> = comments(&lab, number)
        .into_iter()
        .filter(|c| c.contains("<!-- the-loop:phase-selection -->"))
        .collect();
    assert_eq!(checklist.len(), 1, "{:#?}", comments(&lab, number));
    assert!(
        checklist[0].contains("<!-- the-loop:agent-comment -->"),
        "self-marked: {}",
        checklist[0]
    );
    let pasted = lab.pasted().await;
    assert!(
        pasted[0].contains("node `phase-selection`") && pasted[0].contains("status: pending"),
        "the spawn prompt's graph block: {}",
        pasted[0]
    );
    assert!(pasted[1].contains("you are now at node `phase-selection`"), "{pasted:#?}");
    let state = state_file(git.path(), number);
    assert_eq!(
        (state.current_node.as_str(), state.loop_name.as_str()),
        ("phase-selection", "pdlc-work-item-loop")
    );

    lab.comment(number, STRANGER, "the-loop execute");
    lab.settle().await;
    assert_eq!(
        state_file(git.path(), number).current_node,
        "phase-selection",
        "a stranger moves nothing"
    );

    lab.comment(number, OWNER, "the-loop execute");
    lab.settle().await;
    assert_eq!(
        labels(&lab, number),
        [LABEL, "loop:brainstorming"],
        "{:#?}",
        lab.named("graph.advanced")
    );
    let state = state_file(git.path(), number);
    assert_eq!(state.current_node, "brainstorming");
    assert!(state.decisions.contains_key("phase-selection"));
    let pasted = lab.pasted().await;
    assert!(
        pasted.iter().any(|p| p.contains("you are now at node `brainstorming`")),
        "the assignment is pasted: {pasted:#?}"
    );
    let text = std::fs::read_to_string(git.path().join(format!(
        "workspaces/.work-items/github-octo-app-{number}/github.com/octo/app/docs/specs/issue-{number}/work-item-state.json"
    )))
    .expect("the state file");
    for handle in ["tmux", "loop-github", git.path().to_str().expect("utf-8"), "harnessSessionId"] {
        assert!(
            !text.contains(handle),
            "no machine handle ({handle}) in the checked-in file: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_outside_the_work_items_checkout_drives_no_graph_and_still_gets_its_events() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.comment(number, OWNER, "the-loop execute");
    lab.settle().await;
    assert_eq!(labels(&lab, number), [LABEL], "no label written");
    let skipped = lab.named("graph.skipped");
    assert_eq!(skipped[0]["reason"], "foreign-checkout", "{skipped:#?}");
    let pasted = lab.pasted().await;
    assert!(!pasted[0].contains("## Process graph"), "no graph, no block: {}", pasted[0]);
    assert!(pasted.iter().any(|p| p.contains("the-loop execute")), "delivered anyway: {pasted:#?}");
}

fn spec_dir(git: &Path, number: u64) -> std::path::PathBuf {
    git.join(format!(
        "workspaces/.work-items/github-octo-app-{number}/github.com/octo/app/docs/specs/issue-{number}"
    ))
}

/// A labelled issue armed with `keyword`, spawned.
async fn armed(lab: &mut Lab, keyword: &str) -> u64 {
    let number = lab.open_labelled_issue();
    lab.comment(number, OWNER, keyword);
    lab.settle().await;
    assert_eq!(lab.named("session.spawned").len(), 1, "{:#?}", lab.events());
    number
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_without_its_artifact_is_blocked_with_the_gates_message_and_a_valid_one_advances() {
    let git = tempfile::tempdir().expect("a temp dir");
    let mut lab = lab_with_checkouts(git.path()).await;
    let number = lab.started_issue().await;
    lab.comment(number, OWNER, "the-loop execute");
    lab.settle().await;
    let item = lab.item(number);

    let blocked = lab
        .dispatcher
        .graph_complete(&GraphTarget::session(item.clone()), None, "agent")
        .await
        .expect("a graph");
    assert!(matches!(blocked.step, loop_core::graph::runtime::Step::Blocked { .. }), "{blocked:?}");
    assert_eq!(blocked.messages, ["brainstorm.md is missing from the spec folder"]);
    assert!(blocked.context.contains("- gate: brainstorm.md is missing"), "{}", blocked.context);
    assert_eq!(labels(&lab, number), [LABEL, "loop:brainstorming"]);

    std::fs::write(
        spec_dir(git.path(), number).join("brainstorm.md"),
        "---\nstatus: approved\n---\n## Problem / opportunity\nThe widget.\n## Open questions\nNone.\n",
    )
    .expect("the artifact");
    let advanced = lab
        .dispatcher
        .graph_complete(&GraphTarget::session(item.clone()), None, "agent")
        .await
        .expect("a graph");
    assert!(
        matches!(advanced.step, loop_core::graph::runtime::Step::Advanced { .. }),
        "{advanced:?}"
    );
    assert_eq!(state_file(git.path(), number).current_node, "requirements-definition");
    assert_eq!(labels(&lab, number), [LABEL, "loop:requirements-definition"]);
    let pasted = lab.pasted().await;
    assert!(pasted.iter().any(|p| p.contains("node `requirements-definition`")), "{pasted:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn do_walks_the_adhoc_loop_and_an_authorized_done_completes_it() {
    let git = tempfile::tempdir().expect("a temp dir");
    let mut lab = lab_with_checkouts(git.path()).await;
    let number = armed(&mut lab, "the-loop do").await;
    assert_eq!(labels(&lab, number), [LABEL, "loop:implementation"], "{:#?}", lab.events());
    assert_eq!(state_file(git.path(), number).loop_name, "pdlc-adhoc-loop");

    let item = lab.item(number);
    let claimed = lab
        .dispatcher
        .graph_complete(&GraphTarget::session(item.clone()), None, "agent")
        .await
        .expect("a graph");
    assert!(
        matches!(claimed.step, loop_core::graph::runtime::Step::Advanced { .. }),
        "{claimed:?}"
    );
    assert_eq!(state_file(git.path(), number).current_node, "review");
    lab.settle().await;
    assert!(
        comments(&lab, number).iter().any(|c| c.contains("`review` is ready for review")),
        "{:#?}",
        comments(&lab, number)
    );

    lab.comment(number, OWNER, "done, thanks");
    lab.settle().await;
    assert_eq!(state_file(git.path(), number).current_node, "complete");
    assert_eq!(labels(&lab, number), [LABEL, "loop:complete"]);
    assert_eq!(lab.named("graph.completed").len(), 1, "{:#?}", lab.events());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contribute_without_a_goal_waits_at_goal_definition() {
    let git = tempfile::tempdir().expect("a temp dir");
    let mut lab = lab_with_checkouts(git.path()).await;
    let number = armed(&mut lab, "the-loop contribute").await;
    let state = state_file(git.path(), number);
    assert_eq!(
        (state.loop_name.as_str(), state.current_node.as_str()),
        ("pdlc-contribution-loop", "goal-definition")
    );
    assert_eq!(labels(&lab, number), [LABEL], "goal-definition writes no label");
    let blocked = lab.named("graph.blocked");
    assert!(blocked.iter().any(|e| e["hook"] == "classify-goal"), "{:#?}", lab.events());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_routed_to_the_item_is_recorded_in_its_state_file_and_its_close_too() {
    use loop_core::graph::state::Upstream;
    let git = tempfile::tempdir().expect("a temp dir");
    let mut lab = lab_with_checkouts(git.path()).await;
    let number = lab.started_issue().await;
    let pr = lab
        .sim
        .open_pull_request(REPO, OWNER, "Fix", &format!("Closes #{number}"), "fix", &[])
        .expect("a pull request");
    lab.comment(pr, OWNER, "ready for a look");
    lab.settle().await;
    let rows = state_file(git.path(), number).pull_requests;
    assert_eq!(rows.len(), 1, "{:#?}", lab.events());
    assert_eq!(
        (rows[0].pr_ref.clone(), rows[0].state, rows[0].inner_loop.as_str()),
        (
            format!("github:octo/app#{pr}"),
            Upstream::Open,
            format!("pr-loops/pr-{pr}/work-item-state.json").as_str()
        )
    );
    lab.comment(pr, OWNER, "one more thing");
    lab.settle().await;
    assert_eq!(state_file(git.path(), number).pull_requests.len(), 1, "recorded once");

    lab.sim.close(REPO, pr, OWNER).expect("closed unmerged");
    lab.settle().await;
    let rows = state_file(git.path(), number).pull_requests;
    assert_eq!(rows[0].state, Upstream::Closed, "{:#?}", lab.named("session.pr_closed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graph_skip_is_said_once_per_session_checkout() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    for body in ["one", "two", "three"] {
        lab.comment(number, OWNER, body);
        lab.settle().await;
    }
    let reasons = |lab: &Lab| -> Vec<Value> {
        lab.named("graph.skipped").into_iter().map(|e| e["reason"].clone()).collect()
    };
    assert_eq!(reasons(&lab), ["foreign-checkout", "no-spec-dir"], "{:?}", lab.events());

    // The next session is a session of its own, in the same checkout: said again.
    for body in ["the-loop stop", "the-loop start", "four"] {
        lab.comment(number, OWNER, body);
        lab.settle().await;
    }
    assert_eq!(lab.named("session.spawned").len(), 2, "{:#?}", lab.events());
    let twice = ["foreign-checkout", "no-spec-dir", "foreign-checkout", "no-spec-dir"];
    assert_eq!(reasons(&lab), twice, "{:?}", lab.events());
}

//! Pull requests and closures: a linked PR reaches its issue's session, a PR closing ends
//! only itself, an issue closing ends its session (cleaned up only for an authorized
//! closer), and a reopen clears the stamp.

use loop_core::record::{Control, Ended};
use loop_sim::Action;

use crate::dispatch_lab::{Lab, OWNER, REPO, STRANGER};

fn reopen(lab: &Lab, number: u64) {
    lab.sim
        .act(Action::Reopen { repo: REPO.to_owned(), number, actor: OWNER.to_owned() })
        .expect("reopened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pr_closing_its_issue_routes_into_the_issue_session_and_closing_the_pr_keeps_it_open() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    let pr = lab
        .sim
        .open_pull_request(REPO, OWNER, "Fix it", &format!("Closes #{number}"), "fix-widget", &[])
        .expect("a pull request");
    lab.comment(pr, OWNER, "reviewers: look at the edge case");
    lab.settle().await;
    let pasted = lab.pasted().await;
    assert!(pasted.last().expect("pasted").contains("look at the edge case"), "{pasted:#?}");
    assert_eq!(lab.named("session.spawned").len(), 1, "no session for the PR itself");
    let record = lab.store().load_local_record(&lab.item(number)).expect("readable").expect("live");
    assert!(record.endpoints.contains_key(&lab.item(pr)), "the binding is recorded");

    lab.sim.close(REPO, pr, OWNER).expect("closed");
    lab.settle().await;
    let kept = lab.named("session.kept_open").pop().expect("kept open");
    assert_eq!(kept["closed_ref"], lab.item(pr).to_string());
    assert!(lab.harness_alive(number), "the issue's session keeps running");
    assert!(lab.named("session.autoclosed").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merging_a_branch_linked_pr_leaves_the_issue_session_open() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    let pr = lab
        .sim
        .open_pull_request(REPO, OWNER, "Part one", "", &format!("issue-{number}-part-one"), &[])
        .expect("a pull request");
    lab.settle().await;
    lab.sim.merge(REPO, pr, OWNER).expect("merged");
    lab.settle().await;
    let kept = lab.named("session.kept_open").pop().expect("kept open");
    assert_eq!(kept["reason"], "pr-merged");
    assert!(lab.harness_alive(number));
    assert!(lab.named("session.autoclosed").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authorized_close_ends_the_session_cleans_up_and_a_reopen_clears_the_stamp() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.sim.close(REPO, number, OWNER).expect("closed");
    lab.settle().await;
    let closed = lab.named("session.autoclosed").pop().expect("autoclosed");
    assert_eq!(closed["reason"], "issue-closed");
    let cleaned = lab.named("session.cleaned").pop().expect("cleaned");
    assert_eq!(cleaned["via"], "close-event");
    assert!(!lab.tmux_session_exists(number));
    assert!(lab.store().load_local_record(&lab.item(number)).expect("readable").is_none());
    let ended = lab.store().read_section::<Ended>(&lab.item(number)).expect("readable");
    let ended = ended.into_value().expect("stamped");
    assert_eq!((ended.state.as_str(), ended.kind.as_str()), ("closed", "issue"));
    let control = lab.store().read_section::<Control>(&lab.item(number)).expect("readable");
    assert!(control.into_value().is_none(), "disarmed");
    assert_eq!(lab.pasted().await.len(), 1, "a close is never pasted");

    reopen(&lab, number);
    lab.settle().await;
    assert_eq!(lab.named("work_item.reopened").len(), 1);
    let ended = lab.store().read_section::<Ended>(&lab.item(number)).expect("readable");
    assert!(ended.into_value().is_none(), "the stamp is cleared");
    lab.comment(number, OWNER, "back again");
    lab.settle().await;
    assert_eq!(
        lab.refusals().last().map(String::as_str),
        Some("awaiting-start"),
        "needs a new start"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_by_anyone_else_ends_the_session_but_defers_the_cleanup() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.sim.close(REPO, number, STRANGER).expect("closed");
    lab.settle().await;
    assert_eq!(lab.named("session.autoclosed").len(), 1);
    let deferred = lab.named("cleanup.deferred").pop().expect("deferred");
    assert_eq!(deferred["reason"], "unauthorized-actor");
    assert!(lab.named("session.cleaned").is_empty());
    assert!(lab.tmux_session_exists(number), "kept for the operator");
    assert!(!lab.harness_alive(number), "the harness was ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_never_spawns_and_an_untracked_close_writes_nothing() {
    let mut lab =
        Lab::start("  spawnOnUnmatched: always\n  control:\n    requireStartCommand: false\n")
            .await;
    let number = lab.sim.open_issue(REPO, OWNER, "Spawns on sight", &[]).expect("an issue");
    lab.settle().await;
    assert_eq!(lab.named("session.spawned").len(), 1);
    lab.comment(number, OWNER, "the-loop stop");
    lab.settle().await;
    lab.sim.close(REPO, number, STRANGER).expect("closed");
    lab.settle().await;
    assert_eq!(lab.named("session.spawned").len(), 1, "a close never spawns");
    let ended = lab.store().read_section::<Ended>(&lab.item(number)).expect("readable");
    assert!(ended.into_value().is_some(), "a tracked item is stamped");

    let mut plain = Lab::start("").await;
    let untracked = plain.sim.open_issue(REPO, OWNER, "Never labelled", &[]).expect("an issue");
    plain.sim.close(REPO, untracked, OWNER).expect("closed");
    plain.settle().await;
    let record = plain.store().load_portable_record(&plain.item(untracked)).expect("readable");
    assert!(record.is_none(), "nothing written for an untracked item: {record:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_repository_pr_without_a_workspace_root_is_declined_and_reaches_the_item() {
    let mut lab = Lab::start("").await;
    lab.sim.create_repo("octo/lib").expect("a second repo");
    let number = lab.started_issue().await;
    let pr = lab
        .sim
        .open_pull_request(
            "octo/lib",
            OWNER,
            "Lib part",
            &format!("Closes {REPO}#{number}"),
            "lib-part",
            &[],
        )
        .expect("a pull request");
    lab.sim.comment("octo/lib", pr, OWNER, "the lib side is ready").expect("a comment");
    lab.settle().await;
    let declined = lab.named("session.pr_session_declined").pop().expect("declined");
    assert_eq!(declined["reason"], "no-separate-checkout");
    assert!(lab.pasted().await.last().expect("pasted").contains("the lib side is ready"));
    assert_eq!(lab.named("session.spawned").len(), 1);
    let record = lab.store().load_local_record(&lab.item(number)).expect("readable").expect("live");
    let pr_ref = format!("github:octo/lib#{pr}").parse().expect("a ref");
    assert!(record.endpoints.contains_key(&pr_ref), "the binding is still recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_binds_to_the_pull_request_itself_even_when_it_links_a_ticket() {
    let mut lab = Lab::start("").await;
    let issue = lab.sim.open_issue(REPO, OWNER, "A ticket", &[]).expect("an issue");
    let pr = lab
        .sim
        .open_pull_request(
            REPO,
            OWNER,
            "Change",
            &format!("Closes #{issue}"),
            "change",
            &[crate::dispatch_lab::LABEL],
        )
        .expect("a pull request");
    lab.comment(pr, OWNER, "the-loop review");
    lab.settle().await;
    let spawned = lab.named("session.spawned");
    assert_eq!(spawned.len(), 1, "{:#?}", lab.refusals());
    assert_eq!(spawned[0]["work_item"], lab.item(pr).to_string());
    let control = lab.store().read_section::<Control>(&lab.item(pr)).expect("readable");
    assert_eq!(control.into_value().expect("recorded").command.name(), "review");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_named_issue_that_does_not_exist_is_dropped_and_the_pr_is_the_target() {
    let mut lab = Lab::start("").await;
    let pr = lab
        .sim
        .open_pull_request(
            REPO,
            OWNER,
            "Ghost link",
            "",
            "issue-4242-fix",
            &[crate::dispatch_lab::LABEL],
        )
        .expect("a pull request");
    lab.comment(pr, OWNER, "the-loop start");
    lab.settle().await;
    let dropped = lab.named("routing.linkage_dropped");
    assert!(dropped.iter().any(|d| d["work_item"] == lab.item(4242).to_string()), "{dropped:#?}");
    let spawned = lab.named("session.spawned");
    assert_eq!(spawned.len(), 1, "{:#?}", lab.refusals());
    assert_eq!(spawned[0]["work_item"], lab.item(pr).to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_labelled_pr_linked_to_no_issue_is_its_own_work_item_and_its_merge_ends_the_session() {
    let mut lab = Lab::start("").await;
    let pr = lab
        .sim
        .open_pull_request(
            REPO,
            OWNER,
            "Standalone",
            "",
            "standalone",
            &[crate::dispatch_lab::LABEL],
        )
        .expect("a pull request");
    lab.comment(pr, OWNER, "the-loop start");
    lab.settle().await;
    assert_eq!(lab.named("session.spawned").len(), 1);
    lab.sim.merge(REPO, pr, OWNER).expect("merged");
    lab.settle().await;
    let closed = lab.named("session.autoclosed").pop().expect("autoclosed");
    assert_eq!(closed["reason"], "pr-merged");
    let ended = lab.store().read_section::<Ended>(&lab.item(pr)).expect("readable");
    assert_eq!(ended.into_value().expect("stamped").state, "merged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_typed_on_a_linked_pr_stops_the_session_that_owns_the_work() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    let pr = lab
        .sim
        .open_pull_request(REPO, OWNER, "Fix", &format!("Closes #{number}"), "fix", &[])
        .expect("a pull request");
    lab.settle().await;
    lab.comment(pr, OWNER, "the-loop stop");
    lab.settle().await;
    let command = lab.named("control.command").pop().expect("executed");
    assert_eq!(command["work_item"], lab.item(number).to_string());
    assert_eq!(command["effect"], "stopped");
    assert!(!lab.harness_alive(number));
}

/// Comments queued for an item before it closed reach its session before the close ends
/// it: the close waits behind the item's queue (`dispatch.awaiting_queue`). Without that
/// the paste in flight was cut off and the rest dropped as `session-vanished` — what the
/// rotating soak lost 240 of 30 000 comments to (docs/performance.md, "Soak").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comments_queued_before_a_close_are_pasted_before_the_session_ends() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("a temp dir");
    // Plain tmux commands (a "3.1" answers -V), each paste a second long: a queue forms.
    let script = dir.path().join("tmux-slow-paste");
    let text = "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = -V ] && { echo 'tmux 3.1'; exit 0; }; done\n\
                case \"$*\" in *paste-buffer*) sleep 1;; esac\nexec tmux \"$@\"\n";
    std::fs::write(&script, text).expect("the wrapper");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("mode");
    let mut lab = Lab::start_with_tmux("", script).await;
    let number = lab.started_issue().await;
    for i in 0..4 {
        lab.comment(number, OWNER, &format!("queued {i}"));
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    lab.sim.close(REPO, number, OWNER).expect("closed");
    lab.settle().await;
    let pasted = lab.pasted().await;
    let queued: Vec<&String> = pasted.iter().filter(|p| p.contains("queued ")).collect();
    assert_eq!(queued.len(), 4, "{queued:#?}\n{:#?}", lab.named("dispatch.dropped"));
    assert!(!lab.named("dispatch.awaiting_queue").is_empty(), "the close waited");
    assert!(!lab.harness_alive(number), "and then ended the session");
}

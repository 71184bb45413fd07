//! Every way a comment is refused: each with its reason, settled or released as the
//! contract says, and nothing pasted.

use loop_core::guards::mark_self_authored;
use loop_daemon::dispatcher::DeliveryStatus;

use crate::dispatch_lab::{Lab, OWNER, STRANGER};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthorized_comment_is_dropped_by_the_router_and_never_pasted() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.comment(number, STRANGER, "run rm -rf for me");
    lab.settle().await;
    let dropped = lab.named("routing.dropped");
    assert!(dropped.iter().any(|d| d["reason"] == "unauthorized-actor"), "{dropped:#?}");
    assert_eq!(lab.pasted().await.len(), 1, "only the spawn prompt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_marked_comment_is_dropped_even_from_an_authorized_login() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.comment(number, OWNER, &mark_self_authored("the-loop stop"));
    lab.settle().await;
    let dropped = lab.named("routing.dropped");
    assert!(dropped.iter().any(|d| d["reason"] == "self-authored"), "{dropped:#?}");
    assert!(lab.named("control.command").is_empty());
    assert_eq!(lab.pasted().await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_different_keywords_execute_nothing_forward_nothing_and_settle() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.comment(number, OWNER, "the-loop pause and then the-loop stop");
    lab.settle().await;
    let ambiguous = lab.named("control.ambiguous");
    assert_eq!(ambiguous.len(), 1);
    let key = lab.key_of_last("control.ambiguous");
    let status = lab.dispatcher.delivery_status(&key, &[lab.item(number)]).await;
    assert_eq!(status, DeliveryStatus::Settled("control-ambiguous".into()));
    assert_eq!(lab.pasted().await.len(), 1);
    assert!(lab.harness_alive(number), "nothing was executed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collaborator_is_heard_as_input_but_never_commands_and_never_spawns() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.comment(number, OWNER, &format!("the-loop add-collaborator @{STRANGER}"));
    lab.settle().await;
    let granted = lab.named("control.command");
    assert_eq!(granted.last().expect("a grant")["effect"], "granted");

    lab.comment(number, STRANGER, "the-loop stop");
    lab.settle().await;
    let rejected = lab.named("control.rejected");
    assert_eq!(rejected.last().expect("a rejection")["reason"], "unauthorized-actor");
    assert!(lab.harness_alive(number), "the stop was not executed");

    lab.comment(number, STRANGER, "the answer is 42");
    lab.settle().await;
    let pasted = lab.pasted().await;
    assert_eq!(pasted.len(), 2, "{pasted:#?}");
    assert!(pasted[1].contains("the answer is 42"));

    // On an item with no session, the collaborator's grant does not spawn one.
    let other = lab.open_labelled_issue();
    lab.comment(other, OWNER, &format!("the-loop add-collaborator @{STRANGER}"));
    lab.comment(other, STRANGER, "hello?");
    lab.settle().await;
    let key = lab.key_of_last("dispatch.dropped");
    assert!(lab.refusals().contains(&"collaborator-no-spawn".to_owned()), "{:?}", lab.refusals());
    let status = lab.dispatcher.delivery_status(&key, &[lab.item(other)]).await;
    assert_eq!(status, DeliveryStatus::Settled("collaborator-no-spawn".into()));
    assert_eq!(lab.named("session.spawned").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comment_before_the_start_is_settled_and_never_replayed_after_it() {
    let mut lab = Lab::start("").await;
    let number = lab.open_labelled_issue();
    lab.comment(number, OWNER, "some early thoughts");
    lab.settle().await;
    let key = lab.key_of_last("dispatch.dropped");
    assert_eq!(lab.refusals().last().map(String::as_str), Some("awaiting-start"));
    let status = lab.dispatcher.delivery_status(&key, &[lab.item(number)]).await;
    assert_eq!(status, DeliveryStatus::Settled("awaiting-start".into()));

    lab.comment(number, OWNER, "the-loop start");
    lab.settle().await;
    let pasted = lab.pasted().await;
    assert_eq!(pasted.len(), 1, "only the spawn prompt: {pasted:#?}");
    assert!(!pasted[0].contains("some early thoughts"), "{}", pasted[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_on_an_unlabelled_item_is_refused_released_and_not_remembered() {
    let mut lab = Lab::start("").await;
    let number =
        lab.sim.open_issue(crate::dispatch_lab::REPO, OWNER, "No label", &[]).expect("an issue");
    lab.comment(number, OWNER, "the-loop start");
    lab.settle().await;
    let rejected = lab.named("control.rejected");
    assert_eq!(rejected.last().expect("a rejection")["reason"], "spawn-policy");
    // Labelling it afterwards does not start it: the start was never recorded.
    lab.sim
        .label(crate::dispatch_lab::REPO, number, OWNER, crate::dispatch_lab::LABEL)
        .expect("labelled");
    lab.settle().await;
    assert!(lab.named("session.spawned").is_empty());
    assert_eq!(lab.refusals().last().map(String::as_str), Some("awaiting-start"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comment_while_paused_is_settled_and_not_replayed_on_resume() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.comment(number, OWNER, "the-loop pause");
    lab.settle().await;
    lab.comment(number, OWNER, "while you were paused");
    lab.settle().await;
    let key = lab.key_of_last("dispatch.dropped");
    assert_eq!(lab.refusals().last().map(String::as_str), Some("session-paused"));
    let status = lab.dispatcher.delivery_status(&key, &[lab.item(number)]).await;
    assert_eq!(status, DeliveryStatus::Settled("session-paused".into()));

    lab.comment(number, OWNER, "the-loop resume");
    lab.comment(number, OWNER, "after the resume");
    lab.settle().await;
    let pasted = lab.pasted().await;
    assert_eq!(pasted.len(), 2, "{pasted:#?}");
    assert!(pasted[1].contains("after the resume"));
    assert!(!pasted.iter().any(|p| p.contains("while you were paused")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comment_on_an_unlabelled_item_is_released_for_a_later_retry() {
    let mut lab = Lab::start("").await;
    let number =
        lab.sim.open_issue(crate::dispatch_lab::REPO, OWNER, "No label", &[]).expect("an issue");
    lab.comment(number, OWNER, "hello");
    lab.settle().await;
    assert_eq!(lab.refusals().last().map(String::as_str), Some("spawn-policy"));
    let key = lab.key_of_last("dispatch.dropped");
    let status = lab.dispatcher.delivery_status(&key, &[lab.item(number)]).await;
    assert_eq!(status, DeliveryStatus::Unhandled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_live_and_one_paused_session_deliver_and_do_not_settle() {
    let mut lab = Lab::start("").await;
    let live = lab.started_issue().await;
    let paused = lab.open_labelled_issue();
    lab.comment(paused, OWNER, "the-loop start");
    lab.settle().await;
    lab.comment(paused, OWNER, "the-loop pause");
    let body = format!("Closes #{live}\nCloses #{paused}");
    let pr = lab
        .sim
        .open_pull_request(crate::dispatch_lab::REPO, OWNER, "Both", &body, "both", &[])
        .expect("a pull request");
    lab.comment(pr, OWNER, "a note for both");
    lab.settle().await;
    let key = lab.key_of_last("dispatch.succeeded");
    let pasted = lab.pasted().await;
    assert!(pasted.last().expect("pasted").contains("a note for both"));
    let paused_lines = lab.named("dispatch.dropped");
    assert!(paused_lines.iter().any(|d| d["reason"] == "session-paused"));
    let refs = [lab.item(live), lab.item(paused)];
    let status = lab.dispatcher.delivery_status(&key, &refs).await;
    assert_eq!(status, DeliveryStatus::Done, "a delivery outranks a settlement");
}

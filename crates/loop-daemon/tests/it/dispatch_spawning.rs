//! Events that arrive while their work item's session is being spawned (issue #16, item
//! 17): they wait behind the spawn on the item's queue and are planned again once it
//! ended, so none is dropped for want of a record about to exist — whatever labels its
//! payload carries.

use crate::dispatch_lab::{Harness, Lab, OWNER, REPO};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_about_an_item_whose_spawn_is_in_flight_reach_the_new_session() {
    let mut lab = Lab::start_with("", Harness::Gated).await;
    let number = lab.open_labelled_issue();
    lab.comment(number, OWNER, "the-loop start");
    // The spawn holds its dispatch at the gate (the started reaction is added inside it).
    lab.wait_for_lines("reaction.added", 1).await;
    let before = lab.refusals();

    // A pull request closing the issue, without the label, is opened, commented on and
    // merged while the spawn is in flight.
    let pr = lab
        .sim
        .open_pull_request(REPO, OWNER, "Fix it", &format!("Closes #{number}"), "fix-it", &[])
        .expect("a pull request");
    lab.comment(pr, OWNER, "reviewers: look at the edge case");
    lab.received().await;
    assert!(lab.named("session.spawned").is_empty(), "the spawn is still in flight");
    assert_eq!(lab.refusals(), before, "nothing is refused while it waits");

    lab.open_gate();
    lab.settle().await;
    assert_eq!(lab.named("session.spawned").len(), 1, "{:#?}", lab.events());
    assert_eq!(lab.refusals(), before, "{:#?}", lab.events());
    let pasted = lab.pasted().await;
    assert!(
        pasted.iter().any(|text| text.contains("look at the edge case")),
        "the PR comment reaches the new session: {pasted:#?}"
    );
    let record = lab.store().load_local_record(&lab.item(number)).expect("readable").expect("live");
    assert!(record.endpoints.contains_key(&lab.item(pr)), "the PR is bound to the session");

    lab.sim.close(REPO, pr, OWNER).expect("closed");
    lab.settle().await;
    let kept = lab.named("session.kept_open").pop().expect("kept open");
    assert_eq!(kept["closed_ref"], lab.item(pr).to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_arriving_while_the_spawn_is_in_flight_ends_the_new_session() {
    let mut lab = Lab::start_with("", Harness::Gated).await;
    let number = lab.open_labelled_issue();
    lab.comment(number, OWNER, "the-loop start");
    lab.wait_for_lines("reaction.added", 1).await;
    let before = lab.refusals();
    let pr = lab
        .sim
        .open_pull_request(REPO, OWNER, "Fix it", &format!("Closes #{number}"), "fix-it", &[])
        .expect("a pull request");
    lab.sim.close(REPO, pr, OWNER).expect("closed");
    lab.received().await;
    assert_eq!(lab.named("dispatch.awaiting_spawn").len(), 2, "{:#?}", lab.events());

    lab.open_gate();
    lab.settle().await;
    let kept = lab.named("session.kept_open").pop().expect("the PR's close is seen");
    assert_eq!(kept["closed_ref"], lab.item(pr).to_string());
    assert!(lab.harness_alive(number), "the issue's session keeps running");
    assert_eq!(lab.refusals(), before, "{:#?}", lab.events());
}

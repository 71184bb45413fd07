//! The dispatcher end to end: the simulator's signed webhooks through the real receiver
//! into the real dispatcher, sessions in real tmux with the stand-in harness.

use loop_sim::test_support::wait_for_async;

use crate::dispatch_lab::{Lab, OWNER};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_spawns_one_announced_session_and_the_next_comment_is_pasted_into_it() {
    let mut lab = Lab::start("").await;
    let number = lab.open_labelled_issue();
    let start = lab.comment(number, OWNER, "the-loop start");
    lab.settle().await;

    assert_eq!(lab.named("session.spawned").len(), 1, "{:#?}", lab.events());
    let announcements = lab.announcements(number);
    assert_eq!(announcements.len(), 1);
    assert!(
        announcements[0].contains("tmux attach -t loop-github-octo-app-"),
        "{}",
        announcements[0]
    );
    assert_eq!(lab.reactions_on_comment(number, start), ["eyes", "hooray"]);
    let boot = lab.pasted().await;
    assert_eq!(boot.len(), 1, "the spawn prompt is the first message");

    lab.comment(number, OWNER, "please also handle the empty case");
    lab.settle().await;
    let pasted = lab.pasted().await;
    assert_eq!(pasted.len(), 2, "{pasted:#?}");
    assert!(pasted[1].contains("please also handle the empty case"), "{}", pasted[1]);
    assert_eq!(lab.launches().len(), 1, "the same conversation, no second spawn");
}

/// A daemon lives for months and serves thousands of work items: an item's queue and its
/// worker last while it has work, not for the life of the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_items_queue_is_retired_once_empty_and_its_next_event_finds_a_fresh_one() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.comment(number, OWNER, "a note");
    lab.settle().await;
    let dispatcher = lab.dispatcher.clone();
    let retired = || match dispatcher.queued_items() {
        0 => Ok(()),
        n => Err(format!("{n} queues left")),
    };
    wait_for_async("every queue to be retired", retired).await;

    lab.comment(number, OWNER, "one more thing");
    lab.settle().await;
    let pasted = lab.pasted().await;
    assert!(pasted.last().is_some_and(|p| p.contains("one more thing")), "{pasted:#?}");
    wait_for_async("the fresh queue to be retired too", retired).await;
}

//! The dispatcher end to end: the simulator's signed webhooks through the real receiver
//! into the real dispatcher, sessions in real tmux with the stand-in harness.

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

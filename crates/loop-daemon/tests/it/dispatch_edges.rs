//! The reference's edge cases (`receiver-dispatch-control.md` §9, `sessions-tmux-harness.md`
//! §7) pinned end to end, each test named after the behaviour and its edge number.

use loop_daemon::dispatcher::DeliveryStatus;
use loop_sim::{Fault, FaultKind};

use crate::dispatch_lab::{Lab, OWNER};

/// §9 edge 17: a comment queued behind a busy permit, on a session paused before the
/// worker takes it, is not pasted; it is settled `session-paused` and reported a success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e17_a_session_paused_between_enqueue_and_dequeue_skips_the_event_and_settles_it() {
    let mut lab = Lab::start("  maxConcurrentDispatches: 1\n").await;
    let number = lab.started_issue().await;
    // Another item's spawn holds the only permit while its announcement is slow.
    let other = lab.open_labelled_issue();
    lab.sim.inject(Fault {
        kind: FaultKind::Latency { millis: 4000 },
        times: 1,
        path_contains: Some(format!("/issues/{other}/comments")),
    });
    lab.comment(other, OWNER, "the-loop start");
    lab.wait_for_lines("session.spawned", 2).await;
    let queued = lab.comment(number, OWNER, "queued while the permit is taken");
    lab.wait_for_lines("dispatch.queued", 3).await;
    lab.comment(number, OWNER, "the-loop pause");
    lab.settle().await;

    let dropped = lab.named("dispatch.dropped");
    let skipped = dropped.iter().find(|d| d["reason"] == "session-paused").expect("skipped");
    let key = skipped["delivery_id"].as_str().expect("a key").to_owned();
    let was_queued = lab.named("dispatch.queued").iter().any(|q| q["delivery_id"] == key.as_str());
    assert!(was_queued, "skipped at dequeue, not refused at intake");
    let status = lab.dispatcher.delivery_status(&key, &[lab.item(number)]).await;
    assert_eq!(status, DeliveryStatus::Settled("session-paused".into()));
    let pasted = lab.pasted().await;
    assert!(!pasted.iter().any(|p| p.contains("queued while the permit")), "{pasted:#?}");
    assert_eq!(lab.reactions_on_comment(number, queued), ["eyes", "hooray"], "a success");
}

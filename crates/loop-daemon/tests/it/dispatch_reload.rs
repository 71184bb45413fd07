//! Hot reload reaches the dispatcher's runtime pieces: `routing.maxConcurrentDispatches`
//! is a live bound, so raising it in the config file lets a dispatch waiting for a slot
//! start while the one holding the old bound's only slot is still running.

use crate::dispatch_lab::{Harness, Lab, OWNER, REPO};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raising_max_concurrent_dispatches_in_the_config_file_starts_a_waiting_spawn() {
    let mut lab = Lab::start_with("  maxConcurrentDispatches: 1\n", Harness::Gated).await;
    let first = lab.open_labelled_issue();
    let second = lab.open_labelled_issue();
    lab.comment(first, OWNER, "the-loop start");
    // The started reaction is added inside the slot: the first spawn holds it, gated.
    lab.wait_for_lines("reaction.added", 1).await;
    lab.comment(second, OWNER, "the-loop start");
    lab.wait_for_lines("dispatch.queued", 2).await;

    lab.rewrite_config("  maxConcurrentDispatches: 2\n");
    // Any delivery the dispatcher handles carries the reloaded config to it.
    lab.sim.open_issue(REPO, OWNER, "unrelated", &[]).expect("an issue");
    let started = lab.wait_for_lines("reaction.added", 2).await;

    let item = |n: u64| lab.item(n).to_string();
    let started_for: Vec<_> =
        started.iter().map(|r| (r["state"].clone(), r["work_item"].clone())).collect();
    assert_eq!(
        started_for,
        [("started".into(), item(first).into()), ("started".into(), item(second).into())],
        "both dispatches run at once"
    );
    assert!(lab.named("session.spawned").is_empty(), "the first still holds its slot");
    assert!(lab.named("dispatch.failed").is_empty());

    lab.open_gate();
    lab.settle().await;
    assert_eq!(lab.named("session.spawned").len(), 2, "{:#?}", lab.events());
}

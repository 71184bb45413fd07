//! A daemon's history costs an event nothing (issue #32): thousands of ended items,
//! written by the store's own writers, are neither listed nor read by a delivery into a
//! live session, nor by that session's close. Reads are counted
//! ([`loop_store::StateStore::reads`]), not timed.

use std::path::PathBuf;

use jiff::Timestamp;
use loop_core::record::{Ended, Endpoint, EndpointStatus, LocalRecord};

use crate::dispatch_lab::{Lab, OWNER, REPO};

/// How many ended items the history holds.
const ENDED: u64 = 3_000;

/// A lab with a started session, then [`ENDED`] ended items written by another process
/// of the past, then restarted over them; returns the session's issue number.
async fn lab_with_history() -> (Lab, u64) {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    // Each ended item a closed session record holding its last deliveries; every tenth
    // also stamped `ended` in its portable record (the first stamp of a process scans
    // `portable/`, so stamping all would cost the test minutes).
    let past = lab.store();
    let now = Timestamp::now();
    for n in 1..=ENDED {
        let item = lab.item(10_000 + n);
        let mut record = LocalRecord::new(item.clone());
        let endpoint = Endpoint {
            status: EndpointStatus::Closed,
            tmux_target: format!("loop-github-octo-app-{}", 10_000 + n),
            recent_deliveries: (0..20).map(|d| format!("delivery-{n}-{d}")).collect(),
            ..Endpoint::new("stand-in", PathBuf::from("/w"), now)
        };
        record.endpoints.insert(item.clone(), endpoint);
        past.save_local_record(&record).expect("a closed session record");
        if n % 10 == 0 {
            let ended = Ended {
                state: "closed".into(),
                kind: "issue".into(),
                reason: Some("issue-closed".into()),
                at: now,
                source: "gh-webhook".into(),
                actor: None,
            };
            past.write_section(&item, Some(&ended)).expect("an ended stamp");
        }
    }
    // A new process over that history: its first look at each directory reads every
    // record once.
    lab.restart().await;
    (lab, number)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_lists_and_reads_none_of_three_thousand_ended_records() {
    let (mut lab, number) = lab_with_history().await;
    lab.comment(number, OWNER, "a first note after the restart");
    lab.settle().await;

    let store = lab.dispatcher.store().clone();
    let before = store.reads();
    lab.comment(number, OWNER, "please also handle the empty case");
    lab.settle().await;
    let after = store.reads();
    let pasted = lab.pasted().await;
    assert!(pasted.last().is_some_and(|p| p.contains("the empty case")), "{pasted:#?}");
    assert_eq!(after.listings, before.listings, "a delivery lists no records directory");
    let read = after.records - before.records;
    assert!(read <= 10, "a delivery read {read} record files ({before:?} -> {after:?})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_lists_and_reads_none_of_three_thousand_ended_records() {
    let (mut lab, number) = lab_with_history().await;
    // A command first: the process's first portable write, which scans `portable/`.
    lab.comment(number, OWNER, "the-loop pause");
    lab.settle().await;

    let store = lab.dispatcher.store().clone();
    let before = store.reads();
    lab.sim.close(REPO, number, OWNER).expect("the issue closes");
    lab.settle().await;
    let after = store.reads();
    assert_eq!(lab.named("work_item.ended").len(), 1, "{:#?}", lab.events());
    assert_eq!(after.listings, before.listings, "a close lists no records directory");
    let read = after.records - before.records;
    assert!(read <= 20, "a close read {read} record files ({before:?} -> {after:?})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_request_comment_for_a_live_session_reads_none_of_the_history() {
    let (mut lab, number) = lab_with_history().await;
    let closes = format!("Closes #{number}");
    let pr = lab.sim.open_pull_request(REPO, OWNER, "Fix it", &closes, "fix-widget", &[]);
    let pr = pr.expect("a pull request");
    // The first event from the pull request binds it to the work item's session.
    lab.comment(pr, OWNER, "a first note on the pull request");
    lab.settle().await;

    let store = lab.dispatcher.store().clone();
    let before = store.reads();
    lab.comment(pr, OWNER, "and one more on the pull request");
    lab.settle().await;
    let after = store.reads();
    let pasted = lab.pasted().await;
    assert!(pasted.last().is_some_and(|p| p.contains("one more on the pull")), "{pasted:#?}");
    assert_eq!(after.listings, before.listings, "a delivery lists no records directory");
    let read = after.records - before.records;
    assert!(read <= 10, "a delivery read {read} record files ({before:?} -> {after:?})");
}

//! Presence (spawn) retries, sessions, pull-request ledgers, re-arming after an upgrade
//! and attempts released at shutdown (reference §2.2, §2.5–§2.7). Tests named `edge_NN_…`
//! pin reference §6 edge NN.

use std::collections::BTreeMap;
use std::path::PathBuf;

use loop_core::WorkItemRef;
use loop_core::record::{CommentLedger, Endpoint, EndpointStatus, GaveUp, LocalRecord, PollLedger};

use crate::poll_support::{Bench, LABEL, Mode, conversation};

const REPO: &str = "octo/app";
const UNSTARTED: &str = "  control:\n    requireStartCommand: false\n";

pub fn live_session(bench: &Bench, owner: &WorkItemRef, serves: &[&WorkItemRef]) {
    session_record(bench, owner, serves, EndpointStatus::Active);
}

/// A session record of `owner` whose endpoints serve `serves`, all in `status`.
pub fn session_record(
    bench: &Bench,
    owner: &WorkItemRef,
    serves: &[&WorkItemRef],
    status: EndpointStatus,
) {
    let mut record = LocalRecord::new(owner.clone());
    for item in serves {
        let endpoint = Endpoint {
            harness: "claude".into(),
            harness_session_id: None,
            cwd: PathBuf::from("/w"),
            tmux_target: String::new(),
            status,
            recent_deliveries: Vec::new(),
            created_at: jiff::Timestamp::now(),
            last_event_at: None,
            model: None,
            effort: None,
            harness_args: Vec::new(),
            awaiting_input: None,
            graph_warning: None,
        };
        record.endpoints.insert((*item).clone(), endpoint);
    }
    bench.store.save_local_record(&record).unwrap();
}

fn ledger(bench: &Bench, item: &WorkItemRef) -> Option<PollLedger> {
    bench.store.read_section::<PollLedger>(item).unwrap().into_value()
}

#[tokio::test]
async fn a_failed_spawn_is_retried_to_max_retries_then_silent_until_new_activity() {
    let mut bench = Bench::new(&[REPO], &format!("{UNSTARTED}polling:\n  maxRetries: 2\n")).await;
    bench.stand_in.set_mode(Mode::Fail);
    let n = bench.open_issue(REPO, "ann");
    for _ in 0..5 {
        bench.cycle().await;
    }
    assert_eq!(bench.stand_in.presences(), 2);
    assert_eq!(bench.events("poll.spawn_failed").len(), 1);
    let item = bench.item(REPO, n);
    assert!(ledger(&bench, &item).unwrap().spawn.unwrap().gave_up);
    bench.sim.comment(REPO, n, "ann", "try again").unwrap();
    bench.cycle().await;
    assert_eq!(bench.stand_in.presences(), 3, "a new comment re-arms a given-up spawn");
}

#[tokio::test]
async fn a_settled_presence_resets_the_spawn_ledger() {
    let mut bench = Bench::new(&[REPO], UNSTARTED).await;
    bench.stand_in.set_mode(Mode::Settle("spawn-policy".into()));
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    assert_eq!(bench.stand_in.presences(), 1);
    assert!(ledger(&bench, &bench.item(REPO, n)).unwrap().spawn.is_none(), "not a spent attempt");
    bench.cycle().await;
    assert_eq!(bench.stand_in.presences(), 1, "a dormant item is not offered again");
}

#[tokio::test]
async fn an_unstarted_item_is_offered_no_presence_while_a_start_is_required() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.sim.comment(REPO, n, "ann", "context").unwrap();
    bench.cycle().await;
    // requireStartCommand is on and nothing started: no presence is even offered.
    assert_eq!(bench.stand_in.presences(), 0);
    assert!(ledger(&bench, &bench.item(REPO, n)).unwrap().spawn.is_none());
}

#[tokio::test]
async fn first_sight_with_a_live_session_only_baselines() {
    let mut bench = Bench::new(&[REPO], UNSTARTED).await;
    let n = bench.open_issue(REPO, "ann");
    bench.sim.comment(REPO, n, "ann", "old").unwrap();
    let item = bench.item(REPO, n);
    live_session(&bench, &item, &[&item]);
    bench.cycle().await;
    assert_eq!(bench.stand_in.presences(), 0);
    assert!(bench.stand_in.comment_bodies().is_empty());
    bench.sim.comment(REPO, n, "ann", "new").unwrap();
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["new"]);
    assert_eq!(bench.stand_in.presences(), 0, "a session exists: no presence");
}

#[tokio::test]
async fn a_known_item_without_a_session_gets_presence_then_the_comment() {
    let mut bench = Bench::new(&[REPO], UNSTARTED).await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.cycle().await;
    assert_eq!(bench.stand_in.presences(), 1, "a dormant item never spawns by itself");
    bench.sim.comment(REPO, n, "ann", "wake up").unwrap();
    bench.cycle().await;
    let order: Vec<String> = bench
        .stand_in
        .dispatched()
        .iter()
        .skip(1)
        .map(|(_, e)| e.action.clone().unwrap_or_default())
        .collect();
    assert_eq!(order, ["labeled", "created"]);
}

#[tokio::test]
async fn an_empty_allowlist_acts_on_nothing() {
    let mut bench = Bench::with_authorized(&[REPO], "[]", UNSTARTED).await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.sim.comment(REPO, n, "ann", "hello").unwrap();
    bench.cycle().await;
    assert!(bench.stand_in.dispatched().is_empty(), "no presence, no comment");
}

#[tokio::test]
async fn a_pr_ledger_nests_under_the_work_item_its_session_serves() {
    let mut bench = Bench::new(&[REPO], "").await;
    let issue = bench.open_issue(REPO, "ann");
    let pr = bench.sim.open_pull_request(REPO, "ann", "Fix", "", "fix", &[LABEL]).unwrap();
    let (issue_ref, pr_ref) = (bench.item(REPO, issue), bench.item(REPO, pr));
    live_session(&bench, &issue_ref, &[&issue_ref, &pr_ref]);
    bench.sim.comment(REPO, pr, "ann", "on the PR").unwrap();
    bench.cycle().await;
    assert!(ledger(&bench, &pr_ref).is_none(), "no record of its own");
    let owner = ledger(&bench, &issue_ref).unwrap();
    assert_eq!(owner.pull_requests[&pr_ref].seen_comments.len(), 1);
    bench.sim.comment(REPO, pr, "ann", "second").unwrap();
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["second"]);
}

#[tokio::test]
async fn a_pr_that_delivers_no_tracked_item_keeps_its_own_record() {
    let mut bench = Bench::new(&[REPO], "").await;
    let pr = bench.sim.open_pull_request(REPO, "ann", "Fix", "", "fix", &[LABEL]).unwrap();
    bench.cycle().await;
    assert!(ledger(&bench, &bench.item(REPO, pr)).is_some());
}

#[tokio::test]
async fn comments_abandoned_by_another_version_are_re_armed_once() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    let id = conversation(bench.sim.comment(REPO, n, "ann", "abandoned earlier").unwrap());
    let item = bench.item(REPO, n);
    let mut old = ledger(&bench, &item).unwrap();
    old.comments = CommentLedger {
        seen_comments: vec![id.clone()],
        comment_attempts: BTreeMap::new(),
        gave_up: Some(GaveUp { comments: vec![id], version: "0.0.1".into() }),
        seen_through: None,
    };
    bench.store.write_section(&item, Some(&old)).unwrap();
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["abandoned earlier"]);
    assert_eq!(bench.events("poll.rearmed").len(), 1);
    bench.restart();
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies().len(), 1, "the same version never re-arms");
}

#[tokio::test]
async fn attempts_the_dispatcher_abandoned_at_shutdown_are_released() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.stand_in.set_mode(Mode::Hang);
    let id = conversation(bench.sim.comment(REPO, n, "ann", "queued at shutdown").unwrap());
    bench.cycle().await;
    let (key, _) = bench.stand_in.dispatched().pop().unwrap();
    let released = bench.poller.release_attempts(&[key, "unknown".into()]).unwrap();
    assert_eq!(released, 1);
    let comments = ledger(&bench, &bench.item(REPO, n)).unwrap().comments;
    assert!(!comments.comment_attempts.contains_key(&id) && !comments.seen_comments.contains(&id));
    assert_eq!(bench.events("poll.attempts_released").len(), 1);
}

#[tokio::test]
async fn edge_58_a_presence_still_queued_at_shutdown_is_released() {
    let mut bench = Bench::new(&[REPO], UNSTARTED).await;
    bench.stand_in.set_mode(Mode::Hang);
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    let (key, _) = bench.stand_in.dispatched().pop().unwrap();
    assert_eq!(bench.poller.release_attempts(std::slice::from_ref(&key)).unwrap(), 1);
    let spawn = ledger(&bench, &bench.item(REPO, n)).unwrap().spawn.unwrap_or_default();
    assert_eq!((spawn.attempts, spawn.delivery_id), (0, None));
    assert_eq!(bench.poller.release_attempts(&[key]).unwrap(), 0, "released once");
}

#[tokio::test]
async fn a_pr_that_comes_to_serve_a_work_item_keeps_what_its_own_record_had_seen() {
    let mut bench = Bench::new(&[REPO], "").await;
    let issue = bench.open_issue(REPO, "ann");
    let pr = bench.sim.open_pull_request(REPO, "ann", "Fix", "", "fix", &[LABEL]).unwrap();
    bench.sim.comment(REPO, pr, "ann", "seen while it was on its own").unwrap();
    bench.cycle().await;
    let (issue_ref, pr_ref) = (bench.item(REPO, issue), bench.item(REPO, pr));
    // The session takes the PR on (e.g. `sessions link-pr`); a comment lands meanwhile.
    live_session(&bench, &issue_ref, &[&issue_ref, &pr_ref]);
    bench.sim.comment(REPO, pr, "ann", "posted as it moved").unwrap();
    bench.cycle().await;
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["posted as it moved"], "forwarded once");
    let nested = &ledger(&bench, &issue_ref).unwrap().pull_requests[&pr_ref];
    assert_eq!(nested.seen_comments.len(), 2);
    assert!(ledger(&bench, &pr_ref).is_some(), "the old record is read, never deleted");
}

//! Closure reconciliation against the simulated GitHub (reference §3, seeds 000 and 001):
//! the tracked set every cycle it is absent, the ledger-only set lazily, nothing on doubt.

use jiff::{SignedDuration, Timestamp};
use loop_core::control::Command;
use loop_core::record::{Control, ControlSource, Ended, PollClock, PollLedger};
use loop_sim::Action;

use crate::poll_support::{Bench, LABEL};

const REPO: &str = "octo/app";
const ASK: &str = "GET /repos/{owner}/{repo}/issues/{issue_number}";

fn arm(bench: &Bench, number: u64) {
    let control = Control {
        command: Command::Start,
        source: ControlSource::Cli,
        actor: Some("ann".parse().unwrap()),
        requested_at: Timestamp::now(),
        note: None,
        instance: None,
        delivery_id: None,
    };
    bench.store.write_section(&bench.item(REPO, number), Some(&control)).unwrap();
}

fn unlabel(bench: &Bench, number: u64) {
    let action =
        Action::Unlabel { repo: REPO.into(), number, actor: "ann".into(), label: LABEL.into() };
    bench.sim.act(action).unwrap();
}

/// Moves `number`'s poll clocks `hours` into the past.
fn age(bench: &Bench, number: u64, hours: i64) {
    let then = Timestamp::now() - SignedDuration::from_hours(hours);
    let clock = PollClock { last_polled_at: Some(then), closure_checked_at: None };
    bench.store.put_poll_clock(&bench.item(REPO, number), clock).unwrap();
}

fn ledger(bench: &Bench, number: u64) -> Option<PollLedger> {
    bench.store.read_section::<PollLedger>(&bench.item(REPO, number)).unwrap().into_value()
}

fn ended(bench: &Bench, number: u64) -> Option<Ended> {
    bench.store.read_section::<Ended>(&bench.item(REPO, number)).unwrap().into_value()
}

#[tokio::test]
async fn a_closed_tracked_item_takes_the_close_path_and_its_ledger_is_forgotten() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    arm(&bench, n);
    bench.cycle().await;
    bench.sim.close(REPO, n, "ann").unwrap();
    let report = bench.cycle().await;
    assert_eq!(report.closures, 1);
    let closed = bench.stand_in.closed();
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0].actor.name(), Some("ann"), "the closer is the close event's sender");
    assert!(ledger(&bench, n).is_none());
    assert_eq!(ended(&bench, n).unwrap().state, "closed");
    assert_eq!(bench.events("poll.closure_detected").len(), 1);
    bench.sim.clear_requests();
    bench.cycle().await;
    assert_eq!(bench.sim.requests().to_endpoint(ASK), 0, "a stamped record is never asked");
}

#[tokio::test]
async fn a_tracked_item_still_open_is_asked_every_cycle_and_kept() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    arm(&bench, n);
    bench.cycle().await;
    unlabel(&bench, n);
    for _ in 0..2 {
        bench.sim.clear_requests();
        let report = bench.cycle().await;
        assert_eq!(bench.sim.requests().to_endpoint(ASK), 1);
        assert_eq!(report.closures, 0);
    }
    assert!(ledger(&bench, n).is_some() && ended(&bench, n).is_none());
}

#[tokio::test]
async fn a_poll_only_record_seen_this_window_is_not_asked() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.sim.close(REPO, n, "ann").unwrap();
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    assert_eq!(report.ledger_checks, 0);
    assert_eq!(bench.sim.requests().to_endpoint(ASK), 0);
    assert!(ledger(&bench, n).is_some());
}

#[tokio::test]
async fn a_poll_only_record_absent_for_the_window_is_asked_once() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.sim.close(REPO, n, "ann").unwrap();
    age(&bench, n, 2);
    let report = bench.cycle().await;
    assert_eq!((report.ledger_checks, report.closures), (1, 1));
    assert!(ledger(&bench, n).is_none(), "the poll section is forgotten");
    assert_eq!(ended(&bench, n).unwrap().state, "closed");
    assert_eq!(bench.events("poll.cycle").last().unwrap().0["ledger_checks"], 1);
    bench.sim.clear_requests();
    assert_eq!(bench.cycle().await.ledger_checks, 0);
    assert_eq!(bench.sim.requests().to_endpoint(ASK), 0, "never asked again");
}

#[tokio::test]
async fn an_open_ledger_only_item_gets_only_a_closure_check_stamp_and_waits_a_window() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    unlabel(&bench, n);
    age(&bench, n, 2);
    let path = bench.store.layout().portable_record(&bench.item(REPO, n));
    let before = std::fs::read_to_string(&path).unwrap();
    let report = bench.cycle().await;
    assert_eq!((report.ledger_checks, report.closures), (1, 0));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before, "the record is untouched");
    let clock = bench.store.poll_clock(&bench.item(REPO, n));
    assert!(clock.closure_checked_at.is_some());
    assert_eq!(bench.cycle().await.ledger_checks, 0, "not due again for a window");
}

#[tokio::test]
async fn an_unanswerable_ledger_only_item_is_deferred_not_closed() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.sim.close(REPO, n, "ann").unwrap();
    age(&bench, n, 2);
    bench.sim.inject(loop_sim::Fault {
        kind: loop_sim::FaultKind::ServerError { status: 502 },
        times: 100,
        path_contains: Some(format!("/issues/{n}")),
    });
    let report = bench.cycle().await;
    assert_eq!((report.ledger_checks, report.closures), (1, 0));
    assert!(ledger(&bench, n).is_some() && ended(&bench, n).is_none());
    assert_eq!(bench.events("poll.item_error").len(), 1);
    assert!(bench.store.poll_clock(&bench.item(REPO, n)).closure_checked_at.is_some());
}

#[tokio::test]
async fn a_degraded_scope_asks_nothing_about_its_records() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    arm(&bench, n);
    bench.cycle().await;
    bench.sim.close(REPO, n, "ann").unwrap();
    bench.sim.inject(loop_sim::Fault {
        kind: loop_sim::FaultKind::NotFound,
        times: 1,
        path_contains: Some("/repos/octo/app/issues".into()),
    });
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    assert_eq!(report.scopes_degraded, ["octo/app"]);
    assert_eq!(report.closures, 0);
    assert_eq!(bench.sim.requests().to_endpoint(ASK), 0);
    assert!(ledger(&bench, n).is_some());
}

#[tokio::test]
async fn a_reopened_and_relabelled_item_is_first_sight_again() {
    let mut bench = Bench::new(&[REPO], "  control:\n    requireStartCommand: false\n").await;
    let n = bench.open_issue(REPO, "ann");
    arm(&bench, n);
    bench.cycle().await;
    bench.sim.close(REPO, n, "ann").unwrap();
    bench.cycle().await;
    bench.sim.act(Action::Reopen { repo: REPO.into(), number: n, actor: "ann".into() }).unwrap();
    let report = bench.cycle().await;
    assert_eq!(report.spawns, 1, "a fresh presence");
    assert!(ended(&bench, n).is_none(), "a listed item is open again");
}

#[tokio::test]
async fn a_merged_pr_nested_under_its_work_item_is_closed_and_its_ledger_dropped() {
    let mut bench = Bench::new(&[REPO], "").await;
    let issue = bench.open_issue(REPO, "ann");
    let pr = bench.sim.open_pull_request(REPO, "ann", "Fix", "", "fix", &[LABEL]).unwrap();
    let (issue_ref, pr_ref) = (bench.item(REPO, issue), bench.item(REPO, pr));
    crate::poll_spawn::live_session(&bench, &issue_ref, &[&issue_ref, &pr_ref]);
    bench.cycle().await;
    assert!(ledger(&bench, issue).unwrap().pull_requests.contains_key(&pr_ref));
    bench.sim.merge(REPO, pr, "ann").unwrap();
    let report = bench.cycle().await;
    assert_eq!(report.closures, 1);
    assert_eq!(bench.stand_in.closed()[0].closed_item(), Some(pr_ref.clone()));
    let owner = ledger(&bench, issue).unwrap();
    assert!(owner.pull_requests.is_empty(), "the nested ledger is dropped");
    assert!(owner.title.is_some(), "the work item's own ledger stays");
}

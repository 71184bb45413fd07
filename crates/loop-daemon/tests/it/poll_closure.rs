//! Closure reconciliation against the simulated GitHub (reference §3, seeds 000 and 001):
//! the tracked set every cycle it is absent, the ledger-only set lazily, nothing on doubt;
//! and the poll clocks that schedule it (seed 001). Tests named `edge_NN_…` pin reference
//! §6 edge NN; `seed_000_…` / `seed_001_…` an acceptance criterion of that seed.

use jiff::{SignedDuration, Timestamp};
use loop_core::control::Command;
use loop_core::record::{Control, ControlSource, Ended, PollClock, PollLedger};
use loop_sim::Action;
use loop_store::{EventLog, StateLayout, StateStore};

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

/// Closure questions asked since the request log was last cleared.
fn asked(bench: &Bench) -> usize {
    bench.sim.requests().to_endpoint(ASK)
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

/// On a paused clock: the client's back-off between its retries of the 502s (1 s, 2 s,
/// 4 s) passes at once instead of in seven real seconds.
#[tokio::test(start_paused = true)]
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

#[tokio::test]
async fn edge_57_an_interrupted_cycle_asks_no_closure_question_and_a_complete_one_does() {
    let mut bench = Bench::new(&[REPO], "  control:\n    requireStartCommand: false\n").await;
    let tracked = bench.open_issue(REPO, "ann");
    let ledger_only = bench.open_issue(REPO, "ann");
    arm(&bench, tracked);
    bench.cycle().await;
    bench.sim.close(REPO, tracked, "ann").unwrap();
    bench.sim.close(REPO, ledger_only, "ann").unwrap();
    age(&bench, ledger_only, 2);
    bench.open_issue(REPO, "ann");
    let walked_first = bench.open_issue(REPO, "ann");
    bench.stand_in.stop_on(walked_first);
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    assert!(report.interrupted);
    assert_eq!((asked(&bench), report.closures, report.ledger_checks), (0, 0, 0));
    let report = bench.cycle().await;
    assert!(!report.interrupted);
    assert_eq!((report.closures, report.ledger_checks), (2, 1), "both asked and closed");
}

/// On a paused clock: the client's back-off between its retries of the 502s (1 s, 2 s,
/// 4 s) passes at once instead of in seven real seconds.
#[tokio::test(start_paused = true)]
async fn edge_61_an_unanswerable_tracked_item_is_kept_with_an_error() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    arm(&bench, n);
    bench.cycle().await;
    bench.sim.close(REPO, n, "ann").unwrap();
    bench.sim.inject(loop_sim::Fault {
        kind: loop_sim::FaultKind::ServerError { status: 502 },
        times: 100,
        path_contains: Some(format!("/issues/{n}")),
    });
    let report = bench.cycle().await;
    assert_eq!(report.closures, 0);
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert_eq!(bench.events("poll.item_error")[0].0["level"], "warning");
    assert!(ledger(&bench, n).is_some() && ended(&bench, n).is_none(), "never closed on doubt");
    let clock = bench.store.poll_clock(&bench.item(REPO, n));
    assert!(clock.closure_checked_at.is_none(), "the tracked set has no window");
}

#[tokio::test]
async fn edge_62_a_merged_pr_closes_only_itself_never_its_still_listed_work_item() {
    let mut bench = Bench::new(&[REPO], "").await;
    let issue = bench.open_issue(REPO, "ann");
    let pr = bench.sim.open_pull_request(REPO, "ann", "Fix", "", "fix", &[LABEL]).unwrap();
    let (issue_ref, pr_ref) = (bench.item(REPO, issue), bench.item(REPO, pr));
    crate::poll_spawn::live_session(&bench, &issue_ref, &[&issue_ref, &pr_ref]);
    arm(&bench, issue);
    bench.cycle().await;
    bench.sim.merge(REPO, pr, "ann").unwrap();
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    assert_eq!(report.closures, 1);
    let closed: Vec<_> = bench.stand_in.closed().iter().filter_map(|e| e.closed_item()).collect();
    assert_eq!(closed, [pr_ref]);
    assert_eq!(asked(&bench), 1, "the listed work item is not asked");
    assert!(ended(&bench, issue).is_none());
}

#[tokio::test]
async fn edge_63_a_closed_session_record_is_tracked_until_its_item_is_stamped_ended() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    let item = bench.item(REPO, n);
    let closed = loop_core::record::EndpointStatus::Closed;
    crate::poll_spawn::session_record(&bench, &item, &[&item], closed);
    bench.sim.close(REPO, n, "ann").unwrap();
    let report = bench.cycle().await;
    assert_eq!((report.closures, report.ledger_checks), (1, 0), "tracked, not ledger-only");
    assert_eq!(ended(&bench, n).unwrap().state, "closed");
    bench.sim.clear_requests();
    bench.cycle().await;
    assert_eq!(asked(&bench), 0, "stamped: never asked again");
}

#[tokio::test]
async fn edge_66_a_poll_ledger_beside_control_is_tracked_and_asked_once_a_cycle() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    arm(&bench, n);
    bench.cycle().await;
    unlabel(&bench, n);
    age(&bench, n, 2);
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    assert_eq!(asked(&bench), 1, "due as well, still asked only once");
    assert_eq!(report.ledger_checks, 0, "never counted as ledger-only");
}

#[tokio::test]
async fn edge_67_twenty_ledger_only_records_a_cycle_and_planted_ones_are_deferred_a_window() {
    let mut bench = Bench::new(&[REPO], "").await;
    let numbers: Vec<u64> = (0..22).map(|_| bench.open_issue(REPO, "ann")).collect();
    bench.cycle().await;
    for (hours, n) in numbers.iter().enumerate() {
        bench.sim.close(REPO, *n, "ann").unwrap();
        age(&bench, *n, 2 + hours as i64);
    }
    // Planted poll-only records for items that do not exist: no clock, so due first.
    for n in 900..903 {
        bench.store.write_section(&bench.item(REPO, n), Some(&PollLedger::default())).unwrap();
    }
    let first = bench.cycle().await;
    assert_eq!((first.ledger_checks, first.closures), (20, 17));
    let oldest = bench.item(REPO, numbers[21]);
    let closed: Vec<_> = bench.stand_in.closed().iter().filter_map(|e| e.closed_item()).collect();
    assert!(closed.contains(&oldest), "longest absent first");
    bench.sim.clear_requests();
    let second = bench.cycle().await;
    assert_eq!((second.ledger_checks, second.closures), (5, 5), "the rest, not the planted");
    assert_eq!(asked(&bench), 5);
    let third = bench.cycle().await;
    assert_eq!(third.ledger_checks, 0);
    let last = bench.events("poll.cycle").pop().unwrap();
    assert!(last.0.get("ledger_checks").is_none(), "omitted when zero: {:?}", last.0);
}

#[tokio::test]
async fn seed_001_a_pr_ledger_nested_under_its_owner_keeps_its_clock_in_the_local_file() {
    let mut bench = Bench::new(&[REPO], "").await;
    let issue = bench.open_issue(REPO, "ann");
    let pr = bench.sim.open_pull_request(REPO, "ann", "Fix", "", "fix", &[LABEL]).unwrap();
    let (issue_ref, pr_ref) = (bench.item(REPO, issue), bench.item(REPO, pr));
    crate::poll_spawn::live_session(&bench, &issue_ref, &[&issue_ref, &pr_ref]);
    bench.cycle().await;
    assert!(bench.store.poll_clock(&pr_ref).last_polled_at.is_some());
    let text = std::fs::read_to_string(bench.store.layout().portable_record(&issue_ref)).unwrap();
    assert!(text.contains(&pr_ref.to_string()) && !text.contains("lastPolledAt"), "{text}");
}

#[tokio::test]
async fn seed_001_the_closure_schedule_reads_the_local_clock_over_one_left_in_the_record() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.sim.close(REPO, n, "ann").unwrap();
    // A record forged (or left by an older version) to look just polled.
    let path = bench.store.layout().portable_record(&bench.item(REPO, n));
    let mut record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    record["poll"]["lastPolledAt"] = Timestamp::now().to_string().into();
    std::fs::write(&path, record.to_string()).unwrap();
    age(&bench, n, 2);
    let report = bench.cycle().await;
    assert_eq!((report.ledger_checks, report.closures), (1, 1), "the local clock decides");
}

#[tokio::test]
async fn seed_001_a_clock_left_in_an_old_record_is_read_when_the_local_file_has_none() {
    let mut bench = Bench::new(&[REPO], "").await;
    let recent = bench.open_issue(REPO, "ann");
    let old = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    std::fs::remove_file(bench.store.layout().poll_clocks()).unwrap();
    for (n, stamp) in
        [(recent, Timestamp::now()), (old, Timestamp::now() - SignedDuration::from_hours(2))]
    {
        bench.sim.close(REPO, n, "ann").unwrap();
        let path = bench.store.layout().portable_record(&bench.item(REPO, n));
        let mut record: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        record["poll"]["lastPolledAt"] = stamp.to_string().into();
        std::fs::write(&path, record.to_string()).unwrap();
    }
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    assert_eq!((report.ledger_checks, report.closures), (1, 1), "only the old one is due");
    assert!(ended(&bench, old).is_some() && ended(&bench, recent).is_none());
}

#[tokio::test]
async fn seed_001_a_restarted_poller_does_not_re_ask_about_an_item_it_just_polled() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.sim.close(REPO, n, "ann").unwrap();
    bench.restart();
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    assert_eq!((report.ledger_checks, asked(&bench)), (0, 0));
}

#[tokio::test]
async fn seed_001_a_missing_clock_file_makes_a_ledger_only_record_due_once() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    unlabel(&bench, n);
    std::fs::remove_file(bench.store.layout().poll_clocks()).unwrap();
    assert_eq!(bench.cycle().await.ledger_checks, 1);
    assert_eq!(bench.cycle().await.ledger_checks, 0, "checked: not due for a window");
}

#[tokio::test]
async fn edge_17_records_on_another_host_or_repository_are_not_owned_and_never_asked() {
    let mut bench = Bench::new(&[REPO], "").await;
    let elsewhere: loop_core::WorkItemRef = "github:ghe.example.com/octo/app#1".parse().unwrap();
    let control = Control {
        command: Command::Start,
        source: ControlSource::Cli,
        actor: Some("ann".parse().unwrap()),
        requested_at: Timestamp::now(),
        note: None,
        instance: None,
        delivery_id: None,
    };
    bench.store.write_section(&elsewhere, Some(&control)).unwrap();
    // Poll-only records (no clock, so due) on another host and in another repository.
    for unowned in ["github:ghe.example.com/octo/app#2", "github:octo/lib#3"] {
        let unowned: loop_core::WorkItemRef = unowned.parse().unwrap();
        bench.store.write_section(&unowned, Some(&PollLedger::default())).unwrap();
    }
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    assert!(report.errors.is_empty(), "not asked, so no missing client: {:?}", report.errors);
    assert_eq!((asked(&bench), report.closures, report.ledger_checks), (0, 0, 0));
}

#[tokio::test]
async fn seed_000_a_due_ledger_only_record_linked_by_a_listed_pr_is_not_asked() {
    let mut bench = Bench::new(&[REPO], "").await;
    let issue = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    unlabel(&bench, issue);
    bench.open_closing_pr(REPO, issue);
    age(&bench, issue, 2);
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    assert_eq!((report.ledger_checks, asked(&bench)), (0, 0), "its linked ref is listed");
}

#[tokio::test]
async fn seed_000_a_due_ledger_only_record_in_a_degraded_scope_is_neither_asked_nor_counted() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.sim.close(REPO, n, "ann").unwrap();
    age(&bench, n, 2);
    bench.sim.inject(loop_sim::Fault {
        kind: loop_sim::FaultKind::NotFound,
        times: 1,
        path_contains: Some("/repos/octo/app/issues".into()),
    });
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    assert_eq!(report.scopes_degraded, [REPO]);
    assert_eq!((report.ledger_checks, asked(&bench)), (0, 0));
    assert_eq!(bench.cycle().await.ledger_checks, 1, "asked once the scope answers again");
}

#[tokio::test]
async fn a_merged_pr_nested_after_polling_on_its_own_is_closed_at_once_and_both_ledgers_go() {
    let mut bench = Bench::new(&[REPO], "").await;
    let issue = bench.open_issue(REPO, "ann");
    let pr = bench.sim.open_pull_request(REPO, "ann", "Fix", "", "fix", &[LABEL]).unwrap();
    bench.cycle().await;
    let (issue_ref, pr_ref) = (bench.item(REPO, issue), bench.item(REPO, pr));
    crate::poll_spawn::live_session(&bench, &issue_ref, &[&issue_ref, &pr_ref]);
    bench.cycle().await;
    bench.sim.merge(REPO, pr, "ann").unwrap();
    let report = bench.cycle().await;
    assert_eq!((report.closures, report.ledger_checks), (1, 0), "asked at once, not lazily");
    assert!(ledger(&bench, issue).unwrap().pull_requests.is_empty(), "the nested ledger goes");
    assert!(ledger(&bench, pr).is_none(), "and the PR's own poll section");
    assert_eq!(ended(&bench, pr).unwrap().state, "merged");
}

#[tokio::test]
async fn seed_000_a_closure_whose_stamp_fails_forgets_nothing_and_is_asked_again() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.sim.close(REPO, n, "ann").unwrap();
    age(&bench, n, 2);
    bench.stand_in.refuse_closes();
    let report = bench.cycle().await;
    assert_eq!((report.ledger_checks, report.closures), (1, 0));
    assert_eq!(bench.events("poll.closure_detected").len(), 1);
    assert_eq!(bench.events("poll.item_error").len(), 1);
    assert!(ledger(&bench, n).is_some(), "never forgotten instead of stamped");
    let clock = bench.store.poll_clock(&bench.item(REPO, n));
    assert!(clock.closure_checked_at.is_none(), "not deferred: the answer was closed");
    assert_eq!(bench.cycle().await.ledger_checks, 1, "asked again next cycle");
}

/// Copies `count` ledger-only records for items that do not exist into the bench's
/// `portable/` without any writer of the bench's rebuilding its index — as `git pull` or a
/// copy brings them.
fn plant_behind_the_index(bench: &Bench, numbers: std::ops::Range<u64>) {
    let elsewhere = tempfile::tempdir().unwrap();
    let other = StateStore::new(StateLayout::new(elsewhere.path()), EventLog::disabled());
    let portable = bench.store.layout().portable_dir();
    std::fs::create_dir_all(&portable).unwrap();
    for n in numbers {
        let item = bench.item(REPO, n);
        other.write_section(&item, Some(&PollLedger::default())).unwrap();
        let from = other.layout().portable_record(&item);
        std::fs::copy(&from, bench.store.layout().portable_record(&item)).unwrap();
    }
}

/// Issue #16, item 1: the index is derived; records it does not list are reconciled.
#[tokio::test]
async fn records_copied_in_behind_the_index_are_asked_about_on_the_first_cycle() {
    let mut bench = Bench::new(&[REPO], "").await;
    let tracked = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    assert!(bench.store.layout().portable_index().exists(), "an index lists the tracked item");
    plant_behind_the_index(&bench, 900..925);
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    assert_eq!(report.ledger_checks, 20, "as many as a cycle asks about");
    assert!(asked(&bench) >= 20, "{} asked", asked(&bench));
    let index = bench.store.portable_index().unwrap();
    assert_eq!(index.work_items.len(), 26, "rebuilt: {tracked} and the 25 planted");
}

#[tokio::test]
async fn an_unparsable_index_hides_no_record() {
    let mut bench = Bench::new(&[REPO], "").await;
    plant_behind_the_index(&bench, 900..903);
    std::fs::write(bench.store.layout().portable_index(), "{not json").unwrap();
    bench.sim.clear_requests();
    assert_eq!(bench.cycle().await.ledger_checks, 3);
    assert_eq!(asked(&bench), 3);
}

/// Issue #16, item 3 (seed 000, abuse case 1): one planted record nesting many pull
/// requests costs at most the ledger-only cap a cycle, then waits a window; a live PR
/// endpoint is still asked every cycle.
#[tokio::test]
async fn nested_pull_requests_without_a_live_endpoint_are_asked_within_the_ledger_only_cap() {
    let mut bench = Bench::new(&[REPO], "").await;
    let planted = bench.item(REPO, 800);
    let mut poll = PollLedger::default();
    for n in 900..925 {
        poll.pull_requests.insert(bench.item(REPO, n), Default::default());
    }
    bench.store.write_section(&planted, Some(&poll)).unwrap();
    bench.sim.clear_requests();
    let first = bench.cycle().await;
    assert_eq!(first.ledger_checks, 20, "the cap, not one call per nested PR");
    let second = bench.cycle().await;
    assert_eq!(second.ledger_checks, 5 + 1, "the rest, and the planted record itself");
    bench.sim.clear_requests();
    assert_eq!(bench.cycle().await.ledger_checks, 0, "then a window's wait");
    assert_eq!(asked(&bench), 0);
}

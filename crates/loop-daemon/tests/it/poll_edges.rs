//! Edge cases of reference §6 not covered by the other poll modules: first-sight hold-back
//! with presence, strangers' items, a refused notice, a stop before the cycle, what
//! reconciliation never asks, merged pull requests.

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::control::Command;
use loop_core::record::{Control, ControlSource, Ended, PollLedger};

use crate::poll_support::{Bench, LABEL, Mode, conversation};

const REPO: &str = "octo/app";
const UNSTARTED: &str = "  control:\n    requireStartCommand: false\n";
const ASK: &str = "GET /repos/{owner}/{repo}/issues/{issue_number}";

fn arm(bench: &Bench, item: &WorkItemRef) {
    let control = Control {
        command: Command::Start,
        source: ControlSource::Cli,
        actor: Some("ann".parse().unwrap()),
        requested_at: Timestamp::now(),
        note: None,
        instance: None,
        delivery_id: None,
    };
    bench.store.write_section(item, Some(&control)).unwrap();
}

fn actions(bench: &Bench) -> Vec<String> {
    bench.stand_in.dispatched().iter().map(|(_, e)| e.action.clone().unwrap_or_default()).collect()
}

#[tokio::test]
async fn a_deferring_first_sight_arms_presence_exactly_once_before_the_command() {
    let mut bench = Bench::new(&[REPO], UNSTARTED).await;
    let n = bench.open_issue(REPO, "ann");
    bench.sim.comment(REPO, n, "ann", "the-loop pause").unwrap();
    bench.cycle().await;
    assert_eq!(actions(&bench), ["labeled", "created"]);
}

#[tokio::test]
async fn an_authorized_start_on_a_strangers_item_is_held_back_and_forwarded() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "eve");
    bench.sim.comment(REPO, n, "ann", "the-loop start").unwrap();
    bench.sim.comment(REPO, n, "eve", "the-loop stop").unwrap();
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["the-loop start"]);
    assert_eq!(bench.stand_in.spawned(), [bench.item(REPO, n)]);
}

#[tokio::test]
async fn a_refused_notice_never_un_records_the_give_up_nor_ends_the_cycle() {
    let mut bench = Bench::new(&[REPO], "polling:\n  maxRetries: 1\n").await;
    let n = bench.open_issue(REPO, "ann");
    bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.stand_in.set_mode(Mode::Fail);
    let id = bench.sim.comment(REPO, n, "ann", "doomed").unwrap();
    bench.cycle().await;
    // The give-up cycle re-uses the remembered thread, so its only request to the
    // comments endpoint is the notice.
    bench.sim.inject(loop_sim::Fault {
        kind: loop_sim::FaultKind::ServerError { status: 502 },
        times: 10,
        path_contains: Some(format!("/issues/{n}/comments")),
    });
    let report = bench.cycle().await;
    assert_eq!(report.failures, 1);
    assert_eq!(report.items_seen, 2, "the cycle went on to the next item");
    assert_eq!(bench.events("poll.giveup_report_failed").len(), 1);
    let item = bench.item(REPO, n);
    let ledger = bench.store.read_section::<PollLedger>(&item).unwrap().into_value().unwrap();
    assert_eq!(ledger.comments.gave_up.unwrap().comments, [conversation(id)]);
}

#[tokio::test]
async fn a_stop_before_the_cycle_walks_nothing() {
    let mut bench = Bench::new(&[REPO], "").await;
    bench.open_issue(REPO, "ann");
    let report = bench.cycle_stopped().await;
    assert!(report.interrupted);
    assert_eq!(report.items_seen, 0);
}

#[tokio::test]
async fn reconciliation_never_asks_about_unowned_records_or_linked_refs_of_listed_prs() {
    let mut bench = Bench::new(&[REPO], "").await;
    let issue = bench.sim.open_issue(REPO, "ann", "Unlabelled", &[]).unwrap();
    bench
        .sim
        .open_pull_request(REPO, "ann", "Fix", &format!("Closes #{issue}"), "fix", &[LABEL])
        .unwrap();
    let issue_ref = bench.item(REPO, issue);
    arm(&bench, &issue_ref);
    arm(&bench, &"github:octo/elsewhere#1".parse().unwrap());
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    assert_eq!(bench.sim.requests().to_endpoint(ASK), 0);
    assert_eq!(report.closures, 0);
}

#[tokio::test]
async fn a_merged_pull_request_closes_as_merged() {
    let mut bench = Bench::new(&[REPO], "").await;
    let pr = bench.sim.open_pull_request(REPO, "ann", "Fix", "", "fix", &[LABEL]).unwrap();
    let pr_ref = bench.item(REPO, pr);
    arm(&bench, &pr_ref);
    bench.cycle().await;
    bench.sim.merge(REPO, pr, "ann").unwrap();
    let report = bench.cycle().await;
    assert_eq!(report.closures, 1);
    let ended = bench.store.read_section::<Ended>(&pr_ref).unwrap().into_value().unwrap();
    assert_eq!((ended.state.as_str(), ended.kind.as_str()), ("merged", "pull-request"));
    let detected = bench.events("poll.closure_detected");
    assert_eq!(detected[0].0["state"], "merged");
}

#[tokio::test]
async fn a_ledger_written_by_the_reference_reads_forward_as_known() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    let id = bench.sim.comment(REPO, n, "ann", "before").unwrap();
    let item = bench.item(REPO, n);
    let path = bench.store.layout().portable_record(&item);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let old = serde_json::json!({
        "ref": item.to_string(),
        "poll": {"seenComments": [conversation(id)], "title": "Do the thing", "lastPolledAt": "2026-01-01T00:00:00Z"},
    });
    std::fs::write(&path, old.to_string()).unwrap();
    bench.sim.comment(REPO, n, "ann", "after").unwrap();
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["after"], "known, so not a first sight");
}

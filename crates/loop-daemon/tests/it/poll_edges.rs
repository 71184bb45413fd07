//! Edge cases of reference §6 not covered by the other poll modules: refs and request
//! counts, first-sight hold-back with presence, old and corrupt ledgers, strangers' items,
//! retries, settlements and give-ups, per-item durability, a stop before the cycle, what
//! reconciliation never asks, merged pull requests. Tests named `edge_NN_…` pin reference
//! §6 edge NN (the table is in docs/poller.md).

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::control::Command;
use loop_core::record::{Control, ControlSource, Ended, PollLedger};

use crate::poll_support::{Bench, LABEL, Mode, conversation};

const REPO: &str = "octo/app";
const UNSTARTED: &str = "  control:\n    requireStartCommand: false\n";
const ASK: &str = "GET /repos/{owner}/{repo}/issues/{issue_number}";

fn arm(bench: &Bench, item: &WorkItemRef) {
    record_command(bench, item, Command::Start);
}

/// Records `command` as the CLI would (no comment in the thread).
fn record_command(bench: &Bench, item: &WorkItemRef, command: Command) {
    let control = Control {
        command,
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
    bench.open_closing_pr(REPO, issue);
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

fn ledger(bench: &Bench, item: &WorkItemRef) -> Option<PollLedger> {
    bench.store.read_section::<PollLedger>(item).unwrap().into_value()
}

fn comment_key(id: u64) -> String {
    format!("issue_comment:{}:created", conversation(id).as_str())
}

#[tokio::test]
async fn edge_05_a_pr_comment_is_asked_about_under_the_linked_issue_first_then_the_pr() {
    let mut bench = Bench::new(&[REPO], "").await;
    let issue = bench.open_issue(REPO, "ann");
    let pr = bench.open_closing_pr(REPO, issue);
    bench.cycle().await;
    let id = bench.sim.comment(REPO, pr, "ann", "on the PR").unwrap();
    bench.cycle().await;
    let refs = bench.stand_in.asked_refs(&comment_key(id));
    assert_eq!(refs, [bench.item(REPO, issue), bench.item(REPO, pr)]);
}

#[tokio::test]
async fn edge_06_a_new_comment_on_an_issue_costs_one_read_of_its_comments() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.sim.comment(REPO, n, "ann", "news").unwrap();
    bench.sim.clear_requests();
    bench.cycle().await;
    let log = bench.sim.requests();
    let comments = "GET /repos/{owner}/{repo}/issues/{issue_number}/comments";
    assert_eq!(log.to_endpoint(comments), 1, "{log}");
    assert_eq!(log.total(), 2, "the listing and the one thread read: {log}");
}

#[tokio::test]
async fn edge_11_a_failing_review_read_is_an_item_error_never_a_quiet_pr() {
    let mut bench = Bench::new(&[REPO], "").await;
    let pr = bench.sim.open_pull_request(REPO, "ann", "Fix", "", "fix", &[LABEL]).unwrap();
    bench.cycle().await;
    bench.sim.review(REPO, pr, "ann", loop_sim::ReviewState::Commented, "a review", &[]).unwrap();
    bench.sim.inject(loop_sim::Fault {
        kind: loop_sim::FaultKind::NotFound,
        times: 1,
        path_contains: Some(format!("/pulls/{pr}/reviews")),
    });
    let report = bench.cycle().await;
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert_eq!(bench.events("poll.item_error").len(), 1);
    assert!(bench.stand_in.comment_bodies().is_empty());
    let pr_ref = bench.item(REPO, pr);
    assert!(ledger(&bench, &pr_ref).unwrap().comments.seen_comments.is_empty(), "nothing resolved");
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["a review"], "read again and forwarded");
}

#[tokio::test]
async fn edge_22_a_corrupt_ledger_reads_as_first_sight_and_is_set_aside_not_overwritten() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    let item = bench.item(REPO, n);
    let path = bench.store.layout().portable_record(&item);
    std::fs::write(&path, "{ not json").unwrap();
    bench.sim.comment(REPO, n, "ann", "posted while the record was broken").unwrap();
    let report = bench.cycle().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(bench.stand_in.comment_bodies().is_empty(), "first sight baselines the thread");
    assert_eq!(ledger(&bench, &item).unwrap().comments.seen_comments.len(), 1);
    let aside = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".corrupt-"))
        .count();
    assert_eq!(aside, 1, "the unreadable record is kept aside");
}

#[tokio::test]
async fn edge_24_a_reference_ledger_without_a_title_reads_forward_as_known() {
    let mut bench = Bench::new(&[REPO], "").await;
    let seen = bench.open_issue(REPO, "ann");
    let quiet = bench.open_issue(REPO, "ann");
    let id = bench.sim.comment(REPO, seen, "ann", "before").unwrap();
    for (n, seen_comments) in [(seen, vec![conversation(id)]), (quiet, vec![])] {
        let item = bench.item(REPO, n);
        let path = bench.store.layout().portable_record(&item);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        // What the reference (11.2.0) writes: no title, the clock inside the record.
        let old = serde_json::json!({
            "ref": item.to_string(),
            "poll": {
                "seenComments": seen_comments,
                "commentAttempts": {},
                "lastPolledAt": "2026-01-01T00:00:00Z",
            },
        });
        std::fs::write(&path, old.to_string()).unwrap();
    }
    bench.sim.comment(REPO, seen, "ann", "after").unwrap();
    bench.sim.comment(REPO, quiet, "ann", "first words").unwrap();
    bench.cycle().await;
    let mut bodies = bench.stand_in.comment_bodies();
    bodies.sort();
    assert_eq!(bodies, ["after", "first words"], "known, so not baselined as a first sight");
}

#[tokio::test]
async fn edge_28_first_sight_of_a_pr_whose_work_item_has_a_session_only_baselines() {
    let mut bench = Bench::new(&[REPO], UNSTARTED).await;
    let linked_issue = bench.sim.open_issue(REPO, "ann", "Linked", &[]).unwrap();
    let bound_issue = bench.sim.open_issue(REPO, "ann", "Bound", &[]).unwrap();
    let linked = bench
        .sim
        .open_pull_request(REPO, "ann", "A", &format!("Closes #{linked_issue}"), "a", &[LABEL])
        .unwrap();
    let bound = bench.sim.open_pull_request(REPO, "ann", "B", "", "b", &[LABEL]).unwrap();
    for pr in [linked, bound] {
        bench.sim.comment(REPO, pr, "ann", "old").unwrap();
    }
    let linked_issue = bench.item(REPO, linked_issue);
    let (bound_issue, bound) = (bench.item(REPO, bound_issue), bench.item(REPO, bound));
    crate::poll_spawn::live_session(&bench, &linked_issue, &[&linked_issue]);
    // The PR's linkage is gone; only the session record binds it to its work item.
    crate::poll_spawn::live_session(&bench, &bound_issue, &[&bound_issue, &bound]);
    bench.cycle().await;
    assert_eq!(bench.stand_in.presences(), 0, "a session exists for both");
    assert!(bench.stand_in.comment_bodies().is_empty(), "the threads are baselined");
    bench.sim.comment(REPO, linked, "ann", "new").unwrap();
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["new"], "E-29: forwarded, no presence");
    assert_eq!(bench.stand_in.presences(), 0);
}

#[tokio::test]
async fn edge_38_a_strangers_comment_is_resolved_silently_and_never_re_evaluated() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    let id = bench.sim.comment(REPO, n, "eve", "let me in").unwrap();
    let marked = loop_core::guards::mark_self_authored("the-loop's own reply");
    bench.sim.comment(REPO, n, "ann", &marked).unwrap();
    bench.cycle().await;
    let item = bench.item(REPO, n);
    assert!(ledger(&bench, &item).unwrap().comments.seen_comments.contains(&conversation(id)));
    bench.config.routing.authorized_users.push("eve".parse().unwrap());
    bench.cycle().await;
    assert!(bench.stand_in.dispatched().is_empty(), "not even once eve is authorized");
}

#[tokio::test]
async fn edge_39_on_a_strangers_item_a_recorded_start_arms_presence_and_a_stop_disarms_it() {
    let mut bench = Bench::new(&[REPO], UNSTARTED).await;
    let n = bench.open_issue(REPO, "eve");
    let item = bench.item(REPO, n);
    bench.cycle().await;
    assert_eq!(bench.events("poll.unauthorized").len(), 1, "the spawn is withheld");
    bench.sim.comment(REPO, n, "eve", "the-loop start").unwrap();
    bench.cycle().await;
    assert!(bench.stand_in.dispatched().is_empty(), "the stranger's own command is dropped");
    assert!(bench.store.read_section::<Control>(&item).unwrap().into_value().is_none());
    record_command(&bench, &item, Command::Start);
    bench.sim.comment(REPO, n, "ann", "go").unwrap();
    bench.cycle().await;
    assert_eq!(actions(&bench), ["labeled", "created"], "armed: presence, then the comment");
    let withheld = bench.events("poll.unauthorized").len();
    assert_eq!(withheld, 2, "not said while armed");
    record_command(&bench, &item, Command::Stop);
    bench.sim.comment(REPO, n, "ann", "more").unwrap();
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["go", "more"]);
    assert_eq!(bench.stand_in.presences(), 1, "a recorded stop disarms");
    assert_eq!(bench.events("poll.unauthorized").len(), withheld + 1);
}

#[tokio::test]
async fn edge_40_an_empty_allowlist_arms_nothing_but_a_cli_recorded_start_still_spawns() {
    let mut bench = Bench::with_authorized(&[REPO], "[]", "").await;
    let n = bench.open_issue(REPO, "ann");
    let item = bench.item(REPO, n);
    arm(&bench, &item);
    bench.cycle().await;
    assert_eq!(bench.stand_in.presences(), 1);
    assert_eq!(bench.stand_in.spawned(), [item]);
}

#[tokio::test]
async fn edge_43_a_done_comment_is_resolved_its_attempts_dropped_and_never_re_sent() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    let id = conversation(bench.sim.comment(REPO, n, "ann", "once").unwrap());
    bench.cycle().await;
    let item = bench.item(REPO, n);
    assert_eq!(ledger(&bench, &item).unwrap().comments.comment_attempts[&id], 1);
    bench.cycle().await;
    bench.cycle().await;
    let comments = ledger(&bench, &item).unwrap().comments;
    assert!(comments.seen_comments.contains(&id) && comments.comment_attempts.is_empty());
    assert_eq!(bench.stand_in.comment_bodies(), ["once"]);
}

#[tokio::test]
async fn edge_44_a_new_comment_after_a_give_up_gets_a_fresh_budget() {
    let mut bench = Bench::new(&[REPO], "polling:\n  maxRetries: 1\n").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.stand_in.set_mode(Mode::Fail);
    bench.sim.comment(REPO, n, "ann", "doomed").unwrap();
    bench.cycle().await;
    bench.cycle().await;
    assert_eq!(bench.events("poll.comment_failed").len(), 1);
    bench.stand_in.set_mode(Mode::Deliver);
    bench.sim.comment(REPO, n, "ann", "again").unwrap();
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["doomed", "again"]);
    let forwarded = bench.events("poll.comment_forwarded");
    assert_eq!(forwarded.last().unwrap().0["attempt"], 1, "a fresh budget");
}

#[tokio::test]
async fn edge_46_a_comment_settled_after_it_was_enqueued_is_resolved_once_next_cycle() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.stand_in.set_mode(Mode::SettleLater("session-paused".into()));
    let id = conversation(bench.sim.comment(REPO, n, "ann", "while paused").unwrap());
    assert_eq!(bench.cycle().await.comments_forwarded, 1);
    let report = bench.cycle().await;
    assert_eq!((report.comments_forwarded, report.failures), (0, 0));
    bench.cycle().await;
    let comments = ledger(&bench, &bench.item(REPO, n)).unwrap().comments;
    assert!(comments.seen_comments.contains(&id) && comments.comment_attempts.is_empty());
    assert!(comments.gave_up.is_none(), "a settled comment is never recorded as abandoned");
    assert_eq!(bench.events("poll.comment_settled").len(), 1);
    assert!(bench.events("poll.comment_failed").is_empty());
    assert_eq!(bench.stand_in.comment_bodies().len(), 1);
}

#[tokio::test]
async fn edge_49_the_give_up_notice_goes_to_the_polled_pr_not_its_linked_issue() {
    let mut bench = Bench::new(&[REPO], "polling:\n  maxRetries: 1\n").await;
    let issue = bench.open_issue(REPO, "ann");
    let pr = bench.open_closing_pr(REPO, issue);
    bench.cycle().await;
    bench.stand_in.set_mode(Mode::Fail);
    bench.sim.comment(REPO, pr, "ann", "<script>HOSTILE</script> on the PR").unwrap();
    for _ in 0..3 {
        bench.cycle().await;
    }
    let viewer = bench.sim.viewer().to_owned();
    let notices = bench.sim.comments_by(REPO, pr, &viewer);
    assert_eq!(notices.len(), 1, "posted once, on the PR");
    assert!(!notices[0].contains("HOSTILE"));
    assert!(bench.sim.comments_by(REPO, issue, &viewer).is_empty(), "not on the linked issue");
}

#[tokio::test]
async fn edge_52_a_stuck_attempt_and_a_re_armed_pre_start_comment_settle_once_then_rest() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    let stuck = conversation(bench.sim.comment(REPO, n, "ann", "stuck").unwrap());
    let abandoned = conversation(bench.sim.comment(REPO, n, "ann", "abandoned").unwrap());
    let item = bench.item(REPO, n);
    let mut old = ledger(&bench, &item).unwrap();
    old.comments.seen_comments.push(abandoned.clone());
    old.comments.comment_attempts.insert(stuck, 1);
    old.comments.gave_up =
        Some(loop_core::record::GaveUp { comments: vec![abandoned], version: "0.0.1".into() });
    bench.store.write_section(&item, Some(&old)).unwrap();
    // Nothing is started: the dispatcher refuses both on purpose.
    bench.stand_in.set_mode(Mode::Settle("awaiting-start".into()));
    bench.restart();
    bench.cycle().await;
    assert_eq!(bench.events("poll.comment_settled").len(), 2);
    for _ in 0..2 {
        bench.cycle().await;
    }
    assert_eq!(bench.stand_in.comment_bodies(), ["stuck", "abandoned"], "refused once, then left");
    let comments = ledger(&bench, &item).unwrap().comments;
    assert!(comments.comment_attempts.is_empty() && comments.gave_up.is_none());
}

#[tokio::test]
async fn edge_53_each_item_is_on_disk_before_the_next_item_is_processed() {
    let mut bench = Bench::new(&[REPO], UNSTARTED).await;
    bench.open_issue(REPO, "ann");
    let second = bench.open_issue(REPO, "ann");
    // The listing is newest first: the second issue is walked first.
    let path = bench.store.layout().portable_record(&bench.item(REPO, second));
    bench.stand_in.watch_file(path);
    bench.cycle().await;
    assert_eq!(bench.stand_in.watched_existed(), [false, true]);
}

#[tokio::test]
async fn edge_54_a_failed_dispatch_spends_an_attempt_that_survives_a_restart() {
    let mut bench = Bench::new(&[REPO], "polling:\n  maxRetries: 2\n").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.stand_in.set_mode(Mode::Fail);
    let id = conversation(bench.sim.comment(REPO, n, "ann", "flaky").unwrap());
    bench.cycle().await;
    let item = bench.item(REPO, n);
    assert_eq!(ledger(&bench, &item).unwrap().comments.comment_attempts[&id], 1);
    bench.restart();
    for _ in 0..3 {
        bench.cycle().await;
    }
    assert_eq!(bench.stand_in.comment_bodies().len(), 2, "the budget spans the restart");
    assert_eq!(bench.events("poll.comment_failed").len(), 1);
}

#[tokio::test]
async fn edge_07_a_pr_thread_longer_than_a_page_is_read_whole_across_its_three_surfaces() {
    let mut bench = Bench::new(&[REPO], "").await;
    let pr = bench.sim.open_pull_request(REPO, "ann", "Fix", "", "fix", &[LABEL]).unwrap();
    for i in 0..120 {
        bench.sim.comment(REPO, pr, "ann", &format!("old {i}")).unwrap();
    }
    let review = loop_sim::ReviewState::Commented;
    bench.sim.review(REPO, pr, "ann", review, "old review", &[("src/a.rs", 1, "old")]).unwrap();
    let report = bench.cycle().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let pr_ref = bench.item(REPO, pr);
    assert_eq!(ledger(&bench, &pr_ref).unwrap().comments.seen_comments.len(), 122);
    bench.sim.comment(REPO, pr, "ann", "the new one").unwrap();
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["the new one"], "nothing past page one re-sent");
}

#[tokio::test]
async fn edge_35_with_control_disabled_first_sight_baselines_a_start_and_offers_presence() {
    let mut bench = Bench::new(&[REPO], "  control:\n    enabled: false\n").await;
    let n = bench.open_issue(REPO, "ann");
    bench.sim.comment(REPO, n, "ann", "the-loop start").unwrap();
    bench.cycle().await;
    assert_eq!(actions(&bench), ["labeled"], "no command is held back; the label spawns");
    let item = bench.item(REPO, n);
    assert_eq!(ledger(&bench, &item).unwrap().comments.seen_comments.len(), 1);
}

#[tokio::test]
async fn edge_69_pollers_over_two_state_roots_lock_independently() {
    let first = Bench::new(&[REPO], "").await;
    let second = Bench::new(&[REPO], "").await;
    let _one = first.poller.lock().expect("the first root's lock");
    let _two = second.poller.lock().expect("another root's lock is another lock");
}

#[tokio::test]
async fn edge_70_a_corrupt_unlocked_pidfile_is_taken_and_holds_the_new_pid() {
    let bench = Bench::new(&[REPO], "").await;
    let path = bench.store.layout().poll_pidfile();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "not a pid\n").unwrap();
    let lock = bench.poller.lock().expect("nobody holds it");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.trim(), std::process::id().to_string());
    drop(lock);
    assert!(!path.exists(), "released");
}

#[test]
fn edge_74_the_pollers_default_paths_interval_and_budget() {
    let config = loop_core::config::parse("repositories: [octo/app]\n").unwrap().config;
    assert_eq!((config.polling.interval_seconds, config.polling.max_retries), (60, 3));
    let root = std::path::Path::new(".the-loop");
    assert_eq!(config.state.root, root);
    let layout = loop_store::StateLayout::new(config.state.root.clone());
    assert_eq!(layout.poll_pidfile(), root.join("poll.pid"));
    assert_eq!(layout.heartbeat(), root.join("poll-status.json"));
    assert_eq!(layout.portable_dir(), root.join("portable"));
    assert_eq!(layout.poll_clocks(), root.join("local/poll-clocks.json"));
}

#[test]
fn edge_13_malformed_repositories_are_refused_and_the_list_keeps_first_occurrences() {
    for bad in ["\"\"", "octo", "/repo", "octo/"] {
        let parsed = loop_core::config::parse(&format!("repositories: [{bad}]\n"));
        assert!(parsed.is_err(), "{bad} is not a repository");
    }
    let yaml = "repositories: [octo/b, octo/a, Octo/B, github.com/octo/a]\n";
    let config = loop_core::config::parse(yaml).unwrap().config;
    let names: Vec<String> = config.repositories.iter().map(ToString::to_string).collect();
    assert_eq!(names, ["octo/b", "octo/a"]);
}

//! The poller against the simulated GitHub and an in-memory dispatcher: reading,
//! first sight (seed 004), forwarding, retries and give-ups, clocks (seed 001), frugality,
//! the poll cache that keeps a restart warm, the heartbeat's scope health, and the
//! `poll.*` events of the reference catalogue not covered elsewhere.

use loop_core::record::{Control, PollLedger};
use loop_daemon::poller::PollerError;
use loop_sim::ReviewState;

use crate::poll_support::{Bench, LABEL, Mode, conversation};

const REPO: &str = "octo/app";

fn poll_ledger(bench: &Bench, number: u64) -> Option<PollLedger> {
    bench.store.read_section::<PollLedger>(&bench.item(REPO, number)).unwrap().into_value()
}

#[tokio::test]
async fn first_sight_spawns_once_baselines_the_thread_and_forwards_nothing() {
    let mut bench = Bench::new(&[REPO], "  control:\n    requireStartCommand: false\n").await;
    let n = bench.open_issue(REPO, "ann");
    bench.sim.comment(REPO, n, "ann", "some context").unwrap();
    let report = bench.cycle().await;
    assert_eq!((report.items_seen, report.spawns, report.comments_forwarded), (1, 1, 0));
    assert_eq!(bench.stand_in.presences(), 1);
    assert!(bench.stand_in.comment_bodies().is_empty());
    assert_eq!(poll_ledger(&bench, n).unwrap().comments.seen_comments.len(), 1);
    let again = bench.cycle().await;
    assert_eq!((again.spawns, again.comments_forwarded), (0, 0));
}

#[tokio::test]
async fn a_start_posted_before_first_sight_starts_the_item() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.sim.comment(REPO, n, "ann", "chatter first").unwrap();
    bench.sim.comment(REPO, n, "ann", "the-loop start").unwrap();
    let report = bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["the-loop start"]);
    assert_eq!(bench.stand_in.spawned(), [bench.item(REPO, n)]);
    assert_eq!(report.spawns, 0, "no presence is offered while a start is pending");
    assert_eq!(bench.stand_in.presences(), 0);
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies().len(), 1, "nothing is forwarded twice");
    let ledger = poll_ledger(&bench, n).unwrap();
    assert_eq!(ledger.comments.seen_comments.len(), 2, "the start resolves once it is done");
}

#[tokio::test]
async fn pending_commands_are_forwarded_in_thread_order_so_start_then_stop_ends_stopped() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.sim.comment(REPO, n, "ann", "the-loop start").unwrap();
    bench.sim.comment(REPO, n, "ann", "the-loop stop").unwrap();
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["the-loop start", "the-loop stop"]);
    let control = bench.store.read_section::<Control>(&bench.item(REPO, n)).unwrap().into_value();
    assert_eq!(control.unwrap().command, loop_core::control::Command::Stop);
}

#[tokio::test]
async fn first_sight_baselines_strangers_self_marked_and_ambiguous_commands() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.sim.comment(REPO, n, "eve", "the-loop start").unwrap();
    let marked = loop_core::guards::mark_self_authored("the-loop start");
    bench.sim.comment(REPO, n, "ann", &marked).unwrap();
    bench.sim.comment(REPO, n, "ann", "the-loop start or the-loop stop?").unwrap();
    bench.cycle().await;
    assert!(bench.stand_in.comment_bodies().is_empty());
    assert_eq!(poll_ledger(&bench, n).unwrap().comments.seen_comments.len(), 3);
}

#[tokio::test]
async fn first_sight_with_a_control_record_replays_nothing() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.sim.comment(REPO, n, "ann", "the-loop stop").unwrap();
    let control = Control {
        command: loop_core::control::Command::Start,
        source: loop_core::record::ControlSource::Cli,
        actor: Some("ann".parse().unwrap()),
        requested_at: jiff::Timestamp::now(),
        note: None,
        instance: None,
        delivery_id: None,
    };
    bench.store.write_section(&bench.item(REPO, n), Some(&control)).unwrap();
    bench.cycle().await;
    assert!(bench.stand_in.comment_bodies().is_empty(), "the old stop is not replayed");
    assert_eq!(bench.stand_in.presences(), 1, "the recorded start arms the presence");
}

#[tokio::test]
async fn an_authorized_comment_on_a_strangers_item_is_forwarded_but_never_spawns_by_itself() {
    let mut bench = Bench::new(&[REPO], "  control:\n    requireStartCommand: false\n").await;
    let n = bench.open_issue(REPO, "eve");
    bench.cycle().await;
    assert_eq!(bench.stand_in.presences(), 0);
    assert_eq!(bench.events("poll.unauthorized").len(), 1);
    bench.sim.comment(REPO, n, "ann", "please look").unwrap();
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["please look"]);
    assert_eq!(bench.stand_in.presences(), 0, "the item's author gates only presence");
}

#[tokio::test]
async fn a_new_comment_on_a_known_item_is_forwarded_once_with_the_webhooks_dedup_key() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    let id = bench.sim.comment(REPO, n, "ann", "next step please").unwrap();
    let report = bench.cycle().await;
    assert_eq!(report.comments_forwarded, 1);
    let (key, event) = bench.stand_in.dispatched().pop().unwrap();
    assert!(key.starts_with("issue_comment:IC_") && key.ends_with(":created"), "{key}");
    assert_eq!(event.comment.unwrap().id, Some(id.to_string()));
    assert_eq!(bench.cycle().await.comments_forwarded, 0);
    assert_eq!(bench.events("poll.comment_forwarded").len(), 1);
}

#[tokio::test]
async fn a_comment_the_webhook_already_delivered_is_resolved_without_forwarding() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    let id = bench.sim.comment(REPO, n, "ann", "pushed and polled").unwrap();
    let node = loop_sim::world::node_id("IC", id);
    bench.stand_in.mark_done(&format!("issue_comment:{node}:created"));
    let report = bench.cycle().await;
    assert_eq!(report.comments_forwarded, 0);
    assert!(bench.stand_in.comment_bodies().is_empty());
    assert!(poll_ledger(&bench, n).unwrap().comments.seen_comments.contains(&conversation(id)));
}

#[tokio::test]
async fn a_failing_comment_is_retried_to_max_retries_then_given_up_with_one_notice() {
    let mut bench = Bench::new(&[REPO], "polling:\n  maxRetries: 2\n").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.stand_in.set_mode(Mode::Fail);
    let id = bench.sim.comment(REPO, n, "ann", "SECRET-INSTRUCTION do it").unwrap();
    for _ in 0..4 {
        bench.cycle().await;
    }
    assert_eq!(bench.stand_in.comment_bodies().len(), 2, "two attempts, then no more");
    let ledger = poll_ledger(&bench, n).unwrap();
    assert!(ledger.comments.seen_comments.contains(&conversation(id)));
    assert_eq!(ledger.comments.gave_up.unwrap().comments, [conversation(id)]);
    assert_eq!(bench.events("poll.comment_failed").len(), 1);
    assert_eq!(bench.events("poll.giveup_reported").len(), 1);
    let notices = bench.sim.comments_by(REPO, n, bench.sim.viewer());
    assert_eq!(notices.len(), 1);
    assert!(notices[0].contains(&id.to_string()) && !notices[0].contains("SECRET-INSTRUCTION"));
    assert!(loop_core::guards::is_self_authored(&notices[0]));
}

#[tokio::test]
async fn an_in_flight_comment_is_never_re_forwarded_nor_counted() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.stand_in.set_mode(Mode::Hang);
    let id = bench.sim.comment(REPO, n, "ann", "a long one").unwrap();
    for _ in 0..5 {
        bench.cycle().await;
    }
    assert_eq!(bench.stand_in.comment_bodies().len(), 1);
    assert_eq!(poll_ledger(&bench, n).unwrap().comments.comment_attempts[&conversation(id)], 1);
    assert!(bench.events("poll.comment_failed").is_empty());
}

#[tokio::test]
async fn a_settled_comment_is_resolved_without_an_attempt_or_a_failure() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.stand_in.set_mode(Mode::Settle("session-paused".into()));
    let id = bench.sim.comment(REPO, n, "ann", "while paused").unwrap();
    let report = bench.cycle().await;
    assert_eq!((report.comments_forwarded, report.failures), (0, 0));
    let ledger = poll_ledger(&bench, n).unwrap();
    assert!(ledger.comments.seen_comments.contains(&conversation(id)));
    assert!(ledger.comments.gave_up.is_none());
    let settled = bench.events("poll.comment_settled");
    assert_eq!(settled.len(), 1);
    assert_eq!(settled[0].0["outcome"], "session-paused");
}

#[tokio::test]
async fn a_pr_review_and_inline_comment_are_forwarded_as_their_webhook_events() {
    let mut bench = Bench::new(&[REPO], "").await;
    let issue = bench.open_issue(REPO, "ann");
    let pr = bench.open_closing_pr(REPO, issue);
    bench.cycle().await;
    bench
        .sim
        .review(REPO, pr, "ann", ReviewState::Commented, "looks odd", &[("src/a.rs", 3, "here")])
        .unwrap();
    bench.cycle().await;
    let kinds: Vec<String> = bench
        .stand_in
        .dispatched()
        .iter()
        .filter(|(_, e)| e.comment.is_some())
        .map(|(k, _)| k.split(':').next().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["pull_request_review", "pull_request_review_comment"]);
    let (_, event) = bench.stand_in.dispatched().pop().unwrap();
    assert_eq!(event.entity.unwrap().closing_issues, [bench.item(REPO, issue)]);
}

#[tokio::test]
async fn a_review_and_an_inline_comment_numbered_like_a_resolved_comment_are_still_forwarded() {
    let mut bench = Bench::new(&[REPO], "").await;
    let pr = bench.sim.open_pull_request(REPO, "ann", "Fix", "", "fix", &[LABEL]).unwrap();
    bench.cycle().await;
    let comment = bench.sim.comment(REPO, pr, "ann", "a conversation comment").unwrap();
    bench.cycle().await;
    bench.cycle().await;
    let review = bench
        .sim
        .review(REPO, pr, "ann", ReviewState::Commented, "a review", &[("src/a.rs", 3, "inline")])
        .unwrap();
    // GitHub numbers the three surfaces separately: all three are the first of their kind.
    assert_eq!(comment, review);
    bench.cycle().await;
    bench.cycle().await;
    assert_eq!(
        bench.stand_in.comment_bodies(),
        ["a conversation comment", "a review", "inline"],
        "a shared number never makes a comment read as already seen"
    );
    let seen = poll_ledger(&bench, pr).unwrap().comments.seen_comments;
    let prefixes: Vec<&str> =
        seen.iter().map(|id| id.as_str().split('_').next().unwrap()).collect();
    assert_eq!(prefixes, ["IC", "PRR", "PRRC"], "three ledger entries, keyed by node id");
}

#[tokio::test]
async fn clocks_live_in_the_local_file_and_a_quiet_cycle_rewrites_no_portable_record() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    let path = bench.store.layout().portable_record(&bench.item(REPO, n));
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("lastPolledAt") && !text.contains("closureCheckedAt"), "{text}");
    let clock = bench.store.poll_clock(&bench.item(REPO, n));
    assert!(clock.last_polled_at.is_some());
    bench.cycle().await;
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), before);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[tokio::test]
async fn a_stale_clock_in_an_old_record_is_read_and_dropped_on_the_next_write() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    let path = bench.store.layout().portable_record(&bench.item(REPO, n));
    let mut record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    record["poll"]["lastPolledAt"] = "2026-01-01T00:00:00Z".into();
    std::fs::write(&path, record.to_string()).unwrap();
    bench.sim.comment(REPO, n, "ann", "learn something").unwrap();
    bench.cycle().await;
    assert!(!std::fs::read_to_string(&path).unwrap().contains("lastPolledAt"));
}

#[tokio::test]
async fn a_second_poller_is_refused_naming_the_holder() {
    let bench = Bench::new(&[REPO], "").await;
    let _held = bench.poller.lock().unwrap();
    let other = loop_daemon::poller::Poller::new(
        bench.store.clone(),
        crate::poll_support::clients(&bench.sim),
        bench.stand_in.clone(),
        "x",
    );
    match other.lock() {
        Err(PollerError::Blocked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(bench.events("poller.blocked").len(), 1);
}

#[tokio::test]
async fn a_failing_scope_is_degraded_and_isolated() {
    let mut bench = Bench::new(&[REPO, "octo/gone"], "").await;
    bench.open_issue(REPO, "ann");
    bench.sim.inject(loop_sim::Fault {
        kind: loop_sim::FaultKind::NotFound,
        times: 1,
        path_contains: Some("octo/gone".into()),
    });
    let report = bench.cycle().await;
    assert_eq!(report.scopes_degraded, ["octo/gone"]);
    assert_eq!((report.scopes_polled, report.items_seen), (1, 1));
    assert_eq!(bench.events("poll.scope_error").len(), 1);
    let next = bench.cycle().await;
    assert!(next.scopes_degraded.is_empty());
    assert_eq!(bench.events("poll.scope_recovered").len(), 1);
}

#[tokio::test]
async fn a_stop_is_honoured_after_the_item_in_flight_and_the_cycle_reconciles_nothing() {
    let mut bench = Bench::new(&[REPO], "  control:\n    requireStartCommand: false\n").await;
    let first = bench.open_issue(REPO, "ann");
    let second = bench.open_issue(REPO, "ann");
    // The listing is newest first: the second issue is walked first.
    bench.stand_in.stop_on(second);
    let report = bench.cycle().await;
    assert!(report.interrupted);
    assert_eq!(report.items_seen, 1);
    assert!(poll_ledger(&bench, second).is_some(), "the item in flight is on disk");
    assert!(poll_ledger(&bench, first).is_none(), "nothing after it started");
    assert_eq!(report.ledger_checks, 0);
}

#[tokio::test]
async fn a_restarted_poller_re_forwards_nothing_already_delivered() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.cycle().await;
    bench.sim.comment(REPO, n, "ann", "one").unwrap();
    bench.cycle().await;
    bench.restart();
    bench.cycle().await;
    bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["one"]);
}

#[tokio::test]
async fn a_quiet_cycle_makes_one_request_per_repository_all_not_modified() {
    let repos = ["octo/a", "octo/b", "octo/c"];
    let mut bench = Bench::new(&repos, "").await;
    for i in 0..10 {
        bench.open_issue(repos[i % 3], "ann");
    }
    for i in 0..4 {
        let repo = repos[i % 3];
        bench.sim.open_pull_request(repo, "ann", "PR", "", &format!("b{i}"), &[LABEL]).unwrap();
    }
    bench.cycle().await;
    bench.sim.clear_requests();
    let quiet = bench.cycle().await;
    let log = bench.sim.requests();
    assert_eq!((log.total(), log.with_status(304)), (3, 3), "{log}");
    assert_eq!((quiet.requests, quiet.not_modified), (3, 3));
    let pr = bench
        .sim
        .world()
        .repo("octo/a")
        .unwrap()
        .items
        .values()
        .find(|i| i.pull.is_some())
        .unwrap()
        .number;
    bench.sim.comment("octo/a", pr, "ann", "one new comment").unwrap();
    bench.sim.clear_requests();
    let busy = bench.cycle().await;
    let log = bench.sim.requests();
    assert!(log.total() <= 3 + 3, "{log}");
    assert_eq!(busy.comments_forwarded, 1);
}

#[tokio::test]
async fn a_repository_with_issues_off_is_quarantined_and_its_pull_requests_still_polled() {
    let mut bench = Bench::new(&[REPO], "").await;
    let pr = bench.sim.open_pull_request(REPO, "ann", "Fix", "", "fix", &[LABEL]).unwrap();
    let action = loop_sim::Action::SetIssuesEnabled { repo: REPO.into(), enabled: false };
    bench.sim.act(action).unwrap();
    let report = bench.cycle().await;
    assert_eq!(report.scopes_degraded, [REPO]);
    assert_eq!(report.items_seen, 1);
    assert!(poll_ledger(&bench, pr).is_some());
    bench.sim.comment(REPO, pr, "ann", "still heard").unwrap();
    let next = bench.cycle().await;
    assert_eq!(bench.stand_in.comment_bodies(), ["still heard"]);
    assert_eq!(next.scopes_degraded, [REPO], "degraded until the re-probe");
    assert_eq!(bench.events("poll.scope_degraded").len(), 1, "said once");
    assert!(bench.events("poll.scope_error").is_empty());
    // Then only visible through the heartbeat: a permanent failure, then skipped.
    assert!(report.scopes_failed[0].permanent && report.scopes_skipped.is_empty());
    assert!(next.scopes_failed.is_empty());
    let heartbeat = bench.store.read_heartbeat().unwrap().unwrap();
    let skipped = &heartbeat.last_cycle.unwrap().scopes_skipped;
    assert_eq!((skipped[0].scope.as_str(), skipped[0].permanent), (REPO, true));
    assert!(skipped[0].error.contains("issues are disabled"), "{}", skipped[0].error);
    let scope = &heartbeat.scopes[0];
    assert!(scope.degraded && scope.last_polled_at.is_some(), "its pull requests answered");
}

/// Three repositories, ten labelled issues, four labelled pull requests (one with a
/// review and an inline comment), every thread read once.
async fn warm_bench() -> Bench {
    let repos = ["octo/a", "octo/b", "octo/c"];
    let mut bench = Bench::new(&repos, "").await;
    for i in 0..10 {
        let n = bench.open_issue(repos[i % 3], "ann");
        bench.sim.comment(repos[i % 3], n, "ann", "context").unwrap();
    }
    for i in 0..4 {
        let repo = repos[i % 3];
        let pr =
            bench.sim.open_pull_request(repo, "ann", "PR", "", &format!("b{i}"), &[LABEL]).unwrap();
        let inline = [("src/lib.rs", 3, "inline")];
        bench.sim.review(repo, pr, "ann", ReviewState::Commented, "a review", &inline).unwrap();
    }
    bench.cycle().await;
    bench
}

#[tokio::test]
async fn a_restarted_pollers_first_quiet_cycle_is_one_request_per_repository_all_not_modified() {
    let mut bench = warm_bench().await;
    bench.restart();
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    let log = bench.sim.requests();
    assert_eq!((log.total(), log.with_status(304)), (3, 3), "{log}");
    assert_eq!(log.to_endpoint("GET /repos/{owner}/{repo}/issues"), 3, "{log}");
    assert_eq!((report.requests, report.not_modified), (3, 3));
    assert_eq!((report.items_seen, report.comments_forwarded), (14, 0));
}

#[tokio::test]
async fn a_comment_posted_while_the_poller_was_down_is_forwarded_once_after_the_restart() {
    let mut bench = warm_bench().await;
    let n = bench.open_issue("octo/b", "ann");
    bench.cycle().await;
    bench.restart();
    bench.sim.comment("octo/b", n, "ann", "while you were away").unwrap();
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    let log = bench.sim.requests();
    assert_eq!(report.comments_forwarded, 1);
    assert_eq!(bench.stand_in.comment_bodies(), ["while you were away"]);
    assert_eq!(log.total(), 3 + 1, "the listings, then the one thread that moved: {log}");
    bench.restart();
    assert_eq!(bench.cycle().await.comments_forwarded, 0, "the ledger, not the cache, decides");
}

#[tokio::test]
async fn a_poll_cache_written_for_another_configuration_is_not_used() {
    let mut bench = warm_bench().await;
    // The same repositories under another label: the cache must not be trusted.
    bench.config.polling.sources = loop_core::config::parse(
        "polling:
  sources:
    - provider: github
      label: other
",
    )
    .unwrap()
    .config
    .polling
    .sources;
    bench.restart();
    bench.sim.clear_requests();
    bench.cycle().await;
    let log = bench.sim.requests();
    assert_eq!(log.with_status(304), 0, "nothing was sent conditionally: {log}");
    let text = std::fs::read_to_string(bench.store.layout().poll_cache()).unwrap();
    let cache: serde_json::Value = serde_json::from_str(&text).unwrap();
    let lines = cache["writtenFor"].as_array().unwrap();
    let for_other = lines.iter().filter_map(|l| l.as_str()).any(|l| l.contains("label=\"other\""));
    assert!(for_other, "rewritten for the new configuration: {lines:?}");
}

#[tokio::test]
async fn an_unparsable_poll_cache_is_quarantined_and_the_poller_starts_cold() {
    let mut bench = warm_bench().await;
    let path = bench.store.layout().poll_cache();
    std::fs::write(&path, "{\"writtenFor\": [").unwrap();
    bench.restart();
    bench.sim.clear_requests();
    let report = bench.cycle().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(bench.sim.requests().with_status(304), 0, "cold: nothing remembered");
    assert_eq!(bench.events("state.quarantined").len(), 1);
    assert!(std::fs::read_to_string(&path).unwrap().contains("writtenFor"), "written anew");
    assert_eq!(bench.stand_in.comment_bodies(), Vec::<String>::new(), "the ledger still holds");
}

#[tokio::test]
async fn a_quiet_cycle_does_not_rewrite_the_poll_cache() {
    use std::os::unix::fs::MetadataExt;
    let mut bench = warm_bench().await;
    bench.cycle().await;
    let path = bench.store.layout().poll_cache();
    let inode = std::fs::metadata(&path).unwrap().ino();
    bench.restart();
    bench.cycle().await;
    bench.cycle().await;
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode, "an atomic rewrite swaps inodes");
    let mode = std::fs::metadata(&path).unwrap().mode();
    assert_eq!(mode & 0o777, 0o600, "machine-local");
}

#[tokio::test]
async fn every_key_of_the_poll_cache_is_classified_machine_local() {
    use loop_store::classification::{RecordType, classify};
    let bench = warm_bench().await;
    let text = std::fs::read_to_string(bench.store.layout().poll_cache()).unwrap();
    let cache: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut checked = vec![(RecordType::PollCache, &cache)];
    let thread = cache["threads"].as_object().unwrap().values().next().unwrap();
    checked.push((RecordType::RememberedThread, thread));
    let linkage = cache["linkage"].as_object().unwrap().values().next().unwrap();
    checked.push((RecordType::RememberedLinkage, linkage));
    for validator in cache["validators"]["github.com"].as_array().unwrap() {
        checked.push((RecordType::Validator, validator));
    }
    for (record, value) in checked {
        assert!(!record.is_portable());
        for key in value.as_object().unwrap().keys() {
            assert!(classify(record, key).is_some(), "{}: {key}", record.location());
        }
    }
    assert!(!text.contains("\"t\""), "the token itself is never stored");
}

#[tokio::test]
async fn the_heartbeat_says_how_each_scope_fared() {
    let mut bench = Bench::new(&[REPO, "octo/gone"], "").await;
    bench.open_issue(REPO, "ann");
    bench.sim.inject(loop_sim::Fault {
        kind: loop_sim::FaultKind::NotFound,
        times: 1,
        path_contains: Some("octo/gone".into()),
    });
    bench.cycle().await;
    let heartbeat = bench.store.read_heartbeat().unwrap().unwrap();
    let cycle = heartbeat.last_cycle.clone().unwrap();
    assert_eq!(cycle.scopes_polled, 1);
    assert_eq!(
        (cycle.scopes_failed[0].scope.as_str(), cycle.scopes_failed[0].permanent),
        ("octo/gone", false)
    );
    assert_eq!(cycle.requests, 1 + 1 + 1, "two listings and one thread");
    let [app, gone] = &heartbeat.scopes[..] else { panic!("{:?}", heartbeat.scopes) };
    assert_eq!((app.repository.as_str(), app.label.as_str()), (REPO, LABEL));
    assert!(app.monitor.issues && app.monitor.pull_requests);
    assert!(!app.degraded && app.reason.is_none() && app.last_polled_at.is_some());
    assert_eq!((app.requests, app.not_modified), (2, 0), "its listing and its item's thread");
    assert!(gone.degraded && gone.last_polled_at.is_none());
    assert!(
        gone.reason.as_deref().is_some_and(|r| r.contains("404") || r.contains("not found")),
        "{:?}",
        gone.reason
    );
    let text = std::fs::read_to_string(bench.store.layout().heartbeat()).unwrap();
    for key in ["\"scopes\"", "\"lastPolledAt\"", "\"scopesFailed\"", "\"notModified\""] {
        assert!(text.contains(key), "{key} in {text}");
    }
    // A restarted poller remembers when a scope last answered.
    bench.sim.inject(loop_sim::Fault {
        kind: loop_sim::FaultKind::NotFound,
        times: 1,
        path_contains: Some("/repos/octo/app/issues".into()),
    });
    bench.restart();
    bench.cycle().await;
    let heartbeat = bench.store.read_heartbeat().unwrap().unwrap();
    assert!(heartbeat.scopes[0].degraded, "{:?}", heartbeat.scopes);
    assert_eq!(heartbeat.scopes[0].last_polled_at, app.last_polled_at);
}

#[tokio::test]
async fn an_unanswered_linkage_question_is_a_provider_error_and_retried_next_cycle() {
    let mut bench = Bench::new(&[REPO], "").await;
    bench.sim.open_pull_request(REPO, "ann", "Fix", "Closes #1", "fix", &[LABEL]).unwrap();
    bench.sim.inject(loop_sim::Fault {
        kind: loop_sim::FaultKind::NotFound,
        times: 1,
        path_contains: Some("/graphql".into()),
    });
    let report = bench.cycle().await;
    let errors = bench.events("poll.provider_error");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].0["provider"], "github");
    assert_eq!(errors[0].0["will_retry"], true);
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    bench.sim.clear_requests();
    bench.cycle().await;
    assert_eq!(bench.sim.requests().to_endpoint("POST /graphql"), 1, "asked again");
    assert_eq!(bench.events("poll.provider_error").len(), 1);
}

#[tokio::test]
async fn an_unreadable_thread_is_an_item_error_and_read_again_next_cycle() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    bench.sim.inject(loop_sim::Fault {
        kind: loop_sim::FaultKind::NotFound,
        times: 1,
        path_contains: Some(format!("/issues/{n}/comments")),
    });
    let report = bench.cycle().await;
    let errors = bench.events("poll.item_error");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].level(), "error", "a listed item's error");
    assert_eq!(errors[0].0["work_item"], bench.item(REPO, n).to_string());
    assert!(poll_ledger(&bench, n).is_none(), "nothing baselined on doubt");
    assert_eq!(report.errors.len(), 1);
    bench.sim.comment(REPO, n, "ann", "hello").unwrap();
    bench.cycle().await;
    assert!(poll_ledger(&bench, n).is_some(), "read on the next cycle");
}

#[tokio::test]
async fn clients_come_from_the_config_with_the_token_from_the_configured_gh() {
    let mut bench = Bench::new(&[REPO], "").await;
    let n = bench.open_issue(REPO, "ann");
    let dir = tempfile::tempdir().unwrap();
    let gh = dir.path().join("gh");
    std::fs::write(&gh, "#!/bin/sh\necho token-from-gh\n").unwrap();
    std::fs::set_permissions(&gh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let yaml = format!(
        "repositories: [{REPO}]\nrouting:\n  authorizedUsers: [ann]\nintegrations:\n  github:\n    cli:\n      binary: {}\n    api:\n      baseUrl: {}\n      tokenEnv: [THE_LOOP_POLL_TEST_UNSET_TOKEN]\n",
        gh.display(),
        bench.sim.url()
    );
    bench.config = loop_core::config::parse(&yaml).unwrap().config;
    let clients = loop_daemon::poller::GithubClients::for_config(&bench.config).unwrap();
    bench.poller = loop_daemon::poller::Poller::new(
        bench.store.clone(),
        clients,
        bench.stand_in.clone(),
        crate::poll_support::VERSION,
    );
    let report = bench.cycle().await;
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.items_seen, 1);
    assert!(poll_ledger(&bench, n).is_some());
}

#[tokio::test]
async fn run_polls_until_shutdown_then_says_it_stopped() {
    let mut bench = Bench::new(&[REPO], "  control:\n    requireStartCommand: false\n").await;
    let n = bench.open_issue(REPO, "ann");
    bench.stand_in.stop_on(n);
    let (_config_tx, config_rx) =
        tokio::sync::watch::channel(std::sync::Arc::new(bench.config.clone()));
    let shutdown = bench.shutdown();
    let observed = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counter = observed.clone();
    let mut poller = std::mem::replace(
        &mut bench.poller,
        loop_daemon::poller::Poller::new(
            bench.store.clone(),
            crate::poll_support::clients(&bench.sim),
            bench.stand_in.clone(),
            crate::poll_support::VERSION,
        ),
    )
    .with_observer(loop_daemon::poller::CycleObserver::new(move |report| {
        counter.fetch_add(report.items_seen, std::sync::atomic::Ordering::SeqCst);
    }));
    loop_daemon::poller::run(&mut poller, config_rx, shutdown).await;
    assert_eq!(observed.load(std::sync::atomic::Ordering::SeqCst), 1, "the observer saw the cycle");
    assert_eq!(bench.events("poller.started").len(), 1);
    assert_eq!(bench.events("poll.cycle").len(), 1, "the wait between cycles is cut short");
    assert_eq!(bench.events("poller.stopped").len(), 1);
    let heartbeat = bench.store.read_heartbeat().unwrap().unwrap();
    assert_eq!(heartbeat.last_cycle.unwrap().items_seen, 1);
}

/// On a paused clock: the poller's wait of `intervalSeconds` between the cycles passes
/// as soon as the runtime is idle (the test's channel sends keep it busy until the
/// config change is in), not in a real second.
#[tokio::test(start_paused = true)]
async fn a_config_change_between_cycles_is_used_by_the_next_cycle() {
    let mut bench = Bench::new(&[REPO], "polling:\n  intervalSeconds: 1\n").await;
    bench.open_issue(REPO, "ann");
    let (config_tx, config_rx) =
        tokio::sync::watch::channel(std::sync::Arc::new(bench.config.clone()));
    let (cycled_tx, mut cycled) = tokio::sync::mpsc::unbounded_channel();
    let (stop, stop_rx) = tokio::sync::broadcast::channel(1);
    let fresh = loop_daemon::poller::Poller::new(
        bench.store.clone(),
        crate::poll_support::clients(&bench.sim),
        bench.stand_in.clone(),
        crate::poll_support::VERSION,
    );
    let mut poller = std::mem::replace(&mut bench.poller, fresh).with_observer(
        loop_daemon::poller::CycleObserver::new(move |report| {
            let _ = cycled_tx.send(report.items_seen);
        }),
    );
    let shutdown = loop_daemon::shutdown::Shutdown::new(stop_rx);
    let running = tokio::spawn(async move {
        loop_daemon::poller::run(&mut poller, config_rx, shutdown).await;
    });
    assert_eq!(cycled.recv().await, Some(1));
    let mut changed = bench.config.clone();
    changed.repositories.push("octo/other".parse().unwrap());
    bench.sim.create_repo("octo/other").unwrap();
    config_tx.send(std::sync::Arc::new(changed)).unwrap();
    assert_eq!(cycled.recv().await, Some(1), "the second cycle");
    stop.send(()).unwrap();
    running.await.unwrap();
    // The change's `config.reloaded` line is the config source's (`live_config`), not
    // the poller's: one line per change, whichever part of the process noticed it.
    assert!(bench.events("config.reloaded").is_empty());
    let cycles = bench.events("poll.cycle");
    assert_eq!(cycles[1].0["scopes_polled"], 2, "the new scope is listed");
}

#[tokio::test]
async fn a_full_sweep_overdue_in_the_poll_cache_runs_after_a_restart_and_costs_only_304s() {
    let mut bench = warm_bench().await;
    let path = bench.store.layout().poll_cache();
    for stamp in ["2000-01-01T00:00:00Z", "2999-01-01T00:00:00Z"] {
        let mut cache: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        cache["lastSweepAt"] = serde_json::json!(stamp);
        std::fs::write(&path, cache.to_string()).unwrap();
        bench.restart();
        bench.sim.clear_requests();
        bench.cycle().await;
        let log = bench.sim.requests();
        // Each listing, each issue's conversation, each pull request's three surfaces,
        // and the pull requests' linked issues asked again in one GraphQL request.
        assert_eq!(log.total(), 3 + 10 + 3 * 4 + 1, "{stamp} is due: {log}");
        assert_eq!(log.to_endpoint("POST /graphql"), 1, "{log}");
        assert_eq!(log.with_status(304), log.total() - 1, "nothing changed: {log}");
        bench.sim.clear_requests();
        bench.cycle().await;
        assert_eq!(bench.sim.requests().total(), 3, "the sweep is stamped: quiet again");
    }
}

/// Issue #16, item 2: GitHub answering the closing-references query with a GraphQL error
/// is warned about once; pull requests fall back to the linkage conventions and are asked
/// about again at the next full sweep, so a quiet cycle stays one 304 per repository.
#[tokio::test]
async fn a_failing_linkage_query_warns_once_and_quiet_cycles_stay_one_304_per_repository() {
    let repos = ["octo/a", "octo/b"];
    let mut bench = Bench::new(&repos, "").await;
    let issue = bench.open_issue("octo/a", "ann");
    let body = format!("Closes #{issue}");
    bench.sim.open_pull_request("octo/a", "ann", "PR", &body, "fix", &[LABEL]).unwrap();
    bench.sim.open_pull_request("octo/b", "ann", "PR", "", "other", &[LABEL]).unwrap();
    bench.sim.inject(loop_sim::Fault {
        kind: loop_sim::FaultKind::GraphqlError {
            message: "Field 'closingIssuesReferences' doesn't exist on type 'PullRequest'".into(),
        },
        times: u32::MAX,
        path_contains: Some("graphql".into()),
    });
    bench.cycle().await;
    for _ in 0..3 {
        bench.sim.clear_requests();
        let quiet = bench.cycle().await;
        let log = bench.sim.requests();
        assert_eq!((log.total(), log.with_status(304)), (2, 2), "{log}");
        assert_eq!((quiet.requests, quiet.not_modified), (2, 2));
    }
    let warned = bench.events("poll.linkage_fallback");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(bench.events("poll.provider_error").is_empty());

    // A full sweep asks once more, quietly.
    let path = bench.store.layout().poll_cache();
    let mut cache: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    cache["lastSweepAt"] = serde_json::json!("2000-01-01T00:00:00Z");
    std::fs::write(&path, cache.to_string()).unwrap();
    bench.restart();
    bench.sim.clear_requests();
    bench.cycle().await;
    assert_eq!(bench.sim.requests().to_endpoint("POST /graphql"), 1);
    bench.sim.clear_requests();
    bench.cycle().await;
    assert_eq!(bench.sim.requests().to_endpoint("POST /graphql"), 0, "not every cycle");
}

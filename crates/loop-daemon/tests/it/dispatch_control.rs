//! Control commands executed end to end, and what survives a restart.

use std::time::Duration;

use loop_core::record::{Control, EndpointStatus};
use loop_daemon::dispatcher::DeliveryStatus;

use crate::dispatch_lab::{Harness, Lab, OWNER};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_closes_the_session_like_a_merge_and_disarms_the_item() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.comment(number, OWNER, "the-loop stop");
    lab.settle().await;
    let command = lab.named("control.command").pop().expect("a command line");
    assert_eq!(
        (command["command"].as_str(), command["effect"].as_str()),
        (Some("stop"), Some("stopped"))
    );
    let record = lab.store().load_local_record(&lab.item(number)).expect("readable").expect("kept");
    assert_eq!(record.own_endpoint().expect("own").status, EndpointStatus::Closed);
    assert!(!lab.harness_alive(number), "the harness was ended");
    assert!(lab.tmux_session_exists(number), "the session is retained (keepSessionOnClose)");

    // Disarmed: a later comment spawns nothing.
    lab.comment(number, OWNER, "are you there?");
    lab.settle().await;
    assert_eq!(lab.refusals().last().map(String::as_str), Some("awaiting-start"));
    assert_eq!(lab.named("session.spawned").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_releases_the_local_resources_and_keeps_the_portable_record() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.comment(number, OWNER, "the-loop cleanup");
    lab.settle().await;
    let cleaned = lab.named("session.cleaned").pop().expect("a cleaned line");
    assert_eq!(cleaned["removed"], serde_json::json!(["tmux", "session"]), "{cleaned:#}");
    assert!(!lab.tmux_session_exists(number));
    assert!(lab.store().load_local_record(&lab.item(number)).expect("readable").is_none());
    let control = lab.store().read_section::<Control>(&lab.item(number)).expect("readable");
    assert_eq!(control.into_value().expect("kept").command.name(), "cleanup");

    // Retroactive: a cleanup with nothing left says so.
    lab.comment(number, OWNER, "the-loop cleanup");
    lab.settle().await;
    let command = lab.named("control.command").pop().expect("a command line");
    assert_eq!(command["effect"], "nothing-to-clean");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_on_a_paused_session_resumes_it_without_a_second_spawn() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.comment(number, OWNER, "the-loop pause");
    lab.comment(number, OWNER, "the-loop start");
    lab.comment(number, OWNER, "go on");
    lab.settle().await;
    let effects: Vec<String> = lab
        .named("control.command")
        .iter()
        .map(|c| c["effect"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(effects, ["paused", "resumed"]);
    assert_eq!(lab.named("session.spawned").len(), 1);
    assert!(lab.pasted().await.last().expect("pasted").contains("go on"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_with_nothing_paused_is_refused_and_does_not_arm() {
    let mut lab = Lab::start("").await;
    let number = lab.open_labelled_issue();
    lab.comment(number, OWNER, "the-loop resume");
    lab.comment(number, OWNER, "anything");
    lab.settle().await;
    let rejected = lab.named("control.rejected").pop().expect("a rejection");
    assert_eq!(rejected["reason"], "nothing-to-resume");
    assert_eq!(lab.refusals().last().map(String::as_str), Some("awaiting-start"));
    assert!(lab.named("session.spawned").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_replayed_after_a_kill_before_its_settle_is_consumed_not_executed_again() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.comment(number, OWNER, "the-loop stop");
    lab.settle().await;
    let stop = lab.last_delivery("issue_comment");
    let key = lab.key_of_last("control.command");
    let control = lab.store().read_section::<Control>(&lab.item(number)).expect("readable");
    assert_eq!(control.into_value().expect("recorded").delivery_id.as_deref(), Some(&*key));

    // Killed after the stop took effect, before its key was settled: the next start
    // releases the key and GitHub (or the poller) delivers the comment again.
    lab.restart_with_in_flight(&[&key]).await;
    assert_eq!(lab.named("dispatch.abandoned").len(), 1);
    lab.redeliver(&stop).await;

    assert_eq!(lab.named("control.command").len(), 1, "{:#?}", lab.named("control.command"));
    assert_eq!(lab.named("session.closed").len(), 1, "one effect");
    assert_eq!(lab.refusals().last().map(String::as_str), Some("control-consumed"));
    let status = lab.dispatcher.delivery_status(&key, &[lab.item(number)]).await;
    assert_eq!(status, DeliveryStatus::Settled("control-consumed".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_replayed_after_a_kill_before_its_settle_spawns_no_second_session() {
    let mut lab = Lab::start("").await;
    lab.started_issue().await;
    // The last conversation comment is the announcement; the start came before it.
    let start = lab.sim.deliveries().into_iter().find(|d| d.body.contains("the-loop start"));
    let start = start.expect("the start's delivery");
    let key = lab.key_of_last("session.spawned");

    lab.restart_with_in_flight(&[&key]).await;
    lab.redeliver(&start).await;

    assert_eq!(lab.named("session.spawned").len(), 1);
    assert_eq!(lab.launches().len(), 1, "one harness launched");
    assert!(lab.named("control.command").is_empty(), "{:#?}", lab.named("control.command"));
    assert_eq!(lab.refusals().last().map(String::as_str), Some("control-consumed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_pause_whose_effect_never_happened_is_carried_out_once_on_replay() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    // Killed between recording the pause (the commit point) and pausing the session: the
    // record names the pause comment's delivery, the session is still active. The
    // simulator numbers conversation comments in sequence, so the next one is known.
    let last = lab.comment(number, OWNER, "before the pause");
    lab.settle().await;
    let node = loop_sim::world::node_id("IC", last + 1);
    let item = lab.item(number);
    let mut control =
        lab.store().read_section::<Control>(&item).expect("readable").into_value().expect("start");
    control.command = loop_core::control::Command::Pause;
    control.delivery_id = Some(format!("issue_comment:{node}:created"));
    lab.store().write_section(&item, Some(&control)).expect("written");
    assert_eq!(lab.comment(number, OWNER, "the-loop pause"), last + 1);
    lab.settle().await;

    let commands = lab.named("control.command");
    assert_eq!(commands.len(), 1, "{commands:#?}");
    assert_eq!(commands[0]["effect"], "paused");
    let record = lab.store().load_local_record(&item).expect("readable").expect("kept");
    assert_eq!(record.own_endpoint().expect("own").status, EndpointStatus::Paused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_start_survives_a_restart_and_a_redelivery_is_not_pasted_twice() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.comment(number, OWNER, "first instruction");
    lab.settle().await;
    let instruction = lab.last_delivery("issue_comment");
    assert_eq!(lab.pasted().await.len(), 2);

    lab.restart().await;
    lab.redeliver(&instruction).await;
    assert_eq!(lab.pasted().await.len(), 2, "the same delivery is not pasted twice");
    assert!(
        lab.refusals().iter().any(|r| r == "duplicate-delivery" || r == "already-processed"),
        "{:?}",
        lab.refusals()
    );

    // The session was started before the restart: later comments still reach it.
    lab.comment(number, OWNER, "after the restart");
    lab.settle().await;
    assert!(lab.pasted().await.last().expect("pasted").contains("after the restart"));
    assert_eq!(lab.launches().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_recorded_before_a_restart_spawns_on_a_later_event_without_a_new_comment() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    // The session goes away without disarming the item (a crash, a manual kill).
    let target = lab.item(number).tmux_session();
    lab.tmux(&["kill-session", "-t", &target]);
    lab.store().delete_local_record(&lab.item(number)).expect("deleted");
    lab.restart().await;
    lab.comment(number, OWNER, "picking this up again");
    lab.settle().await;
    assert_eq!(lab.named("session.spawned").len(), 2, "{:#?}", lab.refusals());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_pane_is_respawned_with_the_recorded_conversation_on_the_next_event() {
    let mut lab = Lab::start("  tmux:\n    resumeProbeSeconds: 0.2\n").await;
    let number = lab.started_issue().await;
    let conversation = lab.launches()[0]["argv"]
        .as_array()
        .and_then(|argv| argv.last())
        .and_then(|id| id.as_str())
        .expect("the session id")
        .to_owned();
    lab.kill_harness(number).await;
    lab.comment(number, OWNER, "are you back?");
    lab.settle().await;
    let respawned = lab.named("session.respawned").pop().expect("a respawn");
    assert_eq!(respawned["resumed"], true, "{respawned:#}");
    let launches = lab.launches();
    assert_eq!(launches.len(), 2);
    let argv: Vec<&str> =
        launches[1]["argv"].as_array().expect("argv").iter().filter_map(|a| a.as_str()).collect();
    assert!(argv.windows(2).any(|w| w == ["--resume", conversation.as_str()]), "{argv:?}");
    assert!(lab.pasted().await.last().expect("pasted").contains("are you back?"));
    assert!(lab.announcements(number).len() == 1, "no second announcement");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_quick_events_for_an_unstarted_item_make_one_spawn_and_one_delivery() {
    let mut lab = Lab::start("").await;
    let number = lab.open_labelled_issue();
    lab.comment(number, OWNER, "the-loop start");
    lab.comment(number, OWNER, "and right away: mind the tests");
    lab.settle().await;
    assert_eq!(lab.named("session.spawned").len(), 1);
    assert_eq!(lab.launches().len(), 1);
    let pasted = lab.pasted().await;
    assert_eq!(pasted.len(), 2, "{pasted:#?}");
    assert!(pasted[1].contains("mind the tests"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatch_past_its_timeout_fails_releases_the_key_and_reacts_with_an_error() {
    let mut lab = Lab::start_with("  dispatchTimeoutSeconds: 1\n", Harness::Stuck).await;
    let number = lab.open_labelled_issue();
    let start = lab.comment(number, OWNER, "the-loop start");
    lab.settle().await;
    let failed = lab.named("dispatch.failed").pop().expect("a failure");
    assert!(failed["error"].as_str().is_some_and(|e| e.contains("within 1 s")), "{failed:#}");
    let key = failed["delivery_id"].as_str().expect("a key").to_owned();
    let status = lab.dispatcher.delivery_status(&key, &[lab.item(number)]).await;
    assert_eq!(status, DeliveryStatus::Unhandled, "released: a redelivery may retry");
    assert_eq!(lab.reactions_on_comment(number, start), ["eyes", "confused"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_abandons_and_releases_only_what_is_still_queued() {
    let lab = Lab::start_with("", Harness::Stuck).await;
    let number = lab.open_labelled_issue();
    lab.comment(number, OWNER, "the-loop start");
    lab.comment(number, OWNER, "queued behind the spawn");
    let queued = lab.wait_for_lines("dispatch.queued", 1).await;
    let waiting = lab.wait_for_lines("dispatch.awaiting_spawn", 1).await;
    let in_flight = queued[0]["delivery_id"].as_str().expect("a key").to_owned();
    let behind = waiting[0]["delivery_id"].as_str().expect("a key").to_owned();
    let abandoned = lab.dispatcher.shutdown(Duration::from_millis(300)).await;
    assert_eq!(abandoned, std::slice::from_ref(&behind), "the dispatch in flight is not abandoned");
    let line = lab.named("dispatch.abandoned").pop().expect("reported");
    assert_eq!(line["count"], 1);
    let item = lab.item(number);
    let status = lab.dispatcher.delivery_status(&behind, std::slice::from_ref(&item)).await;
    assert_eq!(status, DeliveryStatus::Unhandled);
    let status = lab.dispatcher.delivery_status(&in_flight, &[item]).await;
    assert_eq!(status, DeliveryStatus::InFlight);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatches_across_sessions_wait_for_a_permit_when_the_bound_is_reached() {
    let extra = "  maxConcurrentDispatches: 1\n  dispatchTimeoutSeconds: 1\n";
    let mut lab = Lab::start_with(extra, Harness::Stuck).await;
    let first = lab.open_labelled_issue();
    let second = lab.open_labelled_issue();
    lab.comment(first, OWNER, "the-loop start");
    lab.comment(second, OWNER, "the-loop start");
    lab.settle().await;
    let events = lab.events();
    let position = |name: &str, item: u64| {
        let item = lab.item(item).to_string();
        events
            .iter()
            .position(|e| e["event"] == name && e["work_item"] == item)
            .unwrap_or_else(|| panic!("a `{name}` line for {item}"))
    };
    // The second work item's dispatch (its started reaction) begins only once the
    // first one has given its permit back.
    let first_done = position("dispatch.failed", first);
    let second_started = events
        .iter()
        .position(|e| {
            e["event"] == "reaction.added"
                && e["state"] == "started"
                && e["work_item"] == lab.item(second).to_string()
        })
        .expect("the second dispatch started");
    assert!(first_done < second_started, "{events:#?}");
    assert!(position("dispatch.failed", second) > first_done);
}

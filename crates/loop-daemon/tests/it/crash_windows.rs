//! The crash windows the binary's kill test (`the-loop/tests/it/kill.rs`) found or that
//! were found by reading, reproduced deterministically over the dispatcher's lab: the
//! state a `kill -9` leaves is written by hand (or a restart cuts the work in hand off)
//! between a stop and a start, so a fix can be checked in seconds and without luck.
//!
//! They pin how the windows are closed: a key left in flight is checked against the
//! harness's own record before it is pasted again (docs/dispatcher.md, "In doubt"); a
//! spawn's intent is written before its harness starts, so a later spawn replaces a
//! harness a cut-short spawn left — and only such a one (docs/sessions.md, "A spawn cut
//! short"); a webhook's inbox mark waits for the jobs it queued, so one cut off is
//! replayed (docs/receiver.md, "Processed marks"); a new session's announcement is owed
//! from before its record is written, so a start after a kill between the two posts it
//! — once (docs/sessions.md, "An announcement owed").

use loop_sessions::registry::{OwedAnnouncement, Registry};

use loop_sim::test_support::{read_lines, stand_in};

use crate::dispatch_lab::{Harness, Lab, OWNER};

/// Delivers `text` on a started item, then puts the state back as a `kill -9` right
/// after the paste leaves it: the endpoint's `recentDeliveries` stamp gone, the key in
/// flight. Returns the comment's webhook, for its redelivery.
async fn kill_after_the_paste_of(lab: &mut Lab, text: &str) -> (String, loop_sim::Delivery) {
    let number = lab.started_issue().await;
    lab.comment(number, OWNER, text);
    lab.settle().await;
    let key = lab.key_of_last("dispatch.succeeded");
    let record = lab.layout().root().join(format!("local/{}.json", lab.item(number).slug()));
    let before = std::fs::read_to_string(&record).expect("the session record");
    let mut value: serde_json::Value = serde_json::from_str(&before).expect("a JSON record");
    let mut stamps = 0;
    for endpoint in value["endpoints"].as_object_mut().expect("endpoints").values_mut() {
        let recent = endpoint["recentDeliveries"].as_array_mut().expect("recentDeliveries");
        stamps += recent.len();
        recent.retain(|seen| seen != key.as_str());
        stamps -= recent.len();
    }
    assert_eq!(stamps, 1, "the delivery was stamped once: {before}");
    std::fs::write(&record, value.to_string()).expect("the record as the dead process left it");
    lab.restart_with_in_flight(&[&key]).await;
    let delivery = lab
        .sim
        .deliveries()
        .into_iter()
        .find(|d| d.body.contains(text))
        .expect("the comment's delivery");
    (key, delivery)
}

fn times(pasted: &[String], text: &str) -> usize {
    pasted.iter().filter(|t| t.contains(text)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_comment_pasted_but_killed_before_its_record_is_not_pasted_again_on_redelivery() {
    let mut lab = Lab::start("").await;
    let (key, delivery) = kill_after_the_paste_of(&mut lab, "pasted before the kill").await;

    // The restart released the key; GitHub's redelivery (or the poller) brings it again,
    // and the harness's own record says it arrived.
    lab.redeliver(&delivery).await;
    let pasted = lab.pasted().await;
    assert_eq!(times(&pasted, "pasted before the kill"), 1, "{pasted:#?}");
    let recovered = lab.named("dispatch.recovered");
    assert_eq!(recovered.len(), 1, "{recovered:#?}");
    assert_eq!(recovered[0]["delivery_id"], key.as_str());
    assert!(lab.named("dispatch.in_doubt").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_in_doubt_stays_in_doubt_across_a_second_kill_before_it_was_checked() {
    let mut lab = Lab::start("").await;
    let (key, delivery) = kill_after_the_paste_of(&mut lab, "pasted before two kills").await;
    // The process that found the key in flight dies too, before the key came back.
    lab.restart().await;

    lab.redeliver(&delivery).await;
    let pasted = lab.pasted().await;
    assert_eq!(times(&pasted, "pasted before two kills"), 1, "{pasted:#?}");
    let recovered = lab.named("dispatch.recovered");
    assert_eq!(recovered.len(), 1, "{recovered:#?}");
    assert_eq!(recovered[0]["delivery_id"], key.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_left_in_flight_that_never_reached_the_harness_is_delivered_on_its_return() {
    let mut lab = Lab::start("").await;
    let text = "taken in, never pasted";
    let (key, delivery) = kill_after_the_paste_of(&mut lab, text).await;
    // Killed before the paste instead: the harness never received it.
    let messages = lab.dir.path().join("messages.jsonl");
    let lines: Vec<String> = read_lines(&messages)
        .into_iter()
        .map(|mut line| {
            if line["text"].as_str().is_some_and(|t| t.contains(text)) {
                line["text"] = "(something else)".into();
            }
            line.to_string()
        })
        .collect();
    std::fs::write(&messages, lines.join("\n") + "\n").expect("the harness's record");

    lab.redeliver(&delivery).await;
    assert_eq!(times(&lab.pasted().await, text), 1);
    let in_doubt = lab.named("dispatch.in_doubt");
    assert_eq!(in_doubt.len(), 1, "{in_doubt:#?}");
    assert_eq!(
        (&in_doubt[0]["delivery_id"], &in_doubt[0]["received"]),
        (&key.into(), &false.into())
    );
    assert!(lab.named("dispatch.recovered").is_empty());
}

/// A live harness under the item's tmux name, as a spawn leaves it before its record.
fn start_a_harness_under_the_items_name(lab: &Lab, number: u64) {
    let messages = lab.dir.path().join("messages.jsonl").display().to_string();
    let target = lab.item(number).tmux_session();
    let binary = stand_in().display().to_string();
    let started = lab.tmux(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        &target,
        &binary,
        "--record",
        &messages,
    ]);
    assert!(started.status.success(), "{started:?}");
    assert!(lab.harness_alive(number));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_killed_after_its_harness_started_does_not_wedge_the_work_item() {
    let mut lab = Lab::start("").await;
    let number = lab.open_labelled_issue();
    // Killed after `spawn_fresh` started the harness, before the session record was
    // written: the spawn's intent, a live harness under the item's tmux name, no record.
    let target = lab.item(number).tmux_session();
    let registry = Registry::new(lab.store());
    assert!(!registry.begin_spawn(&target).expect("the intent is written"));
    start_a_harness_under_the_items_name(&lab, number);

    lab.comment(number, OWNER, "the-loop start");
    lab.settle().await;
    lab.comment(number, OWNER, "after the crash");
    lab.settle().await;

    let refused = lab.named("session.spawn_failed");
    assert!(refused.is_empty(), "{refused:#?}");
    let pasted = lab.pasted().await;
    assert_eq!(pasted.iter().filter(|t| t.contains("after the crash")).count(), 1, "{pasted:#?}");
    assert_eq!(lab.announcements(number).len(), 1);
    let recovered = lab.named("session.spawn_recovered");
    assert_eq!(recovered.len(), 1, "{recovered:#?}");
    assert_eq!(recovered[0]["tmux_target"], target.as_str());
    assert!(!registry.begin_spawn(&target).expect("readable"), "the intent was withdrawn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tmux_session_no_spawn_of_ours_started_is_never_spawned_over() {
    let mut lab = Lab::start("").await;
    let number = lab.open_labelled_issue();
    start_a_harness_under_the_items_name(&lab, number);

    lab.comment(number, OWNER, "the-loop start");
    lab.settle().await;

    let refused = lab.named("session.spawn_failed");
    assert_eq!(refused.len(), 1, "{refused:#?}");
    assert!(refused[0]["error"].as_str().is_some_and(|e| e.contains("not spawning over it")));
    assert!(lab.named("session.spawn_recovered").is_empty());
    assert!(lab.harness_alive(number), "someone else's harness is left running");
    lab.comment(number, OWNER, "the-loop start");
    lab.settle().await;
    assert_eq!(lab.named("session.spawn_failed").len(), 2, "refused again, not replaced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_whose_job_was_cut_short_is_replayed_from_the_inbox_at_the_next_start() {
    let mut lab = Lab::start_with("", Harness::Gated).await;
    let number = lab.open_labelled_issue();
    // The start's spawn is in hand (its harness waits for the gate) when the process
    // ends: the delivery was handed to the dispatcher's queue, nothing was pasted.
    lab.comment(number, OWNER, "the-loop start");
    lab.wait_for_lines("dispatch.queued", 1).await;
    let abandoned = lab.restart_cut_short(std::time::Duration::from_millis(200)).await;
    assert!(abandoned.is_empty(), "the spawn was running, not queued: {abandoned:?}");
    assert!(lab.named("session.spawned").is_empty());

    // Its inbox entry was not marked processed: the next start replays it.
    lab.open_gate();
    lab.wait_for_lines("session.spawned", 1).await;
    lab.settle().await;
    assert_eq!(lab.named("inbox.replaying").len(), 1);
    assert_eq!(lab.announcements(number).len(), 1);
    assert_eq!(lab.named("session.spawn_recovered").len(), 1, "the cut-short spawn replaced");
}

/// The announcement a `kill -9` between the session record and the announcement leaves
/// owed for item `number`'s session, recorded at `owed_at`.
fn owe_the_announcement(lab: &Lab, number: u64, owed_at: jiff::Timestamp) -> Registry {
    let registry = Registry::new(lab.store());
    let owed = OwedAnnouncement {
        work_item: lab.item(number),
        owner: lab.item(number),
        harness: "stand-in".into(),
        tmux_target: lab.item(number).tmux_session(),
        owed_at,
    };
    registry.owe_announcement(&owed).expect("the debt is written");
    registry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_announcement_a_kill_cut_off_is_announced_at_the_next_start() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    // The session's own announcement is older than the debt: the announcement of a
    // previous session under the same tmux name, which does not count.
    let later = jiff::Timestamp::now() + jiff::SignedDuration::from_mins(10);
    let registry = owe_the_announcement(&lab, number, later);

    lab.dispatcher.announce_owed().await;
    lab.settle().await;
    let announcements = lab.announcements(number);
    assert_eq!(announcements.len(), 2, "{announcements:#?}");
    assert!(announcements[1].contains(&lab.item(number).tmux_session()));
    let announced = lab.named("session.announced");
    assert_eq!(announced.last().expect("a line")["recovered"], true, "{announced:#?}");
    assert_eq!(registry.owed_announcements().expect("readable"), [], "settled");
    lab.dispatcher.announce_owed().await;
    assert_eq!(lab.announcements(number).len(), 2, "once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owed_announcement_already_on_the_work_item_or_of_no_session_is_not_posted() {
    let mut lab = Lab::start("").await;
    // Killed after the announcement was posted, before its debt was settled.
    let number = lab.started_issue().await;
    let registry = owe_the_announcement(&lab, number, jiff::Timestamp::now());
    // Killed before the record was written: no session to announce.
    let unspawned = lab.open_labelled_issue();
    owe_the_announcement(&lab, unspawned, jiff::Timestamp::now());

    lab.dispatcher.announce_owed().await;
    lab.settle().await;
    assert_eq!(lab.announcements(number).len(), 1, "not a second time");
    assert_eq!(lab.announcements(unspawned), Vec::<String>::new());
    assert_eq!(registry.owed_announcements().expect("readable"), [], "both settled");
}

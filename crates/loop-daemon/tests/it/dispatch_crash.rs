//! Control commands across a crash (docs/dispatcher.md, "Control commands across a
//! crash"): a `kill -9` between recording a command and settling its delivery is
//! simulated the way the other replay tests do — the record written as the dead process
//! left it, or the key put back in flight between a stop and a start — and the command
//! must be executed at most once and never lost.

use loop_core::record::{Collaborators, Control};
use loop_daemon::dispatcher::DeliveryStatus;

use crate::dispatch_lab::{Lab, OWNER};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanup_recorded_but_killed_before_its_effect_is_completed_on_replay() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    // Killed between recording the cleanup (the commit point) and cleaning: the record
    // names the cleanup comment's delivery, the session and its record are still there.
    // The simulator numbers conversation comments in sequence, so the next one is known.
    let last = lab.comment(number, OWNER, "before the cleanup");
    lab.settle().await;
    let node = loop_sim::world::node_id("IC", last + 1);
    let item = lab.item(number);
    let mut control =
        lab.store().read_section::<Control>(&item).expect("readable").into_value().expect("start");
    control.command = loop_core::control::Command::Cleanup;
    control.delivery_id = Some(format!("issue_comment:{node}:created"));
    lab.store().write_section(&item, Some(&control)).expect("written");
    assert_eq!(lab.comment(number, OWNER, "the-loop cleanup"), last + 1);
    lab.settle().await;

    let commands = lab.named("control.command");
    assert_eq!(commands.len(), 1, "{commands:#?}");
    assert_eq!(commands[0]["effect"], "cleaned");
    assert_eq!(lab.named("session.cleaned").len(), 1);
    assert!(!lab.tmux_session_exists(number));
    assert!(lab.store().load_local_record(&item).expect("readable").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleanup_replayed_after_its_effect_is_consumed_not_run_again() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    lab.comment(number, OWNER, "the-loop cleanup");
    lab.settle().await;
    let cleanup = lab.last_delivery("issue_comment");
    let key = lab.key_of_last("control.command");

    lab.restart_with_in_flight(&[&key]).await;
    lab.redeliver(&cleanup).await;

    assert_eq!(lab.named("control.command").len(), 1);
    assert_eq!(lab.named("session.cleaned").len(), 1, "cleaned once");
    assert_eq!(lab.refusals().last().map(String::as_str), Some("control-consumed"));
    let status = lab.dispatcher.delivery_status(&key, &[lab.item(number)]).await;
    assert_eq!(status, DeliveryStatus::Settled("control-consumed".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_replayed_after_a_kill_before_its_settle_is_recognised_and_not_logged_again() {
    let mut lab = Lab::start("").await;
    let number = lab.open_labelled_issue();
    lab.comment(number, OWNER, "the-loop add-collaborator @dana");
    lab.settle().await;
    let grant = lab.last_delivery("issue_comment");
    let key = lab.key_of_last("control.command");

    lab.restart_with_in_flight(&[&key]).await;
    lab.redeliver(&grant).await;

    let commands = lab.named("control.command");
    assert_eq!(commands.len(), 1, "{commands:#?}");
    assert_eq!(commands[0]["effect"], "granted");
    let consumed = lab.named("dispatch.dropped").pop().expect("a drop");
    assert_eq!(consumed["reason"], "control-consumed");
    assert_eq!(consumed["command"], "add-collaborator");
    let status = lab.dispatcher.delivery_status(&key, &[lab.item(number)]).await;
    assert_eq!(status, DeliveryStatus::Settled("control-consumed".into()));
    let roster = lab.store().read_section::<Collaborators>(&lab.item(number)).expect("readable");
    assert_eq!(roster.into_value().expect("a roster").users.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_replayed_after_a_kill_before_its_settle_is_recognised_and_not_logged_again() {
    let mut lab = Lab::start("").await;
    let number = lab.open_labelled_issue();
    lab.comment(number, OWNER, "the-loop add-collaborator @dana");
    lab.comment(number, OWNER, "the-loop remove-collaborator @dana");
    lab.settle().await;
    let revoke = lab.last_delivery("issue_comment");
    let key = lab.key_of_last("control.command");
    let roster = lab.store().read_section::<Collaborators>(&lab.item(number)).expect("readable");
    assert_eq!(roster.into_value().expect("a roster").delivery_id.as_deref(), Some(&*key));

    lab.restart_with_in_flight(&[&key]).await;
    lab.redeliver(&revoke).await;

    let effects: Vec<_> =
        lab.named("control.command").iter().map(|c| c["effect"].clone()).collect();
    assert_eq!(effects, ["granted", "revoked"], "no second line for the revoke");
    assert_eq!(lab.refusals().last().map(String::as_str), Some("control-consumed"));
    let status = lab.dispatcher.delivery_status(&key, &[lab.item(number)]).await;
    assert_eq!(status, DeliveryStatus::Settled("control-consumed".into()));
}

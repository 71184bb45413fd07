//! The poller end to end: loop-sim as GitHub, the real dispatcher behind the poller's
//! seam, a private tmux server and the stand-in harness (the dispatcher's lab). Seed 004
//! through a real session, and hybrid mode — webhook and poller together deliver each
//! comment once.

use loop_core::config::Config;
use loop_daemon::config_source::ConfigSource;
use loop_daemon::dispatcher::Dispatcher;
use loop_daemon::poller::{CycleReport, Poller};
use loop_daemon::shutdown::Shutdown;

use crate::dispatch_lab::{Lab, OWNER, REPO};
use loop_sim::test_support::PATIENCE;

/// A poller over the lab's state and dispatcher, polling the lab's repository.
fn poller(lab: &Lab) -> (Poller<Dispatcher>, Config) {
    let (source, _) = ConfigSource::open(lab.config_path()).expect("the lab's config");
    let mut config = Config::clone(source.current());
    config.repositories = vec![REPO.parse().expect("a repository")];
    let clients = crate::poll_support::clients(&lab.sim);
    (Poller::new(lab.store(), clients, lab.dispatcher.clone(), "e2e"), config)
}

/// One cycle, then waits until the dispatcher has carried out what it was handed.
async fn cycle(lab: &Lab, poller: &mut Poller<Dispatcher>, config: &Config) -> CycleReport {
    let (stop, signal) = tokio::sync::broadcast::channel(1);
    let report = poller.cycle(config, &mut Shutdown::new(signal)).await;
    drop(stop);
    tokio::time::timeout(PATIENCE, lab.dispatcher.idle()).await.expect("the dispatcher idles");
    report
}

#[tokio::test]
async fn a_start_posted_before_first_sight_spawns_one_session_and_later_comments_reach_it() {
    let lab = Lab::start("").await;
    lab.sim.set_webhook(None);
    let (mut poller, config) = poller(&lab);
    let n = lab.open_labelled_issue();
    lab.comment(n, OWNER, "the-loop start");
    cycle(&lab, &mut poller, &config).await;
    assert_eq!(lab.named("session.spawned").len(), 1, "{:#?}", lab.events());
    lab.comment(n, OWNER, "please add a test");
    let report = cycle(&lab, &mut poller, &config).await;
    assert_eq!(report.comments_forwarded, 1);
    cycle(&lab, &mut poller, &config).await;
    let pasted = lab.pasted().await;
    assert_eq!(pasted.iter().filter(|t| t.contains("please add a test")).count(), 1, "{pasted:#?}");
    assert_eq!(lab.named("session.spawned").len(), 1, "one session");
}

#[tokio::test]
async fn in_hybrid_mode_a_comment_the_webhook_delivered_is_not_delivered_again_by_polling() {
    let mut lab = Lab::start("").await;
    let (mut poller, config) = poller(&lab);
    let n = lab.started_issue().await;
    cycle(&lab, &mut poller, &config).await;
    lab.comment(n, OWNER, "pushed and polled");
    lab.settle().await;
    let report = cycle(&lab, &mut poller, &config).await;
    assert_eq!(report.comments_forwarded, 0, "{:#?}", lab.events());
    let pasted = lab.pasted().await;
    assert_eq!(pasted.iter().filter(|t| t.contains("pushed and polled")).count(), 1, "{pasted:#?}");
}

/// Found by the soak: a webhook started the item before the poller first listed it, then
/// the webhook lost comments (the inbox full, 503). The poller's first sight must not
/// baseline them away: the session was there for them.
#[tokio::test]
async fn comments_the_webhook_lost_after_it_started_the_session_are_polled_at_first_sight() {
    let mut lab = Lab::start("").await;
    let (mut poller, config) = poller(&lab);
    let n = lab.open_labelled_issue();
    lab.comment(n, OWNER, "an old remark, before any session");
    lab.comment(n, OWNER, "the-loop start");
    lab.settle().await;
    assert_eq!(lab.named("session.spawned").len(), 1, "{:#?}", lab.events());
    lab.sim.set_webhook(None);
    for k in 0..3 {
        lab.comment(n, OWNER, &format!("lost by the webhook {k}"));
    }
    let report = cycle(&lab, &mut poller, &config).await;
    assert_eq!(report.comments_forwarded, 3, "{:#?}", lab.events());
    let pasted = lab.pasted().await;
    for k in 0..3 {
        let text = format!("lost by the webhook {k}");
        assert_eq!(pasted.iter().filter(|t| t.contains(&text)).count(), 1, "{pasted:#?}");
    }
    assert!(!pasted.iter().any(|t| t.contains("an old remark")), "{pasted:#?}");
}

#[tokio::test]
async fn a_polled_stop_killed_before_its_settle_is_not_executed_again_after_a_restart() {
    let mut lab = Lab::start("").await;
    lab.sim.set_webhook(None);
    let (mut poller, config) = poller(&lab);
    let n = lab.open_labelled_issue();
    lab.comment(n, OWNER, "the-loop start");
    cycle(&lab, &mut poller, &config).await;
    lab.comment(n, OWNER, "the-loop stop");
    cycle(&lab, &mut poller, &config).await;
    assert_eq!(lab.named("control.command").len(), 1, "{:#?}", lab.events());
    let key = lab.key_of_last("control.command");

    // Killed after the stop took effect, before the dispatcher settled the key and
    // before the poller wrote its ledger: the comment is unseen, the key in flight.
    let item = lab.item(n);
    let mut ledger = lab
        .store()
        .read_section::<loop_core::record::PollLedger>(&item)
        .expect("readable")
        .into_value()
        .expect("a ledger");
    let stop = ledger.comments.seen_comments.pop().expect("the stop was resolved");
    lab.store().write_section(&item, Some(&ledger)).expect("written");
    lab.restart_with_in_flight(&[&key]).await;
    let (mut poller, config) = self::poller(&lab);
    cycle(&lab, &mut poller, &config).await;

    assert_eq!(lab.named("control.command").len(), 1, "{:#?}", lab.named("control.command"));
    assert_eq!(lab.named("session.closed").len(), 1, "one effect");
    assert_eq!(lab.refusals().last().map(String::as_str), Some("control-consumed"));
    let ledger = lab.store().read_section::<loop_core::record::PollLedger>(&item);
    let ledger = ledger.expect("readable").into_value().expect("a ledger");
    assert!(ledger.comments.seen_comments.contains(&stop), "resolved, not retried");
}

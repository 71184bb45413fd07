//! The poll ingress through the dispatcher: a polled event is judged and handled by the
//! same pipeline as a webhook, and the poller reads back what became of it.

use loop_core::event::Event;
use loop_daemon::dispatcher::DeliveryStatus;
use loop_daemon::poller::seam::{Dispatched, Pipeline};

use crate::dispatch_lab::{Lab, OWNER, REPO, STRANGER};

/// An `issue_comment` event as the poller synthesizes it.
fn polled_comment(number: u64, id: u64, author: &str, body: &str) -> Event {
    Event::from_webhook(
        "issue_comment",
        &serde_json::json!({
            "action": "created",
            "repository": {"full_name": REPO, "html_url": format!("https://github.com/{REPO}")},
            "issue": {"number": number, "state": "open", "labels": [{"name": crate::dispatch_lab::LABEL}],
                      "html_url": format!("https://github.com/{REPO}/issues/{number}")},
            "comment": {"id": id, "node_id": format!("IC_poll{id}"), "body": body,
                        "user": {"login": author},
                        "html_url": format!("https://github.com/{REPO}/issues/{number}#issuecomment-{id}")},
            "sender": {"login": author},
        }),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polled_event_takes_the_one_pipeline_and_its_status_reads_back() {
    let lab = Lab::start("").await;
    lab.sim.set_webhook(None);
    let number = lab.open_labelled_issue();
    let item = lab.item(number);

    let early = polled_comment(number, 501, OWNER, "early words");
    assert_eq!(lab.dispatcher.dispatch(early).await, Dispatched::Settled("awaiting-start".into()));

    let stranger = polled_comment(number, 502, STRANGER, "the-loop start");
    assert_eq!(
        lab.dispatcher.dispatch(stranger).await,
        Dispatched::Settled("unauthorized-actor".into())
    );

    let start = polled_comment(number, 503, OWNER, "the-loop start");
    let key = start.dedup_key().expect("a comment has a key").as_str().to_owned();
    assert_eq!(lab.dispatcher.dispatch(start.clone()).await, Dispatched::Enqueued);
    lab.dispatcher.idle().await;
    assert_eq!(lab.named("session.spawned").len(), 1);
    assert_eq!(Pipeline::status(&lab.dispatcher, &key, &[item]).await, DeliveryStatus::Done);

    // The same comment polled again is a duplicate, never a second spawn.
    assert_eq!(lab.dispatcher.dispatch(start).await, Dispatched::Enqueued);
    lab.dispatcher.idle().await;
    assert_eq!(lab.named("session.spawned").len(), 1);
    assert!(lab.refusals().contains(&"duplicate-delivery".to_owned()));

    // Counted once each, the judging's drop as the webhook's would be.
    let text = lab.metrics.render();
    for counted in [
        "{outcome=\"dropped\",reason=\"unauthorized-actor\"} 1\n",
        "{outcome=\"refused\",reason=\"awaiting-start\"} 1\n",
        "{outcome=\"done\",reason=\"spawned\"} 1\n",
        "{outcome=\"duplicate\",reason=\"duplicate-delivery\"} 1\n",
    ] {
        assert!(text.contains(counted), "{counted} in {text}");
    }
}

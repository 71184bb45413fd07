//! Durable acknowledgement: a 202 means the delivery is in the journal; what was not
//! processed is replayed at the next start, exactly once.

use crate::common::{Running, SECRET, Site, issue_comment, pending_in};

#[tokio::test]
async fn a_held_delivery_is_replayed_once_at_the_next_start_and_never_again() {
    let site = Site::new("");
    let held = site.receiver(Some(SECRET)).unwrap().hold_processing(true);
    let running = Running::start(held).await;
    let body = issue_comment("octo/app", 7, "octocat", "hi");
    assert_eq!(running.deliver("issue_comment", Some("r-1"), &body).await.status, 202);
    assert_eq!(pending_in(&site.inbox_dir()), 1, "journalled before the 202");
    running.stop().await;
    assert!(site.events_named("webhook.received").is_empty(), "nothing processed while held");

    let receiver = site.receiver(Some(SECRET)).unwrap();
    assert_eq!(receiver.backlog(), 1);
    let mut running = Running::start(receiver).await;
    let judged = running.next_judged().await;
    assert_eq!(judged.delivery.delivery_id.as_deref(), Some("r-1"));
    running.stop().await;
    assert_eq!(pending_in(&site.inbox_dir()), 0, "marked processed");

    let receiver = site.receiver(Some(SECRET)).unwrap();
    assert_eq!(receiver.backlog(), 0, "never replayed twice");
    let mut running = Running::start(receiver).await;
    running.deliver("issue_comment", Some("r-2"), &body).await;
    assert_eq!(running.next_judged().await.delivery.delivery_id.as_deref(), Some("r-2"));
    running.stop().await;
    let received: Vec<_> = site
        .events_named("webhook.received")
        .into_iter()
        .map(|e| e["delivery_id"].clone())
        .collect();
    assert_eq!(received, ["r-1", "r-2"]);
}

#[tokio::test]
async fn many_concurrent_deliveries_are_all_acknowledged_and_each_judged_once() {
    let site = Site::new("");
    let mut running = Running::start(site.receiver(Some(SECRET)).unwrap()).await;
    let body = issue_comment("octo/app", 7, "octocat", "hi");
    // 8 clients, 75 deliveries each: concurrent enough that syncs cover several.
    let mut clients = Vec::new();
    for client in 0..8 {
        let addr = running.addr;
        let body = body.clone();
        clients.push(tokio::spawn(async move {
            let signature = loop_sim::webhook::sign(SECRET.as_bytes(), body.as_bytes());
            let mut statuses = Vec::new();
            for n in 0..75 {
                let id = format!("c-{client}-{n}");
                let headers = [
                    ("X-GitHub-Event", "issue_comment"),
                    ("X-GitHub-Delivery", id.as_str()),
                    ("X-Hub-Signature-256", signature.as_str()),
                ];
                let answer =
                    crate::common::request(addr, "POST", "/gh-webhook", &headers, body.as_bytes())
                        .await;
                statuses.push(answer.status);
            }
            statuses
        }));
    }
    for client in clients {
        assert!(client.await.unwrap().iter().all(|status| *status == 202));
    }
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 600 {
        let judged = running.next_judged().await;
        assert!(seen.insert(judged.delivery.seq), "judged twice: {:?}", judged.delivery);
    }
    running.stop().await;
    assert_eq!(pending_in(&site.inbox_dir()), 0);
}

/// A dispatcher that says when it has a delivery and finishes only when released.
#[derive(Debug)]
struct Gate {
    entered: std::sync::mpsc::Sender<()>,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl loop_daemon::receiver::Dispatch for Gate {
    fn dispatch(&self, _judged: loop_daemon::receiver::Judged) {
        let _ = self.entered.send(());
        let _ = self.release.lock().unwrap().recv();
    }
}

#[tokio::test]
async fn shutdown_finishes_the_delivery_in_flight_and_marks_it_processed() {
    let site = Site::new("");
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel();
    let gate = Gate { entered: entered_tx, release: std::sync::Mutex::new(release_rx) };
    let receiver = site.receiver(Some(SECRET)).unwrap();
    let running = Running::start_with(receiver, std::sync::Arc::new(gate)).await;
    let body = issue_comment("octo/app", 7, "octocat", "hi");
    assert_eq!(running.deliver("issue_comment", Some("f-1"), &body).await.status, 202);
    tokio::task::spawn_blocking(move || entered.recv_timeout(loop_sim::test_support::PATIENCE))
        .await
        .unwrap()
        .expect("the delivery reached the dispatcher");

    // Stop while the delivery is being dispatched; release it only after the signal.
    let stopping = tokio::spawn(running.stop());
    tokio::task::yield_now().await;
    release.send(()).unwrap();
    stopping.await.unwrap();
    assert_eq!(pending_in(&site.inbox_dir()), 0, "the in-flight delivery finished and was marked");
    assert_eq!(site.events_named("server.stopped").len(), 1);
}

/// A dispatcher that holds the first delivery until released and counts every one.
#[derive(Debug)]
struct HoldFirst {
    entered: std::sync::mpsc::Sender<()>,
    release: std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    judged: std::sync::mpsc::Sender<u64>,
}

impl loop_daemon::receiver::Dispatch for HoldFirst {
    fn dispatch(&self, judged: loop_daemon::receiver::Judged) {
        if let Some(release) = self.release.lock().unwrap().take() {
            let _ = self.entered.send(());
            let _ = release.recv();
        }
        let _ = self.judged.send(judged.delivery.seq);
    }
}

#[tokio::test]
async fn deliveries_the_full_queue_left_in_the_journal_are_processed_with_nothing_after_them() {
    let site = Site::new("");
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let (release, release_rx) = std::sync::mpsc::channel();
    let (judged_tx, judged) = std::sync::mpsc::channel();
    let hold = HoldFirst {
        entered: entered_tx,
        release: std::sync::Mutex::new(Some(release_rx)),
        judged: judged_tx,
    };
    let receiver = site.receiver(Some(SECRET)).unwrap();
    let running = Running::start_with(receiver, std::sync::Arc::new(hold)).await;
    let body = issue_comment("octo/app", 7, "octocat", "hi");
    assert_eq!(running.deliver("issue_comment", Some("first"), &body).await.status, 202);
    tokio::task::spawn_blocking(move || entered.recv_timeout(loop_sim::test_support::PATIENCE))
        .await
        .unwrap()
        .expect("the first delivery reached the dispatcher");
    // More than the processor's queue holds arrive while it is busy; the last of them
    // are only in the journal, and no later delivery shows the gap.
    for n in 0..700 {
        let id = format!("more-{n}");
        assert_eq!(running.deliver("issue_comment", Some(&id), &body).await.status, 202);
    }
    release.send(()).unwrap();
    let seqs = tokio::task::spawn_blocking(move || {
        (0..701)
            .map(|_| {
                judged
                    .recv_timeout(loop_sim::test_support::PATIENCE)
                    .expect("every delivery judged")
            })
            .collect::<std::collections::BTreeSet<u64>>()
    })
    .await
    .unwrap();
    assert_eq!(seqs.len(), 701, "each judged once");
    running.stop().await;
    assert_eq!(pending_in(&site.inbox_dir()), 0);
}

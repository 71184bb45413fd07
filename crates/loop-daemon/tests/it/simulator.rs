//! Deliveries signed and sent by the simulated GitHub (loop-sim, a peer implementation of
//! GitHub's signing) are accepted and judged.

use loop_sim::Sim;
use loop_sim::webhook::WebhookTarget;

use crate::common::{Running, SECRET, Site};

#[tokio::test]
async fn signed_deliveries_from_the_simulator_are_accepted_and_judged() {
    let site = Site::new("");
    let mut running = Running::start(site.receiver(Some(SECRET)).unwrap()).await;
    let sim = Sim::start().await.expect("the simulator starts");
    sim.create_repo("octo/app").unwrap();
    let number = sim
        .open_issue("octo/app", "octocat", "Fix the parser", &["the-loop: auto-execute"])
        .unwrap();
    sim.set_webhook(Some(WebhookTarget {
        url: format!("http://{}/gh-webhook", running.addr),
        secret: Some(SECRET.to_owned()),
    }));
    sim.comment("octo/app", number, "octocat", "please start").unwrap();
    sim.webhooks_settled().await;
    let deliveries = sim.deliveries();
    assert!(!deliveries.is_empty());
    assert!(deliveries.iter().all(|d| d.status == Some(202)), "{deliveries:#?}");

    let judged = running.next_judged().await;
    assert_eq!(judged.event.kind.as_str(), "issue_comment");
    assert_eq!(judged.refs[0].to_string(), format!("github:octo/app#{number}"));
    assert!(judged.labeled);
    sim.shutdown().await;
    running.stop().await;
}

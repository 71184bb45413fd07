//! `GET /metrics` counts every delivery once, wherever it ends: refused at the front
//! door, dropped by the judging, or decided by the dispatcher — under the event log's
//! reason.

use std::collections::BTreeMap;

use loop_core::guards::SELF_AUTHORED_MARKER;

use crate::common::{issue_comment, request};
use crate::dispatch_lab::{Lab, OWNER, REPO, STRANGER};

/// `the_loop_deliveries_total` as scraped through the receiver: `outcome/reason` → count.
async fn deliveries(lab: &Lab) -> BTreeMap<String, f64> {
    let answer = request(lab.addr(), "GET", "/metrics", &[], b"").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("the_loop_deliveries_total{outcome=\""))
        .map(|rest| {
            let (outcome, rest) = rest.split_once("\",reason=\"").expect("a reason label");
            let (reason, value) = rest.split_once("\"} ").expect("a value");
            (format!("{outcome}/{reason}"), value.parse().expect("a number"))
        })
        .collect()
}

/// What changed between two scrapes.
fn delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(key, n)| (key.clone(), n - before.get(key).copied().unwrap_or(0.0)))
        .filter(|(_, n)| *n != 0.0)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_dropped_and_delivered_deliveries_each_count_once_under_their_reason() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    let before = deliveries(&lab).await;
    assert_eq!(before.get("done/spawned"), Some(&1.0), "{before:#?}");

    // The front door: no signature, 401, never journalled.
    let body = issue_comment(REPO, number, OWNER, "unsigned");
    let headers = [("X-GitHub-Event", "issue_comment"), ("X-GitHub-Delivery", "unsigned-1")];
    let answer = request(lab.addr(), "POST", "/gh-webhook", &headers, body.as_bytes()).await;
    assert_eq!(answer.status, 401, "{answer:?}");
    // The judging: a stranger's comment and one carrying the-loop's own marker.
    lab.comment(number, STRANGER, "let me in");
    lab.comment(number, OWNER, &format!("{SELF_AUTHORED_MARKER}\nan echo"));
    // The dispatcher: pasted into the live session.
    lab.comment(number, OWNER, "please also handle the empty case");
    lab.settle().await;
    assert_eq!(lab.pasted().await.len(), 2, "the spawn prompt, then the comment");

    let counted = delta(&before, &deliveries(&lab).await);
    let expected: BTreeMap<String, f64> = [
        ("rejected/invalid-signature", 1.0),
        ("dropped/unauthorized-actor", 1.0),
        ("dropped/self-authored", 1.0),
        ("done/delivered", 1.0),
    ]
    .into_iter()
    .map(|(key, n)| (key.to_owned(), n))
    .collect();
    assert_eq!(counted, expected, "{:#?}", lab.events());
}

//! The simulator's webhook deliveries for a scripted scenario arrive at a receiver with
//! GitHub's headers and verify with `verify_signature`.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::HeaderMap;
use loop_github::{SignatureError, verify_signature};
use loop_sim::{ReviewState, WebhookTarget};

use crate::support::{LABEL, REPO, sim};

type Received = Arc<Mutex<Vec<(HeaderMap, Bytes)>>>;

/// A receiver that records every delivery and answers 202.
async fn receiver() -> (String, Received) {
    let received: Received = Arc::default();
    let store = received.clone();
    let app = axum::Router::new().route(
        "/gh-webhook",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let store = store.clone();
            async move {
                store.lock().unwrap().push((headers, body));
                axum::http::StatusCode::ACCEPTED
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/gh-webhook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

#[tokio::test]
async fn a_scripted_scenario_delivers_signed_webhooks_in_order() {
    let sim = sim().await;
    let (url, received) = receiver().await;
    let secret = "s3cret";
    sim.set_webhook(Some(WebhookTarget { url, secret: Some(secret.to_owned()) }));

    let issue = sim.open_issue(REPO, "alice", "Fix parser", &[]).unwrap();
    sim.label(REPO, issue, "alice", LABEL).unwrap();
    sim.comment(REPO, issue, "alice", "the-loop start").unwrap();
    let pr = sim
        .open_pull_request(REPO, "bob", "Parser fix", &format!("Closes #{issue}"), "issue-1", &[])
        .unwrap();
    sim.review(
        REPO,
        pr,
        "alice",
        ReviewState::ChangesRequested,
        "almost",
        &[("src/parse.rs", 7, "off by one")],
    )
    .unwrap();
    sim.merge(REPO, pr, "alice").unwrap();
    sim.webhooks_settled().await;

    let received = received.lock().unwrap().clone();
    let events: Vec<String> = received
        .iter()
        .map(|(headers, body)| {
            let payload: serde_json::Value = serde_json::from_slice(body).unwrap();
            format!(
                "{}.{}",
                headers["x-github-event"].to_str().unwrap(),
                payload["action"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            "issues.opened",
            "issues.labeled",
            "issue_comment.created",
            "pull_request.opened",
            "pull_request_review.submitted",
            "pull_request_review_comment.created",
            "pull_request.closed",
            "issues.closed",
        ]
    );
    let mut ids = std::collections::BTreeSet::new();
    for (headers, body) in &received {
        let signature = headers.get("x-hub-signature-256").map(|v| v.to_str().unwrap());
        assert_eq!(verify_signature(secret.as_bytes(), body, signature), Ok(()));
        assert_eq!(
            verify_signature(b"wrong secret", body, signature),
            Err(SignatureError::Mismatch)
        );
        assert!(headers["user-agent"].to_str().unwrap().starts_with("GitHub-Hookshot/"));
        assert_eq!(headers["content-type"], "application/json");
        ids.insert(headers["x-github-delivery"].to_str().unwrap().to_owned());
    }
    assert_eq!(ids.len(), received.len(), "every delivery has its own id");
    assert!(sim.deliveries().iter().all(|d| d.status == Some(202)));
}

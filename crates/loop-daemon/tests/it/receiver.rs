//! The HTTP surface: every status path, the signature check, the body rules, the event
//! filter, the repository bound and the unset-secret refusal.

use loop_core::Hint as _;
use loop_core::WorkItemRef;
use loop_daemon::receiver::{DEFAULT_BODY_LIMIT, ReceiverError};

use crate::common::{Running, SECRET, Site, issue_comment};

#[tokio::test]
async fn health_answers_200_on_both_paths_and_unknown_paths_404_and_wrong_methods_405() {
    let site = Site::new("");
    let running = Running::start(site.receiver(Some(SECRET)).unwrap()).await;
    for path in ["/health", "/healthz", "/health/"] {
        let answer = running.get(path).await;
        assert_eq!(answer.status, 200, "{path}: {answer:?}");
        assert_eq!(answer.body, r#"{"status":"ok"}"#);
        assert!(answer.head.to_ascii_lowercase().contains("content-type: application/json"));
        assert!(answer.head.contains("the-loop-gh-webhook/"), "Server header: {}", answer.head);
    }
    assert_eq!(running.get("/nope").await.status, 404);
    assert_eq!(running.post("/other-hook", &[], b"{}").await.status, 404);
    assert_eq!(running.get("/gh-webhook").await.status, 405);
    assert_eq!(running.post("/health", &[], b"{}").await.status, 405);
    running.stop().await;
}

#[tokio::test]
async fn a_signed_delivery_is_answered_202_then_judged_with_its_work_item() {
    let site = Site::new("");
    let mut running = Running::start(site.receiver(Some(SECRET)).unwrap()).await;
    let body = issue_comment("octo/app", 7, "octocat", "please look");
    let answer = running.deliver("issue_comment", Some("d-1"), &body).await;
    assert_eq!(answer.status, 202, "{answer:?}");
    assert_eq!(answer.body, r#"{"status":"accepted"}"#);

    let judged = running.next_judged().await;
    assert_eq!(judged.delivery.delivery_id.as_deref(), Some("d-1"));
    assert!(judged.delivery.verified);
    let expected: WorkItemRef = "github:octo/app#7".parse().unwrap();
    assert_eq!(judged.refs, vec![expected.clone()]);
    assert_eq!(judged.target, Some(expected));
    running.stop().await;

    let routed = site.events_named("routing.routed");
    assert_eq!(routed.len(), 1, "{:#?}", site.events());
    assert_eq!(routed[0]["delivery_id"], "d-1");
    assert_eq!(routed[0]["gh_event"], "issue_comment");
    assert_eq!(routed[0]["action"], "created");
    assert_eq!(routed[0]["actor"], "octocat");
    assert_eq!(routed[0]["work_items"][0], "github:octo/app#7");
    assert_eq!(site.events_named("webhook.received")[0]["verified"], true);
    assert_eq!(site.events_named("server.stopped").len(), 1);
}

#[tokio::test]
async fn githubs_published_hmac_vector_passes_the_signature_check() {
    // Secret and body from GitHub's "Validating webhook deliveries"; the body is not a
    // JSON object, so a verified delivery is refused as 400 — never 401.
    let site = Site::new("");
    let running = Running::start(site.receiver(Some("It's a Secret to Everybody")).unwrap()).await;
    let signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    let headers = [("X-GitHub-Event", "ping"), ("X-Hub-Signature-256", signature)];
    let answer = running.post("/gh-webhook", &headers, b"Hello, World!").await;
    assert_eq!(answer.status, 400, "the signature verified, the body is not JSON: {answer:?}");

    let altered = signature.replace("757107", "757108");
    let headers = [("X-GitHub-Event", "ping"), ("X-Hub-Signature-256", altered.as_str())];
    let answer = running.post("/gh-webhook", &headers, b"Hello, World!").await;
    assert_eq!(answer.status, 401, "{answer:?}");
    assert_eq!(answer.body, r#"{"status":"invalid signature"}"#);
    running.stop().await;
}

#[tokio::test]
async fn a_missing_or_wrong_signature_is_401_before_the_body_is_looked_at() {
    let site = Site::new("");
    let running = Running::start(site.receiver(Some(SECRET)).unwrap()).await;
    let body = issue_comment("octo/app", 7, "octocat", "hi");
    let unsigned =
        running.post("/gh-webhook", &[("X-GitHub-Event", "issue_comment")], body.as_bytes()).await;
    assert_eq!(unsigned.status, 401);
    let not_json_unsigned = running.post("/gh-webhook", &[], b"not json").await;
    assert_eq!(not_json_unsigned.status, 401, "the signature is checked before parsing");
    let wrong = loop_sim::webhook::sign(b"another secret", body.as_bytes());
    let answer = running
        .post("/gh-webhook", &[("X-Hub-Signature-256", wrong.as_str())], body.as_bytes())
        .await;
    assert_eq!(answer.status, 401);
    running.stop().await;
    let rejected = site.events_named("webhook.rejected");
    assert!(rejected.iter().all(|e| e["reason"] == "invalid-signature"), "{rejected:#?}");
    assert!(site.events_named("webhook.received").is_empty());
}

#[tokio::test]
async fn bodies_that_are_not_a_utf8_json_object_are_400() {
    let site = Site::new("");
    let running = Running::start(site.receiver(Some(SECRET)).unwrap()).await;
    for body in
        [&b"not json"[..], b"[1,2,3]", b"\"text\"", b"{\"a\":1} trailing", b"{\"a\":\"\xff\"}", b""]
    {
        let signature = loop_sim::webhook::sign(SECRET.as_bytes(), body);
        let answer =
            running.post("/gh-webhook", &[("X-Hub-Signature-256", signature.as_str())], body).await;
        assert_eq!(answer.status, 400, "{:?}: {answer:?}", String::from_utf8_lossy(body));
        assert_eq!(answer.body, r#"{"status":"invalid payload"}"#);
    }
    running.stop().await;
    assert!(site.events_named("webhook.rejected").iter().all(|e| e["reason"] == "invalid-payload"));
}

#[tokio::test]
async fn a_body_over_the_cap_is_413_and_the_default_cap_is_25_mib() {
    assert_eq!(DEFAULT_BODY_LIMIT, 25 * 1024 * 1024);
    let site = Site::new("");
    let receiver = site.receiver(Some(SECRET)).unwrap().with_body_limit(1024);
    let running = Running::start(receiver).await;
    let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(2048));
    let answer = running.deliver("issue_comment", Some("big"), &body).await;
    assert_eq!(answer.status, 413, "{answer:?}");
    running.stop().await;
}

#[tokio::test]
async fn an_unset_secret_refuses_to_start_unless_unsigned_deliveries_are_allowed() {
    let site = Site::new("");
    let err = site.receiver(None).unwrap_err();
    assert!(
        matches!(&err, ReceiverError::UnsetSecret { env } if env == "THE_LOOP_GH_WEBHOOK_SECRET")
    );
    let hint = err.hint().unwrap_or_default();
    assert!(hint.contains("allowUnsigned: true"), "the hint names the way out: {hint}");
    assert!(site.receiver(Some("")).is_err(), "an empty value is unset");

    site.write_config("webhooks:\n  ghWebhook:\n    allowUnsigned: true\n");
    let receiver = site.receiver(None).unwrap();
    assert!(
        receiver.warnings().iter().any(|w| w.contains("NOT be verified")),
        "{:?}",
        receiver.warnings()
    );
    let mut running = Running::start(receiver).await;
    let body = issue_comment("octo/app", 7, "octocat", "hi");
    let answer =
        running.post("/gh-webhook", &[("X-GitHub-Event", "issue_comment")], body.as_bytes()).await;
    assert_eq!(answer.status, 202);
    assert!(!running.next_judged().await.delivery.verified);

    // Every reload says it again.
    site.write_config(
        "webhooks:\n  ghWebhook:\n    allowUnsigned: true\nrepositories: [octo/app]\n",
    );
    running.post("/gh-webhook", &[("X-GitHub-Event", "issue_comment")], body.as_bytes()).await;
    running.next_judged().await;
    running.stop().await;
    let reloaded = site.events_named("config.reloaded");
    assert!(reloaded[0]["detail"].as_str().unwrap().contains("NOT be verified"), "{reloaded:#?}");
}

#[tokio::test]
async fn an_event_outside_the_filter_is_acknowledged_and_dropped_with_a_line() {
    let site = Site::new("webhooks:\n  ghWebhook:\n    events: [issue_comment]\n");
    let receiver = site.receiver(Some(SECRET)).unwrap();
    assert!(
        receiver.warnings().iter().any(|w| w.contains("`issues` and `pull_request`")),
        "{:?}",
        receiver.warnings()
    );
    let mut running = Running::start(receiver).await;
    let answer = running.deliver("push", Some("p-1"), "{\"ref\":\"refs/heads/main\"}").await;
    assert_eq!(answer.status, 202);
    // A following routable delivery is judged, so the push was processed before it.
    let body = issue_comment("octo/app", 7, "octocat", "hi");
    running.deliver("issue_comment", Some("c-1"), &body).await;
    assert_eq!(running.next_judged().await.delivery.delivery_id.as_deref(), Some("c-1"));
    running.stop().await;
    let dropped = site.events_named("routing.dropped");
    assert_eq!(dropped.len(), 1, "{dropped:#?}");
    assert_eq!(dropped[0]["reason"], "disabled-event");
    assert_eq!(dropped[0]["delivery_id"], "p-1");
}

#[tokio::test]
async fn an_undeclared_repository_is_acknowledged_and_dropped_before_the_actor_guard() {
    let site = Site::new("repositories: [octo/app]\n");
    let mut running = Running::start(site.receiver(Some(SECRET)).unwrap()).await;
    // A stranger in an undeclared repository: dropped for the repository, not the actor.
    let stranger = issue_comment("evil/other", 3, "mallory", "the-loop start");
    let answer = running.deliver("issue_comment", Some("u-1"), &stranger).await;
    assert_eq!(answer.status, 202);
    assert_eq!(answer.body, r#"{"status":"accepted"}"#, "the answer does not say it was dropped");
    let body = issue_comment("octo/app", 7, "octocat", "hi");
    running.deliver("issue_comment", Some("c-1"), &body).await;
    assert_eq!(running.next_judged().await.delivery.delivery_id.as_deref(), Some("c-1"));
    running.stop().await;
    let dropped = site.events_named("routing.dropped");
    assert_eq!(dropped.len(), 1, "{dropped:#?}");
    assert_eq!(dropped[0]["reason"], "undeclared-repository");
    assert_eq!(dropped[0]["repository"], "evil/other");
    assert_eq!(dropped[0]["delivery_id"], "u-1");
}

#[tokio::test]
async fn an_unauthorized_actor_is_dropped_with_a_warning_naming_them() {
    let site = Site::new("");
    let mut running = Running::start(site.receiver(Some(SECRET)).unwrap()).await;
    running
        .deliver("issue_comment", Some("x-1"), &issue_comment("octo/app", 7, "mallory", "hi"))
        .await;
    running
        .deliver("issue_comment", Some("c-1"), &issue_comment("octo/app", 7, "octocat", "hi"))
        .await;
    assert_eq!(running.next_judged().await.delivery.delivery_id.as_deref(), Some("c-1"));
    running.stop().await;
    let dropped = site.events_named("routing.dropped");
    assert_eq!(dropped[0]["reason"], "unauthorized-actor");
    assert_eq!(dropped[0]["actor"], "mallory");
    assert_eq!(dropped[0]["level"], "warning");
    assert_eq!(dropped[0]["work_items"][0], "github:octo/app#7");
}

#[tokio::test]
async fn deliveries_without_a_delivery_id_are_each_processed() {
    let site = Site::new("");
    let mut running = Running::start(site.receiver(Some(SECRET)).unwrap()).await;
    let body = issue_comment("octo/app", 7, "octocat", "hi");
    assert_eq!(running.deliver("issue_comment", None, &body).await.status, 202);
    assert_eq!(running.deliver("issue_comment", None, &body).await.status, 202);
    let first = running.next_judged().await;
    let second = running.next_judged().await;
    assert_eq!(first.delivery.delivery_id, None);
    assert_eq!(second.delivery.delivery_id, None);
    assert_ne!(first.delivery.seq, second.delivery.seq, "never one shared key");
    running.stop().await;
}

#[tokio::test]
async fn a_changed_event_filter_applies_to_the_next_delivery_without_a_restart() {
    let site = Site::new("");
    let mut running = Running::start(site.receiver(Some(SECRET)).unwrap()).await;
    let body = issue_comment("octo/app", 7, "octocat", "hi");
    running.deliver("issue_comment", Some("before"), &body).await;
    assert_eq!(running.next_judged().await.delivery.delivery_id.as_deref(), Some("before"));

    site.write_config("webhooks:\n  ghWebhook:\n    events: [issues, pull_request]\n");
    running.deliver("issue_comment", Some("after"), &body).await;
    running.deliver("issues", Some("marker"), &issue_comment("octo/app", 7, "octocat", "")).await;
    assert_eq!(running.next_judged().await.delivery.delivery_id.as_deref(), Some("marker"));
    running.stop().await;
    let dropped = site.events_named("routing.dropped");
    assert_eq!(dropped.len(), 1, "{dropped:#?}");
    assert_eq!(dropped[0]["delivery_id"], "after");
    assert_eq!(dropped[0]["reason"], "disabled-event");
    assert_eq!(site.events_named("config.reloaded").len(), 1);
}

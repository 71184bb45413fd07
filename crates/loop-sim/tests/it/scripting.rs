//! Acting as users over `/_sim/` and reading the world back.

use reqwest::Method;
use serde_json::{Value, json};

use crate::{github, start};

async fn post(http: &reqwest::Client, url: String, body: Value) -> (u16, Value) {
    let response = http
        .post(url)
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = response.bytes().await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn users_act_over_http_and_the_world_shows_it() {
    let (sim, http) = start().await;
    let actions = format!("{}/_sim/actions", sim.url());
    let (status, opened) = post(&http, actions.clone(), json!({ "action": "open_issue", "repo": "octo/app", "author": "alice", "title": "Bug", "labels": ["the-loop: auto-execute"] })).await;
    assert_eq!(status, 200);
    assert_eq!(opened["number"], 1);
    assert!(opened["node_id"].as_str().unwrap().starts_with("I_"));
    let (_, pr) = post(&http, actions.clone(), json!({ "action": "open_pull_request", "repo": "octo/app", "author": "bob", "title": "Fix", "body": "Closes #1", "head_ref": "issue-1" })).await;
    let (_, review) = post(&http, actions.clone(), json!({ "action": "review", "repo": "octo/app", "number": pr["number"], "author": "alice", "state": "COMMENTED", "body": "hm", "comments": [{ "path": "a.rs", "line": 4, "body": "here" }] })).await;
    assert!(review["node_id"].as_str().unwrap().starts_with("PRR_"));
    let (status, _) = post(
        &http,
        actions.clone(),
        json!({ "action": "merge", "repo": "octo/app", "number": pr["number"], "actor": "carol" }),
    )
    .await;
    assert_eq!(status, 200);
    let (status, refused) = post(
        &http,
        actions.clone(),
        json!({ "action": "comment", "repo": "octo/app", "number": 9, "author": "x", "body": "y" }),
    )
    .await;
    assert_eq!(
        (status, refused["message"].as_str().unwrap()),
        (404, "no issue or pull request `octo/app#9` in the simulated GitHub")
    );
    let (status, _) = post(&http, actions, json!({ "action": "fly" })).await;
    assert_eq!(status, 422);

    let world: Value = serde_json::from_slice(
        &http.get(format!("{}/_sim/world", sim.url())).send().await.unwrap().bytes().await.unwrap(),
    )
    .unwrap();
    let issue = &world["repos"]["octo/app"]["items"]["1"];
    assert_eq!(issue["open"], false);
    assert_eq!(issue["closed_by"], "carol");
    assert_eq!(world["repos"]["octo/app"]["items"]["2"]["pull"]["review_comments"][0]["line"], 4);
    assert_eq!(sim.requests().total(), 0, "scripting is not logged as API traffic");
}

#[tokio::test]
async fn what_the_loop_writes_is_readable_by_tests() {
    let (sim, http) = start().await;
    sim.open_issue("octo/app", "alice", "Bug", &[]).unwrap();
    let url = format!("{}/repos/octo/app/issues/1/comments", sim.url());
    let posted = github(&http, Method::POST, &url)
        .body(json!({ "body": "the-loop: on it" }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 201);
    assert_eq!(sim.comments_by("octo/app", 1, sim.viewer()), vec!["the-loop: on it".to_owned()]);
    let missing = github(&http, Method::POST, &url).body("{}").send().await.unwrap();
    assert_eq!(missing.status(), 422);
    let requests: Value = serde_json::from_slice(
        &http
            .get(format!("{}/_sim/requests", sim.url()))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        requests["counts"]["POST /repos/{owner}/{repo}/issues/{issue_number}/comments"]["201"],
        1
    );
    assert_eq!(
        requests["counts"]["POST /repos/{owner}/{repo}/issues/{issue_number}/comments"]["422"],
        1
    );
}

#[tokio::test]
async fn the_rate_limit_can_be_spent_and_renewed_over_http() {
    let (sim, http) = start().await;
    let set = |body: Value| post(&http, format!("{}/_sim/rate-limit", sim.url()), body);
    set(json!({ "limit": 1 })).await;
    let url = format!("{}/repos/octo/app/issues", sim.url());
    assert_eq!(github(&http, Method::GET, &url).send().await.unwrap().status(), 200);
    let spent = github(&http, Method::GET, &url).send().await.unwrap();
    assert_eq!(
        (spent.status().as_u16(), spent.headers()["x-ratelimit-remaining"].to_str().unwrap()),
        (403, "0")
    );
    set(json!({ "reset": true })).await;
    assert_eq!(github(&http, Method::GET, &url).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn webhooks_configured_over_http_are_delivered_and_listed() {
    let (sim, http) = start().await;
    let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let store = received.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let store = store.clone();
            async move {
                let event = headers["x-github-event"].to_str().unwrap_or_default().to_owned();
                store.lock().unwrap().push(event);
                axum::http::StatusCode::ACCEPTED
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let (status, _) =
        post(&http, format!("{}/_sim/webhook", sim.url()), json!({ "url": hook, "secret": "s" }))
            .await;
    assert_eq!(status, 204);
    sim.open_issue("octo/app", "alice", "Bug", &[]).unwrap();
    sim.webhooks_settled().await;
    let response = http.get(format!("{}/_sim/deliveries", sim.url())).send().await.unwrap();
    let deliveries: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(deliveries[0]["event"], "issues");
    assert_eq!(deliveries[0]["status"], 202);
    assert!(deliveries[0]["signature"].as_str().unwrap().starts_with("sha256="));
    assert_eq!(*received.lock().unwrap(), vec!["issues".to_owned()]);

    let cleared = http.delete(format!("{}/_sim/webhook", sim.url())).send().await.unwrap();
    assert_eq!(cleared.status(), 204);
    sim.comment("octo/app", 1, "alice", "no hook any more").unwrap();
    assert_eq!(sim.deliveries().len(), 1, "nothing is queued without a webhook");
}

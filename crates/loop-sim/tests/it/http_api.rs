//! What the simulator's GitHub API does over HTTP beyond what the client tests show.

use reqwest::Method;
use serde_json::{Value, json};

use crate::{github, start};

#[tokio::test]
async fn requests_need_a_user_agent_and_a_token_like_on_github() {
    let (sim, http) = start().await;
    let url = format!("{}/repos/octo/app/issues", sim.url());
    let no_agent = http.get(&url).bearer_auth("t").send().await.unwrap();
    assert_eq!(no_agent.status(), 403);
    let no_token = http.get(&url).header("User-Agent", "x").send().await.unwrap();
    assert_eq!(no_token.status(), 401);
    let fine = github(&http, Method::GET, &url).send().await.unwrap();
    assert_eq!(fine.status(), 200);
    let bad_version = github(&http, Method::GET, &url)
        .header("X-GitHub-Api-Version", "1999-01-01")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_version.status(), 400, "an unknown API version is refused");
    let unknown = github(&http, Method::GET, &format!("{}/repos/octo/app/milestones", sim.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let counts = sim.requests().counts();
    assert_eq!(counts["GET /repos/{owner}/{repo}/issues"].values().sum::<u64>(), 4);
    assert_eq!(counts["GET /repos/{owner}/{repo}/issues"][&400], 1);
    assert_eq!(
        counts["GET /repos/octo/app/milestones"][&404], 1,
        "unrouted paths are logged as requested"
    );
}

#[tokio::test]
async fn answers_carry_rate_limit_headers_and_a_304_spends_none() {
    let (sim, http) = start().await;
    sim.open_issue("octo/app", "alice", "one", &[]).unwrap();
    let url = format!("{}/repos/octo/app/issues/1", sim.url());
    let first = github(&http, Method::GET, &url).send().await.unwrap();
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    assert_eq!(first.headers()["x-ratelimit-remaining"], "4999");
    assert_eq!(first.headers()["x-ratelimit-resource"], "core");
    let again =
        github(&http, Method::GET, &url).header("If-None-Match", &etag).send().await.unwrap();
    assert_eq!(again.status(), 304);
    assert_eq!(again.headers()["x-ratelimit-remaining"], "4999");
    assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);
    sim.comment("octo/app", 1, "bob", "changes the issue").unwrap();
    let changed =
        github(&http, Method::GET, &url).header("If-None-Match", &etag).send().await.unwrap();
    assert_eq!(changed.status(), 200);
    assert_eq!(changed.headers()["x-ratelimit-remaining"], "4998");
}

#[tokio::test]
async fn link_headers_page_through_a_listing() {
    let (sim, http) = start().await;
    for i in 0..5 {
        sim.open_issue("octo/app", "alice", &format!("issue {i}"), &["a b"]).unwrap();
    }
    let url = format!("{}/repos/octo/app/issues?labels=a%20b&per_page=2&page=2", sim.url());
    let page = github(&http, Method::GET, &url).send().await.unwrap();
    let link = page.headers()["link"].to_str().unwrap().to_owned();
    // As GitHub's, the links name the repository by id.
    let base = format!("{}/repositories/{}", sim.url(), sim.world().repo("octo/app").unwrap().id);
    assert_eq!(
        link,
        format!(
            "<{base}/issues?labels=a%20b&page=3&per_page=2>; rel=\"next\", <{base}/issues?labels=a%20b&page=3&per_page=2>; rel=\"last\", <{base}/issues?labels=a%20b&page=1&per_page=2>; rel=\"first\", <{base}/issues?labels=a%20b&page=1&per_page=2>; rel=\"prev\""
        )
    );
    let body: Vec<Value> = serde_json::from_slice(&page.bytes().await.unwrap()).unwrap();
    let numbers: Vec<u64> = body.iter().map(|i| i["number"].as_u64().unwrap()).collect();
    assert_eq!(numbers, vec![3, 2], "newest first, as GitHub sorts by default");
    let next = format!("{base}/issues?labels=a%20b&page=3&per_page=2");
    let page = github(&http, Method::GET, &next).send().await.unwrap();
    let body: Vec<Value> = serde_json::from_slice(&page.bytes().await.unwrap()).unwrap();
    let numbers: Vec<u64> = body.iter().map(|i| i["number"].as_u64().unwrap()).collect();
    assert_eq!(numbers, vec![1], "the link by id reads the same listing");

    sim.comment("octo/app", 2, "bob", "bump").unwrap();
    let url = format!("{}/repos/octo/app/issues?sort=updated&per_page=2", sim.url());
    let page = github(&http, Method::GET, &url).send().await.unwrap();
    let body: Vec<Value> = serde_json::from_slice(&page.bytes().await.unwrap()).unwrap();
    let numbers: Vec<u64> = body.iter().map(|i| i["number"].as_u64().unwrap()).collect();
    assert_eq!(numbers, vec![2, 5], "sort=updated puts the commented issue first");
}

#[tokio::test]
async fn faults_injected_over_http_hit_only_matching_paths_the_given_number_of_times() {
    let (sim, http) = start().await;
    sim.open_issue("octo/app", "alice", "one", &[]).unwrap();
    let fault = json!({ "kind": { "kind": "server_error", "status": 503 }, "times": 2, "path_contains": "/issues/1" });
    let set = http
        .post(format!("{}/_sim/faults", sim.url()))
        .body(fault.to_string())
        .header("Content-Type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 204);
    let listing = format!("{}/repos/octo/app/issues", sim.url());
    let item = format!("{}/repos/octo/app/issues/1", sim.url());
    assert_eq!(github(&http, Method::GET, &listing).send().await.unwrap().status(), 200);
    for expected in [503, 503, 200] {
        assert_eq!(github(&http, Method::GET, &item).send().await.unwrap().status(), expected);
    }
    sim.inject(loop_sim::Fault {
        kind: loop_sim::FaultKind::Latency { millis: 1 },
        times: 1,
        path_contains: None,
    });
    assert_eq!(
        github(&http, Method::GET, &item).send().await.unwrap().status(),
        200,
        "latency delays, then answers"
    );
}

#[tokio::test]
async fn graphql_answers_unknown_fields_and_objects_with_githubs_errors() {
    let (sim, http) = start().await;
    let query = json!({ "query": "{ r: repository(owner: \"octo\", name: \"app\") { p: pullRequest(number: 5) { number } nameWithOwner bogus } }" });
    let answer = github(&http, Method::POST, &format!("{}/graphql", sim.url()))
        .body(query.to_string())
        .send()
        .await
        .unwrap();
    let answer: Value = serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap();
    assert_eq!(answer["data"]["r"]["p"], Value::Null);
    assert_eq!(answer["data"]["r"]["nameWithOwner"], "octo/app");
    assert_eq!(answer["errors"][0]["type"], "NOT_FOUND");
    assert_eq!(answer["errors"][1]["message"], "Field 'bogus' doesn't exist on type 'Repository'");
}

#[tokio::test]
async fn a_comment_is_edited_in_place_by_the_api_or_a_person_and_announced() {
    let (sim, http) = start().await;
    sim.open_issue("octo/app", "alice", "one", &[]).unwrap();
    let id = sim.comment("octo/app", 1, "alice", "- [x] a\n- [x] b").unwrap();
    sim.edit_comment("octo/app", id, "alice", "- [x] a\n- [ ] b").unwrap();
    let url = format!("{}/repos/octo/app/issues/comments/{id}", sim.url());
    let patched = github(&http, Method::PATCH, &url)
        .body(json!({"body": "- [ ] a\n- [ ] b"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), 200);
    let answer: Value = serde_json::from_str(&patched.text().await.unwrap()).unwrap();
    assert_eq!(
        (answer["id"].as_u64(), answer["body"].as_str()),
        (Some(id), Some("- [ ] a\n- [ ] b"))
    );
    let world = sim.world();
    let comments = &world.item("octo/app", 1).unwrap().comments;
    assert_eq!((comments.len(), comments[0].body.as_str()), (1, "- [ ] a\n- [ ] b"));
    let edited =
        github(&http, Method::PATCH, &url).body(json!({}).to_string()).send().await.unwrap();
    assert_eq!(edited.status(), 422, "a body is required");
    let missing = format!("{}/repos/octo/app/issues/comments/999", sim.url());
    let missing =
        github(&http, Method::PATCH, &missing).body(json!({"body": "x"}).to_string()).send().await;
    assert_eq!(missing.unwrap().status(), 404);
}

/// `since` lists the comments updated at or after it (GitHub compares inclusively, so the
/// comment at the watermark comes back), an edit brings an old comment back, and a value
/// that is not a time is refused.
#[tokio::test]
async fn since_lists_the_comments_updated_at_or_after_it() {
    let (sim, http) = start().await;
    sim.open_issue("octo/app", "alice", "one", &[]).unwrap();
    let first = sim.comment("octo/app", 1, "bob", "first").unwrap();
    sim.comment("octo/app", 1, "bob", "second").unwrap();
    sim.comment("octo/app", 1, "bob", "third").unwrap();
    let url = format!("{}/repos/octo/app/issues/1/comments", sim.url());
    let read = |query: String| {
        let request = github(&http, Method::GET, &format!("{url}{query}"));
        async move {
            let answer = request.send().await.unwrap();
            let status = answer.status().as_u16();
            let rows: Value = serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap();
            (status, rows)
        }
    };
    let bodies = |rows: Value| -> Vec<String> {
        let rows = rows.as_array().unwrap().iter();
        rows.map(|c| c["body"].as_str().unwrap().to_owned()).collect()
    };
    let (_, all) = read(String::new()).await;
    let since = format!("?since={}", all[1]["updated_at"].as_str().unwrap().replace(':', "%3A"));
    assert_eq!(bodies(read(since.clone()).await.1), ["second", "third"]);
    sim.edit_comment("octo/app", first, "bob", "first, edited").unwrap();
    assert_eq!(bodies(read(since).await.1), ["first, edited", "second", "third"]);
    assert_eq!(read("?since=yesterday".into()).await.0, 422);
}

//! Conditional requests, pagination, token refresh, retries, rate limits, malformed
//! answers and host routing.

use std::time::Duration;

use loop_github::{GithubClient, GithubError, GithubSettings, TokenSource};
use loop_sim::{Fault, FaultKind, Sim, SimSettings};

use crate::support::{LABEL, REPO, RecordingClock, client, client_with, item, repo, sim};

#[tokio::test]
async fn listing_follows_pagination_over_250_items() {
    let sim = sim().await;
    for i in 0..250 {
        sim.open_issue(REPO, "alice", &format!("issue {i}"), &[LABEL]).unwrap();
    }
    sim.open_issue(REPO, "alice", "unlabelled", &[]).unwrap();
    let gh = client(&sim, RecordingClock::new());
    sim.clear_requests();
    let listing = gh.list_labelled_open_items(&repo(), LABEL).await.unwrap();
    assert_eq!(listing.items.len(), 250);
    let mut numbers: Vec<u64> = listing.items.iter().map(|i| i.item.number()).collect();
    numbers.sort_unstable();
    numbers.dedup();
    assert_eq!(numbers.len(), 250, "no item listed twice");
    let log = sim.requests();
    assert_eq!(log.counts()["GET /repos/{owner}/{repo}/issues"][&200], 3, "{log}");
}

#[tokio::test]
async fn an_unchanged_listing_is_a_free_304_served_from_the_cache() {
    let sim = sim().await;
    let first = sim.open_issue(REPO, "alice", "one", &[LABEL]).unwrap();
    sim.open_issue(REPO, "alice", "two", &[LABEL]).unwrap();
    let gh = client(&sim, RecordingClock::new());
    let before = gh.list_labelled_open_items(&repo(), LABEL).await.unwrap();
    assert!(!before.unchanged);
    let remaining = sim.rate_limit_remaining();
    sim.clear_requests();

    let again = gh.list_labelled_open_items(&repo(), LABEL).await.unwrap();
    assert!(again.unchanged);
    assert_eq!(again.items, before.items);
    assert_eq!(sim.requests().with_status(304), 1);
    assert_eq!(sim.rate_limit_remaining(), remaining, "a 304 costs no rate limit");
    assert_eq!(gh.answers_by_status().get(&304), Some(&1));
    assert!(!format!("{gh:?}").contains("sim-token"), "the client's Debug redacts the token");

    sim.comment(REPO, first, "bob", "news").unwrap();
    let after = gh.list_labelled_open_items(&repo(), LABEL).await.unwrap();
    assert!(!after.unchanged);
    let moved: Vec<u64> = after
        .items
        .iter()
        .filter(|i| before.items.iter().any(|b| b.item == i.item && b.updated_at != i.updated_at))
        .map(|i| i.item.number())
        .collect();
    assert_eq!(moved, vec![first], "only the commented item's updated_at moved");
}

/// A fake `gh` that prints a token and counts its runs in `runs`.
fn fake_gh(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("gh");
    let runs = dir.join("runs");
    std::fs::write(
        &script,
        format!("#!/bin/sh\n[ \"$1 $2\" = \"auth token\" ] || exit 2\necho run >> '{}'\necho gho_from_gh\n", runs.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn gh_runs(dir: &std::path::Path) -> usize {
    std::fs::read_to_string(dir.join("runs")).map(|s| s.lines().count()).unwrap_or(0)
}

#[tokio::test]
async fn a_401_asks_gh_for_the_token_once_more_then_gives_up() {
    let sim = sim().await;
    let n = sim.open_issue(REPO, "alice", "one", &[LABEL]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokens = TokenSource::new("github.com", &[], []).with_gh_program(fake_gh(dir.path()));
    let gh = client_with(&sim, RecordingClock::new(), tokens);

    gh.read_item(&item(n)).await.unwrap();
    assert_eq!(gh_runs(dir.path()), 1, "the token is asked for once, then reused");
    gh.read_item(&item(n)).await.unwrap();
    assert_eq!(gh_runs(dir.path()), 1);

    sim.inject(Fault { kind: FaultKind::Unauthorized, times: 1, path_contains: None });
    gh.read_item(&item(n)).await.unwrap();
    assert_eq!(gh_runs(dir.path()), 2, "a 401 re-asks for the token");

    sim.inject(Fault { kind: FaultKind::Unauthorized, times: 2, path_contains: None });
    let err = gh.read_item(&item(n)).await.unwrap_err();
    assert!(matches!(err, GithubError::Unauthorized { .. }), "{err:?}");
    assert_eq!(gh_runs(dir.path()), 3, "only once per request");
}

#[tokio::test]
async fn server_errors_are_retried_with_growing_backoff_then_reported_as_transient() {
    let sim = sim().await;
    let n = sim.open_issue(REPO, "alice", "one", &[]).unwrap();
    let clock = RecordingClock::new();
    let gh = client(&sim, clock.clone());
    sim.inject(Fault {
        kind: FaultKind::ServerError { status: 502 },
        times: 2,
        path_contains: None,
    });
    assert_eq!(gh.read_item(&item(n)).await.unwrap().title, "one");
    assert_eq!(clock.sleeps(), vec![Duration::from_secs(1), Duration::from_secs(2)]);

    sim.inject(Fault {
        kind: FaultKind::ServerError { status: 503 },
        times: 10,
        path_contains: None,
    });
    let err = gh.read_item(&item(n)).await.unwrap_err();
    assert!(matches!(err, GithubError::Transient { attempts: 4, .. }), "{err:?}");
    assert!(!err.is_not_found(), "doubt is never absence");
}

#[tokio::test]
async fn a_write_is_not_repeated_after_a_server_error() {
    let sim = sim().await;
    let n = sim.open_issue(REPO, "alice", "one", &[]).unwrap();
    let gh = client(&sim, RecordingClock::new());
    sim.inject(Fault {
        kind: FaultKind::ServerError { status: 502 },
        times: 1,
        path_contains: None,
    });
    let err = gh.post_comment(&item(n), "hello").await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert_eq!(
        sim.requests().to_endpoint("POST /repos/{owner}/{repo}/issues/{issue_number}/comments"),
        1
    );
}

#[tokio::test]
async fn a_secondary_rate_limit_waits_as_told_then_retries() {
    let sim = sim().await;
    let n = sim.open_issue(REPO, "alice", "one", &[]).unwrap();
    let clock = RecordingClock::new();
    let gh = client(&sim, clock.clone());
    sim.inject(Fault {
        kind: FaultKind::SecondaryRateLimit { retry_after: Some(7) },
        times: 1,
        path_contains: None,
    });
    gh.read_item(&item(n)).await.unwrap();
    sim.inject(Fault {
        kind: FaultKind::SecondaryRateLimit { retry_after: None },
        times: 1,
        path_contains: None,
    });
    gh.post_comment(&item(n), "a write refused by a secondary limit is safe to repeat")
        .await
        .unwrap();
    assert_eq!(clock.sleeps(), vec![Duration::from_secs(7), Duration::from_secs(60)]);
    assert_eq!(sim.comments_by(REPO, n, sim.viewer()).len(), 1);
}

#[tokio::test]
async fn a_spent_rate_limit_is_waited_out_until_its_reset() {
    let sim = sim().await;
    let n = sim.open_issue(REPO, "alice", "one", &[]).unwrap();
    sim.set_rate_limit(2);
    let resetter = sim.clone();
    let clock = RecordingClock::with_hook(Some(Box::new(move || resetter.reset_rate_limit())));
    let gh = client(&sim, clock.clone());
    gh.post_comment(&item(n), "one").await.unwrap();
    gh.post_comment(&item(n), "two").await.unwrap();
    let limits = gh.rate_limits();
    assert_eq!(limits[&loop_github::Resource::Core].remaining, 0);

    // The client knows the bucket is empty: it waits before asking, never earning a 403.
    gh.post_comment(&item(n), "after the reset").await.unwrap();
    assert_eq!(clock.sleeps().len(), 1);
    assert!(
        clock.sleeps()[0] > Duration::from_secs(3000),
        "waited until the reset: {:?}",
        clock.sleeps()
    );
    assert_eq!(sim.requests().with_status(403), 0, "{}", sim.requests());

    // A client that did not know learns it from the 403 and waits too.
    sim.set_rate_limit(0);
    let fresh_clock = RecordingClock::with_hook(Some(Box::new({
        let sim = sim.clone();
        move || sim.set_rate_limit(10)
    })));
    let fresh = client(&sim, fresh_clock.clone());
    fresh.read_item(&item(n)).await.unwrap();
    assert_eq!(fresh_clock.sleeps().len(), 1);
    assert_eq!(sim.requests().with_status(403), 1);
}

#[tokio::test]
async fn malformed_json_is_a_typed_error_not_a_panic() {
    let sim = sim().await;
    let n = sim.open_issue(REPO, "alice", "one", &[LABEL]).unwrap();
    let gh = client(&sim, RecordingClock::new());
    sim.inject(Fault { kind: FaultKind::Malformed, times: 3, path_contains: None });
    let err = gh.read_item(&item(n)).await.unwrap_err();
    assert!(matches!(err, GithubError::Malformed { .. }), "{err:?}");
    let err = gh.list_labelled_open_items(&repo(), LABEL).await.unwrap_err();
    assert!(matches!(err, GithubError::Malformed { .. }), "{err:?}");
    let err = gh.linked_issues(&[item(n)]).await.unwrap_err();
    assert!(matches!(err, GithubError::Malformed { .. }), "{err:?}");
}

#[tokio::test]
async fn only_a_404_says_an_item_does_not_exist() {
    let sim = sim().await;
    let n = sim.open_issue(REPO, "alice", "one", &[]).unwrap();
    let gh = client(&sim, RecordingClock::new());
    assert!(gh.item_exists(&item(n)).await.unwrap());
    assert!(!gh.item_exists(&item(n + 1)).await.unwrap());
    sim.inject(Fault {
        kind: FaultKind::ServerError { status: 500 },
        times: 10,
        path_contains: None,
    });
    assert!(gh.item_exists(&item(n)).await.is_err(), "a failure is not an answer");
}

#[tokio::test]
async fn enterprise_hosts_use_api_v3_and_api_graphql() {
    let settings =
        SimSettings { web: "https://ghe.example.com".to_owned(), ..SimSettings::default() };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sim = Sim::serve(listener, settings).await.unwrap();
    sim.create_repo("octo/app").unwrap();
    let issue = sim.open_issue("octo/app", "alice", "bug", &[LABEL]).unwrap();
    let pr = sim
        .open_pull_request(
            "octo/app",
            "alice",
            "fix",
            &format!("Fixes #{issue}"),
            "fix-it",
            &[LABEL],
        )
        .unwrap();

    let host = "ghe.example.com";
    let mut settings = GithubSettings::for_host(host);
    settings.base_url = Some(sim.enterprise_url());
    let tokens = TokenSource::new(host, &[], [("GITHUB_TOKEN".to_owned(), "t".to_owned())]);
    let gh = GithubClient::with_clock(settings, tokens, RecordingClock::new()).unwrap();
    let ghe_repo: loop_core::RepoRef = "ghe.example.com/octo/app".parse().unwrap();

    let listing = gh.list_labelled_open_items(&ghe_repo, LABEL).await.unwrap();
    assert_eq!(listing.items.len(), 2);
    let linked = gh.linked_issues(&[ghe_repo.item(pr)]).await.unwrap();
    assert_eq!(linked[&ghe_repo.item(pr)], vec![ghe_repo.item(issue)], "linked refs keep the host");

    let paths: Vec<String> = sim.requests().records.iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, vec!["/api/v3/repos/octo/app/issues".to_owned(), "/api/graphql".to_owned()]);

    let err = gh.read_item(&item(1)).await.unwrap_err();
    assert!(matches!(err, GithubError::WrongHost { .. }), "a github.com ref is refused: {err:?}");
}

/// On a paused clock: the 50 ms timeout and the simulator's 2 s latency are the only
/// timers, so the timeout fires first by construction, not by the machine being quick.
#[tokio::test(start_paused = true)]
async fn a_request_that_outlives_its_timeout_is_transient() {
    let sim = sim().await;
    let n = sim.open_issue(REPO, "alice", "one", &[]).unwrap();
    let mut settings = GithubSettings::for_host("github.com");
    settings.base_url = Some(sim.url());
    settings.request_timeout = Duration::from_millis(50);
    settings.max_retries = 0;
    let gh = GithubClient::with_clock(
        settings,
        crate::support::token_source("github.com"),
        RecordingClock::new(),
    )
    .unwrap();
    // The answer cannot come before the injected latency; the timeout is far shorter.
    sim.inject(Fault { kind: FaultKind::Latency { millis: 2_000 }, times: 1, path_contains: None });
    let err = gh.read_item(&item(n)).await.unwrap_err();
    assert!(
        matches!(&err, GithubError::Transient { reason, .. } if reason == "timed out"),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_next_link_chain_that_never_ends_is_an_error_not_a_loop() {
    use axum::http::{HeaderMap, header};
    use axum::response::IntoResponse;

    // Every page is empty and names one more page after it.
    async fn endless(
        axum::extract::Query(query): axum::extract::Query<
            std::collections::HashMap<String, String>,
        >,
        headers: HeaderMap,
    ) -> axum::response::Response {
        let page: u64 = query.get("page").and_then(|p| p.parse().ok()).unwrap_or(1);
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
        let next = format!("<http://{host}/repos/octo/app/issues?page={}>; rel=\"next\"", page + 1);
        ([(header::LINK, next)], axum::Json(serde_json::json!([]))).into_response()
    }
    let app = axum::Router::new().route("/repos/octo/app/issues", axum::routing::get(endless));
    let gh = crate::support::client_at(crate::support::serve(app).await);
    let err = gh.list_labelled_open_items(&repo(), LABEL).await.unwrap_err();
    assert!(matches!(err, GithubError::Malformed { .. }), "{err:?}");
    assert!(err.to_string().contains("1000 pages"), "{err}");
}

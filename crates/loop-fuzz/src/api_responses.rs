//! Fuzz harness: GitHub's answers (status, headers, body) to every call the-loop makes.
//!
//! The answers go through the real client: a local HTTP server on 127.0.0.1:0 plays
//! GitHub and gives, request after request, the answers the input describes, and one
//! `GithubClient` call (picked by the input's first byte, made twice so the second sends
//! the first's `ETag`s) reads them, on a repository no earlier input used — status handling,
//! retries and rate-limit waits (on a clock that never sleeps), `ETag`/`Link` headers,
//! pagination, and the typed decoding of issue and pull-request listings and reads,
//! comments, reviews, inline comments, a posted comment, a reaction and the GraphQL
//! linkage batch — and then what the poller reads in the text (closing keywords in
//! descriptions, the head branch's issue number, control commands in comments). Going
//! through HTTP rather than a decoding seam keeps the headers and
//! statuses in reach and needs no test-only API in loop-github.
//!
//! Input: a selector byte, then answers separated by `0x1e`. Each answer is a status
//! line, header lines (`name: value`; the line `link-next` adds a `Link` to the server's
//! next page), a blank line, and the body — seeds are written by hand that way. When the
//! answers run out the server says 404.
//!
//! What must hold: every call returns (`Ok` or a typed error); no panic, no abort.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use loop_core::config::ControlConfig;
use loop_core::control::Vocabulary;
use loop_core::{RepoRef, WorkItemRef, linkage};
use loop_github::{
    Clock, GithubClient, GithubError, GithubSettings, Listing, Reaction, ReactionTarget,
    ThreadComment, TokenSource,
};
use tokio::runtime::Runtime;

/// One answer the local server gives.
#[derive(Debug, Clone)]
struct Answer {
    status: StatusCode,
    headers: Vec<(HeaderName, HeaderValue)>,
    link_next: bool,
    body: Bytes,
}

/// The answers still to give, in order.
type Script = Arc<Mutex<VecDeque<Answer>>>;

struct Site {
    runtime: Runtime,
    script: Script,
    /// One client for the run (building one loads TLS roots: tens of milliseconds).
    github: GithubClient,
    /// Numbers each input, so no input's URL was seen by the client before: no `ETag`
    /// remembered from another input answers for this one.
    inputs: AtomicU64,
}

/// A clock at a fixed instant whose sleeps end at once: back-offs and rate-limit waits
/// are taken without taking time.
#[derive(Debug)]
struct FrozenClock;

impl Clock for FrozenClock {
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    fn sleep(&self, _duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(std::future::ready(()))
    }
}

static SITE: LazyLock<Site> = LazyLock::new(|| {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("invariant: a current-thread runtime builds");
    let script: Script = Arc::default();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("invariant: the fuzz run can listen on 127.0.0.1");
    let addr = listener.local_addr().expect("invariant: a bound listener has an address");
    let base_url = format!("http://{addr}");
    let app = axum::Router::new().fallback({
        let (script, base_url) = (script.clone(), base_url.clone());
        move || answer(script.clone(), base_url.clone())
    });
    runtime.spawn(async move { axum::serve(listener, app).await });
    let github = client(&base_url);
    Site { runtime, script, github, inputs: AtomicU64::new(0) }
});

/// The next scripted answer; 404 when the script is spent.
async fn answer(script: Script, base_url: String) -> Response {
    let next = script.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
    let Some(answer) = next else { return StatusCode::NOT_FOUND.into_response() };
    let mut response = (answer.status, answer.body).into_response();
    for (name, value) in answer.headers {
        response.headers_mut().append(name, value);
    }
    if answer.link_next {
        let link = format!("<{base_url}/next-page>; rel=\"next\"");
        if let Ok(value) = HeaderValue::from_str(&link) {
            response.headers_mut().append("link", value);
        }
    }
    response
}

/// Reads one answer: status line, header lines, blank line, body.
fn parse_answer(raw: &[u8]) -> Answer {
    let (head, body) = match raw.windows(2).position(|w| w == b"\n\n") {
        Some(at) => (&raw[..at], &raw[at + 2..]),
        None => (raw, &[][..]),
    };
    let head = String::from_utf8_lossy(head);
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.trim().parse::<u16>().ok())
        .and_then(|code| StatusCode::from_u16(code).ok())
        .unwrap_or(StatusCode::OK);
    let mut headers = Vec::new();
    let mut link_next = false;
    for line in lines {
        if line.trim() == "link-next" {
            link_next = true;
        } else if let Some((name, value)) = line.split_once(':')
            && let (Ok(name), Ok(value)) =
                (HeaderName::try_from(name.trim()), HeaderValue::from_str(value.trim()))
        {
            headers.push((name, value));
        }
    }
    Answer { status, headers, link_next, body: Bytes::copy_from_slice(body) }
}

fn client(base_url: &str) -> GithubClient {
    let mut settings = GithubSettings::for_host("github.com");
    settings.base_url = Some(base_url.to_owned());
    settings.etag_cache_entries = 16;
    let tokens = TokenSource::new("github.com", &[], [("GH_TOKEN".into(), "fuzz-token".into())]);
    GithubClient::with_clock(settings, tokens, Arc::new(FrozenClock))
        .expect("invariant: a local http base URL is accepted")
}

/// What the poller reads in a listing's text: the closing keywords of each description.
fn listed(listing: Result<Listing, GithubError>, repo: &RepoRef) {
    for row in listing.map(|listing| listing.items).unwrap_or_default() {
        let _ = linkage::closing_keyword_references(&row.body, repo);
    }
}

/// What the poller reads in a thread's text: control commands, with the default words.
fn thread(comments: Result<Vec<ThreadComment>, GithubError>) {
    let vocabulary = Vocabulary::from(&ControlConfig::default());
    for comment in comments.unwrap_or_default() {
        let _ = vocabulary.parse(&comment.body);
    }
}

fn item(text: &str) -> WorkItemRef {
    text.parse().expect("invariant: the target's refs are valid")
}

/// One input.
pub fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else { return };
    let site = &*SITE;
    {
        let mut script = site.script.lock().unwrap_or_else(PoisonError::into_inner);
        script.clear();
        script.extend(rest.split(|b| *b == 0x1e).take(16).map(parse_answer));
    }
    let (github, n) = (&site.github, site.inputs.fetch_add(1, Ordering::Relaxed));
    let repo: RepoRef = format!("octo/app{n}").parse().expect("invariant: a valid repository");
    let (issue, pr, other) = (repo.item(7), repo.item(8), repo.item(9));
    // Each call is made twice: the second time `ETag`s from the first are sent, and a 304
    // answers from what the client remembered.
    for _ in 0..2 {
        site.runtime.block_on(async {
            match selector % 12 {
                0 => listed(github.list_labelled_open_items(&repo, "agent").await, &repo),
                1 => listed(github.list_labelled_open_pull_requests(&repo, "agent").await, &repo),
                2 => drop(github.read_item(&issue).await),
                3 => drop(github.item_exists(&issue).await),
                4 => {
                    if let Ok(read) = github.read_pull_request(&pr).await {
                        let _ = linkage::branch_issue_number(&read.head_ref);
                        let _ = linkage::closing_keyword_references(&read.body, &repo);
                    }
                }
                5 => thread(github.conversation_comments(&issue).await),
                6 => thread(github.reviews(&pr).await),
                7 => thread(github.review_comments(&pr).await),
                8 => thread(github.pull_request_thread(&pr).await),
                9 => drop(github.post_comment(&issue, "hello").await),
                10 => {
                    let targets = [
                        ReactionTarget::Item(issue.clone()),
                        ReactionTarget::IssueComment { repo: repo.clone(), id: 1 },
                        ReactionTarget::ReviewComment { repo: repo.clone(), id: 2 },
                    ];
                    for target in &targets {
                        drop(github.add_reaction(target, Reaction::Eyes).await);
                    }
                }
                _ => {
                    let elsewhere = item("github:other/lib#1");
                    drop(github.linked_issues(&[pr.clone(), other.clone(), elsewhere]).await);
                }
            }
        });
    }
    let _ = (github.rate_limits(), github.answers_by_status());
}

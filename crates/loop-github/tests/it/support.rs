//! Shared set-up: a simulator with a repository, a client pointed at it, and a clock
//! that records waits instead of sleeping.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use loop_github::{Clock, GithubClient, GithubSettings, TokenSource};
use loop_sim::Sim;

pub const REPO: &str = "octo/app";
pub const LABEL: &str = "the-loop: auto-execute";

/// A clock whose `sleep` returns at once, advancing `now` and recording the wait; an
/// optional hook runs on every wait (e.g. to let the simulator's rate-limit window pass).
pub struct RecordingClock {
    now: Mutex<SystemTime>,
    sleeps: Mutex<Vec<Duration>>,
    on_sleep: Option<Box<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for RecordingClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingClock").field("sleeps", &self.sleeps()).finish()
    }
}

impl RecordingClock {
    pub fn new() -> Arc<Self> {
        Self::with_hook(None)
    }

    pub fn with_hook(on_sleep: Option<Box<dyn Fn() + Send + Sync>>) -> Arc<Self> {
        Arc::new(Self { now: Mutex::new(SystemTime::now()), sleeps: Mutex::default(), on_sleep })
    }

    pub fn sleeps(&self) -> Vec<Duration> {
        self.sleeps.lock().unwrap().clone()
    }
}

impl Clock for RecordingClock {
    fn now(&self) -> SystemTime {
        *self.now.lock().unwrap()
    }

    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        self.sleeps.lock().unwrap().push(duration);
        *self.now.lock().unwrap() += duration;
        if let Some(hook) = &self.on_sleep {
            hook();
        }
        Box::pin(async {})
    }
}

/// A simulator with `octo/app` in it.
pub async fn sim() -> Arc<Sim> {
    let sim = Sim::start().await.unwrap();
    sim.create_repo(REPO).unwrap();
    Arc::new(sim)
}

pub fn token_source(host: &str) -> TokenSource {
    TokenSource::new(host, &[], [("GH_TOKEN".to_owned(), "sim-token".to_owned())])
        .with_gh_program("/nonexistent/gh")
}

/// A github.com client whose base URL is the simulator's.
pub fn client(sim: &Sim, clock: Arc<dyn Clock>) -> GithubClient {
    client_with(sim, clock, token_source("github.com"))
}

pub fn client_with(sim: &Sim, clock: Arc<dyn Clock>, tokens: TokenSource) -> GithubClient {
    let mut settings = GithubSettings::for_host("github.com");
    settings.base_url = Some(sim.url());
    GithubClient::with_clock(settings, tokens, clock).unwrap()
}

pub fn item(number: u64) -> loop_core::WorkItemRef {
    REPO.parse::<loop_core::RepoRef>().unwrap().item(number)
}

pub fn repo() -> loop_core::RepoRef {
    REPO.parse().unwrap()
}

/// Serves `app` on a free loopback port and returns its base URL: for answers the
/// simulator never gives (an endless `Link` chain, an outdated inline comment).
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// A github.com client whose base URL is `base`.
pub fn client_at(base: String) -> GithubClient {
    let mut settings = GithubSettings::for_host("github.com");
    settings.base_url = Some(base);
    GithubClient::with_clock(settings, token_source("github.com"), RecordingClock::new()).unwrap()
}

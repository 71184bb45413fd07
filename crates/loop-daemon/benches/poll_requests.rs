//! GitHub requests per poll cycle, measured by the simulator's request log (SPEC §7:
//! "a quiet poll cycle = S requests, all conditional"). Run with `scripts/bench-poll.sh`
//! or `cargo bench -p loop-daemon --bench poll_requests`.
//!
//! The world: 3 repositories, 10 labelled issues, 4 labelled pull requests. It measures
//! the first cycle ever (which reads everything once), the first cycle of a restarted
//! poller over the same state root (warm from `local/poll-cache.json`), a quiet cycle and
//! a cycle after one new comment on a pull request, and prints them beside the reference's
//! `2S + I + 3P` `gh` processes per cycle (which it pays whether or not anything changed).
//!
//! The dispatcher is a stand-in that accepts every delivery: this measures what the
//! poller asks GitHub, not what happens to the events.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use loop_core::WorkItemRef;
use loop_core::event::Event;
use loop_core::poll::DeliveryStatus;
use loop_daemon::poller::seam::{Dispatched, Pipeline, StampFailed};
use loop_daemon::poller::{GithubClients, Poller};
use loop_daemon::shutdown::Shutdown;
use loop_github::{GithubClient, GithubSettings, TokenSource};
use loop_sim::{RequestLog, Sim};
use loop_store::{EventLog, StateLayout, StateStore};

const REPOS: [&str; 3] = ["octo/a", "octo/b", "octo/c"];
const ISSUES: usize = 10;
const PULL_REQUESTS: usize = 4;
const LABEL: &str = "the-loop: auto-execute";

/// Accepts every delivery; each is done by the next cycle. Clones share what was
/// delivered (it outlives a poller restart, as the dispatcher's ledger does).
#[derive(Debug, Default, Clone)]
struct AcceptAll {
    delivered: Arc<Mutex<HashSet<String>>>,
}

impl Pipeline for AcceptAll {
    async fn dispatch(&self, event: Event) -> Dispatched {
        if let Some(key) = event.dedup_key() {
            self.delivered
                .lock()
                .expect("never poisoned: no panics under it")
                .insert(key.to_string());
        }
        Dispatched::Enqueued
    }

    async fn status(&self, key: &str, _refs: &[WorkItemRef]) -> DeliveryStatus {
        let delivered = self.delivered.lock().expect("never poisoned: no panics under it");
        if delivered.contains(key) { DeliveryStatus::Done } else { DeliveryStatus::Unhandled }
    }

    async fn close(&self, _event: Event) -> Result<(), StampFailed> {
        Ok(())
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime for the benchmark");
    runtime.block_on(measure());
}

async fn measure() {
    let sim = Sim::start().await.expect("the simulated GitHub");
    for repo in REPOS {
        sim.create_repo(repo).expect("a repository");
    }
    for i in 0..ISSUES {
        sim.open_issue(REPOS[i % 3], "ann", "Issue", &[LABEL]).expect("an issue");
    }
    let mut pr = 0;
    for i in 0..PULL_REQUESTS {
        pr = sim
            .open_pull_request(REPOS[i % 3], "ann", "PR", "", &format!("b{i}"), &[LABEL])
            .expect("a pull request");
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let layout = StateLayout::new(dir.path().join("state"));
    let store = StateStore::new(layout.clone(), EventLog::new(layout.event_log(), "poll"));
    let yaml =
        format!("repositories: [{}]\nrouting:\n  authorizedUsers: [ann]\n", REPOS.join(", "));
    let config = loop_core::config::parse(&yaml).expect("a valid config").config;
    let mut settings = GithubSettings::for_host("github.com");
    settings.base_url = Some(sim.url());
    let tokens = TokenSource::new(
        "github.com",
        &["GH_TOKEN".to_owned()],
        [("GH_TOKEN".to_owned(), "t".to_owned())],
    );
    let clients = || {
        let client = GithubClient::new(settings.clone(), tokens.clone()).expect("a client");
        GithubClients::new([client])
    };
    let dispatch = AcceptAll::default();
    let mut poller = Poller::new(store.clone(), clients(), dispatch.clone(), "bench");
    let (_stop, signal) = tokio::sync::broadcast::channel(1);
    let mut shutdown = Shutdown::new(signal);

    let (first, _) =
        loop_sim::bench::count_requests(&sim, || poller.cycle(&config, &mut shutdown)).await;
    // A new process over the same state root (and the same dispatcher's answers).
    poller = Poller::new(store, clients(), dispatch, "bench");
    let (restarted, _) =
        loop_sim::bench::count_requests(&sim, || poller.cycle(&config, &mut shutdown)).await;
    let (quiet, _) =
        loop_sim::bench::count_requests(&sim, || poller.cycle(&config, &mut shutdown)).await;
    sim.comment(REPOS[(PULL_REQUESTS - 1) % 3], pr, "ann", "one new comment").expect("a comment");
    let (busy, report) =
        loop_sim::bench::count_requests(&sim, || poller.cycle(&config, &mut shutdown)).await;

    let (s, i, p) = (REPOS.len(), ISSUES, PULL_REQUESTS);
    let reference = 2 * s + i + 3 * p;
    println!("poll requests: S = {s} repositories, I = {i} issues, P = {p} pull requests");
    println!("{:<36} {:>8} {:>8} {:>22}", "cycle", "ours", "304s", "reference (2S + I + 3P)");
    row("first cycle ever (reads everything)", &first, reference);
    row("first cycle after a restart", &restarted, reference);
    row("quiet cycle", &quiet, reference);
    row("one new comment on a pull request", &busy, reference);
    println!("comments forwarded in the last cycle: {}", report.comments_forwarded);
    println!();
    println!("quiet cycle, by endpoint:\n{quiet}");
    println!("one new comment, by endpoint:\n{busy}");
    let all_304 = |log: &RequestLog| log.total() == s && log.with_status(304) == s;
    let ok_busy = busy.total() <= s + 3;
    println!("budget: quiet = S requests all 304: {}", verdict(all_304(&quiet)));
    println!(
        "budget: first cycle after a restart = S requests all 304: {}",
        verdict(all_304(&restarted))
    );
    println!("budget: one new comment <= S + 3 requests: {}", verdict(ok_busy));
    sim.shutdown().await;
}

fn row(name: &str, log: &RequestLog, reference: usize) {
    println!("{name:<36} {:>8} {:>8} {:>22}", log.total(), log.with_status(304), reference);
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

//! Restart invisibility: a poller process killed with SIGKILL at random points while 300
//! comments arrive across 20 items, then restarted, delivers every authorized comment
//! exactly once and executes no control command twice.
//!
//! The poller runs in a child process (this test binary re-run on the ignored
//! [`poll_kill_child`] test). Its dispatcher is a stand-in whose memory is an append-only
//! file of delivered dedup keys — the durable, keyed delivery status the real dispatcher
//! keeps — so what survives a kill is exactly what is on disk. The kill points are random
//! (the seed is printed on failure); the sleep before each kill chooses the point, it
//! synchronises nothing.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use loop_core::WorkItemRef;
use loop_core::event::Event;
use loop_core::poll::DeliveryStatus;
use loop_daemon::poller::Poller;
use loop_daemon::poller::seam::{Dispatched, Pipeline, StampFailed};
use loop_daemon::shutdown::Shutdown;
use loop_sim::Sim;
use loop_sim::test_support::Random;
use loop_store::{EventLog, StateLayout, StateStore};

use crate::poll_support::{LABEL, clients_for};

const STATE_ENV: &str = "LOOP_POLL_KILL_STATE";
const SIM_ENV: &str = "LOOP_POLL_KILL_SIM";
const DRAIN_ENV: &str = "LOOP_POLL_KILL_DRAIN";
const REPO: &str = "octo/app";
const ITEMS: u64 = 20;
const COMMENTS: usize = 300;

/// The dispatcher stand-in of the child: a delivery is one appended line `key<TAB>body`.
#[derive(Debug)]
struct FileDispatch {
    log: PathBuf,
}

impl FileDispatch {
    fn delivered(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.split('\t').next().map(str::to_owned))
            .collect()
    }
}

impl Pipeline for FileDispatch {
    async fn dispatch(&self, event: Event) -> Dispatched {
        let key = event.dedup_key().map(|k| k.to_string()).unwrap_or_default();
        if self.delivered().contains(&key) {
            return Dispatched::Enqueued;
        }
        let body = event.comment_body().unwrap_or("<presence>").replace(['\n', '\t'], " ");
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("the delivery log");
        file.write_all(format!("{key}\t{body}\n").as_bytes()).expect("a delivery line");
        Dispatched::Enqueued
    }

    async fn status(&self, key: &str, _refs: &[WorkItemRef]) -> DeliveryStatus {
        if self.delivered().iter().any(|k| k == key) {
            DeliveryStatus::Done
        } else {
            DeliveryStatus::Unhandled
        }
    }

    async fn close(&self, _event: Event) -> Result<(), StampFailed> {
        Ok(())
    }
}

fn delivery_log(state: &Path) -> PathBuf {
    state.join("delivered.log")
}

/// The child: polls back to back until killed, or (drain) until three cycles in a row
/// forward nothing.
#[tokio::test]
#[ignore = "run as a child process by a_poller_killed_at_random_points_delivers_every_authorized_comment_exactly_once"]
async fn poll_kill_child() {
    let (Some(state), Some(sim_url)) = (std::env::var_os(STATE_ENV), std::env::var(SIM_ENV).ok())
    else {
        return;
    };
    let state = PathBuf::from(state);
    let layout = StateLayout::new(&state);
    let store = StateStore::new(layout.clone(), EventLog::new(layout.event_log(), "poll"));
    let yaml = format!(
        "repositories: [{REPO}]\nrouting:\n  authorizedUsers: [ann]\n  control:\n    requireStartCommand: false\n"
    );
    let config = loop_core::config::parse(&yaml).expect("a valid config").config;
    let dispatch = FileDispatch { log: delivery_log(&state) };
    let mut poller = Poller::new(store, clients_for(&sim_url), dispatch, "kill-test");
    let _lock = poller.lock().expect("the poll lock (a killed holder frees it)");
    let (_stop, signal) = tokio::sync::broadcast::channel(1);
    let mut shutdown = Shutdown::new(signal);
    let drain = std::env::var_os(DRAIN_ENV).is_some();
    let mut quiet = 0;
    loop {
        let report = poller.cycle(&config, &mut shutdown).await;
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        quiet = if report.comments_forwarded == 0 { quiet + 1 } else { 0 };
        if drain && quiet >= 3 {
            return;
        }
    }
}

fn child(state: &Path, sim: &Sim, drain: bool) -> Child {
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command
        .args(["--exact", "poll_kill::poll_kill_child", "--ignored", "--test-threads=1"])
        .env(STATE_ENV, state)
        .env(SIM_ENV, sim.url())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if drain {
        command.env(DRAIN_ENV, "1");
    }
    command.spawn().expect("the child poller")
}

/// Runs a child poller until it has nothing left to forward.
async fn drain(state: &Path, sim: &Sim, seed: u64) {
    let child = child(state, sim, true);
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("the drain waiter")
        .expect("the draining child");
    assert!(
        output.status.success(),
        "seed {seed}: the draining poller failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poller_killed_at_random_points_delivers_every_authorized_comment_exactly_once() {
    let seed = Random::clock_seed();
    let mut random = Random::new(seed);
    let sim = Sim::start().await.expect("the simulated GitHub");
    sim.create_repo(REPO).expect("a repository");
    let items: Vec<u64> = (0..ITEMS)
        .map(|_| sim.open_issue(REPO, "ann", "Work", &[LABEL]).expect("an issue"))
        .collect();
    let dir = tempfile::tempdir().expect("a temp dir");
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).expect("the state root");

    // Every item is seen once first: a thread's comments from before first sight are
    // baselined, not delivered.
    drain(&state, &sim, seed).await;
    // Comment id → (author, body), for every comment posted.
    let mut posted: BTreeMap<u64, (String, String)> = BTreeMap::new();
    let mut kills = 0;
    while posted.len() < COMMENTS {
        let mut poller = child(&state, &sim, false);
        let batch = (10 + random.below(20)) as usize;
        for _ in 0..batch.min(COMMENTS - posted.len()) {
            let number = items[random.below(ITEMS) as usize];
            let (author, body) = match random.below(10) {
                0 => ("eve", format!("stranger {}", posted.len())),
                1 => ("ann", "the-loop pause".to_owned()),
                2 => ("ann", "the-loop start".to_owned()),
                _ => ("ann", format!("instruction {}", posted.len())),
            };
            let id = sim.comment(REPO, number, author, &body).expect("a comment");
            posted.insert(id, (author.to_owned(), body));
        }
        tokio::time::sleep(Duration::from_millis(random.below(400))).await;
        poller.kill().expect("SIGKILL the child");
        poller.wait().expect("the killed child is reaped");
        kills += 1;
    }
    drain(&state, &sim, seed).await;

    let log = std::fs::read_to_string(delivery_log(&state)).unwrap_or_default();
    let mut delivered: BTreeMap<String, usize> = BTreeMap::new();
    for line in log.lines() {
        let key = line.split('\t').next().unwrap_or_default().to_owned();
        *delivered.entry(key).or_default() += 1;
    }
    let twice: Vec<&String> = delivered.iter().filter(|(_, n)| **n > 1).map(|(k, _)| k).collect();
    assert!(
        twice.is_empty(),
        "seed {seed}, {kills} kills: {} delivered twice, e.g. {:?}",
        twice.len(),
        &twice[..twice.len().min(5)]
    );
    for (id, (author, body)) in &posted {
        let key = format!("issue_comment:{}:created", loop_sim::world::node_id("IC", *id));
        let expected = usize::from(author == "ann");
        assert_eq!(
            delivered.get(&key).copied().unwrap_or(0),
            expected,
            "seed {seed}, {kills} kills: comment {id} by {author} ({body})"
        );
    }
}

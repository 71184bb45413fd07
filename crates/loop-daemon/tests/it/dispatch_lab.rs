//! The dispatcher's test bench: the real receiver and dispatcher, `loop-sim` as GitHub
//! (webhooks emitted by the simulator, signed), a private tmux server and the stand-in
//! harness recording what is pasted into it. Each lab has its own temp dir, state root,
//! tmux socket and ports.
//!
//! [`Lab::settle`] waits for everything a user action caused: the simulator's webhooks
//! answered, the receiver's journal processed up to a sentinel delivery (processing is
//! in journal order), and the dispatcher idle — repeated while the-loop's own comments
//! cause new deliveries.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use loop_core::WorkItemRef;
use loop_daemon::config_source::ConfigSource;
use loop_daemon::dispatcher::{Dispatcher, DispatcherParts};
use loop_daemon::metrics::Metrics;
use loop_daemon::receiver::{Dispatch, Judged, Secret};
use loop_github::{GithubClient, GithubSettings, TokenSource};
use loop_sessions::plugin::PluginSite;
use loop_sessions::trust::ClaudeFiles;
use loop_sessions::{CommandHarness, Tmux, TmuxSettings, TmuxSocket};
use loop_sim::test_support::{
    PATIENCE, last_lines, pastes_logged, read_lines, stand_in, wait_for_async,
};
use loop_sim::{Sim, WebhookTarget};
use loop_store::{EventLog, StateLayout, StateStore};
use serde_json::Value;
use tokio::sync::{oneshot, watch};

use crate::common::{SECRET, request};

pub const REPO: &str = "octo/app";
pub const LABEL: &str = "the-loop: auto-execute";
/// In `routing.authorizedUsers`.
pub const OWNER: &str = "octocat";
/// Not authorized.
pub const STRANGER: &str = "mallory";
const SENTINEL_ACTION: &str = "lab-sentinel";

/// Hands judged events to the dispatcher and counts sentinels (which it keeps).
#[derive(Debug)]
struct Counting {
    dispatcher: Dispatcher,
    sentinels: Arc<watch::Sender<u64>>,
}

impl Dispatch for Counting {
    fn dispatch(&self, judged: Judged) {
        if judged.event.action.as_deref() == Some(SENTINEL_ACTION) {
            self.sentinels.send_modify(|n| *n += 1);
            return;
        }
        self.dispatcher.dispatch(judged);
    }

    fn mark_when_done(&self, marks: Arc<loop_daemon::receiver::InboxMarks>) {
        self.dispatcher.mark_when_done(marks);
    }
}

/// A running the-loop (receiver + dispatcher) against a simulated GitHub.
#[derive(Debug)]
pub struct Lab {
    pub dir: tempfile::TempDir,
    pub sim: Sim,
    pub dispatcher: Dispatcher,
    /// What `GET /metrics` on the receiver's port reports, across restarts.
    pub metrics: Metrics,
    receiver: Option<RunningReceiver>,
    sentinels: watch::Receiver<u64>,
    sentinels_tx: Arc<watch::Sender<u64>>,
    sent: u64,
    extra: String,
    harness: Harness,
    tmux_binary: Option<PathBuf>,
}

/// What the sessions run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Harness {
    /// The stand-in, recording what is pasted.
    StandIn,
    /// A program that never starts reading input (a harness stuck at start).
    Stuck,
    /// The stand-in, started only once [`Lab::open_gate`] was called: a spawn holds its
    /// dispatch (and its concurrency slot) until then.
    Gated,
    /// The stand-in under the name `claude`, with Claude's files handed to the
    /// dispatcher: `$HOME` is the lab's `home/`, `$CLAUDE_CONFIG_DIR` its `claude/`.
    Claude,
}

#[derive(Debug)]
struct RunningReceiver {
    addr: std::net::SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Lab {
    /// A lab whose config is the lab's defaults plus `extra`, YAML appended inside the
    /// `routing:` block (so indented by two spaces).
    pub async fn start(extra: &str) -> Self {
        Self::start_with(extra, Harness::StandIn).await
    }

    /// A lab whose sessions run `harness`.
    pub async fn start_with(extra: &str, harness: Harness) -> Self {
        Self::start_full(extra, harness, None).await
    }

    /// A lab whose tmux commands run `tmux_binary` (a wrapper around tmux).
    pub async fn start_with_tmux(extra: &str, tmux_binary: PathBuf) -> Self {
        Self::start_full(extra, Harness::StandIn, Some(tmux_binary)).await
    }

    async fn start_full(extra: &str, harness: Harness, tmux_binary: Option<PathBuf>) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        let sim = Sim::start().await.expect("the simulator starts");
        sim.create_repo(REPO).expect("a repo");
        let (sentinels_tx, sentinels) = watch::channel(0);
        let sentinels_tx = Arc::new(sentinels_tx);
        let dispatcher =
            open_dispatcher(dir.path(), &sim, extra, harness, tmux_binary.as_deref()).await;
        let mut lab = Self {
            dir,
            sim,
            dispatcher,
            metrics: Metrics::new(),
            receiver: None,
            sentinels,
            sentinels_tx,
            sent: 0,
            extra: extra.to_owned(),
            harness,
            tmux_binary,
        };
        lab.start_receiver().await;
        lab
    }

    async fn start_receiver(&mut self) {
        let counting =
            Counting { dispatcher: self.dispatcher.clone(), sentinels: self.sentinels_tx.clone() };
        let secret = Secret::from_value(Some(SECRET));
        let receiver = crate::common::standalone_receiver(
            &self.config_path(),
            self.dispatcher.store(),
            secret,
        )
        .expect("the receiver opens")
        .with_dispatch(Arc::new(counting))
        .with_existence(Arc::new(self.dispatcher.clone()))
        .with_metrics(self.metrics.clone())
        .with_routes(self.metrics.router());
        self.dispatcher.count_in(self.metrics.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port 0");
        let addr = listener.local_addr().expect("an address");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = receiver.run(listener, async move {
                let _ = stopped.await;
            });
            served.await.expect("the receiver serves");
        });
        self.sim.set_webhook(Some(WebhookTarget {
            url: format!("http://{addr}/gh-webhook"),
            secret: Some(SECRET.to_owned()),
        }));
        self.receiver = Some(RunningReceiver { addr, stop, task });
    }

    /// Stops the receiver and the dispatcher and starts both again over the same state:
    /// a daemon restart.
    pub async fn restart(&mut self) {
        self.restart_with_in_flight(&[]).await;
    }

    /// A restart after a `kill -9` that struck once `keys` had had their effects but
    /// before the delivery ledger settled them: their marks are put back in flight
    /// between the stop and the start, as the dead process would have left them.
    pub async fn restart_with_in_flight(&mut self, keys: &[&str]) {
        self.settle().await;
        let abandoned = self.stop(PATIENCE).await;
        assert!(abandoned.is_empty(), "a settled lab abandons nothing: {abandoned:?}");
        if !keys.is_empty() {
            let store = self.store();
            let (mut ledger, _) = store.load_delivery_ledger(1000).expect("the ledger loads");
            for key in keys {
                ledger.release(key);
                ledger.take_in(key, jiff::Timestamp::now());
            }
            store.save_delivery_ledger(&ledger).expect("the ledger is written");
        }
        self.reopen().await;
    }

    /// A restart that does not wait for the work in hand: the dispatcher's busy jobs are
    /// cut off after `within`, as a `kill -9` would cut them (their tmux sessions and
    /// the inbox journal stay as they were). Returns the keys still queued.
    pub async fn restart_cut_short(&mut self, within: Duration) -> Vec<String> {
        let abandoned = self.stop(within).await;
        self.reopen().await;
        abandoned
    }

    async fn stop(&mut self, within: Duration) -> Vec<String> {
        self.sim.set_webhook(None);
        if let Some(running) = self.receiver.take() {
            let _ = running.stop.send(());
            tokio::time::timeout(PATIENCE, running.task).await.expect("it stops").expect("joined");
        }
        self.dispatcher.shutdown(within).await
    }

    async fn reopen(&mut self) {
        self.dispatcher = open_dispatcher(
            self.dir.path(),
            &self.sim,
            &self.extra,
            self.harness,
            self.tmux_binary.as_deref(),
        )
        .await;
        self.start_receiver().await;
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("cli-config.yaml")
    }

    /// Rewrites the config file with `extra` in place of the lab's (the receiver reads
    /// it again at its next delivery: a hot reload).
    pub fn rewrite_config(&self, extra: &str) {
        std::fs::write(self.config_path(), config_text(self.dir.path(), &self.sim, extra))
            .expect("the config");
    }

    /// Lets [`Harness::Gated`] sessions start.
    pub fn open_gate(&self) {
        std::fs::write(self.dir.path().join("gate"), "").expect("the gate");
    }

    pub fn layout(&self) -> StateLayout {
        StateLayout::new(self.dir.path().join("state"))
    }

    pub fn store(&self) -> StateStore {
        StateStore::new(self.layout(), EventLog::disabled())
    }

    pub fn item(&self, number: u64) -> WorkItemRef {
        format!("github:{REPO}#{number}").parse().expect("a valid ref")
    }

    /// Waits until everything the actions so far caused has been handled.
    pub async fn settle(&mut self) {
        loop {
            let before = self.sim.deliveries().len();
            tokio::time::timeout(PATIENCE, self.sim.webhooks_settled())
                .await
                .expect("webhooks answered");
            self.sentinel().await;
            tokio::time::timeout(PATIENCE, self.dispatcher.idle())
                .await
                .expect("the dispatcher idles");
            if self.sim.deliveries().len() == before {
                return;
            }
        }
    }

    /// Waits until the receiver has handed every delivery so far to the dispatcher,
    /// without waiting for the dispatches it queued (a gated spawn holds them).
    pub async fn received(&mut self) {
        tokio::time::timeout(PATIENCE, self.sim.webhooks_settled())
            .await
            .expect("webhooks answered");
        self.sentinel().await;
    }

    /// Posts a sentinel delivery and waits until the receiver has processed it.
    async fn sentinel(&mut self) {
        self.sent += 1;
        let body = serde_json::json!({
            "action": SENTINEL_ACTION,
            "repository": {"full_name": REPO},
            "issue": {"number": 999_999},
            "sender": {"login": OWNER},
        })
        .to_string();
        let signature = loop_sim::webhook::sign(SECRET.as_bytes(), body.as_bytes());
        let id = format!("sentinel-{}", self.sent);
        let addr = self.receiver.as_ref().expect("the receiver runs").addr;
        let headers = [
            ("X-GitHub-Event", "issues"),
            ("X-GitHub-Delivery", id.as_str()),
            ("X-Hub-Signature-256", signature.as_str()),
        ];
        let answer = request(addr, "POST", "/gh-webhook", &headers, body.as_bytes()).await;
        assert_eq!(answer.status, 202, "{answer:?}");
        let sent = self.sent;
        tokio::time::timeout(PATIENCE, self.sentinels.wait_for(|n| *n >= sent))
            .await
            .expect("the sentinel is processed")
            .expect("the counter lives");
    }

    /// The receiver's address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.receiver.as_ref().expect("the receiver runs").addr
    }

    /// Opens a labelled issue by the owner; returns its number.
    pub fn open_labelled_issue(&self) -> u64 {
        self.sim.open_issue(REPO, OWNER, "Fix the widget", &[LABEL]).expect("an issue")
    }

    pub fn comment(&self, number: u64, author: &str, body: &str) -> u64 {
        self.sim.comment(REPO, number, author, body).expect("a comment")
    }

    /// Opens a labelled issue and starts it: a spawned session.
    pub async fn started_issue(&mut self) -> u64 {
        let number = self.open_labelled_issue();
        self.comment(number, OWNER, "the-loop start");
        self.settle().await;
        assert_eq!(self.named("session.spawned").len(), 1, "{:#?}", self.events());
        number
    }

    /// What the stand-in recorded as submitted, in order — once it has recorded every
    /// message the event log says was pasted ([`pastes_logged`]).
    pub async fn pasted(&self) -> Vec<String> {
        let expected = pastes_logged(&self.events());
        wait_for_async("the harness to record every pasted message", || {
            let pasted: Vec<String> = read_lines(&self.dir.path().join("messages.jsonl"))
                .into_iter()
                .map(|line| line["text"].as_str().expect("text").to_owned())
                .collect();
            if pasted.len() >= expected {
                Ok(pasted)
            } else {
                Err(format!("{} of {expected} recorded: {pasted:#?}", pasted.len()))
            }
        })
        .await
    }

    pub fn launches(&self) -> Vec<Value> {
        read_lines(&self.dir.path().join("launches.jsonl")).values
    }

    pub fn events(&self) -> Vec<Value> {
        read_lines(self.layout().event_log()).values
    }

    pub fn named(&self, name: &str) -> Vec<Value> {
        self.events().into_iter().filter(|e| e["event"] == name).collect()
    }

    /// The `reason`s of every `dispatch.dropped` and `control.rejected` line.
    pub fn refusals(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter(|e| e["event"] == "dispatch.dropped" || e["event"] == "control.rejected")
            .filter_map(|e| e["reason"].as_str().map(str::to_owned))
            .collect()
    }

    /// The reactions on a comment, in order.
    pub fn reactions_on_comment(&self, number: u64, comment: u64) -> Vec<String> {
        let world = self.sim.world();
        let item = world.item(REPO, number).expect("the item");
        item.comments
            .iter()
            .find(|c| c.id == comment)
            .map(|c| c.reactions.iter().map(|r| r.content.clone()).collect())
            .unwrap_or_default()
    }

    /// The-loop's own comments on an item.
    pub fn announcements(&self, number: u64) -> Vec<String> {
        self.sim.comments_by(REPO, number, self.sim.viewer())
    }

    pub fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-S")
            .arg(self.dir.path().join("tmux.sock"))
            .args(args)
            .output()
            .expect("tmux runs")
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

fn config_text(dir: &Path, sim: &Sim, extra: &str) -> String {
    format!(
        "state:\n  root: {root}\nintegrations:\n  github:\n    api:\n      baseUrl: {base}\nrouting:\n  enabled: true\n  authorizedUsers: [{OWNER}]\n  spawnWorkdir: {work}\n{extra}",
        root = dir.join("state").display(),
        base = sim.url(),
        work = dir.join("work").display(),
    )
}

async fn open_dispatcher(
    dir: &Path,
    sim: &Sim,
    extra: &str,
    which: Harness,
    tmux_binary: Option<&Path>,
) -> Dispatcher {
    std::fs::create_dir_all(dir.join("work")).expect("a work dir");
    std::fs::create_dir_all(dir.join("scratch")).expect("a scratch dir");
    std::fs::write(dir.join("cli-config.yaml"), config_text(dir, sim, extra)).expect("the config");
    let (config, _) = ConfigSource::open(dir.join("cli-config.yaml")).expect("the config loads");
    let config = config.current().clone();
    let layout = StateLayout::new(dir.join("state"));
    let store = StateStore::new(layout.clone(), EventLog::new(layout.event_log(), "gh-webhook"));
    let mut settings = GithubSettings::for_host("github.com");
    settings.base_url = Some(sim.url());
    settings.max_retries = 0;
    let tokens = TokenSource::new("github.com", &[], [("GITHUB_TOKEN".to_owned(), "t".to_owned())]);
    let github = GithubClient::new(settings, tokens).expect("a client");
    let mut tmux = TmuxSettings::new(TmuxSocket::Path(dir.join("tmux.sock")), dir.join("scratch"));
    tmux.config_file = Some(PathBuf::from("/dev/null"));
    tmux.command_timeout = Duration::from_secs(20);
    if let Some(binary) = tmux_binary {
        tmux.binary = binary.to_owned();
    }
    let stand_in = stand_in().display().to_string();
    let record = dir.join("messages.jsonl").display().to_string();
    let launches = dir.join("launches.jsonl").display().to_string();
    let argv = |extra: &[&str]| -> Vec<String> {
        let mut argv = vec![
            stand_in.clone(),
            "--record".into(),
            record.clone(),
            "--launches".into(),
            launches.clone(),
        ];
        argv.extend(extra.iter().map(|s| (*s).to_owned()));
        argv
    };
    let harness = match which {
        Harness::StandIn => CommandHarness {
            name: "stand-in".into(),
            fresh: argv(&["--session-id", "{session_id}"]),
            resume: Some(argv(&["--resume", "{session_id}"])),
            transcript: Some(record.clone()),
        },
        Harness::Stuck => CommandHarness {
            name: "stuck".into(),
            fresh: vec!["sleep".into(), "600".into()],
            resume: None,
            transcript: None,
        },
        Harness::Gated => {
            use std::os::unix::fs::PermissionsExt;
            let script = dir.join("gated-harness");
            let text = format!(
                "#!/bin/sh\nwhile [ ! -e '{gate}' ]; do sleep 0.05; done\nexec '{stand_in}' \"$@\"\n",
                gate = dir.join("gate").display(),
            );
            std::fs::write(&script, text).expect("the gated harness");
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
                .expect("executable");
            let mut fresh = argv(&["--session-id", "{session_id}"]);
            fresh[0] = script.display().to_string();
            CommandHarness {
                name: "gated".into(),
                fresh,
                resume: None,
                transcript: Some(record.clone()),
            }
        }
        Harness::Claude => CommandHarness {
            name: "claude".into(),
            fresh: argv(&["--session-id", "{session_id}"]),
            resume: Some(argv(&["--resume", "{session_id}"])),
            transcript: Some(record.clone()),
        },
    };
    let claude_files = (which == Harness::Claude).then(|| {
        let config_dir = dir.join("claude");
        std::fs::create_dir_all(dir.join("home")).expect("a home");
        ClaudeFiles::locate(&dir.join("home"), config_dir.to_str())
    });
    let plugin = (which == Harness::Claude).then(|| {
        PluginSite::under(
            &dir.join("state"),
            PathBuf::from("/usr/local/bin/the-loop"),
            "http://127.0.0.1:4114/mcp".to_owned(),
        )
    });
    Dispatcher::open(DispatcherParts {
        config,
        store,
        github: Some(github),
        tmux: Arc::new(Tmux::new(tmux)),
        harness: Arc::new(harness),
        claude_files,
        plugin,
    })
    .await
    .expect("the dispatcher opens")
}

impl Lab {
    /// POSTs a delivery the simulator already sent, again, as GitHub's redelivery does.
    pub async fn redeliver(&mut self, delivery: &loop_sim::Delivery) {
        let addr = self.receiver.as_ref().expect("the receiver runs").addr;
        let mut headers = vec![
            ("X-GitHub-Event", delivery.event.as_str()),
            ("X-GitHub-Delivery", delivery.id.as_str()),
        ];
        if let Some(signature) = &delivery.signature {
            headers.push(("X-Hub-Signature-256", signature.as_str()));
        }
        let answer = request(addr, "POST", "/gh-webhook", &headers, delivery.body.as_bytes()).await;
        assert_eq!(answer.status, 202, "{answer:?}");
        self.settle().await;
    }

    /// The last delivery the simulator sent for `event`.
    pub fn last_delivery(&self, event: &str) -> loop_sim::Delivery {
        self.sim.deliveries().into_iter().rev().find(|d| d.event == event).expect("a delivery")
    }

    /// The dedup key the dispatcher logged for the last line named `name`.
    pub fn key_of_last(&self, name: &str) -> String {
        let line = self.named(name).pop().unwrap_or_else(|| panic!("a `{name}` line"));
        line["delivery_id"].as_str().expect("a delivery id").to_owned()
    }

    /// Kills the harness process of a session and waits until tmux has seen it die,
    /// leaving a dead pane (tmux reaps the process on its own time: an event handled
    /// before then would still find the pane live).
    pub async fn kill_harness(&self, number: u64) {
        let target = self.item(number).tmux_session();
        let output = self.tmux(&["list-panes", "-t", &format!("={target}"), "-F", "#{pane_pid}"]);
        let pid = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        assert!(!pid.is_empty(), "a pane pid for {target}");
        let killed = Command::new("kill").args(["-9", &pid]).status().expect("kill runs");
        assert!(killed.success());
        wait_for_async(&format!("the pane of {target} to die"), || {
            if self.harness_alive(number) { Err("tmux still shows it live") } else { Ok(()) }
        })
        .await;
    }

    /// Whether the session's pane runs a live harness.
    pub fn harness_alive(&self, number: u64) -> bool {
        let target = self.item(number).tmux_session();
        let output = self.tmux(&["list-panes", "-t", &format!("={target}"), "-F", "#{pane_dead}"]);
        output.status.success() && String::from_utf8_lossy(&output.stdout).trim() == "0"
    }

    /// Polls the event log until it holds `count` lines named `name`.
    pub async fn wait_for_lines(&self, name: &str, count: usize) -> Vec<Value> {
        wait_for_async(&format!("{count} `{name}` lines"), || {
            let lines = self.named(name);
            if lines.len() >= count { Ok(lines) } else { Err(last_lines(&self.events())) }
        })
        .await
    }

    /// Whether the tmux session exists at all.
    pub fn tmux_session_exists(&self, number: u64) -> bool {
        let target = self.item(number).tmux_session();
        self.tmux(&["has-session", "-t", &format!("={target}")]).status.success()
    }
}

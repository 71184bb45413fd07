//! A poller under test: the simulated GitHub on port 0, its own temp state root, and an
//! in-memory stand-in for the dispatcher behind the poller's seam.
//!
//! The stand-in keeps what a real dispatcher would say about each delivery (by dedup
//! key), executes `start`/`stop` from authorized actors the way the dispatcher's control
//! path does (records the command; a start spawns), refuses a presence on an unstarted
//! item as `awaiting-start`, and stamps `ended` on close. How ordinary deliveries fare is
//! set per test ([`Mode`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use jiff::Timestamp;
use loop_core::config::Config;
use loop_core::control::{Command, Parsed, Vocabulary};
use loop_core::event::Event;
use loop_core::poll::DeliveryStatus;
use loop_core::record::{CommentId, Control, ControlSource, Ended};
use loop_core::{Login, WorkItemRef};
use loop_daemon::poller::seam::{Dispatched, Pipeline, StampFailed};
use loop_daemon::poller::{CycleReport, GithubClients, Poller};
use loop_daemon::shutdown::Shutdown;
use loop_github::{GithubClient, GithubSettings, TokenSource};
use loop_sim::Sim;
use loop_store::event_log::read::{EventRecord, read_all};
use loop_store::{EventLog, StateLayout, StateStore, StoreError};
use tokio::sync::broadcast;

pub const LABEL: &str = "the-loop: auto-execute";
pub const VERSION: &str = "0.1.0-test";

/// How the stand-in treats an ordinary delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Accepted and delivered before the next cycle.
    Deliver,
    /// Refused at once (the attempt is spent).
    Fail,
    /// Accepted and still in flight at every later cycle.
    Hang,
    /// Settled at once with this outcome.
    Settle(String),
    /// Accepted, then settled with this outcome before the next cycle (asynchronously).
    SettleLater(String),
}

#[derive(Debug)]
struct Inner {
    mode: Mode,
    statuses: HashMap<String, DeliveryStatus>,
    dispatched: Vec<(String, Event)>,
    closed: Vec<Event>,
    spawned: Vec<WorkItemRef>,
    /// Signal a stop when an event about this item number is dispatched.
    stop_on: Option<u64>,
    /// A file whose existence is noted at every dispatch ([`StandIn::watch_file`]).
    watched: Option<std::path::PathBuf>,
    seen_existing: Vec<bool>,
    /// The refs every status question named, by dedup key (the last question wins).
    asked_refs: HashMap<String, Vec<WorkItemRef>>,
    /// The close path fails (its stamp cannot be written).
    refuse_closes: bool,
}

/// The in-memory dispatcher. Clones share their state (it survives a poller restart).
#[derive(Debug, Clone)]
pub struct StandIn {
    inner: Arc<Mutex<Inner>>,
    store: StateStore,
    authorized: Vec<Login>,
    vocabulary: Vocabulary,
    require_start: bool,
    stop: broadcast::Sender<()>,
}

impl StandIn {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn set_mode(&self, mode: Mode) {
        self.lock().mode = mode;
    }

    pub fn stop_on(&self, number: u64) {
        self.lock().stop_on = Some(number);
    }

    /// Makes the close path fail, as when the `ended` stamp cannot be written.
    pub fn refuse_closes(&self) {
        self.lock().refuse_closes = true;
    }

    /// The refs the poller named when it last asked about the delivery `key`.
    pub fn asked_refs(&self, key: &str) -> Vec<WorkItemRef> {
        self.lock().asked_refs.get(key).cloned().unwrap_or_default()
    }

    /// Notes, at every later dispatch, whether `path` exists.
    pub fn watch_file(&self, path: std::path::PathBuf) {
        self.lock().watched = Some(path);
    }

    /// Whether the watched file existed, per dispatch since [`StandIn::watch_file`].
    pub fn watched_existed(&self) -> Vec<bool> {
        self.lock().seen_existing.clone()
    }

    /// Every event handed over, with its dedup key, in order.
    pub fn dispatched(&self) -> Vec<(String, Event)> {
        self.lock().dispatched.clone()
    }

    /// The comment bodies handed over, in order.
    pub fn comment_bodies(&self) -> Vec<String> {
        self.dispatched()
            .into_iter()
            .filter_map(|(_, e)| e.comment_body().map(str::to_owned))
            .collect()
    }

    /// How many presences (`labeled`) were handed over.
    pub fn presences(&self) -> usize {
        self.dispatched().iter().filter(|(_, e)| e.action.as_deref() == Some("labeled")).count()
    }

    pub fn spawned(&self) -> Vec<WorkItemRef> {
        self.lock().spawned.clone()
    }

    pub fn closed(&self) -> Vec<Event> {
        self.lock().closed.clone()
    }

    /// Marks a delivery as the webhook ingress already delivered it (hybrid mode).
    pub fn mark_done(&self, key: &str) {
        self.lock().statuses.insert(key.to_owned(), DeliveryStatus::Done);
    }

    fn last_command(&self, item: &WorkItemRef) -> Option<Command> {
        self.store.read_section::<Control>(item).ok()?.into_value().map(|c| c.command)
    }

    fn record(&self, item: &WorkItemRef, command: Command, actor: &Login) {
        let control = Control {
            command,
            source: ControlSource::Comment,
            actor: Some(actor.clone()),
            requested_at: Timestamp::now(),
            note: None,
            instance: None,
            delivery_id: None,
        };
        self.store.write_section(item, Some(&control)).expect("the control record");
    }

    fn handle(&self, key: &str, event: &Event) -> Dispatched {
        let number = event.entity.as_ref().and_then(|e| e.number);
        let Some(item) = event.repository.as_ref().zip(number).map(|(repo, n)| repo.item(n)) else {
            return Dispatched::Failed("no work item".into());
        };
        if event.action.as_deref() == Some("labeled") {
            let armed = self.last_command(&item).is_some_and(Command::arms);
            if self.require_start && !armed {
                return Dispatched::Settled("awaiting-start".into());
            }
            let answer = self.by_mode(key);
            if answer == Dispatched::Enqueued {
                self.lock().spawned.push(item);
            }
            return answer;
        }
        if let (Some(body), Some(actor)) = (event.comment_body(), event.actor.login())
            && self.authorized.contains(actor)
            && let Parsed::Command { command, .. } = self.vocabulary.parse(body)
        {
            self.record(&item, command, actor);
            if command == Command::Start {
                self.lock().spawned.push(item);
                self.lock().statuses.insert(key.to_owned(), DeliveryStatus::Done);
                return Dispatched::Enqueued;
            }
            self.lock()
                .statuses
                .insert(key.to_owned(), DeliveryStatus::Settled("control-executed".into()));
            return Dispatched::Settled("control-executed".into());
        }
        self.by_mode(key)
    }

    /// An ordinary delivery, as the test's [`Mode`] says.
    fn by_mode(&self, key: &str) -> Dispatched {
        let mode = self.lock().mode.clone();
        match mode {
            Mode::Deliver => {
                self.lock().statuses.insert(key.to_owned(), DeliveryStatus::Done);
                Dispatched::Enqueued
            }
            Mode::Fail => Dispatched::Failed("the session is gone".into()),
            Mode::Hang => {
                self.lock().statuses.insert(key.to_owned(), DeliveryStatus::InFlight);
                Dispatched::Enqueued
            }
            Mode::Settle(outcome) => {
                self.lock()
                    .statuses
                    .insert(key.to_owned(), DeliveryStatus::Settled(outcome.clone()));
                Dispatched::Settled(outcome)
            }
            Mode::SettleLater(outcome) => {
                self.lock().statuses.insert(key.to_owned(), DeliveryStatus::Settled(outcome));
                Dispatched::Enqueued
            }
        }
    }
}

impl Pipeline for StandIn {
    async fn dispatch(&self, event: Event) -> Dispatched {
        let key = event.dedup_key().map(|k| k.to_string()).unwrap_or_default();
        self.lock().dispatched.push((key.clone(), event.clone()));
        let watched = self.lock().watched.clone();
        if let Some(path) = watched {
            self.lock().seen_existing.push(path.exists());
        }
        let answer = self.handle(&key, &event);
        let number = event.entity.as_ref().and_then(|e| e.number);
        if number.is_some() && self.lock().stop_on == number {
            let _ = self.stop.send(());
        }
        answer
    }

    async fn status(&self, key: &str, refs: &[WorkItemRef]) -> DeliveryStatus {
        let mut inner = self.lock();
        inner.asked_refs.insert(key.to_owned(), refs.to_vec());
        inner.statuses.get(key).cloned().unwrap_or(DeliveryStatus::Unhandled)
    }

    async fn close(&self, event: Event) -> Result<(), StampFailed> {
        let item = event.closed_item().expect("the poller closes only what it confirmed closed");
        let failed = |store| StampFailed { item: item.clone(), store };
        if self.lock().refuse_closes {
            let refused = std::io::Error::other("refused by the test");
            let path = std::path::PathBuf::from("ended");
            return Err(failed(StoreError::Io { action: "write", path, source: refused }));
        }
        let entity = event.entity.clone().unwrap_or_default();
        let ended = Ended {
            state: if entity.merged == Some(true) { "merged".into() } else { "closed".into() },
            kind: if entity.is_pull_request { "pull-request".into() } else { "issue".into() },
            reason: None,
            at: Timestamp::now(),
            source: "poll".into(),
            actor: event.actor.login().cloned(),
        };
        self.store.write_section(&item, Some(&ended)).map_err(failed)?;
        self.store.write_section::<Control>(&item, None).map_err(failed)?;
        self.lock().closed.push(event);
        Ok(())
    }
}

/// A simulated GitHub, a state root, a config and a poller over them.
#[derive(Debug)]
pub struct Bench {
    pub sim: Sim,
    /// Kept so the state root lives as long as the bench.
    _dir: tempfile::TempDir,
    pub store: StateStore,
    pub config: Config,
    pub stand_in: StandIn,
    pub poller: Poller<StandIn>,
    stop: broadcast::Sender<()>,
}

impl Bench {
    /// `repos` are created on the simulator and listed in `repositories`; `extra` is YAML
    /// appended (inside `routing:` when indented) to a config authorizing `ann`.
    pub async fn new(repos: &[&str], extra: &str) -> Self {
        Self::with_authorized(repos, "[ann]", extra).await
    }

    /// As [`Bench::new`], with `routing.authorizedUsers` set to `authorized` (YAML).
    pub async fn with_authorized(repos: &[&str], authorized: &str, extra: &str) -> Self {
        let sim = Sim::start().await.expect("the simulated GitHub");
        for repo in repos {
            sim.create_repo(repo).expect("a repository");
        }
        let dir = tempfile::tempdir().expect("a temp dir");
        let yaml = format!(
            "repositories: [{}]\nrouting:\n  authorizedUsers: {authorized}\n{extra}",
            repos.join(", ")
        );
        let config = loop_core::config::parse(&yaml).expect("a valid config").config;
        let layout = StateLayout::new(dir.path().join("state"));
        let events = EventLog::new(layout.event_log(), "poll");
        let store = StateStore::new(layout, events);
        let (stop, _) = broadcast::channel(4);
        let stand_in = StandIn {
            inner: Arc::new(Mutex::new(Inner {
                mode: Mode::Deliver,
                statuses: HashMap::new(),
                dispatched: Vec::new(),
                closed: Vec::new(),
                spawned: Vec::new(),
                stop_on: None,
                watched: None,
                seen_existing: Vec::new(),
                asked_refs: HashMap::new(),
                refuse_closes: false,
            })),
            store: store.clone(),
            authorized: config.routing.authorized_users.clone(),
            vocabulary: Vocabulary::from(&config.routing.control),
            require_start: loop_core::control::start_required(&config.routing.control),
            stop: stop.clone(),
        };
        let poller = Poller::new(store.clone(), clients(&sim), stand_in.clone(), VERSION);
        Self { sim, _dir: dir, store, config, stand_in, poller, stop }
    }

    /// One cycle; a stop is signalled only when the stand-in was told to.
    pub async fn cycle(&mut self) -> CycleReport {
        let mut shutdown = Shutdown::new(self.stop.subscribe());
        self.poller.cycle(&self.config, &mut shutdown).await
    }

    /// A shutdown signal the stand-in fires when told to ([`StandIn::stop_on`]).
    pub fn shutdown(&self) -> Shutdown {
        Shutdown::new(self.stop.subscribe())
    }

    /// One cycle with a stop already requested when it starts.
    pub async fn cycle_stopped(&mut self) -> CycleReport {
        let mut shutdown = Shutdown::new(self.stop.subscribe());
        let _ = self.stop.send(());
        self.poller.cycle(&self.config, &mut shutdown).await
    }

    /// A fresh poller process over the same state root and the same dispatcher: nothing
    /// in memory survives (no ETags, no remembered threads).
    pub fn restart(&mut self) {
        self.poller =
            Poller::new(self.store.clone(), clients(&self.sim), self.stand_in.clone(), VERSION);
    }

    /// The event log's lines named `name`.
    pub fn events(&self, name: &str) -> Vec<EventRecord> {
        read_all(self.store.layout().event_log())
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.event() == name)
            .collect()
    }

    pub fn open_issue(&self, repo: &str, author: &str) -> u64 {
        self.sim.open_issue(repo, author, "Do the thing", &[LABEL]).expect("an issue")
    }

    /// A labelled pull request by `ann` whose description closes `issue`.
    pub fn open_closing_pr(&self, repo: &str, issue: u64) -> u64 {
        self.sim
            .open_pull_request(repo, "ann", "Fix", &format!("Closes #{issue}"), "fix", &[LABEL])
            .expect("a pull request")
    }

    pub fn item(&self, repo: &str, number: u64) -> WorkItemRef {
        format!("github:{repo}#{number}").parse().expect("a ref")
    }
}

/// The ledger key of the simulator's conversation comment `id`: its node id.
pub fn conversation(id: u64) -> CommentId {
    CommentId::new(loop_sim::world::node_id("IC", id))
}

/// A client for the simulator, as `integrations.github.api.baseUrl` would make it.
pub fn clients(sim: &Sim) -> GithubClients {
    clients_for(&sim.url())
}

/// A client for the simulator at `url`.
pub fn clients_for(url: &str) -> GithubClients {
    let mut settings = GithubSettings::for_host("github.com");
    settings.base_url = Some(url.to_owned());
    let tokens = TokenSource::new(
        "github.com",
        &["GH_TOKEN".to_owned()],
        [("GH_TOKEN".to_owned(), "t".to_owned())],
    );
    GithubClients::new([GithubClient::new(settings, tokens).expect("a client")])
}

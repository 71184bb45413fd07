//! The poller: the no-public-URL ingress (reference poller-provider, seeds 000, 001, 004).
//!
//! Each cycle lists every scope's labelled open items with one conditional request per
//! repository (a 304 costs no rate limit), reads the comment surfaces only of items whose
//! `updated_at` moved, that were never read, or on the periodic full sweep, asks for the
//! linked issues of changed pull requests in one batched GraphQL request per host,
//! and walks each item through the ledger rules of [`loop_core::poll`], handing comments,
//! presences and closures to the pipeline both ingresses share ([`seam::Pipeline`]).
//! After a complete, uninterrupted walk it reconciles closures ([`closure`]). Every item's
//! ledger is on disk before the next item starts, so a `kill -9` anywhere loses at most
//! the attempt in flight, which the dispatcher's status answers on the next cycle.
//!
//! What makes a cycle incremental — the validators of the conditional requests, the
//! threads and linked issues last read, the time of the last sweep — is kept in
//! `local/poll-cache.json` ([`loop_store::poll_cache`]), read at the first cycle and
//! written once per cycle when it changed, so a restarted poller (or the next
//! `poll --once`) is warm: its first quiet cycle is one 304 per scope. It is a cache, never
//! the authority on what was seen (the portable ledger is): a cache written for another
//! configuration is not used, and GitHub checks every validator.
//!
//! It decides nothing an event means (the dispatcher does) and never closes on doubt.
//! The process around it — pidfile lock, hot reload, signals — belongs to the caller:
//! [`Poller::lock`] takes the lock, [`run`] loops until the shutdown flag is set, and
//! [`Poller::release_attempts`] gives back the attempts the dispatcher abandoned.
//!
//! Store calls are small file reads and writes made inline: the poller is one sequential
//! task, so nothing else waits on its executor thread.

pub mod closure;
pub mod events;
mod item;
pub mod ledgers;
pub mod notice;
pub mod scope;
pub mod seam;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use loop_core::config::Config;
use loop_core::log::{Kind, Line};
use loop_core::record::CommentId;
use loop_core::{RepoRef, WorkItemRef};
use loop_github::{
    GithubClient, GithubError, ItemKind, ListedItem, ThreadComment, ThreadSince, Validator,
};
use loop_store::heartbeat::{CycleSummary, Heartbeat, ScopeFailure, ScopeHealth, ScopeMonitor};
use loop_store::index::PortableIndex;
use loop_store::poll_cache::{PollCache, RememberedLinkage, RememberedThread};
use loop_store::{PidLock, StateStore, StoreError};
use tokio::sync::watch;

use crate::shutdown::Shutdown;

use self::ledgers::Ledgers;
use self::scope::Scope;
use self::seam::Pipeline;

/// Once this many poll intervals have passed since the last full sweep, the comment
/// surfaces of every listed item are read again (conditionally), so a change `updated_at`
/// did not reveal is still seen. Measured in time from the sweep kept in the poll cache, so
/// it holds across restarts and `poll --once` runs.
pub const FULL_SWEEP_EVERY_CYCLES: u64 = 60;

/// A repository whose Issues feature is off is re-probed this many cycles after it was
/// found so; meanwhile only its pull requests are listed (reference §1.6).
pub const REPROBE_EVERY_CYCLES: u64 = 60;

/// Why the poller cannot run.
#[derive(Debug, thiserror::Error)]
pub enum PollerError {
    #[error(
        "another poller holds `{}` (pid {})",
        path.display(),
        pid.map_or_else(|| "unknown".to_owned(), |p| p.to_string())
    )]
    Blocked { path: std::path::PathBuf, pid: Option<u32> },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl loop_core::Hint for PollerError {
    fn hint(&self) -> Option<String> {
        matches!(self, Self::Blocked { .. })
            .then(|| "stop it with `the-loop stop`, or wait for its cycle to end".to_owned())
    }
}

/// One GitHub client per host.
#[derive(Debug, Clone, Default)]
pub struct GithubClients {
    by_host: BTreeMap<String, GithubClient>,
    /// The host of the first client given.
    primary: Option<String>,
}

impl GithubClients {
    pub fn new(clients: impl IntoIterator<Item = GithubClient>) -> Self {
        let mut github = Self::default();
        for client in clients {
            let host = client.host().to_ascii_lowercase();
            github.primary.get_or_insert_with(|| host.clone());
            github.by_host.insert(host, client);
        }
        github
    }

    /// One client per host the configured scopes name, each as `integrations.github`
    /// configures it ([`GithubClient::from_config`]: `baseUrl`, the token from the
    /// variables named by `tokenEnv`, else `gh auth token`).
    pub fn for_config(config: &Config) -> Result<Self, GithubError> {
        let mut hosts: Vec<String> = Vec::new();
        for scope in scope::scopes(config) {
            let host = scope.repo.host().to_ascii_lowercase();
            if !hosts.contains(&host) {
                hosts.push(host);
            }
        }
        let clients = hosts
            .iter()
            .map(|host| GithubClient::from_config(host, &config.integrations.github))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::new(clients))
    }

    /// The client of the first configured host: the one the dispatcher uses for
    /// reactions, announcements and existence checks.
    pub fn primary(&self) -> Option<&GithubClient> {
        self.by_host.get(self.primary.as_ref()?)
    }

    fn for_repo(&self, repo: &RepoRef) -> Option<&GithubClient> {
        self.by_host.get(&repo.host().to_ascii_lowercase())
    }

    /// Each host's validator generation (changes when a remembered answer does).
    fn validator_generations(&self) -> BTreeMap<String, u64> {
        self.by_host.iter().map(|(host, c)| (host.clone(), c.validators_generation())).collect()
    }

    /// Requests answered so far, and how many of them were 304 Not Modified.
    fn answers(&self) -> (u64, u64) {
        self.by_host.values().fold((0, 0), |(all, not_modified), client| {
            let statuses = client.answers_by_status();
            (
                all + statuses.values().sum::<u64>(),
                not_modified + statuses.get(&304).copied().unwrap_or(0),
            )
        })
    }
}

/// What one cycle did (the `poll.cycle` event and the heartbeat).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CycleReport {
    pub items_seen: u32,
    pub spawns: u32,
    pub comments_forwarded: u32,
    pub closures: u32,
    /// Give-ups (comment or spawn).
    pub failures: u32,
    /// Ledger-only records asked whether they ended (seed 000).
    pub ledger_checks: u32,
    /// `"<scope|ref|provider>: <message>"` per error.
    pub errors: Vec<String>,
    /// A stop request cut the walk short; nothing was reconciled.
    pub interrupted: bool,
    pub scopes_polled: u32,
    /// Scopes whose listing failed this cycle or whose issues are quarantined (names).
    pub scopes_degraded: Vec<String>,
    /// Scopes whose listing failed this cycle (a first `410 Gone` is `permanent`).
    pub scopes_failed: Vec<ScopeFailure>,
    /// Scopes whose issues were not asked: quarantined, Issues are off.
    pub scopes_skipped: Vec<ScopeFailure>,
    /// Every scope as this cycle left it, in configuration order (the heartbeat's).
    pub scopes: Vec<ScopeHealth>,
    /// GitHub requests made, and how many were answered 304 (free).
    pub requests: u64,
    pub not_modified: u64,
    /// How long the cycle took (the metrics' poll-cycle histogram).
    pub took: Duration,
}

/// What the poller remembers between cycles. The threads, the linkage, the sweep time and
/// the clients' validators are kept in the poll cache across restarts; the rest is this
/// process's (a restart re-probes a quarantine at once and re-arms once more).
#[derive(Debug, Default)]
struct Memory {
    cycles: u64,
    /// When the last full sweep ran.
    last_sweep_at: Option<Timestamp>,
    /// Each item's thread as last read, with the `updated_at` it was read at.
    threads: BTreeMap<WorkItemRef, RememberedThread<ThreadComment>>,
    /// Each pull request's linked issues, with the description they were read for.
    linkage: BTreeMap<WorkItemRef, RememberedLinkage>,
    /// Hosts that last refused the linkage query (warned once; asked again each full
    /// sweep).
    linkage_unavailable: BTreeSet<String>,
    /// The poll cache was read (once, at the first cycle).
    cache_read: bool,
    /// The threads, the linkage or the sweep time changed since the cache was written.
    cache_dirty: bool,
    /// Each host's validator generation when the cache was last read or written.
    cache_generations: BTreeMap<String, u64>,
    /// When each scope's listing last answered, by [`scope_key`] (seeded from the
    /// heartbeat an earlier process left).
    scope_polled_at: HashMap<String, Timestamp>,
    /// Deliveries this process spent an attempt on, by dedup key (released at shutdown).
    attempted: HashMap<String, Attempted>,
    /// Items already checked for comments abandoned by another version.
    rearm_checked: HashSet<WorkItemRef>,
    /// Scopes whose last listing failed (for `poll.scope_recovered`).
    failing_scopes: HashSet<String>,
    /// Scopes whose Issues are off, with the cycle at which they are probed again.
    quarantine: HashMap<String, u64>,
    /// Ledgers the last cycle could not write (a full or read-only disk): the next
    /// cycle carries on from them, so nothing is baselined twice.
    unrecorded: ledgers::Unrecorded,
}

/// What one scope's listing gave.
#[derive(Debug)]
enum ScopeListing {
    /// Every labelled open item the scope monitors.
    Listed(Vec<ListedItem>),
    /// Issues are off: only its pull requests were listed (`answered`: that listing
    /// answered). The scope counts as degraded (nothing in it is reconciled) but its pull
    /// requests are polled.
    PullRequestsOnly {
        items: Vec<ListedItem>,
        answered: bool,
    },
    Failed,
}

/// A delivery this process spent an attempt on.
#[derive(Debug, Clone)]
enum Attempted {
    Comment { owner: WorkItemRef, item: WorkItemRef, id: CommentId },
    Presence { owner: WorkItemRef },
}

impl Attempted {
    /// The listed item the attempt was made for.
    fn item(&self) -> &WorkItemRef {
        match self {
            Attempted::Comment { item, .. } => item,
            Attempted::Presence { owner } => owner,
        }
    }
}

/// The poller over a state root, GitHub and the dispatcher seam.
#[derive(Debug)]
pub struct Poller<D> {
    store: StateStore,
    github: GithubClients,
    dispatch: D,
    /// The running version, stamped on give-ups (issue-146).
    version: String,
    started_at: Timestamp,
    memory: Memory,
    /// Told about every finished cycle (metrics); `None`: nobody listens.
    observer: Option<CycleObserver>,
}

/// A callback told about every finished cycle.
pub struct CycleObserver(Box<dyn Fn(&CycleReport) + Send + Sync>);

impl CycleObserver {
    pub fn new(observe: impl Fn(&CycleReport) + Send + Sync + 'static) -> Self {
        Self(Box::new(observe))
    }
}

impl std::fmt::Debug for CycleObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CycleObserver")
    }
}

/// The local facts a cycle reads once: sessions and the portable index.
#[derive(Debug, Default)]
struct Facts {
    /// Endpoint refs with a live (active or paused) session.
    live: BTreeSet<WorkItemRef>,
    /// Endpoint ref → the work item whose session record holds it (any status).
    binding: BTreeMap<WorkItemRef, WorkItemRef>,
    /// Work items with a session record of any status.
    session_records: BTreeSet<WorkItemRef>,
    /// Portable records by ref: their sections.
    sections: BTreeMap<WorkItemRef, Vec<String>>,
    /// Pull request → the record whose poll ledger nests it.
    nested: BTreeMap<WorkItemRef, WorkItemRef>,
}

impl Facts {
    fn load(store: &StateStore) -> Result<Self, StoreError> {
        let mut facts = Facts::default();
        for record in store.list_local_records()? {
            for (endpoint_ref, endpoint) in &record.endpoints {
                if endpoint.is_live() {
                    facts.live.insert(endpoint_ref.clone());
                }
                facts.binding.insert(endpoint_ref.clone(), record.work_item.clone());
            }
            facts.session_records.insert(record.work_item.clone());
        }
        // Read fresh: records that arrived by `git pull` or were copied in are listed.
        let index = store.portable_index().unwrap_or_else(|err| {
            tracing::warn!(error = %err, "cannot list the portable records; reconciling nothing from them this cycle");
            PortableIndex::default()
        });
        for entry in index.work_items.into_iter().filter(|e| !e.sealed) {
            let Ok(item) = entry.work_item.parse::<WorkItemRef>() else {
                tracing::debug!(work_item = %entry.work_item, "index entry with an unparsable ref skipped");
                continue;
            };
            for pr in entry.pull_requests.iter().filter_map(|p| p.parse().ok()) {
                facts.nested.insert(pr, item.clone());
            }
            facts.sections.insert(item, entry.sections);
        }
        Ok(facts)
    }

    fn has_section(&self, item: &WorkItemRef, section: &str) -> bool {
        self.sections.get(item).is_some_and(|s| s.iter().any(|k| k == section))
    }
}

impl<D: Pipeline> Poller<D> {
    /// A poller over `store`. When each scope last answered is carried over from the
    /// heartbeat an earlier process left (best-effort: none, or unreadable, is none).
    pub fn new(store: StateStore, github: GithubClients, dispatch: D, version: &str) -> Self {
        let mut memory = Memory::default();
        if let Ok(Some(heartbeat)) = store.read_heartbeat() {
            for scope in heartbeat.scopes {
                if let Some(at) = scope.last_polled_at {
                    memory.scope_polled_at.insert(scope_key(&scope.repository, &scope.label), at);
                }
            }
        }
        Self {
            store,
            github,
            dispatch,
            version: version.to_owned(),
            started_at: Timestamp::now(),
            memory,
            observer: None,
        }
    }

    /// Tells `observer` about every finished cycle (e.g. the service's metrics).
    pub fn with_observer(mut self, observer: CycleObserver) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The dispatcher seam (tests inspect their stand-in through it).
    pub fn dispatch(&self) -> &D {
        &self.dispatch
    }

    /// Takes the single-instance lock, `poll.pid`. A second poller is refused naming the
    /// holder (`poller.blocked`).
    pub fn lock(&self) -> Result<PidLock, PollerError> {
        let path = self.store.layout().poll_pidfile();
        match PidLock::acquire(&path) {
            Ok(lock) => Ok(lock),
            Err(StoreError::PidfileHeld { path, pid }) => {
                self.store.events().emit(
                    Line::error(Kind::PollerBlocked)
                        .field("pidfile", path.display().to_string())
                        .field("holder", pid),
                );
                Err(PollerError::Blocked { path, pid })
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Says the poller started: `poller.started` and a heartbeat with no cycle yet.
    pub fn announce_start(&self, config: &Config, once: bool) {
        let sources: Vec<String> = scope::scopes(config).iter().map(Scope::name).collect();
        self.store.events().emit(
            Line::info(Kind::PollerStarted)
                .field("interval_seconds", config.polling.interval_seconds)
                .field("sources", sources)
                .field("once", once),
        );
        if config.routing.authorized_users.is_empty() {
            tracing::warn!(
                "routing.authorizedUsers is empty: the poller will act on NO items or comments"
            );
        }
        self.write_heartbeat(config, None);
    }

    /// Says the poller stopped (`poller.stopped`).
    pub fn announce_stop(&self) {
        self.store.events().emit(Line::info(Kind::PollerStopped));
    }

    /// One poll cycle. `stop` is checked before each scope and each item: the item in
    /// flight finishes and is on disk, nothing after it starts, and the cycle is
    /// `interrupted` (and reconciles nothing).
    pub async fn cycle(&mut self, config: &Config, stop: &mut Shutdown) -> CycleReport {
        let now = Timestamp::now();
        let started = std::time::Instant::now();
        let (requests_before, not_modified_before) = self.github.answers();
        let scopes = scope::scopes(config);
        self.read_cache(&scopes);
        let sweep = self.sweep_due(now, config.polling.interval_seconds);
        self.memory.cycles += 1;
        let mut report = CycleReport::default();

        // Per scope: whether a listing answered, and the requests its listing and its
        // items' threads cost.
        let mut tallies = vec![ScopeTally::default(); scopes.len()];
        // Each listed item with the index of the scope that listed it first.
        let mut listed: Vec<(ListedItem, usize)> = Vec::new();
        for (index, scope) in scopes.iter().enumerate() {
            if stop.signalled() {
                report.interrupted = true;
                break;
            }
            let before = self.github.answers();
            let listing = self.list(scope, &mut report).await;
            tallies[index].count(before, self.github.answers());
            let items = match listing {
                ScopeListing::Listed(items) => {
                    tallies[index].polled = true;
                    items
                }
                ScopeListing::PullRequestsOnly { items, answered } => {
                    tallies[index].polled = answered;
                    report.scopes_degraded.push(scope.name());
                    items
                }
                ScopeListing::Failed => {
                    report.scopes_degraded.push(scope.name());
                    Vec::new()
                }
            };
            for item in items {
                if !listed.iter().any(|(l, _)| l.item == item.item) {
                    listed.push((item, index));
                }
            }
        }
        if !report.interrupted {
            self.forget_unlisted(&listed, &report.scopes_degraded);
            self.refresh_linkage(&listed, sweep, &mut report).await;
        }

        let mut ledgers = Ledgers::open(&self.store, std::mem::take(&mut self.memory.unrecorded));
        let facts = match Facts::load(&self.store) {
            Ok(facts) => Some(facts),
            Err(err) => {
                report.errors.push(format!("state: {err}"));
                self.store
                    .events()
                    .emit_async(
                        Line::error(Kind::PollProviderError)
                            .field("provider", "state")
                            .field("error", err.to_string())
                            .field("will_retry", true),
                    )
                    .await;
                None
            }
        };
        if let Some(facts) = &facts {
            for (item, index) in &listed {
                if report.interrupted || stop.signalled() {
                    report.interrupted = true;
                    break;
                }
                report.items_seen += 1;
                let label = &scopes[*index].label;
                let walk = item::Walk { config, facts, label, now, sweep };
                let before = self.github.answers();
                self.process_item(&walk, item, &mut ledgers, &mut report).await;
                tallies[*index].count(before, self.github.answers());
            }
            if !report.interrupted {
                let open: BTreeSet<WorkItemRef> =
                    listed.iter().flat_map(|(item, _)| self.refs(item)).collect();
                let reconcile = closure::Reconcile {
                    config,
                    scopes: &scopes,
                    facts,
                    open: &open,
                    degraded: &report.scopes_degraded.clone(),
                    now,
                };
                self.reconcile(&reconcile, &mut ledgers, &mut report).await;
            }
        }
        if let Err(err) = ledgers.save_clocks() {
            tracing::warn!(error = %err, "could not write the poll clocks; they are only a schedule");
        }
        self.memory.unrecorded = ledgers.unrecorded();
        if sweep && !report.interrupted {
            self.memory.last_sweep_at = Some(now);
            self.memory.cache_dirty = true;
        }
        self.write_cache(&scopes);
        report.scopes = self.scope_health(&scopes, &tallies, &report, now);
        let (requests, not_modified) = self.github.answers();
        report.requests = requests - requests_before;
        report.not_modified = not_modified - not_modified_before;
        report.took = started.elapsed();
        self.summarize(config, &report);
        if let Some(observer) = &self.observer {
            (observer.0)(&report);
        }
        report
    }

    /// The refs an item maps to: its linked issues, then itself.
    fn refs(&self, item: &ListedItem) -> Vec<WorkItemRef> {
        let mut refs: Vec<WorkItemRef> = self
            .memory
            .linkage
            .get(&item.item)
            .map(|linkage| linkage.linked.clone())
            .unwrap_or_default();
        if !refs.contains(&item.item) {
            refs.push(item.item.clone());
        }
        refs
    }

    fn linked(&self, item: &WorkItemRef) -> Vec<WorkItemRef> {
        self.memory.linkage.get(item).map(|linkage| linkage.linked.clone()).unwrap_or_default()
    }

    /// One scope's labelled open items (monitors applied). A repository whose Issues are
    /// off (410 Gone) is quarantined: `poll.scope_degraded` once, then only its pull
    /// requests are listed until the re-probe [`REPROBE_EVERY_CYCLES`] later.
    async fn list(&mut self, scope: &Scope, report: &mut CycleReport) -> ScopeListing {
        let name = scope.name();
        let Some(client) = self.github.for_repo(&scope.repo).cloned() else {
            let error = format!("no GitHub client is configured for host `{}`", scope.repo.host());
            self.scope_failed(&name, &error, report);
            return ScopeListing::Failed;
        };
        let cycle = self.memory.cycles;
        let quarantined = self.memory.quarantine.get(&name).is_some_and(|at| cycle < *at);
        if !quarantined {
            match client.list_labelled_open_items(&scope.repo, &scope.label).await {
                Ok(listing) => {
                    report.scopes_polled += 1;
                    let was_failing = self.memory.failing_scopes.remove(&name);
                    if self.memory.quarantine.remove(&name).is_some() || was_failing {
                        self.store
                            .events()
                            .emit_async(
                                Line::info(Kind::PollScopeRecovered)
                                    .field("provider", "github")
                                    .field("scope", &name),
                            )
                            .await;
                    }
                    return ScopeListing::Listed(
                        listing.items.into_iter().filter(|i| monitored(scope, i)).collect(),
                    );
                }
                Err(err @ GithubError::Gone { .. }) => {
                    let renewed =
                        self.memory.quarantine.insert(name.clone(), cycle + REPROBE_EVERY_CYCLES);
                    if renewed.is_none() {
                        self.store
                            .events()
                            .emit_async(
                                Line::warning(Kind::PollScopeDegraded)
                                    .field("provider", "github")
                                    .field("scope", &name)
                                    .field("error", err.to_string())
                                    .field("retry_after_cycles", REPROBE_EVERY_CYCLES),
                            )
                            .await;
                        report.scopes_failed.push(ScopeFailure {
                            scope: name.clone(),
                            error: err.to_string(),
                            permanent: true,
                        });
                    } else {
                        report.scopes_skipped.push(quarantined_skip(&name));
                    }
                }
                Err(err) => {
                    self.scope_failed(&name, &err.to_string(), report);
                    return ScopeListing::Failed;
                }
            }
        } else {
            report.scopes_skipped.push(quarantined_skip(&name));
        }
        if !scope.pull_requests {
            return ScopeListing::PullRequestsOnly { items: Vec::new(), answered: false };
        }
        match client.list_labelled_open_pull_requests(&scope.repo, &scope.label).await {
            Ok(listing) => {
                report.scopes_polled += 1;
                ScopeListing::PullRequestsOnly { items: listing.items, answered: true }
            }
            Err(err) => {
                self.scope_failed(&name, &err.to_string(), report);
                ScopeListing::Failed
            }
        }
    }

    fn scope_failed(&mut self, name: &str, error: &str, report: &mut CycleReport) {
        report.errors.push(format!("{name}: {error}"));
        report.scopes_failed.push(ScopeFailure {
            scope: name.to_owned(),
            error: error.to_owned(),
            permanent: false,
        });
        self.memory.failing_scopes.insert(name.to_owned());
        self.store.events().emit(
            Line::error(Kind::PollScopeError)
                .field("provider", "github")
                .field("scope", name)
                .field("error", error)
                .field("will_retry", true),
        );
    }

    /// Drops what this process remembers about items no longer listed (a degraded
    /// scope's items are kept: their absence says nothing).
    fn forget_unlisted(&mut self, listed: &[(ListedItem, usize)], degraded: &[String]) {
        let keep = |item: &WorkItemRef| {
            listed.iter().any(|(l, _)| l.item == *item)
                || degraded.contains(&item.repo().to_string().to_ascii_lowercase())
        };
        let before = (self.memory.threads.len(), self.memory.linkage.len());
        for item in self.memory.threads.keys().filter(|item| !keep(item)) {
            if let Some(client) = self.github.for_repo(item.repo()) {
                client.forget_threads(item);
            }
        }
        self.memory.threads.retain(|item, _| keep(item));
        self.memory.linkage.retain(|item, _| keep(item));
        self.memory.rearm_checked.retain(|item| keep(item));
        self.memory.attempted.retain(|_, attempted| keep(attempted.item()));
        if (self.memory.threads.len(), self.memory.linkage.len()) != before {
            self.memory.cache_dirty = true;
        }
    }

    /// Asks for the linked issues of pull requests that are new to this process or whose
    /// description changed (every one on a sweep): one GraphQL request per host. A failed
    /// request is a provider error, asked again next cycle.
    ///
    /// When a host refuses the query itself (an older Enterprise server without the field,
    /// a token without access), its pull requests are remembered as linking nothing: they
    /// are linked by the head-branch and closing-keyword conventions, which routing applies
    /// anyway, and asked about again at the next full sweep, not every cycle. The first
    /// refusal is one warning (`poll.linkage_fallback`); refusals after it are quiet.
    async fn refresh_linkage(
        &mut self,
        listed: &[(ListedItem, usize)],
        sweep: bool,
        report: &mut CycleReport,
    ) {
        let mut by_host: BTreeMap<String, Vec<&ListedItem>> = BTreeMap::new();
        for (item, _) in listed.iter().filter(|(i, _)| i.kind == ItemKind::PullRequest) {
            let known =
                self.memory.linkage.get(&item.item).is_some_and(|known| known.body == item.body);
            if sweep || !known {
                by_host.entry(item.item.repo().host().to_ascii_lowercase()).or_default().push(item);
            }
        }
        for (host, prs) in by_host {
            let Some(client) = self.github.by_host.get(&host) else { continue };
            let refs: Vec<WorkItemRef> = prs.iter().map(|p| p.item.clone()).collect();
            let mut linked = match client.linked_issues(&refs).await {
                Ok(linked) => {
                    self.memory.linkage_unavailable.remove(&host);
                    linked
                }
                Err(err) if err.is_query_refused() => {
                    if self.memory.linkage_unavailable.insert(host.clone()) {
                        self.store
                            .events()
                            .emit_async(
                                Line::warning(Kind::PollLinkageFallback)
                                    .field("provider", "github")
                                    .field("host", &host)
                                    .field("error", err.to_string())
                                    .field(
                                        "fallback",
                                        "head-branch and closing-keyword conventions",
                                    )
                                    .field("retry", "next full sweep"),
                            )
                            .await;
                    } else {
                        tracing::debug!(host, error = %err, "the linkage query is still refused");
                    }
                    BTreeMap::new()
                }
                Err(err) => {
                    report.errors.push(format!("github: {err}"));
                    self.store
                        .events()
                        .emit_async(
                            Line::error(Kind::PollProviderError)
                                .field("provider", "github")
                                .field("error", err.to_string())
                                .field("will_retry", true),
                        )
                        .await;
                    continue;
                }
            };
            for pr in prs {
                let linkage = RememberedLinkage {
                    body: pr.body.clone(),
                    linked: linked.remove(&pr.item).unwrap_or_default(),
                };
                if self.memory.linkage.get(&pr.item) != Some(&linkage) {
                    self.memory.linkage.insert(pr.item.clone(), linkage);
                    self.memory.cache_dirty = true;
                }
            }
        }
    }

    /// The item's thread: the remembered one (from this process or the poll cache) when
    /// `updated_at` has not moved and this is no sweep; else what changed since it, read
    /// from GitHub with `since=` each surface's newest `updated_at` and merged in by node
    /// id (edits replace, the comments at the inclusive boundary are seen again); else
    /// (never read, or the full sweep) the whole thread, conditionally.
    async fn thread(
        &mut self,
        item: &ListedItem,
        sweep: bool,
    ) -> Result<Vec<ThreadComment>, String> {
        let known = self.memory.threads.get(&item.item).filter(|_| !sweep);
        if let Some(known) = known
            && known.updated_at == item.updated_at
        {
            return Ok(known.comments.clone());
        }
        let Some(client) = self.github.for_repo(item.item.repo()) else {
            return Err(format!(
                "no GitHub client is configured for host `{}`",
                item.item.repo().host()
            ));
        };
        let mut thread = known.map(|k| k.comments.clone()).unwrap_or_default();
        let since = ThreadSince::of(&thread);
        let changes = client
            .thread_changes(&item.item, item.kind, &since)
            .await
            .map_err(|err| err.to_string())?;
        if since == ThreadSince::default() {
            thread = changes;
        } else {
            loop_github::merge_thread(&mut thread, changes);
        }
        let remembered =
            RememberedThread { updated_at: item.updated_at.clone(), comments: thread.clone() };
        if self.memory.threads.get(&item.item) != Some(&remembered) {
            self.memory.threads.insert(item.item.clone(), remembered);
            self.memory.cache_dirty = true;
        }
        Ok(thread)
    }

    /// Whether this cycle is a full sweep: none ran yet, or the last one is at least
    /// [`FULL_SWEEP_EVERY_CYCLES`] intervals old (or stamped in the future: the clock moved).
    fn sweep_due(&self, now: Timestamp, interval_seconds: u64) -> bool {
        let seconds = FULL_SWEEP_EVERY_CYCLES.saturating_mul(interval_seconds.max(1));
        let every = SignedDuration::from_secs(i64::try_from(seconds).unwrap_or(i64::MAX));
        self.memory.last_sweep_at.is_none_or(|at| at > now || now.duration_since(at) >= every)
    }

    /// What the poll cache must have been written for to be used: one line per scope
    /// (repository, label, monitors) and per API host (its REST base), sorted.
    fn written_for(&self, scopes: &[Scope]) -> Vec<String> {
        let mut lines: Vec<String> = scopes
            .iter()
            .map(|s| {
                format!(
                    "scope {} label={:?} issues={} pullRequests={}",
                    s.name(),
                    s.label,
                    s.issues,
                    s.pull_requests
                )
            })
            .chain(
                self.github
                    .by_host
                    .iter()
                    .map(|(host, client)| format!("api {host} {}", client.endpoints().rest)),
            )
            .collect();
        lines.sort();
        lines
    }

    /// Reads the poll cache once, at the first cycle. A cache written for another
    /// configuration is left unused (it is replaced at the end of the cycle); a missing or
    /// unreadable one means a cold start.
    fn read_cache(&mut self, scopes: &[Scope]) {
        if std::mem::replace(&mut self.memory.cache_read, true) {
            return;
        }
        let Some(cache) = self.store.read_poll_cache::<Validator, ThreadComment>() else {
            return;
        };
        if cache.written_for != self.written_for(scopes) {
            tracing::info!("the poll cache was written for another configuration; starting cold");
            self.memory.cache_dirty = true;
            return;
        }
        for (host, validators) in cache.validators {
            if let Some(client) = self.github.by_host.get(&host) {
                client.restore_validators(validators);
            }
        }
        self.memory.threads = cache.threads;
        self.memory.linkage = cache.linkage;
        self.memory.last_sweep_at = cache.last_sweep_at;
        self.memory.cache_generations = self.github.validator_generations();
    }

    /// Writes the poll cache when anything in it changed since it was read or written.
    /// A failure is logged and retried next cycle: the cache only saves requests.
    fn write_cache(&mut self, scopes: &[Scope]) {
        let generations = self.github.validator_generations();
        if !self.memory.cache_dirty && generations == self.memory.cache_generations {
            return;
        }
        let cache = PollCache {
            written_for: self.written_for(scopes),
            last_sweep_at: self.memory.last_sweep_at,
            validators: self
                .github
                .by_host
                .iter()
                .map(|(host, client)| (host.clone(), client.validators()))
                .collect(),
            threads: self.memory.threads.clone(),
            linkage: self.memory.linkage.clone(),
        };
        match self.store.write_poll_cache(&cache) {
            Ok(_) => {
                self.memory.cache_dirty = false;
                self.memory.cache_generations = generations;
            }
            Err(err) => {
                tracing::warn!(error = %err, "could not write the poll cache; the next start is cold");
            }
        }
    }

    /// Every scope as this cycle left it; remembers when each last answered.
    fn scope_health(
        &mut self,
        scopes: &[Scope],
        tallies: &[ScopeTally],
        report: &CycleReport,
        now: Timestamp,
    ) -> Vec<ScopeHealth> {
        scopes
            .iter()
            .zip(tallies)
            .map(|(scope, tally)| {
                let name = scope.name();
                let key = scope_key(&name, &scope.label);
                if tally.polled {
                    self.memory.scope_polled_at.insert(key.clone(), now);
                }
                let reason = report
                    .scopes_failed
                    .iter()
                    .chain(&report.scopes_skipped)
                    .find(|f| f.scope == name)
                    .map(|f| f.error.clone());
                ScopeHealth {
                    degraded: report.scopes_degraded.contains(&name),
                    repository: name,
                    label: scope.label.clone(),
                    monitor: ScopeMonitor {
                        issues: scope.issues,
                        pull_requests: scope.pull_requests,
                    },
                    last_polled_at: self.memory.scope_polled_at.get(&key).copied(),
                    reason,
                    requests: tally.requests,
                    not_modified: tally.not_modified,
                }
            })
            .collect()
    }

    /// Gives back the attempts this process spent on deliveries the dispatcher abandoned
    /// at shutdown (still queued): counts go down, nothing is baselined. Deliveries that
    /// resolved are no longer releasable. Emits `poll.attempts_released`.
    pub fn release_attempts(&mut self, abandoned: &[String]) -> Result<u32, StoreError> {
        let mut ledgers = Ledgers::open(&self.store, std::mem::take(&mut self.memory.unrecorded));
        let mut owners = BTreeSet::new();
        let mut released = 0;
        for key in abandoned {
            let Some(attempted) = self.memory.attempted.remove(key) else { continue };
            match attempted {
                Attempted::Comment { owner, item, id } => {
                    let Some(mut ledger) = ledgers.ledger(&owner)?.cloned() else { continue };
                    let comments = loop_core::poll::comment_ledger_mut(&owner, &mut ledger, &item);
                    if loop_core::poll::release_attempt(comments, &id) {
                        released += 1;
                        ledgers.put(&owner, ledger)?;
                        owners.insert(owner);
                    }
                }
                Attempted::Presence { owner } => {
                    let Some(mut ledger) = ledgers.ledger(&owner)?.cloned() else { continue };
                    let Some(spawn) =
                        ledger.spawn.as_mut().filter(|s| s.delivery_id.as_deref() == Some(key))
                    else {
                        continue;
                    };
                    loop_core::poll::release_spawn(spawn);
                    released += 1;
                    ledgers.put(&owner, ledger)?;
                    owners.insert(owner);
                }
            }
        }
        for owner in &owners {
            ledgers.flush(owner)?;
        }
        self.memory.unrecorded = ledgers.unrecorded();
        if released > 0 {
            self.store
                .events()
                .emit(Line::info(Kind::PollAttemptsReleased).field("released", released));
        }
        Ok(released)
    }

    /// The `poll.cycle` event, a log line and the heartbeat.
    fn summarize(&self, config: &Config, report: &CycleReport) {
        let mut event = Line::info(Kind::PollCycle)
            .field("items_seen", report.items_seen)
            .field("spawns", report.spawns)
            .field("comments_forwarded", report.comments_forwarded)
            .field("requests", report.requests)
            .field("not_modified", report.not_modified);
        let counters = [
            ("closures", report.closures),
            ("failures", report.failures),
            ("ledger_checks", report.ledger_checks),
            ("scopes_polled", report.scopes_polled),
        ];
        for (key, value) in counters.into_iter().filter(|(_, v)| *v > 0) {
            event = event.field(key, value);
        }
        if !report.errors.is_empty() {
            event = event.field("errors", &report.errors);
        }
        if !report.scopes_degraded.is_empty() {
            event = event.field("scopes_degraded", &report.scopes_degraded);
        }
        if report.interrupted {
            event = event.field("interrupted", true);
        }
        self.store.events().emit(event);
        tracing::info!(
            items = report.items_seen,
            spawns = report.spawns,
            forwarded = report.comments_forwarded,
            closures = report.closures,
            failures = report.failures,
            errors = report.errors.len(),
            degraded = report.scopes_degraded.len(),
            interrupted = report.interrupted,
            requests = report.requests,
            not_modified = report.not_modified,
            "poll cycle"
        );
        self.write_heartbeat(config, Some(report));
    }

    fn write_heartbeat(&self, config: &Config, report: Option<&CycleReport>) {
        let heartbeat = Heartbeat {
            started_at: self.started_at,
            last_cycle_at: report.map(|_| Timestamp::now()),
            interval_seconds: config.polling.interval_seconds.max(1),
            last_cycle: report.map(|r| CycleSummary {
                items_seen: r.items_seen,
                spawns: r.spawns,
                comments_forwarded: r.comments_forwarded,
                closures: r.closures,
                failures: r.failures,
                errors: u32::try_from(r.errors.len()).unwrap_or(u32::MAX),
                interrupted: r.interrupted,
                scopes_polled: r.scopes_polled,
                scopes_failed: r.scopes_failed.clone(),
                scopes_skipped: r.scopes_skipped.clone(),
                requests: r.requests,
                not_modified: r.not_modified,
            }),
            scopes: report.map(|r| r.scopes.clone()).unwrap_or_default(),
        };
        if let Err(err) = self.store.write_heartbeat(&heartbeat) {
            tracing::warn!(error = %err, "could not write the poll heartbeat");
        }
    }
}

/// Polls until `shutdown` is signalled: a cycle with the config current at its start, then a
/// wait of `polling.intervalSeconds` (at least 1 s) that a shutdown cuts short. A config
/// change between cycles is used from the next cycle on (its `config.reloaded` line is
/// the process's config source's, [`crate::live_config`]). The caller holds the lock and,
/// once this returns and the dispatcher drained, calls [`Poller::release_attempts`].
pub async fn run<D: Pipeline>(
    poller: &mut Poller<D>,
    mut config: watch::Receiver<Arc<Config>>,
    mut shutdown: Shutdown,
) {
    let first = config.borrow_and_update().clone();
    poller.announce_start(&first, false);
    loop {
        if shutdown.signalled() {
            break;
        }
        let current = config.borrow_and_update().clone();
        poller.cycle(&current, &mut shutdown).await;
        let wait = Duration::from_secs(current.polling.interval_seconds.max(1));
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shutdown.recv() => {}
        }
    }
    poller.announce_stop();
}

/// Requests made for one scope in a cycle, and whether one of its listings answered.
#[derive(Debug, Clone, Copy, Default)]
struct ScopeTally {
    polled: bool,
    requests: u64,
    not_modified: u64,
}

impl ScopeTally {
    /// Adds the requests answered between two readings of [`GithubClients::answers`].
    fn count(&mut self, before: (u64, u64), after: (u64, u64)) {
        self.requests += after.0.saturating_sub(before.0);
        self.not_modified += after.1.saturating_sub(before.1);
    }
}

/// How a scope is known across cycles and processes: its name and label.
fn scope_key(name: &str, label: &str) -> String {
    format!("{name}\n{label}")
}

/// A quarantined scope's skipped issue listing (reference §1.6).
fn quarantined_skip(name: &str) -> ScopeFailure {
    ScopeFailure {
        scope: name.to_owned(),
        error: format!(
            "issues are disabled in {name}; re-probed every {REPROBE_EVERY_CYCLES} cycles, its pull requests are still polled"
        ),
        permanent: true,
    }
}

/// Whether the scope monitors this kind of item.
fn monitored(scope: &Scope, item: &ListedItem) -> bool {
    match item.kind {
        ItemKind::Issue => scope.issues,
        ItemKind::PullRequest => scope.pull_requests,
    }
}

//! Dispatch drives the process graph (docs/process-graph.md, seed 002 issue-113): a
//! successful spawn enters the work item's start node (and a human start node judges the
//! spawning comment once); an event for a live session is judged first at a waiting human
//! gate, else delivered and then advanced one boundary; every prompt carries the
//! `$graph_context` block. The decisions are loop-core's runtime; this module reads the
//! state file and the artifacts, saves under the file's lock before any effect, and
//! carries the effects out (labels, comments, the assignment pasted into the session).
//! It is also where the state file's other readers and writers are: the frozen choices
//! routing and launches read ([`Dispatcher::choices`]), and the pull requests delivering
//! the item ([`record_pull_request`]).
//!
//! Best-effort by rule: whatever goes wrong here is a `graph.link_failed` or
//! `graph.hook_degraded` line and never costs the delivery.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::checkout::{self, Verdict};
use loop_core::config::Config;
use loop_core::control::Command;
use loop_core::event::Event;
use loop_core::graph::hooks::{CHECKLIST_MARKER, Comment, Effect, GateInput};
use loop_core::graph::runtime::{self, Declared, Forced, Item, Refused, Report, Step};
use loop_core::graph::state::{
    Choices, Frozen, Offered, PullRequestEntry, Upstream, WorkItemState, inner_loop_dir, spec_id,
};
use loop_core::graph::{Actor, Hook, LoopName, context};
use loop_core::guards::{is_self_authored, mark_self_authored};
use loop_core::log::{Kind, Line};
use loop_core::record::{Control, LocalRecord};
use loop_sessions::session;
use loop_sessions::workspace::origin_of;
use loop_store::portable::Slot;
use loop_store::spec_state::SpecFolder;
use loop_store::{EventLog, LegacyGraph, StoreError};

use super::{Dispatcher, blocking};

/// What marks the one "graph not running" comment on a work item.
pub const GRAPH_WARNING_MARKER: &str = "<!-- the-loop:graph-not-running -->";

/// The work item's graph in one checkout: gates passed.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) item: WorkItemRef,
    folder: SpecFolder,
    graph: LoopName,
    id: String,
    execute_keyword: String,
    /// The session's harness has the-loop's plugin: assignments and the block name the
    /// node's slash command; without it they carry its instructions.
    plugin: bool,
}

/// Why the graph is not driven for an event; the `reason` of `graph.skipped`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Skip {
    /// `routing.graph.enabled: false`, or no armed start (silent, as the reference).
    Quiet,
    /// The checkout is not the item's repository: what it is instead.
    ForeignCheckout(Verdict),
    SpecDirOutsideCheckout,
    NoSpecDir,
}

/// Where an advance comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Boundary {
    /// A spawn: enter the start node, and judge a human one with the spawning comment.
    Spawn,
    /// An event for a live session.
    Event,
}

impl Dispatcher {
    /// The gates every coupling passes (reference §3.6): the graph is enabled, the item
    /// was armed (when `requireStartCommand`), `cwd` is provably the item's checkout, the
    /// spec dir stays inside it; for an event the spec folder must exist.
    pub(crate) async fn graph_link(
        &self,
        config: &Config,
        item: &WorkItemRef,
        cwd: &Path,
        boundary: Boundary,
    ) -> Option<Link> {
        let (reason, warning) = match self.try_link(config, item, cwd, boundary).await {
            Ok(link) => return Some(link),
            Err(Skip::Quiet) => return None,
            Err(Skip::ForeignCheckout(verdict)) => {
                ("foreign-checkout", verdict.warning(cwd, item.repo()))
            }
            Err(Skip::SpecDirOutsideCheckout) => ("spec-dir-outside-checkout", None),
            Err(Skip::NoSpecDir) => ("no-spec-dir", None),
        };
        // Said once per session checkout and reason: the reason does not change from
        // one delivery to the next, and the trail is read by people.
        let noted = (item.clone(), cwd.to_owned(), reason);
        if self.inner.graph_skips.lock().unwrap_or_else(PoisonError::into_inner).insert(noted) {
            let line = match &warning {
                Some(warning) => Line::warning(Kind::GraphSkipped).field("warning", warning),
                None => Line::info(Kind::GraphSkipped),
            };
            self.events().emit_async(line.work_item(item).field("reason", reason)).await;
            if let Some(warning) = warning {
                self.warn_graph_not_running(item, cwd, &warning).await;
            }
        }
        None
    }

    /// Why the graph cannot run in `cwd` for `item`, as judged already (`None`: it can,
    /// or it was not judged).
    pub(crate) fn graph_warning(&self, item: &WorkItemRef, cwd: &Path) -> Option<String> {
        let proven = self.inner.proven_checkouts.lock().unwrap_or_else(PoisonError::into_inner);
        proven.get(&(item.clone(), cwd.to_owned()))?.warning(cwd, item.repo())
    }

    /// A graph that cannot run says so where people look: the warning recorded on the
    /// item's session (status, the board, the API's `graphWarning`) and, once per item,
    /// a self-marked comment on it (found again by its marker, so a restart does not
    /// post it twice).
    async fn warn_graph_not_running(&self, item: &WorkItemRef, cwd: &Path, warning: &str) {
        let (registry, target, dir, text) =
            (self.inner.registry.clone(), item.clone(), cwd.to_owned(), warning.to_owned());
        let noted = blocking(move || registry.note_graph_warning(&target, &dir, Some(&text))).await;
        if let Err(err) = noted {
            self.events().emit_async(link_failed(item, &err)).await;
        }
        let Some(github) = &self.inner.github else { return };
        let body = format!("{GRAPH_WARNING_MARKER}\n{warning}");
        let result = async {
            let posted = github.conversation_comments(item).await?;
            if !posted.iter().any(|c| c.body.contains(GRAPH_WARNING_MARKER)) {
                github.post_comment(item, &mark_self_authored(&body)).await?;
            }
            Ok::<_, loop_github::GithubError>(())
        }
        .await;
        if let Err(err) = result {
            self.events().emit_async(hook_degraded(item, "graph-warning", &err)).await;
        }
    }

    async fn try_link(
        &self,
        config: &Config,
        item: &WorkItemRef,
        cwd: &Path,
        boundary: Boundary,
    ) -> Result<Link, Skip> {
        if !config.routing.graph.enabled {
            return Err(Skip::Quiet);
        }
        let id = spec_id(item.number());
        let spec_dir = &config.routing.graph.spec_dir;
        let outer =
            SpecFolder::new(cwd, spec_dir, &id).map_err(|_| Skip::SpecDirOutsideCheckout)?;
        // One `stat` is all a delivery to a session without a graph costs.
        if boundary == Boundary::Event && !outer.exists() {
            return Err(Skip::NoSpecDir);
        }
        let (store, target) = (self.inner.store.clone(), item.clone());
        let control = blocking(move || store.read_section::<Control>(&target)).await;
        let armed_by = match control {
            Ok(Slot::Present(control)) => Some(control.command),
            _ => None,
        };
        // `the-loop review`: the pull request's own loop, bound to it — its state under
        // the spec folder's `pr-loops/pr-<n>/`, found there again once it was entered
        // (a later `resume` re-arms the item, not its loop).
        let inner = inner_loop_dir(None, item.number())
            .and_then(|dir| SpecFolder::new(cwd, spec_dir, &format!("{id}/{dir}")).ok());
        let review =
            inner.filter(|inner| armed_by == Some(Command::Review) || inner.state_path().exists());
        let folder = review.clone().unwrap_or(outer);
        if boundary == Boundary::Event && !folder.exists() {
            return Err(Skip::NoSpecDir);
        }
        let arming =
            [Command::Start, Command::Contribute, Command::Do, Command::Review, Command::Resume];
        if config.routing.control.require_start_command
            && !armed_by.is_some_and(|c| arming.contains(&c))
        {
            return Err(Skip::Quiet);
        }
        match self.proven(config, item, cwd).await {
            Verdict::Ours => {}
            other => return Err(Skip::ForeignCheckout(other)),
        }
        let graph = match review {
            Some(_) => LoopName::PullRequest,
            None => {
                let (events, reader) = (self.events().clone(), folder.clone());
                let recorded = blocking(move || reader.load(&events)).await.ok().flatten();
                LoopName::select(recorded.as_ref().map(|s| s.loop_name.as_str()), armed_by)
            }
        };
        let execute_keyword = config.routing.control.keywords.execute.clone();
        let plugin = self.has_plugin(config);
        Ok(Link { item: item.clone(), folder, graph, id, execute_keyword, plugin })
    }

    /// Forgets what was proven or said of `item`'s checkouts: its session ended, and the
    /// next one may have a different checkout at the same path.
    pub(super) fn forget_checkouts(&self, item: &WorkItemRef) {
        let inner = &self.inner;
        let mut proven = inner.proven_checkouts.lock().unwrap_or_else(PoisonError::into_inner);
        proven.retain(|(proven, _), _| proven != item);
        let mut skips = inner.graph_skips.lock().unwrap_or_else(PoisonError::into_inner);
        skips.retain(|(skipped, _, _)| skipped != item);
    }

    /// What `cwd` is for `item` (its origin remote, as configured and as rewritten),
    /// remembered either way: a checkout's origin does not change under a session, and
    /// the hot path runs no git.
    async fn proven(&self, config: &Config, item: &WorkItemRef, cwd: &Path) -> Verdict {
        let key = (item.clone(), cwd.to_owned());
        let proven = &self.inner.proven_checkouts;
        if let Some(known) = proven.lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
            return known.clone();
        }
        let git = PathBuf::from(&config.routing.workspace.git_binary);
        let dir = cwd.to_owned();
        let origin = blocking(move || origin_of(&git, &dir)).await;
        let verdict = checkout::judge(item.repo(), &origin, &config.routing.workspace.clone_urls);
        proven.lock().unwrap_or_else(PoisonError::into_inner).insert(key, verdict.clone());
        verdict
    }

    /// The state file as it is now (`None`: absent, unreadable, or moved aside).
    async fn load_state(&self, link: &Link) -> Option<WorkItemState> {
        let (events, folder) = (self.events().clone(), link.folder.clone());
        blocking(move || folder.load(&events)).await.ok().flatten()
    }

    /// The `$graph_context` block for `link` as the state file says now (the start node,
    /// pending, before the first write).
    pub(crate) async fn graph_context(&self, link: &Link) -> String {
        let state = self.load_state(link).await;
        context::render(link.graph.graph(), state.as_ref(), &link.id, link.plugin)
    }

    /// Whether the item waits at a human gate, which then reads the event's comment
    /// before the session does (consult first).
    pub(crate) async fn graph_at_human_gate(&self, link: &Link) -> bool {
        let graph = link.graph.graph();
        self.load_state(link)
            .await
            .and_then(|s| graph.node(&s.current_node).cloned())
            .is_some_and(|node| node.actor == Actor::Human && !node.terminal)
    }

    /// The phase checklist comment's body as it is now, read only when it can matter:
    /// the item waits at a node judged by `classify-phase-selection`, undecided, and one
    /// of `comments` names the execute keyword. `None` otherwise, or when it cannot be
    /// read (the default selection then stands; `graph.hook_degraded`).
    async fn checklist_now(&self, link: &Link, comments: &[Comment]) -> Option<String> {
        let keyword = link.execute_keyword.to_lowercase();
        if keyword.is_empty() || !comments.iter().any(|c| c.body.to_lowercase().contains(&keyword))
        {
            return None;
        }
        let state = self.load_state(link).await?;
        let node = link.graph.graph().node(&state.current_node)?;
        let selects = node.exit.iter().any(|call| call.hook == Hook::ClassifyPhaseSelection);
        if !selects || state.decisions.contains_key(&node.id) {
            return None;
        }
        let github = self.inner.github.as_ref()?;
        match github.conversation_comments(&link.item).await {
            // The oldest: the-loop posts it on entering the node, before anyone can
            // answer it, so a look-alike posted later never stands in for it.
            Ok(posted) => posted
                .into_iter()
                .find(|c| c.body.contains(CHECKLIST_MARKER) && is_self_authored(&c.body))
                .map(|c| c.body),
            Err(err) => {
                let hook = Hook::ClassifyPhaseSelection.name();
                self.events().emit_async(hook_degraded(&link.item, hook, &err)).await;
                None
            }
        }
    }

    /// Moves the graph one boundary for `event` and carries out what the runtime asks:
    /// at a spawn, the start node (and, for a human one, its gate with the spawning
    /// comment); for an event, the current node's gate with the event's comments. `tmux`
    /// is the session the assignment is pasted into. Returns the step taken.
    pub(crate) async fn graph_advance(
        &self,
        config: &Arc<Config>,
        link: &Link,
        event: &Event,
        boundary: Boundary,
        tmux: &str,
    ) -> Option<Step> {
        let comments = Comment::from_event(event);
        self.advance_with(config, link, comments, boundary, tmux).await.map(|(step, _)| step)
    }

    /// [`Self::graph_advance`] with the gate reading `comments`; the step taken and the
    /// gate's messages.
    async fn advance_with(
        &self,
        config: &Arc<Config>,
        link: &Link,
        comments: Vec<Comment>,
        boundary: Boundary,
        tmux: &str,
    ) -> Option<(Step, Vec<String>)> {
        let checklist = self.checklist_now(link, &comments).await;
        let authorized = config.routing.authorized_users.clone();
        let (events, folder, graph) = (self.events().clone(), link.folder.clone(), link.graph);
        let (item, id, keyword) =
            (link.item.clone(), link.id.clone(), link.execute_keyword.clone());
        let plugin = link.plugin;
        let reports = blocking(move || {
            folder.update(&events, |state| {
                let now = Timestamp::now();
                let mut state =
                    state.unwrap_or_else(|| WorkItemState::new(&item.to_string(), graph.as_str()));
                let item = Item { work_item: &item, id: &id, execute_keyword: &keyword, plugin };
                let input = GateInput {
                    comments: &comments,
                    authorized: &authorized,
                    execute_keyword: &keyword,
                    checklist: checklist.as_deref(),
                };
                let graph = graph.graph();
                let mut reports = Vec::new();
                // A spawn enters the start node; only a human one is judged then, with
                // the spawning comment. An event judges the node the item is at.
                let judge = match boundary {
                    Boundary::Spawn => {
                        let started = runtime::start(graph, &mut state, item, now);
                        let entered = matches!(started.step, Step::Started { .. });
                        reports.push(started);
                        entered && graph.start_node().actor == Actor::Human
                    }
                    Boundary::Event => true,
                };
                if judge {
                    reports.push(runtime::advance(graph, &mut state, item, &input, &folder, now));
                }
                let changed = reports.iter().any(|r| r.changed);
                (changed.then_some(state), reports)
            })
        })
        .await;
        let reports = match reports {
            Ok(reports) => reports,
            Err(err) => {
                self.events().emit_async(link_failed(&link.item, &err)).await;
                return None;
            }
        };
        let answer = reports.last().map(|r| (r.step.clone(), r.messages.clone()));
        for report in reports {
            self.carry_out_graph(link, report, tmux).await;
        }
        answer
    }

    /// The lines and then the effects of one verb, in order.
    async fn carry_out_graph(&self, link: &Link, report: Report, tmux: &str) {
        for line in report.lines {
            self.events().emit_async(line).await;
        }
        for effect in report.effects {
            self.graph_effect(link, effect, tmux).await;
        }
    }

    /// Pastes a node's assignment into the agent in `target`, and says how it went.
    async fn paste_assignment(
        &self,
        item: WorkItemRef,
        target: String,
        node: String,
        text: String,
    ) {
        let (tmux, harness) = (self.inner.tmux.clone(), self.inner.harness.clone());
        let pasted = blocking(move || session::deliver(&tmux, &*harness, &target, &text)).await;
        let line = match pasted {
            Ok(()) => Line::info(Kind::GraphAssignmentDelivered),
            Err(err) => Line::warning(Kind::GraphAssignmentFailed).field("error", err.to_string()),
        };
        self.events().emit_async(line.work_item(&item).field("node", node)).await;
    }

    async fn graph_effect(&self, link: &Link, effect: Effect, tmux: &str) {
        let item = &link.item;
        let degraded = |hook: &str, err: &dyn std::fmt::Display| hook_degraded(item, hook, err);
        match effect {
            Effect::PhaseLabel { phase } => {
                let Some(github) = &self.inner.github else { return };
                let label = format!("loop:{phase}");
                let result = async {
                    let now = github.add_labels(item, &[&label]).await?;
                    for old in now.iter().filter(|l| l.starts_with("loop:") && **l != label) {
                        github.remove_label(item, old).await?;
                    }
                    Ok::<_, loop_github::GithubError>(())
                }
                .await;
                if let Err(err) = result {
                    self.events().emit_async(degraded("set-phase-label", &err)).await;
                }
            }
            Effect::LogEntry { heading } => {
                let path = link.folder.dir().join("execution-log.md");
                let appended = blocking(move || append_if_present(&path, &heading)).await;
                if let Err(err) = appended {
                    self.events().emit_async(degraded("log-entry", &err)).await;
                }
            }
            Effect::Assignment { node, text } => {
                // Typed like any delivery: never into a dialog or past a limit. One held
                // waits on its own, so the step that made it is not held with it.
                let (item, target) = (item.clone(), tmux.to_owned());
                match self.inner.agents.holding(&target) {
                    None => self.paste_assignment(item, target, node, text).await,
                    Some(_) => {
                        let dispatcher = self.clone();
                        tokio::spawn(async move {
                            let agents = dispatcher.inner.agents.clone();
                            if agents.until(|agents| agents.holding(&target)).await {
                                dispatcher.paste_assignment(item, target, node, text).await;
                            }
                        });
                    }
                }
            }
            Effect::Comment { hook, body } => {
                let Some(github) = &self.inner.github else { return };
                if let Err(err) = github.post_comment(item, &mark_self_authored(&body)).await {
                    self.events().emit_async(degraded(hook.name(), &err)).await;
                }
            }
            Effect::Checklist { body } => {
                let Some(github) = &self.inner.github else { return };
                let result = async {
                    let posted = github.conversation_comments(item).await?;
                    if !posted.iter().any(|c| c.body.contains(CHECKLIST_MARKER)) {
                        github.post_comment(item, &mark_self_authored(&body)).await?;
                    }
                    Ok::<_, loop_github::GithubError>(())
                }
                .await;
                if let Err(err) = result {
                    self.events().emit_async(degraded("post-phase-selection", &err)).await;
                }
            }
        }
    }
}

impl Dispatcher {
    /// The work item's frozen `sessionPerPr`, `model` and `effort` (seed 003 R4), from
    /// the state file in its checkout `cwd` — each key it leaves empty from a legacy
    /// portable `graph` section, read and never written — resolved against what the
    /// operator offers: its `routing.tmux.sessionPerPr` and what its
    /// `routing.harnessChoices` offers the harness. A value outside them is refused
    /// (`graph.choice_refused`) and the operator's default stands (abuse cases 1–2).
    pub(crate) async fn choices(&self, config: &Config, item: &WorkItemRef, cwd: &Path) -> Choices {
        let (events, store) = (self.events().clone(), self.inner.store.clone());
        let (spec_dir, target, dir) =
            (config.routing.graph.spec_dir.clone(), item.clone(), cwd.to_owned());
        let frozen = blocking(move || {
            let own = SpecFolder::new(&dir, &spec_dir, &spec_id(target.number()))
                .ok()
                .and_then(|folder| folder.load(&events).ok().flatten())
                .filter(|state| state.work_item == target.to_string())
                .map(|state| Frozen::of(&state))
                .unwrap_or_default();
            let legacy = store.read_section::<LegacyGraph>(&target).ok().and_then(Slot::into_value);
            own.or(legacy.map(|graph| Frozen::of_legacy(&graph.0)).unwrap_or_default())
        })
        .await;
        let offered = Offered {
            session_per_pr: config.routing.tmux.session_per_pr,
            harness: config.routing.harness_choices.offered_to(self.inner.harness.name()),
        };
        let choices = Choices::resolve(&frozen, offered);
        if !choices.refused.is_empty() {
            self.events()
                .emit_async(
                    Line::warning(Kind::GraphChoiceRefused)
                        .work_item(item)
                        .field("refused", &choices.refused),
                )
                .await;
        }
        choices
    }

    /// [`record_pull_request`] for `record`'s work item in its own checkout; a failure is
    /// `graph.link_failed` and costs nothing else.
    pub(crate) async fn note_pull_request(
        &self,
        record: &LocalRecord,
        pr: &WorkItemRef,
        upstream: Upstream,
    ) {
        let Some(own) = record.own_endpoint() else { return };
        let (config, events) = (self.config(), self.events().clone());
        let (owner, cwd, pr_ref) = (record.work_item.clone(), own.cwd.clone(), pr.clone());
        let recorded = blocking(move || {
            record_pull_request(&config, &events, &owner, &cwd, &pr_ref, upstream)
        })
        .await;
        if let Err(err) = recorded {
            self.events().emit_async(link_failed(&record.work_item, &err)).await;
        }
    }
}

/// Records `pr` as a pull request delivering `owner` in the state file of `owner`'s
/// checkout `cwd` (seed 003 R2): a link (`Open`) adds its row and leaves a listed one
/// alone; the close path (`Merged`, `Closed`) sets its upstream state. Only in a state
/// file that exists and names `owner` — a graph this machine drives — so a row alone
/// never starts anything. `true` when the file changed. A row already as it should be
/// costs one read and no lock. Blocking: file IO.
pub fn record_pull_request(
    config: &Config,
    events: &EventLog,
    owner: &WorkItemRef,
    cwd: &Path,
    pr: &WorkItemRef,
    upstream: Upstream,
) -> Result<bool, StoreError> {
    let graph = &config.routing.graph;
    let folder = match SpecFolder::new(cwd, &graph.spec_dir, &spec_id(owner.number())) {
        Ok(folder) if graph.enabled && owner != pr => folder,
        _ => return Ok(false),
    };
    let Some(entry) = PullRequestEntry::open(owner, pr) else { return Ok(false) };
    let owned = owner.to_string();
    let stale = |state: &WorkItemState| {
        let row = state.pull_requests.iter().find(|row| row.pr_ref == entry.pr_ref);
        state.work_item == owned
            && row.is_none_or(|row| upstream != Upstream::Open && row.state != upstream)
    };
    if !folder.load(events)?.is_some_and(|state| stale(&state)) {
        return Ok(false);
    }
    folder.update(events, |state| {
        let Some(mut state) = state.filter(|state| stale(state)) else { return (None, false) };
        let mut changed = state.link_pull_request(entry.clone());
        if upstream != Upstream::Open {
            changed |= state.set_upstream(&entry.pr_ref, upstream);
        }
        (changed.then_some(state), changed)
    })
}

fn link_failed(item: &WorkItemRef, err: &dyn std::fmt::Display) -> Line {
    Line::error(Kind::GraphLinkFailed).work_item(item).field("error", err.to_string())
}

/// `graph.hook_degraded`: `hook` could not do its outward part (a label, a comment, a
/// read); the walk goes on without it.
fn hook_degraded(item: &WorkItemRef, hook: &str, err: &dyn std::fmt::Display) -> Line {
    Line::warning(Kind::GraphHookDegraded)
        .work_item(item)
        .field("hook", hook)
        .field("error", err.to_string())
}

/// Which graph an operator verb is about: `item`'s, in its own session's checkout on this
/// machine (the CLI), or in `checkout` (the control plane's `repo`); a pull request's
/// inner loop there when `pull_request` says which.
#[derive(Debug, Clone)]
pub struct GraphTarget {
    pub item: WorkItemRef,
    pub checkout: Option<PathBuf>,
    pub pull_request: Option<InnerLoop>,
}

impl GraphTarget {
    /// `item`'s own graph, in its session's checkout.
    pub fn session(item: WorkItemRef) -> Self {
        Self { item, checkout: None, pull_request: None }
    }
}

/// A pull request's inner loop: its number, and its repository when it is not the
/// work item's (`pr-loops/<owner>__<repo>/pr-<n>/`).
#[derive(Debug, Clone)]
pub struct InnerLoop {
    pub number: u64,
    pub repository: Option<(String, String)>,
}

/// What `the-loop graph status|check` shows for a work item.
#[derive(Debug, Clone)]
pub struct GraphView {
    /// The `$graph_context` block.
    pub context: String,
    /// The check table.
    pub check: String,
    /// Nothing unsatisfied up to the current node.
    pub ok: bool,
    /// The loop, and the state file as it is (`None`: never entered).
    pub graph: LoopName,
    pub state: Option<WorkItemState>,
}

/// What a `the-loop graph complete` claim (or the control plane's `graph/advance`) came to.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub step: Step,
    pub messages: Vec<String>,
    /// Where the item stands afterwards.
    pub context: String,
    /// The loop, and the state file afterwards.
    pub graph: LoopName,
    pub state: Option<WorkItemState>,
}

impl Dispatcher {
    /// The graph `target` names, its gates passed, and the tmux session of the item's
    /// own session here (`""` when none: an assignment then cannot be pasted, and says so).
    async fn operator_link(&self, target: &GraphTarget) -> Option<(Link, String)> {
        let (registry, item) = (self.inner.registry.clone(), target.item.clone());
        let record = blocking(move || registry.record_owning(&item)).await.ok().flatten();
        let own = record.as_ref().and_then(|r| r.own_endpoint().cloned());
        let (item, cwd) = match (&target.checkout, record, &own) {
            (Some(checkout), _, _) => (target.item.clone(), checkout.clone()),
            (None, Some(record), Some(own)) => (record.work_item, own.cwd.clone()),
            (None, _, _) => return None,
        };
        let config = self.config();
        let mut link = self.graph_link(&config, &item, &cwd, Boundary::Event).await?;
        if let Some(inner) = &target.pull_request {
            let repository = inner.repository.as_ref().map(|(o, r)| (o.as_str(), r.as_str()));
            let dir = inner_loop_dir(repository, inner.number)?;
            let folder = SpecFolder::new(
                &cwd,
                &config.routing.graph.spec_dir,
                &format!("{}/{dir}", link.id),
            )
            .ok()
            .filter(SpecFolder::exists)?;
            link = Link { folder, graph: LoopName::PullRequest, ..link };
        }
        Some((link, own.map(|e| e.tmux_target).unwrap_or_default()))
    }

    /// `the-loop graph status|check`: where `target`'s item stands. `None`: no graph is
    /// driven for it here (no session checkout, disabled, not the item's repository, no
    /// spec folder).
    pub async fn graph_view(&self, target: &GraphTarget) -> Option<GraphView> {
        let (link, _) = self.operator_link(target).await?;
        let state = self.load_state(&link).await;
        let graph = link.graph.graph();
        let (check, ok) = context::check(graph, state.as_ref());
        let context = context::render(graph, state.as_ref(), &link.id, link.plugin);
        Some(GraphView { context, check, ok, graph: link.graph, state })
    }

    /// `the-loop graph complete`: the session's claim that `node` (default: the current
    /// one) is done, judged by its gate under the state file's lock; what the next node's
    /// entry asks is carried out as on any boundary. `None`: no graph for `item` here.
    pub async fn graph_complete(
        &self,
        target: &GraphTarget,
        node: Option<String>,
        by: &str,
    ) -> Option<Claimed> {
        let (link, tmux) = self.operator_link(target).await?;
        let (events, folder, graph, by) =
            (self.events().clone(), link.folder.clone(), link.graph, by.to_owned());
        let (work_item, id, keyword) =
            (link.item.clone(), link.id.clone(), link.execute_keyword.clone());
        let plugin = link.plugin;
        let report = blocking(move || {
            folder.update(&events, |state| {
                let Some(mut state) = state else { return (None, None) };
                let item =
                    Item { work_item: &work_item, id: &id, execute_keyword: &keyword, plugin };
                let report = runtime::complete(
                    graph.graph(),
                    &mut state,
                    item,
                    node.as_deref(),
                    &by,
                    &folder,
                    Timestamp::now(),
                );
                (report.changed.then_some(state), Some(report))
            })
        })
        .await;
        let (step, messages) = match report {
            Ok(Some(report)) => {
                let answer = (report.step.clone(), report.messages.clone());
                self.carry_out_graph(&link, report, &tmux).await;
                answer
            }
            Ok(None) => (Step::NotStarted, Vec::new()),
            Err(err) => {
                self.events().emit_async(link_failed(&link.item, &err)).await;
                return None;
            }
        };
        Some(self.claimed(&link, step, messages).await)
    }

    /// The control plane's `graph/advance`: the current node's gate judged once with no
    /// new comment, exactly as an event's would be (a claim already recorded, an
    /// artifact since written, a decision already taken count). `None`: no graph here.
    pub async fn graph_judge(&self, target: &GraphTarget) -> Option<Claimed> {
        let (link, tmux) = self.operator_link(target).await?;
        let config = self.config();
        let (step, messages) =
            self.advance_with(&config, &link, Vec::new(), Boundary::Event, &tmux).await?;
        Some(self.claimed(&link, step, messages).await)
    }

    /// `the-loop graph force`: `target`'s pointer moved to `to` past its gates, recorded
    /// under the state file's lock ([`runtime::force`]), then `graph.forced`, the audit
    /// comment, and the entered node's entry chain (its label, its assignment pasted into
    /// the item's session). A comment that could not be posted is one more warning: the
    /// state file and the event log already hold the override. `None`: no graph here.
    pub async fn graph_force(
        &self,
        target: &GraphTarget,
        to: &str,
        reason: &str,
        by: &str,
    ) -> Option<Result<Forced, Refused>> {
        let (to, reason, by) = (to.to_owned(), reason.to_owned(), by.to_owned());
        let (link, tmux, forced) = self
            .operator_update(target, move |graph, state, item| {
                runtime::force(graph, state, item, &to, &reason, &by, Timestamp::now())
            })
            .await?;
        let Ok(mut forced) = forced else { return Some(forced) };
        let lines = std::mem::take(&mut forced.lines);
        self.carry_out_override(&link, lines, &forced.audit, &mut forced.warnings).await;
        for effect in std::mem::take(&mut forced.effects) {
            self.graph_effect(&link, effect, &tmux).await;
        }
        Some(Ok(forced))
    }

    /// `the-loop graph skip`: `tokens` declared skipped for `target`'s item under the
    /// state file's lock ([`runtime::skip`]), then `graph.skips_declared` (and a
    /// `graph.skips_rejected` per refused token) and, when anything was declared, the
    /// audit comment. `via` is where it came from (`cli`, `api`). `None`: no graph here.
    pub async fn graph_skip(
        &self,
        target: &GraphTarget,
        tokens: Vec<String>,
        reason: &str,
        by: &str,
        via: &'static str,
    ) -> Option<Result<Declared, Refused>> {
        let (reason, by) = (reason.to_owned(), by.to_owned());
        let (link, _, declared) = self
            .operator_update(target, move |graph, state, item| {
                runtime::skip(graph, state, item, &tokens, &reason, &by, via, Timestamp::now())
            })
            .await?;
        let Ok(mut declared) = declared else { return Some(declared) };
        let audit = declared.audit.take().unwrap_or_default();
        let lines = std::mem::take(&mut declared.lines);
        self.carry_out_override(&link, lines, &audit, &mut declared.warnings).await;
        Some(Ok(declared))
    }

    /// Runs an operator's `verb` on `target`'s state file under its lock (a file not
    /// there yet is the loop's, never entered), saving it when the verb did not refuse;
    /// the link, the item's tmux session here, and the verb's answer.
    async fn operator_update<T: Send + 'static>(
        &self,
        target: &GraphTarget,
        verb: impl FnOnce(&loop_core::graph::Loop, &mut WorkItemState, Item<'_>) -> Result<T, Refused>
        + Send
        + 'static,
    ) -> Option<(Link, String, Result<T, Refused>)> {
        let (link, tmux) = self.operator_link(target).await?;
        let (events, folder, graph) = (self.events().clone(), link.folder.clone(), link.graph);
        let (work_item, id, keyword) =
            (link.item.clone(), link.id.clone(), link.execute_keyword.clone());
        let plugin = link.plugin;
        let answer = blocking(move || {
            folder.update(&events, |state| {
                let mut state = state
                    .unwrap_or_else(|| WorkItemState::new(&work_item.to_string(), graph.as_str()));
                let item =
                    Item { work_item: &work_item, id: &id, execute_keyword: &keyword, plugin };
                let answer = verb(graph.graph(), &mut state, item);
                (answer.is_ok().then_some(state), answer)
            })
        })
        .await;
        match answer {
            Ok(answer) => Some((link, tmux, answer)),
            Err(err) => {
                self.events().emit_async(link_failed(&link.item, &err)).await;
                None
            }
        }
    }

    /// An override's lines, then its audit comment (when there is one) on the work item;
    /// a comment that could not go up is added to `warnings`.
    async fn carry_out_override(
        &self,
        link: &Link,
        lines: Vec<Line>,
        audit: &str,
        warnings: &mut Vec<String>,
    ) {
        for line in lines {
            self.events().emit_async(line).await;
        }
        if audit.is_empty() {
            return;
        }
        let posted = match &self.inner.github {
            Some(github) => github
                .post_comment(&link.item, &mark_self_authored(audit))
                .await
                .map(drop)
                .map_err(|err| err.to_string()),
            None => Err("no GitHub client on this machine".to_owned()),
        };
        if let Err(err) = posted {
            warnings.push(format!("could not post the audit comment on the work item: {err}"));
        }
    }

    async fn claimed(&self, link: &Link, step: Step, messages: Vec<String>) -> Claimed {
        let state = self.load_state(link).await;
        let context = context::render(link.graph.graph(), state.as_ref(), &link.id, link.plugin);
        Claimed { step, messages, context, graph: link.graph, state }
    }
}

/// A step in the words a prompt uses.
pub(crate) fn describe(step: &Step) -> String {
    match step {
        Step::Advanced { from, to, outcome } => format!("`{from}` gave `{outcome}`, now at `{to}`"),
        Step::Parked { node } => format!("`{node}` still waits"),
        Step::Blocked { node } | Step::Escalated { node } => format!("`{node}` blocked"),
        Step::NoEdge { node, outcome } => format!("`{node}` gave `{outcome}`, which leads nowhere"),
        Step::Started { node } | Step::Terminal { node } => format!("at `{node}`"),
        Step::AlreadyStarted | Step::NotStarted => "nothing to judge".to_owned(),
        Step::AlreadyPast { node } | Step::NotCurrent { node, .. } => format!("not at `{node}`"),
    }
}

/// Appends `text` to `path` when the file exists (log-entry keeps no log of its own).
fn append_if_present(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    match std::fs::OpenOptions::new().append(true).open(path) {
        Ok(mut file) => file.write_all(format!("\n{text}").as_bytes()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
    }
}

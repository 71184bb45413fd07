//! Dispatch drives the process graph (docs/process-graph.md, seed 002 issue-113): a
//! successful spawn enters the work item's start node (and a human start node judges the
//! spawning comment once); an event for a live session is judged first at a waiting human
//! gate, else delivered and then advanced one boundary; every prompt carries the
//! `$graph_context` block. The decisions are loop-core's runtime; this module reads the
//! state file and the artifacts, saves under the file's lock before any effect, and
//! carries the effects out (labels, comments, the assignment pasted into the session).
//!
//! Best-effort by rule: whatever goes wrong here is a `graph.link_failed` or
//! `graph.hook_degraded` line and never costs the delivery.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::config::Config;
use loop_core::control::Command;
use loop_core::event::Event;
use loop_core::graph::hooks::{CHECKLIST_MARKER, Comment, Effect, GateInput};
use loop_core::graph::runtime::{self, Item, Report, Step};
use loop_core::graph::state::{WorkItemState, spec_id};
use loop_core::graph::{LoopName, context};
use loop_core::guards::mark_self_authored;
use loop_core::log::{Kind, Line};
use loop_core::record::Control;
use loop_sessions::workspace::checkout_belongs_to;
use loop_store::portable::Slot;
use loop_store::spec_state::SpecFolder;

use super::{Dispatcher, blocking};

/// The work item's graph in one checkout: gates passed.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) item: WorkItemRef,
    folder: SpecFolder,
    graph: LoopName,
    id: String,
    execute_keyword: String,
}

/// Why the graph is not driven for an event; the `reason` of `graph.skipped`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skip {
    /// `routing.graph.enabled: false`, or no armed start (silent, as the reference).
    Quiet,
    ForeignCheckout,
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
        match self.try_link(config, item, cwd, boundary).await {
            Ok(link) => Some(link),
            Err(Skip::Quiet) => None,
            Err(skip) => {
                let reason = match skip {
                    Skip::ForeignCheckout => "foreign-checkout",
                    Skip::SpecDirOutsideCheckout => "spec-dir-outside-checkout",
                    Skip::NoSpecDir => "no-spec-dir",
                    Skip::Quiet => unreachable!("matched above"),
                };
                self.events()
                    .emit_async(
                        Line::info(Kind::GraphSkipped).work_item(item).field("reason", reason),
                    )
                    .await;
                None
            }
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
        let folder = SpecFolder::new(cwd, &config.routing.graph.spec_dir, &id)
            .map_err(|_| Skip::SpecDirOutsideCheckout)?;
        if boundary == Boundary::Event && !folder.exists() {
            return Err(Skip::NoSpecDir);
        }
        let (store, target) = (self.inner.store.clone(), item.clone());
        let control = blocking(move || store.read_section::<Control>(&target)).await;
        let armed_by = match control {
            Ok(Slot::Present(control)) => Some(control.command),
            _ => None,
        };
        let arming =
            [Command::Start, Command::Contribute, Command::Do, Command::Review, Command::Resume];
        if config.routing.control.require_start_command
            && !armed_by.is_some_and(|c| arming.contains(&c))
        {
            return Err(Skip::Quiet);
        }
        if !self.proven(config, item, cwd).await {
            return Err(Skip::ForeignCheckout);
        }
        let (events, reader) = (self.events().clone(), folder.clone());
        let recorded = blocking(move || reader.load(&events)).await.ok().flatten();
        let graph = LoopName::select(recorded.as_ref().map(|s| s.loop_name.as_str()), armed_by);
        let execute_keyword = config.routing.control.keywords.execute.clone();
        Ok(Link { item: item.clone(), folder, graph, id, execute_keyword })
    }

    /// Whether `cwd` is `item`'s checkout (its origin remote), remembered once proven.
    async fn proven(&self, config: &Config, item: &WorkItemRef, cwd: &Path) -> bool {
        let key = (item.clone(), cwd.to_owned());
        let proven = &self.inner.proven_checkouts;
        if proven.lock().unwrap_or_else(PoisonError::into_inner).contains(&key) {
            return true;
        }
        let git = PathBuf::from(&config.routing.workspace.git_binary);
        let bases = config.routing.workspace.clone_urls.clone();
        let (dir, repo) = (cwd.to_owned(), item.repo().clone());
        let belongs = blocking(move || checkout_belongs_to(&git, &dir, &repo, &bases)).await;
        if belongs {
            proven.lock().unwrap_or_else(PoisonError::into_inner).insert(key);
        }
        belongs
    }

    /// The `$graph_context` block for `link` as the state file says now (the start node,
    /// pending, before the first write).
    pub(crate) async fn graph_context(&self, link: &Link) -> String {
        let (events, folder) = (self.events().clone(), link.folder.clone());
        let state = blocking(move || folder.load(&events)).await.ok().flatten();
        context::render(link.graph.graph(), state.as_ref(), &link.id)
    }

    /// Whether the item waits at a human gate, which then reads the event's comment
    /// before the session does (consult first).
    pub(crate) async fn graph_at_human_gate(&self, link: &Link) -> bool {
        let (events, folder) = (self.events().clone(), link.folder.clone());
        let state = blocking(move || folder.load(&events)).await.ok().flatten();
        let graph = link.graph.graph();
        state
            .and_then(|s| graph.node(&s.current_node).cloned())
            .is_some_and(|node| node.actor == loop_core::graph::Actor::Human && !node.terminal)
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
        let authorized = config.routing.authorized_users.clone();
        let (events, folder, graph) = (self.events().clone(), link.folder.clone(), link.graph);
        let (item, id, keyword) =
            (link.item.clone(), link.id.clone(), link.execute_keyword.clone());
        let reports = blocking(move || {
            folder.update(&events, |state| {
                let now = Timestamp::now();
                let mut state =
                    state.unwrap_or_else(|| WorkItemState::new(&item.to_string(), graph.as_str()));
                let item = Item { work_item: &item, id: &id, execute_keyword: &keyword };
                let input = GateInput {
                    comments: &comments,
                    authorized: &authorized,
                    execute_keyword: &keyword,
                };
                let mut reports = Vec::new();
                let human_start =
                    graph.graph().start_node().actor == loop_core::graph::Actor::Human;
                match boundary {
                    Boundary::Spawn => {
                        let started = runtime::start(graph.graph(), &mut state, item, now);
                        let entered = matches!(started.step, Step::Started { .. });
                        reports.push(started);
                        if entered && human_start {
                            reports.push(runtime::advance(
                                graph.graph(),
                                &mut state,
                                item,
                                &input,
                                &folder,
                                now,
                            ));
                        }
                    }
                    Boundary::Event => {
                        reports.push(runtime::advance(
                            graph.graph(),
                            &mut state,
                            item,
                            &input,
                            &folder,
                            now,
                        ));
                    }
                }
                let changed = reports.iter().any(|r| r.changed);
                (changed.then_some(state), reports)
            })
        })
        .await;
        let reports = match reports {
            Ok(reports) => reports,
            Err(err) => {
                self.events()
                    .emit_async(
                        Line::error(Kind::GraphLinkFailed)
                            .work_item(&link.item)
                            .field("error", err.to_string()),
                    )
                    .await;
                return None;
            }
        };
        let step = reports.last().map(|r| r.step.clone());
        for report in reports {
            self.carry_out_graph(link, report, tmux).await;
        }
        step
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

    async fn graph_effect(&self, link: &Link, effect: Effect, tmux: &str) {
        let item = &link.item;
        let degraded = |hook: &str, error: String| {
            Line::warning(Kind::GraphHookDegraded)
                .work_item(item)
                .field("hook", hook)
                .field("error", error)
        };
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
                    self.events().emit_async(degraded("set-phase-label", err.to_string())).await;
                }
            }
            Effect::LogEntry { heading } => {
                let path = link.folder.dir().join("execution-log.md");
                let appended = blocking(move || append_if_present(&path, &heading)).await;
                if let Err(err) = appended {
                    self.events().emit_async(degraded("log-entry", err.to_string())).await;
                }
            }
            Effect::Assignment { node, text } => {
                let (tmux_client, target) = (self.inner.tmux.clone(), tmux.to_owned());
                let pasted = blocking(move || tmux_client.deliver(&target, &text)).await;
                let line = match pasted {
                    Ok(()) => Line::info(Kind::GraphAssignmentDelivered),
                    Err(err) => {
                        Line::warning(Kind::GraphAssignmentFailed).field("error", err.to_string())
                    }
                };
                self.events().emit_async(line.work_item(item).field("node", node)).await;
            }
            Effect::Comment { body } => {
                let Some(github) = &self.inner.github else { return };
                if let Err(err) = github.post_comment(item, &mark_self_authored(&body)).await {
                    self.events().emit_async(degraded("request-review", err.to_string())).await;
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
                    self.events()
                        .emit_async(degraded("post-phase-selection", err.to_string()))
                        .await;
                }
            }
        }
    }
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
}

/// What a `the-loop graph complete` claim came to.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub step: Step,
    pub messages: Vec<String>,
    /// Where the item stands afterwards.
    pub context: String,
}

impl Dispatcher {
    /// The work item's own session on this machine and the graph in its checkout.
    async fn operator_link(&self, item: &WorkItemRef) -> Option<(Link, String)> {
        let (registry, target) = (self.inner.registry.clone(), item.clone());
        let record = blocking(move || registry.record_owning(&target)).await.ok().flatten()?;
        let endpoint = record.own_endpoint()?.clone();
        let config = self.config();
        let link =
            self.graph_link(&config, &record.work_item, &endpoint.cwd, Boundary::Event).await?;
        Some((link, endpoint.tmux_target))
    }

    /// `the-loop graph status|check`: where `item` stands. `None`: no graph is driven for
    /// it on this machine (no session checkout, disabled, not the item's repository).
    pub async fn graph_view(&self, item: &WorkItemRef) -> Option<GraphView> {
        let (link, _) = self.operator_link(item).await?;
        let (events, folder) = (self.events().clone(), link.folder.clone());
        let state = blocking(move || folder.load(&events)).await.ok().flatten();
        let (check, ok) = context::check(link.graph.graph(), state.as_ref());
        Some(GraphView {
            context: context::render(link.graph.graph(), state.as_ref(), &link.id),
            check,
            ok,
        })
    }

    /// `the-loop graph complete`: the session's claim that `node` (default: the current
    /// one) is done, judged by its gate under the state file's lock; what the next node's
    /// entry asks is carried out as on any boundary. `None`: no graph for `item` here.
    pub async fn graph_complete(
        &self,
        item: &WorkItemRef,
        node: Option<String>,
        by: &str,
    ) -> Option<Claimed> {
        let (link, tmux) = self.operator_link(item).await?;
        let (events, folder, graph, by) =
            (self.events().clone(), link.folder.clone(), link.graph, by.to_owned());
        let (work_item, id, keyword) =
            (link.item.clone(), link.id.clone(), link.execute_keyword.clone());
        let report = blocking(move || {
            folder.update(&events, |state| {
                let Some(mut state) = state else { return (None, None) };
                let item = Item { work_item: &work_item, id: &id, execute_keyword: &keyword };
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
        let report = match report {
            Ok(Some(report)) => report,
            Ok(None) => {
                let context = self.graph_context(&link).await;
                return Some(Claimed { step: Step::NotStarted, messages: Vec::new(), context });
            }
            Err(err) => {
                self.events()
                    .emit_async(
                        Line::error(Kind::GraphLinkFailed)
                            .work_item(item)
                            .field("error", err.to_string()),
                    )
                    .await;
                return None;
            }
        };
        let (step, messages) = (report.step.clone(), report.messages.clone());
        self.carry_out_graph(&link, report, &tmux).await;
        let context = self.graph_context(&link).await;
        Some(Claimed { step, messages, context })
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

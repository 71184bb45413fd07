//! The whole decision about one event, as pure functions of facts (ARCHITECTURE, "decide,
//! then do"): the daemon reads the facts, calls these, and carries out what they return.
//!
//! One event is decided in three calls, each at the point where its facts are read:
//!
//! 1. [`judge`], as the event arrives: route → self-marker → empty review → repository
//!    bound → actor guard → existence check → control parse, instance scope and control decision
//!    (SPEC §5). It returns the lines to write and either the [`Judged`] event or the
//!    reason it was dropped. The receiver runs it on its processing thread; the poller
//!    through the dispatcher.
//! 2. [`plan`], once the dispatcher has the event: the dedup key to claim and the ordered
//!    [`Step`]s — record a decision, execute a command, enqueue a delivery or a spawn, bind
//!    a pull request, end what a close closed — in the reference's order (dedup, scope
//!    refusal, reopen, control execution, match, close, spawn gate, bindings, enqueue).
//! 3. [`route_job`], when the work item's worker dequeues the job: spawn, deliver (and
//!    into which endpoint, or whether a pull request gets a session of its own), or drop.
//!
//! Facts that cost something to read — a collaborator roster, a control record, GitHub's
//! word on whether an issue exists — are asked through [`Lookup`] only on the path that
//! needs them, so a delivery pays for the facts its own decision reads and no more. Every
//! other fact (the event, the config, the session records as one [`Snapshot`], `now`) is
//! passed in. Nothing here does IO.
//!
//! Layout: [`decision`] (what became of a delivery, its lines and ledger effect),
//! [`sessions`] (questions about the session records), [`closure`] (what a close ends).

pub mod closure;
pub mod decision;
pub mod sessions;

use std::sync::Arc;

use jiff::Timestamp;

use crate::WorkItemRef;
use crate::config::{Config, SessionPerPr};
use crate::control::{
    self, Command, ControlDecision, Effect, Grantor, Parsed, RosterEdit, SessionState,
    SpawnRefusal, SpawnRequest, Vocabulary,
};
use crate::event::{Actor, DedupKey, Event, EventKind};
use crate::guards::{self, ActorPass, RoutingDrop, ScopePass, ScopeRefusal};
use crate::log::{Kind, Line};
use crate::login::Login;
use crate::record::{Control, ControlSource, LocalRecord};
use crate::route::{self, IssueExistence};

pub use self::decision::{Context, Decision, LedgerEffect};
pub use self::sessions::{Snapshot, endpoint_for, session_state, wants_own_session};

/// Which ingress an event came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ingress {
    Webhook,
    Poll,
}

impl Ingress {
    /// The `source` this ingress stamps on what it records (`ended.source`).
    pub fn source(self) -> &'static str {
        match self {
            Self::Webhook => "gh-webhook",
            Self::Poll => "poll",
        }
    }
}

/// The delivery an event came in: a webhook's, or the poller's stand-in for one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The inbox journal's sequence number (0 for a polled event).
    pub seq: u64,
    /// `X-GitHub-Delivery`; `None` when the request had none (no id-dedup then).
    pub delivery_id: Option<String>,
    /// `X-GitHub-Event` (or the poller's equivalent).
    pub gh_event: String,
    /// Whether its signature was checked.
    pub verified: bool,
    pub received_at: Timestamp,
}

/// The facts a decision reads only when its path needs them. The daemon answers from the
/// state store and GitHub; tests answer from plain maps.
pub trait Lookup: IssueExistence {
    /// The collaborator logins of `item` (none when unreadable: such a roster grants
    /// nobody).
    fn roster(&self, item: &WorkItemRef) -> Vec<Login>;
    /// `item`'s control record: its last recorded command (none when unreadable).
    fn control(&self, item: &WorkItemRef) -> Option<Control>;
    /// Whether this machine keeps a portable record of `item` (it is tracked, so a close
    /// stamps it `ended`).
    fn tracked(&self, item: &WorkItemRef) -> bool;
    /// Whether this machine keeps a session record of `item`, of any status (a closed one
    /// is not in the [`Snapshot`]).
    fn session_recorded(&self, item: &WorkItemRef) -> bool;
    /// Whether `item`'s own checkout exists under the workspace root (a cleanup a crash
    /// cut short left it).
    fn checkout_exists(&self, item: &WorkItemRef) -> bool;
}

/// An event that passed the front door's guards, with every decision the rules made
/// about it.
#[derive(Debug, Clone)]
pub struct Judged {
    pub delivery: Delivery,
    pub event: Event,
    /// The GitHub object the event is about, shared with the poll ingress.
    pub dedup_key: Option<DedupKey>,
    /// The work items it routes to, in order, after the repository bound and the
    /// existence check.
    pub refs: Vec<WorkItemRef>,
    /// How the actor guard let it in.
    pub actor: ActorPass,
    /// It carries `routing.autoExecuteLabel`.
    pub labeled: bool,
    /// The control target (reference §5.3): the first live record owning a ref, else the
    /// first ref.
    pub target: Option<WorkItemRef>,
    /// What the comment says to the-loop.
    pub parsed: Parsed,
    /// Instance scope; a refusal is settled by the dispatcher.
    pub scope: Result<ScopePass, ScopeRefusal>,
    /// The control decision for the target as it is now.
    pub decision: ControlDecision,
    /// The spawn-policy gate for the target, which an unmatched event is planned by.
    pub spawn_gate: Result<(), SpawnRefusal>,
    /// The config the event was judged under.
    pub config: Arc<Config>,
}

/// Why the front door dropped an event; its line is the last of [`Judgement::lines`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    pub reason: &'static str,
}

/// What [`judge`] says: the lines to write, in order, and the verdict.
#[derive(Debug, Clone)]
pub struct Judgement {
    pub lines: Vec<Line>,
    pub verdict: Result<Box<Judged>, Dropped>,
}

/// `gh_event`, `action` and `delivery_id`, the fields every front-door line carries.
pub fn delivery_fields(line: Line, delivery: &Delivery, event: &Event) -> Line {
    line.field("gh_event", &delivery.gh_event)
        .field("action", &event.action)
        .field("delivery_id", &delivery.delivery_id)
}

/// Judges a normalized event, for both ingresses: route → self-marker → repository bound
/// → actor guard → existence check → control parse, instance scope and control decision
/// (SPEC §5). Every drop has its line with a reason (reference §8) carrying
/// `delivery_id`, `gh_event`, `action` and, once known, `actor` and `work_items`.
/// `sessions` is this machine's session records; rosters, control records and existence
/// are asked of `facts` as the path reaches them.
pub fn judge(
    event: Event,
    delivery: Delivery,
    config: Arc<Config>,
    sessions: &Snapshot,
    facts: &dyn Lookup,
) -> Judgement {
    let mut lines = Vec::new();
    let verdict = judge_into(&mut lines, &event, &delivery, &config, sessions, facts);
    let verdict = verdict.map(|front| {
        let dedup_key = event.dedup_key();
        Box::new(Judged {
            delivery,
            event,
            dedup_key,
            refs: front.refs,
            actor: front.actor,
            labeled: front.labeled,
            target: front.target,
            parsed: front.parsed,
            scope: front.scope,
            decision: front.decision,
            spawn_gate: front.spawn_gate,
            config,
        })
    });
    Judgement { lines, verdict }
}

/// What the front door decided about an event it let through.
struct Front {
    refs: Vec<WorkItemRef>,
    actor: ActorPass,
    labeled: bool,
    target: Option<WorkItemRef>,
    parsed: Parsed,
    scope: Result<ScopePass, ScopeRefusal>,
    decision: ControlDecision,
    spawn_gate: Result<(), SpawnRefusal>,
}

fn judge_into(
    lines: &mut Vec<Line>,
    event: &Event,
    delivery: &Delivery,
    config: &Config,
    sessions: &Snapshot,
    facts: &dyn Lookup,
) -> Result<Front, Dropped> {
    let line = |line: Line| delivery_fields(line, delivery, event);
    let mut drop = |line: Line, reason: &'static str| {
        lines.push(line);
        Dropped { reason }
    };
    let routed = route::route(event);
    if routed.is_empty() {
        let line = line(Line::debug(Kind::RoutingDropped)).field("reason", "no-work-item");
        return Err(drop(line, "no-work-item"));
    }
    let work_items: Vec<WorkItemRef> = routed.items().cloned().collect();
    let dropped = |drop: &RoutingDrop, level: fn(Kind) -> Line| {
        line(level(Kind::RoutingDropped))
            .field("reason", drop.reason())
            .field("actor", event.actor.name())
            .field("work_items", &work_items)
    };
    if let Err(refusal) = guards::self_marker(event) {
        return Err(drop(dropped(&refusal, Line::debug), refusal.reason()));
    }
    if let Err(refusal) = guards::review_content(event) {
        return Err(drop(dropped(&refusal, Line::debug), refusal.reason()));
    }
    let bounded = match guards::repository_bound(event, routed, &config.repositories) {
        Ok(bounded) => bounded,
        Err(refusal) => {
            let repository = match &refusal {
                RoutingDrop::UndeclaredRepository { repository } => Some(repository.to_string()),
                _ => None,
            };
            let line = dropped(&refusal, Line::info).field("repository", repository);
            return Err(drop(line, refusal.reason()));
        }
    };
    let authorized = &config.routing.authorized_users;
    let pass = match guards::actor(event, &bounded.routed, authorized, |item| facts.roster(item)) {
        Ok(pass) => pass,
        Err(refusal) => return Err(drop(dropped(&refusal, Line::warning), refusal.reason())),
    };
    let work_items: Vec<WorkItemRef> = bounded.routed.items().cloned().collect();
    if pass == ActorPass::Collaborator {
        lines.push(
            line(Line::info(Kind::RoutingCollaborator))
                .field("actor", event.actor.name())
                .field("work_items", &work_items),
        );
    }
    let labeled = event.carries_label(&config.routing.auto_execute_label);
    lines.push(
        line(Line::info(Kind::RoutingRouted))
            .field("actor", event.actor.name())
            .field("pass", pass.reason())
            .field("work_items", &work_items)
            .field("labeled", labeled)
            .field("undeclared", (!bounded.dropped.is_empty()).then_some(&bounded.dropped)),
    );

    let serving = sessions.serving();
    let owned = work_items.iter().any(|item| serving.contains_key(item));
    let verified = bounded.routed.verify(owned, facts);
    for ghost in &verified.dropped {
        lines.push(
            line(Line::warning(Kind::RoutingLinkageDropped))
                .work_item(ghost)
                .field("linked_by", "branch")
                .field("reason", "not-found"),
        );
    }
    if let Some(reason) = verified.drop_reason() {
        let line = line(Line::warning(Kind::DispatchDropped))
            .field("reason", reason)
            .field("work_items", &verified.dropped);
        lines.push(line);
        return Err(Dropped { reason });
    }
    let refs: Vec<WorkItemRef> = verified.kept.items().cloned().collect();

    let parsed = event
        .comment_body()
        .map_or(Parsed::Plain, |body| Vocabulary::from(&config.routing.control).parse(body));
    let command = parsed.command();
    let pull_request = event.pull_request();
    let owner = |item: &WorkItemRef| serving.get(item).map(|(owner, _)| owner.clone());
    let target = control::target(command, &refs, pull_request.as_ref(), owner);
    let last_command = |item: &WorkItemRef| facts.control(item).map(|control| control.command);
    let scope = guards::instance_scope(&config.instance, event.comment_body(), &refs, |item| {
        serving.contains_key(item) || last_command(item).is_some()
    });
    let session = target
        .as_ref()
        .and_then(|target| serving.get(target))
        .map_or(SessionState::None, |(_, state)| *state);
    let gate = control::spawn_gate(&SpawnRequest {
        policy: config.routing.spawn_on_unmatched,
        labeled,
        actor: pass,
        target: target.as_ref(),
        start_required: control::start_required(&config.routing.control),
        command,
        last_recorded: target.as_ref().and_then(last_command),
    });
    let decision = control::decide(&parsed, &event.actor, authorized, session, gate);
    Ok(Front { refs, actor: pass, labeled, target, parsed, scope, decision, spawn_gate: gate })
}

/// What the dispatcher does with a judged event: claim its dedup key, then carry out the
/// steps in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The facts every line about the delivery carries.
    pub cx: Context,
    /// The dedup key to take in first: when it is already taken the delivery is a
    /// duplicate ([`Decision::Duplicate`]) and no step runs.
    pub claim: Option<String>,
    pub steps: Vec<Step>,
}

/// One step of a [`Plan`]. A step that records an effect's outcome names the decision it
/// records; the executor supplies only what the effect itself reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Write the decision's lines and apply its ledger effect.
    Record(Decision),
    /// A reopen: clear `item`'s `ended` stamp if it has one, recording
    /// [`Decision::Reopened`] (or [`Decision::StampFailed`]).
    Reopen { item: WorkItemRef },
    /// Record `command` as `target`'s last, with the delivery that carried it.
    RecordCommand {
        target: WorkItemRef,
        command: Command,
        actor: Login,
        note: Option<String>,
        key: Option<String>,
    },
    /// Carry out a command's effect on the target's session (`session`: its live record,
    /// if any), then record [`Decision::Executed`] with what it did. `reason`: a deny's,
    /// given to the agent.
    Execute {
        command: Command,
        actor: Login,
        effect: Effect,
        target: WorkItemRef,
        session: Option<Box<LocalRecord>>,
        reason: Option<String>,
    },
    /// Grant or revoke `logins` on `target`'s roster: [`Decision::RosterEdited`] per login,
    /// or [`Decision::ControlConsumed`] when the roster already carries this delivery.
    EditRoster {
        target: WorkItemRef,
        command: Command,
        edit: RosterEdit,
        logins: Vec<Login>,
        grantor: Grantor,
        key: Option<String>,
    },
    /// Queue the event on `item`'s worker (`spawn`: the job may spawn its session). The
    /// delivery is released when it cannot be queued.
    Enqueue { item: WorkItemRef, spawn: bool },
    /// `item`'s session is being spawned: queue the event behind that spawn on `item`'s
    /// worker ([`Decision::AwaitingSpawn`]) and plan it again, without claiming its key a
    /// second time, once the spawn ended. The delivery is released when it cannot be
    /// queued.
    AwaitSpawn { item: WorkItemRef },
    /// A close of something `item`'s session serves, while `item`'s worker holds
    /// deliveries accepted before it: queue the close behind them
    /// ([`Decision::AwaitingQueue`]) and plan it again, without claiming its key a second
    /// time, once the worker reaches it. The delivery is released when it cannot be
    /// queued.
    AwaitQueue { item: WorkItemRef },
    /// Record `pull_request` on `item`'s session record as delivering it.
    BindPullRequest { item: WorkItemRef, pull_request: WorkItemRef },
    /// `item`'s session is paused, so the event is dropped there: recorded (settled)
    /// unless an [`Step::Enqueue`] of this plan queued it elsewhere, then only its line.
    Paused { item: WorkItemRef },
    /// A close: end the closed item's own session (`session.closed`).
    CloseSession { record: Box<LocalRecord> },
    /// A close: end only `pull_request`'s endpoint on `record`, and record its
    /// `upstream` state in the work item's state file (seed 003 R2).
    CloseEndpoint {
        record: Box<LocalRecord>,
        pull_request: WorkItemRef,
        upstream: crate::graph::state::Upstream,
    },
    /// Stamp `item` `ended` and disarm it (control and roster cleared), then record
    /// `stamped` and run `then`; when the write fails, record
    /// [`Decision::StampFailed`] and skip `then`.
    StampEnded {
        item: WorkItemRef,
        ended: Box<crate::record::Ended>,
        stamped: Box<Decision>,
        then: Vec<Step>,
    },
    /// Clean up `item`'s session and checkout (`why`: what asked for it).
    Cleanup { item: WorkItemRef, actor: Login, why: &'static str },
}

/// The steps for a judged event, given the session records as they are now.
pub fn plan(
    judged: &Judged,
    sessions: &Snapshot,
    facts: &dyn Lookup,
    ingress: Ingress,
    now: Timestamp,
) -> Plan {
    let Judged { delivery, event, dedup_key, refs, config, .. } = judged;
    let key = dedup_key
        .as_ref()
        .map(|key| key.as_str().to_owned())
        .or_else(|| delivery.delivery_id.clone())
        .filter(|key| !key.is_empty());
    let cx = Context {
        gh_event: delivery.gh_event.clone(),
        action: event.action.clone(),
        delivery_id: key.clone(),
        gh_delivery: delivery.delivery_id.clone(),
        actor: event.actor.name().map(str::to_owned),
        work_items: refs.clone(),
        inbox_seq: (ingress == Ingress::Webhook).then_some(delivery.seq),
    };
    if !config.routing.enabled {
        return Plan { cx, claim: None, steps: Vec::new() };
    }
    let steps = steps(judged, key.as_deref(), sessions, facts, ingress, now);
    Plan { cx, claim: key, steps }
}

fn steps(
    judged: &Judged,
    key: Option<&str>,
    sessions: &Snapshot,
    facts: &dyn Lookup,
    ingress: Ingress,
    now: Timestamp,
) -> Vec<Step> {
    let Judged { event, refs, target, parsed, scope, decision, spawn_gate, config, .. } = judged;
    let mut steps = Vec::new();
    if let Err(refusal) = scope {
        let command = parsed
            .command()
            .filter(|_| named_and_authorized(&event.actor, &config.routing.authorized_users));
        let instance = config.instance.name.clone();
        steps.push(Step::Record(Decision::OutOfScope {
            refusal: refusal.clone(),
            instance,
            command,
        }));
        return steps;
    }
    // An event (not a command) about an item whose session is being spawned is planned
    // once that session exists — or, when the spawn failed, by the rules as they are then.
    if matches!(decision, ControlDecision::Forward | ControlDecision::HandToGraph { .. })
        && let Some(item) = sessions.spawn_awaited(refs)
    {
        steps.push(Step::AwaitSpawn { item: item.clone() });
        return steps;
    }
    if let Some(item) = reopened(event) {
        steps.push(Step::Reopen { item });
    }

    // Control: the named-actor re-check and the per-command table were applied when the
    // event was judged. A replay is this delivery's command recorded last by a process
    // that died before the ledger settled the key (docs/dispatcher.md, "Control commands
    // across a crash"): only an effect the current state shows never took place is
    // carried out (without recording the command again); anything else is consumed.
    let decision = restart_if_exited(decision, target.as_ref(), sessions, &event.actor);
    let decision: &ControlDecision = &decision;
    let command = parsed.command();
    let note = event.comment.as_ref().and_then(|c| c.html_url.clone());
    let replay = match (key, command, target) {
        (Some(key), Some(_), Some(item)) => facts
            .control(item)
            .and_then(|control| control.delivery_id)
            .is_some_and(|recorded| recorded == key),
        _ => false,
    };
    if replay
        && let (Some(command), Some(item)) = (command, target)
        && !completes_on_replay(decision, item, facts)
    {
        steps.push(Step::Record(Decision::ControlConsumed { command, target: item.clone() }));
        return steps;
    }
    let no_work_item = Step::Record(Decision::NoWorkItem { reason: "no-work-item" });
    match decision {
        ControlDecision::Forward => {}
        ControlDecision::Ambiguous { commands } => {
            steps.push(Step::Record(Decision::Ambiguous { commands: commands.clone() }));
            return steps;
        }
        ControlDecision::Rejected { command, rejection } => {
            let target = target.clone();
            let rejected = Decision::Rejected { command: *command, rejection: *rejection, target };
            steps.push(Step::Record(rejected));
            return steps;
        }
        ControlDecision::Execute { command, actor, effect } => {
            let Some(target) = target.clone() else {
                steps.push(no_work_item);
                return steps;
            };
            if !replay && !command.answers_permission() {
                steps.push(Step::RecordCommand {
                    target: target.clone(),
                    command: *command,
                    actor: actor.clone(),
                    note,
                    key: key.map(str::to_owned),
                });
            }
            if matches!(effect, Effect::Spawn | Effect::Restart) {
                // The spawn, or the delivery that respawns the agent, is the command's
                // work: the key stays in flight until it ends.
                let spawn = *effect == Effect::Spawn;
                steps.push(Step::Enqueue { item: target, spawn });
                return steps;
            }
            let session = sessions.owner(&target).cloned().map(Box::new);
            let reason = match command {
                Command::Deny => event.comment.as_ref().and_then(|comment| {
                    let keyword = command.keyword(&config.routing.control.keywords);
                    crate::control::rest_of_line(comment.body.as_deref()?, keyword)
                }),
                _ => None,
            };
            steps.push(Step::Execute {
                command: *command,
                actor: actor.clone(),
                effect: *effect,
                target,
                session,
                reason,
            });
            return steps;
        }
        ControlDecision::Roster { edit, actor, logins } => {
            let Some(target) = target.clone() else {
                steps.push(no_work_item);
                return steps;
            };
            let command = match edit {
                RosterEdit::Grant => Command::AddCollaborator,
                RosterEdit::Revoke => Command::RemoveCollaborator,
            };
            let grantor =
                Grantor { by: actor.clone(), at: now, source: ControlSource::Comment, note };
            steps.push(Step::EditRoster {
                target,
                command,
                edit: *edit,
                logins: logins.clone(),
                grantor,
                key: key.map(str::to_owned),
            });
            return steps;
        }
        ControlDecision::HandToGraph { actor } => {
            if let Some(target) = target.clone() {
                steps.push(Step::Record(Decision::HandedToGraph { actor: actor.clone(), target }));
            }
        }
    }

    // Match, then closes, unmatched events, bindings and delivery.
    let matched = sessions.matches(refs);
    if event.is_close() {
        let closing = closure::steps(event, sessions, refs, config, ingress, now, facts);
        let waits = matches!(closing.as_slice(), [Step::AwaitQueue { .. }]);
        steps.extend(closing);
        if !waits {
            steps.push(Step::Record(Decision::Closed { reason: closure::reason(event) }));
        }
        return steps;
    }
    if matched.is_empty() {
        // The gate judged at the front door: the target's control record is read once.
        steps.push(match (*spawn_gate, target.clone()) {
            (Ok(()), Some(item)) => Step::Enqueue { item, spawn: true },
            (Ok(()), None) => no_work_item,
            (Err(refusal), _) => Step::Record(Decision::SpawnRefused { refusal }),
        });
        return steps;
    }
    let pull_request = event.pull_request();
    if let Some(pr) = &pull_request {
        for record in matched.iter().filter(|record| &record.work_item != pr) {
            let (item, pull_request) = (record.work_item.clone(), pr.clone());
            steps.push(Step::BindPullRequest { item, pull_request });
        }
    }
    let mode = config.routing.tmux.session_per_pr;
    let mut paused = Vec::new();
    for record in matched {
        let item = record.work_item.clone();
        if session_state(Some(record)) == SessionState::Paused {
            paused.push(Step::Paused { item });
            continue;
        }
        let (_, endpoint) = endpoint_for(record, pull_request.as_ref(), mode);
        if let (Some(key), Some(endpoint)) = (key, endpoint)
            && endpoint.has_delivered(key)
        {
            steps.push(Step::Record(Decision::AlreadyProcessed { item }));
            continue;
        }
        steps.push(Step::Enqueue { item, spawn: false });
    }
    // A paused session's events are dropped; the delivery is settled only when nothing
    // else took it.
    steps.extend(paused);
    steps
}

/// Whether a replayed command's effect is still to be carried out — the judged decision
/// and the state show it never (fully) took place. A spawn, pause, resume or stop decided
/// again is one that never happened (a start over a live session decides `Noop`, a stop
/// over none decides `Noop`). A cleanup is decided whatever the state, so the state
/// itself is asked: it removes the session record last, so a record still there — or,
/// with no record, the work item's own checkout — means it was cut short, and running it
/// again (it is idempotent) completes it. Anything but an execution completes nothing.
fn completes_on_replay(
    decision: &ControlDecision,
    target: &WorkItemRef,
    facts: &dyn Lookup,
) -> bool {
    let ControlDecision::Execute { effect, .. } = decision else { return false };
    match effect {
        Effect::Spawn | Effect::Restart | Effect::Pause | Effect::Resume | Effect::Stop => true,
        // An answer is never recorded, so it is never taken for a replay.
        Effect::Noop | Effect::Answer { .. } => false,
        Effect::Cleanup => facts.session_recorded(target) || facts.checkout_exists(target),
    }
}

/// The front door judges a command against the records alone; only the plan's snapshot
/// knows which agents exited. A command that would bring the session back — `resume`,
/// which found nothing paused, or `start` (`contribute`, `do`, `review`), which found it
/// live — restarts the target's agent when it exited.
fn restart_if_exited<'a>(
    decision: &'a ControlDecision,
    target: Option<&WorkItemRef>,
    sessions: &Snapshot,
    actor: &Actor,
) -> std::borrow::Cow<'a, ControlDecision> {
    use std::borrow::Cow;
    let brings_back = match decision {
        ControlDecision::Rejected { command, rejection: control::Rejection::NothingToResume } => {
            Some(*command)
        }
        ControlDecision::Execute { command, effect: Effect::Noop, .. } if command.spawns() => {
            Some(*command)
        }
        _ => None,
    };
    let exited = target.is_some_and(|target| sessions.agent_exited(target));
    match (brings_back, actor.login(), exited) {
        (Some(command), Some(actor), true) => Cow::Owned(ControlDecision::Execute {
            command,
            actor: actor.clone(),
            effect: Effect::Restart,
        }),
        _ => Cow::Borrowed(decision),
    }
}

/// The item an `issues`/`pull_request` reopen names.
fn reopened(event: &Event) -> Option<WorkItemRef> {
    let reopen = matches!(event.kind, EventKind::Issues | EventKind::PullRequest)
        && event.action.as_deref() == Some("reopened");
    let number = event.entity.as_ref().and_then(|e| e.number);
    event.repository.as_ref().zip(number).map(|(repo, number)| repo.item(number)).filter(|_| reopen)
}

fn named_and_authorized(actor: &Actor, authorized: &[Login]) -> bool {
    actor.login().is_some_and(|login| authorized.contains(login))
}

/// What the work item's worker does with a job when it dequeues it, against the session
/// record owning the job's target as it is then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobRoute {
    /// No session, and the job was queued to spawn one: spawn it.
    Spawn,
    /// The session disappeared between enqueue and dequeue ([`Decision::SessionVanished`]).
    Vanished { item: WorkItemRef },
    /// The owner's session is paused ([`Decision::SessionPaused`]).
    Paused { item: WorkItemRef },
    /// Deliver into the owner's session.
    Deliver {
        record: Box<LocalRecord>,
        /// A pull request endpoint of its own to spawn first, or the reason it is not.
        pr_session: Option<PrSession>,
        /// The endpoint to paste into when no PR session took the event; `None`: none
        /// exists ([`Decision::SessionVanished`]).
        endpoint: Option<WorkItemRef>,
    },
}

/// Whether an event about a pull request gets that pull request's own session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrSession {
    /// Spawn its endpoint in a checkout of its own and paste the event there (on
    /// failure, the event goes to `endpoint`, with `session.pr_session_declined`).
    Spawn { pull_request: WorkItemRef },
    /// It would get one, but cannot (`session.pr_session_declined` with the reason).
    Declined { pull_request: WorkItemRef, reason: &'static str },
}

/// Routes a dequeued job for `target` (reference §5.5, §5.7): `owner` is the live record
/// owning the target now, `spawn` whether the job was queued to spawn, `mode` how many
/// sessions the owner's pull requests get (its frozen choice, else the operator's).
pub fn route_job(
    target: &WorkItemRef,
    owner: Option<LocalRecord>,
    spawn: bool,
    event: &Event,
    config: &Config,
    mode: SessionPerPr,
) -> JobRoute {
    let record = match owner {
        None if spawn => return JobRoute::Spawn,
        None => return JobRoute::Vanished { item: target.clone() },
        Some(record) => record,
    };
    if session_state(Some(&record)) == SessionState::Paused {
        return JobRoute::Paused { item: record.work_item.clone() };
    }
    let pull_request = event.pull_request();
    let pr_session = pull_request.as_ref().and_then(|pr| {
        // A PR endpoint of its own (never for a PR whose endpoint was closed) is spawned
        // only in a checkout of its own; without a workspace root there is none.
        let wants = pr != &record.work_item
            && wants_own_session(mode, &record.work_item, pr)
            && record.endpoints.get(pr).is_none_or(|e| e.is_live() && e.tmux_target.is_empty());
        let pull_request = pr.clone();
        match (wants, config.routing.workspace.root.is_some()) {
            (false, _) => None,
            (true, true) => Some(PrSession::Spawn { pull_request }),
            (true, false) => {
                Some(PrSession::Declined { pull_request, reason: "no-separate-checkout" })
            }
        }
    });
    let (endpoint_ref, endpoint) = endpoint_for(&record, pull_request.as_ref(), mode);
    let endpoint = endpoint.map(|_| endpoint_ref.clone());
    JobRoute::Deliver { record: Box::new(record), pr_session, endpoint }
}

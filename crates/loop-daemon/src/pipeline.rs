//! The one pipeline both ingresses feed (SPEC §5; reference §2, §5.2).
//!
//! [`judge`] takes a normalized event through routing and the guards: route →
//! self-marker → repository bound → actor guard → existence check → control parse,
//! instance scope and control decision. The receiver calls it for each journalled
//! delivery and hands the [`Judged`] value to the dispatcher; the poller's events take
//! the same path through `poller::seam::Dispatch`, implemented here over the dispatcher.
//!
//! [`Dispatcher::handle`] runs the rest in the reference's order: dedup, scope refusal,
//! reopen, control execution, match, close, spawn gate, PR bindings, enqueue, each
//! outcome recorded as a [`Decision`]. The rules are loop-core's; this module gathers
//! the facts they read (records, rosters, the last recorded command) and applies their
//! answers. It never pastes or spawns itself: that happens on the work item's queue.

use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::config::Config;
use loop_core::control::{
    self, ControlDecision, Effect, Grantor, Parsed, RosterEdit, SessionState, SpawnRequest,
    Vocabulary, spawn_gate, start_required,
};
use loop_core::event::{Actor, Event};
use loop_core::guards::{self, ActorPass, RoutingDrop};
use loop_core::log::Line;
use loop_core::login::Login;
use loop_core::record::{Collaborators, Control, ControlSource, EndpointStatus};
use loop_core::route::{self, Existence, IssueExistence};
use loop_store::{EventLog, StateStore};

use crate::dispatcher::DeliveryStatus;
use crate::dispatcher::Dispatcher;
use crate::dispatcher::RosterOutcome;
use crate::dispatcher::closure::close_reason;
use crate::dispatcher::decision::{Context, Decision};
use crate::dispatcher::records::{endpoint_for, session_state};
use crate::metrics::{Metrics, Outcome};
use crate::poller::seam::{self, Dispatched};
use crate::receiver::{Delivery, Dispatch, Judged};
use loop_store::Mark;

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

impl Dispatcher {
    /// Takes a judged event through the rest of the pipeline: dedup, instance-scope
    /// refusal, reopen, control execution, match, close, spawn gate, PR bindings and
    /// enqueue. Deliveries and spawns run on their work item's worker;
    /// [`Dispatcher::idle`] says when they are done.
    pub async fn handle(&self, judged: Judged, ingress: Ingress) {
        let Judged {
            delivery,
            event,
            dedup_key,
            refs,
            actor,
            target,
            parsed,
            scope,
            decision,
            config,
            ..
        } = judged;
        let event = Arc::new(event);
        let key = dedup_key
            .map(|key| key.as_str().to_owned())
            .or_else(|| delivery.delivery_id.clone())
            .filter(|key| !key.is_empty());
        let cx = Context {
            gh_event: delivery.gh_event,
            action: event.action.clone(),
            delivery_id: key,
            gh_delivery: delivery.delivery_id,
            actor: event.actor.name().map(str::to_owned),
            work_items: refs.clone(),
            inbox_seq: (ingress == Ingress::Webhook).then_some(delivery.seq),
        };
        // The receiver re-reads the config file per delivery: what judged this event is
        // what the dispatcher runs under from now on (hot reload).
        if !Arc::ptr_eq(&config, &self.config()) {
            self.set_config(config.clone());
        }
        if !config.routing.enabled {
            return;
        }

        // Dedup: marked at intake, so an in-flight duplicate cannot run twice.
        if let Some(key) = cx.delivery_id.clone()
            && !self.take_in(&key).await
        {
            return self.record(&Decision::Duplicate, &cx).await;
        }

        let registry = self.snapshot().await;
        if let Err(refusal) = scope {
            let command = match &parsed {
                Parsed::Command { command, .. }
                    if named_and_authorized(&event.actor, &config.routing.authorized_users) =>
                {
                    Some(*command)
                }
                _ => None,
            };
            let instance = config.instance.name.clone();
            return self.record(&Decision::OutOfScope { refusal, instance, command }, &cx).await;
        }

        self.reopen(&event, &cx, ingress).await;

        // Control: the named-actor re-check and the per-command table were applied by
        // loop-core when the event was judged; the spawn gate is asked again for an
        // unmatched event below.
        let pull_request = event.pull_request();
        let command = match &parsed {
            Parsed::Command { command, .. } => Some(*command),
            _ => None,
        };
        let target_record = target.as_ref().and_then(|t| registry.owner(t));
        let note = event.comment.as_ref().and_then(|c| c.html_url.clone());
        // A replay: this delivery's command is the one recorded last, by a process that
        // died before the ledger settled the key (docs/dispatcher.md, "Control commands
        // across a crash"). Only an effect the current state shows never took place is
        // carried out (without recording the command again); anything else is consumed.
        let replay = match (&cx.delivery_id, command, &target) {
            (Some(key), Some(_), Some(item)) => self.replays_command(item, key).await,
            _ => false,
        };
        let completes = match (&decision, &target) {
            (ControlDecision::Execute { effect, .. }, Some(item)) if replay => {
                self.completes_on_replay(*effect, item, &registry).await
            }
            _ => false,
        };
        if replay
            && let (Some(command), Some(item)) = (command, &target)
            && !completes
        {
            let decision = Decision::ControlConsumed { command, target: item.clone() };
            return self.record(&decision, &cx).await;
        }
        match decision {
            ControlDecision::Forward => {}
            ControlDecision::Ambiguous { commands } => {
                return self.record(&Decision::Ambiguous { commands }, &cx).await;
            }
            ControlDecision::Rejected { command, rejection } => {
                let decision = Decision::Rejected { command, rejection, target };
                return self.record(&decision, &cx).await;
            }
            ControlDecision::Execute { command, actor, effect } => {
                let Some(target) = target else {
                    return self
                        .record(&Decision::NoWorkItem { reason: "no-work-item" }, &cx)
                        .await;
                };
                if !replay {
                    let key = cx.delivery_id.clone();
                    self.record_command(&target, command, &actor, note, key).await;
                }
                if effect == Effect::Spawn {
                    // The spawn is the delivery: the key stays in flight until it ends.
                    self.enqueue_or_release(event.clone(), &cx, target, true).await;
                    return;
                }
                let effect = self.execute(effect, &target, target_record, &actor).await;
                return self
                    .record(&Decision::Executed { command, actor, effect, target }, &cx)
                    .await;
            }
            ControlDecision::Roster { edit, actor, logins } => {
                let Some(target) = target else {
                    return self
                        .record(&Decision::NoWorkItem { reason: "no-work-item" }, &cx)
                        .await;
                };
                let command = match edit {
                    RosterEdit::Grant => control::Command::AddCollaborator,
                    RosterEdit::Revoke => control::Command::RemoveCollaborator,
                };
                let grantor = Grantor {
                    by: actor.clone(),
                    at: Timestamp::now(),
                    source: ControlSource::Comment,
                    note,
                };
                let key = cx.delivery_id.clone();
                let effects = match self.edit_roster(&target, edit, logins, grantor, key).await {
                    RosterOutcome::Edited(effects) => effects,
                    RosterOutcome::Replayed => {
                        let decision = Decision::ControlConsumed { command, target };
                        return self.record(&decision, &cx).await;
                    }
                };
                for (collaborator, effect) in effects {
                    let decision = Decision::RosterEdited {
                        command,
                        actor: actor.clone(),
                        collaborator,
                        effect: effect.as_str(),
                        target: target.clone(),
                    };
                    self.record(&decision, &cx).await;
                }
                return;
            }
            ControlDecision::HandToGraph { actor } => {
                if let Some(target) = target.clone() {
                    self.record(&Decision::HandedToGraph { actor, target }, &cx).await;
                }
            }
        }

        // Match, then closes, unmatched events, bindings and delivery.
        let matched = registry.matches(&refs);
        if event.is_close() {
            // A stamp that could not be written is logged; the webhook path has no retry.
            let _logged = self.end_closed(&event, &cx, ingress, &registry, &refs).await;
            let decision = Decision::Closed { reason: close_reason(&event) };
            return self.record(&decision, &cx).await;
        }
        if matched.is_empty() {
            let last_recorded = match &target {
                Some(target) => self.last_command(target).await,
                None => None,
            };
            let gate = spawn_gate(&SpawnRequest {
                policy: config.routing.spawn_on_unmatched,
                labeled: event.carries_label(&config.routing.auto_execute_label),
                actor,
                target: target.as_ref(),
                start_required: start_required(&config.routing.control),
                command,
                last_recorded,
            });
            return match (gate, target) {
                (Ok(()), Some(target)) => {
                    self.enqueue_or_release(event.clone(), &cx, target, true).await;
                }
                (Ok(()), None) => {
                    self.record(&Decision::NoWorkItem { reason: "no-work-item" }, &cx).await
                }
                (Err(refusal), _) => self.record(&Decision::SpawnRefused { refusal }, &cx).await,
            };
        }
        if let Some(pr) = &pull_request {
            for record in &matched {
                self.bind_pull_request(&record.work_item, pr).await;
            }
        }
        let mode = config.routing.tmux.session_per_pr;
        let mut enqueued = false;
        let mut paused = Vec::new();
        for record in matched {
            if session_state(Some(record)) == control::SessionState::Paused {
                paused.push(Decision::SessionPaused { item: record.work_item.clone() });
                continue;
            }
            let (_, endpoint) = endpoint_for(record, pull_request.as_ref(), mode);
            if let (Some(key), Some(endpoint)) = (&cx.delivery_id, endpoint)
                && endpoint.has_delivered(key)
            {
                let decision = Decision::AlreadyProcessed { item: record.work_item.clone() };
                self.record(&decision, &cx).await;
                continue;
            }
            enqueued |=
                self.enqueue_or_release(event.clone(), &cx, record.work_item.clone(), false).await;
        }
        // A paused session's events are dropped; the delivery is settled only when
        // nothing else took it.
        for decision in &paused {
            if enqueued {
                for line in decision.lines(&cx) {
                    self.events().emit(line);
                }
            } else {
                self.record(decision, &cx).await;
            }
        }
    }
}

fn named_and_authorized(actor: &Actor, authorized: &[Login]) -> bool {
    actor.login().is_some_and(|login| authorized.contains(login))
}

/// The receiver hands judged events to the dispatcher from its processing thread, one at a
/// time in journal order; returning means the delivery was decided (and, when it is to
/// be delivered or spawned, queued).
impl Dispatch for Dispatcher {
    fn dispatch(&self, judged: Judged) {
        self.runtime().block_on(self.handle(judged, Ingress::Webhook));
    }

    fn mark_when_done(&self, marks: Arc<crate::receiver::InboxMarks>) {
        self.send_inbox_marks(marks);
    }
}

/// The poll ingress: a polled event is judged and handled exactly as a webhook's, and
/// what became of it is read back from the delivery ledger.
impl seam::Dispatch for Dispatcher {
    async fn dispatch(&self, event: Event) -> Dispatched {
        let delivery = Delivery {
            seq: 0,
            delivery_id: None,
            gh_event: event.kind.as_str().to_owned(),
            verified: false,
            received_at: Timestamp::now(),
        };
        let (config, store, events) = (self.config(), self.store().clone(), self.events().clone());
        let (existence, metrics) = (self.clone(), self.metrics().cloned());
        let judged = crate::dispatcher::blocking(move || {
            let report = Report { events: &events, metrics: metrics.as_ref() };
            judge(event, delivery, config, &store, &existence, report)
        })
        .await;
        let judged = match judged {
            Ok(judged) => judged,
            Err(dropped) => return Dispatched::Settled(dropped.reason.to_owned()),
        };
        let Some(key) = judged.dedup_key.as_ref().map(|key| key.as_str().to_owned()) else {
            self.handle(judged, Ingress::Poll).await;
            return Dispatched::Enqueued;
        };
        self.handle(judged, Ingress::Poll).await;
        match self.mark_of(&key) {
            Some(Mark::Settled { reason }) => Dispatched::Settled(reason),
            Some(Mark::Inflight | Mark::Kept) => Dispatched::Enqueued,
            None => Dispatched::Failed("the dispatcher released the delivery".to_owned()),
        }
    }

    async fn status(&self, key: &str, refs: &[WorkItemRef]) -> DeliveryStatus {
        self.delivery_status(key, refs).await
    }

    async fn close(&self, event: Event) -> Result<(), String> {
        let refs: Vec<WorkItemRef> = route::route(&event).items().cloned().collect();
        let cx = Context {
            gh_event: event.kind.as_str().to_owned(),
            action: event.action.clone(),
            delivery_id: event.dedup_key().map(|key| key.as_str().to_owned()),
            gh_delivery: None,
            actor: event.actor.name().map(str::to_owned),
            work_items: refs.clone(),
            inbox_seq: None,
        };
        let snapshot = self.snapshot().await;
        self.end_closed(&event, &cx, Ingress::Poll, &snapshot, &refs).await
    }
}

/// The existence check the receiver runs on its processing thread: a cached answer, else
/// GitHub asked (and a definite answer cached). Without a client every ref is unknown,
/// which keeps it.
impl IssueExistence for Dispatcher {
    fn existence(&self, item: &WorkItemRef) -> Existence {
        let known = self.existence_now(std::slice::from_ref(item));
        let known = self.runtime().block_on(known);
        known.existence(item)
    }
}

/// Why judging dropped an event (its line is already written, and it is counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    pub reason: &'static str,
}

/// Where the judging reports: the event log, and the metrics a drop is counted in
/// (`GET /metrics`, none when nobody scrapes). A drop goes through [`Report::drop`], so
/// its line and its count are one step.
#[derive(Debug, Clone, Copy)]
pub struct Report<'a> {
    pub events: &'a EventLog,
    pub metrics: Option<&'a Metrics>,
}

impl Report<'_> {
    pub fn emit(&self, line: Line) {
        self.events.emit(line);
    }

    /// Writes a drop's line and counts it under `reason` (outcome `dropped`).
    pub fn drop(&self, line: Line, reason: &'static str) -> Dropped {
        self.events.emit(line);
        if let Some(metrics) = self.metrics {
            metrics.delivery(Outcome::Dropped, reason);
        }
        Dropped { reason }
    }
}

/// Judges a normalized event, for both ingresses: route → self-marker → repository bound
/// → actor guard → existence check → control parse, instance scope and control decision
/// (SPEC §5). Every drop writes its event-log line with a reason (reference §8) carrying
/// `delivery_id`, `gh_event`, `action` and, once known, `actor` and `work_items`, and is
/// counted in `report`'s metrics. Reads records and rosters from `store`: call it on a
/// blocking thread.
pub fn judge(
    event: Event,
    delivery: Delivery,
    config: Arc<Config>,
    store: &StateStore,
    existence: &dyn IssueExistence,
    report: Report<'_>,
) -> Result<Judged, Dropped> {
    let line = |line: Line| delivery_fields(line, &delivery, &event);
    let routed = route::route(&event);
    if routed.is_empty() {
        let line = line(Line::debug("routing.dropped")).field("reason", "no-work-item");
        return Err(report.drop(line, "no-work-item"));
    }
    let work_items: Vec<WorkItemRef> = routed.items().cloned().collect();
    let dropped = |drop: &RoutingDrop, level: fn(&'static str) -> Line| {
        line(level("routing.dropped"))
            .field("reason", drop.reason())
            .field("actor", event.actor.name())
            .field("work_items", &work_items)
    };
    if let Err(drop) = guards::self_marker(&event) {
        return Err(report.drop(dropped(&drop, Line::debug), drop.reason()));
    }
    let bounded = match guards::repository_bound(&event, routed, &config.repositories) {
        Ok(bounded) => bounded,
        Err(drop) => {
            let repository = match &drop {
                RoutingDrop::UndeclaredRepository { repository } => Some(repository.to_string()),
                _ => None,
            };
            let line = dropped(&drop, Line::info).field("repository", repository);
            return Err(report.drop(line, drop.reason()));
        }
    };
    let authorized = &config.routing.authorized_users;
    let pass = guards::actor(&event, &bounded.routed, authorized, |item| roster(store, item));
    let pass = match pass {
        Ok(pass) => pass,
        Err(drop) => {
            return Err(report.drop(dropped(&drop, Line::warning), drop.reason()));
        }
    };
    let work_items: Vec<WorkItemRef> = bounded.routed.items().cloned().collect();
    if pass == ActorPass::Collaborator {
        report.emit(
            line(Line::info("routing.collaborator"))
                .field("actor", event.actor.name())
                .field("work_items", &work_items),
        );
    }
    let labeled = event.carries_label(&config.routing.auto_execute_label);
    report.emit(
        line(Line::info("routing.routed"))
            .field("actor", event.actor.name())
            .field("pass", pass.reason())
            .field("work_items", &work_items)
            .field("labeled", labeled)
            .field("undeclared", (!bounded.dropped.is_empty()).then_some(&bounded.dropped)),
    );

    let owners = live_owners(store);
    let owner = |item: &WorkItemRef| owners.get(item).map(|(owner, _)| owner.clone());
    let owned = work_items.iter().any(|item| owners.contains_key(item));
    let verified = bounded.routed.verify(owned, existence);
    for ghost in &verified.dropped {
        report.emit(
            line(Line::warning("routing.linkage_dropped"))
                .work_item(ghost)
                .field("linked_by", "branch")
                .field("reason", "not-found"),
        );
    }
    if let Some(reason) = verified.drop_reason() {
        let line = line(Line::warning("dispatch.dropped"))
            .field("reason", reason)
            .field("work_items", &verified.dropped);
        return Err(report.drop(line, reason));
    }
    let refs: Vec<WorkItemRef> = verified.kept.items().cloned().collect();

    let parsed = event
        .comment_body()
        .map_or(Parsed::Plain, |body| Vocabulary::from(&config.routing.control).parse(body));
    let command = match &parsed {
        Parsed::Command { command, .. } => Some(*command),
        Parsed::Plain | Parsed::Ambiguous { .. } => None,
    };
    let pull_request = event.pull_request();
    let target = control::target(command, &refs, pull_request.as_ref(), owner);
    let scope = guards::instance_scope(&config.instance, event.comment_body(), &refs, |item| {
        owners.contains_key(item) || last_command(store, item).is_some()
    });
    let last_recorded = target.as_ref().and_then(|target| last_command(store, target));
    let session = target
        .as_ref()
        .and_then(|target| owners.get(target))
        .map_or(SessionState::None, |(_, state)| *state);
    let gate = control::spawn_gate(&SpawnRequest {
        policy: config.routing.spawn_on_unmatched,
        labeled,
        actor: pass,
        target: target.as_ref(),
        start_required: control::start_required(&config.routing.control),
        command,
        last_recorded,
    });
    let decision = control::decide(&parsed, &event.actor, authorized, session, gate);
    let dedup_key = event.dedup_key();
    Ok(Judged {
        delivery,
        event,
        dedup_key,
        refs,
        actor: pass,
        labeled,
        target,
        parsed,
        scope,
        decision,
        config,
    })
}

/// The collaborator logins of one work item (none when unreadable: a roster that
/// cannot be read grants nobody).
fn roster(store: &StateStore, item: &WorkItemRef) -> Vec<Login> {
    match store.read_section::<Collaborators>(item) {
        Ok(slot) => slot.into_value().map_or_else(Vec::new, |roster| {
            roster.users.into_iter().map(|user| user.login).collect()
        }),
        Err(err) => {
            tracing::warn!(work_item = %item, error = %err, "cannot read the collaborator roster");
            Vec::new()
        }
    }
}

/// The last control command recorded for a work item.
fn last_command(store: &StateStore, item: &WorkItemRef) -> Option<control::Command> {
    match store.read_section::<Control>(item) {
        Ok(slot) => slot.into_value().map(|control| control.command),
        Err(err) => {
            tracing::warn!(work_item = %item, error = %err, "cannot read the control record");
            None
        }
    }
}

/// Every ref a live session serves on this machine, with the work item that owns it
/// and that endpoint's state.
fn live_owners(store: &StateStore) -> HashMap<WorkItemRef, (WorkItemRef, SessionState)> {
    let records = match store.list_local_records() {
        Ok(records) => records,
        Err(err) => {
            tracing::warn!(error = %err, "cannot list the session records");
            return HashMap::new();
        }
    };
    let mut owners = HashMap::new();
    for record in records {
        for (served, endpoint) in &record.endpoints {
            let state = match endpoint.status {
                EndpointStatus::Active => SessionState::Active,
                EndpointStatus::Paused => SessionState::Paused,
                EndpointStatus::Closed => continue,
            };
            owners.insert(served.clone(), (record.work_item.clone(), state));
        }
    }
    owners
}

/// `gh_event`, `action` and `delivery_id`, the fields every line about a delivery has.
pub(crate) fn delivery_fields(line: Line, delivery: &Delivery, event: &Event) -> Line {
    line.field("gh_event", &delivery.gh_event)
        .field("action", &event.action)
        .field("delivery_id", &delivery.delivery_id)
}

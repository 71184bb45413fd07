//! Judging one journalled delivery, after its 202 was sent: normalize → event filter →
//! route → self-marker → repository bound → actor guard → existence check → control
//! parse, instance scope and control decision — then hand the judged event to a
//! [`Dispatch`].
//!
//! Every step that drops the delivery writes its event-log line with a reason
//! (reference §8) carrying `delivery_id`, `gh_event`, `action` and, once known, `actor`
//! and `work_items`. The rules are loop-core's; this module only gathers the facts they
//! read (the config in force, rosters, records) and writes the lines. It executes
//! nothing: effects belong to the [`Dispatch`] implementation.
//!
//! The soft settings (event filter, routing policy) are re-read per delivery through
//! [`ConfigSource::reload_if_changed`] (reference §1.8); host, port, path and the secret
//! are the receiver's and need a restart.

use std::collections::HashMap;
use std::sync::Arc;

use jiff::Timestamp;
use loop_core::Login;
use loop_core::WorkItemRef;
use loop_core::config::Config;
use loop_core::control::{self, ControlDecision, Parsed, SessionState, SpawnRequest, Vocabulary};
use loop_core::event::{DedupKey, Event};
use loop_core::guards::{self, ActorPass, RoutingDrop, ScopePass, ScopeRefusal};
use loop_core::record::{Collaborators, Control, EndpointStatus};
use loop_core::route::{self, IssueExistence};
use loop_store::inbox::Journalled;
use loop_store::{Event as LogEvent, EventLog, StateStore};
use serde_json::Value;

use crate::config_source::{ConfigSource, Reload};

/// The delivery a judged event came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The inbox journal's sequence number.
    pub seq: u64,
    /// `X-GitHub-Delivery`; `None` when the request had none (no id-dedup then).
    pub delivery_id: Option<String>,
    /// `X-GitHub-Event`.
    pub gh_event: String,
    /// Whether its signature was checked.
    pub verified: bool,
    pub received_at: Timestamp,
}

/// An event that passed the router's guards, with every decision the rules made about it.
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
    /// The config the event was judged under.
    pub config: Arc<Config>,
}

/// Executes judged events: the dispatcher issue's seam. Called from a blocking thread,
/// one event at a time, in journal order; the call returning means the delivery is
/// processed (its journal entry is then marked and never replayed).
pub trait Dispatch: Send + Sync + std::fmt::Debug + 'static {
    fn dispatch(&self, judged: Judged);
}

/// A [`Dispatch`] that executes nothing and records each decision as one
/// `dispatch.decided` line: what the dispatcher would be asked to do.
#[derive(Debug, Clone)]
pub struct RecordDecision {
    events: EventLog,
}

impl RecordDecision {
    pub fn new(events: EventLog) -> Self {
        Self { events }
    }
}

impl Dispatch for RecordDecision {
    fn dispatch(&self, judged: Judged) {
        let (decision, command, detail) = describe(&judged.decision);
        let line =
            delivery_fields(LogEvent::info("dispatch.decided"), &judged.delivery, &judged.event)
                .field("actor", judged.event.actor.name())
                .field("work_items", &judged.refs)
                .field("target", &judged.target)
                .field("labeled", judged.labeled)
                .field("dedup_key", judged.dedup_key.as_ref().map(DedupKey::as_str))
                .field("decision", decision)
                .field("command", command)
                .field("detail", detail)
                .field("scope", judged.scope.as_ref().err().map(ScopeRefusal::reason));
        self.events.emit(line);
    }
}

/// The decision's name, its command and its effect or reason, for the event log.
fn describe(decision: &ControlDecision) -> (&'static str, Option<&'static str>, Option<String>) {
    match decision {
        ControlDecision::Forward => ("forward", None, None),
        ControlDecision::Ambiguous { commands } => (
            "ambiguous",
            None,
            Some(commands.iter().map(|c| c.name()).collect::<Vec<_>>().join(",")),
        ),
        ControlDecision::Rejected { command, rejection } => {
            ("rejected", Some(command.name()), Some(rejection.reason().to_owned()))
        }
        ControlDecision::Execute { command, effect, .. } => {
            ("execute", Some(command.name()), Some(format!("{effect:?}").to_lowercase()))
        }
        ControlDecision::Roster { edit, logins, .. } => (
            "roster",
            None,
            Some(format!(
                "{edit:?} {}",
                logins.iter().map(Login::as_str).collect::<Vec<_>>().join(",")
            )),
        ),
        ControlDecision::HandToGraph { .. } => ("hand-to-graph", Some("execute"), None),
    }
}

/// `gh_event`, `action` and `delivery_id`, the fields every line about a delivery has.
fn delivery_fields(line: LogEvent, delivery: &Delivery, event: &Event) -> LogEvent {
    line.field("gh_event", &delivery.gh_event)
        .field("action", &event.action)
        .field("delivery_id", &delivery.delivery_id)
}

/// Existence answers the pipeline can hold across threads (blanket-implemented).
pub trait ExistenceAnswers: IssueExistence + Send + Sync + std::fmt::Debug {}

impl<T: IssueExistence + Send + Sync + std::fmt::Debug> ExistenceAnswers for T {}

/// The processing side of the receiver: owns the config source and judges deliveries.
#[derive(Debug)]
pub struct Pipeline {
    config: ConfigSource,
    store: StateStore,
    events: EventLog,
    dispatch: Arc<dyn Dispatch>,
    /// Definite existence answers for branch-only refs (the GitHub client fills it).
    existence: Arc<dyn ExistenceAnswers>,
}

impl Pipeline {
    pub fn new(
        config: ConfigSource,
        store: StateStore,
        events: EventLog,
        dispatch: Arc<dyn Dispatch>,
        existence: Arc<dyn ExistenceAnswers>,
    ) -> Self {
        Self { config, store, events, dispatch, existence }
    }

    /// Judges one delivery and hands it on, or drops it with a reasoned line.
    pub fn process(&mut self, item: &Journalled) {
        let config = self.reload();
        let receipt = &item.receipt;
        let delivery = Delivery {
            seq: item.seq,
            delivery_id: receipt.delivery_id.clone(),
            gh_event: receipt.event.clone(),
            verified: receipt.verified,
            received_at: receipt.received_at,
        };
        let payload = match serde_json::from_slice::<Value>(&receipt.body) {
            Ok(payload @ Value::Object(_)) => payload,
            // The receiver refuses such bodies; a journal written by hand may still hold one.
            _ => {
                self.events.emit(
                    LogEvent::error("webhook.rejected")
                        .field("reason", "invalid-payload")
                        .field("gh_event", &delivery.gh_event)
                        .field("delivery_id", &delivery.delivery_id),
                );
                return;
            }
        };
        let event = Event::from_webhook(&delivery.gh_event, &payload);
        drop(payload);
        let line = |line: LogEvent| delivery_fields(line, &delivery, &event);
        self.events
            .emit(line(LogEvent::info("webhook.received")).field("verified", delivery.verified));

        let gh = &config.webhooks.gh_webhook;
        if !gh.events.contains(&delivery.gh_event) {
            self.events
                .emit(line(LogEvent::debug("routing.dropped")).field("reason", "disabled-event"));
            return;
        }
        let routed = route::route(&event);
        if routed.is_empty() {
            self.events
                .emit(line(LogEvent::debug("routing.dropped")).field("reason", "no-work-item"));
            return;
        }
        let work_items: Vec<WorkItemRef> = routed.items().cloned().collect();
        let dropped = |drop: &RoutingDrop, level: fn(&'static str) -> LogEvent| {
            line(level("routing.dropped"))
                .field("reason", drop.reason())
                .field("actor", event.actor.name())
                .field("work_items", &work_items)
        };
        if let Err(drop) = guards::self_marker(&event) {
            self.events.emit(dropped(&drop, LogEvent::debug));
            return;
        }
        let bounded = match guards::repository_bound(&event, routed, &config.repositories) {
            Ok(bounded) => bounded,
            Err(drop) => {
                let repository = match &drop {
                    RoutingDrop::UndeclaredRepository { repository } => {
                        Some(repository.to_string())
                    }
                    _ => None,
                };
                self.events.emit(dropped(&drop, LogEvent::info).field("repository", repository));
                return;
            }
        };
        let authorized = &config.routing.authorized_users;
        let pass = guards::actor(&event, &bounded.routed, authorized, |item| self.roster(item));
        let pass = match pass {
            Ok(pass) => pass,
            Err(drop) => {
                self.events.emit(dropped(&drop, LogEvent::warning));
                return;
            }
        };
        let work_items: Vec<WorkItemRef> = bounded.routed.items().cloned().collect();
        if pass == ActorPass::Collaborator {
            self.events.emit(
                line(LogEvent::info("routing.collaborator"))
                    .field("actor", event.actor.name())
                    .field("work_items", &work_items),
            );
        }
        let labeled = event.carries_label(&config.routing.auto_execute_label);
        self.events.emit(
            line(LogEvent::info("routing.routed"))
                .field("actor", event.actor.name())
                .field("work_items", &work_items)
                .field("labeled", labeled)
                .field("undeclared", (!bounded.dropped.is_empty()).then_some(&bounded.dropped)),
        );

        let owners = self.live_owners();
        let owner = |item: &WorkItemRef| owners.get(item).map(|(owner, _)| owner.clone());
        let owned = work_items.iter().any(|item| owners.contains_key(item));
        let verified = bounded.routed.verify(owned, self.existence.as_ref());
        for ghost in &verified.dropped {
            self.events.emit(
                line(LogEvent::warning("routing.linkage_dropped"))
                    .work_item(ghost)
                    .field("source", "branch")
                    .field("reason", "not-found"),
            );
        }
        if let Some(reason) = verified.drop_reason() {
            self.events.emit(
                line(LogEvent::warning("dispatch.dropped"))
                    .field("reason", reason)
                    .field("work_items", &verified.dropped),
            );
            return;
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
            owners.contains_key(item) || self.last_command(item).is_some()
        });
        let last_recorded = target.as_ref().and_then(|target| self.last_command(target));
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
        self.dispatch.dispatch(Judged {
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
        });
    }

    /// The config in force for this delivery, re-read when the file changed.
    fn reload(&mut self) -> Arc<Config> {
        match self.config.reload_if_changed() {
            Reload::Unchanged => {}
            Reload::Reloaded { config, warnings } => {
                let mut detail = vec![format!("reloaded `{}`", self.config.path().display())];
                detail.extend(warnings.iter().map(ToString::to_string));
                detail.extend(super::filter_warning(&config));
                for warning in detail.iter().skip(1) {
                    tracing::warn!("{warning}");
                }
                self.events
                    .emit(LogEvent::info("config.reloaded").field("detail", detail.join("; ")));
            }
            Reload::Failed { error, .. } => {
                tracing::warn!(error = %error, "the config file changed but cannot be used; keeping the previous config");
                self.events.emit(
                    LogEvent::warning("config.reload_failed")
                        .field("path", self.config.path())
                        .field("error", error.to_string()),
                );
            }
        }
        Arc::clone(self.config.current())
    }

    /// The collaborator logins of one work item (none when unreadable: a roster that
    /// cannot be read grants nobody).
    fn roster(&self, item: &WorkItemRef) -> Vec<Login> {
        match self.store.read_section::<Collaborators>(item) {
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
    fn last_command(&self, item: &WorkItemRef) -> Option<control::Command> {
        match self.store.read_section::<Control>(item) {
            Ok(slot) => slot.into_value().map(|control| control.command),
            Err(err) => {
                tracing::warn!(work_item = %item, error = %err, "cannot read the control record");
                None
            }
        }
    }

    /// Every ref a live session serves on this machine, with the work item that owns it
    /// and that endpoint's state.
    fn live_owners(&self) -> HashMap<WorkItemRef, (WorkItemRef, SessionState)> {
        let records = match self.store.list_local_records() {
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
}

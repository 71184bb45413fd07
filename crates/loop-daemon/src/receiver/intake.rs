//! Judging one journalled delivery, after its 202 was sent: normalize → event filter →
//! the judging both ingresses share ([`loop_core::plan::judge`]: route → self-marker →
//! repository bound → actor guard → existence check → control parse, instance scope and
//! control decision) — then hand the judged event to a [`Dispatch`].
//!
//! Every step that drops the delivery writes its event-log line with a reason
//! (reference §8) carrying `delivery_id`, `gh_event`, `action` and, once known, `actor`
//! and `work_items`. The rules are loop-core's; this module only gathers the facts they
//! read (the config in force, rosters, records) and writes the lines. It executes
//! nothing: effects belong to the [`Dispatch`] implementation.
//!
//! The soft settings (event filter, routing policy) are re-read through the process's
//! [`LiveConfig::refresh`] (reference §1.8: per delivery) before each batch the processor
//! takes — one delivery at a time when they arrive one at a time, once for what queued
//! up while the processor was busy — and a change is logged once for the whole process;
//! host, port, path and the secret are the receiver's and need a restart.

use std::sync::Arc;

use loop_core::Login;
use loop_core::config::Config;
use loop_core::control::ControlDecision;
use loop_core::event::{DedupKey, Event};
use loop_core::guards::ScopeRefusal;
use loop_core::log::{Kind, Line};
use loop_core::plan::delivery_fields;
pub use loop_core::plan::{Delivery, Judged};
use loop_core::route::IssueExistence;
use loop_store::inbox::Journalled;
use loop_store::{EventLog, StateStore};

use crate::live_config::LiveConfig;
use crate::metrics::{Metrics, Outcome};
use crate::pipeline::{Report, judge};

/// Executes judged events: the dispatcher issue's seam. Called from a blocking thread,
/// one event at a time, in journal order; the call returning means the delivery is
/// processed (its journal entry is then marked and never replayed) unless the dispatcher
/// took its mark over ([`Dispatch::mark_when_done`]).
pub trait Dispatch: Send + Sync + std::fmt::Debug + 'static {
    fn dispatch(&self, judged: Judged);

    /// Told once, before the first delivery, where the `processed` marks go: a
    /// dispatcher that queues work takes over the mark of each delivery it queued and
    /// sends it when that work ends ([`super::InboxMarks`]). By default every delivery
    /// is marked when `dispatch` returns.
    fn mark_when_done(&self, marks: Arc<super::InboxMarks>) {
        let _ = marks;
    }
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
            delivery_fields(Line::info(Kind::DispatchDecided), &judged.delivery, &judged.event)
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

/// Existence answers the pipeline can hold across threads (blanket-implemented).
pub trait ExistenceAnswers: IssueExistence + Send + Sync + std::fmt::Debug {}

impl<T: IssueExistence + Send + Sync + std::fmt::Debug> ExistenceAnswers for T {}

/// The processing side of the receiver: judges deliveries under the config in force.
#[derive(Debug)]
pub struct Intake {
    config: LiveConfig,
    /// The config in force as of the last [`Intake::refresh`].
    current: Arc<Config>,
    store: StateStore,
    events: EventLog,
    dispatch: Arc<dyn Dispatch>,
    /// Definite existence answers for branch-only refs (the GitHub client fills it).
    existence: Arc<dyn ExistenceAnswers>,
    /// Where drops are counted (`GET /metrics`), if anywhere.
    metrics: Option<Metrics>,
}

impl Intake {
    pub fn new(
        config: LiveConfig,
        store: StateStore,
        events: EventLog,
        dispatch: Arc<dyn Dispatch>,
        existence: Arc<dyn ExistenceAnswers>,
    ) -> Self {
        let current = config.current();
        Self { config, current, store, events, dispatch, existence, metrics: None }
    }

    /// Re-reads the config file if it changed (before each batch of deliveries).
    pub fn refresh(&mut self) {
        self.current = self.config.refresh();
    }

    /// Counts every delivery it drops in `metrics` (the dispatcher counts the rest).
    pub fn count_in(mut self, metrics: Option<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Judges one delivery and hands it on, or drops it with a reasoned line.
    pub fn process(&mut self, item: &Journalled) {
        let config = Arc::clone(&self.current);
        let receipt = &item.receipt;
        let delivery = Delivery {
            seq: item.seq,
            delivery_id: receipt.delivery_id.clone(),
            gh_event: receipt.event.clone(),
            verified: receipt.verified,
            received_at: receipt.received_at,
        };
        let Some(event) = Event::read_webhook(&delivery.gh_event, &receipt.body) else {
            // The receiver refuses such bodies; a journal written by hand may still hold one.
            self.events.emit(
                Line::error(Kind::WebhookRejected)
                    .field("reason", "invalid-payload")
                    .field("gh_event", &delivery.gh_event)
                    .field("delivery_id", &delivery.delivery_id),
            );
            if let Some(metrics) = &self.metrics {
                metrics.delivery(Outcome::Rejected, "invalid-payload");
            }
            return;
        };
        let line = |line: Line| delivery_fields(line, &delivery, &event);
        self.events
            .emit(line(Line::info(Kind::WebhookReceived)).field("verified", delivery.verified));

        let report = Report { events: &self.events, metrics: self.metrics.as_ref() };
        let gh = &config.webhooks.gh_webhook;
        if !gh.events.contains(&delivery.gh_event) {
            let line = line(Line::debug(Kind::RoutingDropped)).field("reason", "disabled-event");
            report.refuse(line, "disabled-event");
            return;
        }
        if let Ok(judged) =
            judge(event, delivery, config, &self.store, self.existence.as_ref(), report)
        {
            self.dispatch.dispatch(judged);
        }
    }
}

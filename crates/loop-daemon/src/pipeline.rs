//! The dispatching half of the one pipeline both ingresses feed. The receiver judges a
//! delivery (normalize, route, self-marker, repository bound, actor guard, existence
//! check, control parse, instance scope, control decision — `receiver::pipeline`) and
//! hands the [`Judged`] event here, where the rest runs in the reference's order (§5.2):
//! dedup, scope refusal, reopen, control execution, match, close, spawn gate, PR
//! bindings, enqueue. Every outcome is recorded as a [`Decision`].
//!
//! The rules are loop-core's; this module only gathers the facts they read (records, the
//! last recorded command) and applies their answers through the dispatcher. It never
//! pastes or spawns itself: that happens on the work item's queue.

use std::sync::Arc;

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::control::{
    self, ControlDecision, Effect, Grantor, Parsed, SpawnRequest, spawn_gate, start_required,
};
use loop_core::event::Actor;
use loop_core::login::Login;
use loop_core::record::ControlSource;
use loop_core::route::{Existence, IssueExistence};

use crate::receiver::{Dispatch, Judged};

use crate::dispatcher::Dispatcher;
use crate::dispatcher::decision::{Context, Decision};
use crate::dispatcher::records::{endpoint_for, session_state};

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
        };
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
                self.record_command(&target, command, &actor, note).await;
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
                let command = command.unwrap_or(control::Command::AddCollaborator);
                let grantor = Grantor {
                    by: actor.clone(),
                    at: Timestamp::now(),
                    source: ControlSource::Comment,
                    note,
                };
                for (collaborator, effect) in self.edit_roster(&target, edit, logins, grantor).await
                {
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
            self.close(&event, &cx, ingress, &registry, &refs).await;
            return self.record(&Decision::Closed, &cx).await;
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
                if let Some(line) = decision.line(&cx) {
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

//! The front door composed from loop-core's public rules, in the order SPEC §5 gives:
//! routing → self-marker → repository bound → actor guard → instance scope → control
//! parse (ambiguity) → named-actor re-check and command semantics → spawn policy. The
//! dispatcher does the same with real records; here the records are plain fields.

use std::collections::HashMap;

use loop_core::config::Config;
use loop_core::control::{
    self, Command, ControlDecision, Effect, Parsed, SessionState, SpawnRequest, Vocabulary,
};
use loop_core::event::Event;
use loop_core::guards;
use loop_core::route::route;
use loop_core::{Login, WorkItemRef};
use serde_json::Value;

/// What this machine knows about the event's target.
#[derive(Debug, Clone)]
pub struct Front {
    pub config: Config,
    pub session: SessionState,
    pub last_recorded: Option<Command>,
    pub rosters: HashMap<WorkItemRef, Vec<Login>>,
}

impl Front {
    /// A default config with `ann` authorized.
    pub fn new() -> Self {
        let mut config = Config::default();
        config.routing.authorized_users = vec![login("ann")];
        Self { config, session: SessionState::None, last_recorded: None, rosters: HashMap::new() }
    }
}

/// How the front door ends for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Dropped by the router or the dispatcher, with the reason.
    Dropped(&'static str),
    Ambiguous,
    Rejected(&'static str),
    Executed(Command, Effect),
    Roster(Vec<String>),
    HandedToGraph,
    /// Delivered into the live session.
    Delivered,
    /// Spawns a session against the target.
    Spawned(WorkItemRef),
    /// A close: ends the named item's session, never spawns, never delivered.
    Closes(Option<WorkItemRef>),
}

pub fn login(s: &str) -> Login {
    s.parse().expect("test logins are well-formed")
}

pub fn judge(front: &Front, name: &str, payload: &Value) -> Outcome {
    let event = Event::from_webhook(name, payload);
    let routing = &front.config.routing;
    let routed = route(&event);
    if routed.is_empty() {
        return Outcome::Dropped("no-work-item");
    }
    if let Err(drop) = guards::self_marker(&event) {
        return Outcome::Dropped(drop.reason());
    }
    let routed = match guards::repository_bound(&event, routed, &front.config.repositories) {
        Ok(bounded) => bounded.routed,
        Err(drop) => return Outcome::Dropped(drop.reason()),
    };
    let roster = |item: &WorkItemRef| front.rosters.get(item).cloned().unwrap_or_default();
    let pass = match guards::actor(&event, &routed, &routing.authorized_users, roster) {
        Ok(pass) => pass,
        Err(drop) => return Outcome::Dropped(drop.reason()),
    };
    let refs: Vec<WorkItemRef> = routed.items().cloned().collect();
    let has_record = |_: &WorkItemRef| front.session != SessionState::None;
    if let Err(refusal) =
        guards::instance_scope(&front.config.instance, event.comment_body(), &refs, has_record)
    {
        return Outcome::Dropped(refusal.reason());
    }
    let parsed = Vocabulary::from(&routing.control).parse(event.comment_body().unwrap_or(""));
    if let Parsed::Ambiguous { .. } = parsed {
        return Outcome::Ambiguous;
    }
    let command = match &parsed {
        Parsed::Command { command, .. } => Some(*command),
        Parsed::Plain | Parsed::Ambiguous { .. } => None,
    };
    let target = control::target(command, &refs, event.pull_request().as_ref(), |_| None);
    let gate = control::spawn_gate(&SpawnRequest {
        policy: routing.spawn_on_unmatched,
        labeled: event.carries_label(&routing.auto_execute_label),
        actor: pass,
        target: target.as_ref(),
        start_required: control::start_required(&routing.control),
        command,
        last_recorded: front.last_recorded,
    });
    match control::decide(&parsed, &event.actor, &routing.authorized_users, front.session, gate) {
        ControlDecision::Forward => {}
        ControlDecision::Ambiguous { .. } => return Outcome::Ambiguous,
        ControlDecision::Rejected { rejection, .. } => {
            return Outcome::Rejected(rejection.reason());
        }
        ControlDecision::Execute { command, effect, .. } => {
            return Outcome::Executed(command, effect);
        }
        ControlDecision::Roster { logins, .. } => {
            return Outcome::Roster(logins.iter().map(ToString::to_string).collect());
        }
        ControlDecision::HandToGraph { .. } => return Outcome::HandedToGraph,
    }
    if event.is_close() {
        return Outcome::Closes(event.closed_item());
    }
    match (front.session, gate, target) {
        (SessionState::Active, ..) => Outcome::Delivered,
        (SessionState::Paused, ..) => Outcome::Dropped("session-paused"),
        (SessionState::None, Ok(()), Some(target)) => Outcome::Spawned(target),
        (SessionState::None, Ok(()), None) => Outcome::Dropped("no-work-item"),
        (SessionState::None, Err(refusal), _) => Outcome::Dropped(refusal.reason()),
    }
}

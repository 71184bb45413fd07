//! The facts of one test world, answered to the production plan ([`loop_core::plan`]),
//! and a reading of what the plan says as one [`Outcome`]. Nothing here decides: every
//! outcome is read off the judgement or the plan's steps, so a change to the plan's
//! rules or its order shows up in the edge-case suite.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use jiff::Timestamp;
use loop_core::config::Config;
use loop_core::control::{Command, Effect, SessionState};
use loop_core::event::Event;
use loop_core::plan::{self, Decision, Delivery, Ingress, Lookup, Plan, Snapshot, Step};
use loop_core::record::{Control, ControlSource, Endpoint, EndpointStatus, LocalRecord};
use loop_core::route::{Existence, IssueExistence, KnownExistence};
use loop_core::{Login, WorkItemRef};
use serde_json::Value;

/// The work item the world's session (if any) serves.
pub const WORK_ITEM: &str = "github:octo/app#15";

/// What this machine knows.
#[derive(Debug, Clone)]
pub struct Front {
    pub config: Config,
    /// The state of `WORK_ITEM`'s session.
    pub session: SessionState,
    /// `WORK_ITEM`'s session is being spawned.
    pub spawning: bool,
    /// `WORK_ITEM`'s worker holds deliveries (queued or being carried out).
    pub busy: bool,
    /// `WORK_ITEM`'s agent is seen exited.
    pub agent_exited: bool,
    /// The last command recorded, for every work item.
    pub last_recorded: Option<Command>,
    pub rosters: HashMap<WorkItemRef, Vec<Login>>,
    pub existence: KnownExistence,
}

impl Front {
    /// A default config with routing on and `ann` authorized.
    pub fn new() -> Self {
        let mut config = Config::default();
        config.routing.enabled = true;
        config.routing.authorized_users = vec![login("ann")];
        Self {
            config,
            session: SessionState::None,
            spawning: false,
            busy: false,
            agent_exited: false,
            last_recorded: None,
            rosters: HashMap::new(),
            existence: KnownExistence::default(),
        }
    }

    /// The session records: one for `WORK_ITEM` unless its session state is `None`.
    pub fn sessions(&self) -> Snapshot {
        let item: WorkItemRef = WORK_ITEM.parse().expect("a valid ref");
        let spawning = self.spawning.then(|| item.clone()).into_iter().collect();
        let busy = self.busy.then(|| item.clone()).into_iter().collect();
        let status = match self.session {
            SessionState::None => return Snapshot { spawning, busy, ..Snapshot::default() },
            SessionState::Active => EndpointStatus::Active,
            SessionState::Paused => EndpointStatus::Paused,
        };
        let mut record = LocalRecord::new(item.clone());
        let endpoint = endpoint(status);
        let exited = self.agent_exited.then(|| endpoint.tmux_target.clone()).into_iter().collect();
        record.endpoints.insert(item, endpoint);
        Snapshot { records: vec![record.into()], spawning, busy, exited }
    }

    /// The judgement and, when it passed the front door, the plan.
    pub fn plan(&self, name: &str, payload: &Value) -> Result<Plan, &'static str> {
        let event = Event::from_webhook(name, payload);
        let delivery = Delivery {
            seq: 1,
            delivery_id: Some("d-1".to_owned()),
            gh_event: name.to_owned(),
            verified: true,
            received_at: Timestamp::UNIX_EPOCH,
        };
        let sessions = self.sessions();
        let config = Arc::new(self.config.clone());
        let judged = plan::judge(event, delivery, config, &sessions, self).verdict;
        let judged = judged.map_err(|dropped| dropped.reason)?;
        Ok(plan::plan(&judged, &sessions, self, Ingress::Webhook, Timestamp::UNIX_EPOCH))
    }
}

fn endpoint(status: EndpointStatus) -> Endpoint {
    Endpoint {
        tmux_target: "the-loop-octo-app-15".into(),
        status,
        ..Endpoint::new("stand-in", PathBuf::from("/w"), Timestamp::UNIX_EPOCH)
    }
}

impl IssueExistence for Front {
    fn existence(&self, item: &WorkItemRef) -> Existence {
        self.existence.existence(item)
    }
}

impl Lookup for Front {
    fn roster(&self, item: &WorkItemRef) -> Vec<Login> {
        self.rosters.get(item).cloned().unwrap_or_default()
    }

    fn control(&self, _item: &WorkItemRef) -> Option<Control> {
        self.last_recorded.map(|command| Control {
            command,
            source: ControlSource::Comment,
            actor: Some(login("ann")),
            requested_at: Timestamp::UNIX_EPOCH,
            note: None,
            instance: None,
            delivery_id: None,
        })
    }

    /// Every item has a portable record here, so a close stamps what it closed.
    fn tracked(&self, _item: &WorkItemRef) -> bool {
        true
    }

    /// A record exists only while its session is live ([`Front::sessions`]).
    fn session_recorded(&self, _item: &WorkItemRef) -> bool {
        self.session != SessionState::None
    }

    fn checkout_exists(&self, _item: &WorkItemRef) -> bool {
        false
    }
}

/// How the pipeline ends for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Dropped at the front door or by the plan, with the reason.
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
    /// A close: stamps the named item ended, never spawns, never delivered.
    Closes(Option<WorkItemRef>),
}

pub fn login(s: &str) -> Login {
    s.parse().expect("test logins are well-formed")
}

/// The outcome of one webhook in `front`'s world.
pub fn judge(front: &Front, name: &str, payload: &Value) -> Outcome {
    match front.plan(name, payload) {
        Err(reason) => Outcome::Dropped(reason),
        Ok(plan) => outcome(&plan.steps),
    }
}

/// The plan's steps read as one outcome: the first step that settles what happens.
fn outcome(steps: &[Step]) -> Outcome {
    let recorded = steps.iter().find_map(|step| match step {
        Step::RecordCommand { command, .. } => Some(*command),
        _ => None,
    });
    if steps.iter().any(|step| matches!(step, Step::Record(Decision::Closed { .. }))) {
        let stamped = steps.iter().find_map(|step| match step {
            Step::StampEnded { item, .. } => Some(item.clone()),
            _ => None,
        });
        return Outcome::Closes(stamped);
    }
    for step in steps {
        let outcome = match step {
            Step::Record(Decision::OutOfScope { refusal, .. }) => {
                Outcome::Dropped(refusal.reason())
            }
            Step::Record(Decision::Ambiguous { .. }) => Outcome::Ambiguous,
            Step::Record(Decision::Rejected { rejection, .. }) => {
                Outcome::Rejected(rejection.reason())
            }
            Step::Record(Decision::HandedToGraph { .. }) => Outcome::HandedToGraph,
            Step::Record(Decision::SpawnRefused { refusal }) => Outcome::Dropped(refusal.reason()),
            Step::Record(Decision::NoWorkItem { reason }) => Outcome::Dropped(reason),
            Step::Execute { command, effect, .. } => Outcome::Executed(*command, *effect),
            Step::EditRoster { logins, .. } => {
                Outcome::Roster(logins.iter().map(ToString::to_string).collect())
            }
            Step::Enqueue { item, spawn: true } => match recorded {
                Some(command) => Outcome::Executed(command, Effect::Spawn),
                None => Outcome::Spawned(item.clone()),
            },
            // A recorded command whose work is a delivery restarts the agent.
            Step::Enqueue { spawn: false, .. } => match recorded {
                Some(command) => Outcome::Executed(command, Effect::Restart),
                None => Outcome::Delivered,
            },
            Step::Paused { .. } => Outcome::Dropped("session-paused"),
            _ => continue,
        };
        return outcome;
    }
    panic!("a plan that settles nothing: {steps:#?}")
}

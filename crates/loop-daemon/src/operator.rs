//! The operator's levers: control commands issued from the CLI (`the-loop sessions
//! start|stop|pause|resume|cleanup`, `the-loop collaborators add|remove`) or the control
//! plane (`POST /api/v1/sessions/control`), decided by loop-core's control table and
//! executed by the dispatcher exactly as a comment's would be (reference §2.4).
//!
//! The operator's access outranks the label: they are authorized by being at the
//! keyboard (or holding the control plane's token), and a `start` needs only
//! `routing.spawnOnUnmatched` not to be `never`. The operator's login is recorded, never
//! used to authorize. Arming commands are recorded only when they act, disarming ones
//! always; a `start` is recorded before its spawn and the previous record put back when
//! no session appeared. The [`Surface`] a command came from is its control record's
//! `source` and the `source` of its `control.command` (or `control.rejected`) line:
//! `cli` or `api`.
//!
//! [`Dispatcher::post_keyword`] then posts the command's keyword back to the work item,
//! self-marked and naming the instance, so the thread stays the record of what the
//! operator did. It decides nothing loop-core decides.

use std::sync::Arc;

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::config::Config;
use loop_core::config::SpawnPolicy;
use loop_core::control::{
    self, Command, ControlDecision, Effect, Executed, Grantor, Parsed, RosterEffect, SpawnRefusal,
};
use loop_core::event::{Actor, Event};
use loop_core::guards::mark_self_authored;
use loop_core::log::{Kind, Line};
use loop_core::login::Login;
use loop_core::record::{Collaborators, Control, ControlSource, Ended, PollLedger};
use loop_store::StoreError;
use serde_json::json;

use crate::dispatcher::{Dispatcher, RosterOutcome, blocking};
use loop_core::plan::Context;
use loop_core::plan::session_state;

/// Where the operator issued a command: `the-loop`'s CLI or its control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    Cli,
    Api,
}

impl Surface {
    /// The control record's `source`.
    fn control_source(self) -> ControlSource {
        match self {
            Self::Cli => ControlSource::Cli,
            Self::Api => ControlSource::Api,
        }
    }

    /// The event log's `source` of the command's lines.
    fn name(self) -> &'static str {
        match self {
            Self::Cli => "cli",
            Self::Api => "api",
        }
    }

    /// How the posted keyword names it.
    fn wording(self) -> &'static str {
        match self {
            Self::Cli => "the-loop CLI",
            Self::Api => "the-loop's control plane",
        }
    }
}

/// What a command the operator issued came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Issued {
    /// Executed, with what it did (the `effect` of `control.command`).
    Executed { effect: Executed },
    /// A `start` whose spawn produced no live session (see the event log for why).
    SpawnFailed,
    /// Refused, with the reason code (`nothing-to-resume`, `spawn-policy`, …).
    Rejected { reason: &'static str },
    /// A roster edit: one effect per login.
    Roster(Vec<(Login, RosterEffect)>),
}

impl Issued {
    /// What the operator is told about `command` on `item`: whether it did what was
    /// asked (the CLI's exit 0 or 1, the API's `exitCode`) and the sentence saying so.
    pub fn report(&self, command: Command, item: &WorkItemRef) -> (bool, String) {
        let (done, say) = match (self, command) {
            (Self::Executed { effect: Executed::Noop }, Command::Start) => {
                (true, "already running".to_owned())
            }
            (Self::Executed { effect: Executed::Noop }, Command::Pause) => {
                (false, "nothing to pause (recorded: paused)".to_owned())
            }
            (Self::Executed { effect: Executed::Noop }, Command::Stop) => {
                (false, "no live session (recorded: stopped)".to_owned())
            }
            (Self::Executed { effect: Executed::PartlyCleaned }, _) => (
                false,
                "partly cleaned up — see `the-loop events --event session.cleaned`".to_owned(),
            ),
            (Self::Executed { effect }, _) => (true, effect.as_str().to_owned()),
            (Self::SpawnFailed, _) => {
                (false, format!("no session could be spawned — `the-loop explain {item}` says why"))
            }
            (Self::Rejected { reason }, _) => (
                false,
                format!(
                    "refused: {}",
                    loop_core::explain::reason_text(reason, &serde_json::Map::new())
                ),
            ),
            (Self::Roster(_), _) => (true, "collaborators edited".to_owned()),
        };
        (done, format!("{item}: {} — {say}", command.name()))
    }

    /// The `effect` word: what the command did (`spawned`, `paused`, `noop`, …),
    /// `failed` for a spawn that produced no session, `rejected` for a refusal.
    pub fn effect(&self) -> &'static str {
        match self {
            Self::Executed { effect } => effect.as_str(),
            Self::SpawnFailed => "failed",
            Self::Rejected { .. } => "rejected",
            Self::Roster(_) => "edited",
        }
    }
}

/// A keyword the operator's command could not post back to its work item.
#[derive(Debug, thiserror::Error)]
#[error("could not post `{keyword}` on {item}: {reason}")]
pub struct NotPosted {
    pub keyword: String,
    pub item: WorkItemRef,
    pub reason: String,
}

impl Dispatcher {
    /// Decides and executes `command` on `target` for the operator `operator` at
    /// `surface` (`logins`: the collaborators a roster command names; `reason`: a deny's,
    /// given to the agent). A spawn is queued and awaited.
    pub async fn issue(
        &self,
        target: &WorkItemRef,
        command: Command,
        operator: &Login,
        logins: Vec<Login>,
        reason: Option<&str>,
        surface: Surface,
    ) -> Issued {
        let events = self.events().for_source(surface.name());
        let registry = self.snapshot().await;
        let record = registry.owner(target).cloned();
        let owner = record.as_ref().map_or_else(|| target.clone(), |r| r.work_item.clone());
        let config = self.config();
        let gate = match config.routing.spawn_on_unmatched {
            SpawnPolicy::Never => Err(SpawnRefusal::SpawnPolicy),
            _ => Ok(()),
        };
        let decision = control::decide(
            &Parsed::Command { command, logins },
            &Actor::User(operator.clone()),
            std::slice::from_ref(operator),
            session_state(record.as_ref()),
            gate,
        );
        match decision {
            ControlDecision::Execute { command, effect, .. } => {
                let previous = self.read_control(&owner).await;
                if !command.answers_permission() && (command.disarms() || effect != Effect::Noop) {
                    self.record_operator_command(&owner, command, operator, surface).await;
                }
                let issued = if effect == Effect::Spawn {
                    self.spawn_for_operator(&owner, operator, previous).await
                } else {
                    let effect =
                        self.execute(effect, &owner, record.as_ref(), operator, reason).await;
                    Issued::Executed { effect }
                };
                let effect = match &issued {
                    Issued::Executed { effect } => *effect,
                    _ => Executed::SpawnFailed,
                };
                events
                    .emit_async(
                        Line::info(Kind::ControlCommand)
                            .work_item(&owner)
                            .field("command", command.name())
                            .field("actor", operator.as_str())
                            .field("effect", effect.as_str()),
                    )
                    .await;
                issued
            }
            ControlDecision::Rejected { command, rejection } => {
                events
                    .emit_async(
                        Line::warning(Kind::ControlRejected)
                            .work_item(&owner)
                            .field("command", command.name())
                            .field("actor", operator.as_str())
                            .field("reason", rejection.reason()),
                    )
                    .await;
                Issued::Rejected { reason: rejection.reason() }
            }
            ControlDecision::Roster { edit, logins, .. } => {
                let grantor = Grantor {
                    by: operator.clone(),
                    at: Timestamp::now(),
                    source: surface.control_source(),
                    note: None,
                };
                let effects = match self.edit_roster(&owner, edit, logins, grantor, None).await {
                    RosterOutcome::Edited(effects) => effects,
                    // A CLI edit carries no delivery, so it is never taken for a replay.
                    RosterOutcome::Replayed => Vec::new(),
                };
                for (collaborator, effect) in &effects {
                    events
                        .emit_async(
                            Line::info(Kind::ControlCommand)
                                .work_item(&owner)
                                .field("command", command.name())
                                .field("actor", operator.as_str())
                                .field("collaborator", collaborator.as_str())
                                .field("effect", effect.as_str()),
                        )
                        .await;
                }
                Issued::Roster(effects)
            }
            // A single command never parses as ambiguous or plain; `execute` is the
            // graph's (not an operator verb).
            ControlDecision::Forward
            | ControlDecision::Ambiguous { .. }
            | ControlDecision::HandToGraph { .. } => {
                Issued::Rejected { reason: "not-an-operator-command" }
            }
        }
    }

    /// Closes `item`'s live session the way a merge does (retention per
    /// `routing.tmux`, unless `keep_tmux` says otherwise for this close), recording no
    /// command; `false` when there is none.
    pub async fn close_for_operator(&self, item: &WorkItemRef, keep_tmux: Option<bool>) -> bool {
        if let Some(keep) = keep_tmux {
            let mut config = Config::clone(&self.config());
            config.routing.tmux.keep_session_on_close = keep;
            self.set_config(Arc::new(config));
        }
        let snapshot = self.snapshot().await;
        let Some(record) = snapshot.owner(item).cloned() else { return false };
        self.close_session(&record).await;
        true
    }

    /// Forgets `item` on this machine (reference §6.2): closes a live session through
    /// the close path, deletes the session record, clears the portable `control`,
    /// `poll`, `collaborators` and `ended` sections and the poll clocks of the item and
    /// of the pull requests its ledger nests; logs `session.reset`. `Ok(true)` when a
    /// live session was ended.
    pub async fn reset_for_operator(&self, item: &WorkItemRef) -> Result<bool, StoreError> {
        let ended = self.close_for_operator(item, None).await;
        let (store, target) = (self.store().clone(), item.clone());
        let cleared = blocking(move || {
            // The nested pull requests' clocks go with the ledger that nests them.
            let poll = store.read_section::<PollLedger>(&target)?.into_value();
            let nested: Vec<WorkItemRef> =
                poll.map(|poll| poll.pull_requests.into_keys().collect()).unwrap_or_default();
            store.delete_local_record(&target)?;
            store.write_section::<Control>(&target, None)?;
            store.write_section::<PollLedger>(&target, None)?;
            // Reset forgets the roster and the `ended` stamp with the rest (seed 002);
            // a cleanup keeps the roster.
            store.write_section::<Collaborators>(&target, None)?;
            store.write_section::<Ended>(&target, None)?;
            // The clocks belong to the `poll` section they stamp (seed 001).
            store.update_poll_clocks(|clocks| {
                clocks.clocks.remove(&target);
                for pr in &nested {
                    clocks.clocks.remove(pr);
                }
            })
        })
        .await;
        let line = match &cleared {
            Ok(_) => Line::info(Kind::SessionReset),
            Err(error) => Line::error(Kind::SessionReset).field("error", error.to_string()),
        };
        self.events()
            .emit_async(line.work_item(item).field("source", "cli").field("ended_session", ended))
            .await;
        cleared.map(|_| ended)
    }

    /// Posts `command`'s keyword (with `logins` mentioned) on `item`, self-marked and
    /// addressed to this instance, naming `operator` and the `surface` they used; logs
    /// `control.announced`, or `control.announce_failed` and returns why it was not
    /// posted.
    pub async fn post_keyword(
        &self,
        item: &WorkItemRef,
        command: Command,
        logins: &[Login],
        operator: &Login,
        surface: Surface,
    ) -> Result<(), NotPosted> {
        let config = self.config();
        let mut keyword = command.keyword(&config.routing.control.keywords).to_owned();
        for login in logins {
            keyword.push_str(&format!(" @{login}"));
        }
        let instance =
            config.instance.name.as_deref().map(|n| format!(" instance:{n}")).unwrap_or_default();
        let body = mark_self_authored(&format!(
            "{keyword}{instance}\n\n_Issued from {} by `{operator}`._",
            surface.wording()
        ));
        let posted = match self.github() {
            Some(github) => github.post_comment(item, &body).await.map_err(|e| e.to_string()),
            None => {
                Err("no GitHub client for the work items' host (`integrations.github`)".to_owned())
            }
        };
        match posted {
            Ok(comment) => {
                self.events()
                    .emit_async(
                        Line::info(Kind::ControlAnnounced)
                            .work_item(item)
                            .field("comment_url", comment.html_url),
                    )
                    .await;
                Ok(())
            }
            Err(reason) => {
                self.events()
                    .emit_async(
                        Line::warning(Kind::ControlAnnounceFailed)
                            .work_item(item)
                            .field("error", &reason),
                    )
                    .await;
                Err(NotPosted { keyword, item: item.clone(), reason })
            }
        }
    }

    async fn read_control(&self, item: &WorkItemRef) -> Option<Control> {
        let (store, item) = (self.store().clone(), item.clone());
        blocking(move || store.read_section::<Control>(&item))
            .await
            .ok()
            .and_then(|slot| slot.into_value())
    }

    /// Records `command` as `item`'s last, issued at `surface` by `operator`.
    async fn record_operator_command(
        &self,
        item: &WorkItemRef,
        command: Command,
        operator: &Login,
        surface: Surface,
    ) {
        let control = Control {
            command,
            source: surface.control_source(),
            actor: Some(operator.clone()),
            requested_at: Timestamp::now(),
            note: None,
            instance: self.config().instance.name.clone(),
            delivery_id: None,
        };
        self.write_control(item, Some(control)).await;
    }

    async fn write_control(&self, item: &WorkItemRef, control: Option<Control>) {
        let (store, target) = (self.store().clone(), item.clone());
        if let Err(err) = blocking(move || store.write_section(&target, control.as_ref())).await {
            self.events()
                .emit_async(
                    Line::error(Kind::ControlRecordFailed)
                        .work_item(item)
                        .field("source", "cli")
                        .field("error", err.to_string()),
                )
                .await;
        }
    }

    /// Spawns `item`'s session from a synthesized, pre-labelled `issues labeled` event
    /// (the CLI outranks the label), waits for the queue, and puts `previous` back as the
    /// control record when no live session appeared.
    async fn spawn_for_operator(
        &self,
        item: &WorkItemRef,
        operator: &Login,
        previous: Option<Control>,
    ) -> Issued {
        let label = self.config().routing.auto_execute_label.clone();
        let repo = item.repo();
        let payload = json!({
            "action": "labeled",
            "repository": {
                "full_name": format!("{}/{}", repo.owner(), repo.name()),
                "html_url": format!("https://{}/{}/{}", repo.host(), repo.owner(), repo.name()),
            },
            "issue": {"number": item.number(), "labels": [{"name": label}], "html_url": item.url()},
            "label": {"name": label},
            "sender": {"login": operator.as_str()},
        });
        let event = Event::from_webhook("issues", &payload);
        let cx = Context {
            gh_event: "issues".to_owned(),
            action: Some("labeled".to_owned()),
            // No dedup key: the CLI process must not write the delivery ledger, which the
            // running service owns (a snapshot written from here could drop its marks).
            delivery_id: None,
            gh_delivery: None,
            actor: Some(operator.as_str().to_owned()),
            work_items: vec![item.clone()],
            inbox_seq: None,
        };
        self.enqueue_or_release(Arc::new(event), &cx, item.clone(), true).await;
        self.idle().await;
        if self.snapshot().await.owner(item).is_some() {
            Issued::Executed { effect: Executed::Spawned }
        } else {
            self.write_control(item, previous).await;
            Issued::SpawnFailed
        }
    }
}

//! Executing control commands once loop-core decided them (reference §4.5, §5.9;
//! sessions §2.7, §6.1): recording the command as the work item's last, pausing and
//! resuming a session, closing it the way a merge does (stop), releasing a work item's
//! local resources (cleanup), and editing its collaborator roster.
//!
//! Closing keeps the tmux session per `routing.tmux` (retention); cleanup ignores
//! retention and removes the tmux sessions, the checkouts and the session record, and
//! keeps the portable record. Every step is logged; a failing step never stops the next.

use std::path::PathBuf;
use std::time::Duration;

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::config::Config;
use loop_core::control::{Command, Effect, Executed, Grantor, RosterEdit, RosterEffect};
use loop_core::log::{Kind, Line};
use loop_core::login::Login;
use loop_core::record::{Collaborators, Control, ControlSource, LocalRecord};
use loop_sessions::cleanup::{self, Cleaned, Removed};
use loop_sessions::workspace::{WorkspaceSettings, Workspaces};
use loop_sessions::{CloseSettings, Settled, Termination, session};

use super::{Dispatcher, blocking};

/// What a roster command did.
#[derive(Debug)]
pub(crate) enum RosterOutcome {
    /// One effect per login.
    Edited(Vec<(Login, RosterEffect)>),
    /// The roster was last written by this very delivery: a replay after a crash, not
    /// applied or logged again.
    Replayed,
}

impl Dispatcher {
    /// Records `command` as `target`'s last control command (portable `control`), with
    /// the dedup key of the delivery that carried it in the same write: the commit point
    /// that makes a replay of that delivery recognisable (`loop_core::plan`).
    pub(crate) async fn record_command(
        &self,
        target: &WorkItemRef,
        command: Command,
        actor: &Login,
        note: Option<String>,
        delivery_id: Option<String>,
    ) {
        let control = Control {
            command,
            source: ControlSource::Comment,
            actor: Some(actor.clone()),
            requested_at: Timestamp::now(),
            note,
            instance: self.config().instance.name.clone(),
            delivery_id,
        };
        let (store, item) = (self.store().clone(), target.clone());
        if let Err(err) = blocking(move || store.write_section(&item, Some(&control))).await {
            self.events()
                .emit_async(
                    Line::error(Kind::ControlRecordFailed)
                        .work_item(target)
                        .field("command", command.name())
                        .field("error", err.to_string()),
                )
                .await;
        }
    }

    /// Carries out a command's effect on the target's session; returns what it did (the
    /// `effect` of `control.command`). Spawning is queued by the caller, never done here.
    /// `reason`: a deny's, given to the agent.
    pub(crate) async fn execute(
        &self,
        effect: Effect,
        target: &WorkItemRef,
        record: Option<&LocalRecord>,
        actor: &Login,
        reason: Option<&str>,
    ) -> Executed {
        let owner = record.map_or(target, |r| &r.work_item);
        match effect {
            Effect::Spawn => Executed::SpawnQueued,
            Effect::Restart => Executed::RestartQueued,
            Effect::Noop => Executed::Noop,
            Effect::Pause => {
                self.pause_or_resume(owner, true).await;
                Executed::Paused
            }
            Effect::Resume => {
                self.pause_or_resume(owner, false).await;
                Executed::Resumed
            }
            Effect::Stop => {
                if let Some(record) = record {
                    self.close_session(record).await;
                }
                Executed::Stopped
            }
            Effect::Cleanup => self.cleanup(owner, Some(actor), "control").await,
            Effect::Answer { allow } => self.answer_permission(owner, record, allow, reason).await,
        }
    }

    /// Answers the permission prompt the work item's agent has open, through the hook
    /// that waits on it (docs/agent-states.md): the decision is filed for that one
    /// request, so a later prompt needs its own answer. With no open prompt a hook asked
    /// about, nothing is typed or answered and a self-marked reply says so.
    async fn answer_permission(
        &self,
        owner: &WorkItemRef,
        record: Option<&LocalRecord>,
        allow: bool,
        reason: Option<&str>,
    ) -> Executed {
        use loop_core::agent_state::{AgentState, hook::permission_decision};
        let target = record.and_then(LocalRecord::own_endpoint).map(|e| e.tmux_target.clone());
        let open = target.as_deref().and_then(|target| match self.agents().seen(target)?.state {
            AgentState::NeedsPermission(asked) => Some((target.to_owned(), asked)),
            _ => None,
        });
        let Some((target, request)) =
            open.and_then(|(target, asked)| asked.request.clone().map(|request| (target, request)))
        else {
            self.say_nothing_to_answer(owner).await;
            return Executed::NothingToAnswer;
        };
        let decision = permission_decision(allow, reason);
        let spool = loop_store::agent_spool::AgentSpool::new(self.store().layout().agent_dir());
        let answered = blocking(move || spool.answer(&target, &request, &decision)).await;
        match answered {
            Ok(()) if allow => Executed::Approved,
            Ok(()) => Executed::Denied,
            Err(err) => {
                self.events()
                    .emit_async(
                        Line::error(Kind::ControlRecordFailed)
                            .work_item(owner)
                            .field("command", if allow { "approve" } else { "deny" })
                            .field("error", err.to_string()),
                    )
                    .await;
                Executed::NothingToAnswer
            }
        }
    }

    /// The self-marked reply to an answer with no open prompt (best-effort).
    async fn say_nothing_to_answer(&self, item: &WorkItemRef) {
        let Some(github) = self.github() else { return };
        let body = loop_core::guards::mark_self_authored(
            "**the-loop**: the agent has no permission prompt open, so that answer was not \
             applied and nothing was typed. A prompt it opens later needs its own \
             `the-loop approve` or `the-loop deny`.",
        );
        if let Err(err) = github.post_comment(item, &body).await {
            tracing::warn!(%item, %err, "could not post the nothing-to-answer reply");
        }
    }

    /// Applies a roster edit to `target`'s collaborators, with the dedup key of the
    /// delivery that carried it, in one write; one effect per login. When the roster names
    /// `delivery_id` as its last writer, this is a replay of that delivery (a process
    /// wrote the roster and died before the ledger settled the key) and nothing changes.
    pub(crate) async fn edit_roster(
        &self,
        target: &WorkItemRef,
        edit: RosterEdit,
        logins: Vec<Login>,
        grantor: Grantor,
        delivery_id: Option<String>,
    ) -> RosterOutcome {
        let (store, item) = (self.store().clone(), target.clone());
        let edited = blocking(move || {
            let mut roster =
                store.read_section::<Collaborators>(&item)?.into_value().unwrap_or_default();
            if delivery_id.is_some() && roster.delivery_id == delivery_id {
                return Ok(RosterOutcome::Replayed);
            }
            let effects = edit.apply(&mut roster, &logins, &grantor);
            roster.delivery_id = delivery_id;
            store.write_section(&item, Some(&roster))?;
            Ok::<_, loop_store::StoreError>(RosterOutcome::Edited(effects))
        })
        .await;
        match edited {
            Ok(outcome) => outcome,
            Err(err) => {
                self.events()
                    .emit_async(
                        Line::error(Kind::ControlRecordFailed)
                            .work_item(target)
                            .field("command", "collaborators")
                            .field("error", err.to_string()),
                    )
                    .await;
                RosterOutcome::Edited(Vec::new())
            }
        }
    }

    /// Pauses (`pause: true`) or resumes the work item's own session, logging the
    /// transition when it happened.
    async fn pause_or_resume(&self, item: &WorkItemRef, pause: bool) {
        let (registry, owner) = (self.inner.registry.clone(), item.clone());
        let changed =
            blocking(move || if pause { registry.pause(&owner) } else { registry.resume(&owner) })
                .await;
        let line = match changed {
            Ok(false) => return,
            Ok(true) if pause => Line::info(Kind::SessionPaused),
            Ok(true) => Line::info(Kind::SessionResumed),
            Err(err) => Line::error(Kind::SessionUpdateFailed).field("error", err.to_string()),
        };
        self.events().emit_async(line.work_item(item)).await;
    }

    /// Closes `record` the way a merge does: each pull request's endpoint, then the work
    /// item's own session, in the registry; each tmux session settled per the retention
    /// rules; checkouts removed unless `keepCheckoutOnClose`.
    pub(crate) async fn close_session(&self, record: &LocalRecord) {
        let item = record.work_item.clone();
        let (registry, owner) = (self.inner.registry.clone(), item.clone());
        let prs: Vec<WorkItemRef> =
            record.endpoints.keys().filter(|e| **e != item).cloned().collect();
        let closed = blocking(move || {
            for pr in &prs {
                registry.close_endpoint(&owner, pr)?;
            }
            registry.close(&owner)
        })
        .await;
        if let Err(err) = closed {
            self.events()
                .emit_async(
                    Line::error(Kind::SessionUpdateFailed)
                        .work_item(&item)
                        .field("error", err.to_string()),
                )
                .await;
        }
        let own = record.own_endpoint();
        self.events()
            .emit_async(
                Line::info(Kind::SessionClosed)
                    .work_item(&item)
                    .field("harness", own.map(|e| e.harness.clone()))
                    .field("harness_session_id", own.and_then(|e| e.harness_session_id.clone())),
            )
            .await;
        for served in record.endpoints.keys() {
            self.end_session(&item, served).await;
        }
        self.forget_checkouts(&item);
    }

    /// Closes one pull request's endpoint of `record`, leaving the work item's session.
    pub(crate) async fn close_endpoint(&self, record: &LocalRecord, pr: &WorkItemRef) {
        let (registry, owner, pr_ref) =
            (self.inner.registry.clone(), record.work_item.clone(), pr.clone());
        let closed = blocking(move || registry.close_endpoint(&owner, &pr_ref)).await;
        if let Err(err) = closed {
            self.events()
                .emit_async(
                    Line::error(Kind::SessionUpdateFailed)
                        .work_item(&record.work_item)
                        .field("error", err.to_string()),
                )
                .await;
        }
        self.events()
            .emit_async(
                Line::info(Kind::SessionPrClosed)
                    .work_item(&record.work_item)
                    .field("pull_request", pr.to_string()),
            )
            .await;
        self.end_session(&record.work_item, pr).await;
    }

    /// Ends the session serving `served` (a work item's own, or a PR endpoint of `item`)
    /// by the retention rules and removes its checkout unless kept; logs each step.
    async fn end_session(&self, item: &WorkItemRef, served: &WorkItemRef) {
        let config = self.config();
        let settings = close_settings(&config);
        let workspaces = workspaces(&config);
        let (tmux, endpoint) = (self.inner.tmux.clone(), served.clone());
        let closed =
            blocking(move || session::close(&tmux, workspaces.as_ref(), &endpoint, &settings))
                .await;
        let target = served.tmux_session();
        let closed = match closed {
            Ok(closed) => closed,
            Err(err) => {
                return self
                    .events()
                    .emit_async(
                        Line::warning(Kind::SessionHarnessTerminated)
                            .work_item(item)
                            .field("tmux_target", &target)
                            .field("ok", false)
                            .field("error", err.to_string()),
                    )
                    .await;
            }
        };
        let line = match closed.settled {
            Settled::Kept { termination: Some(Termination::SessionMissing) } => None,
            Settled::Kept { termination: Some(_) } => {
                Some(Line::info(Kind::SessionHarnessTerminated).field("ok", true))
            }
            Settled::Kept { termination: None } => Some(Line::info(Kind::SessionRetained)),
            Settled::Killed { existed } => {
                Some(Line::info(Kind::SessionTmuxKilled).field("existed", existed))
            }
        };
        if let Some(line) = line {
            self.events().emit_async(line.work_item(item).field("tmux_target", &target)).await;
        }
        match closed.checkout {
            None | Some(Ok(false)) => {}
            Some(Ok(true)) => {
                self.events().emit_async(Line::info(Kind::WorkspaceCleaned).work_item(served)).await
            }
            Some(Err(err)) => {
                self.events()
                    .emit_async(
                        Line::warning(Kind::WorkspaceCleanFailed)
                            .work_item(served)
                            .field("error", err.to_string()),
                    )
                    .await
            }
        }
    }

    /// Releases `item`'s local resources whether or not a session exists
    /// (`loop_sessions::cleanup`): every endpoint's harness and tmux session, every
    /// checkout, the session record; the portable record stays. Returns whether it
    /// cleaned all, nothing or part of it, and logs `session.cleaned`.
    pub(crate) async fn cleanup(
        &self,
        item: &WorkItemRef,
        actor: Option<&Login>,
        via: &str,
    ) -> Executed {
        let config = self.config();
        let grace = close_settings(&config).grace;
        let workspaces = workspaces(&config);
        let (tmux, registry, owner) =
            (self.inner.tmux.clone(), self.inner.registry.clone(), item.clone());
        let cleaned = blocking(move || {
            cleanup::cleanup(&tmux, workspaces.as_ref(), &registry, &owner, grace)
        })
        .await
        .unwrap_or_else(|err| Cleaned { errors: vec![err.to_string()], ..Cleaned::default() });
        let effect = match (cleaned.found(), cleaned.errors.is_empty()) {
            (false, _) => Executed::NothingToClean,
            (true, true) => Executed::Cleaned,
            (true, false) => Executed::PartlyCleaned,
        };
        let removed: Vec<&str> = cleaned
            .removed
            .iter()
            .map(|removed| match removed {
                Removed::Tmux => "tmux",
                Removed::Workspace => "workspace",
                Removed::Session => "session",
            })
            .collect();
        let line = if cleaned.errors.is_empty() {
            Line::info(Kind::SessionCleaned)
        } else {
            Line::warning(Kind::SessionCleaned).field("error", cleaned.errors.join("; "))
        };
        self.events()
            .emit_async(
                line.work_item(item)
                    .field("actor", actor.map(Login::as_str))
                    .field("via", via)
                    .field("removed", removed)
                    .field(
                        "endpoints",
                        cleaned.endpoints.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    )
                    .field("found", cleaned.found()),
            )
            .await;
        effect
    }
}

/// `routing.tmux` as closing reads it.
pub(crate) fn close_settings(config: &Config) -> CloseSettings {
    let tmux = &config.routing.tmux;
    CloseSettings {
        keep_session: tmux.keep_session_on_close,
        kill_harness: tmux.kill_harness_on_close,
        grace: Duration::from_secs_f64(tmux.harness_kill_grace_seconds.max(0.0)),
        keep_checkout: config.routing.workspace.keep_checkout_on_close,
    }
}

/// The checkouts under `routing.workspace.root`, when one is set.
pub(crate) fn workspaces(config: &Config) -> Option<Workspaces> {
    let workspace = &config.routing.workspace;
    Some(Workspaces::new(WorkspaceSettings {
        root: workspace.root.clone()?,
        strategy: workspace.strategy,
        git: PathBuf::from(&workspace.git_binary),
    }))
}

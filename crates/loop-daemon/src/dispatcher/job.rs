//! One dequeued job: deliver the event into the work item's live session (respawning a
//! dead one with its recorded conversation), or spawn the session it was queued for —
//! workspace, trust pre-seed, rendered spawn prompt, registry write, announcement
//! (reference §5.5, §5.6, §5.11, §5.13; sessions §2.5, §2.6).
//!
//! The registry is read again at dequeue (the target's own record; the whole registry
//! only when the target is a pull request endpoint): a spawn that finds a session by then
//! is delivered into it, a delivery whose session vanished is dropped. tmux, git and file
//! IO run on blocking threads.
//!
//! The delivery hot path (SPEC §7: comment → pane ≤ 5 ms p50) is one blocking call:
//! render the prompt, paste it, write the done-mark (`recentDeliveries`, no fsync; see
//! docs/dispatcher.md, "Durability"). One call keeps the thread hand-offs few and puts
//! the done-mark microseconds after the paste, which is the window in which a `kill -9`
//! can make a replay paste twice.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::config::Config;
use loop_core::event::Event;
use loop_core::graph::state::Upstream;
use loop_core::log::{Kind, Line};
use loop_core::plan::{self, Decision, JobRoute, PrSession};
use loop_core::prompt::{EVENT_TEMPLATE, Prompt, SPAWN_TEMPLATE};
use loop_core::record::{Endpoint, LocalRecord};
use loop_core::{batch, ci};
use loop_sessions::registry::{EndpointHandles, OwedAnnouncement, RegistryError};
use loop_sessions::workspace::{Branch, WorkspaceError, clone_url};
use loop_sessions::{
    Delivered, Launch, LaunchChoice, RespawnSettings, SessionError, SessionSite, TmuxError, session,
};

use super::graph::{Boundary, describe};
use super::queue::Job;
use super::{Dispatcher, blocking};

/// Why a session could not be spawned. Its text is the `error` of `session.spawn_failed`
/// (or of a declined pull-request session), so each message carries its cause.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpawnError {
    #[error("routing.spawnWorkdir `{}` cannot be made absolute: {cause}", workdir.display())]
    Workdir { workdir: PathBuf, cause: std::io::Error },
    #[error("workspace: {0}")]
    Workspace(WorkspaceError),
    #[error("{0}")]
    Marker(RegistryError),
    #[error("a spawn cut short left tmux session `{target}`, which cannot be ended: {cause}")]
    Leftover { target: String, cause: TmuxError },
    #[error("{cause}{}", marker.as_ref().map(|m| format!("; {m}")).unwrap_or_default())]
    Launch { cause: Box<SessionError>, marker: Option<Box<RegistryError>> },
    #[error("the session runs in `{target}` but its record could not be written: {cause}")]
    Record { target: String, cause: RegistryError },
}

/// Which prompt template to render.
#[derive(Debug, Clone, Copy)]
enum Template {
    Event,
    Spawn,
}

impl Dispatcher {
    /// Carries out a dequeued job, or the jobs of one batch (docs/agent-input.md),
    /// against the registry as it is now: one decision per job, in order. A batch shares
    /// its first job's route (its jobs are deliveries of one work item's queue).
    pub(crate) async fn carry_out(&self, jobs: &[Job]) -> Vec<Decision> {
        let job = &jobs[0];
        let (registry, target) = (self.inner.registry.clone(), job.target.clone());
        let owner = match blocking(move || registry.record_owning(&target)).await {
            Ok(owner) => owner,
            Err(err) => {
                // As a snapshot does: an unreadable registry reads as empty, logged.
                self.events()
                    .emit_async(
                        Line::error(Kind::RegistryUnreadable).field("error", err.to_string()),
                    )
                    .await;
                None
            }
        };
        let config = self.config();
        let each = |decision: Decision| vec![decision; jobs.len()];
        // Only a pull request's event asks how many sessions the owner's pull requests
        // get; then the work item's frozen choice is read (seed 003 R4).
        let mode = match (&owner, job.event.pull_request()) {
            (Some(record), Some(pr)) if pr != record.work_item => match record.own_endpoint() {
                Some(own) => {
                    self.choices(&config, &record.work_item, &own.cwd).await.session_per_pr
                }
                None => config.routing.tmux.session_per_pr,
            },
            _ => config.routing.tmux.session_per_pr,
        };
        match plan::route_job(&job.target, owner, job.spawn, &job.event, &config, mode) {
            JobRoute::Spawn => vec![self.spawn(job).await],
            JobRoute::Vanished { item } => each(Decision::SessionVanished { item }),
            JobRoute::Paused { item } => each(Decision::SessionPaused { item }),
            JobRoute::Deliver { record, pr_session, endpoint } => {
                self.deliver(jobs, *record, pr_session, endpoint).await
            }
        }
    }

    /// What one paste shows for the jobs it delivers: their keys, and the batch's excerpt
    /// (with the CI evidence read for a failure, or the one line of a pass after one).
    async fn paste_for(&self, jobs: &[&Job]) -> Paste {
        let events: Vec<&Event> = jobs.iter().map(|job| &*job.event).collect();
        let keys = jobs.iter().filter_map(|job| job.cx.delivery_id.clone()).collect();
        let head = ci::head_sha(events[0])
            .zip(events[0].repository.as_ref())
            .map(|(sha, repo)| format!("{repo}@{sha}"));
        let outcomes: Vec<_> = events.iter().map(|event| ci::outcome(event)).collect();
        let failing = outcomes.contains(&Some(ci::Outcome::Failed));
        let passing = outcomes.iter().all(|o| *o == Some(ci::Outcome::Passed));
        let evidence = if failing { self.ci_evidence(&events, &jobs[0].cx).await } else { None };
        let reported = passing && head.as_deref().is_some_and(|head| self.take_ci_failure(head));
        if let Some(head) = head.filter(|_| failing) {
            self.remember_ci_failure(head);
        }
        Paste { keys, excerpt: batch::paste_excerpt(&events, evidence.as_ref(), reported) }
    }

    /// Delivers into `record`'s session as [`plan::route_job`] routed it: into a pull
    /// request's own new endpoint, else into `endpoint`. The jobs of a batch are one
    /// paste; a job the endpoint already received is not pasted again.
    async fn deliver(
        &self,
        jobs: &[Job],
        record: LocalRecord,
        pr_session: Option<PrSession>,
        endpoint: Option<WorkItemRef>,
    ) -> Vec<Decision> {
        let config = self.config();
        let job = &jobs[0];
        let each = |decision: Decision| vec![decision; jobs.len()];
        // Prepared for a pull request's own new endpoint, and reused (its CI evidence
        // read once) when that endpoint is declined.
        let mut prepared = None;
        match pr_session {
            None => {}
            Some(PrSession::Declined { pull_request, reason }) => {
                self.events()
                    .emit_async(
                        Line::info(Kind::SessionPrSessionDeclined)
                            .work_item(&record.work_item)
                            .field("pull_request", pull_request.to_string())
                            .field("reason", reason)
                            .field("delivery_id", &job.cx.delivery_id),
                    )
                    .await
            }
            Some(PrSession::Spawn { pull_request }) => {
                let paste = self.paste_for(&jobs.iter().collect::<Vec<_>>()).await;
                match self.spawn_endpoint(job, &record, &pull_request, &paste).await {
                    Err(decline) => {
                        prepared = Some(paste);
                        self.events().emit_async(decline).await
                    }
                    Ok(()) => {
                        return each(Decision::Delivered {
                            item: record.work_item.clone(),
                            endpoint: pull_request,
                            harness: record
                                .own_endpoint()
                                .map(|e| e.harness.clone())
                                .unwrap_or_default(),
                            already: false,
                        });
                    }
                }
            }
        }
        let Some((endpoint_ref, endpoint)) =
            endpoint.and_then(|served| record.endpoints.get_key_value(&served))
        else {
            return each(Decision::SessionVanished { item: record.work_item.clone() });
        };
        let endpoint = endpoint.clone();
        let endpoint_ref = endpoint_ref.clone();
        let item = record.work_item.clone();
        let mut decisions: Vec<Option<Decision>> = vec![None; jobs.len()];
        let mut fresh = Vec::new();
        for (at, job) in jobs.iter().enumerate() {
            let key = job.cx.delivery_id.as_deref();
            let in_doubt = key.filter(|key| self.take_in_doubt(key));
            let already = match (key, in_doubt) {
                (Some(key), _) if endpoint.has_delivered(key) => true,
                (_, Some(key)) => self.received_before(&item, &endpoint_ref, &endpoint, key).await,
                _ => false,
            };
            if already {
                decisions[at] = Some(Decision::Delivered {
                    item: item.clone(),
                    endpoint: endpoint_ref.clone(),
                    harness: endpoint.harness.clone(),
                    already: true,
                });
            } else {
                fresh.push(at);
            }
        }
        if fresh.is_empty() {
            return decisions.into_iter().flatten().collect();
        }
        let pasted: Vec<&Job> = fresh.iter().map(|at| &jobs[*at]).collect();
        let paste = match prepared {
            Some(paste) if pasted.len() == jobs.len() => paste,
            _ => self.paste_for(&pasted).await,
        };
        let lead = pasted[0];
        let site = SessionSite::for_work_item(
            &endpoint_ref,
            endpoint.cwd.clone(),
            config.instance.name.clone(),
        );
        // The work item's own session drives its graph; a pull request's own does not.
        let link = match endpoint_ref == item {
            true => self.graph_link(&config, &item, &endpoint.cwd, Boundary::Event).await,
            false => None,
        };
        let (graph_context, judged_first) = match &link {
            None => (String::new(), false),
            Some(link) => {
                let judged_first = if self.graph_at_human_gate(link).await {
                    self.graph_advance(
                        &config,
                        link,
                        &job.event,
                        Boundary::Event,
                        &endpoint.tmux_target,
                    )
                    .await
                } else {
                    None
                };
                let mut context = self.graph_context(link).await;
                if let Some(step) = &judged_first {
                    context.push_str(&format!(
                        "This event was classified by the gate first: {}.\n",
                        describe(step)
                    ));
                }
                (context, judged_first.is_some())
            }
        };
        let (tmux, harness) = (self.inner.tmux.clone(), self.inner.harness.clone());
        let registry = self.inner.registry.clone();
        let recorded = endpoint.harness_session_id.clone();
        // A respawn relaunches on what the session was launched with, as far as the
        // operator still offers it.
        let offer = config.routing.harness_choices.offered_to(harness.name());
        let relaunch = LaunchChoice {
            model: offer.model(endpoint.model.as_deref()),
            effort: offer.effort(endpoint.effort.as_deref()),
            plugin_dir: self.plugin_dir(&config),
        };
        let plugin = self.has_plugin(&config);
        let (event, paste_site, owner, served) =
            (lead.event.clone(), site.clone(), item.clone(), endpoint_ref.clone());
        let paste_config = config.clone();
        let (result, noted) = blocking(move || {
            let config = paste_config;
            let prompt =
                render(&config, &event, &served, &paste, Template::Event, &graph_context, plugin);
            let keys = paste.keys;
            let result = session::deliver_or_respawn(
                &tmux,
                &*harness,
                &paste_site,
                recorded.as_deref(),
                &relaunch,
                &prompt,
                &respawn_settings(&config),
            );
            let relaunched = match &result {
                Ok(Delivered::Respawned(respawned)) => {
                    Some(handles_of(harness.name(), &respawned.launch, &paste_site))
                }
                Ok(Delivered::Pasted | Delivered::RespawnAverted) => None,
                Err(_) => return (result, Ok(false)),
            };
            let noted = note_delivery(&registry, &owner, &served, &keys, relaunched);
            (result, noted)
        })
        .await;
        if let Err(err) = noted {
            self.events()
                .emit_async(
                    Line::warning(Kind::SessionTouchFailed)
                        .work_item(&endpoint_ref)
                        .field("error", err.to_string()),
                )
                .await;
        }
        if result.is_ok()
            && endpoint.awaiting_input.is_some()
            && loop_core::agent::answers_question(&job.event)
        {
            self.note_answered(&item, &endpoint_ref, job.cx.delivery_id.as_deref()).await;
        }
        let harness = endpoint.harness.clone();
        if let (Some(link), false, Ok(Delivered::Pasted | Delivered::RespawnAverted)) =
            (&link, judged_first, &result)
        {
            self.graph_advance(&config, link, &lead.event, Boundary::Event, &endpoint.tmux_target)
                .await;
        }
        let delivered = Decision::Delivered {
            item: item.clone(),
            endpoint: endpoint_ref.clone(),
            harness: harness.clone(),
            already: false,
        };
        let lead_decision = match result {
            Ok(Delivered::Pasted) => {
                Decision::Delivered { item, endpoint: endpoint_ref, harness, already: false }
            }
            Ok(Delivered::Respawned(respawned)) => {
                if let Some(why) = &respawned.resume_failure {
                    self.events()
                        .emit_async(
                            Line::warning(Kind::SessionResumeFailed)
                                .work_item(&item)
                                .field("harness_session_id", &endpoint.harness_session_id)
                                .field("error", why),
                        )
                        .await;
                }
                let launch = respawned.launch;
                Decision::Respawned {
                    item,
                    harness,
                    session_id: launch.conversation.as_str().to_owned(),
                    resumed: launch.resumed,
                    target: site.target,
                }
            }
            Ok(Delivered::RespawnAverted) => {
                // A live harness held the name by the time of the respawn: pasted there.
                self.events()
                    .emit_async(
                        Line::info(Kind::SessionRespawnAverted)
                            .work_item(&item)
                            .field("tmux_target", &site.target),
                    )
                    .await;
                Decision::Delivered { item, endpoint: endpoint_ref, harness, already: false }
            }
            Err(SessionError::Tmux(err @ TmuxError::SessionOccupied { .. })) => {
                Decision::SessionOccupied { item, target: site.target, error: err.to_string() }
            }
            Err(err) => Decision::Failed { item, harness, error: err.to_string() },
        };
        // The rest of a batch went with the lead: delivered with it (a respawn is logged
        // once, by the lead), or failed or refused as it was.
        let rest = match &lead_decision {
            Decision::Respawned { .. } => delivered,
            other => other.clone(),
        };
        for (nth, at) in fresh.into_iter().enumerate() {
            decisions[at] = Some(if nth == 0 { lead_decision.clone() } else { rest.clone() });
        }
        decisions.into_iter().flatten().collect()
    }

    /// The in-doubt check for `key`, left in flight by the previous process (docs/
    /// dispatcher.md, "In doubt"): asks the endpoint's harness whether its conversation
    /// already received the event prompt's `Delivery: <key>` line (or the spawn prompt's
    /// `delivery <key>.`). Received: stamped on the endpoint and `dispatch.recovered`,
    /// `true` (not pasted again). Not received, or the harness cannot tell: `false`,
    /// delivered as any other (`dispatch.in_doubt`; at-least-once when it cannot tell).
    async fn received_before(
        &self,
        owner: &WorkItemRef,
        served: &WorkItemRef,
        endpoint: &loop_core::record::Endpoint,
        key: &str,
    ) -> bool {
        let harness = self.inner.harness.clone();
        let conversation = endpoint.harness_session_id.clone().filter(|_| {
            // Another harness's transcript is not this adapter's to read.
            endpoint.harness == harness.name()
        });
        let (cwd, lines) =
            (endpoint.cwd.clone(), [format!("Delivery: {key}"), format!("delivery {key}.")]);
        let registry = self.inner.registry.clone();
        let (owner_ref, served_ref, stamp) = (owner.clone(), served.clone(), key.to_owned());
        let (received, noted) = blocking(move || {
            let conversation = conversation?;
            let answers = lines.map(|line| harness.received(&conversation, &cwd, &line));
            let received = if answers.contains(&Some(true)) {
                Some(true)
            } else {
                answers.into_iter().flatten().next()
            };
            let noted = (received == Some(true))
                .then(|| note_delivery(&registry, &owner_ref, &served_ref, &[stamp], None));
            Some((received, noted))
        })
        .await
        .unwrap_or((None, None));
        if let Some(Err(err)) = noted {
            self.events()
                .emit_async(
                    Line::warning(Kind::SessionTouchFailed)
                        .work_item(served)
                        .field("error", err.to_string()),
                )
                .await;
        }
        let line = match received {
            Some(true) => Line::info(Kind::DispatchRecovered),
            _ => Line::info(Kind::DispatchInDoubt).field("received", received),
        };
        self.events()
            .emit_async(
                line.work_item(owner)
                    .field("endpoint", (served != owner).then(|| served.to_string()))
                    .field("delivery_id", key)
                    .field("harness", &endpoint.harness),
            )
            .await;
        received == Some(true)
    }

    /// Spawns the session a job was queued for.
    async fn spawn(&self, job: &Job) -> Decision {
        let config = self.config();
        let item = job.target.clone();
        let key = job.cx.delivery_id.clone();
        let cwd = match self.prepare_workspace(&config, &item, None, false).await {
            Ok(cwd) => cwd,
            Err(error) => return Decision::SpawnFailed { item, error: error.to_string() },
        };
        self.seed_trust(&config, &item, &cwd).await;
        let paste = Paste { keys: key.clone().into_iter().collect(), excerpt: None };
        let link = self.graph_link(&config, &item, &cwd, Boundary::Spawn).await;
        let graph_context = match &link {
            Some(link) => self.graph_context(link).await,
            None => String::new(),
        };
        let prompt = render_off_thread(
            &config,
            &job.event,
            &item,
            paste,
            Template::Spawn,
            graph_context,
            self.has_plugin(&config),
        )
        .await;
        let site = SessionSite::for_work_item(&item, cwd.clone(), config.instance.name.clone());
        if let Err(error) = self.begin_spawn(&item, &site.target).await {
            return Decision::SpawnFailed { item, error: error.to_string() };
        }
        let choice = self.launch_choice(&config, &item, &cwd).await;
        let launch = match self.launch(&config, &site, &prompt, &choice).await {
            Ok(launch) => launch,
            Err(error) => return Decision::SpawnFailed { item, error: error.to_string() },
        };
        let harness = self.inner.harness.name().to_owned();
        let handles = handles_of(&harness, &launch, &site);
        let pull_request = job.event.pull_request().filter(|pr| pr != &item);
        let (registry, owner, pr) =
            (self.inner.registry.clone(), item.clone(), pull_request.clone());
        let graph_warning = link.is_none().then(|| self.graph_warning(&item, &cwd)).flatten();
        let saved = blocking(move || {
            let now = Timestamp::now();
            let target = handles.tmux_target.clone();
            registry.owe_announcement(&OwedAnnouncement {
                work_item: owner.clone(),
                owner: owner.clone(),
                harness: handles.harness.clone(),
                tmux_target: target.clone(),
                owed_at: now,
            })?;
            let endpoint = Endpoint { graph_warning, ..handles.into_endpoint(now) };
            if let Err(refused) = registry.register(&owner, endpoint, false) {
                // Nothing new to announce. (A marker that cannot be removed stays, and
                // the next start may announce the live session a second time.)
                let _left = registry.settle_announcement(&target);
                return Err(refused);
            }
            let withdrawn = registry.end_spawn(&target);
            registry.touch(&owner, &owner, key.as_deref(), now)?;
            let linked = match pr {
                Some(pr) => registry.link_pull_request(&owner, &pr, now)?,
                None => false,
            };
            Ok::<_, loop_sessions::registry::RegistryError>((linked, withdrawn))
        })
        .await;
        if let Ok((_, Err(err))) = &saved {
            self.events().emit_async(marker_left(&item, err)).await;
        }
        match saved.map(|(linked, _)| linked) {
            Ok(false) => {}
            Ok(true) => {
                self.events()
                    .emit_async(
                        Line::info(Kind::SessionPrLinked)
                            .work_item(&item)
                            .field("pull_request", pull_request.as_ref().map(ToString::to_string)),
                    )
                    .await
            }
            Err(cause) => {
                let error = SpawnError::Record { target: site.target, cause }.to_string();
                return Decision::SpawnFailed { item, error };
            }
        }
        if let Some(link) = &link {
            self.graph_advance(&config, link, &job.event, Boundary::Spawn, &site.target).await;
        }
        if let Some(pr) = &pull_request {
            let (registry, owner) = (self.inner.registry.clone(), item.clone());
            if let Ok(Some(record)) = blocking(move || registry.record_owning(&owner)).await {
                self.note_pull_request(&record, pr, Upstream::Open).await;
            }
        }
        // The announcement follows once the worker has recorded `session.spawned`.
        Decision::Spawned {
            item,
            harness,
            session_id: launch.conversation.as_str().to_owned(),
            target: site.target,
            interaction: config.routing.interaction.mode.as_str(),
        }
    }

    /// Spawns a pull request's own endpoint in a checkout of its own and pastes the event
    /// into it. `Err` is the `session.pr_session_declined` (or spawn-failed) line; the
    /// caller then delivers into the work item's session.
    async fn spawn_endpoint(
        &self,
        job: &Job,
        record: &LocalRecord,
        pr: &WorkItemRef,
        paste: &Paste,
    ) -> Result<(), Line> {
        let config = self.config();
        let declined = |reason: &str, error: Option<String>| {
            Line::info(Kind::SessionPrSessionDeclined)
                .work_item(&record.work_item)
                .field("pull_request", pr.to_string())
                .field("reason", reason)
                .field("error", error)
                .field("delivery_id", &job.cx.delivery_id)
        };
        let same_repository = pr.repo().same_repository(record.work_item.repo());
        let branch = job
            .event
            .entity
            .as_ref()
            .and_then(|e| e.head_branch.as_deref())
            .and_then(|b| Branch::parse(b).ok());
        let cwd = self
            .prepare_workspace(&config, pr, branch.as_ref(), same_repository)
            .await
            .map_err(|err| declined("workspace-failed", Some(err.to_string())))?;
        if record.own_endpoint().is_some_and(|own| own.cwd == cwd) {
            return Err(declined("shared-worktree", None));
        }
        self.seed_trust(&config, pr, &cwd).await;
        let keys = paste.keys.clone();
        let prompt = render_off_thread(
            &config,
            &job.event,
            pr,
            paste.clone(),
            Template::Event,
            String::new(),
            self.has_plugin(&config),
        )
        .await;
        let site =
            SessionSite::for_endpoint(&record.work_item, pr, cwd, config.instance.name.clone());
        let spawn_failed = |error: SpawnError| {
            Line::warning(Kind::SessionSpawnFailed)
                .work_item(&record.work_item)
                .field("endpoint", pr.to_string())
                .field("error", error.to_string())
                .field("will_retry", false)
        };
        self.begin_spawn(pr, &site.target).await.map_err(spawn_failed)?;
        let own_cwd = record.own_endpoint().map(|own| own.cwd.clone()).unwrap_or_default();
        let choice = self.launch_choice(&config, &record.work_item, &own_cwd).await;
        let launch = self.launch(&config, &site, &prompt, &choice).await.map_err(spawn_failed)?;
        let harness = self.inner.harness.name().to_owned();
        let handles = handles_of(&harness, &launch, &site);
        let (registry, owner, served) =
            (self.inner.registry.clone(), record.work_item.clone(), pr.clone());
        let saved = blocking(move || {
            let now = Timestamp::now();
            let target = handles.tmux_target.clone();
            registry.owe_announcement(&OwedAnnouncement {
                work_item: served.clone(),
                owner: owner.clone(),
                harness: handles.harness.clone(),
                tmux_target: target.clone(),
                owed_at: now,
            })?;
            registry.save_handles(&owner, &served, handles, now)?;
            let withdrawn = registry.end_spawn(&target);
            for key in &keys {
                registry.touch(&owner, &served, Some(key), now)?;
            }
            Ok::<_, loop_sessions::registry::RegistryError>(withdrawn)
        })
        .await;
        if let Ok(Err(err)) = &saved {
            self.events().emit_async(marker_left(pr, err)).await;
        }
        if let Err(err) = saved {
            self.events()
                .emit_async(
                    Line::warning(Kind::SessionLinkFailed)
                        .work_item(&record.work_item)
                        .field("linked_ref", pr.to_string())
                        .field("error", err.to_string()),
                )
                .await;
        }
        self.events()
            .emit_async(
                Line::info(Kind::SessionPrSpawned)
                    .work_item(&record.work_item)
                    .field("pull_request", pr.to_string())
                    .field("harness", &harness)
                    .field("harness_session_id", launch.conversation.as_str())
                    .field("tmux_target", &site.target)
                    .field("delivery_id", &job.cx.delivery_id),
            )
            .await;
        self.announce(pr, &harness, &site.target).await;
        Ok(())
    }

    /// Records `pr` on `record_item`'s session record as a pull request delivering it
    /// (no session of its own yet). Idempotent; `session.pr_linked` only when new; a
    /// write failure is logged (`session.link_failed`) and the delivery carries on.
    /// It is recorded in the work item's state file too (seed 003 R2), when there is one.
    pub(crate) async fn bind_pull_request(&self, record_item: &WorkItemRef, pr: &WorkItemRef) {
        if record_item == pr {
            return;
        }
        let (registry, owner, pr_ref) =
            (self.inner.registry.clone(), record_item.clone(), pr.clone());
        let bound = blocking(move || {
            let linked = registry.link_pull_request(&owner, &pr_ref, Timestamp::now())?;
            Ok::<_, RegistryError>((linked, registry.record_owning(&owner)?))
        })
        .await;
        let line = match bound {
            Ok((linked, record)) => {
                if let Some(record) = record {
                    self.note_pull_request(&record, pr, Upstream::Open).await;
                }
                if !linked {
                    return;
                }
                Line::info(Kind::SessionPrLinked).field("pull_request", pr.to_string())
            }
            Err(err) => Line::warning(Kind::SessionLinkFailed)
                .field("linked_ref", pr.to_string())
                .field("error", err.to_string()),
        };
        self.events().emit_async(line.work_item(record_item)).await;
    }

    /// What a new session of `item` (checkout `cwd`) is launched on: the work item's
    /// frozen model and effort, as far as the operator offers them.
    async fn launch_choice(&self, config: &Config, item: &WorkItemRef, cwd: &Path) -> LaunchChoice {
        let choices = self.choices(config, item, cwd).await;
        LaunchChoice {
            model: choices.model,
            effort: choices.effort,
            plugin_dir: self.plugin_dir(config),
        }
    }

    /// Records the intent to spawn `endpoint` into tmux session `target` (see
    /// [`Registry::begin_spawn`](loop_sessions::registry::Registry::begin_spawn)). When
    /// an earlier spawn there was cut short, its tmux session is ours: it is ended, so
    /// the spawn starts afresh instead of being refused (`session.spawn_recovered`). A
    /// tmux session with no intent behind it is never touched.
    async fn begin_spawn(&self, endpoint: &WorkItemRef, target: &str) -> Result<(), SpawnError> {
        let (registry, tmux, at) =
            (self.inner.registry.clone(), self.inner.tmux.clone(), target.to_owned());
        let recovered = blocking(move || {
            if !registry.begin_spawn(&at).map_err(SpawnError::Marker)? {
                return Ok(None);
            }
            tmux.kill_session(&at)
                .map(Some)
                .map_err(|cause| SpawnError::Leftover { target: at, cause })
        })
        .await?;
        if let Some(existed) = recovered {
            self.events()
                .emit_async(
                    Line::warning(Kind::SessionSpawnRecovered)
                        .work_item(endpoint)
                        .field("tmux_target", target)
                        .field("session_ended", existed),
                )
                .await;
        }
        Ok(())
    }

    /// Starts a new conversation at `site` with `prompt` as its first message. On a
    /// failure that started no harness of ours (the name held by someone else, no
    /// conversation id, tmux refusing), the spawn's intent is withdrawn; when the
    /// harness may be running (not ready, paste failed) it stays, so the next spawn
    /// replaces it.
    async fn launch(
        &self,
        config: &Config,
        site: &SessionSite,
        prompt: &str,
        choice: &LaunchChoice,
    ) -> Result<Launch, SpawnError> {
        let (tmux, harness) = (self.inner.tmux.clone(), self.inner.harness.clone());
        let registry = self.inner.registry.clone();
        let settings = respawn_settings(config);
        let (site, prompt, choice) = (site.clone(), prompt.to_owned(), choice.clone());
        blocking(move || {
            let launched =
                session::spawn_fresh(&tmux, &*harness, &site, &choice, &prompt, &settings);
            match launched {
                Ok(launch) => Ok(launch),
                Err(
                    cause @ (SessionError::NotReady { .. }
                    | SessionError::Delivery(_)
                    | SessionError::Landing(_)),
                ) => Err(SpawnError::Launch { cause: Box::new(cause), marker: None }),
                Err(cause) => {
                    let marker = registry.end_spawn(&site.target).err().map(Box::new);
                    Err(SpawnError::Launch { cause: Box::new(cause), marker })
                }
            }
        })
        .await
    }

    /// The checkout `endpoint` runs in: under `routing.workspace.root` when set
    /// (`workspace.prepared`), else `routing.spawnWorkdir`.
    async fn prepare_workspace(
        &self,
        config: &Config,
        endpoint: &WorkItemRef,
        branch: Option<&Branch>,
        require_branch: bool,
    ) -> Result<PathBuf, SpawnError> {
        let workspace = &config.routing.workspace;
        let Some(workspaces) = super::command::workspaces(config) else {
            let workdir = config.routing.spawn_workdir.clone();
            return std::path::absolute(&workdir)
                .map_err(|cause| SpawnError::Workdir { workdir, cause });
        };
        let url = clone_url(endpoint.repo(), workspace.clone_protocol, &workspace.clone_urls);
        let (endpoint_ref, branch) = (endpoint.clone(), branch.cloned());
        let checkout = blocking(move || {
            workspaces.prepare(&endpoint_ref, &url, branch.as_ref(), require_branch)
        })
        .await
        .map_err(SpawnError::Workspace)?;
        self.events()
            .emit_async(
                Line::info(Kind::WorkspacePrepared)
                    .work_item(endpoint)
                    .field("strategy", workspace.strategy.as_str())
                    .field("checkout", checkout.path.display().to_string())
                    .field("branch", checkout.branch.as_ref().map(Branch::as_str)),
            )
            .await;
        Ok(checkout.path)
    }

    /// The plugin directory a Claude session launched now loads (`--plugin-dir`), when
    /// sessions run the-loop's plugin ([`Self::has_plugin`]).
    fn plugin_dir(&self, config: &Config) -> Option<PathBuf> {
        self.inner.plugin.as_ref().filter(|_| self.has_plugin(config)).map(|site| site.plugin_dir())
    }

    /// Whether sessions spawned now run the-loop's plugin (Claude, plugins enabled):
    /// their spawn prompt may name `/the-loop:work-on`.
    pub(crate) fn has_plugin(&self, config: &Config) -> bool {
        self.inner.plugin.is_some()
            && self.inner.claude_files.is_some()
            && config.routing.harness_plugins.enabled
            && self.inner.harness.name() == "claude"
    }

    /// Pre-seeds Claude Code for a session in `cwd`: trust for the directory
    /// (`routing.harnessTrust`) and the-loop's plugin (`routing.harnessPlugins`).
    /// Best-effort, each on its own: a failure is a warning and the spawn goes on. Other
    /// harnesses need neither.
    async fn seed_trust(&self, config: &Config, item: &WorkItemRef, cwd: &std::path::Path) {
        let Some(files) = self.inner.claude_files.clone() else { return };
        if self.inner.harness.name() != "claude" {
            return;
        }
        let trust = &config.routing.harness_trust;
        let settings = loop_sessions::trust::TrustSettings {
            enabled: trust.enabled,
            scope: trust.scope,
            accept_bypass_permissions: trust.accept_bypass_permissions,
        };
        let root = config.routing.workspace.root.clone();
        let args = config.routing.harness_args.claude.clone();
        let dir = cwd.to_owned();
        let plugin = self.inner.plugin.clone().filter(|_| self.has_plugin(config));
        let (trusted, registered) = blocking(move || {
            let trusted = loop_sessions::trust::seed_claude_trust(
                &files,
                &settings,
                &dir,
                root.as_deref(),
                &args,
            );
            // Loaded with `--plugin-dir` by this session alone: written, not registered.
            let registered = plugin.map(|site| site.write());
            (trusted, registered)
        })
        .await;
        let outcomes = [
            (
                Kind::WorkspaceTrusted,
                Kind::WorkspaceTrustFailed,
                trusted.map_err(|e| e.to_string()),
            ),
            (
                Kind::HarnessPluginRegistered,
                Kind::HarnessPluginFailed,
                registered.unwrap_or(Ok(Vec::new())).map_err(|e| e.to_string()),
            ),
        ];
        for (done, failed, outcome) in outcomes {
            let line = match outcome {
                Ok(notes) if notes.is_empty() => continue,
                Ok(notes) => Line::info(done).field("applied", notes),
                Err(error) => Line::warning(failed).field("error", error),
            };
            self.events()
                .emit_async(line.work_item(item).field("cwd", cwd.display().to_string()))
                .await;
        }
    }
}

/// Renders the event or spawn prompt for `item`. Reads the template file (a path that is
/// not a readable file falls back to the built-in template): call on a blocking thread.
fn render(
    config: &Config,
    event: &Event,
    item: &WorkItemRef,
    paste: &Paste,
    template: Template,
    graph_context: &str,
    plugin: bool,
) -> String {
    let (path, builtin) = match template {
        Template::Event => (&config.routing.prompt_template, EVENT_TEMPLATE),
        Template::Spawn => (&config.routing.spawn_prompt_template, SPAWN_TEMPLATE),
    };
    let text = std::fs::read_to_string(path).ok();
    let keys = batch::delivery_ids(&paste.keys);
    Prompt {
        work_item: item,
        event,
        delivery_id: keys.as_deref(),
        payload_excerpt: paste.excerpt.as_deref(),
        graph_context,
        interaction: config.routing.interaction.mode,
        plugin,
    }
    .render(text.as_deref().unwrap_or(builtin))
}

/// [`render`] on a blocking thread, for the paths where the prompt is not pasted in the
/// same call (spawns).
async fn render_off_thread(
    config: &Arc<Config>,
    event: &Arc<Event>,
    item: &WorkItemRef,
    paste: Paste,
    template: Template,
    graph_context: String,
    plugin: bool,
) -> String {
    let (config, event, item) = (config.clone(), event.clone(), item.clone());
    blocking(move || render(&config, &event, &item, &paste, template, &graph_context, plugin)).await
}

/// What one paste shows: the keys it delivers (`$delivery_id`) and, for a batch or a CI
/// report, the excerpt that replaces the lead event's own.
#[derive(Debug, Clone)]
struct Paste {
    keys: Vec<String>,
    excerpt: Option<String>,
}

/// Remembers the deliveries of one paste on the endpoint (after a respawn, its new
/// launch first): the done-marks. Blocking.
fn note_delivery(
    registry: &loop_sessions::registry::Registry,
    owner: &WorkItemRef,
    served: &WorkItemRef,
    keys: &[String],
    relaunched: Option<EndpointHandles>,
) -> Result<bool, loop_sessions::registry::RegistryError> {
    let now = Timestamp::now();
    if let Some(handles) = relaunched {
        registry.save_handles(owner, served, handles, now)?;
    }
    match keys {
        [] => registry.touch(owner, served, None, now),
        keys => {
            let mut touched = false;
            for key in keys {
                touched |= registry.touch(owner, served, Some(key), now)?;
            }
            Ok(touched)
        }
    }
}

/// The warning for a spawn whose record was written but whose intent marker could not
/// be removed: the next spawn into the same tmux name (after a close) would take the
/// kept session for one cut short and end it.
pub(super) fn marker_left(
    endpoint: &WorkItemRef,
    err: &loop_sessions::registry::RegistryError,
) -> Line {
    Line::warning(Kind::SessionSpawnMarkerLeft).work_item(endpoint).field("error", err.to_string())
}

/// `routing.tmux` as the session lifecycle reads it.
fn respawn_settings(config: &Config) -> RespawnSettings {
    let tmux = &config.routing.tmux;
    RespawnSettings {
        resume: tmux.resume_on_respawn,
        probe: Duration::from_secs_f64(tmux.resume_probe_seconds.max(0.0)),
        ..RespawnSettings::default()
    }
}

/// The handles a launch produced, for the registry.
fn handles_of(harness: &str, launch: &Launch, site: &SessionSite) -> EndpointHandles {
    EndpointHandles {
        harness: harness.to_owned(),
        harness_session_id: Some(launch.conversation.as_str().to_owned()),
        cwd: site.cwd.clone(),
        tmux_target: site.target.clone(),
        model: launch.model.clone(),
        effort: launch.effort.clone(),
        harness_args: launch.harness_args.clone(),
    }
}

//! The one pipeline both ingresses feed (SPEC §5; reference §2, §5.2), as loop-core
//! decides it ([`loop_core::plan`]) and this module carries it out.
//!
//! [`judge`] reads the facts the front door needs (the session records; rosters,
//! control records and existence answers on demand through [`StoreFacts`]), asks
//! [`plan::judge`], writes the lines it returns and counts a drop. The receiver calls it
//! for each journalled delivery and hands the [`Judged`] value to the dispatcher; the
//! poller's events take the same path through `poller::seam::Pipeline`, implemented here
//! over the dispatcher.
//!
//! [`Dispatcher::handle`] asks [`plan::plan`] for the steps and executes them in order:
//! claim the dedup key, then record, execute, enqueue, bind, close. Nothing here decides:
//! each arm of [`Dispatcher::carry_out_plan`] is one effect, and what an effect reports is recorded
//! as the decision the step names.

use std::collections::VecDeque;
use std::sync::Arc;

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::config::Config;
use loop_core::event::Event;
use loop_core::log::Line;
use loop_core::login::Login;
use loop_core::plan::{
    self, Context, Decision, Delivery, Dropped, Ingress, Judged, Lookup, Plan, Snapshot, Step,
};
use loop_core::record::{Collaborators, Control};
use loop_core::route::{self, Existence, IssueExistence};
use loop_sessions::workspace::Workspaces;
use loop_store::{EventLog, Mark, StateStore};

use crate::dispatcher::{
    DeliveryStatus, Dispatcher, RosterOutcome, blocking, on_own_thread, workspaces,
};
use crate::metrics::{Metrics, Outcome};
use crate::poller::seam::{self, Dispatched, StampFailed};
use crate::receiver::Dispatch;

/// What a plan is made from, kept so that a plan waiting on its work item's worker
/// ([`Step::AwaitSpawn`], [`Step::AwaitQueue`]) can be made again once it is reached.
#[derive(Debug)]
pub(crate) enum Planned {
    /// A judged event, planned in full.
    Judged { judged: Box<Judged>, event: Arc<Event>, ingress: Ingress },
    /// A close the poller found, planned by what it ends alone.
    Close { event: Arc<Event>, cx: Context },
}

impl Planned {
    fn event(&self) -> &Arc<Event> {
        match self {
            Self::Judged { event, .. } | Self::Close { event, .. } => event,
        }
    }

    fn ingress(&self) -> Ingress {
        match self {
            Self::Judged { ingress, .. } => *ingress,
            Self::Close { .. } => Ingress::Poll,
        }
    }

    /// The plan against the session records as they are now; `reached`: the work item
    /// whose worker took this plan off its queue, so nothing there is ahead of it. File
    /// IO: call it on a blocking thread.
    fn plan(&self, dispatcher: &Dispatcher, reached: Option<&WorkItemRef>) -> Plan {
        let mut sessions = dispatcher.snapshot_now();
        if let Some(item) = reached {
            sessions.busy.remove(item);
        }
        let now = Timestamp::now();
        match self {
            Self::Judged { judged, ingress, .. } => {
                let facts =
                    StoreFacts::new(dispatcher.store(), dispatcher, workspaces(&judged.config));
                plan::plan(judged, &sessions, &facts, *ingress, now)
            }
            Self::Close { event, cx } => {
                let config = dispatcher.config();
                let facts = StoreFacts::new(dispatcher.store(), dispatcher, workspaces(&config));
                let refs = &cx.work_items;
                let steps = plan::closure::steps(
                    event,
                    &sessions,
                    refs,
                    &config,
                    Ingress::Poll,
                    now,
                    &facts,
                );
                Plan { cx: cx.clone(), claim: None, steps }
            }
        }
    }
}

impl Dispatcher {
    /// Takes a judged event through the rest of the pipeline: plans it against the
    /// session records as they are now and carries out the plan. Deliveries and spawns
    /// run on their work item's worker; [`Dispatcher::idle`] says when they are done.
    pub async fn handle(&self, judged: Judged, ingress: Ingress) {
        // The receiver re-reads the config file per delivery: what judged this event is
        // what the dispatcher runs under from now on (hot reload).
        if !Arc::ptr_eq(&judged.config, &self.config()) {
            self.set_config(judged.config.clone());
        }
        let event = Arc::new(judged.event.clone());
        let planned = Arc::new(Planned::Judged { judged: Box::new(judged), event, ingress });
        let plan = self.plan(&planned, None).await;
        // A stamp that could not be written is logged; the webhook path has no retry.
        let _logged = self.carry_out_plan(plan, &planned).await;
    }

    /// The plan for `planned` now, made on a blocking thread (`reached`: see
    /// [`Planned::plan`]).
    pub(crate) async fn plan(&self, planned: &Arc<Planned>, reached: Option<WorkItemRef>) -> Plan {
        let (this, planned) = (self.clone(), planned.clone());
        blocking(move || planned.plan(&this, reached.as_ref())).await
    }

    /// Carries out a plan's steps in order. `Err` when an `ended` stamp could not be
    /// written (its `work_item.stamp_failed` line is written too, and the steps that
    /// depended on it are skipped).
    pub(crate) async fn carry_out_plan(
        &self,
        plan: Plan,
        planned: &Arc<Planned>,
    ) -> Result<(), StampFailed> {
        let Plan { cx, claim, steps } = plan;
        let (event, ingress) = (planned.event(), planned.ingress());
        // Dedup: marked at intake, so an in-flight duplicate cannot run twice.
        if let Some(key) = &claim
            && !self.take_in(key).await
        {
            self.record(&Decision::Duplicate, &cx).await;
            return Ok(());
        }
        let mut steps = VecDeque::from(steps);
        let mut enqueued = false;
        let mut outcome = Ok(());
        while let Some(step) = steps.pop_front() {
            match step {
                Step::Record(decision) => self.record(&decision, &cx).await,
                Step::Reopen { item } => self.reopen(item, &cx, ingress).await,
                Step::RecordCommand { target, command, actor, note, key } => {
                    self.record_command(&target, command, &actor, note, key).await;
                }
                Step::Execute { command, actor, effect, target, session, reason } => {
                    let (record, reason) = (session.as_deref(), reason.as_deref());
                    let effect = self.execute(effect, &target, record, &actor, reason).await;
                    let executed = Decision::Executed { command, actor, effect, target };
                    self.record(&executed, &cx).await;
                }
                Step::EditRoster { target, command, edit, logins, grantor, key } => {
                    let actor = grantor.by.clone();
                    match self.edit_roster(&target, edit, logins, grantor, key).await {
                        RosterOutcome::Edited(effects) => {
                            for (collaborator, effect) in effects {
                                let edited = Decision::RosterEdited {
                                    command,
                                    actor: actor.clone(),
                                    collaborator,
                                    effect,
                                    target: target.clone(),
                                };
                                self.record(&edited, &cx).await;
                            }
                        }
                        RosterOutcome::Replayed => {
                            let consumed = Decision::ControlConsumed { command, target };
                            self.record(&consumed, &cx).await;
                        }
                    }
                }
                Step::Enqueue { item, spawn } => {
                    enqueued |= self.enqueue_or_release(event.clone(), &cx, item, spawn).await;
                }
                Step::AwaitSpawn { item } => {
                    let awaiting = Decision::AwaitingSpawn { item: item.clone() };
                    enqueued |= self.await_or_release(planned.clone(), &cx, item, awaiting).await;
                }
                Step::AwaitQueue { item } => {
                    let awaiting = Decision::AwaitingQueue { item: item.clone() };
                    enqueued |= self.await_or_release(planned.clone(), &cx, item, awaiting).await;
                }
                Step::BindPullRequest { item, pull_request } => {
                    self.bind_pull_request(&item, &pull_request).await;
                }
                Step::Paused { item } => {
                    let paused = Decision::SessionPaused { item };
                    if enqueued {
                        for line in paused.lines(&cx) {
                            self.events().emit_async(line).await;
                        }
                    } else {
                        self.record(&paused, &cx).await;
                    }
                }
                Step::CloseSession { record } => self.close_session(&record).await,
                Step::CloseEndpoint { record, pull_request, upstream } => {
                    self.close_endpoint(&record, &pull_request).await;
                    self.note_pull_request(&record, &pull_request, upstream).await;
                }
                Step::StampEnded { item, ended, stamped, then } => {
                    match self.stamp_ended(&item, *ended).await {
                        Ok(()) => {
                            self.record(&stamped, &cx).await;
                            for step in then.into_iter().rev() {
                                steps.push_front(step);
                            }
                        }
                        Err(store) => {
                            let error = store.to_string();
                            self.record(&Decision::StampFailed { item: item.clone(), error }, &cx)
                                .await;
                            outcome = Err(StampFailed { item, store });
                        }
                    }
                }
                Step::Cleanup { item, actor, why } => {
                    self.cleanup(&item, Some(&actor), why).await;
                }
            }
        }
        outcome
    }
}

/// The receiver hands judged events to the dispatcher from its processing thread, one at a
/// time in journal order; returning means the delivery was decided (and, when it is to
/// be delivered or spawned, queued).
impl Dispatch for Dispatcher {
    fn dispatch(&self, judged: Judged) {
        on_own_thread(|| self.runtime().block_on(self.handle(judged, Ingress::Webhook)));
    }

    fn mark_when_done(&self, marks: Arc<crate::receiver::InboxMarks>) {
        self.send_inbox_marks(marks);
    }
}

/// The poll ingress: a polled event is judged and handled exactly as a webhook's, and
/// what became of it is read back from the delivery ledger.
impl seam::Pipeline for Dispatcher {
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
        let judged = blocking(move || {
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

    async fn close(&self, event: Event) -> Result<(), StampFailed> {
        let refs: Vec<WorkItemRef> = route::route(&event).items().cloned().collect();
        let cx = Context {
            gh_event: event.kind.as_str().to_owned(),
            action: event.action.clone(),
            delivery_id: event.dedup_key().map(|key| key.as_str().to_owned()),
            gh_delivery: None,
            actor: event.actor.name().map(str::to_owned),
            work_items: refs,
            inbox_seq: None,
        };
        let planned = Arc::new(Planned::Close { event: Arc::new(event), cx });
        let plan = self.plan(&planned, None).await;
        self.carry_out_plan(plan, &planned).await
    }
}

/// The existence check the receiver runs on its processing thread: a cached answer, else
/// GitHub asked (and a definite answer cached). Without a client every ref is unknown,
/// which keeps it.
impl IssueExistence for Dispatcher {
    fn existence(&self, item: &WorkItemRef) -> Existence {
        let known = self.existence_now(std::slice::from_ref(item));
        let known = on_own_thread(|| self.runtime().block_on(known));
        known.existence(item)
    }
}

/// The facts a plan reads on demand, answered from the state store, the existence
/// answers and the workspace root. Every read is file IO: use it on a blocking thread.
pub(crate) struct StoreFacts<'a> {
    store: &'a StateStore,
    existence: &'a dyn IssueExistence,
    workspaces: Option<Workspaces>,
}

impl<'a> StoreFacts<'a> {
    pub(crate) fn new(
        store: &'a StateStore,
        existence: &'a dyn IssueExistence,
        workspaces: Option<Workspaces>,
    ) -> Self {
        Self { store, existence, workspaces }
    }
}

impl IssueExistence for StoreFacts<'_> {
    fn existence(&self, item: &WorkItemRef) -> Existence {
        self.existence.existence(item)
    }
}

impl Lookup for StoreFacts<'_> {
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

    fn control(&self, item: &WorkItemRef) -> Option<Control> {
        match self.store.read_section::<Control>(item) {
            Ok(slot) => slot.into_value(),
            Err(err) => {
                tracing::warn!(work_item = %item, error = %err, "cannot read the control record");
                None
            }
        }
    }

    fn tracked(&self, item: &WorkItemRef) -> bool {
        matches!(self.store.load_portable_record(item), Ok(Some(_)))
    }

    fn session_recorded(&self, item: &WorkItemRef) -> bool {
        matches!(self.store.load_local_record(item), Ok(Some(_)))
    }

    fn checkout_exists(&self, item: &WorkItemRef) -> bool {
        self.workspaces
            .as_ref()
            .is_some_and(|w| w.checkout_path(item).is_ok_and(|path| path.exists()))
    }
}

/// Where the judging reports: the event log, and the metrics a drop is counted in
/// (`GET /metrics`, none when nobody scrapes).
#[derive(Debug, Clone, Copy)]
pub struct Report<'a> {
    pub events: &'a EventLog,
    pub metrics: Option<&'a Metrics>,
}

impl Report<'_> {
    /// Writes a front-door refusal's line and counts it under `reason` (outcome
    /// `dropped`).
    pub fn refuse(&self, line: Line, reason: &'static str) {
        self.events.emit(line);
        self.count_drop(reason);
    }

    fn count_drop(&self, reason: &'static str) {
        if let Some(metrics) = self.metrics {
            metrics.delivery(Outcome::Dropped, reason);
        }
    }
}

/// Judges a normalized event for both ingresses ([`plan::judge`]) against the live
/// session records in `store`, writing the lines it returns and counting a drop in `report`'s
/// metrics. File IO and, for branch-only refs, a GitHub question: call it on a blocking
/// thread.
pub fn judge(
    event: Event,
    delivery: Delivery,
    config: Arc<Config>,
    store: &StateStore,
    existence: &dyn IssueExistence,
    report: Report<'_>,
) -> Result<Judged, Dropped> {
    let sessions = match store.live_records() {
        // The front door asks nothing of the spawns in flight; the plan does.
        Ok(records) => Snapshot { records, ..Snapshot::default() },
        Err(err) => {
            tracing::warn!(error = %err, "cannot read the live session records");
            Snapshot::default()
        }
    };
    let facts = StoreFacts::new(store, existence, None);
    let judgement = plan::judge(event, delivery, config, &sessions, &facts);
    for line in judgement.lines {
        report.events.emit(line);
    }
    match judgement.verdict {
        Ok(judged) => Ok(*judged),
        Err(dropped) => {
            report.count_drop(dropped.reason);
            Err(dropped)
        }
    }
}

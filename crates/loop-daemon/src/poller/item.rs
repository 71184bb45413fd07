//! One listed item through the ledger rules (reference §2.2–§2.6, seed 004).
//!
//! Reads the item's thread, decides first sight or known item, holds back pending control
//! commands on first sight, forwards candidates in thread order, offers or retries a
//! presence, records give-ups, prunes the ledger to the live thread, writes it (only when
//! changed) and only then posts any give-up notice. The rules are loop-core's; this is
//! their application to one item.

use jiff::Timestamp;
use loop_core::config::Config;
use loop_core::control::{Command, Vocabulary, is_armed, start_required};
use loop_core::event::Actor;
use loop_core::guards::is_collaborator;
use loop_core::log::{Kind, Line};
use loop_core::poll::{self, CommentStep, SpawnStep, ThreadEntry};
use loop_core::record::{Collaborators, CommentId, CommentLedger, Control, SpawnLedger};
use loop_core::{Login, WorkItemRef};
use loop_github::{ItemKind, ListedItem, ThreadComment};
use loop_store::StoreError;

use super::events::{actor, comment_event, presence_event};
use super::ledgers::Ledgers;
use super::notice::give_up_notice;
use super::seam::{Dispatched, Pipeline};
use super::{Attempted, CycleReport, Facts, Poller};

/// A comment's ledger key: its node id, unique across a pull request's three surfaces
/// (whose numeric ids are separate sequences) and the id the webhook's dedup key names.
fn comment_id(comment: &ThreadComment) -> CommentId {
    CommentId::new(comment.node_id.as_str())
}

/// What the walk of one cycle shares across items.
#[derive(Debug)]
pub(super) struct Walk<'a> {
    pub config: &'a Config,
    pub facts: &'a Facts,
    /// The label of the scope that listed the item.
    pub label: &'a str,
    pub now: Timestamp,
    pub sweep: bool,
}

/// A give-up notice to post once the ledger recording the give-up is on disk.
#[derive(Debug)]
struct Notice {
    id: u64,
    url: String,
    attempts: u32,
}

/// The control facts of an item's refs.
#[derive(Debug, Default)]
struct ControlFacts {
    has_record: bool,
    last: Option<Command>,
    collaborators: Vec<Login>,
}

/// The comment ledger of `item`'s own record when its thread was polled before (a title,
/// comment state or spawn ledger, or a `lastPolledAt` an older version left in the record);
/// `None` when the next read of its thread is a first sight.
fn known_thread(
    ledgers: &mut Ledgers,
    item: &WorkItemRef,
) -> Result<Option<CommentLedger>, StoreError> {
    let Some(own) = ledgers.ledger(item)?.cloned() else { return Ok(None) };
    let known = poll::own_thread_known(&own) || ledgers.legacy_polled(item)?;
    Ok(known.then_some(own.comments))
}

impl<D: Pipeline> Poller<D> {
    /// Processes one listed item; failures are reported and never end the cycle.
    pub(super) async fn process_item(
        &mut self,
        walk: &Walk<'_>,
        listed: &ListedItem,
        ledgers: &mut Ledgers,
        report: &mut CycleReport,
    ) {
        let item = &listed.item;
        let thread = match self.thread(listed, walk.sweep).await {
            Ok(thread) => thread,
            Err(error) => return self.item_error(item, &error, report),
        };
        if let Err(err) = self.walk_item(walk, listed, &thread, ledgers, report).await {
            self.item_error(item, &err.to_string(), report);
        }
    }

    fn item_error(&self, item: &WorkItemRef, error: &str, report: &mut CycleReport) {
        report.errors.push(format!("{item}: {error}"));
        self.store.events().emit(
            Line::error(Kind::PollItemError)
                .work_item(item)
                .field("error", error)
                .field("will_retry", true),
        );
    }

    async fn walk_item(
        &mut self,
        walk: &Walk<'_>,
        listed: &ListedItem,
        thread: &[ThreadComment],
        ledgers: &mut Ledgers,
        report: &mut CycleReport,
    ) -> Result<(), StoreError> {
        let item = &listed.item;
        let config = walk.config;
        let authorized = &config.routing.authorized_users;
        let refs = self.refs(listed);
        let linked = self.linked(item);
        let owner = match listed.kind {
            ItemKind::Issue => item.clone(),
            ItemKind::PullRequest => poll::ledger_owner(
                item,
                walk.facts.binding.get(item).filter(|owner| *owner != item),
                walk.facts.nested.get(item),
            ),
        };
        let own = owner == *item;
        let control = self.control_facts(&refs)?;
        let item_author = actor(&listed.author);
        let item_authorized = poll::is_authorized(&item_author, authorized);
        let spawn_authorized = poll::spawn_authorized(item_authorized, control.last);
        let has_session = refs.iter().any(|r| walk.facts.live.contains(r));
        if !spawn_authorized
            && !has_session
            && let Some(name) = item_author.name()
        {
            self.store
                .events()
                .emit_async(
                    Line::warning(Kind::PollUnauthorized).work_item(item).field("actor", name),
                )
                .await;
        }

        let actors: Vec<Actor> = thread.iter().map(|c| actor(&c.author)).collect();
        let live: Vec<CommentId> = thread.iter().map(comment_id).collect();
        let entries: Vec<ThreadEntry<'_>> = thread
            .iter()
            .zip(&actors)
            .zip(&live)
            .map(|((c, author), id)| ThreadEntry {
                id,
                author,
                body: &c.body,
                created_at: c.created_at.parse().ok(),
            })
            .collect();

        let mut ledger = ledgers.ledger(&owner)?.cloned().unwrap_or_default();
        let first_sight = if own {
            known_thread(ledgers, item)?.is_none()
        } else if ledger.pull_requests.contains_key(item) {
            false
        } else if let Some(comments) = known_thread(ledgers, item)? {
            // A pull request polled on its own before it came to serve a work item: what
            // its own record had seen moves under the owner (that record is read, never
            // deleted), so nothing posted meanwhile is baselined away.
            ledger.pull_requests.insert(item.clone(), comments);
            false
        } else {
            true
        };
        let mut notices = Vec::new();
        let vocabulary = Vocabulary::from(&config.routing.control);

        let pending = if first_sight {
            let mut pending =
                poll::pending_control(&entries, control.has_record, authorized, &vocabulary);
            if has_session {
                for id in self.since_first_known(listed, thread, &refs).await {
                    if !pending.contains(&id) {
                        pending.push(id);
                    }
                }
            }
            poll::baseline(poll::comment_ledger_mut(&owner, &mut ledger, item), &live, &pending);
            pending
        } else {
            self.rearm_once(item, poll::comment_ledger_mut(&owner, &mut ledger, item));
            Vec::new()
        };

        if first_sight && pending.is_empty() {
            if own && spawn_authorized && !has_session {
                let spawn = ledger.spawn.get_or_insert_with(SpawnLedger::default);
                self.try_spawn(walk, listed, &linked, &control, spawn, report).await;
            }
        } else {
            let roster = &control.collaborators;
            let allowed = |author: &Actor| {
                poll::is_authorized(author, authorized)
                    || author.login().is_some_and(|login| is_collaborator(login, roster))
            };
            let comments = poll::comment_ledger_mut(&owner, &mut ledger, item);
            let sorted = poll::sort_thread(comments, &entries, allowed);
            for id in &sorted.silenced {
                poll::resolve(comments, id);
            }
            let genuinely_new = poll::genuinely_new(comments, &sorted.candidates);
            if own {
                let spawn = ledger.spawn.get_or_insert_with(SpawnLedger::default);
                if spawn_authorized && !has_session {
                    if genuinely_new {
                        *spawn = SpawnLedger::default();
                    }
                    if poll::spawn_armed(spawn, genuinely_new) {
                        self.try_spawn(walk, listed, &linked, &control, spawn, report).await;
                    }
                } else if has_session {
                    *spawn = SpawnLedger::default();
                }
            }
            for id in sorted.candidates {
                let Some(comment) = thread.iter().find(|c| comment_id(c) == id) else { continue };
                let comments = poll::comment_ledger_mut(&owner, &mut ledger, item);
                let step = self.forward(walk, listed, &owner, comment, comments, report).await;
                if let Some(notice) = step {
                    notices.push(notice);
                }
            }
        }

        poll::finalize(poll::comment_ledger_mut(&owner, &mut ledger, item), &entries);
        if own {
            ledger.title = Some(listed.title.clone());
            if ledger.spawn.as_ref().is_some_and(|s| *s == SpawnLedger::default()) {
                ledger.spawn = None;
            }
        }
        ledgers.put(&owner, ledger)?;
        ledgers.flush(&owner)?;
        ledgers.polled(item, walk.now);
        if walk.facts.has_section(item, "ended") {
            // Listed again: the item is open again (seed 002).
            self.store.write_section::<loop_core::record::Ended>(item, None)?;
        }
        for notice in notices {
            self.post_notice(item, notice).await;
        }
        Ok(())
    }

    /// Re-arms comments another version gave up on, once per process per item.
    fn rearm_once(&mut self, item: &WorkItemRef, comments: &mut CommentLedger) {
        if !self.memory.rearm_checked.insert(item.clone()) {
            return;
        }
        let rearmed = poll::rearm(comments, &self.version);
        if !rearmed.is_empty() {
            self.store.events().emit(
                Line::info(Kind::PollRearmed)
                    .work_item(item)
                    .field("comments", &rearmed)
                    .field("version", &self.version),
            );
        }
    }

    /// The control record, last command and collaborator roster of an item's refs.
    fn control_facts(&self, refs: &[WorkItemRef]) -> Result<ControlFacts, StoreError> {
        let mut facts = ControlFacts::default();
        for item in refs {
            if let Some(control) = self.store.read_section::<Control>(item)?.into_value() {
                facts.has_record = true;
                facts.last.get_or_insert(control.command);
            }
            if let Some(roster) = self.store.read_section::<Collaborators>(item)?.into_value() {
                facts.collaborators.extend(roster.users.into_iter().map(|c| c.login));
            }
        }
        Ok(facts)
    }

    /// The presence `spawn` last emitted is settled: nothing of it is left to release.
    fn forget_attempt(&mut self, spawn: &SpawnLedger) {
        if let Some(key) = &spawn.delivery_id {
            self.memory.attempted.remove(key);
        }
    }

    /// Offers, waits on, resets or gives up the presence (reference §2.5).
    async fn try_spawn(
        &mut self,
        walk: &Walk<'_>,
        listed: &ListedItem,
        linked: &[WorkItemRef],
        control: &ControlFacts,
        spawn: &mut SpawnLedger,
        report: &mut CycleReport,
    ) {
        let item = &listed.item;
        let refs = self.refs(listed);
        let awaiting_start =
            start_required(&walk.config.routing.control) && !is_armed(control.last);
        let last = match spawn.delivery_id.as_deref() {
            Some(key) => Some(self.dispatch.status(key, &refs).await),
            None => None,
        };
        match poll::spawn_step(
            spawn,
            awaiting_start,
            last.as_ref(),
            walk.config.polling.max_retries,
        ) {
            SpawnStep::Quiet => {
                tracing::debug!(work_item = %item, awaiting_start, "no presence offered");
            }
            SpawnStep::Wait => {}
            SpawnStep::Reset => {
                self.forget_attempt(spawn);
                *spawn = SpawnLedger::default();
            }
            SpawnStep::GiveUp { attempts } => {
                self.forget_attempt(spawn);
                spawn.gave_up = true;
                report.failures += 1;
                self.store
                    .events()
                    .emit_async(
                        Line::error(Kind::PollSpawnFailed)
                            .work_item(item)
                            .field("attempts", attempts)
                            .field("will_retry", false),
                    )
                    .await;
            }
            SpawnStep::Emit { attempt } => {
                let event = presence_event(listed, linked, walk.label);
                let key = event.dedup_key().map(|k| k.to_string()).unwrap_or_default();
                match self.dispatch.dispatch(event).await {
                    Dispatched::Settled(outcome) => {
                        tracing::debug!(work_item = %item, %outcome, "presence settled");
                        *spawn = SpawnLedger::default();
                    }
                    Dispatched::Enqueued | Dispatched::Failed(_) => {
                        *spawn = SpawnLedger {
                            attempts: attempt,
                            gave_up: false,
                            delivery_id: Some(key.clone()),
                        };
                        report.spawns += 1;
                        self.memory
                            .attempted
                            .insert(key, Attempted::Presence { owner: item.clone() });
                    }
                }
            }
        }
    }

    /// At first sight of an item whose session is already live (a webhook started it
    /// before this poller listed it), the comments from the first one the dispatcher
    /// knows on, in thread order: the session was there for them, so those the webhook
    /// did not bring (refused while the inbox was full, lost on the way) are forwarded
    /// rather than baselined away. Those it did bring are resolved by their status.
    async fn since_first_known(
        &self,
        listed: &ListedItem,
        thread: &[ThreadComment],
        refs: &[WorkItemRef],
    ) -> Vec<CommentId> {
        let linked = self.linked(&listed.item);
        for (at, comment) in thread.iter().enumerate() {
            let event = comment_event(listed, &linked, comment);
            let key = event.dedup_key().map(|k| k.to_string()).unwrap_or_default();
            if self.dispatch.status(&key, refs).await != poll::DeliveryStatus::Unhandled {
                return thread[at..].iter().map(comment_id).collect();
            }
        }
        Vec::new()
    }

    /// One candidate comment (reference §2.4). Returns the notice to post when it was
    /// given up.
    async fn forward(
        &mut self,
        walk: &Walk<'_>,
        listed: &ListedItem,
        owner: &WorkItemRef,
        comment: &ThreadComment,
        comments: &mut CommentLedger,
        report: &mut CycleReport,
    ) -> Option<Notice> {
        let item = &listed.item;
        let refs = self.refs(listed);
        let event = comment_event(listed, &self.linked(item), comment);
        let key = event.dedup_key().map(|k| k.to_string()).unwrap_or_default();
        let author = comment.author.as_str();
        let id = comment_id(comment);
        let attempts = comments.comment_attempts.get(&id).copied().unwrap_or(0);
        let status = self.dispatch.status(&key, &refs).await;
        match poll::comment_step(&status, attempts, walk.config.polling.max_retries) {
            CommentStep::Resolve => {
                poll::resolve(comments, &id);
                self.memory.attempted.remove(&key);
            }
            CommentStep::Settle(outcome) => {
                poll::resolve(comments, &id);
                self.memory.attempted.remove(&key);
                self.settled(item, comment, &outcome);
            }
            CommentStep::Wait => {}
            CommentStep::GiveUp { attempts } => {
                self.memory.attempted.remove(&key);
                self.store
                    .events()
                    .emit_async(
                        Line::error(Kind::PollCommentFailed)
                            .work_item(item)
                            .field("comment_id", comment.id)
                            .field("actor", author)
                            .field("attempts", attempts)
                            .field("will_retry", false),
                    )
                    .await;
                poll::give_up(comments, &id, &self.version);
                report.failures += 1;
                return Some(Notice { id: comment.id, url: comment.html_url.clone(), attempts });
            }
            CommentStep::Forward { attempt } => match self.dispatch.dispatch(event).await {
                Dispatched::Settled(outcome) => {
                    poll::resolve(comments, &id);
                    self.settled(item, comment, &outcome);
                }
                Dispatched::Enqueued => {
                    poll::record_attempt(comments, &id);
                    self.memory.attempted.insert(
                        key,
                        Attempted::Comment { owner: owner.clone(), item: item.clone(), id },
                    );
                    report.comments_forwarded += 1;
                    self.store
                        .events()
                        .emit_async(
                            Line::info(Kind::PollCommentForwarded)
                                .work_item(item)
                                .field("comment_id", comment.id)
                                .field("actor", author)
                                .field("attempt", attempt),
                        )
                        .await;
                }
                Dispatched::Failed(reason) => {
                    poll::record_attempt(comments, &id);
                    tracing::warn!(work_item = %item, comment_id = comment.id, %reason, attempt, "dispatch failed; retried next cycle");
                }
            },
        }
        None
    }

    fn settled(&self, item: &WorkItemRef, comment: &ThreadComment, outcome: &str) {
        self.store.events().emit(
            Line::info(Kind::PollCommentSettled)
                .work_item(item)
                .field("comment_id", comment.id)
                .field("actor", comment.author.as_str())
                .field("outcome", outcome)
                .field("will_retry", false),
        );
    }

    /// Posts the give-up notice on the polled item; a failure is reported, never fatal,
    /// and never un-records the give-up (already on disk).
    async fn post_notice(&self, item: &WorkItemRef, notice: Notice) {
        let body = give_up_notice(item, notice.id, Some(&notice.url), notice.attempts);
        let answer = match self.github.for_repo(item.repo()) {
            Some(client) => client.post_comment(item, &body).await.map_err(|e| e.to_string()),
            None => {
                Err(format!("no GitHub client is configured for host `{}`", item.repo().host()))
            }
        };
        match answer {
            Ok(_) => {
                self.store
                    .events()
                    .emit_async(
                        Line::info(Kind::PollGiveupReported)
                            .work_item(item)
                            .field("comment_id", notice.id)
                            .field("attempts", notice.attempts),
                    )
                    .await
            }
            Err(error) => {
                self.store
                    .events()
                    .emit_async(
                        Line::warning(Kind::PollGiveupReportFailed)
                            .work_item(item)
                            .field("comment_id", notice.id)
                            .field("error", error),
                    )
                    .await
            }
        }
    }
}

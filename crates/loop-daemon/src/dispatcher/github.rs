//! What the dispatcher asks of and says to GitHub: whether a branch-named work item
//! exists (cached per ref), the lifecycle reactions on the triggering comment or item,
//! and the announcement of a new session. All best-effort: a failure here is logged and
//! never changes a dispatch's outcome; a missing client makes each a no-op.

use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use loop_core::WorkItemRef;
use loop_core::config::Reaction as ConfiguredReaction;
use loop_core::event::{Event, Surface};
use loop_core::guards::{is_self_authored, mark_self_authored};
use loop_core::log::{Kind, Line};
use loop_core::plan::Context;
use loop_core::route::{Existence, ExistenceCache, KnownExistence};
use loop_github::{Reaction, ReactionTarget};
use loop_sessions::registry::OwedAnnouncement;
use tokio::sync::oneshot;

use super::queue::Busy;
use super::{Dispatcher, blocking};

/// How many existence answers the dispatcher keeps (issue #16: bounded, LRU).
pub(crate) const EXISTENCE_CACHE_CAPACITY: usize = 10_000;

/// How far GitHub's clock may be behind ours when telling whether an announcement found
/// on the work item was posted for the session owed one.
const CLOCK_SKEW: SignedDuration = SignedDuration::from_secs(60);

/// The most reaction tasks in flight at once. Each is one or two requests sharing the
/// client's few connections with the poller, and a burst of deliveries faster than GitHub
/// takes mutations would otherwise pile them up in memory without bound (the soak: 6 000
/// tasks, 20 MB in two minutes). Reactions are feedback for the people on the thread, so
/// past the cap a delivery goes without them.
const REACTIONS_IN_FLIGHT: usize = 64;

/// How long one reaction may take, retries and waits included: a reaction is feedback
/// of the moment, and one waiting out a rate limit would hold its slot for up to an hour.
const REACTION_PATIENCE: Duration = Duration::from_secs(60);

/// The reaction tasks in flight, and whether the cap turned some away since the count was
/// last below half of it (so `reaction.shed` is said once per burst).
#[derive(Debug, Default)]
pub(crate) struct Reactions {
    in_flight: AtomicUsize,
    shedding: AtomicBool,
}

/// One reaction task's place under [`REACTIONS_IN_FLIGHT`], given back when it ends.
#[derive(Debug)]
struct ReactionSlot(Dispatcher);

impl Drop for ReactionSlot {
    fn drop(&mut self) {
        self.0.inner.reactions.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Dispatcher {
    /// The existence answers for `items`, asking GitHub about those not yet known.
    /// Definite answers are cached (at most [`EXISTENCE_CACHE_CAPACITY`], least recently
    /// used forgotten first); anything else stays unknown (and keeps the ref).
    pub(crate) async fn existence_now(&self, items: &[WorkItemRef]) -> KnownExistence {
        let mut known = KnownExistence::default();
        for item in items {
            let mut answer = self.cache().get(item);
            if answer == Existence::Unknown
                && let Some(github) = &self.inner.github
            {
                answer = match github.item_exists(item).await {
                    Ok(true) => Existence::Exists,
                    Ok(false) => Existence::Missing,
                    Err(_) => continue,
                };
                self.remember_existence(item, answer);
            }
            known.remember(item.clone(), answer);
        }
        known
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, ExistenceCache> {
        self.inner.existence.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn remember_existence(&self, item: &WorkItemRef, answer: Existence) {
        self.cache().remember(item.clone(), answer);
    }

    /// Starts the lifecycle reactions for a dequeued job: `started` now, then `completed`
    /// or `error` once the returned sender says whether the dispatch succeeded. `None`
    /// when reactions are off or the event has nothing to react on.
    pub(crate) fn react(&self, event: &Event, cx: &Context) -> Option<oneshot::Sender<bool>> {
        let config = self.config();
        let reactions = &config.routing.reactions;
        let github = self.inner.github.clone()?;
        if !reactions.enabled {
            return None;
        }
        let target = reaction_target(event)?;
        let slot = self.reaction_slot(cx, github.reaction_in_reserve(&target))?;
        let kind = target_kind(event, &target);
        let (started, completed, error) = (reactions.started, reactions.completed, reactions.error);
        let (outcome_tx, outcome) = oneshot::channel();
        let dispatcher = self.clone();
        let busy = Busy::new(self);
        let item = cx.work_items.first().cloned();
        let cx = cx.clone();
        tokio::spawn(async move {
            let react = |state: &'static str, reaction: Option<ConfiguredReaction>| {
                let (github, target, dispatcher, item, cx) =
                    (github.clone(), target.clone(), dispatcher.clone(), item.clone(), cx.clone());
                async move {
                    let Some(reaction) = reaction.map(to_github) else { return };
                    let added = github.add_reaction(&target, reaction);
                    let line = match tokio::time::timeout(REACTION_PATIENCE, added).await {
                        Ok(Ok(())) => Line::debug(Kind::ReactionAdded).field("target", kind),
                        Ok(Err(err)) => {
                            Line::warning(Kind::ReactionFailed).field("error", err.to_string())
                        }
                        Err(_elapsed) => Line::warning(Kind::ReactionFailed).field(
                            "error",
                            format!("no answer within {} s", REACTION_PATIENCE.as_secs()),
                        ),
                    };
                    let line =
                        cx.stamp(line.field("state", state).field("content", reaction.as_str()));
                    let line = match &item {
                        Some(item) => line.work_item(item),
                        None => line,
                    };
                    dispatcher.events().emit_async(line).await;
                }
            };
            react("started", started).await;
            if let Ok(succeeded) = outcome.await {
                if succeeded {
                    react("completed", completed).await;
                } else {
                    react("error", error).await;
                }
            }
            drop((slot, busy));
        });
        Some(outcome_tx)
    }

    /// A place for one more reaction task, or `None` at [`REACTIONS_IN_FLIGHT`] or while
    /// the rate limit is `in_reserve` (then `reaction.shed` is logged, once until a slot
    /// is taken with the tasks in flight below half the cap).
    fn reaction_slot(&self, cx: &Context, in_reserve: bool) -> Option<ReactionSlot> {
        let reactions = &self.inner.reactions;
        let taken = reactions.in_flight.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < REACTIONS_IN_FLIGHT && !in_reserve).then_some(n + 1)
        });
        match taken {
            Ok(before) => {
                if before < REACTIONS_IN_FLIGHT / 2 {
                    reactions.shedding.store(false, Ordering::Release);
                }
                Some(ReactionSlot(self.clone()))
            }
            Err(_) => {
                if !reactions.shedding.swap(true, Ordering::AcqRel) {
                    let reason = if in_reserve { "rate-limit-reserve" } else { "in-flight" };
                    let line = cx.stamp(
                        Line::warning(Kind::ReactionShed)
                            .field("reason", reason)
                            .field("in_flight", REACTIONS_IN_FLIGHT),
                    );
                    let events = self.events().clone();
                    tokio::spawn(async move { events.emit_async(line).await });
                }
                None
            }
        }
    }

    /// Posts the self-marked announcement of a new session on `item` (first spawn only)
    /// and settles the announcement the spawn owed
    /// ([`Registry::owe_announcement`](loop_sessions::registry::Registry::owe_announcement)).
    pub(crate) async fn announce(&self, item: &WorkItemRef, harness: &str, tmux_target: &str) {
        self.post_announcement(item, harness, tmux_target, false).await;
        self.settle_announcement(item, tmux_target).await;
    }

    /// Announces the sessions a previous process spawned and was stopped (`kill -9`)
    /// before announcing: each owed announcement whose session is still in its record
    /// is posted unless the work item already shows it (the process died after posting),
    /// then settled. Run once when the service starts.
    pub async fn announce_owed(&self) {
        let registry = self.inner.registry.clone();
        let owed = match blocking(move || registry.owed_announcements()).await {
            Ok(owed) => owed,
            Err(err) => {
                tracing::warn!("cannot read the announcements owed by a previous process: {err}");
                return;
            }
        };
        for owed in owed {
            if self.still_spawned(&owed).await && !self.already_announced(&owed).await {
                self.post_announcement(&owed.work_item, &owed.harness, &owed.tmux_target, true)
                    .await;
            }
            self.settle_announcement(&owed.work_item, &owed.tmux_target).await;
        }
    }

    /// Whether the owed announcement's session is the live one its record holds (a kill
    /// before the record was written leaves nothing to announce).
    async fn still_spawned(&self, owed: &OwedAnnouncement) -> bool {
        let (registry, owner) = (self.inner.registry.clone(), owed.owner.clone());
        let Ok(Some(record)) = blocking(move || registry.load(&owner)).await else { return false };
        record
            .endpoints
            .get(&owed.work_item)
            .is_some_and(|endpoint| endpoint.is_live() && endpoint.tmux_target == owed.tmux_target)
    }

    /// Whether a self-marked announcement of the owed session's tmux target was posted on
    /// its work item since the debt was recorded. When GitHub cannot say, `false`: a
    /// second announcement is better than none.
    async fn already_announced(&self, owed: &OwedAnnouncement) -> bool {
        let Some(github) = &self.inner.github else { return false };
        let Ok(comments) = github.conversation_comments(&owed.work_item).await else {
            return false;
        };
        let row = target_row(&owed.tmux_target);
        let since = owed.owed_at - CLOCK_SKEW;
        comments.iter().any(|comment| {
            is_self_authored(&comment.body)
                && comment.body.contains(&row)
                && comment.created_at.parse::<Timestamp>().is_ok_and(|at| at >= since)
        })
    }

    async fn settle_announcement(&self, item: &WorkItemRef, tmux_target: &str) {
        let (registry, target) = (self.inner.registry.clone(), tmux_target.to_owned());
        if let Err(err) = blocking(move || registry.settle_announcement(&target)).await {
            self.events().emit_async(super::job::marker_left(item, &err)).await;
        }
    }

    /// Tells each work item, once per episode, what its agent waits on
    /// ([`loop_core::agent_state::notice`]): a permission prompt (with its command and
    /// how to answer), a usage limit, a stall or an exit; and starts waiting out each
    /// limit, once. Runs until `changes` ends. A restart may tell an episode open across
    /// it once more. What it remembers is of the agents watched now, so it does not grow
    /// with every session ever run.
    pub async fn tell_agent_states(
        &self,
        mut changes: tokio::sync::mpsc::UnboundedReceiver<crate::agent_state::Change>,
    ) {
        use loop_core::agent_state::AgentState;
        let mut told: std::collections::HashMap<String, Told> = Default::default();
        while let Some(change) = changes.recv().await {
            told.retain(|target, _| self.agents().seen(target).is_some());
            let agent = told.entry(change.target.clone()).or_default();
            if matches!(change.tracked.state, AgentState::Limited { .. }) {
                let limit = crate::agent_state::limit_key(&change.tracked);
                if agent.waiting != Some(limit) {
                    agent.waiting = Some(limit);
                    let (dispatcher, change) = (self.clone(), change.clone());
                    tokio::spawn(async move { dispatcher.wait_out_limit(change).await });
                }
            }
            let keywords = self.config().routing.control.keywords.clone();
            let notice = loop_core::agent_state::notice(&change.before, &change.tracked, &keywords);
            let Some((key, body)) = notice else { continue };
            if !agent.first_time(key) {
                continue;
            }
            let Some(github) = &self.inner.github else { continue };
            let line = match github.post_comment(&change.item, &mark_self_authored(&body)).await {
                Ok(posted) => {
                    Line::info(Kind::SessionAgentNotice).field("comment_url", posted.html_url)
                }
                Err(err) => {
                    Line::warning(Kind::SessionAgentNoticeFailed).field("error", err.to_string())
                }
            };
            let line = line.work_item(&change.item).field("state", change.tracked.state.name());
            self.events().emit_async(line).await;
        }
    }

    /// Posts the announcement and logs what came of it; `recovered` when a previous
    /// process owed it.
    async fn post_announcement(
        &self,
        item: &WorkItemRef,
        harness: &str,
        tmux_target: &str,
        recovered: bool,
    ) {
        let config = self.config();
        if !config.routing.announce.enabled || tmux_target.is_empty() {
            return;
        }
        let Some(github) = &self.inner.github else { return };
        let body = announcement(item, harness, tmux_target, config.instance.name.as_deref());
        let line = match github.post_comment(item, &body).await {
            Ok(posted) => Line::info(Kind::SessionAnnounced)
                .field("comment_url", posted.html_url)
                .field("recovered", recovered.then_some(true)),
            Err(err) if err.is_not_found() => {
                self.remember_existence(item, Existence::Missing);
                Line::error(Kind::SessionWorkItemMissing).field(
                    "error",
                    format!(
                        "{err}; GitHub says the work item does not exist for this token — check that the token can see the repository; the session keeps running"
                    ),
                )
            }
            Err(err) => Line::warning(Kind::SessionAnnounceFailed).field("error", err.to_string()),
        };
        self.events().emit_async(line.work_item(item).field("tmux_target", tmux_target)).await;
    }
}

/// The announcement, built only from registry fields (never payload text), self-marked.
pub fn announcement(
    item: &WorkItemRef,
    harness: &str,
    tmux_target: &str,
    instance: Option<&str>,
) -> String {
    let mut body = format!(
        "🖥️ **the-loop** started an interactive session for `{item}`.\n\n| | |\n|---|---|\n{}\n| harness | `{harness}` |\n",
        target_row(tmux_target)
    );
    if let Some(instance) = instance {
        body.push_str(&format!("| instance | `{instance}` |\n"));
    }
    body.push_str(&format!(
        "\n```sh\ntmux attach -t {tmux_target}\nthe-loop sessions attach --work-item {item} --read-only\n```\n\nThe session is kept when the work item closes; a respawn reuses the same name.\n"
    ));
    mark_self_authored(&body)
}

/// The announcement's row naming the session's tmux target.
fn target_row(tmux_target: &str) -> String {
    format!("| tmux session | `{tmux_target}` |")
}

/// What a reaction goes on (reference §7, by node id first): the comment, review or
/// inline comment by its GraphQL node id — both ingresses carry one, and it is the only
/// address a review has (REST has no reactions endpoint for reviews). REST is the
/// fallback only when no node id is there: a conversation or inline comment by its
/// numeric id, else the issue or pull request itself (the event carries no node id for
/// the item; a review without one reacts on its PR). A comment id that is neither
/// numeric nor node-id-shaped gets no reaction at all.
pub fn reaction_target(event: &Event) -> Option<ReactionTarget> {
    let repo = event.repository.clone()?;
    if let Some(comment) = &event.comment {
        if let Some(node) = comment.node_id.as_deref().filter(|node| is_node_id(node)) {
            return Some(ReactionTarget::Node(node.to_owned()));
        }
        if let Some(id) = &comment.id {
            match (id.parse::<u64>(), comment.surface) {
                (Ok(_), Surface::Review) => {}
                (Ok(id), Surface::Inline) => {
                    return Some(ReactionTarget::ReviewComment { repo, id });
                }
                (Ok(id), Surface::Conversation) => {
                    return Some(ReactionTarget::IssueComment { repo, id });
                }
                // The poll path's ids are node ids.
                (Err(_), _) if is_node_id(id) => return Some(ReactionTarget::Node(id.clone())),
                (Err(_), _) => return None,
            }
        }
    }
    let number = event.entity.as_ref()?.number?;
    Some(ReactionTarget::Item(repo.item(number)))
}

/// GitHub's node-id alphabet (reference §7: `^[A-Za-z0-9_=+/-]+$`).
fn is_node_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"_=+/-".contains(&b))
}

/// The `target` field of `reaction.added`: what was reacted on.
fn target_kind(event: &Event, target: &ReactionTarget) -> &'static str {
    match (target, event.comment.as_ref().map(|c| c.surface)) {
        (ReactionTarget::Item(_), _) => {
            if event.pull_request().is_some() {
                "pull-request"
            } else {
                "issue"
            }
        }
        (_, Some(Surface::Review)) => "review",
        _ => "comment",
    }
}

fn to_github(reaction: ConfiguredReaction) -> Reaction {
    match reaction {
        ConfiguredReaction::PlusOne => Reaction::ThumbsUp,
        ConfiguredReaction::MinusOne => Reaction::ThumbsDown,
        ConfiguredReaction::Laugh => Reaction::Laugh,
        ConfiguredReaction::Confused => Reaction::Confused,
        ConfiguredReaction::Heart => Reaction::Heart,
        ConfiguredReaction::Hooray => Reaction::Hooray,
        ConfiguredReaction::Rocket => Reaction::Rocket,
        ConfiguredReaction::Eyes => Reaction::Eyes,
    }
}

/// What the teller remembers of one watched agent.
#[derive(Debug, Default)]
struct Told {
    /// The latest episodes told ([`loop_core::agent_state::notice`]'s keys), newest last.
    keys: std::collections::VecDeque<String>,
    /// The limit being waited out ([`crate::agent_state::limit_key`]).
    waiting: Option<jiff::Timestamp>,
}

impl Told {
    /// How many episodes are remembered: enough for an agent going back and forth
    /// between a few at once.
    const KEPT: usize = 8;

    /// Whether `key` is an episode not told yet; remembers it.
    fn first_time(&mut self, key: String) -> bool {
        if self.keys.contains(&key) {
            return false;
        }
        if self.keys.len() == Self::KEPT {
            self.keys.pop_front();
        }
        self.keys.push_back(key);
        true
    }
}

#[cfg(test)]
mod tests {
    use loop_core::guards::is_self_authored;
    use serde_json::json;

    use super::*;

    #[test]
    fn an_episode_is_told_once_and_only_the_latest_are_remembered() {
        let mut told = Told::default();
        assert!(told.first_time("permission:r1".into()));
        assert!(!told.first_time("permission:r1".into()), "told once");
        for n in 0..Told::KEPT {
            assert!(told.first_time(format!("stalled:{n}")));
        }
        assert_eq!(told.keys.len(), Told::KEPT, "bounded");
        assert!(told.first_time("permission:r1".into()), "long forgotten");
    }

    #[test]
    fn the_announcement_names_the_attach_command_and_is_self_marked() {
        let item: WorkItemRef = "github:octo/app#15".parse().expect("a valid ref");
        let body = announcement(&item, "claude", "loop-github-octo-app-15", Some("laptop"));
        assert!(body.contains("tmux attach -t loop-github-octo-app-15"));
        assert!(body.contains("| instance | `laptop` |"));
        assert!(is_self_authored(&body));
    }

    #[test]
    fn a_node_id_is_the_target_and_rest_only_the_fallback() {
        let review = Event::from_webhook(
            "pull_request_review",
            &json!({"action": "submitted", "repository": {"full_name": "o/a"},
                    "pull_request": {"number": 7},
                    "review": {"id": 9, "node_id": "PRR_kw9", "body": "x"}}),
        );
        assert_eq!(reaction_target(&review), Some(ReactionTarget::Node("PRR_kw9".into())));
        let comment = Event::from_webhook(
            "issue_comment",
            &json!({"action": "created", "repository": {"full_name": "o/a"},
                    "issue": {"number": 7}, "comment": {"id": 5, "body": "x"}}),
        );
        let repo = comment.repository.clone().expect("a repository");
        assert_eq!(reaction_target(&comment), Some(ReactionTarget::IssueComment { repo, id: 5 }));
        let hostile_node = Event::from_webhook(
            "issue_comment",
            &json!({"action": "created", "repository": {"full_name": "o/a"},
                    "issue": {"number": 7},
                    "comment": {"id": 5, "node_id": "IC_$(rm)", "body": "x"}}),
        );
        let repo = hostile_node.repository.clone().expect("a repository");
        assert_eq!(
            reaction_target(&hostile_node),
            Some(ReactionTarget::IssueComment { repo, id: 5 }),
            "a node id outside GitHub's alphabet is not used; the numeric id is"
        );
    }

    #[test]
    fn a_review_without_a_node_id_reacts_on_its_pull_request_and_a_hostile_comment_id_gets_nothing()
    {
        let review = Event::from_webhook(
            "pull_request_review",
            &json!({"action": "submitted", "repository": {"full_name": "o/a"},
                    "pull_request": {"number": 7}, "review": {"id": 9, "body": "x"}}),
        );
        assert_eq!(
            reaction_target(&review),
            Some(ReactionTarget::Item("github:o/a#7".parse().expect("ref")))
        );
        let hostile = Event::from_webhook(
            "issue_comment",
            &json!({"action": "created", "repository": {"full_name": "o/a"},
                    "issue": {"number": 7}, "comment": {"id": "abc$;rm -rf", "body": "x"}}),
        );
        assert_eq!(reaction_target(&hostile), None);
    }
}

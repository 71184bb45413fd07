//! Routing: which work items an event is about.
//!
//! [`route`] turns an [`Event`] into ordered refs (reference §2.3): for an event on a
//! pull request, the issues it is linked to first (closingIssuesReferences, the
//! `issue-<n>` head branch, closing keywords) and then the PR itself; for an issue, the
//! issue; for a CI result, its pull requests and then the issues its branches name. A ref
//! reached through several sources keeps its first position and collects every source.
//!
//! A ref that rests on the branch convention alone may name an issue nobody created, so
//! it is checked before anything acts on it (seed 002, issue-269). That check needs
//! GitHub; this module only says which refs need it ([`Routed::to_check`]) and applies
//! the answers ([`Routed::verify`]) through the [`IssueExistence`] seam. It never asks
//! anything itself and caches nothing.

use std::collections::{BTreeMap, HashMap};

use crate::event::{Event, EventKind};
use crate::linkage;
use crate::refs::WorkItemRef;

/// How a ref was derived from an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkSource {
    /// GitHub's `closingIssuesReferences` (the Development panel).
    ClosingReference,
    /// The `issue-<n>` branch convention (a PR's head branch, a CI run's branches).
    Branch,
    /// A closing keyword in the PR description.
    Keyword,
    /// The issue or pull request the event is about.
    Entity,
    /// A pull request a CI run names.
    CiPullRequest,
}

impl LinkSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClosingReference => "closing-reference",
            Self::Branch => "branch",
            Self::Keyword => "keyword",
            Self::Entity => "entity",
            Self::CiPullRequest => "ci-pull-request",
        }
    }
}

/// One work item an event routes to, with every source that named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutedRef {
    pub item: WorkItemRef,
    pub sources: Vec<LinkSource>,
}

impl RoutedRef {
    /// Only the branch convention named it: it may not exist.
    pub fn is_branch_only(&self) -> bool {
        self.sources == [LinkSource::Branch]
    }
}

/// The refs of one event, in routing order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routed {
    pub refs: Vec<RoutedRef>,
}

impl Routed {
    fn add(&mut self, item: WorkItemRef, source: LinkSource) {
        match self.refs.iter_mut().find(|r| r.item == item) {
            Some(existing) if !existing.sources.contains(&source) => existing.sources.push(source),
            Some(_) => {}
            None => self.refs.push(RoutedRef { item, sources: vec![source] }),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }

    /// The refs alone, in order.
    pub fn items(&self) -> impl Iterator<Item = &WorkItemRef> {
        self.refs.iter().map(|r| &r.item)
    }

    /// The refs whose existence must be asked before anything acts on them: the
    /// branch-only ones, and none at all when a live record already owns one of the
    /// event's refs (the record answers before GitHub is asked).
    pub fn to_check(&self, owned_by_live_record: bool) -> Vec<&WorkItemRef> {
        if owned_by_live_record {
            return Vec::new();
        }
        self.refs.iter().filter(|r| r.is_branch_only()).map(|r| &r.item).collect()
    }

    /// Drops the branch-only refs GitHub definitely says do not exist; every other
    /// answer keeps the ref. Nothing is asked when a live record owns one of the refs.
    pub fn verify(self, owned_by_live_record: bool, existence: &dyn IssueExistence) -> Verified {
        let mut verified = Verified::default();
        for routed in self.refs {
            let missing = !owned_by_live_record
                && routed.is_branch_only()
                && existence.existence(&routed.item) == Existence::Missing;
            if missing {
                verified.dropped.push(routed.item);
            } else {
                verified.kept.refs.push(routed);
            }
        }
        verified
    }
}

/// The refs that survived the existence check, and those it removed (one
/// `routing.linkage_dropped` line each).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verified {
    pub kept: Routed,
    pub dropped: Vec<WorkItemRef>,
}

impl Verified {
    /// Why the event goes nowhere, when it does: `work-item-not-found` when every ref
    /// was a ghost, `no-work-item` when it arrived with none.
    pub fn drop_reason(&self) -> Option<&'static str> {
        match (self.kept.is_empty(), self.dropped.is_empty()) {
            (false, _) => None,
            (true, false) => Some("work-item-not-found"),
            (true, true) => Some("no-work-item"),
        }
    }
}

/// What GitHub answered about a work item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existence {
    Exists,
    /// A definite 404.
    Missing,
    /// Anything else: 401, 403, 5xx, a timeout, no answer yet. Never evidence of absence.
    Unknown,
}

/// The seam to the GitHub client: whether a work item exists. Implementations answer
/// from what they already know (the daemon asks GitHub and caches definite answers
/// before calling [`Routed::verify`]); an item they know nothing about is `Unknown`.
pub trait IssueExistence {
    fn existence(&self, item: &WorkItemRef) -> Existence;
}

/// Answers held in memory: tests, and the daemon's cache of definite answers.
#[derive(Debug, Clone, Default)]
pub struct KnownExistence {
    answers: HashMap<WorkItemRef, Existence>,
}

impl KnownExistence {
    pub fn remember(&mut self, item: WorkItemRef, answer: Existence) {
        self.answers.insert(item, answer);
    }
}

impl IssueExistence for KnownExistence {
    fn existence(&self, item: &WorkItemRef) -> Existence {
        self.answers.get(item).copied().unwrap_or(Existence::Unknown)
    }
}

/// The daemon's cache of definite existence answers: at most `capacity`, the least
/// recently used forgotten first, so a stream of branch names (each asked about once)
/// cannot grow it without bound.
#[derive(Debug, Clone)]
pub struct ExistenceCache {
    capacity: usize,
    /// Bumped on every use; an answer's last use orders the eviction.
    tick: u64,
    answers: HashMap<WorkItemRef, (Existence, u64)>,
    /// Last use → ref, oldest first.
    uses: BTreeMap<u64, WorkItemRef>,
}

impl ExistenceCache {
    /// An empty cache holding at most `capacity` answers (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self { capacity, tick: 0, answers: HashMap::new(), uses: BTreeMap::new() }
    }

    /// The answer for `item` (`Unknown` when none is held), marking it used.
    pub fn get(&mut self, item: &WorkItemRef) -> Existence {
        let tick = self.next_tick();
        let Some((answer, used)) = self.answers.get_mut(item) else { return Existence::Unknown };
        self.uses.remove(used);
        *used = tick;
        self.uses.insert(tick, item.clone());
        *answer
    }

    /// Holds `answer` for `item`, forgetting the least recently used answer when full.
    pub fn remember(&mut self, item: WorkItemRef, answer: Existence) {
        let tick = self.next_tick();
        if let Some((_, used)) = self.answers.insert(item.clone(), (answer, tick)) {
            self.uses.remove(&used);
        }
        self.uses.insert(tick, item);
        while self.answers.len() > self.capacity {
            let Some((_, oldest)) = self.uses.pop_first() else { break };
            self.answers.remove(&oldest);
        }
    }

    pub fn len(&self) -> usize {
        self.answers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }
}

/// The work items an event is about, in order (reference §2.3, §2.4).
pub fn route(event: &Event) -> Routed {
    let mut routed = Routed::default();
    let Some(repo) = &event.repository else {
        return routed;
    };
    let entity_routes = matches!(event.kind, EventKind::Issues | EventKind::IssueComment)
        || event.kind.is_pull_request_event();
    if entity_routes && let Some(entity) = &event.entity {
        let own = entity.number.map(|n| repo.item(n));
        if entity.is_pull_request {
            let not_self = |item: &WorkItemRef| {
                own.as_ref().is_none_or(|own| {
                    !(own.repo().same_repository(item.repo()) && own.number() == item.number())
                })
            };
            for item in &entity.closing_issues {
                if not_self(item) {
                    routed.add(item.clone(), LinkSource::ClosingReference);
                }
            }
            if let Some(n) = entity.head_branch.as_deref().and_then(linkage::branch_issue_number) {
                let item = repo.item(n);
                if not_self(&item) {
                    routed.add(item, LinkSource::Branch);
                }
            }
            if let Some(body) = &entity.body {
                for item in linkage::closing_keyword_references(body, repo) {
                    if not_self(&item) {
                        routed.add(item, LinkSource::Keyword);
                    }
                }
            }
        }
        if let Some(own) = own {
            routed.add(own, LinkSource::Entity);
        }
    }
    if event.kind.is_ci() {
        for run in &event.runs {
            for n in &run.pull_requests {
                routed.add(repo.item(*n), LinkSource::CiPullRequest);
            }
            if let Some(n) = run.routing_branch.as_deref().and_then(linkage::branch_issue_number) {
                routed.add(repo.item(n), LinkSource::Branch);
            }
        }
        for n in event.branches.iter().filter_map(|b| linkage::branch_issue_number(b)) {
            routed.add(repo.item(n), LinkSource::Branch);
        }
    }
    routed
}

#[cfg(test)]
mod tests {
    /// Issue #16, item 7: the existence cache is bounded, least recently used out first.
    #[test]
    fn the_existence_cache_forgets_the_least_recently_used_answer_when_full() {
        use super::{Existence, ExistenceCache};
        let item = |n: u64| format!("github:octo/app#{n}").parse().expect("a ref");
        let mut cache = ExistenceCache::new(2);
        cache.remember(item(1), Existence::Exists);
        cache.remember(item(2), Existence::Missing);
        assert_eq!(cache.get(&item(1)), Existence::Exists, "1 is now the most recent");
        cache.remember(item(3), Existence::Exists);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&item(2)), Existence::Unknown, "2 was the least recently used");
        assert_eq!(cache.get(&item(1)), Existence::Exists);
        assert_eq!(cache.get(&item(3)), Existence::Exists);
        for n in 10..1000 {
            cache.remember(item(n), Existence::Missing);
        }
        assert_eq!(cache.len(), 2, "never more than its capacity");
    }

    use serde_json::{Value, json};

    use super::*;

    fn refs(name: &str, payload: Value) -> Vec<String> {
        route(&Event::from_webhook(name, &payload)).items().map(ToString::to_string).collect()
    }

    fn pr(number: u64, branch: &str, body: &str) -> Value {
        json!({
            "action": "opened",
            "repository": {"full_name": "octo/repo", "html_url": "https://github.com/octo/repo"},
            "pull_request": {"number": number, "head": {"ref": branch}, "body": body},
        })
    }

    #[test]
    fn a_prs_linked_issues_come_before_the_pr() {
        assert_eq!(
            refs("pull_request", pr(16, "claude/github-issue-15-x", "Closes #15")),
            ["github:octo/repo#15", "github:octo/repo#16"]
        );
        assert_eq!(
            refs("pull_request", pr(16, "main", "Closes other/repo#15")),
            ["github:other/repo#15", "github:octo/repo#16"]
        );
    }

    #[test]
    fn a_reference_to_the_pr_itself_adds_nothing() {
        assert_eq!(refs("pull_request", pr(16, "issue-16", "Closes #16")), ["github:octo/repo#16"]);
        assert_eq!(
            refs("pull_request", pr(16, "main", "Closes other/repo#16")),
            ["github:other/repo#16", "github:octo/repo#16"]
        );
    }

    #[test]
    fn closing_issue_references_come_first_then_the_pr() {
        let mut payload = pr(16, "main", "");
        payload["pull_request"]["closingIssuesReferences"] = json!([
            {"number": 15, "repository": {"nameWithOwner": "other/infra"}},
            {"number": 20, "repository": {"owner": {"login": "other"}, "name": "tools"}},
            {"number": 21, "url": "https://github.com/other/docs/issues/21"},
            {"number": 22},
        ]);
        assert_eq!(
            refs("pull_request", payload),
            [
                "github:other/infra#15",
                "github:other/tools#20",
                "github:other/docs#21",
                "github:octo/repo#22",
                "github:octo/repo#16",
            ]
        );
    }

    #[test]
    fn a_ref_named_twice_keeps_its_first_place_and_both_sources() {
        let routed = route(&Event::from_webhook("pull_request", &pr(16, "issue-15", "Fixes #15")));
        assert_eq!(routed.refs[0].sources, [LinkSource::Branch, LinkSource::Keyword]);
        assert!(!routed.refs[0].is_branch_only());
    }

    #[test]
    fn a_pr_conversation_comment_routes_to_the_linked_issue_then_the_pr() {
        let payload = json!({
            "repository": {"full_name": "octo/repo"},
            "issue": {"number": 16, "pull_request": {}, "body": "Closes #15"},
            "comment": {"body": "the-loop start"},
        });
        assert_eq!(refs("issue_comment", payload), ["github:octo/repo#15", "github:octo/repo#16"]);
    }

    #[test]
    fn ci_events_route_by_pull_requests_then_branches() {
        let check_run = json!({
            "repository": {"full_name": "octo/repo"},
            "check_run": {"head_branch": "issue-99", "check_suite": {
                "head_branch": "issue-7", "pull_requests": [{"number": 3}]}},
        });
        assert_eq!(refs("check_run", check_run), ["github:octo/repo#3", "github:octo/repo#7"]);
        let status = json!({
            "repository": {"full_name": "octo/repo"},
            "branches": [{"name": "main"}, {"name": "fix/issue-4"}],
        });
        assert_eq!(refs("status", status), ["github:octo/repo#4"]);
    }

    #[test]
    fn events_without_a_repository_or_of_other_kinds_route_nowhere() {
        assert!(refs("issues", json!({"issue": {"number": 1}})).is_empty());
        assert!(
            refs("push", json!({"repository": {"full_name": "o/r"}, "issue": {"number": 1}}))
                .is_empty()
        );
        assert!(
            refs(
                "issues",
                json!({"repository": {"full_name": "no-slash"}, "issue": {"number": 1}})
            )
            .is_empty()
        );
    }

    #[test]
    fn a_definite_404_drops_a_branch_only_ref_and_the_pr_remains() {
        let routed = route(&Event::from_webhook("pull_request", &pr(16, "issue-15", "")));
        let ghost: WorkItemRef = "github:octo/repo#15".parse().unwrap();
        assert_eq!(routed.to_check(false), [&ghost]);
        let mut answers = KnownExistence::default();
        answers.remember(ghost.clone(), Existence::Missing);
        let verified = routed.verify(false, &answers);
        assert_eq!(verified.dropped, [ghost]);
        assert_eq!(
            verified.kept.items().map(ToString::to_string).collect::<Vec<_>>(),
            ["github:octo/repo#16"]
        );
        assert_eq!(verified.drop_reason(), None);
    }

    #[test]
    fn an_existence_check_that_cannot_answer_keeps_the_ref() {
        let routed = route(&Event::from_webhook("pull_request", &pr(16, "issue-15", "")));
        let verified = routed.clone().verify(false, &KnownExistence::default());
        assert_eq!(verified.kept, routed);
    }

    #[test]
    fn a_live_record_means_the_existence_check_is_never_consulted() {
        struct Panics;
        impl IssueExistence for Panics {
            fn existence(&self, item: &WorkItemRef) -> Existence {
                panic!("asked about {item} although a live record owns the event");
            }
        }
        let routed = route(&Event::from_webhook("pull_request", &pr(16, "issue-15", "")));
        assert!(routed.to_check(true).is_empty());
        assert_eq!(routed.clone().verify(true, &Panics).kept, routed);
    }

    #[test]
    fn an_event_whose_every_ref_is_a_ghost_is_work_item_not_found() {
        let status =
            json!({"repository": {"full_name": "octo/repo"}, "branches": [{"name": "issue-4"}]});
        let routed = route(&Event::from_webhook("status", &status));
        let ghost: WorkItemRef = "github:octo/repo#4".parse().unwrap();
        let mut answers = KnownExistence::default();
        answers.remember(ghost, Existence::Missing);
        let verified = routed.verify(false, &answers);
        assert_eq!(verified.drop_reason(), Some("work-item-not-found"));
        assert_eq!(
            Routed::default().verify(false, &KnownExistence::default()).drop_reason(),
            Some("no-work-item")
        );
    }
}

//! The guards every routed event passes, whichever ingress brought it (SPEC §5):
//! the self-authored marker → the repository bound → `authorizedUsers` (closes and
//! actor-less events pass) → the work item's collaborators (input only) → instance scope.
//!
//! Each guard is a pure function returning a reasoned verdict; the refusal's
//! [`reason`](RoutingDrop::reason) is the `reason` field of its event-log line. The
//! command-level checks that follow (control parse, named-actor re-check, spawn policy)
//! live in [`crate::control`]. Nothing here reads a file or a roster: the caller passes
//! in the config values and the collaborator logins of the event's own refs.

use crate::config::{InstanceConfig, InstanceScope};
use crate::event::{Actor, Event, Surface};
use crate::login::Login;
use crate::refs::{RepoRef, WorkItemRef};
use crate::route::Routed;

/// The loop-prevention marker the-loop stamps on every comment it writes.
pub const SELF_AUTHORED_MARKER: &str = "<!-- the-loop:agent-comment -->";

/// The visible line that precedes the marker.
pub const ATTRIBUTION_LINE: &str = "🤖 _the-loop, autonomous comment_";

/// Whether a comment was written by the-loop (the exact marker, anywhere).
pub fn is_self_authored(body: &str) -> bool {
    body.contains(SELF_AUTHORED_MARKER)
}

/// Stamps text the-loop composed (announcements, CLI mirror comments, questions) so
/// neither ingress acts on it again: the body with trailing whitespace removed, a blank
/// line, the attribution line and the marker. Idempotent. Never apply it to payload text.
pub fn mark_self_authored(body: &str) -> String {
    if is_self_authored(body) {
        return body.to_owned();
    }
    format!("{}\n\n{ATTRIBUTION_LINE}\n{SELF_AUTHORED_MARKER}\n", body.trim_end())
}

/// Why the router drops an event (`routing.dropped`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoutingDrop {
    /// The comment carries the-loop's own marker.
    SelfAuthored,
    /// The event's repository, or every ref it names, is outside `repositories`.
    UndeclaredRepository { repository: RepoRef },
    /// The actor is neither authorized nor a collaborator of the event's work items.
    UnauthorizedActor { actor: Option<String> },
    /// A review with nothing to say: still pending (not submitted), or no body.
    EmptyReview,
}

impl RoutingDrop {
    pub fn reason(&self) -> &'static str {
        match self {
            Self::SelfAuthored => "self-authored",
            Self::UndeclaredRepository { .. } => "undeclared-repository",
            Self::UnauthorizedActor { .. } => "unauthorized-actor",
            Self::EmptyReview => "empty-review",
        }
    }
}

/// Drops the-loop's own comments, whoever posted them. Only the comment or review body
/// is checked; a description never is.
pub fn self_marker(event: &Event) -> Result<(), RoutingDrop> {
    match event.comment_body() {
        Some(body) if is_self_authored(body) => Err(RoutingDrop::SelfAuthored),
        _ => Ok(()),
    }
}

/// Drops a review that has nothing to deliver (seed 002: the same rule on every
/// surface and both ingresses): one still `PENDING` (its author has not submitted it), or
/// one whose body is empty — an approval without words, or the review that only carries
/// inline comments, each of which arrives as its own event.
pub fn review_content(event: &Event) -> Result<(), RoutingDrop> {
    let Some(review) = event.comment.as_ref().filter(|c| c.surface == Surface::Review) else {
        return Ok(());
    };
    let pending = review.review_state.as_deref().is_some_and(|s| s.eq_ignore_ascii_case("pending"));
    let empty = review.body.as_deref().is_none_or(|body| body.trim().is_empty());
    if pending || empty { Err(RoutingDrop::EmptyReview) } else { Ok(()) }
}

/// What the repository bound kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounded {
    pub routed: Routed,
    /// Refs in undeclared repositories (cross-repository linkage), removed.
    pub dropped: Vec<WorkItemRef>,
}

/// The repository bound (seed 002, issue-348). An empty list bounds nothing. Otherwise
/// the event's own repository must be declared, refs in undeclared repositories are
/// removed, and an event left with none is dropped. Not authentication: the other guards
/// still run.
pub fn repository_bound(
    event: &Event,
    routed: Routed,
    repositories: &[RepoRef],
) -> Result<Bounded, RoutingDrop> {
    if repositories.is_empty() {
        return Ok(Bounded { routed, dropped: Vec::new() });
    }
    let declared = |repo: &RepoRef| repositories.iter().any(|r| r.same_repository(repo));
    if let Some(own) = &event.repository
        && !declared(own)
    {
        return Err(RoutingDrop::UndeclaredRepository { repository: own.clone() });
    }
    let (kept, dropped): (Vec<_>, Vec<_>) =
        routed.refs.into_iter().partition(|r| declared(r.item.repo()));
    let dropped: Vec<WorkItemRef> = dropped.into_iter().map(|r| r.item).collect();
    if kept.is_empty()
        && let Some(first) = dropped.first()
    {
        return Err(RoutingDrop::UndeclaredRepository { repository: first.repo().clone() });
    }
    Ok(Bounded { routed: Routed { refs: kept }, dropped })
}

/// Why the actor guard let an event in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorPass {
    /// An `issues`/`pull_request` close: a lifecycle signal that can only end sessions.
    CloseExempt,
    /// No actor (CI, a deleted account): input, never a command.
    Actorless,
    /// In `authorizedUsers`.
    Authorized,
    /// On the roster of one of the event's work items: input only (`routing.collaborator`).
    Collaborator,
}

impl ActorPass {
    /// The `pass` field of the `routing.routed` event-log line.
    pub fn reason(self) -> &'static str {
        match self {
            Self::CloseExempt => "close-exempt",
            Self::Actorless => "actorless",
            Self::Authorized => "authorized",
            Self::Collaborator => "collaborator",
        }
    }
}

/// The actor guard: `authorizedUsers` matched exactly (an empty list lets no human in),
/// then the collaborator rosters of the event's own work items, matched without regard
/// to case. `roster` is asked only about `refs` (the refs this event carries), and only
/// when the actor is named and not authorized, so a grant on one work item never reaches
/// another.
pub fn actor(
    event: &Event,
    refs: &Routed,
    authorized: &[Login],
    roster: impl Fn(&WorkItemRef) -> Vec<Login>,
) -> Result<ActorPass, RoutingDrop> {
    if event.is_close() {
        return Ok(ActorPass::CloseExempt);
    }
    let login = match &event.actor {
        Actor::Nobody => return Ok(ActorPass::Actorless),
        Actor::User(login) if authorized.contains(login) => return Ok(ActorPass::Authorized),
        Actor::User(login) => login,
        Actor::Unrecognised(name) => {
            return Err(RoutingDrop::UnauthorizedActor { actor: Some(name.clone()) });
        }
    };
    if refs.items().any(|item| is_collaborator(login, &roster(item))) {
        return Ok(ActorPass::Collaborator);
    }
    Err(RoutingDrop::UnauthorizedActor { actor: Some(login.to_string()) })
}

/// Collaborator logins compare as GitHub compares them: without regard to case.
pub fn is_collaborator(login: &Login, collaborators: &[Login]) -> bool {
    collaborators.iter().any(|c| c.as_str().eq_ignore_ascii_case(login.as_str()))
}

/// An `instance:<name>` address in a comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    None,
    Instance(String),
    /// Two different valid names.
    Ambiguous(Vec<String>),
}

/// Reads the instance address from a comment body: `instance:<name>` not preceded by
/// `[\w:/.-]`, prefix case-insensitive, the name running to the next whitespace with
/// trailing `).,;:!?]'"` stripped and fitting `^[a-z0-9][a-z0-9-]{0,39}$` in full.
pub fn address(body: &str) -> Address {
    const PREFIX: &str = "instance:";
    let lower = body.to_ascii_lowercase();
    let mut names: Vec<String> = Vec::new();
    for (at, _) in lower.match_indices(PREFIX) {
        let preceded = body[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '/' | '.' | '-'));
        if preceded {
            continue;
        }
        let rest = &body[at + PREFIX.len()..];
        let candidate = rest.split(char::is_whitespace).next().unwrap_or_default();
        let name = candidate.trim_end_matches([')', '.', ',', ';', ':', '!', '?', ']', '\'', '"']);
        if is_instance_name(name) && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    match names.len() {
        0 => Address::None,
        1 => Address::Instance(names.remove(0)),
        _ => Address::Ambiguous(names),
    }
}

fn is_instance_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    name.len() <= 40
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Why an instance let an event in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopePass {
    /// One of the event's refs is already this instance's.
    Managed,
    /// Nobody's yet, and this instance may take it.
    Claimable,
}

/// Why an event is outside this instance's scope (`dispatch.dropped`, or
/// `control.rejected` for an authorized command). Always settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeRefusal {
    AmbiguousAddress { names: Vec<String> },
    AddressedElsewhere { instance: String },
    InstanceLocked,
    Unaddressed,
}

impl ScopeRefusal {
    pub fn reason(&self) -> &'static str {
        match self {
            Self::AmbiguousAddress { .. } => "ambiguous-address",
            Self::AddressedElsewhere { .. } => "addressed-elsewhere",
            Self::InstanceLocked => "instance-locked",
            Self::Unaddressed => "unaddressed",
        }
    }
}

/// Instance scope (seed 002, issue-322), first rule that matches wins: an ambiguous
/// address, an address naming another instance (it beats everything), a managed ref,
/// mode `open`, mode `locked` (an address never unlocks), an address naming this
/// instance, otherwise unaddressed. A ref is managed when `instance.workItems` declares
/// it or `has_record` says this machine holds a live session or control record for it.
pub fn instance_scope(
    instance: &InstanceConfig,
    body: Option<&str>,
    refs: &[WorkItemRef],
    has_record: impl Fn(&WorkItemRef) -> bool,
) -> Result<ScopePass, ScopeRefusal> {
    let address = body.map_or(Address::None, address);
    let this = instance.name.as_deref();
    match &address {
        Address::Ambiguous(names) => {
            return Err(ScopeRefusal::AmbiguousAddress { names: names.clone() });
        }
        Address::Instance(name) if Some(name.as_str()) != this => {
            return Err(ScopeRefusal::AddressedElsewhere { instance: name.clone() });
        }
        _ => {}
    }
    let declared = |item: &WorkItemRef| instance.work_items.iter().any(|w| same_item(w, item));
    if refs.iter().any(|item| declared(item) || has_record(item)) {
        return Ok(ScopePass::Managed);
    }
    match instance.scope {
        InstanceScope::Open => Ok(ScopePass::Claimable),
        InstanceScope::Locked => Err(ScopeRefusal::InstanceLocked),
        // `addressed` without a name cannot be addressed: it acts as `locked`.
        InstanceScope::Addressed if this.is_none() => Err(ScopeRefusal::InstanceLocked),
        InstanceScope::Addressed if matches!(address, Address::Instance(_)) => {
            Ok(ScopePass::Claimable)
        }
        InstanceScope::Addressed => Err(ScopeRefusal::Unaddressed),
    }
}

fn same_item(a: &WorkItemRef, b: &WorkItemRef) -> bool {
    a.number() == b.number() && a.repo().same_repository(b.repo())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::route::route;

    fn login(s: &str) -> Login {
        s.parse().unwrap()
    }

    fn comment_by(author: Value, body: &str) -> Event {
        Event::from_webhook(
            "issue_comment",
            &json!({
                "action": "created",
                "repository": {"full_name": "octo/app"},
                "issue": {"number": 15},
                "comment": {"body": body, "user": {"login": author}},
            }),
        )
    }

    #[test]
    fn the_marker_is_stamped_once_and_recognised_anywhere() {
        let marked = mark_self_authored("Session started.  \n");
        assert_eq!(
            marked,
            format!("Session started.\n\n{ATTRIBUTION_LINE}\n{SELF_AUTHORED_MARKER}\n")
        );
        assert_eq!(mark_self_authored(&marked), marked);
        assert!(is_self_authored(&format!("x {SELF_AUTHORED_MARKER} y")));
        assert!(!is_self_authored("<!-- the-loop:agent-comment"));
    }

    #[test]
    fn an_own_comment_is_dropped_even_from_an_authorized_login() {
        let event = comment_by(json!("ann"), &mark_self_authored("the-loop start"));
        assert_eq!(self_marker(&event), Err(RoutingDrop::SelfAuthored));
        assert_eq!(self_marker(&comment_by(json!("ann"), "hello")), Ok(()));
    }

    #[test]
    fn a_description_is_never_marker_checked() {
        let event = Event::from_webhook(
            "issues",
            &json!({"repository": {"full_name": "o/r"}, "issue": {"number": 1, "body": SELF_AUTHORED_MARKER}}),
        );
        assert_eq!(self_marker(&event), Ok(()));
    }

    #[test]
    fn actor_guard_table() {
        let ann = login("ann");
        let close = Event::from_webhook(
            "pull_request",
            &json!({"action": "closed", "sender": {"login": "mallory"}, "pull_request": {"number": 1}}),
        );
        let reopen = Event::from_webhook(
            "issues",
            &json!({"action": "reopened", "sender": {"login": "mallory"}, "issue": {"number": 1}}),
        );
        let ci = Event::from_webhook("check_run", &json!({"check_run": {}}));
        let granted = vec![login("dana")];
        let cases = [
            (
                "authorized",
                comment_by(json!("ann"), "x"),
                vec![ann.clone()],
                vec![],
                Ok(ActorPass::Authorized),
            ),
            (
                "authorized matching is case-sensitive",
                comment_by(json!("Ann"), "x"),
                vec![ann.clone()],
                vec![],
                Err("unauthorized-actor"),
            ),
            (
                "an empty list lets no human in",
                comment_by(json!("ann"), "x"),
                vec![],
                vec![],
                Err("unauthorized-actor"),
            ),
            (
                "an actor-less comment is input",
                comment_by(Value::Null, "x"),
                vec![],
                vec![],
                Ok(ActorPass::Actorless),
            ),
            ("ci events flow with an empty list", ci, vec![], vec![], Ok(ActorPass::Actorless)),
            ("a close bypasses the guard", close, vec![], vec![], Ok(ActorPass::CloseExempt)),
            ("a reopen does not", reopen, vec![], vec![], Err("unauthorized-actor")),
            (
                "collaborator matching ignores case",
                comment_by(json!("Dana"), "x"),
                vec![ann.clone()],
                granted.clone(),
                Ok(ActorPass::Collaborator),
            ),
            (
                "a malformed login is nobody's",
                comment_by(json!("a b"), "x"),
                vec![],
                granted.clone(),
                Err("unauthorized-actor"),
            ),
            (
                "a stranger",
                comment_by(json!("eve"), "x"),
                vec![ann.clone()],
                granted.clone(),
                Err("unauthorized-actor"),
            ),
        ];
        for (name, event, authorized, collaborators, expected) in cases {
            let refs = route(&event);
            let got = actor(&event, &refs, &authorized, |_| collaborators.clone())
                .map_err(|d| d.reason());
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn a_grant_on_one_work_item_does_not_carry_to_another() {
        let granted_on: WorkItemRef = "github:octo/app#7".parse().unwrap();
        let roster = |item: &WorkItemRef| {
            if *item == granted_on { vec![login("dana")] } else { vec![] }
        };
        let event = comment_by(json!("dana"), "x"); // on octo/app#15
        let refs = route(&event);
        assert_eq!(
            actor(&event, &refs, &[], roster).map_err(|d| d.reason()),
            Err("unauthorized-actor")
        );
    }

    #[test]
    fn the_repository_bound_drops_undeclared_repositories_and_refs() {
        let declared: Vec<RepoRef> = vec!["Octo/Repo".parse().unwrap()];
        let pr = |own: &str, body: &str| {
            Event::from_webhook(
                "pull_request",
                &json!({"repository": {"full_name": own}, "pull_request": {"number": 16, "body": body}}),
            )
        };
        let event = pr("octo/repo", "Closes other/x#3");
        let bounded = repository_bound(&event, route(&event), &declared).unwrap();
        assert_eq!(
            bounded.routed.items().map(ToString::to_string).collect::<Vec<_>>(),
            ["github:octo/repo#16"]
        );
        assert_eq!(bounded.dropped[0].to_string(), "github:other/x#3");

        let foreign = pr("other/x", "");
        let err = repository_bound(&foreign, route(&foreign), &declared).unwrap_err();
        assert_eq!(
            err,
            RoutingDrop::UndeclaredRepository { repository: "other/x".parse().unwrap() }
        );

        let unbounded = repository_bound(&foreign, route(&foreign), &[]).unwrap();
        assert_eq!(unbounded.routed, route(&foreign));
    }

    #[test]
    fn address_tokens() {
        let cases = [
            ("the-loop start instance:blue", Address::Instance("blue".into())),
            ("(Instance:blue).", Address::Instance("blue".into())),
            ("instance:Blue", Address::None),
            ("see https://x/instance:blue", Address::None),
            ("foo.instance:blue", Address::None),
            ("instance:blue instance:blue", Address::Instance("blue".into())),
            ("instance:blue instance:red", Address::Ambiguous(vec!["blue".into(), "red".into()])),
            ("instance:", Address::None),
        ];
        for (body, expected) in cases {
            assert_eq!(address(body), expected, "{body:?}");
        }
    }

    #[test]
    fn instance_scope_table() {
        let item: WorkItemRef = "github:octo/app#1".parse().unwrap();
        let instance = |name: Option<&str>, scope: InstanceScope, declared: bool| InstanceConfig {
            name: name.map(str::to_owned),
            scope,
            work_items: if declared { vec![item.clone()] } else { vec![] },
        };
        use InstanceScope::*;
        let cases = [
            (
                "open takes anything",
                instance(Some("blue"), Open, false),
                "hi",
                false,
                Ok(ScopePass::Claimable),
            ),
            ("unnamed open", instance(None, Open, false), "hi", false, Ok(ScopePass::Claimable)),
            (
                "ambiguous first",
                instance(Some("blue"), Open, true),
                "instance:blue instance:red",
                true,
                Err("ambiguous-address"),
            ),
            (
                "elsewhere beats managed",
                instance(Some("blue"), Open, true),
                "instance:red",
                true,
                Err("addressed-elsewhere"),
            ),
            (
                "unnamed sees any address as elsewhere",
                instance(None, Open, false),
                "instance:blue",
                false,
                Err("addressed-elsewhere"),
            ),
            (
                "declared is managed",
                instance(Some("blue"), Locked, true),
                "hi",
                false,
                Ok(ScopePass::Managed),
            ),
            (
                "a record is managed",
                instance(Some("blue"), Locked, false),
                "hi",
                true,
                Ok(ScopePass::Managed),
            ),
            (
                "locked even when addressed",
                instance(Some("blue"), Locked, false),
                "instance:blue",
                false,
                Err("instance-locked"),
            ),
            (
                "addressed here",
                instance(Some("blue"), Addressed, false),
                "instance:blue",
                false,
                Ok(ScopePass::Claimable),
            ),
            (
                "addressed needs an address",
                instance(Some("blue"), Addressed, false),
                "hi",
                false,
                Err("unaddressed"),
            ),
            (
                "addressed without a name is locked",
                instance(None, Addressed, false),
                "hi",
                false,
                Err("instance-locked"),
            ),
        ];
        for (name, config, body, has_record, expected) in cases {
            let got =
                instance_scope(&config, Some(body), std::slice::from_ref(&item), |_| has_record)
                    .map_err(|r| r.reason());
            assert_eq!(got, expected, "{name}");
        }
    }
}

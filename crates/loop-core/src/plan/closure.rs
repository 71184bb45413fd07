//! What a close ends (reference §5.8; seed 002, issue-329): a close never spawns and is
//! never pasted. It ends exactly the object that closed — matched by repository and
//! number — stamps `ended` on a work item this machine tracks and disarms it, ends its
//! live session, and cleans up only when a named authorized actor closed it (otherwise
//! `cleanup.deferred`). A pull request closing ends only its own endpoint; the work item
//! it delivers stays open (`session.kept_open`). A close about an item whose session is
//! being spawned waits for that spawn, and one whose session's worker still holds
//! deliveries waits for them: a close never overtakes what was accepted before it.

use jiff::Timestamp;

use super::{Ingress, Lookup, Snapshot, Step};
use crate::WorkItemRef;
use crate::config::Config;
use crate::event::{Event, EventKind};
use crate::graph::state::Upstream;
use crate::plan::Decision;
use crate::record::Ended;

/// The reason a close event gives: `issue-closed`, `pr-merged` or `pr-closed`.
pub fn reason(event: &Event) -> &'static str {
    match (event.kind == EventKind::PullRequest, merged(event)) {
        (false, _) => "issue-closed",
        (true, true) => "pr-merged",
        (true, false) => "pr-closed",
    }
}

fn merged(event: &Event) -> bool {
    event.entity.as_ref().and_then(|e| e.merged).unwrap_or(false)
}

/// The steps that end what `event` closed, against the live records matching `refs`.
/// Whether a closed item with no session record is tracked is asked of `facts` only
/// when nothing else says so.
pub fn steps(
    event: &Event,
    sessions: &Snapshot,
    refs: &[WorkItemRef],
    config: &Config,
    ingress: Ingress,
    now: Timestamp,
    facts: &dyn Lookup,
) -> Vec<Step> {
    let Some(closed) = event.closed_item() else { return Vec::new() };
    if let Some(item) = sessions.spawn_awaited(refs) {
        // What the close ends is known once the spawn in flight has its record.
        return vec![Step::AwaitSpawn { item: item.clone() }];
    }
    if let Some(item) = sessions.close_awaits_queue(&closed) {
        // What its worker holds was accepted before the close: it is delivered first.
        return vec![Step::AwaitQueue { item: item.clone() }];
    }
    let merged = merged(event);
    let reason = reason(event);
    let closed_as = if merged { "merged" } else { "closed" };
    let mut steps = Vec::new();
    let mut owned_elsewhere = false;
    let mut session_ended = false;
    for record in sessions.matches(refs) {
        if record.work_item == closed {
            session_ended = true;
            steps.push(Step::CloseSession { record: Box::new(record.clone()) });
            let item = closed.clone();
            steps.push(Step::Record(Decision::AutoClosed { item, reason, merged }));
        } else if record.endpoints.contains_key(&closed) {
            owned_elsewhere = true;
            let pull_request = closed.clone();
            let upstream = if merged { Upstream::Merged } else { Upstream::Closed };
            let owner = Box::new(record.clone());
            steps.push(Step::CloseEndpoint { record: owner, pull_request, upstream });
            steps.push(Step::Record(Decision::KeptOpen {
                owner: record.work_item.clone(),
                pull_request: closed.clone(),
                state: closed_as,
                reason,
            }));
        }
    }
    if owned_elsewhere {
        return steps;
    }
    let tracked = session_ended || facts.session_recorded(&closed) || facts.tracked(&closed);
    if !tracked {
        return steps;
    }
    let kind = if event.kind == EventKind::PullRequest { "pull-request" } else { "issue" };
    let closer = event.actor.login().cloned();
    let ended = Ended {
        state: closed_as.to_owned(),
        kind: kind.to_owned(),
        reason: Some(reason.to_owned()),
        at: now,
        source: ingress.source().to_owned(),
        actor: closer.clone(),
    };
    let stamped = Decision::Ended {
        item: closed.clone(),
        state: closed_as,
        kind,
        ingress: ingress.source(),
        actor: closer.clone(),
    };
    let authorized = closer.clone().filter(|login| config.routing.authorized_users.contains(login));
    let then = match (session_ended, authorized) {
        (false, _) => Vec::new(),
        (true, Some(actor)) => {
            vec![Step::Cleanup { item: closed.clone(), actor, why: "close-event" }]
        }
        (true, None) => {
            let item = closed.clone();
            vec![Step::Record(Decision::CleanupDeferred { item, actor: closer, closed_as })]
        }
    };
    steps.push(Step::StampEnded {
        item: closed,
        ended: Box::new(ended),
        stamped: Box::new(stamped),
        then,
    });
    steps
}

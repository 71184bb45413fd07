//! The order of a plan's steps, pinned for the paths whose order is the contract: a
//! command is recorded before its effect, a close ends the session before the stamp and
//! cleans up only after it, a pull request is bound before the event is queued, and a
//! dequeued job for a pull request is routed to the endpoint its mode gives it.

use std::sync::Arc;

use loop_core::WorkItemRef;
use loop_core::config::{Config, SessionPerPr};
use loop_core::control::{Command, Effect, SessionState};
use loop_core::event::Event;
use loop_core::plan::{self, Decision, JobRoute, PrSession, Step};
use loop_core::record::LocalRecord;
use serde_json::{Value, json};

use crate::front::{Front, WORK_ITEM};

const LABEL: &str = "the-loop: auto-execute";

fn item(s: &str) -> WorkItemRef {
    s.parse().expect("test refs are well-formed")
}

fn comment(body: &str) -> Value {
    json!({
        "action": "created",
        "repository": {"full_name": "octo/app"},
        "issue": {"number": 15, "labels": [{"name": LABEL}]},
        "comment": {"id": 1, "node_id": "IC_1", "body": body, "user": {"login": "ann"},
                    "html_url": "https://github.com/octo/app/issues/15#issuecomment-1"},
        "sender": {"login": "ann"},
    })
}

fn pull_request(action: &str, repo: &str, merged: bool) -> Value {
    json!({
        "action": action,
        "repository": {"full_name": repo},
        "pull_request": {"number": 16, "head": {"ref": "feature"}, "merged": merged,
                         "body": "Closes octo/app#15", "node_id": "PR_16"},
        "sender": {"login": "ann"},
    })
}

/// The steps' kinds, in order, with the decision a `Record` step records.
fn kinds(steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .map(|step| match step {
            Step::Record(decision) => format!("Record({})", decision_name(decision)),
            Step::StampEnded { then, .. } => format!("StampEnded(then: {:?})", kinds(then)),
            other => format!("{other:?}").split([' ', '{', '(']).next().unwrap_or("").to_owned(),
        })
        .collect()
}

/// Issue #15 closed by `sender`.
fn closed_issue(sender: &str) -> Value {
    json!({
        "action": "closed",
        "repository": {"full_name": "octo/app"},
        "issue": {"number": 15, "labels": []},
        "sender": {"login": sender},
    })
}

fn decision_name(decision: &Decision) -> String {
    format!("{decision:?}").split([' ', '{', '(']).next().unwrap_or("").to_owned()
}

#[test]
fn a_start_is_recorded_before_its_spawn_is_queued() {
    let plan = Front::new().plan("issue_comment", &comment("the-loop start")).expect("admitted");
    assert_eq!(plan.claim.as_deref(), Some("issue_comment:IC_1:created"));
    assert_eq!(kinds(&plan.steps), ["RecordCommand", "Enqueue"]);
    assert!(matches!(&plan.steps[0], Step::RecordCommand { command: Command::Start, .. }));
    assert!(matches!(&plan.steps[1], Step::Enqueue { spawn: true, .. }));
}

#[test]
fn a_pause_is_recorded_before_it_is_executed_against_the_live_session() {
    let mut front = Front::new();
    front.session = SessionState::Active;
    let plan = front.plan("issue_comment", &comment("the-loop pause")).expect("admitted");
    assert_eq!(kinds(&plan.steps), ["RecordCommand", "Execute"]);
    let Step::Execute { effect, session, .. } = &plan.steps[1] else { unreachable!() };
    assert_eq!(*effect, Effect::Pause);
    assert_eq!(session.as_ref().map(|s| s.work_item.to_string()).as_deref(), Some(WORK_ITEM));
}

#[test]
fn a_close_ends_the_session_then_stamps_and_only_then_cleans_up() {
    let mut front = Front::new();
    front.session = SessionState::Active;
    let closed = closed_issue("ann");
    let plan = front.plan("issues", &closed).expect("admitted");
    assert_eq!(
        kinds(&plan.steps),
        ["CloseSession", "Record(AutoClosed)", "StampEnded(then: [\"Cleanup\"])", "Record(Closed)",]
    );
}

#[test]
fn a_close_by_someone_not_authorized_defers_the_cleanup() {
    let mut front = Front::new();
    front.session = SessionState::Active;
    let closed = closed_issue("mallory");
    let plan = front.plan("issues", &closed).expect("admitted");
    let Some(Step::StampEnded { then, .. }) = plan.steps.get(2) else {
        panic!("no stamp as the third step: {:#?}", plan.steps)
    };
    assert_eq!(kinds(then), ["Record(CleanupDeferred)"]);
}

#[test]
fn a_pull_request_is_bound_to_the_session_before_its_event_is_queued() {
    let mut front = Front::new();
    front.session = SessionState::Active;
    let opened = pull_request("opened", "octo/app", false);
    let plan = front.plan("pull_request", &opened).expect("admitted");
    assert_eq!(kinds(&plan.steps), ["BindPullRequest", "Enqueue"]);
}

#[test]
fn a_paused_session_drops_the_event_after_every_other_step() {
    let mut front = Front::new();
    front.session = SessionState::Paused;
    let plan = front.plan("issue_comment", &comment("try again")).expect("admitted");
    assert_eq!(kinds(&plan.steps), ["Paused"]);
}

#[test]
fn a_reopen_clears_the_stamp_before_the_event_is_matched() {
    let mut front = Front::new();
    front.session = SessionState::Active;
    let reopened = json!({
        "action": "reopened",
        "repository": {"full_name": "octo/app"},
        "issue": {"number": 15, "labels": [{"name": LABEL}]},
        "sender": {"login": "ann"},
    });
    let plan = front.plan("issues", &reopened).expect("admitted");
    assert_eq!(kinds(&plan.steps), ["Reopen", "Enqueue"]);
}

#[test]
fn a_routing_switch_turned_off_plans_nothing_and_claims_nothing() {
    let mut front = Front::new();
    front.config.routing.enabled = false;
    let plan = front.plan("issue_comment", &comment("the-loop start")).expect("admitted");
    assert_eq!((plan.claim, plan.steps), (None, Vec::new()));
}

fn live_record() -> LocalRecord {
    let mut front = Front::new();
    front.session = SessionState::Active;
    Arc::unwrap_or_clone(front.sessions().records.remove(0))
}

#[test]
fn a_dequeued_cross_repository_pull_request_gets_its_own_session_only_with_a_checkout_root() {
    let event = Event::from_webhook("pull_request", &pull_request("opened", "other/lib", false));
    let mut front = Front::new();
    front.config.routing.tmux.session_per_pr = SessionPerPr::CrossRepository;
    let target = item(WORK_ITEM);
    // The job as dequeued for the live session, under `config` and the item's `mode`.
    let deliver = |config: &Config, mode| {
        plan::route_job(&target, Some(live_record()), false, &event, config, mode)
    };
    let routed = deliver(&front.config, SessionPerPr::CrossRepository);
    let JobRoute::Deliver { pr_session, endpoint, .. } = routed else { panic!("{routed:?}") };
    assert_eq!(
        pr_session,
        Some(PrSession::Declined {
            pull_request: item("github:other/lib#16"),
            reason: "no-separate-checkout"
        })
    );
    assert_eq!(endpoint, Some(target.clone()));

    front.config.routing.workspace.root = Some("/w".into());
    let routed = deliver(&front.config, SessionPerPr::CrossRepository);
    let JobRoute::Deliver { pr_session, .. } = routed else { panic!("{routed:?}") };
    assert_eq!(pr_session, Some(PrSession::Spawn { pull_request: item("github:other/lib#16") }));
    // The mode is the work item's frozen choice when it made one: `never` keeps the pull
    // request in the work item's session.
    let routed = deliver(&front.config, SessionPerPr::Never);
    let JobRoute::Deliver { pr_session, .. } = routed else { panic!("{routed:?}") };
    assert_eq!(pr_session, None);
}

#[test]
fn a_dequeued_job_spawns_only_when_queued_to_and_no_session_exists() {
    let event = Event::from_webhook("issue_comment", &comment("hello"));
    let config = Front::new().config;
    let mode = config.routing.tmux.session_per_pr;
    let target = item(WORK_ITEM);
    assert_eq!(plan::route_job(&target, None, true, &event, &config, mode), JobRoute::Spawn);
    assert_eq!(
        plan::route_job(&target, None, false, &event, &config, mode),
        JobRoute::Vanished { item: target.clone() }
    );
    let routed = plan::route_job(&target, Some(live_record()), true, &event, &config, mode);
    assert!(matches!(routed, JobRoute::Deliver { pr_session: None, .. }), "{routed:?}");
}

#[test]
fn a_stamp_names_why_the_item_ended() {
    let mut front = Front::new();
    front.session = SessionState::Active;
    let closed = closed_issue("ann");
    let plan = front.plan("issues", &closed).expect("admitted");
    let stamp = plan.steps.iter().find_map(|step| match step {
        Step::StampEnded { ended, .. } => Some(ended.reason.clone()),
        _ => None,
    });
    assert_eq!(stamp, Some(Some("issue-closed".to_owned())));
}

/// Issue #16: events about an item whose spawn is in flight wait for it, whatever labels
/// they carry — an unlabeled pull request's would otherwise be refused as `spawn-policy`
/// and its close find no session to end.
#[test]
fn an_event_about_an_item_being_spawned_waits_for_the_spawn_whatever_its_labels() {
    let mut front = Front::new();
    front.spawning = true;
    let awaited = || vec![Step::AwaitSpawn { item: item(WORK_ITEM) }];
    for payload in
        [pull_request("opened", "octo/app", false), pull_request("closed", "octo/app", true)]
    {
        let plan = front.plan("pull_request", &payload).expect("admitted");
        assert_eq!(plan.steps, awaited(), "{payload}");
        assert!(plan.claim.is_some(), "the key is held in flight while it waits");
    }
    let plan = front.plan("issue_comment", &comment("one more thing")).expect("admitted");
    assert_eq!(plan.steps, awaited());
    let plan = front.plan("issues", &closed_issue("ann")).expect("admitted");
    assert_eq!(plan.steps, awaited());
}

/// Issue #16: a close never overtakes deliveries its session's worker holds — they were
/// accepted before it. It waits behind them and, planned again once reached, ends the
/// session; a comment is not held back by a busy worker.
#[test]
fn a_close_waits_for_what_the_sessions_worker_holds_and_a_comment_does_not() {
    let mut front = Front::new();
    front.session = SessionState::Active;
    front.busy = true;
    let plan = front.plan("issues", &closed_issue("ann")).expect("admitted");
    assert_eq!(plan.steps, vec![Step::AwaitQueue { item: item(WORK_ITEM) }]);
    assert!(plan.claim.is_some(), "the key is held in flight while it waits");
    let plan = front.plan("issue_comment", &comment("one more thing")).expect("admitted");
    assert_eq!(kinds(&plan.steps), ["Enqueue"]);
    front.busy = false;
    let plan = front.plan("issues", &closed_issue("ann")).expect("admitted");
    let close =
        ["CloseSession", "Record(AutoClosed)", "StampEnded(then: [\"Cleanup\"])", "Record(Closed)"];
    assert_eq!(kinds(&plan.steps), close);
}

#[test]
fn a_command_about_an_item_being_spawned_is_decided_at_once() {
    let mut front = Front::new();
    front.spawning = true;
    let plan = front.plan("issue_comment", &comment("the-loop start")).expect("admitted");
    assert_eq!(kinds(&plan.steps), ["RecordCommand", "Enqueue"]);
}

#[test]
fn an_event_about_an_item_whose_spawn_ended_is_planned_against_its_record() {
    let mut front = Front::new();
    front.spawning = true;
    front.session = SessionState::Active;
    let opened = pull_request("opened", "octo/app", false);
    let plan = front.plan("pull_request", &opened).expect("admitted");
    assert_eq!(kinds(&plan.steps), ["BindPullRequest", "Enqueue"]);
}

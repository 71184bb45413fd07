//! The numbered edge cases of reference §9 (receiver-dispatch-control.md) that concern
//! routing, guards, control and the excerpt, one named test each (`eNN_…`), driven
//! through the composed front door in `pipeline`. Cases about queues, sessions, tmux,
//! reactions and delivery status belong to the dispatcher and are not here.

use loop_core::WorkItemRef;
use loop_core::config::{InstanceScope, SpawnPolicy};
use loop_core::control::{Command, Disposition, Effect, SessionState, SpawnRefusal};
use loop_core::event::Event;
use loop_core::excerpt::{EXCERPT_MAX_CHARS, excerpt};
use loop_core::guards::mark_self_authored;
use loop_core::route::{Existence, KnownExistence, route};
use serde_json::{Value, json};

use crate::front::{Front, Outcome, judge, login};

const LABEL: &str = "the-loop: auto-execute";

fn item(s: &str) -> WorkItemRef {
    s.parse().expect("test refs are well-formed")
}

/// A comment by `author` on issue #15 of octo/app, labelled or not.
fn comment(author: Value, body: &str, labeled: bool) -> Value {
    let labels = if labeled { json!([{"name": LABEL}]) } else { json!([]) };
    json!({
        "action": "created",
        "repository": {"full_name": "octo/app", "html_url": "https://github.com/octo/app"},
        "issue": {"number": 15, "labels": labels},
        "comment": {"id": 1, "node_id": "IC_1", "body": body, "user": {"login": author},
                    "html_url": "https://github.com/octo/app/issues/15#issuecomment-1"},
        "sender": {"login": author},
    })
}

fn issue_event(action: &str, sender: &str, body: &str, labeled: bool) -> Value {
    let labels = if labeled { json!([{"name": LABEL}]) } else { json!([]) };
    json!({
        "action": action,
        "repository": {"full_name": "octo/app"},
        "issue": {"number": 15, "body": body, "labels": labels},
        "label": {"name": LABEL},
        "sender": {"login": sender},
    })
}

fn pr_event(action: &str, sender: &str, number: u64, branch: &str, body: &str) -> Value {
    json!({
        "action": action,
        "repository": {"full_name": "octo/app"},
        "pull_request": {"number": number, "head": {"ref": branch}, "body": body, "merged": false},
        "sender": {"login": sender},
    })
}

fn refs_of(name: &str, payload: &Value) -> Vec<String> {
    route(&Event::from_webhook(name, payload)).items().map(ToString::to_string).collect()
}

#[test]
fn e01_two_different_keywords_execute_nothing_and_a_repeat_is_one_command() {
    let front = Front::new();
    let both = comment(json!("ann"), "the-loop start\nthe-loop stop", true);
    assert_eq!(judge(&front, "issue_comment", &both), Outcome::Ambiguous);
    let repeat = comment(json!("ann"), "the-loop start. the-loop START!", true);
    assert_eq!(
        judge(&front, "issue_comment", &repeat),
        Outcome::Executed(Command::Start, Effect::Spawn)
    );
}

#[test]
fn e02_a_keyword_in_an_issue_or_pr_body_is_never_a_command() {
    let front = Front::new();
    for action in ["opened", "edited"] {
        let opened = issue_event(action, "ann", "the-loop start", true);
        assert_eq!(
            judge(&front, "issues", &opened),
            Outcome::Dropped("awaiting-start"),
            "{action}"
        );
    }
    let pr = pr_event("opened", "ann", 16, "main", "the-loop stop");
    assert_eq!(judge(&front, "pull_request", &pr), Outcome::Dropped("spawn-policy"));
}

#[test]
fn e03_a_keyword_quoted_in_a_code_block_still_counts() {
    let body = "```\nthe-loop start\n```";
    let outcome = judge(&Front::new(), "issue_comment", &comment(json!("ann"), body, true));
    assert_eq!(outcome, Outcome::Executed(Command::Start, Effect::Spawn));
}

#[test]
fn e04_keywords_need_whole_token_boundaries() {
    let front = Front::new();
    for body in ["the-loop start:now", "the-loop startlater", "xthe-loop start"] {
        let outcome = judge(&front, "issue_comment", &comment(json!("ann"), body, true));
        assert_eq!(outcome, Outcome::Dropped("awaiting-start"), "{body}");
    }
    for body in ["**the-loop start**", "(the-loop start)"] {
        let outcome = judge(&front, "issue_comment", &comment(json!("ann"), body, true));
        assert_eq!(outcome, Outcome::Executed(Command::Start, Effect::Spawn), "{body}");
    }
}

#[test]
fn e05_an_actorless_comment_is_input_but_never_a_command() {
    let mut front = Front::new();
    front.session = SessionState::Active;
    assert_eq!(
        judge(&front, "issue_comment", &comment(Value::Null, "hello", true)),
        Outcome::Delivered
    );
    let stop = comment(Value::Null, "the-loop stop", true);
    assert_eq!(judge(&front, "issue_comment", &stop), Outcome::Rejected("unauthorized-actor"));
}

#[test]
fn e06_a_command_from_outside_authorized_users_is_rejected_not_forwarded() {
    let mut front = Front::new();
    front.session = SessionState::Active;
    // The router drops a stranger outright; an actor the router let in (a collaborator)
    // is still refused at the command seam.
    let stranger = comment(json!("eve"), "the-loop stop", true);
    assert_eq!(judge(&front, "issue_comment", &stranger), Outcome::Dropped("unauthorized-actor"));
    front.rosters.insert(item("github:octo/app#15"), vec![login("eve")]);
    assert_eq!(judge(&front, "issue_comment", &stranger), Outcome::Rejected("unauthorized-actor"));
}

#[test]
fn e07_a_start_on_an_unlabelled_item_is_refused_unrecorded_and_a_later_label_does_not_start() {
    let front = Front::new();
    let start = comment(json!("ann"), "the-loop start", false);
    assert_eq!(judge(&front, "issue_comment", &start), Outcome::Rejected("spawn-policy"));
    // Rejected, so nothing was recorded: the label arriving later waits for a start.
    let labeled = issue_event("labeled", "ann", "", true);
    assert_eq!(judge(&front, "issues", &labeled), Outcome::Dropped("awaiting-start"));
}

#[test]
fn e08_a_resume_with_nothing_paused_is_refused_and_does_not_arm() {
    let front = Front::new();
    let resume = comment(json!("ann"), "the-loop resume", true);
    assert_eq!(judge(&front, "issue_comment", &resume), Outcome::Rejected("nothing-to-resume"));
    assert_eq!(
        judge(&front, "issues", &issue_event("labeled", "ann", "", true)),
        Outcome::Dropped("awaiting-start")
    );
}

#[test]
fn e09_pause_or_stop_without_a_session_is_recorded_and_disarms() {
    for (keyword, command) in [("the-loop pause", Command::Pause), ("the-loop stop", Command::Stop)]
    {
        let mut front = Front::new();
        front.last_recorded = Some(Command::Start);
        let outcome = judge(&front, "issue_comment", &comment(json!("ann"), keyword, true));
        assert_eq!(outcome, Outcome::Executed(command, Effect::Noop), "{keyword}");
        front.last_recorded = Some(command);
        let labeled = issue_event("labeled", "ann", "", true);
        assert_eq!(
            judge(&front, "issues", &labeled),
            Outcome::Dropped("awaiting-start"),
            "{keyword}"
        );
    }
}

#[test]
fn e10_an_issue_opened_with_the_label_arms_but_waits_for_a_start() {
    let opened = issue_event("opened", "ann", "", true);
    assert_eq!(judge(&Front::new(), "issues", &opened), Outcome::Dropped("awaiting-start"));
}

#[test]
fn e11_spawn_on_unmatched_always_still_waits_for_a_start() {
    let mut front = Front::new();
    front.config.routing.spawn_on_unmatched = SpawnPolicy::Always;
    let plain = comment(json!("ann"), "hello", false);
    assert_eq!(judge(&front, "issue_comment", &plain), Outcome::Dropped("awaiting-start"));
}

#[test]
fn e12_disabled_control_forwards_keywords_as_text_and_drops_the_start_requirement() {
    let mut front = Front::new();
    front.config.routing.control.enabled = false;
    let start = comment(json!("ann"), "the-loop start", true);
    assert_eq!(
        judge(&front, "issue_comment", &start),
        Outcome::Spawned(item("github:octo/app#15"))
    );
    front.session = SessionState::Active;
    let stop = comment(json!("ann"), "the-loop stop", true);
    assert_eq!(judge(&front, "issue_comment", &stop), Outcome::Delivered);
}

#[test]
fn e13_a_start_on_a_paused_session_resumes_it_without_a_second_spawn() {
    let mut front = Front::new();
    front.session = SessionState::Paused;
    let start = comment(json!("ann"), "the-loop start", true);
    assert_eq!(
        judge(&front, "issue_comment", &start),
        Outcome::Executed(Command::Start, Effect::Resume)
    );
}

#[test]
fn a_resume_or_a_start_over_a_live_session_whose_agent_exited_restarts_it() {
    let mut front = Front::new();
    front.session = SessionState::Active;
    let resume = comment(json!("ann"), "the-loop resume", true);
    assert_eq!(judge(&front, "issue_comment", &resume), Outcome::Rejected("nothing-to-resume"));
    front.agent_exited = true;
    assert_eq!(
        judge(&front, "issue_comment", &resume),
        Outcome::Executed(Command::Resume, Effect::Restart),
        "the comment is recorded and delivered: its delivery respawns the agent"
    );
    let start = comment(json!("ann"), "the-loop start", true);
    assert_eq!(
        judge(&front, "issue_comment", &start),
        Outcome::Executed(Command::Start, Effect::Restart)
    );
    let stranger = comment(json!("eve"), "the-loop resume", true);
    assert_eq!(judge(&front, "issue_comment", &stranger), Outcome::Dropped("unauthorized-actor"));
    let pause = comment(json!("ann"), "the-loop pause", true);
    assert_eq!(
        judge(&front, "issue_comment", &pause),
        Outcome::Executed(Command::Pause, Effect::Pause)
    );
}

#[test]
fn e14_a_recorded_start_survives_a_restart_and_a_labelled_event_spawns() {
    let mut front = Front::new();
    front.last_recorded = Some(Command::Start);
    let plain = comment(json!("ann"), "any news?", true);
    assert_eq!(
        judge(&front, "issue_comment", &plain),
        Outcome::Spawned(item("github:octo/app#15"))
    );
}

#[test]
fn e15_a_spawn_policy_drop_releases_the_id_and_awaiting_start_settles_it() {
    assert_eq!(SpawnRefusal::SpawnPolicy.disposition(), Disposition::Release);
    assert_eq!(SpawnRefusal::AwaitingStart.disposition(), Disposition::Settle);
}

#[test]
fn e21_a_close_never_spawns_even_under_always() {
    let mut front = Front::new();
    front.config.routing.spawn_on_unmatched = SpawnPolicy::Always;
    front.last_recorded = Some(Command::Start);
    let closed = issue_event("closed", "ann", "", true);
    assert_eq!(judge(&front, "issues", &closed), Outcome::Closes(Some(item("github:octo/app#15"))));
}

#[test]
fn e22_closing_a_pr_linked_to_an_issue_closes_only_the_pr() {
    let closed = pr_event("closed", "ann", 16, "claude/issue-15", "Closes #15");
    assert_eq!(refs_of("pull_request", &closed), ["github:octo/app#15", "github:octo/app#16"]);
    assert_eq!(
        judge(&Front::new(), "pull_request", &closed),
        Outcome::Closes(Some(item("github:octo/app#16")))
    );
}

#[test]
fn e24_a_close_payload_with_no_entity_number_closes_nothing() {
    let payload = json!({"action": "closed", "repository": {"full_name": "octo/app"},
                         "pull_request": {"head": {"ref": "issue-15"}}});
    assert_eq!(Event::from_webhook("pull_request", &payload).closed_item(), None);
}

#[test]
fn e25_a_close_by_an_unauthorized_or_unnamed_actor_still_passes_the_guard() {
    for sender in [json!("mallory"), Value::Null] {
        let mut closed = issue_event("closed", "x", "", false);
        closed["sender"] = json!({"login": sender});
        assert_eq!(
            judge(&Front::new(), "issues", &closed),
            Outcome::Closes(Some(item("github:octo/app#15")))
        );
    }
}

#[test]
fn e32_a_branch_only_ref_that_is_a_definite_404_is_dropped_and_the_pr_becomes_the_target() {
    let routed =
        route(&Event::from_webhook("pull_request", &pr_event("opened", "ann", 16, "issue-15", "")));
    let mut answers = KnownExistence::default();
    answers.remember(item("github:octo/app#15"), Existence::Missing);
    let verified = routed.verify(false, &answers);
    assert_eq!(verified.dropped, [item("github:octo/app#15")]);
    let refs: Vec<WorkItemRef> = verified.kept.items().cloned().collect();
    assert_eq!(
        loop_core::control::target(None, &refs, None, |_| None),
        Some(item("github:octo/app#16"))
    );
}

#[test]
fn e33_an_existence_check_that_cannot_answer_keeps_the_ref() {
    let routed =
        route(&Event::from_webhook("pull_request", &pr_event("opened", "ann", 16, "issue-15", "")));
    let mut answers = KnownExistence::default();
    answers.remember(item("github:octo/app#15"), Existence::Unknown);
    assert_eq!(routed.clone().verify(false, &answers).kept, routed);
}

#[test]
fn e34_a_live_record_owning_a_ref_means_no_existence_check() {
    let routed =
        route(&Event::from_webhook("pull_request", &pr_event("opened", "ann", 16, "issue-15", "")));
    assert!(routed.to_check(true).is_empty());
    assert_eq!(routed.to_check(false), [&item("github:octo/app#15")]);
}

#[test]
fn e35_an_event_whose_every_ref_is_a_branch_ghost_is_work_item_not_found() {
    let payload =
        json!({"repository": {"full_name": "octo/app"}, "branches": [{"name": "issue-9"}]});
    let mut answers = KnownExistence::default();
    answers.remember(item("github:octo/app#9"), Existence::Missing);
    let verified = route(&Event::from_webhook("status", &payload)).verify(false, &answers);
    assert_eq!(verified.drop_reason(), Some("work-item-not-found"));
}

#[test]
fn e36_the_control_target_is_the_running_record_whatever_the_ref_order() {
    let refs = [item("github:octo/app#15"), item("github:octo/app#16")];
    let running = item("github:octo/elsewhere#3");
    let owner = |r: &WorkItemRef| (r.number() == 16).then(|| running.clone());
    assert_eq!(
        loop_core::control::target(Some(Command::Stop), &refs, None, owner),
        Some(running.clone())
    );
}

#[test]
fn e37_closes_itself_adds_nothing_and_a_qualified_reference_routes_cross_repository() {
    assert_eq!(
        refs_of("pull_request", &pr_event("opened", "ann", 16, "main", "Closes #16")),
        ["github:octo/app#16"]
    );
    assert_eq!(
        refs_of("pull_request", &pr_event("opened", "ann", 16, "main", "Closes other/repo#15")),
        ["github:other/repo#15", "github:octo/app#16"]
    );
}

#[test]
fn e38_the_branch_convention_matches_inside_a_longer_word() {
    let pr = pr_event("opened", "ann", 16, "github-issue-15", "");
    assert_eq!(refs_of("pull_request", &pr), ["github:octo/app#15", "github:octo/app#16"]);
}

#[test]
fn e39_closes_colon_hash_and_closes_hash_do_not_link_but_fixes_colon_space_does() {
    for body in ["Closes:#15", "Closes#15"] {
        assert_eq!(
            refs_of("pull_request", &pr_event("opened", "ann", 16, "main", body)),
            ["github:octo/app#16"]
        );
    }
    assert_eq!(
        refs_of("pull_request", &pr_event("opened", "ann", 16, "main", "Fixes: #15")),
        ["github:octo/app#15", "github:octo/app#16"]
    );
}

#[test]
fn e41_the_loops_own_comment_is_dropped_even_from_an_authorized_login() {
    let mut front = Front::new();
    front.session = SessionState::Active;
    let own = comment(json!("ann"), &mark_self_authored("the-loop start"), true);
    assert_eq!(judge(&front, "issue_comment", &own), Outcome::Dropped("self-authored"));
}

#[test]
fn e42_authorized_users_match_case_sensitively_and_collaborators_do_not() {
    let mut front = Front::new();
    front.session = SessionState::Active;
    assert_eq!(
        judge(&front, "issue_comment", &comment(json!("Ann"), "hi", true)),
        Outcome::Dropped("unauthorized-actor")
    );
    front.rosters.insert(item("github:octo/app#15"), vec![login("dana")]);
    assert_eq!(
        judge(&front, "issue_comment", &comment(json!("DANA"), "hi", true)),
        Outcome::Delivered
    );
}

#[test]
fn e43_an_empty_authorized_list_drops_human_events_but_ci_and_closes_flow() {
    let mut front = Front::new();
    front.config.routing.authorized_users.clear();
    front.session = SessionState::Active;
    assert_eq!(
        judge(&front, "issue_comment", &comment(json!("ann"), "hi", true)),
        Outcome::Dropped("unauthorized-actor")
    );
    let ci = json!({"repository": {"full_name": "octo/app"},
                    "check_suite": {"head_branch": "x", "pull_requests": [{"number": 15}]}});
    assert_eq!(judge(&front, "check_suite", &ci), Outcome::Delivered);
    assert_eq!(
        judge(&front, "issues", &issue_event("closed", "ann", "", false)),
        Outcome::Closes(Some(item("github:octo/app#15")))
    );
}

#[test]
fn e44_collaborator_arguments_refuse_path_tricks_and_ignore_trailing_prose() {
    let front = Front::new();
    let tricky = comment(json!("ann"), "the-loop add-collaborator @dana/../etc --x", true);
    assert_eq!(judge(&front, "issue_comment", &tricky), Outcome::Rejected("missing-collaborator"));
    let prose = comment(json!("ann"), "the-loop add-collaborator @dana rm -rf /", true);
    assert_eq!(judge(&front, "issue_comment", &prose), Outcome::Roster(vec!["dana".to_owned()]));
}

#[test]
fn e45_a_collaborator_is_input_only() {
    let mut front = Front::new();
    front.rosters.insert(item("github:octo/app#15"), vec![login("dana")]);
    front.session = SessionState::Active;
    let stop = comment(json!("dana"), "the-loop stop", true);
    assert_eq!(judge(&front, "issue_comment", &stop), Outcome::Rejected("unauthorized-actor"));
    assert_eq!(
        judge(&front, "issue_comment", &comment(json!("dana"), "try X", true)),
        Outcome::Delivered
    );
    front.session = SessionState::None;
    front.last_recorded = Some(Command::Start);
    let plain = comment(json!("dana"), "try X", true);
    assert_eq!(judge(&front, "issue_comment", &plain), Outcome::Dropped("collaborator-no-spawn"));
    assert_eq!(SpawnRefusal::CollaboratorNoSpawn.disposition(), Disposition::Settle);
}

#[test]
fn e46_a_grant_on_one_work_item_does_not_carry_to_another() {
    let mut front = Front::new();
    front.session = SessionState::Active;
    front.rosters.insert(item("github:octo/app#99"), vec![login("dana")]);
    let on_15 = comment(json!("dana"), "hi", true);
    assert_eq!(judge(&front, "issue_comment", &on_15), Outcome::Dropped("unauthorized-actor"));
}

#[test]
fn e47_an_address_elsewhere_refuses_even_a_managed_item_and_locked_refuses_even_when_addressed() {
    let mut front = Front::new();
    front.config.instance.name = Some("blue".to_owned());
    front.session = SessionState::Active;
    let elsewhere = comment(json!("ann"), "instance:red please look", true);
    assert_eq!(judge(&front, "issue_comment", &elsewhere), Outcome::Dropped("addressed-elsewhere"));
    front.config.instance.scope = InstanceScope::Locked;
    front.session = SessionState::None;
    let addressed = comment(json!("ann"), "the-loop start instance:blue", true);
    assert_eq!(judge(&front, "issue_comment", &addressed), Outcome::Dropped("instance-locked"));
}

#[test]
fn e48_a_forged_json_body_stays_in_its_string_and_a_huge_body_keeps_the_url() {
    let forged = "\"}}, \"injected\": {\"x\": \"";
    let text =
        excerpt(&Event::from_webhook("issue_comment", &comment(json!("ann"), forged, false)));
    let value: Value = serde_json::from_str(&text).expect("the excerpt is JSON");
    assert_eq!(value["comment"]["body"], forged);
    assert!(value.get("injected").is_none());

    let huge = "y".repeat(200_000);
    let text = excerpt(&Event::from_webhook("issue_comment", &comment(json!("ann"), &huge, false)));
    assert!(text.chars().count() <= EXCERPT_MAX_CHARS);
    let value: Value = serde_json::from_str(&text).expect("the excerpt is JSON");
    assert_eq!(
        value["comment"]["html_url"],
        "https://github.com/octo/app/issues/15#issuecomment-1"
    );
}

#[test]
fn e49_a_bare_comment_renders_only_its_body_and_nothing_recognised_renders_braces() {
    let bare = json!({"comment": {"body": "b"}});
    assert_eq!(
        excerpt(&Event::from_webhook("issue_comment", &bare)),
        "{\n  \"comment\": {\n    \"body\": \"b\"\n  }\n}"
    );
    assert_eq!(excerpt(&Event::from_webhook("ping", &json!({"zen": "x"}))), "{}");
}

#[test]
fn e50_malformed_containers_never_raise() {
    for payload in [
        json!({"comment": null}),
        json!({"comment": "text"}),
        json!({"comment": [1]}),
        json!({"comment": {"user": "ann", "body": 3}}),
        json!({"issue": {"labels": "bug", "number": "1"}, "repository": []}),
        json!({"check_run": {"output": "x", "check_suite": {"pull_requests": [null, {"number": -1}]}}}),
    ] {
        for name in ["issue_comment", "issues", "check_run", "unknown"] {
            let event = Event::from_webhook(name, &payload);
            let _ = route(&event);
            let text = excerpt(&event);
            serde_json::from_str::<Value>(&text).expect("the excerpt is JSON");
        }
    }
}

#[test]
fn spec_order_instance_scope_is_judged_before_the_control_parse() {
    let mut front = Front::new();
    front.config.instance.name = Some("blue".to_owned());
    let both = comment(json!("ann"), "instance:red the-loop start the-loop stop", true);
    assert_eq!(judge(&front, "issue_comment", &both), Outcome::Dropped("addressed-elsewhere"));
}

fn review(state: &str, body: Value) -> Value {
    json!({
        "action": "submitted",
        "repository": {"full_name": "octo/app"},
        "pull_request": {"number": 16, "head": {"ref": "issue-15"}, "body": "", "merged": false},
        "review": {"id": 7, "node_id": "PRR_7", "state": state, "body": body,
                   "user": {"login": "ann"}},
        "sender": {"login": "ann"},
    })
}

#[test]
fn seed002_a_webhook_review_that_is_pending_or_has_no_body_is_dropped_as_the_poller_drops_it() {
    let mut front = Front::new();
    front.session = SessionState::Active;
    for (state, body) in
        [("approved", Value::Null), ("commented", json!("  \n")), ("pending", json!("soon"))]
    {
        assert_eq!(
            judge(&front, "pull_request_review", &review(state, body)),
            Outcome::Dropped("empty-review"),
            "{state}"
        );
    }
    let said = review("changes_requested", json!("Please rename the flag."));
    assert_eq!(judge(&front, "pull_request_review", &said), Outcome::Delivered);
}

#[test]
fn seed002_an_outdated_webhook_inline_comment_keeps_its_original_line() {
    let payload = json!({
        "action": "created",
        "repository": {"full_name": "octo/app"},
        "pull_request": {"number": 16, "head": {"ref": "issue-15"}},
        "comment": {"id": 3, "body": "nit", "path": "src/lib.rs", "line": null,
                    "original_line": 42, "user": {"login": "ann"}},
        "sender": {"login": "ann"},
    });
    let event = Event::from_webhook("pull_request_review_comment", &payload);
    assert_eq!(event.comment.and_then(|c| c.line), Some(42));
}

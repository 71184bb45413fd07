//! The reference's edge cases (`receiver-dispatch-control.md` §9, `sessions-tmux-harness.md`
//! §7) pinned end to end, each test named after the behaviour and its edge number.

use loop_daemon::dispatcher::DeliveryStatus;
use loop_sim::{Fault, FaultKind};

use crate::common::SECRET;
use crate::dispatch_lab::{Harness, Lab, OWNER, REPO};

/// §9 edge 17: a comment queued behind a busy permit, on a session paused before the
/// worker takes it, is not pasted; it is settled `session-paused` and reported a success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e17_a_session_paused_between_enqueue_and_dequeue_skips_the_event_and_settles_it() {
    let mut lab = Lab::start("  maxConcurrentDispatches: 1\n").await;
    let number = lab.started_issue().await;
    // Another item's spawn holds the only permit while its announcement is slow.
    let other = lab.open_labelled_issue();
    lab.sim.inject(Fault {
        kind: FaultKind::Latency { millis: 4000 },
        times: 1,
        path_contains: Some(format!("/issues/{other}/comments")),
    });
    lab.comment(other, OWNER, "the-loop start");
    lab.wait_for_lines("session.spawned", 2).await;
    let queued = lab.comment(number, OWNER, "queued while the permit is taken");
    lab.wait_for_lines("dispatch.queued", 3).await;
    lab.comment(number, OWNER, "the-loop pause");
    lab.settle().await;

    let dropped = lab.named("dispatch.dropped");
    let skipped = dropped.iter().find(|d| d["reason"] == "session-paused").expect("skipped");
    let key = skipped["delivery_id"].as_str().expect("a key").to_owned();
    let was_queued = lab.named("dispatch.queued").iter().any(|q| q["delivery_id"] == key.as_str());
    assert!(was_queued, "skipped at dequeue, not refused at intake");
    let status = lab.dispatcher.delivery_status(&key, &[lab.item(number)]).await;
    assert_eq!(status, DeliveryStatus::Settled("session-paused".into()));
    let pasted = lab.pasted().await;
    assert!(!pasted.iter().any(|p| p.contains("queued while the permit")), "{pasted:#?}");
    assert_eq!(lab.reactions_on_comment(number, queued), ["eyes", "hooray"], "a success");
}

/// §9 edge 26: once a PR comment has bound the PR to the work item, a later PR event
/// whose description no longer names the item still reaches the item's session, and the
/// PR never gets a record of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e26_a_bound_pr_still_reaches_the_work_item_after_its_closing_keyword_is_removed() {
    let mut lab = Lab::start("").await;
    let number = lab.started_issue().await;
    let pr = lab
        .sim
        .open_pull_request(REPO, OWNER, "Fix it", &format!("Closes #{number}"), "fix-widget", &[])
        .expect("a pull request");
    lab.comment(pr, OWNER, "first note while linked");
    lab.settle().await;
    assert!(lab.pasted().await.last().expect("pasted").contains("first note while linked"));

    // The same comment event again, but as GitHub sends it after the description was
    // edited: no closing keyword, a new comment.
    let sent = lab.last_delivery("issue_comment");
    let mut body: serde_json::Value = serde_json::from_str(&sent.body).expect("json");
    assert!(body["issue"]["body"].as_str().is_some_and(|b| b.contains("Closes")), "{body:#}");
    body["issue"]["body"] = "Just a fix.".into();
    let id = body["comment"]["id"].as_u64().expect("a comment id") + 10_000;
    body["comment"]["id"] = id.into();
    body["comment"]["node_id"] = format!("IC_edited_{id}").into();
    body["comment"]["body"] = "second note after the edit".into();
    let text = body.to_string();
    let edited = loop_sim::Delivery {
        id: format!("{}-edited", sent.id),
        signature: Some(loop_sim::webhook::sign(SECRET.as_bytes(), text.as_bytes())),
        body: text,
        ..sent
    };
    lab.redeliver(&edited).await;
    let routed = lab.named("routing.routed");
    let routed = routed.iter().find(|r| r["delivery_id"] == edited.id).expect("routed");
    let pr_ref = lab.item(pr).to_string();
    assert_eq!(routed["work_items"], serde_json::json!([pr_ref]), "the link is gone: {routed:#}");
    let pasted = lab.pasted().await;
    assert!(pasted.last().expect("pasted").contains("second note after the edit"), "{pasted:#?}");
    assert_eq!(lab.named("session.spawned").len(), 1, "no session for the PR");
    let store = lab.store();
    assert!(store.load_local_record(&lab.item(pr)).expect("readable").is_none(), "no PR record");
}

/// A workspace root whose shared clone of the lab's repository already exists, cloned
/// from a local upstream holding `main` and `branch`: checkouts need no network.
fn seeded_workspace(branch: &str) -> tempfile::TempDir {
    let ws = tempfile::tempdir().expect("a temp dir");
    let upstream = ws.path().join("upstream");
    let git = |dir: &std::path::Path, args: &[&str]| {
        let output = std::process::Command::new("git")
            .args(["-c", "user.name=lab", "-c", "user.email=lab@example.test", "-C"])
            .arg(dir)
            .args(args)
            .output()
            .expect("git runs");
        assert!(output.status.success(), "git {args:?}: {output:?}");
    };
    std::fs::create_dir_all(&upstream).expect("upstream dir");
    git(&upstream, &["init", "-q", "-b", "main"]);
    git(&upstream, &["commit", "-q", "--allow-empty", "-m", "root"]);
    git(&upstream, &["branch", branch]);
    let shared = ws.path().join("root/github.com/octo");
    std::fs::create_dir_all(&shared).expect("shared dir");
    git(&shared, &["clone", "-q", upstream.to_str().expect("utf-8"), "app"]);
    ws
}

/// Two comments delivered with `sessionPerPr: always`: one into the PR's own session,
/// one into the work item's. Returns the lab, the item and PR refs and the two keys.
async fn delivered_into_both_endpoints(
    extra: &str,
) -> (Lab, tempfile::TempDir, loop_core::WorkItemRef, loop_core::WorkItemRef, String, String) {
    let ws = seeded_workspace("fix-widget");
    let extra = format!(
        "  workspace:\n    root: {}\n  tmux:\n    sessionPerPr: always\n{extra}",
        ws.path().join("root").display()
    );
    let mut lab = Lab::start(&extra).await;
    let number = lab.started_issue().await;
    let pr = lab
        .sim
        .open_pull_request(REPO, OWNER, "Fix it", &format!("Closes #{number}"), "fix-widget", &[])
        .expect("a pull request");
    lab.comment(pr, OWNER, "into the PR's own session");
    lab.settle().await;
    assert_eq!(lab.named("session.pr_spawned").len(), 1, "{:#?}", lab.events());
    let into_pr = lab.key_of_last("dispatch.succeeded");
    lab.comment(number, OWNER, "into the work item's session");
    lab.settle().await;
    let into_item = lab.key_of_last("dispatch.succeeded");
    assert_ne!(into_pr, into_item);
    let (item_ref, pr_ref) = (lab.item(number), lab.item(pr));
    (lab, ws, item_ref, pr_ref, into_pr, into_item)
}

/// §9 edge 19, as the poller needs it (decision in docs/dispatcher.md): a delivery the
/// ledger kept — delivered into the other endpoint — is `done` for the other endpoint's
/// ref too, where the reference (whose dedup cache is lost at restart) says
/// `unhandled`. The poller then resolves the comment: it neither forwards it again (the
/// dispatcher would call it a duplicate and the retries would end in a false give-up
/// notice) nor waits on it forever (`in-flight`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e19_a_delivery_into_the_other_endpoint_is_done_for_the_poller_not_retried() {
    let (lab, _ws, item_ref, pr_ref, into_pr, into_item) = delivered_into_both_endpoints("").await;
    for (key, other) in [(&into_pr, &item_ref), (&into_item, &pr_ref)] {
        let status = lab.dispatcher.delivery_status(key, std::slice::from_ref(other)).await;
        assert_eq!(status, DeliveryStatus::Done, "{key} for {other}");
        assert_eq!(
            loop_core::poll::comment_step(&status, 1, 3),
            loop_core::poll::CommentStep::Resolve
        );
    }
}

/// §9 edge 19, the per-endpoint half: once the ledger no longer holds the key (evicted
/// from `dedupCacheSize`), only the endpoints' `recentDeliveries` answer — `done` for the
/// endpoint that got it, `unhandled` for the other one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e19_without_the_ledgers_mark_done_is_per_endpoint() {
    let (mut lab, _ws, item_ref, pr_ref, into_pr, into_item) =
        delivered_into_both_endpoints("  dedupCacheSize: 1\n").await;
    // Recent marks outlive the bound up to 16 times it: 15 later ones push the first out
    // (the ledger is read back from its log at the restart).
    let log = lab.layout().local_dir().join("deliveries.log");
    let at = jiff::Timestamp::now();
    let filler: String = (0..15)
        .map(|n| format!("{{\"key\":\"filler:{n}\",\"state\":\"kept\",\"at\":\"{at}\"}}\n"))
        .collect();
    let mut text = std::fs::read_to_string(&log).expect("the delivery log");
    text.push_str(&filler);
    std::fs::write(&log, text).expect("the delivery log with later marks");
    lab.restart().await;
    let status = |key: &str, item: &loop_core::WorkItemRef| {
        let (dispatcher, key, item) = (lab.dispatcher.clone(), key.to_owned(), item.clone());
        async move { dispatcher.delivery_status(&key, &[item]).await }
    };
    assert_eq!(status(&into_pr, &pr_ref).await, DeliveryStatus::Done);
    assert_eq!(status(&into_pr, &item_ref).await, DeliveryStatus::Unhandled);
    assert_eq!(status(&into_item, &item_ref).await, DeliveryStatus::Done);
    assert_eq!(status(&into_item, &pr_ref).await, DeliveryStatus::Done, "still in the ledger");
}

/// A tmux wrapper that reports a tmux without control-client flags (so every probe is a
/// plain command) and, while `arm` exists, answers one pane probe with "dead" and
/// disarms: a probe that is dead once.
fn dead_once_tmux(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let arm = dir.join("dead-once");
    let script = dir.join("tmux-dead-once");
    let text = format!(
        "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = -V ] && {{ echo 'tmux 3.1'; exit 0; }}; done\n\
         case \"$*\" in *'list-panes -s'*'#{{pane_dead}}'*)\n  \
         if [ -e '{arm}' ]; then rm -f '{arm}'; echo 1; exit 0; fi;;\nesac\nexec tmux \"$@\"\n",
        arm = arm.display()
    );
    std::fs::write(&script, text).expect("the wrapper");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("mode");
    (script, arm)
}

/// Sessions §7 edge 47 (§2.5 step 1): the delivery finds the session dead, but by the
/// respawn a live harness holds the name: the event is pasted into it, nothing is
/// spawned or killed (`session.respawn_averted`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s47_a_live_session_found_at_respawn_is_delivered_into_not_respawned() {
    let wrapper = tempfile::tempdir().expect("a temp dir");
    let (tmux, arm) = dead_once_tmux(wrapper.path());
    let mut lab = Lab::start_with_tmux("", tmux).await;
    let number = lab.started_issue().await;
    let pid =
        lab.tmux(&["list-panes", "-t", &lab.item(number).tmux_session(), "-F", "#{pane_pid}"]);
    std::fs::write(&arm, "").expect("armed");
    lab.comment(number, OWNER, "still there?");
    lab.settle().await;

    assert!(!arm.exists(), "the dead-once probe was used");
    let averted = lab.named("session.respawn_averted");
    assert_eq!(averted.len(), 1, "{:#?}", lab.events());
    assert!(lab.named("session.respawned").is_empty());
    assert_eq!(lab.launches().len(), 1, "no second harness");
    let after =
        lab.tmux(&["list-panes", "-t", &lab.item(number).tmux_session(), "-F", "#{pane_pid}"]);
    assert_eq!(pid.stdout, after.stdout, "the same harness process");
    assert!(lab.pasted().await.last().expect("pasted").contains("still there?"));
    let key = lab.key_of_last("dispatch.succeeded");
    let status = lab.dispatcher.delivery_status(&key, &[lab.item(number)]).await;
    assert_eq!(status, DeliveryStatus::Done, "recorded as delivered");
}

/// `routing.harnessTrust` (on by default): a `claude` spawn pre-seeds Claude's trust for
/// the session's directory in the user config under `$CLAUDE_CONFIG_DIR`, before the
/// harness starts, and touches nothing under `$HOME`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_spawn_pre_seeds_the_trust_keys_for_its_directory() {
    let mut lab = Lab::start_with("", Harness::Claude).await;
    lab.started_issue().await;
    let work = lab.dir.path().join("work").display().to_string();
    let trusted = lab.named("workspace.trusted");
    assert_eq!(trusted.len(), 1, "{:#?}", lab.events());
    assert_eq!(trusted[0]["cwd"], work.as_str());
    let text = std::fs::read_to_string(lab.dir.path().join("claude/.claude.json"))
        .expect("the user config was written");
    let config: serde_json::Value = serde_json::from_str(&text).expect("json");
    let project = &config["projects"][work.as_str()];
    assert_eq!(project["hasTrustDialogAccepted"], true, "{config:#}");
    assert_eq!(project["hasCompletedProjectOnboarding"], true, "{config:#}");
    assert!(config.get("bypassPermissionsModeAccepted").is_none(), "no bypass asked for");
    let home = std::fs::read_dir(lab.dir.path().join("home")).expect("home").count();
    assert_eq!(home, 0, "nothing written under $HOME");
    // The same spawn wrote the-loop's plugin (loaded by the session with `--plugin-dir`,
    // nothing registered in Claude's settings) and named it in the spawn prompt.
    assert_eq!(lab.named("harness.plugin_registered").len(), 1, "{:#?}", lab.events());
    assert!(!lab.dir.path().join("claude/settings.json").exists(), "the settings untouched");
    assert!(lab.pasted().await[0].contains("/the-loop:work-on"), "the plugin's command is named");
    let events = lab.events();
    let at = |name: &str| events.iter().position(|e| e["event"] == name).expect(name);
    let (seeded, spawned) = (at("workspace.trusted"), at("session.spawned"));
    assert!(seeded < spawned, "seeded before the harness started");
}

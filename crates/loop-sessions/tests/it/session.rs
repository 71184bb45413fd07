//! Session lifecycles (spawn, respawn with resume and fallback, close retention) with the
//! stand-in hosted through a command harness, on real tmux.

use std::time::Duration;

use loop_core::WorkItemRef;
use loop_sessions::{
    CloseSettings, CommandHarness, Delivered, Launch, LaunchChoice, Liveness, RespawnSettings,
    Respawned, SessionError, SessionSite, Settled, Termination, TmuxError, session,
};

use crate::support::Lab;

fn site(lab: &Lab) -> SessionSite {
    let item: WorkItemRef = "github:octo/app#15".parse().expect("a valid ref");
    SessionSite::for_work_item(&item, lab.dir.path().to_owned(), None)
}

/// A lab with the stand-in spawned fresh at [`site`] (first prompt `boot`), and how it
/// was launched.
fn spawned() -> (Lab, CommandHarness, SessionSite, Launch) {
    let lab = Lab::new();
    let harness = lab.stand_in_harness(&[]);
    let site = site(&lab);
    let launch = lab.spawn(&harness, &site, "boot", &settings());
    (lab, harness, site, launch)
}

/// [`session::respawn`] at `site` with no model or effort chosen.
fn respawn(
    lab: &Lab,
    harness: &CommandHarness,
    site: &SessionSite,
    recorded: Option<&str>,
    prompt: &str,
    settings: &RespawnSettings,
) -> Result<Respawned, SessionError> {
    session::respawn(&lab.tmux, harness, site, recorded, &LaunchChoice::default(), prompt, settings)
}

/// [`session::deliver_or_respawn`] at `site` with no model or effort chosen, under
/// [`settings`].
fn deliver(
    lab: &Lab,
    harness: &CommandHarness,
    site: &SessionSite,
    recorded: Option<&str>,
    prompt: &str,
) -> Result<Delivered, SessionError> {
    let choice = LaunchChoice::default();
    session::deliver_or_respawn(&lab.tmux, harness, site, recorded, &choice, prompt, &settings())
}

fn settings() -> RespawnSettings {
    RespawnSettings {
        resume: true,
        probe: Duration::from_millis(500),
        ready_within: Duration::from_secs(30),
    }
}

/// Kills the harness process in the pane (the pane stays, dead).
fn kill_harness(lab: &Lab, site: &SessionSite) {
    let output =
        lab.tmux_raw(&["list-panes", "-t", &format!("={}", site.target), "-F", "#{pane_pid}"]);
    let pid = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(
        std::process::Command::new("kill").args(["-9", &pid]).status().expect("kill").success()
    );
    lab.wait_for_dead_pane(&site.target);
}

fn argv_of(launch: &serde_json::Value) -> Vec<String> {
    launch["argv"]
        .as_array()
        .expect("argv")
        .iter()
        .map(|a| a.as_str().expect("str").to_owned())
        .collect()
}

#[test]
fn a_fresh_spawn_pastes_the_first_prompt_once_the_harness_reads_input() {
    let lab = Lab::new();
    let harness = lab.stand_in_harness(&[]);
    let site = site(&lab);
    let launch = lab.spawn(&harness, &site, "boot\nprompt", &settings());
    assert!(!launch.resumed);
    let messages = lab.wait_for_messages("the boot prompt", |m| !m.is_empty());
    assert_eq!(messages, ["boot\nprompt"]);
    let launches = lab.launches();
    let argv = argv_of(&launches[0]);
    assert_eq!(
        argv[argv.len() - 2..],
        ["--session-id".to_owned(), launch.conversation.to_string()]
    );
    assert!(!argv.iter().any(|a| a.contains("boot")), "the prompt is never an argument");
}

#[test]
fn a_killed_harness_is_resumed_on_the_next_delivery_and_the_event_recorded() {
    let (lab, harness, site, first) = spawned();
    lab.wait_for_messages("the boot prompt", |m| m.len() == 1);
    kill_harness(&lab, &site);
    let recorded = first.conversation.to_string();
    let outcome =
        deliver(&lab, &harness, &site, Some(&recorded), "the next event").expect("respawned");
    let Delivered::Respawned(respawned) = outcome else {
        panic!("expected a respawn, got {outcome:?}")
    };
    assert!(respawned.launch.resumed);
    assert_eq!(respawned.launch.conversation, first.conversation, "the conversation id is kept");
    assert_eq!(respawned.resume_failure, None);
    let messages = lab.wait_for_messages("the event", |m| m.len() == 2);
    assert_eq!(messages[1], "the next event");
    let launches = lab.launches();
    assert_eq!(launches.len(), 2);
    assert_eq!(
        argv_of(&launches[1])[argv_of(&launches[1]).len() - 2..],
        ["--resume".to_owned(), recorded]
    );
    let again = deliver(&lab, &harness, &site, Some(first.conversation.as_str()), "and another")
        .expect("delivered");
    assert_eq!(again, Delivered::Pasted);
    lab.wait_for_messages("the third message", |m| m.len() == 3);
}

#[test]
fn an_unresumable_conversation_falls_back_to_a_fresh_one() {
    let lab = Lab::new();
    let harness = lab.stand_in_harness(&["--fail-resume"]);
    let site = site(&lab);
    // The probe ends as soon as the resumed harness dies; a long one only guards a slow
    // machine against reading a harness that has not exited yet as a survivor.
    let settings = RespawnSettings { probe: Duration::from_secs(20), ..settings() };
    let respawned = respawn(&lab, &harness, &site, Some("lost-conversation"), "event", &settings)
        .expect("respawned fresh");
    assert!(!respawned.launch.resumed);
    assert_ne!(respawned.launch.conversation.as_str(), "lost-conversation");
    assert!(respawned.resume_failure.expect("a reason").contains("exited within"));
    let launches = lab.launches();
    assert_eq!(launches.len(), 2, "one resume attempt, then one fresh start");
    assert!(argv_of(&launches[0]).contains(&"--resume".to_owned()));
    assert!(argv_of(&launches[1]).contains(&"--session-id".to_owned()));
    lab.wait_for_messages("the event", |m| m == ["event"]);
}

#[test]
fn a_flag_shaped_recorded_id_is_never_passed_to_the_harness() {
    let lab = Lab::new();
    let harness = lab.stand_in_harness(&[]);
    let site = site(&lab);
    let respawned = respawn(
        &lab,
        &harness,
        &site,
        Some("--dangerously-skip-permissions"),
        "event",
        &settings(),
    )
    .expect("respawned fresh");
    assert!(!respawned.launch.resumed);
    assert!(
        respawned.resume_failure.expect("a reason").contains("not a resumable conversation id")
    );
    let launches = lab.launches();
    assert_eq!(launches.len(), 1, "no resume was attempted");
    assert!(!argv_of(&launches[0]).iter().any(|a| a.contains("dangerously")));
}

#[test]
fn resume_on_respawn_off_starts_fresh_without_trying() {
    let lab = Lab::new();
    let harness = lab.stand_in_harness(&[]);
    let site = site(&lab);
    let settings = RespawnSettings { resume: false, ..settings() };
    let respawned = respawn(&lab, &harness, &site, Some("abc"), "e", &settings).expect("respawned");
    assert!(!respawned.launch.resumed);
    assert_eq!(respawned.resume_failure, None);
    assert_eq!(lab.launches().len(), 1);
}

#[test]
fn respawn_refuses_to_replace_a_live_occupant() {
    let (lab, harness, site, _) = spawned();
    let err = respawn(&lab, &harness, &site, Some("abc"), "e", &settings()).expect_err("occupied");
    assert!(matches!(err, SessionError::Tmux(TmuxError::SessionLive { .. })), "{err}");
    assert_eq!(lab.launches().len(), 1);
}

#[test]
fn closing_by_default_keeps_the_session_and_ends_the_harness() {
    let (lab, _, site, _) = spawned();
    let settled =
        session::settle(&lab.tmux, &site.target, &CloseSettings::default()).expect("settled");
    assert_eq!(settled, Settled::Kept { termination: Some(Termination::Terminated) });
    assert_eq!(lab.tmux.liveness(&site.target).expect("probe"), Liveness::Dead);
}

#[test]
fn closing_with_kill_harness_off_leaves_the_harness_running() {
    let (lab, _, site, _) = spawned();
    let close = CloseSettings { kill_harness: false, ..CloseSettings::default() };
    assert_eq!(
        session::settle(&lab.tmux, &site.target, &close).expect("settled"),
        Settled::Kept { termination: None }
    );
    assert_eq!(lab.tmux.liveness(&site.target).expect("probe"), Liveness::Live);
}

#[test]
fn closing_with_keep_session_off_kills_the_session() {
    let (lab, _, site, _) = spawned();
    let close = CloseSettings { keep_session: false, ..CloseSettings::default() };
    assert_eq!(
        session::settle(&lab.tmux, &site.target, &close).expect("settled"),
        Settled::Killed { existed: true }
    );
    assert_eq!(lab.tmux.liveness(&site.target).expect("probe"), Liveness::Absent);
    assert_eq!(
        session::settle(&lab.tmux, &site.target, &close).expect("settled"),
        Settled::Killed { existed: false }
    );
}

#[test]
fn closing_removes_the_checkout_unless_it_is_kept() {
    use loop_core::config::WorkspaceStrategy;
    use loop_sessions::workspace::{WorkspaceSettings, Workspaces};

    let lab = Lab::new();
    let harness = lab.stand_in_harness(&[]);
    let workspaces = Workspaces::new(WorkspaceSettings {
        root: lab.path("workspaces"),
        strategy: WorkspaceStrategy::Clone,
        git: "git".into(),
    });
    let item: WorkItemRef = "github:octo/app#15".parse().expect("a valid ref");
    // A checkout directory as `prepare` would leave it (the git side is covered in
    // tests/it/workspace.rs).
    let checkout = workspaces.checkout_path(&item).expect("path");
    std::fs::create_dir_all(&checkout).expect("checkout dir");
    let site = SessionSite::for_work_item(&item, checkout.clone(), None);
    lab.spawn(&harness, &site, "boot", &settings());

    let keep = CloseSettings { keep_checkout: true, ..CloseSettings::default() };
    let closed = session::close(&lab.tmux, Some(&workspaces), &item, &keep).expect("closed");
    assert!(closed.checkout.is_none());
    assert!(checkout.exists());
    let closed = session::close(&lab.tmux, Some(&workspaces), &item, &CloseSettings::default())
        .expect("closed");
    assert!(matches!(closed.checkout, Some(Ok(true))));
    assert!(!checkout.exists());
    assert_eq!(lab.tmux.liveness(&site.target).expect("probe"), Liveness::Dead, "session kept");
}

#[test]
fn a_killed_pane_takes_its_session_with_it_and_the_next_delivery_resumes() {
    let (lab, harness, site, first) = spawned();
    lab.wait_for_messages("the boot prompt", |m| m.len() == 1);
    assert!(lab.tmux_raw(&["kill-pane", "-t", &format!("={}:", site.target)]).status.success());
    assert_eq!(lab.tmux.liveness(&site.target).expect("probe"), Liveness::Absent);
    let outcome =
        deliver(&lab, &harness, &site, Some(first.conversation.as_str()), "after the kill")
            .expect("respawned");
    assert!(matches!(&outcome, Delivered::Respawned(r) if r.launch.resumed), "{outcome:?}");
    let messages = lab.wait_for_messages("the event", |m| m.len() == 2);
    assert_eq!(messages[1], "after the kill");
    let launches = lab.launches();
    assert!(
        argv_of(&launches[1]).ends_with(&["--resume".to_owned(), first.conversation.to_string()])
    );
}

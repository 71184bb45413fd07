//! The tmux runner against a real, private tmux server and the stand-in harness.

use std::path::Path;
use std::time::Duration;

use loop_core::WorkItemRef;
use loop_sessions::{DeliveryError, Liveness, SessionSite, Termination, TmuxError};

use crate::support::Lab;

const READY: Duration = Duration::from_secs(30);

fn item() -> WorkItemRef {
    "github:octo/app#15".parse().expect("a valid ref")
}

/// The site `target` in the lab's temp dir, serving [`item`] for instance `laptop`.
fn site(lab: &Lab, target: &str) -> SessionSite {
    SessionSite {
        target: target.to_owned(),
        cwd: lab.dir.path().to_owned(),
        work_item: Some(item()),
        instance: Some("laptop".to_owned()),
    }
}

/// Spawns `argv` as `target` in the lab's temp dir and waits until it reads raw input.
fn spawn_ready(lab: &Lab, target: &str, argv: &[String]) {
    lab.tmux.spawn(&site(lab, target), argv).expect("spawn succeeds");
    assert!(lab.tmux.await_input_ready(target, READY).expect("probe"), "harness never got ready");
}

fn spawn_stand_in(lab: &Lab, target: &str) {
    spawn_ready(lab, target, &lab.stand_in_argv(&[]));
}

/// A prompt with everything a shell or tmux might interpret, several lines, 10 000+ chars.
fn hostile_prompt() -> String {
    let mut prompt = String::from(
        "Review \"this\" and 'that': $(rm -rf ~) `id` ${HOME} \\n \\t \\\\ ; && | > < # #{pane_id}\n\
         \tindented line with a tab, ESC sequences \x1b[31mred\x1b[0m and a lone \x1b,\n\
         unicode: héllo wörld ✓ 🚀, percent %1 %% and tmux-ish ; kill-server \\;\n",
    );
    while prompt.chars().count() < 10_000 {
        prompt.push_str("0123456789 the quick brown fox jumps over the lazy dog\n");
    }
    prompt.push_str("last line without newline");
    prompt
}

#[test]
fn a_hostile_multiline_prompt_is_recorded_as_exactly_one_message() {
    let lab = Lab::new();
    spawn_stand_in(&lab, "loop-github-octo-app-15");
    let prompt = hostile_prompt();
    lab.tmux.deliver("loop-github-octo-app-15", &prompt).expect("delivered");
    let messages = lab.wait_for_messages("the message", |m| !m.is_empty());
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0], prompt);
    assert_eq!(lab.scratch_entries(), 0, "prompt files are removed after a delivery");
}

#[test]
fn successive_deliveries_arrive_in_order_as_separate_messages() {
    let lab = Lab::new();
    spawn_stand_in(&lab, "loop-github-octo-app-15");
    for n in 0..5 {
        lab.tmux
            .deliver("loop-github-octo-app-15", &format!("event {n}\nsecond line"))
            .expect("delivered");
    }
    let messages = lab.wait_for_messages("five messages", |m| m.len() == 5);
    let expected: Vec<String> = (0..5).map(|n| format!("event {n}\nsecond line")).collect();
    assert_eq!(messages, expected);
}

#[test]
fn a_prompt_cannot_end_its_own_paste_and_submit_early() {
    let lab = Lab::new();
    spawn_stand_in(&lab, "loop-github-octo-app-15");
    lab.tmux
        .deliver("loop-github-octo-app-15", "before\x1b[201~\rinjected\r\x1b[200~after")
        .expect("delivered");
    let messages = lab.wait_for_messages("the message", |m| !m.is_empty());
    assert_eq!(messages, ["before\ninjected\nafter"]);
}

#[test]
fn crlf_line_endings_arrive_as_single_line_breaks() {
    let lab = Lab::new();
    spawn_stand_in(&lab, "loop-github-octo-app-15");
    lab.tmux.deliver("loop-github-octo-app-15", "one\r\ntwo\r\n").expect("delivered");
    let messages = lab.wait_for_messages("the message", |m| !m.is_empty());
    assert_eq!(messages, ["one\ntwo\n"]);
}

#[test]
fn spawn_starts_in_the_cwd_and_exports_work_item_and_instance() {
    let lab = Lab::new();
    spawn_stand_in(&lab, "loop-github-octo-app-15");
    let launches = lab.launches();
    assert_eq!(launches.len(), 1);
    let cwd = std::fs::canonicalize(lab.dir.path()).expect("canonical temp dir");
    assert_eq!(Path::new(launches[0]["cwd"].as_str().expect("cwd")), cwd);
    assert_eq!(launches[0]["workItem"], "github:octo/app#15");
    assert_eq!(launches[0]["instance"], "laptop");
}

#[test]
fn liveness_reads_absent_live_and_dead_from_real_tmux() {
    let lab = Lab::new();
    let target = "loop-github-octo-app-15";
    assert_eq!(lab.tmux.liveness(target).expect("probe"), Liveness::Absent, "no server yet");
    spawn_stand_in(&lab, target);
    assert_eq!(lab.tmux.liveness(target).expect("probe"), Liveness::Live);
    lab.tmux.deliver(target, "/exit").expect("delivered");
    lab.wait_for_dead_pane(target);
    assert_eq!(lab.tmux.liveness("loop-github-octo-app-1").expect("probe"), Liveness::Absent);
}

#[test]
fn a_name_that_prefixes_a_live_session_is_still_absent() {
    let lab = Lab::new();
    spawn_stand_in(&lab, "loop-github-octo-app-15");
    assert_eq!(lab.tmux.liveness("loop-github-octo-app-1").expect("probe"), Liveness::Absent);
    let err =
        lab.tmux.deliver("loop-github-octo-app-1", "hello").expect_err("nothing to paste into");
    assert!(
        matches!(err, DeliveryError::SessionMissing { liveness: Liveness::Absent, .. }),
        "{err}"
    );
}

#[test]
fn a_harness_that_exits_at_once_leaves_a_dead_pane_thanks_to_remain_on_exit() {
    let lab = Lab::new();
    let argv = lab.stand_in_argv(&["--exit-on-start", "3"]);
    let target = "loop-github-octo-app-15";
    lab.tmux.spawn(&site(&lab, target), &argv).expect("spawned");
    lab.wait_for_dead_pane(target);
}

#[test]
fn delivery_into_a_dead_pane_is_session_missing_and_pastes_nothing() {
    let lab = Lab::new();
    let target = "loop-github-octo-app-15";
    spawn_stand_in(&lab, target);
    lab.tmux.deliver(target, "/exit").expect("delivered");
    lab.wait_for_dead_pane(target);
    let err = lab.tmux.deliver(target, "after death").expect_err("dead pane");
    assert!(matches!(err, DeliveryError::SessionMissing { liveness: Liveness::Dead, .. }), "{err}");
    assert_eq!(lab.messages(), ["/exit"]);
    assert_eq!(lab.scratch_entries(), 0, "the prompt file is removed on the failure path too");
}

#[test]
fn delivery_with_no_server_at_all_is_session_missing() {
    let lab = Lab::new();
    let err = lab.tmux.deliver("loop-github-octo-app-15", "hello").expect_err("no server");
    assert!(
        matches!(err, DeliveryError::SessionMissing { liveness: Liveness::Absent, .. }),
        "{err}"
    );
    assert_eq!(lab.scratch_entries(), 0);
}

#[test]
fn spawn_refuses_to_replace_a_live_session() {
    let lab = Lab::new();
    let target = "loop-github-octo-app-15";
    spawn_stand_in(&lab, target);
    let argv = lab.stand_in_argv(&[]);
    let err = lab.tmux.spawn(&site(&lab, target), &argv).expect_err("occupied");
    assert!(matches!(err, TmuxError::SessionLive { .. }), "{err}");
    assert_eq!(lab.launches().len(), 1, "no second harness was started");
}

#[test]
fn spawn_clears_a_dead_pane_and_starts_again() {
    let lab = Lab::new();
    let target = "loop-github-octo-app-15";
    spawn_stand_in(&lab, target);
    lab.tmux.deliver(target, "/exit").expect("delivered");
    lab.wait_for_dead_pane(target);
    spawn_stand_in(&lab, target);
    assert_eq!(lab.launches().len(), 2);
    lab.tmux.deliver(target, "second life").expect("delivered");
    lab.wait_for_messages("the message", |m| m.len() == 2);
}

#[test]
fn deliveries_continue_after_the_control_clients_session_ends() {
    let lab = Lab::new();
    spawn_stand_in(&lab, "loop-github-octo-app-1");
    spawn_stand_in(&lab, "loop-github-octo-app-2");
    lab.tmux.deliver("loop-github-octo-app-1", "to one").expect("delivered");
    // A delivery returns once tmux has written to the pane; wait for the harness to
    // have read it before its session is killed.
    lab.wait_for_messages("the first message", |m| m.len() == 1);
    assert!(lab.tmux.kill_session("loop-github-octo-app-1").expect("killed"));
    lab.tmux.deliver("loop-github-octo-app-2", "to two").expect("delivered after the kill");
    let messages = lab.wait_for_messages("two messages", |m| m.len() == 2);
    assert_eq!(messages, ["to one", "to two"]);
}

#[test]
fn terminate_ends_the_harness_with_sigterm_and_keeps_the_session() {
    let lab = Lab::new();
    let target = "loop-github-octo-app-15";
    spawn_stand_in(&lab, target);
    let outcome = lab.tmux.terminate_harness(target, Duration::from_secs(5)).expect("terminated");
    assert_eq!(outcome, Termination::Terminated);
    assert_eq!(lab.tmux.liveness(target).expect("probe"), Liveness::Dead, "pane kept for reading");
    assert_eq!(
        lab.tmux.terminate_harness(target, Duration::from_secs(5)).expect("no-op"),
        Termination::AlreadyExited
    );
}

#[test]
fn terminate_escalates_to_sigkill_when_sigterm_is_ignored() {
    let lab = Lab::new();
    let target = "loop-github-octo-app-15";
    let argv: Vec<String> =
        ["sh", "-c", "trap '' TERM; stty raw -echo; while :; do read -r line; done"]
            .map(String::from)
            .to_vec();
    spawn_ready(&lab, target, &argv);
    let outcome = lab.tmux.terminate_harness(target, Duration::from_millis(300)).expect("killed");
    assert_eq!(outcome, Termination::Killed);
    assert_eq!(lab.tmux.liveness(target).expect("probe"), Liveness::Dead);
}

#[test]
fn terminate_and_kill_on_a_missing_session_report_it_gone() {
    let lab = Lab::new();
    assert_eq!(
        lab.tmux.terminate_harness("loop-github-octo-app-15", Duration::ZERO).expect("no-op"),
        Termination::SessionMissing
    );
    assert!(!lab.tmux.kill_session("loop-github-octo-app-15").expect("no-op"));
}

#[test]
fn foreign_targets_are_refused_before_tmux_is_asked() {
    let lab = Lab::new();
    for target in ["my-work", "loop-x;rm", "loop-other:0.1"] {
        assert!(matches!(lab.tmux.liveness(target), Err(TmuxError::ForeignTarget { .. })));
        assert!(matches!(
            lab.tmux.terminate_harness(target, Duration::ZERO),
            Err(TmuxError::ForeignTarget { .. })
        ));
        assert!(matches!(
            lab.tmux.deliver(target, "x"),
            Err(DeliveryError::Tmux(TmuxError::ForeignTarget { .. }))
        ));
    }
}

#[test]
fn attach_command_names_the_server_and_is_read_only_on_request() {
    let lab = Lab::new();
    let argv = lab.tmux.attach_command("loop-github-octo-app-15", true).expect("argv");
    let argv: Vec<String> = argv.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let socket = lab.path("tmux.sock").display().to_string();
    assert_eq!(
        argv,
        [
            "tmux",
            "-S",
            &socket,
            "-f",
            "/dev/null",
            "attach-session",
            "-r",
            "-t",
            "=loop-github-octo-app-15"
        ]
    );
    let writable = lab.tmux.attach_command("loop-github-octo-app-15", false).expect("argv");
    assert!(!writable.iter().any(|a| a == "-r"));
}

#[test]
fn a_hung_harness_stays_live_and_takes_pastes_without_recording_them() {
    let lab = Lab::new();
    let target = "loop-github-octo-app-15";
    spawn_stand_in(&lab, target);
    lab.tmux.deliver(target, "/hang").expect("delivered");
    lab.wait_for_messages("the hang message", |m| m.len() == 1);
    lab.tmux.deliver(target, "into the void").expect("a hung harness still takes a paste");
    assert_eq!(lab.tmux.liveness(target).expect("probe"), Liveness::Live);
    assert_eq!(lab.messages(), ["/hang"]);
}

#[test]
fn an_empty_prompt_is_refused_before_tmux_is_asked() {
    let lab = Lab::new();
    let err = lab.tmux.deliver("loop-github-octo-app-15", "").expect_err("empty");
    assert!(matches!(err, DeliveryError::EmptyPrompt { .. }), "{err}");
    assert_eq!(lab.scratch_entries(), 0);
}

#[test]
fn concurrent_deliveries_from_several_threads_all_arrive_in_per_thread_order() {
    let lab = Lab::new();
    let targets = ["loop-github-octo-app-1", "loop-github-octo-app-2"];
    for target in targets {
        spawn_stand_in(&lab, target);
    }
    std::thread::scope(|scope| {
        for worker in 0..4 {
            let lab = &lab;
            scope.spawn(move || {
                for n in 0..10 {
                    let text = format!("worker {worker} message {n}\nsecond line");
                    lab.tmux.deliver(targets[worker % 2], &text).expect("delivered");
                }
            });
        }
    });
    let messages = lab.wait_for_messages("forty messages", |m| m.len() == 40);
    for worker in 0..4 {
        let mine: Vec<&String> =
            messages.iter().filter(|m| m.starts_with(&format!("worker {worker} "))).collect();
        let expected: Vec<String> =
            (0..10).map(|n| format!("worker {worker} message {n}\nsecond line")).collect();
        assert_eq!(mine, expected.iter().collect::<Vec<_>>(), "worker {worker}");
    }
}

/// tmux 3.3a's server crashes when a session is created or closed while a control client
/// attaches (reproduced with plain tmux commands in a few rounds). Here every delivery
/// attaches anew (the session its client was attached to has just ended) while a second
/// thread creates and ends sessions on the same runner: the server must live through it.
#[test]
fn sessions_created_and_ended_while_the_control_client_attaches_leave_the_server_up() {
    let lab = Lab::new();
    let idle: Vec<String> = vec!["cat".into()];
    lab.tmux.spawn(&site(&lab, "loop-anchor"), &idle).expect("the anchor session");
    let server_pid = || {
        let output = lab.tmux_raw(&["display-message", "-p", "-t", "=loop-anchor", "#{pid}"]);
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    let before = server_pid();
    assert!(!before.is_empty(), "the server answers");
    const ROUNDS: usize = 60;
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for round in 0..ROUNDS {
                let target = format!("loop-churn-{round}");
                lab.tmux.spawn(&site(&lab, &target), &idle).expect("a churn session");
                lab.tmux.kill_session(&target).expect("the churn session ends");
            }
        });
        for round in 0..ROUNDS {
            let target = format!("loop-deliver-{round}");
            lab.tmux.spawn(&site(&lab, &target), &idle).expect("a delivery session");
            lab.tmux.deliver(&target, "hello").expect("delivered");
            lab.tmux.kill_session(&target).expect("the delivery session ends");
        }
    });
    assert_eq!(server_pid(), before, "the tmux server survived (see dmesg for a segfault)");
}

/// The control client is attached to one session and carries every session's deliveries.
/// Ending that session (a work item closed) while another session's delivery is on the
/// client must not cut that delivery off: it would be reported failed (and then lost), or
/// pasted and reported failed (and then pasted twice) — what the soak found.
#[test]
fn ending_the_session_the_control_client_is_attached_to_leaves_other_deliveries_whole() {
    let lab = Lab::new();
    let idle: Vec<String> = vec!["cat".into()];
    lab.tmux.spawn(&site(&lab, "loop-other"), &idle).expect("the other session");
    const ROUNDS: usize = 40;
    for round in 0..ROUNDS {
        let attached = format!("loop-attached-{round}");
        lab.tmux.spawn(&site(&lab, &attached), &idle).expect("a session to attach to");
        // The client attaches to the session of the first delivery after it was let go.
        lab.tmux.deliver(&attached, "attach here").expect("delivered");
        std::thread::scope(|scope| {
            let deliveries = scope.spawn(|| {
                (0..10).map(|n| lab.tmux.deliver("loop-other", &format!("m{n}"))).collect()
            });
            std::thread::sleep(std::time::Duration::from_millis(round as u64 % 5));
            lab.tmux.kill_session(&attached).expect("the attached session ends");
            let results: Vec<Result<(), _>> = deliveries.join().expect("the delivering thread");
            for result in results {
                result.unwrap_or_else(|err| panic!("round {round}: a delivery was cut off: {err}"));
            }
        });
    }
}

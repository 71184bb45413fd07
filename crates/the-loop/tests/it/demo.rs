//! `the-loop demo` through the built binary: every step observed, exit 0, only the
//! announced tmux session left behind (or nothing with `--clean`), and two demos at once
//! do not see each other; a lingering demo (a person at a terminal) keeps its dashboard
//! up after the story until it is interrupted; `--agent claude` plays the same story with
//! the real Claude Code against a stand-in model, and says what to do without `claude`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::common::Cli;

/// Generous per-step patience: the machine may be busy building other crates.
const STEP_TIMEOUT: &str = "60";

/// A `Cli` whose temp dir (where the demo puts its directory) is private to the test.
fn cli() -> Cli {
    let mut cli = Cli::new();
    let tmp = cli.home().join("tmp");
    std::fs::create_dir_all(&tmp).expect("a private temp dir");
    cli.env("TMPDIR", tmp);
    cli
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Asserts the narration names every step and ticks every effect.
#[track_caller]
fn assert_every_step_observed(output: &Output) {
    let (stdout, stderr) = text(output);
    assert_eq!(output.status.code(), Some(0), "--- stdout\n{stdout}\n--- stderr\n{stderr}");
    for step in 1..=12 {
        assert!(stderr.contains(&format!("[{step}/12]")), "step {step} not narrated:\n{stderr}");
    }
    for effect in [
        "waits for an authorized `the-loop start`",
        "session spawned",
        "announced in a comment on demo/app#1: “🖥️ the-loop started an interactive session",
        "the first prompt was pasted",
        "carries `loop:phase-selection`",
        "the label moved to `loop:brainstorming`",
        "pasted into the session",
        "the gate blocked the claim: brainstorm.md is missing from the spec folder",
        "the gate passed: the label moved to `loop:requirements-definition`",
        "bound to #1's session",
        "src/parser.rs, line 42",
        "refused (unauthorized-actor)",
        "merged",
        "#1 ended",
        "the agent was stopped",
        "was pasted once",
        "the whole loop worked",
        "(live while the demo runs)",
    ] {
        assert!(stderr.contains(effect), "{effect:?} not reported:\n{stderr}");
    }
    assert!(!stderr.contains('✗'), "an effect was not observed:\n{stderr}");
    assert!(!stderr.contains("<!--"), "a raw marker in the narration:\n{stderr}");
}

fn tmux(socket: &Path, args: &[&str]) -> Output {
    Command::new("tmux").arg("-S").arg(socket).args(args).output().expect("tmux runs")
}

#[test]
fn the_demo_observes_every_step_and_leaves_only_the_announced_tmux_session() {
    let cli = cli();
    let output = cli
        .command(["demo", "--json", "--step-timeout", STEP_TIMEOUT])
        .output()
        .expect("the demo runs");
    assert_every_step_observed(&output);
    let (stdout, stderr) = text(&output);
    let summary: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON summary");
    assert_eq!(summary["ok"], true, "{summary:#}");
    let socket = PathBuf::from(summary["tmuxSocket"].as_str().expect("the socket"));
    assert!(socket.starts_with(cli.home()), "the demo stays in its temp dir: {socket:?}");
    let attach = summary["attach"].as_str().expect("an attach command");
    assert!(
        attach.contains(&socket.display().to_string()) && attach.contains("attach"),
        "{attach}"
    );
    assert!(stderr.contains(attach), "the attach command is printed:\n{stderr}");

    let sessions = tmux(&socket, &["list-sessions", "-F", "#{session_name}"]);
    assert_eq!(String::from_utf8_lossy(&sessions.stdout).trim(), "loop-github-demo-app-1");
    let panes =
        tmux(&socket, &["list-panes", "-s", "-t", "=loop-github-demo-app-1", "-F", "#{pane_dead}"]);
    assert_eq!(String::from_utf8_lossy(&panes.stdout).trim(), "1", "the agent was stopped");

    // The printed `explain` of the refused delivery works and names the reason.
    let config = summary["config"].as_str().expect("the config path");
    let refused = summary["explain"][1].as_str().expect("an explain of the refusal");
    let delivery = refused.rsplit(' ').next().expect("a delivery id");
    cli.run(["--config", config, "explain", delivery])
        .expect_code(0)
        .expect_stdout("mallory")
        .expect_stdout("routing.authorizedUsers");

    let killed = tmux(&socket, &["kill-server"]);
    assert!(killed.status.success(), "{killed:?}");
}

#[test]
fn two_demos_at_once_both_pass_and_clean_leaves_nothing() {
    let cli = cli();
    let dirs: Vec<PathBuf> = ["one", "two"].iter().map(|n| cli.home().join(n)).collect();
    let children: Vec<_> = dirs
        .iter()
        .map(|dir| {
            cli.command(["demo", "--clean", "--step-timeout", STEP_TIMEOUT, "--dir"])
                .arg(dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("the demo starts")
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().expect("the demo ends");
        assert_every_step_observed(&output);
        assert!(text(&output).1.contains("cleaned up"), "{}", text(&output).1);
    }
    for dir in &dirs {
        assert!(!dir.exists(), "`--clean` removed {}", dir.display());
    }
}

#[test]
fn the_demo_with_the_real_claude_code_observes_every_step() {
    let Some(claude) = loop_sim::test_support::claude_code() else { return };
    let mut cli = cli();
    let bin = claude.parent().expect("the CLI's directory");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    cli.env("PATH", path);
    let output = cli
        .command(["demo", "--agent", "claude", "--clean", "--step-timeout", STEP_TIMEOUT])
        .output()
        .expect("the demo runs");
    assert_every_step_observed(&output);
    let stderr = text(&output).1;
    assert!(stderr.contains("the real Claude Code ("), "{stderr}");
    assert!(!cli.home().join(".claude.json").exists(), "the user's own Claude config is untouched");
}

#[test]
fn the_claude_demo_without_claude_on_path_says_how_to_get_it() {
    let mut cli = cli();
    cli.env("PATH", "/usr/bin:/bin");
    cli.run(["demo", "--agent", "claude"])
        .expect_code(2)
        .expect_stderr("`claude` is not on PATH")
        .expect_stderr("npm install -g @anthropic-ai/claude-code");
}

#[test]
fn a_demo_directory_that_is_not_empty_is_refused() {
    let cli = cli();
    let dir = cli.write("busy/file.txt", "mine").parent().expect("a parent").to_owned();
    cli.run(["demo", "--dir", &dir.display().to_string()])
        .expect_code(2)
        .expect_stderr("is not empty");
    assert!(dir.join("file.txt").exists(), "nothing of the user's is touched");
}

#[test]
fn the_hidden_stand_in_harness_verb_refuses_unknown_arguments() {
    cli().run(["stand-in-harness", "--bogus"]).expect_code(2).expect_stderr("--bogus");
}

#[test]
fn a_lingering_demo_keeps_its_dashboard_up_after_the_story_until_interrupted() {
    use std::io::{Read as _, Write as _};
    use std::sync::{Arc, Mutex};

    let cli = cli();
    let root = loop_demo::directory(Some(&cli.home().join("lingering")), &cli.home().join("tmp"))
        .expect("the demo directory");
    let paths = loop_demo::Paths::new(&root);
    let settings = loop_demo::Settings {
        step_timeout: std::time::Duration::from_secs(60),
        agent: loop_demo::Agent::StandIn(vec![
            env!("CARGO_BIN_EXE_the-loop").to_owned(),
            "stand-in-harness".to_owned(),
        ]),
        linger: true,
    };
    let (lingering, told) = tokio::sync::oneshot::channel::<String>();
    let lingering = Mutex::new(Some(lingering));
    let page = Arc::new(Mutex::new(String::new()));
    // The "Ctrl-C": once the story is over, it loads the dashboard, then interrupts.
    let interrupt = {
        let page = Arc::clone(&page);
        async move {
            let url = told.await.expect("the demo says it lingers");
            let authority = url.trim_start_matches("http://").trim_end_matches('/').to_owned();
            let answer = tokio::task::spawn_blocking(move || {
                let mut stream =
                    std::net::TcpStream::connect(&authority).expect("the dashboard is up");
                write!(stream, "GET / HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n")
                    .unwrap();
                let mut answer = String::new();
                stream.read_to_string(&mut answer).unwrap();
                answer
            })
            .await
            .unwrap();
            *page.lock().unwrap() = answer;
        }
    };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let ran = runtime
        .block_on(loop_demo::run(paths.clone(), &settings, interrupt, |told| {
            if let loop_demo::Told::Lingering { dashboard } = told
                && let Some(lingering) = lingering.lock().unwrap().take()
            {
                let _ = lingering.send(dashboard);
            }
        }))
        .expect("the demo runs");
    let loop_demo::Ran::Played { outcome, .. } = ran else { panic!("the story was interrupted") };
    assert!(outcome.ok(), "{outcome:?}");
    let page = page.lock().unwrap().clone();
    assert!(page.starts_with("HTTP/1.1 200"), "the dashboard answered after the story: {page}");
    assert!(page.contains("/assets/app.js"), "{page}");
    loop_demo::clean(&paths).expect("clean");
}

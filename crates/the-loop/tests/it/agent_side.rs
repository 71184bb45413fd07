//! The agent's side through the real binary, the simulator and real tmux: a session the
//! service spawned runs `the-loop ask` from inside its pane (the stand-in agent's `!`
//! shell, with the pane's own environment), the authorized answer reaches it and the
//! question never does; `the-loop reply` pastes and mirrors, and refuses a paused
//! session; the spawn launches the session on the plugin (`--plugin-dir`); the plugin's
//! `hook link-pr` links what `gh pr create` printed and ignores garbage.

use std::path::PathBuf;

use loop_sim::test_support::{read_lines, wait_for};
use serde_json::Value;

use crate::machine::{Machine, World};

const REPO: &str = World::REPO;
const ITEM: &str = "github:octo/app#1";
const TARGET: &str = "=loop-github-octo-app-1:";
const LABEL: &str = "the-loop: auto-execute";

/// The simulator, and a machine polling it whose `claude` is the stand-in agent.
fn site() -> (World, Machine) {
    let world = World::new();
    let machine = Machine::new(&world, "");
    (world, machine)
}

/// POSTs `body` as JSON to the machine's control plane; the status and the JSON answer.
fn post(site: &Machine, path: &str, body: &Value) -> (u16, Value) {
    site.api("POST", path, Some(body))
}

#[test]
fn the_agent_asks_from_its_pane_the_answer_arrives_and_the_operator_replies() {
    let (world, site) = site();
    world.sim.open_issue(REPO, "octocat", "Pick a database", &[LABEL]).unwrap();
    site.start();
    world.sim.comment(REPO, 1, "octocat", "the-loop start").unwrap();
    site.wait_for_message("the-loop auto-execute: github:octo/app#1");

    // The spawn wrote the plugin and launched the session on it (`--plugin-dir`); the
    // user's own settings are not touched.
    let launch = read_lines(&site.launches).values.pop().expect("a launch");
    let argv: Vec<&str> =
        launch["argv"].as_array().unwrap().iter().flat_map(Value::as_str).collect();
    let at = argv.iter().position(|a| *a == "--plugin-dir").expect("--plugin-dir in the argv");
    let plugin = PathBuf::from(argv[at + 1]);
    assert!(plugin.join("commands/work-on.md").is_file(), "{argv:?}");
    assert!(plugin.join(".claude-plugin/plugin.json").is_file());
    assert!(!site.cli.home().join(".claude/settings.json").exists(), "no user settings written");

    // The agent asks, with no --work-item: the pane's THE_LOOP_WORK_ITEM and config.
    site.type_into_pane(
        TARGET,
        "!the-loop ask --question 'Which database?' --option Postgres --option SQLite",
    );
    let asked = wait_for("the ask to run in the pane", || {
        read_lines(&site.record)
            .values
            .iter()
            .find(|line| line["shell"].is_string())
            .cloned()
            .ok_or("not yet")
    });
    assert_eq!(asked["status"], 0, "{asked}");
    assert!(asked["stdout"].as_str().unwrap().contains("/issues/1#issuecomment-"), "{asked}");
    let posted = world.sim.comments_by(REPO, 1, world.sim.viewer());
    let question = posted.iter().find(|c| c.contains("Which database?")).expect("the question");
    assert!(question.contains("1. Postgres\n2. SQLite"), "{question}");
    assert!(question.contains("<!-- the-loop:agent-comment -->"), "self-marked: {question}");
    let waiting = site.events("session.awaiting_input");
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0]["work_item"], ITEM);
    assert!(!waiting[0].to_string().contains("Which database?"), "no text in the log");

    // The authorized answer is the next event into the session; the question is not.
    world.sim.comment(REPO, 1, "octocat", "Use Postgres.").unwrap();
    site.wait_for_message("Use Postgres.");
    assert!(
        !site.messages().iter().any(|m| m.contains("Which database?")),
        "the self-marked question is never pasted back"
    );
    wait_for("the answer recorded", || {
        let sent = site.events("session.reply_sent");
        (sent.len() == 1 && sent[0]["via"] == "comment").then_some(()).ok_or(format!("{sent:?}"))
    });

    // The operator replies from the machine: pasted under a header, mirrored on GitHub.
    site.run(&["reply", ITEM, "Also add an index on email."])
        .expect_code(0)
        .expect_stdout("#issuecomment-");
    let pasted = site.wait_for_message("Also add an index on email.");
    assert!(pasted.starts_with("# Reply from the operator of the-loop"), "{pasted}");
    assert!(pasted.contains("`alice`"), "{pasted}");
    let mirrored = world.sim.comments_by(REPO, 1, world.sim.viewer());
    assert!(
        mirrored
            .iter()
            .any(|c| c.contains("`alice` answered") && c.contains("> Also add an index")),
        "{mirrored:?}"
    );

    // The same from the dashboard: the HTTP route.
    let (status, answer) = post(
        &site,
        "/api/v1/sessions/reply",
        &serde_json::json!({"ref": ITEM, "text": "Ship it behind a flag.", "actor": "bob"}),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["delivered"], true);
    assert!(site.wait_for_message("Ship it behind a flag.").contains("`bob`"));
    let (status, _) = post(
        &site,
        "/api/v1/sessions/reply",
        &serde_json::json!({"ref": "github:octo/app#9", "text": "x"}),
    );
    assert_eq!(status, 404);
    let (status, _) = post(
        &site,
        "/api/v1/sessions/reply",
        &serde_json::json!({"ref": "octo/app#1", "text": "x"}),
    );
    assert_eq!(status, 400, "a malformed ref");
    let (status, answer) = post(
        &site,
        "/api/v1/sessions/link-pr",
        &serde_json::json!({"ref": ITEM, "pullRequest": "#4"}),
    );
    assert_eq!((status, &answer["linked"]), (200, &Value::Bool(true)), "{answer}");

    site.run(&["reply", ITEM, "  "]).expect_code(2).expect_stderr("empty");
    site.run(&["reply", "github:octo/app#9", "hello"])
        .expect_code(1)
        .expect_stderr("no live session");
    site.run(&["sessions", "pause", "--work-item", ITEM, "--no-comment"]).expect_code(0);
    site.run(&["reply", ITEM, "hello"]).expect_code(2).expect_stderr("paused");
    let (status, _) =
        post(&site, "/api/v1/sessions/reply", &serde_json::json!({"ref": ITEM, "text": "hello"}));
    assert_eq!(status, 400, "a paused session is refused over HTTP too");
    assert!(!site.messages().iter().any(|m| m.contains("hello")), "nothing pasted when refused");
}

#[test]
fn ask_outside_a_session_is_refused_and_posts_nothing() {
    let (world, site) = site();
    world.sim.open_issue(REPO, "octocat", "Nothing started", &[]).unwrap();
    site.run(&["ask", "--work-item", ITEM, "--question", "Anyone?"])
        .expect_code(2)
        .expect_stderr("no live session");
    let mut cli_without = site.run(&["ask", "--question", "Anyone?"]);
    cli_without.stderr.make_ascii_lowercase();
    assert_eq!(cli_without.code, Some(2), "{cli_without}");
    assert!(cli_without.stderr.contains("--work-item"), "{cli_without}");
    assert!(world.sim.comments_by(REPO, 1, world.sim.viewer()).is_empty());
}

/// Feeds `input` to `the-loop hook link-pr` in a pane-like environment.
fn hook(site: &Machine, input: &str) -> std::process::Output {
    use std::io::Write as _;
    let mut child = site
        .cli
        .command(["hook", "link-pr"])
        .env("THE_LOOP_WORK_ITEM", ITEM)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn the_post_tool_use_hook_links_a_created_pull_request_and_ignores_anything_else() {
    let (world, site) = site();
    world.sim.open_issue(REPO, "octocat", "Work", &[]).unwrap();
    site.run(&["sessions", "start", "--work-item", ITEM, "--no-comment"]).expect_code(0);
    let created = serde_json::json!({
        "session_id": "abc",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "gh pr create --fill"},
        "tool_response": {"stdout": "https://github.com/octo/app/pull/2\n", "stderr": "", "interrupted": false},
    });
    for input in ["garbage", "{}", "{\"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"ls\"}}"] {
        let out = hook(&site, input);
        assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    }
    assert!(site.events("session.pr_linked").is_empty(), "garbage links nothing");
    let out = hook(&site, &created.to_string());
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    let linked = site.events("session.pr_linked");
    assert_eq!(linked.len(), 1, "{linked:?}");
    assert_eq!(linked[0]["pull_request"], "github:octo/app#2");
    let shown: Value = serde_json::from_str(
        &site.run(&["sessions", "show", "--work-item", ITEM, "--json"]).stdout,
    )
    .unwrap();
    assert!(shown.to_string().contains("github:octo/app#2"), "{shown}");
    // Again: idempotent, still exit 0.
    assert!(hook(&site, &created.to_string()).status.success());
    assert_eq!(site.events("session.pr_linked").len(), 1);
}

#[test]
fn harness_install_registers_the_plugin_for_a_person_and_status_says_where() {
    let (_world, site) = site();
    site.run(&["harness", "status"])
        .expect_code(0)
        .expect_stdout("spawned:        sessions the-loop spawns load it")
        .expect_stdout("your own:       not installed");
    site.run(&["harness", "install", "claude"])
        .expect_code(0)
        .expect_stderr("`/the-loop:work-on` in Claude Code");
    let status = site.run(&["harness", "status", "--json"]);
    status.expect_code(0);
    let status: Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(status["inUse"], true, "{status:#}");
    assert_eq!(status["spawnedSessions"], true, "{status:#}");
    assert_eq!(status["mcpUrl"], format!("http://127.0.0.1:{}/mcp", site.api_port));
    assert!(PathBuf::from(status["command"].as_str().unwrap()).is_file());
    let hooks = std::fs::read_to_string(
        PathBuf::from(status["marketplace"].as_str().unwrap()).join("the-loop/hooks/hooks.json"),
    )
    .unwrap();
    assert!(hooks.contains("hook link-pr"), "{hooks}");
}

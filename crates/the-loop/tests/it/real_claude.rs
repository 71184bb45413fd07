//! The real Claude Code through the binary (docs/real-claude.md): the service spawns the
//! pinned `claude` CLI in real tmux, against loop-sim's Messages API stand-in, and what
//! reaches the model is read from the stand-in's request log.
//!
//! Every test here skips, saying so, only where npm cannot install the CLI
//! (`loop_sim::test_support::claude_code`).

use std::path::Path;

use loop_sim::model_api::{ModelApi, ModelRequest, Reply, Rule};
use loop_sim::test_support::{claude_code, wait_for};
use serde_json::{Value, json};

use crate::machine::{Machine, World};

const REPO: &str = World::REPO;
const LABEL: &str = "the-loop: auto-execute";

/// A world, its model stand-in, and a machine running the real Claude Code against it;
/// `None` (the test skips) when the CLI cannot be had.
fn site(routing: &str) -> Option<(World, ModelApi, Machine)> {
    let cli = claude_code()?;
    let world = World::new();
    let model = world.model();
    let machine = Machine::with_claude(&world, cli, &model, routing);
    Some((world, model, machine))
}

/// The heading of a work item's spawn prompt.
fn spawn_heading(number: u64) -> String {
    format!("the-loop auto-execute: github:{REPO}#{number}")
}

/// The model's turns whose last user message holds `needle`.
fn turns_with(model: &ModelApi, needle: &str) -> Vec<ModelRequest> {
    model
        .turns()
        .into_iter()
        .filter(|t| t.user_text.as_deref().is_some_and(|u| u.contains(needle)))
        .collect()
}

/// Waits until a turn holding `needle` reached the model; the first such turn.
#[track_caller]
fn wait_for_turn(model: &ModelApi, needle: &str) -> ModelRequest {
    wait_for(&format!("a turn holding {needle:?} at the model"), || {
        turns_with(model, needle).into_iter().next().ok_or_else(|| summary(model))
    })
}

/// The model's turns, one line each, for a failed wait.
fn summary(model: &ModelApi) -> String {
    let turns = model.turns();
    let lines: Vec<String> = turns
        .iter()
        .map(|t| {
            let text = t.user_text.as_deref().unwrap_or_default();
            format!("{:?} {}: {:?}", t.conversation, t.at, text)
        })
        .collect();
    format!("{} turns: {lines:#?}", turns.len())
}

/// Starts `number` with an authorized `the-loop start` and waits for its spawn.
fn start_item(world: &World, number: u64) {
    world.sim.comment(REPO, number, "octocat", "the-loop start").expect("the start comment");
}

/// The `field` of `item`'s own endpoint in its session record, once it is recorded (the
/// spawn records its handles after the prompt went in).
fn endpoint_field(machine: &Machine, item: &str, field: &str) -> String {
    let at = format!("/session/endpoints/{}/{field}", item.replace('/', "~1"));
    wait_for(&format!("{item}'s {field} recorded"), || {
        let shown = machine.run(&["sessions", "show", "--work-item", item, "--json"]);
        let shown: Value = serde_json::from_str(&shown.stdout).unwrap_or_default();
        shown.pointer(&at).and_then(Value::as_str).map(str::to_owned).ok_or(shown)
    })
}

/// The conversation id the session record holds for `item`.
fn conversation_of(machine: &Machine, item: &str) -> String {
    endpoint_field(machine, item, "harnessSessionId")
}

/// Where Claude Code keeps `conversation`'s transcript for `item`'s session.
fn transcript_of(machine: &Machine, item: &str, conversation: &str) -> std::path::PathBuf {
    let cwd = endpoint_field(machine, item, "cwd");
    let project = loop_sessions::harness::claude_project_dir_name(Path::new(&cwd));
    machine.cli.home().join(".claude/projects").join(project).join(format!("{conversation}.jsonl"))
}

#[test]
fn three_items_started_back_to_back_each_reach_the_model_with_their_first_prompt_once() {
    let Some((world, model, machine)) = site("") else { return };
    for title in ["Fix the parser", "Speed up the build", "Document the API"] {
        world.sim.open_issue(REPO, "octocat", title, &[LABEL]).unwrap();
    }
    machine.start();
    for number in 1..=3 {
        start_item(&world, number);
    }
    for number in 1..=3 {
        let first = wait_for_turn(&model, &spawn_heading(number));
        let item = format!("github:{REPO}#{number}");
        assert_eq!(first.conversation, Some(conversation_of(&machine, &item)), "{item}");
    }
    // Each prompt went in once: nothing was typed twice, nothing is left in a box.
    for number in 1..=3 {
        let heading = spawn_heading(number);
        assert_eq!(turns_with(&model, &heading).len(), 1, "{heading}: {}", summary(&model));
    }
    wait_for("three spawns logged", || {
        let spawned = machine.events("session.spawned").len();
        (spawned == 3).then_some(()).ok_or(spawned)
    });
}

#[test]
fn a_comment_is_the_next_turn_and_a_killed_agent_resumes_the_same_conversation() {
    let Some((world, model, machine)) = site("") else { return };
    world.sim.open_issue(REPO, "octocat", "Fix the parser", &[LABEL]).unwrap();
    machine.start();
    start_item(&world, 1);
    let first = wait_for_turn(&model, &spawn_heading(1));
    let conversation = first.conversation.clone().expect("Claude names its conversation");

    model
        .script(Rule::when_contains("Please also cover", Reply::text("Covered the empty input.")))
        .unwrap();
    world.sim.comment(REPO, 1, "octocat", "Please also cover the empty input.").unwrap();
    let next = wait_for_turn(&model, "Please also cover the empty input.");
    assert_eq!(next.conversation.as_deref(), Some(conversation.as_str()), "the same conversation");
    // The turn is over once Claude wrote its answer down (a turn cut off mid-way is
    // re-sent by Claude itself on resume, which is not what this test is about).
    let transcript = transcript_of(&machine, "github:octo/app#1", &conversation);
    wait_for("the answer in the transcript", || {
        let written = std::fs::read_to_string(&transcript).unwrap_or_default();
        written
            .contains("Covered the empty input.")
            .then_some(())
            .ok_or_else(|| transcript.display().to_string())
    });

    // The agent dies (SIGKILL: no SessionEnd, no clean exit); the pane stays, dead.
    let killed_at = kill_agent(&machine);

    // Seen within seconds, in Needs you, and told once on the item.
    let exited = wait_for_state(&machine, "exited");
    let seen_at: jiff::Timestamp = exited["ts"].as_str().unwrap_or_default().parse().unwrap();
    assert!(seen_at.duration_since(killed_at).as_secs() <= 5, "{exited}");
    assert_eq!(session_row(&machine, "github:octo/app#1")["agentState"], "exited");
    let (_, attention) = machine.api("GET", "/api/v1/attention", None);
    let listed = attention.as_array().into_iter().flatten().any(|r| r["kind"] == "agent-waiting");
    assert!(listed, "{attention:#}");
    let told = || -> usize {
        let posted = world.sim.comments_by(REPO, 1, world.sim.viewer());
        posted.iter().filter(|c| c.contains("the agent exited")).count()
    };
    wait_for("the exit told", || (told() == 1).then_some(()).ok_or_else(|| machine.trail()));

    world.sim.comment(REPO, 1, "octocat", "And keep the old behaviour behind a flag.").unwrap();
    let resumed = wait_for_turn(&model, "And keep the old behaviour behind a flag.");
    assert_eq!(resumed.conversation.as_deref(), Some(conversation.as_str()), "resumed, not new");
    let history = resumed.history.join("\n");
    for earlier in [spawn_heading(1).as_str(), "Please also cover the empty input."] {
        assert!(history.contains(earlier), "the resumed turn carries {earlier:?}: {history}");
    }
    let respawned = wait_for("the respawn logged", || {
        machine.events("session.respawned").first().cloned().ok_or_else(|| machine.trail())
    });
    assert_eq!(respawned["resumed"], true, "{respawned}");
    assert_eq!(machine.events("session.respawned").len(), 1);
    wait_for_state_after(&machine, "idle", "exited");
    assert_eq!(told(), 1, "one comment per exit");
    for needle in
        ["Please also cover the empty input.", "And keep the old behaviour behind a flag."]
    {
        assert_eq!(turns_with(&model, needle).len(), 1, "{needle} once: {}", summary(&model));
    }

    // Killed again: `the-loop resume` on the item brings it back, with its conversation.
    kill_agent(&machine);
    wait_for("the second exit told", || (told() == 2).then_some(()).ok_or_else(|| machine.trail()));
    world.sim.comment(REPO, 1, "octocat", "the-loop resume").unwrap();
    let back = wait_for_turn(&model, "the-loop resume");
    assert_eq!(back.conversation.as_deref(), Some(conversation.as_str()), "resumed, not new");
    wait_for("the second respawn", || {
        let respawns = machine.events("session.respawned");
        (respawns.len() == 2 && respawns[1]["resumed"] == true)
            .then_some(())
            .ok_or_else(|| format!("{respawns:?}"))
    });
    let rejected = machine.events("control.rejected");
    assert!(rejected.is_empty(), "resume is not refused: {rejected:?}");
    let recorded = machine.run(&["sessions", "show", "--work-item", "github:octo/app#1", "--json"]);
    assert!(recorded.stdout.contains("\"resume\""), "the command recorded: {}", recorded.stdout);
}

/// Kills the agent of `octo/app#1` (SIGKILL: no SessionEnd, no clean exit) and waits for
/// its pane to be dead; when it was killed.
fn kill_agent(machine: &Machine) -> jiff::Timestamp {
    let target = "=loop-github-octo-app-1:";
    let pid = machine.tmux().args(["display-message", "-p", "-t", target, "#{pane_pid}"]).output();
    let pid = String::from_utf8_lossy(&pid.expect("tmux answers").stdout).trim().to_owned();
    let killed = std::process::Command::new("kill").args(["-KILL", &pid]).status();
    assert!(killed.is_ok_and(|s| s.success()), "kill -KILL {pid}");
    let killed_at = jiff::Timestamp::now();
    wait_for("the pane to die", || {
        (machine.tmux_pane_dead(target) == "1").then_some(()).ok_or("alive")
    });
    killed_at
}

#[test]
fn the_plugin_is_loaded_its_hook_links_the_pull_request_and_it_validates() {
    let routing = "  harnessArgs:\n    claude: [--allowedTools, \"Bash(gh pr create:*)\"]\n";
    let Some((world, model, machine)) = site(routing) else { return };
    world.sim.open_issue(REPO, "octocat", "Fix the parser", &[LABEL]).unwrap();
    // The agent's `gh`: prints the pull request's address, as `gh pr create` does.
    let url = format!("https://github.com/{REPO}/pull/2");
    crate::common::executable(&machine.cli.cwd().join("bin/gh"), &format!("echo {url}"));
    model
        .script(Rule::when_contains(
            spawn_heading(1),
            Reply::tool_use("Bash", json!({"command": "gh pr create --fill", "description": "Open the pull request"})),
        ).then(Reply::text("Opened the pull request.")))
        .unwrap();
    machine.start();
    start_item(&world, 1);

    // The hook ran `the-loop hook link-pr` on the tool call: the pull request is linked.
    wait_for("the pull request linked by the plugin's hook", || {
        let linked = machine.events("session.pr_linked");
        linked.first().cloned().ok_or_else(|| summary(&model))
    });
    let first = wait_for_turn(&model, &spawn_heading(1));
    assert!(first.skills.iter().any(|s| s == "the-loop:work-on"), "listed: {:?}", first.skills);
    let after_tool = wait_for_turn(&model, &url);
    assert!(after_tool.tool_results.iter().any(|r| r.content.contains(&url)), "{after_tool:?}");

    // The plugin Claude was pointed at validates with Claude's own checker.
    let plugin = machine.root.join("harness/claude-marketplace/the-loop");
    let validated = std::process::Command::new(claude_code().expect("installed above"))
        .args(["plugin", "validate"])
        .arg(&plugin)
        .env("HOME", machine.cli.home())
        .output()
        .expect("claude plugin validate runs");
    let said = String::from_utf8_lossy(&validated.stdout);
    assert!(validated.status.success(), "{said}{}", String::from_utf8_lossy(&validated.stderr));
    assert!(!said.contains("error"), "{said}");
    assert!(Path::new(&plugin).join("commands/work-on.md").is_file());
}

/// The `agent.state` line that first says `state` for the item's session.
fn wait_for_state(machine: &Machine, state: &str) -> Value {
    wait_for(&format!("agent.state {state}"), || {
        let lines = machine.events("agent.state");
        lines.iter().find(|l| l["state"] == state).cloned().ok_or_else(|| machine.trail())
    })
}

/// Waits until an `agent.state` line says `state` after one that said `after`.
fn wait_for_state_after(machine: &Machine, state: &str, after: &str) {
    wait_for(&format!("agent.state {state} after {after}"), || {
        let lines = machine.events("agent.state");
        let from = lines.iter().position(|l| l["state"] == after).ok_or_else(|| machine.trail())?;
        let found = lines[from..].iter().any(|l| l["state"] == state);
        found.then_some(()).ok_or_else(|| machine.trail())
    })
}

/// The item's session row as `GET /api/v1/sessions` serves it.
fn session_row(machine: &Machine, item: &str) -> Value {
    let (status, rows) = machine.api("GET", "/api/v1/sessions", None);
    assert_eq!(status, 200, "{rows}");
    rows.as_array().into_iter().flatten().find(|r| r["ref"] == item).cloned().unwrap_or_default()
}

/// The spawn prompt asks for a file outside the checkout: Claude Code asks first.
fn script_a_touch_outside(model: &ModelApi, machine: &Machine) -> std::path::PathBuf {
    let outside = machine.cli.cwd().join("outside.txt");
    let command = format!("touch {}", outside.display());
    model
        .script(
            Rule::when_contains(
                spawn_heading(1),
                Reply::tool_use(
                    "Bash",
                    json!({"command": command, "description": "Make the file"}),
                ),
            )
            .then(Reply::text("Made the file.")),
        )
        .unwrap();
    outside
}

#[test]
fn an_agent_at_a_permission_dialog_is_seen_and_nothing_is_typed_into_the_dialog() {
    let Some((world, model, machine)) = site("") else { return };
    world.sim.open_issue(REPO, "octocat", "Fix the parser", &[LABEL]).unwrap();
    let outside = script_a_touch_outside(&model, &machine);
    machine.start();
    start_item(&world, 1);
    let item = "github:octo/app#1";

    // The PermissionRequest hook says where the agent is, with the command it asks for.
    let asked = wait_for_state(&machine, "needs-permission");
    assert_eq!(
        (asked["tool"].as_str(), asked["seen_by"].as_str()),
        (Some("Bash"), Some("hooks")),
        "{asked}"
    );
    assert!(asked["input"].as_str().is_some_and(|i| i.contains("outside.txt")), "{asked}");
    let row = session_row(&machine, item);
    assert_eq!(row["agentState"], "needs-permission", "{row:#}");
    assert_eq!(row["permission"]["tool"], "Bash", "{row:#}");
    let (_, attention) = machine.api("GET", "/api/v1/attention", None);
    let waiting = attention.as_array().into_iter().flatten().find(|r| r["kind"] == "agent-waiting");
    assert!(waiting.is_some_and(|r| r["workItem"] == item), "{attention:#}");
    // `status` says so too, in words and as JSON.
    let status = wait_for("status to show the dialog", || {
        let shown = machine.run(&["status"]).stdout;
        shown.contains("needs-permission").then_some(shown.clone()).ok_or(shown)
    });
    assert!(status.contains(item) && status.contains("outside.txt"), "{status}");
    let status: Value = serde_json::from_str(&machine.run(&["status", "--json"]).stdout).unwrap();
    let agent = &status["agents"][0];
    assert_eq!(
        (agent["workItem"].as_str(), agent["state"].as_str()),
        (Some(item), Some("needs-permission")),
        "{status:#}"
    );
    assert_eq!(agent["needsAttention"], true);

    // The work item is told once, with the command and how to answer.
    let told = || -> Vec<String> {
        let posted = world.sim.comments_by(REPO, 1, world.sim.viewer());
        posted.into_iter().filter(|c| c.contains("asks for permission")).collect()
    };
    wait_for("the permission comment", || told().pop().ok_or_else(|| machine.trail()));
    assert!(
        told()[0].contains("outside.txt") && told()[0].contains("the-loop approve"),
        "{:?}",
        told()
    );

    // A comment meanwhile is held, not typed: the dialog is not answered by its Enter.
    world.sim.comment(REPO, 1, "octocat", "Please also cover the empty input.").unwrap();
    let held = wait_for("the comment held", || {
        machine.events("dispatch.held").first().cloned().ok_or_else(|| machine.trail())
    });
    assert_eq!(held["reason"], "the agent is at a permission dialog", "{held}");
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(!outside.exists(), "nothing approved the dialog");
    assert!(turns_with(&model, "Please also cover").is_empty(), "{}", summary(&model));

    // The person at the terminal answers it: the tool runs, then the comment goes in, once.
    let status = machine.tmux().args(["send-keys", "-t", "=loop-github-octo-app-1:", "1"]).status();
    assert!(status.is_ok_and(|s| s.success()), "tmux send-keys");
    wait_for("the tool ran", || outside.exists().then_some(()).ok_or_else(|| summary(&model)));
    wait_for_turn(&model, "Please also cover the empty input.");
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(turns_with(&model, "Please also cover").len(), 1, "{}", summary(&model));
    assert_eq!(session_row(&machine, item)["agentState"], "idle");
    assert_eq!(told().len(), 1, "one comment per prompt: {:?}", told());
}

#[test]
fn a_permission_prompt_is_approved_and_denied_from_the_work_item() {
    let Some((world, model, machine)) = site("") else { return };
    world.sim.open_issue(REPO, "octocat", "Fix the parser", &[LABEL]).unwrap();
    let outside = script_a_touch_outside(&model, &machine);
    let second = machine.cli.cwd().join("second.txt");
    let command = format!("touch {}", second.display());
    model
        .script(
            Rule::when_contains(
                "Now the second file",
                Reply::tool_use("Bash", json!({"command": command, "description": "Make it"})),
            )
            .then(Reply::text("Understood, I will not.")),
        )
        .unwrap();
    machine.start();
    start_item(&world, 1);
    wait_for_state(&machine, "needs-permission");

    // Someone not authorized answers: nothing changes.
    world.sim.comment(REPO, 1, "mallory", "the-loop approve").unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(!outside.exists(), "an unauthorized approve applies nothing");
    assert_eq!(session_row(&machine, "github:octo/app#1")["agentState"], "needs-permission");

    // The authorized approve reaches the hook waiting on the prompt: the tool runs.
    world.sim.comment(REPO, 1, "octocat", "the-loop approve").unwrap();
    wait_for("the approved tool ran", || {
        outside.exists().then_some(()).ok_or_else(|| machine.trail())
    });
    let after = wait_for_turn(&model, "Bash completed");
    assert!(after.tool_results.iter().all(|r| !r.is_error), "{after:?}");
    let approved = machine.events("control.command");
    assert!(
        approved.iter().any(|l| l["command"] == "approve" && l["effect"] == "approved"),
        "{approved:?}"
    );
    wait_for_state(&machine, "idle");

    // A second prompt, denied with a reason: the model is told, the tool never ran.
    world.sim.comment(REPO, 1, "octocat", "Now the second file, please.").unwrap();
    wait_for("a second prompt", || {
        let asked = machine.events("agent.state");
        let open = asked.iter().filter(|l| l["state"] == "needs-permission").count();
        (open == 2).then_some(()).ok_or_else(|| machine.trail())
    });
    world.sim.comment(REPO, 1, "octocat", "the-loop deny not outside the checkout").unwrap();
    let denied = wait_for("the denial at the model", || {
        let turns = model.turns();
        let denial = turns
            .iter()
            .flat_map(|t| &t.tool_results)
            .find(|r| r.content.contains("not outside the checkout"));
        denial.cloned().ok_or_else(|| summary(&model))
    });
    assert!(denied.is_error, "{denied:?}");
    assert!(!second.exists(), "the denied tool never ran");

    // Nothing open: the answer is refused in a reply, nothing typed.
    wait_for_state(&machine, "idle");
    let turns = model.turns().len();
    world.sim.comment(REPO, 1, "octocat", "the-loop approve").unwrap();
    wait_for("the nothing-to-answer reply", || {
        let posted = world.sim.comments_by(REPO, 1, world.sim.viewer());
        posted
            .into_iter()
            .find(|c| c.contains("no permission prompt open"))
            .ok_or_else(|| machine.trail())
    });
    wait_for("the answer logged as nothing to answer", || {
        let answered = machine.events("control.command");
        let found = answered.iter().any(|l| l["effect"] == "nothing-to-answer");
        found.then_some(()).ok_or_else(|| format!("{answered:?}"))
    });
    assert_eq!(model.turns().len(), turns, "nothing was typed: {}", summary(&model));

    // The control plane answers too: a third prompt approved through the API.
    let third = machine.cli.cwd().join("third.txt");
    let command = format!("touch {}", third.display());
    let tool = Reply::tool_use("Bash", json!({"command": command, "description": "Make it"}));
    model
        .script(Rule::when_contains("A third file", tool).then(Reply::text("Made the third.")))
        .unwrap();
    world.sim.comment(REPO, 1, "octocat", "A third file, please.").unwrap();
    wait_for("a third prompt", || {
        let asked = machine.events("agent.state");
        let open = asked.iter().filter(|l| l["state"] == "needs-permission").count();
        (open == 3).then_some(()).ok_or_else(|| machine.trail())
    });
    let body = json!({"ref": "github:octo/app#1", "verb": "approve", "comment": false});
    let (status, answer) = machine.api("POST", "/api/v1/sessions/control", Some(&body));
    assert_eq!((status, answer["effect"].as_str()), (200, Some("approved")), "{answer:#}");
    wait_for("the tool approved by the API ran", || {
        third.exists().then_some(()).ok_or_else(|| machine.trail())
    });
}

#[test]
fn an_agent_busy_with_no_sign_of_life_is_stalled_in_needs_you_and_told_once() {
    let Some((world, model, machine)) = site("  stallAfterSeconds: 3\n") else { return };
    world.sim.open_issue(REPO, "octocat", "Fix the parser", &[LABEL]).unwrap();
    // The model takes its time: Claude Code shows only its spinner meanwhile.
    let slow = Reply::text("Done at last.").delayed(std::time::Duration::from_secs(15));
    model.script(Rule::when_contains(spawn_heading(1), slow)).unwrap();
    machine.start();
    start_item(&world, 1);
    let item = "github:octo/app#1";

    let stalled = wait_for_state(&machine, "stalled");
    assert_eq!(stalled["seen_by"], "clock", "{stalled}");
    assert_eq!(session_row(&machine, item)["agentState"], "stalled");
    let (_, attention) = machine.api("GET", "/api/v1/attention", None);
    let waiting = attention.as_array().into_iter().flatten().find(|r| r["kind"] == "agent-waiting");
    assert!(waiting.is_some_and(|r| r["workItem"] == item), "{attention:#}");
    let told = || -> usize {
        let posted = world.sim.comments_by(REPO, 1, world.sim.viewer());
        posted.iter().filter(|c| c.contains("no sign of life")).count()
    };
    wait_for("the stall told", || (told() == 1).then_some(()).ok_or_else(|| machine.trail()));

    // The reply comes: the agent is itself again, and the stall was told once.
    wait_for_state_after(&machine, "idle", "stalled");
    assert_eq!(told(), 1, "one comment per stall: {:?}", machine.events("agent.state"));
}

#[test]
fn an_items_usage_is_the_sum_of_its_turns_usage_and_its_cost_the_tables_price() {
    let Some((world, model, machine)) = site("") else { return };
    world.sim.open_issue(REPO, "octocat", "Fix the parser", &[LABEL]).unwrap();
    // Text and a tool call in one reply: one message written as two transcript lines.
    let look = Reply::tool_use("Bash", json!({"command": "echo checked", "description": "Check"}))
        .preceded_by("Let me check first.");
    model
        .script(Rule::when_contains(spawn_heading(1), look).then(Reply::text("All checked.")))
        .unwrap();
    machine.start();
    start_item(&world, 1);
    let item = "github:octo/app#1";
    let conversation = conversation_of(&machine, item);
    let transcript = transcript_of(&machine, item, &conversation);
    wait_for("the last answer in the transcript", || {
        let written = std::fs::read_to_string(&transcript).unwrap_or_default();
        written.contains("All checked.").then_some(()).ok_or_else(|| summary(&model))
    });

    // The reply with text and a tool call is written as two lines of one message id.
    let written = std::fs::read_to_string(&transcript).unwrap_or_default();
    let ids: Vec<String> = written
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|l| l.pointer("/message/id").and_then(Value::as_str).map(str::to_owned))
        .collect();
    assert!(ids.iter().any(|id| ids.iter().filter(|i| *i == id).count() > 1), "{ids:?}");

    let turns: Vec<ModelRequest> = model
        .turns()
        .into_iter()
        .filter(|t| t.conversation.as_deref() == Some(conversation.as_str()))
        .collect();
    assert!(turns.len() >= 2, "the prompt and the tool's result: {}", summary(&model));
    let sum = loop_sim::model_api::total_usage(&turns);
    let tokens = loop_core::usage::Tokens {
        input_tokens: sum.input_tokens,
        output_tokens: sum.output_tokens,
        cache_write_tokens: sum.cache_creation_input_tokens,
        cache_read_tokens: sum.cache_read_input_tokens,
    };
    assert!(tokens.input_tokens + tokens.cache_write_tokens > 0 && tokens.output_tokens > 0);
    let models: Vec<&str> = turns.iter().filter_map(|t| t.model.as_deref()).collect();
    let by_model = [(models[0].to_owned(), tokens)].into();
    assert!(models.iter().all(|m| *m == models[0]), "one model: {models:?}");
    let pricing = loop_core::config::Config::default().pricing;
    assert!(pricing.price_of(models[0]).is_some(), "{} has a shipped price", models[0]);
    let expected = serde_json::to_value(loop_core::usage::Usage::priced(&by_model, &pricing))
        .expect("usage renders");

    let path = format!("/api/v1/work-items/one?ref={}", item.replace('#', "%23"));
    wait_for("the item's usage to be its turns'", || {
        let (_, record) = machine.api("GET", &path, None);
        (record["usage"] == expected).then_some(()).ok_or(record["usage"].clone())
    });
    assert_eq!(session_row(&machine, item)["usage"], expected);
    let (_, listed) = machine.api("GET", "/api/v1/work-items", None);
    let listed = listed.as_array().into_iter().flatten().find(|r| r["ref"] == item).cloned();
    assert_eq!(listed.unwrap_or_default()["usage"], expected);
    let status = machine.run(&["status", "--json"]);
    let status: Value = serde_json::from_str(&status.stdout).unwrap_or_default();
    let told = status["usage"].as_array().into_iter().flatten().find(|u| u["workItem"] == item);
    assert_eq!(told.cloned().unwrap_or_default()["usage"], expected, "{status:#}");
}

#[test]
fn a_usage_limit_holds_comments_and_spawns_until_its_reset_then_the_agent_goes_on() {
    let Some(cli) = claude_code() else { return };
    let world = World::new();
    let model = world.model();
    let machine = Machine::with_claude_subscriber(&world, cli, &model, "");
    world.sim.open_issue(REPO, "octocat", "Fix the parser", &[LABEL]).unwrap();
    world.sim.open_issue(REPO, "octocat", "Speed up the build", &[LABEL]).unwrap();
    // Claude Code shows the reset floored to the minute; one at :59 is read a second late.
    let now = jiff::Timestamp::now();
    let minute_end = |at: jiff::Timestamp| {
        let second = at.as_second();
        jiff::Timestamp::from_second(second - second.rem_euclid(60) + 60).unwrap()
    };
    let mut read_as = minute_end(now);
    if read_as.duration_since(now).as_secs() < 30 {
        read_as = minute_end(read_as);
    }
    let resets = read_as - jiff::SignedDuration::from_secs(1);
    model.limit_until(resets);
    machine.start();
    start_item(&world, 1);
    let item = "github:octo/app#1";

    let limited = wait_for_state(&machine, "limited");
    assert_eq!(limited["until"], read_as.to_string(), "{limited}");
    assert_eq!(session_row(&machine, item)["agentState"], "limited");
    let told = || -> usize {
        let posted = world.sim.comments_by(REPO, 1, world.sim.viewer());
        posted.iter().filter(|c| c.contains("paused by a usage limit")).count()
    };
    wait_for("the limit told", || (told() == 1).then_some(()).ok_or_else(|| machine.trail()));

    // Meanwhile a comment on the item and a second item are held, not typed or spawned.
    world.sim.comment(REPO, 1, "octocat", "Please also cover the empty input.").unwrap();
    start_item(&world, 2);
    let held = |reason: &str| {
        let lines = machine.events("dispatch.held");
        lines.iter().any(|line| line["reason"] == reason)
    };
    wait_for("the comment and the spawn held", || {
        let both = held("the agent is cut off by a usage limit")
            && held("its harness is cut off by a usage limit");
        both.then_some(()).ok_or_else(|| format!("{:?}", machine.events("dispatch.held")))
    });

    // At the reset: the dialog closed, the agent told to go on, then what was held.
    let patience =
        std::time::Duration::from_secs(read_as.duration_since(now).as_secs() as u64 + 30);
    let every = std::time::Duration::from_millis(250);
    let go_on = loop_sim::test_support::wait_for_within(patience, every, "the wake", || {
        let needle = "has reset. Continue where you left off.";
        turns_with(&model, needle).into_iter().next().ok_or_else(|| {
            let lines = ["agent.state", "agent.woken", "agent.wake_failed", "dispatch.held"]
                .map(|name| format!("{name}: {:?}", machine.events(name)));
            format!("{}\n{}", lines.join("\n"), summary(&model))
        })
    });
    let woken = machine.events("agent.woken");
    assert_eq!(woken.len(), 1, "{woken:?}");
    let woken_at: jiff::Timestamp = woken[0]["woken_at"].as_str().unwrap().parse().unwrap();
    assert!(woken_at >= read_as, "not before the reset: {woken_at}");
    assert_eq!(go_on.conversation, Some(conversation_of(&machine, item)));
    let comment = wait_for_turn(&model, "Please also cover the empty input.");
    assert!(comment.at >= go_on.at, "the held comment after the wake: {}", summary(&model));
    let second = wait_for_turn(&model, &spawn_heading(2));
    assert!(second.at >= woken_at, "no spawn while limited: {}", summary(&model));
    for needle in ["Please also cover the empty input.", "has reset. Continue"] {
        assert_eq!(turns_with(&model, needle).len(), 1, "{needle} once: {}", summary(&model));
    }
    assert_eq!(told(), 1, "one comment per limit");
}

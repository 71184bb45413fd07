//! The process graph end to end through the real binary (docs/process-graph.md): a
//! polling service over the simulator, each session in a clone of the simulated
//! repository (served as a real git repository), the stand-in agent in real tmux running
//! `the-loop graph complete` from its pane as an agent would.

use std::ops::Deref;
use std::path::PathBuf;
use std::process::Command;

use loop_core::graph::state::{Upstream, WorkItemState};
use loop_sim::test_support::{read_lines, wait_for};
use serde_json::Value;

use crate::machine::{Checkouts, Machine, World};

const REPO: &str = World::REPO;
const ITEM: &str = "github:octo/app#1";
const LABEL: &str = "the-loop: auto-execute";
const CHECKLIST: &str = "<!-- the-loop:phase-selection -->";

/// The simulator and one machine whose sessions run in checkouts of `octo/app`.
struct Site {
    world: World,
    machine: Machine,
}

impl Deref for Site {
    type Target = Machine;

    fn deref(&self) -> &Machine {
        &self.machine
    }
}

impl Site {
    fn new() -> Self {
        Self::with_routing("")
    }

    /// A site whose machine's `routing:` section also holds `routing` (keys indented by
    /// two spaces).
    fn with_routing(routing: &str) -> Self {
        let world = World::new();
        let machine = Machine::with_checkouts(&world, routing);
        Self { world, machine }
    }

    /// A site whose sessions run in checkouts made as `checkouts` says.
    fn with(checkouts: Checkouts<'_>) -> Self {
        let world = World::new();
        let machine = Machine::with(&world, checkouts, "");
        Self { world, machine }
    }

    /// The argv of each launch of the stand-in agent, in order.
    fn launches(&self) -> Vec<Vec<String>> {
        read_lines(&self.launches)
            .values
            .iter()
            .map(|launch| serde_json::from_value(launch["argv"].clone()).expect("an argv"))
            .collect()
    }

    /// Types `line` into issue `number`'s session pane.
    /// Types `line` into #`number`'s pane as a person at the terminal would — once the
    /// daemon has delivered what it had (two poll cycles with no new message), so the
    /// keys never land in the middle of one of its pastes.
    fn type_into(&self, number: u64, line: &str) {
        let mut seen = self.messages().len();
        wait_for("the deliveries to settle", || {
            self.two_cycles();
            let now = self.messages().len();
            (std::mem::replace(&mut seen, now) == now).then_some(()).ok_or(now)
        });
        self.type_into_pane(&format!("=loop-github-octo-app-{number}:"), line);
    }

    /// Waits for two more poll cycles: whatever was opened before is seen (and its
    /// thread baselined) by then, so a comment made after is news.
    fn two_cycles(&self) {
        let seen = self.events("poll.cycle").len();
        wait_for("two more poll cycles", || {
            let now = self.events("poll.cycle").len();
            (now >= seen + 2).then_some(()).ok_or(now)
        });
    }

    fn labels(&self, number: u64) -> Vec<String> {
        self.world.sim.world().item(REPO, number).expect("the item").labels.clone()
    }

    /// Waits until `label` is the item's one `loop:*` label (the previous one is
    /// removed just after the new one is added).
    fn wait_for_label(&self, number: u64, label: &str) {
        wait_for(&format!("#{number}'s phase label {label}"), || {
            let labels = self.labels(number);
            let phases: Vec<&String> = labels.iter().filter(|l| l.starts_with("loop:")).collect();
            (phases == [label]).then_some(()).ok_or(format!("{labels:?}"))
        });
    }

    /// Issue `number`'s spec folder in its session's checkout.
    fn spec_dir(&self, number: u64) -> PathBuf {
        self.workspaces.join(format!(
            ".work-items/github-octo-app-{number}/github.com/octo/app/docs/specs/issue-{number}"
        ))
    }

    fn state_text(&self, number: u64) -> String {
        let path = self.spec_dir(number).join("work-item-state.json");
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    }

    fn state(&self, number: u64) -> WorkItemState {
        serde_json::from_str(&self.state_text(number)).expect("the state file parses")
    }

    fn wait_for_node(&self, number: u64, node: &str) -> WorkItemState {
        wait_for(&format!("#{number} at `{node}`"), || {
            let path = self.spec_dir(number).join("work-item-state.json");
            let state: Option<WorkItemState> =
                std::fs::read(&path).ok().and_then(|text| serde_json::from_slice(&text).ok());
            match state {
                Some(state) if state.current_node == node => Ok(state),
                other => Err(format!("{:?}", other.map(|s| s.current_node))),
            }
        })
    }

    /// The self-marked comments on `number` carrying `needle`.
    fn posted(&self, number: u64, needle: &str) -> Vec<(u64, String)> {
        let world = self.world.sim.world();
        let item = world.item(REPO, number).expect("the item");
        item.comments
            .iter()
            .filter(|c| c.author == self.world.sim.viewer() && c.body.contains(needle))
            .map(|c| (c.id, c.body.clone()))
            .collect()
    }

    fn wait_for_posted(&self, number: u64, needle: &str) -> (u64, String) {
        wait_for(&format!("a comment on #{number} holding {needle:?}"), || {
            self.posted(number, needle).pop().ok_or("not yet")
        })
    }

    /// What the `n`th `!` command the stand-in ran printed (its record's `shell` lines).
    fn wait_for_shell(&self, n: usize) -> Value {
        wait_for(&format!("shell command #{n} to run in the pane"), || {
            let shells: Vec<Value> = read_lines(&self.record)
                .values
                .into_iter()
                .filter(|line| line["shell"].is_string())
                .collect();
            shells.get(n).cloned().ok_or_else(|| {
                let pane = self
                    .tmux()
                    .args(["capture-pane", "-p", "-t", "=loop-github-octo-app-1:"])
                    .output();
                let pane = pane
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default();
                format!("{shells:?}\npane:\n{pane}\nmessages: {:?}", self.messages())
            })
        })
    }

    /// Commits `text` at `path` in the served repository, so the next clone has it.
    fn commit_to_origin(&self, path: &str, text: &str) {
        let seed = self.origins.join(".seed-octo-app");
        let file = seed.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, text).unwrap();
        let bare = format!("file://{}", self.origins.join("octo/app.git").display());
        for args in
            [&["add", "."][..], &["commit", "-q", "-m", "state"], &["push", "-q", &bare, "main"]]
        {
            let out = Command::new("git")
                .arg("-C")
                .arg(&seed)
                .args(["-c", "user.name=sim", "-c", "user.email=sim@example.com"])
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

#[test]
fn a_start_selects_phases_and_the_agents_claims_are_judged_by_the_gate() {
    let site = Site::new();
    site.world.sim.open_issue(REPO, "octocat", "Add search", &[LABEL]).unwrap();
    site.start();
    site.world.sim.comment(REPO, 1, "octocat", "the-loop start").unwrap();

    // The spawn: a checkout, the label, the checklist, the prompt's graph block.
    let prompt = site.wait_for_message("the-loop auto-execute: github:octo/app#1");
    assert!(
        prompt.contains("node `phase-selection`") && prompt.contains("status: pending"),
        "the spawn prompt's graph block: {prompt}"
    );
    site.wait_for_label(1, "loop:phase-selection");
    let (_, checklist) = site.wait_for_posted(1, CHECKLIST);
    assert!(checklist.contains("<!-- the-loop:agent-comment -->"), "self-marked: {checklist}");
    site.wait_for_message("you are now at node `phase-selection`");
    assert_eq!(site.state(1).loop_name, "pdlc-work-item-loop");

    // An authorized execute with the default selection: the first selected phase.
    site.world.sim.comment(REPO, 1, "octocat", "the-loop execute").unwrap();
    site.wait_for_node(1, "brainstorming");
    site.wait_for_label(1, "loop:brainstorming");
    let labels = site.labels(1);
    assert_eq!(labels, [LABEL, "loop:brainstorming"], "the phase label replaced the previous one");
    site.wait_for_message("you are now at node `brainstorming`");
    let (_, confirmed) = site.wait_for_posted(1, "Phase selection recorded");
    assert!(
        confirmed.contains("by @octocat") && confirmed.contains("Runs: `brainstorming`"),
        "{confirmed}"
    );

    // The agent claims the phase from its pane: no artifact, blocked with the gate's
    // message; with a valid one, advanced.
    site.type_into(1, "!the-loop graph complete");
    let blocked = site.wait_for_shell(0);
    let answer: Value = serde_json::from_str(blocked["stdout"].as_str().unwrap_or_default())
        .unwrap_or_else(|err| panic!("one JSON line ({err}): {blocked}"));
    assert_eq!(answer["result"], "blocked", "{blocked}");
    assert_eq!(answer["messages"][0], "brainstorm.md is missing from the spec folder");
    assert_eq!(site.state(1).current_node, "brainstorming");
    std::fs::write(
        site.spec_dir(1).join("brainstorm.md"),
        "---\nstatus: approved\n---\n## Problem / opportunity\nSearch.\n## Open questions\nNone.\n",
    )
    .unwrap();
    site.type_into(1, "!the-loop graph complete");
    let advanced = site.wait_for_shell(1);
    let answer: Value = serde_json::from_str(advanced["stdout"].as_str().unwrap_or_default())
        .expect("one JSON line");
    assert_eq!(
        (&answer["result"], &answer["node"]),
        (&"advanced".into(), &"requirements-definition".into())
    );
    site.wait_for_label(1, "loop:requirements-definition");
    site.wait_for_message("you are now at node `requirements-definition`");
    site.run(&["graph", "status", ITEM]).expect_code(0).expect_stdout("requirements-definition");
}

/// What the first test proves of a start, up to the first phase's assignment, for a
/// machine whose user's git config rewrites the URL the-loop clones from.
fn a_start_walks_to_the_first_phase_in(checkouts: Checkouts<'_>) {
    let site = Site::with(checkouts);
    site.world.sim.open_issue(REPO, "octocat", "Add search", &[LABEL]).unwrap();
    site.start();
    site.world.sim.comment(REPO, 1, "octocat", "the-loop start").unwrap();
    site.wait_for_label(1, "loop:phase-selection");
    site.wait_for_posted(1, CHECKLIST);
    site.wait_for_message("you are now at node `phase-selection`");
    site.world.sim.comment(REPO, 1, "octocat", "the-loop execute").unwrap();
    site.wait_for_node(1, "brainstorming");
    site.wait_for_label(1, "loop:brainstorming");
    let assignment = site.wait_for_message("you are now at node `brainstorming`");
    assert!(assignment.contains("`/the-loop:brainstorm issue-1`"), "{assignment}");
    assert!(site.events("graph.skipped").is_empty(), "{:?}", site.events("graph.skipped"));
    assert!(site.posted(1, "graph not running").is_empty());
}

#[test]
fn an_insteadof_rewrite_of_https_github_to_a_mirror_leaves_the_checkout_the_items() {
    a_start_walks_to_the_first_phase_in(Checkouts::Rewritten {
        protocol: "https",
        from: "https://github.com/",
    });
}

#[test]
fn an_insteadof_rewrite_of_the_ssh_form_to_a_mirror_leaves_the_checkout_the_items() {
    a_start_walks_to_the_first_phase_in(Checkouts::Rewritten {
        protocol: "ssh",
        from: "git@github.com:",
    });
}

#[test]
fn the_checklists_ticks_are_the_selection_and_the_state_file_follows_its_pull_request() {
    let site = Site::new();
    site.world.sim.open_issue(REPO, "octocat", "Add search", &[LABEL]).unwrap();
    site.start();
    site.world.sim.comment(REPO, 1, "octocat", "the-loop start").unwrap();
    let (id, checklist) = site.wait_for_posted(1, CHECKLIST);

    // A person unticks brainstorming in GitHub's UI, then executes.
    let ticked = checklist.replace("- [x] brainstorming", "- [ ] brainstorming");
    site.world.sim.edit_comment(REPO, id, "octocat", &ticked).unwrap();
    site.world.sim.comment(REPO, 1, "octocat", "the-loop execute").unwrap();
    let state = site.wait_for_node(1, "requirements-definition");
    assert_eq!(state.skips["brainstorming"]["via"], "checklist");
    assert_eq!(state.nodes["brainstorming"].outcome, "skipped");
    site.wait_for_label(1, "loop:requirements-definition");
    let (_, confirmed) = site.wait_for_posted(1, "Phase selection recorded");
    assert!(confirmed.contains("Skipped: `brainstorming`"), "{confirmed}");

    // The session links the pull request it opened; the state file records it, and its
    // merge flips the row's upstream state.
    site.run(&["sessions", "link-pr", "--work-item", ITEM, "--pull-request", "2"]).expect_code(0);
    let row = site.state(1).pull_requests;
    assert_eq!(row.len(), 1, "{row:?}");
    assert_eq!(
        (row[0].pr_ref.as_str(), row[0].number, row[0].url.as_str(), row[0].state),
        ("github:octo/app#2", 2, "https://github.com/octo/app/pull/2", Upstream::Open)
    );
    assert_eq!(row[0].inner_loop, "pr-loops/pr-2/work-item-state.json");
    let pr = site
        .world
        .sim
        .open_pull_request(REPO, "octocat", "Search", "", "search", &[LABEL])
        .unwrap();
    assert_eq!(pr, 2);
    site.two_cycles();
    site.world.sim.comment(REPO, 2, "octocat", "CI is green").unwrap();
    site.wait_for_message("CI is green");
    site.world.sim.merge(REPO, 2, "octocat").unwrap();
    wait_for("the pull request's row merged", || {
        let rows = site.state(1).pull_requests;
        (rows.len() == 1 && rows[0].state == Upstream::Merged)
            .then_some(())
            .ok_or(format!("{rows:?}"))
    });
    let text = site.state_text(1);
    for handle in ["tmux", "loop-github", "harnessSessionId", site.cli.cwd().to_str().unwrap()] {
        assert!(!text.contains(handle), "no machine handle ({handle}) in the file: {text}");
    }
}

#[test]
fn do_walks_the_adhoc_loop_contribute_waits_for_its_goal_and_review_binds_the_pr_loop() {
    let site = Site::new();
    site.world.sim.open_issue(REPO, "octocat", "Bump a dependency", &[LABEL]).unwrap();
    site.world.sim.open_issue(REPO, "octocat", "Help upstream", &[LABEL]).unwrap();
    let pr = site
        .world
        .sim
        .open_pull_request(REPO, "octocat", "A change", "", "change", &[LABEL])
        .unwrap();
    site.start();

    site.world.sim.comment(REPO, 1, "octocat", "the-loop do").unwrap();
    site.wait_for_label(1, "loop:implementation");
    assert_eq!(site.wait_for_node(1, "work").loop_name, "pdlc-adhoc-loop");
    site.wait_for_message("you are now at node `work`");
    site.type_into(1, "!the-loop graph complete");
    site.wait_for_shell(0);
    site.wait_for_node(1, "review");
    site.wait_for_posted(1, "`review` is ready for review");
    site.world.sim.comment(REPO, 1, "octocat", "done, thanks").unwrap();
    site.wait_for_node(1, "complete");
    site.wait_for_label(1, "loop:complete");

    site.world.sim.comment(REPO, 2, "octocat", "the-loop contribute").unwrap();
    let state = site.wait_for_node(2, "goal-definition");
    assert_eq!(state.loop_name, "pdlc-contribution-loop");
    wait_for("the goal gate's block", || {
        site.events("graph.blocked")
            .into_iter()
            .find(|e| e["hook"] == "classify-goal")
            .ok_or("none")
    });

    site.world.sim.comment(REPO, pr, "octocat", "the-loop review").unwrap();
    let inner = site.spec_dir(pr).join(format!("pr-loops/pr-{pr}/work-item-state.json"));
    let state: WorkItemState = wait_for("the pull request's own loop", || {
        std::fs::read(&inner)
            .ok()
            .and_then(|text| serde_json::from_slice(&text).ok())
            .ok_or(format!("{}", inner.display()))
    });
    assert_eq!(
        (state.loop_name.as_str(), state.current_node.as_str()),
        ("pdlc-pr-loop", "implementation")
    );
    assert!(!site.spec_dir(pr).join("work-item-state.json").exists(), "no outer loop for a review");
    assert!(!site.labels(pr).iter().any(|l| l.starts_with("loop:")), "the PR loop writes no label");
}

#[test]
fn choices_outside_what_the_operator_offers_launch_and_route_on_its_defaults() {
    let site = Site::new();
    site.commit_to_origin(
        "docs/specs/issue-1/work-item-state.json",
        r#"{"version":1,"workItem":"github:octo/app#1","loop":"pdlc-work-item-loop",
            "currentNode":"","sessionPerPr":"bogus","model":"gpt-9","effort":"max"}"#,
    );
    site.world.sim.open_issue(REPO, "octocat", "Add search", &[LABEL]).unwrap();
    site.start();
    site.world.sim.comment(REPO, 1, "octocat", "the-loop start").unwrap();
    site.wait_for_message("the-loop auto-execute: github:octo/app#1");
    let launch = read_lines(&site.launches).values.into_iter().next().expect("one launch");
    let argv = launch["argv"].to_string();
    assert!(!argv.contains("gpt-9") && !argv.contains("--model"), "{argv}");
    let refused = site.events("graph.choice_refused");
    assert_eq!(
        refused[0]["refused"],
        serde_json::json!(["sessionPerPr: \"bogus\"", "model: \"gpt-9\"", "effort: \"max\""]),
        "{refused:?}"
    );
    // A pull request's event routes on the operator's default (cross-repository: a pull
    // request in the same repository shares the work item's session). The record is
    // written once the spawn ends, which may be after the agent has its prompt.
    wait_for("the spawn recorded", || {
        let spawned = site.events("session.spawned");
        (!spawned.is_empty()).then_some(()).ok_or("not yet")
    });
    site.run(&["sessions", "link-pr", "--work-item", ITEM, "--pull-request", "2"]).expect_code(0);
    site.world.sim.open_pull_request(REPO, "octocat", "Search", "", "search", &[LABEL]).unwrap();
    site.two_cycles();
    site.world.sim.comment(REPO, 2, "octocat", "please look").unwrap();
    site.wait_for_message("please look");
    assert!(site.events("session.pr_spawned").is_empty(), "no session of its own");
    wait_for("the refusal recorded on the route too", || {
        let refused = site.events("graph.choice_refused");
        (refused.len() >= 2).then_some(()).ok_or(format!("{refused:?}"))
    });
    assert!(
        site.state_text(1).contains("\"sessionPerPr\": \"bogus\"")
            || site.state_text(1).contains("\"sessionPerPr\":\"bogus\""),
        "the choice is refused, never rewritten"
    );
}

#[test]
fn a_frozen_model_the_operator_offers_launches_the_session_and_its_respawn() {
    let site = Site::with_routing(
        "  harnessChoices:\n    claude:\n      models: [opus, sonnet]\n      efforts: [high]\n",
    );
    site.commit_to_origin(
        "docs/specs/issue-1/work-item-state.json",
        r#"{"version":1,"workItem":"github:octo/app#1","loop":"pdlc-work-item-loop",
            "currentNode":"","model":"sonnet","effort":"max"}"#,
    );
    site.world.sim.open_issue(REPO, "octocat", "Add search", &[LABEL]).unwrap();
    site.start();
    site.world.sim.comment(REPO, 1, "octocat", "the-loop start").unwrap();
    site.wait_for_message("the-loop auto-execute: github:octo/app#1");

    // The offered model is passed; the effort the operator does not offer is refused
    // and the harness's own default stands.
    let first = &site.launches()[0];
    assert!(value_of(first, "--session-id").is_some(), "{first:?}");
    assert_eq!((value_of(first, "--model"), value_of(first, "--effort")), (Some("sonnet"), None));
    let refused = site.events("graph.choice_refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["refused"], serde_json::json!(["effort: \"max\""]));

    // The harness exits; the next comment respawns it, resuming on what it was launched
    // with.
    // Typed again while it runs: keys sent while the harness is still busy with its
    // prompt can be swallowed.
    wait_for("the harness to exit", || {
        let pane = site.tmux_pane_dead("=loop-github-octo-app-1:");
        if pane == "0" {
            site.type_into(1, "/exit");
        }
        (pane != "0").then_some(()).ok_or(pane)
    });
    site.world.sim.comment(REPO, 1, "octocat", "still there?").unwrap();
    site.wait_for_message("still there?");
    let launches = site.launches();
    assert_eq!(launches.len(), 2, "{launches:?}");
    assert!(value_of(&launches[1], "--resume").is_some(), "{launches:?}");
    assert_eq!(value_of(&launches[1], "--model"), Some("sonnet"), "{launches:?}");
}

/// The value following `flag` in `argv`.
fn value_of<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    argv.iter().position(|arg| arg == flag).and_then(|i| argv.get(i + 1)).map(String::as_str)
}

#[test]
fn the_operator_declares_phases_skipped_and_forces_a_node_each_recorded_and_announced() {
    let site = Site::new();
    site.world.sim.open_issue(REPO, "octocat", "Fix a typo", &[LABEL]).unwrap();
    site.start();
    site.world.sim.comment(REPO, 1, "octocat", "the-loop start").unwrap();
    site.wait_for_posted(1, CHECKLIST);
    site.wait_for_node(1, "phase-selection");

    // A skip names the spec chain (and a node that always runs, refused): declared in the
    // state file with its provenance, announced on the issue.
    let skip = site.run(&[
        "graph",
        "skip",
        ITEM,
        "--node",
        "spec-chain",
        "--node",
        "phase-selection",
        "--reason",
        "a one-line fix",
    ]);
    skip.expect_code(0).expect_stderr("`phase-selection` not declared");
    let answer: Value = serde_json::from_str(skip.stdout.trim()).expect("one JSON line");
    assert_eq!(answer["declared"].as_array().map(Vec::len), Some(7), "{answer}");
    assert_eq!(answer["rejected"][0]["token"], "phase-selection");
    assert_eq!(answer["warnings"], serde_json::json!([]), "the comment went up");
    let state = site.state(1);
    assert_eq!(state.skips["design"]["via"], "cli");
    assert_eq!(state.skips["design"]["token"], "spec-chain");
    assert_eq!(state.skips["design"]["reason"], "a one-line fix");
    let (_, announced) = site.wait_for_posted(1, "Declared skips");
    assert!(announced.contains("`brainstorming`") && announced.contains("a one-line fix"));

    // The selection then walks past them, to implementation.
    site.world.sim.comment(REPO, 1, "octocat", "the-loop execute").unwrap();
    site.wait_for_node(1, "implementation");
    site.wait_for_label(1, "loop:implementation");
    assert_eq!(site.state(1).nodes["design"].outcome, "skipped");

    // Refusals: no reason (exit 2, nothing written), a node the pointer reached (exit 1).
    site.run(&["graph", "force", ITEM, "--to", "verification", "--reason", " "])
        .expect_code(2)
        .expect_stderr("reason is required");
    site.run(&["graph", "force", ITEM, "--to", "nowhere", "--reason", "x"])
        .expect_code(2)
        .expect_stderr("implementation");
    site.run(&["graph", "skip", ITEM, "--node", "implementation", "--reason", "x"])
        .expect_code(1)
        .expect_stderr("not an amnesty");

    // The force: the pointer moves, the gate it bypassed gives no verdict, the node is
    // marked forced, and the issue is told.
    let force =
        site.run(&["graph", "force", ITEM, "--to", "verification", "--reason", "tested by hand"]);
    force.expect_code(0);
    let answer: Value = serde_json::from_str(force.stdout.trim()).expect("one JSON line");
    assert_eq!(
        (answer["fromNode"].as_str(), answer["toNode"].as_str()),
        (Some("implementation"), Some("verification"))
    );
    assert_eq!(answer["warnings"], serde_json::json!([]), "a declared edge, the comment posted");
    let state = site.state(1);
    assert_eq!(state.current_node, "verification");
    assert!(state.nodes["verification"].forced);
    assert_eq!(state.nodes["implementation"].outcome, "");
    assert_eq!(state.forced.len(), 1);
    let (_, announced) = site.wait_for_posted(1, "Forced transition");
    assert!(announced.contains("`implementation` → `verification`"), "{announced}");
    // The node entered is entered as any move enters it: its label and its assignment.
    site.wait_for_label(1, "loop:verification");
    let assignment = site.wait_for_message("you are now at node `verification`");
    assert!(assignment.contains("`/the-loop:verify-work issue-1`"), "{assignment}");
    assert!(announced.contains("tested by hand"), "{announced}");
    site.run(&["graph", "check", ITEM]).expect_stdout("(forced)");
    let forced = site.events("graph.forced");
    assert_eq!(forced.len(), 1, "{forced:?}");
    assert_eq!(forced[0]["reason"], "tested by hand");
    assert_eq!(site.events("graph.skips_declared").len(), 1);
    assert_eq!(site.events("graph.skips_rejected").len(), 2);
    site.run(&["explain", ITEM]).expect_code(0).expect_stdout("no verdict was forged");
}

#[test]
fn a_foreign_checkout_says_the_graph_is_not_running_wherever_the_item_is_shown_and_once_on_it() {
    // Sessions run in the machine's working directory, a clone of another repository
    // (its origin a token URL, as CI writes one).
    let world = World::new();
    let site = Site { machine: Machine::new(&world, ""), world };
    let cwd = site.cli.cwd().to_owned();
    for args in [
        &["init", "-q"][..],
        &["remote", "add", "origin", "https://x-access-token:s3cret@github.com/x/y.git"],
    ] {
        let out = Command::new("git").arg("-C").arg(&cwd).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}");
    }
    site.world.sim.open_issue(REPO, "octocat", "Add search", &[LABEL]).unwrap();
    site.start();
    site.world.sim.comment(REPO, 1, "octocat", "the-loop start").unwrap();
    site.wait_for_message("the-loop auto-execute: github:octo/app#1");

    let expected = format!(
        "graph not running: the checkout at {} is a clone of x/y, not octo/app — fix:",
        cwd.display()
    );
    let (_, comment) = site.wait_for_posted(1, "graph not running");
    assert!(comment.contains(&expected), "{comment}");
    assert!(!comment.contains("s3cret"), "no token in the comment: {comment}");

    // Said once: a later event, and a restart, do not post it again.
    site.world.sim.comment(REPO, 1, "octocat", "any news?").unwrap();
    site.wait_for_message("any news?");
    site.run(&["stop"]).expect_code(0);
    site.start();
    site.world.sim.comment(REPO, 1, "octocat", "still there?").unwrap();
    site.wait_for_message("still there?");
    assert_eq!(site.posted(1, "graph not running").len(), 1, "one comment");

    // Status, explain and the API's work-item row (the board's card) name the reason.
    site.run(&["status"]).expect_stderr(&format!("github:octo/app#1: {expected}"));
    site.run(&["explain", ITEM]).expect_code(0).expect_stdout(&expected);
    let (status, rows) = site.api("GET", "/api/v1/work-items", None);
    assert_eq!(status, 200, "{rows}");
    let warning = rows[0]["graphWarning"].as_str().unwrap_or_default();
    assert!(warning.starts_with(&expected), "{rows}");
    let skipped = site.events("graph.skipped");
    let foreign: Vec<&Value> =
        skipped.iter().filter(|e| e["reason"] == "foreign-checkout").collect();
    assert!(
        !foreign.is_empty() && foreign.iter().all(|e| e["level"] == "warning"),
        "a warning, never only an info line: {skipped:?}"
    );
    board_card_shows(&site, &expected);
}

/// The board's model (the dashboard's `model.js`, as the service serves it) gives item #1's
/// card the warning the API row carries; checked with node where it is installed.
fn board_card_shows(site: &Site, expected: &str) {
    if Command::new("node").arg("--version").output().is_err() {
        return;
    }
    let (_, model) = site.http("GET", "/assets/model.js", None);
    let (_, rows) = site.http("GET", "/api/v1/work-items", None);
    let dir = site.cli.cwd().join("board");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("model.mjs"), model).unwrap();
    std::fs::write(dir.join("rows.json"), rows).unwrap();
    let script = "import { board } from './model.mjs';\nimport { readFileSync } from 'node:fs';\nconst records = JSON.parse(readFileSync('rows.json', 'utf8'));\nconst [row] = board({ records, sessions: [], attention: [], graphs: new Map() });\nprocess.stdout.write(row.graphWarning);\n";
    std::fs::write(dir.join("card.mjs"), script).unwrap();
    let out = Command::new("node").arg("card.mjs").current_dir(&dir).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.starts_with(expected), "{shown} {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_reviewers_words_at_an_approval_gate_are_recorded_in_the_state_file_and_shown_by_the_api() {
    let site = Site::new();
    site.world.sim.open_issue(REPO, "octocat", "Add search", &[LABEL]).unwrap();
    site.start();
    site.world.sim.comment(REPO, 1, "octocat", "the-loop start").unwrap();
    site.wait_for_node(1, "phase-selection");
    site.run(&["graph", "force", ITEM, "--to", "requirements-approval", "--reason", "drafted"])
        .expect_code(0);
    // Entered as any move enters it: its review request goes up.
    site.wait_for_posted(1, "`requirements-approval` is ready for review");
    site.world.sim.comment(REPO, 1, "octocat", "approved, but nit: say which rate limits").unwrap();
    let state = site.wait_for_node(1, "design");
    assert_eq!(state.feedback.len(), 1, "{:?}", state.feedback);
    let feedback = &state.feedback[0];
    assert_eq!(
        (feedback.node.as_str(), feedback.into.as_str(), feedback.by.as_str()),
        ("requirements-approval", "requirements.md", "octocat")
    );
    assert_eq!(feedback.outcome, "approved-with-comments");
    assert!(feedback.text.contains("say which rate limits"), "{feedback:?}");
    site.wait_for_label(1, "loop:design");
    let rows = wait_for("the API row's feedback", || {
        let (_, rows) = site.api("GET", "/api/v1/work-items", None);
        rows[0]["graph"]["feedback"].is_array().then_some(rows.clone()).ok_or(rows)
    });
    assert_eq!(rows[0]["graph"]["feedback"][0]["by"], "octocat", "{rows}");
}

//! `the-loop explain` over a recorded event log: a refused comment names its reason, a
//! delivered one its effect, a work item gathers every delivery that touched it, and
//! `--json` carries the same for machines.

use crate::common::Cli;

/// A log as the receiver and the dispatcher write it: one comment refused (unauthorized),
/// one delivered, and a CLI command on the same work item.
const LOG: &str = r#"{"ts":"2026-11-29T10:00:00.000Z","source":"gh-webhook","event":"webhook.received","level":"info","gh_event":"issue_comment","action":"created","delivery_id":"d-refused","verified":true}
{"ts":"2026-11-29T10:00:00.001Z","source":"gh-webhook","event":"routing.dropped","level":"warning","gh_event":"issue_comment","delivery_id":"d-refused","reason":"unauthorized-actor","actor":"mallory","work_items":["github:octo/app#7"]}
not json at all
{"ts":"2026-11-29T10:01:00.000Z","source":"gh-webhook","event":"webhook.received","level":"info","gh_event":"issue_comment","action":"created","delivery_id":"d-ok","verified":true}
{"ts":"2026-11-29T10:01:00.001Z","source":"gh-webhook","event":"routing.routed","level":"info","gh_event":"issue_comment","delivery_id":"d-ok","actor":"octocat","pass":"authorized","work_items":["github:octo/app#7"],"labeled":true}
{"ts":"2026-11-29T10:01:00.002Z","source":"gh-webhook","event":"dispatch.queued","level":"info","gh_event":"issue_comment","delivery_id":"comment:IC_2","gh_delivery":"d-ok","work_item":"github:octo/app#7","spawn":false}
{"ts":"2026-11-29T10:01:00.010Z","source":"gh-webhook","event":"dispatch.succeeded","level":"info","gh_event":"issue_comment","delivery_id":"comment:IC_2","gh_delivery":"d-ok","work_item":"github:octo/app#7","harness":"claude","via":"tmux"}
{"ts":"2026-11-29T10:02:00.000Z","source":"cli","event":"control.command","level":"info","work_item":"github:octo/app#7","command":"pause","source":"cli","actor":"me","effect":"paused"}
"#;

fn site() -> Cli {
    let cli = Cli::new();
    let root = cli.cwd().join("state");
    cli.write(".the-loop/cli-config.yaml", &format!("state:\n  root: {}\n", root.display()));
    cli.write("state/logs/events.jsonl", LOG);
    cli
}

#[test]
fn a_refused_comment_is_explained_by_its_reason() {
    let cli = site();
    cli.run(["explain", "d-refused"])
        .expect_code(0)
        .expect_stdout("delivery d-refused")
        .expect_stdout("✗ dropped: @mallory is not in `routing.authorizedUsers`")
        .expect_stdout("=> refused: dropped: @mallory");
}

#[test]
fn a_delivered_comment_shows_the_receivers_and_the_dispatchers_steps_and_what_was_done() {
    let cli = site();
    let run = cli.run(["explain", "d-ok"]);
    run.expect_code(0)
        .expect_stdout("arrived by webhook: `issue_comment` created, signature verified")
        .expect_stdout(
            "✓ passed the self-marker, repository and actor checks (@octocat is authorized)",
        )
        .expect_stdout("queued for delivery into github:octo/app#7's session")
        .expect_stdout("=> done: pasted into github:octo/app#7's claude session");
}

#[test]
fn a_work_item_gathers_its_records_and_every_delivery_that_touched_it() {
    let cli = site();
    let run = cli.run(["explain", "github:octo/app#7"]);
    run.expect_code(0)
        .expect_stdout("arming: no command recorded")
        .expect_stdout("session: none on this machine")
        .expect_stdout("delivery d-refused")
        .expect_stdout("delivery d-ok")
        .expect_stdout("executed `pause` from @me (cli)");
    let refused = run.stdout.find("delivery d-refused").unwrap();
    let delivered = run.stdout.find("delivery d-ok").unwrap();
    assert!(refused < delivered, "in log order:\n{}", run.stdout);
}

#[test]
fn json_carries_the_steps_and_the_verdict() {
    let cli = site();
    let run = cli.run(["explain", "d-refused", "--json"]);
    run.expect_code(0);
    let trail: serde_json::Value = serde_json::from_str(&run.stdout).expect("one JSON object");
    assert_eq!(trail["delivery"], "d-refused");
    assert_eq!(trail["steps"][1]["stage"], "guard");
    assert_eq!(trail["steps"][1]["mark"], "failed");
    assert_eq!(trail["verdict"]["outcome"], "refused");
}

#[test]
fn an_unknown_delivery_exits_1_with_a_hint_and_a_malformed_ref_exits_2() {
    let cli = site();
    cli.run(["explain", "nope"]).expect_code(1).expect_stderr("no line about delivery `nope`");
    cli.run(["explain", "github:octo#x"]).expect_code(2).expect_stderr("is not a work-item ref");
}

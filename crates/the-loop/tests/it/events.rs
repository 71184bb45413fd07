//! `the-loop events` through the real binary: the table, JSONL, filters, rotated files,
//! the configured log path, and `--follow` until Ctrl-C.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use jiff::Timestamp;
use loop_core::log::{Kind, Line};
use loop_store::event_log::{EventLog, Rotation};

use crate::common::Cli;

/// The default log of a config-less run: `./.the-loop/logs/events.jsonl`.
fn default_log(cli: &Cli) -> std::path::PathBuf {
    cli.cwd().join(".the-loop/logs/events.jsonl")
}

fn at(ts: &str) -> Timestamp {
    ts.parse().expect("test timestamps are RFC 3339")
}

/// Appends `count` numbered events, alternating between two work items, rotating often.
fn fill(path: &Path, count: u64) {
    let log = EventLog::new(path, "poll").with_rotation(Rotation { max_bytes: 600, keep: 50 });
    for n in 0..count {
        let event = if n % 2 == 0 { Kind::SessionSpawned } else { Kind::PollItemError };
        let item = if n % 2 == 0 { "github:octo/app#1" } else { "github:octo/app#2" };
        let minute = format!("2026-11-29T10:{:02}:00Z", n);
        log.append(&Line::info(event).field("work_item", item).field("n", n), at(&minute)).unwrap();
    }
}

fn ns(stdout: &str) -> Vec<u64> {
    stdout
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["n"].as_u64().unwrap())
        .collect()
}

#[test]
fn events_reads_across_rotated_files_in_order_and_filters() {
    let cli = Cli::new();
    fill(&default_log(&cli), 20);
    assert!(cli.cwd().join(".the-loop/logs/events.jsonl.2").exists(), "the fixture rotated");

    let run = cli.run(["events", "--json", "--limit", "0"]);
    run.expect_code(0);
    assert_eq!(ns(&run.stdout), (0..20).collect::<Vec<u64>>());

    let run = cli.run(["events", "--json", "--work-item", "github:octo/app#2", "--limit", "3"]);
    run.expect_code(0);
    assert_eq!(ns(&run.stdout), [15, 17, 19], "the last three of that item");

    let run =
        cli.run(["events", "--json", "--event", "session.*", "--since", "2026-11-29T10:15:00Z"]);
    run.expect_code(0);
    assert_eq!(ns(&run.stdout), [16, 18]);
}

#[test]
fn events_prints_a_table_by_default() {
    let cli = Cli::new();
    fill(&default_log(&cli), 2);
    let run = cli.run(["events"]);
    run.expect_code(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    for column in ["Time", "Source", "Level", "Event", "Work item", "Detail"] {
        assert!(lines[0].contains(column), "{}", lines[0]);
    }
    assert!(lines[2].starts_with("2026-11-29T10:01:00.000Z poll"), "{}", lines[2]);
    assert!(lines[2].contains("poll.item_error") && lines[2].contains("github:octo/app#2"));
    assert!(lines[2].ends_with("n=1"), "{}", lines[2]);
}

#[test]
fn no_matching_events_is_said_on_stderr_and_exits_0() {
    let cli = Cli::new();
    let run = cli.run(["events"]);
    run.expect_code(0).expect_stderr("(no matching events)");
    assert!(run.stdout.is_empty());
    fill(&default_log(&cli), 2);
    cli.run(["events", "--event", "nothing.*"])
        .expect_code(0)
        .expect_stderr("(no matching events)");
}

#[test]
fn a_bad_since_is_refused_with_exit_2() {
    let cli = Cli::new();
    cli.run(["events", "--since", "yesterday"])
        .expect_code(2)
        .expect_stderr("`yesterday` is not a time");
}

#[test]
fn events_reads_the_configured_log_path() {
    let mut cli = Cli::new();
    let config =
        cli.write("conf.yaml", "version: \"0.5.0\"\neventLog:\n  path: elsewhere/ev.jsonl\n");
    cli.env("THE_LOOP_CLI_CONFIG", &config);
    fill(&cli.cwd().join("elsewhere/ev.jsonl"), 1);
    let run = cli.run(["events", "--json"]);
    run.expect_code(0);
    assert_eq!(ns(&run.stdout), [0]);
}

#[test]
fn follow_prints_appends_and_exits_0_on_ctrl_c() {
    let cli = Cli::new();
    let path = default_log(&cli);
    let log = EventLog::new(&path, "poll");
    log.append(&Line::info(Kind::WebhookReceived).field("n", 0), at("2026-11-29T10:00:00Z"))
        .unwrap();

    let mut command = Command::new(env!("CARGO_BIN_EXE_the-loop"));
    command
        .args(["events", "--follow", "--json"])
        .current_dir(cli.cwd())
        .env("HOME", cli.home())
        .env_remove("THE_LOOP_CLI_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    // The backlog is printed after the tail is in place: anything appended from here on
    // is followed.
    stdout.read_line(&mut line).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&line).unwrap()["event"],
        "webhook.received"
    );

    log.append(&Line::info(Kind::RoutingRouted).field("n", 1), at("2026-11-29T10:01:00Z")).unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&line).unwrap()["event"],
        "routing.routed"
    );

    let interrupted =
        Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(interrupted.success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

//! The soak (issue #16, SPEC §8): `SOAK_EVENTS` comments (100 000 by `scripts/soak.sh`)
//! through both ingresses at once — each one delivered by the simulator's signed webhook
//! AND found by the poller every second — into 20 live sessions of the real service, on
//! real tmux with the stand-in agent. As in a long-lived daemon's life, work items come
//! and go: once an item's thread holds `SOAK_THREAD_LENGTH` soak comments (200 unless
//! told) it is closed (its session ends) and a new labelled item is started in its place,
//! so the threads stay the length real ones have and what grows is the service's age, not
//! one thread. A long `SOAK_THREAD_LENGTH` measures what long threads cost instead
//! (docs/performance.md). Every comment must reach its session exactly once;
//! along the way the service's RSS, its open file descriptors and the event log's size on
//! disk (live file plus rotated ones) are sampled and written, one JSON line per sample,
//! to `SOAK_REPORT` for the script to judge flatness. Ignored by `cargo test`: it runs
//! for many minutes.

use std::io::Write as _;
use std::time::{Duration, Instant};

use loop_sim::test_support::wait_for_within;
use serde_json::json;

use crate::machine::{Machine, World};

const REPO: &str = World::REPO;
const LABEL: &str = "the-loop: auto-execute";
const ITEMS: u64 = 20;
const SECRET: &str = "soak-secret";
/// Comments posted between two samples.
const SAMPLE_EVERY: usize = 2_000;
/// How many soak comments an item gets before it is closed and replaced, unless
/// `SOAK_THREAD_LENGTH` says otherwise.
const THREAD_LENGTH: usize = 200;

#[test]
#[ignore = "a soak of many minutes: scripts/soak.sh runs it"]
fn soak_comments_through_both_ingresses_reach_their_sessions_once_with_flat_resources() {
    let events: usize =
        std::env::var("SOAK_EVENTS").ok().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let report = std::env::var("SOAK_REPORT").unwrap_or_else(|_| "target/soak.jsonl".into());
    let thread_length: usize = std::env::var("SOAK_THREAD_LENGTH")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(THREAD_LENGTH);
    let world = World::new();
    let port = crate::common::free_port();
    let webhooks = format!("webhooks:\n  ghWebhook:\n    enabled: true\n    port: {port}\n");
    let mut machine = Machine::new(&world, &webhooks);
    machine.cli.env("THE_LOOP_GH_WEBHOOK_SECRET", SECRET);
    world.sim.set_webhook(Some(loop_sim::WebhookTarget {
        url: format!("http://127.0.0.1:{port}/gh-webhook"),
        secret: Some(SECRET.to_owned()),
    }));
    let open_item =
        |i: usize| world.sim.open_issue(REPO, "octocat", &format!("Soak {i}"), &[LABEL]).unwrap();
    let mut numbers: Vec<u64> = (0..ITEMS as usize).map(open_item).collect();
    machine.start();
    for &number in &numbers {
        world.sim.comment(REPO, number, "octocat", "the-loop start").unwrap();
    }
    for &number in &numbers {
        wait_for_launch(&machine, number);
    }
    let mut opened = numbers.len();
    let pid = service_pid(&machine);
    let mut pasted = Pasted::new(&machine);

    let mut out = std::fs::File::create(&report).expect("the soak report");
    let started = Instant::now();
    let sample = |posted: usize, pasted: usize, out: &mut std::fs::File| {
        let line = json!({
            "posted": posted,
            "seconds": started.elapsed().as_secs_f64(),
            "rssKb": status_kb(pid, "VmRSS:"),
            "fds": std::fs::read_dir(format!("/proc/{pid}/fd")).map(Iterator::count).unwrap_or(0),
            "eventLogBytes": event_log_bytes(&machine),
            "pasted": pasted,
        });
        writeln!(out, "{line}").expect("a report line");
    };
    sample(0, pasted.now(), &mut out);
    // Soak comment n's GitHub comment id, at index n.
    let mut ids = vec![0u64];
    for posted in 1..=events {
        let slot = posted % numbers.len();
        if posted > numbers.len() && (posted - slot).is_multiple_of(numbers.len() * thread_length) {
            // This slot's item has its thread_length comments: close it, start a new one.
            // First every comment posted so far is pasted: one the webhook lost to a full
            // inbox (503) and the poller found after the close would meet an ended
            // session, which is right for a closed item but not what this soak counts.
            wait_for_within(
                Duration::from_secs(600),
                Duration::from_millis(200),
                "every comment before the close pasted",
                || {
                    let behind = (posted - 1).saturating_sub(pasted.now());
                    (behind == 0).then_some(()).ok_or(format!("{behind} behind"))
                },
            );
            world.sim.close(REPO, numbers[slot], "octocat").unwrap();
            numbers[slot] = open_item(opened);
            opened += 1;
            world.sim.comment(REPO, numbers[slot], "octocat", "the-loop start").unwrap();
            wait_for_launch(&machine, numbers[slot]);
        }
        let number = numbers[slot];
        let body = format!("soak comment {posted} .");
        ids.push(world.sim.comment(REPO, number, "octocat", &body).unwrap());
        if posted % SAMPLE_EVERY == 0 {
            sample(posted, pasted.now(), &mut out);
            // Keep the backlog bounded: the soak is about a service running for long, not
            // a burst (issue #18's benches measure bursts).
            wait_for_within(
                Duration::from_secs(600),
                Duration::from_millis(200),
                "the sessions to catch up",
                || {
                    let behind = posted.saturating_sub(pasted.now());
                    (behind < SAMPLE_EVERY).then_some(()).ok_or(format!("{behind} behind"))
                },
            );
        }
    }
    // Wait for the rest to be pasted; if some never are, the check below names them with
    // their trails rather than a bare count.
    let deadline = Instant::now() + Duration::from_secs(600);
    while pasted.now() < events && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    sample(events, pasted.now(), &mut out);

    let messages = machine.messages();
    let mut seen = vec![0u32; events + 1];
    for message in &messages {
        for token in message.split("soak comment ").skip(1) {
            if let Some(n) = token.split(' ').next().and_then(|n| n.parse::<usize>().ok()) {
                seen[n.min(events)] += 1;
            }
        }
    }
    let wrong: Vec<(usize, u32)> =
        (1..=events).filter(|&n| seen[n] != 1).map(|n| (n, seen[n])).take(20).collect();
    let trails: Vec<String> =
        wrong.iter().take(8).map(|&(n, _)| trail_of(&machine, n, ids[n])).collect();
    assert!(
        wrong.is_empty(),
        "comments not pasted exactly once (comment, times): {wrong:?}\n{}",
        trails.join("\n")
    );
}

/// What the event log (live and rotated files, oldest first) says about soak comment `n`,
/// GitHub comment `id`: the lines naming its node id or its comment id.
fn trail_of(machine: &Machine, n: usize, id: u64) -> String {
    let node = loop_sim::world::node_id("IC", id);
    let comment_id = format!("\"comment_id\":{id},");
    let logs = machine.root.join("logs");
    let mut files: Vec<_> = (1..=9).rev().map(|k| logs.join(format!("events.jsonl.{k}"))).collect();
    files.push(logs.join("events.jsonl"));
    let lines: Vec<String> = files
        .iter()
        .filter_map(|file| std::fs::read_to_string(file).ok())
        .flat_map(|text| {
            text.lines()
                .filter(|line| line.contains(&node) || line.contains(&comment_id))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    format!("soak comment {n} (comment {id}, {node}):\n{}", lines.join("\n"))
}

/// How many soak comments the stand-in agent has received, read incrementally from its
/// record (it grows to hundreds of megabytes).
struct Pasted {
    path: std::path::PathBuf,
    read: u64,
    count: usize,
    /// The bytes after the last newline read so far.
    partial: Vec<u8>,
}

impl Pasted {
    fn new(machine: &Machine) -> Self {
        Self { path: machine.record.clone(), read: 0, count: 0, partial: Vec::new() }
    }

    fn now(&mut self) -> usize {
        use std::io::{Read as _, Seek as _};
        let Ok(mut file) = std::fs::File::open(&self.path) else { return self.count };
        if file.seek(std::io::SeekFrom::Start(self.read)).is_err() {
            return self.count;
        }
        let mut fresh = Vec::new();
        let Ok(n) = file.read_to_end(&mut fresh) else { return self.count };
        self.read += n as u64;
        self.partial.extend_from_slice(&fresh);
        if let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') {
            let lines: Vec<u8> = self.partial.drain(..=end).collect();
            let text = String::from_utf8_lossy(&lines);
            self.count += text.matches("soak comment ").count();
        }
        self.count
    }
}

/// Waits until item `number`'s session was launched (the launch record stays small; the
/// messages grow to hundreds of megabytes). Gives up after two minutes with what the
/// live event log says about the item.
fn wait_for_launch(machine: &Machine, number: u64) {
    let item = format!("github:{REPO}#{number}");
    let needle = format!("\"workItem\":\"{item}\"");
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let launches = std::fs::read_to_string(&machine.launches).unwrap_or_default();
        if launches.contains(&needle) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(machine.root.join("logs/events.jsonl")).unwrap_or_default();
    let quoted = format!("\"{item}\"");
    let about: Vec<&str> = log.lines().filter(|line| line.contains(&quoted)).collect();
    let last = &about[about.len().saturating_sub(30)..];
    panic!("no launch of {item} within 120 s; the event log about it:\n{}", last.join("\n"));
}

/// The service's pid, from the poller's pidfile (the service holds it).
fn service_pid(machine: &Machine) -> u32 {
    let text =
        std::fs::read_to_string(machine.root.join("poll.pid")).expect("the poller's pidfile");
    text.split(|c: char| !c.is_ascii_digit())
        .find(|digits| !digits.is_empty())
        .and_then(|pid| pid.parse().ok())
        .expect("a pid in the pidfile")
}

fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The event log on disk: the live file and every rotated one.
fn event_log_bytes(machine: &Machine) -> u64 {
    std::fs::read_dir(machine.root.join("logs"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("events.jsonl"))
        .filter_map(|entry| entry.metadata().ok())
        .map(|meta| meta.len())
        .sum()
}

//! Child processes for tests that need a second process.
//!
//! [`spawn`] re-runs this test binary filtered to the single test [`act`], with
//! `LOOP_STORE_IT_CHILD` naming the role and `LOOP_STORE_IT_ARGS` its arguments
//! (tab-separated; the first is always the test's temp directory). When the variable is
//! absent (a normal test run), `act` does nothing and passes.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use loop_core::control::Command as ControlCommand;
use loop_core::log::{Kind, Line};
use loop_core::record::PollLedger;
use loop_store::PidLock;

const ROLE: &str = "LOOP_STORE_IT_CHILD";
const ARGS: &str = "LOOP_STORE_IT_ARGS";

/// The work item the writer roles hammer.
pub const HAMMERED: &str = "github:octo/app#15";

/// Starts this binary as a child acting out `role` with `args`.
pub fn spawn(role: &str, args: &[&str]) -> Child {
    let exe = std::env::current_exe().expect("the test binary knows its own path");
    Command::new(exe)
        .args(["--exact", "child::act", "--nocapture", "--test-threads=1", "--quiet"])
        .env(ROLE, role)
        .env(ARGS, args.join("\t"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the test binary can be re-run as a child")
}

/// Blocks until the child writes the line `expected` on stdout (the child's "ready").
pub fn wait_for_line(stdout: &mut BufReader<ChildStdout>, expected: &str) {
    let mut line = String::new();
    loop {
        line.clear();
        let read = stdout.read_line(&mut line).expect("the child's stdout is readable");
        assert!(read > 0, "the child exited before saying `{expected}`");
        if line.trim() == expected {
            return;
        }
    }
}

fn say(line: &str) {
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{line}").and_then(|()| stdout.flush()).expect("the parent reads our stdout");
}

/// The child's entry point; a no-op in a normal run.
#[test]
fn act() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let args = std::env::var(ARGS).unwrap_or_default();
    let args: Vec<&str> = args.split('\t').collect();
    let dir = Path::new(args[0]);
    let store = crate::store_in(dir);
    let item = crate::item(HAMMERED);
    let count =
        |n: usize| -> u64 { args.get(n).and_then(|a| a.parse().ok()).expect("a count argument") };
    match role.as_str() {
        // Appends one comment id per write to `poll`, each a read-modify-write of the
        // section, so a lost update shows as a missing id.
        "write-poll" => {
            for n in 0..count(1) {
                let mut poll = read_poll(&store, &item);
                poll.comments.seen_comments.push(crate::portable::comment(n));
                store.write_section(&item, Some(&poll)).unwrap();
            }
        }
        "write-control" => {
            for n in 0..count(1) {
                let mut control = crate::portable::control(ControlCommand::Start);
                control.note = Some(n.to_string());
                store.write_section(&item, Some(&control)).unwrap();
            }
        }
        // Writes a growing poll section until killed.
        "write-forever" => {
            let mut poll = read_poll(&store, &item);
            loop {
                let next = poll.comments.seen_comments.len() as u64;
                poll.comments.seen_comments.push(crate::portable::comment(next));
                store.write_section(&item, Some(&poll)).unwrap();
            }
        }
        // Appends `count` events numbered `n`, tagged with this role's `writer` argument.
        "append-events" => {
            let log = store.events().clone().with_rotation(crate::event_log::small_rotation());
            for n in 0..count(2) {
                log.append(
                    &Line::info(Kind::WebhookReceived).field("writer", args[1]).field("n", n),
                    jiff::Timestamp::now(),
                )
                .unwrap();
            }
        }
        // The same through a writer thread, dropped (not flushed) at the end.
        "emit-events" => {
            let log = store.events().clone().with_rotation(crate::event_log::small_rotation());
            let log = log.with_writer();
            for n in 0..count(2) {
                log.emit(Line::info(Kind::WebhookReceived).field("writer", args[1]).field("n", n));
            }
        }
        // Appends one receipt to the inbox journal and writes it without a sync, says
        // so, then waits to be killed.
        "inbox-written" => {
            let (mut inbox, _) = loop_store::inbox::Inbox::open(&dir.join("inbox")).unwrap();
            inbox.append(crate::inbox::receipt("written-not-synced")).unwrap();
            inbox.write().unwrap();
            say("written");
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
        }
        // Holds the pidfile until its stdin closes (or it is killed).
        "hold-pidfile" => {
            let _lock = PidLock::acquire(&dir.join("poll.pid")).unwrap();
            say("locked");
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
        }
        _ => panic!("unknown child role `{role}`"),
    }
}

fn read_poll(store: &loop_store::StateStore, item: &loop_core::WorkItemRef) -> PollLedger {
    store.read_section::<PollLedger>(item).unwrap().into_value().unwrap_or_default()
}

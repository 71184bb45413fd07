//! The event log: concurrent appenders (threads and processes), rotation, reading across
//! rotated files, following appends across a rotation.

use std::collections::BTreeMap;
use std::fs;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use jiff::Timestamp;
use loop_core::log::{Kind, Line, Weight};
use loop_store::event_log::read::{EventTail, read_all};
use loop_store::event_log::{EventLog, Rotation};

use crate::child;

/// Small enough that the tests below rotate many times.
pub fn small_rotation() -> Rotation {
    Rotation { max_bytes: 4 * 1024, keep: 1000 }
}

/// Every `(writer, n)` in the log, grouped by writer, in the order read.
fn appended(path: &std::path::Path) -> BTreeMap<String, Vec<u64>> {
    let mut by_writer: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for record in read_all(path).unwrap() {
        let writer = record.0["writer"].as_str().unwrap().to_owned();
        by_writer.entry(writer).or_default().push(record.0["n"].as_u64().unwrap());
    }
    by_writer
}

/// Runs the child processes `(verb, writer, lines)` side by side on one state root and
/// answers what they appended, by writer.
fn appended_by_children(children: &[(&str, &str, &str)]) -> BTreeMap<String, Vec<u64>> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let running: Vec<_> =
        children.iter().map(|(verb, writer, n)| child::spawn(verb, &[root, writer, n])).collect();
    for child in running {
        assert!(child.wait_with_output().unwrap().status.success());
    }
    appended(crate::store_in(dir.path()).layout().event_log())
}

/// `writers` and no other wrote, each `0..n` in order.
fn assert_each_in_order(by_writer: &BTreeMap<String, Vec<u64>>, writers: &[&str], n: u64) {
    let found: Vec<&str> = by_writer.keys().map(String::as_str).collect();
    assert_eq!(found, writers);
    for (writer, ns) in by_writer {
        assert_eq!(*ns, (0..n).collect::<Vec<u64>>(), "writer {writer}");
    }
}

/// Every live and rotated file in `logs` holds whole JSON lines only, and no more than
/// `max_bytes` when given.
fn assert_whole_lines(logs: &std::path::Path, max_bytes: Option<u64>) {
    for entry in fs::read_dir(logs).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".lock") {
            continue;
        }
        let text = fs::read_to_string(entry.path()).unwrap();
        let size = text.len() as u64;
        assert!(max_bytes.is_none_or(|max| size <= max), "{name} is {size} bytes");
        for line in text.lines() {
            serde_json::from_str::<serde_json::Value>(line).expect("every line parses");
        }
    }
}

#[test]
fn concurrent_threads_lose_no_line_and_rotation_keeps_each_writers_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("logs/events.jsonl");
    let log = EventLog::new(&path, "test").with_rotation(small_rotation());
    std::thread::scope(|scope| {
        for writer in ["a", "b", "c", "d"] {
            let log = log.clone();
            scope.spawn(move || {
                for n in 0..300u64 {
                    log.append(
                        &Line::info(Kind::WebhookReceived).field("writer", writer).field("n", n),
                        Timestamp::now(),
                    )
                    .unwrap();
                }
            });
        }
    });
    assert_each_in_order(&appended(&path), &["a", "b", "c", "d"], 300);
    assert!(dir.path().join("logs/events.jsonl.2").exists(), "the log rotated");
    assert_whole_lines(&dir.path().join("logs"), None);
}

#[test]
fn two_processes_appending_lose_no_line() {
    let by_writer =
        appended_by_children(&[("append-events", "p1", "400"), ("append-events", "p2", "400")]);
    assert_each_in_order(&by_writer, &["p1", "p2"], 400);
}

#[test]
fn threads_emitting_through_the_writer_lose_no_line_and_rotation_keeps_each_writers_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("logs/events.jsonl");
    let log = EventLog::new(&path, "test").with_rotation(small_rotation()).with_writer();
    std::thread::scope(|scope| {
        for writer in ["a", "b", "c", "d"] {
            let log = log.clone();
            scope.spawn(move || {
                for n in 0..300u64 {
                    log.emit(
                        Line::info(Kind::WebhookReceived).field("writer", writer).field("n", n),
                    );
                }
            });
        }
    });
    log.flush();
    assert_each_in_order(&appended(&path), &["a", "b", "c", "d"], 300);
    assert!(dir.path().join("logs/events.jsonl.2").exists(), "the log rotated");
    assert_whole_lines(&dir.path().join("logs"), Some(small_rotation().max_bytes));
}

#[test]
fn a_process_with_a_writer_and_one_appending_directly_lose_no_line_between_them() {
    let by_writer = appended_by_children(&[
        ("emit-events", "writer", "2000"),
        ("append-events", "direct", "400"),
    ]);
    assert_eq!(by_writer["writer"], (0..2000).collect::<Vec<u64>>(), "dropping the log wrote all");
    assert_eq!(by_writer["direct"], (0..400).collect::<Vec<u64>>());
}

#[test]
fn after_another_process_rotates_the_writer_appends_to_the_new_live_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let log = EventLog::new(&path, "test").with_writer();
    log.emit(Line::info(Kind::WebhookReceived));
    log.flush();
    // What a rotation by another process leaves: the live file renamed away.
    fs::rename(&path, dir.path().join("events.jsonl.1")).unwrap();
    log.emit(Line::info(Kind::RoutingRouted));
    log.flush();
    let live = fs::read_to_string(&path).unwrap();
    let rotated = fs::read_to_string(dir.path().join("events.jsonl.1")).unwrap();
    assert!(live.contains("routing.routed") && !live.contains("webhook.received"), "{live}");
    assert!(
        rotated.contains("webhook.received") && !rotated.contains("routing.routed"),
        "{rotated}"
    );
}

#[test]
fn components_sharing_one_writer_keep_their_own_source_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let log = EventLog::new(&path, "service").with_writer();
    let views = [
        ("gh-webhook", log.for_source("gh-webhook")),
        ("poll", log.for_source("poll")),
        ("service", log.clone()),
    ];
    std::thread::scope(|scope| {
        for (source, view) in &views {
            scope.spawn(move || {
                for n in 0..200u64 {
                    view.emit(
                        Line::info(Kind::WebhookReceived).field("writer", *source).field("n", n),
                    );
                }
            });
        }
    });
    drop(views);
    log.flush();
    let records = read_all(&path).unwrap();
    for record in &records {
        assert_eq!(record.0["source"], record.0["writer"], "each line names its emitter");
    }
    let by_writer = appended(&path);
    for source in ["gh-webhook", "poll", "service"] {
        assert_eq!(by_writer[source], (0..200).collect::<Vec<u64>>(), "{source}");
    }
}

/// Polls `future` once with a waker that reports its wake on a channel.
fn poll_once<F: Future + Unpin>(
    future: &mut F,
) -> (Poll<F::Output>, std::sync::mpsc::Receiver<()>) {
    struct Report(std::sync::Mutex<std::sync::mpsc::Sender<()>>);
    impl Wake for Report {
        fn wake(self: Arc<Self>) {
            let _ = self.0.lock().unwrap().send(());
        }
    }
    let (woken, wakes) = std::sync::mpsc::channel();
    let waker = Waker::from(Arc::new(Report(std::sync::Mutex::new(woken))));
    (Pin::new(future).poll(&mut Context::from_waker(&waker)), wakes)
}

#[test]
fn an_effect_emitted_asynchronously_is_in_the_file_when_its_future_is_ready() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let log = EventLog::new(&path, "service").with_writer();
    assert_eq!(Kind::SessionSpawned.weight(), Weight::Effect);
    let mut spawned = log.emit_async(Line::info(Kind::SessionSpawned).field("n", 1));
    let (first, wakes) = poll_once(&mut spawned);
    if first.is_pending() {
        // The writer thread wakes the task once the line is written; nothing blocked.
        wakes.recv_timeout(Duration::from_secs(10)).expect("the writer wakes the emitter");
        assert!(poll_once(&mut spawned).0.is_ready());
    }
    let events: Vec<String> =
        read_all(&path).unwrap().iter().map(|r| r.event().to_owned()).collect();
    assert_eq!(events, ["session.spawned"]);
}

#[test]
fn a_routine_line_emitted_asynchronously_is_ready_once_queued_and_written_behind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let log = EventLog::new(&path, "service").with_writer();
    assert_eq!(Kind::WebhookReceived.weight(), Weight::Trail);
    let mut received = log.emit_async(Line::info(Kind::WebhookReceived));
    assert!(poll_once(&mut received).0.is_ready(), "a routine line waits for nobody");
    drop(log);
    assert_eq!(read_all(&path).unwrap().len(), 1, "the last clone dropped wrote it");
}

#[test]
fn a_lone_routine_line_reaches_the_file_without_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let log = EventLog::new(&path, "poll").with_writer();
    log.emit(Line::info(Kind::PollerStarted));
    log.flush();
    // The thread has caught up and waits for work: one more line must wake it.
    log.emit(Line::info(Kind::PollCycle));
    // A hang guard, not a timing assertion: the writer lingers a few milliseconds.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while read_all(&path).unwrap().len() < 2 {
        assert!(std::time::Instant::now() < deadline, "the line was never written");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(log);
}

#[test]
fn dropping_the_last_clone_writes_every_line_emitted_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let log = EventLog::new(&path, "test").with_writer();
    let clone = log.clone();
    for n in 0..500u64 {
        clone.emit(Line::info(Kind::WebhookReceived).field("writer", "w").field("n", n));
    }
    drop(clone);
    drop(log);
    assert_eq!(appended(&path)["w"], (0..500).collect::<Vec<u64>>());
}

#[test]
fn the_reader_skips_corrupt_and_partial_lines_and_tolerates_a_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    assert!(read_all(&path).unwrap().is_empty());
    fs::write(&path, "{\"event\":\"a\"}\nnot json\n\n[1]\n{\"event\":\"b\"}\n{\"event\":\"trunc")
        .unwrap();
    let events: Vec<String> =
        read_all(&path).unwrap().iter().map(|r| r.event().to_owned()).collect();
    assert_eq!(events, ["a", "b"]);
}

#[test]
fn a_tail_returns_only_new_lines_and_follows_across_a_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let log = EventLog::new(&path, "test").with_rotation(Rotation { max_bytes: 300, keep: 3 });
    let append = |n: u64| {
        log.append(&Line::info(Kind::WebhookReceived).field("n", n), Timestamp::now()).unwrap()
    };
    append(0);
    let mut tail = EventTail::from_end(&path).unwrap();
    assert!(tail.poll().unwrap().is_empty());
    append(1);
    append(2);
    let ns = |records: Vec<loop_store::event_log::read::EventRecord>| -> Vec<u64> {
        records.iter().map(|r| r.0["n"].as_u64().unwrap()).collect()
    };
    assert_eq!(ns(tail.poll().unwrap()), [1, 2]);
    // Each line is ~90 bytes: these appends rotate the file under the tail.
    for n in 3..8 {
        append(n);
    }
    assert!(dir.path().join("events.jsonl.1").exists());
    let mut followed = ns(tail.poll().unwrap());
    followed.extend(ns(tail.poll().unwrap()));
    assert_eq!(followed, [3, 4, 5, 6, 7]);
}

#[test]
fn a_tail_started_beside_a_half_written_line_returns_that_line_once_complete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    fs::write(&path, "{\"event\":\"old\"}\n{\"event\":\"ha").unwrap();
    let mut tail = EventTail::from_end(&path).unwrap();
    let backlog: Vec<String> =
        tail.backlog().unwrap().iter().map(|r| r.event().to_owned()).collect();
    assert_eq!(backlog, ["old"]);
    assert!(tail.poll().unwrap().is_empty(), "the partial line is not returned yet");
    let mut file = fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut file, b"lf\"}\n").unwrap();
    let polled: Vec<String> = tail.poll().unwrap().iter().map(|r| r.event().to_owned()).collect();
    assert_eq!(polled, ["half"]);
}

#[test]
fn with_a_writer_a_line_recording_an_effect_is_in_the_file_when_emit_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let log = EventLog::new(&path, "test").with_writer();
    let effects = Kind::ALL.iter().filter(|kind| kind.weight() == Weight::Effect);
    for kind in effects {
        log.emit(Line::info(*kind));
        let written = fs::read_to_string(&path).unwrap_or_default();
        assert!(written.contains(kind.name()), "{kind} was not written before emit returned");
    }
    log.emit(Line::warning(Kind::PollItemError));
    assert!(fs::read_to_string(&path).unwrap().contains("poll.item_error"));
}

//! Poll clocks and the heartbeat: machine-local, atomic, best-effort.

use std::fs;

use loop_core::record::PollClock;
use loop_store::Written;
use loop_store::heartbeat::{CycleSummary, Heartbeat};

use crate::{item, logged, store_in};

#[test]
fn clocks_are_kept_per_ref_and_an_empty_clock_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let (issue, pr) = (item("github:octo/app#15"), item("github:octo/lib#7"));
    let at = "2026-11-29T10:42:00Z".parse().unwrap();
    let polled = PollClock { last_polled_at: Some(at), closure_checked_at: None };
    store.put_poll_clock(&issue, polled).unwrap();
    store.put_poll_clock(&pr, polled).unwrap();
    assert_eq!(store.poll_clock(&issue), polled);
    assert_eq!(store.put_poll_clock(&issue, polled).unwrap(), Written::Unchanged);

    let text = fs::read_to_string(store.layout().poll_clocks()).unwrap();
    assert_eq!(
        text,
        "{\n  \"clocks\": {\n    \"github:octo/app#15\": {\n      \"lastPolledAt\": \"2026-11-29T10:42:00Z\"\n    },\n    \"github:octo/lib#7\": {\n      \"lastPolledAt\": \"2026-11-29T10:42:00Z\"\n    }\n  }\n}\n"
    );
    store.put_poll_clock(&pr, PollClock::default()).unwrap();
    store
        .update_poll_clocks(|clocks| {
            clocks.clocks.remove(&issue);
        })
        .unwrap();
    assert!(store.poll_clocks().clocks.is_empty());
}

#[test]
fn an_unreadable_clock_file_reads_as_empty_and_is_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let path = store.layout().poll_clocks();
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, "{\"clocks\": 7}").unwrap();
    assert!(store.poll_clocks().clocks.is_empty());
    assert!(!path.exists());
    assert!(logged(&store).contains("state.quarantined"));
}

/// Issue #16, item 8 (seed 001): a bad value is dropped entry by entry, the file kept.
#[test]
fn one_bad_value_in_the_clock_file_loses_only_itself() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let path = store.layout().poll_clocks();
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let text = r#"{"clocks": {"github:octo/app#1": {"lastPolledAt": "garbage"},
        "github:octo/app#2": {"lastPolledAt": "2026-11-29T10:42:00Z"}}}"#;
    fs::write(&path, text).unwrap();
    let clocks = store.poll_clocks();
    let at = "2026-11-29T10:42:00Z".parse().unwrap();
    assert_eq!(
        clocks.clocks.get(&item("github:octo/app#2")).and_then(|c| c.last_polled_at),
        Some(at)
    );
    assert_eq!(store.poll_clock(&item("github:octo/app#1")), PollClock::default(), "due again");
    assert!(path.exists(), "not quarantined");
    assert!(!logged(&store).contains("state.quarantined"));
}

#[test]
fn the_heartbeat_is_written_before_the_first_cycle_and_after_each() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let mut heartbeat = Heartbeat {
        started_at: "2026-11-29T10:00:00Z".parse().unwrap(),
        last_cycle_at: None,
        interval_seconds: 60,
        last_cycle: None,
        scopes: Vec::new(),
    };
    store.write_heartbeat(&heartbeat).unwrap();
    assert_eq!(store.read_heartbeat().unwrap(), Some(heartbeat.clone()));
    heartbeat.last_cycle_at = Some("2026-11-29T10:01:00Z".parse().unwrap());
    heartbeat.last_cycle =
        Some(CycleSummary { items_seen: 3, spawns: 1, ..CycleSummary::default() });
    store.write_heartbeat(&heartbeat).unwrap();
    assert_eq!(store.read_heartbeat().unwrap(), Some(heartbeat));
    assert!(!store.layout().poll_pidfile().exists(), "the heartbeat is not the pidfile");
}

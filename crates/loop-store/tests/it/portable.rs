//! Portable records: sections, tombstones, sealing, the index, quarantine, legacy
//! read-forward, and two processes writing different sections of one record.

use std::collections::BTreeMap;
use std::fs;

use loop_core::control::Command;
use loop_core::record::{
    ChannelBinding, Collaborators, CommentId, CommentLedger, Control, ControlSource, Ended,
    PollLedger,
};
use loop_store::index::PortableIndex;
use loop_store::{ChannelBindings, Slot, Written};
use serde_json::Value;

use crate::{child, item, logged, store_in};

pub fn control(command: Command) -> Control {
    Control {
        command,
        source: ControlSource::Comment,
        actor: Some("octocat".parse().unwrap()),
        requested_at: "2026-11-29T10:00:00Z".parse().unwrap(),
        note: None,
        instance: None,
        delivery_id: None,
    }
}

/// The node id of conversation comment `n`.
pub fn comment(n: u64) -> CommentId {
    CommentId::new(format!("IC_{n}"))
}

pub fn ledger(seen: &[u64]) -> PollLedger {
    PollLedger {
        comments: CommentLedger {
            seen_comments: seen.iter().map(|n| comment(*n)).collect(),
            ..CommentLedger::default()
        },
        ..PollLedger::default()
    }
}

fn index(store: &loop_store::StateStore) -> Option<PortableIndex> {
    let text = fs::read_to_string(store.layout().portable_index()).ok()?;
    Some(serde_json::from_str(&text).unwrap())
}

#[test]
fn each_writer_replaces_only_its_section_and_identity_comes_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    store.write_section(&work_item, Some(&ledger(&[1]))).unwrap();
    store.write_section(&work_item, Some(&control(Command::Start))).unwrap();
    store.write_section(&work_item, Some(&ledger(&[1, 2]))).unwrap();

    let record = store.load_portable_record(&work_item).unwrap().unwrap();
    let keys: Vec<&str> = record.keys().map(String::as_str).collect();
    assert_eq!(keys, ["ref", "url", "poll", "control"]);
    assert_eq!(record["url"], "https://github.com/octo/app/issues/15");
    assert_eq!(
        store.read_section::<PollLedger>(&work_item).unwrap(),
        Slot::Present(ledger(&[1, 2]))
    );
    assert_eq!(
        store.read_section::<Control>(&work_item).unwrap(),
        Slot::Present(control(Command::Start))
    );
    assert_eq!(store.read_section::<Ended>(&work_item).unwrap(), Slot::Absent);
}

#[test]
fn an_unchanged_section_write_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    assert_eq!(store.write_section(&work_item, Some(&ledger(&[1]))).unwrap(), Written::Changed);
    let path = store.layout().portable_record(&work_item);
    let before = fs::metadata(&path).unwrap().modified().unwrap();
    let inode = std::os::unix::fs::MetadataExt::ino(&fs::metadata(&path).unwrap());
    assert_eq!(store.write_section(&work_item, Some(&ledger(&[1]))).unwrap(), Written::Unchanged);
    let after = fs::metadata(&path).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::ino(&after), inode);
    assert_eq!(after.modified().unwrap(), before);
}

#[test]
fn unknown_sections_are_preserved_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    let path = store.layout().portable_record(&work_item);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(
        &path,
        r#"{"ref":"github:octo/app#15","graph":{"loop":"spec","nodes":[{"id":"a"}]}}"#,
    )
    .unwrap();
    store.write_section(&work_item, Some(&control(Command::Stop))).unwrap();
    let record = store.load_portable_record(&work_item).unwrap().unwrap();
    assert_eq!(record["graph"], serde_json::json!({"loop":"spec","nodes":[{"id":"a"}]}));
    assert!(record["control"].is_object());
}

#[test]
fn a_tombstone_persists_beside_other_sections_and_the_last_section_removes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    store.write_section(&work_item, Some(&control(Command::Start))).unwrap();
    store.write_section(&work_item, Some(&ledger(&[1]))).unwrap();
    store.write_section::<Control>(&work_item, None).unwrap();
    assert_eq!(store.read_section::<Control>(&work_item).unwrap(), Slot::Tombstone);
    let record = store.load_portable_record(&work_item).unwrap().unwrap();
    assert_eq!(record["control"], Value::Null);

    store.write_section::<PollLedger>(&work_item, None).unwrap();
    assert!(!store.layout().portable_record(&work_item).exists());
    assert!(index(&store).is_none(), "the index goes with the last record");
}

#[test]
fn the_index_lists_records_sorted_with_sections_and_linked_pull_requests() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let mut poll = ledger(&[1]);
    poll.pull_requests.insert(item("github:octo/lib#7"), CommentLedger::default());
    store.write_section(&item("github:octo/b#2"), Some(&poll)).unwrap();
    store.write_section(&item("github:octo/a#9"), Some(&control(Command::Start))).unwrap();
    store.write_section::<Ended>(&item("github:octo/a#9"), None).unwrap();

    let index = index(&store).unwrap();
    let refs: Vec<&str> = index.work_items.iter().map(|e| e.work_item.as_str()).collect();
    assert_eq!(refs, ["github:octo/a#9", "github:octo/b#2"]);
    assert_eq!(index.work_items[0].sections, ["control"], "tombstones are not listed");
    assert_eq!(index.work_items[1].file, "github-octo-b-2.json");
    assert_eq!(index.work_items[1].pull_requests, ["github:octo/lib#7"]);
}

#[test]
fn a_corrupt_record_is_quarantined_reported_and_read_as_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    let path = store.layout().portable_record(&work_item);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, "{\"ref\":\"github:octo/app#15\",\"control\":{\"comm").unwrap();

    assert_eq!(store.read_section::<Control>(&work_item).unwrap(), Slot::Absent);
    assert!(!path.exists());
    let aside = fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with("github-octo-app-15.json.corrupt-"))
        .expect("the corrupt record was moved aside");
    assert!(fs::read_to_string(aside.path()).unwrap().contains("\"comm"));
    let log = logged(&store);
    assert!(
        log.contains("\"event\":\"state.quarantined\"") && log.contains("\"level\":\"error\""),
        "{log}"
    );

    // The next write starts a fresh record; the quarantined one is untouched.
    store.write_section(&work_item, Some(&ledger(&[5]))).unwrap();
    assert!(aside.path().exists());
}

#[test]
fn a_section_of_the_wrong_shape_quarantines_the_record_rather_than_being_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    let path = store.layout().portable_record(&work_item);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, r#"{"ref":"github:octo/app#15","control":{"command":"launch"}}"#).unwrap();
    assert_eq!(store.read_section::<Control>(&work_item).unwrap(), Slot::Absent);
    assert!(!path.exists());
    assert!(logged(&store).contains("section `control`"));
}

#[test]
fn legacy_control_is_adopted_once_logged_and_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    let legacy = store.layout().legacy_control(&work_item);
    fs::create_dir_all(legacy.parent().unwrap()).unwrap();
    let legacy_text = r#"{"ref":"github:octo/app#15","command":"start","source":"comment","actor":"octocat","requestedAt":"2026-11-29T10:00:00Z"}"#;
    fs::write(&legacy, legacy_text).unwrap();

    assert_eq!(
        store.read_section::<Control>(&work_item).unwrap(),
        Slot::Present(control(Command::Start))
    );
    assert!(logged(&store).contains("\"event\":\"state.legacy_adopted\""));
    assert!(store.load_portable_record(&work_item).unwrap().unwrap()["control"].is_object());
    assert_eq!(fs::read_to_string(&legacy).unwrap(), legacy_text, "legacy files are never written");

    // Emptying the record seals it while legacy data remains, so nothing is resurrected.
    store.write_section::<Control>(&work_item, None).unwrap();
    let record = store.load_portable_record(&work_item).unwrap().unwrap();
    assert_eq!(record.get("sealed"), Some(&Value::Bool(true)));
    assert_eq!(
        store.read_section::<Control>(&work_item).unwrap(),
        Slot::Absent,
        "sealed: not resurrected"
    );
}

#[test]
fn legacy_poll_is_read_from_the_root_file_then_the_working_directory_file() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("cwd");
    let layout = loop_store::StateLayout::new(dir.path().join("state"))
        .with_legacy_working_dir(Some(cwd.clone()));
    let store = loop_store::StateStore::new(
        layout.clone(),
        loop_store::EventLog::new(layout.event_log(), "test"),
    );
    let old = cwd.join(".the-loop/poll-state.json");
    fs::create_dir_all(old.parent().unwrap()).unwrap();
    fs::write(&old, r#"{"items":{"github:octo/app#1":{"seenComments":["IC_4"],"lastPolledAt":"2020-01-01T00:00:00Z"}}}"#).unwrap();
    let per_root = layout.legacy_poll_state();
    fs::create_dir_all(per_root.parent().unwrap()).unwrap();
    fs::write(&per_root, r#"{"items":{"github:octo/app#2":{"seenComments":["IC_8"]}}}"#).unwrap();

    assert_eq!(
        store.read_section::<PollLedger>(&item("github:octo/app#1")).unwrap(),
        Slot::Present(ledger(&[4]))
    );
    assert_eq!(
        store.read_section::<PollLedger>(&item("github:octo/app#2")).unwrap(),
        Slot::Present(ledger(&[8]))
    );
    assert_eq!(store.read_section::<PollLedger>(&item("github:octo/app#3")).unwrap(), Slot::Absent);
}

#[test]
fn every_section_type_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    let roster = Collaborators { users: Vec::new(), delivery_id: Some("k".into()) };
    let ended = Ended {
        state: "closed".into(),
        kind: "issue".into(),
        reason: None,
        at: "2026-11-29T10:00:00Z".parse().unwrap(),
        source: "poll".into(),
        actor: None,
    };
    let channels: ChannelBindings = BTreeMap::from([(
        "slack".to_owned(),
        ChannelBinding {
            channel: "C1".into(),
            thread: "1.2".into(),
            opened_at: "2026-11-29T10:00:00Z".parse().unwrap(),
            origin: "opened".into(),
            permalink: None,
        },
    )]);
    store.write_section(&work_item, Some(&roster)).unwrap();
    store.write_section(&work_item, Some(&ended)).unwrap();
    store.write_section(&work_item, Some(&channels)).unwrap();
    assert_eq!(store.read_section(&work_item).unwrap(), Slot::Present(roster));
    assert_eq!(store.read_section(&work_item).unwrap(), Slot::Present(ended));
    assert_eq!(store.read_section(&work_item).unwrap(), Slot::Present(channels));
}

/// The acceptance test: two processes × 500 writes of different sections lose nothing.
#[test]
fn two_processes_writing_different_sections_of_one_record_lose_no_write() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let writes = "500";
    let mut children = [
        child::spawn("write-control", &[root, writes]),
        child::spawn("write-poll", &[root, writes]),
    ];
    for child in &mut children {
        assert!(child.wait().unwrap().success(), "a writer child failed");
    }
    let store = store_in(dir.path());
    let work_item = item(child::HAMMERED);
    let poll = store.read_section::<PollLedger>(&work_item).unwrap().into_value().unwrap();
    assert_eq!(
        poll.comments.seen_comments,
        (0..500).map(comment).collect::<Vec<_>>(),
        "every poll write landed in order"
    );
    let control = store.read_section::<Control>(&work_item).unwrap().into_value().unwrap();
    assert_eq!(control.note.as_deref(), Some("499"));
    assert!(!logged(&store).contains("state.quarantined"));
}

#[test]
fn a_tombstone_blocks_the_legacy_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    store.write_section(&work_item, Some(&ledger(&[1]))).unwrap();
    store.write_section::<Control>(&work_item, None).unwrap();
    let legacy = store.layout().legacy_control(&work_item);
    fs::create_dir_all(legacy.parent().unwrap()).unwrap();
    fs::write(
        &legacy,
        r#"{"command":"start","source":"cli","requestedAt":"2026-11-29T10:00:00Z"}"#,
    )
    .unwrap();
    assert_eq!(store.read_section::<Control>(&work_item).unwrap(), Slot::Tombstone);
    assert!(!logged(&store).contains("state.legacy_adopted"));
}

/// The acceptance test: `kill -9` in the middle of writes never leaves a truncated or
/// unparsable record (or index). The child writes in a loop; the parent kills it at
/// several points, each after watching the record grow.
#[test]
fn kill_9_during_writes_never_leaves_an_unparsable_record() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let store = store_in(dir.path());
    let work_item = item(child::HAMMERED);
    let path = store.layout().portable_record(&work_item);
    let mut seen = 0;
    for round in 0..6 {
        let mut writer = child::spawn("write-forever", &[root]);
        // Let this round's child make progress past what the last round left, a little
        // further each round so kills land at different points of the write.
        let target = seen + 20 + round * 7;
        loop {
            let bytes = fs::read(&path).unwrap_or_default();
            if bytes.is_empty() {
                std::thread::yield_now();
                continue;
            }
            let record: serde_json::Map<String, Value> = serde_json::from_slice(&bytes)
                .expect("the record always parses while being rewritten");
            seen = record["poll"]["seenComments"].as_array().unwrap().len();
            if seen >= target {
                break;
            }
        }
        writer.kill().unwrap();
        writer.wait().unwrap();
        let poll = store.read_section::<PollLedger>(&work_item).unwrap().into_value().unwrap();
        assert!(poll.comments.seen_comments.len() >= target);
        if let Ok(index) = fs::read(store.layout().portable_index()) {
            serde_json::from_slice::<PortableIndex>(&index).expect("the index always parses");
        }
    }
    assert!(!logged(&store).contains("state.quarantined"));
}

/// Issue #16, item 1: the reference's index shape (no `pullRequests`, `url` left out)
/// reads as ours while it lists every record; once a record it does not list appears,
/// it is rebuilt.
#[test]
fn the_reference_index_is_read_while_fresh_and_rebuilt_once_a_record_is_missing_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let first = item("github:octo/app#15");
    store.write_section(&first, Some(&ledger(&[1]))).unwrap();
    let reference = serde_json::json!({"workItems": [
        {"ref": first.to_string(), "file": format!("{}.json", first.slug()), "sections": ["poll"]},
    ]});
    fs::write(store.layout().portable_index(), reference.to_string()).unwrap();
    let read = store.portable_index().unwrap();
    assert_eq!(read.work_items.len(), 1);
    assert_eq!(read.work_items[0].url, "", "read as written, not rebuilt");

    // A record copied in (no writer of ours rebuilt the index).
    let other = tempfile::tempdir().unwrap();
    let second = item("github:octo/app#16");
    store_in(other.path()).write_section(&second, Some(&ledger(&[2]))).unwrap();
    let copied = store_in(other.path()).layout().portable_record(&second);
    fs::copy(copied, store.layout().portable_record(&second)).unwrap();
    let rebuilt = store.portable_index().unwrap();
    let refs: Vec<&str> = rebuilt.work_items.iter().map(|e| e.work_item.as_str()).collect();
    assert_eq!(refs, [first.to_string(), second.to_string()]);
    assert_eq!(index(&store).as_ref(), Some(&rebuilt), "and written back");
}

/// Issue #32: a write keeps the index without reading every record again; what another
/// process wrote meanwhile is read, and the result is what a full scan gives.
#[test]
fn a_write_updates_the_index_reading_only_the_records_changed_since() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    for n in 1..=200 {
        store.write_section(&item(&format!("github:octo/old#{n}")), Some(&ledger(&[n]))).unwrap();
    }
    let other = loop_store::StateStore::new(store.layout().clone(), store.events().clone());
    other.write_section(&item("github:octo/app#1"), Some(&control(Command::Start))).unwrap();
    other.write_section(&item("github:octo/old#7"), None::<&PollLedger>).unwrap();

    let before = store.reads();
    store.write_section(&item("github:octo/app#2"), Some(&control(Command::Stop))).unwrap();
    let read = store.reads().records - before.records;
    assert_eq!(read, 3, "its own record under the lock, and the two the other process wrote");
    assert_eq!(store.reads().listings, before.listings, "no listing");

    let written = index(&store).expect("an index");
    fs::remove_file(store.layout().portable_index()).unwrap();
    let scanned = other.portable_index().unwrap();
    assert_eq!(written, scanned);
    assert_eq!(written.work_items.len(), 201, "old#7 is gone, app#1 and app#2 are in");
}

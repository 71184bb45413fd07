//! Session records: load, save, update under the lock, delete, list, quarantine.

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;

use jiff::Timestamp;
use loop_core::record::{Endpoint, EndpointStatus, LocalRecord};
use loop_store::Written;

use crate::{item, logged, store_in};

fn endpoint(cwd: &str) -> Endpoint {
    let created_at = "2026-11-29T10:00:00Z".parse().unwrap();
    Endpoint {
        harness_session_id: Some("conv-1".into()),
        tmux_target: "loop-github-octo-app-15".into(),
        recent_deliveries: vec!["d1".into()],
        ..Endpoint::new("claude", PathBuf::from(cwd), created_at)
    }
}

#[test]
fn a_saved_record_loads_back_and_an_identical_save_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    let mut record = LocalRecord::new(work_item.clone());
    record.endpoints.insert(work_item.clone(), endpoint("/w/app"));
    record.endpoints.insert(item("github:octo/lib#7"), endpoint("/w/lib"));

    assert_eq!(store.save_local_record(&record).unwrap(), Written::Changed);
    assert_eq!(store.load_local_record(&work_item).unwrap(), Some(record.clone()));
    assert_eq!(store.save_local_record(&record).unwrap(), Written::Unchanged);
    let path = store.layout().local_record(&work_item);
    let text = fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("{\n  \"ref\": \"github:octo/app#15\""), "{text}");
}

#[test]
fn an_update_sees_the_current_record_and_none_deletes_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    let (seen, written) = store
        .update_local_record(&work_item, |slot| {
            let seen = slot.is_some();
            let mut record = LocalRecord::new(work_item.clone());
            record.endpoints.insert(work_item.clone(), endpoint("/w"));
            *slot = Some(record);
            seen
        })
        .unwrap();
    assert!(!seen);
    assert_eq!(written, Written::Changed);

    store
        .update_local_record(&work_item, |slot| {
            let record = slot.as_mut().expect("the first update created it");
            record.endpoints.get_mut(&work_item).unwrap().status = EndpointStatus::Paused;
        })
        .unwrap();
    let record = store.load_local_record(&work_item).unwrap().unwrap();
    assert_eq!(record.own_endpoint().unwrap().status, EndpointStatus::Paused);

    store.update_local_record(&work_item, |slot| *slot = None).unwrap();
    assert!(!store.layout().local_record(&work_item).exists());
}

#[test]
fn listing_reports_only_record_files_sorted_by_ref() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    for text in ["github:octo/b#2", "github:octo/a#10"] {
        let work_item = item(text);
        let mut record = LocalRecord::new(work_item.clone());
        record.endpoints.insert(work_item, endpoint("/w"));
        store.save_local_record(&record).unwrap();
    }
    let registry = store.layout().registry_dir().to_owned();
    fs::write(registry.join("service.pid"), "123\n").unwrap();
    fs::write(registry.join("notes.json"), "not json").unwrap();

    let refs: Vec<String> =
        store.list_local_records().unwrap().iter().map(|r| r.work_item.to_string()).collect();
    assert_eq!(refs, ["github:octo/a#10", "github:octo/b#2"]);
    assert!(registry.join("notes.json").exists(), "a non-record file is not quarantined");
    assert!(logged(&store).is_empty());
}

#[test]
fn a_corrupt_record_is_quarantined_logged_and_the_item_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    let path = store.layout().local_record(&work_item);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, "{\"ref\": \"github:octo/app#15\", \"endpoints\": {").unwrap();

    assert_eq!(store.load_local_record(&work_item).unwrap(), None);
    assert!(store.list_local_records().unwrap().is_empty());
    assert!(!path.exists());
    let moved: Vec<_> = fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            entry.file_name().to_string_lossy().starts_with("github-octo-app-15.json.corrupt-")
        })
        .collect();
    assert_eq!(moved.len(), 1);
    let log = logged(&store);
    assert!(log.contains("\"event\":\"state.quarantined\""), "{log}");
    assert!(log.contains("github-octo-app-15.json"), "{log}");
}

#[test]
fn a_record_whose_ref_does_not_match_its_file_name_is_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    let other = LocalRecord::new(item("github:octo/app#16"));
    let path = store.layout().local_record(&work_item);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, serde_json::to_vec(&other).unwrap()).unwrap();
    assert_eq!(store.load_local_record(&work_item).unwrap(), None);
    assert!(!path.exists());
}

#[test]
fn writing_an_endpoint_never_needs_a_timestamp_from_the_store() {
    // The store never stamps: `createdAt` is what the caller passed.
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    let mut record = LocalRecord::new(work_item.clone());
    record.endpoints.insert(work_item.clone(), endpoint("/w"));
    store.save_local_record(&record).unwrap();
    let loaded = store.load_local_record(&work_item).unwrap().unwrap();
    let created: Timestamp = "2026-11-29T10:00:00Z".parse().unwrap();
    assert_eq!(loaded.own_endpoint().unwrap().created_at, created);
}

#[test]
fn a_listing_follows_every_change_made_since_the_last_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let (kept, changed, removed) =
        (item("github:octo/app#1"), item("github:octo/app#2"), item("github:octo/app#3"));
    for work_item in [&kept, &changed, &removed] {
        let mut record = LocalRecord::new(work_item.clone());
        record.endpoints.insert(work_item.clone(), endpoint("/w"));
        store.save_local_record(&record).unwrap();
    }
    let before = store.list_local_records().unwrap();
    assert_eq!(before.len(), 3);

    // Another clone of the store (as another part of the process holds) changes them.
    let other = store.clone();
    let stamped: Timestamp = "2026-11-29T11:00:00Z".parse().unwrap();
    other
        .update_local_record_unsynced(&changed, |slot| {
            let record = slot.as_mut().unwrap();
            record.endpoints.get_mut(&changed).unwrap().note_delivery("d2", stamped);
        })
        .unwrap();
    other.delete_local_record(&removed).unwrap();

    let listed = store.list_local_records().unwrap();
    let refs: Vec<String> = listed.iter().map(|r| r.work_item.to_string()).collect();
    assert_eq!(refs, ["github:octo/app#1", "github:octo/app#2"]);
    assert!(listed[1].endpoints[&changed].has_delivered("d2"), "{listed:#?}");
    assert!(Arc::ptr_eq(&listed[0], &before[0]), "an unchanged record is shared, not copied");
    assert!(!Arc::ptr_eq(&listed[1], &before[1]), "a changed one is read again");

    // A file damaged in place after it was listed is read again and quarantined.
    let path = store.layout().local_record(&kept);
    fs::write(&path, "{ damaged").unwrap();
    let refs: Vec<String> =
        store.list_local_records().unwrap().iter().map(|r| r.work_item.to_string()).collect();
    assert_eq!(refs, ["github:octo/app#2"]);
    assert!(!path.exists());
    assert!(logged(&store).contains("\"event\":\"state.quarantined\""));
}

#[test]
fn a_legacy_session_record_is_adopted_once_and_never_over_a_record_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let (adopted, own) = (item("github:octo/app#15"), item("github:octo/app#16"));
    let legacy = store.layout().legacy_sessions_dir();
    fs::create_dir_all(&legacy).unwrap();
    for (work_item, cwd) in [(&adopted, "/legacy/15"), (&own, "/legacy/16")] {
        let mut record = LocalRecord::new(work_item.clone());
        record.endpoints.insert(work_item.clone(), endpoint(cwd));
        fs::write(
            legacy.join(format!("{}.json", work_item.slug())),
            serde_json::to_vec(&record).unwrap(),
        )
        .unwrap();
    }
    fs::write(legacy.join("github-octo-app-17.json"), b"{\"ref\": \"github:octo/app#99\"}")
        .unwrap();
    let mut mine = LocalRecord::new(own.clone());
    mine.endpoints.insert(own.clone(), endpoint("/mine/16"));
    fs::create_dir_all(store.layout().registry_dir()).unwrap();
    fs::write(store.layout().local_record(&own), serde_json::to_vec(&mine).unwrap()).unwrap();

    let listed = store.list_local_records().unwrap();
    let cwds: Vec<_> =
        listed.iter().map(|r| r.endpoints.values().next().unwrap().cwd.clone()).collect();
    assert_eq!(
        cwds,
        [PathBuf::from("/legacy/15"), PathBuf::from("/mine/16")],
        "its own record wins"
    );
    assert_eq!(logged(&store).matches("state.legacy_adopted").count(), 1);

    // Reset in another process: the adopted record is gone for good.
    store.delete_local_record(&adopted).unwrap();
    let again = store_in(dir.path());
    assert_eq!(again.load_local_record(&adopted).unwrap(), None);
    assert_eq!(again.list_local_records().unwrap().len(), 1);
    assert_eq!(logged(&again).matches("state.legacy_adopted").count(), 1, "not adopted again");
}

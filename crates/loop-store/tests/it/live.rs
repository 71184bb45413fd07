//! The live view of the session records: what it holds, how it stays current, and that
//! closed records cost it nothing once read.

use std::fs;
use std::path::PathBuf;

use loop_core::WorkItemRef;
use loop_core::record::{Endpoint, EndpointStatus, LocalRecord};
use loop_store::StateStore;

use crate::{item, store_in};

fn record(text: &str, status: EndpointStatus) -> LocalRecord {
    let work_item = item(text);
    let mut record = LocalRecord::new(work_item.clone());
    let endpoint = Endpoint {
        status,
        recent_deliveries: vec!["d1".into()],
        ..Endpoint::new("claude", PathBuf::from("/w"), "2026-11-29T10:00:00Z".parse().unwrap())
    };
    record.endpoints.insert(work_item, endpoint);
    record
}

fn live_refs(store: &StateStore) -> Vec<String> {
    store.live_records().unwrap().iter().map(|r| r.work_item.to_string()).collect()
}

/// A second store over the same root: another process, with a view of its own.
fn other(store: &StateStore) -> StateStore {
    StateStore::new(store.layout().clone(), store.events().clone())
}

#[test]
fn the_view_holds_the_live_records_and_reads_no_closed_one_after_the_first_call() {
    let dir = tempfile::tempdir().unwrap();
    let writer = store_in(dir.path());
    for n in 1..=300 {
        writer
            .save_local_record(&record(&format!("github:octo/old#{n}"), EndpointStatus::Closed))
            .unwrap();
    }
    writer.save_local_record(&record("github:octo/app#7", EndpointStatus::Active)).unwrap();
    writer.save_local_record(&record("github:octo/app#8", EndpointStatus::Paused)).unwrap();

    let daemon = other(&writer);
    assert_eq!(live_refs(&daemon), ["github:octo/app#7", "github:octo/app#8"]);
    let first = daemon.reads();
    assert_eq!((first.records, first.listings), (302, 1), "the first call reads each once");

    for _ in 0..5 {
        assert_eq!(live_refs(&daemon).len(), 2);
    }
    let item7: WorkItemRef = item("github:octo/app#7");
    daemon
        .update_local_record_unsynced(&item7, |slot| {
            let endpoint = slot.as_mut().and_then(|r| r.endpoints.get_mut(&item7));
            endpoint.expect("recorded above").recent_deliveries.push("d2".into());
        })
        .unwrap();
    let records = daemon.live_records().unwrap();
    assert_eq!(records[0].endpoints[&item7].recent_deliveries, ["d1", "d2"], "its own write");
    // The stamp read its record under the lock once; the view read nothing.
    assert_eq!(daemon.reads().records, first.records + 1);
    assert_eq!(daemon.reads().listings, first.listings);
}

#[test]
fn records_written_by_another_process_are_seen_by_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let cli = store_in(dir.path());
    cli.save_local_record(&record("github:octo/app#1", EndpointStatus::Active)).unwrap();
    cli.save_local_record(&record("github:octo/app#2", EndpointStatus::Active)).unwrap();
    let daemon = other(&cli);
    assert_eq!(live_refs(&daemon), ["github:octo/app#1", "github:octo/app#2"]);
    let before = daemon.reads();

    cli.save_local_record(&record("github:octo/app#3", EndpointStatus::Active)).unwrap();
    cli.save_local_record(&record("github:octo/app#1", EndpointStatus::Closed)).unwrap();
    cli.delete_local_record(&item("github:octo/app#2")).unwrap();
    assert_eq!(live_refs(&daemon), ["github:octo/app#3"]);
    let after = daemon.reads();
    assert_eq!(after.listings, before.listings, "no listing");
    assert_eq!(after.records - before.records, 2, "the two files written, the removed one not");

    // An operator's edit in place (no rename) is told too.
    let path = daemon.layout().local_record(&item("github:octo/app#3"));
    let text = fs::read_to_string(&path).unwrap().replace("\"active\"", "\"paused\"");
    fs::write(&path, text).unwrap();
    let records = daemon.live_records().unwrap();
    let own = records[0].own_endpoint().unwrap();
    assert_eq!(own.status, EndpointStatus::Paused);
}

#[test]
fn a_session_closed_by_this_process_leaves_the_view_without_a_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    store.save_local_record(&record("github:octo/app#1", EndpointStatus::Active)).unwrap();
    assert_eq!(live_refs(&store), ["github:octo/app#1"]);
    store.save_local_record(&record("github:octo/app#1", EndpointStatus::Closed)).unwrap();
    let before = store.reads();
    assert!(live_refs(&store).is_empty());
    assert_eq!(store.reads(), before, "its change is the file it wrote: one stat");
}

#[test]
fn an_unparsable_record_reads_as_absent_and_is_left_to_its_loader() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    store.save_local_record(&record("github:octo/app#1", EndpointStatus::Active)).unwrap();
    assert_eq!(live_refs(&store).len(), 1);
    let path = store.layout().local_record(&item("github:octo/app#1"));
    fs::write(&path, "{not json").unwrap();
    assert!(live_refs(&store).is_empty());
    assert!(path.exists(), "the view never quarantines");
    assert_eq!(store.load_local_record(&item("github:octo/app#1")).unwrap(), None);
    assert!(!path.exists(), "its loader does");
}

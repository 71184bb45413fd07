//! The inbox journal across a killed process: what was written is replayed, synced or not.

use std::io::BufReader;

use bytes::Bytes;
use jiff::Timestamp;
use loop_store::inbox::{Inbox, Receipt};

use crate::child;

/// An `issue_comment` receipt with delivery id `id`.
pub fn receipt(id: &str) -> Receipt {
    Receipt {
        event: "issue_comment".into(),
        delivery_id: Some(id.to_owned()),
        verified: true,
        received_at: Timestamp::UNIX_EPOCH,
        body: Bytes::from_static(b"{\"action\":\"created\"}"),
    }
}

#[test]
fn a_receipt_written_but_never_synced_is_pending_after_the_writer_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = child::spawn("inbox-written", &[dir.path().to_str().unwrap()]);
    let mut stdout = BufReader::new(writer.stdout.take().unwrap());
    child::wait_for_line(&mut stdout, "written");
    writer.kill().unwrap(); // SIGKILL: no destructor, no flush, no sync
    writer.wait().unwrap();

    let (_inbox, contents) = Inbox::open(&dir.path().join("inbox")).unwrap();
    let ids: Vec<_> =
        contents.pending.iter().map(|entry| entry.receipt.delivery_id.as_deref()).collect();
    assert_eq!(ids, [Some("written-not-synced")]);
    assert!(contents.ignored.is_empty());
}

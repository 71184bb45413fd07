//! The work item's checked-in state file in its checkout (seed 003 R2–R4): atomic,
//! shared mode, no machine handle, legacy session dropped, corrupt file kept aside.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use loop_core::graph::hooks::GateFacts;
use loop_core::graph::state::WorkItemState;
use loop_store::spec_state::SpecFolder;

use crate::{logged, store_in};

fn folder(root: &Path) -> SpecFolder {
    SpecFolder::new(&root.join("checkout"), Path::new("docs/specs"), "issue-15").unwrap()
}

#[test]
fn a_legacy_session_block_is_dropped_on_the_next_save_and_the_file_is_shareable() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let spec = folder(dir.path());
    fs::create_dir_all(spec.dir()).unwrap();
    fs::write(
        spec.state_path(),
        r#"{"version":1,"workItem":"github:octo/app#15","loop":"pdlc-adhoc-loop","currentNode":"work",
            "session":{"id":"conv-123","runner":"tmux","alive":true}}"#,
    )
    .unwrap();
    let loaded = spec.load(store.events()).unwrap().unwrap();
    assert_eq!(loaded.current_node, "work");
    spec.update(store.events(), |state| {
        let mut state = state.unwrap();
        state.current_node = "review".into();
        (Some(state), ())
    })
    .unwrap();
    let text = fs::read_to_string(spec.state_path()).unwrap();
    assert!(!text.contains("conv-123") && !text.contains("\"session\""), "{text}");
    assert!(text.contains("\"currentNode\": \"review\""), "{text}");
    let mode = fs::metadata(spec.state_path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
}

#[test]
fn an_unparsable_state_file_is_moved_aside_and_reads_as_absent() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let spec = folder(dir.path());
    fs::create_dir_all(spec.dir()).unwrap();
    fs::write(spec.state_path(), "{ not json").unwrap();
    assert_eq!(spec.load(store.events()).unwrap(), None);
    let kept = fs::read_dir(spec.dir())
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("work-item-state.json.corrupt-"));
    assert!(kept, "the corrupt file is kept aside");
    assert!(logged(&store).contains("state.quarantined"));
}

#[test]
fn a_spec_dir_outside_the_checkout_is_refused() {
    for bad in ["/etc", "../up", "docs/../../x", ""] {
        assert!(SpecFolder::new(Path::new("/w"), Path::new(bad), "issue-1").is_err(), "{bad}");
    }
    assert!(SpecFolder::new(Path::new("/w"), Path::new("docs/specs"), "../x").is_err());
}

#[test]
fn gates_read_artifacts_in_the_folder_and_every_started_inner_loop() {
    let dir = tempfile::tempdir().unwrap();
    let spec = folder(dir.path());
    assert_eq!(spec.inner_loops(), Vec::<(String, String)>::new(), "none: a vacuous pass");
    let write_inner = |rel: &str, at: &str| {
        let path = spec.dir().join(rel);
        fs::create_dir_all(&path).unwrap();
        let mut state = WorkItemState::new("github:octo/app#16", "pdlc-pr-loop");
        state.current_node = at.into();
        fs::write(path.join("work-item-state.json"), serde_json::to_vec(&state).unwrap()).unwrap();
    };
    write_inner("pr-loops/pr-16", "complete");
    write_inner("pr-loops/octo__lib/pr-7", "verification");
    fs::write(spec.dir().join("tasks.md"), "## Task list\n").unwrap();
    assert_eq!(
        spec.inner_loops(),
        [
            ("pr-loops/octo__lib/pr-7".to_owned(), "verification".to_owned()),
            ("pr-loops/pr-16".to_owned(), "complete".to_owned()),
        ]
    );
    assert_eq!(spec.artifact("tasks.md").as_deref(), Some("## Task list\n"));
    assert_eq!(spec.artifact("../../etc/passwd"), None);
}

//! What the process graph costs a delivery in file work (docs/performance.md, "The
//! process graph on the delivery path"): the `stat` that is all a session without a
//! graph pays, and for a session that drives one, the control record read, the state
//! file reads and the read-modify-write under its lock. Run with `cargo bench -p
//! loop-store --bench graph_path`; it prints the p50 and p99 of each over many rounds.

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]

use std::path::Path;
use std::time::{Duration, Instant};

use loop_core::WorkItemRef;
use loop_core::control::Command;
use loop_core::graph::state::{NodeState, PullRequestEntry, WorkItemState};
use loop_core::log::{Kind, Line};
use loop_core::record::{Control, ControlSource};
use loop_store::spec_state::SpecFolder;
use loop_store::{EventLog, StateLayout, StateStore};

const ROUNDS: usize = 5_000;

fn main() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let root = dir.path();
    let item: WorkItemRef = "github:octo/app#15".parse().expect("a ref");
    let events = EventLog::new(root.join("events.jsonl"), "bench");
    let store = StateStore::new(StateLayout::new(root.join("state")), events.clone());
    let control = Control {
        command: Command::Start,
        source: ControlSource::Comment,
        actor: Some("octocat".parse().expect("a login")),
        requested_at: jiff::Timestamp::now(),
        note: Some("https://github.com/octo/app/issues/15#issuecomment-1".into()),
        instance: None,
        delivery_id: None,
    };
    store.write_section(&item, Some(&control)).expect("the control record");

    let checkout = root.join("checkout");
    let absent = SpecFolder::new(&checkout, Path::new("docs/specs"), "issue-16").expect("a folder");
    let folder = SpecFolder::new(&checkout, Path::new("docs/specs"), "issue-15").expect("a folder");
    let mut state = WorkItemState::new(&item.to_string(), "pdlc-work-item-loop");
    for node in ["phase-selection", "brainstorming", "requirements-definition", "design"] {
        state.nodes.insert(node.into(), NodeState { attempts: 1, ..NodeState::default() });
    }
    state.current_node = "design".into();
    let pr: WorkItemRef = "github:octo/app#16".parse().expect("a ref");
    state.link_pull_request(PullRequestEntry::open(&item, &pr).expect("a row"));
    folder.update(&events, |_| (Some(state), ())).expect("the state file");

    println!("graph work per delivery, {ROUNDS} rounds each (p50 / p99):");
    measure("no graph: the spec folder's stat", || {
        assert!(!absent.exists());
    });
    // Before this change every such delivery also appended a `graph.skipped` line (here
    // on the calling thread; the service's writer thread takes it off the delivery's).
    measure("no graph, before: the stat and a graph.skipped line", || {
        assert!(!absent.exists());
        events.emit(Line::info(Kind::GraphSkipped).work_item(&item).field("reason", "no-spec-dir"));
    });
    measure("graph: the control record read", || {
        store.read_section::<Control>(&item).expect("readable");
    });
    measure("graph: one state file read", || {
        folder.load(&events).expect("readable").expect("present");
    });
    measure("graph: read-modify-write under the lock, nothing to save", || {
        folder.update(&events, |state| (None, state.is_some())).expect("locked");
    });
}

fn measure(what: &str, mut round: impl FnMut()) {
    for _ in 0..ROUNDS / 10 {
        round();
    }
    let mut samples: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            round();
            started.elapsed()
        })
        .collect();
    samples.sort();
    let (p50, p99) = (samples[ROUNDS / 2], samples[ROUNDS * 99 / 100]);
    println!("  {what}: {p50:?} / {p99:?}");
}

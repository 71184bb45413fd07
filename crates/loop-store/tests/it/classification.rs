//! The classification parity tests (seed 003 R1): every key written is classified, no
//! machine handle is portable, and `docs/state.md` carries the table.
//!
//! To see the parity test fail, give a record type a key the table does not know, e.g.
//! add `pub launched_by: Option<String>` (without `skip_serializing_if`) to
//! `loop_core::record::Endpoint` and fill it below, then run
//! `cargo test -p loop-store --test it classification`:
//! `every_written_key_is_classified` fails naming `local/<slug>.json → endpoints.<ref>:
//! launchedBy`. Classify it in `loop_store::classification::ATTRIBUTES` (and regenerate
//! the doc, see [`state_doc_carries_the_classification_table`]) to make it pass.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use loop_core::control::Command;
use loop_core::graph::state::{NodeState, PullRequestEntry, Upstream, WorkItemState};
use loop_core::record::{
    ChannelBinding, Collaborator, Collaborators, CommentId, CommentLedger, Control, ControlSource,
    Ended, Endpoint, EndpointStatus, GaveUp, LocalRecord, PollClock, PollClocks, PollLedger,
    SpawnLedger,
};
use loop_store::ChannelBindings;
use loop_store::classification::{ATTRIBUTES, Kind, RecordType, classify, render_markdown};
use loop_store::heartbeat::{CycleSummary, Heartbeat, ScopeFailure, ScopeHealth, ScopeMonitor};
use loop_store::poll_cache::{PollCache, RememberedLinkage, RememberedThread};
use loop_store::spec_state::SpecFolder;
use serde_json::Value;

use crate::{item, store_in};

fn ts() -> jiff::Timestamp {
    "2026-11-29T10:00:00Z".parse().unwrap()
}

fn full_comment_ledger() -> CommentLedger {
    CommentLedger {
        seen_comments: vec![CommentId::new("IC_1")],
        comment_attempts: BTreeMap::from([(CommentId::new("PRR_2"), 1)]),
        gave_up: Some(GaveUp { comments: vec![CommentId::new("PRRC_3")], version: "0.1.0".into() }),
        seen_through: Some(ts()),
    }
}

/// Every record type written, fully populated, as the JSON the store writes, with where
/// it sits. Nested types are reached through their parents.
fn written_values() -> Vec<(RecordType, Value)> {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let work_item = item("github:octo/app#15");
    let pr = item("github:octo/lib#7");

    let control = Control {
        command: Command::Start,
        source: ControlSource::Comment,
        actor: Some("octocat".parse().unwrap()),
        requested_at: ts(),
        note: Some("n".into()),
        instance: Some("laptop".into()),
        delivery_id: Some("issue_comment:IC_1:created".into()),
    };
    let poll = PollLedger {
        comments: full_comment_ledger(),
        spawn: Some(SpawnLedger { attempts: 1, gave_up: false, delivery_id: Some("d".into()) }),
        title: Some("t".into()),
        pull_requests: BTreeMap::from([(pr.clone(), full_comment_ledger())]),
    };
    let collaborators = Collaborators {
        users: vec![Collaborator {
            login: "hubot".parse().unwrap(),
            added_by: "octocat".parse().unwrap(),
            added_at: ts(),
            source: ControlSource::Cli,
            note: Some("n".into()),
        }],
        delivery_id: Some("d".into()),
    };
    let ended = Ended {
        state: "closed".into(),
        kind: "issue".into(),
        reason: Some("completed".into()),
        at: ts(),
        source: "poll".into(),
        actor: Some("octocat".parse().unwrap()),
    };
    let channels: ChannelBindings = BTreeMap::from([(
        "slack".to_owned(),
        ChannelBinding {
            channel: "C1".into(),
            thread: "1.2".into(),
            opened_at: ts(),
            origin: "opened".into(),
            permalink: Some("https://x.slack.com/p".into()),
        },
    )]);
    store.write_section(&work_item, Some(&control)).unwrap();
    store.write_section(&work_item, Some(&poll)).unwrap();
    store.write_section(&work_item, Some(&collaborators)).unwrap();
    store.write_section(&work_item, Some(&ended)).unwrap();
    store.write_section(&work_item, Some(&channels)).unwrap();

    // A sealed stub: a legacy control adopted, then cleared.
    let sealed = item("github:octo/app#16");
    let legacy = store.layout().legacy_control(&sealed);
    fs::create_dir_all(legacy.parent().unwrap()).unwrap();
    fs::write(&legacy, serde_json::to_vec(&control).unwrap()).unwrap();
    store.read_section::<Control>(&sealed).unwrap();
    store.write_section::<Control>(&sealed, None).unwrap();

    let endpoint = Endpoint {
        harness: "claude".into(),
        harness_session_id: Some("c".into()),
        cwd: PathBuf::from("/w"),
        tmux_target: "loop-x".into(),
        status: EndpointStatus::Active,
        recent_deliveries: vec!["d".into()],
        created_at: ts(),
        last_event_at: Some(ts()),
        model: Some("m".into()),
        effort: Some("high".into()),
        harness_args: vec!["--x".into()],
        awaiting_input: Some(loop_core::record::AwaitingInput {
            asked_at: ts(),
            comment_url: "https://github.com/o/r/issues/1#issuecomment-2".into(),
            question: "Which?".into(),
            options: vec!["a".into()],
        }),
        graph_warning: Some("graph not running: the checkout at /w is a clone of x/y".into()),
    };
    let mut local = LocalRecord::new(work_item.clone());
    local.endpoints.insert(work_item.clone(), endpoint);
    local.channel_cursors.insert("1.2".into(), "1.3".into());
    // A session record of the reference's pre-issue-128 layout, adopted on the first read.
    let legacy_session = LocalRecord::new(item("github:octo/app#17"));
    let legacy_dir = store.layout().legacy_sessions_dir();
    fs::create_dir_all(&legacy_dir).unwrap();
    fs::write(
        legacy_dir.join("github-octo-app-17.json"),
        serde_json::to_vec(&legacy_session).unwrap(),
    )
    .unwrap();
    store.save_local_record(&local).unwrap();

    let clock = PollClock { last_polled_at: Some(ts()), closure_checked_at: Some(ts()) };
    store
        .update_poll_clocks(|clocks: &mut PollClocks| {
            clocks.clocks.insert(work_item.clone(), clock);
        })
        .unwrap();
    let failure = || ScopeFailure { scope: "octo/app".into(), error: "e".into(), permanent: true };
    store
        .write_heartbeat(&Heartbeat {
            started_at: ts(),
            last_cycle_at: Some(ts()),
            interval_seconds: 60,
            last_cycle: Some(CycleSummary {
                scopes_failed: vec![failure()],
                scopes_skipped: vec![failure()],
                ..CycleSummary::default()
            }),
            scopes: vec![ScopeHealth {
                repository: "octo/app".into(),
                label: "go".into(),
                monitor: ScopeMonitor { issues: true, pull_requests: true },
                last_polled_at: Some(ts()),
                degraded: true,
                reason: Some("e".into()),
                requests: 1,
                not_modified: 1,
            }],
        })
        .unwrap();
    // The poller stores loop-github's validators and thread comments; their own keys are
    // held to the table by loop-daemon's test
    // `every_key_of_the_poll_cache_is_classified_machine_local`.
    let validator = serde_json::json!({
        "url": "u", "variant": "v", "etag": "e", "body": "[]", "next": "n",
    });
    let cache = PollCache {
        written_for: vec!["scope octo/app".into()],
        last_sweep_at: Some(ts()),
        validators: BTreeMap::from([("github.com".to_owned(), vec![validator])]),
        threads: BTreeMap::from([(
            work_item.clone(),
            RememberedThread { updated_at: "t".into(), comments: vec![Value::Null] },
        )]),
        linkage: BTreeMap::from([(
            pr.clone(),
            RememberedLinkage { body: "Closes #15".into(), linked: vec![work_item.clone()] },
        )]),
    };
    store.write_poll_cache(&cache).unwrap();

    let (mut deliveries, _) = store.open_delivery_log(8).unwrap();
    deliveries.take_in("comment:1", ts()).unwrap();
    deliveries.settle("comment:2", "awaiting-start", ts()).unwrap();

    let checkout = dir.path().join("checkout");
    let folder = SpecFolder::new(&checkout, Path::new("docs/specs"), "issue-15").unwrap();
    let mut spec = WorkItemState::new("github:octo/app#15", "pdlc-work-item-loop");
    spec.current_node = "brainstorming".into();
    spec.nodes.insert(
        "brainstorming".into(),
        NodeState {
            attempts: 1,
            entered_at: Some(ts()),
            exited_at: Some(ts()),
            last_block: Some(vec!["m".into()]),
            ..NodeState::default()
        },
    );
    spec.link_pull_request(PullRequestEntry {
        pr_ref: pr.to_string(),
        repository: "octo/lib".into(),
        number: 7,
        url: "https://github.com/octo/lib/pull/7".into(),
        inner_loop: "pr-loops/octo__lib/pr-7/work-item-state.json".into(),
        state: Upstream::Open,
    });
    folder.update(store.events(), |_| (Some(spec), ())).unwrap();

    let read =
        |path: PathBuf| -> Value { serde_json::from_slice(&fs::read(path).unwrap()).unwrap() };
    let spec = read(folder.state_path());
    let layout = store.layout();
    let record = read(layout.portable_record(&work_item));
    let sealed_record = read(layout.portable_record(&sealed));
    let local = read(layout.local_record(&work_item));
    let clocks = read(layout.poll_clocks());
    let adopted = read(layout.legacy_sessions_adopted());
    let heartbeat = read(layout.heartbeat());
    let cache = read(layout.poll_cache());
    let index = read(layout.portable_index());
    let deliveries: Vec<Value> = fs::read_to_string(layout.local_dir().join("deliveries.log"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let pr_key = pr.to_string();
    let own_key = work_item.to_string();
    vec![
        (T::PortableRecord, record.clone()),
        (T::PortableRecord, sealed_record),
        (T::Control, record["control"].clone()),
        (T::Poll, record["poll"].clone()),
        (T::PullRequestLedger, record["poll"]["pullRequests"][&pr_key].clone()),
        (T::Spawn, record["poll"]["spawn"].clone()),
        (T::GaveUp, record["poll"]["gaveUp"].clone()),
        (T::GaveUp, record["poll"]["pullRequests"][&pr_key]["gaveUp"].clone()),
        (T::Collaborators, record["collaborators"].clone()),
        (T::Collaborator, record["collaborators"]["users"][0].clone()),
        (T::Ended, record["ended"].clone()),
        (T::ChannelBinding, record["channels"]["slack"].clone()),
        (T::LocalRecord, local.clone()),
        (T::Endpoint, local["endpoints"][&own_key].clone()),
        (T::PollClocks, clocks.clone()),
        (T::LegacySessionsAdopted, adopted),
        (T::PollClock, clocks["clocks"][&own_key].clone()),
        (T::Heartbeat, heartbeat.clone()),
        (T::CycleSummary, heartbeat["lastCycle"].clone()),
        (T::ScopeFailure, heartbeat["lastCycle"]["scopesFailed"][0].clone()),
        (T::ScopeFailure, heartbeat["lastCycle"]["scopesSkipped"][0].clone()),
        (T::ScopeHealth, heartbeat["scopes"][0].clone()),
        (T::PollCache, cache.clone()),
        (T::RememberedThread, cache["threads"][&own_key].clone()),
        (T::RememberedLinkage, cache["linkage"][&pr_key].clone()),
        (T::Validator, cache["validators"]["github.com"][0].clone()),
        (T::DeliveryLine, deliveries[0].clone()),
        (T::DeliveryLine, deliveries[1].clone()),
        (T::Index, index.clone()),
        (T::IndexEntry, index["workItems"][0].clone()),
        (T::IndexEntry, index["workItems"][1].clone()),
        (T::WorkItemState, spec.clone()),
        (T::NodeState, spec["nodes"]["brainstorming"].clone()),
        (T::PullRequestEntry, spec["pullRequests"][0].clone()),
    ]
}

use RecordType as T;

fn keys(value: &Value) -> Vec<String> {
    value.as_object().expect("every record type is a JSON object").keys().cloned().collect()
}

#[test]
fn every_written_key_is_classified() {
    let mut unclassified = Vec::new();
    for (record, value) in written_values() {
        for key in keys(&value) {
            if classify(record, &key).is_none() {
                unclassified.push(format!("{}: {key}", record.location()));
            }
        }
    }
    assert!(
        unclassified.is_empty(),
        "keys written but not classified in loop_store::classification::ATTRIBUTES:\n  {}",
        unclassified.join("\n  ")
    );
}

#[test]
fn every_classified_key_is_written_by_some_record() {
    let written = written_values();
    let stale: Vec<String> = ATTRIBUTES
        .iter()
        // Kept verbatim from the reference, never written by this version.
        .filter(|a| !(a.record == T::PortableRecord && a.key == "graph"))
        .filter(|a| {
            !written.iter().any(|(record, value)| {
                *record == a.record && keys(value).iter().any(|k| k == a.key)
            })
        })
        .map(|a| format!("{}: {}", a.record.location(), a.key))
        .collect();
    assert!(
        stale.is_empty(),
        "classified but never written (stale rows?):\n  {}",
        stale.join("\n  ")
    );
}

#[test]
fn no_machine_handle_is_portable() {
    let leaks: Vec<String> = ATTRIBUTES
        .iter()
        .filter(|a| a.record.is_portable() && a.kind == Kind::MachineHandle)
        .map(|a| format!("{}: {}", a.record.location(), a.key))
        .collect();
    assert!(leaks.is_empty(), "machine handles in the portable record:\n  {}", leaks.join("\n  "));
    for (record, value) in written_values().into_iter().filter(|(record, _)| record.is_portable()) {
        for key in keys(&value) {
            assert_ne!(
                classify(record, &key),
                Some(Kind::MachineHandle),
                "{}: {key}",
                record.location()
            );
        }
    }
}

/// Issue #16, item 9: collaborators' events are delivered; their commands never run.
#[test]
fn the_roster_is_described_as_who_is_heard_never_who_commands() {
    let roster = loop_store::classification::ATTRIBUTES
        .iter()
        .find(|a| a.key == "collaborators")
        .expect("the roster is classified");
    assert!(!roster.holds.contains("may command"), "{}", roster.holds);
    assert!(roster.holds.contains("never obeyed as a command"), "{}", roster.holds);
}

/// `docs/state.md` carries the table between its markers. After changing the table,
/// regenerate with `UPDATE_STATE_DOC=1 cargo test -p loop-store --test it state_doc`.
#[test]
fn state_doc_carries_the_classification_table() {
    const BEGIN: &str =
        "<!-- classification:begin (generated from loop_store::classification) -->\n";
    const END: &str = "<!-- classification:end -->";
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/state.md");
    let doc = fs::read_to_string(&path).expect("docs/state.md exists");
    let (Some(start), Some(end)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!("docs/state.md lacks the classification markers");
    };
    let expected = format!("{}{BEGIN}{}\n{}", &doc[..start], render_markdown(), &doc[end..]);
    if std::env::var_os("UPDATE_STATE_DOC").is_some() {
        fs::write(&path, &expected).unwrap();
        return;
    }
    assert!(
        doc == expected,
        "docs/state.md's attribute table is out of date: run `UPDATE_STATE_DOC=1 cargo test -p loop-store --test it state_doc`"
    );
}

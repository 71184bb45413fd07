//! The session registry on a real state root (loop-store's local records), and the rule
//! that no machine handle reaches a portable record or a checked-in file.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use loop_core::WorkItemRef;
use loop_core::record::{EndpointStatus, LocalRecord};
use loop_sessions::registry::{EndpointHandles, Registry, RegistryError};
use loop_sessions::{RespawnSettings, SessionSite};
use loop_store::classification::{Kind, RecordType, classify};
use loop_store::{EventLog, StateLayout, StateStore};
use tempfile::TempDir;

use crate::support::{Lab, git};

fn r(s: &str) -> WorkItemRef {
    s.parse().expect("a valid ref")
}

fn registry(dir: &TempDir) -> (Registry, PathBuf) {
    let root = dir.path().join("state");
    let layout = StateLayout::new(&root);
    let events = EventLog::new(layout.event_log(), "test");
    (Registry::new(StateStore::new(layout, events)), root)
}

fn handles(cwd: &Path, id: &str) -> EndpointHandles {
    EndpointHandles {
        harness: "stand-in".into(),
        harness_session_id: Some(id.into()),
        cwd: cwd.to_owned(),
        tmux_target: r("github:octo/app#15").tmux_session(),
        model: None,
        effort: None,
        harness_args: Vec::new(),
    }
}

/// `octo/app#15`'s session, registered in `registry` at second 1000 working in `cwd`;
/// answers the item, a pull request of another repository, and that time.
fn registered(registry: &Registry, cwd: &Path) -> (WorkItemRef, WorkItemRef, Timestamp) {
    let (item, pr) = (r("github:octo/app#15"), r("github:octo/lib#7"));
    let now = Timestamp::from_second(1_000).expect("a time");
    registry.register(&item, handles(cwd, "u-1").into_endpoint(now), false).expect("registered");
    (item, pr, now)
}

#[test]
fn one_private_file_per_work_item_holds_every_endpoint() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (registry, root) = registry(&dir);
    let (item, pr, now) = registered(&registry, dir.path());
    assert!(registry.link_pull_request(&item, &pr, now).expect("linked"));
    assert!(registry.touch(&item, &pr, Some("d-1"), now).expect("touched"));
    let files: Vec<_> = std::fs::read_dir(root.join("local"))
        .expect("local dir")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".json"))
        .collect();
    assert_eq!(files, ["github-octo-app-15.json"]);
    let path = root.join("local/github-octo-app-15.json");
    assert_eq!(std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777, 0o600);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
    assert!(
        json["endpoints"]["github:octo/lib#7"]["recentDeliveries"] == serde_json::json!(["d-1"])
    );
}

#[test]
fn a_pr_ref_resolves_to_the_live_record_that_lists_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (registry, root) = registry(&dir);
    let (item, pr, now) = registered(&registry, dir.path());
    registry.link_pull_request(&item, &pr, now).expect("linked");
    std::fs::write(root.join("local/github-octo-zzz-9.json"), "{broken").expect("corrupt file");
    let route = registry.route(&pr, false).expect("routed").expect("a route");
    assert_eq!((route.owner.clone(), route.served.clone()), (item.clone(), item.clone()));
    assert_eq!(registry.route(&pr, true).expect("routed").expect("a route").served, pr);
    assert!(registry.close(&item).expect("closed"));
    assert!(registry.route(&pr, true).expect("routed").is_none(), "a closed record routes nowhere");
    let record: LocalRecord = registry.load(&item).expect("loaded").expect("kept");
    assert_eq!(record.own_endpoint().expect("own").status, EndpointStatus::Closed);
    assert!(registry.forget(&item).expect("forgotten"));
    assert!(!registry.forget(&item).expect("nothing left"));
}

#[test]
fn a_live_registration_is_not_replaced_without_force() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (registry, _) = registry(&dir);
    let item = r("github:octo/app#15");
    let now = Timestamp::from_second(1_000).expect("a time");
    registry
        .register(&item, handles(dir.path(), "u-1").into_endpoint(now), false)
        .expect("registered");
    let err = registry
        .register(&item, handles(dir.path(), "u-2").into_endpoint(now), false)
        .expect_err("live");
    assert!(matches!(err, RegistryError::AlreadyLive { .. }), "{err}");
    assert!(registry.pause(&item).expect("paused"));
    assert!(
        registry
            .register(&item, handles(dir.path(), "u-2").into_endpoint(now), true)
            .expect("forced")
    );
}

#[test]
fn every_handle_the_registry_writes_is_classified_as_machine_local() {
    for key in ["harnessSessionId", "cwd", "tmuxTarget"] {
        assert_eq!(classify(RecordType::Endpoint, key), Some(Kind::MachineHandle), "{key}");
    }
    assert!(!RecordType::Endpoint.is_portable());
    assert!(!RecordType::LocalRecord.is_portable());
}

#[test]
fn a_spawned_session_leaves_no_handle_in_portable_records_or_the_checkout() {
    let lab = Lab::new();
    let checkout = lab.path("checkout");
    std::fs::create_dir(&checkout).expect("checkout dir");
    git(&checkout, &["init", "--quiet"]);
    let harness = lab.stand_in_harness(&[]);
    let item = r("github:octo/app#15");
    let site = SessionSite::for_work_item(&item, checkout.clone(), None);
    let settings =
        RespawnSettings { ready_within: Duration::from_secs(30), ..RespawnSettings::default() };
    let launch = lab.spawn(&harness, &site, "boot", &settings);
    let (registry, root) = registry(&lab.dir);
    let handles = EndpointHandles {
        harness: "stand-in".into(),
        harness_session_id: Some(launch.conversation.to_string()),
        cwd: checkout.clone(),
        tmux_target: site.target.clone(),
        model: None,
        effort: None,
        harness_args: launch.harness_args.clone(),
    };
    registry.register(&item, handles.into_endpoint(Timestamp::now()), false).expect("registered");

    let status = std::process::Command::new("git")
        .arg("-C")
        .arg(&checkout)
        .args(["status", "--porcelain", "--untracked-files=all"])
        .output()
        .expect("git status");
    assert_eq!(
        String::from_utf8_lossy(&status.stdout),
        "",
        "nothing was written into the checkout"
    );
    let secrets =
        [launch.conversation.to_string(), site.target.clone(), checkout.display().to_string()];
    for file in walk(&root) {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let local = file.starts_with(root.join("local"));
        for secret in &secrets {
            assert!(
                local || !text.contains(secret.as_str()),
                "{} holds `{secret}`",
                file.display()
            );
        }
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .flat_map(|entry| {
            let path = entry.path();
            if path.is_dir() { walk(&path) } else { vec![path] }
        })
        .collect()
}

#[test]
fn cleanup_removes_sessions_checkouts_and_the_record_and_nothing_else() {
    use loop_core::config::WorkspaceStrategy;
    use loop_sessions::cleanup::{Removed, cleanup};
    use loop_sessions::workspace::{WorkspaceSettings, Workspaces};

    let lab = Lab::new();
    let remote = lab.path("remote");
    git(lab.dir.path(), &["init", "--quiet", "-b", "main", "seed"]);
    std::fs::write(lab.path("seed/README.md"), "x\n").expect("write");
    git(&lab.path("seed"), &["add", "."]);
    git(&lab.path("seed"), &["commit", "--quiet", "-m", "x"]);
    git(lab.dir.path(), &["clone", "--quiet", "--bare", "seed", remote.to_str().expect("utf-8")]);
    let url = format!("file://{}", remote.display());
    let workspaces = Workspaces::new(WorkspaceSettings {
        root: lab.path("workspaces"),
        strategy: WorkspaceStrategy::Worktree,
        git: "git".into(),
    });
    let (registry, _) = registry(&lab.dir);
    let harness = lab.stand_in_harness(&[]);
    let settings =
        RespawnSettings { ready_within: Duration::from_secs(30), ..RespawnSettings::default() };
    let now = Timestamp::now();
    let (item, pr, other) =
        (r("github:octo/app#15"), r("github:octo/app#16"), r("github:octo/app#99"));

    let spawn = |served: &WorkItemRef| {
        let checkout = workspaces.prepare(served, &url, None, false).expect("checkout").path;
        let site = SessionSite::for_work_item(served, checkout.clone(), None);
        let launch = lab.spawn(&harness, &site, "boot", &settings);
        EndpointHandles {
            harness: "stand-in".into(),
            harness_session_id: Some(launch.conversation.to_string()),
            cwd: checkout,
            tmux_target: site.target,
            model: None,
            effort: None,
            harness_args: Vec::new(),
        }
    };
    let own = spawn(&item);
    let endpoint = spawn(&pr);
    let unrelated = spawn(&other);
    registry.register(&item, own.clone().into_endpoint(now), false).expect("registered");
    registry.link_pull_request(&item, &pr, now).expect("linked");
    registry.save_handles(&item, &pr, endpoint.clone(), now).expect("saved");
    registry.register(&other, unrelated.clone().into_endpoint(now), false).expect("registered");

    let cleaned = cleanup(&lab.tmux, Some(&workspaces), &registry, &item, Duration::from_secs(5))
        .expect("cleaned");
    assert_eq!(
        cleaned.removed,
        [Removed::Tmux, Removed::Workspace, Removed::Session],
        "{:?}",
        cleaned.errors
    );
    assert_eq!(cleaned.endpoints, std::slice::from_ref(&pr));
    assert!(cleaned.errors.is_empty(), "{:?}", cleaned.errors);
    use loop_sessions::Liveness;
    assert_eq!(lab.tmux.liveness(&own.tmux_target).expect("probe"), Liveness::Absent);
    assert_eq!(lab.tmux.liveness(&endpoint.tmux_target).expect("probe"), Liveness::Absent);
    assert!(!own.cwd.exists() && !endpoint.cwd.exists(), "both checkouts are gone");
    assert!(registry.load(&item).expect("load").is_none());
    assert_eq!(
        lab.tmux.liveness(&unrelated.tmux_target).expect("probe"),
        Liveness::Live,
        "others untouched"
    );
    assert!(unrelated.cwd.exists());
    assert!(registry.load(&other).expect("load").is_some());
    assert!(lab.path("workspaces/github.com/octo/app/.git").exists(), "the shared clone is kept");

    let again =
        cleanup(&lab.tmux, Some(&workspaces), &registry, &item, Duration::ZERO).expect("cleaned");
    assert!(!again.found(), "nothing left to clean: {again:?}");
}

//! Workspaces with real git against local bare repositories as remotes (file URLs).

use std::path::PathBuf;

use loop_core::WorkItemRef;
use loop_core::config::WorkspaceStrategy;
use loop_sessions::workspace::{Branch, WorkspaceError, WorkspaceSettings, Workspaces};
use tempfile::TempDir;

use crate::support::git;

/// A bare "remote" with `main` (default) and `feature`, plus a checkout root.
struct Remote {
    dir: TempDir,
}

impl Remote {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let seed = dir.path().join("seed");
        git(dir.path(), &["init", "--quiet", "-b", "main", seed.to_str().expect("utf-8")]);
        std::fs::write(seed.join("README.md"), "hello\n").expect("write");
        git(&seed, &["add", "README.md"]);
        git(&seed, &["commit", "--quiet", "-m", "first"]);
        git(&seed, &["checkout", "--quiet", "-b", "feature"]);
        std::fs::write(seed.join("feature.txt"), "x\n").expect("write");
        git(&seed, &["add", "feature.txt"]);
        git(&seed, &["commit", "--quiet", "-m", "feature"]);
        git(&seed, &["checkout", "--quiet", "main"]);
        git(dir.path(), &["clone", "--quiet", "--bare", "seed", "origin.git"]);
        Self { dir }
    }

    fn url(&self) -> String {
        format!("file://{}", self.dir.path().join("origin.git").display())
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("workspaces")
    }

    fn workspaces(&self, strategy: WorkspaceStrategy) -> Workspaces {
        Workspaces::new(WorkspaceSettings { root: self.root(), strategy, git: "git".into() })
    }
}

fn item() -> WorkItemRef {
    "github:octo/app#15".parse().expect("a valid ref")
}

fn pr() -> WorkItemRef {
    "github:octo/app#16".parse().expect("a valid ref")
}

fn branch(name: &str) -> Branch {
    Branch::parse(name).expect("a valid branch")
}

#[test]
fn a_worktree_without_a_branch_is_detached_at_the_default_branch() {
    let remote = Remote::new();
    let workspaces = remote.workspaces(WorkspaceStrategy::Worktree);
    let checkout = workspaces.prepare(&item(), &remote.url(), None, false).expect("prepared");
    assert_eq!(checkout.branch, None);
    assert!(checkout.path.ends_with(".worktrees/github.com/octo/app/github-octo-app-15"));
    assert!(checkout.path.join("README.md").exists());
    assert!(!checkout.path.join("feature.txt").exists());
    assert!(remote.root().join("github.com/octo/app/.git").exists(), "the shared clone");
    let again = workspaces.prepare(&item(), &remote.url(), None, false).expect("reused");
    assert_eq!(again.path, checkout.path);
}

#[test]
fn a_pr_endpoint_gets_its_own_worktree_on_its_branch() {
    let remote = Remote::new();
    let workspaces = remote.workspaces(WorkspaceStrategy::Worktree);
    let checkout = workspaces
        .prepare(&pr(), &remote.url(), Some(&branch("feature")), false)
        .expect("prepared");
    assert_eq!(checkout.branch, Some(branch("feature")));
    assert!(checkout.path.ends_with("github-octo-app-16"));
    assert!(checkout.path.join("feature.txt").exists());
}

#[test]
fn an_unknown_branch_falls_back_to_detached_unless_required() {
    let remote = Remote::new();
    let workspaces = remote.workspaces(WorkspaceStrategy::Worktree);
    let checkout = workspaces
        .prepare(&item(), &remote.url(), Some(&branch("nope")), false)
        .expect("fell back");
    assert_eq!(checkout.branch, None);
    let err = workspaces
        .prepare(&pr(), &remote.url(), Some(&branch("nope")), true)
        .expect_err("required");
    assert!(matches!(err, WorkspaceError::BranchUnavailable { .. }), "{err}");
}

#[test]
fn require_branch_fails_when_a_sibling_worktree_holds_the_branch() {
    let remote = Remote::new();
    let workspaces = remote.workspaces(WorkspaceStrategy::Worktree);
    workspaces
        .prepare(&item(), &remote.url(), Some(&branch("feature")), false)
        .expect("item on feature");
    let err =
        workspaces.prepare(&pr(), &remote.url(), Some(&branch("feature")), true).expect_err("held");
    assert!(matches!(err, WorkspaceError::BranchUnavailable { .. }), "{err}");
}

#[test]
fn the_clone_strategy_can_hold_the_same_branch_twice() {
    let remote = Remote::new();
    let workspaces = remote.workspaces(WorkspaceStrategy::Clone);
    let own =
        workspaces.prepare(&item(), &remote.url(), Some(&branch("feature")), false).expect("item");
    let endpoint =
        workspaces.prepare(&pr(), &remote.url(), Some(&branch("feature")), true).expect("pr");
    assert_ne!(own.path, endpoint.path);
    assert!(endpoint.path.ends_with(".work-items/github-octo-app-16/github.com/octo/app"));
    assert_eq!(endpoint.branch, Some(branch("feature")));
}

#[test]
fn a_failed_required_branch_leaves_no_clone_to_be_reused_unchecked() {
    let remote = Remote::new();
    let workspaces = remote.workspaces(WorkspaceStrategy::Clone);
    workspaces.prepare(&pr(), &remote.url(), Some(&branch("nope")), true).expect_err("required");
    let path = workspaces.checkout_path(&pr()).expect("path");
    assert!(!path.exists());
    let err = workspaces
        .prepare(&pr(), &remote.url(), Some(&branch("nope")), true)
        .expect_err("still required");
    assert!(matches!(err, WorkspaceError::BranchUnavailable { .. }), "{err}");
}

#[test]
fn removal_takes_the_checkout_and_keeps_the_shared_clone_and_other_checkouts() {
    let remote = Remote::new();
    let workspaces = remote.workspaces(WorkspaceStrategy::Worktree);
    let own = workspaces.prepare(&item(), &remote.url(), None, false).expect("item");
    let endpoint =
        workspaces.prepare(&pr(), &remote.url(), Some(&branch("feature")), false).expect("pr");
    assert!(workspaces.remove(&pr()).expect("removed"));
    assert!(!endpoint.path.exists());
    assert!(own.path.exists(), "the work item's own checkout is untouched");
    assert!(remote.root().join("github.com/octo/app/.git").exists(), "the shared clone is kept");
    assert!(
        !git(&remote.root().join("github.com/octo/app"), &["worktree", "list"])
            .contains("github-octo-app-16")
    );
    assert!(!workspaces.remove(&pr()).expect("already gone"));
}

#[test]
fn removal_under_the_clone_strategy_removes_the_endpoints_folder() {
    let remote = Remote::new();
    let workspaces = remote.workspaces(WorkspaceStrategy::Clone);
    workspaces.prepare(&item(), &remote.url(), None, false).expect("item");
    assert!(workspaces.remove(&item()).expect("removed"));
    assert!(!remote.root().join(".work-items/github-octo-app-15").exists());
    assert!(remote.root().join(".work-items").exists());
}

#[test]
fn a_missing_git_is_reported_as_such() {
    let remote = Remote::new();
    let workspaces = Workspaces::new(WorkspaceSettings {
        root: remote.root(),
        strategy: WorkspaceStrategy::Worktree,
        git: remote.dir.path().join("no-git"),
    });
    let err = workspaces.prepare(&item(), &remote.url(), None, false).expect_err("no git");
    assert!(matches!(err, WorkspaceError::GitMissing { .. }), "{err}");
}

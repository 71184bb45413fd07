//! Workspaces: the git checkout each session works in, under `routing.workspace.root`.
//!
//! Two layouts, keyed on the slug of the ref a session serves (a PR endpoint has its own):
//! - `worktree`: one shared clone per repository, `<root>/<host>/<owner>/<repo>`, and a
//!   worktree per endpoint, `<root>/.worktrees/<host>/<owner>/<repo>/<slug>`;
//! - `clone`: an independent clone per endpoint, `<root>/.work-items/<slug>/<host>/<owner>/<repo>`.
//!
//! With a branch (a PR's head), the checkout is put on it; `require_branch` (a
//! same-repository PR endpoint) turns "could not check out the branch" into an error
//! instead of a detached checkout of the default branch. Removal takes the endpoint's
//! ref, so the daemon can remove a work item's checkout *and* every PR endpoint's.
//!
//! git runs without a shell and never prompts (`GIT_TERMINAL_PROMPT=0`). Every path
//! component is checked against `^[A-Za-z0-9][A-Za-z0-9._-]*$` and branch names against a
//! conservative allow-list, so no remote value can climb out of the root or become a flag.
//! Clone URLs are derived from the repository name ([`clone_url`]), never taken from a
//! payload.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use loop_core::checkout::Origin;
use loop_core::config::{CloneProtocol, CloneUrl, WorkspaceConfig, WorkspaceStrategy};
use loop_core::{RepoRef, WorkItemRef};

/// Why a checkout could not be prepared or removed.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error(
        "`{component}` cannot be part of a checkout path (expected letters, digits, `.`, `_`, `-`, not starting with `.` or `-`)"
    )]
    UnsafeComponent { component: String },
    #[error("`{branch}` is not a branch name the-loop checks out")]
    UnsafeBranch { branch: String },
    #[error("git (`{git}`) is not installed or not on PATH")]
    GitMissing { git: PathBuf },
    #[error("could not run `git {verb}` in `{dir}`")]
    Io {
        verb: String,
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`git {verb}` failed in `{dir}`: {stderr}")]
    Git { verb: String, dir: PathBuf, stderr: String },
    #[error("branch `{branch}` could not be checked out in `{checkout}`: {reason}")]
    BranchUnavailable { branch: String, checkout: PathBuf, reason: String },
    #[error("could not remove `{path}`")]
    Remove {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl loop_core::Hint for WorkspaceError {
    fn hint(&self) -> Option<String> {
        match self {
            Self::GitMissing { .. } => {
                Some("install git, or set `routing.workspace.gitBinary`".to_owned())
            }
            Self::BranchUnavailable { .. } => Some(
                "with the worktree strategy a branch can be checked out only once; the work item's own worktree may hold it"
                    .to_owned(),
            ),
            _ => None,
        }
    }
}

/// Where checkouts live and how; from `routing.workspace`.
#[derive(Debug, Clone)]
pub struct WorkspaceSettings {
    /// The checkout root (already `~`-expanded).
    pub root: PathBuf,
    pub strategy: WorkspaceStrategy,
    /// The git executable.
    pub git: PathBuf,
}

impl WorkspaceSettings {
    /// From `routing.workspace`; `None` when no root is configured (sessions then run in
    /// `routing.spawnWorkdir`). A leading `~` in the root is `home`.
    pub fn from_config(config: &WorkspaceConfig, home: &Path) -> Option<Self> {
        let root = config.root.as_deref()?;
        let root = match root.strip_prefix("~") {
            Ok(rest) => home.join(rest),
            Err(_) => root.to_owned(),
        };
        Some(Self { root, strategy: config.strategy, git: PathBuf::from(&config.git_binary) })
    }
}

/// A branch name that is safe on a git command line: `[A-Za-z0-9._/-]`, starting with a
/// letter or digit, no `..`, `//`, `@{`, trailing `/`, `.` or `.lock`, at most 255 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branch(String);

impl Branch {
    pub fn parse(name: &str) -> Result<Self, WorkspaceError> {
        let mut bytes = name.bytes();
        let ok = name.len() <= 255
            && bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
            && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-'))
            && !name.contains("..")
            && !name.contains("//")
            && !name.contains("/.")
            && !name.ends_with(['/', '.'])
            && !name.ends_with(".lock");
        if ok {
            Ok(Self(name.to_owned()))
        } else {
            Err(WorkspaceError::UnsafeBranch { branch: name.to_owned() })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A prepared checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkout {
    pub path: PathBuf,
    /// The branch it is on, `None` when detached at the default branch.
    pub branch: Option<Branch>,
}

/// The clone URL of `repo`: under the base `routing.workspace.cloneUrls` gives its host
/// when there is one, else over `protocol` from the host itself.
pub fn clone_url(repo: &RepoRef, protocol: CloneProtocol, bases: &[CloneUrl]) -> String {
    if let Some(base) = bases.iter().find(|b| b.host == repo.host()) {
        return format!("{}/{}/{}.git", base.base, repo.owner(), repo.name());
    }
    match protocol {
        CloneProtocol::Https => {
            format!("https://{}/{}/{}.git", repo.host(), repo.owner(), repo.name())
        }
        CloneProtocol::Ssh => format!("git@{}:{}/{}.git", repo.host(), repo.owner(), repo.name()),
    }
}

/// Checkouts under one root.
#[derive(Debug, Clone)]
pub struct Workspaces {
    settings: WorkspaceSettings,
}

impl Workspaces {
    pub fn new(settings: WorkspaceSettings) -> Self {
        Self { settings }
    }

    /// Where `endpoint`'s checkout is (whether or not it exists).
    pub fn checkout_path(&self, endpoint: &WorkItemRef) -> Result<PathBuf, WorkspaceError> {
        let repo = repo_components(endpoint.repo())?;
        let slug = endpoint.slug();
        let slug = safe(&slug)?;
        let root = &self.settings.root;
        Ok(match self.settings.strategy {
            WorkspaceStrategy::Worktree => root.join(".worktrees").join(repo).join(slug),
            WorkspaceStrategy::Clone => root.join(".work-items").join(slug).join(repo),
        })
    }

    /// Makes sure `endpoint` has a checkout of its repository, cloned from `url`, on
    /// `branch` when given (see the module docs for `require_branch`).
    pub fn prepare(
        &self,
        endpoint: &WorkItemRef,
        url: &str,
        branch: Option<&Branch>,
        require_branch: bool,
    ) -> Result<Checkout, WorkspaceError> {
        let checkout = self.checkout_path(endpoint)?;
        match self.settings.strategy {
            WorkspaceStrategy::Worktree => {
                let shared = self.settings.root.join(repo_components(endpoint.repo())?);
                self.prepare_worktree(&shared, &checkout, url, branch, require_branch)
            }
            WorkspaceStrategy::Clone => self.prepare_clone(&checkout, url, branch, require_branch),
        }
    }

    /// Removes `endpoint`'s checkout. `Ok(false)` when there was none. The worktree
    /// strategy keeps the shared clone.
    pub fn remove(&self, endpoint: &WorkItemRef) -> Result<bool, WorkspaceError> {
        let checkout = self.checkout_path(endpoint)?;
        match self.settings.strategy {
            WorkspaceStrategy::Worktree => {
                let existed = checkout.exists();
                let shared = self.settings.root.join(repo_components(endpoint.repo())?);
                if shared.join(".git").exists() {
                    // Errors are fine: the directory is removed below either way, and
                    // `prune` forgets a worktree whose directory is gone.
                    let _ = self.git(
                        &shared,
                        &[
                            "worktree".as_ref(),
                            "remove".as_ref(),
                            "--force".as_ref(),
                            checkout.as_os_str(),
                        ],
                    );
                    let _ = self.git(&shared, &["worktree", "prune"]);
                }
                remove_dir(&checkout)?;
                Ok(existed)
            }
            WorkspaceStrategy::Clone => {
                let slug = endpoint.slug();
                let item_dir = self.settings.root.join(".work-items").join(safe(&slug)?);
                let existed = item_dir.exists();
                remove_dir(&item_dir)?;
                Ok(existed)
            }
        }
    }

    fn prepare_worktree(
        &self,
        shared: &Path,
        checkout: &Path,
        url: &str,
        branch: Option<&Branch>,
        require_branch: bool,
    ) -> Result<Checkout, WorkspaceError> {
        if shared.join(".git").exists() {
            if let Err(err) = self.git(shared, &["fetch", "--prune", "origin"]) {
                tracing::warn!(%err, "fetch failed; using the clone as it is");
            }
        } else {
            self.clone_into(shared, url)?;
        }
        if checkout.join(".git").exists() {
            return Ok(Checkout {
                path: checkout.to_owned(),
                branch: current_branch(self, checkout),
            });
        }
        if let Some(branch) = branch {
            let added = self.fetch_branch(shared, branch).and_then(|()| {
                let remote = format!("origin/{}", branch.as_str());
                self.git(
                    shared,
                    &[
                        OsStr::new("worktree"),
                        "add".as_ref(),
                        "-B".as_ref(),
                        branch.as_str().as_ref(),
                        checkout.as_os_str(),
                        remote.as_ref(),
                    ],
                )
            });
            match added {
                Ok(_) => {
                    return Ok(Checkout {
                        path: checkout.to_owned(),
                        branch: Some(branch.clone()),
                    });
                }
                Err(err) if require_branch => {
                    return Err(WorkspaceError::BranchUnavailable {
                        branch: branch.as_str().to_owned(),
                        checkout: checkout.to_owned(),
                        reason: err.to_string(),
                    });
                }
                Err(err) => {
                    tracing::warn!(%err, "branch unavailable; checking out the default branch detached")
                }
            }
        }
        let start = format!("origin/{}", self.default_branch(shared));
        self.git(
            shared,
            &[
                OsStr::new("worktree"),
                "add".as_ref(),
                "--detach".as_ref(),
                checkout.as_os_str(),
                start.as_ref(),
            ],
        )?;
        Ok(Checkout { path: checkout.to_owned(), branch: None })
    }

    fn prepare_clone(
        &self,
        checkout: &Path,
        url: &str,
        branch: Option<&Branch>,
        require_branch: bool,
    ) -> Result<Checkout, WorkspaceError> {
        if checkout.join(".git").exists() {
            if let Err(err) = self.git(checkout, &["fetch", "--prune", "origin"]) {
                tracing::warn!(%err, "fetch failed; using the clone as it is");
            }
            let on = current_branch(self, checkout);
            // A reused clone is never reset (it may hold unpushed work), but a required
            // branch is still checked (reference quirk §9.8).
            if let Some(wanted) = branch.filter(|_| require_branch)
                && on.as_ref() != Some(wanted)
            {
                return Err(WorkspaceError::BranchUnavailable {
                    branch: wanted.as_str().to_owned(),
                    checkout: checkout.to_owned(),
                    reason: "the existing clone is on another branch".to_owned(),
                });
            }
            return Ok(Checkout { path: checkout.to_owned(), branch: on });
        }
        self.clone_into(checkout, url)?;
        let Some(branch) = branch else {
            return Ok(Checkout {
                path: checkout.to_owned(),
                branch: current_branch(self, checkout),
            });
        };
        let remote = format!("origin/{}", branch.as_str());
        let switched = self.fetch_branch(checkout, branch).and_then(|()| {
            self.git(checkout, &["checkout", "-B", branch.as_str(), &remote]).map(drop)
        });
        match switched {
            Ok(()) => Ok(Checkout { path: checkout.to_owned(), branch: Some(branch.clone()) }),
            Err(err) if require_branch => {
                // Leave nothing behind that a later prepare would reuse unchecked.
                let _ = remove_dir(checkout);
                Err(WorkspaceError::BranchUnavailable {
                    branch: branch.as_str().to_owned(),
                    checkout: checkout.to_owned(),
                    reason: err.to_string(),
                })
            }
            Err(err) => {
                tracing::warn!(%err, "branch unavailable; staying on the default branch");
                Ok(Checkout { path: checkout.to_owned(), branch: current_branch(self, checkout) })
            }
        }
    }

    fn clone_into(&self, dir: &Path, url: &str) -> Result<(), WorkspaceError> {
        let parent = dir.parent().unwrap_or(dir);
        std::fs::create_dir_all(parent).map_err(|source| WorkspaceError::Io {
            verb: "clone".into(),
            dir: parent.to_owned(),
            source,
        })?;
        self.git(
            parent,
            &[
                OsStr::new("clone"),
                "--quiet".as_ref(),
                "--".as_ref(),
                url.as_ref(),
                dir.as_os_str(),
            ],
        )
        .map(drop)
    }

    fn fetch_branch(&self, repo: &Path, branch: &Branch) -> Result<(), WorkspaceError> {
        let refspec = format!("+refs/heads/{0}:refs/remotes/origin/{0}", branch.as_str());
        self.git(repo, &["fetch", "--quiet", "origin", &refspec]).map(drop)
    }

    /// The remote's default branch (`origin/HEAD`), else `main`.
    fn default_branch(&self, repo: &Path) -> String {
        self.git(repo, &["rev-parse", "--abbrev-ref", "origin/HEAD"])
            .ok()
            .and_then(|out| out.trim().strip_prefix("origin/").map(str::to_owned))
            .filter(|name| Branch::parse(name).is_ok())
            .unwrap_or_else(|| "main".to_owned())
    }

    /// Runs `git -C <dir> <args>`; returns stdout.
    fn git<S: AsRef<OsStr>>(&self, dir: &Path, args: &[S]) -> Result<String, WorkspaceError> {
        let verb =
            args.first().map(|a| a.as_ref().to_string_lossy().into_owned()).unwrap_or_default();
        let output = git_in(&self.settings.git, dir).args(args).output().map_err(|source| {
            match source.kind() {
                std::io::ErrorKind::NotFound => {
                    WorkspaceError::GitMissing { git: self.settings.git.clone() }
                }
                _ => WorkspaceError::Io { verb: verb.clone(), dir: dir.to_owned(), source },
            }
        })?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(WorkspaceError::Git {
                verb,
                dir: dir.to_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            })
        }
    }
}

/// `git -C <dir>`, on that checkout only (no repository the environment selects:
/// [`loop_core::checkout::GIT_REPOSITORY_ENV`]), never prompting for credentials.
fn git_in(git: &Path, dir: &Path) -> Command {
    let mut command = Command::new(git);
    command.arg("-C").arg(dir).env("GIT_TERMINAL_PROMPT", "0").stdin(Stdio::null());
    for name in loop_core::checkout::GIT_REPOSITORY_ENV {
        command.env_remove(name);
    }
    command
}

/// The `origin` remote of the checkout at `dir` as git holds it: as configured (`git
/// config --get remote.origin.url`, no rewrite) and as git uses it (`git remote get-url
/// origin`, the user's `insteadOf` rewrites applied). Whether that is a work item's
/// repository is [`loop_core::checkout::judge`]'s. Runs `git` (blocking); a question git
/// cannot answer (no checkout, no origin, no git) is `None`.
pub fn origin_of(git: &Path, dir: &Path) -> Origin {
    let ask = |args: &[&str]| {
        let output = git_in(git, dir).args(args).output().ok().filter(|o| o.status.success())?;
        let url = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        (!url.is_empty()).then_some(url)
    };
    Origin {
        configured: ask(&["config", "--get", "remote.origin.url"]),
        effective: ask(&["remote", "get-url", "origin"]),
    }
}

/// The branch a checkout is on, `None` when detached or unknown.
fn current_branch(workspaces: &Workspaces, checkout: &Path) -> Option<Branch> {
    let name = workspaces.git(checkout, &["symbolic-ref", "--quiet", "--short", "HEAD"]).ok()?;
    Branch::parse(name.trim()).ok()
}

/// `<host>/<owner>/<repo>` as a relative path, each component checked.
fn repo_components(repo: &RepoRef) -> Result<PathBuf, WorkspaceError> {
    let host = repo.host().replace(':', "_");
    Ok([safe(&host)?, safe(repo.owner())?, safe(repo.name())?].iter().collect())
}

/// A single safe path component: `^[A-Za-z0-9][A-Za-z0-9._-]*$`.
fn safe(component: &str) -> Result<&str, WorkspaceError> {
    let mut bytes = component.bytes();
    let ok = bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(component)
    } else {
        Err(WorkspaceError::UnsafeComponent { component: component.to_owned() })
    }
}

fn remove_dir(path: &Path) -> Result<(), WorkspaceError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(WorkspaceError::Remove { path: path.to_owned(), source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_components_refuse_traversal_and_hidden_names() {
        for bad in ["..", ".", "../evil", ".ssh", "-x", "a/b", ""] {
            assert!(safe(bad).is_err(), "{bad}");
        }
        for ok in ["octo", "my.repo", "github-octo-app-15", "ghe.corp.example"] {
            assert!(safe(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn branch_names_are_an_allow_list() {
        for ok in ["main", "feature/x-1", "release-2.0", "user/fix_it"] {
            assert!(Branch::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "-f",
            "--upload-pack=x",
            "a..b",
            "a//b",
            "a/",
            "a.",
            "x.lock",
            "a/.b",
            "a b",
            "a@{1}",
            "",
            "~x",
            "a:b",
        ] {
            assert!(Branch::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn layouts_key_checkouts_on_the_endpoint_slug() {
        let item: WorkItemRef = "github:octo/app#15".parse().unwrap();
        let pr: WorkItemRef = "github:ghe.corp.example/octo/lib#7".parse().unwrap();
        let settings =
            |strategy| WorkspaceSettings { root: PathBuf::from("/w"), strategy, git: "git".into() };
        let worktree = Workspaces::new(settings(WorkspaceStrategy::Worktree));
        assert_eq!(
            worktree.checkout_path(&item).unwrap(),
            Path::new("/w/.worktrees/github.com/octo/app/github-octo-app-15")
        );
        assert_eq!(
            worktree.checkout_path(&pr).unwrap(),
            Path::new("/w/.worktrees/ghe.corp.example/octo/lib/github-ghe.corp.example-octo-lib-7")
        );
        let clone = Workspaces::new(settings(WorkspaceStrategy::Clone));
        assert_eq!(
            clone.checkout_path(&item).unwrap(),
            Path::new("/w/.work-items/github-octo-app-15/github.com/octo/app")
        );
    }

    #[test]
    fn settings_come_from_the_config_with_the_root_tilde_expanded() {
        let mut config = WorkspaceConfig {
            root: None,
            strategy: WorkspaceStrategy::Clone,
            clone_protocol: CloneProtocol::Https,
            default_host: "github.com".into(),
            keep_checkout_on_close: false,
            git_binary: "git".into(),
            clone_urls: Vec::new(),
        };
        assert!(WorkspaceSettings::from_config(&config, Path::new("/home/me")).is_none());
        config.root = Some(PathBuf::from("~/work"));
        let settings = WorkspaceSettings::from_config(&config, Path::new("/home/me")).unwrap();
        assert_eq!(settings.root, Path::new("/home/me/work"));
        assert_eq!(settings.strategy, WorkspaceStrategy::Clone);
        config.root = Some(PathBuf::from("/srv/ws"));
        assert_eq!(
            WorkspaceSettings::from_config(&config, Path::new("/h")).unwrap().root,
            Path::new("/srv/ws")
        );
    }

    #[test]
    fn clone_urls_are_derived_from_the_repository_name() {
        let repo: RepoRef = "ghe.example.com/octo/app".parse().unwrap();
        assert_eq!(
            clone_url(&repo, CloneProtocol::Https, &[]),
            "https://ghe.example.com/octo/app.git"
        );
        assert_eq!(clone_url(&repo, CloneProtocol::Ssh, &[]), "git@ghe.example.com:octo/app.git");
        let mirror = |host: &str| CloneUrl { host: host.into(), base: "file:///srv/git".into() };
        let bases = [mirror("github.com"), mirror("ghe.example.com")];
        assert_eq!(
            clone_url(&repo, CloneProtocol::Ssh, &bases[1..]),
            "file:///srv/git/octo/app.git"
        );
        assert_eq!(
            clone_url(&repo, CloneProtocol::Https, &bases[..1]),
            "https://ghe.example.com/octo/app.git"
        );
    }

    #[test]
    fn a_checkout_is_the_repository_its_origin_names_whatever_the_rewrites() {
        use loop_core::checkout::{Verdict, judge};
        let dir = tempfile::tempdir().unwrap();
        let git = Path::new("git");
        let run = |args: &[&str]| {
            let out = Command::new(git).arg("-C").arg(dir.path()).args(args).output().unwrap();
            assert!(out.status.success(), "git {args:?}");
        };
        let repo: RepoRef = "octo/app".parse().unwrap();
        let verdict = |bases: &[CloneUrl]| judge(&repo, &origin_of(git, dir.path()), bases);
        assert_eq!(verdict(&[]), Verdict::NoOrigin, "not a checkout");
        run(&["init", "-q"]);
        assert_eq!(verdict(&[]), Verdict::NoOrigin, "no origin");
        run(&["remote", "add", "origin", "git@github.com:octo/app.git"]);
        assert_eq!(verdict(&[]), Verdict::Ours);
        // A repository the environment selects (`GIT_DIR=~/.dotfiles`) is never asked.
        let asked = git_in(git, dir.path());
        let removed: Vec<_> =
            asked.get_envs().filter(|(_, v)| v.is_none()).map(|(k, _)| k).collect();
        for name in loop_core::checkout::GIT_REPOSITORY_ENV {
            assert!(removed.contains(&std::ffi::OsStr::new(name)), "{name} removed");
        }
        let other: RepoRef = "octo/lib".parse().unwrap();
        assert!(matches!(
            judge(&other, &origin_of(git, dir.path()), &[]),
            Verdict::Foreign { clone_of: Some(r), .. } if r == repo
        ));
        // The checkout's own config rewrites every GitHub URL to a mirror, and pushes to
        // SSH: the URL git uses is the mirror's, the configured one still GitHub's.
        run(&["remote", "set-url", "origin", "https://github.com/octo/app.git"]);
        run(&["config", "url.file:///srv/mirror/.insteadOf", "https://github.com/"]);
        run(&["config", "url.git@github.com:.pushInsteadOf", "https://github.com/"]);
        let origin = origin_of(git, dir.path());
        assert_eq!(origin.effective.as_deref(), Some("file:///srv/mirror/octo/app.git"));
        assert_eq!(origin.configured.as_deref(), Some("https://github.com/octo/app.git"));
        assert_eq!(verdict(&[]), Verdict::Ours);
        // A checkout of a local path, read through the configured clone base.
        run(&["remote", "set-url", "origin", "file:///srv/git/octo/app.git"]);
        let base = CloneUrl { host: "github.com".into(), base: "file:///srv/git".into() };
        assert!(matches!(verdict(&[]), Verdict::Foreign { clone_of: None, .. }));
        assert_eq!(verdict(&[base]), Verdict::Ours);
    }
}

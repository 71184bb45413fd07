//! Whether a checkout is a work item's repository, judged from its `origin` remote as
//! git holds it: the URL as configured (`git config --get remote.origin.url`) and as git
//! uses it after the user's `url.<base>.insteadOf` rewrites (`git remote get-url
//! origin`). Either naming the item's repository by its canonical identity
//! ([`RepoRef::from_remote_url`], or a configured clone base) makes the checkout the
//! item's: a clone the-loop made keeps the URL it was given as configured, whatever the
//! user's config rewrites it to. What is not the item's says which repository it is a
//! clone of and how to fix it.

use std::path::Path;

use crate::config::CloneUrl;
use crate::refs::{RepoRef, redact_url};

/// The environment variables that point git at a repository other than the one its
/// `-C <dir>` names (a user's `GIT_DIR=~/.dotfiles`, a hook's or `git bisect run`'s
/// environment): every git the-loop runs has them removed, so it works on the checkout
/// it names and never on a repository the user happens to have selected.
pub const GIT_REPOSITORY_ENV: [&str; 6] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
];

/// The `origin` remote of a checkout, as read from git; `None` where git had no answer
/// (not a checkout, no origin).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// `remote.origin.url` as configured, no rewrite applied.
    pub configured: Option<String>,
    /// The URL git fetches from, the user's `insteadOf` rewrites applied.
    pub effective: Option<String>,
}

/// What a checkout is, for a work item's repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The item's repository.
    Ours,
    /// No checkout, or one without an `origin`: nothing the graph could drive.
    NoOrigin,
    /// A clone of another repository (`clone_of`; `None` when its URL names none), its
    /// origin URL as configured, credentials redacted.
    Foreign { url: String, clone_of: Option<RepoRef> },
}

/// Judges `origin` for `repo`, reading each URL through `bases` (the configured clone
/// bases: `<base>/<owner>/<name>.git` is that host's `owner/name`) and then by its own
/// shape.
pub fn judge(repo: &RepoRef, origin: &Origin, bases: &[CloneUrl]) -> Verdict {
    let urls: Vec<&str> =
        [&origin.configured, &origin.effective].into_iter().flatten().map(String::as_str).collect();
    let Some(first) = urls.first() else { return Verdict::NoOrigin };
    let named: Vec<RepoRef> = urls.iter().filter_map(|url| repository_of(url, bases)).collect();
    if named.iter().any(|named| named.same_repository(repo)) {
        return Verdict::Ours;
    }
    Verdict::Foreign { url: redact_url(first), clone_of: named.into_iter().next() }
}

/// The repository `url` names: under a configured clone base first, else by its shape.
pub fn repository_of(url: &str, bases: &[CloneUrl]) -> Option<RepoRef> {
    let url = url.trim().trim_end_matches('/');
    for base in bases {
        let prefix = base.base.trim_end_matches('/');
        let rest = url
            .get(..prefix.len())
            .filter(|head| head.eq_ignore_ascii_case(prefix))
            .and_then(|_| url[prefix.len()..].strip_prefix('/'));
        if let Some(path) = rest {
            let path = path.strip_suffix(".git").unwrap_or(path);
            if let Some((owner, name)) = path.split_once('/') {
                return RepoRef::new(Some(&base.host), owner, name).ok();
            }
        }
    }
    RepoRef::from_remote_url(url)
}

impl Verdict {
    /// The warning a person reads where the item is shown, when the graph cannot run in
    /// the checkout at `dir` for `repo`'s work item; `None` when it can, or when there is
    /// no checkout to speak of.
    pub fn warning(&self, dir: &Path, repo: &RepoRef) -> Option<String> {
        let Verdict::Foreign { url, clone_of } = self else { return None };
        let what = match clone_of {
            Some(other) => format!("a clone of {other}"),
            None => format!("a clone of `{url}`"),
        };
        let dir = dir.display();
        let url = format!("https://{}/{}/{}.git", repo.host(), repo.owner(), repo.name());
        Some(format!(
            "graph not running: the checkout at {dir} is {what}, not {repo} — fix: point its \
             origin at {repo} (`git -C {dir} remote set-url origin {url}`), or remove the \
             checkout so the next start clones {repo} there"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(configured: Option<&str>, effective: Option<&str>) -> Origin {
        Origin {
            configured: configured.map(str::to_owned),
            effective: effective.map(str::to_owned),
        }
    }

    #[test]
    fn either_url_naming_the_repository_makes_the_checkout_ours() {
        let repo: RepoRef = "octo/app".parse().unwrap();
        let mirror = "file:///srv/mirror/github/octo/app.git";
        let cases = [
            // insteadOf rewrote the configured URL to a mirror.
            origin(Some("https://github.com/octo/app.git"), Some(mirror)),
            // The SSH form, rewritten.
            origin(Some("git@github.com:octo/app.git"), Some("https://mirror.corp/x/y.git")),
            // A token URL, as CI writes it.
            origin(Some("https://x-access-token:t@github.com/Octo/App"), None),
            // Only the rewritten one names it (a `url.….insteadOf` the other way round).
            origin(Some("gh:octo/app"), Some("https://github.com/octo/app.git")),
        ];
        for case in cases {
            assert_eq!(judge(&repo, &case, &[]), Verdict::Ours, "{case:?}");
        }
        let bases =
            [CloneUrl { host: "github.com".into(), base: "file:///srv/mirror/github/".into() }];
        assert_eq!(judge(&repo, &origin(None, Some(mirror)), &bases), Verdict::Ours);
    }

    #[test]
    fn another_repository_is_foreign_with_its_name_and_no_token() {
        let repo: RepoRef = "octo/app".parse().unwrap();
        let other = origin(Some("https://x-access-token:secret@github.com/x/y.git"), None);
        let verdict = judge(&repo, &other, &[]);
        assert_eq!(
            verdict,
            Verdict::Foreign {
                url: "https://***@github.com/x/y.git".into(),
                clone_of: Some("x/y".parse().unwrap()),
            }
        );
        let warning = verdict.warning(Path::new("/w/app"), &repo).unwrap_or_default();
        assert!(
            warning.starts_with(
                "graph not running: the checkout at /w/app is a clone of x/y, not octo/app — fix:"
            ),
            "{warning}"
        );
        assert!(!warning.contains("secret"), "{warning}");
        assert_eq!(judge(&repo, &origin(None, None), &[]), Verdict::NoOrigin);
        assert_eq!(Verdict::NoOrigin.warning(Path::new("/w"), &repo), None);
        let unknown = judge(&repo, &origin(Some("/srv/elsewhere.git"), None), &[]);
        assert!(matches!(&unknown, Verdict::Foreign { clone_of: None, .. }), "{unknown:?}");
    }
}

//! Identities of the things the-loop tracks: repositories, work items and their file and
//! tmux names.
//!
//! A work item is named by its ref, `github:[host/]owner/repo#N`. The router, the poller and
//! the CLI all derive refs through [`WorkItemRef`], so the same item always has the same
//! name, the same state file (`<slug>.json`) and the same tmux session (`loop-<slug>`).
//! `github.com` is the default host and is never written: `github:github.com/octo/app#1`
//! and `github:octo/app#1` are one ref.

use std::fmt;
use std::str::FromStr;

/// The host every ref without a host segment lives on.
pub const DEFAULT_HOST: &str = "github.com";

/// Why a ref or repository name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error("`{input}` is not a repository: expected `[host/]owner/repo`")]
    RepoShape { input: String },
    #[error("`{input}` is not a work-item ref: expected `github:[host/]owner/repo#N`")]
    RefShape { input: String },
    #[error("`{input}`: only `github:` work-item refs are supported, got provider `{provider}`")]
    Provider { input: String, provider: String },
    #[error(
        "`{input}`: `{host}` is not a host name (expected e.g. `ghe.example.com` or `host:8443`)"
    )]
    Host { input: String, host: String },
    #[error("`{input}`: `{part}` is not a valid owner or repository name")]
    Segment { input: String, part: String },
    #[error("`{input}`: `{number}` is not an issue or pull-request number")]
    Number { input: String, number: String },
    #[error(
        "`{input}` is not a pull request: give its number (`12`, `#12`), its ref \
         (`github:owner/repo#12`) or its URL (`https://github.com/owner/repo/pull/12`)"
    )]
    PullRequest { input: String },
}

/// A repository, `[host/]owner/repo`. The host is `None` for github.com.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoRef {
    host: Option<String>,
    owner: String,
    name: String,
}

impl RepoRef {
    /// Builds a repository name from its parts, validating each.
    pub fn new(host: Option<&str>, owner: &str, name: &str) -> Result<Self, RefError> {
        let input = match host {
            Some(host) => format!("{host}/{owner}/{name}"),
            None => format!("{owner}/{name}"),
        };
        let host = match host {
            None => None,
            Some(host) if host.eq_ignore_ascii_case(DEFAULT_HOST) => None,
            Some(host) if is_host(host) => Some(host.to_ascii_lowercase()),
            Some(host) => {
                return Err(RefError::Host { input, host: host.to_owned() });
            }
        };
        for part in [owner, name] {
            if !is_segment(part) {
                return Err(RefError::Segment { input, part: part.to_owned() });
            }
        }
        Ok(Self { host, owner: owner.to_owned(), name: name.to_owned() })
    }

    /// The host, `github.com` when none was given.
    pub fn host(&self) -> &str {
        self.host.as_deref().unwrap_or(DEFAULT_HOST)
    }

    /// The host only when it is not github.com (what refs and slugs spell out).
    pub fn explicit_host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether two names denote the same repository. GitHub compares owner and repository
    /// names without regard to case, and so does the repository bound.
    pub fn same_repository(&self, other: &RepoRef) -> bool {
        self.host == other.host
            && self.owner.eq_ignore_ascii_case(&other.owner)
            && self.name.eq_ignore_ascii_case(&other.name)
    }

    /// The repository a git remote URL names, by its canonical identity (host, owner,
    /// name): `https://` and `http://` (credentials such as a token in the URL and a
    /// default port dropped), `ssh://` and `git://` (user and port dropped), the scp form
    /// `[user@]host:owner/name`; case kept as written (compare with
    /// [`Self::same_repository`]), a `.git` suffix and a trailing slash dropped, GitHub's
    /// SSH-over-443 host `ssh.github.com` read as `github.com`. `None` for a local path,
    /// a `file://` URL, or a path that is not exactly `owner/name`.
    pub fn from_remote_url(url: &str) -> Option<RepoRef> {
        let url = url.trim();
        let (scheme, rest) = match url.split_once("://") {
            Some((scheme, rest)) => (Some(scheme.to_ascii_lowercase()), rest),
            None => (None, url),
        };
        let (authority, path, web) = match scheme.as_deref() {
            Some(web @ ("https" | "http")) => {
                let (authority, path) = rest.split_once('/')?;
                let default_port = if web == "https" { ":443" } else { ":80" };
                (authority, path, Some(default_port))
            }
            Some("ssh" | "git+ssh" | "ssh+git" | "git") => {
                let (authority, path) = rest.split_once('/')?;
                (authority, path, None)
            }
            Some(_) => return None,
            // scp form: `host:path`, with no slash before the colon (else a local path).
            None => {
                let (authority, path) = rest.split_once(':')?;
                if authority.contains('/') || authority.is_empty() {
                    return None;
                }
                (authority, path, None)
            }
        };
        let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
        let host = match web {
            Some(default_port) => host.strip_suffix(default_port).unwrap_or(host),
            // An SSH port is not the host's name.
            None if scheme.is_some() => host.split_once(':').map_or(host, |(name, _)| name),
            None => host,
        };
        let host = host.to_ascii_lowercase();
        let host = if host == "ssh.github.com" { DEFAULT_HOST.to_owned() } else { host };
        let path = path.trim_matches('/');
        let path = path.strip_suffix(".git").unwrap_or(path);
        let (owner, name) = path.split_once('/')?;
        RepoRef::new(Some(&host), owner, name).ok()
    }

    /// The work item `#number` in this repository.
    pub fn item(&self, number: u64) -> WorkItemRef {
        WorkItemRef { repo: self.clone(), number }
    }
}

impl fmt::Display for RepoRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(host) = &self.host {
            write!(f, "{host}/")?;
        }
        write!(f, "{}/{}", self.owner, self.name)
    }
}

impl FromStr for RepoRef {
    type Err = RefError;

    fn from_str(input: &str) -> Result<Self, RefError> {
        let parts: Vec<&str> = input.split('/').collect();
        let shape = || RefError::RepoShape { input: input.to_owned() };
        let (host, owner, name) = match parts.as_slice() {
            [owner, name] => (None, *owner, *name),
            [host, owner, name] => (Some(*host), *owner, *name),
            _ => return Err(shape()),
        };
        let name = name.strip_suffix(".git").unwrap_or(name);
        RepoRef::new(host, owner, name).map_err(|err| with_input(err, input))
    }
}

/// `url` with any credentials it carries (`https://user:token@host/…`) replaced by `***`,
/// for a message a person reads.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((userinfo, _)) if userinfo.contains(':') || scheme.starts_with("http") => {
            format!("{scheme}://***@{}", &rest[userinfo.len() + 1..])
        }
        _ => url.to_owned(),
    }
}

/// A work item: an issue or pull request, `github:[host/]owner/repo#N`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkItemRef {
    repo: RepoRef,
    number: u64,
}

impl WorkItemRef {
    pub fn new(repo: RepoRef, number: u64) -> Self {
        Self { repo, number }
    }

    pub fn repo(&self) -> &RepoRef {
        &self.repo
    }

    pub fn number(&self) -> u64 {
        self.number
    }

    /// The file-name stem of this item's records: `github-[host-]owner-repo-N`, with any
    /// run of characters outside `[A-Za-z0-9._-]` replaced by `-`. Dots are kept.
    pub fn slug(&self) -> String {
        let raw = format!("github-{}-{}", self.repo.to_string().replace('/', "-"), self.number);
        let mut slug = String::with_capacity(raw.len());
        let mut in_run = false;
        for c in raw.chars() {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                slug.push(c);
                in_run = false;
            } else if !in_run {
                slug.push('-');
                in_run = true;
            }
        }
        slug
    }

    /// The tmux session name: `loop-<slug>` with `.` and `:` rewritten to `_` (tmux
    /// refuses both in session names).
    pub fn tmux_session(&self) -> String {
        format!("loop-{}", self.slug()).replace(['.', ':'], "_")
    }

    /// The item's web address. GitHub redirects `/issues/N` to `/pull/N` for pull requests.
    pub fn url(&self) -> String {
        format!(
            "https://{}/{}/{}/issues/{}",
            self.repo.host(),
            self.repo.owner,
            self.repo.name,
            self.number
        )
    }
}

impl WorkItemRef {
    /// A pull request as a person or a tool names it: a number (`12`, `#12`) in `repo`,
    /// a ref (`github:owner/repo#12`), or its web address
    /// (`https://host/owner/repo/pull/12`, a trailing path such as `/files` allowed).
    pub fn parse_pull_request(input: &str, repo: &RepoRef) -> Result<Self, RefError> {
        let text = input.trim();
        let refused = || RefError::PullRequest { input: input.to_owned() };
        let digits = text.strip_prefix('#').unwrap_or(text);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return match digits.parse::<u64>() {
                Ok(number) if number > 0 => Ok(repo.item(number)),
                _ => Err(refused()),
            };
        }
        if text.starts_with("github:") {
            return text.parse();
        }
        let address = text
            .strip_prefix("https://")
            .or_else(|| text.strip_prefix("http://"))
            .ok_or_else(refused)?;
        let mut parts = address.split(['/', '?', '#']);
        let (Some(host), Some(owner), Some(name), Some("pull"), Some(number)) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(refused());
        };
        let number = number
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0 && number.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(refused)?;
        Ok(RepoRef::new(Some(host), owner, name)?.item(number))
    }
}

impl fmt::Display for WorkItemRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "github:{}#{}", self.repo, self.number)
    }
}

impl FromStr for WorkItemRef {
    type Err = RefError;

    fn from_str(input: &str) -> Result<Self, RefError> {
        let shape = || RefError::RefShape { input: input.to_owned() };
        let (provider, rest) = input.split_once(':').ok_or_else(shape)?;
        if provider != "github" {
            if is_provider(provider) {
                return Err(RefError::Provider {
                    input: input.to_owned(),
                    provider: provider.to_owned(),
                });
            }
            return Err(shape());
        }
        let (path, number) = rest.rsplit_once('#').ok_or_else(shape)?;
        let repo = match path.parse::<RepoRef>() {
            Ok(repo) => repo,
            Err(RefError::RepoShape { .. }) => return Err(shape()),
            Err(err) => return Err(with_input(err, input)),
        };
        let parsed = number
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0 && number.bytes().all(|b| b.is_ascii_digit()));
        let number = parsed.ok_or_else(|| RefError::Number {
            input: input.to_owned(),
            number: number.to_owned(),
        })?;
        Ok(WorkItemRef { repo, number })
    }
}

/// Restates an error about a part in terms of the whole input the user typed.
fn with_input(err: RefError, input: &str) -> RefError {
    let input = input.to_owned();
    match err {
        RefError::RepoShape { .. } => RefError::RepoShape { input },
        RefError::RefShape { .. } => RefError::RefShape { input },
        RefError::Provider { provider, .. } => RefError::Provider { input, provider },
        RefError::Host { host, .. } => RefError::Host { input, host },
        RefError::Segment { part, .. } => RefError::Segment { input, part },
        RefError::Number { number, .. } => RefError::Number { input, number },
        RefError::PullRequest { .. } => RefError::PullRequest { input },
    }
}

fn is_provider(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// An owner or repository name: `^[A-Za-z0-9][A-Za-z0-9._-]*$`, at most 100 characters.
/// The shape is also what keeps a name from reaching a path as `..` or `/`.
fn is_segment(s: &str) -> bool {
    let mut bytes = s.bytes();
    s.len() <= 100
        && bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A host: a dotted DNS name with an optional `:port`, or `name:port`.
fn is_host(s: &str) -> bool {
    let (name, port) = match s.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (s, None),
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
    let labels_ok = !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    port_ok && labels_ok && (name.contains('.') || port.is_some())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_pull_request_is_named_by_number_ref_or_address() {
        let repo: RepoRef = "octo/app".parse().unwrap();
        let pr = |text: &str| WorkItemRef::parse_pull_request(text, &repo).map(|r| r.to_string());
        assert_eq!(pr("12").unwrap(), "github:octo/app#12");
        assert_eq!(pr(" #12 ").unwrap(), "github:octo/app#12");
        assert_eq!(pr("github:other/lib#3").unwrap(), "github:other/lib#3");
        assert_eq!(pr("https://github.com/other/lib/pull/3").unwrap(), "github:other/lib#3");
        assert_eq!(pr("https://github.com/other/lib/pull/3/files").unwrap(), "github:other/lib#3");
        assert_eq!(
            pr("https://ghe.example.com/other/lib/pull/3#issuecomment-1").unwrap(),
            "github:ghe.example.com/other/lib#3"
        );
        for bad in [
            "",
            "0",
            "#",
            "-3",
            "twelve",
            "https://github.com/o/r/issues/3",
            "https://github.com/o/r/pull/x",
            "https://github.com/../r/pull/3",
            "ftp://x/o/r/pull/1",
        ] {
            assert!(pr(bad).is_err(), "{bad:?} should be refused");
        }
    }

    use super::*;

    fn item(s: &str) -> WorkItemRef {
        s.parse().unwrap()
    }

    #[test]
    fn github_com_is_never_written() {
        assert_eq!(item("github:github.com/octo/app#7").to_string(), "github:octo/app#7");
        assert_eq!(item("github:github.com/octo/app#7"), item("github:octo/app#7"));
        assert_eq!("GitHub.com/octo/app".parse::<RepoRef>().unwrap().to_string(), "octo/app");
    }

    #[test]
    fn enterprise_hosts_are_kept_in_ref_slug_and_url() {
        let r = item("github:ghe.corp.example/octo/my.repo#7");
        assert_eq!(r.to_string(), "github:ghe.corp.example/octo/my.repo#7");
        assert_eq!(r.slug(), "github-ghe.corp.example-octo-my.repo-7");
        assert_eq!(r.tmux_session(), "loop-github-ghe_corp_example-octo-my_repo-7");
        assert_eq!(r.url(), "https://ghe.corp.example/octo/my.repo/issues/7");
        let port = item("github:git.local:8443/octo/app#1");
        assert_eq!(port.slug(), "github-git.local-8443-octo-app-1");
        assert_eq!(port.tmux_session(), "loop-github-git_local-8443-octo-app-1");
    }

    #[test]
    fn slug_and_url_for_github_com() {
        let r = item("github:octo/app#15");
        assert_eq!(r.slug(), "github-octo-app-15");
        assert_eq!(r.tmux_session(), "loop-github-octo-app-15");
        assert_eq!(r.url(), "https://github.com/octo/app/issues/15");
    }

    #[test]
    fn malformed_refs_are_refused_with_the_reason() {
        let cases = [
            ("octo/app#1", "expected `github:"),
            ("github:octo#1", "expected `github:"),
            ("github:octo/app", "expected `github:"),
            ("github:octo/app#0", "not an issue or pull-request number"),
            ("github:octo/app#+1", "not an issue or pull-request number"),
            ("github:octo/app#x", "not an issue or pull-request number"),
            ("jira:octo/app#1", "only `github:`"),
            ("github:notahost/octo/app#1", "not a host name"),
            ("github:octo/..#1", "not a valid owner"),
            ("github:octo/../x#1", "not a host name"),
            ("github:octo/.hidden#1", "not a valid owner"),
            ("github:a/b/c/d#1", "expected `github:"),
        ];
        for (input, expected) in cases {
            let err = input.parse::<WorkItemRef>().unwrap_err().to_string();
            assert!(err.contains(expected), "{input}: {err}");
            assert!(err.contains(input), "{input}: error does not name the input: {err}");
        }
    }

    #[test]
    fn repository_names_accept_host_and_strip_dot_git() {
        let r: RepoRef = "ghe.example.com/Octo/App.git".parse().unwrap();
        assert_eq!(r.host(), "ghe.example.com");
        assert_eq!(r.to_string(), "ghe.example.com/Octo/App");
        assert!(r.same_repository(&"ghe.example.com/octo/app".parse().unwrap()));
        assert!(!r.same_repository(&"octo/app".parse().unwrap()));
        for bad in ["octo", "octo/", "/app", "a/b/c/d", "octo/app name", "-x.com/o/r"] {
            assert!(bad.parse::<RepoRef>().is_err(), "{bad}");
        }
    }

    #[test]
    fn display_and_parse_round_trip() {
        for s in ["github:octo/app#1", "github:h.example:8443/o/r.x#99"] {
            assert_eq!(item(s).to_string(), s);
        }
    }

    #[test]
    fn every_spelling_of_a_remote_names_the_same_repository() {
        let repo: RepoRef = "Octo/App".parse().unwrap();
        for url in [
            "https://github.com/octo/app.git",
            "https://github.com/octo/app",
            "https://github.com/octo/app/",
            "https://GitHub.com/OCTO/app.git/",
            "https://github.com:443/octo/app.git",
            "http://github.com/octo/app",
            "https://x-access-token:ghs_abc123@github.com/octo/app.git",
            "https://ghp_token@github.com/octo/app.git",
            "ssh://git@github.com/octo/app.git",
            "ssh://git@github.com:22/octo/app.git",
            "ssh://git@ssh.github.com:443/octo/app.git",
            "git+ssh://git@github.com/octo/app",
            "git://github.com/octo/app.git",
            "git@github.com:octo/app.git",
            "git@github.com:/octo/app.git",
            "github.com:octo/app",
            "  git@github.com:octo/app.git\n",
        ] {
            let parsed = RepoRef::from_remote_url(url);
            assert!(
                parsed.as_ref().is_some_and(|p| p.same_repository(&repo)),
                "{url:?} -> {parsed:?}"
            );
        }
        let ghe = RepoRef::from_remote_url("https://ghe.corp.example:8443/team/tool.git");
        assert_eq!(ghe.map(|r| r.to_string()), Some("ghe.corp.example:8443/team/tool".into()));
    }

    #[test]
    fn a_remote_that_names_no_repository_or_another_is_not_this_one() {
        let repo: RepoRef = "octo/app".parse().unwrap();
        for url in [
            "",
            "/srv/git/octo/app.git",
            "./octo/app",
            "file:///srv/git/octo/app.git",
            "https://github.com/octo",
            "https://github.com/octo/app/extra",
            "https://github.com/",
            "ftp://github.com/octo/app",
            "git@github.com:octo",
            "https://github.com/octo/../app",
        ] {
            assert_eq!(RepoRef::from_remote_url(url), None, "{url:?}");
        }
        for url in [
            "https://github.com/octo/other.git",
            "git@github.com:someone/app.git",
            "https://gitlab.com/octo/app.git",
            "https://mirror.corp/github/octo/app.git",
        ] {
            let parsed = RepoRef::from_remote_url(url);
            assert!(!parsed.is_some_and(|p| p.same_repository(&repo)), "{url:?}");
        }
    }

    #[test]
    fn credentials_in_a_url_are_never_shown() {
        assert_eq!(
            redact_url("https://x-access-token:ghs_secret@github.com/o/r.git"),
            "https://***@github.com/o/r.git"
        );
        assert_eq!(redact_url("https://ghp_secret@github.com/o/r"), "https://***@github.com/o/r");
        assert_eq!(redact_url("ssh://git@github.com/o/r.git"), "ssh://git@github.com/o/r.git");
        assert_eq!(redact_url("git@github.com:o/r.git"), "git@github.com:o/r.git");
        assert_eq!(redact_url("/srv/git/o/r.git"), "/srv/git/o/r.git");
    }

    proptest::proptest! {
        /// Whatever the spelling (scheme, user, case, suffix, slash), a remote of a
        /// repository names that repository.
        #[test]
        fn any_spelling_of_a_repository_url_round_trips(
            owner in "[A-Za-z0-9][A-Za-z0-9_-]{0,12}",
            name in "[A-Za-z0-9][A-Za-z0-9._-]{0,12}",
            form in 0..5usize,
            upper in proptest::bool::ANY,
            suffix in proptest::bool::ANY,
            slash in proptest::bool::ANY,
        ) {
            proptest::prop_assume!(!name.ends_with(".git") && !name.ends_with('.'));
            let repo = RepoRef::new(None, &owner, &name).unwrap();
            let host = if upper { "GitHub.COM" } else { "github.com" };
            let path = format!("{owner}/{name}{}{}", if suffix { ".git" } else { "" }, if slash { "/" } else { "" });
            let url = match form {
                0 => format!("https://{host}/{path}"),
                1 => format!("https://x-access-token:t0k3n@{host}/{path}"),
                2 => format!("ssh://git@{host}:22/{path}"),
                3 => format!("git@{host}:{path}"),
                _ => format!("http://{host}/{path}"),
            };
            let parsed = RepoRef::from_remote_url(&url);
            proptest::prop_assert!(parsed.is_some_and(|p| p.same_repository(&repo)), "{url}");
        }
    }
}

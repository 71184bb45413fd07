//! Where every file lives under `state.root` (SPEC §4, reference §3.1).
//!
//! Defaults are derived from the root; the three paths the config may set explicitly
//! (`routing.registryDir`, `eventLog.path`, `webhooks.ghWebhook.pidfile`) are used
//! verbatim. Nothing here expands `~` or resolves relative paths: a relative root is
//! relative to the process's working directory, as in the reference (trap 6). Every
//! reader and writer asks this type for its path, so no two components disagree (trap 4).

use std::path::{Path, PathBuf};

use loop_core::WorkItemRef;
use loop_core::config::Config;

/// Every path under one state root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateLayout {
    root: PathBuf,
    registry_dir: PathBuf,
    event_log: PathBuf,
    gh_webhook_pidfile: PathBuf,
    /// The directory the pre-issue-106 `.the-loop/poll-state.json` is relative to.
    legacy_working_dir: Option<PathBuf>,
}

impl StateLayout {
    /// The layout `config` names (`state.root` and the three explicit paths), with the
    /// pre-issue-106 poll state looked for under `working_dir`: the one place a config
    /// becomes paths, for every verb and the service alike.
    pub fn for_config(config: &Config, working_dir: Option<PathBuf>) -> Self {
        Self::new(config.state.root.clone())
            .with_registry_dir(config.routing.registry_dir.clone())
            .with_event_log(config.event_log.path.clone())
            .with_gh_webhook_pidfile(config.webhooks.gh_webhook.pidfile.clone())
            .with_legacy_working_dir(working_dir)
    }

    /// The layout with every path derived from `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        Self {
            registry_dir: root.join("local"),
            event_log: root.join("logs").join("events.jsonl"),
            gh_webhook_pidfile: root.join("gh-webhook.pid"),
            legacy_working_dir: None,
            root,
        }
    }

    /// Uses `dir` verbatim for session records (`routing.registryDir`) when set.
    pub fn with_registry_dir(mut self, dir: Option<PathBuf>) -> Self {
        if let Some(dir) = dir {
            self.registry_dir = dir;
        }
        self
    }

    /// Uses `path` verbatim for the event log (`eventLog.path`) when set.
    pub fn with_event_log(mut self, path: Option<PathBuf>) -> Self {
        if let Some(path) = path {
            self.event_log = path;
        }
        self
    }

    /// Uses `path` verbatim for the receiver's pidfile (`webhooks.ghWebhook.pidfile`).
    pub fn with_gh_webhook_pidfile(mut self, path: Option<PathBuf>) -> Self {
        if let Some(path) = path {
            self.gh_webhook_pidfile = path;
        }
        self
    }

    /// Reads the pre-issue-106 poll ledger `<dir>/.the-loop/poll-state.json` forward
    /// (`dir` is the process's working directory in the reference).
    pub fn with_legacy_working_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.legacy_working_dir = dir;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `portable/`: one record per work item, meant to be tracked in git.
    pub fn portable_dir(&self) -> PathBuf {
        self.root.join("portable")
    }

    /// `portable/<slug>.json`.
    pub fn portable_record(&self, item: &WorkItemRef) -> PathBuf {
        self.portable_dir().join(format!("{}.json", item.slug()))
    }

    /// `portable/index.json`: derived from the records, never hand-maintained.
    pub fn portable_index(&self) -> PathBuf {
        self.portable_dir().join("index.json")
    }

    /// `local/`: this machine's files, never tracked.
    pub fn local_dir(&self) -> PathBuf {
        self.root.join("local")
    }

    /// Where session records live: `local/` unless `routing.registryDir` says otherwise.
    pub fn registry_dir(&self) -> &Path {
        &self.registry_dir
    }

    /// `<registry dir>/<slug>.json`.
    pub fn local_record(&self, item: &WorkItemRef) -> PathBuf {
        self.registry_dir.join(format!("{}.json", item.slug()))
    }

    /// `local/poll-clocks.json` (seed 001).
    pub fn poll_clocks(&self) -> PathBuf {
        self.local_dir().join("poll-clocks.json")
    }

    /// `local/poll-cache.json`: what makes the poller's next cycle incremental.
    pub fn poll_cache(&self) -> PathBuf {
        self.local_dir().join("poll-cache.json")
    }

    /// `local/inbox/`: journalled webhook deliveries not yet processed.
    pub fn inbox_dir(&self) -> PathBuf {
        self.local_dir().join("inbox")
    }

    /// `local/agent/`: the agents' hook reports and the answers written for them.
    pub fn agent_dir(&self) -> PathBuf {
        self.local_dir().join("agent")
    }

    /// `local/locks/`: the sidecar lock files guarding read-modify-write of records.
    /// Records are replaced by rename, so a lock can never be taken on the record itself.
    pub fn locks_dir(&self) -> PathBuf {
        self.local_dir().join("locks")
    }

    /// `local/service.pid`.
    pub fn service_pidfile(&self) -> PathBuf {
        self.local_dir().join("service.pid")
    }

    /// `logs/`.
    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// `logs/events.jsonl` unless `eventLog.path` says otherwise.
    pub fn event_log(&self) -> &Path {
        &self.event_log
    }

    /// `logs/<daemon>.out`: a detached daemon's stdout and stderr.
    pub fn daemon_output(&self, daemon: &str) -> PathBuf {
        self.logs_dir().join(format!("{daemon}.out"))
    }

    /// `gh-webhook.pid` unless `webhooks.ghWebhook.pidfile` says otherwise.
    pub fn gh_webhook_pidfile(&self) -> &Path {
        &self.gh_webhook_pidfile
    }

    /// `poll.pid` (not configurable).
    pub fn poll_pidfile(&self) -> PathBuf {
        self.root.join("poll.pid")
    }

    /// `poll-status.json`: the poller's heartbeat.
    pub fn heartbeat(&self) -> PathBuf {
        self.root.join("poll-status.json")
    }

    /// Legacy (pre-issue-128), read forward only: `sessions/control/<slug>.json`.
    pub fn legacy_control(&self, item: &WorkItemRef) -> PathBuf {
        self.root.join("sessions").join("control").join(format!("{}.json", item.slug()))
    }

    /// Legacy (pre-issue-128), read forward only: `sessions/poll-state.json`.
    pub fn legacy_poll_state(&self) -> PathBuf {
        self.root.join("sessions").join("poll-state.json")
    }

    /// Legacy (pre-issue-128), read forward only: `sessions/`, whose `<slug>.json` files
    /// are session records.
    pub fn legacy_sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// `<registry dir>/legacy-sessions-adopted.json`: the legacy session records already
    /// read forward, so one adopted and then reset or closed never comes back.
    pub fn legacy_sessions_adopted(&self) -> PathBuf {
        self.registry_dir.join("legacy-sessions-adopted.json")
    }

    /// Legacy (pre-issue-106), read forward only: `<working dir>/.the-loop/poll-state.json`.
    pub fn legacy_cwd_poll_state(&self) -> Option<PathBuf> {
        let dir = self.legacy_working_dir.as_ref()?;
        Some(dir.join(".the-loop").join("poll-state.json"))
    }
}

/// The slug of a record file name shaped `[A-Za-z0-9._-]+-<digits>.json` (the names this
/// layout gives portable and local records, and legacy session records had), else `None`.
pub(crate) fn record_slug(name: &str) -> Option<&str> {
    let slug = name.strip_suffix(".json")?;
    let (stem, number) = slug.rsplit_once('-')?;
    let stem_ok = !stem.is_empty()
        && stem.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    let number_ok = !number.is_empty() && number.chars().all(|c| c.is_ascii_digit());
    (stem_ok && number_ok).then_some(slug)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_derive_from_the_root_and_overrides_are_verbatim() {
        let item: WorkItemRef = "github:octo/my.app#7".parse().unwrap();
        let layout = StateLayout::new("~/state");
        assert_eq!(layout.root(), Path::new("~/state"), "`~` is not expanded");
        assert_eq!(
            layout.portable_record(&item),
            Path::new("~/state/portable/github-octo-my.app-7.json")
        );
        assert_eq!(
            layout.local_record(&item),
            Path::new("~/state/local/github-octo-my.app-7.json")
        );
        assert_eq!(layout.event_log(), Path::new("~/state/logs/events.jsonl"));
        assert_eq!(layout.gh_webhook_pidfile(), Path::new("~/state/gh-webhook.pid"));
        assert_eq!(layout.poll_clocks(), Path::new("~/state/local/poll-clocks.json"));

        let layout = StateLayout::new("/s")
            .with_registry_dir(Some("rel/reg".into()))
            .with_event_log(Some("/var/log/ev.jsonl".into()))
            .with_gh_webhook_pidfile(Some("x.pid".into()));
        assert_eq!(layout.local_record(&item), Path::new("rel/reg/github-octo-my.app-7.json"));
        assert_eq!(layout.event_log(), Path::new("/var/log/ev.jsonl"));
        assert_eq!(layout.gh_webhook_pidfile(), Path::new("x.pid"));
        assert_eq!(
            layout.poll_clocks(),
            Path::new("/s/local/poll-clocks.json"),
            "clocks stay under the root"
        );
    }

    #[test]
    fn only_record_shaped_names_are_listed() {
        assert_eq!(record_slug("github-octo-my.app-7.json"), Some("github-octo-my.app-7"));
        for name in [
            "service.pid",
            "poll-clocks.json",
            "index.json",
            "x-7.json.corrupt-1",
            "-7.json",
            "a b-7.json",
        ] {
            assert_eq!(record_slug(name), None, "{name}");
        }
    }
}

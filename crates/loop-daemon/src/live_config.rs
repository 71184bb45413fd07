//! The process's one config: its file, re-read when someone asks — the receiver before
//! each delivery (reference §1.8), the service every few seconds — and the config in
//! force, published on a watch channel the poller and the dispatcher follow.
//!
//! One source means one verdict per change: whichever caller first sees the file's bytes
//! change reloads it for everyone and writes the one line that says so —
//! `config.reloaded` (whose `detail` describes what the process hosts: the receiver's
//! warnings, the poller's scopes) or `config.reload_failed`, the previous config staying
//! in force. A failure is also published ([`LiveConfig::rejections`]) for the service to
//! tell its operator.
//!
//! Reading the file is blocking IO: [`LiveConfig::refresh`] belongs on a blocking thread.
//! What is valid is `loop_core::config`'s to say; reading files, [`ConfigSource`]'s.

use std::sync::{Arc, Mutex, PoisonError};

use loop_core::config::{Config, Problem};
use loop_core::log::{Kind, Line};
use loop_store::EventLog;
use tokio::sync::watch;

use crate::config_source::{ConfigSource, Reload};
use crate::poller::scope;
use crate::receiver;

/// What a process hosts: what its `config.reloaded` lines describe.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hosted {
    /// The webhook receiver runs here.
    pub receiver: bool,
    /// It verifies no signatures (`allowUnsigned` with no secret): said on every reload.
    pub unsigned: bool,
    /// The poller runs here.
    pub poller: bool,
}

/// The config file and the config in force. Cheap to clone: clones share one source.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// The file, the fingerprint of its last read and how it last failed; held only
    /// while it is re-read.
    source: Mutex<Watched>,
    /// The config in force; every [`LiveConfig::subscribe`] receiver is the other end.
    current: watch::Sender<Arc<Config>>,
    /// The last change that could not be used, and why (`None` until one).
    rejected: watch::Sender<Option<Arc<str>>>,
    events: EventLog,
    hosted: Hosted,
    /// The file's path (fixed for the process's life).
    path: std::path::PathBuf,
}

impl LiveConfig {
    /// Puts `source`'s config in force; its reloads are logged to `events`, described as
    /// `hosted` says.
    pub fn new(source: ConfigSource, events: EventLog, hosted: Hosted) -> Self {
        let current = watch::Sender::new(Arc::clone(source.current()));
        let path = source.path().to_owned();
        Self {
            shared: Arc::new(Shared {
                source: Mutex::new(Watched { source, failing: None }),
                current,
                rejected: watch::Sender::new(None),
                events,
                hosted,
                path,
            }),
        }
    }

    /// The config in force.
    pub fn current(&self) -> Arc<Config> {
        self.shared.current.borrow().clone()
    }

    /// The config file's path.
    pub fn path(&self) -> &std::path::Path {
        &self.shared.path
    }

    /// Follows the config in force: the receiver sees each change once.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Config>> {
        self.shared.current.subscribe()
    }

    /// Follows the changes that could not be used (their error, once each).
    pub fn rejections(&self) -> watch::Receiver<Option<Arc<str>>> {
        self.shared.rejected.subscribe()
    }

    /// Re-reads the file if its bytes changed since anyone last looked, puts a valid
    /// change in force and logs the verdict once (a file that keeps failing the same way
    /// is reported once too); returns the config in force. Blocking file IO.
    pub fn refresh(&self) -> Arc<Config> {
        let mut guard = self.source();
        let Watched { source, failing } = &mut *guard;
        match source.reload_if_changed() {
            Reload::Unchanged => {}
            Reload::Reloaded { config, warnings } => {
                *failing = None;
                let hosted = self.shared.hosted;
                let warnings = warnings_of(&config, &warnings, hosted);
                if hosted.receiver {
                    // What the receiver would say at start reaches the operator's terminal.
                    for warning in &warnings {
                        tracing::warn!("{warning}");
                    }
                }
                let detail =
                    describe(&source.path().display().to_string(), &config, warnings, hosted);
                self.shared.current.send_replace(config);
                self.shared
                    .events
                    .emit(Line::info(Kind::ConfigReloaded).field("detail", detail.join("; ")));
            }
            Reload::Failed { error, .. } => {
                let error = error.to_string();
                if failing.as_deref() != Some(error.as_str()) {
                    tracing::warn!(error = %error, "the config file changed but cannot be used; keeping the previous config");
                    self.shared.events.emit(
                        Line::warning(Kind::ConfigReloadFailed)
                            .field("path", source.path())
                            .field("error", &error),
                    );
                    self.shared.rejected.send_replace(Some(Arc::from(error.as_str())));
                    *failing = Some(error);
                }
            }
        }
        drop(guard);
        self.current()
    }

    fn source(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.shared.source.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The file as last read, and the error of its last failed reload until one succeeds.
#[derive(Debug)]
struct Watched {
    source: ConfigSource,
    failing: Option<String>,
}

/// What an operator is warned of about a freshly loaded config: the file's own warnings
/// and, for a receiver, a narrowed event filter and unverified signatures.
fn warnings_of(config: &Config, warnings: &[Problem], hosted: Hosted) -> Vec<String> {
    let mut said: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    if hosted.receiver {
        said.extend(receiver::filter_warning(config));
        if hosted.unsigned {
            said.push(receiver::UNSIGNED_WARNING.to_owned());
        }
    }
    said
}

/// A `config.reloaded` line's `detail`: for a receiver (or a process hosting neither
/// ingress), the file and its warnings; for the poller, what it polls.
fn describe(path: &str, config: &Config, warnings: Vec<String>, hosted: Hosted) -> Vec<String> {
    let mut detail = Vec::new();
    if hosted.receiver || !hosted.poller {
        detail.push(format!("reloaded `{path}`"));
        detail.extend(warnings);
    }
    if hosted.poller {
        detail.push(format!(
            "polling: {} scope(s), interval={}s",
            scope::scopes(config).len(),
            config.polling.interval_seconds.max(1)
        ));
    }
    detail
}

#[cfg(test)]
mod tests {
    use super::*;

    fn polled(repositories: &[&str]) -> Config {
        let mut config = Config {
            repositories: repositories.iter().map(|r| r.parse().unwrap()).collect(),
            ..Config::default()
        };
        config.polling.interval_seconds = 1;
        config
    }

    #[test]
    fn a_poller_alone_says_what_it_polls() {
        let hosted = Hosted { poller: true, ..Hosted::default() };
        let config = polled(&["octo/app", "octo/other"]);
        let detail = describe("/c.yaml", &config, warnings_of(&config, &[], hosted), hosted);
        assert_eq!(detail, ["polling: 2 scope(s), interval=1s"]);
    }

    #[test]
    fn a_receiver_and_a_poller_share_one_line() {
        let hosted = Hosted { receiver: true, unsigned: true, poller: true };
        let config = polled(&["octo/app"]);
        let detail = describe("/c.yaml", &config, warnings_of(&config, &[], hosted), hosted);
        assert_eq!(detail.first().map(String::as_str), Some("reloaded `/c.yaml`"));
        assert!(detail.iter().any(|d| d.contains("NOT be verified")), "{detail:?}");
        assert_eq!(detail.last().map(String::as_str), Some("polling: 1 scope(s), interval=1s"));
    }

    #[test]
    fn a_change_is_reloaded_once_whoever_asks_and_followers_see_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cli-config.yaml");
        let log = dir.path().join("events.jsonl");
        std::fs::write(&path, "routing:\n  authorizedUsers: [octocat]\n").unwrap();
        let (source, _) = ConfigSource::open(&path).unwrap();
        let hosted = Hosted { receiver: true, ..Hosted::default() };
        let live = LiveConfig::new(source, EventLog::new(&log, "test"), hosted);
        let mut follower = live.subscribe();
        let other = live.clone();

        std::fs::write(&path, "routing:\n  authorizedUsers: [octocat, mona]\n").unwrap();
        assert_eq!(live.refresh().routing.authorized_users.len(), 2);
        assert_eq!(other.refresh().routing.authorized_users.len(), 2, "already in force");
        assert!(follower.has_changed().unwrap());
        assert_eq!(follower.borrow_and_update().routing.authorized_users.len(), 2);

        std::fs::write(&path, "routing:\n  enabled: \"yes\"\n").unwrap();
        let mut rejections = live.rejections();
        assert_eq!(other.refresh().routing.authorized_users.len(), 2, "the previous one stays");
        assert_eq!(live.refresh().routing.authorized_users.len(), 2);
        assert!(rejections.has_changed().unwrap());
        assert!(rejections.borrow_and_update().as_deref().is_some_and(|e| e.contains("invalid")));

        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text.matches("\"config.reloaded\"").count(), 1, "{text}");
        assert_eq!(text.matches("\"config.reload_failed\"").count(), 1, "{text}");
    }
}

//! The service process as the lifecycle verbs (`start`, `stop`, `status`, `restart`)
//! see it: one process hosting every enabled ingress, each ingress holding its own
//! pidfile lock (reference §3.7). Liveness and pids come from those locks only — never
//! from a heartbeat or from a pid written in a file nobody holds.
//!
//! This module only reads locks and config; it never signals or spawns (the verbs do).

use std::path::PathBuf;

use anyhow::Context as _;
use loop_core::config::Config;
use loop_store::{StateLayout, lock_holder};

use crate::env_vars;

/// One ingress the service can host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ingress {
    /// The webhook receiver (`webhooks.ghWebhook`).
    Receiver,
    /// The poller (`polling`).
    Poller,
}

impl Ingress {
    /// Start order; stop walks it backwards.
    pub const ALL: [Self; 2] = [Self::Receiver, Self::Poller];

    /// The name rows and JSON use (the reference's service names).
    pub fn name(self) -> &'static str {
        match self {
            Self::Receiver => "gh-webhook",
            Self::Poller => "poller",
        }
    }

    /// The config key that turns it on.
    pub fn enabled_key(self) -> &'static str {
        match self {
            Self::Receiver => "webhooks.ghWebhook.enabled",
            Self::Poller => "polling.enabled",
        }
    }

    pub fn enabled(self, config: &Config) -> bool {
        match self {
            Self::Receiver => config.webhooks.gh_webhook.enabled,
            Self::Poller => config.polling.enabled,
        }
    }

    /// Its single-instance lock.
    pub fn pidfile(self, layout: &StateLayout) -> PathBuf {
        match self {
            Self::Receiver => layout.gh_webhook_pidfile().to_owned(),
            Self::Poller => layout.poll_pidfile(),
        }
    }

    /// Why an enabled ingress cannot run with this config, detected before anything is
    /// spawned. `secret_set` says whether the receiver's secret variable has a value in
    /// the environment the service would get.
    pub fn misconfiguration(self, config: &Config, secret_set: bool) -> Option<String> {
        match self {
            Self::Receiver => {
                let gh = &config.webhooks.gh_webhook;
                (!secret_set && !gh.allow_unsigned).then(|| {
                    format!(
                        "`{}` is unset and `webhooks.ghWebhook.allowUnsigned` is off",
                        gh.secret_env
                    )
                })
            }
            Self::Poller => loop_daemon::poller::scope::scopes(config).is_empty().then(|| {
                "there is nothing to poll: list repositories under `repositories` (or `polling.sources`)"
                    .to_owned()
            }),
        }
    }
}

/// Whether the receiver's secret variable has a value in this process's environment.
pub fn secret_set(config: &Config) -> bool {
    std::env::var_os(&config.webhooks.gh_webhook.secret_env).is_some_and(|v| !v.is_empty())
}

/// What the lock of one ingress says right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Liveness {
    pub ingress: Ingress,
    pub pidfile: PathBuf,
    /// `Some` while a process holds the lock; the pid inside is `None` only in the
    /// instant between the holder locking the file and writing its pid.
    pub holder: Option<Option<u32>>,
}

impl Liveness {
    pub fn running(&self) -> bool {
        self.holder.is_some()
    }

    /// The pid the lock proves alive.
    pub fn pid(&self) -> Option<u32> {
        self.holder.flatten()
    }
}

/// Asks `ingress`'s lock who holds it (never creates or removes the pidfile).
pub fn liveness(ingress: Ingress, layout: &StateLayout) -> anyhow::Result<Liveness> {
    let pidfile = ingress.pidfile(layout);
    let holder = lock_holder(&pidfile)
        .with_context(|| format!("cannot tell whether the {} is running", ingress.name()))?
        .map(|holder| holder.pid);
    Ok(Liveness { ingress, pidfile, holder })
}

/// The facts about this machine a dispatching process needs (home, Claude's config dir,
/// the temp dir for private prompt files).
pub fn host() -> loop_daemon::service::Host {
    loop_daemon::service::Host {
        home: std::env::var_os(env_vars::HOME).map(PathBuf::from).unwrap_or_default(),
        claude_config_dir: std::env::var(env_vars::CLAUDE_CONFIG_DIR).ok(),
        scratch_dir: std::env::temp_dir(),
    }
}

/// The log a detached service appends its output to.
pub fn output_log(layout: &StateLayout) -> PathBuf {
    layout.daemon_output("service")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_enabled_poller_without_sources_is_misconfigured_and_names_the_key() {
        let config = Config::default();
        let reason = Ingress::Poller.misconfiguration(&config, true).unwrap();
        assert!(reason.contains("repositories"), "{reason}");
    }

    #[test]
    fn the_receiver_is_misconfigured_only_without_a_secret_and_without_allow_unsigned() {
        let mut config = Config::default();
        assert!(Ingress::Receiver.misconfiguration(&config, true).is_none());
        let reason = Ingress::Receiver.misconfiguration(&config, false).unwrap();
        assert!(reason.contains("THE_LOOP_GH_WEBHOOK_SECRET"), "{reason}");
        config.webhooks.gh_webhook.allow_unsigned = true;
        assert!(Ingress::Receiver.misconfiguration(&config, false).is_none());
    }

    #[test]
    fn liveness_of_a_missing_pidfile_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let layout = StateLayout::new(dir.path());
        let live = liveness(Ingress::Poller, &layout).unwrap();
        assert!(!live.running());
        assert_eq!(live.pid(), None);
        assert!(!live.pidfile.exists());
    }
}

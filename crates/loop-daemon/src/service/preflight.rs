//! What the service checks before it starts anything, and what the lifecycle verbs read
//! about a running one.
//!
//! [`preflight`] is the one list of reasons an enabled ingress cannot run with a config
//! and an environment — the receiver's secret and route, the poller's scopes and GitHub
//! clients — asked by `status` (a row's `misconfigured`), by a detached `start` before it
//! spawns anything, and by [`Service::from_config`](super::Service::from_config) itself
//! (`start --foreground`, `poll --once`, the demo). [`liveness`] asks an ingress's
//! pidfile lock whether it runs and as which pid (reference §3.7): liveness comes from
//! the locks only, never from a heartbeat or a pid nobody holds.
//!
//! Pure apart from the locks it reads and the GitHub clients it builds to see whether
//! they can be; it signals and spawns nothing.

use loop_core::Hint as _;
use std::path::PathBuf;

use loop_core::config::Config;
use loop_github::GithubError;
use loop_store::{StateLayout, StoreError, lock_holder};

use super::Environment;
use crate::api::{self, ApiRefusal};
use crate::poller::{GithubClients, scope};
use crate::receiver::{self, ReceiverError};

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

    /// Why it cannot run with `config` in `env`, enabled or not.
    pub fn misconfigurations(self, config: &Config, env: &Environment) -> Vec<Misconfiguration> {
        let mut found = Vec::new();
        match self {
            Self::Receiver => found.extend(
                receiver::misconfigurations(config, env.secret.as_ref())
                    .into_iter()
                    .map(Misconfiguration::Receiver),
            ),
            Self::Poller => {
                if scope::scopes(config).is_empty() {
                    found.push(Misconfiguration::NothingToPoll);
                } else if env.stand_ins.is_none()
                    && let Err(source) = GithubClients::for_config(config)
                {
                    found.push(Misconfiguration::Github { error: source });
                }
            }
        }
        found
    }
}

/// Why the service cannot start with this config in this environment.
#[derive(Debug, thiserror::Error)]
pub enum Misconfiguration {
    #[error("nothing to start: no ingress is enabled")]
    NothingEnabled,

    /// The secret is unset while unsigned deliveries are refused, or the route cannot be
    /// served.
    #[error(transparent)]
    Receiver(ReceiverError),

    #[error("nothing to poll: no repository is configured")]
    NothingToPoll,

    #[error("the poller cannot reach GitHub: {error}")]
    Github { error: GithubError },

    #[error("nothing would be acted on: `routing.enabled` is false")]
    RoutingDisabled,

    /// The control plane would be reachable from other machines without a token.
    #[error(transparent)]
    Api(ApiRefusal),
}

impl Misconfiguration {
    /// The ingress it stops (`None`: the service as a whole).
    pub fn ingress(&self) -> Option<Ingress> {
        match self {
            Self::Receiver(_) => Some(Ingress::Receiver),
            Self::NothingToPoll | Self::Github { .. } => Some(Ingress::Poller),
            Self::NothingEnabled | Self::RoutingDisabled | Self::Api(_) => None,
        }
    }

    /// What to change, when there is a change to name; the caller says in which file.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::NothingEnabled => Some(
                "set `webhooks.ghWebhook.enabled: true` (webhooks) or `polling.enabled: true` (polling)"
                    .to_owned(),
            ),
            Self::Receiver(error) => error.hint(),
            Self::NothingToPoll => Some(
                "list the repositories to poll under `repositories` (or `polling.sources`)"
                    .to_owned(),
            ),
            Self::RoutingDisabled => Some("set `routing.enabled: true`".to_owned()),
            Self::Api(refusal) => refusal.hint(),
            Self::Github { .. } => None,
        }
    }
}

/// Every reason the service the config describes cannot start in `env`: none of its
/// ingresses is enabled, an enabled one is misconfigured, or the control plane would be
/// exposed without a token.
pub fn preflight(config: &Config, env: &Environment) -> Vec<Misconfiguration> {
    let enabled: Vec<Ingress> =
        Ingress::ALL.into_iter().filter(|ingress| ingress.enabled(config)).collect();
    if enabled.is_empty() {
        return vec![Misconfiguration::NothingEnabled];
    }
    let api = api::misconfigurations(&config.service, env.api_token.as_ref());
    enabled
        .into_iter()
        .flat_map(|ingress| ingress.misconfigurations(config, env))
        .chain(api.into_iter().map(Misconfiguration::Api))
        .collect()
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
pub fn liveness(ingress: Ingress, layout: &StateLayout) -> Result<Liveness, StoreError> {
    let pidfile = ingress.pidfile(layout);
    let holder = lock_holder(&pidfile)?.map(|holder| holder.pid);
    Ok(Liveness { ingress, pidfile, holder })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receiver::Secret;

    fn env(secret: Option<&str>) -> Environment {
        Environment { secret: Secret::from_value(secret), ..Environment::default() }
    }

    #[test]
    fn nothing_enabled_is_the_one_reason_when_no_ingress_is_on() {
        let found = preflight(&Config::default(), &env(None));
        assert!(matches!(found[..], [Misconfiguration::NothingEnabled]), "{found:?}");
    }

    #[test]
    fn an_enabled_poller_without_sources_is_misconfigured_and_names_the_key() {
        let mut config = Config::default();
        config.polling.enabled = true;
        let found = preflight(&config, &env(Some("s")));
        assert!(matches!(found[..], [Misconfiguration::NothingToPoll]), "{found:?}");
        assert_eq!(found[0].ingress(), Some(Ingress::Poller));
        assert!(found[0].hint().unwrap().contains("repositories"));
    }

    #[test]
    fn the_receiver_is_misconfigured_only_without_a_secret_and_without_allow_unsigned() {
        let mut config = Config::default();
        config.webhooks.gh_webhook.enabled = true;
        assert!(preflight(&config, &env(Some("s"))).is_empty());
        let found = preflight(&config, &env(None));
        assert!(found[0].to_string().contains("THE_LOOP_GH_WEBHOOK_SECRET"), "{found:?}");
        config.webhooks.gh_webhook.allow_unsigned = true;
        assert!(preflight(&config, &env(None)).is_empty());
        config.webhooks.gh_webhook.path = "/health".to_owned();
        let found = preflight(&config, &env(None));
        assert!(
            matches!(found[..], [Misconfiguration::Receiver(ReceiverError::Path { .. })]),
            "{found:?}"
        );
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

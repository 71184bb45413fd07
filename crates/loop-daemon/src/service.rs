//! The parts of a process that dispatches — the service (every enabled ingress over one
//! dispatcher) and the CLI's `sessions` verbs — built from the validated config, so both
//! spawn, deliver and close sessions the same way.
//!
//! [`dispatcher_parts`] turns the config and the host's facts (home directory,
//! `CLAUDE_CONFIG_DIR`) into [`DispatcherParts`]: the GitHub client it is given
//! ([`github_client`] builds the work items' host's from `integrations.github`), the tmux runner
//! (`routing.tmux`, the server the process inherited; the webhook secret's variable is
//! withheld from every tmux server it starts), the configured harness and Claude's files
//! for trust pre-seeding (`routing.harnessTrust`).
//!
//! It reads no environment itself: the caller passes the host's facts in.
//!
//! `hosting` runs the parts: [`Service::run`] hosts the ingresses over one dispatcher
//! until a stop, for `start --foreground` and the demo alike.

mod hosting;

pub use hosting::{Event, Service, ServiceError, Stopped};

use std::path::PathBuf;
use std::sync::Arc;

use loop_core::config::Config;
use loop_github::{GithubClient, GithubError};
use loop_sessions::harness::{Declared, configured};
use loop_sessions::trust::ClaudeFiles;
use loop_sessions::{Tmux, TmuxSettings, TmuxSocket};
use loop_store::StateStore;

use crate::dispatcher::DispatcherParts;

/// What the process knows about the machine it runs on.
#[derive(Debug, Clone, Default)]
pub struct Host {
    /// `$HOME`, where Claude Code keeps its files.
    pub home: PathBuf,
    /// `CLAUDE_CONFIG_DIR`, when set.
    pub claude_config_dir: Option<String>,
    /// Where private prompt files are written (the system temp dir).
    pub scratch_dir: PathBuf,
}

/// The dispatcher's parts for `config` over `store`, with `github` as the client of the
/// work items' host (`None`: no existence checks, reactions or announcements).
pub fn dispatcher_parts(
    config: Arc<Config>,
    store: StateStore,
    github: Option<GithubClient>,
    host: &Host,
) -> DispatcherParts {
    let mut tmux = TmuxSettings::new(TmuxSocket::Inherited, host.scratch_dir.clone());
    tmux.remain_on_exit = config.routing.tmux.remain_on_exit;
    tmux.withheld_env = vec![config.webhooks.gh_webhook.secret_env.clone()];
    let located = ClaudeFiles::locate(&host.home, host.claude_config_dir.as_deref());
    let harness = configured(
        config.routing.default_harness,
        &config.routing.harness_args,
        Declared::default(),
        &located.config_dir,
    );
    let claude_files = config.routing.harness_trust.enabled.then_some(located);
    DispatcherParts {
        config,
        store,
        github,
        tmux: Arc::new(Tmux::new(tmux)),
        harness: Arc::from(harness),
        claude_files,
    }
}

/// The GitHub client of the work items' host (see [`work_item_host`]), as
/// `integrations.github` configures it.
pub fn github_client(config: &Config) -> Result<GithubClient, GithubError> {
    GithubClient::from_config(&work_item_host(config), &config.integrations.github)
}

/// The GitHub host work items live on: the first declared repository's, else
/// `routing.workspace.defaultHost` (`github.com`).
fn work_item_host(config: &Config) -> String {
    config
        .repositories
        .first()
        .map(|repo| repo.host().to_owned())
        .unwrap_or_else(|| config.routing.workspace.default_host.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_the_first_declared_repositorys_else_the_default_host() {
        let mut config = Config::default();
        assert_eq!(work_item_host(&config), "github.com");
        config.repositories = vec!["ghe.corp.example/octo/app".parse().unwrap()];
        assert_eq!(work_item_host(&config), "ghe.corp.example");
    }
}

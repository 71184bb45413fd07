//! The state root as this invocation's config names it.
//!
//! The one place the config's paths (`state.root`, `routing.registryDir`,
//! `eventLog.path`, `webhooks.ghWebhook.pidfile`) become a [`StateLayout`], so every verb
//! and daemon agrees on every path (reference trap 4). Explicit paths are used verbatim;
//! relative ones are relative to the working directory; `~` is not expanded in
//! `state.root` (reference trap 6).

use loop_core::config::Config;
use loop_store::StateLayout;

/// Every path under the configured state root.
pub fn layout(config: &Config) -> StateLayout {
    StateLayout::new(config.state.root.clone())
        .with_registry_dir(config.routing.registry_dir.clone())
        .with_event_log(config.event_log.path.clone())
        .with_gh_webhook_pidfile(config.webhooks.gh_webhook.pidfile.clone())
        .with_legacy_working_dir(std::env::current_dir().ok())
}

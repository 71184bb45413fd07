//! What this process hands the service (loop-daemon's `service`) from its environment,
//! and where a detached service's output goes.
//!
//! The service reads no environment variable: this module reads the ones it needs —
//! `$HOME`, `CLAUDE_CONFIG_DIR`, the webhook secret's and the control plane's token's
//! variables the config names, the temp
//! and working directories — into a [`loop_daemon::service::Environment`]. Which
//! ingresses run, their locks and their preflight are loop-daemon's.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use loop_core::config::Config;
use loop_daemon::api::ApiToken;
use loop_daemon::receiver::Secret;
use loop_daemon::service::{Environment, Ingress, Liveness, Misconfiguration};
use loop_store::StateLayout;

use crate::env_vars;
use crate::printer::Printer;

/// The service's environment in this process: the machine's facts, and the webhook
/// secret from the variable `webhooks.ghWebhook.secretEnv` names.
pub fn environment(config: &Config) -> Environment {
    Environment {
        home: std::env::var_os(env_vars::HOME).map(PathBuf::from).unwrap_or_default(),
        claude_config_dir: std::env::var(env_vars::CLAUDE_CONFIG_DIR).ok(),
        scratch_dir: std::env::temp_dir(),
        working_dir: std::env::current_dir().ok(),
        secret: Secret::from_value(
            std::env::var(&config.webhooks.gh_webhook.secret_env).ok().as_deref(),
        ),
        api_token: ApiToken::from_value(std::env::var(&config.service.token_env).ok().as_deref()),
        ..Environment::default()
    }
}

/// What `ingress`'s lock says right now ([`loop_daemon::service::liveness`]).
pub fn liveness(ingress: Ingress, layout: &StateLayout) -> anyhow::Result<Liveness> {
    loop_daemon::service::liveness(ingress, layout)
        .with_context(|| format!("cannot tell whether the {} is running", ingress.name()))
}

/// The log a detached service appends its output to.
pub fn output_log(layout: &StateLayout) -> PathBuf {
    layout.daemon_output("service")
}

/// Says why the service cannot start: each problem, then its fix in `config_path`.
pub fn refuse(problems: &[Misconfiguration], config_path: &Path, printer: Printer) {
    for problem in problems {
        match problem.ingress() {
            Some(ingress) => {
                printer.error(format!("the {} cannot start: {problem}", ingress.name()))
            }
            None => printer.error(problem),
        }
        if let Some(hint) = problem.hint() {
            printer.hint(format!("{hint} in `{}`", config_path.display()));
        }
    }
}

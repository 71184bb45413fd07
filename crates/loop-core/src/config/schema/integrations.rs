//! `integrations`: the GitHub API and CLI the-loop talks to.

use saphyr::MarkedYamlOwned as Node;
use serde::Serialize;

use super::strings;
use crate::config::read::{Block, Diagnostics, Section, bad_value, string};

/// `integrations`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntegrationsConfig {
    pub github: GithubIntegration,
}

impl Section for IntegrationsConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { github: b.section("github") }
    }
}

/// `integrations.github`: always reached over HTTPS, so the reference's `transport` is
/// not implemented.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GithubIntegration {
    pub cli: CliBinary,
    pub api: GithubApi,
}

impl Section for GithubIntegration {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { cli: b.section("cli"), api: b.section("api") }
    }
}

/// `integrations.github.cli`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CliBinary {
    pub binary: String,
}

impl Section for CliBinary {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { binary: b.field("binary", || "gh".to_owned()) }
    }
}

/// `integrations.github.api`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GithubApi {
    /// Env var *names* tried in order for a token (then `gh auth token`).
    pub token_env: Vec<String>,
    /// API base; `None`: derived per host (`https://api.github.com`, GHE `/api/v3`).
    pub base_url: Option<String>,
}

impl Section for GithubApi {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            token_env: b.field("tokenEnv", || strings(&["GH_TOKEN", "GITHUB_TOKEN"])),
            base_url: b.field_by("baseUrl", || None, read_base_url),
        }
    }
}

/// An `http(s)://` URL, `""` meaning unset.
fn read_base_url(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Option<String>> {
    let text = string(node, path, diags)?;
    if text.is_empty() {
        return Some(None);
    }
    if text.starts_with("https://") || text.starts_with("http://") {
        Some(Some(text.trim_end_matches('/').to_owned()))
    } else {
        bad_value(node, path, diags, format!("expected an http:// or https:// URL, got {text:?}"));
        None
    }
}

default_from_nothing!(IntegrationsConfig, GithubApi);

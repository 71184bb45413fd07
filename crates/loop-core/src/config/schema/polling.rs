//! `polling`: the poller's sources, interval and what it monitors.

use saphyr::MarkedYamlOwned as Node;
use serde::Serialize;

use super::display_seq;
use crate::RepoRef;
use crate::config::read::{
    Block, Diagnostics, Section, Value, config_enum, integer_at_least, read_section,
};

/// `polling`: the poll ingress.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PollingConfig {
    /// Whether `the-loop start` brings the poller up (never inferred from `sources`).
    pub enabled: bool,
    pub interval_seconds: u64,
    /// Delivery attempts per comment/spawn before giving up.
    pub max_retries: u32,
    pub sources: Vec<PollSource>,
}

impl Section for PollingConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || false),
            interval_seconds: b.field_by("intervalSeconds", || 60, integer_at_least(1)),
            max_retries: b.field_by("maxRetries", || 3, integer_at_least(1)),
            sources: b.field("sources", Vec::new),
        }
    }
}

config_enum! {
    /// Who answers a poll source.
    PollProvider (default Github) {
        Github = "github",
    }
}

/// One `polling.sources[]` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PollSource {
    pub provider: PollProvider,
    /// Label gating what is polled; empty: `routing.autoExecuteLabel`.
    pub label: String,
    /// Repositories of this source (the seed moved the bound to top-level `repositories`).
    #[serde(serialize_with = "display_seq")]
    pub repos: Vec<RepoRef>,
    pub monitor: PollMonitor,
    /// The reference's per-source `gh` binary (kept for compatibility; unused here).
    pub gh_binary: String,
}

impl Section for PollSource {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            provider: b.required("provider", PollProvider::default),
            label: b.field("label", String::new),
            repos: b.field("repos", Vec::new),
            monitor: b.section("monitor"),
            gh_binary: b.field("ghBinary", || "gh".to_owned()),
        }
    }
}

/// Lets a source sit in `polling.sources`.
impl Value for PollSource {
    fn read(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Self> {
        Some(read_section(Some(node), path.to_owned(), diags))
    }
}

/// `polling.sources[].monitor`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PollMonitor {
    pub issues: bool,
    pub pull_requests: bool,
}

impl Section for PollMonitor {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { issues: b.field("issues", || true), pull_requests: b.field("pullRequests", || true) }
    }
}

default_from_nothing!(PollingConfig);

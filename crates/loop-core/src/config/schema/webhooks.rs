//! `webhooks`: the GitHub webhook receiver (`webhooks.ghWebhook`): where it listens,
//! which events it takes, its secret and the journal's ceilings.

use std::path::PathBuf;

use serde::Serialize;

use super::strings;
use crate::config::read::{Block, Section, integer_at_least, optional_path};

/// `webhooks`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhooksConfig {
    pub gh_webhook: GhWebhookConfig,
}

impl Section for WebhooksConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { gh_webhook: b.section("ghWebhook") }
    }
}

/// The event names the receiver accepts when `events` is omitted or empty.
pub const DEFAULT_WEBHOOK_EVENTS: &[&str] = &[
    "issues",
    "issue_comment",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "workflow_run",
    "check_run",
    "check_suite",
    "status",
];

/// The default `webhooks.ghWebhook.inboxMaxDeliveries`: far beyond any burst GitHub sends
/// one machine, and about a second of processing on a busy two-core machine, so it also
/// paces a sustained flood to what processing keeps up with: the excess is answered 503,
/// not left to wait behind a backlog that takes longer to drain than it took to arrive
/// (docs/receiver.md, "A bounded backlog").
pub const DEFAULT_INBOX_MAX_DELIVERIES: u64 = 1_000;

/// The default `webhooks.ghWebhook.inboxMaxBytes` (256 MiB: ten payloads at GitHub's cap).
pub const DEFAULT_INBOX_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// `webhooks.ghWebhook`: the receiver's listener.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GhWebhookConfig {
    /// Whether `the-loop start` brings the receiver up.
    pub enabled: bool,
    pub host: String,
    pub port: u16,
    /// The POST path.
    pub path: String,
    /// The *name* of the env var holding the HMAC secret.
    pub secret_env: String,
    /// Receiver pidfile and single-instance lock; `None`: `<state.root>/gh-webhook.pid`.
    pub pidfile: Option<PathBuf>,
    /// Event filter; an empty list in the file means the default set.
    pub events: Vec<String>,
    /// Accept deliveries without a signature when the secret is unset (loudly warned).
    pub allow_unsigned: bool,
    /// The inbox journal's ceiling in deliveries not yet processed: above it the receiver
    /// answers 503 with `Retry-After` until processing catches up.
    pub inbox_max_deliveries: u64,
    /// The inbox journal's ceiling in bytes on disk, with the same effect.
    pub inbox_max_bytes: u64,
}

impl Section for GhWebhookConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        let default_events = || strings(DEFAULT_WEBHOOK_EVENTS);
        let mut events: Vec<String> = b.field("events", default_events);
        if events.is_empty() {
            events = default_events();
        }
        Self {
            enabled: b.field("enabled", || false),
            host: b.field("host", || "127.0.0.1".to_owned()),
            port: b.field("port", || 8787),
            path: b.field("path", || "/gh-webhook".to_owned()),
            secret_env: b.field("secretEnv", || "THE_LOOP_GH_WEBHOOK_SECRET".to_owned()),
            pidfile: b.field_by("pidfile", || None, optional_path),
            events,
            allow_unsigned: b.field("allowUnsigned", || false),
            inbox_max_deliveries: b.field_by(
                "inboxMaxDeliveries",
                || DEFAULT_INBOX_MAX_DELIVERIES,
                integer_at_least(1),
            ),
            inbox_max_bytes: b.field_by(
                "inboxMaxBytes",
                || DEFAULT_INBOX_MAX_BYTES,
                integer_at_least(1),
            ),
        }
    }
}

default_from_nothing!(WebhooksConfig, GhWebhookConfig);

//! The typed configuration: every key of `cli-config.yaml` this version acts on, its
//! type and its default.
//!
//! Each struct's [`Section`] impl is the one place that names its keys and their
//! defaults; `Default` is "read from nothing", so the two can never disagree. Field docs
//! say what a key means; `docs/configuration.md` is the operator's version of this file.
//! Keys of the reference schema not implemented yet have no type here: they are the list
//! in `inert.rs`, accepted and warned about by the reader, holding no value.
//!
//! Paths are kept as written (relative ones are relative to the process cwd, `~` is not
//! expanded in `state.root`); an `Option<PathBuf>` override is `None` when unset, and the
//! store derives it from `state.root`.

use std::fmt::Display;
use std::path::PathBuf;

use saphyr::MarkedYamlOwned as Node;
use serde::{Serialize, Serializer};

use super::read::{
    Block, Diagnostics, Section, Value, bad_value, config_enum, integer_at_least, join, line_of,
    number_at_least, one_of, optional_path, read_section, string, wrong_type,
};
use crate::{Login, RepoRef, WorkItemRef};

/// Declares `Default` as "every key absent".
macro_rules! default_from_nothing {
    ($($ty:ty),+) => {$(
        impl Default for $ty {
            fn default() -> Self {
                read_section(None, String::new(), &mut Diagnostics::default())
            }
        }
    )+};
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn display_seq<T: Display, S: Serializer>(items: &[T], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(items.iter().map(ToString::to_string))
}

// ---------------------------------------------------------------------------------------
// Top level

/// The whole `cli-config.yaml`, defaults filled in.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    /// The schema version the file declares (`None` when it declares none).
    pub version: Option<String>,
    /// The repositories this instance works with; bounds both ingresses. Empty: unbounded.
    /// De-duplicated, `github.com` normalised away.
    #[serde(serialize_with = "display_seq")]
    pub repositories: Vec<RepoRef>,
    pub instance: InstanceConfig,
    pub webhooks: WebhooksConfig,
    pub polling: PollingConfig,
    pub routing: RoutingConfig,
    pub event_log: EventLogConfig,
    pub integrations: IntegrationsConfig,
    pub state: StateConfig,
    pub service: ServiceConfig,
}

impl Section for Config {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            version: b.field_by("version", || None, read_version),
            repositories: b.field_by("repositories", Vec::new, read_repositories),
            instance: b.section("instance"),
            webhooks: b.section("webhooks"),
            polling: b.section("polling"),
            routing: b.section("routing"),
            event_log: b.section("eventLog"),
            integrations: b.section("integrations"),
            state: b.section("state"),
            service: b.section("service"),
        }
    }
}

/// `version` as text; an unquoted `0.5` is a YAML number and is kept as its text.
fn read_version(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Option<String>> {
    match &node.data {
        saphyr::YamlDataOwned::Value(saphyr::ScalarOwned::String(s)) => Some(Some(s.clone())),
        saphyr::YamlDataOwned::Value(saphyr::ScalarOwned::Integer(i)) => Some(Some(i.to_string())),
        saphyr::YamlDataOwned::Value(saphyr::ScalarOwned::FloatingPoint(f)) => {
            Some(Some(f.to_string()))
        }
        _ => {
            wrong_type(node, path, diags, "a version string such as \"0.5.0\"");
            None
        }
    }
}

/// `repositories`: each a valid repository; a repeat is reported at its own line and dropped.
fn read_repositories(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Vec<RepoRef>> {
    let saphyr::YamlDataOwned::Sequence(items) = &node.data else {
        wrong_type(node, path, diags, "a list");
        return None;
    };
    let mut unique: Vec<RepoRef> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{i}]");
        let Some(repo) = RepoRef::read(item, &item_path, diags) else { continue };
        if unique.iter().any(|seen| seen.same_repository(&repo)) {
            diags.warning(
                &item_path,
                line_of(item),
                super::ProblemKind::Advice,
                format!("`{repo}` is listed more than once; the repeat is ignored"),
            );
        } else {
            unique.push(repo);
        }
    }
    Some(unique)
}

// ---------------------------------------------------------------------------------------
// instance

config_enum! {
    /// Which work items an instance takes (seed 002, issue-322).
    InstanceScope (default Open) {
        /// Every item in its repositories (the behaviour without an `instance` block).
        Open = "open",
        /// Only items whose start names it (`the-loop start instance:<name>`).
        Addressed = "addressed",
        /// Nothing new: only `workItems` and items it already manages.
        Locked = "locked",
    }
}

/// `instance`: who this instance is and which work items are its own.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceConfig {
    /// `^[a-z0-9][a-z0-9-]{0,39}$`; `None` is the unnamed instance.
    pub name: Option<String>,
    pub scope: InstanceScope,
    /// Items declared as this instance's own (refs or issue/PR web addresses in the file).
    #[serde(serialize_with = "display_seq")]
    pub work_items: Vec<WorkItemRef>,
}

impl Section for InstanceConfig {
    /// Accepts the SPEC shape `{name, scope: open, workItems}` and the seed's
    /// `{name, scope: {mode, workItems}}`; the two `workItems` lists are joined.
    fn read(b: &mut Block<'_, '_>) -> Self {
        let name = b.field_by("name", || None, read_instance_name);
        let mut scope = InstanceScope::default();
        let mut work_items: Vec<WorkItemRef> = Vec::new();
        if let Some(node) = b.take("scope") {
            let path = join(b.path(), "scope");
            match &node.data {
                saphyr::YamlDataOwned::Mapping(_) => {
                    let nested: ScopeBlock = read_section(Some(node), path, b.diags());
                    scope = nested.mode;
                    work_items = nested.work_items;
                }
                _ => scope = InstanceScope::read(node, &path, b.diags()).unwrap_or_default(),
            }
        }
        work_items.extend(b.field::<Vec<WorkItemRef>>("workItems", Vec::new));
        if scope == InstanceScope::Addressed && name.is_none() {
            let path = join(b.path(), "scope");
            b.diags().error(
                &path,
                None,
                super::ProblemKind::BadValue,
                "scope `addressed` needs `instance.name` (an address names an instance)".to_owned(),
            );
        }
        Self { name, scope, work_items }
    }
}

/// The seed's nested `instance.scope: {mode, workItems}`.
struct ScopeBlock {
    mode: InstanceScope,
    work_items: Vec<WorkItemRef>,
}

impl Section for ScopeBlock {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            mode: b.field("mode", InstanceScope::default),
            work_items: b.field("workItems", Vec::new),
        }
    }
}

fn read_instance_name(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Option<String>> {
    let name = string(node, path, diags)?;
    let mut bytes = name.bytes();
    let valid = name.len() <= 40
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if valid {
        Some(Some(name.to_owned()))
    } else {
        bad_value(
            node,
            path,
            diags,
            format!("expected a name matching [a-z0-9][a-z0-9-]{{0,39}}, got {name:?}"),
        );
        None
    }
}

// ---------------------------------------------------------------------------------------
// webhooks

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

// ---------------------------------------------------------------------------------------
// polling

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

// ---------------------------------------------------------------------------------------
// routing

config_enum! {
    /// Which agent CLI a session runs.
    Harness (default Claude) {
        Claude = "claude",
        Cursor = "cursor",
    }
}

config_enum! {
    /// What to do with an event for a work item that has no live session.
    SpawnPolicy (default Labeled) {
        Never = "never",
        Always = "always",
        /// Spawn when the item carries `autoExecuteLabel` (SPEC §3 default).
        Labeled = "labeled",
    }
}

config_enum! {
    /// Where the agent asks its questions.
    InteractionMode (default WorkItem) {
        WorkItem = "work-item",
        Cli = "cli",
    }
}

/// `routing`: shared by both ingresses and by `the-loop sessions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoutingConfig {
    /// Whether the receiver dispatches at all.
    pub enabled: bool,
    /// Session records; `None`: `<state.root>/local`.
    pub registry_dir: Option<PathBuf>,
    pub default_harness: Harness,
    pub spawn_on_unmatched: SpawnPolicy,
    /// The label that arms an item.
    pub auto_execute_label: String,
    /// Logins whose actions are acted on; empty: nothing human-authored is.
    #[serde(serialize_with = "display_seq")]
    pub authorized_users: Vec<Login>,
    pub spawn_workdir: PathBuf,
    pub max_concurrent_dispatches: u32,
    pub dedup_cache_size: u32,
    pub dispatch_timeout_seconds: u64,
    pub prompt_template: PathBuf,
    pub spawn_prompt_template: PathBuf,
    pub harness_args: HarnessArgsConfig,
    pub harness_choices: HarnessChoicesConfig,
    pub interaction: InteractionConfig,
    pub control: ControlConfig,
    pub tmux: TmuxConfig,
    pub workspace: WorkspaceConfig,
    pub harness_trust: HarnessTrustConfig,
    pub harness_plugins: HarnessPluginsConfig,
    pub reactions: ReactionsConfig,
    pub announce: AnnounceConfig,
    /// How long a review's or a commit's first delivery waits for the rest of its batch
    /// (docs/agent-input.md); `0` pastes every delivery on its own.
    pub batch_window_seconds: f64,
    pub ci: CiConfig,
    pub graph: GraphConfig,
}

impl Section for RoutingConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || false),
            registry_dir: b.field_by("registryDir", || None, optional_path),
            default_harness: b.field("defaultHarness", Harness::default),
            spawn_on_unmatched: b.field("spawnOnUnmatched", SpawnPolicy::default),
            auto_execute_label: b.field("autoExecuteLabel", || "the-loop: auto-execute".to_owned()),
            authorized_users: b.field("authorizedUsers", Vec::new),
            spawn_workdir: b.field("spawnWorkdir", || PathBuf::from(".")),
            max_concurrent_dispatches: b.field_by(
                "maxConcurrentDispatches",
                || 4,
                integer_at_least(1),
            ),
            dedup_cache_size: b.field_by("dedupCacheSize", || 1024, integer_at_least(1)),
            dispatch_timeout_seconds: b.field_by(
                "dispatchTimeoutSeconds",
                || 1800,
                integer_at_least(1),
            ),
            prompt_template: b.field("promptTemplate", || {
                PathBuf::from("skills/the-loop/templates/webhook-event-prompt.md")
            }),
            spawn_prompt_template: b.field("spawnPromptTemplate", || {
                PathBuf::from("skills/the-loop/templates/webhook-autoexecute-prompt.md")
            }),
            harness_args: b.section("harnessArgs"),
            harness_choices: b.section("harnessChoices"),
            interaction: b.section("interaction"),
            control: b.section("control"),
            tmux: b.section("tmux"),
            workspace: b.section("workspace"),
            harness_trust: b.section("harnessTrust"),
            harness_plugins: b.section("harnessPlugins"),
            reactions: b.section("reactions"),
            announce: b.section("announce"),
            batch_window_seconds: b.field_by("batchWindowSeconds", || 2.0, number_at_least(0.0)),
            ci: b.section("ci"),
            graph: b.section("graph"),
        }
    }
}

/// `routing.harnessArgs`: extra arguments per harness, passed verbatim.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HarnessArgsConfig {
    pub claude: Vec<String>,
    pub cursor: Vec<String>,
}

impl Section for HarnessArgsConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { claude: b.field("claude", Vec::new), cursor: b.field("cursor", Vec::new) }
    }
}

/// `routing.harnessChoices`: per harness, the models and efforts a work item may choose
/// (its state file's `model` and `effort`, docs/process-graph.md). A choice outside them
/// is refused and the session launches on the operator's own arguments; nothing is
/// offered by default.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HarnessChoicesConfig {
    pub claude: ClaudeChoices,
    pub cursor: CursorChoices,
}

impl Section for HarnessChoicesConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { claude: b.section("claude"), cursor: b.section("cursor") }
    }
}

impl HarnessChoicesConfig {
    /// What is offered to the harness named `harness` (`claude`, `cursor`); nothing to
    /// any other (a command harness takes no model).
    pub fn offered_to(&self, harness: &str) -> Offer<'_> {
        match harness {
            "claude" => Offer { models: &self.claude.models, efforts: &self.claude.efforts },
            "cursor" => Offer { models: &self.cursor.models, efforts: &[] },
            _ => Offer { models: &[], efforts: &[] },
        }
    }
}

/// `routing.harnessChoices.claude`: passed as `--model <m>` and `--effort <level>`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClaudeChoices {
    pub models: Vec<String>,
    pub efforts: Vec<String>,
}

impl Section for ClaudeChoices {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            models: b.field_by("models", Vec::new, launch_values),
            efforts: b.field_by("efforts", Vec::new, claude_efforts),
        }
    }
}

/// `routing.harnessChoices.cursor`: passed as `--model <m>`; Cursor has no effort setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CursorChoices {
    pub models: Vec<String>,
}

impl Section for CursorChoices {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { models: b.field_by("models", Vec::new, launch_values) }
    }
}

/// The models and efforts offered to one harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer<'a> {
    pub models: &'a [String],
    pub efforts: &'a [String],
}

impl Offer<'_> {
    /// `model` if it is offered.
    pub fn model(&self, model: Option<&str>) -> Option<String> {
        model.filter(|m| self.models.iter().any(|offered| offered == m)).map(str::to_owned)
    }

    /// `effort` if it is offered.
    pub fn effort(&self, effort: Option<&str>) -> Option<String> {
        effort.filter(|e| self.efforts.iter().any(|offered| offered == e)).map(str::to_owned)
    }
}

/// The effort levels Claude Code takes (`claude --effort`); another declared level is
/// passed as written, with a warning.
const CLAUDE_EFFORTS: &[&str] = &["low", "medium", "high", "xhigh", "max"];

/// [`launch_values`], each outside [`CLAUDE_EFFORTS`] warned about at its line.
fn claude_efforts(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Vec<String>> {
    let values = launch_values(node, path, diags)?;
    let saphyr::YamlDataOwned::Sequence(items) = &node.data else { return Some(values) };
    for (i, item) in items.iter().enumerate() {
        let saphyr::YamlDataOwned::Value(saphyr::ScalarOwned::String(text)) = &item.data else {
            continue;
        };
        if values.contains(text) && !CLAUDE_EFFORTS.contains(&text.as_str()) {
            let known = CLAUDE_EFFORTS.join(", ");
            diags.warning(
                &format!("{path}[{i}]"),
                line_of(item),
                super::ProblemKind::Advice,
                format!(
                    "`{text}` is not an effort level Claude Code is known to take ({known}); it is passed as written"
                ),
            );
        }
    }
    Some(values)
}

/// A list of values for a harness flag: each 1–200 characters of letters, digits and
/// `. _ - : / @ + [ ]`, starting with a letter or digit — never read as a flag, never
/// split by a shell. A bad item is reported at its index and left out; a repeat is
/// dropped.
fn launch_values(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Vec<String>> {
    let saphyr::YamlDataOwned::Sequence(items) = &node.data else {
        wrong_type(node, path, diags, "a list of strings");
        return None;
    };
    let mut values: Vec<String> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let item_path = format!("{path}[{i}]");
        let Some(text) = string(item, &item_path, diags) else { continue };
        let mut chars = text.chars();
        let fits = text.len() <= 200
            && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
            && chars.all(|c| c.is_ascii_alphanumeric() || "._-:/@+[]".contains(c));
        if !fits {
            let message = format!(
                "expected a model or effort name (letters, digits and `. _ - : / @ + [ ]`, starting with a letter or digit, at most 200), got {text:?}"
            );
            bad_value(item, &item_path, diags, message);
        } else if !values.iter().any(|seen| seen == text) {
            values.push(text.to_owned());
        }
    }
    Some(values)
}

/// `routing.interaction`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InteractionConfig {
    pub mode: InteractionMode,
}

impl Section for InteractionConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { mode: b.field("mode", InteractionMode::default) }
    }
}

/// `routing.control`: the keyword vocabulary.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControlConfig {
    /// Recognise keywords at all (false: forward everything, no start requirement).
    pub enabled: bool,
    /// The label arms; an authorized `start` is required to spawn.
    pub require_start_command: bool,
    pub keywords: ControlKeywords,
}

impl Section for ControlConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || true),
            require_start_command: b.field("requireStartCommand", || true),
            keywords: b.section("keywords"),
        }
    }
}

/// `routing.control.keywords`: one keyword per command; `""` disables the command.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ControlKeywords {
    pub start: String,
    pub stop: String,
    pub pause: String,
    pub resume: String,
    pub cleanup: String,
    pub execute: String,
    pub contribute: String,
    pub r#do: String,
    pub review: String,
    pub add_collaborator: String,
    pub remove_collaborator: String,
}

impl Section for ControlKeywords {
    fn read(b: &mut Block<'_, '_>) -> Self {
        let mut keyword = |command: &str| b.field(command, || format!("the-loop {command}"));
        Self {
            start: keyword("start"),
            stop: keyword("stop"),
            pause: keyword("pause"),
            resume: keyword("resume"),
            cleanup: keyword("cleanup"),
            execute: keyword("execute"),
            contribute: keyword("contribute"),
            r#do: keyword("do"),
            review: keyword("review"),
            add_collaborator: keyword("add-collaborator"),
            remove_collaborator: keyword("remove-collaborator"),
        }
    }
}

/// How many sessions a work item's pull requests get.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionPerPr {
    Never,
    #[default]
    CrossRepository,
    Always,
}

impl SessionPerPr {
    const TEXTS: &[&str] = &["never", "cross-repository", "always"];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Never => "never",
            Self::CrossRepository => "cross-repository",
            Self::Always => "always",
        }
    }
}

impl Serialize for SessionPerPr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Value for SessionPerPr {
    /// One of the texts, or a boolean (`true`: cross-repository, `false`: never).
    fn read(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Self> {
        match node.data {
            saphyr::YamlDataOwned::Value(saphyr::ScalarOwned::Boolean(true)) => {
                Some(Self::CrossRepository)
            }
            saphyr::YamlDataOwned::Value(saphyr::ScalarOwned::Boolean(false)) => Some(Self::Never),
            _ => one_of(node, path, diags, Self::TEXTS, |text| match text {
                "never" => Some(Self::Never),
                "cross-repository" => Some(Self::CrossRepository),
                "always" => Some(Self::Always),
                _ => None,
            }),
        }
    }
}

/// `routing.tmux`: session lifetime.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TmuxConfig {
    pub keep_session_on_close: bool,
    pub remain_on_exit: bool,
    pub kill_harness_on_close: bool,
    pub harness_kill_grace_seconds: f64,
    pub resume_on_respawn: bool,
    pub resume_probe_seconds: f64,
    pub session_per_pr: SessionPerPr,
}

impl Section for TmuxConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            keep_session_on_close: b.field("keepSessionOnClose", || true),
            remain_on_exit: b.field("remainOnExit", || true),
            kill_harness_on_close: b.field("killHarnessOnClose", || true),
            harness_kill_grace_seconds: b.field_by(
                "harnessKillGraceSeconds",
                || 5.0,
                number_at_least(0.0),
            ),
            resume_on_respawn: b.field("resumeOnRespawn", || true),
            resume_probe_seconds: b.field_by("resumeProbeSeconds", || 2.0, number_at_least(0.0)),
            session_per_pr: b.field("sessionPerPr", SessionPerPr::default),
        }
    }
}

config_enum! {
    /// How a work item's checkout is laid out.
    WorkspaceStrategy (default Worktree) {
        Worktree = "worktree",
        Clone = "clone",
    }
}

config_enum! {
    /// The clone URL scheme.
    CloneProtocol (default Https) {
        Https = "https",
        Ssh = "ssh",
    }
}

/// `routing.workspace`: per-work-item checkouts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceConfig {
    /// Checkout root (`~` expanded where used); `None` (`""` in the file): no checkouts.
    pub root: Option<PathBuf>,
    pub strategy: WorkspaceStrategy,
    pub clone_protocol: CloneProtocol,
    pub default_host: String,
    pub keep_checkout_on_close: bool,
    pub git_binary: String,
    /// Per host, where its repositories are cloned from instead of `https://<host>`
    /// (a mirror, or the simulator's git server).
    pub clone_urls: Vec<CloneUrl>,
}

/// One `routing.workspace.cloneUrls[]` entry: `<base>/<owner>/<repo>.git` for `host`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CloneUrl {
    pub host: String,
    pub base: String,
}

impl Section for CloneUrl {
    fn read(b: &mut Block<'_, '_>) -> Self {
        let host = b.required("host", String::new);
        let base = b.field_by("base", String::new, read_clone_base);
        if base.is_empty() {
            let path = join(b.path(), "base");
            b.diags().error(
                &path,
                None,
                super::read::ProblemKind::MissingKey,
                "required key is missing".to_owned(),
            );
        }
        Self { host, base }
    }
}

impl Value for CloneUrl {
    fn read(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Self> {
        Some(read_section(Some(node), path.to_owned(), diags))
    }
}

/// An `http(s)://` or `file://` URL, without a trailing `/`.
fn read_clone_base(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<String> {
    let text = string(node, path, diags)?;
    if ["http://", "https://", "file://"].iter().any(|p| text.starts_with(p)) {
        Some(text.trim_end_matches('/').to_owned())
    } else {
        bad_value(
            node,
            path,
            diags,
            format!("expected an http://, https:// or file:// URL, got {text:?}"),
        );
        None
    }
}

/// `routing.graph`: driving the process graph (docs/process-graph.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphConfig {
    pub enabled: bool,
    /// Where the specs are in every checkout, relative to it.
    pub spec_dir: PathBuf,
}

impl Section for GraphConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || true),
            // `""` (the reference's "no override") is the convention too.
            spec_dir: b
                .field_by("specDir", || None, optional_path)
                .unwrap_or_else(|| PathBuf::from("docs/specs")),
        }
    }
}

impl Section for WorkspaceConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            root: b.field_by("root", || None, optional_path),
            strategy: b.field("strategy", WorkspaceStrategy::default),
            clone_protocol: b.field("cloneProtocol", CloneProtocol::default),
            default_host: b.field("defaultHost", || "github.com".to_owned()),
            keep_checkout_on_close: b.field("keepCheckoutOnClose", || false),
            git_binary: b.field("gitBinary", || "git".to_owned()),
            clone_urls: b.field("cloneUrls", Vec::new),
        }
    }
}

config_enum! {
    /// How far pre-seeded harness trust reaches.
    TrustScope (default WorkspaceRoot) {
        WorkspaceRoot = "workspace-root",
        Directory = "directory",
    }
}

config_enum! {
    /// When to record the bypass-permissions disclaimer.
    BypassAcceptance (default Auto) {
        /// Only when the harness args ask for bypass mode.
        Auto = "auto",
        Always = "always",
        Never = "never",
    }
}

/// `routing.harnessTrust`: pre-seeding the harness's trust dialogs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HarnessTrustConfig {
    pub enabled: bool,
    pub scope: TrustScope,
    pub accept_bypass_permissions: BypassAcceptance,
}

impl Section for HarnessTrustConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || true),
            scope: b.field("scope", TrustScope::default),
            accept_bypass_permissions: b
                .field("acceptBypassPermissions", BypassAcceptance::default),
        }
    }
}

/// `routing.harnessPlugins`: registering the-loop's Claude Code plugin (the `work-on`
/// command, the link-pr hook, the MCP server) before each Claude spawn. The plugin is
/// shipped in the binary; the reference's `marketplaceRepo` is accepted and not read.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HarnessPluginsConfig {
    pub enabled: bool,
}

impl Section for HarnessPluginsConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { enabled: b.field("enabled", || true) }
    }
}

config_enum! {
    /// The emoji GitHub offers as reactions.
    Reaction (default Eyes) {
        PlusOne = "+1",
        MinusOne = "-1",
        Laugh = "laugh",
        Confused = "confused",
        Heart = "heart",
        Hooray = "hooray",
        Rocket = "rocket",
        Eyes = "eyes",
    }
}

/// A reaction, or `""` for none.
fn read_reaction(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Option<Reaction>> {
    match string(node, path, diags)? {
        "" => Some(None),
        _ => Reaction::read(node, path, diags).map(Some),
    }
}

/// `routing.reactions`: emoji on the triggering comment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReactionsConfig {
    pub enabled: bool,
    /// On dequeue; `None`: no reaction.
    pub started: Option<Reaction>,
    pub completed: Option<Reaction>,
    pub error: Option<Reaction>,
}

impl Section for ReactionsConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || true),
            started: b.field_by("started", || Some(Reaction::Eyes), read_reaction),
            completed: b.field_by("completed", || Some(Reaction::Hooray), read_reaction),
            error: b.field_by("error", || Some(Reaction::Confused), read_reaction),
        }
    }
}

/// `routing.announce`: the `tmux attach` comment on first spawn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnnounceConfig {
    pub enabled: bool,
}

impl Section for AnnounceConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { enabled: b.field("enabled", || true) }
    }
}

/// `routing.ci`: the evidence read when CI fails on a session's pull request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CiConfig {
    pub enabled: bool,
    /// The most log lines a failed job's tail shows.
    pub max_log_lines: u32,
    /// The most bytes a failed job's tail shows.
    pub max_log_bytes: u32,
    /// The most GitHub requests one report may cost (a log's redirect counts).
    pub max_requests: u32,
}

impl Section for CiConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || true),
            max_log_lines: b.field_by("maxLogLines", || 30, integer_at_least(1)),
            max_log_bytes: b.field_by("maxLogBytes", || 2048, integer_at_least(1)),
            max_requests: b.field_by("maxRequests", || 10, integer_at_least(1)),
        }
    }
}

// ---------------------------------------------------------------------------------------
// eventLog, state

/// `eventLog`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventLogConfig {
    pub enabled: bool,
    /// The JSONL file; `None`: `<state.root>/logs/events.jsonl`.
    pub path: Option<PathBuf>,
}

impl Section for EventLogConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || true),
            path: b.field_by("path", || None, optional_path),
        }
    }
}

/// `state`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateConfig {
    /// Root of all generated state; relative to the cwd; `~` is not expanded.
    pub root: PathBuf,
}

impl Section for StateConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { root: b.field("root", || PathBuf::from(".the-loop")) }
    }
}

// ---------------------------------------------------------------------------------------
// integrations

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

// ---------------------------------------------------------------------------------------
// service

/// `service`: the control plane — the HTTP API, its event stream and the dashboard —
/// on a port of its own, in the service process beside the ingresses.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceConfig {
    /// Whether `the-loop start` serves the control plane beside its ingresses.
    pub enabled: bool,
    /// Bind address; anything but loopback needs `exposed` and a token.
    pub host: String,
    pub port: u16,
    /// Opt-in to binding beyond loopback (which then also needs the token).
    pub exposed: bool,
    /// The *name* of the env var holding the bearer token; when the variable is set,
    /// every route but health needs `Authorization: Bearer <token>`.
    pub token_env: String,
    pub cors: CorsConfig,
    pub mcp: McpConfig,
    pub stream: StreamConfig,
}

impl ServiceConfig {
    /// Whether `host` names this machine's loopback interface only.
    pub fn is_loopback(&self) -> bool {
        is_loopback_host(&self.host)
    }

    /// Where a client on this machine reaches the service: `http://host:port` (an IPv6
    /// address in brackets; an unspecified bind address as loopback).
    pub fn local_url(&self) -> String {
        let bare = self.host.trim_start_matches('[').trim_end_matches(']');
        let host = match bare.parse::<std::net::IpAddr>() {
            Ok(ip) if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_owned(),
            Ok(ip) if ip.is_unspecified() => "[::1]".to_owned(),
            Ok(std::net::IpAddr::V6(ip)) => format!("[{ip}]"),
            _ => bare.to_owned(),
        };
        format!("http://{host}:{}", self.port)
    }
}

/// `localhost`, or an IPv4/IPv6 loopback address (`[::1]` with or without brackets).
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl Section for ServiceConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        let service = Self {
            enabled: b.field("enabled", || true),
            host: b.field("host", || "127.0.0.1".to_owned()),
            port: b.field("port", || 4114),
            exposed: b.field("exposed", || false),
            token_env: b.field("tokenEnv", || "THE_LOOP_SERVICE_TOKEN".to_owned()),
            cors: b.section("cors"),
            mcp: b.section("mcp"),
            stream: b.section("stream"),
        };
        if !service.is_loopback() && !service.exposed {
            let path = join(b.path(), "host");
            b.diags().error(
                &path,
                None,
                super::ProblemKind::BadValue,
                format!(
                    "`{}` is beyond loopback: set `service.exposed: true` (and export the token `service.tokenEnv` names) to serve other machines, or bind 127.0.0.1",
                    service.host
                ),
            );
        }
        service
    }
}

/// `service.cors`: which other web origins may call the API from a browser.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CorsConfig {
    /// Exact origins (`scheme://host[:port]`, or `*`); empty: no cross-origin access.
    pub allow_origins: Vec<String>,
    pub allow_methods: Vec<String>,
    pub allow_headers: Vec<String>,
    pub allow_credentials: bool,
    /// Answer Chromium's private-network preflight (a public page reaching loopback).
    pub allow_private_network: bool,
}

impl Section for CorsConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        let cors = Self {
            allow_origins: b.field_by("allowOrigins", Vec::new, read_origins),
            allow_methods: b.field_by(
                "allowMethods",
                || strings(&["GET", "POST", "OPTIONS"]),
                http_tokens("a method such as `GET`"),
            ),
            allow_headers: b.field_by(
                "allowHeaders",
                || strings(&["Accept", "Content-Type", "Authorization", "Last-Event-ID"]),
                http_tokens("a header name such as `Content-Type`"),
            ),
            allow_credentials: b.field("allowCredentials", || false),
            allow_private_network: b.field("allowPrivateNetwork", || true),
        };
        if cors.allow_credentials && cors.allow_origins.iter().any(|o| o == "*") {
            let path = join(b.path(), "allowCredentials");
            b.diags().error(
                &path,
                None,
                super::ProblemKind::BadValue,
                "`true` with `*` in `allowOrigins` would let every web page act with the browser's credentials: list the exact origins".to_owned(),
            );
        }
        cors
    }
}

/// A list of HTTP tokens (method or header names: letters, digits and `!#$%&'*+-.^_`|~`).
fn http_tokens(
    expected: &'static str,
) -> impl FnOnce(&Node, &str, &mut Diagnostics) -> Option<Vec<String>> {
    move |node, path, diags| {
        let items: Vec<String> = Value::read(node, path, diags)?;
        let saphyr::YamlDataOwned::Sequence(nodes) = &node.data else { return Some(items) };
        let is_token = |text: &str| {
            !text.is_empty()
                && text.chars().all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
        };
        let mut tokens = Vec::with_capacity(items.len());
        for (i, (token, item)) in items.into_iter().zip(nodes).enumerate() {
            if is_token(&token) {
                tokens.push(token);
            } else {
                bad_value(
                    item,
                    &format!("{path}[{i}]"),
                    diags,
                    format!("expected {expected}, got {token:?}"),
                );
            }
        }
        Some(tokens)
    }
}

/// `allowOrigins`: each `*` or an origin `http(s)://host[:port]` — no path, no trailing
/// slash (a browser's `Origin` never has one, so such an entry could never match).
fn read_origins(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Vec<String>> {
    let items: Vec<String> = Value::read(node, path, diags)?;
    let saphyr::YamlDataOwned::Sequence(nodes) = &node.data else { return Some(items) };
    let mut origins = Vec::with_capacity(items.len());
    for (i, (origin, item)) in items.into_iter().zip(nodes).enumerate() {
        if origin == "*" || is_origin(&origin) {
            origins.push(origin);
        } else {
            bad_value(
                item,
                &format!("{path}[{i}]"),
                diags,
                format!(
                    "expected an origin such as `https://example.com` or `http://127.0.0.1:8080` (scheme, host, optional port; no path), got {origin:?}"
                ),
            );
        }
    }
    Some(origins)
}

/// `http(s)://host[:port]` and nothing after it (an IPv6 host in brackets).
fn is_origin(text: &str) -> bool {
    let Some(authority) = text.strip_prefix("https://").or_else(|| text.strip_prefix("http://"))
    else {
        return false;
    };
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((ip, rest)) if ip.parse::<std::net::Ipv6Addr>().is_ok() => ("ipv6", rest),
            _ => return false,
        },
        None => authority.split_at(authority.find(':').unwrap_or(authority.len())),
    };
    let port_ok = match port {
        "" => true,
        port => port.strip_prefix(':').and_then(|p| p.parse::<u16>().ok()).is_some_and(|p| p > 0),
    };
    port_ok
        && !host.is_empty()
        && host.chars().all(|c| c.is_ascii_alphanumeric() || "-.".contains(c))
}

/// `service.mcp`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpConfig {
    /// Serve the MCP endpoint at `/mcp`.
    pub enabled: bool,
}

impl Section for McpConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { enabled: b.field("enabled", || true) }
    }
}

/// `service.stream`: `GET /api/v1/stream`, the server-sent event stream.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamConfig {
    pub enabled: bool,
    /// Concurrent subscribers; one more is answered 503 with `Retry-After`.
    pub max_subscribers: u32,
    /// Seconds between keep-alive comments on an idle stream.
    pub keep_alive_seconds: u64,
}

impl Section for StreamConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || true),
            max_subscribers: b.field_by("maxSubscribers", || 8, integer_at_least(1)),
            keep_alive_seconds: b.field_by("keepAliveSeconds", || 15, integer_at_least(1)),
        }
    }
}

default_from_nothing!(
    Config,
    GraphConfig,
    HarnessChoicesConfig,
    ClaudeChoices,
    CursorChoices,
    InstanceConfig,
    WebhooksConfig,
    GhWebhookConfig,
    PollingConfig,
    RoutingConfig,
    ControlConfig,
    ControlKeywords,
    TmuxConfig,
    WorkspaceConfig,
    EventLogConfig,
    StateConfig,
    IntegrationsConfig,
    GithubApi,
    ServiceConfig,
    CorsConfig,
    StreamConfig
);

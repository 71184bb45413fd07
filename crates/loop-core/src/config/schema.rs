//! The typed configuration: every key of `cli-config.yaml`, its type and its default.
//!
//! Each struct's [`Section`] impl is the one place that names its keys and their
//! defaults; `Default` is "read from nothing", so the two can never disagree. Field docs
//! say what a key means; `docs/configuration.md` is the operator's version of this file.
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
    number_at_least, one_of, optional, optional_path, read_section, string, wrong_type,
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

/// Lets a section sit in a list (`polling.sources[]`, `collaborators[]`, …).
macro_rules! section_value {
    ($($ty:ty),+) => {$(
        impl Value for $ty {
            fn read(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Self> {
                Some(read_section(Some(node), path.to_owned(), diags))
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

fn display_opt<T: Display, S: Serializer>(item: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match item {
        Some(item) => s.collect_str(item),
        None => s.serialize_none(),
    }
}

/// An `owner/repo`, or `""` for none.
fn read_optional_repo(node: &Node, path: &str, diags: &mut Diagnostics) -> Option<Option<RepoRef>> {
    match string(node, path, diags)? {
        "" => Some(None),
        _ => RepoRef::read(node, path, diags).map(Some),
    }
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
    pub standing_sessions: StandingSessionsConfig,
    pub channels: ChannelsConfig,
    pub self_diagnosis: SelfDiagnosisConfig,
    pub collaborators: Vec<Collaborator>,
    pub notifications: NotificationsConfig,
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
            standing_sessions: b.section("standingSessions"),
            channels: b.section("channels"),
            self_diagnosis: b.section("selfDiagnosis"),
            collaborators: b.field("collaborators", Vec::new),
            notifications: b.section("notifications"),
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
    pub interaction: InteractionConfig,
    pub control: ControlConfig,
    pub tmux: TmuxConfig,
    pub workspace: WorkspaceConfig,
    pub harness_trust: HarnessTrustConfig,
    pub harness_plugins: HarnessPluginsConfig,
    pub reactions: ReactionsConfig,
    pub announce: AnnounceConfig,
    pub web_terminal: WebTerminalConfig,
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
            interaction: b.section("interaction"),
            control: b.section("control"),
            tmux: b.section("tmux"),
            workspace: b.section("workspace"),
            harness_trust: b.section("harnessTrust"),
            harness_plugins: b.section("harnessPlugins"),
            reactions: b.section("reactions"),
            announce: b.section("announce"),
            web_terminal: b.section("webTerminal"),
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

/// `routing.harnessPlugins` (not implemented yet).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HarnessPluginsConfig {
    pub enabled: bool,
    /// Marketplace source; `None` (unset or `""`, the default): none, so nothing is
    /// registered until the user names one.
    #[serde(serialize_with = "display_opt")]
    pub marketplace_repo: Option<RepoRef>,
}

impl Section for HarnessPluginsConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || true),
            marketplace_repo: b.field_by("marketplaceRepo", || None, read_optional_repo),
        }
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

/// `routing.webTerminal` (not implemented yet).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WebTerminalConfig {
    pub enabled: bool,
    pub host: String,
    pub port: u16,
}

impl Section for WebTerminalConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || false),
            host: b.field("host", || "127.0.0.1".to_owned()),
            port: b.field("port", || 7681),
        }
    }
}

/// `routing.graph` (not implemented yet).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphConfig {
    pub enabled: bool,
    pub repo_hooks: bool,
    /// Where the specs live in every checkout (seed 002, issue-352: default `docs/specs`).
    pub spec_dir: String,
}

impl Section for GraphConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || true),
            repo_hooks: b.field("repoHooks", || true),
            spec_dir: b.field("specDir", || "docs/specs".to_owned()),
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

config_enum! {
    /// How an integration reaches its service.
    Transport (default Auto) {
        /// A token from the environment, else the CLI binary.
        Auto = "auto",
        Api = "api",
        Cli = "cli",
    }
}

/// `integrations`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntegrationsConfig {
    pub github: GithubIntegration,
    pub jira: JiraIntegration,
}

impl Section for IntegrationsConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { github: b.section("github"), jira: b.section("jira") }
    }
}

/// `integrations.github`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GithubIntegration {
    pub cli: CliBinary,
    pub transport: Transport,
    pub api: GithubApi,
}

impl Section for GithubIntegration {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            cli: read_cli(b, "gh"),
            transport: b.field("transport", Transport::default),
            api: b.section("api"),
        }
    }
}

/// `integrations.<x>.cli`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CliBinary {
    pub binary: String,
}

/// `<block>.cli`, its binary defaulting to `default` (`gh`, `jira`).
fn read_cli(b: &mut Block<'_, '_>, default: &str) -> CliBinary {
    let node = b.take("cli");
    let mut block = Block::new(node, join(b.path(), "cli"), b.diags());
    let cli = CliBinary { binary: block.field("binary", || default.to_owned()) };
    block.finish();
    cli
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

/// `integrations.jira` (reserved; not implemented).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JiraIntegration {
    pub transport: Transport,
    pub api: JiraApi,
    pub cli: CliBinary,
}

impl Section for JiraIntegration {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            transport: b.field("transport", || Transport::Api),
            api: b.section("api"),
            cli: read_cli(b, "jira"),
        }
    }
}

/// `integrations.jira.api`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JiraApi {
    pub base_url: Option<String>,
    pub token_env: Option<String>,
}

impl Section for JiraApi {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            base_url: b.field_by("baseUrl", || None, read_base_url),
            token_env: b.field_by("tokenEnv", || None, optional),
        }
    }
}

// ---------------------------------------------------------------------------------------
// service (not implemented yet)

/// `service`: the control-plane HTTP API.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceConfig {
    pub enabled: bool,
    pub host: String,
    pub port: u16,
    /// Opt-in to a non-loopback bind.
    pub exposed: bool,
    pub auto_start: bool,
    pub host_ingresses: bool,
    pub mcp: McpConfig,
    pub stream: StreamConfig,
    pub cors: CorsConfig,
}

impl Section for ServiceConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || true),
            host: b.field("host", || "127.0.0.1".to_owned()),
            port: b.field("port", || 4114),
            exposed: b.field("exposed", || false),
            auto_start: b.field("autoStart", || true),
            host_ingresses: b.field("hostIngresses", || true),
            mcp: b.section("mcp"),
            stream: b.section("stream"),
            cors: b.section("cors"),
        }
    }
}

/// `service.mcp`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpConfig {
    pub enabled: bool,
}

impl Section for McpConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { enabled: b.field("enabled", || true) }
    }
}

/// `service.stream`: server-sent events.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamConfig {
    pub enabled: bool,
    pub max_subscribers: u32,
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

/// `service.cors`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CorsConfig {
    /// Exact-match origins allowed to call the API from a browser; empty (the default):
    /// CORS is off, no origin is allowed.
    pub allow_origins: Vec<String>,
    pub allow_methods: Vec<String>,
    pub allow_headers: Vec<String>,
    pub allow_credentials: bool,
    pub allow_private_network: bool,
}

impl Section for CorsConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            allow_origins: b.field("allowOrigins", Vec::new),
            allow_methods: b.field("allowMethods", || strings(&["GET", "POST", "OPTIONS"])),
            allow_headers: b.field("allowHeaders", || strings(&["Accept", "Content-Type"])),
            allow_credentials: b.field("allowCredentials", || false),
            allow_private_network: b.field("allowPrivateNetwork", || true),
        }
    }
}

// ---------------------------------------------------------------------------------------
// standingSessions, channels, selfDiagnosis (not implemented yet)

/// `standingSessions`: sessions not tied to a work item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StandingSessionsConfig {
    pub enabled: bool,
    pub sessions: Vec<StandingSession>,
}

impl Section for StandingSessionsConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { enabled: b.field("enabled", || false), sessions: b.field("sessions", Vec::new) }
    }
}

/// One `standingSessions.sessions[]` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StandingSession {
    pub name: String,
    pub description: String,
    /// `None`: `routing.defaultHarness`.
    pub harness: Option<Harness>,
    /// `None`: `routing.harnessArgs.<harness>` (an empty list is not the same).
    pub harness_args: Option<Vec<String>>,
    /// `None`: `routing.spawnWorkdir`.
    pub cwd: Option<PathBuf>,
    pub prompt: String,
    pub prompt_file: Option<PathBuf>,
    pub auto_start: bool,
    pub slack: StandingSlack,
}

impl Section for StandingSession {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            name: b.required("name", String::new),
            description: b.field("description", String::new),
            harness: b.field_by("harness", || None, optional),
            harness_args: b.field_by("harnessArgs", || None, optional),
            cwd: b.field_by("cwd", || None, optional_path),
            prompt: b.field("prompt", String::new),
            prompt_file: b.field_by("promptFile", || None, optional_path),
            auto_start: b.field("autoStart", || true),
            slack: b.section("slack"),
        }
    }
}

/// `standingSessions.sessions[].slack`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StandingSlack {
    pub enabled: bool,
    pub channel: String,
}

impl Section for StandingSlack {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { enabled: b.field("enabled", || false), channel: b.field("channel", String::new) }
    }
}

/// `channels`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelsConfig {
    pub slack: SlackChannel,
}

impl Section for ChannelsConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { slack: b.section("slack") }
    }
}

config_enum! {
    /// How much a channel says.
    ChannelVerbosity (default Normal) {
        Quiet = "quiet",
        Normal = "normal",
        Verbose = "verbose",
    }
}

config_enum! {
    /// How a channel reads replies.
    ChannelReadMode (default Poll) {
        Poll = "poll",
        Socket = "socket",
        Off = "off",
    }
}

/// `channels.slack`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SlackChannel {
    pub enabled: bool,
    pub bot_token_env: String,
    pub app_token_env: String,
    pub channel: String,
    pub events: Vec<String>,
    pub verbosity: ChannelVerbosity,
    /// Slack member ids; empty: nobody.
    pub authorized_users: Vec<String>,
    pub read: SlackRead,
}

impl Section for SlackChannel {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || false),
            bot_token_env: b.field("botTokenEnv", || "THE_LOOP_SLACK_BOT_TOKEN".to_owned()),
            app_token_env: b.field("appTokenEnv", || "THE_LOOP_SLACK_APP_TOKEN".to_owned()),
            channel: b.field("channel", String::new),
            events: b.field("events", || strings(&["session.awaiting_input"])),
            verbosity: b.field("verbosity", ChannelVerbosity::default),
            authorized_users: b.field("authorizedUsers", Vec::new),
            read: b.section("read"),
        }
    }
}

/// `channels.slack.read`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SlackRead {
    pub mode: ChannelReadMode,
    pub interval_seconds: u64,
}

impl Section for SlackRead {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            mode: b.field("mode", ChannelReadMode::default),
            interval_seconds: b.field_by("intervalSeconds", || 30, integer_at_least(5)),
        }
    }
}

/// `selfDiagnosis`: opt-in reports about the-loop itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SelfDiagnosisConfig {
    pub enabled: bool,
    /// Where reports are filed; `None` (unset or `""`, the default): nowhere, so nothing
    /// is filed until the user names a repository.
    #[serde(serialize_with = "display_opt")]
    pub repo: Option<RepoRef>,
    pub label: String,
    pub harness: Harness,
    pub model: String,
    pub timeout_seconds: u64,
    pub interval_seconds: u64,
    pub max_issues_per_day: u32,
    pub max_retries: u32,
}

impl Section for SelfDiagnosisConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            enabled: b.field("enabled", || false),
            repo: b.field_by("repo", || None, read_optional_repo),
            label: b.field("label", || "the-loop: self-diagnosed".to_owned()),
            harness: b.field("harness", Harness::default),
            model: b.field("model", String::new),
            timeout_seconds: b.field_by("timeoutSeconds", || 900, integer_at_least(1)),
            interval_seconds: b.field_by("intervalSeconds", || 3600, integer_at_least(1)),
            max_issues_per_day: b.field_by("maxIssuesPerDay", || 3, integer_at_least(0)),
            max_retries: b.field_by("maxRetries", || 3, integer_at_least(1)),
        }
    }
}

// ---------------------------------------------------------------------------------------
// collaborators, notifications (not implemented yet)

config_enum! {
    /// Whether a collaborator is a person or a group.
    CollaboratorKind (default Individual) {
        Individual = "individual",
        Group = "group",
    }
}

config_enum! {
    /// A collaborator's role.
    Role (default Engineer) {
        ProductManager = "product-manager",
        Architect = "architect",
        Designer = "designer",
        Engineer = "engineer",
        Qa = "qa",
        Reviewer = "reviewer",
        Approver = "approver",
    }
}

/// One `collaborators[]` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Collaborator {
    pub handle: String,
    pub kind: CollaboratorKind,
    /// At least one, no repeats.
    pub roles: Vec<Role>,
    pub notifications: CollaboratorNotifications,
}

impl Section for Collaborator {
    fn read(b: &mut Block<'_, '_>) -> Self {
        let handle = b.required("handle", String::new);
        let kind = b.field("kind", CollaboratorKind::default);
        let roles_path = join(b.path(), "roles");
        let roles: Vec<Role> = b.required("roles", Vec::new);
        let repeated = roles.iter().enumerate().any(|(i, r)| roles[..i].contains(r));
        if roles.is_empty() || repeated {
            b.diags().error(
                &roles_path,
                None,
                super::ProblemKind::BadValue,
                "expected at least one role, each listed once".to_owned(),
            );
        }
        Self { handle, kind, roles, notifications: b.section("notifications") }
    }
}

/// `collaborators[].notifications`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollaboratorNotifications {
    pub enabled: bool,
    pub channels: Vec<String>,
}

impl Section for CollaboratorNotifications {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { enabled: b.field("enabled", || true), channels: b.field("channels", Vec::new) }
    }
}

/// `notifications`: which roles hear of which events.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotificationsConfig {
    pub enabled: bool,
    pub events: NotificationEvents,
}

impl Section for NotificationsConfig {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self { enabled: b.field("enabled", || true), events: b.section("events") }
    }
}

/// `notifications.events`: event → roles.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct NotificationEvents {
    pub work_item_spawned: Vec<Role>,
    pub dispatch_failed: Vec<Role>,
    pub session_died: Vec<Role>,
    pub event_dropped_unauthorized: Vec<Role>,
}

impl Section for NotificationEvents {
    fn read(b: &mut Block<'_, '_>) -> Self {
        Self {
            work_item_spawned: b.field("work-item-spawned", Vec::new),
            dispatch_failed: b.field("dispatch-failed", Vec::new),
            session_died: b.field("session-died", Vec::new),
            event_dropped_unauthorized: b.field("event-dropped-unauthorized", Vec::new),
        }
    }
}

section_value!(PollSource, StandingSession, Collaborator);

default_from_nothing!(
    Config,
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
    ServiceConfig
);

//! `routing`: what is done with an event — spawn policy, the authorized users, the
//! control keywords, reactions, announcements, CI reports and the process graph. The
//! harness's and the session's own keys are in `harness` and `session`.

use std::path::PathBuf;

use saphyr::MarkedYamlOwned as Node;
use serde::Serialize;

use super::display_seq;
use super::harness::{
    HarnessArgsConfig, HarnessChoicesConfig, HarnessPluginsConfig, HarnessTrustConfig,
};
use super::session::{TmuxConfig, WorkspaceConfig};
use crate::Login;
use crate::config::read::{
    Block, Diagnostics, Section, Value, config_enum, integer_at_least, number_at_least,
    optional_path, string,
};

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
    /// How long an agent may work with no sign of life before it counts as `stalled`
    /// (docs/agent-states.md).
    pub stall_after_seconds: u64,
    /// How long a usage limit that names no reset time holds deliveries.
    pub limit_retry_minutes: u64,
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
            stall_after_seconds: b.field_by("stallAfterSeconds", || 900, integer_at_least(1)),
            limit_retry_minutes: b.field_by("limitRetryMinutes", || 30, integer_at_least(1)),
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
    pub approve: String,
    pub deny: String,
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
            approve: keyword("approve"),
            deny: keyword("deny"),
        }
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

default_from_nothing!(RoutingConfig, ControlConfig, ControlKeywords, GraphConfig);
